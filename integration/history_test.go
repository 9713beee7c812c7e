//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Forks, history and undo against the real server, checked by the independent peer and on disk.

// A fork: edits and runs in it leave the notebook alone (the peer sees nothing); the diff names
// them; merging brings them into the notebook, for the peer and on disk; the fork is gone after.
func TestForkEditMerge(t *testing.T) {
	requireForks(t, shared)
	ctx := ctxT(t, 3*time.Minute)
	name := presenceNotebook(t)
	a := newAgent(t, shared)
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	out := a.ok(ctx, "fork_document", map[string]any{"path": name, "title": "agent's proposal"})
	fork, _ := out["fork_id"].(string)
	if fork == "" {
		t.Fatalf("fork_document = %v", out)
	}
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "fork_id": fork, "exec": false,
		"updates": []any{map[string]any{"cell_id": "c1", "content": "x = 10\ny = 20\nprint(x + y)\n"}}})
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "fork_id": fork, "after_cell_id": "c2", "exec": false,
		"cells": []any{map[string]any{"id": "new", "cell_type": "markdown", "content": "## proposed"}}})
	run := a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "fork_id": fork, "cell_id": "c1"})
	if !strings.Contains(fmt.Sprint(run["cells"]), "30") {
		t.Errorf("running a cell of the fork: %v", run)
	}
	// The human's notebook is untouched (nothing to wait for: give a wrong write time to show).
	time.Sleep(500 * time.Millisecond)
	snap := mustSnapshot(t, ctx, p)
	if len(snap.Cells) != 3 || snap.Cells[1].Source != "x = 1\ny = 2\nprint(x + y)\n" || len(snap.Cells[1].Outputs) != 0 {
		t.Fatalf("the fork's edits or outputs reached the notebook: %+v", snap.Cells)
	}
	// The human keeps working in the notebook meanwhile.
	if err := p.Transact(ctx, `cells.get(0).get('source').insert(0, '# human\n')`, nil); err != nil {
		t.Fatal(err)
	}
	diff := a.ok(ctx, "diff_fork", map[string]any{"path": name, "fork_id": fork})
	b, _ := json.Marshal(diff)
	if !strings.Contains(string(b), `"id":"new"`) || !strings.Contains(string(b), `+x = 10`) || !strings.Contains(fmt.Sprint(diff["summary"]), "added") {
		t.Errorf("diff_fork = %s", b)
	}
	forks := a.ok(ctx, "list_forks", map[string]any{"path": name})
	if forks["count"] != float64(1) || !strings.Contains(fmt.Sprint(forks["forks"]), "agent's proposal") {
		t.Errorf("list_forks = %v", forks)
	}

	merged := a.ok(ctx, "merge_document_fork", map[string]any{"path": name, "fork_id": fork})
	if !strings.Contains(fmt.Sprint(merged["merged"]), "added") {
		t.Errorf("merge_document_fork = %v", merged)
	}
	snap, err := p.WaitFor(ctx, `nb.cells.length === 4 && nb.cells[1].source === "x = 10\ny = 20\nprint(x + y)\n" && nb.cells[3].id === "new"`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(snap.Cells[0].Source, "# human\n") {
		t.Errorf("the human's concurrent edit was lost in the merge: %q", snap.Cells[0].Source)
	}
	waitDisk(t, shared, name, "the merged notebook", func(nb ydoc.Notebook) bool {
		return len(nb.Cells) == 4 && nb.Cells[3].ID == "new" && strings.HasPrefix(nb.Cells[1].Source, "x = 10")
	})
	if forks := a.ok(ctx, "list_forks", map[string]any{"path": name}); forks["count"] != float64(0) {
		t.Errorf("the merged fork is still listed: %v", forks)
	}
	out, res := a.call(ctx, "get_notebook", map[string]any{"format": "json", "path": name, "fork_id": fork})
	if !res.IsError || !strings.Contains(fmt.Sprint(out["error"]), "no longer exists") {
		t.Errorf("using a merged fork: %v", out)
	}
}

// Discarding leaves no trace; a synchronized fork follows the notebook; a suggestion fork carries
// the description jupyter-suggestions reads.
func TestForkDiscardSynchronizeSuggest(t *testing.T) {
	requireForks(t, shared)
	ctx := ctxT(t, 3*time.Minute)
	name := presenceNotebook(t)
	a := newAgent(t, shared)
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	before := mustSnapshot(t, ctx, p)

	fork := a.ok(ctx, "fork_document", map[string]any{"path": name})["fork_id"].(string)
	a.ok(ctx, "batch_delete_notebook_cells", map[string]any{"path": name, "fork_id": fork, "cell_ids": []any{"c0", "c2"}})
	a.ok(ctx, "discard_document_fork", map[string]any{"path": name, "fork_id": fork})
	time.Sleep(500 * time.Millisecond) // a window for a wrong merge to show
	if after := mustSnapshot(t, ctx, p); !jsonEq(peerSources(after), peerSources(before)) {
		t.Errorf("discarding changed the notebook: %v", peerSources(after))
	}
	if f := a.ok(ctx, "list_forks", map[string]any{"path": name}); f["count"] != float64(0) {
		t.Errorf("a discarded fork is listed: %v", f)
	}

	sync := a.ok(ctx, "fork_document", map[string]any{"path": name, "synchronize": true})["fork_id"].(string)
	if err := p.Transact(ctx, `cells.get(2).get('source').insert(0, '# from the notebook\n')`, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		nb := a.ok(ctx, "get_notebook", map[string]any{"format": "json", "path": name, "fork_id": sync})
		if strings.Contains(fmt.Sprint(nb["cells"]), "# from the notebook") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the synchronized fork never received the notebook's edit: %v", nb["cells"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.ok(ctx, "discard_document_fork", map[string]any{"path": name, "fork_id": sync})

	sug := a.ok(ctx, "fork_document", map[string]any{"path": name, "suggestion_for_cell": "c1"})
	list := a.ok(ctx, "list_forks", map[string]any{"path": name})
	b, _ := json.Marshal(list)
	if !strings.Contains(string(b), `"cell_id":"c1"`) || !strings.Contains(string(b), `"type":"CHANGE"`) {
		t.Errorf("list_forks of a suggestion: %s", b)
	}
	// The description as the extension parses it, straight from the server.
	room := mustRoom(t, ctx, a, name)
	raw, err := a.sc.client.ListForks(ctx, room.Info().RoomID)
	if err != nil {
		t.Fatal(err)
	}
	var desc map[string]any
	if err := json.Unmarshal([]byte(raw[sug["fork_id"].(string)].Description), &desc); err != nil {
		t.Fatalf("suggestion description is not JSON: %v", raw)
	}
	author, _ := desc["metadata"].(map[string]any)["author"].(map[string]any)
	if desc["cellId"] != "c1" || desc["path"] != name || desc["mimeType"] != "text/x-ipython" || desc["suggestionType"] != "CHANGE" || author["username"] != agentUsername {
		t.Errorf("suggestion description %v", desc)
	}
	if !raw[sug["fork_id"].(string)].Synchronize {
		t.Error("a suggestion fork does not follow the notebook (the extension makes them synchronized)")
	}
	a.ok(ctx, "discard_document_fork", map[string]any{"path": name, "fork_id": sug["fork_id"]})
	if out, res := a.call(ctx, "merge_document_fork", map[string]any{"path": name, "fork_id": "0123456789abcdef"}); !res.IsError || !strings.Contains(fmt.Sprint(out["error"]), "no longer exists") {
		t.Errorf("merging an unknown fork: %v", out)
	}
}

// The agent's edit, a human typing around it, undo: the agent's change goes, the human's text
// stays (checked by the peer); redo brings it back.
func TestUndoAroundAHuman(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := presenceNotebook(t)
	a := newAgent(t, shared)
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{
		map[string]any{"cell_id": "c1", "content": "x = 1\ny = 2 + AGENT\nprint(x + y)\n"},
	}})
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "exec": false, "start_position": 0, "cells": []any{
		map[string]any{"id": "agent-cell", "content": "agent_only = True"},
	}})
	if _, err := p.WaitFor(ctx, `nb.cells[0].id === "agent-cell" && nb.cells[2].source.includes("AGENT")`, 10000); err != nil {
		t.Fatal(err)
	}
	// The human types at the start of the agent-edited cell and right after the agent's text.
	if err := p.Transact(ctx, `const s = cells.get(2).get('source'); s.insert(s.toString().indexOf('AGENT') + 5, ' # human'); s.insert(0, '# top\n')`, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(fmt.Sprint(a.ok(ctx, "get_notebook", map[string]any{"format": "json", "path": name})["cells"]), "# human") {
		if time.Now().After(deadline) {
			t.Fatal("the sidecar never saw the human's edit")
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := a.ok(ctx, "undo_last_edit", map[string]any{"path": name, "steps": 2})
	if out["undone"] != float64(2) {
		t.Errorf("undo_last_edit = %v", out)
	}
	snap, err := p.WaitFor(ctx, `nb.cells.length === 3 && !nb.cells[1].source.includes("AGENT")`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Cells[1].Source; got != "# top\nx = 1\ny = 2 # human\nprint(x + y)\n" {
		t.Errorf("after undo the cell is %q, want the human's text kept and the agent's gone", got)
	}
	if snap.Cells[0].ID != "c0" {
		t.Errorf("the agent's inserted cell survived the undo: %+v", snap.Cells[0])
	}
	a.ok(ctx, "redo_edit", map[string]any{"path": name})
	if _, err := p.WaitFor(ctx, `nb.cells[0].id === "agent-cell" && nb.cells[2].source.includes("AGENT # human")`, 10000); err != nil {
		t.Fatal(err)
	}
	if out, res := a.call(ctx, "redo_edit", map[string]any{"path": name}); !res.IsError || !strings.Contains(fmt.Sprint(out["error"]), "nothing to redo") {
		t.Errorf("a second redo: %v", out)
	}
}

// History lists the versions (the human's typing as one); restoring an older one while the peer
// watches brings the notebook back as a new edit, which undo takes back.
func TestHistoryAndRestore(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := presenceNotebook(t)
	a := newAgentWith(t, shared, func(o *bridge.ManagerOptions) { o.Room.HistoryDir = t.TempDir() }, nil)
	a.ok(ctx, "get_notebook", map[string]any{"format": "json", "path": name})
	p := newPeer(t) // joins after the agent: its presence reaches the agent at once
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the agent sees the peer", func() (bool, string) {
		out := a.ok(ctx, "get_online_users", map[string]any{"document_path": name})
		return out["count"] == float64(1), fmt.Sprint(out)
	})
	original := mustSnapshot(t, ctx, p)
	for _, ch := range []string{"a", "b", "c"} {
		if err := p.Transact(ctx, `cells.get(0).get('source').insert(0, args.ch)`, map[string]any{"ch": ch}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the agent has the human's typing", func() (bool, string) {
		out := a.ok(ctx, "get_notebook", map[string]any{"format": "json", "path": name, "cell_range": map[string]any{"start": 0, "end": 0}})
		return strings.Contains(fmt.Sprint(out["cells"]), "cbaimport math"), fmt.Sprint(out["cells"])
	})
	a.ok(ctx, "batch_delete_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"c2"}})
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "exec": false, "cells": []any{map[string]any{"id": "late", "content": "late = 1"}}})
	var hist map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		hist = a.ok(ctx, "get_document_history", map[string]any{"path": name})
		if hist["count"] == float64(4) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(hist)
			t.Fatalf("want 4 versions (joined, the human's typing as one, two agent edits): %s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	versions := hist["versions"].([]any)
	joined := versions[3].(map[string]any)
	if !strings.Contains(fmt.Sprint(joined["summary"]), "joining") || !strings.Contains(fmt.Sprint(versions[0].(map[string]any)["summary"]), "added late") ||
		versions[0].(map[string]any)["agent"] != true || !strings.Contains(fmt.Sprint(versions[2].(map[string]any)["by"]), "Independent Peer") {
		b, _ := json.Marshal(versions)
		t.Errorf("versions: %s", b)
	}
	out := a.ok(ctx, "restore_document_version", map[string]any{"path": name, "version_id": joined["version_id"]})
	if !strings.Contains(fmt.Sprint(out["summary"]), "added") || !strings.Contains(fmt.Sprint(out["summary"]), "removed") {
		t.Errorf("restore = %v", out)
	}
	snap, err := p.WaitFor(ctx, `nb.cells.length === 3 && nb.cells[2].id === "c2" && nb.cells[0].source === "import math\n"`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEq(peerSources(snap), peerSources(original)) || !jsonEq(peerIDs(snap), peerIDs(original)) {
		t.Errorf("restored %v, want %v", peerSources(snap), peerSources(original))
	}
	a.ok(ctx, "undo_last_edit", map[string]any{"path": name})
	if _, err := p.WaitFor(ctx, `nb.cells.some(c => c.id === "late") && !nb.cells.some(c => c.id === "c2")`, 10000); err != nil {
		t.Fatalf("undoing the restore: %v", err)
	}
	if _, res := a.call(ctx, "restore_document_version", map[string]any{"path": name, "version_id": "nope-1"}); !res.IsError {
		t.Error("an unknown version was restored")
	}
}

// With a state directory the versions survive the sidecar: a new process lists the old ones and
// can restore them.
func TestHistoryPersistsAcrossRestarts(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := presenceNotebook(t)
	dir := t.TempDir()
	withDir := func(o *bridge.ManagerOptions) { o.Room.HistoryDir = dir }
	a := newAgentWith(t, shared, withDir, nil)
	a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{map[string]any{"cell_id": "c0", "content": "first = 1\n"}}})
	before := a.ok(ctx, "get_document_history", map[string]any{"path": name})["versions"].([]any)
	old := before[len(before)-1].(map[string]any)["version_id"].(string) // as joined
	a.sc.stop()                                                          // leaves the rooms, saving the history

	b := newAgentWith(t, shared, withDir, nil)
	hist := b.ok(ctx, "get_document_history", map[string]any{"path": name})
	if !strings.Contains(fmt.Sprint(hist["versions"]), old) {
		t.Fatalf("a new sidecar does not list version %s of the previous one: %v", old, hist["versions"])
	}
	b.ok(ctx, "restore_document_version", map[string]any{"path": name, "version_id": old})
	waitDisk(t, shared, name, "the restored notebook", func(nb ydoc.Notebook) bool {
		return len(nb.Cells) == 3 && nb.Cells[0].Source == "import math\n"
	})
}
