package bridge_test

import (
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
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
		cells, err := readCells(testutil.Context(t), h.room)
		if err != nil {
			t.Fatal(err)
		}
		if got := cells[0].Source == "print('edited')"; got != fresh {
			t.Errorf("fresh reads %v: the read shows %q", fresh, cells[0].Source)
		}
		srv.ReleaseEchoes()
	}
}

// A collaborator's edit that reached the server before the read's step 1 but that the server read
// after it (it answered the step 1 without it) is in the read: a fresh read asks twice (fresh.go).
func TestFreshReadShowsAnEditTheServerReadLate(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.HoldEchoes()
	defer srv.ReleaseEchoes()
	srv.EditAfterNextStepOne(bridgetest.NotebookPath, func(tx *ydoc.Txn) error { return tx.SetSource(0, "print('read late')") })
	cells, err := readCells(testutil.Context(t), h.room)
	if err != nil {
		t.Fatal(err)
	}
	if cells[0].Source != "print('read late')" {
		t.Errorf("the read shows %q, not the edit the server read after the read's first step 1", cells[0].Source)
	}
}

// A fresh read of a room whose connection is down shows what the replica holds, at once.
func TestFreshReadWhileDisconnected(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.Down()
	h.await("the disconnect", kindIs(bridge.EventDisconnected))
	cells, err := readCells(testutil.Context(t), h.room)
	if err != nil || len(cells) != 2 {
		t.Fatalf("read while disconnected: %v, %v", cells, err)
	}
}
