package bridge_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// newManager returns a manager over srv with fast room timings, closed when the test ends.
func newManager(t *testing.T, srv *bridgetest.Server, mod func(*bridge.ManagerOptions)) *bridge.Manager {
	t.Helper()
	opts := bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop(), Room: bridgetest.FastRoomOptions(), JoinTimeout: testutil.WaitLimit}
	if mod != nil {
		mod(&opts)
	}
	m, err := bridge.NewManager(opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// runManager runs m until the test ends.
func runManager(t *testing.T, m *bridge.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Manager.Run = %v", err)
			}
		case <-time.After(testutil.WaitLimit):
			t.Error("Manager.Run did not return")
		}
	})
}

func openRoom(t *testing.T, m *bridge.Manager, path string, kind ydoc.Kind) *bridge.Room {
	t.Helper()
	r, err := m.Open(testutil.Context(t), path, kind)
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	return r
}

func TestManagerConcurrentOpensShareRoom(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	const n = 8
	rooms := make([]*bridge.Room, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rooms[i], errs[i] = m.Open(testutil.Context(t), nbPath, ydoc.KindNotebook)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Open #%d: %v", i, errs[i])
		}
		if rooms[i] != rooms[0] {
			t.Fatalf("Open #%d returned another room than Open #0", i)
		}
	}
	if c, d := srv.OpenCalls(), srv.DialCalls(); c != 1 || d != 1 {
		t.Errorf("%d session calls and %d dials for one path, want 1 each", c, d)
	}
	if rs := m.Rooms(); len(rs) != 1 || rs[0] != rooms[0] {
		t.Errorf("Rooms() = %v, want the one shared room", rs)
	}
	if m.Get(nbPath, ydoc.KindNotebook) != rooms[0] || m.Get(nbPath, ydoc.KindText) != nil {
		t.Error("Get does not find the room by path and kind")
	}
}

func TestManagerOpenChecksFile(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	for _, tc := range []struct {
		name, path string
		kind       ydoc.Kind
		want       string
		notFound   bool
	}{
		{"missing", "nope.ipynb", ydoc.KindNotebook, "no such file", true},
		{"directory", bridgetest.DirPath, ydoc.KindNotebook, "is a directory", false},
		{"text file as notebook", bridgetest.TextPath, ydoc.KindNotebook, "not a notebook", false},
		{"notebook as text", nbPath, ydoc.KindText, "not a text file", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := m.Open(testutil.Context(t), tc.path, tc.kind)
			if err == nil {
				t.Fatalf("Open succeeded: %v", r.Info())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v, want it to say %q", err, tc.want)
			}
			if bridge.IsNotFound(err) != tc.notFound {
				t.Errorf("IsNotFound(%v) = %v, want %v", err, !tc.notFound, tc.notFound)
			}
		})
	}
	if c := srv.OpenCalls(); c != 0 {
		t.Errorf("OpenDocSession called %d times for files that cannot be opened", c)
	}
	if rs := m.Rooms(); len(rs) != 0 {
		t.Errorf("Rooms() = %d rooms, want none", len(rs))
	}
}

func TestManagerRefusedToken(t *testing.T) {
	srv := newServer(t)
	srv.RefuseTokens()
	m := newManager(t, srv, nil)
	start := time.Now()
	_, err := m.Open(testutil.Context(t), nbPath, ydoc.KindNotebook)
	if err == nil {
		t.Fatal("Open succeeded with a refused token")
	}
	if el := time.Since(start); el > testutil.WaitLimit/2 {
		t.Errorf("Open took %v to report a refused token (JoinTimeout %v)", el, testutil.WaitLimit)
	}
	if st, ok := statusOf(err); !ok || st != 403 {
		t.Errorf("Open: %v; want an error with StatusCode 403 (got %d, %v)", err, st, ok)
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() {
		t.Errorf("Open: %v; want a permanent error", err)
	}
	if c := srv.OpenCalls(); c > 2 {
		t.Errorf("OpenDocSession called %d times for a refused token, want at most 2", c)
	}
	testutil.Eventually(t, "the failed room removed", func() bool { return len(m.Rooms()) == 0 })
	if c := srv.OpenCalls(); c > 2 {
		t.Errorf("OpenDocSession called %d times after the room failed", c)
	}
}

// After a failure the room stays in the manager's table until its goroutine removes it; an Open
// in that window gets the dead room's error although the server now accepts the token.
func TestManagerOpenAfterFailureStartsAfresh(t *testing.T) {
	srv := newServer(t)
	srv.RefuseTokens()
	hold := &blockingWriter{match: []byte("room failed"), entered: make(chan struct{}), release: make(chan struct{})}
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.Logger = zerolog.New(hold).Level(zerolog.WarnLevel) })
	defer hold.Release()
	if _, err := m.Open(testutil.Context(t), nbPath, ydoc.KindNotebook); err == nil {
		t.Fatal("Open succeeded with a refused token")
	}
	select {
	case <-hold.entered: // the manager goroutine is between Run returning and the removal
	case <-time.After(testutil.WaitLimit):
		t.Fatal("the manager never logged the failure")
	}
	srv.AcceptTokens()
	if _, err := m.Open(testutil.Context(t), nbPath, ydoc.KindNotebook); err != nil {
		t.Errorf("Open once the server accepts the token: %v (OpenDocSession calls: %d)", err, srv.OpenCalls())
	}
}

// blockingWriter blocks the first write containing match until Release.
type blockingWriter struct {
	match   []byte
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	relOnce sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.match) {
		w.once.Do(func() {
			close(w.entered)
			<-w.release
		})
	}
	return len(p), nil
}

func (w *blockingWriter) Release() { w.relOnce.Do(func() { close(w.release) }) }

// Idle closing reads the manager's clock (and rooms record their use by it): while the clock
// stands still a room is not idle however long the test runs; once it moves past the timeout the
// room closes.
func TestManagerIdleClosingFollowsItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		var mu sync.Mutex
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}
		m := newManager(t, srv, func(o *bridge.ManagerOptions) {
			o.IdleTimeout, o.Now, o.Room.Now = 40*time.Millisecond, clock, nil
		})
		room := openRoom(t, m, nbPath, ydoc.KindNotebook)
		runManager(t, m)
		// Ten idle checks (every 10ms) pass; none may find the room idle.
		time.Sleep(100 * time.Millisecond) // virtual: exactly ten checks
		synctest.Wait()
		select {
		case <-room.Done():
			t.Fatal("the room was closed as idle although the manager's clock did not move")
		default:
		}
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
		select {
		case <-room.Done():
		case <-time.After(testutil.WaitLimit):
			t.Fatalf("the room was not closed within %v after its clock passed the idle timeout", testutil.WaitLimit)
		}
	})
}

func TestManagerClosesIdleRooms(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.IdleTimeout = 40 * time.Millisecond })
	watched := openRoom(t, m, bridgetest.NestedPath, ydoc.KindNotebook) // idle longest, but subscribed
	sub := watched.Subscribe(64)
	defer sub.Close()
	idle := openRoom(t, m, nbPath, ydoc.KindNotebook)
	idleConn := srv.LiveConns()[1]
	runManager(t, m)

	select {
	case <-idle.Done():
	case <-time.After(testutil.WaitLimit):
		t.Fatalf("the idle room was not closed within %v (IdleTimeout 40ms)", testutil.WaitLimit)
	}
	if !errors.Is(idle.Err(), bridge.ErrRoomClosed) {
		t.Errorf("idle room Err = %v, want ErrRoomClosed", idle.Err())
	}
	if !idleConn.ClosedNormally() {
		t.Error("the idle room did not leave with a normal close")
	}
	select {
	case <-watched.Done():
		t.Fatal("a room with a subscriber was closed as idle")
	default:
	}
	testutil.Eventually(t, "the idle room removed", func() bool {
		rs := m.Rooms()
		return len(rs) == 1 && rs[0] == watched
	})

	if m.Get(nbPath, ydoc.KindNotebook) != nil {
		t.Error("Get still finds the idle room")
	}
}

func TestManagerCloseStopsEveryRoom(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	sub := m.Subscribe(256)
	rooms := []*bridge.Room{
		openRoom(t, m, nbPath, ydoc.KindNotebook),
		openRoom(t, m, bridgetest.NestedPath, ydoc.KindNotebook),
		openRoom(t, m, bridgetest.TextPath, ydoc.KindText),
	}
	conns := srv.LiveConns()
	if len(conns) != 3 {
		t.Fatalf("%d live connections for 3 rooms", len(conns))
	}

	m.Close()
	for _, r := range rooms {
		select {
		case <-r.Done():
		default:
			t.Errorf("room %s still running after Manager.Close", r.Path())
		}
	}
	for i, c := range conns {
		if !c.ClosedNormally() {
			t.Errorf("connection %d not closed normally", i)
		}
	}
	if rs := m.Rooms(); len(rs) != 0 {
		t.Errorf("Rooms() after Close = %d rooms", len(rs))
	}
	if _, err := m.Open(testutil.Context(t), nbPath, ydoc.KindNotebook); !errors.Is(err, bridge.ErrManagerStopped) {
		t.Errorf("Open after Close: %v, want ErrManagerStopped", err)
	}
	closed := map[string]bool{}
	for e := range sub.C { // closed by Manager.Close
		if e.Kind == bridge.EventClosed {
			closed[e.Path] = true
		}
	}
	if len(closed) != 3 {
		t.Errorf("EventClosed for %v, want all three rooms", closed)
	}
	m.Close() // twice is fine
}

func TestManagerRunReturnsOnClose(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background()) }()
	r := openRoom(t, m, nbPath, ydoc.KindNotebook)
	m.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(testutil.WaitLimit):
		t.Fatal("Run did not return after Close")
	}
	if err := m.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
	select {
	case <-r.Done():
	default:
		t.Error("room still running")
	}
}

func TestManagerSubscribePeerEdits(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	sub := m.Subscribe(256)
	defer sub.Close()
	room := openRoom(t, m, nbPath, ydoc.KindNotebook)

	// The peer's edits carry the server document's client id; its awareness names Bob.
	bob := ydoc.AwarenessUser{Username: "bob", Name: "Bob"}
	srv.Inject(ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(srv.DocClientID(nbPath), 1, mustJSON(t, map[string]any{"user": bob}))))
	awaitEvent(t, sub, "bob's awareness", kindIs(bridge.EventAwareness))

	if err := srv.EditDoc(nbPath, func(tx *ydoc.Txn) error {
		return tx.InsertCells(0, []ydoc.Cell{{ID: "peer-cell", Type: ydoc.CellCode, Source: "x = 1"}})
	}); err != nil {
		t.Fatal(err)
	}
	e := awaitEvent(t, sub, "the peer's insert", func(e bridge.Event) bool { return e.Kind == bridge.EventChanged })
	if e.Path != nbPath || e.Change.Local || !slices.Equal(e.Change.Inserted, []string{"peer-cell"}) {
		t.Errorf("event %+v: want a remote change of %s inserting peer-cell", e, nbPath)
	}
	if !slices.Equal(e.Authors, []string{"Bob"}) {
		t.Errorf("Authors = %v, want [Bob]", e.Authors)
	}
	if ids := roomCellIDs(t, room); !slices.Equal(ids, []string{"peer-cell", "cell-a", "cell-b"}) {
		t.Errorf("replica cells %v after the peer's insert", ids)
	}

	if err := srv.EditDoc(nbPath, func(tx *ydoc.Txn) error { return tx.SetSource(1, "print('changed')") }); err != nil {
		t.Fatal(err)
	}
	e = awaitEvent(t, sub, "the peer's source edit", func(e bridge.Event) bool { return e.Kind == bridge.EventChanged })
	if len(e.Change.Cells) != 1 || e.Change.Cells[0].ID != "cell-a" || !slices.Contains(e.Change.Cells[0].Fields, "source") {
		t.Errorf("Change.Cells = %+v, want cell-a's source", e.Change.Cells)
	}
}

func TestManagerStatAndList(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	fi, err := m.Stat(testutil.Context(t), nbPath)
	if err != nil || fi.Type != "notebook" || fi.Name != nbPath {
		t.Errorf("Stat = %+v, %v; want the notebook", fi, err)
	}
	if _, err := m.Stat(testutil.Context(t), "gone.ipynb"); !bridge.IsNotFound(err) {
		t.Errorf("Stat of a missing file: %v, want IsNotFound", err)
	}
	var paths []string
	list, err := m.List(testutil.Context(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list {
		paths = append(paths, f.Path)
	}
	if want := []string{bridgetest.DirPath, nbPath, bridgetest.TextPath}; !slices.Equal(paths, want) {
		t.Errorf("List root = %v, want %v", paths, want)
	}
	if list, err := m.List(testutil.Context(t), bridgetest.DirPath); err != nil || len(list) != 1 || list[0].Path != bridgetest.NestedPath {
		t.Errorf("List data = %+v, %v; want the nested notebook", list, err)
	}
	if _, err := m.List(testutil.Context(t), "missing"); !bridge.IsNotFound(err) {
		t.Errorf("List of a missing directory: %v, want IsNotFound", err)
	}
}

func TestNewManagerNeedsServer(t *testing.T) {
	if _, err := bridge.NewManager(bridge.ManagerOptions{}); err == nil {
		t.Error("NewManager without a server succeeded")
	}
}

func TestManagerCleansPaths(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	for _, bad := range []string{"../nb.ipynb", "/etc/passwd", "data/../../x", "a\\b.ipynb", "%2e%2e/nb.ipynb", "nb\x00.ipynb"} {
		if _, err := m.Open(testutil.Context(t), bad, ydoc.KindNotebook); !errors.Is(err, bridge.ErrBadPath) {
			t.Errorf("Open(%q): %v, want ErrBadPath", bad, err)
		}
	}
	if c := srv.OpenCalls(); c != 0 {
		t.Errorf("OpenDocSession called %d times for rejected paths", c)
	}
	a := openRoom(t, m, "./"+nbPath, ydoc.KindNotebook)
	b := openRoom(t, m, nbPath, ydoc.KindNotebook)
	if a != b || a.Path() != nbPath {
		t.Errorf("./%s and %s opened different rooms (paths %q, %q)", nbPath, nbPath, a.Path(), b.Path())
	}
	if m.Get("data/../"+nbPath, ydoc.KindNotebook) != nil {
		t.Error("Get accepted a path with ..")
	}
}

// Until a room of the server has synced, joins take turns (a fresh jupyter-collaboration creates
// its YStore database on the first room's use and breaks when rooms start together); after that
// they run in parallel.
func TestManagerFirstJoinsTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var files []bridgetest.File
		paths := []string{"a.ipynb", "b.ipynb", "c.ipynb", "d.ipynb", "e.ipynb", "f.ipynb"}
		for _, p := range paths {
			files = append(files, bridgetest.File{Path: p, Type: "notebook", Notebook: ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5,
				Metadata: map[string]any{}, Cells: []ydoc.Cell{{ID: "x", Type: ydoc.CellCode, Source: p}}}})
		}
		srv := bridgetest.New(files...)
		m := newManager(t, srv, nil)
		open := func(ps []string) chan error {
			errs := make(chan error, len(ps))
			for _, p := range ps {
				go func() {
					_, err := m.Open(testutil.Context(t), p, ydoc.KindNotebook)
					errs <- err
				}()
			}
			return errs
		}
		wait := func(errs chan error, n int) {
			t.Helper()
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		}

		srv.BlockOpen()
		errs := open(paths[:3])
		testutil.Eventually(t, "a join to reach the server", func() bool { return srv.BlockedOpens() >= 1 })
		synctest.Wait() // every goroutine idle: the others are not on their way to the server
		if n := srv.BlockedOpens(); n != 1 {
			t.Fatalf("%d joins at the server before any room synced, want 1", n)
		}
		srv.UnblockOpen()
		wait(errs, 3)

		srv.BlockOpen()
		errs = open(paths[3:])
		testutil.Eventually(t, "the later joins to reach the server together", func() bool { return srv.BlockedOpens() == 3 })
		srv.UnblockOpen()
		wait(errs, 3)
	})
}
