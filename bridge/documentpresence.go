package bridge

import (
	"context"
	"sort"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Who has a document open, from the first call after joining it.
//
// A document room's awareness fills slowly: nobody answers a newcomer (y-protocols peers do not,
// and jupyter-collaboration's server never passes on the states it holds), so a collaborator who
// was there first appears at their next renewal, up to 18 s later (measured: 12.8 s in one run).
// JupyterLab's global awareness room knows sooner: every tab keeps a state there naming the
// documents it has open ("documents", plain paths) and the one in front ("current",
// "notebook:<path>" or "editor:<path>"), and the sidecar has been in that room since it started.
// DocumentPresence joins the two: who has the document open (global), where their cursors are
// (the document room), and whose cursor has not arrived yet.

// GlobalWarm is how long a room must have been connected for its awareness to list everyone:
// y-protocols renews a state 15 s after its last change and checks every 3 s, so every peer has
// renewed within 18 s; one more second for the network.
const GlobalWarm = ydoc.AwarenessRenew + 4*time.Second

// Viewer is a collaborator who has a document open, as their JupyterLab tabs say in global
// awareness.
type Viewer struct {
	User ydoc.AwarenessUser
	// Tabs is how many of their tabs have the document open; Current, whether it is in front of
	// them in one of them.
	Tabs    int
	Current bool
	// InRoom is how many of their states the document room's awareness holds (a tab's state
	// there carries its cursor).
	InRoom int
	// Pending: a tab of theirs is in the document but its room state has not reached the sidecar
	// yet (it will at their next renewal, before DocumentPresence.PendingUntil, or as soon as
	// they move their cursor).
	Pending bool
}

// DocumentPresence is who is in a document and how complete the sidecar's view is.
type DocumentPresence struct {
	// Peers are the states in the document room's awareness, cursors resolved (Room.Peers).
	Peers []PeerView
	// Viewers are the collaborators whose JupyterLab tabs have the document open (global
	// awareness), by username; nil when global awareness is off or not joined.
	Viewers []Viewer
	// PendingUntil is when every pending viewer's room state is due at the latest.
	PendingUntil time.Time
	// Blind is true when the sidecar cannot tell who was in the document before it joined: the
	// room joined less than GlobalWarm ago and global awareness is off or itself too recent.
	// Collaborators who were already there appear by BlindUntil.
	Blind      bool
	BlindUntil time.Time
}

// PendingViewers returns the viewers whose cursor the sidecar does not know yet.
func (p DocumentPresence) PendingViewers() []Viewer {
	var out []Viewer
	for _, v := range p.Viewers {
		if v.Pending {
			out = append(out, v)
		}
	}
	return out
}

// DocumentPresence says who is in a room's document: its awareness and, when the sidecar is in
// JupyterLab's global awareness room, whoever has the document open in a tab.
func (m *Manager) DocumentPresence(ctx context.Context, room *Room) (DocumentPresence, error) {
	peers, err := room.Peers(ctx)
	if err != nil {
		return DocumentPresence{}, err
	}
	now := m.presenceNow()
	out := DocumentPresence{Peers: peers}
	info := room.Info()
	roomFresh := !info.SyncedAt.IsZero() && now.Sub(info.SyncedAt) < GlobalWarm
	global, warm := m.globalView(ctx, now)
	if !warm {
		if roomFresh {
			out.Blind, out.BlindUntil = true, info.SyncedAt.Add(GlobalWarm)
		}
		if global == nil {
			return out, nil
		}
	}
	inRoom := map[string]int{}
	for _, p := range peers {
		if p.User != nil {
			inRoom[p.User.Username]++
		}
	}
	path, current := room.Path(), CurrentString(room.Path(), room.Kind())
	byUser := map[string]*Viewer{}
	for _, g := range global {
		if g.User == nil {
			continue
		}
		opened, front := documentsOf(g.State, path, current)
		if !opened && !front {
			continue
		}
		v := byUser[g.User.Username]
		if v == nil {
			v = &Viewer{User: *g.User, InRoom: inRoom[g.User.Username]}
			byUser[g.User.Username] = v
		}
		v.Tabs++
		v.Current = v.Current || front
	}
	for _, v := range byUser {
		// After GlobalWarm in the room every tab in it has renewed: a tab that lists the document
		// without a state in the room is not in it (its provider failed, or it is reconnecting).
		v.Pending = roomFresh && v.InRoom < v.Tabs
		if v.Pending {
			out.PendingUntil = info.SyncedAt.Add(GlobalWarm)
		}
		out.Viewers = append(out.Viewers, *v)
	}
	sort.Slice(out.Viewers, func(i, j int) bool { return out.Viewers[i].User.Username < out.Viewers[j].User.Username })
	return out, nil
}

// documentsOf reports whether a global awareness state lists the document among its open ones
// and whether it is the one in front.
func documentsOf(state map[string]any, path, current string) (opened, front bool) {
	if c, ok := state["current"].(string); ok && c == current {
		front = true
	}
	if docs, ok := state["documents"].([]any); ok {
		for _, d := range docs {
			if s, ok := d.(string); ok {
				if clean, err := CleanPath(s); err == nil && clean == path {
					opened = true
				}
			}
		}
	}
	return opened, front
}

// globalView returns the global awareness room's peers and whether its view is complete (the
// room has been in sync for GlobalWarm); nil when the room is not joined.
func (m *Manager) globalView(ctx context.Context, now time.Time) ([]PeerView, bool) {
	m.mu.Lock()
	g := m.global
	m.mu.Unlock()
	if g == nil {
		return nil, false
	}
	info := g.Info()
	if info.Status != StatusSynced {
		return nil, false
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	peers, err := g.Peers(wctx)
	if err != nil {
		return nil, false
	}
	return peers, now.Sub(info.SyncedAt) >= GlobalWarm
}

// AwaitPresence waits until the room's awareness holds a state for every viewer who has the
// document in front of them (their cursor is then known), or until their renewals are due, or
// ctx ends; it returns the presence as it then is. It does not wait when the sidecar is Blind:
// nobody is named then, so there is nobody to wait for.
func (m *Manager) AwaitPresence(ctx context.Context, room *Room) (DocumentPresence, error) {
	sub := room.Subscribe(64)
	defer sub.Close()
	for {
		p, err := m.DocumentPresence(ctx, room)
		if err != nil {
			return p, err
		}
		waiting := false
		for _, v := range p.PendingViewers() {
			waiting = waiting || v.Current
		}
		if !waiting {
			return p, nil
		}
		t := time.NewTimer(max(p.PendingUntil.Sub(m.presenceNow()), 0))
		select {
		case <-sub.C:
		case <-t.C:
			t.Stop()
			return m.DocumentPresence(ctx, room)
		case <-room.Done():
			t.Stop()
			return p, room.stoppedErr()
		case <-ctx.Done():
			t.Stop()
			return p, ctx.Err()
		}
		t.Stop()
	}
}

func (m *Manager) presenceNow() time.Time {
	if m.opts.Room.Now != nil {
		return m.opts.Room.Now()
	}
	return time.Now()
}
