//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Editing runs the affected code cells by default (exec), and not with exec=false.
func TestExecAfterEdit(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	out := a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "cells": []any{
		map[string]any{"id": "code", "content": "21 * 2"},
		map[string]any{"id": "md", "cell_type": "markdown", "content": "# not run"},
	}})
	exec, _ := out["execution"].(map[string]any)
	if exec == nil || exec["status"] != "completed" || !strings.Contains(fmt.Sprint(exec["cells"]), "42") {
		t.Fatalf("insert with the default exec: %v", out)
	}
	if cells := exec["cells"].([]any); len(cells) != 1 {
		t.Errorf("ran %d cells, want only the code cell", len(cells))
	}
	out = a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "updates": []any{map[string]any{"cell_id": "code", "content": "21 * 3"}}})
	if !strings.Contains(fmt.Sprint(out["execution"]), "63") {
		t.Errorf("update with the default exec: %v", out)
	}
	out = a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "exec": false, "updates": []any{map[string]any{"cell_id": "code", "content": "21 * 4"}}})
	if _, ran := out["execution"]; ran {
		t.Errorf("exec=false ran the cell: %v", out)
	}
	out = a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "updates": []any{map[string]any{"cell_id": "md", "metadata": map[string]any{"tags": []any{"x"}}}}})
	if _, ran := out["execution"]; ran {
		t.Errorf("a metadata-only update ran cells: %v", out)
	}
}

// Progress notifications reach the official TypeScript client while a long run is waited on.
func TestExecProgressNotifications(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sp, err := StartHTTPSidecar(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	c, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer " + sp.Token}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "exec": false, "start_position": 0, "cells": []any{
		map[string]any{"id": "slow", "content": "import time\nfor i in range(6):\n    print('step', i, flush=True)\n    time.sleep(0.5)"},
	}}); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result ToolResult `json:"result"`
	}
	if err := c.Call(ctx, "call", map[string]any{"name": "execute_notebook_cell", "arguments": map[string]any{"path": name, "cell_id": "slow"}, "progress": true, "timeoutMs": 60000}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Result.IsError || !strings.Contains(r.Result.Text(), "step 5") {
		t.Fatalf("run: %s", r.Result.Text())
	}
	var p struct {
		Progress []struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
			Message  string  `json:"message"`
		} `json:"progress"`
	}
	if err := c.Call(ctx, "progress", nil, &p); err != nil {
		t.Fatal(err)
	}
	// The SDK may drop a notification that shares a chunk with the result: do not count on the
	// last one; a 3-second run must have produced several.
	if len(p.Progress) < 3 {
		t.Fatalf("%d progress notifications: %+v", len(p.Progress), p.Progress)
	}
	sawStep := false
	for i, n := range p.Progress {
		sawStep = sawStep || strings.Contains(n.Message, "running cell 1 of 1 (slow)") && strings.Contains(n.Message, ": step")
		if n.Total != 1 || n.Progress < 0 || n.Progress > 1 || (i > 0 && n.Progress <= p.Progress[i-1].Progress) {
			t.Errorf("notification %d: progress %v of %v after %v: must increase every time, within [0, total]", i, n.Progress, n.Total, p.Progress[max(i-1, 0)].Progress)
		}
	}
	if !sawStep {
		t.Errorf("no notification names the running cell and its last output line: %+v", p.Progress)
	}
}

// A sidecar killed mid-run leaves the cell [*] (it wrote running and never idle); the next
// sidecar to join the room resets it.
func TestExecCrashLeavesNoRunningCell(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	sp, err := StartHTTPSidecar(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer " + sp.Token}}, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "wait": false, "cells": []any{
		map[string]any{"id": "long", "content": "import time\ntime.sleep(8)"},
	}}); err != nil || res.IsError {
		t.Fatalf("%v %s", err, res.Text())
	}
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'running'`, 15000); err != nil {
		t.Fatal(err)
	}
	sp.Kill()
	// A new sidecar joins the room (any tool call on the notebook) and clears the stale [*].
	sp2, err := StartHTTPSidecar(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp2.Stop)
	c2, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	if err := c2.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp2.URL, "headers": map[string]string{"Authorization": "Bearer " + sp2.Token}}, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := c2.CallTool(ctx, "get_notebook", map[string]any{"path": name, "format": "outline"}); err != nil || res.IsError {
		t.Fatalf("%v %s", err, res.Text())
	}
	// The run's marker still beats (it was written moments ago), but the kernel goes idle when
	// the orphaned code ends: nothing runs the cell any more.
	snap, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'idle'`, 40000)
	if err != nil {
		t.Fatalf("the cell stayed running after a new sidecar joined: %v", err)
	}
	if _, stale := snap.State["jupyter_collab_mcp_runs"]; stale {
		t.Errorf("the run marker was left in the room state: %v", snap.State)
	}
}
