package bridge_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/journalstore"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/journal"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The write-ahead log in the rooms, against the fake server and the journal (in memory or in a
// temporary directory).

// newJournal opens a journal (dir "": in memory), closed when the test ends. The returned stop
// closes it earlier (a sidecar that stops).
func newJournal(t *testing.T, dir string) (bridge.Journal, func()) {
	t.Helper()
	s, err := journal.Open(journal.Options{Dir: dir, SyncInterval: 5 * time.Millisecond, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = s.Close() }) }
	t.Cleanup(stop)
	return journalstore.New(s), stop
}

func withJournal(j bridge.Journal, mod func(*bridge.RoomOptions)) func(*bridge.RoomOptions) {
	return func(o *bridge.RoomOptions) {
		o.Journal = j
		if mod != nil {
			mod(o)
		}
	}
}

// replayLog rebuilds what a log's lineage holds.
func replayLog(t *testing.T, h bridge.LogHistory) ydoc.Notebook {
	t.Helper()
	d, err := ydoc.NewDoc(ydoc.KindNotebook, 7, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range append([][]byte{h.Base}, h.Updates...) {
		if u == nil {
			continue
		}
		if _, _, err := d.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	nb, err := d.Notebook()
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

// Every update the replica took — the server's state, a human's typing, the agent's own edits —
// is in the log, in order: replayed, it is the document the server holds. A room closed with
// those changes unsaved keeps its log, with the lineage adoptable by the next room.
func TestJournalHoldsEveryUpdate(t *testing.T) {
	srv := newServer(t)
	j, _ := newJournal(t, "")
	h := startSynced(t, srv, withJournal(j, nil))
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, durableInsert("agent1")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " typed")
	if _, err := h.room.Apply(ctx, insertCell("agent2")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the typing in the replica", func() bool {
		var src string
		_ = h.room.View(ctx, func(d *ydoc.Doc) error {
			c, _ := d.Cells([]int{1})
			src = c[0].Source
			return nil
		})
		return src == "# Title typed"
	})
	// The log appends in groups (a group commit): the updates are pending before they are records.
	testutil.Eventually(t, "the updates appended to the log", func() bool {
		info := h.room.LogInfo()
		return info != nil && info.Records >= 5
	})
	if info := h.room.LogInfo(); info == nil || !info.AtRisk || info.Durable {
		t.Fatalf("log info %+v", info)
	}
	if !h.room.AtRisk() {
		t.Error("the room does not say its work is at risk")
	}
	h.room.Close()
	dl, err := j.Open(ctx, nbPath, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(false)
	lin := dl.Adoptable()
	if lin == 0 {
		t.Fatal("the unsaved work is not adoptable after the room closed")
	}
	hist, err := dl.History(ctx, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := srv.Notebook(nbPath)
	if got := replayLog(t, hist); !sameCells(got, want) {
		t.Errorf("the log replays to %v, the server holds %v", cellSummary(got), cellSummary(want))
	}
}

func sameCells(a, b ydoc.Notebook) bool {
	if len(a.Cells) != len(b.Cells) {
		return false
	}
	for i := range a.Cells {
		if a.Cells[i].ID != b.Cells[i].ID || a.Cells[i].Source != b.Cells[i].Source {
			return false
		}
	}
	return true
}

func cellSummary(nb ydoc.Notebook) []string {
	var out []string
	for _, c := range nb.Cells {
		out = append(out, c.ID+"="+c.Source)
	}
	return out
}

// A room whose changes the server saved removes its log when it closes.
func TestJournalRemovedWhenSavedAndClosed(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	j, _ := newJournal(t, dir)
	h := startSynced(t, srv, withJournal(j, guardOn(5*time.Millisecond, nil)))
	if _, err := h.room.Apply(testutil.Context(t), insertCell("x")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the change saved", func() bool { return h.room.Info().UnsavedSince.IsZero() && srv.Saves(nbPath) > 0 && !h.room.AtRisk() })
	h.room.Close()
	docs, err := j.AtRisk()
	if err != nil || len(docs) != 0 {
		t.Fatalf("at risk after a saved close: %+v %v", docs, err)
	}
	dl, err := j.Open(testutil.Context(t), nbPath, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(false)
	if info := dl.Info(); info.Lineage != 0 {
		t.Errorf("the log was kept: %+v", info)
	}
}

// The sidecar stops (or dies) with work jupyter-server has not saved, and the server restarts
// too (a pod): when the sidecar starts again, the manager opens the document the journal holds
// work for, and the rescue brings back the agent's edit and the human's typing, once.
func TestJournalRescuesAfterSidecarRestart(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	j, stopJournal := newJournal(t, dir)
	h := startSynced(t, srv, withJournal(j, guardOn(5*time.Millisecond, nil)))
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, durableInsert("saved")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a save", func() bool { return srv.Saves(nbPath) >= 1 && h.room.Info().UnsavedSince.IsZero() })
	srv.SetSaveStatus("failed") // nothing more reaches the file
	if _, err := h.room.Apply(ctx, durableInsert("unsaved")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " typed")
	awaitTypedWithInsert(t, h.room)
	h.room.Close()
	stopJournal()
	srv.Restart(bridgetest.RestartOptions{}) // rebuilt from the file: "saved" only
	srv.SetSaveStatus("success")

	j2, _ := newJournal(t, dir)
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.Journal = j2 })
	sub := m.Subscribe(256)
	runManager(t, m)
	e := awaitEvent(t, sub, "the rescue notice", kindIs(bridge.EventNotice))
	if e.Notice.Kind != "rescued" {
		t.Fatalf("notice %+v (%v)", e.Notice, e.Notice.Details)
	}
	awaitServer(t, srv, "everything back", func() bool {
		return srv.CountCell(nbPath, "unsaved") == 1 && serverSource(t, srv, nbPath, "cell-b") == "# Title typed"
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "saved", "unsaved")
}

// The server never saved while the sidecar held the room (its log holds no save marker), the
// sidecar and the server die, and the file is changed outside Jupyter meanwhile: after both
// restart, the file wins but is merged three-way against the file as the sidecar first joined
// it (logged with the lineage), so the outside change, the agent's unsaved cell and a human's
// unsaved typing all stay.
func TestJournalOutsideChangeAfterSidecarRestartMerges(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	j, stopJournal := newJournal(t, dir)
	h := startSynced(t, srv, withJournal(j, nil)) // no save requests: the log holds no marker
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, durableInsert("unsaved")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " typed")
	testutil.Eventually(t, "the typing in the replica", func() bool {
		var ok bool
		_ = h.room.View(ctx, func(d *ydoc.Doc) error {
			nb, _ := d.Notebook()
			ok = len(nb.Cells) == 3 && nb.Cells[1].Source == "# Title typed"
			return nil
		})
		return ok
	})
	h.room.Close()
	stopJournal()
	f, _ := srv.File(nbPath)
	f.Notebook.Cells[0].Source = "changed outside"
	srv.WriteFile(f)
	srv.Restart(bridgetest.RestartOptions{})

	j2, _ := newJournal(t, dir)
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.Journal = j2 })
	sub := m.Subscribe(256)
	runManager(t, m)
	e := awaitEvent(t, sub, "the rescue notice", kindIs(bridge.EventNotice))
	if e.Notice.Kind != "file_wins" || e.Notice.Rescue == nil || !e.Notice.Rescue.Restored {
		nb, _ := srv.Notebook(nbPath)
		ff, _ := srv.File(nbPath)
		t.Fatalf("notice %+v (%v) %+v\nroom %+v\nfile %+v", e.Notice, e.Notice.Details, e.Notice.Rescue, nb.Cells, ff.Notebook.Cells)
	}
	awaitServer(t, srv, "the outside change and the unsaved work", func() bool {
		return srv.CountCell(nbPath, "unsaved") == 1 && serverSource(t, srv, nbPath, "cell-b") == "# Title typed" &&
			serverSource(t, srv, nbPath, "cell-a") == "changed outside"
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "unsaved")
}

// A room holding work the server has not saved is not closed as idle; once saved, it is.
func TestIdleRoomWithWorkAtRiskStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		var mu sync.Mutex
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}
		j, _ := newJournal(t, "")
		m := newManager(t, srv, func(o *bridge.ManagerOptions) {
			o.IdleTimeout, o.AtRiskIdle, o.Now, o.Room.Now, o.Journal = 40*time.Millisecond, 2*time.Hour, clock, nil, j
		})
		room := openRoom(t, m, nbPath, ydoc.KindNotebook)
		if _, err := room.Apply(testutil.Context(t), durableInsert("unsaved")); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the room at risk", room.AtRisk)
		runManager(t, m)
		mu.Lock()
		now = now.Add(time.Hour)
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // virtual: exactly ten idle checks
		synctest.Wait()
		select {
		case <-room.Done():
			t.Fatal("a room with unsaved work was closed as idle")
		default:
		}
		if _, err := room.Save(testutil.Context(t)); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the room no longer at risk", func() bool { return !room.AtRisk() })
		mu.Lock()
		now = now.Add(time.Hour) // the save used the room
		mu.Unlock()
		select {
		case <-room.Done():
		case <-time.After(testutil.WaitLimit):
			t.Fatalf("the saved room was not closed as idle within %v", testutil.WaitLimit)
		}
	})
}

// A server that never saves (autosave off, the sidecar's save requests off) leaves a room at
// risk for good: it stays while idle for less than AtRiskIdle, then it is closed with its journal
// kept (the journal lists it at risk), and opening the document again brings nothing twice.
func TestIdleRoomNeverSavedClosedAfterBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		var mu sync.Mutex
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}
		advance := func(d time.Duration) {
			mu.Lock()
			now = now.Add(d)
			mu.Unlock()
		}
		j, _ := newJournal(t, "")
		m := newManager(t, srv, func(o *bridge.ManagerOptions) {
			o.IdleTimeout, o.AtRiskIdle, o.Now, o.Room.Now, o.Journal = 40*time.Millisecond, time.Hour, clock, nil, j
		})
		room := openRoom(t, m, nbPath, ydoc.KindNotebook)
		if _, err := room.Apply(testutil.Context(t), durableInsert("unsaved")); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the room at risk with unsaved changes only", room.UnsavedOnly)
		runManager(t, m)
		advance(59 * time.Minute)
		time.Sleep(100 * time.Millisecond) // virtual: exactly ten idle checks
		synctest.Wait()
		select {
		case <-room.Done():
			t.Fatal("closed before AtRiskIdle")
		default:
		}
		advance(2 * time.Minute)
		select {
		case <-room.Done():
		case <-time.After(testutil.WaitLimit):
			t.Fatalf("a room idle past AtRiskIdle was not closed within %v", testutil.WaitLimit)
		}
		testutil.Eventually(t, "the journal keeps the document at risk", func() bool {
			docs, err := j.AtRisk()
			return err == nil && len(docs) == 1 && docs[0].Path == nbPath
		})
		again := openRoom(t, m, nbPath, ydoc.KindNotebook)
		if n := slices.Index(roomCellIDs(t, again), "unsaved"); n < 0 || slices.Contains(roomCellIDs(t, again)[n+1:], "unsaved") {
			t.Fatalf("the unsaved cell is not there once after reopening: %v", roomCellIDs(t, again))
		}
	})
}

// The server loses the room, and the file is gone when it comes back: the room fails for good,
// and the lost replica stays in the journal (the agents are told), for when the document is
// opened again.
func TestLostReplicaKeptWhenTheRoomFails(t *testing.T) {
	srv := newServer(t)
	j, _ := newJournal(t, "")
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.Journal = j })
	sub := m.Subscribe(256)
	runManager(t, m)
	room := openRoom(t, m, nbPath, ydoc.KindNotebook)
	if _, err := room.Apply(testutil.Context(t), durableInsert("unsaved")); err != nil {
		t.Fatal(err)
	}
	srv.Down()
	srv.RemoveFile(nbPath)
	srv.Restart(bridgetest.RestartOptions{})
	srv.Up()
	e := awaitEvent(t, sub, "the notice", func(e bridge.Event) bool { return e.Kind == bridge.EventNotice && e.Notice.Kind == "rescue_kept" })
	if !strings.Contains(e.Notice.Message, "kept in the sidecar's memory") {
		t.Errorf("notice %q", e.Notice.Message)
	}
	<-room.Done()
	testutil.Eventually(t, "the journal listed at risk", func() bool {
		docs, err := j.AtRisk()
		return err == nil && len(docs) == 1 && docs[0].Path == nbPath
	})
}

// The file changes outside Jupyter while the server runs and the server reloads it over the room
// (its own client rewrites the content, then dirty=false without a new hash): the agent's unsaved
// cells the reload removed or rewrote are announced; a save (a new hash) announces nothing.
func TestReloadOverUnsavedWorkAnnounced(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, insertCell("agent-x")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.SetSource(0, "agent's change") })); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Apply(ctx, insertCell("agent-kept")); err != nil {
		t.Fatal(err)
	}
	// The reload: the file has neither the agent's first cell nor its change to cell-a.
	if err := srv.EditDoc(nbPath, func(tx *ydoc.Txn) error {
		if err := tx.DeleteCells(tx.CellIndex("agent-x"), 1); err != nil {
			return err
		}
		return tx.SetSource(0, "from the file")
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.EditDoc(nbPath, func(tx *ydoc.Txn) error { return tx.SetState("dirty", false) }); err != nil {
		t.Fatal(err)
	}
	e := h.await("the notice", func(e bridge.Event) bool { return e.Kind == bridge.EventNotice })
	if e.Notice.Kind != "outside_change" || !strings.Contains(e.Notice.Message, "changed outside Jupyter") ||
		strings.Join(e.Notice.Details, "\n") != "cell agent-x: changed or removed by the reload\ncell cell-a: changed or removed by the reload" {
		t.Fatalf("notice %+v %q", e.Notice, e.Notice.Details)
	}
	// A save afterwards (a new hash) is no reload.
	if _, err := h.room.Apply(ctx, insertCell("later")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Save(ctx); err != nil {
		t.Fatal(err)
	}
	awaitResyncs(t, srv, liveConn(t, srv), 2)
	for {
		select {
		case e := <-h.sub.C:
			if e.Kind == bridge.EventNotice {
				t.Fatalf("a notice after a plain save: %+v", e.Notice)
			}
			continue
		default:
		}
		break
	}
}

// Text documents are kept the same way: the agent's unsaved text comes back from the journal
// after the sidecar and the server restarted.
func TestJournalRescuesTextAfterSidecarRestart(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	j, stopJournal := newJournal(t, dir)
	h := startRoom(t, srv, bridgetest.TextPath, ydoc.KindText, withJournal(j, guardOn(5*time.Millisecond, nil)))
	ctx := testutil.Context(t)
	if err := h.room.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertText(tx.TextLength(), "saved line\n") })); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a save", func() bool { return srv.Saves(bridgetest.TextPath) >= 1 && h.room.Info().UnsavedSince.IsZero() })
	srv.SetSaveStatus("failed")
	if _, err := h.room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertText(tx.TextLength(), "unsaved line\n") })); err != nil {
		t.Fatal(err)
	}
	h.room.Close()
	stopJournal()
	srv.Restart(bridgetest.RestartOptions{})
	srv.SetSaveStatus("success")
	j2, _ := newJournal(t, dir)
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.Journal = j2 })
	runManager(t, m)
	awaitServer(t, srv, "the text back", func() bool {
		got, _ := srv.Text(bridgetest.TextPath)
		return got == "first line\nsecond line\nsaved line\nunsaved line\n"
	})
}

// The server saved a state the replica never held — a human's keystroke had reached the server
// before the agent's edit, while the replica applied the agent's edit first — and then lost the
// room: the journal, replayed in the order the server broadcast its updates, shows the file is a
// save of the server, and the replica is restored over it (not "changed outside").
func TestRescueMatchesAStateOnlyTheServerHeld(t *testing.T) {
	srv := newServer(t)
	j, _ := newJournal(t, "")
	h := startSynced(t, srv, withJournal(j, nil))
	ctx := testutil.Context(t)
	srv.HoldEchoes()
	typeInto(t, srv, nbPath, "cell-b", " typed") // at the server, not at the replica yet
	if err := srv.SaveFile(nbPath); err != nil { // the server saves: the file has the typing only
		t.Fatal(err)
	}
	res := editAsync(ctx, h.room, insertCell("agent"))
	awaitServer(t, srv, "the agent's cell at the server", func() bool { return srv.CountCell(nbPath, "agent") == 1 })
	srv.ReleaseEchoes()
	if r := awaitEdit(t, res, "the agent's edit"); r.err != nil {
		t.Fatal(r.err)
	}
	testutil.Eventually(t, "the typing in the replica", func() bool {
		var src string
		_ = h.room.View(ctx, func(d *ydoc.Doc) error {
			c, _ := d.Cells([]int{1})
			src = c[0].Source
			return nil
		})
		return src == "# Title typed"
	})
	srv.Restart(bridgetest.RestartOptions{})
	notice := h.await("the rescue notice", kindIs(bridge.EventNotice)).Notice
	if notice.Kind != "rescued" || notice.Rescue == nil || notice.Rescue.FileWins {
		t.Fatalf("notice %+v", notice)
	}
	awaitServer(t, srv, "everything back", func() bool {
		return srv.CountCell(nbPath, "agent") == 1 && serverSource(t, srv, nbPath, "cell-b") == "# Title typed"
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "agent")
}
