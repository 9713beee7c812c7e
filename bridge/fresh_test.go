package bridge_test

import (
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A collaborator's edit the server holds but has not broadcast to the sidecar yet (its echo held
// back) is in a read made after it: a read asks the server first (fresh.go). Without fresh reads it
// is not — which is what the test checks it can tell.
func TestFreshReadShowsAnEditOnItsWay(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		srv := newServer(t)
		h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.NoFreshReads = !fresh })
		srv.HoldEchoes()
		if err := srv.EditDoc(bridgetest.NotebookPath, func(tx *ydoc.Txn) error { return tx.SetSource(0, "print('edited')") }); err != nil {
			t.Fatal(err)
		}
		cells, err := readCells(ctxT(t), h.room)
		if err != nil {
			t.Fatal(err)
		}
		if got := cells[0].Source == "print('edited')"; got != fresh {
			t.Errorf("fresh reads %v: the read shows %q", fresh, cells[0].Source)
		}
		srv.ReleaseEchoes()
	}
}

// A fresh read of a room whose connection is down shows what the replica holds, at once.
func TestFreshReadWhileDisconnected(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.Down()
	h.await("the disconnect", kindIs(bridge.EventDisconnected))
	cells, err := readCells(ctxT(t), h.room)
	if err != nil || len(cells) != 2 {
		t.Fatalf("read while disconnected: %v, %v", cells, err)
	}
}
