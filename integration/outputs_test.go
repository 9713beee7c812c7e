//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Reads show the outputs a notebook holds even where the engine keeps them out of the document
// for a while (docs/engines.md, "Outputs"): jupyter-server-documents' outputs service, and
// jupyter-collaboration 5.0's progressive loading.

// bigOutputsNotebook is a notebook of n code cells, each with a stream output and a result,
// every fifth with a large image-like output (so that a size threshold holds it back).
func bigOutputsNotebook(n int) []byte {
	var cells []map[string]any
	for i := 0; i < n; i++ {
		outs := []any{
			map[string]any{"output_type": "stream", "name": "stdout", "text": fmt.Sprintf("printed %d\n", i)},
			map[string]any{"output_type": "execute_result", "execution_count": i + 1, "metadata": map[string]any{}, "data": map[string]any{"text/plain": fmt.Sprintf("'result %d'", i)}},
		}
		if i%5 == 0 {
			outs = append(outs, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"text/plain": fmt.Sprintf("big %d %s", i, strings.Repeat("x", 200_000))}})
		}
		cells = append(cells, map[string]any{"id": fmt.Sprintf("c%03d", i), "cell_type": "code", "source": fmt.Sprintf("print(%d)", i),
			"metadata": map[string]any{}, "execution_count": i + 1, "outputs": outs})
	}
	b, _ := json.Marshal(map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{}, "cells": cells})
	return b
}

// checkAllOutputs fails unless a get_notebook result shows every cell of bigOutputsNotebook(n)
// with its outputs.
func checkAllOutputs(t *testing.T, out map[string]any, n int) {
	t.Helper()
	cells, _ := out["cells"].([]any)
	if len(cells) != n {
		t.Fatalf("the read shows %d cells, want %d", len(cells), n)
	}
	for i, c := range cells {
		text := fmt.Sprint(c)
		if !strings.Contains(text, fmt.Sprintf("printed %d", i)) || !strings.Contains(text, fmt.Sprintf("result %d", i)) ||
			(i%5 == 0 && !strings.Contains(text, fmt.Sprintf("big %d", i))) {
			t.Fatalf("cell %d as read: %.600s", i, text)
		}
		if strings.Contains(text, "/api/outputs/") {
			t.Fatalf("cell %d shows a placeholder: %.600s", i, text)
		}
	}
}

// jupyter-server-documents with its outputs service keeps a loaded notebook's outputs out of the
// document (the independent peer sees only placeholders); the agent's read shows the outputs.
// A placeholder pointing anywhere but the outputs service of this file is not followed.
func TestOutputsServicePlaceholdersAreRead(t *testing.T) {
	if !shared.Engine.Documents() {
		t.Skip("the outputs service is jupyter-server-documents'")
	}
	ctx := ctxT(t, 3*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{Root: t.TempDir(), StateDir: t.TempDir(), ExtraArgs: []string{"--OutputProcessor.use_outputs_service=True"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const n = 12
	const name = "service.ipynb"
	if err := srv.WriteFile(name, bigOutputsNotebook(n)); err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteFile("secret.txt", []byte("not for the agent")); err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, srv, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	snap := mustSnapshot(t, ctx, p)
	if len(snap.Cells) != n || !strings.Contains(fmt.Sprint(snap.Cells[0].Outputs), "/api/outputs/") || strings.Contains(fmt.Sprint(snap.Cells[0].Outputs), "printed 0") {
		t.Fatalf("the document does not hold placeholders (is the outputs service on?): %.400v", snap.Cells[0].Outputs)
	}
	// A collaborator forges a placeholder to another API of the server.
	if err := p.Transact(ctx, `
		const c = cells.get(1);
		c.get('outputs').push([new Y.Map([['output_type', 'display_data'], ['metadata', {url: '/api/contents/secret.txt'}]])]);`, nil); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, srv)
	out := a.ok(ctx, "get_notebook", map[string]any{"format": "json", "path": name, "max_content_length": 5_000_000, "max_output_chars": 300})
	cells, _ := out["cells"].([]any)
	if len(cells) != n {
		t.Fatalf("read %d cells", len(cells))
	}
	for i, c := range cells {
		text := fmt.Sprint(c)
		if !strings.Contains(text, fmt.Sprintf("printed %d", i)) || !strings.Contains(text, fmt.Sprintf("result %d", i)) || (i%5 == 0 && !strings.Contains(text, fmt.Sprintf("big %d", i))) {
			t.Errorf("cell %d as read: %.600s", i, text)
		}
		if strings.Contains(text, "/api/outputs/") {
			t.Errorf("cell %d shows a placeholder: %.600s", i, text)
		}
	}
	if text := fmt.Sprint(cells[1]); strings.Contains(text, "not for the agent") {
		t.Errorf("a forged placeholder was followed: %.600s", text)
	}
	// The document still holds the placeholders: the sidecar wrote nothing.
	if snap := mustSnapshot(t, ctx, p); !strings.Contains(fmt.Sprint(snap.Cells[2].Outputs), "/api/outputs/") {
		t.Errorf("the document's placeholders changed: %.400v", snap.Cells[2].Outputs)
	}
}

// jupyter-collaboration 5.0 with document_load_progressively streams the notebook into the room
// after the join (its step 2 holds the metadata and the first cells) and holds back outputs
// above the threshold until every cell is in. The agent's first read, right after it joined,
// shows every cell with its outputs.
func TestProgressiveLoadingIsAwaited(t *testing.T) {
	if shared.Engine != EngineJC5 {
		t.Skip("progressive loading is jupyter-collaboration 5.0's")
	}
	ctx := ctxT(t, 3*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{Root: t.TempDir(), StateDir: t.TempDir(), ExtraArgs: []string{
		"--YDocExtension.document_load_progressively=True", "--YDocExtension.notebook_output_delay_threshold_mb=0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const n = 150
	a := newAgent(t, srv)
	for round := 0; round < 2; round++ { // a fresh room each time: the load happens at the join
		name := fmt.Sprintf("progressive-%d.ipynb", round)
		if err := srv.WriteFile(name, bigOutputsNotebook(n)); err != nil {
			t.Fatal(err)
		}
		out := a.ok(ctx, "get_notebook", map[string]any{"format": "json", "path": name, "max_content_length": 5_000_000, "max_output_chars": 300})
		checkAllOutputs(t, out, n)
	}
}
