package bridge

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Close codes the Jupyter collaboration server uses.
const (
	closeSessionProblem = 1003 // JSON reason: unknown_session, version_mismatch, initialization_error
	closeBadRequest     = 4400
	closeFileNotFound   = 4404
	closeServerError    = 4500
	// jupyter-server-documents: the room stopped because its file went away; JupyterLab closes
	// the document and does not reconnect.
	closeMovedOutOfBand = 4001 // moved or deleted outside Jupyter
	closeDeleted        = 4002 // deleted through Jupyter
)

// Errors returned by Room methods.
var (
	ErrRoomClosed = errors.New("bridge: room closed")
	ErrNotSynced  = errors.New("bridge: room not connected to the server")
	// ErrSavesItself is Room.Save's answer on engines that save on their own and have no save
	// message (jupyter-server-documents).
	ErrSavesItself = errors.New("bridge: the server saves this document by itself (its engine has no save request)")
)

// UnconfirmedError is returned when the caller stopped waiting (context done) for an edit that
// is already in the local replica: it will be delivered when the server is reachable, but the
// server has not acknowledged it, so it must not be reported as done.
type UnconfirmedError struct{ Err error }

func (e *UnconfirmedError) Error() string {
	return "edit applied to the local replica but not yet confirmed by the server (it will be delivered when the room reconnects): " + e.Err.Error()
}
func (e *UnconfirmedError) Unwrap() error { return e.Err }

// WithdrawnError is returned when the caller stopped waiting before the edit was applied at all;
// nothing was changed.
type WithdrawnError struct{ Err error }

func (e *WithdrawnError) Error() string {
	return "edit not applied, nothing changed: " + e.Err.Error()
}
func (e *WithdrawnError) Unwrap() error { return e.Err }

// RoomError is a permanent room failure (file not found, not a notebook, token refused).
type RoomError struct {
	Path string
	Err  error
}

func (e *RoomError) Error() string   { return fmt.Sprintf("room %s: %v", e.Path, e.Err) }
func (e *RoomError) Unwrap() error   { return e.Err }
func (e *RoomError) Permanent() bool { return true }

// RoomOptions configure a room. Zero values get defaults.
type RoomOptions struct {
	Path    string
	Kind    ydoc.Kind
	Jupyter Jupyter
	Logger  zerolog.Logger
	// User is how the sidecar appears to collaborators (awareness "user").
	User ydoc.AwarenessUser
	// NoAutosave publishes autosave:false in awareness. By default the sidecar asks for
	// autosave, so edits reach the file even when no human is connected.
	NoAutosave bool
	// Presence is the agent's status and activity at start (Room.SetPresence changes it).
	Presence Presence
	// Transient is the id of an awareness-only room (JupyterLab:globalAwareness): no document
	// session, no file; Path and Kind are then only labels.
	Transient string
	// Fork is the id of a fork room (of the document Path): it is joined directly, without a
	// document session, and ForkAlive is asked before every (re)connect, because joining a fork
	// the server no longer has would silently create an empty room.
	Fork      string
	ForkAlive func(ctx context.Context) error
	// HistoryBudget bounds the bytes of restorable versions kept (32 MiB); HistoryDir, when
	// set, keeps them on disk across restarts.
	HistoryBudget int
	HistoryDir    string
	// HistoryLegacyDir is where an older layout kept histories (the state directory itself,
	// before it was divided per server): read when HistoryDir holds none of the document.
	HistoryLegacyDir string
	// Journal keeps the write-ahead log of the document's replica (journal.go); nil: none.
	// Document rooms only (not forks, not awareness-only rooms).
	Journal Journal
	// LoadWait bounds how long a read waits for the server to finish loading a notebook it
	// streams in progressively (jupyter-collaboration 5.0; outputs.go) (10s).
	LoadWait time.Duration
	// NoFreshReads lets a read show what the replica holds without asking the server first
	// for what it lacks (fresh.go): two round trips less, but an edit on its way is not shown.
	NoFreshReads bool
	// NoPacing sends every edit's update at once, even while the room's earlier edits are
	// unconfirmed (pace.go): with it off, a room keeps at most one run of its updates at the
	// server at a time.
	NoPacing bool
	// ReadyWait bounds how long a read waits for the replica to be in sync with the server (after
	// a reconnect) before it fails saying so (20s).
	ReadyWait time.Duration
	// Saves of the document by the server (saveguard.go): they keep the file on disk current;
	// the journal, not the file, is what keeps the work safe. While the document holds changes
	// the server has not saved, the room asks for a save (Jupyter's RAW save message) once the
	// changes paused for AutosaveWait (2s) without the server saving by itself (its own autosave
	// comes a second after the last change: jupyter-collaboration's document_save_delay), or,
	// for a document that never pauses, once its oldest unsaved change is SaveInterval old. One
	// request at a time, the next no sooner than SaveSpacing (1s) or five times the last save's
	// duration after it. SaveInterval 0 leaves saving to the server: for engines without a save
	// message, or that save by themselves. Saves (shared by a manager's rooms) bounds the
	// requests in flight at once across rooms; nil: no bound. A request unanswered after
	// SaveTimeout (30s) is given up.
	SaveInterval time.Duration
	SaveTimeout  time.Duration
	SaveSpacing  time.Duration
	AutosaveWait time.Duration
	Saves        *Saves

	MinBackoff       time.Duration // first reconnect delay (250ms)
	MaxBackoff       time.Duration // reconnect delay cap (30s)
	AtRiskBackoff    time.Duration // reconnect delay cap while the replica holds changes the server has not saved (2s)
	ResyncInterval   time.Duration // periodic sync step 1 to heal gaps (30s)
	ResetAfter       time.Duration // rebuild the replica after being away this long (45s; the server cleans idle rooms after 60s)
	PingInterval     time.Duration // websocket ping (15s)
	HandshakeTimeout time.Duration // no sync step 2 within this: ask again, then reconnect (15s)
	// DeadRoomWait: on engines that free idle rooms (EngineInfo.FreesIdleRooms), a room that failed
	// twice in a row to answer a handshake is left alone this long before the next try, so the
	// server can free it and load it afresh: jupyter-server-documents 0.3.3 can lose a room's
	// message task for good (docs/engines.md, "Known server problems"), and frees a room only
	// when nobody is in it, 60 s after its last activity, at a pass every 300 s (6m).
	DeadRoomWait time.Duration
	WriteTimeout time.Duration // per frame (10s)
	TickInterval time.Duration // loop housekeeping (1s)

	NewClientID func() uint32    // random non-zero by default
	Now         func() time.Time // time.Now by default
	OnEvent     func(Event)      // called from the room goroutine; must not block
}

func (o *RoomOptions) defaults() error {
	if o.Path == "" {
		return errors.New("room: path is required")
	}
	if o.Kind != ydoc.KindNotebook && o.Kind != ydoc.KindText {
		return fmt.Errorf("room %s: unknown document kind", o.Path)
	}
	if o.Jupyter == nil {
		return fmt.Errorf("room %s: server is required", o.Path)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.MinBackoff, 250*time.Millisecond)
	def(&o.MaxBackoff, 30*time.Second)
	def(&o.AtRiskBackoff, 2*time.Second)
	def(&o.ResyncInterval, 30*time.Second)
	def(&o.ResetAfter, 45*time.Second)
	def(&o.PingInterval, 15*time.Second)
	def(&o.HandshakeTimeout, 15*time.Second)
	def(&o.DeadRoomWait, 6*time.Minute)
	def(&o.WriteTimeout, 10*time.Second)
	def(&o.TickInterval, time.Second)
	def(&o.SaveTimeout, 30*time.Second)
	def(&o.SaveSpacing, time.Second)
	def(&o.AutosaveWait, 2*time.Second)
	def(&o.ReadyWait, 20*time.Second)
	if err := checkPingInterval(o.Jupyter, o.PingInterval); err != nil {
		return fmt.Errorf("room %s: %w", o.Path, err)
	}
	if o.HistoryBudget <= 0 {
		o.HistoryBudget = 32 << 20
	}
	if o.NewClientID == nil {
		o.NewClientID = randomClientID
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.User.Username == "" {
		o.User = DefaultUser()
	}
	return nil
}

// DefaultUser is the awareness identity used when none is configured.
func DefaultUser() ydoc.AwarenessUser {
	return ydoc.AwarenessUser{
		Username:    "jupyter-collab-mcp",
		Name:        "AI Agent",
		DisplayName: "AI Agent",
		Initials:    "AI",
		Color:       "#7c3aed",
	}
}

func randomClientID() uint32 {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		// Yjs client ids are 32-bit; keep them below 2^31 too, as some encoders use varint.
		if id := binary.LittleEndian.Uint32(b[:]) & 0x7fffffff; id != 0 {
			return id
		}
	}
}

// Status is a room's connection state.
type Status string

const (
	StatusConnecting   Status = "connecting"
	StatusSynced       Status = "synced"
	StatusDisconnected Status = "disconnected"
	StatusFailed       Status = "failed"
	StatusClosed       Status = "closed"
)

// Collaborator is a peer in the room's awareness.
type Collaborator struct {
	ClientID uint64
	User     ydoc.AwarenessUser
	Since    time.Time
}

// RoomInfo is a snapshot of a room's state.
type RoomInfo struct {
	Path          string
	Kind          ydoc.Kind
	RoomID        string
	FileID        string
	SessionID     string
	ClientID      uint64
	Status        Status
	SyncedAt      time.Time // the last sync
	JoinedAt      time.Time // the first sync: awareness of who is here is complete one renewal later
	Reconnects    int
	Resets        int
	PendingEdits  int
	Collaborators []Collaborator
	Err           string
	// Saving (saveguard.go): when the server last said it saved the document, when the save
	// guard last asked it to and the answer, how many times it asked, and since when the room
	// holds changes the server has not saved (zero: none).
	LastSaved      time.Time
	LastSaveAsked  time.Time
	LastSaveStatus string
	SavesAsked     int
	UnsavedSince   time.Time
	// LastSaveTook is how long the last answered save request took; SaveSpacing the least time
	// the room lets pass after a save before asking for the next (five times that, at least
	// RoomOptions.SaveSpacing).
	LastSaveTook time.Duration
	SaveSpacing  time.Duration
	// LastRescue says what happened the last time the server lost the room (rescue.go).
	LastRescue   *ydoc.RescueReport
	LastRescueAt time.Time
}

// Room is one live collaboration room: a replica of a document (or of a fork of one, or the
// awareness-only global room) kept in sync with jupyter-server, shared by every caller.
//
// Run's goroutine owns everything that changes: the ydoc.Replica (the document and its sync state), the
// connection (one reader and one writer goroutine per websocket), the history of changes and
// the restorable versions, the agent's awareness state. Public methods hand requests to that
// goroutine (do, call, whenReady) and wait for the answer, the room's end or their context; the
// functions they pass (View, Read, Apply) run on it — Apply's with the y-crdt lock held for
// every room — so they must be short and must not call back into a Room or the Manager. The goroutine never blocks on the
// network: dialling happens on a helper goroutine while requests are served, so a caller can
// always withdraw an edit it stopped waiting for.
//
// An edit returns once the server holds it (confirmed), or says it was withdrawn (nothing
// changed) or is still on its way (UnconfirmedError). Every change, local or remote, is
// published as an Event to the room's and the manager's subscribers, never blocking the room.
// Create rooms with NewRoom (nothing starts) and make them live with Run; Close leaves politely.
type Room struct {
	opts RoomOptions
	log  zerolog.Logger
	hub  *hub

	reqs   chan func(*roomLoop)
	done   chan struct{}
	synced chan struct{}

	editSeq  atomic.Uint64
	prep     *readPrep    // what reads wait for (outputs.go)
	lastUsed atomic.Int64 // unix nanos

	mu     sync.Mutex
	info   RoomInfo
	wal    DocLog // the document's log while the room holds it (journal.go)
	atRisk bool   // the replica holds work the server may not have saved (journal.go)
	// unsavedOnly: that work is only changes the server holds and has not saved (UnsavedOnly).
	unsavedOnly bool
	sizes       RoomSizes // recorded by the loop (measure)
	err         error     // set when the room failed or closed
	cancel      context.CancelFunc
	closeReq    bool
}

// NewRoom validates options and creates a room; Run makes it live.
func NewRoom(opts RoomOptions) (*Room, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Room{
		opts:   opts,
		log:    opts.Logger.With().Str(logfield.Path, opts.Path).Str(logfield.Kind, opts.Kind.String()).Logger(),
		hub:    newHub(),
		reqs:   make(chan func(*roomLoop)),
		done:   make(chan struct{}),
		synced: make(chan struct{}),
		info:   RoomInfo{Path: opts.Path, Kind: opts.Kind, Status: StatusConnecting},
		prep:   &readPrep{},
	}
	r.touch()
	return r, nil
}

// Path returns the document path.
func (r *Room) Path() string { return r.opts.Path }

// Kind returns the document model.
func (r *Room) Kind() ydoc.Kind { return r.opts.Kind }

// Info returns a snapshot of the room's state.
func (r *Room) Info() RoomInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	info := r.info
	info.Collaborators = append([]Collaborator(nil), r.info.Collaborators...)
	return info
}

// Err returns why the room stopped, or nil while it runs.
func (r *Room) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Done is closed when the room has stopped.
func (r *Room) Done() <-chan struct{} { return r.done }

// Subscribe receives this room's events.
func (r *Room) Subscribe(buffer int) *Subscription { return r.hub.subscribe(buffer) }

func (r *Room) touch() { r.lastUsed.Store(r.opts.Now().UnixNano()) }

// LastUsed returns when a caller last used the room.
func (r *Room) LastUsed() time.Time { return time.Unix(0, r.lastUsed.Load()) }

// Close leaves the room (null awareness, normal close) and waits for it to stop.
func (r *Room) Close() {
	r.mu.Lock()
	r.closeReq = true
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-r.done
	}
}

// WaitSynced waits until the replica first caught up with the server, or the room failed.
func (r *Room) WaitSynced(ctx context.Context) error {
	r.touch()
	select {
	case <-r.done: // a stopped room is not usable, even if it once synced
		return r.stoppedErr()
	default:
	}
	select {
	case <-r.synced:
		select {
		case <-r.done:
			return r.stoppedErr()
		default:
			return nil
		}
	case <-r.done:
		return r.stoppedErr()
	case <-ctx.Done():
		if info := r.Info(); info.Err != "" {
			return fmt.Errorf("waiting for room %s to sync (%s): %w", r.opts.Path, info.Err, ctx.Err())
		}
		return fmt.Errorf("waiting for room %s to sync: %w", r.opts.Path, ctx.Err())
	}
}

func (r *Room) stoppedErr() error {
	if err := r.Err(); err != nil {
		return err
	}
	return ErrRoomClosed
}

// Run keeps the room live until ctx ends, Close is called, or it fails for good (the returned
// error; nil after a normal close).
func (r *Room) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	if r.cancel != nil {
		r.mu.Unlock()
		cancel()
		return errors.New("room: Run called twice")
	}
	r.cancel = cancel
	closing := r.closeReq
	r.mu.Unlock()
	defer cancel()
	if closing {
		cancel()
	}
	l, err := newRoomLoop(r)
	if err != nil {
		r.finish(err)
		return err
	}
	saved := make(chan struct{})
	if l.saveCh != nil {
		go func() { // the history saver: file IO off the room goroutine
			defer close(saved)
			for img := range l.saveCh {
				if err := saveSnapshots(l.snapFile, img); err != nil {
					r.log.Warn().Err(err).Msg("could not save the document history")
				}
			}
		}()
	} else {
		close(saved)
	}
	l.life = ctx
	l.openWAL(ctx)
	err = l.run(ctx)
	if ctx.Err() != nil && !isPermanent(err) {
		err = nil
	}
	l.stop(err)
	l.stopSaving()
	cancel() // helpers end with the room
	l.helpers.Wait()
	if err != nil && l.walPending() {
		l.lostKept(err)
	}
	l.closeWAL()
	if l.saveCh != nil {
		l.queueSave()
		close(l.saveCh)
	}
	<-saved
	r.finish(err)
	return err
}

func (r *Room) finish(err error) {
	r.mu.Lock()
	if err != nil {
		r.err = err
		r.info.Status = StatusFailed
		r.info.Err = err.Error()
	} else {
		r.err = ErrRoomClosed
		r.info.Status = StatusClosed
	}
	r.mu.Unlock()
	kind := EventClosed
	if err != nil {
		kind = EventFailed
	}
	r.emit(Event{Path: r.opts.Path, Kind: kind, Time: r.opts.Now(), Err: err})
	close(r.done)
	r.hub.closeAll()
}

func (r *Room) emit(e Event) {
	e.DocKind, e.Fork, e.Transient = r.opts.Kind, r.opts.Fork, r.opts.Transient != ""
	r.hub.publish(e)
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(e)
	}
}

// roomLoop is the state owned by the room goroutine.
type roomLoop struct {
	r       *Room
	log     zerolog.Logger
	replica *ydoc.Replica
	aw      *ydoc.Awareness
	bo      *backoff

	ds         DocSession
	link       *link
	outbox     [][]byte
	pace       paceState           // edits' frames waiting for the room's earlier edits (pace.go)
	waiters    map[uint64]*Pending // edits whose outcome someone may wait for
	proposals  []*proposal         // edits waiting for a sync to run (edits.go)
	hist       *history
	versions   map[uint64]uint64 // edit id → history seq of the change it applied
	saves      map[uint64]chan saveResult
	saveSeq    uint64
	ready      bool        // the replica holds the server's state
	deferred   []*readCall // reads waiting for ready
	fresh      []freshRead // reads waiting for the server's answer to their step 1 (fresh.go)
	needReset  string      // non-empty: rebuild the replica before the next connect
	serverLost bool        // the pending reset is for a room the server lost (it restarted)
	awayFrom   time.Time   // when the last connection dropped (zero while connected)
	lastSync   time.Time   // last periodic step 1
	lastErr    error       // last connection error, for logs and info

	connectedAt    time.Time    // when the current link was dialled
	serverStepOne  bool         // the server's sync step 1 of this connection arrived (handshake.go)
	held           []ydoc.Frame // sync frames held until then
	handshakeAsked bool         // a second step 1 was sent for the current handshake
	resetsNoSync   int          // resets since the last successful sync
	unanswered     int          // handshakes in a row the server never answered
	resyncAskedAt  time.Time    // a periodic step 1 not answered yet with a step 2 (zero: none)
	brokenNoSync   int          // replica breakdowns (y-crdt panics) since the last successful sync
	initErrors     int          // consecutive initialization_error closes

	presence Presence       // the agent's status and activity
	cursors  []jsonCursor   // the agent's cursors in this room
	fields   map[string]any // extra awareness fields (global room: current, documents)

	snaps    *snapshotStore    // restorable versions (nil for transient rooms)
	snapFile string            // where they are saved ("" for memory only)
	saveCh   chan snapshotFile // latest image for the saver goroutine
	lastSave time.Time

	sizeDirty bool          // the replica changed since its size was last measured
	sizedAt   time.Time     // when it was
	sizeCost  time.Duration // how long the last measurement took

	guard   saveGuard    // saves of the document by the server (saveguard.go)
	wal     walState     // the document's write-ahead log (journal.go)
	outside outsideWatch // reloads of the file over unsaved work (outside.go)
	// adoptPending: a replica held before the sidecar restarted waits to be adopted as lost
	// (journal.go): the first connection replays its journal, reads the file before joining and
	// decides its rescue; replay is the replayed journal until it is adopted.
	adoptPending bool
	replay       *replayed
	riskShown    bool // what AtRisk says
	unsavedShown bool // what UnsavedOnly says
	// strayUntil: typing into cells a rescue replaced is followed until then (ydoc StrayWatch).
	strayUntil time.Time
	serverHeld bool           // the file read before this connection is a state the server went through (journal.go)
	rescueFile *ydoc.Snapshot // the file a rescue was decided by: the last save known once it is done

	// life is Run's context; helpers are the short-lived goroutines the loop starts (a hash read),
	// waited for before Run returns.
	life    context.Context
	helpers sync.WaitGroup
}

func newRoomLoop(r *Room) (*roomLoop, error) {
	id := r.opts.NewClientID()
	replica, err := ydoc.NewReplica(r.opts.Kind, id, r.log)
	if err != nil {
		return nil, err
	}
	l := &roomLoop{
		r:        r,
		log:      r.log,
		replica:  replica,
		aw:       ydoc.NewAwareness(uint64(id)),
		bo:       newBackoff(r.opts.MinBackoff, r.opts.MaxBackoff),
		waiters:  map[uint64]*Pending{},
		hist:     newHistory(),
		versions: map[uint64]uint64{},
		saves:    map[uint64]chan saveResult{},
		guard:    saveGuard{grant: make(chan struct{}, 1)},
	}
	if r.opts.Transient == "" {
		l.snaps = newSnapshotStore(r.opts.Kind, r.opts.HistoryBudget)
		if r.opts.HistoryDir != "" {
			l.snapFile = snapshotPath(r.opts.HistoryDir, r.opts.Path, r.opts.Kind)
			from := l.snapFile
			if legacy := r.opts.HistoryLegacyDir; legacy != "" {
				if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
					from = snapshotPath(legacy, r.opts.Path, r.opts.Kind) // saved to the new place from now on
				}
			}
			loaded, err := loadSnapshots(from, r.opts.Path, r.opts.Kind, r.opts.HistoryBudget)
			if err != nil {
				r.log.Warn().Err(err).Msg("saved history not loaded; starting a new one")
			} else {
				l.snaps = loaded
			}
			l.saveCh = make(chan snapshotFile, 1)
		}
	}
	l.presence = r.opts.Presence
	if l.presence.Status != PresenceOffline {
		if _, err := l.aw.SetLocal(l.awarenessState(), r.opts.Now()); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// dialed is what dial brings back.
type dialed struct {
	ds   DocSession
	conn Conn
	err  error
	// The file as the server has it (content and hash), when read; ferr why it was not.
	file *FileContent
	ferr error
	// replay: the journal of a replica held before the sidecar restarted, replayed (journal.go).
	replay *replayed
	// serverHeld: the file is a state the server went through, as the journal shows (only
	// checked after a loss; journal.go serverOrder).
	serverHeld bool
	serverHist *ydoc.History // the states the server went through (journal.go serverOrder)
}

// dial opens the document session and the websocket on a helper goroutine, serving requests
// meanwhile: the room goroutine never blocks on the network, so callers can always withdraw.
func (l *roomLoop) dial(ctx context.Context) dialed {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resc := make(chan dialed, 1)
	format, docType := l.format()
	// What to read of the file (rescue.go): its content when the server may have lost the room
	// (a 1003 close, or a new session id) or a replica adopted from the journal waits, so that
	// the rescue can be decided by it — read before joining: the room may be rebuilt by our
	// join; and, alongside the first join, the file as the room is first joined (the last save
	// known, until the server reports one).
	reader, lostPending, prevSession := l.fileReader(), l.serverLost || l.adoptPending, l.ds.SessionID
	noteFile := l.replica.History() == nil || l.replica.History().LastSaved() == nil
	replayLineage, lostLineage := uint64(0), l.wal.lineage
	if l.wal.lost != 0 {
		lostLineage = l.wal.lost // resets since the loss started lineages of their own
	}
	if l.adoptPending {
		lostLineage = l.wal.adopted
		if l.replay == nil {
			replayLineage = l.wal.adopted
		}
	}
	kind, path, wal := l.r.opts.Kind, l.r.opts.Path, l.wal.log
	go func() {
		if id := l.r.opts.Fork; id != "" {
			if alive := l.r.opts.ForkAlive; alive != nil {
				if err := alive(dctx); err != nil {
					resc <- dialed{err: err}
					return
				}
			}
			conn, err := l.r.opts.Jupyter.DialRoom(dctx, id, "")
			if err != nil {
				err = fmt.Errorf("join fork room %s: %w", id, err)
			}
			resc <- dialed{ds: DocSession{RoomID: id}, conn: conn, err: err}
			return
		}
		if id := l.r.opts.Transient; id != "" { // awareness only: no document session
			conn, err := l.r.opts.Jupyter.DialRoom(dctx, id, "")
			if err != nil {
				err = fmt.Errorf("join room %s: %w", id, err)
			}
			resc <- dialed{ds: DocSession{RoomID: id}, conn: conn, err: err}
			return
		}
		ds, err := l.r.opts.Jupyter.OpenDocSession(dctx, path, format, docType)
		if err != nil {
			resc <- dialed{err: fmt.Errorf("open document session: %w", err)}
			return
		}
		var d dialed
		if replayLineage != 0 { // off the room goroutine: a long log takes a while
			d.replay = replayJournal(dctx, wal, replayLineage, kind, ydoc.MatchOptions{IgnoreOutputs: ds.Engine.OutputPlaceholders}, l.log)
		}
		read := func() {
			fc, ferr := reader.ReadFile(dctx, path, kind, true)
			if ferr != nil {
				d.ferr = fmt.Errorf("read %s: %w", path, ferr)
			} else {
				d.file = &fc
			}
		}
		var fileRead sync.WaitGroup
		switch {
		case reader == nil:
		case lostPending || (prevSession != "" && ds.SessionID != prevSession):
			read() // before joining: our join may rebuild the room from the file
			if d.file != nil && d.file.Doc != nil && wal != nil && lostLineage != 0 {
				fileRead.Add(1) // alongside the join
				file := *d.file.Doc
				go func() {
					defer fileRead.Done()
					hist, err := serverOrder(dctx, wal, lostLineage, kind, ydoc.MatchOptions{IgnoreOutputs: ds.Engine.OutputPlaceholders}, l.log)
					if err != nil {
						l.log.Debug().Err(err).Msg("could not replay the journal in the server's order")
						return
					}
					d.serverHist, d.serverHeld = hist, hist.Held(file)
				}()
			}
		case noteFile:
			fileRead.Add(1) // the file as the room is first joined, alongside the join
			go func() { defer fileRead.Done(); read() }()
		}
		conn, err := l.r.opts.Jupyter.DialRoom(dctx, ds.RoomID, ds.SessionID)
		fileRead.Wait()
		if err != nil {
			d.err = fmt.Errorf("join room %s: %w", ds.RoomID, err)
			resc <- d
			return
		}
		d.ds, d.conn = ds, conn
		resc <- d
	}()
	for {
		select {
		case d := <-resc:
			if d.replay != nil {
				l.replay = d.replay // kept for the connection that uses it
			}
			return d
		case fn := <-l.r.reqs:
			fn(l)
		case <-ctx.Done():
			cancel()
			if d := <-resc; d.conn != nil {
				_ = d.conn.Close()
			}
			return dialed{err: ctx.Err()}
		}
	}
}

func (l *roomLoop) format() (string, string) {
	if l.r.opts.Kind == ydoc.KindText {
		return "text", "file"
	}
	return "json", "notebook"
}

// run connects, serves, and reconnects with backoff until ctx ends or a permanent error.
func (l *roomLoop) run(ctx context.Context) error {
	for {
		err := l.connectAndServe(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isPermanent(err) {
			var re *RoomError
			if errors.As(err, &re) {
				return err
			}
			return &RoomError{Path: l.r.opts.Path, Err: err}
		}
		delay := l.bo.Next()
		if l.needReset != "" && l.resetsNoSync == 0 && delay > l.r.opts.MinBackoff {
			// The first reset after a healthy sync is a reason to come back quickly, not a fault;
			// repeated ones back off like any failure.
			delay = l.r.opts.MinBackoff
		}
		if atRisk := l.workAtRisk(); atRisk && delay > l.r.opts.AtRiskBackoff {
			// The replica holds changes the server may have lost: a restarted server rebuilds
			// the room from its file, and the sooner the sidecar is back, the likelier the file
			// is still the server's last save (rescue.go), before a human's tab reconnects and
			// the server saves the rebuilt room. JupyterLab's own tabs retry every 2.5 s at most.
			delay = l.r.opts.AtRiskBackoff/2 + time.Duration(mrand.Int64N(int64(l.r.opts.AtRiskBackoff/2)+1))
		}
		if errors.Is(err, errNoStepTwo) {
			l.unanswered++
		} else if !errors.Is(err, errReconnect) {
			l.unanswered = 0
		}
		if l.unanswered >= 2 && l.ds.Engine.FreesIdleRooms {
			// The server's room no longer answers anybody (jupyter-server-documents 0.3.3 loses a
			// room's message task when a queued update's client is gone): only a fresh room
			// helps, and the server frees this one only once nobody is in it. Stay away.
			delay = max(delay, l.r.opts.DeadRoomWait)
			err = fmt.Errorf("%w: the server's room stopped answering (a known %s problem); leaving it to the server to free and load afresh, back in %s",
				err, l.ds.Engine.Name, delay.Round(time.Second))
			l.log.Error().Err(err).Int("unanswered_handshakes", l.unanswered).Msg("the server's room is dead; staying away so that it can be freed")
			l.unanswered = 0
		}
		l.lastErr = err
		l.log.Warn().Err(err).Dur(logfield.RetryIn, delay).Msg("room connection lost; reconnecting")
		l.setStatus(StatusDisconnected, err)
		if err := l.wait(ctx, delay); err != nil {
			return err
		}
	}
}

// wait sleeps while still serving requests.
func (l *roomLoop) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case fn := <-l.r.reqs:
			fn(l)
		}
	}
}

func (l *roomLoop) connectAndServe(ctx context.Context) error {
	d := l.dial(ctx)
	if d.err != nil {
		return d.err
	}
	ds, conn, file, ferr := d.ds, d.conn, d.file, d.ferr
	l.serverHeld = d.serverHeld
	l.replica.ServerHeld(d.serverHist) // what the rebuilt room was loaded from is looked up there too
	if l.replay != nil {
		l.adoptReplayed()
	}
	l.keepHistory(ds.Engine)
	now := l.r.opts.Now()
	switch {
	case l.ds.SessionID != "" && ds.SessionID != l.ds.SessionID:
		l.requestResetServerLost("the server restarted (new session id)")
	case l.ds.RoomID != "" && ds.RoomID != l.ds.RoomID:
		l.requestReset("the document's room id changed")
	case !l.awayFrom.IsZero() && now.Sub(l.awayFrom) >= l.r.opts.ResetAfter:
		l.requestReset(fmt.Sprintf("away for %s, the server may have rebuilt the room", now.Sub(l.awayFrom).Round(time.Second)))
	}
	decided := false
	if l.needReset != "" {
		lost := l.serverLost
		if err := l.reset(); err != nil {
			_ = conn.Close()
			return err
		}
		if lost {
			l.decideRescue(file, ferr)
			decided = true
		}
	} else if l.adoptPending {
		l.decideRescue(file, ferr)
		decided = true
	}
	l.rescueFile = nil
	if h := l.replica.History(); h != nil && file != nil && ferr == nil && file.Doc != nil {
		switch {
		case decided:
			// What the server saved last, as far as we know, once the rescue is done (the rescue
			// decides by what the replica held before).
			l.rescueFile = file.Doc
		case h.LastSaved() == nil:
			h.NoteSaved(*file.Doc) // the file as the room was first joined
		}
	}
	l.logSavedContent()
	l.ds = ds
	l.r.prep.engineChanged(ds.Engine, ds.FileID)
	l.replica.LaggingSaveMarkers(ds.Engine.SavesItself) // its periodic saves mark before they are done
	l.r.mu.Lock()
	l.r.info.RoomID, l.r.info.FileID, l.r.info.SessionID = ds.RoomID, ds.FileID, ds.SessionID
	l.r.mu.Unlock()
	l.link = startLink(conn, linkTimings{writeTimeout: l.r.opts.WriteTimeout, pingInterval: l.r.opts.PingInterval, now: l.r.opts.Now}, l.log)
	l.connectedAt, l.handshakeAsked, l.resyncAskedAt = l.r.opts.Now(), false, time.Time{}
	l.serverStepOne, l.held = false, nil
	l.log.Info().Str(logfield.RoomID, ds.RoomID).Str(logfield.FileID, ds.FileID).Str(logfield.Engine, ds.Engine.Name).Msg("joined room")
	l.handle(l.replica.Connect())
	if aw := l.aw.Current(); aw != nil {
		l.send(ydoc.EncodeAwarenessFrame(aw))
	}
	l.setStatus(StatusConnecting, nil)
	return l.serve(ctx)
}
