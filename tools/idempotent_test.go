package tools_test

import (
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// request_id: a repeat gets the first call's result and applies nothing twice.

// A retry after `unconfirmed` waits for the edit the first call left on its way and returns its
// outcome: one cell, although the cells have no ids of the caller's (fresh ones are chosen once).
func TestRequestIDRetryAfterUnconfirmed(t *testing.T) {
	e := editEnv(t, callTimeout(300*time.Millisecond))
	args := map[string]any{"path": editPath, "request_id": "r1", "cells": []any{map[string]any{"content": "once"}}}
	e.srv.HoldEchoes()
	r := e.fail("batch_insert_notebook_cells", args)
	mustContain(t, "unconfirmed", errorText(r), "has not confirmed it yet", `Retry with the same request_id "r1"`)
	r = e.fail("batch_insert_notebook_cells", args) // still held: the retry waits, then says the same
	mustContain(t, "unconfirmed retry", errorText(r), "has not confirmed it yet")
	e.srv.ReleaseEchoes()
	first := e.ok("batch_insert_notebook_cells", args)
	ins := asList(t, first["inserted"])
	if len(ins) != 1 {
		t.Fatalf("inserted %v", ins)
	}
	id := str(asMap(t, ins[0])["id"])
	if n := e.srv.CountCell(editPath, id); n != 1 || len(e.srv.CellIDs(editPath)) != 6 {
		t.Fatalf("server cells %v: want the new cell %s once", e.srv.CellIDs(editPath), id)
	}
	again := e.ok("batch_insert_notebook_cells", args)
	if !reflect.DeepEqual(again, first) {
		t.Errorf("repeat answered %v, first %v", again, first)
	}
	if len(e.srv.CellIDs(editPath)) != 6 {
		t.Errorf("the repeat inserted again: %v", e.srv.CellIDs(editPath))
	}
}

// A repeat while the first call still runs waits for it and gets its result.
func TestRequestIDRepeatWhileInFlight(t *testing.T) {
	e := editEnv(t)
	args := map[string]any{"path": editPath, "request_id": "in-flight", "cells": newCells("Y")}
	e.srv.HoldEchoes()
	results := make([]*result, 4)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.callNoFatal("batch_insert_notebook_cells", args)
		}()
	}
	// One of them applied the edit; the others wait for it (or, arriving after, read its result):
	// either way nothing is applied twice.
	if err := e.srv.Await(testutil.Context(t), func() bool { return e.srv.CountCell(editPath, "Y") == 1 }); err != nil {
		t.Fatalf("the edit never reached the server: %v", err)
	}
	e.srv.ReleaseEchoes()
	wg.Wait()
	for i, r := range results {
		if r == nil || r.IsError {
			t.Fatalf("call %d: %v", i, r)
		}
		if !reflect.DeepEqual(r.Body, results[0].Body) {
			t.Errorf("call %d answered %v, call 0 %v", i, r.Body, results[0].Body)
		}
	}
	if n := e.srv.CountCell(editPath, "Y"); n != 1 {
		t.Errorf("cell Y on the server %d times", n)
	}
}

// The same id with other arguments (or for another tool) is refused, changing nothing; another
// id is another edit; an id per document.
func TestRequestIDOtherArgumentsRefused(t *testing.T) {
	e := editEnv(t)
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "request_id": "u", "updates": []any{map[string]any{"cell_id": "a", "content": "first"}}})
	before := e.snapshot(editPath)
	r := e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "request_id": "u", "updates": []any{map[string]any{"cell_id": "a", "content": "second"}}})
	mustContain(t, "refusal", errorText(r), `request_id "u" was used for a call with other arguments`, "nothing was changed")
	findDetail(t, r, "request_id")
	r = e.fail("batch_delete_notebook_cells", map[string]any{"path": editPath, "request_id": "u", "cell_ids": []any{"a"}})
	mustContain(t, "refusal across tools", errorText(r), "other arguments")
	if e.snapshot(editPath) != before {
		t.Fatal("a refused repeat changed the notebook")
	}
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "request_id": "u2", "updates": []any{map[string]any{"cell_id": "a", "content": "second"}}})
	if got := e.serverCell(editPath, "a").Source; got != "second" {
		t.Errorf("a new request id did not apply: %q", got)
	}
	// The same id in a text document is that document's.
	e.ok("batch_insert_text", map[string]any{"path": "notes.txt", "request_id": "u", "operations": []any{map[string]any{"position": -1, "text": "y\n"}}})
	e.ok("batch_insert_text", map[string]any{"path": "notes.txt", "request_id": "u", "operations": []any{map[string]any{"position": -1, "text": "y\n"}}})
	if got := e.serverText("notes.txt"); got != "x\ny\n" {
		t.Errorf("text after a repeated insert %q", got)
	}
	r = e.fail("batch_insert_text", map[string]any{"path": "notes.txt", "request_id": strings.Repeat("x", 200), "operations": []any{map[string]any{"position": -1, "text": "y"}}})
	findDetail(t, r, "request_id")
}

// A call that changed nothing (refused) is forgotten: the same request later runs afresh.
func TestRequestIDRefusedCallRunsAgain(t *testing.T) {
	e := editEnv(t)
	args := map[string]any{"path": editPath, "request_id": "later", "after_cell_id": "z", "cells": newCells("Z")}
	r := e.fail("batch_insert_notebook_cells", args)
	findDetail(t, r, "after_cell_id")
	humanInsert(e, 5, "z")
	body := e.ok("batch_insert_notebook_cells", args)
	if p := placed(t, body["inserted"]); p["Z"] != 6 {
		t.Errorf("inserted %v", body["inserted"])
	}
}

func TestClearOutputs(t *testing.T) {
	e := editEnv(t)
	body := e.ok("clear_outputs", map[string]any{"path": editPath, "cell_ids": []any{"a", "b"}})
	if p := placed(t, body["cleared"]); len(p) != 1 || p["a"] != 0 {
		t.Errorf("cleared %v, want a", body["cleared"])
	}
	if w := asList(t, body["warnings"]); len(w) != 1 || !strings.Contains(str(w[0]), `"b": not a code cell`) {
		t.Errorf("warnings %v", body["warnings"])
	}
	a := e.serverCell(editPath, "a")
	if len(a.Outputs) != 0 || a.ExecutionCount != nil || a.Metadata["tags"] == nil {
		t.Errorf("a after clear: %+v", a)
	}
	if got := e.serverCell(editPath, "e"); len(got.Outputs) != 1 || got.ExecutionCount == nil {
		t.Errorf("e was cleared too: %+v", got)
	}
	v := str(body["version"])
	// A human runs e meanwhile: clearing it against the old version is a conflict.
	e.humanEdit(editPath, ydoc.KindNotebook, func(tx *ydoc.Txn) error {
		return tx.AppendOutput(4, map[string]any{"output_type": "stream", "name": "stdout", "text": "again\n"})
	})
	r := e.fail("clear_outputs", map[string]any{"path": editPath, "cell_ids": []any{"e"}, "expected_version": v})
	if got := conflictCells(t, r); len(got) != 1 || got[0] != "e" {
		t.Errorf("conflicts %v", got)
	}
	// The whole notebook.
	body = e.ok("clear_outputs", map[string]any{"path": editPath})
	if p := placed(t, body["cleared"]); len(p) != 1 || p["e"] != 4 || num(t, body["cell_count"]) != 5 {
		t.Errorf("cleared %v", body)
	}
	for _, c := range e.serverNotebook(editPath).Cells {
		if len(c.Outputs) != 0 || c.ExecutionCount != nil {
			t.Errorf("cell %s not cleared: %+v", c.ID, c)
		}
	}
	r = e.fail("clear_outputs", map[string]any{"path": editPath, "cell_ids": []any{"nope"}})
	findDetail(t, r, "cell_ids", 0) // the door names the item that names no cell
}

// undo_last_edit repeated with its request_id takes back one edit, not two.
func TestRequestIDUndoOnce(t *testing.T) {
	e := editEnv(t)
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{map[string]any{"cell_id": "a", "content": "one"}}})
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{map[string]any{"cell_id": "a", "content": "two"}}})
	args := map[string]any{"path": editPath, "request_id": "undo-1"}
	first := e.ok("undo_last_edit", args)
	again := e.ok("undo_last_edit", args)
	if !reflect.DeepEqual(first, again) || num(t, first["undone"]) != 1 || num(t, first["undo_steps_left"]) != 1 {
		t.Errorf("undo %v, repeated %v", first, again)
	}
	if got := e.serverCell(editPath, "a").Source; got != "one" {
		t.Errorf("a %q after one undo, repeated", got)
	}
	redo := map[string]any{"path": editPath, "request_id": "redo-1"}
	e.ok("redo_edit", redo)
	e.ok("redo_edit", redo)
	if got := e.serverCell(editPath, "a").Source; got != "two" {
		t.Errorf("a %q after one redo, repeated", got)
	}
	// The tools' own refusals: nothing left to redo (a refusal is forgotten: a repeat says the same).
	for range 2 {
		if r := e.fail("redo_edit", map[string]any{"path": editPath, "request_id": "redo-2"}); !strings.Contains(errorText(r), "nothing to redo") {
			t.Errorf("redo with nothing to redo: %s", errorText(r))
		}
	}
}
