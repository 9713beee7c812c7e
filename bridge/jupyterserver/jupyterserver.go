// Package jupyterserver implements bridge.Server with the jupyter client: the one place where
// the two meet, so that neither imports the other.
package jupyterserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Server adapts a *jupyter.Client.
type Server struct{ C *jupyter.Client }

var _ bridge.Server = Server{}

// New returns the adapter.
func New(c *jupyter.Client) Server { return Server{C: c} }

// OpenDocSession implements bridge.Server.
func (s Server) OpenDocSession(ctx context.Context, path, format, docType string) (bridge.DocSession, error) {
	ds, err := s.C.OpenDocSession(ctx, path, format, docType)
	if err != nil {
		return bridge.DocSession{}, err
	}
	return bridge.DocSession{FileID: ds.FileID, SessionID: ds.SessionID, RoomID: ds.RoomID()}, nil
}

// DialRoom implements bridge.Server.
func (s Server) DialRoom(ctx context.Context, roomID, sessionID string) (bridge.Conn, error) {
	c, err := s.C.DialRoom(ctx, roomID, sessionID)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Stat implements bridge.Server.
func (s Server) Stat(ctx context.Context, path string) (bridge.FileInfo, error) {
	e, err := s.C.Contents(ctx, path, false)
	if err != nil {
		return bridge.FileInfo{}, err
	}
	return fileInfo(e), nil
}

// List implements bridge.Server.
func (s Server) List(ctx context.Context, dir string) ([]bridge.FileInfo, error) {
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

// Create implements bridge.Server.
func (s Server) Create(ctx context.Context, path string, kind ydoc.Kind, content []byte) (bridge.FileInfo, error) {
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

// CreateDir implements bridge.Server.
func (s Server) CreateDir(ctx context.Context, path string) error {
	_, err := s.C.SaveContents(ctx, path, "directory", "", nil)
	return err
}

func fileInfo(e jupyter.Entry) bridge.FileInfo {
	size := int64(-1)
	if e.Size != nil {
		size = *e.Size
	}
	return bridge.FileInfo{Name: e.Name, Path: e.Path, Type: e.Type, Size: size, LastModified: e.LastModified, Writable: e.Writable}
}
