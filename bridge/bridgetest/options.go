package bridgetest

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// FastRoomOptions are room timings small enough for tests: reconnects after 5–50 ms, a tick
// every 5 ms, a periodic resync every 50 ms, and no logs. Path, Kind and Jupyter are left for
// the test (a manager sets them itself).
func FastRoomOptions() bridge.RoomOptions {
	return bridge.RoomOptions{
		Logger:         zerolog.Nop(),
		MinBackoff:     5 * time.Millisecond,
		MaxBackoff:     50 * time.Millisecond,
		TickInterval:   5 * time.Millisecond,
		ResyncInterval: 50 * time.Millisecond,
	}
}
