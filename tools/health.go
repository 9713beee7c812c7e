package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// readyStaleAfter is how long a room may be out of sync before readiness reports it: brief
// reconnects are normal, a room that stays down is not.
const readyStaleAfter = 30 * time.Second

// ReadyHandler answers /readyz: 200 when jupyter-server answers (check) and every open room is
// in sync or recovering briefly, 503 with the reasons otherwise. Answers are cached for two
// seconds, so an unauthenticated probe cannot be used to flood jupyter-server.
func (s *Server) ReadyHandler(check func(ctx context.Context) error) http.Handler {
	var mu sync.Mutex
	var last time.Time
	var status int
	var body []byte
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) > 2*time.Second {
			status, body = s.readiness(r.Context(), check)
			last = time.Now()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
}

func (s *Server) readiness(ctx context.Context, check func(ctx context.Context) error) (int, []byte) {
	type rooms struct {
		Open      int `json:"open"`
		Synced    int `json:"synced"`
		Unhealthy int `json:"unhealthy"`
	}
	out := struct {
		Ready   bool     `json:"ready"`
		Jupyter string   `json:"jupyter"`
		Engine  string   `json:"engine,omitempty"` // the collaboration engine the server runs
		Rooms   rooms    `json:"rooms"`
		Reasons []string `json:"reasons,omitempty"`
	}{Ready: true, Jupyter: "ok"}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := check(ctx); err != nil {
		out.Ready, out.Jupyter = false, "unreachable"
		out.Reasons = append(out.Reasons, "jupyter-server does not answer or refuses the sidecar's token")
	} else if e, err := s.opts.Manager.EngineInfo(ctx); err != nil {
		out.Ready = false
		out.Reasons = append(out.Reasons, err.Error()) // e.g. no collaboration engine installed
	} else {
		out.Engine = e.Name
	}
	now := time.Now()
	for _, r := range s.opts.Manager.Rooms() {
		info := r.Info()
		out.Rooms.Open++
		switch {
		case info.Status == bridge.StatusSynced:
			out.Rooms.Synced++
		case info.Status == bridge.StatusFailed,
			!info.SyncedAt.IsZero() && now.Sub(info.SyncedAt) > readyStaleAfter,
			info.SyncedAt.IsZero() && now.Sub(r.LastUsed()) > readyStaleAfter:
			out.Rooms.Unhealthy++
		}
	}
	if out.Rooms.Unhealthy > 0 {
		out.Ready = false
		out.Reasons = append(out.Reasons, "rooms out of sync for more than 30s")
	}
	b, _ := json.Marshal(out)
	if !out.Ready {
		return http.StatusServiceUnavailable, append(b, '\n')
	}
	return http.StatusOK, append(b, '\n')
}
