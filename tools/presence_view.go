package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
)

// Who is in a document from the first call after joining it (bridge.DocumentPresence): the
// collaborators whose JupyterLab tabs have it open, from JupyterLab's global awareness, even
// before their state in the document's room (their cursor) has reached the sidecar. The presence
// tools list them at once; the edit tools count someone with the document in front of them
// whose cursor is not known yet as possibly typing anywhere in it.

// presenceOf is the document's presence (the caller may use the document: the door let the call
// in), documents the caller may not see taken out of the peers' states; empty on error (the
// room stopped).
func (s *Server) presenceOf(ctx context.Context, room *bridge.Room) bridge.DocumentPresence {
	p, err := s.opts.Manager.DocumentPresence(ctx, room)
	if err != nil {
		s.log.Debug().Err(err).Str(logfield.Path, room.Path()).Msg("document presence unavailable")
	}
	for i := range p.Peers {
		hideDocuments(ctx, p.Peers[i].State)
	}
	return p
}

// viewerName is how a viewer is named in notes and warnings.
func viewerName(v bridge.Viewer) string {
	return nonEmptyStr(v.User.DisplayName, v.User.Name, v.User.Username)
}

// presenceNote says what the sidecar does not know yet about who is in the document: whose
// cursor has not arrived, or, when it cannot see who was there before it, that; "" when it
// knows everyone.
func presenceNote(p bridge.DocumentPresence, path string, now time.Time) string {
	var who []string
	for _, v := range p.PendingViewers() {
		where := "open"
		if v.Current {
			where = "in front of them"
		}
		who = append(who, fmt.Sprintf("%s has %s %s", viewerName(v), path, where))
	}
	if len(who) > 0 {
		return fmt.Sprintf("%s; where their cursor is reaches the sidecar within %.0f s (their next presence renewal) or as soon as they move it",
			strings.Join(who, "; "), max(p.PendingUntil.Sub(now).Seconds(), 1))
	}
	if p.Blind {
		return fmt.Sprintf("collaborators already in %s appear at their next presence renewal, within %.0f s (the sidecar just joined, without JupyterLab's global awareness: off, or started under %v ago)",
			path, max(p.BlindUntil.Sub(now).Seconds(), 1), bridge.GlobalWarm)
	}
	return ""
}

// addViewers lists, among users, the collaborators who have the document open in a tab but
// whose state in its room has not arrived: with the document in current when it is in front of
// them, and cursor_pending.
func addViewers(users map[string]*userView, p bridge.DocumentPresence, path, current string) {
	for _, v := range p.Viewers {
		u := users[v.User.Username]
		if u == nil {
			if v.InRoom > 0 {
				continue // listed from the room already (its state may belong to another of their tabs)
			}
			u = &userView{Username: v.User.Username, Name: viewerName(v), Initials: v.User.Initials, Color: v.User.Color, clients: map[uint64]bool{}}
			users[v.User.Username] = u
		}
		if v.Current && u.Current == "" {
			u.Current = current
		}
		if !contains(u.Documents, path) {
			u.Documents = append(u.Documents, path)
		}
		u.CursorPending = u.CursorPending || v.Pending
	}
}

// pendingCursors are the collaborators get_user_cursors cannot place yet.
type pendingCursor struct {
	Username string `json:"username"`
	Name     string `json:"name"`
	Color    string `json:"color,omitempty"`
	// InFront: the document is the one in front of them (JupyterLab's current).
	InFront bool `json:"in_front"`
}

func pendingCursors(p bridge.DocumentPresence) []pendingCursor {
	out := []pendingCursor{}
	for _, v := range p.PendingViewers() {
		out = append(out, pendingCursor{Username: v.User.Username, Name: viewerName(v), Color: v.User.Color, InFront: v.Current})
	}
	return out
}

// busyIn maps each cell a collaborator's cursor recently moved in to their names.
func busyIn(peers []bridge.PeerView, now time.Time) map[string][]string {
	busy := map[string][]string{}
	for _, p := range peers {
		if p.User == nil || now.Sub(p.CursorsAt) > busyWindow {
			continue
		}
		name := nonEmptyStr(p.User.DisplayName, p.User.Name, p.User.Username)
		for _, c := range p.Cursors {
			if c.CellID != "" && !contains(busy[c.CellID], name) {
				busy[c.CellID] = append(busy[c.CellID], name)
			}
		}
	}
	return busy
}

// unseenTypists warns about collaborators who have the document in front of them and whose
// cursor the sidecar has not received: they may be typing in any cell.
func unseenTypists(p bridge.DocumentPresence, path string, now time.Time) []string {
	var out []string
	for _, v := range p.PendingViewers() {
		if v.Current {
			out = append(out, fmt.Sprintf("%s has %s in front of them and where they are typing is not known yet (their cursor reaches the sidecar within %.0f s): they may be in a cell this edit changes",
				viewerName(v), path, max(p.PendingUntil.Sub(now).Seconds(), 1)))
		}
	}
	return out
}
