package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// idleServer is a fake whose sockets time out after idle, as the jupyter package's do.
type idleServer struct {
	*bridgetest.Server
	idle time.Duration
}

func (s idleServer) IdleTimeout() time.Duration { return s.idle }

// A ping interval the server's sockets would time out under is refused where options are
// defaulted: by NewManager for its rooms and by NewRoom.
func TestPingIntervalMustStayUnderTheServersIdleTimeout(t *testing.T) {
	srv := idleServer{Server: bridgetest.New(), idle: 40 * time.Second}
	for _, tc := range []struct {
		ping    time.Duration
		wantErr bool
	}{{0, false}, {15 * time.Second, false}, {20 * time.Second, false}, {21 * time.Second, true}, {time.Minute, true}} {
		opts := bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop()}
		opts.Room.PingInterval = tc.ping
		_, err := bridge.NewManager(opts)
		if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "at most 20s")) {
			t.Errorf("NewManager with ping %v: err = %v, want error %v", tc.ping, err, tc.wantErr)
		}
		_, err = bridge.NewRoom(bridge.RoomOptions{Path: "a.ipynb", Kind: ydoc.KindNotebook, Jupyter: srv, PingInterval: tc.ping})
		if (err != nil) != tc.wantErr {
			t.Errorf("NewRoom with ping %v: err = %v, want error %v", tc.ping, err, tc.wantErr)
		}
	}
	// A server without a read deadline (the in-memory fake) takes any interval.
	if _, err := bridge.NewRoom(bridge.RoomOptions{Path: "a.ipynb", Kind: ydoc.KindNotebook, Jupyter: bridgetest.New(), PingInterval: time.Hour}); err != nil {
		t.Errorf("fake server: %v", err)
	}
}
