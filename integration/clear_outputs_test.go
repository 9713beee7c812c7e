//go:build integration

package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// clear_outputs against the real server: the outputs and execution counts of the cells named,
// then of the whole notebook, as one confirmed edit each; an independent yjs peer and the file
// on disk show them gone and everything else as it was.
func TestClearOutputs(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	nb := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
	  {"id": "c1", "cell_type": "code", "source": "print(1)", "execution_count": 1,
	   "metadata": {"tags": ["keep"], "execution": {"iopub.status.busy": "2024-01-01T00:00:00Z"}},
	   "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}]},
	  {"id": "m1", "cell_type": "markdown", "source": "# notes", "metadata": {}},
	  {"id": "c2", "cell_type": "code", "source": "2", "execution_count": 2, "metadata": {},
	   "outputs": [{"output_type": "execute_result", "execution_count": 2, "metadata": {}, "data": {"text/plain": "2"}}]},
	  {"id": "c3", "cell_type": "code", "source": "x = 3", "execution_count": 3, "metadata": {}, "outputs": []}]}`
	if err := shared.WriteFile(name, []byte(nb)); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	a.ok(ctx, "get_notebook", map[string]any{"path": name})
	peer, err := StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	if err := peer.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}

	out := a.ok(ctx, "clear_outputs", map[string]any{"path": name, "cell_ids": []any{"c1"}})
	if got := clearedIDs(out); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("cleared %v, want c1", out["cleared"])
	}
	snap, err := peer.WaitFor(ctx, `(() => { const c = nb.cells.find(c => c.id === 'c1'); return c.outputs.length === 0 && c.execution_count === null })()`, 10000)
	if err != nil {
		t.Fatalf("the peer never saw c1 cleared: %v", err)
	}
	for _, c := range snap.Cells {
		switch c.ID {
		case "c1":
			if c.Metadata["execution"] != nil || c.Metadata["tags"] == nil {
				t.Errorf("c1's metadata %v: the execution timing goes, the rest stays", c.Metadata)
			}
		case "c2":
			if len(c.Outputs) != 1 || c.ExecutionCount == nil || *c.ExecutionCount != 2 {
				t.Errorf("c2 was cleared too: %+v", c)
			}
		}
	}

	out = a.ok(ctx, "clear_outputs", map[string]any{"path": name})
	if got := clearedIDs(out); !slices.Equal(got, []string{"c2", "c3"}) {
		t.Fatalf("cleared %v, want c2 and c3 (c1 had nothing left, m1 is markdown)", out["cleared"])
	}
	cleared := `nb.cells.every(c => c.cell_type !== 'code' || (c.outputs.length === 0 && c.execution_count === null))`
	snap, err = peer.WaitFor(ctx, cleared, 10000)
	if err != nil {
		t.Fatalf("the peer never saw the notebook cleared: %v", err)
	}
	var ids, sources []string
	for _, c := range snap.Cells {
		ids, sources = append(ids, c.ID), append(sources, c.Source)
	}
	if !slices.Equal(ids, []string{"c1", "m1", "c2", "c3"}) || !slices.Equal(sources, []string{"print(1)", "# notes", "2", "x = 3"}) {
		t.Errorf("the peer has cells %v with sources %q", ids, sources)
	}

	// The file on disk, once the server saved it (waitDisk: a file the server is still writing
	// is "not yet", not an error).
	waitDisk(t, shared, name, "the four cells with no outputs and no execution counts", func(disk ydoc.Notebook) bool {
		if len(disk.Cells) != 4 {
			return false
		}
		for _, c := range disk.Cells {
			if c.Type == ydoc.CellCode && (len(c.Outputs) != 0 || c.ExecutionCount != nil) {
				return false
			}
		}
		return true
	})
}

func clearedIDs(out map[string]any) []string {
	var ids []string
	list, _ := out["cleared"].([]any)
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			id, _ := m["id"].(string)
			ids = append(ids, id)
		}
	}
	return ids
}
