//go:build integration

package faults

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// jupyter-server-documents 0.3.3 loses a room for good when a client's update is still queued
// after the client left: YjsClientGroup.get raises UnboundLocalError for the unknown client,
// and the room's message task, which catches nothing, ends (docs/engines.md, "Known server
// problems"). From then on nobody's handshake or edit in that room is answered, until the
// server frees the room, which it does only when nobody is in it. One update frame sent on a
// connection closed at once is enough, from any client. The sidecar, finding its handshakes
// unanswered twice in a row, stays away (DeadRoomWait); the server frees the room and loads it
// afresh; the sidecar rejoins the new document and its edit made meanwhile goes through, once.
func TestDeadDocumentsRoomIsLeftToBeFreed(t *testing.T) {
	if !integration.DefaultEngine().Documents() {
		t.Skip("a jupyter-server-documents 0.3.3 bug")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: t.TempDir(), StateDir: t.TempDir(),
		ExtraArgs: []string{"--YRoomManager.auto_free_interval=2", "--YRoom.inactivity_timeout=2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const path = "dead.ipynb"
	if err := srv.WriteFile(path, []byte(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
 {"id": "one", "cell_type": "markdown", "source": "# one", "metadata": {}}]}`)); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := zerolog.New(zerolog.MultiLevelWriter(zerolog.ConsoleWriter{Out: testLog{t}, NoColor: true}, &logs)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	c, err := jupyter.New(jupyter.Options{URL: srv.URL, Token: srv.Token, Logger: log, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: jupyterserver.New(c), Logger: log, Room: bridge.RoomOptions{
		MaxBackoff: time.Second, HandshakeTimeout: 2 * time.Second, ResyncInterval: 2 * time.Second, DeadRoomWait: 6 * time.Second}})
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
	if _, err := room.Apply(ctx, insertMarkdown("two", "two", 1)); err != nil {
		t.Fatal(err)
	}
	waitFile(ctx, t, srv, path, "one", "two")

	// Kill the room: an update frame (an empty Yjs update) on a connection closed at once.
	for attempt := 0; !strings.Contains(srv.Log(), "UnboundLocalError"); attempt++ {
		if attempt == 5 {
			t.Fatalf("the room survived 5 orphaned updates; log:\n%s", tail(srv.Log(), 3000))
		}
		conn, err := c.DialRoom(ctx, room.Info().RoomID, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Write([]byte{0, 2, 2, 0, 0}, time.Now().Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
		time.Sleep(500 * time.Millisecond)
	}
	killed := time.Now()

	// An edit made while the room is dead goes through once the sidecar is in a fresh room.
	if _, err := room.Apply(ctx, insertMarkdown("three", "three", 2)); err != nil {
		t.Fatalf("edit after the room died: %v", err)
	}
	want := []string{"one", "two", "three"}
	waitFile(ctx, t, srv, path, want...)
	t.Logf("the edit reached the file %v after the room died", time.Since(killed).Round(100*time.Millisecond))
	if !strings.Contains(logs.String(), "the server's room is dead; staying away") {
		t.Errorf("the sidecar did not stay away from the dead room; its log:\n%s", tail(logs.String(), 3000))
	}
	if !strings.Contains(srv.Log(), "Stopped YRoom '"+room.Info().RoomID) {
		t.Errorf("the server never freed the dead room; its log:\n%s", tail(srv.Log(), 3000))
	}
	peerSeesCells(t, ctx, srv, path, want)
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
