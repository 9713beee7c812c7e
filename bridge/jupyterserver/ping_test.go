package jupyterserver

import (
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Rooms over the jupyter package are checked against its sockets' read deadline, and the
// default ping interval passes.
func TestRoomsCheckPingsAgainstTheJupyterIdleTimeout(t *testing.T) {
	c, err := jupyter.New(jupyter.Options{URL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	s := New(c)
	if s.IdleTimeout() != jupyter.IdleTimeout {
		t.Fatalf("IdleTimeout = %v", s.IdleTimeout())
	}
	if _, err := bridge.NewRoom(bridge.RoomOptions{Path: "a.ipynb", Kind: ydoc.KindNotebook, Jupyter: s}); err != nil {
		t.Errorf("default ping interval: %v", err)
	}
	if _, err := bridge.NewRoom(bridge.RoomOptions{Path: "a.ipynb", Kind: ydoc.KindNotebook, Jupyter: s, PingInterval: jupyter.IdleTimeout}); err == nil {
		t.Errorf("a ping interval of %v passed under a %v idle timeout", jupyter.IdleTimeout, jupyter.IdleTimeout)
	}
	if _, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: s, Room: bridge.RoomOptions{PingInterval: time.Minute}}); err == nil {
		t.Error("NewManager took a one-minute room ping interval")
	}
}
