package tools

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// What happened lately and which documents are live: activity, sessions, joining and leaving,
// and who is typing where (busy cells, for the edit tools).

func (s *Server) getUserActivity(ctx context.Context, c *call, a presenceArgs) ([]bridge.ActivityEntry, error) {
	rooms := []*bridge.Room{c.Room}
	if !c.Named() {
		rooms = s.liveRooms(ctx)
	}
	var all []bridge.ActivityEntry
	for _, r := range rooms {
		entries, err := r.Activity(ctx, a.Limit)
		if err != nil {
			continue
		}
		all = append(all, entries...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].At.After(all[j].At) })
	if len(all) > a.Limit {
		all = all[:a.Limit]
	}
	return all, nil
}

// activityEntry is one change as get_user_activity shows it.
type activityEntry struct {
	Document string    `json:"document"`
	At       time.Time `json:"at"`
	By       []string  `json:"by,omitempty"`
	Agent    bool      `json:"agent,omitempty"`
	Kind     string    `json:"kind"`
	Cells    []string  `json:"cells,omitempty"`
}

func renderActivity(_ *call, _ presenceArgs, entries []bridge.ActivityEntry) result {
	list := make([]activityEntry, len(entries))
	for i, e := range entries {
		list[i] = activityEntry{Document: e.Path, At: e.At, By: e.Authors, Agent: e.Local, Kind: e.Kind, Cells: e.CellIDs}
	}
	return result{Data: map[string]any{"activity": list, "count": len(list), "note": "\"agent\": true marks this sidecar's own changes; \"by\" names who wrote the new content (it is empty for pure deletions — Yjs records who inserted, not who deleted — and for authors with no presence); loading the document is not listed"}}
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
	LastTookMs   int64      `json:"last_took_ms,omitempty"`  // how long the last answered request took
	SpacingMs    int64      `json:"spacing_ms,omitempty"`    // the least time before the next request (five times that, at least 1 s)
	// Journal: the document's write-ahead log, which keeps what reached the sidecar whatever
	// dies (null: none).
	Journal *journalView `json:"journal,omitempty"`
}

type journalView struct {
	Durable    bool       `json:"durable"` // on disk (false: in the sidecar's memory only)
	Bytes      int64      `json:"bytes"`
	Records    int        `json:"records"`
	AtRisk     bool       `json:"at_risk"`               // it holds changes no save covered, or a rescue not decided yet
	LastSynced *time.Time `json:"last_synced,omitempty"` // made durable (fsync) last
	Unsynced   uint64     `json:"unsynced,omitempty"`    // records not made durable yet
	Error      string     `json:"error,omitempty"`
}

func journalOf(r *bridge.Room) *journalView {
	in := r.LogInfo()
	if in == nil {
		return nil
	}
	v := &journalView{Durable: in.Durable, Bytes: in.Bytes, Records: in.Records, AtRisk: in.AtRisk, LastSynced: timePtr(in.LastSynced), Error: in.Err}
	if in.Seq > in.SyncedSeq {
		v.Unsynced = in.Seq - in.SyncedSeq
	}
	return v
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// activeSessions are the sessions the caller may see, and the server's collaboration engine.
type activeSessions struct {
	list      []*sessionView
	engine    string
	engineErr error
}

// getActiveSessions lists the rooms the sidecar has open and the documents collaborators have
// open (global awareness), those the caller may see, with participants.
func (s *Server) getActiveSessions(ctx context.Context, c *call, _ presenceArgs) (activeSessions, error) {
	sessions := map[string]*sessionView{}
	for _, r := range s.liveRooms(ctx) {
		id := bridge.CurrentString(r.Path(), r.Kind())
		info := r.Info()
		v := &sessionView{SessionID: id, Path: r.Path(), Kind: r.Kind().String(), Open: true, RoomID: info.RoomID, Status: string(info.Status), Participants: []string{},
			Save: &saveView{LastSaved: timePtr(info.LastSaved), UnsavedSince: timePtr(info.UnsavedSince), LastAsked: timePtr(info.LastSaveAsked),
				LastStatus: info.LastSaveStatus, Asked: info.SavesAsked, LastTookMs: info.LastSaveTook.Milliseconds(), SpacingMs: info.SaveSpacing.Milliseconds(),
				Journal: journalOf(r)}}
		if rep := info.LastRescue; rep != nil {
			v.LastRescue = map[string]any{"at": info.LastRescueAt, "restored": rep.Restored, "summary": rep.Summary()}
		}
		for _, c := range collabOf(info).Collaborators {
			v.Participants = append(v.Participants, c.Name)
		}
		sessions[id] = v
	}
	for _, p := range s.globalPeers(ctx) {
		if p.User == nil {
			continue
		}
		name := nonEmptyStr(p.User.DisplayName, p.User.Name, p.User.Username)
		var docs []string
		// JupyterLab also names terminals, consoles and viewers in "current": only notebooks
		// and editors are documents.
		if cur, ok := p.State["current"].(string); ok && (strings.HasPrefix(cur, "notebook:") || strings.HasPrefix(cur, "editor:")) {
			docs = append(docs, cur)
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
	list := []*sessionView{}
	for _, v := range sessions {
		if c.Named() && v.Path != c.Path {
			continue
		}
		sort.Strings(v.Participants)
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].SessionID < list[j].SessionID })
	out := activeSessions{list: list}
	if e, err := s.opts.Manager.Engine(ctx); err == nil {
		out.engine = e.Name
	} else {
		out.engineErr = err
	}
	return out, nil
}

func renderSessions(_ *call, _ presenceArgs, a activeSessions) result {
	data := map[string]any{"sessions": a.list, "count": len(a.list)}
	if a.engineErr != nil {
		data["engine_error"] = a.engineErr.Error()
	} else {
		data["engine"] = a.engine // which collaboration engine the server runs
	}
	return result{Data: data}
}

// joinSession has nothing to do: the door joined the room.
func (s *Server) joinSession(_ context.Context, c *call, _ presenceArgs) (bridge.RoomInfo, error) {
	return c.Room.Info(), nil
}

func renderJoined(c *call, _ presenceArgs, info bridge.RoomInfo) result {
	return result{Data: map[string]any{"session_id": bridge.CurrentString(c.Room.Path(), c.Room.Kind()), "path": c.Room.Path(), "room_id": info.RoomID, "collaboration": collabOf(info)}}
}

// left is what leave_session did: the caller's use of the room ended; the room closed unless
// another MCP session still uses it.
type left struct {
	open  bool // the room was open
	was   bool // …and the caller was using it
	stays bool // …and it stays open for other sessions
}

func (s *Server) leaveSession(ctx context.Context, c *call, _ presenceArgs) (left, error) {
	open, was, stays, err := s.leaveDoc(ctx, c.doc)
	return left{open: open, was: was, stays: stays}, err
}

func renderLeft(c *call, _ presenceArgs, l left) result {
	id := bridge.CurrentString(c.Path, c.Kind)
	switch {
	case !l.open:
		return result{Data: map[string]any{"session_id": c.args["session_id"], "left": false, "note": "the sidecar was not in that session"}}
	case l.stays && l.was:
		return result{Data: map[string]any{"session_id": id, "left": true,
			"note": "this client no longer uses the room; it stays open because other clients of the sidecar still work in it"}}
	case l.stays:
		return result{Data: map[string]any{"session_id": id, "left": false,
			"note": "this client was not using the room; it stays open because other clients of the sidecar work in it"}}
	}
	return result{Data: map[string]any{"session_id": id, "left": true}}
}

// busyWindow is how recently a cursor must have moved for its cell to count as being edited:
// JupyterLab never clears a cursor when its user looks elsewhere.
const busyWindow = 2 * time.Minute

// busyCells maps each cell a collaborator's cursor recently moved in to their names. With
// avoid it first waits (bounded by their renewal, at most bridge.GlobalWarm after the join) for
// the cursors of collaborators who have the document in front of them but whose cursor has not
// arrived yet: right after joining is when an edit is likeliest to land where someone types.
func (s *Server) busyCells(ctx context.Context, room *bridge.Room, avoid bool) map[string][]string {
	var p bridge.DocumentPresence
	var err error
	if avoid {
		p, err = s.opts.Manager.AwaitPresence(ctx, room)
	} else {
		p, err = s.opts.Manager.DocumentPresence(ctx, room)
	}
	if err != nil {
		return nil
	}
	return busyIn(p.Peers, time.Now())
}

// moveCursorTo puts the agent's cursor at the end of a cell's source (best effort: a failure
// here never fails the edit).
func (s *Server) moveCursorTo(ctx context.Context, room *bridge.Room, cellID string, end int) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = room.SetCursors(ctx, []bridge.CursorSpec{{CellID: cellID, Anchor: end, Head: end}})
}

// busyUnknown warns about the collaborators an edit could not see typing: someone with the
// document in front of them whose cursor has not arrived yet, and, with avoid_busy_cells, anyone
// the sidecar cannot see yet (no warm global awareness, a room joined moments ago).
func (s *Server) busyUnknown(ctx context.Context, room *bridge.Room, avoid bool) []string {
	p := s.presenceOf(ctx, room)
	now := time.Now()
	out := unseenTypists(p, room.Path(), now)
	if avoid && len(out) == 0 && p.Blind {
		out = append(out, "avoid_busy_cells: "+presenceNote(p, room.Path(), now))
	}
	return out
}
