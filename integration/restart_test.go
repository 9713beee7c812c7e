//go:build integration

package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// 5. The server is killed mid-session and restarted: the sidecar reconnects and resyncs, the
// notebook has neither lost nor duplicated cells, and an edit made while the server was down is
// applied exactly once.
func TestServerRestart(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const name = "restart.ipynb"
	if err := srv.WriteFile(name, fixture(t, "jupyter_ydoc--nb1.ipynb")); err != nil {
		t.Fatal(err)
	}
	sc := newSidecar(t, srv, nil)
	sub := sc.manager.Subscribe(1024)
	room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	n0 := len(replica(t, ctx, room).Cells)
	if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
		return tx.InsertCells(tx.NumCells(), []ydoc.Cell{{ID: "before-restart", Type: "markdown", Source: "written before the crash"}})
	})); err != nil {
		t.Fatal(err)
	}
	waitDisk(t, srv, name, "the first edit", func(nb ydoc.Notebook) bool { return slices.Contains(ids(nb), "before-restart") })

	srv.Kill()
	awaitEvent(t, ctx, sub, func(e bridge.Event) bool { return e.Kind == bridge.EventDisconnected })

	// An edit while the server is down: queued, then applied once after the restart.
	type result struct {
		change ydoc.Change
		err    error
	}
	done := make(chan result, 1)
	go func() {
		ed, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, replaying bool) error {
			return tx.InsertCells(tx.NumCells(), []ydoc.Cell{{ID: "while-down", Type: "code", Source: "print('queued while the server was down')"}})
		}))
		done <- result{ed.Change, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("an edit reported done while the server was down: %+v", r)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("edit after restart: %v\nserver log:\n%s", r.err, tail(srv.Log(), 3000))
	}
	awaitEvent(t, ctx, sub, func(e bridge.Event) bool { return e.Kind == bridge.EventSynced })

	p := newPeer(t)
	if err := p.Connect(ctx, srv, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	snap, err := p.WaitFor(ctx, `nb.cells.some(c => c.id === "while-down")`, 15000)
	if err != nil {
		t.Fatal(err)
	}
	pids := peerIDs(snap)
	if len(pids) != n0+2 {
		t.Errorf("peer sees %d cells after the restart, want %d: %v", len(pids), n0+2, pids)
	}
	for _, id := range []string{"before-restart", "while-down"} {
		if c := count(pids, id); c != 1 {
			t.Errorf("cell %s appears %d times", id, c)
		}
	}
	if !slices.Equal(ids(replica(t, ctx, room)), pids) {
		t.Errorf("replica %v != peer %v", ids(replica(t, ctx, room)), pids)
	}
	disk := waitDisk(t, srv, name, "the queued edit", func(nb ydoc.Notebook) bool { return slices.Contains(ids(nb), "while-down") })
	if !slices.Equal(ids(disk), pids) {
		t.Errorf("disk %v != peer %v", ids(disk), pids)
	}
	if info := room.Info(); info.Resets < 1 {
		t.Errorf("the replica was not rebuilt after the server restart: %+v", info)
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
