//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// presenceWarm is how long the sidecar runs before the agent joins: every JupyterLab tab renews
// its global awareness state within 18 s (y-protocols: 15 s, checked every 3 s).
const presenceWarm = 20 * time.Second

// presenceRuns is how many notebooks (each with a human already in it) one run measures.
const presenceRuns = 5

// Humans who had a notebook open before the agent joined it: the agent's first calls know them,
// from JupyterLab's global awareness (get_online_users, get_user_cursors, the edit warnings),
// within 1 s of the join; their cursors follow with the room's awareness (at their renewal,
// within ~18 s). The independent peer plays each human (yjs + y-protocols, in the document room
// and in JupyterLab:globalAwareness, as a JupyterLab tab is in both). Before this, the first
// call listed nobody, and the human appeared at their renewal (12.8 s in one run).
func TestHumanAlreadyPresentIsSeenAtJoin(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	type human struct {
		name, username string
		p              *Peer
	}
	var humans []human
	for i := range presenceRuns {
		name := presenceNotebook(t)
		user := map[string]any{"username": fmt.Sprintf("early-%d-%d", i, time.Now().UnixNano()), "name": "Early", "display_name": fmt.Sprintf("Early Bird %d", i), "initials": "EB", "color": "#00aa88"}
		p := newPeer(t)
		if err := p.Call(ctx, "connect", map[string]any{"url": shared.URL, "token": shared.Token, "path": name, "kind": "notebook", "engine": string(shared.Engine), "awareness": map[string]any{"user": user}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Call(ctx, "setCursor", map[string]any{"cellId": "c1", "anchor": 2}, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Call(ctx, "connectGlobal", map[string]any{"url": shared.URL, "token": shared.Token,
			"state": map[string]any{"user": user, "current": "notebook:" + name, "documents": []any{name}}}, nil); err != nil {
			t.Fatal(err)
		}
		humans = append(humans, human{name: name, username: user["username"].(string), p: p})
	}

	// The sidecar starts afterwards and runs for presenceWarm before the agent touches a notebook.
	a := newAgentWith(t, shared, func(o *bridge.ManagerOptions) { o.GlobalAwareness = true }, nil)
	time.Sleep(presenceWarm)

	var listed, cursorsCall, warned, cursorKnown []time.Duration
	for _, h := range humans {
		join := time.Now()
		// The first call joins the room.
		users := a.ok(ctx, "get_online_users", map[string]any{"document_path": h.name})
		b, _ := json.Marshal(users)
		if !strings.Contains(string(b), `"username":"`+h.username+`"`) {
			t.Errorf("%s: the first get_online_users does not list the human already there: %s", h.name, b)
		}
		listed = append(listed, time.Since(join))
		cursors := a.ok(ctx, "get_user_cursors", map[string]any{"document_path": h.name})
		b, _ = json.Marshal(cursors)
		if !strings.Contains(string(b), `"username":"`+h.username+`"`) {
			t.Errorf("%s: get_user_cursors right after the join names neither a cursor nor a pending one of the human: %s", h.name, b)
		}
		cursorsCall = append(cursorsCall, time.Since(join))
		// The edit is in the human's cell: where the engine sends the room's awareness at the
		// join (jupyter-server-documents) the cursor is known at once and the warning names who
		// types there; elsewhere (jupyter-collaboration) it names who has the notebook open with a
		// cursor not known yet. An edit elsewhere warns only in the second case, rightly.
		out := a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": h.name, "exec": false, "updates": []any{map[string]any{"cell_id": "c1", "content": "import math  # agent\n"}}})
		if w := fmt.Sprint(out["warnings"]); !strings.Contains(w, "Early Bird") {
			t.Errorf("%s: an edit right after the join does not warn about the human in the notebook: %v", h.name, out)
		}
		warned = append(warned, time.Since(join))
		if len(cursorKnown) > 0 {
			// The peers started together, so their renewals are in step: after the first
			// cursor arrived the others are due at once, which says nothing of the wait.
			continue
		}
		for {
			out := a.ok(ctx, "get_user_cursors", map[string]any{"document_path": h.name})
			b, _ := json.Marshal(out["cursors"])
			if strings.Contains(string(b), `"cell_id":"c1"`) {
				cursorKnown = append(cursorKnown, time.Since(join))
				break
			}
			if time.Since(join) > 40*time.Second {
				t.Fatalf("%s: the human's cursor not known 40 s after the join: %v", h.name, out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for what, ds := range map[string][]time.Duration{"listed by get_online_users": listed, "named by get_user_cursors": cursorsCall, "named by an edit's warnings": warned} {
		if worst := slowest(ds); worst > time.Second {
			t.Errorf("the human already there was %s %v after the join (want ≤ 1 s)", what, worst)
		}
	}
	t.Logf("%d notebooks, a human in each before the join: listed by get_online_users after %s; named by get_user_cursors after %s; by an edit's warnings after %s; the first one's cursor known after %v (their renewal)",
		presenceRuns, spread(listed), spread(cursorsCall), spread(warned), cursorKnown[0].Round(100*time.Millisecond))
}

func slowest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// spread is "median (min–max)".
func spread(ds []time.Duration) string {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) time.Duration {
		if d < time.Second {
			return d.Round(time.Millisecond)
		}
		return d.Round(100 * time.Millisecond)
	}
	return fmt.Sprintf("%v (%v–%v)", r(s[len(s)/2]), r(s[0]), r(s[len(s)-1]))
}
