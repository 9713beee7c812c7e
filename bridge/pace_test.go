package bridge_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Edits made while the room's earlier edit is unconfirmed wait, and leave as one update once it
// is confirmed (pace.go): the server takes two messages for four edits, all four are confirmed,
// and the server's notebook is the replica's. With pacing off each edit is its own message.
func TestPacingSendsEditsMadeWhileOneIsUnconfirmedAsOne(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noPacing bool
		first    int // updates at the server while the first edit's echo is held
		all      int // updates at the server in the end
	}{{"paced", false, 1, 2}, {"unpaced", true, 4, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.NoPacing = tc.noPacing })
			conn := srv.LiveConns()[0]
			updates := func() int { return conn.CountReceived(ydoc.MsgSync, ydoc.SyncUpdate) }
			before := updates()
			ctx := testutil.Context(t)
			srv.HoldEchoes()
			var pending []*bridge.Pending
			for i := range 4 {
				id, at := fmt.Sprintf("new-%d", i), 2+i
				p, err := h.room.Propose(ctx, bridge.Proposal{Edit: ydoc.InsertCells{Cells: []ydoc.Cell{{ID: id, Source: id}}, At: &at}})
				if err != nil {
					t.Fatal(err)
				}
				pending = append(pending, p)
				if i == 0 {
					awaitServer(t, srv, "the first edit at the server", func() bool { return srv.CountCell(nbPath, id) == 1 })
				}
			}
			// A read asks the server first: once it is answered, the server has taken every
			// frame the room sent before it.
			if _, err := readCells(ctx, h.room); err != nil {
				t.Fatal(err)
			}
			if got := updates() - before; got != tc.first {
				t.Fatalf("%d updates at the server while the first edit was unconfirmed, want %d", got, tc.first)
			}
			srv.ReleaseEchoes()
			for i, p := range pending {
				if _, err := p.Wait(ctx); err != nil {
					t.Fatalf("edit %d: %v", i, err)
				}
			}
			if got := updates() - before; got != tc.all {
				t.Errorf("%d updates at the server for four edits, want %d", got, tc.all)
			}
			cells, err := readCells(ctx, h.room)
			if err != nil {
				t.Fatal(err)
			}
			nb, err := srv.Notebook(nbPath)
			if err != nil {
				t.Fatal(err)
			}
			if len(nb.Cells) != len(cells) || len(cells) != 6 {
				t.Fatalf("server %d cells, replica %d, want 6", len(nb.Cells), len(cells))
			}
			for i := range cells {
				if nb.Cells[i].ID != cells[i].ID || nb.Cells[i].Source != cells[i].Source {
					t.Errorf("cell %d: server %s %q, replica %s %q", i, nb.Cells[i].ID, nb.Cells[i].Source, cells[i].ID, cells[i].Source)
				}
			}
			for i := range 4 {
				if id := fmt.Sprintf("new-%d", i); cells[2+i].ID != id {
					t.Errorf("cell %d is %s, want %s (edits leave in the order they were made)", 2+i, cells[2+i].ID, id)
				}
			}
		})
	}
}

// An edit held behind one whose confirmation never comes (its echo lost) leaves after
// maxPaceHold (250 ms), not at the loop's next tick or never.
func TestPacingGivesUpWaitingForALostConfirmation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		h := startSynced(t, srv, nil)
		srv.HoldEchoes()
		ctx := testutil.Context(t)
		for i, id := range []string{"first", "second"} {
			at := 2 + i
			if _, err := h.room.Propose(ctx, bridge.Proposal{Edit: ydoc.InsertCells{Cells: []ydoc.Cell{{ID: id, Source: id}}, At: &at}}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if srv.CountCell(nbPath, "first") != 1 || srv.CountCell(nbPath, "second") != 0 {
			t.Fatalf("at once: first %d, second %d at the server, want 1 and 0", srv.CountCell(nbPath, "first"), srv.CountCell(nbPath, "second"))
		}
		time.Sleep(240 * time.Millisecond) // virtual
		synctest.Wait()
		if n := srv.CountCell(nbPath, "second"); n != 0 {
			t.Fatalf("the held edit left after 240 ms")
		}
		time.Sleep(20 * time.Millisecond) // virtual: past maxPaceHold, before the loop's next tick
		synctest.Wait()
		if n := srv.CountCell(nbPath, "second"); n != 1 {
			t.Fatalf("the held edit is not at the server 260 ms after it was made")
		}
		srv.ReleaseEchoes()
	})
}
