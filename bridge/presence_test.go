package bridge_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Presence: the agent's cursors and status in awareness, what it sees of the others, the global
// awareness room, and the activity digest of a room's history.

// presAlice is the identity of the second client (a peer) in these tests.
var presAlice = ydoc.AwarenessUser{Username: "alice", Name: "Alice", Color: "#00aa00"}

// presPeer starts a second client on the same fake, as a collaborator named user, synced.
func presPeer(t *testing.T, srv *bridgetest.Server, path string, kind ydoc.Kind, user ydoc.AwarenessUser, mod func(*bridge.RoomOptions)) *harness {
	t.Helper()
	h := startRoom(t, srv, path, kind, func(o *bridge.RoomOptions) {
		o.User = user
		if mod != nil {
			mod(o)
		}
	})
	if err := h.room.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatalf("peer WaitSynced: %v", err)
	}
	return h
}

// presState is an awareness state as JupyterLab reads it.
type presState struct {
	User    ydoc.AwarenessUser `json:"user"`
	Cursors []struct {
		Anchor  ydoc.RelPos `json:"anchor"`
		Head    ydoc.RelPos `json:"head"`
		Primary bool        `json:"primary"`
		Empty   bool        `json:"empty"`
	} `json:"cursors"`
	Autosave  *bool          `json:"autosave"`
	Agent     map[string]any `json:"jupyter_collab_mcp"`
	Current   any            `json:"current"`
	Documents []string       `json:"documents"`
}

// presLast returns the last awareness record a client sent through the fake (ok false: none).
func presLast(srv *bridgetest.Server, clientID uint64) (bridgetest.AwarenessRecord, bool) {
	recs := srv.AwarenessOf(clientID)
	if len(recs) == 0 {
		return bridgetest.AwarenessRecord{}, false
	}
	return recs[len(recs)-1], true
}

// presAwaitState waits until the last state a client sent satisfies cond and returns it.
func presAwaitState(t *testing.T, srv *bridgetest.Server, clientID uint64, what string, cond func(json.RawMessage, presState) bool) (json.RawMessage, presState) {
	t.Helper()
	var raw json.RawMessage
	var st presState
	awaitServer(t, srv, what, func() bool {
		rec, ok := presLast(srv, clientID)
		if !ok || rec.State == nil {
			return false
		}
		var s presState
		if json.Unmarshal(rec.State, &s) != nil {
			return false
		}
		if cond(rec.State, s) {
			raw, st = rec.State, s
			return true
		}
		return false
	})
	return raw, st
}

// presPeerView polls room.Peers until the view of clientID satisfies cond, and returns it.
func presPeerView(t *testing.T, room *bridge.Room, clientID uint64, what string, cond func(bridge.PeerView) bool) bridge.PeerView {
	t.Helper()
	var got bridge.PeerView
	testutil.Poll(t, what, func() (bool, string) {
		peers, err := room.Peers(testutil.Context(t))
		if err != nil {
			t.Fatalf("waiting for %s: Peers: %v", what, err)
		}
		for _, p := range peers {
			if p.ClientID == clientID && cond(p) {
				got = p
				return true, ""
			}
		}
		return false, "peers " + presDescribe(peers)
	})
	return got
}

// presAbsent polls room.Peers until clientID is no longer listed.
func presAbsent(t *testing.T, room *bridge.Room, clientID uint64, what string) {
	t.Helper()
	testutil.Eventually(t, what, func() bool {
		peers, err := room.Peers(testutil.Context(t))
		if err != nil {
			t.Fatalf("Peers: %v", err)
		}
		return !slices.ContainsFunc(peers, func(p bridge.PeerView) bool { return p.ClientID == clientID })
	})
}

func presDescribe(peers []bridge.PeerView) string {
	var parts []string
	for _, p := range peers {
		b, _ := json.Marshal(p.State)
		parts = append(parts, fmt.Sprintf("{client %d cursors %+v state %s}", p.ClientID, p.Cursors, b))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func presCursorsAre(want ...bridge.PeerCursor) func(bridge.PeerView) bool {
	return func(p bridge.PeerView) bool { return slices.Equal(p.Cursors, want) }
}

// presBarrier makes sure every frame the room queued so far has been handled by the fake: the
// room writes frames in order, and Save returns once the fake answered the save request.
func presBarrier(t *testing.T, room *bridge.Room) {
	t.Helper()
	if _, err := room.Save(testutil.Context(t)); err != nil {
		t.Fatalf("Save (as a write barrier): %v", err)
	}
}

// presAwaitReplica polls a room's replica until cond holds.
func presAwaitReplica(t *testing.T, room *bridge.Room, what string, cond func(*ydoc.Doc) bool) {
	t.Helper()
	testutil.Eventually(t, what, func() bool {
		ok := false
		if err := room.View(testutil.Context(t), func(d *ydoc.Doc) error {
			ok = cond(d)
			return nil
		}); err != nil {
			t.Fatalf("View: %v", err)
		}
		return ok
	})
}

func presCellSource(d *ydoc.Doc, id string) string {
	nb, err := d.Notebook()
	if err != nil {
		return ""
	}
	for _, c := range nb.Cells {
		if c.ID == id {
			return c.Source
		}
	}
	return ""
}

// presSetCellSource changes a cell's source on the fake as a collaborator would.
func presSetCellSource(t *testing.T, srv *bridgetest.Server, path, id, src string) {
	t.Helper()
	if err := srv.EditDoc(path, func(tx *ydoc.Txn) error {
		i := tx.CellIndex(id)
		if i < 0 {
			return fmt.Errorf("no cell %s", id)
		}
		return tx.SetSource(i, src)
	}); err != nil {
		t.Fatalf("EditDoc: %v", err)
	}
}

func TestPresenceSetCursorsPublishesRelativePositions(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	peer := presPeer(t, srv, nbPath, ydoc.KindNotebook, presAlice, nil)
	agentID := agent.room.Info().ClientID
	ctx := testutil.Context(t)

	// "print('hello')": select "hello" (UTF-16 7..12), anchor at the end.
	if err := agent.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-a", Anchor: 12, Head: 7}, {CellID: "cell-b", Anchor: 2, Head: 2}}); err != nil {
		t.Fatalf("SetCursors: %v", err)
	}
	raw, st := presAwaitState(t, srv, agentID, "the agent's cursors in awareness", func(_ json.RawMessage, s presState) bool { return len(s.Cursors) == 2 })

	// The wire form is JupyterLab's: {anchor, head, primary, empty}, each a Yjs relative
	// position {type, tname, item, assoc}.
	var generic struct {
		Cursors []map[string]json.RawMessage `json:"cursors"`
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("state %s: %v", raw, err)
	}
	for i, c := range generic.Cursors {
		for _, k := range []string{"anchor", "head", "primary", "empty"} {
			if _, ok := c[k]; !ok {
				t.Errorf("cursor %d lacks %q: %s", i, k, raw)
			}
		}
		var rp map[string]json.RawMessage
		if err := json.Unmarshal(c["anchor"], &rp); err != nil {
			t.Fatalf("cursor %d anchor: %v", i, err)
		}
		for _, k := range []string{"type", "tname", "item", "assoc"} {
			if _, ok := rp[k]; !ok {
				t.Errorf("cursor %d anchor lacks %q: %s", i, k, c["anchor"])
			}
		}
	}
	c0, c1 := st.Cursors[0], st.Cursors[1]
	if !c0.Primary || c0.Empty || c1.Primary || !c1.Empty {
		t.Errorf("primary/empty flags: first {%v %v}, second {%v %v}; want {true false}, {false true}", c0.Primary, c0.Empty, c1.Primary, c1.Empty)
	}
	if c0.Anchor.Type == nil || c0.Anchor.Tname != nil || c0.Anchor.Item == nil {
		t.Errorf("a cell cursor's anchor %+v: want the cell source's item id as type, tname null, an item", c0.Anchor)
	}

	// The peer computes the same relative positions from its own replica (item ids are global).
	if err := peer.room.View(ctx, func(d *ydoc.Doc) error {
		for _, w := range []struct {
			got   ydoc.RelPos
			cell  string
			index int
		}{{c0.Anchor, "cell-a", 12}, {c0.Head, "cell-a", 7}, {c1.Anchor, "cell-b", 2}} {
			want, err := d.RelativePosition(w.cell, w.index)
			if err != nil {
				return err
			}
			if !jsonEq(w.got, want) {
				t.Errorf("relative position of %s@%d: agent sent %s, the peer's replica gives %s", w.cell, w.index, mustJSON(t, w.got), mustJSON(t, want))
			}
			if cell, idx, ok := d.ResolvePosition(w.got); !ok || cell != w.cell || idx != w.index {
				t.Errorf("the peer resolves %s to (%q, %d, %v), want (%s, %d)", mustJSON(t, w.got), cell, idx, ok, w.cell, w.index)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("peer View: %v", err)
	}

	// And Peers resolves them for it.
	v := presPeerView(t, peer.room, agentID, "the agent's cursors seen by the peer",
		presCursorsAre(bridge.PeerCursor{CellID: "cell-a", Anchor: 12, Head: 7}, bridge.PeerCursor{CellID: "cell-b", Anchor: 2, Head: 2}))
	if v.User == nil || v.User.Username != bridge.DefaultUser().Username {
		t.Errorf("peer view of the agent: user %+v", v.User)
	}

	// An empty list removes the cursors.
	if err := agent.room.SetCursors(ctx, nil); err != nil {
		t.Fatalf("SetCursors(nil): %v", err)
	}
	presAwaitState(t, srv, agentID, "the cursors removed", func(raw json.RawMessage, s presState) bool {
		return len(s.Cursors) == 0 && !strings.Contains(string(raw), `"cursors"`)
	})
	presPeerView(t, peer.room, agentID, "no cursor seen by the peer", func(p bridge.PeerView) bool { return len(p.Cursors) == 0 })
}

func jsonEq(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func TestPresencePeersFollowEdits(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	peer := presPeer(t, srv, nbPath, ydoc.KindNotebook, presAlice, nil)
	peerID := peer.room.Info().ClientID
	ctx := testutil.Context(t)

	// The peer selects "hello" in "print('hello')".
	if err := peer.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-a", Anchor: 7, Head: 12}}); err != nil {
		t.Fatalf("peer SetCursors: %v", err)
	}
	v := presPeerView(t, agent.room, peerID, "alice's selection", presCursorsAre(bridge.PeerCursor{CellID: "cell-a", Anchor: 7, Head: 12}))
	if v.User == nil || v.User.Username != "alice" || v.Since.IsZero() || v.Updated.IsZero() {
		t.Errorf("agent's view of alice: user %+v since %v updated %v", v.User, v.Since, v.Updated)
	}
	if v.State["cursors"] == nil {
		t.Errorf("PeerView.State lacks the raw cursors: %v", v.State)
	}

	// Someone inserts text before the selection: it moves with the text.
	presSetCellSource(t, srv, nbPath, "cell-a", "xxprint('hello')")
	presPeerView(t, agent.room, peerID, "the selection shifted by 2", presCursorsAre(bridge.PeerCursor{CellID: "cell-a", Anchor: 9, Head: 14}))

	// An astral character is two UTF-16 units.
	presSetCellSource(t, srv, nbPath, "cell-a", "😀xxprint('hello')")
	presPeerView(t, agent.room, peerID, "the selection shifted by an emoji", presCursorsAre(bridge.PeerCursor{CellID: "cell-a", Anchor: 11, Head: 16}))

	// Text after the selection does not move it.
	presSetCellSource(t, srv, nbPath, "cell-a", "😀xxprint('hello') # done")
	presAwaitReplica(t, agent.room, "the append in the agent's replica", func(d *ydoc.Doc) bool {
		return presCellSource(d, "cell-a") == "😀xxprint('hello') # done"
	})
	presPeerView(t, agent.room, peerID, "the selection unmoved by an append", presCursorsAre(bridge.PeerCursor{CellID: "cell-a", Anchor: 11, Head: 16}))

	// A caret at the very end of a cell stays at the end as the cell grows.
	if err := peer.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-b", Anchor: 7, Head: 7}}); err != nil {
		t.Fatalf("peer SetCursors: %v", err)
	}
	presPeerView(t, agent.room, peerID, "alice's caret at the end of cell-b", presCursorsAre(bridge.PeerCursor{CellID: "cell-b", Anchor: 7, Head: 7}))
	presSetCellSource(t, srv, nbPath, "cell-b", "# Title!!")
	presPeerView(t, agent.room, peerID, "the end caret follows the end", presCursorsAre(bridge.PeerCursor{CellID: "cell-b", Anchor: 9, Head: 9}))

	// A cursor in a text file resolves with cell id "".
	tagent := startRoom(t, srv, bridgetest.TextPath, ydoc.KindText, nil)
	if err := tagent.room.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	tpeer := presPeer(t, srv, bridgetest.TextPath, ydoc.KindText, presAlice, nil)
	if err := tpeer.room.SetCursors(ctx, []bridge.CursorSpec{{Anchor: 11, Head: 17}}); err != nil {
		t.Fatalf("text SetCursors: %v", err)
	}
	presPeerView(t, tagent.room, tpeer.room.Info().ClientID, "alice's selection in the text file", presCursorsAre(bridge.PeerCursor{CellID: "", Anchor: 11, Head: 17}))
	if err := srv.EditDoc(bridgetest.TextPath, func(tx *ydoc.Txn) error { return tx.InsertText(0, "zero\n") }); err != nil {
		t.Fatal(err)
	}
	presPeerView(t, tagent.room, tpeer.room.Info().ClientID, "the text selection shifted by 5", presCursorsAre(bridge.PeerCursor{CellID: "", Anchor: 16, Head: 22}))
}

func TestPresenceSetCursorsErrors(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	agentID := agent.room.Info().ClientID
	ctx := testutil.Context(t)

	if err := agent.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-b", Anchor: 1, Head: 1}}); err != nil {
		t.Fatalf("SetCursors: %v", err)
	}
	good, _ := presAwaitState(t, srv, agentID, "the first cursor", func(_ json.RawMessage, s presState) bool { return len(s.Cursors) == 1 })

	for _, tc := range []struct {
		name  string
		specs []bridge.CursorSpec
		is    error
	}{
		{"unknown cell", []bridge.CursorSpec{{CellID: "no-such-cell", Anchor: 0, Head: 0}}, ydoc.ErrCellNotFound},
		{"unknown cell after a good one", []bridge.CursorSpec{{CellID: "cell-a", Anchor: 1, Head: 1}, {CellID: "nope", Anchor: 0, Head: 0}}, ydoc.ErrCellNotFound},
		{"no cell id in a notebook", []bridge.CursorSpec{{Anchor: 0, Head: 0}}, ydoc.ErrNoSuchText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := agent.room.SetCursors(ctx, tc.specs)
			if err == nil || !errors.Is(err, tc.is) {
				t.Fatalf("SetCursors(%+v) = %v, want %v", tc.specs, err, tc.is)
			}
		})
	}
	// Nothing was announced: the last state still carries the first cursor.
	presBarrier(t, agent.room)
	if rec, _ := presLast(srv, agentID); string(rec.State) != string(good) {
		t.Errorf("after failed SetCursors the agent announced %s, want the earlier state %s", rec.State, good)
	}

	// A text file has no cells.
	tagent := startRoom(t, srv, bridgetest.TextPath, ydoc.KindText, nil)
	if err := tagent.room.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tagent.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-a", Anchor: 0, Head: 0}}); !errors.Is(err, ydoc.ErrNoSuchText) {
		t.Errorf("SetCursors with a cell id in a text file = %v, want ErrNoSuchText", err)
	}
	// Out-of-range offsets are clamped to the text.
	if err := tagent.room.SetCursors(ctx, []bridge.CursorSpec{{Anchor: -3, Head: 1000}}); err != nil {
		t.Fatalf("SetCursors clamped: %v", err)
	}
	tpeer := presPeer(t, srv, bridgetest.TextPath, ydoc.KindText, presAlice, nil)
	n := len("first line\nsecond line\n")
	presPeerView(t, tpeer.room, tagent.room.Info().ClientID, "the clamped selection", presCursorsAre(bridge.PeerCursor{Anchor: 0, Head: n}))

	// A closed room says so.
	agent.room.Close()
	if err := agent.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-a"}}); !errors.Is(err, bridge.ErrRoomClosed) {
		t.Errorf("SetCursors on a closed room = %v, want ErrRoomClosed", err)
	}
}

func TestPresenceOfflineAndBack(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	peer := presPeer(t, srv, nbPath, ydoc.KindNotebook, presAlice, nil)
	agentID := agent.room.Info().ClientID
	ctx := testutil.Context(t)

	if err := agent.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-a", Anchor: 3, Head: 3}}); err != nil {
		t.Fatal(err)
	}
	presPeerView(t, peer.room, agentID, "the agent with its cursor", presCursorsAre(bridge.PeerCursor{CellID: "cell-a", Anchor: 3, Head: 3}))

	// Busy, with a message: shown in the display name and in the structured field.
	if err := agent.room.SetPresence(ctx, bridge.Presence{Status: bridge.PresenceBusy, Message: "refactoring"}); err != nil {
		t.Fatal(err)
	}
	v := presPeerView(t, peer.room, agentID, "the agent busy", func(p bridge.PeerView) bool {
		return p.User != nil && p.User.DisplayName == "AI Agent (busy) · refactoring"
	})
	agentField, _ := v.State["jupyter_collab_mcp"].(map[string]any)
	if agentField["status"] != "busy" || agentField["message"] != "refactoring" || agentField["agent"] != true {
		t.Errorf("jupyter_collab_mcp = %v, want agent true, status busy, message refactoring", agentField)
	}
	if v.User.Username != "jupyter-collab-mcp" || v.User.Name != "AI Agent" {
		t.Errorf("user %+v: username and name must not change with the status", v.User)
	}

	// Offline: a null state goes out and the peer drops the agent; the room stays connected.
	if err := agent.room.SetPresence(ctx, bridge.Presence{Status: bridge.PresenceOffline}); err != nil {
		t.Fatal(err)
	}
	awaitServer(t, srv, "a null state from the agent", func() bool {
		rec, ok := presLast(srv, agentID)
		return ok && rec.State == nil
	})
	presAbsent(t, peer.room, agentID, "the peer to drop the offline agent")
	if st := agent.room.Info().Status; st != bridge.StatusSynced {
		t.Errorf("room status while offline = %s, want synced", st)
	}

	// Offline stays offline: neither moving the cursor nor a newcomer makes it announce itself.
	nulls := len(srv.AwarenessOf(agentID))
	if err := agent.room.SetCursors(ctx, []bridge.CursorSpec{{CellID: "cell-b", Anchor: 1, Head: 1}}); err != nil {
		t.Fatal(err)
	}
	late := presPeer(t, srv, nbPath, ydoc.KindNotebook, ydoc.AwarenessUser{Username: "carol", Name: "Carol"}, nil)
	presPeerView(t, agent.room, late.room.Info().ClientID, "the agent to see carol", func(bridge.PeerView) bool { return true })
	presBarrier(t, agent.room)
	if recs := srv.AwarenessOf(agentID); len(recs) != nulls {
		t.Errorf("the offline agent sent %d more awareness records: %+v", len(recs)-nulls, recs[nulls:])
	}

	// Back online: the state (with the cursor moved meanwhile) comes back.
	if err := agent.room.SetPresence(ctx, bridge.Presence{Status: bridge.PresenceOnline}); err != nil {
		t.Fatal(err)
	}
	v = presPeerView(t, peer.room, agentID, "the agent back online with its latest cursor", presCursorsAre(bridge.PeerCursor{CellID: "cell-b", Anchor: 1, Head: 1}))
	if v.User == nil || v.User.DisplayName != "AI Agent" {
		t.Errorf("display name back online = %+v, want AI Agent", v.User)
	}
	if a, _ := v.State["jupyter_collab_mcp"].(map[string]any); a["status"] != "online" || a["message"] != nil {
		t.Errorf("jupyter_collab_mcp back online = %v", a)
	}
	presPeerView(t, late.room, agentID, "carol to see the agent back", func(bridge.PeerView) bool { return true })
}

func TestPresenceStartsOffline(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, func(o *bridge.RoomOptions) { o.Presence = bridge.Presence{Status: bridge.PresenceOffline} })
	agentID := agent.room.Info().ClientID
	// A newcomer announces herself; the agent sees her and, offline, does not answer.
	peer := presPeer(t, srv, nbPath, ydoc.KindNotebook, presAlice, nil)
	presPeerView(t, agent.room, peer.room.Info().ClientID, "the agent to see alice", func(bridge.PeerView) bool { return true })
	presBarrier(t, agent.room)
	for _, r := range srv.AwarenessOf(agentID) {
		if r.State != nil {
			t.Errorf("an agent started offline announced %s", r.State)
		}
	}
	if err := agent.room.SetPresence(testutil.Context(t), bridge.Presence{Status: bridge.PresenceAway}); err != nil {
		t.Fatal(err)
	}
	presPeerView(t, peer.room, agentID, "the agent away", func(p bridge.PeerView) bool {
		return p.User != nil && p.User.DisplayName == "AI Agent (away)"
	})
}

func TestPresenceDisplayName(t *testing.T) {
	long := strings.Repeat("é", 70)
	sixty := strings.Repeat("x", 60)
	act := func(d string) *bridge.Activity { return &bridge.Activity{Type: "running", Description: d} }
	for _, tc := range []struct {
		name string
		p    bridge.Presence
		want string
	}{
		{"online", bridge.Presence{Status: bridge.PresenceOnline}, "AI Agent"},
		{"online ignores the message", bridge.Presence{Status: bridge.PresenceOnline, Message: "hi"}, "AI Agent"},
		{"away", bridge.Presence{Status: bridge.PresenceAway}, "AI Agent (away)"},
		{"busy with message", bridge.Presence{Status: bridge.PresenceBusy, Message: "refactoring"}, "AI Agent (busy) · refactoring"},
		{"busy with activity", bridge.Presence{Status: bridge.PresenceBusy, Activity: act("desc")}, "AI Agent (busy) · desc"},
		{"activity wins over message", bridge.Presence{Status: bridge.PresenceAway, Message: "m", Activity: act("running tests")}, "AI Agent (away) · running tests"},
		{"online with activity", bridge.Presence{Status: bridge.PresenceOnline, Activity: act("reviewing")}, "AI Agent · reviewing"},
		{"empty activity falls back to message", bridge.Presence{Status: bridge.PresenceBusy, Message: "m", Activity: act("")}, "AI Agent (busy) · m"},
		{"exactly 60 runes kept", bridge.Presence{Status: bridge.PresenceBusy, Activity: act(sixty)}, "AI Agent (busy) · " + sixty},
		{"long activity truncated", bridge.Presence{Status: bridge.PresenceBusy, Activity: act(long)}, "AI Agent (busy) · " + strings.Repeat("é", 59) + "…"},
		{"long message truncated", bridge.Presence{Status: bridge.PresenceAway, Message: long}, "AI Agent (away) · " + strings.Repeat("é", 59) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := bridge.DisplayName("AI Agent", tc.p)
			if got != tc.want {
				t.Errorf("DisplayName = %q, want %q", got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("DisplayName %q is not valid UTF-8", got)
			}
			if _, suffix, ok := strings.Cut(got, " · "); ok && utf8.RuneCountInString(suffix) > 60 {
				t.Errorf("description part %q has %d runes, want at most 60", suffix, utf8.RuneCountInString(suffix))
			}
		})
	}
}

func TestPresenceCurrentString(t *testing.T) {
	if got := bridge.CurrentString("a/b.ipynb", ydoc.KindNotebook); got != "notebook:a/b.ipynb" {
		t.Errorf("CurrentString notebook = %q", got)
	}
	if got := bridge.CurrentString("notes.txt", ydoc.KindText); got != "editor:notes.txt" {
		t.Errorf("CurrentString text = %q", got)
	}
}

// presGlobalPeer joins the global awareness room as a collaborator.
func presGlobalPeer(t *testing.T, srv *bridgetest.Server, user ydoc.AwarenessUser) *harness {
	t.Helper()
	return presPeer(t, srv, bridge.GlobalAwarenessRoom, ydoc.KindText, user, func(o *bridge.RoomOptions) {
		o.Transient = bridge.GlobalAwarenessRoom
	})
}

// presAgentInGlobal waits until the peer in the global room sees an agent state matching cond.
func presAgentInGlobal(t *testing.T, peer *bridge.Room, what string, cond func(presState) bool) (bridge.PeerView, presState) {
	t.Helper()
	var view bridge.PeerView
	var state presState
	testutil.Poll(t, what, func() (bool, string) {
		peers, err := peer.Peers(testutil.Context(t))
		if err != nil {
			t.Fatalf("%s: Peers: %v", what, err)
		}
		for _, p := range peers {
			if p.User == nil || p.User.Username != bridge.DefaultUser().Username {
				continue
			}
			var st presState
			b, _ := json.Marshal(p.State)
			if json.Unmarshal(b, &st) == nil && cond(st) {
				view, state = p, st
				return true, ""
			}
		}
		return false, "global peers " + presDescribe(peers)
	})
	return view, state
}

func TestPresenceManagerGlobalAwareness(t *testing.T) {
	srv := newServer(t)
	bob := ydoc.AwarenessUser{Username: "bob", Name: "Bob"}
	peer := presGlobalPeer(t, srv, bob)
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.GlobalAwareness = true })
	runManager(t, m)

	// Joined with nothing open: documents empty, no current.
	_, st := presAgentInGlobal(t, peer.room, "the agent in the global room", func(s presState) bool { return s.Documents != nil })
	if len(st.Documents) != 0 || st.Current != nil {
		t.Errorf("global state before any open: documents %v current %v", st.Documents, st.Current)
	}
	if st.Autosave != nil {
		t.Errorf("the global (awareness-only) state carries autosave %v", *st.Autosave)
	}

	// The agent sees bob there.
	testutil.Eventually(t, "GlobalPeers to list bob", func() bool {
		ps, err := m.GlobalPeers(testutil.Context(t))
		if err != nil {
			t.Fatalf("GlobalPeers: %v", err)
		}
		return slices.ContainsFunc(ps, func(p bridge.PeerView) bool { return p.User != nil && p.User.Username == "bob" })
	})

	openRoom(t, m, nbPath, ydoc.KindNotebook)
	presAgentInGlobal(t, peer.room, "current = the notebook", func(s presState) bool {
		return s.Current == "notebook:"+nbPath && slices.Equal(s.Documents, []string{nbPath})
	})

	openRoom(t, m, bridgetest.TextPath, ydoc.KindText)
	presAgentInGlobal(t, peer.room, "current = the text file", func(s presState) bool {
		return s.Current == "editor:"+bridgetest.TextPath && slices.Equal(s.Documents, []string{nbPath, bridgetest.TextPath})
	})

	// Back to the notebook (already open): current follows.
	openRoom(t, m, nbPath, ydoc.KindNotebook)
	presAgentInGlobal(t, peer.room, "current back to the notebook", func(s presState) bool { return s.Current == "notebook:"+nbPath })

	// Closing a document that is not current leaves current alone.
	m.CloseRoom(bridgetest.TextPath, ydoc.KindText)
	presAgentInGlobal(t, peer.room, "the text file out of documents", func(s presState) bool {
		return slices.Equal(s.Documents, []string{nbPath}) && s.Current == "notebook:"+nbPath
	})

	// Closing the current document clears current.
	m.CloseRoom(nbPath, ydoc.KindNotebook)
	presAgentInGlobal(t, peer.room, "current cleared", func(s presState) bool { return len(s.Documents) == 0 && s.Current == nil })

	// Presence reaches the global room too, and rooms opened later start with it.
	if err := m.SetPresence(testutil.Context(t), bridge.Presence{Status: bridge.PresenceBusy, Message: "indexing"}); err != nil {
		t.Fatalf("SetPresence: %v", err)
	}
	if p := m.Presence(); p.Status != bridge.PresenceBusy || p.Message != "indexing" {
		t.Errorf("Presence() = %+v", p)
	}
	presAgentInGlobal(t, peer.room, "busy in the global room", func(s presState) bool {
		return s.User.DisplayName == "AI Agent (busy) · indexing" && s.Agent["status"] == "busy"
	})
	room := openRoom(t, m, bridgetest.TextPath, ydoc.KindText)
	_, first := presAwaitState(t, srv, room.Info().ClientID, "the new room's first state", func(json.RawMessage, presState) bool { return true })
	if first.User.DisplayName != "AI Agent (busy) · indexing" {
		t.Errorf("a room opened while busy announced display name %q", first.User.DisplayName)
	}
	if first.Autosave == nil || !*first.Autosave {
		t.Errorf("a document room's state lacks autosave true")
	}

	// Offline removes the agent from the global room as well.
	if err := m.SetPresence(testutil.Context(t), bridge.Presence{Status: bridge.PresenceOffline}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the agent gone from the global room", func() bool {
		ps, err := peer.room.Peers(testutil.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(ps, func(p bridge.PeerView) bool { return p.User != nil && p.User.Username == bridge.DefaultUser().Username })
	})
}

func TestPresenceManagerWithoutGlobalAwareness(t *testing.T) {
	srv := newServer(t)
	m := newManager(t, srv, nil)
	runManager(t, m)
	openRoom(t, m, nbPath, ydoc.KindNotebook)
	peers, err := m.GlobalPeers(testutil.Context(t))
	if err != nil || peers != nil {
		t.Errorf("GlobalPeers without the global room = %v, %v; want nil, nil", peers, err)
	}
	for _, c := range srv.Conns() {
		for _, f := range c.Received() {
			if f.Type == ydoc.MsgAwareness && strings.Contains(string(f.Payload), `"documents"`) {
				t.Errorf("a global-awareness state was sent without GlobalAwareness")
			}
		}
	}
}

// Reopening the document that was current (leave_session, then join_session) must publish it
// again in the global room.
func TestPresenceManagerGlobalAfterReopen(t *testing.T) {
	// Regression: reopening the document that was current publishes nothing in the global room (current stays null, documents stale): touch compares with m.current, never reset when that room closed, and start never calls updateGlobal (bridge/manager.go:386)
	srv := newServer(t)
	peer := presGlobalPeer(t, srv, ydoc.AwarenessUser{Username: "bob", Name: "Bob"})
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.GlobalAwareness = true })
	runManager(t, m)

	openRoom(t, m, nbPath, ydoc.KindNotebook)
	presAgentInGlobal(t, peer.room, "current = the notebook", func(s presState) bool { return s.Current == "notebook:"+nbPath })
	m.CloseRoom(nbPath, ydoc.KindNotebook)
	presAgentInGlobal(t, peer.room, "current cleared", func(s presState) bool { return s.Current == nil && len(s.Documents) == 0 })

	openRoom(t, m, nbPath, ydoc.KindNotebook)
	presAgentInGlobal(t, peer.room, "the reopened notebook current again", func(s presState) bool {
		return s.Current == "notebook:"+nbPath && slices.Equal(s.Documents, []string{nbPath})
	})
}

// presActivity reads a room's activity digest.
func presActivity(t *testing.T, room *bridge.Room, limit int) []bridge.ActivityEntry {
	t.Helper()
	out, err := room.Activity(testutil.Context(t), limit)
	if err != nil {
		t.Fatalf("Activity(%d): %v", limit, err)
	}
	return out
}

func presDescribeActivity(es []bridge.ActivityEntry) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("{%s %v by %v agent=%v}", e.Kind, e.CellIDs, e.Authors, e.Local))
	}
	return strings.Join(parts, " ")
}

type presWantAct struct {
	kind    string
	cells   []string
	local   bool
	authors []string
}

func presCheckActivity(t *testing.T, got []bridge.ActivityEntry, want []presWantAct) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("activity has %d entries, want at least %d: %s", len(got), len(want), presDescribeActivity(got))
	}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || !slices.Equal(g.CellIDs, w.cells) || g.Local != w.local || !slices.Equal(g.Authors, w.authors) || g.Path != nbPath {
			t.Errorf("activity[%d] = {%s %v by %v agent=%v path %s}, want {%s %v by %v agent=%v path %s}\nall: %s",
				i, g.Kind, g.CellIDs, g.Authors, g.Local, g.Path, w.kind, w.cells, w.authors, w.local, nbPath, presDescribeActivity(got))
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].At.After(got[i-1].At) {
			t.Errorf("activity not newest first: [%d] at %v after [%d] at %v", i, got[i].At, i-1, got[i-1].At)
		}
	}
}

func TestPresenceActivity(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	ctx := testutil.Context(t)
	// The fake's own edits carry the server document's client id: give it bob's presence.
	bob := ydoc.AwarenessUser{Username: "bob", Name: "Bob"}
	srv.Inject(ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(srv.DocClientID(nbPath), 1, mustJSON(t, map[string]any{"user": bob}))))
	presPeerView(t, agent.room, srv.DocClientID(nbPath), "bob's presence", func(p bridge.PeerView) bool { return p.User != nil })

	// Bob types three keystrokes into cell-a: three changes.
	src := "print('hello')"
	for _, ch := range []string{"!", "?", "."} {
		src += ch
		presSetCellSource(t, srv, nbPath, "cell-a", src)
		want := src
		presAwaitReplica(t, agent.room, "bob's keystroke", func(d *ydoc.Doc) bool { return presCellSource(d, "cell-a") == want })
	}
	// The agent: inserts a cell, edits another, runs cell-a, deletes the new cell.
	edits := []struct {
		what string
		fn   ydoc.EditFunc
	}{
		{"insert", insertCell("new")},
		{"edit cell-b", func(tx *ydoc.Txn, _ bool) error { return tx.SetSource(tx.CellIndex("cell-b"), "# Title 2") }},
		{"run cell-a", func(tx *ydoc.Txn, _ bool) error {
			i := tx.CellIndex("cell-a")
			n := 2
			if err := tx.SetExecutionCount(i, &n); err != nil {
				return err
			}
			return tx.AppendOutput(i, map[string]any{"output_type": "stream", "name": "stdout", "text": "hello!?.\n"})
		}},
		{"delete", func(tx *ydoc.Txn, _ bool) error { return tx.DeleteCells(tx.CellIndex("new"), 1) }},
	}
	for _, e := range edits {
		if _, err := agent.room.Apply(ctx, e.fn); err != nil {
			t.Fatalf("%s: %v", e.what, err)
		}
	}

	var remoteKeystrokes int
	if err := agent.room.Read(ctx, func(_ *ydoc.Doc, h bridge.History) error {
		for _, e := range h.Recent(100) {
			if !e.Change.Local && slices.ContainsFunc(e.Change.Cells, func(c ydoc.CellChange) bool { return c.ID == "cell-a" }) {
				remoteKeystrokes++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if remoteKeystrokes < 2 {
		t.Fatalf("the history holds %d remote changes of cell-a; the merge below would test nothing", remoteKeystrokes)
	}

	agentName := []string{bridge.DefaultUser().DisplayName}
	want := []presWantAct{
		{bridge.ActDeleted, []string{"new"}, true, agentName},
		{bridge.ActExecuted, []string{"cell-a"}, true, agentName},
		{bridge.ActEdited, []string{"cell-b"}, true, agentName},
		{bridge.ActInserted, []string{"new"}, true, agentName},
		{bridge.ActEdited, []string{"cell-a"}, false, []string{"Bob"}}, // three keystrokes, one entry
	}
	all := presActivity(t, agent.room, 50)
	presCheckActivity(t, all, want)
	// Anything older is the initial load, never a second entry for bob's typing.
	for _, e := range all[len(want):] {
		if e.Kind == bridge.ActEdited && slices.Contains(e.CellIDs, "cell-a") {
			t.Errorf("bob's keystrokes were not merged: %s", presDescribeActivity(all))
		}
	}
	if len(all) > len(want)+1 {
		t.Errorf("activity has %d entries, want %d (plus at most the initial load): %s", len(all), len(want), presDescribeActivity(all))
	}

	for _, limit := range []int{1, 2, 4} {
		got := presActivity(t, agent.room, limit)
		if len(got) != limit {
			t.Errorf("Activity(%d) returned %d entries: %s", limit, len(got), presDescribeActivity(got))
			continue
		}
		presCheckActivity(t, got, want[:limit])
	}
	if got := presActivity(t, agent.room, 0); len(got) != 0 {
		t.Errorf("Activity(0) = %s, want nothing", presDescribeActivity(got))
	}
}

func TestPresenceActivityMove(t *testing.T) {
	// Regression: a cell move is reported as "edited", never "moved": describeChange expects the cell in both Inserted and Deleted, but ydoc reports a move as Moved plus a "*" CellChange (bridge/presence.go:309, ydoc/doc.go:458)
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	if _, err := agent.room.Apply(testutil.Context(t), ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.MoveCells(1, 1, 0) })); err != nil {
		t.Fatalf("move: %v", err)
	}
	got := presActivity(t, agent.room, 1)
	if len(got) != 1 || got[0].Kind != bridge.ActMoved || !slices.Equal(got[0].CellIDs, []string{"cell-b"}) || !got[0].Local {
		t.Errorf("activity after moving cell-b to the top = %s, want {moved [cell-b] agent=true}", presDescribeActivity(got))
	}
}

func TestPresenceActivityTextFile(t *testing.T) {
	srv := newServer(t)
	agent := startRoom(t, srv, bridgetest.TextPath, ydoc.KindText, nil)
	if err := agent.room.WaitSynced(testutil.Context(t)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := agent.room.Apply(testutil.Context(t), ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertText(0, "x") })); err != nil {
			t.Fatal(err)
		}
	}
	got := presActivity(t, agent.room, 10)
	if len(got) == 0 || got[0].Kind != bridge.ActEdited || got[0].CellIDs != nil || !got[0].Local || got[0].Path != bridgetest.TextPath {
		t.Fatalf("text activity = %s, want a local edited entry first", presDescribeActivity(got))
	}
	if len(got) > 1 && got[1].Kind == bridge.ActEdited && got[1].Local {
		t.Errorf("three consecutive local text edits gave several entries: %s", presDescribeActivity(got))
	}
}

// Loading the document when the room joins is nobody's activity.
func TestPresenceActivityIgnoresTheInitialLoad(t *testing.T) {
	srv := newServer(t)
	agent := startSynced(t, srv, nil)
	if got := presActivity(t, agent.room, 10); len(got) != 0 {
		t.Errorf("activity right after joining = %s, want none", presDescribeActivity(got))
	}
}
