package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// newServer returns a fake with the default file table, echoing awareness to the sender like
// pycrdt-websocket does.
func newServer(t *testing.T) *bridgetest.Server {
	t.Helper()
	return bridgetest.New()
}

// harness is one room running against a fake server.
type harness struct {
	t    *testing.T
	srv  *bridgetest.Server
	room *bridge.Room
	sub  *bridge.Subscription
	ran  chan struct{} // closed when Run returned
	err  error         // Run's result, once ran is closed
}

// runResult waits for Run to return and gives its result.
func (h *harness) runResult() error {
	h.t.Helper()
	select {
	case <-h.ran:
		return h.err
	case <-time.After(testutil.WaitLimit):
		h.t.Fatalf("room %s: Run did not return within %v", h.room.Path(), testutil.WaitLimit)
	}
	return nil
}

// startRoom creates a room for path on srv with fast timings (adjusted by mod), subscribes to
// its events before it runs, runs it, and closes it when the test ends.
func startRoom(t *testing.T, srv *bridgetest.Server, path string, kind ydoc.Kind, mod func(*bridge.RoomOptions)) *harness {
	t.Helper()
	opts := bridgetest.FastRoomOptions()
	opts.Path, opts.Kind, opts.Jupyter = path, kind, srv
	if mod != nil {
		mod(&opts)
	}
	room, err := bridge.NewRoom(opts)
	if err != nil {
		t.Fatalf("NewRoom: %v", err)
	}
	h := &harness{t: t, srv: srv, room: room, sub: room.Subscribe(4096), ran: make(chan struct{})}
	go func() {
		h.err = room.Run(context.Background())
		close(h.ran)
	}()
	t.Cleanup(func() {
		room.Close()
		select {
		case <-h.ran:
		case <-time.After(testutil.WaitLimit):
			t.Errorf("room %s: Run did not return after Close", path)
		}
	})
	return h
}

// startSynced is startRoom on the default notebook plus WaitSynced.
func startSynced(t *testing.T, srv *bridgetest.Server, mod func(*bridge.RoomOptions)) *harness {
	t.Helper()
	h := startRoom(t, srv, bridgetest.NotebookPath, ydoc.KindNotebook, mod)
	if err := h.room.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatalf("WaitSynced: %v", err)
	}
	return h
}

// await reads the room's events until one matches, failing the test after testutil.WaitLimit or when the
// subscription closes. It returns the matching event.
func (h *harness) await(what string, match func(bridge.Event) bool) bridge.Event {
	h.t.Helper()
	return awaitEvent(h.t, h.sub, what, match)
}

func awaitEvent(t *testing.T, sub *bridge.Subscription, what string, match func(bridge.Event) bool) bridge.Event {
	t.Helper()
	timer := time.NewTimer(testutil.WaitLimit)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				t.Fatalf("waiting for %s: subscription closed; events seen: %v", what, seen)
			}
			seen = append(seen, e.Kind.String())
			if match(e) {
				return e
			}
		case <-timer.C:
			t.Fatalf("waiting for %s: nothing after %v; events seen: %v", what, testutil.WaitLimit, seen)
		}
	}
}

func kindIs(k bridge.EventKind) func(bridge.Event) bool {
	return func(e bridge.Event) bool { return e.Kind == k }
}

// awaitServer waits until cond holds on the fake.
func awaitServer(t *testing.T, srv *bridgetest.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	if err := srv.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// liveConn returns the one live connection of the fake.
func liveConn(t *testing.T, srv *bridgetest.Server) *bridgetest.Conn {
	t.Helper()
	var c *bridgetest.Conn
	awaitServer(t, srv, "one live connection", func() bool {
		live := srv.LiveConns()
		if len(live) == 1 {
			c = live[0]
			return true
		}
		return false
	})
	return c
}

// awaitResyncs waits until the client sent n more sync step 1 frames on c than it had: proof
// that the room loop went round its periodic resync n times.
func awaitResyncs(t *testing.T, srv *bridgetest.Server, c *bridgetest.Conn, n int) {
	t.Helper()
	base := c.CountReceived(ydoc.MsgSync, ydoc.SyncStep1)
	awaitServer(t, srv, "periodic resyncs", func() bool {
		return c.CountReceived(ydoc.MsgSync, ydoc.SyncStep1) >= base+n
	})
}

// insertCell is an edit appending a markdown cell with a fixed id. It does not special-case
// replays: running it on a replica that already holds the cell fails, which tests want to see.
func insertCell(id string) ydoc.EditFunc {
	return func(tx *ydoc.Txn, _ bool) error {
		return tx.InsertCells(tx.NumCells(), []ydoc.Cell{{ID: id, Type: ydoc.CellMarkdown, Source: "cell " + id}})
	}
}

type editResult struct {
	change ydoc.Change
	err    error
}

// editAsync runs Apply in a goroutine.
func editAsync(ctx context.Context, room *bridge.Room, fn ydoc.EditFunc) <-chan editResult {
	res := make(chan editResult, 1)
	go func() {
		ed, err := room.Apply(ctx, fn)
		res <- editResult{ed.Change, err}
	}()
	return res
}

// awaitEdit waits for an Apply started with editAsync.
func awaitEdit(t *testing.T, res <-chan editResult, what string) editResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(testutil.WaitLimit):
		t.Fatalf("%s: Apply did not return within %v", what, testutil.WaitLimit)
	}
	return editResult{}
}

// notReturned fails if the edit already returned.
func notReturned(t *testing.T, res <-chan editResult, why string) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("Apply returned %s: change %+v, err %v", why, r.change, r.err)
	default:
	}
}

// roomCellIDs reads the cell ids of a room's replica.
func roomCellIDs(t *testing.T, room *bridge.Room) []string {
	t.Helper()
	var ids []string
	if err := room.View(testutil.Context(t), func(d *ydoc.Doc) error {
		ids = d.CellIDs()
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return ids
}

// assertCellsOnce checks that the server document holds each id exactly once and nothing else
// twice.
func assertCellsOnce(t *testing.T, srv *bridgetest.Server, path string, ids ...string) {
	t.Helper()
	got := srv.CellIDs(path)
	counts := map[string]int{}
	for _, id := range got {
		counts[id]++
	}
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("server document holds cell %q %d times, want once; cells: %v", id, counts[id], got)
		}
	}
	for id, n := range counts {
		if n > 1 && !slices.Contains(ids, id) {
			t.Errorf("server document holds cell %q %d times; cells: %v", id, n, got)
		}
	}
}

// defaultIDs are the cell ids of bridgetest.DefaultNotebook.
var defaultIDs = []string{"cell-a", "cell-b"}

// clock is an adjustable clock for RoomOptions.Now: real time plus an offset.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func isWithdrawn(err error) bool {
	var w *bridge.WithdrawnError
	return errors.As(err, &w)
}

func isUnconfirmed(err error) bool {
	var u *bridge.UnconfirmedError
	return errors.As(err, &u)
}

// statusOf returns the HTTP status an error carries (StatusCode method), if any.
func statusOf(err error) (int, bool) {
	var s interface{ StatusCode() int }
	if !errors.As(err, &s) {
		return 0, false
	}
	return s.StatusCode(), true
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// awaitTypedWithInsert waits until the room's replica holds the fixture with one cell inserted
// (4 cells) and " typed" at the end of its title cell (typeInto on cell-b).
func awaitTypedWithInsert(t *testing.T, room *bridge.Room) {
	t.Helper()
	ctx := testutil.Context(t)
	testutil.Eventually(t, "the typing in the replica", func() bool {
		var ok bool
		_ = room.View(ctx, func(d *ydoc.Doc) error {
			nb, _ := d.Notebook()
			ok = len(nb.Cells) == 4 && nb.Cells[1].Source == "# Title typed"
			return nil
		})
		return ok
	})
}
