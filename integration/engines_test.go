//go:build integration

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
)

// What the sidecar supports per engine (docs/engines.md). Tests of a feature an engine does not
// offer are skipped on it, saying why; everything else runs on every engine of the matrix
// (JCM_ENGINE=jc5|jc4|jsd).

// runsOnServer reports whether the engine runs cells on the server (jupyter-server-documents:
// the server writes the outputs as it receives them, each stream message an output of its own,
// and the sidecar runs no scratch code there); tests check what differs there, and only that.
func runsOnServer(s *JupyterServer) bool { return s.Engine.Documents() }

// requireForks skips a fork test where the engine has no fork API.
func requireForks(t testing.TB, s *JupyterServer) {
	t.Helper()
	if s.Engine.Documents() {
		t.Skip("jupyter-server-documents has no fork API")
	}
}

// The engine is told from what the server answers, on every environment of the matrix.
func TestEngineDetected(t *testing.T) {
	c, err := jupyter.New(jupyter.Options{URL: shared.URL, Token: shared.Token})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.DetectEngine(ctxT(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := jupyter.EngineCollaboration
	if shared.Engine.Documents() {
		want = jupyter.EngineDocuments
	}
	if got != want {
		t.Fatalf("%s detected as %q, want %q", shared.Engine, got, want)
	}
	// The sidecar's own kernel channel says at once why it cannot run cells on jsd.
	srv := jupyterserver.New(c)
	k := jupyterserver.Kernels{C: c, Adapter: &srv}
	_, err = k.Connect(context.Background(), "no-such-kernel")
	if shared.Engine.Documents() != errors.Is(err, jupyterserver.ErrServerExecutes) {
		t.Errorf("Connect on %s: %v", shared.Engine, err)
	}
}

// jupyter-server-documents runs cells on the server: POST /api/kernels/{id}/execute with the
// cells' source hashes; the server writes outputs, count and idle state into the document, so
// every collaborator (here the independent peer) sees exactly one set of outputs. This measures
// what the sidecar's execution on jsd builds on: the kernel must be attached to the room (a
// kernel session on the notebook's path), a room without one is refused with a 400 (not
// silently), and a stale hash is refused with a 409.
func TestDocumentsServerSideExecution(t *testing.T) {
	if !shared.Engine.Documents() {
		t.Skip("server-side execution is jupyter-server-documents' API")
	}
	ctx := ctxT(t, 2*time.Minute)
	name, other := uniqueName(t, ".ipynb"), uniqueName(t, ".ipynb")
	const nb = `{"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
 "cells": [{"id": "run-me", "cell_type": "code", "source": "print('hi')\n6*7", "metadata": {}, "outputs": [], "execution_count": null}]}`
	for _, p := range []string{name, other} {
		if err := shared.WriteFile(p, []byte(nb)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := jupyter.New(jupyter.Options{URL: shared.URL, Token: shared.Token})
	if err != nil {
		t.Fatal(err)
	}
	peer, peer2 := newPeer(t), newPeer(t)
	if err := peer.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	if err := peer2.Connect(ctx, shared, other, "notebook"); err != nil {
		t.Fatal(err)
	}
	sess, err := c.StartSession(ctx, name, name, "python3")
	if err != nil || sess.Kernel == nil {
		t.Fatalf("start a kernel session: %+v, %v", sess, err)
	}
	kernel := sess.Kernel.ID
	fileID, err := c.IndexFileID(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	otherID, err := c.IndexFileID(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	cell := []jupyter.CellToRun{{CellID: "run-me", RunHash: jupyter.RunHash("print('hi')\n6*7")}}

	// A room without a kernel session is refused, with the reason.
	err = c.ExecuteCells(ctx, kernel, jupyter.ExecuteCellsRequest{DocumentID: "json:notebook:" + otherID, Cells: cell})
	var api *jupyter.APIError
	if !errors.As(err, &api) || api.Status != 400 {
		t.Errorf("execute in a room without a kernel: %v, want HTTP 400", err)
	}
	// A stale hash is refused and nothing runs.
	err = c.ExecuteCells(ctx, kernel, jupyter.ExecuteCellsRequest{DocumentID: "json:notebook:" + fileID,
		Cells: []jupyter.CellToRun{{CellID: "run-me", RunHash: jupyter.RunHash("something else")}}})
	if !errors.Is(err, jupyter.ErrSourceMismatch) {
		t.Errorf("stale hash: %v, want ErrSourceMismatch", err)
	}

	start := time.Now()
	if err := c.ExecuteCells(ctx, kernel, jupyter.ExecuteCellsRequest{DocumentID: "json:notebook:" + fileID, Cells: cell, RequestID: RandomToken()}); err != nil {
		t.Fatal(err)
	}
	queued := time.Since(start)
	snap, err := peer.WaitFor(ctx, `nb.cells[0].execution_count === 1 && nb.cells[0].execution_state === 'idle' && nb.cells[0].outputs.length >= 2`, 60000)
	if err != nil {
		t.Fatalf("the peer never saw the run finish: %v", err)
	}
	t.Logf("server-side run: queued in %v, count and idle seen by the peer after %v", queued, time.Since(start))
	time.Sleep(time.Second) // anything written twice would arrive within this
	if snap, err = peer.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	outs := snap.Cells[0].Outputs
	if len(outs) != 2 || outs[0]["output_type"] != "stream" || outs[0]["text"] != "hi\n" || outs[1]["output_type"] != "execute_result" {
		t.Fatalf("outputs the peer sees: %v (want one stream and one result, once)", outs)
	}
	if data, _ := outs[1]["data"].(map[string]any); data["text/plain"] != "42" {
		t.Errorf("result %v", outs[1])
	}
}
