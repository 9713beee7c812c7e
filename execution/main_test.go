package execution_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
)

// TestMain fails the run if goroutines started by the tests (engines, runs, rooms) are still
// alive once every test has finished.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := awaitGoroutines(before, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// awaitGoroutines waits until at most n goroutines run, and describes the survivors if they
// do not stop within limit.
func awaitGoroutines(n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if runtime.NumGoroutine() <= n {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling the runtime: there is nothing to wait on
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked [][]byte
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("jupyter-collab-mcp")) && !bytes.Contains(g, []byte("TestMain")) {
			leaked = append(leaked, g)
		}
	}
	return fmt.Errorf("goroutine leak: %d goroutines running after the tests, %d before; survivors from this module:\n%s",
		runtime.NumGoroutine(), n, bytes.Join(leaked, []byte("\n\n")))
}

// waitLimit bounds every wait in these tests. Things normally happen within milliseconds; the
// limit only decides how long a broken build takes to fail.
const waitLimit = 5 * time.Second

// fastOptions are room timings small enough for tests.
func fastOptions() bridge.RoomOptions {
	return bridge.RoomOptions{
		Logger:         zerolog.Nop(),
		MinBackoff:     5 * time.Millisecond,
		MaxBackoff:     50 * time.Millisecond,
		TickInterval:   5 * time.Millisecond,
		ResyncInterval: 50 * time.Millisecond,
	}
}

// newManager returns a manager on srv with fast room timings (adjusted by mod), closed when
// the test ends.
func newManager(t *testing.T, srv *bridgetest.Server, mod func(*bridge.ManagerOptions)) *bridge.Manager {
	t.Helper()
	opts := bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop(), Room: fastOptions(), JoinTimeout: waitLimit}
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

// ctxT returns a context bounded by waitLimit and cancelled when the test ends.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still false after %v", what, waitLimit)
		}
		<-tick.C
	}
}
