// Package jupyterserver implements bridge.Jupyter and execution.Kernels with the jupyter client:
// the one place where they meet, so that neither side imports the other. It also owns the
// engine seam: which collaboration engine the server runs (detected on first use unless forced)
// and how each one finds a document's room.
package jupyterserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	pathpkg "path"
	"strings"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Adapter adapts a *jupyter.Client to what bridge and execution need. Copies share the engine
// it detected.
type Adapter struct {
	C      *jupyter.Client
	engine *engineState
}

var (
	_ bridge.Jupyter      = Adapter{}
	_ bridge.EngineServer = Adapter{}
)

// New returns the adapter; the engine is detected from the server on first use.
func New(c *jupyter.Client) Adapter { return NewWithEngine(c, jupyter.EngineAuto) }

// NewWithEngine returns the adapter for a given engine (jupyter.EngineAuto: detect it).
func NewWithEngine(c *jupyter.Client, e jupyter.Engine) Adapter {
	return Adapter{C: c, engine: &engineState{forced: e, known: e}}
}

// engineState caches the detected engine. A failed detection is not cached: a server that
// starts after the sidecar, or gets an engine installed and restarted, is asked again.
type engineState struct {
	forced jupyter.Engine
	mu     sync.Mutex
	known  jupyter.Engine
}

// JupyterEngine returns the server's engine, detecting it once.
func (s Adapter) JupyterEngine(ctx context.Context) (jupyter.Engine, error) {
	if s.engine == nil { // a zero Adapter{C: c}: jupyter-collaboration, as before engines
		return jupyter.EngineCollaboration, nil
	}
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if s.engine.known != jupyter.EngineAuto {
		return s.engine.known, nil
	}
	e, err := s.C.DetectEngine(ctx)
	if err != nil {
		return jupyter.EngineAuto, fmt.Errorf("detect the collaboration engine: %w", err)
	}
	s.engine.known = e
	return e, nil
}

// Engine implements bridge.EngineServer.
func (s Adapter) Engine(ctx context.Context) (bridge.Engine, error) {
	e, err := s.JupyterEngine(ctx)
	if err != nil {
		return bridge.Engine{}, err
	}
	return engineInfo(e), nil
}

// engineInfo is what bridge needs to know of an engine.
func engineInfo(e jupyter.Engine) bridge.Engine {
	info := bridge.Engine{Name: e.Package()}
	if e == jupyter.EngineDocuments {
		info.SavesItself, info.NoForks, info.OutputPlaceholders, info.FreesIdleRooms = true, true, true, true
	}
	return info
}

// IdleTimeout is how long a room socket may be silent before it is taken for dead (the bridge
// checks its ping interval against it).
func (Adapter) IdleTimeout() time.Duration { return jupyter.IdleTimeout }

// OpenDocSession implements bridge.Jupyter: jupyter-collaboration's session PUT, or on
// jupyter-server-documents the file id index (its rooms have no session id).
func (s Adapter) OpenDocSession(ctx context.Context, path, format, docType string) (bridge.DocSession, error) {
	e, err := s.JupyterEngine(ctx)
	if err != nil {
		return bridge.DocSession{}, err
	}
	if e == jupyter.EngineDocuments {
		id, err := s.C.IndexFileID(ctx, path)
		if err != nil {
			return bridge.DocSession{}, err
		}
		return bridge.DocSession{FileID: id, RoomID: format + ":" + docType + ":" + id, Engine: engineInfo(e)}, nil
	}
	ds, err := s.C.OpenDocSession(ctx, path, format, docType)
	if err != nil {
		return bridge.DocSession{}, err
	}
	return bridge.DocSession{FileID: ds.FileID, SessionID: ds.SessionID, RoomID: ds.RoomID(), Engine: engineInfo(e)}, nil
}

// DialRoom implements bridge.Jupyter.
func (s Adapter) DialRoom(ctx context.Context, roomID, sessionID string) (bridge.Conn, error) {
	c, err := s.C.DialRoom(ctx, roomID, sessionID)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Stat implements bridge.Jupyter.
func (s Adapter) Stat(ctx context.Context, path string) (bridge.FileInfo, error) {
	e, err := s.C.Contents(ctx, path, false)
	if err != nil {
		return bridge.FileInfo{}, err
	}
	return fileInfo(e), nil
}

// List implements bridge.Jupyter.
func (s Adapter) List(ctx context.Context, dir string) ([]bridge.FileInfo, error) {
	entries, err := s.C.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := make([]bridge.FileInfo, len(entries))
	for i, e := range entries {
		out[i] = fileInfo(e)
	}
	return out, nil
}

// Create implements bridge.Jupyter.
func (s Adapter) Create(ctx context.Context, path string, kind ydoc.Kind, content []byte) (bridge.FileInfo, error) {
	var e jupyter.Entry
	var err error
	if kind == ydoc.KindNotebook {
		if !json.Valid(content) {
			return bridge.FileInfo{}, fmt.Errorf("create %s: notebook content is not JSON", path)
		}
		e, err = s.C.SaveContents(ctx, path, "notebook", "json", json.RawMessage(content))
	} else {
		e, err = s.C.SaveContents(ctx, path, "file", "text", string(content))
	}
	if err != nil {
		return bridge.FileInfo{}, err
	}
	return fileInfo(e), nil
}

// CreateDir implements bridge.Jupyter.
func (s Adapter) CreateDir(ctx context.Context, path string) error {
	_, err := s.C.SaveContents(ctx, path, "directory", "", nil)
	return err
}

var _ bridge.FileReader = Adapter{}

// ReadFile implements bridge.FileReader.
func (s Adapter) ReadFile(ctx context.Context, path string, kind ydoc.Kind, content bool) (bridge.FileContent, error) {
	docType := "file"
	if kind == ydoc.KindNotebook {
		docType = "notebook"
	}
	e, err := s.C.ContentsHashed(ctx, path, docType, content)
	if err != nil {
		return bridge.FileContent{}, err
	}
	fc := bridge.FileContent{Hash: e.Hash}
	if !content {
		return fc, nil
	}
	snap := ydoc.Snapshot{Kind: kind}
	if kind == ydoc.KindNotebook {
		if snap.Notebook, err = ydoc.ParseNBFormat(e.Content); err != nil {
			return bridge.FileContent{}, fmt.Errorf("read %s: %w", path, err)
		}
	} else {
		var text string
		if err := json.Unmarshal(e.Content, &text); err != nil {
			return bridge.FileContent{}, fmt.Errorf("read %s: content is not text: %w", path, err)
		}
		snap.Text = strings.ReplaceAll(text, "\r\n", "\n") // as jupyter-collaboration loads it
	}
	fc.Doc = &snap
	return fc, nil
}

func fileInfo(e jupyter.Entry) bridge.FileInfo {
	size := int64(-1)
	if e.Size != nil {
		size = *e.Size
	}
	return bridge.FileInfo{Name: e.Name, Path: e.Path, Type: e.Type, Size: size, LastModified: e.LastModified, Writable: e.Writable}
}

// Kernels adapts a *jupyter.Client to execution.Kernels.
type Kernels struct {
	C        *jupyter.Client
	Username string // in the header of our kernel messages
	// Adapter, when set, tells the engine: jupyter-server-documents runs cells itself, and its
	// kernel websocket speaks only the v1 binary protocol, so the sidecar's own kernel channel
	// is refused there with a clear error instead of a socket that keeps dropping.
	Adapter *Adapter
}

// ErrServerExecutes says the engine runs notebook cells on the server, so the sidecar opens no
// kernel channel of its own there (execution.ServerEngine runs cells through the server;
// docs/engines.md, "Execution").
var ErrServerExecutes = &serverExecutesError{}

type serverExecutesError struct{}

func (*serverExecutesError) Error() string {
	return "jupyter-server-documents runs notebook cells on the server (POST /api/kernels/{id}/execute): the sidecar " +
		"runs them through it and opens no kernel channel of its own there (its kernel websockets share one ZMQ " +
		"identity, so another one would cut the humans' off)"
}

// Permanent is true: retrying cannot help.
func (*serverExecutesError) Permanent() bool { return true }

var _ execution.Kernels = Kernels{}

var _ bridge.ForkServer = Adapter{}

// noForks refuses the fork API on engines without one.
func (s Adapter) noForks(ctx context.Context) error {
	e, err := s.Engine(ctx)
	if err != nil {
		return err
	}
	if e.NoForks {
		return fmt.Errorf("%w: %s has no fork API", bridge.ErrNoForks, e.Name)
	}
	return nil
}

// CreateFork implements bridge.ForkServer.
func (s Adapter) CreateFork(ctx context.Context, root string, f bridge.ForkInfo) (string, error) {
	if err := s.noForks(ctx); err != nil {
		return "", err
	}
	out, err := s.C.CreateFork(ctx, root, f.Title, f.Description, f.Synchronize)
	return out.ForkRoomID, err
}

// ListForks implements bridge.ForkServer.
func (s Adapter) ListForks(ctx context.Context, root string) (map[string]bridge.ForkInfo, error) {
	if err := s.noForks(ctx); err != nil {
		return nil, err
	}
	in, err := s.C.ListForks(ctx, root)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bridge.ForkInfo, len(in))
	for id, f := range in {
		out[id] = bridge.ForkInfo{RootRoomID: f.RootRoomID, Synchronize: f.Synchronize, Title: f.Title, Description: f.Description}
	}
	return out, nil
}

// DeleteFork implements bridge.ForkServer.
func (s Adapter) DeleteFork(ctx context.Context, id string, merge bool) error {
	if err := s.noForks(ctx); err != nil {
		return err
	}
	return s.C.DeleteFork(ctx, id, merge)
}

// Sessions implements execution.Kernels.
func (k Kernels) Sessions(ctx context.Context) ([]execution.KernelSession, error) {
	ss, err := k.C.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]execution.KernelSession, 0, len(ss))
	for _, s := range ss {
		out = append(out, kernelSession(s))
	}
	return out, nil
}

func kernelSession(s jupyter.SessionModel) execution.KernelSession {
	ks := execution.KernelSession{ID: s.ID, Path: s.Path, Type: s.Type}
	if s.Kernel != nil {
		ks.KernelID, ks.KernelName, ks.State = s.Kernel.ID, s.Kernel.Name, s.Kernel.ExecutionState
	}
	return ks
}

// StartSession implements execution.Kernels.
func (k Kernels) StartSession(ctx context.Context, path, kernelName string) (execution.KernelSession, error) {
	s, err := k.C.StartSession(ctx, path, pathpkg.Base(path), kernelName)
	if err != nil {
		return execution.KernelSession{}, err
	}
	return kernelSession(s), nil
}

// KernelState implements execution.Kernels.
func (k Kernels) KernelState(ctx context.Context, id string) (string, error) {
	m, err := k.C.Kernel(ctx, id)
	return m.ExecutionState, err
}

// Interrupt implements execution.Kernels.
func (k Kernels) Interrupt(ctx context.Context, id string) error { return k.C.InterruptKernel(ctx, id) }

// Restart implements execution.Kernels.
func (k Kernels) Restart(ctx context.Context, id string) error {
	_, err := k.C.RestartKernel(ctx, id)
	return err
}

// Connect implements execution.Kernels.
func (k Kernels) Connect(ctx context.Context, id string) (execution.KernelChannel, error) {
	if k.Adapter != nil {
		e, err := k.Adapter.JupyterEngine(ctx)
		if err != nil {
			return nil, err
		}
		if e == jupyter.EngineDocuments {
			return nil, ErrServerExecutes
		}
	}
	c, err := k.C.ConnectKernel(ctx, id, k.Username)
	if err != nil {
		return nil, err
	}
	return kernelChannel{c}, nil
}

type kernelChannel struct{ c *jupyter.KernelConn }

func (kc kernelChannel) Execute(ctx context.Context, code string, storeHistory, stopOnError bool, md map[string]any) (execution.RunningCode, error) {
	e, err := kc.c.Execute(ctx, jupyter.ExecuteRequest{Code: code, StoreHistory: storeHistory, StopOnError: stopOnError, Metadata: md})
	if err != nil {
		return nil, err
	}
	return running{e}, nil
}

func (kc kernelChannel) KernelInfo(ctx context.Context) error { return kc.c.KernelInfo(ctx) }
func (kc kernelChannel) Ready(ctx context.Context) error      { return kc.c.Ready(ctx) }
func (kc kernelChannel) Done() <-chan struct{}                { return kc.c.Done() }
func (kc kernelChannel) Restarts() int                        { return kc.c.Restarts() }
func (kc kernelChannel) Close() error                         { return kc.c.Close() }

type running struct{ e *jupyter.Execution }

func (r running) Abandon() { r.e.Abandon() }

func (r running) Next(ctx context.Context) ([]execution.KernelMsg, bool, error) {
	msgs, done, err := r.e.Next(ctx)
	out := make([]execution.KernelMsg, len(msgs))
	for i, m := range msgs {
		out[i] = execution.KernelMsg{Channel: m.Channel, Type: m.Header.MsgType, Content: m.Content}
		if m.Channel == "server" && m.Header.MsgType == jupyter.KernelRestarting {
			out[i].Type = execution.MsgKernelRestarting
		}
	}
	return out, done, err
}

var _ execution.ServerKernels = Kernels{}

// ExecuteCells implements execution.ServerKernels with jupyter-server-documents' execute API:
// each cell goes with the MurmurHash2 of its source, and the server's refusals become
// execution's errors (409 ErrSourceChanged, 408 ErrPredecessorTimeout, a room without a
// kernel ErrRoomWithoutKernel).
func (k Kernels) ExecuteCells(ctx context.Context, kernelID, roomID string, cells []execution.CellSource, requestID string) error {
	req := jupyter.ExecuteCellsRequest{DocumentID: roomID, RequestID: requestID}
	for _, c := range cells {
		req.Cells = append(req.Cells, jupyter.CellToRun{CellID: c.CellID, SourceHash: jupyter.SourceHash(c.Source)})
	}
	err := k.C.ExecuteCells(ctx, kernelID, req)
	switch {
	case errors.Is(err, jupyter.ErrSourceMismatch):
		return fmt.Errorf("%w: %w", execution.ErrSourceChanged, err)
	case errors.Is(err, jupyter.ErrPredecessorTimeout):
		return fmt.Errorf("%w: %w", execution.ErrPredecessorTimeout, err)
	case errors.Is(err, jupyter.ErrRoomWithoutKernel):
		return fmt.Errorf("%w: %w", execution.ErrRoomWithoutKernel, err)
	}
	return err
}

// AttachSession implements execution.ServerKernels: a PATCH of the session with the kernel it
// has, which jupyter-server-documents answers by attaching that kernel to the notebook's room.
func (k Kernels) AttachSession(ctx context.Context, s execution.KernelSession) error {
	_, err := k.C.UpdateSessionKernel(ctx, s.ID, s.KernelID)
	return err
}

// ConnectScratch implements execution.ServerKernels: a kernel websocket of the sidecar's own
// in the v1 protocol, the only one jupyter-server-documents speaks (execution/scratch_server.go
// says when the engine opens one, and why so rarely).
func (k Kernels) ConnectScratch(ctx context.Context, id string) (execution.KernelChannel, error) {
	c, err := k.C.ConnectKernelV1(ctx, id, k.Username)
	if err != nil {
		return nil, err
	}
	return kernelChannel{c}, nil
}

var (
	_ bridge.OutputServer       = Adapter{}
	_ bridge.NotebookFileServer = Adapter{}
)

// FetchOutput implements bridge.OutputServer: jupyter-server-documents' outputs service.
func (s Adapter) FetchOutput(ctx context.Context, url string) (map[string]any, error) {
	return s.C.FetchOutput(ctx, url)
}

var _ bridge.NotebookTextServer = Adapter{}

// NotebookText implements bridge.NotebookTextServer: the notebook file's JSON as it is on disk.
func (s Adapter) NotebookText(ctx context.Context, path string) ([]byte, error) {
	text, err := s.C.FileText(ctx, path)
	return []byte(text), err
}

// NotebookFile implements bridge.NotebookFileServer: the notebook as saved.
func (s Adapter) NotebookFile(ctx context.Context, path string) (ydoc.Notebook, error) {
	e, err := s.C.Contents(ctx, path, true)
	if err != nil {
		return ydoc.Notebook{}, err
	}
	if e.Type != "notebook" {
		return ydoc.Notebook{}, fmt.Errorf("%s is a %s, not a notebook", path, e.Type)
	}
	return ydoc.ParseNBFormat(e.Content)
}
