//go:build integration

package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Idempotent edits against the real server (issue 14): an agent inserts a cell, with a
// request_id and no cell id of its own, while the sidecar's link to jupyter-server is stalled,
// so the server cannot confirm it. The agent's MCP connection drops (its client gives up on the
// call and goes away), the link is cut (or jupyter-server is SIGKILLed and started again: the
// crash rescue), and a new MCP connection repeats the call with the same request_id. The repeat
// answers with the first call's outcome, a second repeat with the same, and an independent yjs
// peer and the file on disk hold the cell exactly once.
func TestRequestIDRetryAfterForcedDisconnect(t *testing.T) {
	for _, fault := range []string{"cut", "server restart"} {
		t.Run(fault, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			const path = "retry.ipynb"
			dir := t.TempDir()
			srv, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: filepath.Join(dir, "root"), StateDir: filepath.Join(dir, "state")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Stop)
			if err := srv.WriteFile(path, []byte(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
				{"id": "first", "cell_type": "markdown", "source": "# first", "metadata": {}}]}`)); err != nil {
				t.Fatal(err)
			}
			proxy, err := StartProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(proxy.Close)
			sc, err := startSidecar(ctx, proxy.URL(), srv.Token, filepath.Join(dir, "sidecar.log"),
				"JUPYTER_TIMEOUT="+jupyterTimeout.String(), "MCP_CALL_TIMEOUT=60s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				sc.stop()
				if t.Failed() {
					b, _ := os.ReadFile(sc.LogPath)
					t.Logf("sidecar log (end):\n%s", trim(string(b[max(0, len(b)-6000):]), 6000))
				}
			})

			first, err := newAgent(ctx, sc.URL, sc.Token, 3*time.Second) // gives up after 3 s
			if err != nil {
				t.Fatal(err)
			}
			if res := first.call(ctx, "get_notebook", map[string]any{"path": path}); res.out != outOK {
				t.Fatalf("join: %s %s", res.out, res.err)
			}
			args := map[string]any{"path": path, "exec": false, "request_id": "agent-7f3",
				"cells": []any{map[string]any{"cell_type": "markdown", "content": "«once»"}}}

			proxy.Stall()
			res := first.call(ctx, "batch_insert_notebook_cells", args)
			if res.out == outOK {
				t.Fatal("the insert was confirmed through a stalled link")
			}
			t.Logf("first call: %s %s", res.out, trim(res.err, 200))
			_ = first.c.Close() // the agent's MCP connection is gone

			switch fault {
			case "cut":
				if n := proxy.Cut(); n == 0 {
					t.Fatal("no connection to cut")
				}
			case "server restart":
				srv.Kill()
				proxy.Cut()
				if err := srv.Restart(ctx); err != nil {
					t.Fatal(err)
				}
			}
			proxy.Resume()

			again, err := newAgent(ctx, sc.URL, sc.Token, 90*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = again.c.Close() })
			res = again.call(ctx, "batch_insert_notebook_cells", args)
			if res.out != outOK {
				t.Fatalf("the retry with the same request_id: %s %s", res.out, res.err)
			}
			inserted, _ := res.data["inserted"].([]any)
			if len(inserted) != 1 {
				t.Fatalf("the retry answered %v", res.data)
			}
			id, _ := inserted[0].(map[string]any)["id"].(string)
			if res2 := again.call(ctx, "batch_insert_notebook_cells", args); res2.out != outOK || !reflect.DeepEqual(res2.data, res.data) {
				t.Errorf("a second retry answered %s %v, the first %v", res2.out, res2.data, res.data)
			}

			// The independent peer, straight to jupyter-server.
			peer, err := integration.StartPeer()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			if err := peer.Connect(ctx, srv, path, "notebook"); err != nil {
				t.Fatal(err)
			}
			if _, err := peer.WaitFor(ctx, fmt.Sprintf(`nb.cells.some(c => c.id === %q)`, id), 20000); err != nil {
				t.Fatalf("the peer never saw cell %s: %v", id, err)
			}
			time.Sleep(2 * time.Second) // a late duplicate (a replay) would show up by now
			snap, err := peer.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var peerCells []string
			for _, c := range snap.Cells {
				peerCells = append(peerCells, c.ID+":"+c.Source)
			}
			if n := strings.Count(strings.Join(peerCells, "\n"), "«once»"); n != 1 {
				t.Errorf("the peer sees the cell %d times: %v", n, peerCells)
			}
			if want := []string{"first:# first", id + ":«once»"}; !reflect.DeepEqual(peerCells, want) {
				t.Errorf("the peer's cells %v, want %v", peerCells, want)
			}

			// The file on disk, once the server saved the cell.
			deadline := time.Now().Add(30 * time.Second)
			for {
				b, err := srv.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				disk, err := ydoc.ParseNBFormat(b)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, c := range disk.Cells {
					if strings.Contains(c.Source, "«once»") {
						n++
					}
				}
				if n > 1 {
					t.Fatalf("the file holds the cell %d times:\n%s", n, b)
				}
				if n == 1 && len(disk.Cells) == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the file on disk lacks the cell 30 s after the retry:\n%s", b)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}
