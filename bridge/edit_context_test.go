package bridge_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Apply's contract: if ctx ends first, the error says whether the edit was withdrawn or is on
// its way. These tests hold the room loop inside OpenDocSession (a server that accepts the
// connection but does not answer) to see whether Apply keeps it.

// The loop is blocked before it ever accepts the edit: nothing was applied, so the caller must
// learn that the edit was withdrawn.
func TestEditWithdrawnWhileConnectIsBlocked(t *testing.T) {
	srv := newServer(t)
	srv.BlockOpen()
	defer srv.UnblockOpen()
	h := startRoom(t, srv, nbPath, ydoc.KindNotebook, nil)
	awaitServer(t, srv, "the room blocked in OpenDocSession", func() bool { return srv.BlockedOpens() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := h.room.Apply(ctx, insertCell("never-applied"))
	if !isWithdrawn(err) {
		t.Errorf("Apply whose context expired before the room took it: err %v (%T), want *bridge.WithdrawnError", err, err)
	}
}

// The loop accepted the edit while disconnected, then blocked in OpenDocSession: when the
// caller gives up, Apply must return promptly (withdrawing the queued edit).
func TestEditHonoursContextWhileConnectIsBlocked(t *testing.T) {
	srv := newServer(t)
	srv.Down()
	h := startRoom(t, srv, nbPath, ydoc.KindNotebook, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := editAsync(ctx, h.room, insertCell("queued"))
	testutil.Eventually(t, "the edit queued", func() bool { return h.room.Info().PendingEdits == 1 })

	srv.BlockOpen()
	defer srv.UnblockOpen()
	awaitServer(t, srv, "the room blocked in OpenDocSession", func() bool { return srv.BlockedOpens() == 1 })
	cancel()
	select {
	case r := <-res:
		if !isWithdrawn(r.err) {
			t.Errorf("Apply after its context ended: err %v (%T), want *bridge.WithdrawnError", r.err, r.err)
		}
	case <-time.After(time.Second):
		srv.UnblockOpen()
		r := awaitEdit(t, res, "after the session call was released")
		t.Errorf("Apply ignored its cancelled context for over a second while the room was connecting; it returned %v only once OpenDocSession did", r.err)
	}
}

// An edit (Apply) that reaches the room loop while the room is shutting down (stop drains pending
// requests) must still return when the room is gone, not wait for its own context.
func TestEditDuringShutdownReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bridgetest.New()
		srv.EchoAwarenessToSender(false)
		opts := bridgetest.FastRoomOptions()
		opts.Path, opts.Kind, opts.Jupyter = nbPath, ydoc.KindNotebook, srv
		room, err := bridge.NewRoom(opts)
		if err != nil {
			t.Fatal(err)
		}
		ran := make(chan struct{})
		go func() {
			_ = room.Run(context.Background())
			close(ran)
		}()
		if err := room.WaitSynced(context.Background()); err != nil {
			t.Fatal(err)
		}

		// Hold the room loop inside stop, at the normal close.
		release := make(chan struct{})
		srv.OnCloseNormal(func(*bridgetest.Conn) { <-release })
		closed := make(chan struct{})
		go func() {
			room.Close()
			close(closed)
		}()
		synctest.Wait()

		// An edit arrives now; stop's drain will take it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		res := make(chan error, 1)
		go func() {
			_, err := room.Apply(ctx, insertCell("late"))
			res <- err
		}()
		synctest.Wait()
		close(release)
		<-closed
		<-ran

		start := time.Now()
		err = <-res
		if waited := time.Since(start); waited > time.Second {
			t.Errorf("Apply returned %v after the room had stopped, only when its context expired (%v later)", err, waited)
		}
		if !errors.Is(err, bridge.ErrRoomClosed) {
			t.Errorf("Apply during shutdown: err %v (%T), want one wrapping ErrRoomClosed", err, err)
		}
	})
}
