package tools

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// Accounting: tokens served per tool and per document, and what lean responses, caps and
// change-aware reads saved. Savings are measured where cheap (the schema a lean response left
// out is counted exactly) and estimated where counting would cost what was saved (cut content
// and unchanged cells: 4 bytes a token).

type tokenStats struct {
	mu      sync.Mutex
	since   time.Time
	calls   map[string]int
	byTool  map[string]int
	byDoc   map[string]int
	saved   map[string]int
	schemas map[string]int // tokens of each tool's schema resource
}

func newTokenStats() *tokenStats {
	return &tokenStats{since: time.Now(), calls: map[string]int{}, byTool: map[string]int{}, byDoc: map[string]int{}, saved: map[string]int{}, schemas: map[string]int{}}
}

// Saving kinds.
const (
	savedLean        = "lean_responses"     // the schema not embedded in a successful result
	savedCaps        = "caps"               // content cut by max_tokens, max_content_length, output caps
	savedChangeAware = "change_aware_reads" // cells not resent by since_version reads
)

func (t *tokenStats) record(tool, doc string, tokens int, saved map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls[tool]++
	t.byTool[tool] += tokens
	if doc != "" {
		t.byDoc[doc] += tokens
	}
	for k, v := range saved {
		if v > 0 {
			t.saved[k] += v
		}
	}
}

// schemaTokens returns (and remembers) the tokens of a tool's schema resource.
func (s *Server) schemaTokens(op *operation) int {
	s.stats.mu.Lock()
	n, ok := s.stats.schemas[op.Name]
	s.stats.mu.Unlock()
	if ok {
		return n
	}
	b, _ := json.Marshal(s.operationDoc(op))
	n = s.tokens.Count(string(b))
	s.stats.mu.Lock()
	s.stats.schemas[op.Name] = n
	s.stats.mu.Unlock()
	return n
}

// snapshot is the statistics, with only the documents show(path) allows.
func (t *tokenStats) snapshot(show func(path string) bool) map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	type row struct {
		Name   string `json:"name"`
		Calls  int    `json:"calls,omitempty"`
		Tokens int    `json:"tokens"`
	}
	tools := make([]row, 0, len(t.byTool))
	total := 0
	for name, n := range t.byTool {
		tools = append(tools, row{Name: name, Calls: t.calls[name], Tokens: n})
		total += n
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Tokens > tools[j].Tokens })
	docs := make([]row, 0, len(t.byDoc))
	for name, n := range t.byDoc {
		if show(name) {
			docs = append(docs, row{Name: name, Tokens: n})
		}
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].Tokens > docs[j].Tokens })
	saved := map[string]int{}
	savedTotal := 0
	for k, v := range t.saved {
		saved[k] = v
		savedTotal += v
	}
	return map[string]any{
		"since": t.since.UTC().Format(time.RFC3339), "tokens_served": total, "by_tool": tools, "by_document": docs,
		"tokens_saved": saved, "tokens_saved_total": savedTotal,
		"note": "served: what models read (text and embedded resources), counted exactly; saved: lean_responses exact, caps and change_aware_reads estimated at 4 bytes a token",
	}
}

// registerStatsResources serves jupyter://stats/tokens and jupyter://stats/cache.
func (s *Server) registerStatsResources() {
	s.mcp.AddResource(mcp.NewResource("jupyter://stats/tokens", "token statistics",
		mcp.WithResourceDescription("Tokens served per tool and per document since the server started, and tokens saved by lean responses, caps and change-aware reads."),
		mcp.WithMIMEType("application/json"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		s.acct.flush(ctx) // every call answered before this read is counted
		b, _ := json.Marshal(s.stats.snapshot(func(p string) bool { return allowed(ctx, p) }))
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}, nil
	})
	s.mcp.AddResource(mcp.NewResource("jupyter://stats/cache", "room cache statistics",
		mcp.WithResourceDescription("Rooms open (documents and forks), how often a call found its room already live (hits) or had to join (misses), and the bytes held by replicas and version histories."),
		mcp.WithMIMEType("application/json"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		b, _ := json.Marshal(cacheStatsView(s.opts.Manager.CacheStats(), func(p string) bool { return allowed(ctx, p) }))
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}, nil
	})
}

// cacheStatsJSON is jupyter://stats/cache.
type cacheStatsJSON struct {
	RoomsOpen    int             `json:"rooms_open"`
	ForksOpen    int             `json:"forks_open"`
	Rooms        []roomStatsJSON `json:"rooms"`
	OpenHits     int64           `json:"open_hits"`
	OpenMisses   int64           `json:"open_misses"`
	HitRate      float64         `json:"hit_rate"`
	ReplicaBytes int             `json:"replica_bytes"`
	HistoryBytes int             `json:"history_bytes"`
}

type roomStatsJSON struct {
	Path         string `json:"path"`
	Kind         string `json:"kind"`
	ForkID       string `json:"fork_id,omitempty"`
	Status       string `json:"status"`
	ReplicaBytes int    `json:"replica_bytes"`
	HistoryBytes int    `json:"history_bytes"`
	Versions     int    `json:"versions"`
}

// cacheStatsView renders the statistics with the rooms of the documents show allows (the
// totals stay whole: they name no document).
func cacheStatsView(st bridge.CacheStats, show func(path string) bool) cacheStatsJSON {
	out := cacheStatsJSON{RoomsOpen: st.RoomsOpen, ForksOpen: st.ForksOpen, Rooms: []roomStatsJSON{},
		OpenHits: st.OpenHits, OpenMisses: st.OpenMisses, HitRate: st.HitRate(), ReplicaBytes: st.ReplicaBytes, HistoryBytes: st.HistoryBytes}
	for _, r := range st.Rooms {
		if !show(r.Path) {
			continue
		}
		out.Rooms = append(out.Rooms, roomStatsJSON{Path: r.Path, Kind: r.Kind.String(), ForkID: r.Fork, Status: string(r.Status),
			ReplicaBytes: r.Sizes.ReplicaBytes, HistoryBytes: r.Sizes.HistoryBytes, Versions: r.Sizes.Versions})
	}
	return out
}
