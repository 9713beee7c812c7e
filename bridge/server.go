package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Jupyter is what rooms need from jupyter-server. bridge/jupyterserver implements it on top of
// the jupyter package; tests use fakes.
type Jupyter interface {
	// OpenDocSession asks for a document session (PUT /api/collaboration/session/{path}).
	OpenDocSession(ctx context.Context, path, format, docType string) (DocSession, error)
	// DialRoom opens the room websocket.
	DialRoom(ctx context.Context, roomID, sessionID string) (Conn, error)
	// Stat describes a file or directory (contents API, without content).
	Stat(ctx context.Context, path string) (FileInfo, error)
	// List returns the entries of a directory.
	List(ctx context.Context, dir string) ([]FileInfo, error)
	// Create writes a new document (contents API). content is nbformat JSON for a notebook, the
	// text for a text file. Only for files without a live room: a contents write to a live room's
	// file is an out-of-band change that overwrites unsaved edits.
	Create(ctx context.Context, path string, kind ydoc.Kind, content []byte) (FileInfo, error)
	// CreateDir creates a directory whose parent exists.
	CreateDir(ctx context.Context, path string) error
}

// ForkServer is jupyter-collaboration's fork API. A Jupyter may implement it; without it the
// fork tools say forks are unavailable.
type ForkServer interface {
	// CreateFork forks a live room; synchronize keeps the root's updates flowing into the fork.
	CreateFork(ctx context.Context, rootRoomID string, f ForkInfo) (forkID string, err error)
	// ListForks returns a root room's forks by fork id.
	ListForks(ctx context.Context, rootRoomID string) (map[string]ForkInfo, error)
	// DeleteFork deletes a fork, merging its whole state into the root first when merge is set.
	DeleteFork(ctx context.Context, forkID string, merge bool) error
}

// ForkInfo describes a fork as the server keeps it.
type ForkInfo struct {
	RootRoomID  string
	Synchronize bool
	Title       string
	Description string
}

// DocSession identifies a document session on the server.
type DocSession struct {
	FileID    string
	SessionID string     // changes when the server restarts; "" on engines without sessions
	RoomID    string     // format:type:fileId
	Engine    EngineInfo // what the server behind this session speaks
}

// EngineInfo is what rooms and tools need to know about the server's collaboration engine. The
// zero value is jupyter-collaboration's protocol; room logic is otherwise engine-neutral (how a
// room is found and which engine runs are the Jupyter's business).
type EngineInfo struct {
	// Name is the engine's package, for logs, readiness and tools: jupyter-collaboration or
	// jupyter-server-documents ("" when not known).
	Name string
	// SavesItself: the server saves documents on its own and understands no RAW save message
	// (jupyter-server-documents); Room.Save is refused with ErrSavesItself.
	SavesItself bool
	// NoForks: the server has no fork API; the fork operations fail with ErrNoForks.
	NoForks bool
	// OutputPlaceholders: documents may hold placeholders for outputs kept by an outputs
	// service (jupyter-server-documents); reads show what they stand for (outputs.go).
	OutputPlaceholders bool
	// FreesIdleRooms: the server frees a room nobody is in after a while and loads it afresh
	// for the next client (jupyter-server-documents). A room of such a server that stops
	// answering handshakes is left alone for RoomOptions.DeadRoomWait so that it can be freed.
	FreesIdleRooms bool
}

// EngineServer is a Jupyter that can say which collaboration engine it talks to (detecting it
// on first use) and what that engine can do. A Jupyter without it is taken for
// jupyter-collaboration.
type EngineServer interface {
	EngineInfo(ctx context.Context) (EngineInfo, error)
}

// FileInfo describes a file or directory under the Jupyter root.
type FileInfo struct {
	Name         string
	Path         string
	Type         string // directory, notebook or file
	Size         int64  // -1 when unknown
	LastModified time.Time
	Writable     bool
}

// Conn is one room websocket. Read is called by one goroutine, Write by another; Ping, Close
// and CloseNormal may be called concurrently with both.
type Conn interface {
	Read() ([]byte, error)
	Write(data []byte, deadline time.Time) error
	Ping(deadline time.Time) error
	CloseNormal(deadline time.Time) error
	Close() error
}

// idleTimer is implemented by a Jupyter whose room sockets have a read deadline (the jupyter
// package's do: jupyter.IdleTimeout): a socket silent that long is taken for dead, so rooms must
// ping at most half that far apart.
type idleTimer interface{ IdleTimeout() time.Duration }

// checkPingInterval refuses a ping interval the server's sockets would time out under.
func checkPingInterval(s Jupyter, ping time.Duration) error {
	it, ok := s.(idleTimer)
	if !ok || ping <= 0 {
		return nil
	}
	if idle := it.IdleTimeout(); ping > idle/2 {
		return fmt.Errorf("ping interval %v: must be at most %v, half the %v after which the server's sockets are taken for dead", ping, idle/2, idle)
	}
	return nil
}

// Errors a Jupyter returns are classified by these optional methods (the jupyter package's
// error types have them), never by their text.
type (
	permanentError interface{ Permanent() bool }
	closeError     interface {
		CloseCode() int
		CloseReason() string
	}
	statusError interface{ StatusCode() int }
)

func isPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) && p.Permanent()
}

// IsNotFound reports whether err says the server has no such file.
func IsNotFound(err error) bool {
	var s statusError
	if errors.As(err, &s) && s.StatusCode() == 404 {
		return true
	}
	var c closeError
	return errors.As(err, &c) && c.CloseCode() == closeFileNotFound
}
