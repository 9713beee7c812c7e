//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
)

// Scratch code on jupyter-server-documents and a human's JupyterLab tab on the same kernel
// (played by a v1 kernel websocket, as a tab holds one, and a state in JupyterLab's global
// awareness naming the notebook, as a tab publishes one). The server gives every kernel
// websocket one ZMQ identity and the kernel answers only the newest, so a kernel websocket of the
// sidecar's own would cut the tab's off (docs/engines.md, "Execution"):
//   - while the tab has the notebook open, execute_code is refused, naming them, and the tab's
//     kernel connection still answers;
//   - once nobody has it open, it runs, writes nothing into the notebook, leaves the execution
//     counter alone;
//   - a tab that opens while scratch code runs takes the kernel's replies over: the run still
//     ends with its result (read from iopub, the reply having gone to the tab), and the tab works.
func TestScratchCodeSparesTheHumansKernelConnection(t *testing.T) {
	if !shared.Engine.Documents() {
		t.Skip("the shared ZMQ identity of kernel websockets is jupyter-server-documents'")
	}
	ctx := ctxT(t, 3*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newScratchAgent(t, shared)
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": []any{
		map[string]any{"id": "def", "content": "secret = 41"},
		map[string]any{"id": "again", "content": "secret"},
	}})
	first := cellResults(a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "def"}))[0]
	sessions, err := a.sc.client.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kernelID := ""
	for _, s := range sessions {
		if s.Path == name && s.Kernel != nil {
			kernelID = s.Kernel.ID
		}
	}
	if kernelID == "" {
		t.Fatalf("no kernel session for %s in %+v", name, sessions)
	}
	c, err := jupyter.New(jupyter.Options{URL: shared.URL, Token: shared.Token})
	if err != nil {
		t.Fatal(err)
	}
	tabAnswers := func(tab *jupyter.KernelConn, when string) {
		t.Helper()
		ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := tab.KernelInfo(ictx); err != nil {
			t.Errorf("%s: the tab's kernel connection does not answer: %v", when, err)
		}
	}

	// The human's tab: its kernel connection, and its state in global awareness.
	tab, err := c.ConnectKernelV1(ctx, kernelID, "human")
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	tabAnswers(tab, "before the agent's scratch code")
	human := newPeer(t)
	user := map[string]any{"username": "tab-human", "name": "Tab", "display_name": "Tabby Human", "initials": "TH", "color": "#0088aa"}
	if err := human.Call(ctx, "connectGlobal", map[string]any{"url": shared.URL, "token": shared.Token,
		"state": map[string]any{"user": user, "current": "notebook:" + name, "documents": []any{name}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Once the sidecar sees the tab in global awareness (asking earlier would run the code and
	// cut the tab off, which is what is being avoided).
	sees := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			peers, _ := a.sc.manager.GlobalPeers(ctx)
			seen := false
			for _, p := range peers {
				seen = seen || (p.User != nil && p.User.Username == "tab-human")
			}
			if seen == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sidecar's global awareness still has the human = %v after 20 s", seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	sees(true)
	out, res := a.call(ctx, "execute_code", map[string]any{"path": name, "code": "secret + 1"})
	if !res.IsError {
		t.Fatalf("execute_code ran while the human's tab has the notebook open: %v", out)
	}
	if msg := fmt.Sprint(out); !strings.Contains(msg, "Tabby Human has the notebook open") || !strings.Contains(msg, "execute_notebook_cell") {
		t.Errorf("refusal: %v, want one naming the human and saying what to do", out)
	}
	tabAnswers(tab, "after the refusal")

	// The tab is closed: scratch code runs.
	_ = tab.Close()
	if err := human.Call(ctx, "setGlobal", map[string]any{"state": nil}, nil); err != nil {
		t.Fatal(err)
	}
	sees(false)
	before := replica(t, ctx, mustRoom(t, ctx, a, name))
	if o := a.ok(ctx, "execute_code", map[string]any{"path": name, "code": "secret + 1"}); !strings.Contains(fmt.Sprint(o["result"]), "42") {
		t.Errorf("scratch code: %v", o)
	}

	// A tab that opens while scratch code runs.
	type result struct {
		out map[string]any
		err bool
		at  time.Duration
	}
	done := make(chan result, 1)
	runStart := time.Now()
	go func() {
		o, res := a.call(ctx, "execute_code", map[string]any{"path": name, "code": "import time; time.sleep(3); secret * 2"})
		done <- result{o, res.IsError, time.Since(runStart)}
	}()
	// The tab opens once the kernel runs the scratch code.
	for {
		st, err := c.Kernel(ctx, kernelID)
		if err != nil {
			t.Fatal(err)
		}
		if st.ExecutionState == "busy" {
			break
		}
		if time.Since(runStart) > 20*time.Second {
			t.Fatalf("the kernel never ran the scratch code (state %s)", st.ExecutionState)
		}
		time.Sleep(20 * time.Millisecond)
	}
	late, err := c.ConnectKernelV1(ctx, kernelID, "human")
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	r := <-done
	if res := fmt.Sprint(r.out["result"]); r.err || !strings.Contains(res, "82") || !strings.Contains(res, "status:ok") {
		t.Errorf("scratch code during which a tab opened: %v", r.out)
	}
	tabAnswers(late, "a tab opened during the scratch code")
	t.Logf("a 3 s scratch run during which a tab opened took %v (its reply went to the tab; the outcome came from iopub)", r.at.Round(10*time.Millisecond))

	after := replica(t, ctx, mustRoom(t, ctx, a, name))
	if !jsonEq(before.JSON(), after.JSON()) {
		t.Error("scratch code changed the notebook")
	}
	next := cellResults(a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "again"}))[0]
	if c1, ok := first["execution_count"].(float64); !ok || next["execution_count"] != c1+1 {
		t.Errorf("execution counts %v then %v around the scratch code: the counter moved", first["execution_count"], next["execution_count"])
	}
}
