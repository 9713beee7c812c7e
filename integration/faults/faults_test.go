//go:build integration

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Randomized fault injection: each round the agent (mcp-go over Streamable HTTP, against the
// real binary) makes a batch of inserts and edits with unique markers, sometimes running a
// cell or appending a marker to a text file, while one fault hits: jupyter-server SIGKILLed and
// restarted (in a quarter of those rounds the notebook file is changed outside Jupyter while the
// server is down), every connection dropped, the kernel restarted through REST mid-run, or all
// traffic stalled past the sidecar's timeouts. Meanwhile two humans (independent yjs peers,
// straight to the server, reloading after a restart) type into the notebook's original cells and
// into the text file. Afterwards an independent Yjs peer and the files on disk must show every
// insert the tool reported done exactly once, no cell twice, no cell left running, each cell's
// source one the agent wrote last (or attempted after), every keystroke the sidecar held right
// before a kill exactly once (checkKeys), every outside change, peer, sidecar and disk equal,
// and the same sidecar process still answering. Every crash rescue must have restored, except
// in a round that changed the notebook outside Jupyter.

const (
	defaultSeed   = 20260601
	defaultRounds = 100

	// The sidecar's own timeouts, shortened so stalls can outlast them without making each
	// round long: a REST request gives up after jupyterTimeout, a tool call after callTimeout.
	jupyterTimeout = 3 * time.Second
	callTimeout    = 5 * time.Second
	execWait       = 3 // seconds execute_notebook_cell waits before returning a job_id

	notebook = "faults.ipynb"
	textDoc  = "faults.md"
	probeID  = "probe"
)

type faultKind int

const (
	faultKill faultKind = iota
	faultDrop
	faultKernelRestart
	faultStall
	numFaults
)

func (k faultKind) String() string {
	return [...]string{"kill-server", "drop-connections", "restart-kernel", "stall"}[k]
}

// cellRec is everything the agent tried with one cell: its insert and each later edit, in order.
type cellRec struct {
	id       string
	round    int
	exec     bool // a cell that is executed (code with a side effect)
	contents []string
	outs     []outcome
	errs     []string
	ends     []time.Time // when each call returned
	// execution (exec cells only)
	execOut    outcome
	execErr    string
	jobID      string
	jobStatus  string
	cellStatus string
}

type ledger struct {
	cells map[string]*cellRec
	order []string
	calls map[string]*[4]int // tool → count per outcome
	notes []string           // failed calls, for the log
}

func (l *ledger) count(tool string, o outcome, err string, round int) {
	if l.calls[tool] == nil {
		l.calls[tool] = &[4]int{}
	}
	l.calls[tool][o]++
	if o != outOK {
		l.notes = append(l.notes, fmt.Sprintf("round %d %s: %s: %s", round, tool, o, trim(err, 200)))
	}
}

func (l *ledger) add(c *cellRec) {
	l.cells[c.id] = c
	l.order = append(l.order, c.id)
}

// inserted are the cells whose insert was reported done (or promised: unconfirmed).
func (l *ledger) promised() []string {
	var out []string
	for _, id := range l.order {
		if o := l.cells[id].outs[0]; o == outOK || o == outUnconfirmed {
			out = append(out, id)
		}
	}
	return out
}

// marker is the unique text each source of a cell carries; the closing mark keeps r1c1 from
// matching inside r1c10.
func marker(id string) string { return "«" + id + "»" }

// faultKinds are the faults to draw from: all, or those named in JCM_FAULT_KINDS (comma
// separated), to look at one kind of fault on its own.
func faultKinds(t *testing.T) []faultKind {
	var all []faultKind
	for k := faultKind(0); k < numFaults; k++ {
		all = append(all, k)
	}
	v := os.Getenv("JCM_FAULT_KINDS")
	if v == "" {
		return all
	}
	var out []faultKind
	for _, name := range strings.Split(v, ",") {
		i := slices.IndexFunc(all, func(k faultKind) bool { return k.String() == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("JCM_FAULT_KINDS: unknown fault %q (known: %v)", name, all)
		}
		out = append(out, all[i])
	}
	t.Logf("only these faults: %v", out)
	return out
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

type harness struct {
	t        *testing.T
	srv      *integration.JupyterServer
	proxy    *Proxy
	sc       *sidecarProc
	agent    *agent
	observer *agent // reads the sidecar's replicas right before a kill
	led      *ledger
	ranFile  string // exec cells append their id here: how often each really ran
	kinds    [numFaults]int
	cutConns int // connections the drop faults cut
	kernels  int // kernel restarts that found a kernel
	ambient  int // rounds run with added latency
	kills    []killRec

	flagged       map[string]bool // cells watch already reported
	unsavedLosses int

	keys     *keyLedger
	typists  []*typist
	loops    context.Context // the typists' loops
	keyKills []keyKill
	texts    []textRec // markers the agent appended to the text file
	outside  []string  // cells added to the notebook file outside Jupyter, while the server was down
	// The crash rescues the sidecar logged (read after each round), and the log offset read to.
	rescues         []roundRescue
	logOffset       int64
	lastKill        int  // the last round that killed the server (-1: none yet)
	lastKillOutside bool // ...and changed the notebook outside Jupyter while it was down
}

// textRec is one marker appended to the text file.
type textRec struct {
	tok   string
	round int
	out   outcome
	err   string
}

// roundRescue is a rescue the sidecar logged, with the round after which it was read.
type roundRescue struct {
	rescueRec
	round   int
	allowed bool // a give-up here is allowed: the file was changed outside Jupyter
}

// killRec is one SIGKILL of jupyter-server and what the file on disk held at that moment.
type killRec struct {
	round int
	at    time.Time
	disk  map[string]string // cell id → source
}

func TestFaultInjection(t *testing.T) {
	seed := uint64(envInt(t, "JCM_FAULT_SEED", defaultSeed))
	rounds := envInt(t, "JCM_FAULT_ROUNDS", defaultRounds)
	t.Logf("fault injection: JCM_FAULT_SEED=%d JCM_FAULT_ROUNDS=%d", seed, rounds)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()

	dir := t.TempDir()
	serverArgs, sidecarEnv := engineOptions()
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: filepath.Join(dir, "root"), StateDir: filepath.Join(dir, "state"), ExtraArgs: serverArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	fixture, err := os.ReadFile(filepath.Join(repoRoot(t), "ydoc", "testdata", "jupyter_ydoc--nb0.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteFile(notebook, fixture); err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteFile(textDoc, []byte("# notes\n")); err != nil {
		t.Fatal(err)
	}
	initial, err := ydoc.ParseNBFormat(fixture)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := StartProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	logDir, err := os.MkdirTemp("", "jcm-faults-")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := startSidecar(ctx, proxy.URL(), srv.Token, filepath.Join(logDir, "sidecar.log"),
		append([]string{"JUPYTER_TIMEOUT=" + jupyterTimeout.String(), "MCP_CALL_TIMEOUT=" + callTimeout.String(), "MCP_TOOLSETS=default,documents,admin"}, sidecarEnv...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sc.stop()
		if t.Failed() {
			t.Logf("sidecar log kept: %s (seed %d)", sc.LogPath, seed)
			serverLog := filepath.Join(logDir, "jupyter-server.log")
			if err := os.WriteFile(serverLog, []byte(srv.Log()), 0o644); err == nil {
				t.Logf("jupyter-server log kept: %s", serverLog)
			}
		} else {
			_ = os.RemoveAll(logDir)
		}
	})
	a, err := newAgent(ctx, sc.URL, sc.Token, callTimeout+10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.c.Close() })

	observer, err := newAgent(ctx, sc.URL, sc.Token, callTimeout+10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = observer.c.Close() })
	h := &harness{t: t, srv: srv, proxy: proxy, sc: sc, agent: a, observer: observer, ranFile: filepath.Join(dir, "ran.txt"),
		led: &ledger{cells: map[string]*cellRec{}, calls: map[string]*[4]int{}}, flagged: map[string]bool{},
		keys: &keyLedger{}, lastKill: -1}
	// The probe cell: edited after every round until an edit goes through (recovery).
	probe := &cellRec{id: probeID, round: -1, contents: []string{"probe " + marker(probeID)}}
	res := a.call(ctx, "batch_insert_notebook_cells", map[string]any{"path": notebook, "exec": false,
		"cells": []any{map[string]any{"id": probeID, "cell_type": "markdown", "content": probe.contents[0]}}})
	if res.out != outOK {
		t.Fatalf("first insert: %s %s", res.out, res.err)
	}
	probe.outs, probe.errs, probe.ends = []outcome{outOK}, []string{""}, []time.Time{time.Now()}
	h.led.add(probe)
	if _, err := readDocument(ctx, observer, textDoc); err != nil { // the sidecar joins the text file
		t.Fatal(err)
	}

	// The humans: straight to the server, as a browser; they reload after a restart.
	var fixtureIDs []string
	for _, c := range initial.Cells {
		fixtureIDs = append(fixtureIDs, c.ID)
	}
	loops, stopLoops := context.WithCancel(ctx)
	h.loops = loops
	var typing sync.WaitGroup
	h.typists = []*typist{
		startTypist(t, ctx, h.keys, srv, notebook, "notebook", fixtureIDs, false, 100*time.Millisecond),
		startTypist(t, ctx, h.keys, srv, textDoc, "file", nil, false, 100*time.Millisecond),
	}
	for _, ty := range h.typists {
		typing.Add(1)
		go func() { defer typing.Done(); ty.run(loops, ctx) }()
	}
	stopTyping := func() { stopLoops(); typing.Wait() }
	defer stopTyping()

	kinds := faultKinds(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for r := 0; r < rounds; r++ {
		kind := kinds[rng.IntN(len(kinds))]
		h.kinds[kind]++
		h.round(ctx, r, kind, rng)
		if ctx.Err() != nil {
			t.Fatalf("out of time after round %d", r)
		}
	}
	stopTyping()
	typingEnd := time.Now()
	faultsDone := time.Since(start)

	h.check(ctx, initial)
	h.checkHumans(ctx, typingEnd)

	var calls []string
	ok, failed := 0, 0
	tools := make([]string, 0, len(h.led.calls))
	for tool := range h.led.calls {
		tools = append(tools, tool)
	}
	sort.Strings(tools)
	for _, tool := range tools {
		n := h.led.calls[tool]
		calls = append(calls, fmt.Sprintf("%s ok=%d unconfirmed=%d withdrawn=%d failed=%d", tool, n[outOK], n[outUnconfirmed], n[outWithdrawn], n[outFailed]))
		ok += n[outOK]
		failed += n[outUnconfirmed] + n[outWithdrawn] + n[outFailed]
	}
	t.Logf("seed %d, %d rounds in %v (checks done at %v): %s=%d %s=%d %s=%d %s=%d; %d rounds with added latency; %d connections cut; %d kernel restarts hit a kernel",
		seed, rounds, faultsDone.Round(time.Second), time.Since(start).Round(time.Second),
		faultKill, h.kinds[faultKill], faultDrop, h.kinds[faultDrop], faultKernelRestart, h.kinds[faultKernelRestart], faultStall, h.kinds[faultStall],
		h.ambient, h.cutConns, h.kernels)
	t.Logf("calls: %d ok, %d failed (unconfirmed, withdrawn or failed):\n  %s", ok, failed, strings.Join(calls, "\n  "))
	if testing.Verbose() {
		for _, n := range h.led.notes {
			t.Log(n)
		}
	}
}

// op is one planned call of a round's batch.
type op struct {
	kind    string // insert, edit, exec
	cells   []*cellRec
	after   string // insert after this cell ("" = at the end)
	target  *cellRec
	content string
}

func (h *harness) round(ctx context.Context, r int, kind faultKind, rng *rand.Rand) {
	// Plan from the seed first, so one seed gives one plan whatever the timing.
	var okCells []*cellRec
	for _, id := range h.led.order {
		if c := h.led.cells[id]; !c.exec && id != probeID && c.outs[0] == outOK {
			okCells = append(okCells, c)
		}
	}
	var ops []op
	for i, n := 0, 1+rng.IntN(2); i < n; i++ {
		o := op{kind: "insert"}
		for j, m := 0, 1+rng.IntN(2); j < m; j++ {
			id := fmt.Sprintf("r%03d-i%d-c%d", r, i, j)
			src := "# inserted " + marker(id)
			if rng.IntN(2) == 0 {
				src = fmt.Sprintf("x = %q  # inserted %s", id, marker(id))
			}
			o.cells = append(o.cells, &cellRec{id: id, round: r, contents: []string{src}})
		}
		if len(okCells) > 0 && rng.IntN(2) == 0 {
			o.after = okCells[rng.IntN(len(okCells))].id
		}
		ops = append(ops, o)
	}
	for i, n := 0, 1+rng.IntN(2); i < n && len(okCells) > 0; i++ {
		c := okCells[rng.IntN(len(okCells))]
		ops = append(ops, op{kind: "edit", target: c, content: fmt.Sprintf("# edited in round %d (%d) %s", r, i, marker(c.id))})
	}
	if rng.IntN(2) == 0 {
		ops = append(ops, op{kind: "text", content: fmt.Sprintf("«r%03d-t»", r)})
	}
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	if kind == faultKernelRestart || rng.IntN(3) == 0 {
		id := fmt.Sprintf("r%03d-x", r)
		src := fmt.Sprintf("import time\nwith open(%q, 'a') as f:\n    f.write(%q)\ntime.sleep(0.6)\nprint(%q)  # %s",
			h.ranFile, id+"\n", id, marker(id))
		c := &cellRec{id: id, round: r, exec: true, contents: []string{src}}
		at := rng.IntN(len(ops) + 1)
		ops = slices.Insert(ops, at, op{kind: "insert", cells: []*cellRec{c}}, op{kind: "exec", target: c})
	}
	// Where the fault hits: when the run starts (a kernel restart mid-run), else before a random
	// call; then a random moment later.
	trigger := rng.IntN(len(ops))
	delay := time.Duration(rng.IntN(40)) * time.Millisecond
	if kind == faultKernelRestart {
		trigger = slices.IndexFunc(ops, func(o op) bool { return o.kind == "exec" })
		delay = time.Duration(100+rng.IntN(800)) * time.Millisecond
	}
	downFor := time.Duration(100+rng.IntN(900)) * time.Millisecond                   // kill: down before restarting
	stallFor := jupyterTimeout + time.Duration(1500+rng.IntN(2000))*time.Millisecond // past the REST timeout, mostly past the call timeout too
	outside := kind == faultKill && rng.IntN(4) == 0                                 // the notebook changed outside Jupyter while the server is down
	latency := time.Duration(0)
	if rng.IntN(4) == 0 {
		latency = time.Duration(2+rng.IntN(20)) * time.Millisecond
		h.ambient++
	}

	// On jupyter-server-documents 0.3.3 a connection dropped with updates queued can stop the room
	// for everybody until the server frees it, which it does only while nobody is in it
	// (docs/engines.md, "one orphaned update stops a room for good"): with a person in the room it
	// never recovers. The humans step out for the rounds that cut or stall connections there.
	if integration.DefaultEngine().Documents() && (kind == faultDrop || kind == faultStall) {
		for _, ty := range h.typists {
			ty.setAway(h.loops, true)
		}
		defer func() {
			for _, ty := range h.typists {
				ty.setAway(h.loops, false)
			}
		}()
	}
	h.proxy.SetDelay(latency)
	defer h.proxy.SetDelay(0)
	triggered := make(chan struct{})
	faultDone := make(chan string, 1)
	go func() {
		<-triggered
		time.Sleep(delay)
		faultDone <- h.inject(ctx, r, kind, downFor, stallFor, outside)
	}()
	fired := false
	for i, o := range ops {
		if i == trigger {
			close(triggered)
			fired = true
		}
		h.do(ctx, r, o)
	}
	if !fired {
		close(triggered)
	}
	what := <-faultDone
	h.t.Logf("round %d: %s %s; %d calls", r, kind, what, len(ops))
	h.recover(ctx, r)
	h.watch(ctx, r, kind)
	h.readRescues(ctx, r)
}

// readRescues reads the crash rescues the sidecar logged since the last round. A rescue of the
// text file can come after the notebook's: reading the text (which waits for its room to be
// synced) first lets it happen.
func (h *harness) readRescues(ctx context.Context, r int) {
	if _, err := readDocument(ctx, h.observer, textDoc); err != nil {
		h.t.Logf("round %d: reading %s: %v", r, textDoc, err)
	}
	recs, next := h.sc.rescueLog(h.logOffset)
	h.logOffset = next
	for _, rec := range recs {
		rr := roundRescue{rescueRec: rec, round: r, allowed: h.lastKillOutside && rec.path == notebook}
		h.rescues = append(h.rescues, rr)
		h.t.Logf("round %d: rescue of %s: restored=%v (last kill in round %d, file changed outside: %v): %s", r, rec.path, rec.restored, h.lastKill, h.lastKillOutside, trim(rec.summary, 300))
	}
}

// watch reads the sidecar's replica after each round and logs, once per cell, the round in which
// a cell the tool had confirmed went missing or got a source the agent never wrote. It fails
// nothing itself (the checks at the end do, against the independent peer); it says where a
// failure began.
func (h *harness) watch(ctx context.Context, r int, kind faultKind) {
	res := h.agent.call(ctx, "get_notebook", map[string]any{"format": "json", "path": notebook, "max_tokens": 2000000, "max_content_length": 5000000})
	if res.out != outOK {
		return
	}
	have := map[string]string{}
	for _, e := range replicaCells(res.data) {
		id, src, _ := strings.Cut(e, "\x00")
		have[id] = src
	}
	for _, id := range h.led.order {
		c := h.led.cells[id]
		if h.flagged[id] || c.outs[0] != outOK {
			continue
		}
		src, ok := have[id]
		switch {
		case !ok:
			h.flagged[id] = true
			h.t.Logf("round %d (%s): confirmed cell %s (round %d) is gone from the replica", r, kind, id, c.round)
		case !slices.Contains(c.contents, src):
			h.flagged[id] = true
			h.t.Logf("round %d (%s): cell %s (round %d) holds %q, a source the agent never wrote", r, kind, id, c.round, trim(src, 120))
		}
	}
}

// inject applies one fault and returns what it did.
func (h *harness) inject(ctx context.Context, round int, kind faultKind, downFor, stallFor time.Duration, outside bool) string {
	switch kind {
	case faultKill:
		held, err := heldBy(ctx, h.observer, humanTokenRE, []string{notebook}, []string{textDoc})
		if err != nil {
			h.t.Logf("round %d: reading the sidecar before the kill: %v (nothing counted as held)", round, err)
		}
		disk := map[string]string{}
		if b, err := h.srv.ReadFile(notebook); err == nil {
			if nb, err := ydoc.ParseNBFormat(b); err == nil {
				for _, c := range nb.Cells {
					disk[c.ID] = c.Source
				}
			}
		}
		h.srv.Kill()
		h.kills = append(h.kills, killRec{round: round, at: time.Now(), disk: disk})
		h.keyKills = append(h.keyKills, keyKill{at: time.Now(), held: held})
		h.lastKill, h.lastKillOutside = round, false
		changed := ""
		if outside {
			changed = h.changeOutside(round)
			h.lastKillOutside = changed != ""
		}
		time.Sleep(downFor)
		begin := time.Now()
		if err := h.srv.Restart(ctx); err != nil {
			h.t.Errorf("restart jupyter-server: %v", err)
			return "restart failed"
		}
		return fmt.Sprintf("(down %v, restart took %v%s; the sidecar held %d keystrokes)", downFor, time.Since(begin).Round(time.Millisecond), changed, len(held))
	case faultDrop:
		n := h.proxy.Cut()
		h.cutConns += n
		return fmt.Sprintf("(%d connections)", n)
	case faultKernelRestart:
		id, err := restartKernel(ctx, h.srv, notebook)
		if err != nil {
			return "failed: " + err.Error()
		}
		if id == "" {
			return "(no kernel yet)"
		}
		h.kernels++
		return "(kernel " + id[:8] + ")"
	case faultStall:
		h.proxy.Stall()
		time.Sleep(stallFor)
		h.proxy.Resume()
		return fmt.Sprintf("(%v)", stallFor)
	}
	return ""
}

// do runs one call and records what the tool said.
func (h *harness) do(ctx context.Context, r int, o op) {
	switch o.kind {
	case "insert":
		cells := make([]any, len(o.cells))
		for i, c := range o.cells {
			typ := "markdown"
			if c.exec || strings.HasPrefix(c.contents[0], "x =") {
				typ = "code"
			}
			cells[i] = map[string]any{"id": c.id, "cell_type": typ, "content": c.contents[0]}
		}
		args := map[string]any{"path": notebook, "exec": false, "cells": cells}
		if o.after != "" {
			args["after_cell_id"] = o.after
		}
		res := h.agent.call(ctx, "batch_insert_notebook_cells", args)
		h.led.count("batch_insert_notebook_cells", res.out, res.err, r)
		for _, c := range o.cells {
			c.outs, c.errs, c.ends = []outcome{res.out}, []string{res.err}, []time.Time{time.Now()}
			h.led.add(c)
		}
	case "edit":
		res := h.agent.call(ctx, "batch_update_notebook_cells", map[string]any{"path": notebook, "exec": false,
			"updates": []any{map[string]any{"cell_id": o.target.id, "content": o.content}}})
		h.led.count("batch_update_notebook_cells", res.out, res.err, r)
		o.target.contents = append(o.target.contents, o.content)
		o.target.outs = append(o.target.outs, res.out)
		o.target.errs = append(o.target.errs, res.err)
		o.target.ends = append(o.target.ends, time.Now())
	case "text":
		res := h.agent.call(ctx, "batch_insert_text", map[string]any{"path": textDoc, "operations": []any{map[string]any{"position": -1, "text": o.content}}})
		h.led.count("batch_insert_text", res.out, res.err, r)
		h.texts = append(h.texts, textRec{tok: o.content, round: r, out: res.out, err: res.err})
	case "exec":
		c := o.target
		if c.outs[0] != outOK { // its insert failed: running it would only measure that
			return
		}
		res := h.agent.call(ctx, "execute_notebook_cell", map[string]any{"path": notebook, "cell_id": c.id, "timeout": execWait})
		h.led.count("execute_notebook_cell", res.out, res.err, r)
		c.execOut, c.execErr = res.out, res.err
		if res.out == outOK {
			c.jobID, _ = res.data["job_id"].(string)
			c.jobStatus, _ = res.data["status"].(string)
			if cells, _ := res.data["cells"].([]any); len(cells) == 1 {
				if m, _ := cells[0].(map[string]any); m != nil {
					c.cellStatus, _ = m["status"].(string)
				}
			}
		}
	}
}

// recover edits the probe cell until an edit is confirmed: the sidecar is back. On
// jupyter-server-documents that can take two unanswered handshakes (30 s each), the sidecar's
// stay away from a dead room (15 s here) and the server freeing it.
func (h *harness) recover(ctx context.Context, r int) {
	probe := h.led.cells[probeID]
	limit := 90 * time.Second
	if integration.DefaultEngine().Documents() {
		limit = 150 * time.Second
	}
	deadline := time.Now().Add(limit)
	for i := 0; ; i++ {
		content := fmt.Sprintf("probe after round %d, try %d %s", r, i, marker(probeID))
		res := h.agent.call(ctx, "batch_update_notebook_cells", map[string]any{"path": notebook, "exec": false,
			"updates": []any{map[string]any{"cell_id": probeID, "content": content}}})
		h.led.count("batch_update_notebook_cells(probe)", res.out, res.err, r)
		probe.contents = append(probe.contents, content)
		probe.outs = append(probe.outs, res.out)
		probe.errs = append(probe.errs, res.err)
		probe.ends = append(probe.ends, time.Now())
		if res.out == outOK {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.t.Fatalf("round %d: the sidecar did not recover within %s (last: %s %s)\n%s", r, limit, res.out, res.err, h.sc.tail(4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func repoRoot(t *testing.T) string {
	root, err := integration.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
