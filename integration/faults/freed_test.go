//go:build integration

package faults

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The server frees a room the sidecar was cut off from and, when the sidecar comes back within
// seconds (well inside the replica's 45 s away limit and with the same session), serves it a
// document loaded again from the file. jupyter-collaboration rebuilds it from its store (the
// same history); jupyter-server-documents loads it under a fresh client id, and a client that
// merges its old replica into that duplicates every cell (jsd #252, #254, #305). Either way
// the peer, the replica and the file must show each cell once, and edits must go on.
func TestFreedRoomRejoinedOnce(t *testing.T) {
	engine := integration.DefaultEngine()
	freeRoomsFast := []string{"--YDocExtension.document_cleanup_delay=1"}
	freedLog := "Deleting Y document from memory: "
	if engine.Documents() {
		freeRoomsFast = []string{"--YRoomManager.auto_free_interval=1", "--YRoom.inactivity_timeout=1"}
		freedLog = "Stopped YRoom '"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: t.TempDir(), StateDir: t.TempDir(), ExtraArgs: freeRoomsFast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const path = "freed.ipynb"
	nb := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
 {"id": "one", "cell_type": "markdown", "source": "# one", "metadata": {}},
 {"id": "two", "cell_type": "markdown", "source": "two", "metadata": {}}]}`
	if err := srv.WriteFile(path, []byte(nb)); err != nil {
		t.Fatal(err)
	}
	proxy, err := StartProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	log := zerolog.New(zerolog.ConsoleWriter{Out: testLog{t}, NoColor: true}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	c, err := jupyter.New(jupyter.Options{URL: proxy.URL(), Token: srv.Token, Logger: log, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: jupyterserver.New(c), Logger: log, Room: bridge.RoomOptions{MaxBackoff: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = m.Run(mctx) }()
	t.Cleanup(func() { stop(); <-mdone })

	room, err := m.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := room.Apply(ctx, insertMarkdown("three", "three", 2)); err != nil {
		t.Fatal(err)
	}
	waitFile(ctx, t, srv, path, "one", "two", "three")

	// Cut the sidecar off; keep it off (stalled) until the server has freed the room.
	proxy.Stall()
	proxy.Cut()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(srv.Log(), freedLog+room.Info().RoomID) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not free the room within 60s (looked for %q); log:\n%s", freedLog, tail(srv.Log(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	proxy.Resume()

	if _, err := room.Apply(ctx, insertMarkdown("four", "four", 3)); err != nil {
		t.Fatalf("edit after the room came back: %v", err)
	}
	want := []string{"one", "two", "three", "four"}
	waitFile(ctx, t, srv, path, want...)
	peerSeesCells(t, ctx, srv, path, want)
	var got []string
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		n, err := d.Notebook()
		for _, c := range n.Cells {
			got = append(got, c.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the replica holds cells %v, want %v", got, want)
	}
	t.Logf("%s: room freed and rejoined; replica resets: %d", engine, room.Info().Resets)
	if engine.Documents() && room.Info().Resets == 0 {
		t.Errorf("jupyter-server-documents loaded a new document but the replica was not dropped")
	}
}

func insertMarkdown(id, src string, at int) ydoc.EditFunc {
	return func(tx *ydoc.Txn, _ bool) error {
		if tx.CellIndex(id) >= 0 {
			return nil
		}
		return tx.InsertCells(at, []ydoc.Cell{{ID: id, Type: ydoc.CellMarkdown, Source: src}})
	}
}

// waitFile waits until the file on disk holds exactly these cell ids, in order.
func waitFile(ctx context.Context, t *testing.T, srv *integration.JupyterServer, path string, ids ...string) {
	t.Helper()
	var last []string
	for ctx.Err() == nil {
		if b, err := srv.ReadFile(path); err == nil {
			if nb, err := ydoc.ParseNBFormat(b); err == nil {
				last = last[:0]
				for _, c := range nb.Cells {
					last = append(last, c.ID)
				}
				if strings.Join(last, ",") == strings.Join(ids, ",") {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the file never held cells %v; last %v", ids, last)
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// peerSeesCells joins path with the independent yjs peer and checks it holds exactly the cells
// want, in that order.
func peerSeesCells(t *testing.T, ctx context.Context, srv *integration.JupyterServer, path string, want []string) {
	t.Helper()
	peer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	if err := peer.Connect(ctx, srv, path, "notebook"); err != nil {
		t.Fatal(err)
	}
	snap, err := peer.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, c := range snap.Cells {
		seen = append(seen, c.ID)
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("the peer sees cells %v, want %v", seen, want)
	}
}
