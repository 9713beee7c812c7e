package bridge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Edits run again after their caller returned (issue 15 item 5): the outcome a caller holds is
// its own, and a replay's outcome is a fresh value the room hands to whoever holds the Pending.
// Run with -race: before edits were values, the replay wrote into the finished call's variables.

// changeFileOutside makes the server come back from a file that is not its last save, so the
// sidecar re-runs its edits instead of merging the lost replica back.
func changeFileOutside(srv *bridgetest.Server) {
	nb := bridgetest.DefaultNotebook()
	nb.Cells[1].Source = "# Title, edited in vim"
	srv.WriteFile(bridgetest.File{Path: nbPath, Type: "notebook", Notebook: nb})
}

// A confirmed durable edit is re-run after the server lost it, while its caller keeps reading
// the outcome it got.
func TestReplayAfterCallerReturnedLeavesItsOutcome(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	ctx := ctxT(t)
	ed, err := h.room.Apply(ctx, ydoc.InsertCells{Cells: []ydoc.Cell{{ID: "n", Source: "new"}}, Before: "cell-b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ed.Outcome.Cells) != 1 || ed.Outcome.Cells[0].Index != 1 || ed.Outcome.Replayed {
		t.Fatalf("outcome %+v", ed.Outcome)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	reads := 0
	go func() { // the caller, long after its call returned, still reading what it got
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if ed.Outcome.Cells[0].Index != 1 || ed.Outcome.Count != 3 {
				t.Errorf("the caller's outcome changed: %+v", ed.Outcome)
				return
			}
			reads++
			time.Sleep(100 * time.Microsecond)
		}
	}()
	srv.Down()
	changeFileOutside(srv)
	srv.Restart(bridgetest.RestartOptions{})
	srv.Up()
	h.await("reset", kindIs(bridge.EventReset))
	awaitServer(t, srv, "the durable insert run again", func() bool { return srv.CountCell(nbPath, "n") == 1 })
	close(stop)
	wg.Wait()
	if reads == 0 {
		t.Fatal("the reader never ran")
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "n", "cell-b")
}

// An edit its caller stopped waiting for (unconfirmed) is brought back after the server lost it
// (merged under a file changed outside); the Pending, waited for again as a repeated request
// does, reports its outcome.
func TestPendingReportsReplayedOutcome(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.HoldEchoes() // the server takes the edit but never echoes it: unconfirmed
	p, err := h.room.Propose(ctxT(t), bridge.Proposal{Edit: ydoc.InsertCells{Cells: []ydoc.Cell{{ID: "n", Source: "new"}}, After: "cell-b"}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = p.Wait(short)
	cancel()
	var unconfirmed *bridge.UnconfirmedError
	if !errors.As(err, &unconfirmed) {
		t.Fatalf("first wait: %v, want unconfirmed", err)
	}
	awaitServer(t, srv, "the edit at the server", func() bool { return srv.CountCell(nbPath, "n") == 1 })
	srv.Down()
	changeFileOutside(srv)
	srv.Restart(bridgetest.RestartOptions{})
	srv.ReleaseEchoes()
	srv.Up()
	ed, err := p.Wait(ctxT(t))
	if err != nil {
		t.Fatalf("second wait: %v", err)
	}
	if len(ed.Outcome.Cells) != 1 || ed.Outcome.Cells[0].ID != "n" || ed.Outcome.Cells[0].Index != 2 {
		t.Errorf("outcome %+v, want n after cell-b", ed.Outcome)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "n")
	if got := serverSource(t, srv, nbPath, "cell-b"); got != "# Title, edited in vim" {
		t.Errorf("cell-b %q: the file's content must win", got)
	}
}

// An edit proposed while the room is away waits in the room; its version guard sees what the
// reconnection brought, and a caller that gives up first withdraws it.
func TestProposalWaitsForTheSync(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	ctx := ctxT(t)
	var v0 bridge.Version
	if err := h.room.Read(ctx, func(_ *ydoc.Doc, hist bridge.History) error { v0 = hist.Version(); return nil }); err != nil {
		t.Fatal(err)
	}
	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	typeInto(t, srv, nbPath, "cell-b", " (typed while the sidecar was away)")
	src := "mine"
	p, err := h.room.Propose(ctx, bridge.Proposal{Since: v0, Edit: ydoc.UpdateCells{Updates: []ydoc.CellUpdate{{CellID: "cell-b", Source: &src}}}})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := h.room.Propose(ctx, bridge.Proposal{Edit: ydoc.InsertCells{Cells: []ydoc.Cell{{ID: "never"}}}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = gone.Wait(short)
	cancel()
	var withdrawn *bridge.WithdrawnError
	if !errors.As(err, &withdrawn) {
		t.Fatalf("giving up while the room is away: %v, want withdrawn", err)
	}
	srv.Up()
	_, err = p.Wait(ctx)
	var conflict *ydoc.ConflictError
	if !errors.As(err, &conflict) || len(conflict.Conflicts) != 1 || conflict.Conflicts[0].CellID != "cell-b" {
		t.Fatalf("edit against a version older than the typing: %v, want a conflict on cell-b", err)
	}
	if got := serverSource(t, srv, nbPath, "cell-b"); got != "# Title (typed while the sidecar was away)" {
		t.Errorf("cell-b %q", got)
	}
	if srv.CountCell(nbPath, "never") != 0 {
		t.Error("the withdrawn edit was applied")
	}
}
