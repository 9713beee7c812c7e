//go:build integration

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The storm with crashes (issue 20): three agents (MCP over Streamable HTTP to the real binary)
// insert, rewrite, move and delete their own cells while two humans (independent yjs peers) type
// into the notebook's original cells, and jupyter-server is SIGKILLed every JCM_STORM_KILL_EVERY
// (25 s) and started again on the same port. The humans reload after each restart as a
// JupyterLab tab does (a fresh document from the server). Nothing the sidecar had when the
// server died may be lost or doubled:
//
//   - every cell an agent was told it inserted is there exactly once, unless it was deleted;
//     every cell an agent was told it deleted is gone; each source is the last one reported done
//     or one attempted after it;
//   - every keystroke the sidecar held just before a kill (read from it right before the
//     SIGKILL; typed ≥ 1 s before it, in practice) is there exactly once; keystrokes typed after
//     the last reload are there too; nothing is there twice;
//   - the sidecar, both humans, a fresh peer and the file on disk agree at the end.
//
// JCM_STORM_DURATION (90s in make test) makes it shorter for quick local runs.

const stormPath = "storm.ipynb"

var (
	humanCells = []string{"h0", "h1", "h2", "h3"}
	tokenRE    = regexp.MustCompile(`«[ah]\d+[kc]\d+»`)
)

type stormCell struct {
	id       string
	agent    int
	contents []string  // [0] inserted, then each rewrite attempted
	outs     []outcome // the outcome of each
	del      *outcome  // the delete's outcome, if one was tried
}

func (c *stormCell) promised() bool { return c.outs[0] == outOK || c.outs[0] == outUnconfirmed }

// live: the agent may still work with it (inserted, not deleted, as far as it was told).
func (c *stormCell) live() bool { return c.promised() && c.del == nil }

type keystroke struct {
	tok   string
	human int
	at    time.Time
	conn  int // the human's connection (reload) it was typed on
}

type stormKill struct {
	at      time.Time
	sidecar map[string]bool // tokens in the sidecar's replica right before the SIGKILL
	text    map[string]string
}

type stormLedger struct {
	mu    sync.Mutex
	cells map[string]*stormCell
	order []string
	keys  []keystroke
	calls map[string]*[4]int
	notes []string
	// lastConn[human]: when the human's last (re)connection finished, and its number;
	// connAt[human][n]: when connection n finished.
	lastConn   []time.Time
	lastConnNo []int
	connAt     [][]time.Time
}

func (l *stormLedger) count(tool string, o outcome, err string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls[tool] == nil {
		l.calls[tool] = &[4]int{}
	}
	l.calls[tool][o]++
	if o != outOK && len(l.notes) < 200 {
		l.notes = append(l.notes, fmt.Sprintf("%s %s: %s", tool, o, trim(err, 200)))
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

func TestStormWithCrashes(t *testing.T) {
	duration := envDuration(t, "JCM_STORM_DURATION", 90*time.Second)
	killEvery := envDuration(t, "JCM_STORM_KILL_EVERY", 25*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), duration+6*time.Minute)
	defer cancel()

	dir := t.TempDir()
	logDir, err := os.MkdirTemp("", "jcm-storm-")
	if err != nil {
		t.Fatal(err)
	}
	serverLog, err := os.Create(filepath.Join(logDir, "jupyter-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serverLog.Close() })
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: filepath.Join(dir, "root"), StateDir: filepath.Join(dir, "state"), Log: serverLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	initial := ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}}
	for _, id := range humanCells {
		initial.Cells = append(initial.Cells, ydoc.Cell{ID: id, Type: ydoc.CellMarkdown, Source: "notes " + id + ": "})
	}
	raw, _ := json.Marshal(initial.JSON())
	if err := srv.WriteFile(stormPath, raw); err != nil {
		t.Fatal(err)
	}
	sc, err := startSidecar(ctx, srv.URL, srv.Token, filepath.Join(logDir, "sidecar.log"),
		"MCP_RATE_LIMIT=0", "MCP_CALL_TIMEOUT=45s", "MCP_MAX_CONCURRENT=16")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sc.stop()
		if t.Failed() {
			t.Logf("logs kept: %s (sidecar.log, jupyter-server.log)", logDir)
		} else {
			_ = os.RemoveAll(logDir)
		}
	})
	newClient := func() *agent {
		a, err := newAgent(ctx, sc.URL, sc.Token, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.c.Close() })
		return a
	}
	observer := newClient()
	if _, err := readSidecar(ctx, observer); err != nil { // joins the room
		t.Fatal(err)
	}

	led := &stormLedger{cells: map[string]*stormCell{}, calls: map[string]*[4]int{}, lastConn: make([]time.Time, 2), lastConnNo: make([]int, 2), connAt: make([][]time.Time, 2)}
	loops, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		a := newClient()
		wg.Add(1)
		go func() { defer wg.Done(); stormAgent(loops, ctx, i, a, led) }()
	}
	humans := make([]*integration.Peer, 2)
	for j := range humans {
		p, err := integration.StartPeer()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		humans[j] = p
		if err := p.Connect(ctx, srv, stormPath, "notebook"); err != nil {
			t.Fatal(err)
		}
		led.lastConn[j] = time.Now()
		led.connAt[j] = []time.Time{led.lastConn[j]}
		wg.Add(1)
		go func() { defer wg.Done(); stormHuman(loops, ctx, j, p, srv, led) }()
	}

	start := time.Now()
	var kills []stormKill
	for k := 1; ; k++ {
		at := start.Add(time.Duration(k) * killEvery)
		if at.After(start.Add(duration - 5*time.Second)) {
			break
		}
		select {
		case <-time.After(time.Until(at)):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		nb, err := readSidecar(ctx, observer)
		if err != nil {
			t.Fatalf("reading the sidecar before kill %d: %v", k, err)
		}
		kills = append(kills, stormKill{at: time.Now(), sidecar: tokensIn(nb), text: nb.sources})
		srv.Kill()
		t.Logf("kill %d at %v: the sidecar held %d keystrokes and agent markers", k, time.Since(start).Round(time.Second), len(kills[len(kills)-1].sidecar))
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-time.After(time.Until(start.Add(duration))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	stopLoops()
	wg.Wait()
	end := time.Now()
	t.Logf("storm over after %v: %d kills", end.Sub(start).Round(time.Second), len(kills))

	if !sc.alive() {
		t.Fatalf("the sidecar process exited:\n%s", sc.tail(4000))
	}
	final := settleStorm(t, ctx, srv, observer, humans)
	checkStorm(t, led, kills, final, end)
	if t.Failed() { // what the checks saw, for reading next to the logs
		dump := map[string]any{"final": final.sources, "order": final.ids}
		for k, kill := range kills {
			dump[fmt.Sprintf("kill%d", k+1)] = kill.text
		}
		b, _ := json.MarshalIndent(dump, "", " ")
		_ = os.WriteFile(filepath.Join(logDir, "storm.json"), b, 0o644)
	}
	rescued := sc.grepLog(20, "every change that had reached the sidecar was restored", "changed again since the restart", "were not restored")
	t.Logf("rescues logged: %d", len(rescued))
	for _, l := range rescued {
		t.Log(trim(l, 400))
	}
	if len(rescued) < len(kills) {
		t.Errorf("%d kills but %d rescues logged", len(kills), len(rescued))
	}
}

// stormAgent plays one agent until loops ends: insert, rewrite, move and delete its own cells.
func stormAgent(loops, ctx context.Context, i int, a *agent, led *stormLedger) {
	rng := rand.New(rand.NewPCG(uint64(i)+1, 77))
	n := 0
	for loops.Err() == nil {
		led.mu.Lock()
		var own []*stormCell
		for _, id := range led.order {
			if c := led.cells[id]; c.agent == i && c.live() {
				own = append(own, c)
			}
		}
		led.mu.Unlock()
		r := rng.IntN(100)
		switch {
		case len(own) < 3 || (r < 35 && len(own) < 12):
			n++
			id := fmt.Sprintf("a%dc%04d", i, n)
			c := &stormCell{id: id, agent: i, contents: []string{fmt.Sprintf("agent %d %s v0", i, marker(id))}}
			args := map[string]any{"path": stormPath, "cells": []any{map[string]any{"id": id, "cell_type": "markdown", "content": c.contents[0]}}}
			if len(own) > 0 && rng.IntN(2) == 0 {
				args["after_cell_id"] = own[rng.IntN(len(own))].id
			} else if rng.IntN(2) == 0 {
				args["after_cell_id"] = humanCells[rng.IntN(len(humanCells))]
			}
			res := a.call(ctx, "batch_insert_notebook_cells", args)
			led.count("insert", res.out, res.err)
			led.mu.Lock()
			c.outs = []outcome{res.out}
			led.cells[id] = c
			led.order = append(led.order, id)
			led.mu.Unlock()
		case r < 65:
			c := own[rng.IntN(len(own))]
			content := fmt.Sprintf("agent %d %s v%d", i, marker(c.id), len(c.contents))
			res := a.call(ctx, "batch_update_notebook_cells", map[string]any{"path": stormPath, "updates": []any{map[string]any{"cell_id": c.id, "content": content}}})
			led.count("rewrite", res.out, res.err)
			led.mu.Lock()
			c.contents = append(c.contents, content)
			c.outs = append(c.outs, res.out)
			led.mu.Unlock()
		case r < 80:
			c := own[rng.IntN(len(own))]
			args := map[string]any{"path": stormPath, "cell_ids": []any{c.id}}
			anchor := humanCells[rng.IntN(len(humanCells))]
			if o := own[rng.IntN(len(own))]; o != c && rng.IntN(2) == 0 {
				anchor = o.id
			}
			if rng.IntN(2) == 0 {
				args["after_cell_id"] = anchor
			} else {
				args["before_cell_id"] = anchor
			}
			res := a.call(ctx, "move_notebook_cells", args)
			led.count("move", res.out, res.err)
		default:
			c := own[rng.IntN(len(own))]
			res := a.call(ctx, "batch_delete_notebook_cells", map[string]any{"path": stormPath, "cell_ids": []any{c.id}})
			led.count("delete", res.out, res.err)
			led.mu.Lock()
			o := res.out
			c.del = &o
			led.mu.Unlock()
		}
		select {
		case <-loops.Done():
		case <-time.After(time.Duration(10+rng.IntN(40)) * time.Millisecond):
		}
	}
}

// stormHuman types a keystroke (a unique token, at a token boundary) into an original cell every
// 50 ms until loops ends, and reloads after the server restarts, as a JupyterLab tab does.
func stormHuman(loops, ctx context.Context, j int, p *integration.Peer, srv *integration.JupyterServer, led *stormLedger) {
	rng := rand.New(rand.NewPCG(uint64(j)+100, 99))
	const typeCode = `
const cell = cells.toArray().find(c => c.get('id') === args.cell)
if (!cell) return 'no cell'
const t = cell.get('source')
const s = t.toString()
const at = [s.length]
for (let i = s.indexOf('»'); i >= 0; i = s.indexOf('»', i + 1)) at.push(i + 1)
const pos = at[Math.floor(args.r * at.length)]
t.insert(pos, args.tok)
return 'ok'`
	conn := 0
	for k := 0; loops.Err() == nil; {
		select {
		case <-loops.Done():
			return
		case ev := <-p.Events():
			if ev.Event != "close" {
				continue
			}
			// The tab lost the server: reload once it answers again.
			for loops.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := p.Connect(cctx, srv, stormPath, "notebook")
				cancel()
				if err == nil {
					for len(p.Events()) > 0 { // closes of the attempts that failed
						<-p.Events()
					}
					break
				}
				select {
				case <-loops.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
			conn++
			led.mu.Lock()
			led.lastConn[j], led.lastConnNo[j] = time.Now(), conn
			led.connAt[j] = append(led.connAt[j], led.lastConn[j])
			led.mu.Unlock()
			continue
		case <-time.After(50 * time.Millisecond):
		}
		k++
		tok := fmt.Sprintf("«h%dk%05d»", j, k)
		var res struct {
			Result string `json:"result"`
		}
		at := time.Now()
		err := p.Call(ctx, "transact", map[string]any{"code": typeCode, "args": map[string]any{"cell": humanCells[rng.IntN(len(humanCells))], "tok": tok, "r": rng.Float64()}}, &res)
		if err == nil && res.Result == "ok" {
			led.mu.Lock()
			led.keys = append(led.keys, keystroke{tok: tok, human: j, at: at, conn: conn})
			led.mu.Unlock()
		}
	}
}

type stormNotebook struct {
	ids     []string
	sources map[string]string
	text    string // every source, joined
}

func tokensIn(nb stormNotebook) map[string]bool {
	out := map[string]bool{}
	for _, tok := range tokenRE.FindAllString(nb.text, -1) {
		out[tok] = true
	}
	return out
}

// readSidecar reads the sidecar's replica through get_notebook (whole, not cut).
func readSidecar(ctx context.Context, a *agent) (stormNotebook, error) {
	res := a.call(ctx, "get_notebook", map[string]any{"format": "json", "path": stormPath, "max_content_length": 5000000, "max_tokens": 1000000, "max_output_chars": 1000})
	if res.out != outOK {
		return stormNotebook{}, fmt.Errorf("get_notebook: %s %s", res.out, res.err)
	}
	if res.data["truncated"] != nil {
		return stormNotebook{}, fmt.Errorf("get_notebook was cut: %v", res.data["truncated"])
	}
	cells, _ := res.data["cells"].([]any)
	var nb stormNotebook
	nb.sources = map[string]string{}
	var all []string
	for _, c := range cells {
		m, _ := c.(map[string]any)
		id, _ := m["id"].(string)
		src, _ := m["source"].(string)
		nb.ids = append(nb.ids, id)
		nb.sources[id] = src
		all = append(all, src)
	}
	nb.text = strings.Join(all, "\n")
	return nb, nil
}

func fromCells(ids, sources []string) stormNotebook {
	nb := stormNotebook{ids: ids, sources: map[string]string{}}
	for i, id := range ids {
		nb.sources[id] = sources[i]
	}
	nb.text = strings.Join(sources, "\n")
	return nb
}

func sameNotebook(a, b stormNotebook) bool {
	if !slices.Equal(a.ids, b.ids) {
		return false
	}
	for id, s := range a.sources {
		if b.sources[id] != s {
			return false
		}
	}
	return true
}

func diffNotebooks(a, b stormNotebook) string {
	if !slices.Equal(a.ids, b.ids) {
		return fmt.Sprintf("cells %v vs %v", a.ids, b.ids)
	}
	for _, id := range a.ids {
		if a.sources[id] != b.sources[id] {
			return fmt.Sprintf("cell %s: %q vs %q", id, trim(a.sources[id], 300), trim(b.sources[id], 300))
		}
	}
	return "same"
}

// settleStorm waits until the sidecar, the humans, a fresh peer and the file agree, and returns
// what they hold.
func settleStorm(t *testing.T, ctx context.Context, srv *integration.JupyterServer, observer *agent, humans []*integration.Peer) stormNotebook {
	t.Helper()
	fresh, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Connect(ctx, srv, stormPath, "notebook"); err != nil {
		t.Fatal(err)
	}
	peerNB := func(p *integration.Peer) (stormNotebook, error) {
		snap, err := p.Snapshot(ctx)
		if err != nil {
			return stormNotebook{}, err
		}
		var ids, srcs []string
		for _, c := range snap.Cells {
			ids, srcs = append(ids, c.ID), append(srcs, c.Source)
		}
		return fromCells(ids, srcs), nil
	}
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		side, err := readSidecar(ctx, observer)
		if err != nil {
			t.Fatal(err)
		}
		agree := true
		last = ""
		views := map[string]*integration.Peer{"human 0": humans[0], "human 1": humans[1], "fresh peer": fresh}
		names := []string{"human 0", "human 1", "fresh peer"}
		for _, name := range names {
			nb, err := peerNB(views[name])
			if err != nil {
				t.Fatal(err)
			}
			if !sameNotebook(side, nb) {
				agree = false
				last = name + ": " + diffNotebooks(side, nb)
				break
			}
		}
		if agree {
			b, err := srv.ReadFile(stormPath)
			if err != nil {
				t.Fatal(err)
			}
			disk, err := ydoc.ParseNBFormat(b)
			if err != nil {
				t.Fatal(err)
			}
			var ids, srcs []string
			for _, c := range disk.Cells {
				ids, srcs = append(ids, c.ID), append(srcs, c.Source)
			}
			d := fromCells(ids, srcs)
			if sameNotebook(side, d) {
				return side
			}
			last = "disk: " + diffNotebooks(side, d)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas and the file do not agree 60 s after the storm: sidecar vs %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func checkStorm(t *testing.T, led *stormLedger, kills []stormKill, final stormNotebook, end time.Time) {
	t.Helper()
	led.mu.Lock()
	defer led.mu.Unlock()
	present := map[string]int{}
	for _, id := range final.ids {
		present[id]++
	}
	for _, id := range humanCells {
		if present[id] != 1 {
			t.Errorf("original cell %s present %d times", id, present[id])
		}
	}
	var inserted, deleted, lost, doubled, back, badSource, extra int
	for _, id := range final.ids {
		if led.cells[id] == nil && !slices.Contains(humanCells, id) {
			extra++
			t.Errorf("cell %s is in the notebook but nobody inserted it: %q", id, trim(final.sources[id], 200))
		}
	}
	for _, id := range led.order {
		c := led.cells[id]
		n := present[id]
		if c.promised() {
			inserted++
		}
		switch {
		case n > 1:
			doubled++
			t.Errorf("DOUBLED: agent cell %s present %d times", id, n)
		case c.del != nil && *c.del == outOK && n > 0:
			back++
			t.Errorf("DELETED CELL BACK: %s (its delete was reported done)", id)
		case c.del != nil && *c.del == outOK:
			deleted++
		case c.promised() && c.del == nil && n == 0:
			lost++
			t.Errorf("LOST: agent cell %s (insert %s) is missing", id, c.outs[0])
		case c.outs[0] == outWithdrawn && n > 0:
			t.Errorf("cell %s is present although its insert was withdrawn", id)
		}
		if n == 1 {
			// The source is the last write reported done, or one attempted after it.
			lastOK := -1
			for k, o := range c.outs {
				if o == outOK {
					lastOK = k
				}
			}
			ok := false
			for k := max(lastOK, 0); k < len(c.contents); k++ {
				if final.sources[id] == c.contents[k] {
					ok = true
				}
			}
			if !ok {
				badSource++
				t.Errorf("agent cell %s: source %q is not its last confirmed write %q nor a later one", id, trim(final.sources[id], 200), c.contents[max(lastOK, 0)])
			}
		}
	}
	// Keystrokes and agent markers: never twice.
	counts := map[string]int{}
	for _, tok := range tokenRE.FindAllString(final.text, -1) {
		counts[tok]++
	}
	for tok, n := range counts {
		if n > 1 {
			doubled++
			t.Errorf("DOUBLED: %s appears %d times", tok, n)
		}
	}
	// Every keystroke the sidecar held before a kill is there; those typed ≥ 1 s before it are the
	// acceptance number.
	// A keystroke typed on a connection a kill had already dropped (before the human noticed)
	// never left the tab.
	dead := func(key keystroke) bool {
		since := led.connAt[key.human][key.conn]
		for _, k := range kills {
			if k.at.After(since) && !k.at.After(key.at) {
				return true
			}
		}
		return false
	}
	var heldLost, held1s, typed1s, notReached, deadTyped int
	for k, kill := range kills {
		var missing []string
		for tok := range kill.sidecar {
			if !strings.HasPrefix(tok, "«h") {
				continue
			}
			if counts[tok] == 0 {
				missing = append(missing, tok)
			}
		}
		sort.Strings(missing)
		heldLost += len(missing)
		if len(missing) > 0 {
			t.Errorf("LOST: %d keystrokes the sidecar held before kill %d are gone: %v", len(missing), k+1, trim(strings.Join(missing, " "), 400))
		}
		prev := time.Time{}
		if k > 0 {
			prev = kills[k-1].at
		}
		for _, key := range led.keys {
			if key.at.After(prev) && key.at.Before(kill.at.Add(-time.Second)) {
				if dead(key) {
					deadTyped++
					continue
				}
				typed1s++
				if kill.sidecar[key.tok] {
					held1s++
				} else if counts[key.tok] == 0 {
					notReached++
				}
			}
		}
	}
	// Keystrokes typed on the humans' last connection, a second before the end: all there.
	var lastPhase, lastPhaseLost int
	for _, key := range led.keys {
		if key.conn == led.lastConnNo[key.human] && key.at.After(led.lastConn[key.human]) && key.at.Before(end.Add(-time.Second)) {
			lastPhase++
			if counts[key.tok] != 1 {
				lastPhaseLost++
				t.Errorf("LOST: keystroke %s typed at %s after the last reload (%s, connection %d)", key.tok,
					key.at.Format("15:04:05.000"), led.lastConn[key.human].Format("15:04:05.000"), key.conn)
			}
		}
	}
	for k, kill := range kills {
		t.Logf("kill %d at %s", k+1, kill.at.Format("15:04:05.000"))
	}
	var calls []string
	tools := make([]string, 0, len(led.calls))
	for tool := range led.calls {
		tools = append(tools, tool)
	}
	sort.Strings(tools)
	for _, tool := range tools {
		n := led.calls[tool]
		calls = append(calls, fmt.Sprintf("%s ok=%d unconfirmed=%d withdrawn=%d failed=%d", tool, n[outOK], n[outUnconfirmed], n[outWithdrawn], n[outFailed]))
	}
	t.Logf("agents: %d cells inserted (reported done or promised), %d deleted, %d live at the end; lost %d, doubled %d, deleted-but-back %d, wrong source %d, unknown %d",
		inserted, deleted, len(final.ids)-len(humanCells), lost, doubled, back, badSource, extra)
	t.Logf("humans: %d keystrokes typed (%d of them into a tab whose server had just been killed); %d typed ≥ 1 s before a kill on a live connection, %d of them held by the sidecar at the kill (%d not held and gone: they reached a server that died before the sidecar was back); %d held keystrokes lost; %d typed after the last reload, %d lost",
		len(led.keys), deadTyped, typed1s, held1s, notReached, heldLost, lastPhase, lastPhaseLost)
	t.Logf("calls:\n  %s", strings.Join(calls, "\n  "))
	if testing.Verbose() {
		for _, n := range led.notes {
			t.Log(n)
		}
	}
}
