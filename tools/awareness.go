package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Awareness tools: who is here and where, the agent's own presence and cursor, what happened
// lately, and which documents are live. Positions are 1-based lines and columns in code points.

var docPathOpt = brief("document_path", str("A notebook or text file path; omitted: every document the sidecar has open."))

// optionalDoc is the document a presence tool narrows its answer to; omitted, the answer covers
// every document the caller may see.
var optionalDoc = docRef{Arg: "document_path", Ref: refAny, Optional: true, Open: true}

func (s *Server) registerAwarenessTools() {
	s.register(&operation{
		Name:     "get_online_users",
		Title:    "Who is online",
		Category: "presence",
		Default:  true,
		Scope:    auth.ScopeRead,
		Description: "Who is connected now: names, the document in front of them and where their cursors are; with " +
			"user_id, one collaborator's presence. Check before editing cells someone may be working in.",
		Input:    object(docPathOpt, brief("user_id", str("One collaborator's username: only their presence."))),
		Example:  map[string]any{"document_path": "analysis/report.ipynb"},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Doc: optionalDoc,
		Run: handle(s.onlineUsers, renderOnlineUsers),
	})
	s.register(&operation{
		Name:        "get_user_presence",
		Title:       "A collaborator's presence",
		Category:    "presence",
		Scope:       auth.ScopeRead,
		Description: "One collaborator's presence by username: where they are and what they are doing.",
		Input:       object(brief("user_id", str("The collaborator's username (from get_online_users).")), docPathOpt).required("user_id"),
		Example:     map[string]any{"user_id": "alice"},
		ReadOnly:    true, Idempotent: true,
		Doc: optionalDoc,
		Run: handle(s.userPresence, renderUserPresence),
	})
	s.register(&operation{
		Name:     "set_user_presence",
		Title:    "Set the agent's presence",
		Category: "presence",
		Scope:    auth.ScopeWrite,
		Description: "Set what collaborators see next to the agent's name: its status (online, away, busy, offline) with a " +
			"message, and what it is doing (activity_type and description; an empty description clears it).",
		Input: object(
			brief("status", str("The agent's status.").enum(bridge.PresenceOnline, bridge.PresenceAway, bridge.PresenceBusy, bridge.PresenceOffline)),
			brief("message", str("A short message shown with the status.")),
			field("activity_type", str("What the agent is doing, as a short kind, e.g. editing, running, reviewing, idle.")),
			brief("description", str("What the agent is doing, in a few words.")),
			docPathOpt,
			brief("metadata", freeObject("Anything other agents may use.")),
		),
		Example:    map[string]any{"status": "busy", "activity_type": "running", "description": "running the test cells", "document_path": "tests.ipynb"},
		Idempotent: true,
		Doc:        docRef{Arg: "document_path", Ref: refAny, Optional: true},
		Run:        handle(s.setUserPresence, s.renderPresence),
	})
	s.register(&operation{
		Name:        "broadcast_user_activity",
		Title:       "Announce what the agent is doing",
		Category:    "presence",
		Scope:       auth.ScopeWrite,
		Description: "Tell collaborators what the agent is doing (shown next to its name); an empty description clears it.",
		Input: object(
			field("activity_type", str("A short kind, e.g. editing, running, reviewing, idle.")),
			brief("description", str("What the agent is doing, in a few words.")),
			docPathOpt,
			brief("metadata", freeObject("Anything other agents may use.")),
		).required("activity_type", "description"),
		Example:    map[string]any{"activity_type": "running", "description": "running the test cells", "document_path": "tests.ipynb"},
		Idempotent: true,
		Doc:        docRef{Arg: "document_path", Ref: refAny, Optional: true},
		Run:        handle(s.setUserPresence, s.renderPresence),
	})
	s.register(&operation{
		Name:        "get_user_cursors",
		Title:       "Collaborators' cursors",
		Category:    "presence",
		Scope:       auth.ScopeRead,
		Description: "Each collaborator's cursor and selection in a document: cell, line, column.",
		Input:       object(brief("document_path", str("A notebook or text file path."))).required("document_path"),
		Example:     map[string]any{"document_path": "analysis/report.ipynb"},
		ReadOnly:    true, Idempotent: true,
		Doc: docRef{Arg: "document_path", Ref: refAny, Open: true},
		Run: handle(s.getUserCursors, renderCursors),
	})
	lineCol := func(desc string) *schema {
		return object(
			brief("line", integer("1-based line.").min(1)),
			brief("column", integer("1-based column in characters (code points); the line's length + 1 is its end.").min(1)),
		).required("line", "column").desc(desc)
	}
	s.register(&operation{
		Name:        "update_cursor_position",
		Title:       "Move the agent's cursor",
		Category:    "presence",
		Scope:       auth.ScopeWrite,
		Description: "Move the agent's cursor (and selection) to a cell and line, so collaborators see where it works.",
		Input: object(
			brief("document_path", str("A notebook or text file path.")),
			brief("cell_id", str("The cell (required for notebooks).")),
			field("position", lineCol("Where the cursor goes: 1-based line and column, in characters.")),
			brief("selection", object(
				brief("start", lineCol("Selection start.")),
				brief("end", lineCol("Selection end.")),
			).required("start", "end").desc("A selection (the cursor goes to its end).")),
		).required("document_path", "position"),
		Example:    map[string]any{"document_path": "analysis/report.ipynb", "cell_id": "a1b2", "position": map[string]any{"line": 3, "column": 1}},
		Idempotent: true,
		Doc:        docRef{Arg: "document_path", Ref: refAny, Open: true, Cells: []string{"cell_id"}},
		Run:        handle(s.updateCursorPosition, renderCursorMoved),
	})
	s.register(&operation{
		Name:        "get_user_activity",
		Title:       "Recent activity",
		Category:    "presence",
		Scope:       auth.ScopeRead,
		Description: "Recent changes, newest first: who inserted, edited, deleted, moved or ran which cells, and when.",
		Input: object(
			docPathOpt,
			brief("limit", integer("Maximum number of entries.").def(20).min(1).max(500)),
		),
		Example:  map[string]any{"document_path": "analysis/report.ipynb", "limit": 10},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Doc: optionalDoc,
		Run: handle(s.getUserActivity, renderActivity),
	})
	s.register(&operation{
		Name:        "get_active_sessions",
		Title:       "Live documents",
		Category:    "admin",
		Scope:       auth.ScopeRead,
		Description: "The documents the sidecar has open and those collaborators have open, with participants and save state.",
		Input:       object(docPathOpt),
		Example:     map[string]any{},
		ReadOnly:    true, Idempotent: true, Budgeted: true,
		Doc: docRef{Arg: "document_path", Ref: refAny, Optional: true},
		Run: handle(s.getActiveSessions, renderSessions),
	})
	s.register(&operation{
		Name:        "join_session",
		Title:       "Join a session",
		Category:    "admin",
		Scope:       auth.ScopeWrite,
		Description: "Join a document's room by session_id (from get_active_sessions) or path.",
		Input:       object(field("session_id", str("\"notebook:<path>\", \"editor:<path>\", or a path."))).required("session_id"),
		Example:     map[string]any{"session_id": "notebook:analysis/report.ipynb"},
		Idempotent:  true,
		Doc:         docRef{Arg: "session_id", Ref: refAny, Open: true},
		Run:         handle(s.joinSession, renderJoined),
	})
	s.register(&operation{
		Name:        "leave_session",
		Title:       "Leave a session",
		Category:    "admin",
		Scope:       auth.ScopeWrite,
		Description: "Leave a document's room (collaborators see the agent go); the document is unchanged.",
		Input:       object(field("session_id", str("\"notebook:<path>\", \"editor:<path>\", or a path."))).required("session_id"),
		Example:     map[string]any{"session_id": "notebook:analysis/report.ipynb"},
		Idempotent:  true,
		Doc:         docRef{Arg: "session_id", Ref: refAny},
		Run:         handle(s.leaveSession, renderLeft),
	})
}

// parseSession turns "notebook:<path>", "editor:<path>" or a path into path and kind.
func parseSession(id string) (string, ydoc.Kind) {
	switch {
	case strings.HasPrefix(id, "notebook:"):
		return strings.TrimPrefix(id, "notebook:"), ydoc.KindNotebook
	case strings.HasPrefix(id, "editor:"):
		return strings.TrimPrefix(id, "editor:"), ydoc.KindText
	case strings.HasSuffix(strings.ToLower(id), ".ipynb"):
		return id, ydoc.KindNotebook
	}
	return id, ydoc.KindText
}

// userView is a collaborator as the tools show them.
type userView struct {
	Username  string        `json:"username"`
	Name      string        `json:"name"`
	Initials  string        `json:"initials,omitempty"`
	Color     string        `json:"color,omitempty"`
	Agent     bool          `json:"agent,omitempty"`
	Status    string        `json:"status,omitempty"`
	Message   string        `json:"message,omitempty"`
	Activity  any           `json:"activity,omitempty"`
	Current   string        `json:"current,omitempty"`
	Documents []string      `json:"documents,omitempty"`
	Where     []cursorWhere `json:"where,omitempty"`
	Since     string        `json:"since,omitempty"`
	// CursorPending: they have the document open (global awareness) but their state in its room
	// (their cursor) has not reached the sidecar yet.
	CursorPending bool            `json:"cursor_pending,omitempty"`
	since         time.Time       // earliest
	clients       map[uint64]bool // awareness client ids (one per tab)
}

// cursorWhere is a cursor placed in a document.
type cursorWhere struct {
	Document  string `json:"document"`
	CellID    string `json:"cell_id,omitempty"`
	CellIndex *int   `json:"cell_index,omitempty"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	Selection *span2 `json:"selection,omitempty"`
}

type lineColPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

type span2 struct {
	Start lineColPos `json:"start"`
	End   lineColPos `json:"end"`
}

type presenceArgs struct {
	UserID       string         `json:"user_id"`
	Status       string         `json:"status"`
	Message      string         `json:"message"`
	ActivityType string         `json:"activity_type"`
	Description  string         `json:"description"`
	Metadata     map[string]any `json:"metadata"`
	Limit        int            `json:"limit"`
	CellID       string         `json:"cell_id"`
	Position     *lineColPos    `json:"position"`
	Selection    *span2         `json:"selection"`
}

// users are the collaborators the caller may see, by username.
type users struct {
	byName map[string]*userView
	note   string    // what the sidecar does not know yet about who is in the one document asked about
	one    *userView // the collaborator user_id asked for
}

// collectUsers gathers collaborators from the global room and from the document rooms the caller
// may see (the one it names, or all of them).
func (s *Server) collectUsers(ctx context.Context, c *call, _ presenceArgs) (users, error) {
	out := users{byName: map[string]*userView{}}
	get := func(p bridge.PeerView) *userView {
		if p.User == nil {
			return nil
		}
		u := out.byName[p.User.Username]
		if u == nil {
			u = &userView{Username: p.User.Username, Name: nonEmptyStr(p.User.DisplayName, p.User.Name, p.User.Username), Initials: p.User.Initials, Color: p.User.Color, clients: map[uint64]bool{}}
			out.byName[p.User.Username] = u
		}
		u.clients[p.ClientID] = true
		if u.since.IsZero() || p.Since.Before(u.since) {
			u.since = p.Since
		}
		if a, ok := p.State[agentField].(map[string]any); ok {
			u.Agent = true
			u.Status, _ = a["status"].(string)
			u.Message, _ = a["message"].(string)
			u.Activity = a["activity"]
		}
		return u
	}
	rooms := []*bridge.Room{c.Room}
	if !c.Named() {
		// Without the global room (disabled, or reconnecting) the document rooms still say who
		// is where.
		for _, p := range s.globalPeers(ctx) {
			u := get(p)
			if u == nil {
				continue
			}
			if cur, ok := p.State["current"].(string); ok && cur != "" {
				u.Current = cur
			}
			if docs, ok := p.State["documents"].([]any); ok {
				for _, d := range docs {
					if ds, ok := d.(string); ok && !contains(u.Documents, ds) {
						u.Documents = append(u.Documents, ds)
					}
				}
			}
		}
		rooms = s.liveRooms(ctx)
	}
	var presence *bridge.DocumentPresence
	for _, room := range rooms {
		var peers []bridge.PeerView
		if c.Named() {
			// Who has it open comes from global awareness too: known from the first call.
			p := s.presenceOf(ctx, room)
			peers, presence = p.Peers, &p
		} else {
			var err error
			if peers, err = s.peersOf(ctx, room); err != nil {
				continue
			}
		}
		where, err := s.placeCursors(ctx, room, peers)
		if err != nil {
			continue
		}
		for i, p := range peers {
			u := get(p)
			if u == nil {
				continue
			}
			if !contains(u.Documents, room.Path()) {
				u.Documents = append(u.Documents, room.Path())
			}
			u.Where = append(u.Where, where[i]...)
		}
	}
	if presence != nil {
		addViewers(out.byName, *presence, c.Room.Path(), bridge.CurrentString(c.Room.Path(), c.Room.Kind()))
		out.note = presenceNote(*presence, c.Room.Path(), time.Now())
	}
	for _, u := range out.byName {
		if !u.since.IsZero() {
			u.Since = u.since.UTC().Format(time.RFC3339)
		}
		sort.Strings(u.Documents)
	}
	return out, nil
}

func renderOnlineUsers(c *call, _ presenceArgs, us users) result {
	if us.one != nil {
		return result{Data: map[string]any{"user": us.one}}
	}
	list := sortedUsers(us.byName)
	out := map[string]any{"users": list, "count": len(list)}
	if c.Named() {
		out["document"] = c.args["document_path"]
		if us.note != "" {
			out["note"] = us.note
		}
	}
	return result{Data: out}
}

// onlineUsers answers get_online_users: everyone, or with user_id one collaborator (as
// get_user_presence).
func (s *Server) onlineUsers(ctx context.Context, c *call, a presenceArgs) (users, error) {
	us, err := s.collectUsers(ctx, c, a)
	if err != nil || a.UserID == "" {
		return us, err
	}
	us.one, err = us.find(a.UserID)
	return us, err
}

// userPresence answers get_user_presence: one collaborator by username.
func (s *Server) userPresence(ctx context.Context, c *call, a presenceArgs) (*userView, error) {
	us, err := s.collectUsers(ctx, c, a)
	if err != nil {
		return nil, err
	}
	return us.find(a.UserID)
}

func renderUserPresence(_ *call, _ presenceArgs, u *userView) result {
	return result{Data: map[string]any{"user": u}}
}

// find is one collaborator by username; their absence is an error listing who is online.
func (us users) find(username string) (*userView, error) {
	u, ok := us.byName[username]
	if !ok {
		names := make([]string, 0, len(us.byName))
		for n := range us.byName {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, &toolError{
			Message: fmt.Sprintf("%q is not online (no presence in the rooms the sidecar can see); online: %s", username, strings.Join(names, ", ")),
			Details: []detail{{Path: []any{"user_id"}, Message: "not online"}},
		}
	}
	if u.Status == "" {
		u.Status = bridge.PresenceOnline
	}
	return u, nil
}

// placeCursors turns peers' cursors (UTF-16 offsets) into cells, lines and columns.
func (s *Server) placeCursors(ctx context.Context, room *bridge.Room, peers []bridge.PeerView) ([][]cursorWhere, error) {
	out := make([][]cursorWhere, len(peers))
	err := room.View(ctx, func(d *ydoc.Doc) error {
		var texts map[string]string
		var index map[string]int
		if d.Kind() == ydoc.KindNotebook {
			nb, err := d.Notebook()
			if err != nil {
				return err
			}
			texts, index = map[string]string{}, map[string]int{}
			for i, c := range nb.Cells {
				texts[c.ID], index[c.ID] = c.Source, i
			}
		} else {
			t, err := d.Text()
			if err != nil {
				return err
			}
			texts = map[string]string{"": t}
		}
		for i, p := range peers {
			for _, c := range p.Cursors {
				text, ok := texts[c.CellID]
				if !ok {
					continue
				}
				hl, hc := utf16ToLineCol(text, c.Head)
				w := cursorWhere{Document: room.Path(), CellID: c.CellID, Line: hl, Column: hc}
				if c.CellID != "" {
					idx := index[c.CellID]
					w.CellIndex = &idx
				}
				if c.Anchor != c.Head {
					al, ac := utf16ToLineCol(text, c.Anchor)
					start, end := lineColPos{al, ac}, lineColPos{hl, hc}
					if c.Anchor > c.Head {
						start, end = end, start
					}
					w.Selection = &span2{Start: start, End: end}
				}
				out[i] = append(out[i], w)
			}
		}
		return nil
	})
	return out, err
}

func nonEmptyStr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func sortedUsers(users map[string]*userView) []*userView {
	out := make([]*userView, 0, len(users))
	for _, u := range users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out
}

// setUserPresence sets the agent's status and message, its activity, or both
// (set_user_presence); broadcast_user_activity sets only the activity.
func (s *Server) setUserPresence(ctx context.Context, c *call, a presenceArgs) (bridge.Presence, error) {
	if a.Status == "" && a.ActivityType == "" {
		return bridge.Presence{}, &toolError{
			Message: "invalid arguments: give status (and a message), or activity_type and description, or both",
			Details: []detail{{Path: []any{"status"}, Message: "required unless activity_type is given"}},
		}
	}
	return s.opts.Manager.UpdatePresence(ctx, func(p *bridge.Presence) {
		if a.Status != "" {
			p.Status, p.Message = a.Status, a.Message
		}
		if a.ActivityType == "" {
			return
		}
		if strings.TrimSpace(a.Description) == "" || a.ActivityType == "idle" {
			p.Activity = nil
			return
		}
		p.Activity = &bridge.Activity{Type: a.ActivityType, Description: a.Description, Document: c.Path, Metadata: a.Metadata, Since: time.Now().UTC()}
		if id, ok := auth.IdentityFrom(ctx); ok && id.Delegated {
			p.Activity.OnBehalfOf = strings.TrimPrefix(id.Name, "jupyter:") // the Jupyter user the agent acts for
		}
	})
}

// renderPresence is the agent's presence after set_user_presence or broadcast_user_activity:
// what the call set.
func (s *Server) renderPresence(c *call, a presenceArgs, p bridge.Presence) result {
	shown := bridge.DisplayName(s.opts.AgentName, p)
	out := map[string]any{"shown_as": shown}
	if a.Status != "" {
		out["status"], out["message"] = p.Status, p.Message
	}
	if a.ActivityType == "" {
		return result{Data: out}
	}
	out["activity"] = nil
	if act := p.Activity; act != nil {
		view := map[string]any{"type": act.Type, "description": act.Description, "since": act.Since}
		for k, v := range map[string]string{"document": act.Document, "on_behalf_of": act.OnBehalfOf} {
			if v != "" {
				view[k] = v
			}
		}
		if len(act.Metadata) > 0 {
			view["metadata"] = act.Metadata
		}
		out["activity"] = view
	}
	return result{Data: out}
}

// userCursors is one collaborator's cursors in a document.
type userCursors struct {
	Username string        `json:"username"`
	Name     string        `json:"name"`
	Color    string        `json:"color,omitempty"`
	Cursors  []cursorWhere `json:"cursors"`
	Moved    string        `json:"moved_at,omitempty"`
	Active   bool          `json:"active"` // moved within the last two minutes
}

// cursorsView is get_user_cursors' answer: the cursors placed, the collaborators whose cursor
// has not arrived yet, and what the sidecar does not know yet.
type cursorsView struct {
	list    []userCursors
	pending []pendingCursor
	note    string
}

func (s *Server) getUserCursors(ctx context.Context, c *call, _ presenceArgs) (cursorsView, error) {
	presence := s.presenceOf(ctx, c.Room)
	peers := presence.Peers
	where, err := s.placeCursors(ctx, c.Room, peers)
	if err != nil {
		return cursorsView{}, err
	}
	out := []userCursors{}
	for i, p := range peers {
		if p.User == nil || len(where[i]) == 0 {
			continue
		}
		uc := userCursors{Username: p.User.Username, Name: nonEmptyStr(p.User.DisplayName, p.User.Name, p.User.Username), Color: p.User.Color, Cursors: where[i],
			Active: time.Since(p.CursorsAt) <= busyWindow}
		if !p.CursorsAt.IsZero() {
			uc.Moved = p.CursorsAt.UTC().Format(time.RFC3339)
		}
		out = append(out, uc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return cursorsView{list: out, pending: pendingCursors(presence), note: presenceNote(presence, c.Room.Path(), time.Now())}, nil
}

func renderCursors(c *call, _ presenceArgs, v cursorsView) result {
	data := map[string]any{"document": c.Room.Path(), "cursors": v.list}
	if len(v.pending) > 0 {
		data["cursors_pending"] = v.pending // they have it open; their cursor has not arrived yet
	}
	if v.note != "" {
		data["note"] = v.note
	}
	return result{Data: data}
}

func (s *Server) updateCursorPosition(ctx context.Context, c *call, a presenceArgs) (struct{}, error) {
	room := c.Room
	if room.Kind() == ydoc.KindNotebook && a.CellID == "" {
		return struct{}{}, invalid([]any{"cell_id"}, "is required in a notebook")
	}
	if room.Kind() == ydoc.KindText && a.CellID != "" {
		return struct{}{}, invalid([]any{"cell_id"}, "a text file has no cells")
	}
	var text string
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		if d.Kind() == ydoc.KindText {
			var err error
			text, err = d.Text()
			return err
		}
		nb, err := d.Notebook()
		if err != nil {
			return err
		}
		for _, c := range nb.Cells {
			if c.ID == a.CellID {
				text = c.Source
				return nil
			}
		}
		return invalid([]any{"cell_id"}, "no cell with id %q", a.CellID)
	}); err != nil {
		return struct{}{}, err
	}
	head, err := lineColToUTF16(text, *a.Position, []any{"position"})
	if err != nil {
		return struct{}{}, err
	}
	anchor := head
	if a.Selection != nil {
		if anchor, err = lineColToUTF16(text, a.Selection.Start, []any{"selection", "start"}); err != nil {
			return struct{}{}, err
		}
		if head, err = lineColToUTF16(text, a.Selection.End, []any{"selection", "end"}); err != nil {
			return struct{}{}, err
		}
	}
	return struct{}{}, room.SetCursors(ctx, []bridge.CursorSpec{{CellID: a.CellID, Anchor: anchor, Head: head}})
}

func renderCursorMoved(c *call, a presenceArgs, _ struct{}) result {
	out := map[string]any{"document": c.Room.Path(), "position": *a.Position}
	if a.CellID != "" {
		out["cell_id"] = a.CellID
	}
	if a.Selection != nil {
		out["selection"] = a.Selection
	}
	return result{Data: out}
}

// lineColToUTF16 converts a 1-based line and column (code points) to a UTF-16 offset.
func lineColToUTF16(text string, p lineColPos, where []any) (int, error) {
	lines := strings.SplitAfter(text, "\n")
	if p.Line > len(lines) {
		return 0, invalid(append(where, "line"), "is %d but the text has %d lines", p.Line, len(lines))
	}
	units := 0
	for _, l := range lines[:p.Line-1] {
		units += utf16Units(l)
	}
	line := strings.TrimSuffix(strings.TrimSuffix(lines[p.Line-1], "\n"), "\r") // CRLF: \r is no column
	n := utf8.RuneCountInString(line)
	if p.Column > n+1 {
		return 0, invalid(append(where, "column"), "is %d but line %d has %d characters (the end is column %d)", p.Column, p.Line, n, n+1)
	}
	return units + utf16Units(string([]rune(line)[:p.Column-1])), nil
}

// utf16ToLineCol converts a UTF-16 offset to a 1-based line and column (code points).
func utf16ToLineCol(text string, offset int) (int, int) {
	line, col, units := 1, 1, 0
	for i, r := range text {
		if units >= offset {
			break
		}
		switch {
		case r == '\n':
			line, col = line+1, 1
		case r == '\r' && strings.HasPrefix(text[i+1:], "\n"): // CRLF: \r is no column
		default:
			col++
		}
		if r >= 0x10000 {
			units += 2
		} else {
			units++
		}
	}
	return line, col
}

func utf16Units(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
