//go:build integration

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// check settles the system after the last fault and compares what the agent was told with what
// an independent peer and the file on disk hold.
func (h *harness) check(ctx context.Context, initial ydoc.Notebook) {
	t := h.t
	// The same process answers, over the same MCP session: it recovered without a restart.
	if !h.sc.alive() {
		t.Fatalf("the sidecar process %d exited during the faults:\n%s", h.sc.Pid, h.sc.tail(4000))
	}
	if res := h.agent.call(ctx, "get_notebook", map[string]any{"path": notebook, "format": "outline"}); res.out != outOK {
		t.Fatalf("the sidecar does not answer after the last fault: %s %s", res.out, res.err)
	}

	// Runs still going when their call returned: wait for their end (bounded by the tool).
	for _, id := range h.led.order {
		c := h.led.cells[id]
		if c.jobID == "" || (c.jobStatus != "running" && c.jobStatus != "queued") {
			continue
		}
		res := h.agent.call(ctx, "get_execution", map[string]any{"job_id": c.jobID, "timeout": 10})
		h.led.count("get_execution", res.out, res.err, -1)
		if res.out == outOK {
			c.jobStatus, _ = res.data["status"].(string)
			if cells, _ := res.data["cells"].([]any); len(cells) == 1 {
				if m, _ := cells[0].(map[string]any); m != nil {
					c.cellStatus, _ = m["status"].(string)
				}
			}
		}
	}

	peer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.Connect(ctx, h.srv, notebook, "notebook"); err != nil {
		t.Fatal(err)
	}
	promised := h.led.promised()
	idsJSON, _ := json.Marshal(promised)
	// Edits the sidecar promised (unconfirmed) may still be on their way: wait for them, then for
	// every run to end and its marker to go (the executor writes idle and clears its marker).
	if _, err := peer.WaitFor(ctx, fmt.Sprintf(`(() => { const have = new Set(nb.cells.map(c => c.id)); return %s.every(id => have.has(id)) })()`, idsJSON), 20000); err != nil {
		t.Errorf("cells the tool reported inserted never all reached the independent peer (details below): %v", trim(err.Error(), 300))
	}
	settled := `nb.cells.every(c => c.execution_state !== 'running') && Object.keys(nb.state.jupyter_collab_mcp_runs || {}).length === 0`
	if _, err := peer.WaitFor(ctx, settled, 60000); err != nil {
		snap, _ := peer.Snapshot(ctx)
		var running []string
		for _, c := range snap.Cells {
			if c.ExecutionState == "running" {
				running = append(running, fmt.Sprintf("%s (execution_count %v)", c.ID, c.ExecutionCount))
			}
		}
		t.Errorf("cells still running 60 s after the last fault: %v; run markers: %v", running, snap.State["jupyter_collab_mcp_runs"])
	}
	// Let a moment pass for late duplicates (a replay after a reset) to show up too.
	time.Sleep(2 * time.Second)
	snap, err := peer.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	known := map[string]bool{}
	for _, c := range initial.Cells {
		known[c.ID] = true
	}
	for _, id := range h.outside {
		known[id] = true
	}
	present := map[string]int{}
	sourceOf := map[string]string{}
	for _, c := range snap.Cells {
		present[c.ID]++
		sourceOf[c.ID] = c.Source
		if !known[c.ID] && h.led.cells[c.ID] == nil {
			t.Errorf("cell %q is in the notebook but the agent never inserted it (source %q)", c.ID, trim(c.Source, 200))
		}
	}
	for _, c := range initial.Cells {
		if present[c.ID] != 1 {
			t.Errorf("fixture cell %s appears %d times", c.ID, present[c.ID])
		}
	}
	for _, id := range h.outside {
		if present[id] != 1 {
			t.Errorf("OUTSIDE CHANGE LOST: cell %s, added to the file while the server was down, appears %d times", id, present[id])
		}
	}
	checked := 0
	outcomes := map[outcome]int{}
	for _, id := range h.led.order {
		c := h.led.cells[id]
		n := present[id]
		ins := c.outs[0]
		outcomes[ins]++
		desc := fmt.Sprintf("cell %s (round %d, insert %s%s)", id, c.round, ins, errSuffix(c.errs[0]))
		switch {
		case n > 1:
			t.Errorf("DUPLICATED: %s appears %d times", desc, n)
		case n == 0 && (ins == outOK || ins == outUnconfirmed):
			why, unsaved := h.killAfter(c.ends[0], id, c.contents[0])
			h.lost(unsaved, "LOST: %s is missing%s", desc, why)
		case n == 1 && ins == outWithdrawn:
			t.Errorf("%s is present although the tool said nothing was changed", desc)
		}
		if n == 0 {
			continue
		}
		checked++
		h.checkSource(c, sourceOf[id])
	}
	// No marker in two cells: a cell copied under another id would show here.
	for _, id := range h.led.order {
		var holders []string
		for _, c := range snap.Cells {
			if strings.Contains(c.Source, marker(id)) {
				holders = append(holders, c.ID)
			}
		}
		if len(holders) > 1 {
			t.Errorf("DUPLICATED: marker %s is in %d cells: %v", marker(id), len(holders), holders)
		}
	}
	h.checkRuns()

	// The sidecar's own replica agrees with the peer.
	res := h.agent.call(ctx, "get_notebook", map[string]any{"format": "json", "path": notebook, "max_tokens": 2000000, "max_content_length": 5000000})
	if res.out != outOK {
		t.Errorf("get_notebook: %s %s", res.out, res.err)
	} else if got := replicaCells(res.data); !slices.Equal(got, cellsOf(snap)) {
		t.Errorf("the sidecar's replica differs from the peer's view:\n%s", diffLists("replica", got, cellsOf(snap)))
	}

	// The file on disk agrees with the peer once the server saved.
	want := cellsOf(snap)
	var disk []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := h.srv.ReadFile(notebook); err == nil {
			if nb, err := ydoc.ParseNBFormat(b); err == nil {
				disk = disk[:0]
				for _, c := range nb.Cells {
					disk = append(disk, c.ID+"\x00"+c.Source)
				}
				if slices.Equal(disk, want) {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("the file on disk never matched the peer within 30 s:\n%s", diffLists("disk", disk, want))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("checked %d cells the agent made (of %d in the notebook; inserts: %d ok, %d unconfirmed, %d withdrawn, %d failed); %d confirmed edits lost to a server killed before it saved them; test failed so far: %v",
		checked, len(snap.Cells), outcomes[outOK], outcomes[outUnconfirmed], outcomes[outWithdrawn], outcomes[outFailed], h.unsavedLosses, h.t.Failed())
	if h.t.Failed() {
		for _, l := range h.sc.grepLog(60, `"level":"warn"`, `"level":"error"`, "reset", "replay", "re-run", "rebuil") {
			t.Log("sidecar: " + l)
		}
		for _, l := range strings.Split(h.srv.Log(), "\n") {
			if strings.Contains(l, "store") || strings.Contains(l, "sync") || strings.Contains(l, "Saving") || strings.Contains(l, "saved") {
				t.Log("jupyter-server: " + trim(l, 300))
			}
		}
	}
}

// checkSource: the final source is the last content the tool confirmed (or promised), or one
// the agent attempted after it whose call failed; never one the tool said was not applied, and
// never a mix (an edit applied twice as a diff).
func (h *harness) checkSource(c *cellRec, got string) {
	last := -1
	for i, o := range c.outs {
		if o == outOK || o == outUnconfirmed {
			last = i
		}
	}
	allowed := map[string]bool{}
	for i := max(last, 0); i < len(c.contents); i++ {
		if i == last || c.outs[i] == outFailed || (last < 0 && c.outs[i] != outWithdrawn) {
			allowed[c.contents[i]] = true
		}
	}
	if allowed[got] {
		return
	}
	var hist []string
	for i, s := range c.contents {
		hist = append(hist, fmt.Sprintf("  %d. %s: %q%s", i, c.outs[i], trim(s, 120), errSuffix(c.errs[i])))
	}
	what, why, unsaved := "WRONG SOURCE", "", false
	for i, s := range c.contents {
		if s == got && c.outs[i] == outWithdrawn {
			what = "WITHDRAWN EDIT APPLIED"
		} else if s == got {
			what = "LOST EDIT (an older source came back)"
			why, unsaved = h.killAfter(c.ends[last], c.id, c.contents[last])
		}
	}
	if what == "LOST EDIT (an older source came back)" {
		h.lost(unsaved, "%s: cell %s (round %d) holds %q%s; what the agent did:\n%s", what, c.id, c.round, trim(got, 300), why, strings.Join(hist, "\n"))
		return
	}
	h.t.Errorf("%s: cell %s (round %d) holds %q%s; what the agent did:\n%s", what, c.id, c.round, trim(got, 300), why, strings.Join(hist, "\n"))
}

// checkRuns: each executed cell ran at most once, and exactly once when the tool said it ran.
func (h *harness) checkRuns() {
	b, err := os.ReadFile(h.ranFile)
	if err != nil && !os.IsNotExist(err) {
		h.t.Fatal(err)
	}
	runs := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			runs[l]++
		}
	}
	executed, ran := 0, 0
	for _, id := range h.led.order {
		c := h.led.cells[id]
		if !c.exec {
			continue
		}
		if c.execOut == outOK || c.execErr != "" {
			executed++
		}
		n := runs[id]
		ran += n
		switch {
		case n > 1:
			h.t.Errorf("RAN TWICE: cell %s (round %d) ran %d times (execute: %s, job %s, cell %s)", id, c.round, n, c.execOut, c.jobStatus, c.cellStatus)
		case n == 0 && c.cellStatus == "ok":
			h.t.Errorf("cell %s (round %d): the tool reported it ran (status ok) but its side effect never happened", id, c.round)
		}
	}
	h.t.Logf("executions: %d cells executed, %d side effects seen", executed, ran)
}

// killAfter says whether jupyter-server was killed after a call returned, and whether the file
// on disk held what the call wrote at that moment: a kill inside the server's autosave window
// takes with it what it had acknowledged but not yet saved.
// The second result is true for exactly that case.
func (h *harness) killAfter(end time.Time, id, source string) (string, bool) {
	var held []string
	for _, k := range h.kills {
		if !k.at.After(end) {
			continue
		}
		if src, ok := k.disk[id]; ok && src == source {
			held = append(held, strconv.Itoa(k.round))
			continue
		}
		disk := "did not hold the cell"
		if src, ok := k.disk[id]; ok {
			disk = fmt.Sprintf("held the cell with %q", trim(src, 80))
		}
		why := fmt.Sprintf(" (jupyter-server was SIGKILLed %v after the call returned, in round %d, and the file on disk %s", k.at.Sub(end).Round(time.Millisecond), k.round, disk)
		if len(held) > 0 { // saved, then gone from the file while the server ran
			return why + fmt.Sprintf("; at the kills of rounds %s the file still held it)", strings.Join(held, ", ")), false
		}
		return why + ")", true
	}
	if len(held) > 0 {
		return fmt.Sprintf(" (the file on disk held it at every later kill: rounds %s)", strings.Join(held, ", ")), false
	}
	return " (no server kill after the call returned)", false
}

// lost reports a confirmed edit that is gone; unsaved says the server was SIGKILLed before it
// saved the edit (counted apart: the crash rescue must bring such edits back, issue 20). No
// loss is tolerated, on any engine.
func (h *harness) lost(unsaved bool, format string, args ...any) {
	if unsaved {
		h.unsavedLosses++
	}
	h.t.Errorf(format, args...)
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + trim(e, 160)
}

func cellsOf(s integration.PeerSnapshot) []string {
	out := make([]string, len(s.Cells))
	for i, c := range s.Cells {
		out[i] = c.ID + "\x00" + c.Source
	}
	return out
}

// replicaCells are the "id\x00source" entries of a get_notebook (json) result.
func replicaCells(data map[string]any) []string {
	var out []string
	cells, _ := data["cells"].([]any)
	for _, c := range cells {
		if m, ok := c.(map[string]any); ok {
			id, _ := m["id"].(string)
			src, _ := m["source"].(string)
			out = append(out, id+"\x00"+src)
		}
	}
	return out
}

// diffLists names the first difference of two lists of "id\x00source" entries.
func diffLists(name string, got, want []string) string {
	show := func(s string) string { return strings.ReplaceAll(trim(s, 120), "\x00", " | ") }
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("%s has %d cells, peer %d; first missing: %s", name, len(got), len(want), show(want[i]))
		case i >= len(want):
			return fmt.Sprintf("%s has %d cells, peer %d; first extra: %s", name, len(got), len(want), show(got[i]))
		case got[i] != want[i]:
			return fmt.Sprintf("cell %d: %s %s, peer %s", i, name, show(got[i]), show(want[i]))
		}
	}
	return "equal"
}

// changeOutside adds a cell to the notebook file while jupyter-server is down, as a person or a
// tool editing the file outside Jupyter would; it returns what it did ("" when the file could not
// be read as a notebook: a kill in the middle of a save left it partly written).
func (h *harness) changeOutside(round int) string {
	b, err := h.srv.ReadFile(notebook)
	var nb map[string]any
	if err == nil {
		err = json.Unmarshal(b, &nb)
	}
	cells, ok := nb["cells"].([]any)
	if err != nil || !ok {
		h.t.Logf("round %d: no outside change: the file does not read as a notebook (%v)", round, err)
		return ""
	}
	id := fmt.Sprintf("outside-r%03d", round)
	nb["cells"] = append(cells, map[string]any{"cell_type": "markdown", "id": id, "metadata": map[string]any{},
		"source": "changed outside Jupyter " + marker(id)})
	out, err := json.MarshalIndent(nb, "", " ")
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.srv.WriteFile(notebook, out); err != nil {
		h.t.Fatal(err)
	}
	h.outside = append(h.outside, id)
	return "; the notebook changed outside Jupyter: cell " + id + " added"
}

// checkHumans checks what the humans typed and the agent's text markers against an independent
// peer, the sidecar and the file, and the crash rescues against the rounds.
func (h *harness) checkHumans(ctx context.Context, typingEnd time.Time) {
	t := h.t
	nbPeer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer nbPeer.Close()
	if err := nbPeer.Connect(ctx, h.srv, notebook, "notebook"); err != nil {
		t.Fatal(err)
	}
	textPeer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer textPeer.Close()
	if err := textPeer.Connect(ctx, h.srv, textDoc, "file"); err != nil {
		t.Fatal(err)
	}
	// The text: the peer, the sidecar and the file agree once the server saved.
	var text, why string
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := textPeer.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		text = snap.Text
		side, err := readDocument(ctx, h.observer, textDoc)
		disk, derr := h.srv.ReadFile(textDoc)
		switch {
		case err != nil:
			why = err.Error()
		case side != text:
			why = fmt.Sprintf("the sidecar's replica %q, the peer's %q", trim(side, 200), trim(text, 200))
		case derr != nil:
			why = derr.Error()
		case string(disk) != text:
			why = fmt.Sprintf("the file %q, the peer's %q", trim(string(disk), 200), trim(text, 200))
		default:
			why = ""
		}
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: the sidecar, an independent peer and the file do not agree 30 s after the last round: %s", textDoc, why)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	snap, err := nbPeer.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, c := range snap.Cells {
		sources = append(sources, c.Source)
	}
	counts := tokenCounts(humanTokenRE, strings.Join(sources, "\n"), text)
	st := checkKeys(t, h.keys, h.keyKills, counts, typingEnd, h.srv.Log())
	t.Logf("humans: %s", st)

	// The agent's text markers: each reported done is there once; none is there twice.
	markers := tokenCounts(regexp.MustCompile(`«r\d+-t»`), text)
	var done, lost, doubled int
	for _, tr := range h.texts {
		n := markers[tr.tok]
		switch {
		case n > 1:
			doubled++
			t.Errorf("DOUBLED: text marker %s (round %d, insert %s) is there %d times", tr.tok, tr.round, tr.out, n)
		case n == 0 && (tr.out == outOK || tr.out == outUnconfirmed):
			lost++
			t.Errorf("LOST: text marker %s (round %d, insert %s%s) is missing", tr.tok, tr.round, tr.out, errSuffix(tr.err))
		case n == 1 && tr.out == outWithdrawn:
			t.Errorf("text marker %s (round %d) is there although the tool said nothing was changed", tr.tok, tr.round)
		}
		if tr.out == outOK || tr.out == outUnconfirmed {
			done++
		}
	}
	t.Logf("text: %d markers appended (reported done or promised), %d lost, %d doubled", done, lost, doubled)

	// The crash rescues: each one restored, unless the file had changed outside Jupyter.
	var recs []rescueRec
	for _, rr := range h.rescues {
		recs = append(recs, rr.rescueRec)
		if !rr.restored && !rr.allowed {
			t.Errorf("RESCUE GAVE UP on %s after round %d (no outside change): %s", rr.path, rr.round, trim(rr.summary, 400))
		}
	}
	restored, gaveUp, gaveUpLossless := countRescues(recs)
	t.Logf("rescues: %d restored, %d gave up (%d of them with nothing lost), %d outside changes", restored, gaveUp+gaveUpLossless, gaveUpLossless, len(h.outside))
	if h.kinds[faultKill] > 0 && len(recs) == 0 {
		t.Errorf("%d server kills but no rescue logged (a line with \"restored\" and \"path\")", h.kinds[faultKill])
	}
}
