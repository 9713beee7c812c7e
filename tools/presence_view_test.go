package tools_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// offsetClock is real time plus an adjustable offset (RoomOptions.Now).
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// startPeerRoom runs a second client on the fake as user (a JupyterLab tab), synced.
func startPeerRoom(t *testing.T, srv *bridgetest.Server, path string, kind ydoc.Kind, user ydoc.AwarenessUser, transient string) *bridge.Room {
	t.Helper()
	opts := bridgetest.FastRoomOptions()
	opts.Path, opts.Kind, opts.Jupyter, opts.User, opts.Transient = path, kind, srv, user, transient
	room, err := bridge.NewRoom(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = room.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := room.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatal(err)
	}
	return room
}

// A collaborator who had the notebook open before the agent: listed by the first call, with
// the notebook in front of them and their cursor pending; the edit tools warn about them; once
// their state reaches the room, their cursor is placed and avoid_busy_cells refuses their cell.
func TestPresenceFromGlobalAwarenessAtJoin(t *testing.T) {
	srv := bridgetest.New()
	clk := &offsetClock{}
	room := bridgetest.FastRoomOptions()
	room.Now = clk.Now
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop(), Room: room, JoinTimeout: testutil.WaitLimit, GlobalAwareness: true, FirstReadWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = m.Run(mctx) }()
	t.Cleanup(func() { stop(); <-mdone })
	ts, err := tools.New(tools.Options{Manager: m, Logger: zerolog.Nop(), Version: "test", Toolsets: []string{"default", "presence"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(testutil.Context(t)); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "presence-test", Version: "1"}
	if _, err := c.Initialize(testutil.Context(t), init); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, m: m, ts: ts, c: c}

	alice := ydoc.AwarenessUser{Username: "alice", Name: "Alice", DisplayName: "Alice L", Color: "#00aa88"}
	tab := startPeerRoom(t, srv, bridge.GlobalAwarenessRoom, ydoc.KindText, alice, bridge.GlobalAwarenessRoom)
	if err := tab.SetFields(testutil.Context(t), map[string]any{"current": "notebook:" + bridgetest.NotebookPath, "documents": []any{bridgetest.NotebookPath}}); err != nil {
		t.Fatal(err)
	}
	// Her tab joins the room before its fields arrive: wait for the document in front of her,
	// and for the sidecar's global room to be in sync (awareness arrives before the sync: the
	// warm-up counts from the sync, and the clock moves on below).
	testutil.Eventually(t, "the sidecar to see alice's tab in global awareness, in sync", func() bool {
		ps, _, _ := m.SyncedGlobalPeers(testutil.Context(t))
		return len(ps) == 1 && ps[0].State["current"] != nil
	})
	clk.Advance(bridge.GlobalWarm) // the sidecar has been running long enough to know every tab

	users := e.ok("get_online_users", map[string]any{"document_path": bridgetest.NotebookPath})
	list, _ := users["users"].([]any)
	if len(list) != 1 {
		t.Fatalf("get_online_users at join: %s", compact(users))
	}
	u := list[0].(map[string]any)
	if u["username"] != "alice" || u["current"] != "notebook:"+bridgetest.NotebookPath || u["cursor_pending"] != true {
		t.Errorf("alice at join: %s", compact(u))
	}
	if note := fmt.Sprint(users["note"]); !strings.Contains(note, "Alice L has "+bridgetest.NotebookPath+" in front of them") {
		t.Errorf("note: %q", note)
	}
	cursors := e.ok("get_user_cursors", map[string]any{"document_path": bridgetest.NotebookPath})
	if p := compact(cursors["cursors_pending"]); !strings.Contains(p, `"username":"alice"`) || !strings.Contains(p, `"in_front":true`) {
		t.Errorf("get_user_cursors at join: %s", compact(cursors))
	}
	out := e.ok("batch_update_notebook_cells", map[string]any{"path": bridgetest.NotebookPath, "updates": []any{map[string]any{"cell_id": "cell-b", "content": "# Title 2"}}})
	if w := compact(out["warnings"]); !strings.Contains(w, "Alice L has "+bridgetest.NotebookPath+" in front of them and where they are typing is not known yet") {
		t.Errorf("edit warnings at join: %s", w)
	}

	// Her tab's state reaches the room, cursor in cell-a: placed, not pending, her cell refused.
	doc := startPeerRoom(t, srv, bridgetest.NotebookPath, ydoc.KindNotebook, alice, "")
	if err := doc.SetCursors(testutil.Context(t), []bridge.CursorSpec{{CellID: "cell-a", Anchor: 2, Head: 2}}); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, "alice's cursor placed", func() (bool, string) {
		cursors = e.ok("get_user_cursors", map[string]any{"document_path": bridgetest.NotebookPath})
		return strings.Contains(compact(cursors["cursors"]), `"cell_id":"cell-a"`), compact(cursors)
	})
	if cursors["cursors_pending"] != nil || cursors["note"] != nil {
		t.Errorf("still pending once her cursor is known: %s", compact(cursors))
	}
	r := e.call("batch_update_notebook_cells", map[string]any{"path": bridgetest.NotebookPath, "avoid_busy_cells": true, "updates": []any{map[string]any{"cell_id": "cell-a", "content": "x"}}})
	if !r.IsError || !strings.Contains(r.String(), "Alice L is editing cell cell-a") {
		t.Errorf("avoid_busy_cells on her cell: %s", r)
	}
}
