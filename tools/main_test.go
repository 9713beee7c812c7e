package tools_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if rooms, links or managers started by the tests are still running
// once every test has finished (every test closes its manager and client).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := awaitNoModuleGoroutines(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// awaitNoModuleGoroutines waits until no goroutine runs code of this module (other than
// TestMain itself).
func awaitNoModuleGoroutines(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		leaked := moduleGoroutines()
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutine leak: %d goroutines of this module still run:\n%s", len(leaked), bytes.Join(leaked, []byte("\n\n")))
		}
		time.Sleep(10 * time.Millisecond) // polling the runtime: there is nothing to wait on
	}
}

func moduleGoroutines() [][]byte {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out [][]byte
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("jupyter-collab-mcp/jupyter-collab-mcp/")) && !bytes.Contains(g, []byte("TestMain")) {
			out = append(out, g)
		}
	}
	return out
}
