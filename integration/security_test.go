//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// goClient connects mcp-go's Streamable HTTP client with a bearer token.
func goClient(t testing.TB, ctx context.Context, url, token string) (*client.Client, error) {
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "integration", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

func callJSON(ctx context.Context, c *client.Client, name string, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("%s failed: %s", name, text)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("%s: decode %q: %w", name, text, err)
	}
	return out, nil
}

// With --auth jupyter the MCP bearer is a Jupyter token, checked by the real jupyter-server's
// GET /api/me; the caller's Jupyter identity is the one in the audit log, and no token is
// logged.
func TestJupyterDelegatedAuthAgainstRealServer(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sp, err := StartHTTPSidecar(ctx, shared, "MCP_TOKEN=", "MCP_AUTH=jupyter", "MCP_TOOLSETS=all") // every permission sees every tool
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()

	// A token jupyter-server does not know: 401 from the sidecar, after asking the server.
	if _, err := goClient(t, ctx, sp.URL, "not-a-jupyter-token-at-all"); err == nil {
		t.Fatal("an unknown token was accepted")
	}
	c, err := goClient(t, ctx, sp.URL, shared.Token)
	if err != nil {
		t.Fatalf("the Jupyter token was refused: %v\n%s", err, sp.Log.String())
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 40 {
		t.Errorf("the server's own token (every permission) sees %d tools", len(tools.Tools))
	}
	nb, err := callJSON(ctx, c, "get_notebook", map[string]any{"format": "json", "path": name})
	if err != nil {
		t.Fatal(err)
	}
	first := nb["cells"].([]any)[0].(map[string]any)["id"].(string)
	if _, err := callJSON(ctx, c, "batch_insert_notebook_cells", map[string]any{"path": name, "after_cell_id": first,
		"cells": []any{map[string]any{"content": "# written with a Jupyter token"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := callJSON(ctx, c, "set_user_presence", map[string]any{"activity_type": "editing", "description": "checking auth"}); err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitFor(ctx, `nb.cells.some(c => c.source === "# written with a Jupyter token")`, 10000); err != nil {
		t.Fatalf("the edit did not reach the peer: %v", err)
	}
	sp.Stop()
	logs := sp.Log.String()
	audit := regexp.MustCompile(`"audit":"batch_insert_notebook_cells"[^\n]*"who":"jupyter:[^"]+"`)
	if !audit.MatchString(logs) {
		t.Errorf("no audit line naming the Jupyter user for the insert:\n%s", grepLog(logs, "audit"))
	}
	if strings.Contains(logs, shared.Token) || strings.Contains(logs, "not-a-jupyter-token-at-all") {
		t.Error("a token appears in the sidecar's log")
	}
}

func grepLog(logs, substr string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLoad: concurrent MCP sessions over HTTP on several notebooks for a bounded time, against
// the real server. Asserts no errors, metrics that count the calls, and memory that stops
// growing once the working set is warm. JCM_LOAD_SESSIONS, JCM_LOAD_NOTEBOOKS and
// JCM_LOAD_DURATION scale it (the README's numbers: 20 × 10 for 2m).
func TestLoad(t *testing.T) {
	sessions := envInt("JCM_LOAD_SESSIONS", 20)
	notebooks := envInt("JCM_LOAD_NOTEBOOKS", 10)
	duration := 40 * time.Second
	if d, err := time.ParseDuration(os.Getenv("JCM_LOAD_DURATION")); err == nil && d > 0 {
		duration = d
	}
	ctx := ctxT(t, duration+4*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	paths := make([]string, notebooks)
	for i := range paths {
		paths[i] = fmt.Sprintf("load-%02d.ipynb", i)
		if err := srv.WriteFile(paths[i], fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
			t.Fatal(err)
		}
	}
	// The sessions share one token; the rate limit is for runaway agents, not for this test. A
	// small history budget fills early, so what is left to grow is what should not.
	sp, err := StartHTTPSidecar(ctx, srv, "MCP_RATE_LIMIT=0", "LOG_LEVEL=info", "HISTORY_BUDGET_MB=1")
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	clients := make([]*client.Client, sessions)
	for i := range clients {
		if clients[i], err = goClient(t, ctx, sp.URL, sp.Token); err != nil {
			t.Fatal(err)
		}
	}
	// Memory is sampled through the run; the heap is what the sidecar holds, RSS what the OS sees.
	type sample struct {
		at                             time.Duration
		rss                            int64
		heap, history, replica, resume float64
	}
	var samples []sample
	start := time.Now()
	stopSampling := make(chan struct{})
	samplingDone := make(chan struct{})
	go func() {
		defer close(samplingDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				rss, _ := RSS(sp.Pid())
				heap, _ := scrapeMetric(sp, "go_gc_heap_live_bytes") // live after the last GC: garbage does not count
				history, _ := scrapeMetric(sp, "jcm_room_history_bytes")
				replica, _ := scrapeMetric(sp, "jcm_room_replica_bytes")
				resume, _ := scrapeMetric(sp, "jcm_http_resume_buffer_bytes")
				samples = append(samples, sample{time.Since(start), rss, heap, history, replica, resume})
			}
		}
	}()
	var calls, failures atomic.Int64
	var firstErr sync.Once
	var errMsg string
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			marker := 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				path := paths[rng.IntN(len(paths))]
				var err error
				switch op := rng.IntN(10); {
				case op < 5: // read: most of what agents do
					_, err = callJSON(ctx, c, "get_notebook", map[string]any{"format": "json", "path": path, "cell_range": map[string]any{"start": 0, "end": 2}})
				case op < 8: // rewrite this session's own cell: the document does not grow without bound
					marker++
					id := fmt.Sprintf("load-s%02d", i)
					_, err = callJSON(ctx, c, "batch_update_notebook_cells", map[string]any{"path": path,
						"updates": []any{map[string]any{"cell_id": id, "content": fmt.Sprintf("# session %d edit %d\n", i, marker)}}})
					if err != nil && strings.Contains(err.Error(), "no cell with id") { // first visit of this notebook
						_, err = callJSON(ctx, c, "batch_insert_notebook_cells", map[string]any{"path": path,
							"cells": []any{map[string]any{"id": id, "content": fmt.Sprintf("# session %d\n", i)}}})
						if err != nil && strings.Contains(err.Error(), "already") {
							err = nil // another call of ours raced it in; fine
						}
					}
				default:
					_, err = callJSON(ctx, c, "list_notebooks", map[string]any{})
				}
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					firstErr.Do(func() { errMsg = err.Error() })
				}
			}
		}()
	}
	wg.Wait()
	close(stopSampling)
	<-samplingDone
	defer func() { // before the sidecar stops, so their DELETEs reach it
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	elapsed := time.Since(start)
	n, failed := calls.Load(), failures.Load()
	t.Logf("load: %d sessions × %d notebooks for %s: %d calls (%.0f/s), %d failed", sessions, notebooks, elapsed.Round(time.Second), n, float64(n)/elapsed.Seconds(), failed)
	if failed > 0 {
		t.Errorf("%d of %d calls failed; first: %s", failed, n, errMsg)
	}
	counted, err := scrapeMetricSum(sp, "jcm_tool_calls_total")
	if err != nil {
		t.Fatal(err)
	}
	if int64(counted) < n {
		t.Errorf("jcm_tool_calls_total = %.0f after %d calls", counted, n)
	}
	if len(samples) < 6 {
		t.Fatalf("only %d memory samples", len(samples))
	}
	// Flat memory: what the sidecar holds beyond its bounded buffers (version history,
	// resumable SSE events) is not far above the middle third's in the last third. The buffers
	// fill towards their budgets and the replicas keep their tombstones (as every Yjs peer does):
	// all are reported, and the history is checked against its budget.
	third := len(samples) / 3
	peak := func(s []sample, f func(sample) float64) float64 {
		m := 0.0
		for _, x := range s {
			m = max(m, f(x))
		}
		return m
	}
	mb := func(v float64) float64 { return v / (1 << 20) }
	heapOf := func(s sample) float64 { return s.heap }
	restOf := func(s sample) float64 { return s.heap - s.history - s.resume }
	resumeOf := func(s sample) float64 { return s.resume }
	histOf := func(s sample) float64 { return s.history }
	replOf := func(s sample) float64 { return s.replica }
	rssOf := func(s sample) float64 { return float64(s.rss) }
	mid, last := samples[third:2*third], samples[2*third:]
	// RSS is of a -race build (BuildSidecar), several times a normal build's.
	t.Logf("memory (middle third → last third, peaks): live heap %.1f → %.1f MiB, of which version history %.1f → %.1f MiB and resume buffers %.1f → %.1f MiB; the rest %.1f → %.1f MiB; replicas (encoded) %.2f → %.2f MiB; RSS %.1f → %.1f MiB",
		mb(peak(mid, heapOf)), mb(peak(last, heapOf)), mb(peak(mid, histOf)), mb(peak(last, histOf)),
		mb(peak(mid, resumeOf)), mb(peak(last, resumeOf)), mb(peak(mid, restOf)), mb(peak(last, restOf)),
		mb(peak(mid, replOf)), mb(peak(last, replOf)), mb(peak(mid, rssOf)), mb(peak(last, rssOf)))
	if midRest, lastRest := peak(mid, restOf), peak(last, restOf); lastRest > midRest*1.25+8<<20 {
		t.Errorf("the heap beyond the bounded buffers keeps growing under steady load: %.1f MiB → %.1f MiB", mb(midRest), mb(lastRest))
	}
	if h := peak(last, histOf); h > float64(notebooks)*(1<<20)*1.1 {
		t.Errorf("version history %.1f MiB over its budget (1 MiB × %d notebooks)", mb(h), notebooks)
	}
}

// scrapeMetric reads one unlabelled sample from the sidecar's /metrics.
func scrapeMetric(sp *SidecarProcess, name string) (float64, error) {
	body, err := metricsText(sp)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// scrapeMetricSum adds up every labelled sample of a metric.
func scrapeMetricSum(sp *SidecarProcess, name string) (float64, error) {
	body, err := metricsText(sp)
	if err != nil {
		return 0, err
	}
	sum, seen := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return 0, err
			}
			sum, seen = sum+f, true
		}
	}
	if !seen {
		return 0, fmt.Errorf("metric %s not found", name)
	}
	return sum, nil
}

func metricsText(sp *SidecarProcess) (string, error) {
	req, _ := http.NewRequest("GET", strings.TrimSuffix(sp.URL, "/mcp")+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+sp.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(b), err
}
