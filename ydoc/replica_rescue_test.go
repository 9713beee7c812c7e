package ydoc

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// restartServer simulates jupyter-server dying and coming back with the room rebuilt from its
// file: every connection drops, the new server holds file, and the clients given reconnect to
// it after resetting their sessions (the agent with ResetServerLost).
func restartServer(t *testing.T, file Notebook, agent *fakeConn, others ...*fakeConn) *fakeServer {
	t.Helper()
	srv2 := newFakeServer(t, &file)
	for _, c := range append([]*fakeConn{agent}, others...) {
		c.disconnect()
		c.srv = srv2
		srv2.conns = append(srv2.conns, c)
	}
	if err := agent.replica.ResetServerLost(freshClientID()); err != nil {
		t.Fatal(err)
	}
	return srv2
}

func cellSource(t *testing.T, d *Doc, id string) string {
	t.Helper()
	for _, c := range readNotebook(t, d).Cells {
		if c.ID == id {
			return c.Source
		}
	}
	return "<no cell " + id + ">"
}

func countCells(t *testing.T, d *Doc, id string) int {
	n := 0
	for _, c := range readNotebook(t, d).Cells {
		if c.ID == id {
			n++
		}
	}
	return n
}

// However many confirmed edits wait for a save, none is let go: the session asks for a save at
// every unsavedSaveAt of them, and after a restart every one runs again.
func TestReplicaUnsavedEditsNotCapped(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("agent")
	a.connect()
	srv.flush()
	const n = 2*unsavedSaveAt + 10
	calls := map[uint64]int{}
	for i := 1; i <= n; i++ {
		id := uint64(i)
		cellID := fmt.Sprintf("agent-%d", i)
		out := a.replica.proposeDurable(id, func(tx *Txn, replaying bool) error {
			calls[id]++
			if replaying && tx.CellIndex(cellID) >= 0 {
				return nil
			}
			return tx.InsertCells(tx.NumCells(), []Cell{{ID: cellID, Source: cellID}})
		})
		a.record(out)
		srv.flush() // the echo confirms it
	}
	asks := a.saveNow
	if a.replica.Unsaved() != n {
		t.Fatalf("%d confirmed edits kept for a save, want %d", a.replica.Unsaved(), n)
	}
	if asks != 2 {
		t.Errorf("asked for a save %d times, want 2 (at %d and %d)", asks, unsavedSaveAt, 2*unsavedSaveAt)
	}
	srv2 := restartServer(t, *sessionNotebook(), a)
	a.replica.NoRescue("test: no file check")
	a.connect()
	srv2.flush()
	for i := 1; i <= n; i++ {
		if got := countCells(t, srv2.doc, fmt.Sprintf("agent-%d", i)); got != 1 {
			t.Fatalf("cell agent-%d present %d times after the restart", i, got)
		}
	}
}

// The rescue: the server dies with unsaved work of an agent (confirmed and in flight) and of a
// human; it comes back with the file, where a human who reloaded already typed. The agent's
// session brings the lost replica back as one merged edit: nothing lost, nothing doubled, the
// newcomer's typing kept, the agent's edit functions not run again, its in-flight edit confirmed
// with the rescue.
func TestReplicaRescueBringsBackLostReplica(t *testing.T) {
	file := *sessionNotebook()
	srv := newFakeServer(t, &file)
	a, h := srv.newClient("agent"), srv.newClient("human")
	a.connect()
	h.connect()
	srv.flush()
	calls := map[uint64]int{}
	insert := func(id uint64, cellID string) EditFunc {
		return func(tx *Txn, replaying bool) error {
			calls[id]++
			if replaying && tx.CellIndex(cellID) >= 0 {
				return nil
			}
			return tx.InsertCells(1, []Cell{{ID: cellID, Source: "agent " + cellID}})
		}
	}
	a.record(a.replica.proposeDurable(1, insert(1, "ag1")))
	h.propose(100, func(tx *Txn, _ bool) error { return tx.SetSource(tx.CellIndex("c2"), "x = 1 # typed before") })
	a.propose(2, func(tx *Txn, _ bool) error { return tx.MoveCells(tx.CellIndex("c3"), 1, 0) }) // plain edit, by index
	srv.flush()
	for _, id := range []uint64{1, 2} {
		if r, ok := a.result(id); !ok || r.Err != nil {
			t.Fatalf("edit %d not confirmed before the crash: %+v", id, a.done)
		}
	}
	// One more edit reaches the replica but not the server.
	a.record(a.replica.proposeDurable(3, insert(3, "ag3")))
	a.toServer = nil
	lostView := readNotebook(t, a.replica.Doc())

	srv2 := restartServer(t, file, a, h)
	// The human reloads first (a fresh doc) and types in c0 before the agent is back.
	h.replica, _ = NewReplica(KindNotebook, freshClientID(), zerolog.Nop())
	h.connect()
	srv2.flush()
	h.propose(101, func(tx *Txn, _ bool) error {
		i := tx.CellIndex("c0")
		c, _ := tx.Cell(i)
		return tx.SetSource(i, "# after restart\n"+c.Source)
	})
	srv2.flush()

	a.replica.RescueFrom(Snapshot{Kind: KindNotebook, Notebook: file})
	a.connect()
	srv2.flush()
	report := a.rescue
	srv2.requireConverged()
	if report == nil || !report.Restored || !report.Lossless() {
		t.Fatalf("rescue report %+v", report)
	}
	got := readNotebook(t, srv2.doc)
	// Everything the lost replica held, plus the newcomer's line.
	for _, c := range lostView.Cells {
		want := c.Source
		if c.ID == "c0" {
			want = "# after restart\n" + c.Source
		}
		if n := countCells(t, srv2.doc, c.ID); n != 1 {
			t.Errorf("cell %s present %d times", c.ID, n)
		}
		if src := cellSource(t, srv2.doc, c.ID); src != want {
			t.Errorf("cell %s: %q, want %q", c.ID, src, want)
		}
	}
	if !slices.Equal(idsOf(got), idsOf(lostView)) {
		t.Errorf("order %v, want the lost replica's %v", idsOf(got), idsOf(lostView))
	}
	if calls[1] != 1 || calls[3] != 1 {
		t.Errorf("edit functions re-run: %v (the rescue brings their effects back)", calls)
	}
	if r, ok := a.result(3); !ok || r.Err != nil {
		t.Errorf("the in-flight edit was not confirmed with the rescue: %+v", a.done)
	}
	if a.replica.Pending() != 0 {
		t.Errorf("%d edits pending", a.replica.Pending())
	}
	// The edits the rescue brought back are unsaved again: a second loss re-runs them.
	if a.replica.Unsaved() != 2 {
		t.Errorf("unsaved after the rescue: %d, want the two durable edits", a.replica.Unsaved())
	}
}

// Without a rescue (the file changed outside Jupyter while the server was down) the file wins:
// the agents' durable edits are re-run on it, a re-run that cannot apply is reported, and the
// report lists what the lost replica held that the room does not.
func TestReplicaNoRescueReplaysAndReports(t *testing.T) {
	file := *sessionNotebook()
	srv := newFakeServer(t, &file)
	a, h := srv.newClient("agent"), srv.newClient("human")
	a.connect()
	h.connect()
	srv.flush()
	a.record(a.replica.proposeDurable(1, func(tx *Txn, replaying bool) error {
		if replaying && tx.CellIndex("ag1") >= 0 {
			return nil
		}
		return tx.InsertCells(0, []Cell{{ID: "ag1", Source: "agent"}})
	}))
	a.record(a.replica.proposeDurable(2, func(tx *Txn, _ bool) error {
		i := tx.CellIndex("c3")
		if i < 0 {
			return fmt.Errorf("no cell with id c3: %w", ErrCellNotFound)
		}
		return tx.SetSource(i, "agent rewrote c3")
	}))
	h.propose(100, func(tx *Txn, _ bool) error { return tx.SetSource(tx.CellIndex("c2"), "human typed") })
	srv.flush()

	// Someone replaced the file while the server was down: c3 is gone.
	changed := *sessionNotebook()
	changed.Cells = changed.Cells[:3]
	srv2 := restartServer(t, changed, a)
	a.replica.NoRescue("the file changed on disk since the server last saved it")
	a.connect()
	srv2.flush()
	report := a.rescue
	if countCells(t, srv2.doc, "ag1") != 1 {
		t.Error("the agent's insert was not re-run on the changed file")
	}
	if cellSource(t, srv2.doc, "c2") != "x = 1" {
		t.Errorf("c2 %q: the file's content must win", cellSource(t, srv2.doc, "c2"))
	}
	if report == nil || report.Restored || report.Replayed != 2 || report.Failed != 1 {
		t.Fatalf("report %+v", report)
	}
	text := strings.Join(report.NotRestored, "\n")
	for _, want := range []string{"edit 2 could not be re-applied", "cell c2: source differs", "cell c3"} {
		if !strings.Contains(text, want) {
			t.Errorf("report does not say %q:\n%s", want, text)
		}
	}
	if !strings.Contains(report.Summary(), "changed on disk") {
		t.Errorf("summary %q does not say why", report.Summary())
	}
	var failed bool
	for _, d := range a.done {
		if d.ID == 2 && d.Err != nil {
			failed = true
		}
	}
	if !failed {
		t.Error("the failed re-run was not reported as the edit's result")
	}
}

// A second loss while the rescue edit is still in flight: the rescue is not re-run (its merge
// belonged to a replica now gone); the replica it produced is the one brought back next time.
func TestReplicaRescueInterruptedByAnotherLoss(t *testing.T) {
	file := *sessionNotebook()
	srv := newFakeServer(t, &file)
	a := srv.newClient("agent")
	a.connect()
	srv.flush()
	a.record(a.replica.proposeDurable(1, func(tx *Txn, replaying bool) error {
		if replaying && tx.CellIndex("ag1") >= 0 {
			return nil
		}
		return tx.InsertCells(0, []Cell{{ID: "ag1", Source: "agent"}})
	}))
	srv.flush()
	srv2 := restartServer(t, file, a)
	a.replica.RescueFrom(Snapshot{Kind: KindNotebook, Notebook: file})
	a.connect()
	// deliver only the server's step 1 and step 2 to the agent: the rescue is applied, never sent
	a.deliverToServer()
	frames := a.toClient
	a.toClient = nil
	for _, b := range frames {
		a.receive(b)
	}
	if countCells(t, a.replica.Doc(), "ag1") != 1 {
		t.Fatal("the rescue did not bring the cell back in the replica")
	}
	srv3 := restartServer(t, file, a)
	a.replica.RescueFrom(Snapshot{Kind: KindNotebook, Notebook: file})
	a.connect()
	srv3.flush()
	_ = srv2
	if n := countCells(t, srv3.doc, "ag1"); n != 1 {
		t.Errorf("after two losses the agent's cell is there %d times", n)
	}
	if r, ok := a.result(1); !ok || r.Err != nil {
		t.Errorf("edit 1: %+v", a.done)
	}
	if a.replica.Pending() != 0 {
		t.Errorf("%d pending", a.replica.Pending())
	}
}

// Text documents: the same rescue, by character.
func TestReplicaRescueText(t *testing.T) {
	mk := func(text string) *Doc {
		d := newTestDoc(t, KindText)
		transact(t, d, func(tx *Txn) error { return tx.SetText(text) })
		return d
	}
	srv := &fakeServer{t: t, doc: mk("line one\nline two\n")}
	replica, err := NewReplica(KindText, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeConn{name: "agent", replica: replica, srv: srv}
	srv.conns = []*fakeConn{a}
	a.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, _ bool) error { return tx.InsertText(tx.TextLength(), "agent line\n") })
	srv.flush()
	srv2 := &fakeServer{t: t, doc: mk("line one\nline two\n")}
	a.disconnect()
	a.srv, srv2.conns = srv2, []*fakeConn{a}
	if err := a.replica.ResetServerLost(freshClientID()); err != nil {
		t.Fatal(err)
	}
	// someone typed on the rebuilt text meanwhile
	transact(t, srv2.doc, func(tx *Txn) error { return tx.InsertText(0, "# header\n") })
	a.replica.RescueFrom(Snapshot{Kind: KindText, Text: "line one\nline two\n"})
	a.connect()
	srv2.flush()
	got, _ := srv2.doc.Text()
	if want := "# header\nline one\nline two\nagent line\n"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
}

// With lagging save markers (jupyter-server-documents' periodic saves), an edit is let go only at
// the second marker after its confirmation: the first may come from a save that started before it.
func TestReplicaLaggingSaveMarkers(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a, b := srv.newClient("agent"), srv.newClient("server")
	a.connect()
	b.connect()
	srv.flush()
	a.replica.LaggingSaveMarkers(true)
	a.record(a.replica.proposeDurable(1, func(tx *Txn, replaying bool) error {
		if replaying && tx.CellIndex("ag") >= 0 {
			return nil
		}
		return tx.InsertCells(0, []Cell{{ID: "ag", Source: "x"}})
	}))
	srv.flush()
	mark := func() {
		b.propose(100, func(tx *Txn, _ bool) error { return tx.SetState("dirty", true) })
		srv.flush()
		b.propose(101, func(tx *Txn, _ bool) error { return tx.SetState("dirty", false) })
		srv.flush()
	}
	mark()
	if a.replica.Unsaved() != 1 {
		t.Fatalf("let go at the first marker after it: %d unsaved", a.replica.Unsaved())
	}
	mark()
	if a.replica.Unsaved() != 0 {
		t.Fatalf("kept after the second marker: %d unsaved", a.replica.Unsaved())
	}
}
