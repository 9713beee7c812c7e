package bridge_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Regressions for the faults a code review found: each test fails on the code before its fix.

// poisonServer injects, on every connection, an update that y-crdt panics on: a room whose
// document y-crdt cannot hold.
type poisonServer struct {
	*bridgetest.Server
	poison []byte
	dials  atomic.Int64
}

func (p *poisonServer) DialRoom(ctx context.Context, roomID, sessionID string) (bridge.Conn, error) {
	c, err := p.Server.DialRoom(ctx, roomID, sessionID)
	if err == nil {
		p.dials.Add(1)
		p.Server.Inject(ydoc.EncodeSync(ydoc.SyncUpdate, p.poison))
	}
	return c, err
}

// A document y-crdt cannot load fails the room after a few attempts instead of resetting
// and reconnecting at full speed forever.
func TestPoisonDocumentFailsRoom(t *testing.T) {
	poison, _ := hex.DecodeString("0204000084858080808080808080010004f09f98800a03c10005ffffffffffffffffff010503c5ffffffffffffffffff01000300077b2265223a317d0203000800030001770176828580808080808080800180808080802001077b2261223a317d0180808080080180808080802003")
	srv := &poisonServer{Server: newServer(t), poison: poison}
	h := startRoom(t, srv.Server, bridgetest.NotebookPath, ydoc.KindNotebook, func(o *bridge.RoomOptions) { o.Jupyter = srv })
	e := h.await("failed", kindIs(bridge.EventFailed))
	if !strings.Contains(e.Err.Error(), "cannot load this document") {
		t.Errorf("failure %v", e.Err)
	}
	if n := srv.dials.Load(); n < 2 || n > 4 {
		t.Errorf("%d dials before giving up, want 3", n)
	}
}

// noStep2Server swallows the server's step 2: a handshake that never completes.
type noStep2Server struct {
	*bridgetest.Server
	dials atomic.Int64
}

type noStep2Conn struct{ bridge.Conn }

func (c noStep2Conn) Read() ([]byte, error) {
	for {
		b, err := c.Conn.Read()
		if err != nil {
			return b, err
		}
		if f, derr := ydoc.DecodeFrame(b); derr == nil && f.Type == ydoc.MsgSync && f.Sync == ydoc.SyncStep2 {
			continue
		}
		return b, nil
	}
}

func (p *noStep2Server) DialRoom(ctx context.Context, roomID, sessionID string) (bridge.Conn, error) {
	c, err := p.Server.DialRoom(ctx, roomID, sessionID)
	if err != nil {
		return nil, err
	}
	p.dials.Add(1)
	return noStep2Conn{c}, nil
}

// Without a step 2 the room asks again, then reconnects, instead of waiting forever.
func TestHandshakeTimeoutReconnects(t *testing.T) {
	srv := &noStep2Server{Server: newServer(t)}
	startRoom(t, srv.Server, bridgetest.NotebookPath, ydoc.KindNotebook, func(o *bridge.RoomOptions) {
		o.Jupyter = srv
		o.HandshakeTimeout = 20 * time.Millisecond
	})
	testutil.Eventually(t, "a second dial after the handshake timed out", func() bool { return srv.dials.Load() >= 2 })
}

// A save waiting for its answer when the connection drops fails at once.
func TestSaveFailsOnDisconnect(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.StallWrites()
	done := make(chan error, 1)
	go func() {
		_, err := h.room.Save(testutil.Context(t))
		done <- err
	}()
	testutil.Eventually(t, "the save request queued", func() bool { return h.room.Info().Status == bridge.StatusSynced })
	srv.Restart(bridgetest.RestartOptions{KeepSession: true, KeepDoc: true})
	srv.ResumeWrites()
	select {
	case err := <-done:
		if !errors.Is(err, bridge.ErrNotSynced) {
			t.Errorf("Save across a disconnect: %v, want ErrNotSynced", err)
		}
	case <-time.After(testutil.WaitLimit):
		t.Fatal("Save still waiting after the connection dropped")
	}
}

// A read whose caller gave up never runs later (it would race with the caller's variables).
func TestAbandonedReadsDoNotRun(t *testing.T) {
	srv := newServer(t)
	srv.Down()
	h := startRoom(t, srv, bridgetest.NotebookPath, ydoc.KindNotebook, nil)
	var ran atomic.Int64
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		err := h.room.View(ctx, func(*ydoc.Doc) error { ran.Add(1); return nil })
		cancel()
		if err == nil {
			t.Fatal("a read of an unsynced room succeeded")
		}
	}
	srv.Up()
	if err := h.room.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := h.room.View(testutil.Context(t), func(*ydoc.Doc) error { return nil }); err != nil { // the loop has drained
		t.Fatal(err)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("%d abandoned read callbacks ran after their callers returned", n)
	}
}

// Closing the room with an edit in flight reports its outcome as unknown, not as failed: it was
// sent and may well have landed.
func TestCloseWithEditInFlightIsUnconfirmed(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	srv.HoldEchoes()
	errc := make(chan error, 1)
	go func() {
		_, err := h.room.Apply(context.Background(), ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.SetSource(0, "delivered") }))
		errc <- err
	}()
	if err := srv.Await(testutil.Context(t), func() bool { return srv.Held() > 0 }); err != nil {
		t.Fatal(err)
	}
	h.room.Close()
	err := <-errc
	var ue *bridge.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, bridge.ErrRoomClosed) {
		t.Errorf("Apply in flight at Close: %v (%T), want *UnconfirmedError wrapping ErrRoomClosed", err, err)
	}
	// Agents hear it too (a caller may have stopped waiting): one notice, with the count.
	ev := awaitEvent(t, h.sub, "the unconfirmed-edit notice", kindIs(bridge.EventNotice))
	if n := ev.Notice; n == nil || n.Topic != bridge.TopicEdit || n.Level != bridge.NoticeWarning || n.Data["unconfirmed"] != 1 || n.Path != h.room.Path() {
		t.Errorf("notice %+v", ev.Notice)
	}
}

// A stuck pending set makes the room ask the server once, not ping-pong step 1 / step 2. In
// virtual time (testing/synctest): once every goroutine is idle, the exchange is over.
func TestStuckPendingAskedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		startSynced(t, srv, func(o *bridge.RoomOptions) { o.ResyncInterval = time.Hour })
		conn := srv.LiveConns()[0]
		before := conn.CountReceived(ydoc.MsgSync, ydoc.SyncStep1)
		// no structs; a delete set naming items nobody has
		srv.Inject(ydoc.EncodeSync(ydoc.SyncUpdate, []byte{0, 1, 0x99, 0x01, 1, 0, 3}))
		synctest.Wait()
		if n := conn.CountReceived(ydoc.MsgSync, ydoc.SyncStep1) - before; n != 1 {
			t.Fatalf("%d step 1 frames asking about the pending deletes, want 1", n)
		}
		// The answer leaves the same set pending: no further step 1 may follow, however many
		// ticks go by (a ping-pong room would send thousands of frames).
		time.Sleep(200 * time.Millisecond) // virtual: forty ticks
		synctest.Wait()
		if n := conn.CountReceived(ydoc.MsgSync, ydoc.SyncStep1) - before; n > 1 {
			t.Errorf("%d step 1 frames for one stuck pending set", n)
		}
	})
}

// A panic in a read callback (a tool bug) is an error for that call, not a dead process.
func TestReadCallbackPanicIsAnError(t *testing.T) {
	srv := newServer(t)
	h := startSynced(t, srv, nil)
	err := h.room.View(testutil.Context(t), func(*ydoc.Doc) error {
		var cells []ydoc.Cell
		_ = cells[3]
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("View with a panicking callback: %v", err)
	}
	_, err = h.room.Apply(testutil.Context(t), ydoc.EditFunc(func(*ydoc.Txn, bool) error { panic("tool bug") }))
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Apply with a panicking callback: %v", err)
	}
	if h.room.Info().Resets != 0 {
		t.Error("a tool's panic was treated as a broken replica and reset the room")
	}
	if _, err := h.room.Apply(testutil.Context(t), insertCell("still-works")); err != nil {
		t.Fatalf("the room no longer edits: %v", err)
	}
}
