package tools_test

import (
	"strings"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
)

// A server crash after which the file holds content changed outside Jupyter (so the file wins,
// merged with the replica's changes) is told to the agent in its next tool result, once;
// get_active_sessions shows the rescue and the room's saves.
func TestNoticeOfLostWorkInNextResult(t *testing.T) {
	e := newEnv(t, nil)
	path := bridgetest.NotebookPath
	e.ok("batch_insert_notebook_cells", map[string]any{"path": path, "cells": []map[string]any{{"id": "agent", "content": "x = 1"}}})
	sub := e.m.Subscribe(256)
	defer sub.Close()
	e.srv.Down()
	nb := bridgetest.DefaultNotebook()
	nb.Cells[1].Source = "# edited elsewhere"
	e.srv.WriteFile(bridgetest.File{Path: path, Type: "notebook", Notebook: nb})
	e.srv.Restart(bridgetest.RestartOptions{})
	e.srv.Up()
	for ev := range sub.C {
		if ev.Kind == bridge.EventNotice {
			break
		}
	}
	out := e.ok("get_notebook", map[string]any{"format": "json", "path": path})
	notices, _ := out["notices"].([]any)
	if len(notices) != 1 {
		t.Fatalf("notices in the next result: %v", out["notices"])
	}
	n := notices[0].(map[string]any)
	if n["path"] != path || n["kind"] != "file_wins" || !strings.Contains(n["message"].(string), "changed outside Jupyter") {
		t.Errorf("notice %v", n)
	}
	if again := e.ok("get_notebook", map[string]any{"format": "json", "path": path}); again["notices"] != nil {
		t.Errorf("the notice was told twice: %v", again["notices"])
	}
	sessions := e.ok("get_active_sessions", map[string]any{})
	list, _ := sessions["sessions"].([]any)
	var found bool
	for _, s := range list {
		v := s.(map[string]any)
		if v["path"] != path {
			continue
		}
		found = true
		if v["save"] == nil || v["last_rescue"] == nil {
			t.Errorf("session view %v: want save and last_rescue", v)
		}
	}
	if !found {
		t.Errorf("no session for %s: %v", path, sessions)
	}
}
