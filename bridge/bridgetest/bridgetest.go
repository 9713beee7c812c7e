// Package bridgetest is an in-memory fake of the Jupyter collaboration server for the unit tests
// of bridge, execution and tools (never for code that ships). It implements bridge.Jupyter
// without any network: OpenDocSession and DialRoom are plain calls, and a room websocket is a
// pair of in-memory queues; Kernels fakes execution.Kernels the same way.
//
// The fake behaves like jupyter-collaboration on top of pycrdt-websocket (see
// jupyter-rtc-protocol.md §2, §3): each room keeps a server-side ydoc.Doc built from the file
// table; on connect the server sends its SYNC step 1; it answers every step 1 with a step 2;
// it applies updates from clients and broadcasts each one to all clients, the sender included;
// it forwards awareness frames to all clients (the sender too, except a lone null state); it
// answers RAW save requests by writing the room's document to its file and publishing dirty=false
// and the file's hash in the room's state, as jupyter-collaboration does after a save (it never
// autosaves). Files are read with their hash (bridge.FileReader). Test controls simulate
// restarts, close codes, refused tokens, an unreachable server, slow or failing writes,
// held-back echoes, injected frames and files changed outside the server.
//
// The fake starts no goroutines. Every method is safe for concurrent use.
package bridgetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Close codes the fake uses.
const (
	CloseNormal         = 1000
	CloseAbnormal       = 1006 // what a client sees when the server process dies
	CloseSessionProblem = 1003
	CloseBadRequest     = 4400
	CloseFileNotFound   = 4404
)

// Error is a REST error from the fake, classified like the jupyter package's errors.
type Error struct {
	Status int
	Msg    string
	Perm   bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("fake jupyter: HTTP %d: %s", e.Status, e.Msg)
}

// StatusCode returns the HTTP status.
func (e *Error) StatusCode() int { return e.Status }

// Permanent reports whether retrying cannot help.
func (e *Error) Permanent() bool { return e.Perm }

// CloseError is a websocket close the server sent, as Conn.Read returns it.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("fake jupyter: websocket closed with code %d: %s", e.Code, e.Reason)
}

// CloseCode returns the websocket close code.
func (e *CloseError) CloseCode() int { return e.Code }

// CloseReason returns the close reason (JSON for 1003).
func (e *CloseError) CloseReason() string { return e.Reason }

// ErrConnRefused is what OpenDocSession and DialRoom return while the server is down: a
// transient dial error, like the one net/http returns for a stopped server.
var ErrConnRefused error = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// File is one entry of the fake's file table.
type File struct {
	Path     string
	Type     string        // "notebook", "file" or "directory"
	Notebook ydoc.Notebook // Type notebook: the content a room is built from
	Text     string        // Type file: the content a room is built from
}

// Default file table entries.
const (
	NotebookPath = "nb.ipynb"
	TextPath     = "notes.txt"
	DirPath      = "data"
	NestedPath   = "data/inner.ipynb"
)

// DefaultNotebook is the notebook the default file table holds: two cells with fixed ids.
func DefaultNotebook() ydoc.Notebook {
	one := 1
	return ydoc.Notebook{
		NBFormat:      4,
		NBFormatMinor: 5,
		Metadata:      map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3"}},
		Cells: []ydoc.Cell{
			{ID: "cell-a", Type: ydoc.CellCode, Source: "print('hello')", ExecutionCount: &one,
				Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "hello\n"}}},
			{ID: "cell-b", Type: ydoc.CellMarkdown, Source: "# Title"},
		},
	}
}

// DefaultFiles is a small tree: a notebook, a text file, a directory holding another notebook.
func DefaultFiles() []File {
	return []File{
		{Path: NotebookPath, Type: "notebook", Notebook: DefaultNotebook()},
		{Path: TextPath, Type: "file", Text: "first line\nsecond line\n"},
		{Path: DirPath, Type: "directory"},
		{Path: NestedPath, Type: "notebook", Notebook: DefaultNotebook()},
	}
}

// RestartOptions say what survives Restart. The zero value is a full restart: a new session
// id and every room rebuilt from the file table (as SetRoomLoad says).
type RestartOptions struct {
	KeepDoc     bool // keep each room's document (and its history)
	KeepSession bool // keep the session id (the same server process)
	// DropStore deletes the update store (LoadStore): rooms are rebuilt from their files alone,
	// deterministically, as jupyter-collaboration does when .jupyter_ystore.db is gone.
	DropStore bool
}

// RoomLoad is how the fake builds a room's document from its file, as the real engines do (see
// ydoc/rebuild.go).
type RoomLoad int

const (
	// LoadFresh loads the file into a fresh document under a new client id, as
	// jupyter-server-documents does (the default).
	LoadFresh RoomLoad = iota
	// LoadDeterministic loads the file under client 0 and applies that to the room's document,
	// as jupyter-collaboration does without an update store: the same file gives the same item
	// ids, a file saved since gives other content under the same ids.
	LoadDeterministic
	// LoadStore is jupyter-collaboration with its update store: a room is first loaded
	// deterministically; every room's document is kept in the store when the server restarts,
	// and a room rebuilt later starts from it, the file reloaded over it (granularly, under the
	// room's own client id) when it differs.
	LoadStore
)

// AwarenessRecord is one entry of an awareness update a client sent.
type AwarenessRecord struct {
	Path     string
	ClientID uint64
	Clock    uint64
	State    json.RawMessage // nil for a null state (the client left)
}

// Server is the fake. Create it with New.
type Server struct {
	mu      sync.Mutex
	files   map[string]File
	fileIDs map[string]string // path → file id, stable
	rooms   map[string]*room  // room id → room
	session string
	known   map[string]bool // every session id this "server" issued
	gen     int
	nextCID uint32

	down, refuse bool
	reject       *CloseError   // non-nil: every new connection is closed with it (a room that cannot load)
	openGate     chan struct{} // non-nil: OpenDocSession blocks until it is closed
	openBlocked  int           // calls currently blocked at the gate
	echoToSender bool
	holding      bool
	held         []heldFrame
	saveStatus   string
	quietSaves   bool // saves write the file but publish nothing (as a save cancelled mid-write)
	holdSaves    bool // save requests wait for ReleaseSaves (a save that takes time)
	heldSaves    []heldSave
	writeErr     error
	stall        chan struct{} // non-nil: writes block until it is closed
	onCloseNorm  func(*Conn)
	engine       bridge.EngineInfo // what document sessions say the server speaks
	stepTwoFirst bool              // jupyter-server-documents' handshake order
	load         RoomLoad
	store        map[string][]byte // LoadStore: path → the room's state as the store kept it
	loader       bool              // rooms are written by client 0, as jupyter-collaboration's loader writes them
	afterStepOne []lateEdit        // edits applied right after the next step 1 of their room is answered

	openCalls, dialCalls int
	conns                []*Conn // every conn ever dialled, in order
	awareness            []AwarenessRecord
	saves                map[string]int // path → saves written

	changed chan struct{} // closed and replaced on every state change
}

type room struct {
	id, path string
	kind     ydoc.Kind
	doc      *ydoc.Doc
	conns    []*Conn
}

// lateEdit is a collaborator's edit the server reads just after a client's step 1 (EditAfterNextStepOne).
type lateEdit struct {
	path string
	fn   func(*ydoc.Txn) error
}

type heldFrame struct {
	to    *Conn
	frame []byte
}

type heldSave struct {
	c  *Conn
	r  *room
	id uint64
}

// New returns a running fake holding files, or DefaultFiles when none are given.
func New(files ...File) *Server {
	if len(files) == 0 {
		files = DefaultFiles()
	}
	s := &Server{
		files:        map[string]File{},
		fileIDs:      map[string]string{},
		rooms:        map[string]*room{},
		known:        map[string]bool{},
		echoToSender: true,
		saveStatus:   "success",
		nextCID:      1000,
		changed:      make(chan struct{}),
		saves:        map[string]int{},
		store:        map[string][]byte{},
	}
	for _, f := range files {
		s.files[f.Path] = f
	}
	s.newSessionLocked()
	return s
}

var (
	_ bridge.Jupyter    = (*Server)(nil)
	_ bridge.FileReader = (*Server)(nil)
)

// ---- bridge.Jupyter ----

// OpenDocSession implements bridge.Jupyter. Like the real server it succeeds for a path that
// does not exist (the websocket then closes with 4404).
func (s *Server) OpenDocSession(ctx context.Context, p, format, docType string) (bridge.DocSession, error) {
	s.mu.Lock()
	s.openCalls++
	gate := s.openGate
	if gate != nil {
		s.openBlocked++
	}
	s.bumpLocked()
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		s.mu.Lock()
		s.openBlocked--
		s.bumpLocked()
		s.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return bridge.DocSession{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.down:
		return bridge.DocSession{}, fmt.Errorf("PUT /api/collaboration/session/%s: %w", p, ErrConnRefused)
	case s.refuse:
		return bridge.DocSession{}, &Error{Status: 403, Msg: "token refused", Perm: true}
	}
	id, ok := s.fileIDs[p]
	if !ok {
		id = fmt.Sprintf("fid-%04d", len(s.fileIDs)+1)
		s.fileIDs[p] = id
	}
	return bridge.DocSession{FileID: id, SessionID: s.session, RoomID: format + ":" + docType + ":" + id, Engine: s.engine}, nil
}

// DialRoom implements bridge.Jupyter. The returned conn has already received the server's
// step 1, or is already closed with the close code the real server would use.
func (s *Server) DialRoom(ctx context.Context, roomID, sessionID string) (bridge.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dialCalls++
	s.bumpLocked()
	if s.down {
		return nil, fmt.Errorf("GET /api/collaboration/room/%s: %w", roomID, ErrConnRefused)
	}
	if s.refuse {
		return nil, &Error{Status: 403, Msg: "token refused", Perm: true}
	}
	c := newConn(s)
	s.conns = append(s.conns, c)
	if s.reject != nil {
		c.closeRemoteLocked(s.reject)
		return c, nil
	}
	if strings.Count(roomID, ":") < 2 { // a transient room (global awareness): no session, empty doc
		r := s.rooms[roomID]
		if r == nil {
			s.nextCID++
			doc, err := ydoc.NewDoc(ydoc.KindText, s.nextCID, zerolog.Nop())
			if err != nil {
				c.closeRemoteLocked(&CloseError{Code: 4500, Reason: err.Error()})
				return c, nil
			}
			r = &room{id: roomID, path: roomID, kind: ydoc.KindText, doc: doc}
			s.rooms[roomID] = r
		}
		c.room = r
		r.conns = append(r.conns, c)
		if !s.stepTwoFirst {
			c.pushLocked(ydoc.EncodeSync(ydoc.SyncStep1, r.doc.StateVector().Encode()))
		}
		return c, nil
	}
	if !s.known[sessionID] {
		reason, _ := json.Marshal(map[string]any{"reason": "unknown_session", "sessionId": sessionID, "reloadable": true})
		c.closeRemoteLocked(&CloseError{Code: CloseSessionProblem, Reason: string(reason)})
		return c, nil
	}
	parts := strings.SplitN(roomID, ":", 3)
	if len(parts) != 3 {
		c.closeRemoteLocked(&CloseError{Code: CloseBadRequest, Reason: "bad room id"})
		return c, nil
	}
	r := s.rooms[roomID]
	if r == nil {
		var err error
		if r, err = s.newRoomLocked(roomID, parts[1], parts[2]); err != nil {
			c.closeRemoteLocked(err)
			return c, nil
		}
		s.rooms[roomID] = r
	}
	c.room = r
	r.conns = append(r.conns, c)
	if !s.stepTwoFirst {
		c.pushLocked(ydoc.EncodeSync(ydoc.SyncStep1, r.doc.StateVector().Encode()))
	}
	return c, nil
}

// Stat implements bridge.Jupyter.
func (s *Server) Stat(ctx context.Context, p string) (bridge.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return bridge.FileInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return bridge.FileInfo{}, ErrConnRefused
	}
	if p == "" {
		return bridge.FileInfo{Name: "", Path: "", Type: "directory", Size: -1, Writable: true}, nil
	}
	f, ok := s.files[p]
	if !ok {
		return bridge.FileInfo{}, &Error{Status: 404, Msg: "No such file or directory: " + p, Perm: true}
	}
	return fileInfo(f), nil
}

// Create implements bridge.Jupyter: the file joins the table (notebooks from nbformat JSON).
func (s *Server) Create(ctx context.Context, p string, kind ydoc.Kind, content []byte) (bridge.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return bridge.FileInfo{}, err
	}
	f := File{Path: p, Type: "file", Text: string(content)}
	if kind == ydoc.KindNotebook {
		nb, err := ydoc.ParseNBFormat(content)
		if err != nil {
			return bridge.FileInfo{}, &Error{Status: 400, Msg: err.Error(), Perm: true}
		}
		f = File{Path: p, Type: "notebook", Notebook: nb}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return bridge.FileInfo{}, ErrConnRefused
	}
	if dir := path.Dir(p); dir != "." {
		if d, ok := s.files[dir]; !ok || d.Type != "directory" {
			return bridge.FileInfo{}, &Error{Status: 404, Msg: "No such directory: " + dir, Perm: true}
		}
	}
	s.files[p] = f
	s.bumpLocked()
	return fileInfo(f), nil
}

// CreateDir implements bridge.Jupyter.
func (s *Server) CreateDir(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ErrConnRefused
	}
	if dir := path.Dir(p); dir != "." {
		if d, ok := s.files[dir]; !ok || d.Type != "directory" {
			return &Error{Status: 404, Msg: "No such directory: " + dir, Perm: true}
		}
	}
	if _, ok := s.files[p]; ok {
		return &Error{Status: 409, Msg: p + " exists", Perm: true}
	}
	s.files[p] = File{Path: p, Type: "directory"}
	s.bumpLocked()
	return nil
}

// List implements bridge.Jupyter.
func (s *Server) List(ctx context.Context, dir string) ([]bridge.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, ErrConnRefused
	}
	if dir != "" {
		f, ok := s.files[dir]
		if !ok {
			return nil, &Error{Status: 404, Msg: "No such file or directory: " + dir, Perm: true}
		}
		if f.Type != "directory" {
			return nil, &Error{Status: 400, Msg: dir + " is not a directory", Perm: true}
		}
	}
	var out []bridge.FileInfo
	for _, f := range s.files {
		parent := path.Dir(f.Path)
		if parent == "." {
			parent = ""
		}
		if parent == dir {
			out = append(out, fileInfo(f))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func fileInfo(f File) bridge.FileInfo {
	size := int64(-1)
	if f.Type == "file" {
		size = int64(len(f.Text))
	}
	return bridge.FileInfo{
		Name:         path.Base(f.Path),
		Path:         f.Path,
		Type:         f.Type,
		Size:         size,
		LastModified: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		Writable:     true,
	}
}

// ---- rooms ----

func (s *Server) newSessionLocked() {
	s.gen++
	s.session = fmt.Sprintf("session-%d", s.gen)
	s.known[s.session] = true
}

// newRoomLocked builds a room's document from the file table, as the server does when the
// first client joins (a CloseError when the file cannot be loaded as that type).
func (s *Server) newRoomLocked(id, docType, fileID string) (*room, error) {
	p := ""
	for fp, fid := range s.fileIDs {
		if fid == fileID {
			p = fp
		}
	}
	f, ok := s.files[p]
	if !ok || f.Type == "directory" {
		return nil, &CloseError{Code: CloseFileNotFound, Reason: "Error initializing: " + p + "."}
	}
	kind := ydoc.KindNotebook
	switch {
	case docType == "notebook" && f.Type == "notebook":
	case docType == "file" && f.Type == "file":
		kind = ydoc.KindText
	default:
		return nil, &CloseError{Code: CloseBadRequest, Reason: "Error initializing: " + p + "."}
	}
	s.nextCID++
	newDoc := func() (*ydoc.Doc, error) { return ydoc.NewDoc(kind, s.nextCID, zerolog.Nop()) }
	if s.loader {
		newDoc = func() (*ydoc.Doc, error) { return ydoc.NewLoaderDoc(kind, zerolog.Nop()) }
	}
	doc, err := newDoc()
	if err != nil {
		return nil, &CloseError{Code: 4500, Reason: err.Error()}
	}
	content := ydoc.Snapshot{Kind: kind, Text: f.Text}
	if kind == ydoc.KindNotebook {
		content.Notebook = serverRead(f.Notebook)
	}
	if err := s.loadLocked(doc, p, content); err != nil {
		return nil, &CloseError{Code: 4500, Reason: err.Error()}
	}
	return &room{id: id, path: p, kind: kind, doc: doc}, nil
}

// loadLocked fills a new room's document from its file as the server's RoomLoad does.
func (s *Server) loadLocked(doc *ydoc.Doc, p string, content ydoc.Snapshot) error {
	stored, inStore := s.store[p]
	switch {
	case s.load == LoadStore && inStore:
		if _, _, err := doc.Apply(stored); err != nil {
			return err
		}
		now, err := doc.Snapshot()
		if err != nil {
			return err
		}
		if ydoc.ContentKey(now, ydoc.MatchOptions{}) == ydoc.ContentKey(content, ydoc.MatchOptions{}) {
			return nil
		}
		_, _, err = doc.Transact(func(tx *ydoc.Txn) error { // the file is out of sync with the store
			if content.Kind == ydoc.KindText {
				return tx.SetText(content.Text)
			}
			return tx.ReloadNotebook(content.Notebook)
		})
		return err
	case s.load == LoadDeterministic, s.load == LoadStore:
		update, err := ydoc.LoadDeterministic(content, zerolog.Nop())
		if err != nil {
			return err
		}
		_, _, err = doc.Apply(update)
		return err
	}
	_, _, err := doc.Transact(func(tx *ydoc.Txn) error {
		if content.Kind == ydoc.KindText {
			return tx.SetText(content.Text)
		}
		return tx.LoadNotebook(content.Notebook)
	})
	return err
}

func (s *Server) roomByPathLocked(p string) *room {
	for _, r := range s.rooms {
		if r.path == p {
			return r
		}
	}
	return nil
}

// handle processes one frame a client wrote, like pycrdt-websocket's YRoom.serve plus
// jupyter-collaboration's RAW handling.
func (s *Server) handle(c *Conn, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.bumpLocked()
	c.mu.Lock()
	c.received = append(c.received, append([]byte(nil), data...))
	c.mu.Unlock()
	r := c.room
	if r == nil || c.isClosed() {
		return
	}
	f, err := ydoc.DecodeFrame(data)
	if err != nil {
		return // the real server logs and drops malformed frames
	}
	switch f.Type {
	case ydoc.MsgSync:
		switch f.Sync {
		case ydoc.SyncStep1:
			diff, err := r.doc.EncodeStateAsUpdate(f.Payload)
			if err != nil {
				return
			}
			c.pushLocked(ydoc.EncodeSync(ydoc.SyncStep2, diff))
			if s.stepTwoFirst { // jupyter-server-documents asks back after its step 2
				c.pushLocked(ydoc.EncodeSync(ydoc.SyncStep1, r.doc.StateVector().Encode()))
			}
			s.applyLateEditsLocked(r)
		case ydoc.SyncStep2, ydoc.SyncUpdate:
			meta, _, err := r.doc.Apply(f.Payload)
			if err != nil {
				// jupyter-collaboration answers an update it cannot integrate with a conflict.
				c.pushLocked(ydoc.EncodeRaw(`{"type":"conflict"}`))
				return
			}
			if meta.Empty() {
				return
			}
			s.broadcastUpdateLocked(r, append([]byte(nil), f.Payload...))
		}
	case ydoc.MsgAwareness:
		records, err := decodeAwareness(f.Payload)
		if err != nil {
			return
		}
		for i := range records {
			records[i].Path = r.path
		}
		s.awareness = append(s.awareness, records...)
		leaving := len(records) == 1 && records[0].State == nil
		for _, o := range r.conns {
			if o == c && (leaving || !s.echoToSender) {
				continue
			}
			o.pushLocked(data)
		}
	case ydoc.MsgRaw:
		if f.Raw == "save" {
			if s.holdSaves {
				s.heldSaves = append(s.heldSaves, heldSave{c: c, r: r, id: f.SaveID})
				return
			}
			s.answerSaveLocked(c, r, f.SaveID)
		}
	}
}

// answerSaveLocked saves (when the save status says success) and answers the request.
func (s *Server) answerSaveLocked(c *Conn, r *room, id uint64) {
	if s.saveStatus == "success" {
		s.saveLocked(r)
	}
	msg := fmt.Sprintf(`{"type":"save","responseTo":%d,"status":%q}`, id, s.saveStatus)
	c.pushLocked(ydoc.EncodeRaw(msg))
}

// saveLocked writes the room's document to its file and publishes the save in the room's
// state: dirty false, then the file's hash (two transactions, as the real server's setters).
func (s *Server) saveLocked(r *room) {
	f, ok := s.files[r.path]
	if !ok {
		return
	}
	if r.kind == ydoc.KindText {
		t, err := r.doc.Text()
		if err != nil {
			return
		}
		f.Text = t
	} else {
		nb, err := r.doc.Notebook()
		if err != nil {
			return
		}
		f.Notebook = copyNotebook(nb)
	}
	s.files[r.path] = f
	s.saves[r.path]++
	if s.quietSaves {
		return
	}
	hash := fileHash(f)
	for _, fn := range []func(*ydoc.Txn) error{
		func(tx *ydoc.Txn) error { return tx.SetState("dirty", false) },
		func(tx *ydoc.Txn) error { return tx.SetState("hash", hash) },
	} {
		if update, _, err := r.doc.Transact(fn); err == nil && update != nil {
			s.broadcastUpdateLocked(r, update)
		}
	}
}

// fileHash stands for the contents API's hash of the file.
func fileHash(f File) string {
	var b []byte
	if f.Type == "notebook" {
		b, _ = json.Marshal(f.Notebook.JSON())
	} else {
		b = []byte(f.Text)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func copyNotebook(nb ydoc.Notebook) ydoc.Notebook {
	b, err := json.Marshal(nb.JSON())
	if err != nil {
		return nb
	}
	c, err := ydoc.ParseNBFormat(b)
	if err != nil {
		return nb
	}
	return c
}

// serverRead is a notebook as jupyter-server reads its file: in nbformat 4.5, a cell without an
// id, or with an id an earlier cell has, gets a new random id (nbformat's validator repairs it),
// on every read.
func serverRead(nb ydoc.Notebook) ydoc.Notebook {
	nb = copyNotebook(nb)
	if nb.NBFormatMinor < 5 {
		return nb
	}
	seen := map[string]bool{}
	for i := range nb.Cells {
		if c := &nb.Cells[i]; c.ID == "" || seen[c.ID] {
			c.ID = ydoc.NewCellID()
		}
		seen[nb.Cells[i].ID] = true
	}
	return nb
}

var _ bridge.NotebookFileServer = (*Server)(nil)

// NotebookFile implements bridge.NotebookFileServer: the file as the contents API reads it
// (serverRead).
func (s *Server) NotebookFile(ctx context.Context, p string) (ydoc.Notebook, error) {
	if err := ctx.Err(); err != nil {
		return ydoc.Notebook{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ydoc.Notebook{}, ErrConnRefused
	}
	f, ok := s.files[p]
	if !ok || f.Type != "notebook" {
		return ydoc.Notebook{}, &Error{Status: 404, Msg: "No such notebook: " + p, Perm: true}
	}
	return serverRead(f.Notebook), nil
}

// ReadFile implements bridge.FileReader.
func (s *Server) ReadFile(ctx context.Context, p string, kind ydoc.Kind, content bool) (bridge.FileContent, error) {
	if err := ctx.Err(); err != nil {
		return bridge.FileContent{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return bridge.FileContent{}, ErrConnRefused
	}
	f, ok := s.files[p]
	if !ok || f.Type == "directory" {
		return bridge.FileContent{}, &Error{Status: 404, Msg: "No such file: " + p, Perm: true}
	}
	fc := bridge.FileContent{Hash: fileHash(f)}
	if content {
		snap := ydoc.Snapshot{Kind: kind, Text: f.Text}
		if kind == ydoc.KindNotebook {
			snap.Notebook = copyNotebook(f.Notebook)
		}
		fc.Doc = &snap
	}
	return fc, nil
}

// applyLateEditsLocked applies the edits EditAfterNextStepOne left for room r, as a peer's.
func (s *Server) applyLateEditsLocked(r *room) {
	kept := s.afterStepOne[:0]
	var due []lateEdit
	for _, e := range s.afterStepOne {
		if e.path == r.path {
			due = append(due, e)
		} else {
			kept = append(kept, e)
		}
	}
	s.afterStepOne = kept
	for _, e := range due {
		if update, _, err := r.doc.Transact(e.fn); err == nil && update != nil {
			s.broadcastUpdateLocked(r, update)
		}
	}
}

// broadcastUpdateLocked sends an update to every client of the room, or holds it back.
func (s *Server) broadcastUpdateLocked(r *room, update []byte) {
	frame := ydoc.EncodeSync(ydoc.SyncUpdate, update)
	for _, o := range r.conns {
		if s.holding {
			s.held = append(s.held, heldFrame{to: o, frame: frame})
			continue
		}
		o.pushLocked(frame)
	}
}

func (s *Server) dropAllLocked(err error) {
	for _, r := range s.rooms {
		for _, c := range slices.Clone(r.conns) {
			c.closeRemoteLocked(err)
		}
	}
	s.held = nil
}

func (s *Server) detachLocked(c *Conn) {
	if c.room == nil {
		return
	}
	c.room.conns = slices.DeleteFunc(c.room.conns, func(o *Conn) bool { return o == c })
}

func (s *Server) bumpLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

var _ bridge.NotebookTextServer = (*Server)(nil)

// NotebookText implements bridge.NotebookTextServer: the notebook file's JSON (cell ids as the
// file holds them; none for nbformat < 4.5).
func (s *Server) NotebookText(ctx context.Context, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, ErrConnRefused
	}
	f, ok := s.files[p]
	if !ok || f.Type == "directory" {
		return nil, &Error{Status: 404, Msg: "No such file: " + p, Perm: true}
	}
	if f.Type != "notebook" {
		return []byte(f.Text), nil
	}
	return json.Marshal(f.Notebook.JSON())
}
