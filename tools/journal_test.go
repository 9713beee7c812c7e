package tools_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/journalstore"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/journal"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// The write-ahead log shows in get_active_sessions (per document: on disk, bytes, records, at
// risk) and in the metrics (bytes, records, fsync latency).
func TestJournalInSessionsAndMetrics(t *testing.T) {
	store, err := journal.Open(journal.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, nil, func(o *bridge.ManagerOptions) { o.Journal = journalstore.New(store) }, func(o *tools.Options) { o.Metrics = reg })
	path := bridgetest.NotebookPath
	e.ok("batch_insert_notebook_cells", map[string]any{"path": path, "cells": []map[string]any{{"id": "agent", "content": "x = 1"}}})
	sessions := e.ok("get_active_sessions", map[string]any{})
	var jv map[string]any
	for _, s := range sessions["sessions"].([]any) {
		v := s.(map[string]any)
		if v["path"] == path {
			save, _ := v["save"].(map[string]any)
			jv, _ = save["journal"].(map[string]any)
		}
	}
	if jv == nil || jv["durable"] != true || jv["records"].(float64) < 3 || jv["bytes"].(float64) == 0 || jv["at_risk"] != true {
		t.Fatalf("save.journal %v", jv)
	}
	waitUntil(t, "an fsync", func() bool { return store.Stats().Syncs > 0 })
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
		if f.GetName() == "jcm_journal_fsync_seconds" && f.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Error("no fsync in the histogram")
		}
	}
	for _, name := range []string{"jcm_journal_bytes", "jcm_journal_records_total", "jcm_journal_fsync_seconds", "jcm_journal_logs", "jcm_room_save_request_seconds_total"} {
		if !seen[name] {
			t.Errorf("metric %s missing", name)
		}
	}
}
