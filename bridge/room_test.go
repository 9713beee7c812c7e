package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

const nbPath = bridgetest.NotebookPath

func TestOpenSyncAndView(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)

	var got ydoc.Notebook
	if err := h.room.View(testutil.Context(t), func(d *ydoc.Doc) error {
		var err error
		got, err = d.Notebook()
		return err
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	want, err := srv.Notebook(nbPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cells) != len(want.Cells) {
		t.Fatalf("replica has %d cells, server %d", len(got.Cells), len(want.Cells))
	}
	for i, c := range got.Cells {
		w := want.Cells[i]
		if c.ID != w.ID || c.Type != w.Type || c.Source != w.Source {
			t.Errorf("cell %d: replica {%s %s %q}, server {%s %s %q}", i, c.ID, c.Type, c.Source, w.ID, w.Type, w.Source)
		}
	}
	if ks, _ := got.Metadata["kernelspec"].(map[string]any); ks["name"] != "python3" {
		t.Errorf("replica notebook metadata %v lacks the server's kernelspec", got.Metadata)
	}

	info := h.room.Info()
	if info.Status != bridge.StatusSynced {
		t.Errorf("Status = %s, want synced", info.Status)
	}
	if info.SessionID != srv.SessionID() {
		t.Errorf("SessionID = %q, want the server's %q", info.SessionID, srv.SessionID())
	}
	if info.FileID == "" || info.RoomID != "json:notebook:"+info.FileID {
		t.Errorf("RoomID %q, FileID %q: want json:notebook:<fileId>", info.RoomID, info.FileID)
	}
	if info.ClientID == 0 || info.ClientID == srv.DocClientID(nbPath) {
		t.Errorf("ClientID = %d: want a non-zero id of its own (server doc %d)", info.ClientID, srv.DocClientID(nbPath))
	}
	if info.SyncedAt.IsZero() || info.Err != "" {
		t.Errorf("SyncedAt %v, Err %q: want a sync time and no error", info.SyncedAt, info.Err)
	}
	if n, d := srv.OpenCalls(), srv.DialCalls(); n != 1 || d != 1 {
		t.Errorf("OpenDocSession called %d times, DialRoom %d: want 1 each", n, d)
	}
}

func TestEditConfirmedOnlyAfterEcho(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	c := liveConn(t, srv)

	srv.HoldEchoes()
	res := editAsync(testutil.Context(t), h.room, insertCell("new-cell"))
	awaitServer(t, srv, "the edit in the server document", func() bool { return srv.CountCell(nbPath, "new-cell") == 1 })
	// Let the room go round its periodic resync twice: a step 2 must not confirm the edit.
	awaitResyncs(t, srv, c, 2)
	notReturned(t, res, "before the server echoed it")
	if srv.Held() == 0 {
		t.Fatal("the fake held no echo back")
	}
	if p := h.room.Info().PendingEdits; p != 1 {
		t.Errorf("PendingEdits = %d while the echo is held, want 1", p)
	}

	srv.ReleaseEchoes()
	r := awaitEdit(t, res, "after the echo")
	if r.err != nil {
		t.Fatalf("Apply: %v", r.err)
	}
	if !slices.Equal(r.change.Inserted, []string{"new-cell"}) || !r.change.Local {
		t.Errorf("Change = %+v, want Inserted [new-cell], Local", r.change)
	}
	h.await("the local change event", func(e bridge.Event) bool {
		return e.Kind == bridge.EventChanged && e.Change.Local && slices.Contains(e.Change.Inserted, "new-cell")
	})
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "new-cell")
	if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slices.Equal(got, want) {
		t.Errorf("replica cells %v, server cells %v", got, want)
	}
	testutil.Eventually(t, "no pending edits", func() bool { return h.room.Info().PendingEdits == 0 })
}

func TestEditWhileServerDownLandsOnce(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)

	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	calls := srv.OpenCalls()
	res := editAsync(testutil.Context(t), h.room, insertCell("offline"))
	awaitServer(t, srv, "two more session attempts", func() bool { return srv.OpenCalls() >= calls+2 })
	notReturned(t, res, "while the server was down")
	if st := h.room.Info().Status; st != bridge.StatusDisconnected {
		t.Errorf("Status = %s while down, want disconnected", st)
	}
	if n := srv.CountCell(nbPath, "offline"); n != 0 {
		t.Fatalf("the server holds the edit %d times while down", n)
	}

	srv.Up()
	r := awaitEdit(t, res, "after the server came back")
	if r.err != nil {
		t.Fatalf("Apply: %v", r.err)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "offline")
	// Later handshakes must not bring it again.
	awaitResyncs(t, srv, liveConn(t, srv), 2)
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "offline")
	if info := h.room.Info(); info.Reconnects < 1 || info.Resets != 0 {
		t.Errorf("Reconnects %d, Resets %d: want at least one reconnect and no reset", info.Reconnects, info.Resets)
	}
}

func TestEditWithdrawnWhileDisconnected(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)

	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := editAsync(ctx, h.room, insertCell("withdrawn"))
	testutil.Eventually(t, "the edit queued", func() bool { return h.room.Info().PendingEdits == 1 })
	cancel()
	err := awaitEdit(t, res, "after its context ended").err
	if !isWithdrawn(err) {
		t.Fatalf("Apply while disconnected with an ended context: err %v (%T), want *bridge.WithdrawnError", err, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WithdrawnError %v does not wrap the context's error", err)
	}

	srv.Up()
	h.await("synced again", kindIs(bridge.EventSynced))
	// Edits run in order: had the withdrawn one survived, it would land before this one.
	if _, err := h.room.Apply(testutil.Context(t), insertCell("after")); err != nil {
		t.Fatalf("Apply after reconnect: %v", err)
	}
	if n := srv.CountCell(nbPath, "withdrawn"); n != 0 {
		t.Errorf("the withdrawn edit reached the server (%d cells)", n)
	}
	if ids := roomCellIDs(t, h.room); slices.Contains(ids, "withdrawn") {
		t.Errorf("the withdrawn edit is in the replica: %v", ids)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "after")
}

func TestWithdrawnEditNotCountedAsPending(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := editAsync(ctx, h.room, insertCell("withdrawn"))
	testutil.Eventually(t, "the edit queued", func() bool { return h.room.Info().PendingEdits == 1 })
	cancel()
	if err := awaitEdit(t, res, "after its context ended").err; !isWithdrawn(err) {
		t.Fatalf("Apply: %v, want *bridge.WithdrawnError", err)
	}
	// Withdraw has run in the room loop before Apply returned.
	if p := h.room.Info().PendingEdits; p != 0 {
		t.Errorf("PendingEdits = %d after the only edit was withdrawn, want 0", p)
	}
}

func TestEditUnconfirmedWhenContextEnds(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)

	srv.HoldEchoes()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := editAsync(ctx, h.room, insertCell("late-ack"))
	awaitServer(t, srv, "the edit in the server document", func() bool { return srv.CountCell(nbPath, "late-ack") == 1 })
	cancel()
	r := awaitEdit(t, res, "after its context was cancelled")
	if !isUnconfirmed(r.err) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Apply in flight with a cancelled context: err %v (%T), want *bridge.UnconfirmedError wrapping context.Canceled", r.err, r.err)
	}
	srv.ReleaseEchoes()
	testutil.Eventually(t, "the edit confirmed in the background", func() bool { return h.room.Info().PendingEdits == 0 })
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "late-ack")
}

func TestEditFailsWhenRoomCloses(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	res := editAsync(testutil.Context(t), h.room, insertCell("never"))
	testutil.Eventually(t, "the edit queued", func() bool { return h.room.Info().PendingEdits == 1 })

	h.room.Close()
	r := awaitEdit(t, res, "after Close")
	// It never ran: withdrawn (nothing changed), because the room closed.
	if !errors.Is(r.err, bridge.ErrRoomClosed) || !isWithdrawn(r.err) || isUnconfirmed(r.err) {
		t.Errorf("Apply pending when the room closed: err %v (%T), want a *WithdrawnError wrapping ErrRoomClosed", r.err, r.err)
	}
	if err := h.runResult(); err != nil {
		t.Errorf("Run after Close = %v, want nil", err)
	}
	if _, err := h.room.Apply(testutil.Context(t), insertCell("late")); !errors.Is(err, bridge.ErrRoomClosed) {
		t.Errorf("Apply after Close: %v, want ErrRoomClosed", err)
	}
	if err := h.room.View(testutil.Context(t), func(*ydoc.Doc) error { return nil }); !errors.Is(err, bridge.ErrRoomClosed) {
		t.Errorf("View after Close: %v, want ErrRoomClosed", err)
	}
	if _, err := h.room.Save(testutil.Context(t)); !errors.Is(err, bridge.ErrRoomClosed) {
		t.Errorf("Save after Close: %v, want ErrRoomClosed", err)
	}
}

// A stopped room cannot serve anyone, and Manager.Open relies on WaitSynced to decide whether
// to hand a room out.
func TestWaitSyncedOnStoppedRoomReportsIt(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	h.room.Close()
	nils := 0
	for range 100 {
		if err := h.room.WaitSynced(testutil.Context(t)); err == nil {
			nils++
		} else if !errors.Is(err, bridge.ErrRoomClosed) {
			t.Fatalf("WaitSynced on a closed room: %v", err)
		}
	}
	if nils > 0 {
		t.Errorf("WaitSynced on a closed room returned nil %d times out of 100, want ErrRoomClosed every time", nils)
	}
}

func TestRestartWithRebuiltDocReplaysUnconfirmedEditOnce(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	oldSession, oldClient := srv.SessionID(), h.room.Info().ClientID

	srv.HoldEchoes()
	res := editAsync(testutil.Context(t), h.room, insertCell("in-flight"))
	awaitServer(t, srv, "the edit in the server document", func() bool { return srv.CountCell(nbPath, "in-flight") == 1 })
	notReturned(t, res, "before the echo")

	srv.Restart(bridgetest.RestartOptions{}) // new session, doc rebuilt from the file: the edit is gone
	srv.ReleaseEchoes()                      // nothing is held any more; stop holding
	h.await("reset", kindIs(bridge.EventReset))
	h.await("synced after the reset", kindIs(bridge.EventSynced))
	r := awaitEdit(t, res, "after the restart")
	if r.err != nil {
		t.Fatalf("Apply across the restart: %v", r.err)
	}
	if !slices.Equal(r.change.Inserted, []string{"in-flight"}) {
		t.Errorf("Change.Inserted = %v, want [in-flight]", r.change.Inserted)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "in-flight")
	awaitResyncs(t, srv, liveConn(t, srv), 2)
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "in-flight")
	if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slices.Equal(got, want) {
		t.Errorf("replica cells %v, server cells %v", got, want)
	}
	info := h.room.Info()
	if info.Resets != 1 || info.SessionID == oldSession || info.SessionID != srv.SessionID() {
		t.Errorf("Resets %d, SessionID %q (old %q, server %q): want one reset onto the new session", info.Resets, info.SessionID, oldSession, srv.SessionID())
	}
	if info.ClientID == oldClient {
		t.Errorf("ClientID %d unchanged by the reset, want a fresh one", info.ClientID)
	}
}

func TestRestartKeepingDocDoesNotDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      bridgetest.RestartOptions
		wantReset bool
	}{
		{"new session", bridgetest.RestartOptions{KeepDoc: true}, true},
		{"same session", bridgetest.RestartOptions{KeepDoc: true, KeepSession: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			h := startSynced(t, srv, nil)
			srv.HoldEchoes()
			res := editAsync(testutil.Context(t), h.room, insertCell("kept"))
			awaitServer(t, srv, "the edit in the server document", func() bool { return srv.CountCell(nbPath, "kept") == 1 })
			notReturned(t, res, "before the echo")

			srv.Restart(tc.opts)
			srv.ReleaseEchoes()
			h.await("disconnected", kindIs(bridge.EventDisconnected))
			var reset bool
			h.await("synced again", func(e bridge.Event) bool {
				reset = reset || e.Kind == bridge.EventReset
				return e.Kind == bridge.EventSynced
			})
			if reset != tc.wantReset {
				t.Errorf("reset = %v, want %v", reset, tc.wantReset)
			}
			r := awaitEdit(t, res, "after the restart")
			if r.err != nil {
				t.Fatalf("Apply across the restart: %v", r.err)
			}
			assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "kept")
			awaitResyncs(t, srv, liveConn(t, srv), 2)
			assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "kept")
			if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slices.Equal(got, want) {
				t.Errorf("replica cells %v, server cells %v", got, want)
			}
		})
	}
}

func TestResetAfterLongAbsence(t *testing.T) {
	srv := newServer(t)
	clk := &clock{}
	h := startSynced(t, srv, func(o *bridge.RoomOptions) {
		o.Now = clk.Now
		o.ResetAfter = time.Minute
	})
	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	clk.Advance(2 * time.Minute)
	// The room was rebuilt from disk but the session id is the same: only the absence tells.
	srv.Restart(bridgetest.RestartOptions{KeepSession: true})
	srv.Up()
	h.await("reset", kindIs(bridge.EventReset))
	h.await("synced", kindIs(bridge.EventSynced))
	assertCellsOnce(t, srv, nbPath, defaultIDs...)
	if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slices.Equal(got, want) {
		t.Errorf("replica cells %v, server cells %v", got, want)
	}
	if _, err := h.room.Apply(testutil.Context(t), insertCell("after-absence")); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "after-absence")
}

// A document the server fails to load, again and again, fails the room after a few attempts,
// with backoff in between: no endless reconnecting.
func TestInitializationErrorRetried(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.RejectConnections(1003, `{"reason":"initialization_error","reloadable":false,"errorReason":"bad json"}`)
	e := h.await("failed", kindIs(bridge.EventFailed))
	var re *bridge.RoomError
	if !errors.As(e.Err, &re) || !strings.Contains(e.Err.Error(), "could not load") {
		t.Fatalf("EventFailed.Err = %v, want a permanent RoomError saying the server could not load the document", e.Err)
	}
	if n := srv.DialCalls(); n != 3 {
		t.Errorf("%d dials: want the first plus two retries", n)
	}
}

// Sessions refused again and again (each 1003 asks for a reset) end the room instead of
// reconnecting forever.
func TestRepeatedSessionRefusalFails(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.RejectConnections(1003, `{"reason":"unknown_session","reloadable":true}`)
	e := h.await("failed", kindIs(bridge.EventFailed))
	if !strings.Contains(e.Err.Error(), "keeps refusing") {
		t.Fatalf("EventFailed.Err = %v", e.Err)
	}
	if n := srv.DialCalls(); n < 8 || n > 12 {
		t.Errorf("%d dials before giving up", n)
	}
}

func TestCloseCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int
		reason    string
		wantFail  bool
		wantReset bool
	}{
		{"1003 unknown_session", 1003, `{"reason":"unknown_session","sessionId":"session-1","reloadable":true}`, false, true},
		{"1003 version_mismatch", 1003, `{"reason":"version_mismatch","sessionId":"session-1","reloadable":true}`, false, true},
		{"1003 without reloadable", 1003, `{"reason":"unknown_session"}`, false, true},
		{"1003 plain text", 1003, "session expired", false, true},
		// initialization_error is retried (any load exception, transient ones too) and becomes
		// permanent only when it repeats: see TestInitializationErrorRetried.
		{"1003 initialization_error once", 1003, `{"reason":"initialization_error","reloadable":false,"errorReason":"bad json"}`, false, false},
		{"1003 not reloadable once", 1003, `{"reason":"version_mismatch","reloadable":false}`, false, false},
		{"4404 file not found", 4404, "Error initializing: nb.ipynb.", true, false},
		{"4400 bad request", 4400, "Error initializing: nb.ipynb.", true, false},
		{"4500 server error", 4500, "Error initializing: nb.ipynb.", false, false},
		{"1006 abnormal", 1006, "", false, false},
		{"1001 going away", 1001, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			h := startSynced(t, srv, nil)
			srv.CloseWith(tc.code, tc.reason)

			if tc.wantFail {
				e := h.await("failed", kindIs(bridge.EventFailed))
				var re *bridge.RoomError
				if !errors.As(e.Err, &re) || !re.Permanent() {
					t.Fatalf("EventFailed.Err = %v (%T), want a permanent *bridge.RoomError", e.Err, e.Err)
				}
				if err := h.runResult(); !errors.As(err, &re) {
					t.Errorf("Run returned %v, want the *bridge.RoomError", err)
				}
				if err := h.room.Err(); err == nil || err.Error() != e.Err.Error() {
					t.Errorf("Room.Err() = %v, want %v", err, e.Err)
				}
				if info := h.room.Info(); info.Status != bridge.StatusFailed || info.Err == "" {
					t.Errorf("Info: Status %s, Err %q; want failed with the error", info.Status, info.Err)
				}
				if n, d := srv.OpenCalls(), srv.DialCalls(); n != 1 || d != 1 {
					t.Errorf("after a permanent close: %d session calls, %d dials; want no retry (1 each)", n, d)
				}
				if _, err := h.room.Apply(testutil.Context(t), insertCell("x")); !errors.As(err, &re) {
					t.Errorf("Apply on a failed room: %v, want the room's error", err)
				}
				return
			}

			h.await("disconnected", kindIs(bridge.EventDisconnected))
			var reset bool
			h.await("synced again", func(e bridge.Event) bool {
				reset = reset || e.Kind == bridge.EventReset
				return e.Kind == bridge.EventSynced
			})
			if reset != tc.wantReset {
				t.Errorf("reset = %v, want %v", reset, tc.wantReset)
			}
			want := 0
			if tc.wantReset {
				want = 1
			}
			if info := h.room.Info(); info.Resets != want || info.Reconnects != 1 {
				t.Errorf("Resets %d, Reconnects %d; want %d and 1", info.Resets, info.Reconnects, want)
			}
			if _, err := h.room.Apply(testutil.Context(t), insertCell("after-close")); err != nil {
				t.Fatalf("Apply after reconnect: %v", err)
			}
			assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "after-close")
		})
	}
}

// A 4404 close means the file is gone; Manager and tools use IsNotFound to tell the user so.
func TestClose4404IsNotFound(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.CloseWith(4404, "Error initializing: nb.ipynb.")
	e := h.await("failed", kindIs(bridge.EventFailed))
	if !bridge.IsNotFound(e.Err) {
		t.Errorf("IsNotFound(%v) = false after a 4404 close, want true", e.Err)
	}
	if !bridge.IsNotFound(h.room.Err()) {
		t.Errorf("IsNotFound(room.Err() = %v) = false, want true", h.room.Err())
	}
}

func TestRoomErrorNamesRoomOnce(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.CloseWith(4400, "Error initializing: nb.ipynb.")
	e := h.await("failed", kindIs(bridge.EventFailed))
	if n := strings.Count(e.Err.Error(), "room "+nbPath); n != 1 {
		t.Errorf("error %q names the room %d times, want once", e.Err, n)
	}
}

func TestRawConflictResets(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.HoldEchoes()
	res := editAsync(testutil.Context(t), h.room, insertCell("before-conflict"))
	awaitServer(t, srv, "the edit in the server document", func() bool { return srv.CountCell(nbPath, "before-conflict") == 1 })
	dials := srv.DialCalls()

	srv.Inject(ydoc.EncodeRaw(`{"type":"conflict"}`))
	h.await("reset", kindIs(bridge.EventReset))
	srv.ReleaseEchoes()
	h.await("synced", kindIs(bridge.EventSynced))
	if r := awaitEdit(t, res, "after the conflict"); r.err != nil {
		t.Fatalf("Apply across the conflict: %v", r.err)
	}
	if srv.DialCalls() != dials+1 {
		t.Errorf("DialRoom called %d more times, want 1 reconnect", srv.DialCalls()-dials)
	}
	if _, err := h.room.Apply(testutil.Context(t), insertCell("after-conflict")); err != nil {
		t.Fatalf("Apply after the conflict: %v", err)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "before-conflict", "after-conflict")
	if info := h.room.Info(); info.Resets != 1 {
		t.Errorf("Resets = %d, want 1", info.Resets)
	}
}

func TestMalformedFramesKeepRoomAlive(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, func(o *bridge.RoomOptions) {
		o.ResyncInterval = time.Hour // every step 1 below answers a bad frame
	})
	c := liveConn(t, srv)
	for i, tc := range []struct {
		name   string
		frame  []byte
		resync bool // the room asks for a full diff, as the frame may have carried an update
	}{
		{"varint overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true},
		{"empty frame", []byte{}, true},
		{"truncated sync payload", []byte{0, 2, 10, 1, 2}, true},
		{"unknown sync subtype", []byte{0, 7, 0}, true},
		{"garbage update", ydoc.EncodeSync(ydoc.SyncUpdate, []byte{1, 2, 3, 4, 5}), true},
		{"garbage step 2", ydoc.EncodeSync(ydoc.SyncStep2, []byte{0xff, 0x01}), true},
		{"bad state vector", ydoc.EncodeSync(ydoc.SyncStep1, []byte{5, 1}), true},
		{"garbage awareness", ydoc.EncodeAwarenessFrame([]byte{1, 2}), false},
		{"awareness state not JSON", ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(77, 1, []byte("{nope"))), false},
		{"raw not JSON", ydoc.EncodeRaw("not json"), false},
		{"raw without type", ydoc.EncodeRaw(`{"status":"success"}`), false},
		{"raw unknown type", ydoc.EncodeRaw(`{"type":"mystery"}`), false},
		{"save answer nobody asked for", ydoc.EncodeRaw(`{"type":"save","responseTo":999,"status":"success"}`), false},
		{"query awareness", []byte{3}, false},
		{"unknown message type", []byte{125, 1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step1s := c.CountReceived(ydoc.MsgSync, ydoc.SyncStep1)
			srv.Inject(tc.frame)
			// The echo of this edit is queued behind the bad frame, so when Apply returns the
			// room has handled the frame.
			id := fmt.Sprintf("after-%d", i)
			if _, err := h.room.Apply(testutil.Context(t), insertCell(id)); err != nil {
				t.Fatalf("Apply after the frame: %v", err)
			}
			if n := srv.CountCell(nbPath, id); n != 1 {
				t.Errorf("edit after the frame is in the server document %d times, want once", n)
			}
			if tc.resync {
				awaitServer(t, srv, "a resync step 1", func() bool { return c.CountReceived(ydoc.MsgSync, ydoc.SyncStep1) > step1s })
			}
		})
	}
	if d := srv.DialCalls(); d != 1 {
		t.Errorf("DialRoom called %d times: a bad frame dropped the connection", d)
	}
	if info := h.room.Info(); info.Reconnects != 0 || info.Status != bridge.StatusSynced {
		t.Errorf("Reconnects %d, Status %s: want the first connection still synced", info.Reconnects, info.Status)
	}
	assertCellsOnce(t, srv, nbPath, defaultIDs...)
}

func TestAwarenessAnnounceAndPeers(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	id := h.room.Info().ClientID

	awaitServer(t, srv, "the room's awareness", func() bool { return len(srv.AwarenessOf(id)) > 0 })
	recs := srv.AwarenessOf(id)
	var st struct {
		User     ydoc.AwarenessUser `json:"user"`
		Autosave *bool              `json:"autosave"`
	}
	if err := jsonUnmarshal(recs[0].State, &st); err != nil {
		t.Fatalf("announced state %s: %v", recs[0].State, err)
	}
	if st.User != bridge.DefaultUser() {
		t.Errorf("announced user %+v, want bridge.DefaultUser() %+v", st.User, bridge.DefaultUser())
	}
	if st.Autosave == nil || !*st.Autosave {
		t.Errorf("announced state %s: want autosave true", recs[0].State)
	}

	alice := ydoc.AwarenessUser{Username: "alice", Name: "Alice", DisplayName: "Alice A"}
	srv.Inject(ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(4242, 1, mustJSON(t, map[string]any{"user": alice}))))
	h.await("awareness", kindIs(bridge.EventAwareness))
	cs := h.room.Info().Collaborators
	if len(cs) != 1 || cs[0].ClientID != 4242 || cs[0].User != alice || cs[0].Since.IsZero() {
		t.Fatalf("Collaborators = %+v, want alice (4242)", cs)
	}

	srv.Inject(ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(4242, 2, nil)))
	h.await("awareness removal", kindIs(bridge.EventAwareness))
	if cs := h.room.Info().Collaborators; len(cs) != 0 {
		t.Errorf("Collaborators after alice left = %+v, want none", cs)
	}
}

func TestAwarenessRemovalOfOwnStateIsReasserted(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	id := h.room.Info().ClientID
	awaitServer(t, srv, "the room's awareness", func() bool { return len(srv.AwarenessOf(id)) > 0 })
	before := len(srv.AwarenessOf(id))
	last := srv.AwarenessOf(id)[before-1]

	// A peer claims we left: the room must re-announce itself with a higher clock.
	srv.Inject(ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(id, last.Clock+1, nil)))
	awaitServer(t, srv, "the room re-announcing itself", func() bool { return len(srv.AwarenessOf(id)) > before })
	re := srv.AwarenessOf(id)[before]
	if re.State == nil || re.Clock <= last.Clock+1 {
		t.Errorf("re-announcement %+v: want a state with a clock above %d", re, last.Clock+1)
	}
}

// pycrdt-websocket forwards every awareness frame to all clients, the sender included (a
// keep-alive). The room must treat its own echo (same clock) as old news.
func TestAwarenessEchoDoesNotStorm(t *testing.T) {
	srv := bridgetest.New() // echoes awareness to the sender, like the real server
	h := startSynced(t, srv, nil)
	c := liveConn(t, srv)
	awaitResyncs(t, srv, c, 2)
	if n := len(srv.AwarenessOf(h.room.Info().ClientID)); n > 2 {
		t.Errorf("the room sent %d awareness updates within two resync intervals of joining, want 1 (renewals are due every %v)", n, ydoc.AwarenessRenew)
	}
}

func TestCloseLeavesPolitely(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	id := h.room.Info().ClientID
	c := liveConn(t, srv)

	h.room.Close()
	if err := h.runResult(); err != nil {
		t.Errorf("Run after Close = %v, want nil", err)
	}
	recs := srv.AwarenessOf(id)
	if len(recs) < 2 || recs[len(recs)-1].State != nil {
		t.Errorf("awareness sent by the room: %+v; want it to end with a null state", recs)
	}
	if !c.ClosedNormally() {
		t.Error("the connection was not closed with a normal close")
	}
	if len(srv.LiveConns()) != 0 {
		t.Error("a connection is still open after Close")
	}
	if !errors.Is(h.room.Err(), bridge.ErrRoomClosed) || h.room.Info().Status != bridge.StatusClosed {
		t.Errorf("Err %v, Status %s: want ErrRoomClosed, closed", h.room.Err(), h.room.Info().Status)
	}
	h.await("closed", kindIs(bridge.EventClosed))
	select {
	case _, ok := <-h.sub.C:
		if ok {
			t.Error("an event after EventClosed")
		}
	case <-time.After(testutil.WaitLimit):
		t.Error("the subscription was not closed with the room")
	}
	h.room.Close() // a second Close is a no-op
}

func TestSave(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	for _, status := range []string{"success", "skipped", "failed"} {
		srv.SetSaveStatus(status)
		got, err := h.room.Save(testutil.Context(t))
		if err != nil || got != status {
			t.Errorf("Save = %q, %v; want the server's %q", got, err, status)
		}
	}
	saves := 0
	for _, f := range liveConn(t, srv).Received() {
		if f.Type == ydoc.MsgRaw && f.Raw == "save" {
			saves++
		}
	}
	if saves != 3 {
		t.Errorf("the server received %d save requests, want 3", saves)
	}

	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	if _, err := h.room.Save(testutil.Context(t)); !errors.Is(err, bridge.ErrNotSynced) {
		t.Errorf("Save while disconnected: %v, want ErrNotSynced", err)
	}
}

func TestWriteTroubleReconnects(t *testing.T) {
	for _, tc := range []struct {
		name         string
		break_, heal func(*bridgetest.Server)
	}{
		{"failing writes",
			func(s *bridgetest.Server) { s.FailWrites(errors.New("broken pipe")) },
			func(s *bridgetest.Server) { s.FailWrites(nil) }},
		{"stalled writes",
			func(s *bridgetest.Server) { s.StallWrites() },
			func(s *bridgetest.Server) { s.ResumeWrites() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.WriteTimeout = 20 * time.Millisecond })
			tc.break_(srv)
			res := editAsync(testutil.Context(t), h.room, insertCell("through-trouble"))
			h.await("disconnected", kindIs(bridge.EventDisconnected))
			dials := srv.DialCalls()
			awaitServer(t, srv, "reconnect attempts", func() bool { return srv.DialCalls() >= dials+2 })
			notReturned(t, res, "while writes could not get through")
			if n := srv.CountCell(nbPath, "through-trouble"); n != 0 {
				t.Fatalf("the edit reached the server %d times while writes failed", n)
			}
			tc.heal(srv)
			if r := awaitEdit(t, res, "after writes recovered"); r.err != nil {
				t.Fatalf("Apply: %v", r.err)
			}
			assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "through-trouble")
		})
	}
}

func TestPings(t *testing.T) {
	srv := newServer(t)
	startSynced(t, srv, func(o *bridge.RoomOptions) { o.PingInterval = 5 * time.Millisecond })
	c := liveConn(t, srv)
	testutil.Eventually(t, "pings", func() bool { return c.Pings() >= 2 })
}

func TestTextRoom(t *testing.T) {
	srv := newServer(t)
	h := startRoom(t, srv, bridgetest.TextPath, ydoc.KindText, nil)
	if err := h.room.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatal(err)
	}
	if info := h.room.Info(); !strings.HasPrefix(info.RoomID, "text:file:") {
		t.Errorf("RoomID %q, want text:file:<fileId>", info.RoomID)
	}
	ed, err := h.room.Apply(testutil.Context(t), ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertText(0, "zeroth line\n") }))
	if err != nil || !ed.Change.Text {
		t.Fatalf("Apply = %+v, %v; want a text change", ed.Change, err)
	}
	want := "zeroth line\nfirst line\nsecond line\n"
	if got, err := srv.Text(bridgetest.TextPath); err != nil || got != want {
		t.Errorf("server text %q (%v), want %q", got, err, want)
	}
	var got string
	if err := h.room.View(testutil.Context(t), func(d *ydoc.Doc) error {
		var err error
		got, err = d.Text()
		return err
	}); err != nil || got != want {
		t.Errorf("replica text %q (%v), want %q", got, err, want)
	}
}

func TestSubscriptionDropsWhenFull(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	slow := h.room.Subscribe(1)
	for i := range 3 {
		if _, err := h.room.Apply(testutil.Context(t), insertCell(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// The buffer holds the first event (a change, or the synced event that can trail
	// WaitSynced); the other changes were dropped rather than stall the room.
	if d := slow.Dropped(); d < 2 {
		t.Errorf("Dropped = %d after 3 change events into a buffer of 1, want at least 2", d)
	}
	if e := <-slow.C; e.Kind != bridge.EventChanged && e.Kind != bridge.EventSynced {
		t.Errorf("the kept event is %s, want changed or synced", e.Kind)
	}
	slow.Close()
	if _, ok := <-slow.C; ok {
		t.Error("C still open after Close")
	}
	slow.Close() // twice is fine
}

func TestNewRoomValidation(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name string
		opts bridge.RoomOptions
	}{
		{"no path", bridge.RoomOptions{Kind: ydoc.KindNotebook, Jupyter: srv}},
		{"no kind", bridge.RoomOptions{Path: nbPath, Jupyter: srv}},
		{"unknown kind", bridge.RoomOptions{Path: nbPath, Kind: ydoc.Kind(9), Jupyter: srv}},
		{"no server", bridge.RoomOptions{Path: nbPath, Kind: ydoc.KindNotebook}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := bridge.NewRoom(tc.opts); err == nil {
				t.Errorf("NewRoom succeeded: %v", r)
			}
		})
	}
}

func TestRunTwiceAndCloseBeforeRun(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	if err := h.room.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}

	opts := bridgetest.FastRoomOptions()
	opts.Path, opts.Kind, opts.Jupyter = nbPath, ydoc.KindNotebook, srv
	r, err := bridge.NewRoom(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	dials := srv.DialCalls()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after Close = %v, want nil", err)
		}
	case <-time.After(testutil.WaitLimit):
		r.Close()
		<-done
		t.Fatal("Run after Close did not return")
	}
	if srv.DialCalls() != dials {
		t.Errorf("a room closed before Run joined the room")
	}
	if err := r.WaitSynced(testutil.Context(t)); !errors.Is(err, bridge.ErrRoomClosed) {
		t.Errorf("WaitSynced on a room closed before Run = %v, want ErrRoomClosed", err)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	srv := newServer(t)
	opts := bridgetest.FastRoomOptions()
	opts.Path, opts.Kind, opts.Jupyter = nbPath, ydoc.KindNotebook, srv
	r, err := bridge.NewRoom(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := r.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatal(err)
	}
	c := liveConn(t, srv)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after its context ended = %v, want nil", err)
		}
	case <-time.After(testutil.WaitLimit):
		t.Fatal("Run did not return after its context ended")
	}
	if !c.ClosedNormally() {
		t.Error("the connection was not closed normally when the context ended")
	}
}

func TestEditValidationErrorChangesNothing(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	c := liveConn(t, srv)
	updates := c.CountReceived(ydoc.MsgSync, ydoc.SyncUpdate)
	_, err := h.room.Apply(testutil.Context(t), ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.DeleteCells(5, 1) }))
	if !errors.Is(err, ydoc.ErrOutOfRange) {
		t.Fatalf("Apply deleting a cell that is not there: %v, want ErrOutOfRange", err)
	}
	if _, err := h.room.Save(testutil.Context(t)); err != nil { // a round trip: anything sent before it arrived
		t.Fatal(err)
	}
	if n := c.CountReceived(ydoc.MsgSync, ydoc.SyncUpdate); n != updates {
		t.Errorf("a failed edit sent %d updates", n-updates)
	}
	if p := h.room.Info().PendingEdits; p != 0 {
		t.Errorf("PendingEdits = %d after a failed edit", p)
	}
	assertCellsOnce(t, srv, nbPath, defaultIDs...)
}

func TestViewWaitsForFirstSync(t *testing.T) {
	srv := newServer(t)
	srv.Down()
	h := startRoom(t, srv, nbPath, ydoc.KindNotebook, nil)
	res := make(chan []string, 1)
	go func() {
		var ids []string
		err := h.room.View(testutil.Context(t), func(d *ydoc.Doc) error {
			ids = d.CellIDs()
			return nil
		})
		if err != nil {
			ids = []string{"error: " + err.Error()}
		}
		res <- ids
	}()
	awaitServer(t, srv, "connection attempts", func() bool { return srv.OpenCalls() >= 2 })
	select {
	case ids := <-res:
		t.Fatalf("View returned %v before the room ever synced", ids)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.room.View(ctx, func(*ydoc.Doc) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("View with an expiring context before sync: %v, want DeadlineExceeded", err)
	}

	srv.Up()
	select {
	case ids := <-res:
		if !slices.Equal(ids, defaultIDs) {
			t.Errorf("View after the first sync saw %v, want the server's %v", ids, defaultIDs)
		}
	case <-time.After(testutil.WaitLimit):
		t.Fatal("View did not run after the room synced")
	}
}

// A durable edit the server confirmed but lost (killed before saving, rebuilt from the file) is
// re-run after the reset; a plain one is not.
func TestRestartBeforeSaveReplaysConfirmedDurableEdit(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	ctx := testutil.Context(t)
	durable := func(id string) ydoc.Edit {
		return ydoc.InsertCells{Cells: []ydoc.Cell{{ID: id, Type: ydoc.CellCode, Source: id}}}
	}
	if _, err := h.room.Apply(ctx, durable("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Apply(ctx, insertCell("plain")); err != nil {
		t.Fatal(err)
	}
	srv.Restart(bridgetest.RestartOptions{}) // rebuilt from the file, which never had them
	h.await("reset", kindIs(bridge.EventReset))
	h.await("synced after the reset", kindIs(bridge.EventSynced))
	awaitServer(t, srv, "the durable edit re-run", func() bool { return srv.CountCell(nbPath, "kept") == 1 })
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "kept")
}

// Joining measures the replica without encoding it: its size is the server's step 2, which is
// the whole document (here with no housekeeping tick ever running, so nothing else measured it).
func TestJoinSizesReplicaFromTheServersStepTwo(t *testing.T) {
	srv := newServer(t)
	h := startRoom(t, srv, bridgetest.NotebookPath, ydoc.KindNotebook, func(o *bridge.RoomOptions) { o.TickInterval = time.Hour })
	h.await("synced", kindIs(bridge.EventSynced))
	var encoded int
	if err := h.room.View(testutil.Context(t), func(d *ydoc.Doc) error {
		u, err := d.EncodeStateAsUpdate(nil)
		encoded = len(u)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got := h.room.Sizes().ReplicaBytes
	if got == 0 || got < encoded*9/10 || got > encoded*11/10 {
		t.Errorf("replica size after joining %d bytes; the replica encodes to %d", got, encoded)
	}
}

// Proposal.Applied says when an edit is in the replica and on its way, before the server
// confirmed it; never for an edit that waits for the room or fails.
func TestProposalAppliedSaysOnItsWayBeforeTheConfirmation(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)

	applyNotify := func(ctx context.Context, fn ydoc.EditFunc) (<-chan struct{}, <-chan editResult) {
		applied := make(chan struct{}, 1)
		res := make(chan editResult, 1)
		go func() {
			p, err := h.room.Propose(ctx, bridge.Proposal{Edit: fn, Applied: func() { applied <- struct{}{} }})
			if err != nil {
				res <- editResult{err: err}
				return
			}
			ed, err := p.Wait(ctx)
			res <- editResult{ed.Change, err}
		}()
		return applied, res
	}

	srv.HoldEchoes()
	applied, res := applyNotify(testutil.Context(t), insertCell("early"))
	select {
	case <-applied:
	case <-time.After(testutil.WaitLimit):
		t.Fatal("not told the edit was on its way")
	}
	notReturned(t, res, "before the server echoed it")
	awaitServer(t, srv, "the edit in the server document", func() bool { return srv.CountCell(nbPath, "early") == 1 })
	srv.ReleaseEchoes()
	if r := awaitEdit(t, res, "after the echo"); r.err != nil {
		t.Fatalf("Propose with Applied: %v", r.err)
	}

	// A failing edit: never on its way.
	applied, res = applyNotify(testutil.Context(t), func(tx *ydoc.Txn, _ bool) error { return errors.New("refused") })
	if r := awaitEdit(t, res, "a failing edit"); r.err == nil {
		t.Fatal("a failing edit succeeded")
	}
	select {
	case <-applied:
		t.Fatal("told a failing edit was on its way")
	default:
	}

	// The room away: the edit waits for it, unapplied; told nothing, it is withdrawn.
	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	ctx, cancel := context.WithTimeout(testutil.Context(t), 200*time.Millisecond)
	defer cancel()
	applied, res = applyNotify(ctx, insertCell("away"))
	r := awaitEdit(t, res, "an edit while the room is away")
	var withdrawn *bridge.WithdrawnError
	if !errors.As(r.err, &withdrawn) {
		t.Fatalf("while away: %v, want withdrawn", r.err)
	}
	select {
	case <-applied:
		t.Fatal("told an edit that waited for the room was on its way")
	default:
	}
}
