//go:build integration

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// Config sets the iteration counts of one run.
type Config struct {
	Edits         int // sequential single-cell edits (round trip and peer latency)
	Sustained     int // back-to-back edits for the sustained rate
	InsertBatches int // repetitions of the 100-cell insert
	InsertCells   int // cells per insert batch
	Reads         int // timed reads of the 200-cell notebook (per format)
	ReadCells     int // cells of the read notebook
	Executions    int // timed executions of a trivial cell
	Joins         int // joins of a fresh 1,000-cell notebook
	JoinCells     int // cells of the join notebook
	PeerTimeout   time.Duration
	MaxLostEdits  int // stop the edit loop after this many edits never reached the peer
}

// Full is the configuration of `make bench`.
func Full() Config {
	return Config{Edits: 200, Sustained: 200, InsertBatches: 5, InsertCells: 100, Reads: 5, ReadCells: 200,
		Executions: 30, Joins: 5, JoinCells: 1000, PeerTimeout: 30 * time.Second, MaxLostEdits: 3}
}

// Smoke is the tiny configuration of the CI test: every operation once or a few times.
func Smoke() Config {
	return Config{Edits: 3, Sustained: 5, InsertBatches: 1, InsertCells: 100, Reads: 1, ReadCells: 200,
		Executions: 2, Joins: 1, JoinCells: 1000, PeerTimeout: 60 * time.Second, MaxLostEdits: 1}
}

// Target is one server with its client and adapter.
type Target struct {
	Server  *Server
	Client  *Client
	Adapter Adapter
}

// Metric is one row of the results.
type Metric struct {
	Key, Label, Unit string
	Better           string // "lower", "higher" or "" (information)
	Values           map[string]float64
	Errors           map[string]string
	NA               map[string]string // server → why the measurement does not apply
}

// Results are everything one run measured.
type Results struct {
	Config    Config
	Started   time.Time
	Elapsed   time.Duration
	Metrics   []*Metric
	Servers   []string
	Notes     []string
	LoadStart string // 1-minute load average when the run began
}

// metric returns the row with key, creating it.
func (r *Results) metric(key, label, unit, better string) *Metric {
	for _, m := range r.Metrics {
		if m.Key == key {
			return m
		}
	}
	m := &Metric{Key: key, Label: label, Unit: unit, Better: better, Values: map[string]float64{}, Errors: map[string]string{}, NA: map[string]string{}}
	r.Metrics = append(r.Metrics, m)
	return m
}

// Get returns a row by key (nil when absent).
func (r *Results) Get(key string) *Metric {
	for _, m := range r.Metrics {
		if m.Key == key {
			return m
		}
	}
	return nil
}

// Failures lists every recorded error as "server: metric: error".
func (r *Results) Failures() []string {
	var out []string
	for _, m := range r.Metrics {
		for _, s := range r.Servers {
			if e, ok := m.Errors[s]; ok {
				out = append(out, fmt.Sprintf("%s: %s: %s", s, m.Label, e))
			}
		}
	}
	return out
}

// Runner runs the operations against every target on one jupyter-server.
type Runner struct {
	Cfg     Config
	JS      *integration.JupyterServer
	Targets []*Target
	Counter *Client // count_tokens is called here (the sidecar's client)
	Logf    func(format string, args ...any)
	res     *Results
	seq     int
	opens   map[string][]float64 // server → open times of the 1-cell notebooks
}

type row struct{ key, label, unit, better string }

// op runs fn against each target and records its values; an error fills the rows fn did not.
func (r *Runner) op(ctx context.Context, name string, rows []row, fn func(ctx context.Context, t *Target, put func(key string, v float64)) error) {
	for _, rw := range rows {
		r.res.metric(rw.key, rw.label, rw.unit, rw.better)
	}
	for _, t := range r.Targets {
		start := time.Now()
		put := func(key string, v float64) { r.res.Get(key).Values[t.Server.Name] = v }
		err := fn(ctx, t, put)
		if err == nil && t.Server.Exited() {
			err = fmt.Errorf("server process exited")
		}
		if err != nil {
			if t.Server.Exited() {
				err = fmt.Errorf("%w (process exited; log tail: %s)", err, tail(t.Server.Log(), 800))
			}
			for _, rw := range rows {
				m := r.res.Get(rw.key)
				if _, ok := m.Values[t.Server.Name]; !ok {
					m.Errors[t.Server.Name] = err.Error()
				}
			}
		}
		r.Logf("%s on %s: %v (err: %v)", name, t.Server.Name, time.Since(start).Round(time.Millisecond), err)
	}
}

// Run runs every operation and returns the results.
func (r *Runner) Run(ctx context.Context) *Results {
	r.res = &Results{Config: r.Cfg, Started: time.Now(), LoadStart: loadAverage()}
	for _, t := range r.Targets {
		r.res.Servers = append(r.res.Servers, t.Server.Name)
	}
	r.memory("start")
	r.definitions(ctx)
	r.discovery(ctx)
	r.edits(ctx)
	r.sustained(ctx)
	r.inserts(ctx)
	r.reads(ctx)
	r.executes(ctx)
	r.joins(ctx)
	r.coldJoins(ctx)
	r.smallJoins()
	r.memory("end")
	r.kernelNote(ctx)
	r.res.Elapsed = time.Since(r.res.Started)
	return r.res
}

// file writes a new notebook under the server root for one target and operation.
func (r *Runner) file(t *Target, what string, data []byte) (string, error) {
	r.seq++
	name := fmt.Sprintf("bench_%s_%s_%d.ipynb", shortNames[t.Server.Name], what, r.seq)
	return name, r.JS.WriteFile(name, data)
}

func (r *Runner) peer(ctx context.Context, path string) (*integration.Peer, error) {
	p, err := integration.StartPeer()
	if err != nil {
		return nil, err
	}
	if err := p.Connect(ctx, r.JS, path, "notebook"); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("peer connect: %w", err)
	}
	return p, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile of samples (sorted in place).
// putPercentiles reports a measure's p50 and p99 as <name>-p50 and <name>-p99.
func putPercentiles(put func(string, float64), name string, samples []float64) {
	put(name+"-p50", pct(samples, .5))
	put(name+"-p99", pct(samples, .99))
}

func pct(samples []float64, p float64) float64 {
	slices.Sort(samples)
	if len(samples) == 0 {
		return 0
	}
	i := int(p*float64(len(samples))+0.999999) - 1
	return samples[max(0, min(i, len(samples)-1))]
}

// jsString quotes s for the peer's JavaScript expressions.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// edits: one cell edited Edits times in turn; the call's round trip and the time until the
// independent peer holds the new source.
func (r *Runner) edits(ctx context.Context) {
	rows := []row{
		{"edit-rt-p50", "single-cell edit, tool round trip p50 (in the client)", "ms", "lower"},
		{"edit-rt-p99", "single-cell edit, tool round trip p99 (in the client)", "ms", "lower"},
		{"edit-drv-p50", "  … p50 as the driver sees it (+ its pipe to the client process)", "ms", "lower"},
		{"edit-drv-p99", "  … p99 as the driver sees it", "ms", "lower"},
		{"edit-peer-p50", "edit → visible in independent yjs peer p50", "ms", "lower"},
		{"edit-peer-p99", "edit → visible in independent yjs peer p99", "ms", "lower"},
		{"edit-lost", "edits that never reached the peer", "edits", "lower"},
	}
	r.op(ctx, "edits", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		path, p, err := r.smallNotebookPeer(ctx, t, "edit", "bench-edit", "x = 0")
		if err != nil {
			return err
		}
		defer p.Close()
		var rt, drv, seen []float64
		lost := 0
		for i := 0; i < r.Cfg.Edits; i++ {
			src := fmt.Sprintf("x = %d  # edit %d", i+1, i)
			done := make(chan error, 1)
			var peerAt time.Time
			before := t.Client.InClient()
			start := time.Now()
			go func() {
				_, err := p.WaitFor(ctx, "nb.cells[0] && nb.cells[0].source === "+jsString(src), int(r.Cfg.PeerTimeout.Milliseconds()))
				peerAt = time.Now()
				done <- err
			}()
			if err := t.Adapter.SetSource(ctx, path, 0, "bench-edit", src); err != nil {
				<-done
				return fmt.Errorf("edit %d: %w", i, err)
			}
			drv = append(drv, ms(time.Since(start)))
			rt = append(rt, ms(t.Client.InClient()-before))
			if err := <-done; err != nil {
				lost++
				if lost >= r.Cfg.MaxLostEdits {
					put("edit-lost", float64(lost))
					return fmt.Errorf("edit %d never reached the peer within %v (%d lost): %w", i, r.Cfg.PeerTimeout, lost, err)
				}
				continue
			}
			seen = append(seen, ms(peerAt.Sub(start)))
		}
		putPercentiles(put, "edit-rt", rt)
		putPercentiles(put, "edit-drv", drv)
		put("edit-lost", float64(lost))
		if len(seen) > 0 {
			putPercentiles(put, "edit-peer", seen)
		}
		return nil
	})
}

// sustained: Sustained edits back to back; the rate counts until the peer holds the last one.
func (r *Runner) sustained(ctx context.Context) {
	rows := []row{
		{"sustained", "sustained sequential edits (until the peer has the last)", "edits/s", "higher"},
		{"sustained-missed", "  … of which the peer never saw", "edits", "lower"},
	}
	r.op(ctx, "sustained", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		path, p, err := r.smallNotebookPeer(ctx, t, "sustained", "bench-sustained", "x = 0")
		if err != nil {
			return err
		}
		defer p.Close()
		// The peer reports every change of the cell's text (each source is longer than the one
		// before, so each edit is one event): an intermediate edit the server never got is
		// noticed although the next full-source edit hides it in the final state.
		if err := p.Call(ctx, "watchText", map[string]any{"cellId": "bench-sustained", "tail": 8}, nil); err != nil {
			return fmt.Errorf("peer watch: %w", err)
		}
		last := ""
		start := time.Now()
		for i := 0; i < r.Cfg.Sustained; i++ {
			last = fmt.Sprintf("x = 0  # %s %d", strings.Repeat("s", i), i)
			if err := t.Adapter.SetSource(ctx, path, 0, "bench-sustained", last); err != nil {
				return fmt.Errorf("edit %d: %w", i, err)
			}
		}
		if _, err := p.WaitFor(ctx, "nb.cells[0].source === "+jsString(last), int(r.Cfg.PeerTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("last edit never reached the peer: %w", err)
		}
		elapsed := time.Since(start)
		seen := map[int]bool{}
		grace := time.After(300 * time.Millisecond)
	drain:
		for {
			select {
			case ev := <-p.Events():
				if ev.Event != "text" {
					continue
				}
				f := strings.Fields(ev.Tail)
				if len(f) > 0 {
					if k, err := strconv.Atoi(f[len(f)-1]); err == nil {
						seen[k] = true
					}
				}
			case <-grace:
				break drain
			}
		}
		missed := 0
		for i := 0; i < r.Cfg.Sustained; i++ {
			if !seen[i] {
				missed++
			}
		}
		put("sustained-missed", float64(missed))
		put("sustained", float64(r.Cfg.Sustained)/elapsed.Seconds())
		return nil
	})
}

// inserts: InsertCells code cells appended in one go (one call where the server has a batch
// tool); the time until the calls returned and until the peer had them all, checked in order
// and exactly once.
func (r *Runner) inserts(ctx context.Context) {
	n := r.Cfg.InsertCells
	rows := []row{
		{"insert-ms", fmt.Sprintf("insert %d cells, until the calls returned (p50)", n), "ms", "lower"},
		{"insert-peer-ms", fmt.Sprintf("insert %d cells, until the peer has all (p50)", n), "ms", "lower"},
		{"insert-calls", fmt.Sprintf("insert %d cells, tool calls", n), "calls", "lower"},
	}
	r.op(ctx, "inserts", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		var callMs, peerMs []float64
		calls := 0
		for b := 0; b < r.Cfg.InsertBatches; b++ {
			path, p, err := r.smallNotebookPeer(ctx, t, "insert", "bench-first", "# first")
			if err != nil {
				return err
			}
			srcs := make([]string, n)
			for i := range srcs {
				srcs[i] = fmt.Sprintf("batch_%d_cell_%d = %d", b, i, i)
			}
			start := time.Now()
			calls, err = t.Adapter.AppendCells(ctx, path, srcs)
			if err != nil {
				p.Close()
				return err
			}
			callMs = append(callMs, ms(time.Since(start)))
			_, werr := p.WaitFor(ctx, fmt.Sprintf("nb.cells.length >= %d && nb.cells[nb.cells.length-1].source === %s", n+1, jsString(srcs[n-1])), int(r.Cfg.PeerTimeout.Milliseconds()))
			peerMs = append(peerMs, ms(time.Since(start)))
			snap, serr := p.Snapshot(ctx)
			p.Close()
			if werr != nil {
				return fmt.Errorf("batch %d: the peer never had all %d cells: %w", b, n, werr)
			}
			if serr != nil {
				return serr
			}
			if err := checkInserted(snap, srcs); err != nil {
				return fmt.Errorf("batch %d: %w", b, err)
			}
		}
		put("insert-ms", pct(callMs, .5))
		put("insert-peer-ms", pct(peerMs, .5))
		put("insert-calls", float64(calls))
		return nil
	})
}

// checkInserted: the first cell kept, then exactly the inserted sources in order.
func checkInserted(snap integration.PeerSnapshot, srcs []string) error {
	got := make([]string, len(snap.Cells))
	for i, c := range snap.Cells {
		got[i] = c.Source
	}
	want := append([]string{"# first"}, srcs...)
	if slices.Equal(got, want) {
		return nil
	}
	count := map[string]int{}
	for _, s := range got {
		count[s]++
	}
	var dup, missing []string
	for _, s := range want {
		switch count[s] {
		case 0:
			missing = append(missing, s)
		case 1:
		default:
			dup = append(dup, s)
		}
	}
	return fmt.Errorf("peer has %d cells, want %d; duplicated %d %v, missing %d %v (order differs: %v)",
		len(got), len(want), len(dup), head(dup), len(missing), head(missing), len(dup) == 0 && len(missing) == 0)
}

func head(s []string) []string {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}

// reads: the 200-cell notebook with outputs read whole, with outputs and sources only:
// latency, tool calls, and tokens of what the model receives (text items, o200k_base).
func (r *Runner) reads(ctx context.Context) {
	rows := []row{
		{"read-out-ms", fmt.Sprintf("read %d-cell notebook with outputs (p50)", r.Cfg.ReadCells), "ms", "lower"},
		{"read-out-calls", "  … tool calls", "calls", "lower"},
		{"read-out-tokens", "  … tokens returned (o200k_base)", "tokens", "lower"},
		{"read-out-struct-tokens", "  … its structuredContent, tokens (what Codex hands the model instead)", "tokens", "lower"},
		{"read-out-images", "  … image items returned", "images", ""},
		{"read-out-image-tokens", "  … their tokens (estimate: w×h/750)", "tokens", "lower"},
		{"read-md-ms", "read it with outputs, format markdown (p50)", "ms", "lower"},
		{"read-md-calls", "  … tool calls", "calls", "lower"},
		{"read-md-tokens", "  … tokens returned (o200k_base)", "tokens", "lower"},
		{"read-src-ms", fmt.Sprintf("read %d-cell notebook, sources only (p50)", r.Cfg.ReadCells), "ms", "lower"},
		{"read-src-calls", "  … tool calls", "calls", "lower"},
		{"read-src-tokens", "  … tokens returned (o200k_base)", "tokens", "lower"},
		{"read-script-ms", "read it, each cell's type and source kept by a script (p50)", "ms", "lower"},
		{"read-script-calls", "  … tool calls", "calls", "lower"},
		{"read-script-tokens", "  … tokens returned (o200k_base)", "tokens", "lower"},
	}
	data, derr := ReadNotebook(r.Cfg.ReadCells)
	r.op(ctx, "reads", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		if derr != nil {
			return derr
		}
		path, err := r.file(t, "read", data)
		if err != nil {
			return err
		}
		if _, err := t.Adapter.Open(ctx, path); err != nil {
			return err
		}
		md, hasMD := t.Adapter.(MarkdownReader)
		if !hasMD {
			for _, k := range []string{"read-md-ms", "read-md-calls", "read-md-tokens"} {
				r.res.Get(k).NA[t.Server.Name] = "no such format"
			}
		}
		sr, hasScript := t.Adapter.(ScriptReader)
		if !hasScript {
			for _, k := range []string{"read-script-ms", "read-script-calls", "read-script-tokens"} {
				r.res.Get(k).NA[t.Server.Name] = "no script tool"
			}
		}
		for _, prefix := range []string{"read-out-", "read-md-", "read-src-", "read-script-"} {
			if prefix == "read-md-" && !hasMD || prefix == "read-script-" && !hasScript {
				continue
			}
			read := func() ([]Reply, int, error) {
				switch prefix {
				case "read-md-":
					return md.ReadMarkdown(ctx, path, r.Cfg.ReadCells)
				case "read-script-":
					return sr.ReadSourcesByScript(ctx, path)
				}
				return t.Adapter.ReadAll(ctx, path, prefix == "read-out-", r.Cfg.ReadCells)
			}
			var times []float64
			var first []Reply
			for i := 0; i < r.Cfg.Reads+1; i++ { // the first read warms up and is not timed
				start := time.Now()
				replies, covered, err := read()
				if err != nil {
					return fmt.Errorf("%sread: %w", prefix, err)
				}
				if covered != r.Cfg.ReadCells {
					return fmt.Errorf("%sread covered %d of %d cells", prefix, covered, r.Cfg.ReadCells)
				}
				if i == 0 {
					first = replies
					continue
				}
				times = append(times, ms(time.Since(start)))
			}
			var texts, structured []string
			images, imageTok := 0, 0
			for _, rep := range first {
				texts = append(texts, rep.Text)
				if rep.Structured != nil {
					b, _ := json.Marshal(rep.Structured)
					structured = append(structured, string(b))
				}
				images += rep.Images
				imageTok += rep.ImageTokens
			}
			if dir := os.Getenv("JCM_BENCH_DUMP"); dir != "" { // to inspect what each server answered
				_ = os.WriteFile(filepath.Join(dir, t.Server.Name+"-"+prefix+"replies.txt"), []byte(strings.Join(texts, "\n\n----\n\n")), 0o644)
			}
			tokens, err := CountTokens(ctx, r.Counter, strings.Join(texts, "\n"))
			if err != nil {
				return fmt.Errorf("count tokens: %w", err)
			}
			put(prefix+"ms", pct(times, .5))
			put(prefix+"calls", float64(len(first)))
			put(prefix+"tokens", float64(tokens))
			if prefix == "read-out-" {
				stok, err := CountTokens(ctx, r.Counter, strings.Join(structured, "\n"))
				if err != nil {
					return fmt.Errorf("count tokens: %w", err)
				}
				if len(structured) == 0 {
					r.res.Get(prefix + "struct-tokens").NA[t.Server.Name] = "no structuredContent"
				} else {
					put(prefix+"struct-tokens", float64(stok))
				}
				put(prefix+"images", float64(images))
				put(prefix+"image-tokens", float64(imageTok))
			}
		}
		return nil
	})
}

// definitions: what a client puts into every model request before the agent does anything —
// each tool's name, description and inputSchema as tools/list gives them (Cursor, VS Code, Codex
// and the API connectors send them on every turn). The sidecar's default toolset and all of
// them (chosen per connection with ?toolsets=); jupyter-mcp-server has one list. Output schemas,
// which some clients also send, apart.
func (r *Runner) definitions(ctx context.Context) {
	rows := []row{
		{"defs-default-tokens", "tool definitions per turn, default tools (o200k_base)", "tokens", "lower"},
		{"defs-default-tools", "  … tools listed", "tools", "lower"},
		{"defs-all-tokens", "tool definitions per turn, every tool", "tokens", "lower"},
		{"defs-all-tools", "  … tools listed", "tools", "lower"},
		{"defs-all-output-tokens", "  … plus their outputSchemas", "tokens", "lower"},
	}
	r.op(ctx, "tool definitions", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		sets := []struct{ key, query string }{{"default", ""}, {"all", ""}}
		if t.Server.Name == Sidecar {
			sets[0].query, sets[1].query = "toolsets=default", "toolsets=all"
		}
		for _, set := range sets {
			c := t.Client
			if set.query != "" {
				var err error
				if c, err = ConnectWith(ctx, t.Server, set.query); err != nil {
					return err
				}
				defer c.Close()
			}
			defs, outs, err := c.ToolDefinitions(ctx)
			if err != nil {
				return err
			}
			tok, err := CountTokens(ctx, r.Counter, strings.Join(defs, "\n"))
			if err != nil {
				return fmt.Errorf("count tokens: %w", err)
			}
			put("defs-"+set.key+"-tokens", float64(tok))
			put("defs-"+set.key+"-tools", float64(len(defs)))
			if set.key == "all" {
				otok, err := CountTokens(ctx, r.Counter, strings.Join(outs, "\n"))
				if err != nil {
					return fmt.Errorf("count tokens: %w", err)
				}
				put("defs-all-output-tokens", float64(tok+otok))
			}
		}
		return nil
	})
}

// executes: a trivial cell (1 + 1) run through the tool; the answer must carry 2 and the peer
// must see the output written into the notebook.
func (r *Runner) executes(ctx context.Context) {
	rows := []row{
		{"exec-p50", "execute a trivial cell p50 (in the client)", "ms", "lower"},
		{"exec-p99", "execute a trivial cell p99 (in the client)", "ms", "lower"},
		{"exec-drv-p50", "  … p50 as the driver sees it", "ms", "lower"},
	}
	r.op(ctx, "executes", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		path, err := r.smallNotebook(ctx, t, "exec", "bench-exec", "1 + 1")
		if err != nil {
			return err
		}
		var times, drv []float64
		for i := 0; i < r.Cfg.Executions+1; i++ { // the first one starts the kernel: not timed
			before := t.Client.InClient()
			start := time.Now()
			rep, err := t.Adapter.Execute(ctx, path, 0, "bench-exec")
			if err != nil {
				return fmt.Errorf("execution %d: %w", i, err)
			}
			if !answers2(rep.Text) {
				return fmt.Errorf("execution %d: the answer does not carry the result 2: %s", i, truncate(rep.Text, 300))
			}
			if i > 0 {
				drv = append(drv, ms(time.Since(start)))
				times = append(times, ms(t.Client.InClient()-before))
			}
		}
		p, err := r.peer(ctx, path)
		if err != nil {
			return err
		}
		defer p.Close()
		if _, err := p.WaitFor(ctx, `nb.cells[0].execution_count != null && JSON.stringify(nb.cells[0].outputs).includes('"2"')`, int(r.Cfg.PeerTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("the peer never saw the output 2 in the notebook: %w", err)
		}
		putPercentiles(put, "exec", times)
		put("exec-drv-p50", pct(drv, .5))
		return nil
	})
}

// answers2 looks for the result 2 as an output of its own: a line "2" (plain text answers) or
// the JSON string "2" (JSON answers), so an execution count of 2 does not pass for it.
func answers2(text string) bool {
	if strings.Contains(text, `"2"`) || strings.Contains(text, `"2\n"`) {
		return true
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "2" {
			return true
		}
	}
	return false
}

// joins: a fresh 1,000-cell notebook opened (the server loads it into a new room), then one edit
// in its middle; the peer checks the last edit.
func (r *Runner) joins(ctx context.Context) {
	n := r.Cfg.JoinCells
	rows := []row{
		{"join-ms", fmt.Sprintf("join/open a %d-cell notebook (p50)", n), "ms", "lower"},
		{"big-edit-ms", fmt.Sprintf("single-cell edit in the %d-cell notebook (p50)", n), "ms", "lower"},
	}
	data := LargeNotebook(n)
	r.op(ctx, "joins", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		var joins, edits []float64
		path, src := "", ""
		mid := n / 2
		for i := 0; i < r.Cfg.Joins; i++ {
			var err error
			if path, err = r.file(t, "join", data); err != nil {
				return err
			}
			start := time.Now()
			cells, err := t.Adapter.Open(ctx, path)
			if err != nil {
				return fmt.Errorf("join %d: %w", i, err)
			}
			joins = append(joins, ms(time.Since(start)))
			if cells != n {
				return fmt.Errorf("join %d: opened with %d cells, want %d", i, cells, n)
			}
			src = fmt.Sprintf("edited_in_join_%d = True", i)
			start = time.Now()
			if err := t.Adapter.SetSource(ctx, path, mid, largeCellID(mid), src); err != nil {
				return fmt.Errorf("edit after join %d: %w", i, err)
			}
			edits = append(edits, ms(time.Since(start)))
		}
		p, err := r.peer(ctx, path)
		if err != nil {
			return err
		}
		defer p.Close()
		if _, err := p.WaitFor(ctx, fmt.Sprintf("nb.cells.length === %d && nb.cells[%d].source === %s", n, mid, jsString(src)), int(r.Cfg.PeerTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("the peer never saw the edit of cell %d: %w", mid, err)
		}
		put("join-ms", pct(joins, .5))
		put("big-edit-ms", pct(edits, .5))
		return nil
	})
}

// memory records each server's own resident set and its peak.
func (r *Runner) memory(when string) {
	rows := []row{{"rss-" + when, "server process RSS (VmRSS) at " + when, "MiB", "lower"}}
	if when == "end" {
		rows = append(rows, row{"hwm", "server process peak RSS (VmHWM) over the run", "MiB", "lower"})
	}
	r.op(context.Background(), "memory "+when, rows, func(_ context.Context, t *Target, put func(string, float64)) error {
		if t.Server.InProcess() {
			for _, rw := range rows {
				r.res.Get(rw.key).NA[t.Server.Name] = "runs inside jupyter-server"
			}
			return nil
		}
		m, err := ReadMemory(t.Server.PID())
		if err != nil {
			return err
		}
		put("rss-"+when, float64(m.RSSKiB)/1024)
		if when == "end" {
			put("hwm", float64(m.HWMKiB)/1024)
		}
		if m.Children > 0 {
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("%s had %d child processes at %s (RSS %.1f MiB, not included above)",
				t.Server.Name, m.Children, when, float64(m.ChildRSSKiB)/1024))
		}
		return nil
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// kernelNote records how many kernels the run left on the jupyter-server, and whose sessions
// they belong to (every file of the run is named bench_<short name>_…, shortNames).
func (r *Runner) kernelNote(ctx context.Context) {
	get := func(api string, out any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.JS.URL+api, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "token "+r.JS.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var kernels []struct {
		ID string `json:"id"`
	}
	var sessions []struct {
		Path   string `json:"path"`
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	if get("api/kernels", &kernels) != nil || get("api/sessions", &sessions) != nil {
		return
	}
	owner := map[string]string{}
	for _, s := range sessions {
		for name, short := range shortNames {
			if strings.Contains(s.Path, "bench_"+short+"_") {
				owner[s.Kernel.ID] = name
			}
		}
	}
	count := map[string]int{}
	for _, k := range kernels {
		o := owner[k.ID]
		if o == "" {
			o = "no session"
		}
		count[o]++
	}
	var per []string
	for _, name := range r.res.Servers {
		per = append(per, fmt.Sprintf("of a %s notebook: %d", name, count[name]))
	}
	r.res.Notes = append(r.res.Notes, fmt.Sprintf("Kernels running on the jupyter-server at the end: %d (with a session %s; without a session: %d — jupyter-mcp-server starts one at its own start-up).",
		len(kernels), strings.Join(per, "; "), count["no session"]))
}

// openSmall opens one of the run's 1-cell notebooks and keeps the time it took.
// smallNotebook writes a one-cell notebook for an operation and opens it on the target.
func (r *Runner) smallNotebook(ctx context.Context, t *Target, what, cellID, source string) (string, error) {
	path, err := r.file(t, what, notebookJSON([]string{cellID}, []string{source}))
	if err != nil {
		return "", err
	}
	return path, r.openSmall(ctx, t, path)
}

// smallNotebookPeer is smallNotebook with an independent peer joined to it (the caller closes
// the peer).
func (r *Runner) smallNotebookPeer(ctx context.Context, t *Target, what, cellID, source string) (string, *integration.Peer, error) {
	path, err := r.smallNotebook(ctx, t, what, cellID, source)
	if err != nil {
		return "", nil, err
	}
	p, err := r.peer(ctx, path)
	if err != nil {
		return "", nil, err
	}
	return path, p, nil
}

func (r *Runner) openSmall(ctx context.Context, t *Target, path string) error {
	start := time.Now()
	n, err := t.Adapter.Open(ctx, path)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("opened %s with %d cells, want 1", path, n)
	}
	if r.opens == nil {
		r.opens = map[string][]float64{}
	}
	r.opens[t.Server.Name] = append(r.opens[t.Server.Name], ms(time.Since(start)))
	return nil
}

// smallJoins reports the opens of the 1-cell notebooks the other operations did.
func (r *Runner) smallJoins() {
	rows := []row{{"join-small-ms", "join/open a 1-cell notebook (p50 over the runs' opens)", "ms", "lower"}}
	r.op(context.Background(), "small joins", rows, func(_ context.Context, t *Target, put func(string, float64)) error {
		if len(r.opens[t.Server.Name]) == 0 {
			return fmt.Errorf("no successful open")
		}
		put("join-small-ms", pct(r.opens[t.Server.Name], .5))
		return nil
	})
}
