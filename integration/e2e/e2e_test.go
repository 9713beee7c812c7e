//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The agent inserts and edits cells over MCP; the open page shows them without a reload.
func TestAgentEditsAppearLive(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := "live_edits.ipynb"
	notebookFixture(t, name, [2]string{"c1", "a = 1"})
	openNotebook(t, ctx, name)
	if err := env.browser.WaitFor(ctx, `cells.length === 1 && cells[0].source === 'a = 1'`, nil, 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}

	call(t, ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "after_cell_id": "c1", "exec": false, "cells": []any{
		map[string]any{"id": "agent-md", "cell_type": "markdown", "content": "## Inserted by the agent"},
		map[string]any{"id": "agent-code", "content": "b = a + 41\nprint(b)"},
	}})
	// A markdown cell may be shown rendered (no editor) or as source: accept either, but it must
	// be the agent's text, in the agent's position.
	if err := env.browser.WaitFor(ctx, `cells.length === 3 && cells[1].type === 'markdown' &&
		((cells[1].rendered ?? cells[1].source ?? '').includes('Inserted by the agent')) &&
		cells[2].type === 'code' && cells[2].source === 'b = a + 41\nprint(b)'`, nil, 20*time.Second, nil); err != nil {
		t.Fatalf("inserted cells not shown: %v", err)
	}

	call(t, ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{
		map[string]any{"cell_id": "c1", "content": "a = 1  # edited by the agent"},
		map[string]any{"cell_id": "agent-code", "content": "b = a + 41\nprint('b is', b)"},
	}})
	if err := env.browser.WaitFor(ctx, `cells.length === 3 && cells[0].source === 'a = 1  # edited by the agent' &&
		cells[2].source === "b = a + 41\nprint('b is', b)"`, nil, 20*time.Second, nil); err != nil {
		t.Fatalf("edits not shown: %v", err)
	}
	assertNotReloaded(t, ctx)
	screenshot(t, ctx, "01-agent-edits.png")
}

// The agent runs a cell: the page shows [*] while it runs, then its output and execution count.
func TestAgentExecutionShown(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := "execution.ipynb"
	notebookFixture(t, name,
		[2]string{"setup", "x = 6"},
		// The run must last long enough for [*] to be painted; the page records every prompt it
		// shows, so the check does not depend on catching the moment.
		[2]string{"slow", "import time\nprint('started', flush=True)\ntime.sleep(1.5)\nprint('answer', x * 7)"})
	openNotebook(t, ctx, name)
	waitKernelIdle(t, ctx)

	// Record each distinct prompt of the second cell as it changes.
	if err := env.browser.Eval(ctx, `
		const cell = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[1]
		window.__prompts = []
		const note = () => {
			const p = (cell.querySelector('.jp-InputPrompt')?.textContent ?? '').trim()
			if (window.__prompts[window.__prompts.length - 1] !== p) window.__prompts.push(p)
		}
		note()
		new MutationObserver(note).observe(cell, { subtree: true, childList: true, characterData: true })
		return null`, nil, nil); err != nil {
		t.Fatal(err)
	}

	res := call(t, ctx, "batch_execute_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"setup", "slow"}, "wait": false})
	jobID, _ := res["job_id"].(string)
	if jobID == "" {
		t.Fatalf("no job_id in %v", res)
	}
	if err := env.browser.WaitFor(ctx, `cells[1].prompt === '[*]:'`, nil, 60*time.Second, nil); err != nil {
		t.Fatalf("the running cell never showed [*]: %v", err)
	}
	screenshot(t, ctx, "02-running.png")
	var shown []PageCell
	if err := env.browser.WaitFor(ctx, `/^\[\d+\]:$/.test(cells[1].prompt) && cells[1].outputs.join('').includes('answer 42') && cells`,
		nil, 60*time.Second, &shown); err != nil {
		t.Fatalf("output and execution count never shown: %v", err)
	}
	out := strings.Join(shown[1].Outputs, "")
	if !strings.Contains(out, "started") || strings.Index(out, "started") > strings.Index(out, "answer 42") {
		t.Errorf("outputs shown %q, want 'started' then 'answer 42'", out)
	}
	if !regexp.MustCompile(`^\[\d+\]:$`).MatchString(shown[0].Prompt) {
		t.Errorf("first cell prompt %q, want an execution count", shown[0].Prompt)
	}

	// The page shows the count the tool reports.
	job := call(t, ctx, "get_execution", map[string]any{"job_id": jobID, "timeout": 30})
	count := findExecutionCount(job, "slow")
	if count == "" {
		t.Fatalf("no execution count for cell slow in %v", job)
	}
	if want := "[" + count + "]:"; shown[1].Prompt != want {
		t.Errorf("page shows %q, the tool reports execution count %s", shown[1].Prompt, count)
	}
	var prompts []string
	if err := env.browser.Eval(ctx, `return window.__prompts`, nil, &prompts); err != nil {
		t.Fatal(err)
	}
	star := indexOf(prompts, "[*]:")
	if star < 0 || star > indexOf(prompts, shown[1].Prompt) {
		t.Errorf("prompts shown in order %q: want [*]: before %s", prompts, shown[1].Prompt)
	}
	assertNotReloaded(t, ctx)
	screenshot(t, ctx, "02-executed.png")
}

// The agent is listed in the collaborators panel with its name, initials and colour, and its
// cursor is drawn in the cell where it put it.
func TestAgentPresenceAndCursor(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := "presence.ipynb"
	notebookFixture(t, name, [2]string{"p1", "first = 1"}, [2]string{"p2", "second_line_cell = 2\nvalue = 3"})
	call(t, ctx, "create_notebook_session", map[string]any{"path": name})
	openNotebook(t, ctx, name)

	if err := env.browser.Call(ctx, "click", map[string]any{"selector": `.jp-SideBar .lm-TabBar-tab[data-id="jp-collaboration-panel"]`}, nil); err != nil {
		t.Fatalf("open the collaboration panel: %v", err)
	}
	var listed struct {
		Name     string `json:"name"`
		Initials string `json:"initials"`
		Color    string `json:"color"`
	}
	if err := env.browser.WaitFor(ctx, `(() => {
		for (const c of document.querySelectorAll('.jp-CollaboratorsList .jp-Collaborator')) {
			const icon = c.querySelector('.jp-CollaboratorIcon')
			const name = icon?.nextElementSibling?.textContent ?? ''
			if (name.startsWith(arg)) return { name, initials: icon.textContent, color: icon.style.backgroundColor }
		}
		return null
	})()`, agentName, 45*time.Second, &listed); err != nil {
		t.Fatalf("agent not in the collaborators panel: %v", err)
	}
	if listed.Initials != agentInitials || listed.Color != agentColorRGB {
		t.Errorf("collaborators panel shows %+v, want initials %s colour %s", listed, agentInitials, agentColorRGB)
	}

	// The agent puts its cursor at line 2, column 3 of the second cell.
	call(t, ctx, "update_cursor_position", map[string]any{"document_path": name, "cell_id": "p2", "position": map[string]any{"line": 2, "column": 3}})
	var cursor struct {
		Color     string  `json:"color"`
		Flag      string  `json:"flag"`
		DX        float64 `json:"dx"`
		DY        float64 `json:"dy"`
		Elsewhere int     `json:"elsewhere"`
	}
	// The caret must be in the second cell, at the spot of column 3 of line 2 (measured with a DOM
	// range over the line's text), drawn in the agent's colour, with its name flag.
	if err := env.browser.WaitFor(ctx, `(() => {
		const all = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')]
		const caret = all[1].querySelector('.jp-remote-cursor')
		if (!caret) return null
		const line = all[1].querySelectorAll('.cm-content > .cm-line')[1]
		const text = line?.firstChild
		if (!text) return null
		const r = document.createRange()
		let node = line
		while (node.firstChild) node = node.firstChild
		r.setStart(node, 2); r.setEnd(node, 2)
		const want = r.getBoundingClientRect(), got = caret.getBoundingClientRect()
		// The name flag is a CodeMirror tooltip, which JupyterLab may attach outside the cell:
		// take the flag drawn nearest above the caret.
		let flag = '', best = Infinity
		for (const f of document.querySelectorAll('.jp-remote-userFlag')) {
			const fr = f.getBoundingClientRect()
			const d = Math.abs(fr.left - got.left) + Math.abs(fr.bottom - got.top)
			if (d < best) { best = d; flag = f.querySelector('.jp-remote-userFlag-name')?.textContent ?? '' }
		}
		if (best > 40) flag = ''
		const elsewhere = all.filter((c, i) => i !== 1 && c.querySelector('.jp-remote-cursor')).length
		return { color: caret.style.borderLeftColor, flag, dx: got.left - want.left, dy: (got.top + got.bottom) / 2 - (want.top + want.bottom) / 2, elsewhere }
	})()`, nil, 30*time.Second, &cursor); err != nil {
		t.Fatalf("agent cursor not drawn in the cell: %v", err)
	}
	t.Logf("agent cursor: colour %s, flag %q, %.1f px right and %.1f px below line 2 column 3", cursor.Color, cursor.Flag, cursor.DX, cursor.DY)
	if cursor.Color != agentColorRGB {
		t.Errorf("cursor colour %q, want %s", cursor.Color, agentColorRGB)
	}
	if !strings.HasPrefix(cursor.Flag, agentName) {
		t.Errorf("cursor flag %q, want the agent's name %q", cursor.Flag, agentName)
	}
	if cursor.DX < -3 || cursor.DX > 3 || cursor.DY < -4 || cursor.DY > 4 {
		t.Errorf("cursor %.1f px right and %.1f px below line 2 column 3", cursor.DX, cursor.DY)
	}
	if cursor.Elsewhere != 0 {
		t.Errorf("a remote cursor is drawn in %d other cells", cursor.Elsewhere)
	}
	screenshot(t, ctx, "03-presence.png")
}

// The human types in a cell while the agent edits the same cell: both contributions survive, in
// the page, in the sidecar's replica and in the saved file.
func TestConcurrentEditsSameCell(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := "concurrent.ipynb"
	const initial = "total = 0\nfor i in range(3):\n    total += i\nprint(total)"
	notebookFixture(t, name, [2]string{"shared", initial})
	openNotebook(t, ctx, name)
	if err := env.browser.WaitFor(ctx, `cells[0].source === arg`, initial, 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}

	// The human appends a comment to the last line, one key every 40 ms (about 0.9 s of typing).
	const typed = "  # typed by the human"
	typing := make(chan error, 1)
	go func() { typing <- env.browser.Type(ctx, 0, typed, 40*time.Millisecond) }()

	// The agent waits until the human's first keystrokes reached its replica, then rewrites the
	// first line several times while the typing goes on. Each write is checked against the source
	// it was computed from (expected_source_hash) and redone on a conflict, as an agent should.
	deadline := time.Now().Add(30 * time.Second)
	for {
		src, _ := replicaSources(t, ctx, name)
		if strings.Contains(src["shared"], "  #") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the human's typing never reached the replica: %q", src["shared"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	var agentWrites, conflicts int
	var lastWrite time.Time
	const agentEdits = 5
	for i := 1; i <= agentEdits; i++ {
		for attempt := 0; ; attempt++ {
			if attempt >= 20 {
				t.Fatalf("agent edit %d: 20 conflicts in a row", i)
			}
			nb := call(t, ctx, "get_notebook", map[string]any{"format": "json", "path": name})
			cell := cellByID(nb, "shared")
			src, _ := cell["source"].(string)
			hash, _ := cell["source_hash"].(string)
			lines := strings.SplitN(src, "\n", 2)
			lines[0] = fmt.Sprintf("total = %d  # agent edit %d", i*100, i)
			_, err := callRaw(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{
				map[string]any{"cell_id": "shared", "content": strings.Join(lines, "\n"), "expected_source_hash": hash}}})
			if err == nil {
				agentWrites++
				lastWrite = time.Now()
				break
			}
			if !strings.Contains(strings.ToLower(err.Error()), "conflict") && !strings.Contains(err.Error(), "changed") {
				t.Fatalf("agent edit %d: %v", i, err)
			}
			conflicts++
		}
	}
	if err := <-typing; err != nil {
		t.Fatalf("typing: %v", err)
	}
	typingDone := time.Now()
	t.Logf("agent wrote %d times (%d conflicts redone) while the human typed; last agent write %v before the last keystroke returned",
		agentWrites, conflicts, typingDone.Sub(lastWrite).Round(time.Millisecond))
	if !lastWrite.Before(typingDone) {
		t.Errorf("the agent's edits did not overlap the typing (last write %v after it ended)", lastWrite.Sub(typingDone))
	}

	want := fmt.Sprintf("total = %d  # agent edit %d\n", agentEdits*100, agentEdits) + "for i in range(3):\n    total += i\nprint(total)" + typed
	if err := env.browser.WaitFor(ctx, `cells[0].source === arg`, want, 20*time.Second, nil); err != nil {
		t.Fatalf("page: %v", err)
	}
	var src map[string]string
	deadline = time.Now().Add(20 * time.Second)
	for {
		src, _ = replicaSources(t, ctx, name)
		if src["shared"] == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if src["shared"] != want {
		t.Fatalf("replica has %q, want %q", src["shared"], want)
	}
	// The human saves (Ctrl+S in the notebook); the file must hold both contributions.
	if err := env.browser.Call(ctx, "press", map[string]any{"key": "Control+s"}, nil); err != nil {
		t.Fatal(err)
	}
	waitDisk(t, name, "both contributions", func(m map[string]string, _ []string) bool { return m["shared"] == want })
	screenshot(t, ctx, "04-concurrent.png")
}

// The agent proposes a change as a fork; the human accepts it from the page and sees it merged.
func TestForkAcceptedByHuman(t *testing.T) {
	if env.srv.Engine.Documents() {
		t.Skip("jupyter-server-documents has no fork API")
	}
	ctx := ctxT(t, 3*time.Minute)
	name := "fork.ipynb"
	notebookFixture(t, name, [2]string{"loop", "squares = []\nfor n in range(10):\n    squares.append(n * n)"})
	openNotebook(t, ctx, name)
	if err := env.browser.WaitFor(ctx, `cells.length === 1 && cells[0].source.startsWith('squares = []')`, nil, 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}

	fork := call(t, ctx, "fork_document", map[string]any{"path": name, "title": "Vectorise the loop"})
	forkID, _ := fork["fork_id"].(string)
	if forkID == "" {
		t.Fatalf("no fork_id in %v", fork)
	}
	const proposal = "squares = [n * n for n in range(10)]"
	call(t, ctx, "batch_update_notebook_cells", map[string]any{"path": name, "fork_id": forkID, "exec": false, "updates": []any{
		map[string]any{"cell_id": "loop", "content": proposal}}})
	call(t, ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "fork_id": forkID, "exec": false, "after_cell_id": "loop", "cells": []any{
		map[string]any{"id": "check", "content": "assert squares[3] == 9"}}})

	// The proposal is in the fork, not in the document the human looks at.
	if diff := call(t, ctx, "diff_fork", map[string]any{"path": name, "fork_id": forkID}); !strings.Contains(fmt.Sprint(diff), "range(10)]") {
		t.Errorf("diff_fork does not show the proposal: %v", diff)
	}
	cells, err := env.browser.Cells(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 1 || cells[0].Source == nil || *cells[0].Source == proposal {
		t.Fatalf("the page shows the fork's content before it was accepted: %+v", cells)
	}

	// The pinned stack ships no fork/suggestion UI, so the human accepts it the way a frontend
	// extension would: from the page, DELETE /api/collaboration/fork/{id}?merge=true with the
	// page's own credentials (cookie) and XSRF token.
	var status int
	if err := env.browser.Eval(ctx, `
		const xsrf = document.cookie.split('; ').find((c) => c.startsWith('_xsrf='))?.slice(6)
		if (!xsrf) throw new Error('no _xsrf cookie in the page')
		const r = await fetch('/api/collaboration/fork/' + encodeURIComponent(arg) + '?merge=true',
			{ method: 'DELETE', credentials: 'same-origin', headers: { 'X-XSRFToken': xsrf } })
		return r.status`, forkID, &status); err != nil {
		t.Fatal(err)
	}
	if status/100 != 2 {
		t.Fatalf("merge request from the page answered %d", status)
	}
	if err := env.browser.WaitFor(ctx, `cells.length === 2 && cells[0].source === arg && cells[1].source === 'assert squares[3] == 9'`,
		proposal, 20*time.Second, nil); err != nil {
		t.Fatalf("merged content not shown: %v", err)
	}
	assertNotReloaded(t, ctx)
	src, order := replicaSources(t, ctx, name)
	if len(order) != 2 || src["loop"] != proposal || src["check"] != "assert squares[3] == 9" {
		t.Errorf("replica after the merge: %v %v", order, src)
	}
	waitDisk(t, name, "the merged fork", func(m map[string]string, o []string) bool {
		return len(o) == 2 && m["loop"] == proposal && m["check"] == "assert squares[3] == 9"
	})
	forks := call(t, ctx, "list_forks", map[string]any{"path": name})
	if strings.Contains(fmt.Sprint(forks), forkID) {
		t.Errorf("the accepted fork is still listed: %v", forks)
	}
	screenshot(t, ctx, "05-fork-merged.png")
}

func cellByID(nb map[string]any, id string) map[string]any {
	cells, _ := nb["cells"].([]any)
	for _, c := range cells {
		if m, _ := c.(map[string]any); m["id"] == id {
			return m
		}
	}
	return nil
}

// findExecutionCount finds the execution count reported for a cell in a get_execution result.
func findExecutionCount(job map[string]any, cellID string) string {
	var found string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["cell_id"] == cellID {
				if n, ok := x["execution_count"].(float64); ok {
					found = fmt.Sprint(int(n))
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(job)
	return found
}

func indexOf(list []string, s string) int {
	for i, e := range list {
		if e == s {
			return i
		}
	}
	return -1
}

// A person who opened the notebook before the agent joined it: the agent's first call lists them
// (from JupyterLab's global awareness, which the sidecar joined at start), with the notebook in
// front of them; their cursor comes with the room's awareness, at once when they type.
func TestAgentSeesHumanAlreadyInNotebook(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := "early_human.ipynb"
	notebookFixture(t, name, [2]string{"e1", "a = 1"}, [2]string{"e2", "b = 2"})
	openNotebook(t, ctx, name) // the human first; the agent has not touched this notebook
	if err := env.browser.WaitFor(ctx, `cells.length === 2`, nil, 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	// The tab's global state (documents, current) reaches the sidecar when JupyterLab sets it.
	time.Sleep(2 * time.Second)

	join := time.Now()
	users := call(t, ctx, "get_online_users", map[string]any{"document_path": name}) // joins the room
	took := time.Since(join)
	var human map[string]any
	list, _ := users["users"].([]any)
	for _, u := range list {
		if m, _ := u.(map[string]any); m["agent"] != true {
			human = m
		}
	}
	if human == nil || human["current"] != "notebook:"+name {
		t.Fatalf("the first get_online_users after the join (%v) does not list the person with the notebook in front of them: %v", took, users)
	}
	t.Logf("the person already in the notebook listed %v after the agent joined: %v", took.Round(time.Millisecond), human)

	// They type: their cursor reaches the agent with the keystroke.
	if err := env.browser.Type(ctx, 1, "3", 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cursors := call(t, ctx, "get_user_cursors", map[string]any{"document_path": name})
		b, _ := json.Marshal(cursors["cursors"])
		if strings.Contains(string(b), `"cell_id":"e2"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the person's cursor in e2 not known 20 s after they typed: %v", cursors)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
