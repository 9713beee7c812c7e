// Package testutil holds the helpers the unit tests of several packages share: the bound on
// every wait, a context that carries it, a poll for state that has no event of its own, and
// the goroutine-leak check a package's TestMain runs. Helpers that know a package's types stay
// in that package's tests (bridge/bridgetest has the room timings for tests).
//
// It imports the standard library only, so that any package's tests, internal or external, can
// use it; it is used by tests only. Everything works inside a testing/synctest bubble as well
// (the waits are timers, which run on the bubble's virtual clock).
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// WaitLimit bounds every wait in the unit tests. Things normally happen within milliseconds;
// the limit only decides how long a broken build takes to fail.
const WaitLimit = 10 * time.Second

// Context returns a context bounded by WaitLimit and cancelled when the test ends.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 2 ms until it holds, failing the test after WaitLimit. It is for
// state that has no event of its own to wait for (a counter, a field of an Info); where an
// event exists, wait for the event.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("waiting for %s: still false after %v", what, WaitLimit)
		case <-tick.C:
		}
	}
}

// Poll is Eventually for a condition whose state the failure should show: check reports
// whether it holds and describes what it saw, and the last description is in the failure.
func Poll(t testing.TB, what string, check func() (done bool, seen string)) {
	t.Helper()
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		done, seen := check()
		if done {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("waiting for %s: not within %v; last seen: %s", what, WaitLimit, seen)
		case <-tick.C:
		}
	}
}

// Main runs a package's tests (m.Run) and then fails the run if goroutines of this module are
// still alive once every test has finished: a room, link, manager, run or server some test
// did not stop. A package's TestMain is then just testutil.Main(m). It does not return.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := awaitNoModuleGoroutines(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// module is in the stack of every goroutine that runs this module's code or was started by it
// ("created by github.com/jupyter-collab-mcp/jupyter-collab-mcp/...").
var module = []byte("jupyter-collab-mcp/jupyter-collab-mcp/")

// awaitNoModuleGoroutines waits until no goroutine but the one running TestMain has this
// module in its stack, and describes the survivors if some are still there after limit.
func awaitNoModuleGoroutines(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		leaked := moduleGoroutines()
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutine leak: %d goroutines of this module still run after the tests:\n%s",
				len(leaked), bytes.Join(leaked, []byte("\n\n")))
		}
		time.Sleep(10 * time.Millisecond) // polling the runtime: there is nothing to wait on
	}
}

// moduleGoroutines returns the stacks of the goroutines with this module in their stack, but
// for TestMain's.
func moduleGoroutines() [][]byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out [][]byte
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, module) && !bytes.Contains(g, []byte("TestMain")) {
			out = append(out, g)
		}
	}
	return out
}
