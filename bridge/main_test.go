package bridge_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if goroutines started by the tests (rooms, links, managers) are still
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
