//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Faults around execution against a real kernel: a restart through the REST API while a cell
// runs (the server sends no "restarting" status then, and the request never gets a reply), a
// cell that kills its own kernel (it must not run twice), and a second sidecar joining while
// the first one runs a cell (it must not reset the live run).

func insertNoExec(t *testing.T, a *agent, name string, cells ...map[string]any) {
	t.Helper()
	list := make([]any, len(cells))
	for i, c := range cells {
		list[i] = c
	}
	a.ok(ctxT(t, time.Minute), "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": list})
}

func TestExecuteKernelRestartedDuringARun(t *testing.T) {
	requireAgentExecution(t, shared)
	ctx := ctxT(t, 3*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	insertNoExec(t, a, name, map[string]any{"id": "long", "content": "import time\nprint('go', flush=True)\ntime.sleep(30)\n'never'"})
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	out := a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "long", "wait": false})
	job := out["job_id"].(string)
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'running' && nb.cells[0].outputs.length > 0`, 30000); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.ok(ctx, "restart_kernel", map[string]any{"path": name})
	out = a.ok(ctx, "get_execution", map[string]any{"job_id": job, "timeout": 25})
	run := cellResults(out)[0]
	if out["status"] != "failed" || run["status"] != "aborted" || !strings.Contains(fmt.Sprint(run["note"]), "restarted") {
		t.Errorf("a run whose kernel was restarted: %v", out)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the run ended %v after the restart", el)
	}
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'idle'`, 10000); err != nil {
		t.Fatal(err)
	}
	// The kernel is usable, nothing waits on the dead run.
	res := a.ok(ctx, "execute_code", map[string]any{"path": name, "code": "6 * 7", "timeout": 30})
	if !strings.Contains(fmt.Sprint(res["result"]), "42") {
		t.Errorf("scratch code after the restart: %v", res)
	}
}

func TestExecuteCellThatKillsItsKernelRunsOnce(t *testing.T) {
	requireAgentExecution(t, shared)
	ctx := ctxT(t, 5*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	a := newAgent(t, shared)
	insertNoExec(t, a, name, map[string]any{"id": "suicide", "content": fmt.Sprintf(
		"import os, signal\nwith open(%q, 'a') as f:\n    f.write('x')\nos.kill(os.getpid(), signal.SIGKILL)", marker)})
	for i := 1; i <= 2; i++ {
		out := a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "suicide", "timeout": 90})
		run := cellResults(out)[0]
		if run["status"] != "aborted" || run["note"] == nil {
			t.Errorf("run %d of a cell that kills its kernel: %v", i, out)
		}
		b, _ := os.ReadFile(marker)
		if got := string(b); got != strings.Repeat("x", i) {
			t.Fatalf("after %d runs the cell's side effect happened %q: it ran more than once", i, got)
		}
	}
	res := a.ok(ctx, "execute_code", map[string]any{"path": name, "code": "6 * 7", "timeout": 60})
	if !strings.Contains(fmt.Sprint(res["result"]), "42") {
		t.Errorf("scratch code after the kernel died twice: %v", res)
	}
}

func TestExecuteSecondSidecarKeepsALiveRun(t *testing.T) {
	requireAgentExecution(t, shared)
	ctx := ctxT(t, 3*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	insertNoExec(t, a, name, map[string]any{"id": "slow", "content": "import time\nprint('go', flush=True)\ntime.sleep(6)\n'done'"})
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	out := a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "slow", "wait": false})
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'running' && nb.cells[0].outputs.length > 0`, 30000); err != nil {
		t.Fatal(err)
	}
	// Another sidecar (same agent identity: the default) joins the notebook.
	b := newAgent(t, shared)
	b.ok(ctx, "get_notebook", map[string]any{"path": name, "format": "outline"})
	deadline := time.Now().Add(2 * time.Second) // a window for a wrong reset to reach the peer
	for time.Now().Before(deadline) {
		snap := mustSnapshot(t, ctx, p)
		if snap.Cells[0].ExecutionState != "running" {
			t.Fatalf("the second sidecar reset a live run: %+v", snap.Cells[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	out = a.ok(ctx, "get_execution", map[string]any{"job_id": out["job_id"], "timeout": 30})
	if out["status"] != "completed" || !strings.Contains(fmt.Sprint(out["cells"]), "done") {
		t.Errorf("the run: %v", out)
	}
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'idle' && nb.cells[0].execution_count !== null`, 10000); err != nil {
		t.Fatal(err)
	}
}
