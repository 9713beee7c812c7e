package execution_test

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
)

// TestMain fails the run if goroutines started by the tests (executors, runs, rooms) are still
// alive once every test has finished.
func TestMain(m *testing.M) { testutil.Main(m) }

// newManager returns a manager on srv with fast room timings (adjusted by mod), closed when
// the test ends.
func newManager(t *testing.T, srv *bridgetest.Server, mod func(*bridge.ManagerOptions)) *bridge.Manager {
	t.Helper()
	opts := bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop(), Room: bridgetest.FastRoomOptions(), JoinTimeout: testutil.WaitLimit}
	if mod != nil {
		mod(&opts)
	}
	m, err := bridge.NewManager(opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}
