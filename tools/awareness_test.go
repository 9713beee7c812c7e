package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Awareness tools: argument checking, cursor placement in code points vs UTF-16, what the agent
// reports of a collaborator's cursor, busy cells, and sessions.

const (
	awNB   = "aw.ipynb"
	awText = "aw.txt"
	// awSrc has an astral character (two UTF-16 units) on each line.
	awSrc     = "a😀b\nx😀y"
	awTextSrc = "one\ntwo 😀!\n"
)

var awAlice = ydoc.AwarenessUser{Username: "alice", Name: "Alice", Color: "#ff0000"}

func awFiles() []bridgetest.File {
	return []bridgetest.File{
		nbFile(awNB, notebook(code("c1", awSrc), code("c2", "print(1)"), markdown("m1", "# T"))),
		textFile(awText, awTextSrc),
	}
}

// awPeer joins a document on the env's fake as a second client (a collaborator), synced, and
// leaves it when the test ends.
func awPeer(t *testing.T, e *env, path string, kind ydoc.Kind, user ydoc.AwarenessUser) *bridge.Room {
	t.Helper()
	opts := fastRoom()
	opts.Path, opts.Kind, opts.Jupyter, opts.User = path, kind, e.srv, user
	room, err := bridge.NewRoom(opts)
	if err != nil {
		t.Fatalf("peer NewRoom: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = room.Run(context.Background())
		close(done)
	}()
	t.Cleanup(func() {
		room.Close()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Errorf("peer room %s did not stop", path)
		}
	})
	if err := room.WaitSynced(ctxT(t)); err != nil {
		t.Fatalf("peer WaitSynced: %v", err)
	}
	return room
}

// awAgentRoom returns the sidecar's room for a document (it must be open).
func awAgentRoom(t *testing.T, e *env, path string, kind ydoc.Kind) *bridge.Room {
	t.Helper()
	r := e.m.Get(path, kind)
	if r == nil {
		t.Fatalf("the sidecar has no room for %s", path)
	}
	return r
}

// awAwaitCursors polls room.Peers until the client named username has exactly the cursors want.
func awAwaitCursors(t *testing.T, room *bridge.Room, username string, want ...bridge.PeerCursor) {
	t.Helper()
	var last []string
	deadline := time.Now().Add(waitLimit)
	for {
		peers, err := room.Peers(ctxT(t))
		if err != nil {
			t.Fatalf("Peers: %v", err)
		}
		last = last[:0]
		for _, p := range peers {
			if p.User == nil {
				continue
			}
			last = append(last, fmt.Sprintf("%s:%+v", p.User.Username, p.Cursors))
			if p.User.Username == username && slices.Equal(p.Cursors, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond) // polling interval; the deadline bounds the wait
	}
	t.Fatalf("waiting for %s's cursors %+v: not seen within %v; peers: %v", username, want, waitLimit, last)
}

// awLastCursors returns the "cursors" JSON of the last awareness state a client sent.
func awLastCursors(t *testing.T, e *env, clientID uint64) string {
	t.Helper()
	recs := e.srv.AwarenessOf(clientID)
	if len(recs) == 0 || recs[len(recs)-1].State == nil {
		t.Fatalf("client %d has no awareness state on the fake", clientID)
	}
	var st struct {
		Cursors json.RawMessage `json:"cursors"`
	}
	if err := json.Unmarshal(recs[len(recs)-1].State, &st); err != nil {
		t.Fatal(err)
	}
	return string(st.Cursors)
}

// awBarrier waits until every frame a room queued so far reached the fake (frames go out in
// order and Save returns once the fake answered).
func awBarrier(t *testing.T, room *bridge.Room) {
	t.Helper()
	if _, err := room.Save(ctxT(t)); err != nil {
		t.Fatalf("Save (as a write barrier): %v", err)
	}
}

func pos(line, col int) map[string]any { return map[string]any{"line": line, "column": col} }

func TestAwarenessToolsRejectMalformedArguments(t *testing.T) {
	e := newEnv(t, awFiles())
	// Valid calls first: a cursor in each document and a presence.
	e.ok("update_cursor_position", map[string]any{"document_path": awNB, "cell_id": "c1", "position": pos(2, 2)})
	e.ok("update_cursor_position", map[string]any{"document_path": awText, "position": pos(2, 2)})
	e.ok("set_user_presence", map[string]any{"status": "away", "message": "lunch"})
	nbRoom, textRoom := awAgentRoom(t, e, awNB, ydoc.KindNotebook), awAgentRoom(t, e, awText, ydoc.KindText)
	awBarrier(t, nbRoom)
	awBarrier(t, textRoom)
	nbCursors, textCursors := awLastCursors(t, e, nbRoom.Info().ClientID), awLastCursors(t, e, textRoom.Info().ClientID)
	if nbCursors == "" || nbCursors == "null" || textCursors == "" || textCursors == "null" {
		t.Fatalf("the valid calls published no cursors: %q, %q", nbCursors, textCursors)
	}

	cur := func(extra map[string]any) map[string]any {
		args := map[string]any{"document_path": awNB, "cell_id": "c1", "position": pos(1, 1)}
		for k, v := range extra {
			if v == nil {
				delete(args, k)
			} else {
				args[k] = v
			}
		}
		return args
	}
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		path []any
		says []string
	}{
		{"line 0", "update_cursor_position", cur(map[string]any{"position": pos(0, 1)}), []any{"position", "line"}, []string{"at least 1"}},
		{"column 0", "update_cursor_position", cur(map[string]any{"position": pos(1, 0)}), []any{"position", "column"}, []string{"at least 1"}},
		// "a😀b" is 3 code points (4 UTF-16 units): column 4 is its end, 5 is past it.
		{"column past the line end + 1", "update_cursor_position", cur(map[string]any{"position": pos(1, 5)}), []any{"position", "column"}, []string{"line 1 has 3 characters", "column 4"}},
		{"column past the end of the last line", "update_cursor_position", cur(map[string]any{"position": pos(2, 5)}), []any{"position", "column"}, []string{"line 2 has 3 characters"}},
		{"line past the text", "update_cursor_position", cur(map[string]any{"position": pos(3, 1)}), []any{"position", "line"}, []string{"2 lines"}},
		{"column not an integer", "update_cursor_position", cur(map[string]any{"position": map[string]any{"line": 1, "column": 1.5}}), []any{"position", "column"}, []string{"integer"}},
		{"position missing", "update_cursor_position", cur(map[string]any{"position": nil}), []any{"position"}, []string{"required"}},
		{"column missing", "update_cursor_position", cur(map[string]any{"position": map[string]any{"line": 1}}), []any{"position", "column"}, []string{"required"}},
		{"document missing", "update_cursor_position", cur(map[string]any{"document_path": nil}), []any{"document_path"}, []string{"required"}},
		{"cell_id missing in a notebook", "update_cursor_position", cur(map[string]any{"cell_id": nil}), []any{"cell_id"}, []string{"required in a notebook"}},
		{"cell_id in a text file", "update_cursor_position", cur(map[string]any{"document_path": awText}), []any{"cell_id"}, []string{"text file has no cells"}},
		{"unknown cell", "update_cursor_position", cur(map[string]any{"cell_id": "nope"}), []any{"cell_id"}, []string{`no cell with id "nope"`}},
		{"selection end past the line", "update_cursor_position", cur(map[string]any{"selection": map[string]any{"start": pos(1, 1), "end": pos(1, 9)}}), []any{"selection", "end", "column"}, []string{"line 1 has 3 characters"}},
		{"selection start past the text", "update_cursor_position", cur(map[string]any{"selection": map[string]any{"start": pos(7, 1), "end": pos(1, 1)}}), []any{"selection", "start", "line"}, []string{"2 lines"}},
		{"selection without end", "update_cursor_position", cur(map[string]any{"selection": map[string]any{"start": pos(1, 1)}}), []any{"selection", "end"}, []string{"required"}},
		{"text: line past the text", "update_cursor_position", map[string]any{"document_path": awText, "position": pos(4, 1)}, []any{"position", "line"}, []string{"3 lines"}},
		{"text: column past the line", "update_cursor_position", map[string]any{"document_path": awText, "position": pos(2, 8)}, []any{"position", "column"}, []string{"line 2 has 6 characters"}},
		{"unknown field", "update_cursor_position", cur(map[string]any{"cell": "c1"}), []any{"cell"}, []string{"unknown field"}},
		{"bad status", "set_user_presence", map[string]any{"status": "sleeping"}, []any{"status"}, []string{"must be one of", "online", "offline"}},
		{"neither status nor activity", "set_user_presence", map[string]any{"message": "x"}, []any{"status"}, []string{"activity_type"}},
		{"activity limit 0", "get_user_activity", map[string]any{"limit": 0}, []any{"limit"}, []string{"at least 1"}},
		{"activity limit 501", "get_user_activity", map[string]any{"limit": 501}, []any{"limit"}, []string{"at most 500"}},
		{"cursors without document", "get_user_cursors", map[string]any{}, []any{"document_path"}, []string{"required"}},
		{"join without session", "join_session", map[string]any{}, []any{"session_id"}, []string{"required"}},
		{"leave without session", "leave_session", map[string]any{}, []any{"session_id"}, []string{"required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.fail(tc.tool, tc.args)
			d := findDetail(t, r, tc.path...)
			mustContain(t, tc.tool+" error detail", d.msg, tc.says...)
			mustContain(t, tc.tool+" error", errorText(r), "invalid arguments")
		})
	}

	// Nothing changed: same cursors, same presence.
	awBarrier(t, nbRoom)
	awBarrier(t, textRoom)
	if got := awLastCursors(t, e, nbRoom.Info().ClientID); got != nbCursors {
		t.Errorf("notebook cursors changed by rejected calls: %s, was %s", got, nbCursors)
	}
	if got := awLastCursors(t, e, textRoom.Info().ClientID); got != textCursors {
		t.Errorf("text cursors changed by rejected calls: %s, was %s", got, textCursors)
	}
	if p := e.m.Presence(); p.Status != bridge.PresenceAway || p.Message != "lunch" || p.Activity != nil {
		t.Errorf("presence after rejected calls = %+v, want away/lunch", p)
	}
	if rooms := e.m.Rooms(); len(rooms) != 2 {
		t.Errorf("rejected calls opened rooms: %d open", len(rooms))
	}
}

func TestAwarenessUpdateCursorCodePointsToUTF16(t *testing.T) {
	e := newEnv(t, awFiles())
	e.nbVersion(awNB)
	peer := awPeer(t, e, awNB, ydoc.KindNotebook, awAlice)
	agentName := bridge.DefaultUser().Username

	for _, tc := range []struct {
		line, col int
		want      int // UTF-16 offset in "a😀b\nx😀y"
	}{
		{1, 1, 0}, {1, 2, 1}, {1, 3, 3}, {1, 4, 4}, {2, 1, 5}, {2, 2, 6}, {2, 3, 8}, {2, 4, 9},
	} {
		out := e.ok("update_cursor_position", map[string]any{"document_path": awNB, "cell_id": "c1", "position": pos(tc.line, tc.col)})
		if out["document"] != awNB || out["cell_id"] != "c1" || num(t, asMap(t, out["position"])["line"]) != tc.line || num(t, asMap(t, out["position"])["column"]) != tc.col {
			t.Errorf("update_cursor_position(%d:%d) = %s", tc.line, tc.col, compact(out))
		}
		awAwaitCursors(t, peer, agentName, bridge.PeerCursor{CellID: "c1", Anchor: tc.want, Head: tc.want})
	}

	// A selection: the anchor at its start, the head (the cursor) at its end.
	out := e.ok("update_cursor_position", map[string]any{"document_path": awNB, "cell_id": "c1", "position": pos(1, 1),
		"selection": map[string]any{"start": pos(1, 3), "end": pos(2, 2)}})
	if out["selection"] == nil {
		t.Errorf("update_cursor_position with a selection does not echo it: %s", compact(out))
	}
	awAwaitCursors(t, peer, agentName, bridge.PeerCursor{CellID: "c1", Anchor: 3, Head: 6})
	// A backwards selection keeps its direction.
	e.ok("update_cursor_position", map[string]any{"document_path": awNB, "cell_id": "c1", "position": pos(1, 1),
		"selection": map[string]any{"start": pos(2, 4), "end": pos(1, 2)}})
	awAwaitCursors(t, peer, agentName, bridge.PeerCursor{CellID: "c1", Anchor: 9, Head: 1})

	// Another cell.
	e.ok("update_cursor_position", map[string]any{"document_path": awNB, "cell_id": "m1", "position": pos(1, 4)})
	awAwaitCursors(t, peer, agentName, bridge.PeerCursor{CellID: "m1", Anchor: 3, Head: 3})

	// A text file: "one\ntwo 😀!\n".
	tpeer := awPeer(t, e, awText, ydoc.KindText, awAlice)
	for _, tc := range []struct{ line, col, want int }{{2, 5, 8}, {2, 6, 10}, {2, 7, 11}, {3, 1, 12}} {
		out := e.ok("update_cursor_position", map[string]any{"document_path": awText, "position": pos(tc.line, tc.col)})
		if _, has := out["cell_id"]; has {
			t.Errorf("text file result has a cell_id: %s", compact(out))
		}
		awAwaitCursors(t, tpeer, agentName, bridge.PeerCursor{Anchor: tc.want, Head: tc.want})
	}
}

// awCursorsOf returns the cursors get_user_cursors reports for a username (nil when absent).
func awCursorsOf(t *testing.T, body map[string]any, username string) []any {
	t.Helper()
	for _, u := range asList(t, body["cursors"]) {
		m := asMap(t, u)
		if m["username"] == username {
			return asList(t, m["cursors"])
		}
	}
	return nil
}

// awAwaitUserCursors polls get_user_cursors until username's cursors satisfy cond.
func awAwaitUserCursors(t *testing.T, e *env, path, username string, cond func([]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var body map[string]any
	for {
		body = e.ok("get_user_cursors", map[string]any{"document_path": path})
		if cond(awCursorsOf(t, body, username)) {
			return body
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling interval; the deadline bounds the wait
	}
	t.Fatalf("get_user_cursors(%s): %s's cursors not as expected within %v; last: %s", path, username, waitLimit, compact(body))
	return nil
}

func TestAwarenessGetUserCursors(t *testing.T) {
	e := newEnv(t, awFiles())
	// Nobody there: an empty list, not null.
	body := e.ok("get_user_cursors", map[string]any{"document_path": awNB})
	if body["document"] != awNB || len(asList(t, body["cursors"])) != 0 {
		t.Errorf("get_user_cursors alone = %s", compact(body))
	}
	// The agent's own cursor is not a collaborator's.
	e.ok("update_cursor_position", map[string]any{"document_path": awNB, "cell_id": "c2", "position": pos(1, 1)})

	peer := awPeer(t, e, awNB, ydoc.KindNotebook, awAlice)
	// Alice selects from before "y" (UTF-16 8) back to before the emoji (1).
	if err := peer.SetCursors(ctxT(t), []bridge.CursorSpec{{CellID: "c1", Anchor: 8, Head: 1}}); err != nil {
		t.Fatal(err)
	}
	body = awAwaitUserCursors(t, e, awNB, "alice", func(cs []any) bool { return len(cs) == 1 })
	users := asList(t, body["cursors"])
	if len(users) != 1 {
		t.Errorf("get_user_cursors lists %d users (the agent itself?): %s", len(users), compact(body))
	}
	u := asMap(t, users[0])
	if u["name"] != "Alice" || u["color"] != "#ff0000" {
		t.Errorf("user entry %s: want name Alice, colour #ff0000", compact(u))
	}
	c := asMap(t, awCursorsOf(t, body, "alice")[0])
	want := map[string]any{"document": awNB, "cell_id": "c1", "cell_index": 0, "line": 1, "column": 2,
		"selection": map[string]any{"start": pos(1, 2), "end": pos(2, 3)}}
	if got, w := jsonRoundTrip(t, c), jsonRoundTrip(t, want); compact(got) != compact(w) {
		t.Errorf("alice's cursor = %s, want %s", compact(got), compact(w))
	}

	// A caret in the second cell: no selection, the cell's index.
	if err := peer.SetCursors(ctxT(t), []bridge.CursorSpec{{CellID: "c2", Anchor: 5, Head: 5}}); err != nil {
		t.Fatal(err)
	}
	body = awAwaitUserCursors(t, e, awNB, "alice", func(cs []any) bool {
		return len(cs) == 1 && cs[0].(map[string]any)["cell_id"] == "c2"
	})
	c = asMap(t, awCursorsOf(t, body, "alice")[0])
	want = map[string]any{"document": awNB, "cell_id": "c2", "cell_index": 1, "line": 1, "column": 6}
	if got, w := jsonRoundTrip(t, c), jsonRoundTrip(t, want); compact(got) != compact(w) {
		t.Errorf("alice's caret = %s, want %s", compact(got), compact(w))
	}

	// A text file: no cell fields.
	tpeer := awPeer(t, e, awText, ydoc.KindText, awAlice)
	if err := tpeer.SetCursors(ctxT(t), []bridge.CursorSpec{{Anchor: 10, Head: 4}}); err != nil {
		t.Fatal(err)
	}
	body = awAwaitUserCursors(t, e, awText, "alice", func(cs []any) bool { return len(cs) == 1 })
	c = asMap(t, awCursorsOf(t, body, "alice")[0])
	want = map[string]any{"document": awText, "line": 2, "column": 1, "selection": map[string]any{"start": pos(2, 1), "end": pos(2, 6)}}
	if got, w := jsonRoundTrip(t, c), jsonRoundTrip(t, want); compact(got) != compact(w) {
		t.Errorf("alice's text selection = %s, want %s", compact(got), compact(w))
	}
}

// awBusyEnv is a notebook c0..c3 with alice's caret in c1.
func awBusyEnv(t *testing.T) (*env, string) {
	t.Helper()
	const p = "busy.ipynb"
	e := newEnv(t, []bridgetest.File{nbFile(p, notebook(simpleCells(4)...))})
	e.nbVersion(p)
	peer := awPeer(t, e, p, ydoc.KindNotebook, awAlice)
	if err := peer.SetCursors(ctxT(t), []bridge.CursorSpec{{CellID: "c1", Anchor: 2, Head: 2}}); err != nil {
		t.Fatal(err)
	}
	awAwaitUserCursors(t, e, p, "alice", func(cs []any) bool { return len(cs) == 1 })
	return e, p
}

func TestAwarenessBusyCellsRefused(t *testing.T) {
	e, p := awBusyEnv(t)
	before := e.snapshot(p)
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"update the busy cell", "batch_update_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "updates": []any{map[string]any{"cell_id": "c1", "content": "changed"}}}},
		{"update a free and the busy cell", "batch_update_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "updates": []any{
			map[string]any{"cell_id": "c0", "content": "changed 0"}, map[string]any{"cell_id": "c1", "content": "changed 1"}}}},
		{"update the busy cell by index", "batch_update_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "start_index": 1, "end_index": 1, "updates": []any{map[string]any{"content": "by index"}}}},
		{"delete a free and the busy cell", "batch_delete_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "cell_ids": []any{"c0", "c1"}}},
		{"delete a range holding the busy cell", "batch_delete_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "start_index": 0, "end_index": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.fail(tc.tool, tc.args)
			mustContain(t, tc.tool+" error", errorText(r), "busy", "Alice is editing cell c1", "nothing was changed")
			if bc, _ := r.Body["busy_cells"].([]any); len(bc) != 1 || bc[0] != "Alice is editing cell c1" {
				t.Errorf("busy_cells = %v, want [Alice is editing cell c1]", r.Body["busy_cells"])
			}
			if after := e.snapshot(p); after != before {
				t.Errorf("the refused %s changed the notebook:\nbefore %s\nafter  %s", tc.tool, before, after)
			}
		})
	}

	// Cells nobody is in are fine with avoid_busy_cells, and get no busy warning (only, in the
	// first 15 s after joining, the note that collaborators may not all be known yet).
	busyWarning := func(out map[string]any) bool {
		ws, _ := out["warnings"].([]any)
		for _, w := range ws {
			if !strings.Contains(fmt.Sprint(w), "next presence renewal") {
				return true
			}
		}
		return false
	}
	out := e.ok("batch_update_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "updates": []any{map[string]any{"cell_id": "c2", "content": "free"}}})
	if busyWarning(out) {
		t.Errorf("an edit of a free cell warns: %s", compact(out))
	}
	if !strings.Contains(compact(out), "next presence renewal") {
		t.Errorf("an edit with avoid_busy_cells right after joining does not say collaborators may be unknown: %s", compact(out))
	}
	if got := e.serverCell(p, "c2").Source; got != "free" {
		t.Errorf("c2 = %q after the update", got)
	}
	out = e.ok("batch_delete_notebook_cells", map[string]any{"path": p, "avoid_busy_cells": true, "cell_ids": []any{"c3"}})
	if busyWarning(out) {
		t.Errorf("a delete of a free cell warns: %s", compact(out))
	}
	wantIDs(t, "after deleting c3", e.srv.CellIDs(p), []string{"c0", "c1", "c2"})
}

func TestAwarenessBusyCellsWarn(t *testing.T) {
	e, p := awBusyEnv(t)
	out := e.ok("batch_update_notebook_cells", map[string]any{"path": p, "updates": []any{map[string]any{"cell_id": "c1", "content": "edited anyway"}}})
	if w := asList(t, out["warnings"]); len(w) != 1 || w[0] != "Alice is editing cell c1" {
		t.Errorf("update warnings = %v, want [Alice is editing cell c1]", out["warnings"])
	}
	if got := e.serverCell(p, "c1").Source; got != "edited anyway" {
		t.Errorf("c1 = %q: the update without avoid_busy_cells must go ahead", got)
	}
	// Alice's caret follows her text: still in c1.
	awAwaitUserCursors(t, e, p, "alice", func(cs []any) bool { return len(cs) == 1 && cs[0].(map[string]any)["cell_id"] == "c1" })

	out = e.ok("batch_delete_notebook_cells", map[string]any{"path": p, "cell_ids": []any{"c0", "c1"}})
	if w := asList(t, out["warnings"]); len(w) != 1 || w[0] != "Alice is editing cell c1" {
		t.Errorf("delete warnings = %v, want [Alice is editing cell c1]", out["warnings"])
	}
	wantIDs(t, "after the delete", e.srv.CellIDs(p), []string{"c2", "c3"})
}

func TestAwarenessSessions(t *testing.T) {
	e := newEnv(t, awFiles())

	// Leaving what was never joined: left false, and nothing gets opened.
	for _, id := range []string{"notebook:" + awNB, "editor:" + awText, awNB} {
		out := e.ok("leave_session", map[string]any{"session_id": id})
		if out["left"] != false || out["session_id"] != id || str(out["note"]) == "" {
			t.Errorf("leave_session(%s) = %s, want left false with a note", id, compact(out))
		}
	}
	if n := len(e.m.Rooms()); n != 0 {
		t.Errorf("leave_session opened %d rooms", n)
	}
	if out := e.ok("get_active_sessions", nil); num(t, out["count"]) != 0 || len(asList(t, out["sessions"])) != 0 {
		t.Errorf("get_active_sessions with nothing open = %s", compact(out))
	}

	joined := e.ok("join_session", map[string]any{"session_id": "notebook:" + awNB})
	if joined["session_id"] != "notebook:"+awNB || joined["path"] != awNB || str(joined["room_id"]) == "" {
		t.Errorf("join_session = %s", compact(joined))
	}
	e.ok("join_session", map[string]any{"session_id": awText})
	awPeer(t, e, awNB, ydoc.KindNotebook, awAlice)

	var nbSession map[string]any
	deadline := time.Now().Add(waitLimit)
	for {
		out := e.ok("get_active_sessions", nil)
		sessions := asList(t, out["sessions"])
		var ids []string
		nbSession = nil
		for _, s := range sessions {
			m := asMap(t, s)
			ids = append(ids, str(m["session_id"]))
			if m["session_id"] == "notebook:"+awNB {
				nbSession = m
			}
		}
		if !slices.Equal(ids, []string{"editor:" + awText, "notebook:" + awNB}) || num(t, out["count"]) != 2 {
			t.Fatalf("get_active_sessions lists %v (count %v), want both open documents", ids, out["count"])
		}
		if slices.Contains(asList(t, nbSession["participants"]), any("Alice")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get_active_sessions never listed Alice in the notebook: %s", compact(out))
		}
		time.Sleep(5 * time.Millisecond) // polling interval; the deadline bounds the wait
	}
	if nbSession["open"] != true || nbSession["path"] != awNB || nbSession["kind"] != "notebook" || nbSession["status"] != "synced" || str(nbSession["room_id"]) == "" {
		t.Errorf("notebook session = %s", compact(nbSession))
	}

	// Filtered by document.
	out := e.ok("get_active_sessions", map[string]any{"document_path": awText})
	if s := asList(t, out["sessions"]); len(s) != 1 || asMap(t, s[0])["session_id"] != "editor:"+awText || asMap(t, s[0])["kind"] != "file" {
		t.Errorf("get_active_sessions(%s) = %s", awText, compact(out))
	}

	// Leaving for real.
	out = e.ok("leave_session", map[string]any{"session_id": "editor:" + awText})
	if out["left"] != true || out["session_id"] != "editor:"+awText {
		t.Errorf("leave_session = %s, want left true", compact(out))
	}
	deadline = time.Now().Add(waitLimit)
	for {
		out := e.ok("get_active_sessions", nil)
		s := asList(t, out["sessions"])
		if len(s) == 1 && asMap(t, s[0])["session_id"] == "notebook:"+awNB {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get_active_sessions after leaving the text file = %s", compact(out))
		}
		time.Sleep(5 * time.Millisecond) // polling interval; the deadline bounds the wait
	}
	if out := e.ok("leave_session", map[string]any{"session_id": "editor:" + awText}); out["left"] != false {
		t.Errorf("leaving twice = %s, want left false", compact(out))
	}
}

func TestAwarenessGetUserActivityLimit(t *testing.T) {
	e := newEnv(t, awFiles())
	e.nbVersion(awNB)
	for i := 0; i < 3; i++ {
		e.ok("batch_update_notebook_cells", map[string]any{"path": awNB, "updates": []any{map[string]any{"cell_id": fmt.Sprintf("c%d", i%2+1), "content": fmt.Sprintf("v%d", i)}}})
	}
	for _, limit := range []int{1, 2, 500} {
		out := e.ok("get_user_activity", map[string]any{"document_path": awNB, "limit": limit})
		acts := asList(t, out["activity"])
		if num(t, out["count"]) != len(acts) || len(acts) > limit || len(acts) == 0 {
			t.Errorf("get_user_activity(limit %d) = %s", limit, compact(out))
			continue
		}
		first := asMap(t, acts[0])
		if first["kind"] != "edited" || first["agent"] != true || !slices.Equal(asList(t, first["cells"]), []any{"c1"}) {
			t.Errorf("newest activity = %s, want the agent's edit of c1", compact(first))
		}
	}
	out := e.ok("get_user_activity", map[string]any{"document_path": awNB, "limit": 500})
	if n := num(t, out["count"]); n < 3 {
		t.Errorf("get_user_activity lists %d entries for three alternating edits: %s", n, compact(out))
	}
	if !strings.Contains(compact(out), `"document":"`+awNB+`"`) {
		t.Errorf("activity entries do not name the document: %s", compact(out))
	}
}

// get_user_presence answers for one collaborator, as get_online_users with user_id does, and
// names who is online when that one is not.
func TestPresenceOfOneCollaborator(t *testing.T) {
	e := editEnv(t)
	injectPeer(t, e, editPath, 4242, "alice", "Alice A.")
	one := e.ok("get_user_presence", map[string]any{"user_id": "alice", "document_path": editPath})
	u := asMap(t, one["user"])
	if u["username"] != "alice" || u["status"] != "online" || !slices.Contains(asList(t, u["documents"]), any(editPath)) {
		t.Errorf("get_user_presence alice: %v", one)
	}
	same := e.ok("get_online_users", map[string]any{"document_path": editPath, "user_id": "alice"})
	if compact(same) != compact(one) || same["users"] != nil {
		t.Errorf("get_online_users with user_id = %s, want get_user_presence's %s", compact(same), compact(one))
	}
	for _, tool := range []string{"get_user_presence", "get_online_users"} {
		r := e.fail(tool, map[string]any{"document_path": editPath, "user_id": "nobody"})
		mustContain(t, tool+": a collaborator not online", errorText(r), `"nobody" is not online`, "alice")
	}
	r := e.fail("get_user_presence", map[string]any{"document_path": editPath})
	mustContain(t, "get_user_presence without user_id", findDetail(t, r, "user_id").msg, "required")
}

// broadcast_user_activity sets what the agent is doing, as set_user_presence's activity does,
// and leaves its status alone; an empty description clears it.
func TestBroadcastUserActivity(t *testing.T) {
	e := editEnv(t)
	e.ok("set_user_presence", map[string]any{"status": "busy", "message": "tidying"})
	out := e.ok("broadcast_user_activity", map[string]any{"activity_type": "running", "description": "running the tests",
		"document_path": editPath, "metadata": map[string]any{"cells": 3}})
	act := asMap(t, out["activity"])
	if act["type"] != "running" || act["description"] != "running the tests" || act["document"] != editPath || asMap(t, act["metadata"])["cells"] != float64(3) {
		t.Errorf("broadcast_user_activity = %s", compact(out))
	}
	if out["status"] != nil || !strings.Contains(str(out["shown_as"]), "running the tests") {
		t.Errorf("broadcast_user_activity answered %s, want the activity and how the agent is shown", compact(out))
	}
	if p := e.m.Presence(); p.Status != bridge.PresenceBusy || p.Message != "tidying" || p.Activity == nil || p.Activity.Type != "running" {
		t.Errorf("presence after broadcast_user_activity = %+v, want busy/tidying and running", p)
	}
	if out := e.ok("broadcast_user_activity", map[string]any{"activity_type": "running", "description": ""}); out["activity"] != nil {
		t.Errorf("an empty description left the activity: %s", compact(out))
	}
	if p := e.m.Presence(); p.Activity != nil || p.Status != bridge.PresenceBusy {
		t.Errorf("presence after clearing = %+v, want busy and no activity", p)
	}
	r := e.fail("broadcast_user_activity", map[string]any{"activity_type": "running"})
	mustContain(t, "broadcast_user_activity without description", findDetail(t, r, "description").msg, "required")
}
