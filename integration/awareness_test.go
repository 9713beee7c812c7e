//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The agent appears in the room's awareness with its user object, the peer's presence reaches the
// agent, and the server's echo of our own awareness does not start a ping-pong (the server
// forwards every awareness frame to every client, the sender included).
func TestAwarenessPresenceWithoutStorm(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sc := newSidecar(t, shared, nil)
	room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	// Our awareness reaches the peer after our next announcement; make one happen now by
	// editing nothing but waiting for the peer's own state to reach us (which it sends on join).
	deadline := time.Now().Add(20 * time.Second)
	for len(room.Info().Collaborators) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the peer's presence never reached the sidecar")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := room.Info().Collaborators[0]; c.User.DisplayName != "Independent Peer" {
		t.Errorf("collaborator %+v", c)
	}
	var before, after struct {
		States map[string]map[string]any `json:"states"`
		Frames int                       `json:"frames"`
	}
	if err := p.Call(ctx, "awareness", nil, &before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a window for a storm to show
	if err := p.Call(ctx, "awareness", nil, &after); err != nil {
		t.Fatal(err)
	}
	if n := after.Frames - before.Frames; n > 6 {
		t.Errorf("the peer received %d awareness frames in 3 s: an awareness storm", n)
	}
	found := false
	for _, st := range after.States {
		if u, ok := st["user"].(map[string]any); ok && u["username"] == "jupyter-collab-mcp" {
			found = u["display_name"] == "AI Agent" && u["initials"] == "AI" && strings.HasPrefix(u["color"].(string), "#") && st["autosave"] == true
		}
	}
	if !found {
		t.Errorf("the agent's awareness state is missing or incomplete: %v", after.States)
	}
}
