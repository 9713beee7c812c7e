package tools

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// MCP logging: what happened outside the agent's calls that it should know — a room lost and
// back, a replica rebuilt, a room failed, edits withdrawn or left unconfirmed when a room
// stopped, a kernel that died, was replaced or restarted, a crash rescue's outcome (what was
// restored, what was not, an edit that could not be re-applied; notices.go also puts those on
// the next tool result), and whatever else bridge and the executors publish as a bridge.Notice —
// sent to every
// MCP session as notifications/message, at or above the level that session asked for with
// logging/setLevel (mcp-go keeps the level per session; error until a session sets one), and
// only to sessions whose token may read the document. The logger is the topic (room, edit,
// kernel, save, rescue, presence); data is {"message", "document", "kind", "event", ...}: a path,
// ids, counts and one line — never document content, never a token.

// noticeSessions are the MCP sessions to tell, with the identity each connected with (none:
// stdio or an open endpoint, which may see everything).
type noticeSessions struct {
	mu       sync.Mutex
	sessions map[string]noticeSession
	down     map[string]time.Time // rooms (by noticeRoomKey) disconnected, since when
}

type noticeSession struct {
	id    auth.Identity
	hasID bool
}

func newNoticeSessions() *noticeSessions {
	return &noticeSessions{sessions: map[string]noticeSession{}, down: map[string]time.Time{}}
}

// addNoticeHooks follows session registration.
func (s *Server) addNoticeHooks(h *server.Hooks) {
	h.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		id, ok := auth.IdentityFrom(ctx)
		s.notices.mu.Lock()
		s.notices.sessions[cs.SessionID()] = noticeSession{id: id, hasID: ok}
		s.notices.mu.Unlock()
	})
	h.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		s.notices.mu.Lock()
		delete(s.notices.sessions, cs.SessionID())
		s.notices.mu.Unlock()
		s.dropSessionTasks(cs.SessionID()) // tasks.go: a task is its session's only
	})
}

// noticeMessage is one log message for agents.
type noticeMessage struct {
	level  mcp.LoggingLevel
	logger string
	path   string // "" when about no document
	data   map[string]any
}

// noticeOf maps a room event to what agents are told (ok false: nothing).
func (s *Server) noticeOf(e bridge.Event) (noticeMessage, bool) {
	if e.Kind == bridge.EventNotice && e.Notice != nil {
		n := e.Notice
		data := map[string]any{"message": n.Message}
		for k, v := range n.Data {
			data[k] = v
		}
		if n.Kind != "" {
			data["event"] = n.Kind
		}
		if len(n.Details) > 0 {
			data["details"] = n.Details
		}
		if n.Path != "" {
			data["document"] = n.Path
		}
		if n.DocKind != "" {
			data["kind"] = n.DocKind
		}
		return noticeMessage{level: mcp.LoggingLevel(n.LevelOf()), logger: n.TopicOf(), path: n.Path, data: data}, true
	}
	switch e.Kind {
	case bridge.EventDisconnected, bridge.EventSynced, bridge.EventReset, bridge.EventFailed, bridge.EventClosed:
	default:
		return noticeMessage{}, false // changes and awareness: the agent reads those itself
	}
	key := fmt.Sprintf("%s\x00%d\x00%s\x00%v", e.Path, e.DocKind, e.Fork, e.Transient)
	what := e.Path
	logger := bridge.TopicRoom
	data := map[string]any{"event": e.Kind.String()}
	path := e.Path
	switch {
	case e.Transient:
		what, logger, path = "JupyterLab's global awareness", "presence", ""
	case e.Fork != "":
		what = fmt.Sprintf("fork %s of %s", e.Fork, e.Path)
		data["fork_id"], data["document"], data["kind"] = e.Fork, e.Path, e.DocKind.String()
	default:
		data["document"], data["kind"] = e.Path, e.DocKind.String()
	}
	s.notices.mu.Lock()
	since, wasDown := s.notices.down[key]
	switch e.Kind {
	case bridge.EventDisconnected:
		if !wasDown {
			s.notices.down[key] = e.Time
		}
	case bridge.EventSynced, bridge.EventClosed, bridge.EventFailed:
		delete(s.notices.down, key)
	}
	s.notices.mu.Unlock()
	msg := func(level mcp.LoggingLevel, text string) (noticeMessage, bool) {
		data["message"] = text
		return noticeMessage{level: level, logger: logger, path: path, data: data}, true
	}
	switch e.Kind {
	case bridge.EventDisconnected:
		if wasDown {
			return noticeMessage{}, false // still reconnecting: said once
		}
		if e.Transient {
			return msg(mcp.LoggingLevelInfo, fmt.Sprintf("lost %s (%v); reconnecting: until it is back, who has which document open is not known", what, e.Err))
		}
		return msg(mcp.LoggingLevelWarning, fmt.Sprintf("lost the connection to %s's room (%v); reconnecting. Reads show the last state the sidecar had; edits wait for the room", what, e.Err))
	case bridge.EventSynced:
		if !wasDown {
			return msg(mcp.LoggingLevelDebug, fmt.Sprintf("joined %s", what))
		}
		data["down_seconds"] = e.Time.Sub(since).Round(100 * time.Millisecond).Seconds()
		return msg(mcp.LoggingLevelInfo, fmt.Sprintf("%s is back in sync after %.1f s", what, e.Time.Sub(since).Seconds()))
	case bridge.EventReset:
		return msg(mcp.LoggingLevelWarning, fmt.Sprintf("%s: the replica was rebuilt from jupyter-server's state (%v); versions and cell positions from earlier reads may be stale, re-read before editing", what, e.Err))
	case bridge.EventFailed:
		return msg(mcp.LoggingLevelError, fmt.Sprintf("%s's room failed (%v); the next call that needs it joins it again", what, e.Err))
	case bridge.EventClosed:
		return msg(mcp.LoggingLevelDebug, fmt.Sprintf("left %s", what))
	}
	return noticeMessage{}, false
}

// notify sends an event's notice to every session that may see its document.
func (s *Server) notify(e bridge.Event) {
	n, ok := s.noticeOf(e)
	if !ok {
		return
	}
	s.notices.mu.Lock()
	targets := make([]string, 0, len(s.notices.sessions))
	for sid, ns := range s.notices.sessions {
		if n.path != "" && ns.hasID && !ns.id.MayAccess(n.path) {
			continue
		}
		targets = append(targets, sid)
	}
	s.notices.mu.Unlock()
	note := mcp.NewLoggingMessageNotification(n.level, n.logger, n.data)
	for _, sid := range targets {
		// Below the session's level mcp-go sends nothing; a full or closed session loses the
		// message, never the room.
		_ = s.mcp.SendLogMessageToSpecificClient(sid, note)
	}
}
