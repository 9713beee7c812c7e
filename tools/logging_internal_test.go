package tools

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// The crash rescue's notices (bridge/rescue.go: rescued, not_restored, reapply_failed) become log
// messages with a level and topic by their kind, their details and the document.
func TestRescueNoticesAsLogMessages(t *testing.T) {
	s := &Server{notices: newNoticeSessions()}
	for _, tc := range []struct {
		kind   string
		level  mcp.LoggingLevel
		logger string
	}{
		{"rescued", mcp.LoggingLevelNotice, bridge.TopicRescue},
		{"not_restored", mcp.LoggingLevelWarning, bridge.TopicRescue},
		{"reapply_failed", mcp.LoggingLevelError, bridge.TopicEdit},
	} {
		n := &bridge.Notice{Time: time.Now(), Path: "a.ipynb", Kind: tc.kind, Message: "what happened", Details: []string{"cell c1"}}
		m, ok := s.noticeOf(bridge.Event{Path: "a.ipynb", Kind: bridge.EventNotice, Notice: n})
		if !ok || m.level != tc.level || m.logger != tc.logger || m.path != "a.ipynb" ||
			m.data["event"] != tc.kind || m.data["message"] != "what happened" || m.data["document"] != "a.ipynb" || len(m.data["details"].([]string)) != 1 {
			t.Errorf("%s: %+v (ok %v)", tc.kind, m, ok)
		}
	}
}
