package execution_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Scratch code on jupyter-server-documents runs through a kernel channel of the sidecar's own,
// opened for the run and closed after it, writing nothing into the notebook and leaving the
// execution counter alone; it is refused, before anything is connected, while a collaborator's
// JupyterLab has the notebook (or another document on the kernel) open or a console uses the
// kernel: on jsd that channel would cut theirs off.
func TestServerEngineScratchCode(t *testing.T) {
	e := newServerEnvWith(t, func(o *bridge.ManagerOptions) { o.GlobalAwareness = true }, codeCell("a", "1"))
	m := e.m
	mctx, stop := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = m.Run(mctx) }()
	t.Cleanup(func() { stop(); <-mdone })
	if _, err := m.Open(ctxT(t), execPath, ydoc.KindNotebook); err != nil {
		t.Fatal(err)
	}
	before, err := e.srv.Notebook(execPath)
	if err != nil {
		t.Fatal(err)
	}

	run, _, err := e.x.RunCode(ctxT(t), execPath, "print:hi\nresult:42", "")
	if err != nil || run.Status != execution.CellOK || streamText(run.Outputs) != "hi\n" || !strings.Contains(compactJSON(run.Outputs), "42") {
		t.Fatalf("scratch code: %+v, %v", run, err)
	}
	id := e.k.scratchID
	if n := e.k.scratch.ExecutionCount(id); n != 0 {
		t.Errorf("the kernel's execution counter moved to %d", n)
	}
	if n := e.k.scratch.OpenChannels(id); n != 0 {
		t.Errorf("%d kernel channels left open after the run", n)
	}
	if after, _ := e.srv.Notebook(execPath); compactJSON(after) != compactJSON(before) {
		t.Errorf("the notebook changed:\n%s\n%s", compactJSON(before), compactJSON(after))
	}
	if run, _, err := e.x.RunCode(ctxT(t), execPath, "error:ValueError:bad", ""); err != nil || run.Status != execution.CellError {
		t.Errorf("failing scratch code: %+v, %v", run, err)
	}

	// Alice has the notebook open in JupyterLab: refused, nothing connected.
	alice := ydoc.AwarenessUser{Username: "alice", Name: "Alice", DisplayName: "Alice L"}
	tab := startGlobalTab(t, e, alice)
	// As another agent (no kernel connection kept): no refusal.
	setTab(t, m, tab, map[string]any{"documents": []any{execPath}, "current": nil}, false)
	if run, _, err := e.x.RunCode(ctxT(t), execPath, "result:1", ""); err != nil || run.Status != execution.CellOK {
		t.Errorf("with an agent in the notebook: %+v, %v", run, err)
	}
	setTab(t, m, tab, map[string]any{"documents": []any{execPath}, "current": nil}, true)
	connects := e.k.called("connect scratch")
	_, _, err = e.x.RunCode(ctxT(t), execPath, "result:1", "")
	if !errors.Is(err, execution.ErrScratchRefused) || !strings.Contains(err.Error(), "Alice L has the notebook open") ||
		!strings.Contains(err.Error(), "execute_notebook_cell") || e.k.called("connect scratch") != connects {
		t.Errorf("with Alice's tab on the notebook: %v", err)
	}
	// In front of her only ("current"): the same.
	setTab(t, m, tab, map[string]any{"documents": []any{}, "current": "notebook:" + execPath}, true)
	if _, _, err := e.x.RunCode(ctxT(t), execPath, "result:1", ""); !errors.Is(err, execution.ErrScratchRefused) {
		t.Errorf("with the notebook in front of Alice: %v", err)
	}
	// Another document: her tab has no connection to this kernel.
	setTab(t, m, tab, map[string]any{"documents": []any{"other.ipynb"}, "current": "notebook:other.ipynb"}, true)
	if run, _, err := e.x.RunCode(ctxT(t), execPath, "result:1", ""); err != nil || run.Status != execution.CellOK {
		t.Errorf("with Alice elsewhere: %+v, %v", run, err)
	}
	// A console on the kernel.
	e.k.mu.Lock()
	e.k.console = true
	e.k.mu.Unlock()
	if _, _, err := e.x.RunCode(ctxT(t), execPath, "result:1", ""); !errors.Is(err, execution.ErrScratchRefused) || !strings.Contains(err.Error(), "console") {
		t.Errorf("with a console on the kernel: %v", err)
	}
}

// startGlobalTab joins the global awareness room as a JupyterLab tab of user.
func startGlobalTab(t *testing.T, e *serverEnv, user ydoc.AwarenessUser) *bridge.Room {
	t.Helper()
	opts := fastOptions()
	opts.Path, opts.Kind, opts.Jupyter, opts.User, opts.Transient = bridge.GlobalAwarenessRoom, ydoc.KindText, e.srv, user, bridge.GlobalAwarenessRoom
	room, err := bridge.NewRoom(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = room.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := room.WaitSynced(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return room
}

// setTab sets the tab's fields and waits until the manager sees them. A human's tab has no agent
// field in its state (a bridge.Room publishes one: an agent's).
func setTab(t *testing.T, m *bridge.Manager, tab *bridge.Room, fields map[string]any, human bool) {
	t.Helper()
	if human {
		fields["jupyter_collab_mcp"] = nil
	}
	if err := tab.SetFields(ctxT(t), fields); err != nil {
		t.Fatal(err)
	}
	seen := func(st map[string]any, human bool) string {
		return compactJSON(st["documents"]) + compactJSON(st["current"]) + compactJSON(human)
	}
	want := seen(fields, human)
	eventually(t, "the manager sees the tab's fields", func() bool {
		ps, _ := m.GlobalPeers(ctxT(t))
		return len(ps) == 1 && seen(ps[0].State, ps[0].State["jupyter_collab_mcp"] == nil) == want
	})
}
