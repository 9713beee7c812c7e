//go:build integration && race

package integration

// raceEnabled: the race detector makes the sidecar's JSON decoding about 15 times slower (a
// 100 MB notebook: 1.8 s without, 32 s with), so bounds on decoding large files scale with it.
const raceEnabled = true
