package bridge

// Notices for MCP logging: what an agent should hear about that happened outside its own calls,
// or that its call may not have lived to report — edits withdrawn or left unconfirmed when a room
// stopped, a kernel that died or restarted, a save that failed, the outcome of a crash rescue
// (rescue.go). Whoever finds out (a room, an executor, the save guard) publishes a Notice
// on the manager's event stream (EventNotice); the MCP layer maps it, with the rooms' own
// lifecycle events (disconnected, synced, reset, failed), to log messages for the sessions that
// may see the document. A Notice never carries tokens or document content: a path, ids, counts
// and one line. Notices that are not LogOnly are also kept on the manager's board and ride on each
// session's next tool result (Manager.Notices).

// NoticeLevel is how much a Notice matters, in the syslog order MCP logging uses.
type NoticeLevel string

const (
	NoticeDebug   NoticeLevel = "debug"
	NoticeInfo    NoticeLevel = "info"
	NoticeNotice  NoticeLevel = "notice" // normal but significant: a kernel restarted
	NoticeWarning NoticeLevel = "warning"
	NoticeError   NoticeLevel = "error"
)

// Notice topics: what a Notice is about (the MCP log message's logger).
const (
	TopicRoom   = "room"
	TopicEdit   = "edit"
	TopicKernel = "kernel"
	TopicSave   = "save"
	TopicRescue = "rescue"
)

// LevelOf is a notice's level: its own, or by its kind for the rescue's notices.
func (n Notice) LevelOf() NoticeLevel {
	switch {
	case n.Level != "":
		return n.Level
	case n.Kind == "rescued":
		return NoticeNotice
	case n.Kind == "reapply_failed":
		return NoticeError
	}
	return NoticeWarning
}

// TopicOf is a notice's topic: its own, or by its kind for the rescue's notices.
func (n Notice) TopicOf() string {
	switch {
	case n.Topic != "":
		return n.Topic
	case n.Kind == "reapply_failed":
		return TopicEdit
	}
	return TopicRescue
}

// Notify publishes a Notice to the manager's subscribers (as EventNotice), for MCP logging only
// (it is not kept on the board of notices that ride on tool results).
func (m *Manager) Notify(n Notice) {
	if n.Time.IsZero() {
		n.Time = m.presenceNow()
	}
	n.LogOnly = true
	m.hub.publish(Event{Path: n.Path, Kind: EventNotice, Time: n.Time, Notice: &n})
}

// logNotice publishes a LogOnly Notice about this room's document to the room's and the
// manager's subscribers.
func (r *Room) logNotice(n Notice) {
	n.Path, n.DocKind, n.LogOnly = r.opts.Path, r.opts.Kind.String(), true
	if n.Time.IsZero() {
		n.Time = r.opts.Now()
	}
	r.emit(Event{Path: r.opts.Path, Kind: EventNotice, Time: n.Time, Notice: &n})
}
