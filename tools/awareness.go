package tools

import (
	"context"
	"errors"
	"fmt"
	"path"
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

var docPathOpt = field("document_path", str("A notebook or text file path; omitted: every document the sidecar has open."))

func (s *Server) registerAwarenessTools() {
	s.register(&operation{
		Name:     "get_online_users",
		Title:    "Who is online",
		Category: "collaboration",
		Description: "Collaborators connected to the Jupyter server right now: name, colour, the document in front of " +
			"them, the documents they have open, and (in documents the sidecar has open) the cell and line their " +
			"cursor is in. Agents also show their status and activity.",
		Input:    object(docPathOpt),
		Example:  map[string]any{"document_path": "analysis/report.ipynb"},
		ReadOnly: true, Idempotent: true,
		Run: s.getOnlineUsers,
	})
	s.register(&operation{
		Name:        "get_user_presence",
		Title:       "A collaborator's presence",
		Category:    "collaboration",
		Description: "Where one collaborator (by username) is and what they are doing; an error if they are not online.",
		Input:       object(field("user_id", str("The collaborator's username (from get_online_users).")), docPathOpt).required("user_id"),
		Example:     map[string]any{"user_id": "alice"},
		ReadOnly:    true, Idempotent: true,
		Run: s.getUserPresence,
	})
	s.register(&operation{
		Name:     "set_user_presence",
		Title:    "Set the agent's presence",
		Category: "collaboration",
		Description: "Set how the agent appears to collaborators: online, away, busy (shown next to its name in " +
			"JupyterLab, with the message), or offline (invisible; the documents stay connected).",
		Input: object(
			field("status", str("The agent's status.").enum(bridge.PresenceOnline, bridge.PresenceAway, bridge.PresenceBusy, bridge.PresenceOffline)),
			field("message", str("A short message shown with the status.")),
		).required("status"),
		Example:    map[string]any{"status": "busy", "message": "refactoring the loaders"},
		Idempotent: true,
		Run:        s.setUserPresence,
	})
	s.register(&operation{
		Name:        "get_user_cursors",
		Title:       "Collaborators' cursors",
		Category:    "collaboration",
		Description: "Each collaborator's cursor and selection in a document: cell id and index (notebooks), 1-based line and column.",
		Input:       object(field("document_path", str("A notebook or text file path."))).required("document_path"),
		Example:     map[string]any{"document_path": "analysis/report.ipynb"},
		ReadOnly:    true, Idempotent: true,
		Run: s.getUserCursors,
	})
	lineCol := func(desc string) *schema {
		return object(
			field("line", integer("1-based line.").min(1)),
			field("column", integer("1-based column in characters (code points); the line's length + 1 is its end.").min(1)),
		).required("line", "column").desc(desc)
	}
	s.register(&operation{
		Name:     "update_cursor_position",
		Title:    "Move the agent's cursor",
		Category: "collaboration",
		Description: "Move the agent's cursor (collaborators see it in their editor, in the agent's colour) to a position " +
			"in a cell (notebooks: cell_id) or in a text file, optionally with a selection.",
		Input: object(
			field("document_path", str("A notebook or text file path.")),
			field("cell_id", str("The cell (required for notebooks).")),
			field("position", lineCol("Where the cursor goes.")),
			field("selection", object(
				field("start", lineCol("Selection start.")),
				field("end", lineCol("Selection end.")),
			).required("start", "end").desc("A selection (the cursor goes to its end).")),
		).required("document_path", "position"),
		Example:    map[string]any{"document_path": "analysis/report.ipynb", "cell_id": "a1b2", "position": map[string]any{"line": 3, "column": 1}},
		Idempotent: true,
		Run:        s.updateCursorPosition,
	})
	s.register(&operation{
		Name:     "get_user_activity",
		Title:    "Recent activity",
		Category: "collaboration",
		Description: "Recent changes by collaborator, newest first: which cells were inserted, edited, deleted, moved or " +
			"executed, by whom (when their presence says) and when, in one document or every open one.",
		Input: object(
			docPathOpt,
			field("limit", integer("Maximum number of entries.").def(20).min(1).max(500)),
		),
		Example:  map[string]any{"document_path": "analysis/report.ipynb", "limit": 10},
		ReadOnly: true, Idempotent: true,
		Run: s.getUserActivity,
	})
	s.register(&operation{
		Name:     "broadcast_user_activity",
		Title:    "Announce what the agent is doing",
		Category: "collaboration",
		Description: "Tell collaborators what the agent is doing (e.g. \"running the test cells\"): shown next to its " +
			"name in JupyterLab until replaced; an empty description clears it.",
		Input: object(
			field("activity_type", str("A short kind, e.g. editing, running, reviewing, idle.")),
			field("description", str("What the agent is doing, in a few words.")),
			docPathOpt,
			field("metadata", freeObject("Anything other agents may use.")),
		).required("activity_type", "description"),
		Example:    map[string]any{"activity_type": "running", "description": "running the test cells", "document_path": "tests.ipynb"},
		Idempotent: true,
		Run:        s.broadcastUserActivity,
	})
	s.register(&operation{
		Name:     "get_active_sessions",
		Title:    "Live documents",
		Category: "collaboration",
		Description: "Collaboration sessions: the documents the sidecar has open (with their participants) and the ones " +
			"collaborators have open, which join_session can join. session_id is \"notebook:<path>\" or \"editor:<path>\".",
		Input:    object(docPathOpt),
		Example:  map[string]any{},
		ReadOnly: true, Idempotent: true,
		Run: s.getActiveSessions,
	})
	s.register(&operation{
		Name:        "join_session",
		Title:       "Join a session",
		Category:    "collaboration",
		Description: "Join a document's collaboration room (a session_id from get_active_sessions, or a path).",
		Input:       object(field("session_id", str("\"notebook:<path>\", \"editor:<path>\", or a path."))).required("session_id"),
		Example:     map[string]any{"session_id": "notebook:analysis/report.ipynb"},
		Idempotent:  true,
		Run:         s.joinSession,
	})
	s.register(&operation{
		Name:        "leave_session",
		Title:       "Leave a session",
		Category:    "collaboration",
		Description: "Leave a document's collaboration room (collaborators see the agent go); the document is unchanged.",
		Input:       object(field("session_id", str("\"notebook:<path>\", \"editor:<path>\", or a path."))).required("session_id"),
		Example:     map[string]any{"session_id": "notebook:analysis/report.ipynb"},
		Idempotent:  true,
		Run:         s.leaveSession,
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

// openDocument opens a notebook or text file room by path (the kind from the extension).
func (s *Server) openDocument(ctx context.Context, p string) (*bridge.Room, error) {
	if p == "" {
		return nil, invalid([]any{"document_path"}, "is required")
	}
	_, kind := parseSession(p)
	room, err := s.opts.Manager.Open(ctx, p, kind)
	if err != nil && errors.Is(err, bridge.ErrBadPath) {
		return nil, invalid([]any{"document_path"}, "%v", err)
	}
	return room, err
}

// userView is a collaborator as the tools show them.
type userView struct {
	Username  string          `json:"username"`
	Name      string          `json:"name"`
	Initials  string          `json:"initials,omitempty"`
	Color     string          `json:"color,omitempty"`
	Agent     bool            `json:"agent,omitempty"`
	Status    string          `json:"status,omitempty"`
	Message   string          `json:"message,omitempty"`
	Activity  any             `json:"activity,omitempty"`
	Current   string          `json:"current,omitempty"`
	Documents []string        `json:"documents,omitempty"`
	Where     []cursorWhere   `json:"where,omitempty"`
	Since     string          `json:"since,omitempty"`
	since     time.Time       // earliest
	clients   map[uint64]bool // awareness client ids (one per tab)
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

// collectUsers gathers collaborators from the global room and from document rooms.
func (s *Server) collectUsers(ctx context.Context, docPath string) (map[string]*userView, error) {
	users := map[string]*userView{}
	get := func(p bridge.PeerView) *userView {
		if p.User == nil {
			return nil
		}
		u := users[p.User.Username]
		if u == nil {
			u = &userView{Username: p.User.Username, Name: nonEmptyStr(p.User.DisplayName, p.User.Name, p.User.Username), Initials: p.User.Initials, Color: p.User.Color, clients: map[uint64]bool{}}
			users[p.User.Username] = u
		}
		u.clients[p.ClientID] = true
		if u.since.IsZero() || p.Since.Before(u.since) {
			u.since = p.Since
		}
		if a, ok := p.State["jupyter_collab_mcp"].(map[string]any); ok {
			u.Agent = true
			u.Status, _ = a["status"].(string)
			u.Message, _ = a["message"].(string)
			u.Activity = a["activity"]
		}
		return u
	}
	if docPath == "" {
		// Without the global room (disabled, or reconnecting) the document rooms still say who
		// is where.
		global, err := s.opts.Manager.GlobalPeers(ctx)
		if err != nil {
			s.log.Debug().Err(err).Msg("global awareness unavailable")
		}
		for _, p := range global {
			u := get(p)
			if u == nil {
				continue
			}
			if c, ok := p.State["current"].(string); ok && c != "" {
				u.Current = c
			}
			if docs, ok := p.State["documents"].([]any); ok {
				for _, d := range docs {
					if ds, ok := d.(string); ok && !contains(u.Documents, ds) {
						u.Documents = append(u.Documents, ds)
					}
				}
			}
		}
	}
	var rooms []*bridge.Room
	if docPath != "" {
		room, err := s.openDocument(ctx, docPath)
		if err != nil {
			return nil, err
		}
		rooms = []*bridge.Room{room}
	} else {
		rooms = s.opts.Manager.Rooms()
	}
	for _, room := range rooms {
		peers, err := room.Peers(ctx)
		if err != nil {
			continue
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
	for _, u := range users {
		if !u.since.IsZero() {
			u.Since = u.since.UTC().Format(time.RFC3339)
		}
		sort.Strings(u.Documents)
	}
	return users, nil
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

type presenceArgs struct {
	DocumentPath string         `json:"document_path"`
	UserID       string         `json:"user_id"`
	Status       string         `json:"status"`
	Message      string         `json:"message"`
	ActivityType string         `json:"activity_type"`
	Description  string         `json:"description"`
	Metadata     map[string]any `json:"metadata"`
	Limit        int            `json:"limit"`
	SessionID    string         `json:"session_id"`
	CellID       string         `json:"cell_id"`
	Position     *lineColPos    `json:"position"`
	Selection    *span2         `json:"selection"`
}

func (s *Server) getOnlineUsers(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	users, err := s.collectUsers(ctx, args.DocumentPath)
	if err != nil {
		return result{}, err
	}
	list := sortedUsers(users)
	out := map[string]any{"users": list, "count": len(list)}
	if args.DocumentPath != "" {
		out["document"] = args.DocumentPath
		if room := s.opts.Manager.Get(parseSession(args.DocumentPath)); room != nil {
			if w := presenceWarmup(room); w != "" {
				out["note"] = w
			}
		}
	}
	return result{Data: out}, nil
}

func (s *Server) getUserPresence(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	users, err := s.collectUsers(ctx, args.DocumentPath)
	if err != nil {
		return result{}, err
	}
	u, ok := users[args.UserID]
	if !ok {
		names := make([]string, 0, len(users))
		for n := range users {
			names = append(names, n)
		}
		sort.Strings(names)
		return result{}, &toolError{
			Message: fmt.Sprintf("%q is not online (no presence in the rooms the sidecar can see); online: %s", args.UserID, strings.Join(names, ", ")),
			Details: []detail{{Path: []any{"user_id"}, Message: "not online"}},
		}
	}
	if u.Status == "" {
		u.Status = bridge.PresenceOnline
	}
	return result{Data: map[string]any{"user": u}}, nil
}

func (s *Server) setUserPresence(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	p, err := s.opts.Manager.UpdatePresence(ctx, func(p *bridge.Presence) { p.Status, p.Message = args.Status, args.Message })
	if err != nil {
		return result{}, err
	}
	return result{Data: map[string]any{"status": p.Status, "message": p.Message, "shown_as": displayNameFor(s, p)}}, nil
}

func displayNameFor(s *Server, p bridge.Presence) string {
	return bridge.DisplayName(s.opts.AgentName, p)
}

func (s *Server) broadcastUserActivity(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	p, err := s.opts.Manager.UpdatePresence(ctx, func(p *bridge.Presence) {
		if strings.TrimSpace(args.Description) == "" || args.ActivityType == "idle" {
			p.Activity = nil
		} else {
			p.Activity = &bridge.Activity{Type: args.ActivityType, Description: args.Description, Document: args.DocumentPath, Metadata: args.Metadata, Since: time.Now().UTC()}
			if id, ok := auth.IdentityFrom(ctx); ok && id.Delegated {
				p.Activity.OnBehalfOf = strings.TrimPrefix(id.Name, "jupyter:") // the Jupyter user the agent acts for
			}
		}
	})
	if err != nil {
		return result{}, err
	}
	out := map[string]any{"activity": p.Activity, "shown_as": displayNameFor(s, p)}
	if p.Activity == nil {
		out["activity"] = nil
	}
	return result{Data: out}, nil
}

func (s *Server) getUserCursors(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.openDocument(ctx, args.DocumentPath)
	if err != nil {
		return result{}, err
	}
	peers, err := room.Peers(ctx)
	if err != nil {
		return result{}, err
	}
	where, err := s.placeCursors(ctx, room, peers)
	if err != nil {
		return result{}, err
	}
	type userCursors struct {
		Username string        `json:"username"`
		Name     string        `json:"name"`
		Color    string        `json:"color,omitempty"`
		Cursors  []cursorWhere `json:"cursors"`
		Moved    string        `json:"moved_at,omitempty"`
		Active   bool          `json:"active"` // moved within the last two minutes
	}
	var out []userCursors
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
	if out == nil {
		out = []userCursors{}
	}
	data := map[string]any{"document": room.Path(), "cursors": out}
	if w := presenceWarmup(room); w != "" {
		data["note"] = w
	}
	return result{Data: data}, nil
}

func (s *Server) updateCursorPosition(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.openDocument(ctx, args.DocumentPath)
	if err != nil {
		return result{}, err
	}
	if room.Kind() == ydoc.KindNotebook && args.CellID == "" {
		return result{}, invalid([]any{"cell_id"}, "is required in a notebook")
	}
	if room.Kind() == ydoc.KindText && args.CellID != "" {
		return result{}, invalid([]any{"cell_id"}, "a text file has no cells")
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
			if c.ID == args.CellID {
				text = c.Source
				return nil
			}
		}
		return invalid([]any{"cell_id"}, "no cell with id %q", args.CellID)
	}); err != nil {
		return result{}, err
	}
	head, err := lineColToUTF16(text, *args.Position, []any{"position"})
	if err != nil {
		return result{}, err
	}
	anchor := head
	if args.Selection != nil {
		if anchor, err = lineColToUTF16(text, args.Selection.Start, []any{"selection", "start"}); err != nil {
			return result{}, err
		}
		if head, err = lineColToUTF16(text, args.Selection.End, []any{"selection", "end"}); err != nil {
			return result{}, err
		}
	}
	if err := room.SetCursors(ctx, []bridge.CursorSpec{{CellID: args.CellID, Anchor: anchor, Head: head}}); err != nil {
		return result{}, err
	}
	out := map[string]any{"document": room.Path(), "position": *args.Position}
	if args.CellID != "" {
		out["cell_id"] = args.CellID
	}
	if args.Selection != nil {
		out["selection"] = args.Selection
	}
	return result{Data: out}, nil
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

func (s *Server) getUserActivity(ctx context.Context, raw map[string]any) (result, error) {
	args := presenceArgs{Limit: 20}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	var rooms []*bridge.Room
	if args.DocumentPath != "" {
		room, err := s.openDocument(ctx, args.DocumentPath)
		if err != nil {
			return result{}, err
		}
		rooms = []*bridge.Room{room}
	} else {
		rooms = s.opts.Manager.Rooms()
	}
	var all []bridge.ActivityEntry
	for _, r := range rooms {
		entries, err := r.Activity(ctx, args.Limit)
		if err != nil {
			continue
		}
		all = append(all, entries...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].At.After(all[j].At) })
	if len(all) > args.Limit {
		all = all[:args.Limit]
	}
	if all == nil {
		all = []bridge.ActivityEntry{}
	}
	return result{Data: map[string]any{"activity": all, "count": len(all), "note": "\"agent\": true marks this sidecar's own changes; \"by\" names who wrote the new content (it is empty for pure deletions — Yjs records who inserted, not who deleted — and for authors with no presence); loading the document is not listed"}}, nil
}

type sessionView struct {
	SessionID    string   `json:"session_id"`
	Path         string   `json:"path"`
	Kind         string   `json:"kind"`
	Open         bool     `json:"open"`
	RoomID       string   `json:"room_id,omitempty"`
	Status       string   `json:"status,omitempty"`
	Participants []string `json:"participants"`
	// Save: for the rooms the sidecar has open, when jupyter-server last saved the document and
	// whether changes wait for a save (the save guard, --save-interval).
	Save *saveView `json:"save,omitempty"`
	// LastRescue: what happened the last time jupyter-server lost the room (a crash).
	LastRescue map[string]any `json:"last_rescue,omitempty"`
}

type saveView struct {
	LastSaved    *time.Time `json:"last_saved"`              // the server last reported a save (null: not since the sidecar joined)
	UnsavedSince *time.Time `json:"unsaved_since,omitempty"` // the oldest change not saved yet
	LastAsked    *time.Time `json:"last_asked,omitempty"`    // the sidecar last asked for a save
	LastStatus   string     `json:"last_status,omitempty"`   // the server's answer: success, skipped, failed, timeout, disconnected
	Asked        int        `json:"asked"`                   // save requests made for this room
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (s *Server) getActiveSessions(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	sessions := map[string]*sessionView{}
	for _, r := range s.opts.Manager.Rooms() {
		id := bridge.CurrentString(r.Path(), r.Kind())
		info := r.Info()
		v := &sessionView{SessionID: id, Path: r.Path(), Kind: r.Kind().String(), Open: true, RoomID: info.RoomID, Status: string(info.Status), Participants: []string{},
			Save: &saveView{LastSaved: timePtr(info.LastSaved), UnsavedSince: timePtr(info.UnsavedSince), LastAsked: timePtr(info.LastSaveAsked),
				LastStatus: info.LastSaveStatus, Asked: info.SavesAsked}}
		if rep := info.LastRescue; rep != nil {
			v.LastRescue = map[string]any{"at": info.LastRescueAt, "restored": rep.Restored, "summary": rep.Summary()}
		}
		for _, c := range collabOf(info).Collaborators {
			v.Participants = append(v.Participants, c.Name)
		}
		sessions[id] = v
	}
	global, err := s.opts.Manager.GlobalPeers(ctx)
	if err != nil {
		s.log.Debug().Err(err).Msg("global awareness unavailable")
	}
	for _, p := range global {
		if p.User == nil {
			continue
		}
		name := nonEmptyStr(p.User.DisplayName, p.User.Name, p.User.Username)
		var docs []string
		// JupyterLab also names terminals, consoles and viewers in "current": only notebooks
		// and editors are documents.
		if c, ok := p.State["current"].(string); ok && (strings.HasPrefix(c, "notebook:") || strings.HasPrefix(c, "editor:")) {
			docs = append(docs, c)
		}
		if list, ok := p.State["documents"].([]any); ok {
			for _, d := range list {
				if ds, ok := d.(string); ok {
					p, kind := parseSession(ds)
					docs = append(docs, bridge.CurrentString(p, kind))
				}
			}
		}
		for _, id := range docs {
			p, kind := parseSession(id)
			v := sessions[id]
			if v == nil {
				v = &sessionView{SessionID: id, Path: p, Kind: kind.String(), Participants: []string{}}
				sessions[id] = v
			}
			if !contains(v.Participants, name) {
				v.Participants = append(v.Participants, name)
			}
		}
	}
	var list []*sessionView
	for _, v := range sessions {
		if args.DocumentPath != "" && v.Path != path.Clean(args.DocumentPath) {
			continue
		}
		sort.Strings(v.Participants)
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].SessionID < list[j].SessionID })
	if list == nil {
		list = []*sessionView{}
	}
	data := map[string]any{"sessions": list, "count": len(list)}
	if e, err := s.opts.Manager.Engine(ctx); err == nil {
		data["engine"] = e.Name // which collaboration engine the server runs
	} else {
		data["engine_error"] = err.Error()
	}
	return result{Data: data}, nil
}

func (s *Server) joinSession(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	p, kind := parseSession(args.SessionID)
	room, err := s.opts.Manager.Open(ctx, p, kind)
	if err != nil {
		if errors.Is(err, bridge.ErrBadPath) {
			return result{}, invalid([]any{"session_id"}, "%v", err)
		}
		return result{}, err
	}
	info := room.Info()
	return result{Data: map[string]any{"session_id": bridge.CurrentString(room.Path(), room.Kind()), "path": room.Path(), "room_id": info.RoomID, "collaboration": collabOf(info)}}, nil
}

func (s *Server) leaveSession(ctx context.Context, raw map[string]any) (result, error) {
	var args presenceArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	p, kind := parseSession(args.SessionID)
	room := s.opts.Manager.Get(p, kind)
	if room == nil {
		return result{Data: map[string]any{"session_id": args.SessionID, "left": false, "note": "the sidecar was not in that session"}}, nil
	}
	room.Close()
	return result{Data: map[string]any{"session_id": bridge.CurrentString(room.Path(), room.Kind()), "left": true}}, nil
}

// busyWindow is how recently a cursor must have moved for its cell to count as being edited:
// JupyterLab never clears a cursor when its user looks elsewhere.
const busyWindow = 2 * time.Minute

// busyCells maps each cell a collaborator's cursor recently moved in to their names.
func (s *Server) busyCells(ctx context.Context, room *bridge.Room) map[string][]string {
	peers, err := room.Peers(ctx)
	if err != nil {
		return nil
	}
	busy := map[string][]string{}
	for _, p := range peers {
		if p.User == nil || time.Since(p.CursorsAt) > busyWindow {
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

// busyCheck refuses (avoid) or lists the addressed cells someone is typing in.
func busyCheck(busy map[string][]string, ids []string, avoid bool) ([]string, error) {
	var warnings []string
	for _, id := range ids {
		if names := busy[id]; len(names) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s is editing cell %s", strings.Join(names, " and "), id))
		}
	}
	if avoid && len(warnings) > 0 {
		return nil, &toolError{
			Message: "busy: " + strings.Join(warnings, "; ") + "; nothing was changed (avoid_busy_cells). Wait, or edit other cells",
			Extra:   map[string]any{"busy_cells": warnings},
		}
	}
	return warnings, nil
}

// moveCursorTo puts the agent's cursor at the end of a cell's source (best effort: a failure
// here never fails the edit).
func (s *Server) moveCursorTo(ctx context.Context, room *bridge.Room, cellID string, end int) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = room.SetCursors(ctx, []bridge.CursorSpec{{CellID: cellID, Anchor: end, Head: end}})
}

// presenceWarmup says when a room joined moments ago may not list everyone yet. Collaborators
// announce themselves when they join and every 15 s after, never in answer to a newcomer
// (y-protocols), and the server does not pass on the states it holds: people who were there
// before the sidecar appear at their next renewal.
func presenceWarmup(room *bridge.Room) string {
	joined := room.Info().JoinedAt
	if joined.IsZero() {
		return ""
	}
	if d := time.Since(joined); d < ydoc.AwarenessRenew {
		return fmt.Sprintf("the sidecar joined %s %.0f s ago: collaborators who were already there appear at their next presence renewal (every %v), so some may be missing", room.Path(), d.Seconds(), ydoc.AwarenessRenew)
	}
	return ""
}

// busyUnknown warns that avoid_busy_cells could not see everyone yet.
func busyUnknown(room *bridge.Room, avoid bool) []string {
	if !avoid {
		return nil
	}
	if w := presenceWarmup(room); w != "" {
		return []string{"avoid_busy_cells: " + w}
	}
	return nil
}
