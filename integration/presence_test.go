//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// The awareness tests check both directions with the independent peer (yjs + y-protocols
// awareness): what a human's JupyterLab would see of the agent, and what the agent sees of them.

const agentUsername = "jupyter-collab-mcp"

// presenceNotebook writes a notebook with three known code cells.
func presenceNotebook(t *testing.T) string {
	t.Helper()
	name := uniqueName(t, ".ipynb")
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{},
		"cells": []any{
			map[string]any{"id": "c0", "cell_type": "code", "source": "import math\n", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil},
			map[string]any{"id": "c1", "cell_type": "code", "source": "x = 1\ny = 2\nprint(x + y)\n", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil},
			map[string]any{"id": "c2", "cell_type": "code", "source": "# ünïcödé 🙂 line\nz = 3\n", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil},
		},
	}
	b, _ := json.Marshal(nb)
	if err := shared.WriteFile(name, b); err != nil {
		t.Fatal(err)
	}
	return name
}

// eventually polls cond until it holds, failing with its last explanation after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, d, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type peerCursor struct {
	ClientID   float64 `json:"clientID"`
	Username   string  `json:"username"`
	CellID     *string `json:"cellId"`
	Index      int     `json:"index"`
	Empty      bool    `json:"empty"`
	Unresolved bool    `json:"unresolved"`
}

// peerCursors returns the cursors the peer sees, resolved by yjs.
func peerCursors(t *testing.T, ctx context.Context, p *Peer) []peerCursor {
	t.Helper()
	var r struct {
		Cursors []peerCursor `json:"cursors"`
	}
	if err := p.Call(ctx, "cursors", nil, &r); err != nil {
		t.Fatal(err)
	}
	return r.Cursors
}

// agentState returns the agent's awareness state as the peer sees it (nil: absent).
func agentState(t *testing.T, ctx context.Context, p *Peer) map[string]any {
	t.Helper()
	var r struct {
		States map[string]map[string]any `json:"states"`
	}
	if err := p.Call(ctx, "awareness", nil, &r); err != nil {
		t.Fatal(err)
	}
	for _, st := range r.States {
		if u, ok := st["user"].(map[string]any); ok && u["username"] == agentUsername {
			return st
		}
	}
	return nil
}

func displayName(st map[string]any) string {
	u, _ := st["user"].(map[string]any)
	s, _ := u["display_name"].(string)
	return s
}

// The human sees the agent: its user object, its cursor where the agent put it (and following a
// concurrent edit, since it is a relative position), the cursor moving to the cell an edit
// touches, its activity and status next to its name, and nothing at all while it is offline.
func TestPeerSeesAgentPresence(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := presenceNotebook(t)
	a := newAgent(t, shared)
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	// Line 2, column 3 of c1 ("x = 1\ny = 2\n...") is UTF-16 index 6 + 2 = 8.
	a.ok(ctx, "update_cursor_position", map[string]any{"document_path": name, "cell_id": "c1", "position": map[string]any{"line": 2, "column": 3}})
	eventually(t, 10*time.Second, "the peer sees the agent's cursor in c1 at index 8", func() (bool, string) {
		for _, c := range peerCursors(t, ctx, p) {
			if c.Username == agentUsername {
				return c.CellID != nil && *c.CellID == "c1" && c.Index == 8 && c.Empty, fmt.Sprintf("%+v", c)
			}
		}
		return false, "no agent cursor"
	})
	// The peer was there first and announced itself before the agent joined; y-protocols peers
	// do not answer a newcomer, so the agent says its view may be incomplete.
	if out := a.ok(ctx, "get_user_cursors", map[string]any{"document_path": name}); !strings.Contains(fmt.Sprint(out["note"]), "next presence renewal") {
		t.Errorf("get_user_cursors right after joining has no note on missing collaborators: %v", out)
	}
	st := agentState(t, ctx, p)
	u, _ := st["user"].(map[string]any)
	if u["name"] != "AI Agent" || u["initials"] != "AI" || !strings.HasPrefix(fmt.Sprint(u["color"]), "#") {
		t.Errorf("the agent's user object: %v", u)
	}
	if ag, _ := st["jupyter_collab_mcp"].(map[string]any); ag["agent"] != true || ag["status"] != "online" {
		t.Errorf("the agent's structured presence: %v", st["jupyter_collab_mcp"])
	}

	// The human types before the cursor: yjs resolves the agent's relative position past it.
	if err := p.Transact(ctx, `cells.get(1).get('source').insert(0, '# human\n')`, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range peerCursors(t, ctx, p) {
		if c.Username == agentUsername && (c.CellID == nil || *c.CellID != "c1" || c.Index != 16) {
			t.Errorf("after 8 characters inserted before it, the agent's cursor is %+v, want c1 index 16", c)
		}
	}

	// A selection: the code points of a line with an astral character count once each.
	a.ok(ctx, "update_cursor_position", map[string]any{"document_path": name, "cell_id": "c2",
		"position":  map[string]any{"line": 1, "column": 1},
		"selection": map[string]any{"start": map[string]any{"line": 1, "column": 11}, "end": map[string]any{"line": 1, "column": 13}}})
	eventually(t, 10*time.Second, "the peer sees the agent's selection end in c2 after the emoji", func() (bool, string) {
		for _, c := range peerCursors(t, ctx, p) {
			if c.Username == agentUsername {
				// column 13 is after "# ünïcödé 🙂 ": UTF-16 index 10 + 2 + 1 = 13.
				return c.CellID != nil && *c.CellID == "c2" && c.Index == 13 && !c.Empty, fmt.Sprintf("%+v", c)
			}
		}
		return false, "no agent cursor"
	})

	// An edit moves the cursor to the edited cell.
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{map[string]any{"cell_id": "c0", "content": "import math\nimport os\n"}}})
	eventually(t, 10*time.Second, "the agent's cursor follows its edit to c0", func() (bool, string) {
		for _, c := range peerCursors(t, ctx, p) {
			if c.Username == agentUsername {
				return c.CellID != nil && *c.CellID == "c0", fmt.Sprintf("%+v", c)
			}
		}
		return false, "no agent cursor"
	})

	// Activity and status are shown next to the name (JupyterLab shows display_name only).
	a.ok(ctx, "set_user_presence", map[string]any{"activity_type": "running", "description": "running the test cells", "document_path": name})
	eventually(t, 10*time.Second, "the peer sees the agent's activity", func() (bool, string) {
		st := agentState(t, ctx, p)
		ag, _ := st["jupyter_collab_mcp"].(map[string]any)
		act, _ := ag["activity"].(map[string]any)
		return displayName(st) == "AI Agent · running the test cells" && act["type"] == "running" && act["document"] == name, fmt.Sprint(st)
	})
	out := a.ok(ctx, "set_user_presence", map[string]any{"status": "busy", "message": "refactoring"})
	if out["shown_as"] != "AI Agent (busy) · running the test cells" {
		t.Errorf("set_user_presence shown_as %v", out["shown_as"])
	}
	eventually(t, 10*time.Second, "the peer sees the agent busy", func() (bool, string) {
		st := agentState(t, ctx, p)
		ag, _ := st["jupyter_collab_mcp"].(map[string]any)
		return displayName(st) == "AI Agent (busy) · running the test cells" && ag["status"] == "busy" && ag["message"] == "refactoring", fmt.Sprint(st)
	})
	a.ok(ctx, "set_user_presence", map[string]any{"activity_type": "idle", "description": ""})
	eventually(t, 10*time.Second, "the activity is cleared", func() (bool, string) {
		st := agentState(t, ctx, p)
		return displayName(st) == "AI Agent (busy) · refactoring", displayName(st)
	})

	// Offline: the state is gone (y-protocols removes a client on a null state); the room stays.
	a.ok(ctx, "set_user_presence", map[string]any{"status": "offline"})
	eventually(t, 10*time.Second, "the agent disappears from the peer's awareness", func() (bool, string) {
		st := agentState(t, ctx, p)
		return st == nil, fmt.Sprint(st)
	})
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{map[string]any{"cell_id": "c0", "content": "import math\n"}}})
	if _, err := p.WaitFor(ctx, `nb.cells[0].source === "import math\n"`, 10000); err != nil {
		t.Fatalf("an offline agent's edit: %v", err)
	}
	if st := agentState(t, ctx, p); st != nil {
		t.Errorf("an edit while offline made the agent visible: %v", st)
	}
	a.ok(ctx, "set_user_presence", map[string]any{"status": "online"})
	eventually(t, 10*time.Second, "the agent is back", func() (bool, string) {
		st := agentState(t, ctx, p)
		return displayName(st) == "AI Agent", fmt.Sprint(st)
	})

	// The peer that was there first appears at its renewal (yjs: every 15 s), and the note goes.
	eventually(t, 25*time.Second, "the agent sees the peer that was there before it", func() (bool, string) {
		out := a.ok(ctx, "get_online_users", map[string]any{"document_path": name})
		return out["count"] == float64(1) && out["note"] == nil, fmt.Sprint(out)
	})
}

// The agent sees the human: presence, cursor and selection as cell, line and column; edits to the
// cell they are typing in are flagged, or refused with avoid_busy_cells; and when the human's
// browser vanishes without a goodbye, they drop out within the awareness timeout.
func TestAgentSeesPeerPresence(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := presenceNotebook(t)
	a := newAgent(t, shared)
	a.ok(ctx, "join_session", map[string]any{"session_id": "notebook:" + name})
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	var me struct {
		ClientID float64 `json:"clientID"`
	}
	if err := p.Call(ctx, "awareness", nil, &me); err != nil {
		t.Fatal(err)
	}
	peerName := fmt.Sprintf("peer-%d", int64(me.ClientID))
	// A selection in c1 from line 1 column 5 to line 2 column 2 (UTF-16 4 → 7), head last.
	if err := p.Call(ctx, "setCursor", map[string]any{"cellId": "c1", "anchor": 4, "head": 7}, nil); err != nil {
		t.Fatal(err)
	}
	var cursors map[string]any
	eventually(t, 10*time.Second, "get_user_cursors shows the peer's selection in c1", func() (bool, string) {
		cursors = a.ok(ctx, "get_user_cursors", map[string]any{"document_path": name})
		b, _ := json.Marshal(cursors)
		list, _ := cursors["cursors"].([]any)
		return len(list) == 1, string(b)
	})
	u := cursors["cursors"].([]any)[0].(map[string]any)
	if u["username"] != peerName || u["name"] != "Independent Peer" || u["color"] != "#ff8800" || u["active"] != true {
		t.Errorf("cursor owner %v", u)
	}
	want := `[{"cell_id":"c1","cell_index":1,"column":2,"document":"` + name + `","line":2,"selection":{"end":{"column":2,"line":2},"start":{"column":5,"line":1}}}]`
	if b, _ := json.Marshal(u["cursors"]); string(b) != want {
		t.Errorf("peer cursor\n got %s\nwant %s", b, want)
	}

	users := a.ok(ctx, "get_online_users", map[string]any{"document_path": name})
	b, _ := json.Marshal(users)
	if !strings.Contains(string(b), `"username":"`+peerName+`"`) || !strings.Contains(string(b), `"cell_id":"c1"`) || strings.Contains(string(b), agentUsername) {
		t.Errorf("get_online_users(document) = %s (want the peer, in c1, and not the agent itself)", b)
	}
	pres := a.ok(ctx, "get_online_users", map[string]any{"user_id": peerName, "document_path": name})
	if up, _ := pres["user"].(map[string]any); up["status"] != "online" || up["since"] == nil {
		t.Errorf("get_online_users(user_id) = %v", pres)
	}
	if out, res := a.call(ctx, "get_online_users", map[string]any{"user_id": "nobody", "document_path": name}); !res.IsError || !strings.Contains(fmt.Sprint(out["error"]), "not online") {
		t.Errorf("get_online_users(user_id)(nobody) = %v", out)
	}

	// Editing the cell the human is in: refused with avoid_busy_cells (nothing changes) ...
	out, res := a.call(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "avoid_busy_cells": true,
		"updates": []any{map[string]any{"cell_id": "c1", "content": "agent was here\n"}}})
	if !res.IsError || !strings.Contains(fmt.Sprint(out["error"]), "Independent Peer is editing cell c1") {
		t.Errorf("avoid_busy_cells on the human's cell: %v", out)
	}
	snap := mustSnapshot(t, ctx, p)
	if snap.Cells[1].Source != "x = 1\ny = 2\nprint(x + y)\n" {
		t.Errorf("a refused edit changed the cell: %q", snap.Cells[1].Source)
	}
	// ... other cells are fine, and without the flag the edit goes ahead with a warning.
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "avoid_busy_cells": true,
		"updates": []any{map[string]any{"cell_id": "c2", "content": "z = 4\n"}}})
	out = a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false,
		"updates": []any{map[string]any{"cell_id": "c1", "content": "x = 1\ny = 2\nprint(x * y)\n"}}})
	if w := fmt.Sprint(out["warnings"]); !strings.Contains(w, "Independent Peer is editing cell c1") {
		t.Errorf("an edit in the human's cell did not warn: %v", out)
	}
	if _, err := p.WaitFor(ctx, `nb.cells[1].source === "x = 1\ny = 2\nprint(x * y)\n" && nb.cells[2].source === "z = 4\n"`, 10000); err != nil {
		t.Fatal(err)
	}

	// The browser dies: no null state, the socket just drops.
	start := time.Now()
	if err := p.Call(ctx, "vanish", nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, bridgeOutdated+15*time.Second, "the vanished peer expires", func() (bool, string) {
		users := a.ok(ctx, "get_online_users", map[string]any{"document_path": name})
		b, _ := json.Marshal(users)
		return !strings.Contains(string(b), peerName), string(b)
	})
	t.Logf("a peer that vanished left the agent's view after %v", time.Since(start).Round(100*time.Millisecond))
	if out := a.ok(ctx, "get_user_cursors", map[string]any{"document_path": name}); len(out["cursors"].([]any)) != 0 {
		t.Errorf("cursors of a vanished peer: %v", out)
	}
}

// bridgeOutdated is how long a silent peer stays in awareness (y-protocols' 30 s).
const bridgeOutdated = 30 * time.Second

// The global awareness room both ways: the human's JupyterLab lists the agent with the document it
// works in; the agent sees the human's current and open documents, lists them as sessions, joins
// and leaves them.
func TestGlobalAwarenessAndSessions(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := presenceNotebook(t)
	a := newAgentWith(t, shared, func(o *bridge.ManagerOptions) { o.GlobalAwareness = true }, nil)
	p := newPeer(t)
	human := map[string]any{
		"user":      map[string]any{"username": "alice", "name": "Alice", "display_name": "Alice Liddell", "initials": "AL", "color": "#00aa88"},
		"current":   "notebook:" + name,
		"documents": []any{name},
	}
	if err := p.Call(ctx, "connectGlobal", map[string]any{"url": shared.URL, "token": shared.Token, "state": human}, nil); err != nil {
		t.Fatal(err)
	}

	var users map[string]any
	eventually(t, 10*time.Second, "get_online_users lists alice with her current document", func() (bool, string) {
		users = a.ok(ctx, "get_online_users", nil)
		b, _ := json.Marshal(users)
		return strings.Contains(string(b), `"current":"notebook:`+name+`"`), string(b)
	})
	list := users["users"].([]any)
	var alice map[string]any
	for _, u := range list {
		if u.(map[string]any)["username"] == "alice" {
			alice = u.(map[string]any)
		}
	}
	if alice == nil || alice["name"] != "Alice Liddell" || alice["initials"] != "AL" || fmt.Sprint(alice["documents"]) != "["+name+"]" {
		t.Errorf("alice: %v", alice)
	}

	sessions := a.ok(ctx, "get_active_sessions", nil)
	wantSession := map[string]any{"session_id": "notebook:" + name, "path": name, "kind": "notebook", "open": false, "participants": []any{"Alice Liddell"}}
	found := false
	for _, s := range sessions["sessions"].([]any) {
		found = found || jsonEq(s, wantSession)
	}
	if !found {
		t.Errorf("get_active_sessions = %v\nwant an entry %v", sessions, wantSession)
	}

	// The agent joins the human's session: the panel (global awareness) shows it in that notebook.
	joined := a.ok(ctx, "join_session", map[string]any{"session_id": "notebook:" + name})
	if joined["path"] != name || joined["room_id"] == "" {
		t.Errorf("join_session = %v", joined)
	}
	var agent map[string]any
	eventually(t, 10*time.Second, "the human's global awareness shows the agent in the notebook", func() (bool, string) {
		var r struct {
			States map[string]map[string]any `json:"states"`
		}
		if err := p.Call(ctx, "globalStates", nil, &r); err != nil {
			t.Fatal(err)
		}
		for _, st := range r.States {
			if u, _ := st["user"].(map[string]any); u["username"] == agentUsername {
				agent = st
				return st["current"] == "notebook:"+name && fmt.Sprint(st["documents"]) == "["+name+"]", fmt.Sprint(st)
			}
		}
		return false, fmt.Sprint(r.States)
	})
	if u, _ := agent["user"].(map[string]any); u["display_name"] != "AI Agent" || u["initials"] != "AI" {
		t.Errorf("the agent in the collaborators panel: %v", u)
	}
	sessions = a.ok(ctx, "get_active_sessions", map[string]any{"document_path": name})
	if s := sessions["sessions"].([]any); len(s) != 1 || s[0].(map[string]any)["open"] != true || !strings.Contains(fmt.Sprint(s[0]), "Alice Liddell") {
		t.Errorf("get_active_sessions after joining = %v", sessions)
	}

	// Leaving: the room closes and the panel no longer shows the document.
	left := a.ok(ctx, "leave_session", map[string]any{"session_id": "notebook:" + name})
	if left["left"] != true {
		t.Errorf("leave_session = %v", left)
	}
	eventually(t, 10*time.Second, "the agent's global state drops the notebook", func() (bool, string) {
		var r struct {
			States map[string]map[string]any `json:"states"`
		}
		if err := p.Call(ctx, "globalStates", nil, &r); err != nil {
			t.Fatal(err)
		}
		for _, st := range r.States {
			if u, _ := st["user"].(map[string]any); u["username"] == agentUsername {
				return st["current"] == nil && fmt.Sprint(st["documents"]) == "[]", fmt.Sprint(st)
			}
		}
		return false, "the agent left the global room too"
	})
	if out := a.ok(ctx, "leave_session", map[string]any{"session_id": "notebook:" + name}); out["left"] != false {
		t.Errorf("leaving twice = %v", out)
	}
}

// get_user_activity names who did what to which cells: the human's insert (by their awareness
// name), the agent's edit and its run.
func TestUserActivity(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := presenceNotebook(t)
	a := newAgent(t, shared)
	a.ok(ctx, "join_session", map[string]any{"session_id": name})
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	// The sidecar must know the peer's name before the peer's edit arrives to attribute it.
	eventually(t, 10*time.Second, "the agent sees the peer", func() (bool, string) {
		out := a.ok(ctx, "get_online_users", map[string]any{"document_path": name})
		return out["count"] == float64(1), fmt.Sprint(out)
	})
	if err := p.Call(ctx, "insertCell", map[string]any{"index": 3, "cell": map[string]any{"id": "human-cell", "source": "w = 9\n"}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the sidecar has the human's cell", func() (bool, string) {
		out := a.ok(ctx, "get_notebook", map[string]any{"path": name, "format": "json"})
		b, _ := json.Marshal(out)
		return strings.Contains(string(b), "human-cell"), string(b)
	})
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{map[string]any{"cell_id": "c1", "content": "x = 10\n"}}})
	a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "c1"})

	out := a.ok(ctx, "get_user_activity", map[string]any{"document_path": name, "limit": 10})
	b, _ := json.Marshal(out)
	var got struct {
		Activity []struct {
			Document string   `json:"document"`
			By       []string `json:"by"`
			Agent    bool     `json:"agent"`
			Kind     string   `json:"kind"`
			Cells    []string `json:"cells"`
			At       string   `json:"at"`
		} `json:"activity"`
	}
	_ = json.Unmarshal(b, &got)
	find := func(kind, cell string, agent bool) int {
		for i, e := range got.Activity {
			if e.Kind == kind && e.Agent == agent && len(e.Cells) > 0 && e.Cells[0] == cell && e.Document == name && e.At != "" {
				return i
			}
		}
		return -1
	}
	// On jupyter-server-documents the server runs every cell and writes its count itself: nothing
	// in the document says who asked (0.3.3 never fills cell_execution_states), so the run is
	// not the agent's in the activity there.
	ins, edit, run := find("inserted", "human-cell", false), find("edited", "c1", true), find("executed", "c1", !shared.Engine.Documents())
	if ins < 0 || edit < 0 || run < 0 {
		t.Fatalf("activity lacks the human's insert (%d), the agent's edit (%d) or run (%d): %s", ins, edit, run, b)
	}
	if by := got.Activity[ins].By; len(by) != 1 || by[0] != "Independent Peer" {
		t.Errorf("the human's insert is attributed to %v", by)
	}
	if !(run < edit && edit < ins) {
		t.Errorf("activity is not newest first (run %d, edit %d, insert %d): %s", run, edit, ins, b)
	}
	if out := a.ok(ctx, "get_user_activity", map[string]any{"limit": 1}); out["count"] != float64(1) {
		t.Errorf("limit 1 over every document: %v", out)
	}
}
