//go:build integration

package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
)

// jupyter-server (tornado) leaves Nagle's algorithm on for its websockets, so the second of two
// frames it writes back to back waits for our ACK of the first — which Linux delays by up to
// 40 ms unless the socket acknowledges at once (jupyter/quickack_linux.go). A kernel round trip
// is several frames (status busy, result, reply, status idle): with the stall it took ~48 ms
// at p50 on the reference machine, without it ~11–13 ms. The bound below sits between the two
// and is generous for a loaded machine: a p50 above it means most round trips paid a delayed
// ACK again.
const stallBound = 30 * time.Millisecond

func TestKernelRoundTripHasNoDelayedAckStall(t *testing.T) {
	if shared.Engine.Documents() {
		// Its kernel websocket speaks only the v1 binary protocol, and the sidecar opens none
		// there (docs/engines.md, "Execution"): this kernel channel does not exist on it.
		t.Skip("jupyter-server-documents: the sidecar has no kernel channel of its own there")
	}
	ctx := ctxT(t, 3*time.Minute)
	c, err := jupyter.New(jupyter.Options{URL: shared.URL, Token: shared.Token, Logger: testLogger(t), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName(t, ".ipynb")
	s, err := c.StartSession(ctx, name, name, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSession(ctxT(t, 30*time.Second), s.ID) })
	k, err := c.ConnectKernel(ctx, s.Kernel.ID, "stall-test")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.Ready(ctx); err != nil {
		t.Fatalf("kernel not ready: %v", err)
	}
	once := func() time.Duration {
		start := time.Now()
		e, err := k.Execute(ctx, jupyter.ExecuteRequest{Code: "1 + 1"})
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, done, err := e.Next(ctx)
			if err != nil {
				t.Fatalf("execution: %v", err)
			}
			if done {
				return time.Since(start)
			}
		}
	}
	for i := 0; i < 3; i++ { // warm up
		once()
	}
	const runs = 30
	var times []time.Duration
	for i := 0; i < runs; i++ {
		times = append(times, once())
	}
	slices.Sort(times)
	p50, p90, max := times[runs/2], times[runs*9/10], times[runs-1]
	t.Logf("kernel round trip of 1 + 1 through jupyter-server over %d runs: p50 %v, p90 %v, max %v (bound on p50: %v)",
		runs, p50.Round(10*time.Microsecond), p90.Round(10*time.Microsecond), max.Round(10*time.Microsecond), stallBound)
	if p50 > stallBound {
		t.Errorf("kernel round trip p50 %v > %v: the delayed-ACK stall (~40 ms per round trip) is back on our sockets", p50, stallBound)
	}
}
