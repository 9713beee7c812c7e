package bridge_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The save guard, the crash rescue and the notices, against the fake server (which saves only
// when asked, and rebuilds rooms from its file table on Restart).

func guardOn(interval time.Duration, saves *bridge.Saves) func(*bridge.RoomOptions) {
	return func(o *bridge.RoomOptions) {
		o.SaveInterval, o.Saves, o.SaveSpacing, o.AutosaveWait = interval, saves, interval, interval
	}
}

// typeInto appends text to a cell of the server document, as a human's keystroke arriving at the
// server would.
func typeInto(t *testing.T, srv *bridgetest.Server, path, cellID, text string) {
	t.Helper()
	if err := srv.EditDoc(path, func(tx *ydoc.Txn) error {
		i := tx.CellIndex(cellID)
		c, err := tx.Cell(i)
		if err != nil {
			return err
		}
		return tx.SetSource(i, c.Source+text)
	}); err != nil {
		t.Fatal(err)
	}
}

func durableInsert(id string) ydoc.Edit {
	return ydoc.InsertCells{Cells: []ydoc.Cell{{ID: id, Type: ydoc.CellCode, Source: "agent " + id}}}
}

func serverSource(t *testing.T, srv *bridgetest.Server, path, id string) string {
	t.Helper()
	nb, err := srv.Notebook(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range nb.Cells {
		if c.ID == id {
			return c.Source
		}
	}
	return ""
}

// While changes keep coming, the guard gets the document saved every interval; once they stop
// and the last save is marked, no more saves.
func TestSaveGuardSavesWhileChangingAndNotWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		saves := bridge.NewSaves(2)
		h := startSynced(t, srv, guardOn(20*time.Millisecond, saves))
		if n := srv.Saves(nbPath); n != 0 {
			t.Fatalf("%d saves of a room nobody changed", n)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a keystroke every 2 ms, never a pause the server's own autosave would need
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				typeInto(t, srv, nbPath, "cell-b", "k")
			}
		}()
		awaitServer(t, srv, "three saves during the typing", func() bool { return srv.Saves(nbPath) >= 3 })
		close(stop)
		wg.Wait()
		if _, err := h.room.Apply(testutil.Context(t), insertCell("last")); err != nil { // a local change at the end
			t.Fatal(err)
		}
		testutil.Eventually(t, "the last change saved", func() bool {
			f, _ := srv.File(nbPath)
			info := h.room.Info()
			return len(f.Notebook.Cells) == 3 && info.UnsavedSince.IsZero() && info.LastSaveStatus == "success"
		})
		n := srv.Saves(nbPath)
		// Idle: ten intervals go by (the room loop ticks every 5 ms) without a save.
		time.Sleep(200 * time.Millisecond) // virtual: exactly 200 ms of ticks, saves and resyncs
		synctest.Wait()
		if got := srv.Saves(nbPath); got != n {
			t.Errorf("an idle room was saved %d more times", got-n)
		}
		st := saves.Stats()
		if st.Asked < 4 || st.Success != st.Asked || st.Marked < st.Asked {
			t.Errorf("save stats %+v: want every request answered success and marked", st)
		}
		info := h.room.Info()
		if info.LastSaved.IsZero() || info.SavesAsked != int(st.Asked) {
			t.Errorf("info: last saved %v, asked %d (stats %d)", info.LastSaved, info.SavesAsked, st.Asked)
		}
	})
}

// SaveInterval 0 leaves saving to the server: no request, however much changes.
func TestSaveGuardOff(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	for i := 0; i < 20; i++ {
		typeInto(t, srv, nbPath, "cell-b", "k")
	}
	if _, err := h.room.Apply(testutil.Context(t), insertCell("x")); err != nil {
		t.Fatal(err)
	}
	awaitResyncs(t, srv, liveConn(t, srv), 3)
	if n := srv.Saves(nbPath); n != 0 {
		t.Errorf("%d saves with the guard off", n)
	}
}

// An engine that saves by itself (jupyter-server-documents) gets no save request.
func TestSaveGuardOffWhereTheServerSavesItself(t *testing.T) {
	srv := newServer(t)
	srv.SetEngine(bridge.EngineInfo{Name: "jupyter-server-documents", SavesItself: true})
	saves := bridge.NewSaves(1)
	h := startSynced(t, srv, guardOn(5*time.Millisecond, saves))
	if _, err := h.room.Apply(testutil.Context(t), insertCell("x")); err != nil {
		t.Fatal(err)
	}
	awaitResyncs(t, srv, liveConn(t, srv), 3)
	if st := saves.Stats(); st.Asked != 0 || srv.Saves(nbPath) != 0 {
		t.Errorf("save requests on an engine that saves itself: %+v, %d saves", st, srv.Saves(nbPath))
	}
}

// Outcomes other than success are counted and retried at the next interval.
func TestSaveGuardFailedSaveRetried(t *testing.T) {
	srv := newServer(t)
	srv.SetSaveStatus("failed")
	saves := bridge.NewSaves(1)
	h := startSynced(t, srv, guardOn(10*time.Millisecond, saves))
	if _, err := h.room.Apply(testutil.Context(t), insertCell("x")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "two failed requests", func() bool { return saves.Stats().Failed >= 2 })
	if !h.room.Info().LastSaved.IsZero() {
		t.Error("a failed save was taken for a save")
	}
	srv.SetSaveStatus("success")
	testutil.Eventually(t, "a save after the failures", func() bool { return srv.Saves(nbPath) == 1 && h.room.Info().UnsavedSince.IsZero() })
}

// However long the interval, confirmed durable edits piling up get a save asked for.
func TestSaveGuardAsksWhenUnsavedEditsPileUp(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, guardOn(time.Hour, nil))
	ctx := testutil.Context(t)
	for i := 0; i < 256; i++ {
		if _, err := h.room.Apply(ctx, durableInsert("d"+string(rune('a'+i%26))+strings.Repeat("x", i/26))); err != nil {
			t.Fatal(err)
		}
	}
	awaitServer(t, srv, "a save", func() bool { return srv.Saves(nbPath) == 1 })
}

func TestSavesLimiterFIFO(t *testing.T) {
	s := bridge.NewSaves(2)
	chans := make([]chan struct{}, 5)
	for i := range chans {
		chans[i] = make(chan struct{}, 1)
		bridge.RequestSlot(s, chans[i])
	}
	granted := func() []int {
		var out []int
		for i, c := range chans {
			if len(c) == 1 {
				out = append(out, i)
			}
		}
		return out
	}
	if g := granted(); len(g) != 2 || g[0] != 0 || g[1] != 1 {
		t.Fatalf("granted %v, want the first two", g)
	}
	<-chans[0]
	bridge.CancelSlot(s, chans[2]) // leaves the queue
	bridge.ReleaseSlot(s)          // 0 done: the slot goes to 3 (2 withdrew)
	if len(chans[3]) != 1 || len(chans[2]) != 0 || len(chans[4]) != 0 {
		t.Fatalf("after a release: granted %v", granted())
	}
	bridge.CancelSlot(s, chans[3]) // granted but unused: the slot passes to 4
	if len(chans[4]) != 1 {
		t.Fatalf("a cancelled grant did not pass on: %v", granted())
	}
}

// The server restarts before saving: the agent's confirmed and in-flight edits and a human's
// typing that had reached the sidecar come back, once, as one edit; what a human typed on the
// rebuilt room meanwhile stays.
func TestRescueAfterRestartBeforeSave(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, durableInsert("agent1")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " typed before")
	testutil.Eventually(t, "the keystrokes in the replica", func() bool {
		var src string
		_ = h.room.View(ctx, func(d *ydoc.Doc) error {
			c, _ := d.Cells([]int{1})
			src = c[0].Source
			return nil
		})
		return src == "# Title typed before"
	})
	srv.HoldEchoes()
	res := editAsync(ctx, h.room, insertCell("inflight"))
	awaitServer(t, srv, "the in-flight edit at the server", func() bool { return srv.CountCell(nbPath, "inflight") == 1 })

	srv.Down()
	srv.Restart(bridgetest.RestartOptions{}) // rebuilt from the file, which has none of it
	srv.ReleaseEchoes()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	// A human reloads first and types on the rebuilt room.
	h2 := startRoom(t, srv, nbPath, ydoc.KindNotebook, nil)
	srv.Up()
	if err := h2.room.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-a", " # after")
	notice := h.await("the rescue notice", kindIs(bridge.EventNotice)).Notice
	if notice.Kind != "rescued" || notice.Rescue == nil || !notice.Rescue.Restored || !notice.Rescue.Lossless() {
		t.Fatalf("notice %+v (%+v)", notice, notice.Rescue)
	}
	if r := awaitEdit(t, res, "the in-flight edit"); r.err != nil {
		t.Fatalf("in-flight edit: %v", r.err)
	}
	awaitServer(t, srv, "everything back", func() bool {
		return srv.CountCell(nbPath, "agent1") == 1 && srv.CountCell(nbPath, "inflight") == 1 &&
			serverSource(t, srv, nbPath, "cell-b") == "# Title typed before" &&
			serverSource(t, srv, nbPath, "cell-a") == "print('hello') # after"
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "agent1", "inflight")
	if info := h.room.Info(); info.LastRescue == nil || !info.LastRescue.Restored {
		t.Errorf("info.LastRescue %+v", info.LastRescue)
	}
}

// With the guard on, saves move the known file hash along: a crash after a save and more
// changes brings those changes back (the file is the last save).
func TestRescueAfterSaveThenRestart(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, guardOn(10*time.Millisecond, nil))
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, durableInsert("saved")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a save", func() bool { return srv.Saves(nbPath) >= 1 && h.room.Info().UnsavedSince.IsZero() })
	srv.SetSaveStatus("failed") // from now on nothing reaches the file
	if _, err := h.room.Apply(ctx, durableInsert("unsaved")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " typed")
	awaitTypedWithInsert(t, h.room)
	srv.Restart(bridgetest.RestartOptions{})
	h.await("the rescue notice", kindIs(bridge.EventNotice))
	awaitServer(t, srv, "everything back", func() bool {
		return srv.CountCell(nbPath, "unsaved") == 1 && serverSource(t, srv, nbPath, "cell-b") == "# Title typed"
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "saved", "unsaved")
}

// While others keep typing, jupyter-collaboration's saves mostly end cancelled: the file is
// written, no hash published. The file is still a version the replica held, so a crash restores
// everything over it.
func TestRescueAfterUnreportedSaves(t *testing.T) {
	srv := newServer(t)
	srv.QuietSaves(true)
	h := startSynced(t, srv, guardOn(10*time.Millisecond, nil))
	ctx := testutil.Context(t)
	if _, err := h.room.Apply(ctx, durableInsert("before")); err != nil {
		t.Fatal(err)
	}
	awaitServer(t, srv, "a save", func() bool { return srv.Saves(nbPath) >= 1 })
	f, _ := srv.File(nbPath)
	if len(f.Notebook.Cells) != 3 {
		t.Fatalf("the file holds %d cells", len(f.Notebook.Cells))
	}
	if !h.room.Info().LastSaved.IsZero() {
		t.Fatal("a quiet save was reported")
	}
	srv.SetSaveStatus("failed") // nothing more reaches the file
	if _, err := h.room.Apply(ctx, durableInsert("after")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " typed")
	awaitTypedWithInsert(t, h.room)
	srv.Restart(bridgetest.RestartOptions{})
	notice := h.await("the rescue notice", kindIs(bridge.EventNotice)).Notice
	if notice.Kind != "rescued" {
		t.Fatalf("notice %+v", notice)
	}
	awaitServer(t, srv, "everything back", func() bool {
		return srv.CountCell(nbPath, "after") == 1 && serverSource(t, srv, nbPath, "cell-b") == "# Title typed"
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "before", "after")
}

// A file changed outside Jupyter while the server was down wins: what the replica changed since
// the last save (the agent's cell, a human's typing elsewhere) is merged under it, and a notice
// the manager keeps for agents says the file won.
func TestFileWinsWhenChangedOutside(t *testing.T) {
	srv := newServer(t)
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Room: bridgetest.FastRoomOptions()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	sub := m.Subscribe(1024)
	room, err := m.Open(testutil.Context(t), nbPath, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := room.Apply(testutil.Context(t), durableInsert("agent")); err != nil {
		t.Fatal(err)
	}
	typeInto(t, srv, nbPath, "cell-b", " lost typing")
	testutil.Eventually(t, "the typing in the replica", func() bool {
		var src string
		_ = room.View(testutil.Context(t), func(d *ydoc.Doc) error {
			c, _ := d.Cells([]int{1})
			src = c[0].Source
			return nil
		})
		return strings.HasSuffix(src, "lost typing")
	})
	srv.Down()
	nb := bridgetest.DefaultNotebook()
	nb.Cells[0].Source = "edited in vim"
	srv.WriteFile(bridgetest.File{Path: nbPath, Type: "notebook", Notebook: nb})
	srv.Restart(bridgetest.RestartOptions{})
	srv.Up()
	e := awaitEvent(t, sub, "the notice", kindIs(bridge.EventNotice))
	if e.Notice.Kind != "file_wins" || !strings.Contains(e.Notice.Message, "changed outside Jupyter") || e.Notice.Rescue == nil || !e.Notice.Rescue.FileWins {
		t.Errorf("notice %+v", e.Notice)
	}
	awaitServer(t, srv, "the agent's cell merged onto the changed file", func() bool { return srv.CountCell(nbPath, "agent") == 1 })
	if got := serverSource(t, srv, nbPath, "cell-a"); got != "edited in vim" {
		t.Errorf("cell-a %q: the file's content must win", got)
	}
	if got := serverSource(t, srv, nbPath, "cell-b"); got != "# Title lost typing" {
		t.Errorf("cell-b %q: the typing the file did not touch must be merged back", got)
	}
	notices, seq := m.Notices(0)
	if len(notices) != 1 || notices[0].Path != nbPath || seq == 0 {
		t.Fatalf("manager notices %+v (seq %d)", notices, seq)
	}
	if again, _ := m.Notices(seq); len(again) != 0 {
		t.Errorf("notices after seq: %+v", again)
	}
}

// A 1003 close (the server no longer knows our session) is a lost room too; a room the server
// still holds comes back as it was, with nothing doubled.
func TestRescueAfter1003KeepsRoomOnce(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	if _, err := h.room.Apply(testutil.Context(t), durableInsert("agent")); err != nil {
		t.Fatal(err)
	}
	srv.CloseWith(bridgetest.CloseSessionProblem, `{"reason":"unknown_session","reloadable":true}`)
	h.await("reset", kindIs(bridge.EventReset))
	h.await("synced", kindIs(bridge.EventSynced))
	awaitResyncs(t, srv, liveConn(t, srv), 2)
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "agent")
	if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slicesEqual(got, want) {
		t.Errorf("replica %v, server %v", got, want)
	}
}

// Text documents are rescued the same way.
func TestRescueText(t *testing.T) {
	srv := newServer(t)
	h := startRoom(t, srv, bridgetest.TextPath, ydoc.KindText, nil)
	ctx := testutil.Context(t)
	if err := h.room.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertText(tx.TextLength(), "agent line\n") })); err != nil {
		t.Fatal(err)
	}
	srv.Restart(bridgetest.RestartOptions{})
	h.await("the rescue notice", kindIs(bridge.EventNotice))
	awaitServer(t, srv, "the text back", func() bool {
		got, _ := srv.Text(bridgetest.TextPath)
		return got == "first line\nsecond line\nagent line\n"
	})
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The server's own autosave comes a second after the last change: the room does not ask while
// it may come (the changes paused for less than AutosaveWait), and not at all when the server
// reported the save by itself; when it did not (autosave off, a save a keystroke cancelled), the
// room asks once AutosaveWait has passed.
func TestSaveGuardLeavesTheAutosaveToTheServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		const wait = 150 * time.Millisecond
		h := startSynced(t, srv, func(o *bridge.RoomOptions) {
			o.SaveInterval, o.SaveSpacing, o.AutosaveWait = time.Hour, time.Millisecond, wait
		})
		ctx := testutil.Context(t)
		// The server saves by itself (dirty turns false, as after its autosave): no request.
		if _, err := h.room.Apply(ctx, insertCell("autosaved")); err != nil {
			t.Fatal(err)
		}
		if err := srv.EditDoc(nbPath, func(tx *ydoc.Txn) error { return tx.SetState("dirty", false) }); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the server's save seen", func() bool { return h.room.Info().UnsavedSince.IsZero() })
		time.Sleep(2 * wait) // virtual: twice the autosave's wait, every timer due has fired
		synctest.Wait()
		if n := h.room.Info().SavesAsked; n != 0 {
			t.Fatalf("%d save requests although the server saved by itself", n)
		}
		// The server does not save: the room asks, but not before the changes paused for AutosaveWait.
		changed := time.Now()
		if _, err := h.room.Apply(ctx, insertCell("not-autosaved")); err != nil {
			t.Fatal(err)
		}
		awaitServer(t, srv, "a save", func() bool { return srv.Saves(nbPath) == 1 })
		if since := time.Since(changed); since < wait {
			t.Errorf("asked %v after the change, before the server's autosave could come (%v)", since, wait)
		}
	})
}

// Saves are spaced by what they take: the next request comes no sooner than five times the last
// save's duration after it (while a document keeps changing).
func TestSaveGuardSpacesSavesByTheirDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		h := startSynced(t, srv, guardOn(5*time.Millisecond, nil))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a keystroke every 2 ms: the document never pauses
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				typeInto(t, srv, nbPath, "cell-b", "k")
			}
		}()
		defer func() { close(stop); wg.Wait() }()
		srv.HoldSaves()
		awaitServer(t, srv, "a save request held", func() bool { return srv.HeldSaves() == 1 })
		time.Sleep(60 * time.Millisecond) // virtual: the save takes 60 ms
		released := time.Now()
		srv.ReleaseSaves()
		testutil.Eventually(t, "the answer", func() bool { return h.room.Info().LastSaveTook >= 60*time.Millisecond })
		info := h.room.Info()
		if info.SaveSpacing != 5*info.LastSaveTook {
			t.Errorf("spacing %v after a save of %v", info.SaveSpacing, info.LastSaveTook)
		}
		before := srv.Saves(nbPath)
		awaitServer(t, srv, "the next save", func() bool { return srv.Saves(nbPath) > before })
		if gap := time.Since(released); gap < info.SaveSpacing {
			t.Errorf("the next save came %v after the last ended, within its spacing %v", gap, info.SaveSpacing)
		}
	})
}
