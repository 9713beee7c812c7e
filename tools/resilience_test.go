package tools_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// awaitRoomEvent waits for an event of kind on sub.
func awaitRoomEvent(t *testing.T, sub *bridge.Subscription, kind bridge.EventKind) {
	t.Helper()
	timer := time.NewTimer(testutil.WaitLimit)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription closed waiting for %v", kind)
			}
			if ev.Kind == kind {
				return
			}
		case <-timer.C:
			t.Fatalf("no %v event within %v", kind, testutil.WaitLimit)
		}
	}
}

// An edit that cannot reach the server before the call times out is withdrawn: the caller is
// told nothing changed, and nothing does change once the server is back.
func TestEditWithdrawnWhileServerDown(t *testing.T) {
	e := editEnv(t, callTimeout(300*time.Millisecond))
	before := e.snapshot(editPath)
	room := e.m.Get(editPath, ydoc.KindNotebook)
	sub := room.Subscribe(256)
	defer sub.Close()
	e.srv.Down()
	awaitRoomEvent(t, sub, bridge.EventDisconnected)

	r := e.fail("batch_update_notebook_cells", map[string]any{"path": editPath,
		"updates": []any{map[string]any{"cell_id": "a", "content": "lost?"}}})
	mustContain(t, "withdrawn edit", errorText(r), "nothing was changed")

	e.srv.Up()
	awaitRoomEvent(t, sub, bridge.EventSynced)
	e.nbVersion(editPath) // a round trip through the room after the resync
	if after := e.snapshot(editPath); after != before {
		t.Fatalf("a withdrawn edit reached the server:\nbefore %s\nafter  %s", before, after)
	}
	// The room works again.
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{map[string]any{"cell_id": "a", "content": "back"}}})
	if got := e.serverCell(editPath, "a").Source; got != "back" {
		t.Errorf("server source %q", got)
	}
}

// An edit the server holds but has not confirmed when the call times out is reported as such,
// not as a success and not as "nothing changed".
func TestEditUnconfirmedAtTimeout(t *testing.T) {
	e := editEnv(t, callTimeout(300*time.Millisecond))
	e.srv.HoldEchoes()
	r := e.fail("batch_insert_notebook_cells", map[string]any{"path": editPath, "cells": newCells("X")})
	msg := errorText(r)
	mustContain(t, "unconfirmed edit", msg, "not confirmed", "Re-read")
	if strings.Contains(msg, "nothing was changed") {
		t.Errorf("an applied edit is reported as not applied: %s", msg)
	}
	e.srv.ReleaseEchoes()
	wantIDs(t, "server after release", e.srv.CellIDs(editPath), []string{"a", "b", "c", "d", "e", "X"})
	// Once confirmed, the room carries on normally and the cell is there once.
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{map[string]any{"cell_id": "X", "content": "after"}}})
	if c := e.srv.CountCell(editPath, "X"); c != 1 {
		t.Errorf("cell X is on the server %d times", c)
	}
}

func TestConcurrentEdits(t *testing.T) {
	e := editEnv(t)
	const n = 12
	var wg sync.WaitGroup
	results := make([]*result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.callNoFatal("batch_insert_notebook_cells", map[string]any{"path": editPath,
				"cells": []any{map[string]any{"id": fmt.Sprintf("n%02d", i), "content": fmt.Sprint(i)}}})
		}()
	}
	// Readers at the same time.
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.callNoFatal("get_notebook", map[string]any{"format": "json", "path": editPath})
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r == nil || r.IsError {
			t.Fatalf("insert %d failed: %v", i, r)
		}
	}
	ids := e.srv.CellIDs(editPath)
	if len(ids) != 5+n {
		t.Fatalf("server has %d cells, want %d: %v", len(ids), 5+n, ids)
	}
	for i := range n {
		if c := e.srv.CountCell(editPath, fmt.Sprintf("n%02d", i)); c != 1 {
			t.Errorf("cell n%02d is there %d times", i, c)
		}
	}
	if !slices.Equal(ids[:5], editIDs) {
		t.Errorf("original cells disturbed: %v", ids)
	}
}

// The version an edit returns covers that edit: using it for the next guarded edit, even an
// index-addressed one after an insert, is not a conflict.
func TestOwnEditsDoNotConflict(t *testing.T) {
	e := editEnv(t)
	v := e.nbVersion(editPath)
	ins := e.ok("batch_insert_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "start_position": 0, "cells": newCells("X")})
	del := e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "expected_version": ins["version"], "start_index": 1})
	wantIDs(t, "after insert + delete", e.srv.CellIDs(editPath), []string{"X", "b", "c", "d", "e"})
	up := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": del["version"], "start_index": 0,
		"updates": []any{map[string]any{"content": "X2", "cell_type": "markdown"}}})
	mv := e.ok("move_notebook_cells", map[string]any{"path": editPath, "expected_version": up["version"], "cell_ids": []any{"X"}, "to_index": 4})
	wantIDs(t, "after the move", e.srv.CellIDs(editPath), []string{"b", "c", "d", "e", "X"})
	if got := e.serverCell(editPath, "X"); got.Source != "X2" || got.Type != "markdown" {
		t.Errorf("cell X = %+v", got)
	}
	if mv["version"] != e.nbVersion(editPath) {
		t.Errorf("move returned version %v, get_notebook says %s", mv["version"], e.nbVersion(editPath))
	}
}

func TestFailureEmbedsSchemaOnce(t *testing.T) {
	e := newEnv(t, nil, alwaysEmbed)
	r := e.fail("get_notebook", map[string]any{"path": "nb.ipynb", "format": "xml", "includeSchema": true})
	if len(r.Content) != 2 {
		t.Errorf("failure content = %s, want the error text and one schema", compact(r.Content))
	}
}

// An integer too large for the implementation is still an argument problem on a named field.
func TestHugeIntegerNamesItsField(t *testing.T) {
	e := editEnv(t)
	r := e.fail("batch_insert_notebook_cells", map[string]any{"path": editPath, "start_position": 1e20, "cells": newCells("X")})
	if len(details(r)) == 0 {
		t.Errorf("BUG: start_position 1e20 passes the schema (no maximum) and then fails in decodeArgs with %q: no details entry naming start_position (operation.go decodeArgs / schema integers without a maximum)", errorText(r))
	}
	findDetail(t, r, "start_position")
}

// max_output_chars is documented as the upper bound of each output's text and accepts 0.
func TestMaxOutputCharsZero(t *testing.T) {
	e, _ := richEnv(t)
	body := e.ok("get_notebook", map[string]any{"format": "json", "path": richPath, "max_output_chars": 0})
	long := str(asMap(t, asList(t, cellsOf(t, body)[0]["outputs"])[1])["text"])
	if utf8Len(long) >= 5000 {
		t.Errorf("BUG: max_output_chars 0 (allowed by the schema, minimum 0) returns the whole %d-character stream: capText treats max <= 0 as \"no limit\" (render.go capText), so the documented upper bound is not applied", utf8Len(long))
	}
}

func utf8Len(s string) int { return len([]rune(s)) }
