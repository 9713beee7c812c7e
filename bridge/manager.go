package bridge

import (
	"context"
	"errors"
	"fmt"
	pathpkg "path"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ManagerOptions configure a Manager. Zero values get defaults.
type ManagerOptions struct {
	Jupyter Jupyter
	Logger  zerolog.Logger
	// Room carries the identity and timings given to every room (Path, Kind, Jupyter, Logger and
	// OnEvent are set by the manager).
	Room RoomOptions
	// IdleTimeout closes rooms nobody used for this long (10 min; negative: never).
	IdleTimeout time.Duration
	// JoinTimeout bounds how long Open waits to join a room: its turn (firstJoin), the file's
	// check and the room's first sync (20s: far below the 60 s after which MCP clients give up).
	JoinTimeout time.Duration
	// FirstReadWait is how long a first read of a notebook whose room is not readable yet waits
	// for it before it answers from the file (OpenForRead; 150ms; negative: it always waits).
	FirstReadWait time.Duration
	// GlobalAwareness joins JupyterLab:globalAwareness, where JupyterLab's collaborators panel
	// looks: the agent is listed with the document it works on.
	GlobalAwareness bool
	// SaveConcurrency bounds the save requests in flight at once across rooms (4), when
	// Room.SaveInterval turns the save guard on.
	SaveConcurrency int
	// Now is the clock of idle closing, and of every room whose Room.Now is not set (time.Now
	// by default).
	Now func() time.Time
	// Journal keeps the write-ahead log of every document room (journal.go); nil: none. When Run
	// starts, the documents whose logs hold work the server may not have saved (the sidecar
	// stopped or died with it) are opened and rescued.
	Journal Journal
}

// GlobalAwarenessRoom is the id of JupyterLab's awareness-only room.
const GlobalAwarenessRoom = "JupyterLab:globalAwareness"

// ErrManagerStopped is returned by Open when the manager is not running.
var ErrManagerStopped = errors.New("bridge: room manager is not running")

// Manager opens rooms by path, shares them between callers, closes idle ones and publishes
// every room's events.
type Manager struct {
	opts ManagerOptions
	log  zerolog.Logger
	hub  *hub

	mu       sync.Mutex
	createMu sync.Mutex // one Create at a time: check-then-write must not interleave
	rooms    map[roomKey]*Room
	running  bool
	// life bounds every room; it ends when Run returns or Close is called.
	life   context.Context
	finish context.CancelFunc
	wg     sync.WaitGroup

	// publishMu serialises computing and sending what the agent publishes (presence, the
	// global room's fields), so a slower older update never lands after a newer one.
	publishMu sync.Mutex
	presence  Presence           // the agent's status and activity, for every room
	fileIDs   map[roomKey]string // documents' file ids, as learned (FileID)
	byFileID  map[string]roomKey
	hits      atomic.Int64 // Open found the room live
	misses    atomic.Int64 // Open had to join
	// warm is set once a room of this server has synced; until then joins take turns (first).
	warm   atomic.Bool
	first  chan struct{}
	global *Room // the global awareness room, when joined
	// globalNamed is closed once global is first set (Run starts joining the room).
	globalNamed     chan struct{}
	globalNamedOnce sync.Once
	// forkBases holds, for each fork this sidecar created, the document's state vector at the
	// time: a merge is refused when the document no longer contains it (it was rebuilt).
	forkBases map[string]ydoc.StateVector
	current   string // the document the agent touched last, as JupyterLab names it
	shown     string // the "current" last published (empty once that room closed)

	saves   *Saves      // the rooms' save requests: bounded and counted
	notices noticeBoard // what agents must be told (rescue.go)
	refused refusals    // notebooks whose join failed after a first read from the file (firstread.go)
}

type roomKey struct {
	path string
	kind ydoc.Kind
	fork string // a fork room of the document; "" for the document's own room
}

// NewManager validates options. It starts nothing; Run does.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if opts.Jupyter == nil {
		return nil, errors.New("manager: server is required")
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	if err := checkPingInterval(opts.Jupyter, opts.Room.PingInterval); err != nil {
		return nil, fmt.Errorf("manager: rooms: %w", err)
	}
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = 20 * time.Second
	}
	if opts.FirstReadWait == 0 {
		opts.FirstReadWait = 150 * time.Millisecond
	}
	if opts.SaveConcurrency <= 0 {
		opts.SaveConcurrency = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Room.Now == nil {
		opts.Room.Now = opts.Now
	}
	life, finish := context.WithCancel(context.Background())
	return &Manager{opts: opts, log: opts.Logger, hub: newHub(), rooms: map[roomKey]*Room{}, life: life, finish: finish,
		first: make(chan struct{}, 1), saves: NewSaves(opts.SaveConcurrency), globalNamed: make(chan struct{})}, nil
}

// JournalStats counts what the rooms' write-ahead log did (zero without one).
func (m *Manager) JournalStats() (JournalStats, bool) {
	if m.opts.Journal == nil {
		return JournalStats{}, false
	}
	return m.opts.Journal.Stats(), true
}

// recover opens the rooms of the documents whose logs hold work the server may not have saved:
// each adopts what its log holds and rescues it at its first sync (journal.go). A document the
// server cannot serve yet (it is starting) is tried again, with backoff, until the manager
// stops; one that is gone keeps its log, and its room says so.
func (m *Manager) recover() {
	docs, err := m.opts.Journal.AtRisk()
	if err != nil {
		m.log.Error().Err(err).Msg("could not list the journals holding unsaved work")
		return
	}
	for _, d := range docs {
		m.log.Info().Str(logfield.Path, d.Path).Str(logfield.Kind, d.Kind.String()).Int64("bytes", d.Bytes).
			Msg("the journal holds work the server may not have saved: opening the document to rescue it")
	}
	bo := newBackoff(time.Second, 30*time.Second)
	for len(docs) > 0 && m.life.Err() == nil {
		var again []JournalDoc
		for _, d := range docs {
			ctx, cancel := context.WithTimeout(m.life, m.opts.JoinTimeout)
			_, err := m.open(ctx, d.Path, d.Kind, m.prefetchFile, true)
			cancel()
			switch {
			case err == nil:
			case isPermanent(err) || IsNotFound(err):
				m.log.Error().Err(err).Str(logfield.Path, d.Path).Msg("a document with unsaved work in the journal cannot be opened: the journal keeps it")
				m.notices.add(Notice{Time: m.opts.Now(), Path: d.Path, Kind: "rescue_kept", DocKind: d.Kind.String(),
					Message: fmt.Sprintf("the sidecar restarted with changes to %s that the server may not have saved, but the document cannot be opened (%v): they stay in the sidecar's journal and are brought back when it can be", d.Path, err)})
			default:
				again = append(again, d)
			}
		}
		docs = again
		if len(docs) > 0 {
			select {
			case <-m.life.Done():
			case <-time.After(bo.Next()):
			}
		}
	}
}

// SaveStats counts the save requests the rooms made (saveguard.go).
func (m *Manager) SaveStats() SaveStats { return m.saves.Stats() }

// Notices returns what agents must be told that happened after seq (work lost in a server crash,
// edits that could not be re-applied), and the seq to pass next time.
func (m *Manager) Notices(seq uint64) ([]Notice, uint64) { return m.notices.since(seq, m.opts.Now()) }

// onRoomEvent keeps notices and publishes every room event.
func (m *Manager) onRoomEvent(e Event) {
	if e.Kind == EventNotice && e.Notice != nil && !e.Notice.LogOnly {
		m.notices.add(*e.Notice)
	}
	m.hub.publish(e)
}

// Run closes idle rooms until ctx ends, then closes every room (leaving them politely) and
// returns. Rooms opened before Run starts are served too.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errors.New("manager: Run called twice")
	}
	m.running = true
	m.mu.Unlock()
	defer m.Close()
	if m.opts.GlobalAwareness {
		m.startGlobal()
	}
	if m.opts.Journal != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.recover()
		}()
	}

	period := 30 * time.Second
	if m.opts.IdleTimeout > 0 && m.opts.IdleTimeout/4 < period {
		period = max(m.opts.IdleTimeout/4, 10*time.Millisecond)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.life.Done():
			return nil
		case <-t.C:
			m.closeIdle()
		}
	}
}

// Subscribe receives the events of every room.
func (m *Manager) Subscribe(buffer int) *Subscription { return m.hub.subscribe(buffer) }

// Open returns the live room for a document, joining it if needed, once its replica is in sync.
// Errors name what is wrong: no such file, a directory, the wrong kind of document.
func (m *Manager) Open(ctx context.Context, path string, kind ydoc.Kind) (*Room, error) {
	return m.open(ctx, path, kind, m.prefetchFile, false)
}

// open is Open. prefetch gives a room it starts the file its load wait compares, read beside the
// join (prefetchFile; OpenForRead hands its own read over instead). recovering: a room opened to
// rescue what the journal holds, not for an agent (it does not become the agent's current
// document).
func (m *Manager) open(ctx context.Context, path string, kind ydoc.Kind, prefetch func(*Room), recovering bool) (*Room, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	key := roomKey{path: path, kind: kind}
	if m.life.Err() != nil {
		return nil, ErrManagerStopped
	}
	room := m.Get(path, kind)
	if room != nil && isStopped(room) {
		room = nil // failed or closed: start afresh
	}
	if room != nil {
		m.hits.Add(1)
	} else {
		m.misses.Add(1)
	}
	wctx, cancel := context.WithTimeout(ctx, m.opts.JoinTimeout)
	defer cancel()
	release := func() {}
	if room == nil && !m.warm.Load() {
		if release, err = m.firstJoin(wctx); err != nil {
			return nil, err
		}
		defer release()
		if r := m.Get(path, kind); r != nil && !isStopped(r) {
			room = r // joined by the caller we waited for
		}
	}
	if room == nil {
		if err := m.checkFile(wctx, path, kind); err != nil {
			return nil, err
		}
		if room, err = m.start(key); err != nil {
			return nil, err
		}
		prefetch(room) // the load wait's file, read while the server loads the room
	}
	if err := room.WaitSynced(wctx); err != nil {
		if errors.Is(err, ErrRoomClosed) && m.life.Err() == nil && ctx.Err() == nil {
			release()
			return m.open(ctx, path, kind, prefetch, recovering) // closed as idle while we joined it: start afresh
		}
		return nil, fmt.Errorf("join %s: %w", path, err)
	}
	m.warm.Store(true)
	if !recovering {
		m.touch(CurrentString(path, kind))
	}
	if id := room.Info().FileID; id != "" {
		m.rememberFileID(path, kind, id)
	}
	return room, nil
}

// firstJoin makes joins take turns until one of them has synced, and returns the end of this
// caller's turn. jupyter-collaboration keeps every room's updates in one SQLite file
// (.jupyter_ystore.db in the server's working directory) that pycrdt-store's SQLiteYStore creates
// on first use, per room, without a lock shared between rooms: rooms that start together on a
// server without that file each create its schema, and a room that looks while another is
// half-way moves the file aside as "a version mismatch" — the rooms writing to the moved file
// then fail ("attempt to write a readonly database", "disk I/O error"), and a room that fails
// while initializing never syncs its joiners. Once any room has synced, the file exists with its
// schema, and joins run in parallel.
func (m *Manager) firstJoin(ctx context.Context) (release func(), err error) {
	select {
	case m.first <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the first room of this server to be joined (joins take turns until one has synced): %w", ctx.Err())
	case <-m.life.Done():
		return nil, ErrManagerStopped
	}
	var once sync.Once
	return func() { once.Do(func() { <-m.first }) }, nil
}

// ErrExists is returned by Create for a path that is already taken.
var ErrExists = errors.New("bridge: file already exists")

// Create writes a new document and opens its room. content is nbformat JSON for a notebook, the
// text for a text file. It refuses to overwrite: an existing path gives ErrExists.
func (m *Manager) Create(ctx context.Context, path string, kind ydoc.Kind, content []byte) (*Room, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("create: %w", ErrBadPath)
	}
	if err := m.createFile(ctx, path, kind, content); err != nil {
		return nil, err
	}
	return m.Open(ctx, path, kind)
}

// createFile writes the file unless it exists. The contents API overwrites, so the existence
// checks are serialised in this process and repeated right before the write; a room open for
// the path means the file exists, whatever Stat says.
func (m *Manager) createFile(ctx context.Context, path string, kind ydoc.Kind, content []byte) error {
	m.createMu.Lock()
	defer m.createMu.Unlock()
	exists := func() error {
		if m.Get(path, ydoc.KindNotebook) != nil || m.Get(path, ydoc.KindText) != nil {
			return fmt.Errorf("create %s: %w", path, ErrExists)
		}
		if _, err := m.opts.Jupyter.Stat(ctx, path); err == nil {
			return fmt.Errorf("create %s: %w", path, ErrExists)
		} else if !IsNotFound(err) {
			return fmt.Errorf("create %s: %w", path, err)
		}
		return nil
	}
	if err := exists(); err != nil {
		return err
	}
	if err := m.mkdirAll(ctx, pathpkg.Dir(path)); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := exists(); err != nil {
		return err
	}
	if _, err := m.opts.Jupyter.Create(ctx, path, kind, content); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// mkdirAll creates the missing directories of a path, top down.
func (m *Manager) mkdirAll(ctx context.Context, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	fi, err := m.opts.Jupyter.Stat(ctx, dir)
	switch {
	case err == nil && fi.Type == "directory":
		return nil
	case err == nil:
		return fmt.Errorf("%s is a %s, not a directory", dir, fi.Type)
	case !IsNotFound(err):
		return err
	}
	if err := m.mkdirAll(ctx, pathpkg.Dir(dir)); err != nil {
		return err
	}
	if err := m.opts.Jupyter.CreateDir(ctx, dir); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return nil
}

// checkFile makes sure the path is a document of the requested kind before joining, so the
// caller gets a clear error instead of a room that closes with 4404 or 4400.
func (m *Manager) checkFile(ctx context.Context, path string, kind ydoc.Kind) error {
	fi, err := m.opts.Jupyter.Stat(ctx, path)
	if err != nil {
		if IsNotFound(err) {
			return fmt.Errorf("open %s: no such file: %w", path, err)
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	switch {
	case fi.Type == "directory":
		return fmt.Errorf("open %s: is a directory", path)
	case kind == ydoc.KindNotebook && fi.Type != "notebook":
		return fmt.Errorf("open %s: not a notebook (the server sees a %s); use the document tools for text files", path, fi.Type)
	case kind == ydoc.KindText && fi.Type != "file":
		return fmt.Errorf("open %s: not a text file (the server sees a %s)", path, fi.Type)
	}
	return nil
}

func (m *Manager) start(key roomKey) (*Room, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rooms[key]; r != nil && !isStopped(r) { // another caller won the race
		return r, nil
	}
	if m.life.Err() != nil {
		return nil, ErrManagerStopped
	}
	opts := m.opts.Room
	opts.Path, opts.Kind, opts.Jupyter, opts.Logger = key.path, key.kind, m.opts.Jupyter, m.log
	opts.OnEvent = m.onRoomEvent
	opts.Saves = m.saves
	opts.Presence = m.presence
	opts.Journal = m.opts.Journal
	if key.fork != "" {
		opts.Fork, opts.ForkAlive = key.fork, m.forkAlive(key)
		opts.HistoryDir = "" // forks live in server memory: their history would outlive them
		opts.Journal = nil
	}
	room, err := NewRoom(opts)
	if err != nil {
		return nil, err
	}
	m.rooms[key] = room
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := room.Run(m.life); err != nil {
			m.log.Warn().Err(err).Str(logfield.Path, key.path).Msg("room failed")
		}
		m.mu.Lock()
		if m.rooms[key] == room {
			delete(m.rooms, key)
		}
		m.mu.Unlock()
		m.updateGlobal()
	}()
	return room, nil
}

func isStopped(r *Room) bool {
	select {
	case <-r.Done():
		return true
	default:
		return false
	}
}

// Get returns the open room for a document, or nil.
func (m *Manager) Get(path string, kind ydoc.Kind) *Room {
	path, err := CleanPath(path)
	if err != nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rooms[roomKey{path: path, kind: kind}]
}

// Rooms returns the open document rooms (not forks) ordered by path.
func (m *Manager) Rooms() []*Room {
	m.mu.Lock()
	out := make([]*Room, 0, len(m.rooms))
	for k, r := range m.rooms {
		if k.fork == "" {
			out = append(out, r)
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Path() < out[j].Path() })
	return out
}

// CloseRoom leaves a document's room if it is open.
func (m *Manager) CloseRoom(path string, kind ydoc.Kind) {
	if r := m.Get(path, kind); r != nil {
		r.Close()
	}
}

// Stat describes a file under the Jupyter root.
func (m *Manager) Stat(ctx context.Context, path string) (FileInfo, error) {
	path, err := CleanPath(path)
	if err != nil {
		return FileInfo{}, err
	}
	return m.opts.Jupyter.Stat(ctx, path)
}

// List returns a directory's entries.
func (m *Manager) List(ctx context.Context, dir string) ([]FileInfo, error) {
	dir, err := CleanPath(dir)
	if err != nil {
		return nil, err
	}
	return m.opts.Jupyter.List(ctx, dir)
}

// ErrNoFileReader is returned by ReadFile when the server cannot give a file's content.
var ErrNoFileReader = errors.New("bridge: the server does not give files' content")

// ReadFile reads a document's file as jupyter-server has it on disk (not a room's live state):
// a notebook parsed from nbformat, a text file as text.
func (m *Manager) ReadFile(ctx context.Context, path string, kind ydoc.Kind) (ydoc.Snapshot, error) {
	path, err := CleanPath(path)
	if err != nil {
		return ydoc.Snapshot{}, err
	}
	r, ok := m.opts.Jupyter.(FileReader)
	if !ok {
		return ydoc.Snapshot{}, ErrNoFileReader
	}
	fc, err := r.ReadFile(ctx, path, kind, true)
	if err != nil {
		return ydoc.Snapshot{}, err
	}
	if fc.Doc == nil {
		return ydoc.Snapshot{}, fmt.Errorf("read %s: no content", path)
	}
	return *fc.Doc, nil
}

func (m *Manager) closeIdle() {
	if m.opts.IdleTimeout < 0 {
		return
	}
	cutoff := m.opts.Now().Add(-m.opts.IdleTimeout)
	var idle []*Room
	m.mu.Lock()
	hasForks := map[roomKey]bool{} // a document stays joined while a fork of it is: forks are checked against it
	for key := range m.rooms {
		if key.fork != "" {
			hasForks[roomKey{path: key.path, kind: key.kind}] = true
		}
	}
	for key, r := range m.rooms {
		// A room holding work the server may not have saved stays: closing it would leave that
		// work to the journal alone.
		if r.LastUsed().Before(cutoff) && r.hub.count() == 0 && !hasForks[key] && !r.AtRisk() {
			delete(m.rooms, key) // out of the table first: a concurrent Open starts a fresh room
			idle = append(idle, r)
		}
	}
	m.mu.Unlock()
	for _, r := range idle {
		m.log.Info().Str(logfield.Path, r.Path()).Msg("closing idle room")
		r.Close()
	}
}

// startGlobal joins the global awareness room (awareness only) for the manager's lifetime; a
// room that fails for good (it only does on errors no retry fixes, such as a revoked token) is
// tried again every 30 s.
func (m *Manager) startGlobal() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for m.life.Err() == nil {
			opts := m.opts.Room
			opts.Path, opts.Kind, opts.Jupyter, opts.Logger = GlobalAwarenessRoom, ydoc.KindText, m.opts.Jupyter, m.log
			opts.Transient = GlobalAwarenessRoom
			m.mu.Lock()
			opts.Presence = m.presence
			m.mu.Unlock()
			room, err := NewRoom(opts)
			if err != nil {
				m.log.Warn().Err(err).Msg("cannot join the global awareness room")
				return
			}
			m.mu.Lock()
			m.global, m.shown = room, ""
			m.mu.Unlock()
			m.globalNamedOnce.Do(func() { close(m.globalNamed) })
			m.wg.Add(1)
			go func() { // room.Run below serves it
				defer m.wg.Done()
				m.updateGlobal()
			}()
			if err := room.Run(m.life); err != nil && m.life.Err() == nil {
				m.log.Warn().Err(err).Msg("global awareness room failed; joining again in 30s")
			}
			select {
			case <-m.life.Done():
			case <-time.After(30 * time.Second):
			}
		}
	}()
}

// touch records the document the agent works on (JupyterLab's "current").
func (m *Manager) touch(current string) {
	m.mu.Lock()
	// Compared with what was published, not with m.current: reopening the document the agent
	// left must publish it again.
	changed := m.shown != current
	m.current = current
	m.mu.Unlock()
	if changed {
		m.updateGlobal()
	}
}

// updateGlobal publishes current and documents in the global awareness room.
func (m *Manager) updateGlobal() {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	m.mu.Lock()
	g, current := m.global, m.current
	docs := []string{}
	open := false
	for k := range m.rooms {
		if k.fork != "" {
			continue
		}
		docs = append(docs, k.path)
		open = open || CurrentString(k.path, k.kind) == current
	}
	if !open {
		current = "" // the agent left the document it was in front of
	}
	if g != nil {
		m.shown = current
	}
	m.mu.Unlock()
	if g == nil {
		return
	}
	sort.Strings(docs)
	fields := map[string]any{"documents": docs, "current": nil}
	if current != "" {
		fields["current"] = current
	}
	ctx, cancel := context.WithTimeout(m.life, 5*time.Second)
	defer cancel()
	_ = g.SetFields(ctx, fields)
}

// SetPresence changes the agent's status and activity in every room, now and later.
func (m *Manager) SetPresence(ctx context.Context, p Presence) error {
	_, err := m.UpdatePresence(ctx, func(q *Presence) { *q = p })
	return err
}

// UpdatePresence changes the agent's presence with fn, atomically with respect to other
// changes, and returns the result.
func (m *Manager) UpdatePresence(ctx context.Context, fn func(*Presence)) (Presence, error) {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	m.mu.Lock()
	p := m.presence
	m.mu.Unlock()
	fn(&p)
	return p, m.setPresenceLocked(ctx, p)
}

func (m *Manager) setPresenceLocked(ctx context.Context, p Presence) error {
	m.mu.Lock()
	m.presence = p
	rooms := make([]*Room, 0, len(m.rooms)+1)
	for _, r := range m.rooms {
		rooms = append(rooms, r)
	}
	if m.global != nil {
		rooms = append(rooms, m.global)
	}
	m.mu.Unlock()
	var first error
	for _, r := range rooms {
		if err := r.SetPresence(ctx, p); err != nil && first == nil && !errors.Is(err, ErrRoomClosed) {
			first = err
		}
	}
	return first
}

// CacheStats is what the manager holds: its rooms, how often Open found a room live, and the
// bytes replicas and histories keep (as the rooms last measured them: Room.Sizes).
type CacheStats struct {
	RoomsOpen, ForksOpen       int
	Rooms                      []RoomStats // by path, then fork
	OpenHits, OpenMisses       int64
	ReplicaBytes, HistoryBytes int // totals over Rooms
}

// HitRate is the share of Opens that found their room live (0 before any).
func (c CacheStats) HitRate() float64 {
	if c.OpenHits+c.OpenMisses == 0 {
		return 0
	}
	return float64(c.OpenHits) / float64(c.OpenHits+c.OpenMisses)
}

// RoomStats is one open room in CacheStats.
type RoomStats struct {
	Path   string
	Kind   ydoc.Kind
	Fork   string // the fork id for a fork's room
	Status Status
	Sizes  RoomSizes
}

// CacheStats reports what the manager holds. It waits for no room and takes no engine lock.
func (m *Manager) CacheStats() CacheStats {
	m.mu.Lock()
	keys := make([]roomKey, 0, len(m.rooms))
	rooms := make([]*Room, 0, len(m.rooms))
	for k, r := range m.rooms {
		keys, rooms = append(keys, k), append(rooms, r)
	}
	m.mu.Unlock()
	st := CacheStats{OpenHits: m.hits.Load(), OpenMisses: m.misses.Load()}
	for i, r := range rooms {
		k := keys[i]
		rs := RoomStats{Path: k.path, Kind: k.kind, Fork: k.fork, Status: r.Info().Status, Sizes: r.Sizes()}
		st.Rooms = append(st.Rooms, rs)
		if k.fork != "" {
			st.ForksOpen++
		} else {
			st.RoomsOpen++
		}
		st.ReplicaBytes += rs.Sizes.ReplicaBytes
		st.HistoryBytes += rs.Sizes.HistoryBytes
	}
	sort.Slice(st.Rooms, func(i, j int) bool {
		a, b := st.Rooms[i], st.Rooms[j]
		return a.Path < b.Path || a.Path == b.Path && a.Fork < b.Fork
	})
	return st
}

// FileID returns a document's file id (the server's stable id for it, kept across renames),
// asking the server when no room of it is open (a document session PUT: it indexes the file,
// nothing more).
func (m *Manager) FileID(ctx context.Context, path string, kind ydoc.Kind) (string, error) {
	path, err := CleanPath(path)
	if err != nil {
		return "", err
	}
	if r := m.Get(path, kind); r != nil {
		if id := r.Info().FileID; id != "" {
			m.rememberFileID(path, kind, id)
			return id, nil
		}
	}
	m.mu.Lock()
	id, ok := m.fileIDs[roomKey{path: path, kind: kind}]
	m.mu.Unlock()
	if ok {
		return id, nil
	}
	format, docType := "json", "notebook"
	if kind == ydoc.KindText {
		format, docType = "text", "file"
	}
	ds, err := m.opts.Jupyter.OpenDocSession(ctx, path, format, docType)
	if err != nil {
		return "", fmt.Errorf("file id of %s: %w", path, err)
	}
	m.rememberFileID(path, kind, ds.FileID)
	return ds.FileID, nil
}

func (m *Manager) rememberFileID(path string, kind ydoc.Kind, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fileIDs == nil {
		m.fileIDs, m.byFileID = map[roomKey]string{}, map[string]roomKey{}
	}
	m.fileIDs[roomKey{path: path, kind: kind}] = id
	m.byFileID[id] = roomKey{path: path, kind: kind}
}

// PathOf returns the path and kind of a file id this manager has seen (ok false otherwise).
func (m *Manager) PathOf(fileID string) (string, ydoc.Kind, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.byFileID[fileID]
	return k.path, k.kind, ok
}

// FileIDs returns the file ids this manager has seen, by kind.
func (m *Manager) FileIDs(kind ydoc.Kind) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for k, id := range m.fileIDs {
		if k.kind == kind {
			out[id] = k.path
		}
	}
	return out
}

// User is how the agent appears to collaborators.
func (m *Manager) User() ydoc.AwarenessUser {
	if m.opts.Room.User.Username == "" {
		return DefaultUser()
	}
	return m.opts.Room.User
}

// Presence returns the agent's status and activity.
func (m *Manager) Presence() Presence {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.presence
}

// GlobalPeers returns the collaborators in JupyterLab's global awareness room (who is online,
// and which document each has in front): nil when the room is not joined.
func (m *Manager) GlobalPeers(ctx context.Context) ([]PeerView, error) {
	m.mu.Lock()
	g := m.global
	m.mu.Unlock()
	if g == nil {
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return g.Peers(wctx)
}

// SyncedGlobalPeers waits (as long as ctx allows) until the global awareness room is in sync
// with the server and returns its collaborators. joined is false, with no error, when the
// sidecar is not in that room (GlobalAwareness off). Complete at the sync only on engines that
// send a room's awareness states to a joining client before the sync completes
// (jupyter-server-documents); elsewhere a collaborator appears at their next renewal (GlobalWarm).
func (m *Manager) SyncedGlobalPeers(ctx context.Context) (peers []PeerView, joined bool, err error) {
	if !m.opts.GlobalAwareness {
		return nil, false, nil
	}
	select { // Run names the room at its start
	case <-m.globalNamed:
	case <-m.life.Done():
		return nil, true, errors.New("the manager is closed")
	case <-ctx.Done():
		return nil, true, fmt.Errorf("the global awareness room is not joined yet: %w", ctx.Err())
	}
	m.mu.Lock()
	g := m.global
	m.mu.Unlock()
	if err := g.WaitSynced(ctx); err != nil {
		return nil, true, fmt.Errorf("global awareness: %w", err)
	}
	if st := g.Info().Status; st != StatusSynced {
		return nil, true, fmt.Errorf("global awareness is %s, not in sync", st)
	}
	peers, err = g.Peers(ctx)
	return peers, true, err
}

// Close leaves every room and stops the manager; Open fails afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	m.finish()
	m.mu.Unlock()
	m.closeAll()
	m.hub.closeAll()
}

func (m *Manager) closeAll() {
	var wg sync.WaitGroup
	m.mu.Lock()
	g := m.global
	m.mu.Unlock()
	if g != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Close()
		}()
	}
	for _, r := range m.Rooms() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Close()
		}()
	}
	wg.Wait()
	m.wg.Wait()
}
