package tools

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Notices: what the room manager says agents must be told (bridge.Notice: work a jupyter-server
// crash lost and that could not be restored, an edit confirmed earlier that could not be applied
// again) rides on each client session's next tool result, once, under "notices".

// noticeSeen remembers, per client session, the last notice its results carried.
type noticeSeen struct {
	mu   sync.Mutex
	seen map[string]uint64
}

type noticeView struct {
	Time    time.Time `json:"time"`
	Path    string    `json:"path"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Details []string  `json:"details,omitempty"`
}

// takeNotices returns the notices this client session has not been shown yet, about the
// documents it may see (the door's: a notice names a document and what happened to it).
func (s *Server) takeNotices(ctx context.Context) []noticeView {
	session := sessionKey(ctx)
	s.noticed.mu.Lock()
	defer s.noticed.mu.Unlock()
	list, seq := s.opts.Manager.Notices(s.noticed.seen[session])
	if len(list) == 0 {
		return nil
	}
	if s.noticed.seen == nil {
		s.noticed.seen = map[string]uint64{}
	}
	s.noticed.seen[session] = seq
	var out []noticeView
	for _, n := range list {
		if allowed(ctx, n.Path) {
			out = append(out, noticeView{Time: n.Time, Path: n.Path, Kind: n.Kind, Message: n.Message, Details: n.Details})
		}
	}
	return out
}

// forgetNotices drops a client session's bookkeeping when it ends.
func (s *Server) forgetNotices(session string) {
	s.noticed.mu.Lock()
	defer s.noticed.mu.Unlock()
	delete(s.noticed.seen, session)
}

// addNotices puts notices into a successful result.
func addNotices(res result, notices []noticeView) result {
	if len(notices) == 0 {
		return res
	}
	if res.Text != "" {
		var lines []string
		for _, n := range notices {
			lines = append(lines, "Notice ("+n.Path+"): "+n.Message)
		}
		res.Extra = append(res.Extra, mcp.NewTextContent(strings.Join(lines, "\n")))
		return res
	}
	data, ok := res.Data.(map[string]any)
	if !ok {
		b, err := json.Marshal(res.Data)
		if err != nil || json.Unmarshal(b, &data) != nil || data == nil {
			return res
		}
	}
	data["notices"] = notices
	res.Data = data
	return res
}
