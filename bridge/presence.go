package bridge

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Presence: how the agent appears in each room's awareness, and what it sees of the others.
//
// JupyterLab shows a collaborator's user.display_name (collaborators panel, cursor labels) and
// draws cursors from "cursors" (relative positions in a cell's source). It shows nothing else,
// so the agent's status and current activity also go into its display name ("AI Agent (busy) ·
// running the tests"); the structured form is under "jupyter_collab_mcp" for other agents.

// Presence statuses.
const (
	PresenceOnline  = "online"
	PresenceAway    = "away"
	PresenceBusy    = "busy"
	PresenceOffline = "offline" // no awareness state at all: invisible, rooms stay connected
)

// Presence is the agent's status and current activity.
type Presence struct {
	Status   string
	Message  string
	Activity *Activity
}

// Activity is what the agent says it is doing. Its JSON form is the "activity" of the agent's
// awareness state (other agents read it there).
type Activity struct {
	Type        string         `json:"type"`
	Description string         `json:"description"`
	Document    string         `json:"document,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Since       time.Time      `json:"since"`
	// OnBehalfOf is the Jupyter user whose token the agent called with (--auth jupyter).
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
}

// CursorSpec places the agent's cursor: UTF-16 offsets in a cell's source (CellID "" for a
// text file). Anchor == Head is a caret; otherwise a selection.
type CursorSpec struct {
	CellID string
	Anchor int
	Head   int
}

// PeerCursor is a collaborator's cursor resolved against the replica.
type PeerCursor struct {
	CellID string // "" for a text file
	Anchor int    // UTF-16 offsets in that text
	Head   int
}

// PeerView is a collaborator in a room's awareness.
type PeerView struct {
	ClientID uint64
	User     *ydoc.AwarenessUser
	Since    time.Time
	Updated  time.Time
	Cursors  []PeerCursor
	// CursorsAt is when the cursors last moved. JupyterLab leaves them in place when the user
	// looks elsewhere, so an old cursor says where someone was, not that they are typing.
	CursorsAt time.Time
	State     map[string]any // the whole awareness state (current, documents, agent fields, ...)
}

// agentField is where the agent publishes its structured presence.
const agentField = "jupyter_collab_mcp"

// DisplayName is the name collaborators see for an agent with this presence.
func DisplayName(base string, p Presence) string {
	name := base
	if p.Status == PresenceAway || p.Status == PresenceBusy {
		name += " (" + p.Status + ")"
	}
	if p.Activity != nil && p.Activity.Description != "" {
		d := p.Activity.Description
		if utf8.RuneCountInString(d) > 60 {
			d = string([]rune(d)[:59]) + "…"
		}
		name += " · " + d
	} else if p.Message != "" && p.Status != PresenceOnline {
		m := p.Message
		if utf8.RuneCountInString(m) > 60 {
			m = string([]rune(m)[:59]) + "…"
		}
		name += " · " + m
	}
	return name
}

// awarenessState is the agent's state in this room.
func (l *roomLoop) awarenessState() map[string]any {
	user := l.r.opts.User
	user.DisplayName = DisplayName(nonEmpty(user.DisplayName, user.Name), l.presence)
	st := map[string]any{"user": user}
	if l.r.opts.Transient == "" {
		st["autosave"] = !l.r.opts.NoAutosave
	}
	if len(l.cursors) > 0 {
		st["cursors"] = l.cursors
	}
	agent := map[string]any{"agent": true, "status": nonEmpty(l.presence.Status, PresenceOnline)}
	if l.presence.Message != "" {
		agent["message"] = l.presence.Message
	}
	if l.presence.Activity != nil {
		agent["activity"] = l.presence.Activity
	}
	st[agentField] = agent
	for k, v := range l.fields {
		st[k] = v
	}
	return st
}

// announce publishes the local state (or its absence, when offline).
func (l *roomLoop) announce() {
	now := l.r.opts.Now()
	if l.presence.Status == PresenceOffline {
		if l.aw.Local() != nil {
			l.send(ydoc.EncodeAwarenessFrame(l.aw.ClearLocal(now)))
		}
		return
	}
	update, err := l.aw.SetLocal(l.awarenessState(), now)
	if err != nil {
		l.log.Warn().Err(err).Msg("awareness state does not encode")
		return
	}
	l.send(ydoc.EncodeAwarenessFrame(update))
}

// jsonCursor is one entry of JupyterLab's awareness "cursors".
type jsonCursor struct {
	Anchor  ydoc.RelPos `json:"anchor"`
	Head    ydoc.RelPos `json:"head"`
	Primary bool        `json:"primary"`
	Empty   bool        `json:"empty"`
}

// SetPresence changes the agent's status and activity in this room.
func (r *Room) SetPresence(ctx context.Context, p Presence) error {
	return r.do(ctx, func(l *roomLoop) {
		l.presence = p
		l.announce()
	})
}

// SetFields sets extra top-level fields of the agent's awareness state (the global room's
// "current" and "documents").
func (r *Room) SetFields(ctx context.Context, fields map[string]any) error {
	return r.do(ctx, func(l *roomLoop) {
		l.fields = fields
		l.announce()
	})
}

// SetCursors moves the agent's cursors (an empty list removes them). Positions become relative
// positions, so they follow concurrent edits.
func (r *Room) SetCursors(ctx context.Context, cursors []CursorSpec) error {
	return r.whenReady(ctx, false, func(l *roomLoop) error {
		d := l.sess.Doc()
		var out []jsonCursor
		for i, c := range cursors {
			a, err := d.RelativePosition(c.CellID, c.Anchor)
			if err != nil {
				return err
			}
			h, err := d.RelativePosition(c.CellID, c.Head)
			if err != nil {
				return err
			}
			out = append(out, jsonCursor{Anchor: a, Head: h, Primary: i == 0, Empty: c.Anchor == c.Head})
		}
		l.cursors = out
		l.announce()
		return nil
	})
}

// Peers returns the collaborators in the room's awareness (not the agent itself), their cursors
// resolved against the replica.
//
// It does not wait for the replica to sync (awareness needs none); cursors are only resolved
// once it has.
func (r *Room) Peers(ctx context.Context) ([]PeerView, error) {
	return call(ctx, r, func(l *roomLoop) ([]PeerView, error) { return l.peerViews(), nil })
}

func (l *roomLoop) peerViews() []PeerView {
	var out []PeerView
	doc := l.sess.Doc()
	for _, p := range l.aw.Peers() {
		var st map[string]any
		if json.Unmarshal(p.State, &st) != nil || len(st) == 0 {
			continue // the server's own empty entry
		}
		v := PeerView{ClientID: p.ClientID, User: p.User, Since: p.Since, Updated: p.Updated, CursorsAt: p.CursorsAt, State: st}
		var cs struct {
			Cursors []jsonCursor `json:"cursors"`
		}
		if l.ready && json.Unmarshal(p.State, &cs) == nil {
			for _, c := range cs.Cursors {
				cellA, a, okA := doc.ResolvePosition(c.Anchor)
				cellH, h, okH := doc.ResolvePosition(c.Head)
				if !okA && !okH {
					continue
				}
				if !okA {
					cellA, a = cellH, h
				}
				if !okH || cellH != cellA {
					h = a
				}
				v.Cursors = append(v.Cursors, PeerCursor{CellID: cellA, Anchor: a, Head: h})
			}
		}
		out = append(out, v)
	}
	return out
}

// Activity kinds of history entries, for "what did people do here lately".
const (
	ActInserted = "inserted"
	ActDeleted  = "deleted"
	ActEdited   = "edited"
	ActExecuted = "executed"
	ActMoved    = "moved"
)

// ActivityEntry is one change, described by what it did to which cells.
type ActivityEntry struct {
	Path    string
	At      time.Time
	Authors []string // who wrote the new content, as their awareness names them
	Local   bool     // the sidecar's own change
	Kind    string   // ActInserted, ActDeleted, ActEdited, ActExecuted or ActMoved
	CellIDs []string // the cells (none for a text file)
}

// Activity describes the room's recent changes, newest first, merging consecutive changes of
// the same kind by the same people to the same cells (a human typing is one entry, not one per
// keystroke).
func (r *Room) Activity(ctx context.Context, limit int) ([]ActivityEntry, error) {
	var out []ActivityEntry
	err := r.Read(ctx, func(_ *ydoc.Doc, h History) error {
		entries := h.Recent(maxHistory)
		for i := len(entries) - 1; i >= 0 && len(out) < limit; i-- {
			if entries[i].Initial {
				continue // loading the document is nobody's activity
			}
			for _, a := range describeChange(r.opts.Path, entries[i]) {
				if n := len(out); n > 0 && sameActivity(out[n-1], a) {
					continue
				}
				out = append(out, a)
			}
		}
		return nil
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

func describeChange(path string, e HistoryEntry) []ActivityEntry {
	c := e.Change
	base := ActivityEntry{Path: path, At: e.At, Authors: e.Authors, Local: c.Local}
	var out []ActivityEntry
	add := func(kind string, cells []string) {
		a := base
		a.Kind, a.CellIDs = kind, cells
		out = append(out, a)
	}
	switch {
	case len(c.Inserted) > 0 && len(c.Deleted) > 0 && sameSet(c.Inserted, c.Deleted):
		add(ActMoved, c.Inserted)
	default:
		if len(c.Inserted) > 0 {
			add(ActInserted, c.Inserted)
		}
		if len(c.Deleted) > 0 {
			add(ActDeleted, c.Deleted)
		}
	}
	var edited, executed, moved []string
	for _, cc := range c.Cells {
		if c.Moved && slices.Contains(cc.Fields, "*") {
			// a move re-creates the cell's map (as JupyterLab's does): same id, new map
			moved = append(moved, cc.ID)
			continue
		}
		run := false
		for _, f := range cc.Fields {
			if f == "outputs" || f == "execution_count" || f == "execution_state" {
				run = true
			}
		}
		if run {
			executed = append(executed, cc.ID)
		} else {
			edited = append(edited, cc.ID)
		}
	}
	if len(moved) > 0 {
		add(ActMoved, moved)
	}
	if len(edited) > 0 {
		add(ActEdited, edited)
	}
	if len(executed) > 0 {
		add(ActExecuted, executed)
	}
	if c.Text {
		add(ActEdited, nil)
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !strings.Contains("\x00"+strings.Join(b, "\x00")+"\x00", "\x00"+x+"\x00") {
			return false
		}
	}
	return true
}

func sameActivity(a, b ActivityEntry) bool {
	return a.Kind == b.Kind && a.Local == b.Local && strings.Join(a.Authors, ",") == strings.Join(b.Authors, ",") &&
		strings.Join(a.CellIDs, ",") == strings.Join(b.CellIDs, ",") && a.Path == b.Path
}

// CurrentString is how JupyterLab names a document in the global awareness "current" field.
func CurrentString(path string, kind ydoc.Kind) string {
	if kind == ydoc.KindNotebook {
		return "notebook:" + path
	}
	return "editor:" + path
}
