package bridge_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// presViewer joins the global awareness room as a JupyterLab tab of user with documents open and
// current in front.
func presViewer(t *testing.T, h *harness, current any, documents ...string) {
	t.Helper()
	docs := make([]any, 0, len(documents))
	for _, d := range documents {
		docs = append(docs, d)
	}
	if err := h.room.SetFields(testutil.Context(t), map[string]any{"current": current, "documents": docs}); err != nil {
		t.Fatalf("SetFields: %v", err)
	}
}

// viewerOf returns the named viewer (ok false: not listed).
func viewerOf(p bridge.DocumentPresence, username string) (bridge.Viewer, bool) {
	for _, v := range p.Viewers {
		if v.User.Username == username {
			return v, true
		}
	}
	return bridge.Viewer{}, false
}

func TestDocumentPresenceFromGlobalAwareness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		clk := &clock{}
		bob := ydoc.AwarenessUser{Username: "bob", Name: "Bob"}
		carol := ydoc.AwarenessUser{Username: "carol", Name: "Carol"}
		bobTab := presGlobalPeer(t, srv, bob)
		presViewer(t, bobTab, "notebook:"+nbPath, nbPath)
		carolTab := presGlobalPeer(t, srv, carol)
		presViewer(t, carolTab, nil, nbPath) // open in a background tab
		m := newManager(t, srv, func(o *bridge.ManagerOptions) {
			o.GlobalAwareness = true
			o.Room.Now = clk.Now
		})
		runManager(t, m)
		testutil.Eventually(t, "the global room to list bob and carol, in sync", func() bool {
			ps, _, err := m.SyncedGlobalPeers(testutil.Context(t)) // the warm-up counts from the sync
			return err == nil && len(ps) == 2
		})

		// Global awareness joined moments ago and a fresh room: the sidecar cannot know everyone, but
		// names who it already sees.
		room := openRoom(t, m, nbPath, ydoc.KindNotebook)
		p, err := m.DocumentPresence(testutil.Context(t), room)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Blind || !p.BlindUntil.Equal(room.Info().SyncedAt.Add(bridge.GlobalWarm)) {
			t.Errorf("fresh global room: Blind %v until %v, want true until the room's sync + %v", p.Blind, p.BlindUntil, bridge.GlobalWarm)
		}
		if _, ok := viewerOf(p, "bob"); !ok {
			t.Errorf("bob is not listed before global awareness is warm: %+v", p.Viewers)
		}
		m.CloseRoom(nbPath, ydoc.KindNotebook)

		// The sidecar has run for GlobalWarm: joining now, it knows at once who has the notebook open.
		clk.Advance(bridge.GlobalWarm)
		room = openRoom(t, m, nbPath, ydoc.KindNotebook)
		p, err = m.DocumentPresence(testutil.Context(t), room)
		if err != nil {
			t.Fatal(err)
		}
		if p.Blind {
			t.Errorf("warm global awareness, still Blind")
		}
		b, ok := viewerOf(p, "bob")
		if !ok || !b.Current || b.Tabs != 1 || b.InRoom != 0 || !b.Pending {
			t.Errorf("bob = %+v (ok %v), want current, one tab, pending", b, ok)
		}
		c, ok := viewerOf(p, "carol")
		if !ok || c.Current || !c.Pending {
			t.Errorf("carol = %+v (ok %v), want open in the background, pending", c, ok)
		}
		if want := room.Info().SyncedAt.Add(bridge.GlobalWarm); !p.PendingUntil.Equal(want) {
			t.Errorf("PendingUntil %v, want %v", p.PendingUntil, want)
		}

		// AwaitPresence waits for bob (the notebook in front of him), not for carol.
		got := make(chan bridge.DocumentPresence, 1)
		go func() {
			p, err := m.AwaitPresence(testutil.Context(t), room)
			if err != nil {
				t.Errorf("AwaitPresence: %v", err)
			}
			got <- p
		}()
		synctest.Wait() // AwaitPresence is waiting, or returned
		select {
		case p := <-got:
			t.Fatalf("AwaitPresence returned before bob's room state arrived: %+v", p.Viewers)
		default:
		}
		presPeer(t, srv, nbPath, ydoc.KindNotebook, bob, nil)
		select {
		case p = <-got:
		case <-time.After(testutil.WaitLimit):
			t.Fatal("AwaitPresence did not return once bob's state arrived")
		}
		if b, _ := viewerOf(p, "bob"); b.InRoom != 1 || b.Pending {
			t.Errorf("after bob's room state: %+v", b)
		}
		if c, _ := viewerOf(p, "carol"); !c.Pending {
			t.Errorf("carol is no longer pending: %+v", c)
		}

		// Once the room has been in sync for GlobalWarm every tab in it has renewed: carol, listed in
		// global awareness without a state in the room, is not in it, and nobody is pending. (The
		// tabs renew their global states first, as they would in that time.)
		renewed := clk.Now()
		presViewer(t, bobTab, "notebook:"+nbPath, nbPath, "other.ipynb")
		presViewer(t, carolTab, nil, nbPath, "other.ipynb")
		testutil.Eventually(t, "the renewed global states", func() bool {
			ps, err := m.GlobalPeers(testutil.Context(t))
			n := 0
			for _, p := range ps {
				if !p.Updated.Before(renewed) {
					n++
				}
			}
			return err == nil && n == 2
		})
		clk.Advance(bridge.GlobalWarm)
		p, err = m.DocumentPresence(testutil.Context(t), room)
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := viewerOf(p, "carol"); c.Pending || c.InRoom != 0 || c.Tabs != 1 {
			t.Errorf("carol after the room's warm-up: %+v", c)
		}
		if len(p.PendingViewers()) != 0 || !p.PendingUntil.IsZero() {
			t.Errorf("pending after the warm-up: %+v until %v", p.PendingViewers(), p.PendingUntil)
		}
	})
}

// A viewer whose room state never comes (the tab lists the notebook but is not in its room):
// AwaitPresence gives up when their renewal was due.
func TestAwaitPresenceBoundedByRenewal(t *testing.T) {
	srv := newServer(t)
	clk := &clock{}
	bobTab := presGlobalPeer(t, srv, ydoc.AwarenessUser{Username: "bob"})
	presViewer(t, bobTab, "notebook:"+nbPath, nbPath)
	m := newManager(t, srv, func(o *bridge.ManagerOptions) {
		o.GlobalAwareness = true
		o.Room.Now = clk.Now
	})
	runManager(t, m)
	testutil.Eventually(t, "the global room to list bob, in sync", func() bool {
		ps, _, err := m.SyncedGlobalPeers(testutil.Context(t)) // the warm-up counts from the sync
		return err == nil && len(ps) == 1
	})
	room := openRoom(t, m, nbPath, ydoc.KindNotebook)
	// 100 ms before bob's renewal is due.
	clk.Advance(room.Info().SyncedAt.Add(bridge.GlobalWarm - 100*time.Millisecond).Sub(clk.Now()))
	start := time.Now()
	p, err := m.AwaitPresence(testutil.Context(t), room)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("AwaitPresence took %v with 100 ms to go", d)
	}
	if b, ok := viewerOf(p, "bob"); !ok || b.Pending {
		t.Errorf("after the renewal was due bob is %+v (ok %v), want listed, not pending", b, ok)
	}

}

// Without global awareness a room joined moments ago is Blind, and no longer once everyone there
// has renewed.
func TestDocumentPresenceBlindWithoutGlobalAwareness(t *testing.T) {
	srv := newServer(t)
	clk := &clock{}
	m := newManager(t, srv, func(o *bridge.ManagerOptions) { o.Room.Now = clk.Now })
	runManager(t, m)
	room := openRoom(t, m, nbPath, ydoc.KindNotebook)
	p, err := m.DocumentPresence(testutil.Context(t), room)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Blind || p.Viewers != nil {
		t.Errorf("no global awareness, fresh room: Blind %v, viewers %+v", p.Blind, p.Viewers)
	}
	clk.Advance(bridge.GlobalWarm)
	if p, _ = m.DocumentPresence(testutil.Context(t), room); p.Blind {
		t.Errorf("Blind after %v in the room", bridge.GlobalWarm)
	}
}
