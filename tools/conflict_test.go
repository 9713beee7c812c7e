package tools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Optimistic concurrency: expected_version and source hashes refuse edits, changing nothing,
// when a collaborator changed what the edit touches since the agent read it.

func humanSetSource(e *env, id, src string) {
	e.t.Helper()
	e.humanEdit(editPath, ydoc.KindNotebook, func(tx *ydoc.Txn) error {
		i := tx.CellIndex(id)
		if i < 0 {
			return ydoc.ErrCellNotFound
		}
		return tx.SetSource(i, src)
	})
}

func humanInsert(e *env, at int, id string) {
	e.t.Helper()
	e.humanEdit(editPath, ydoc.KindNotebook, func(tx *ydoc.Txn) error {
		return tx.InsertCells(at, []ydoc.Cell{{ID: id, Type: ydoc.CellMarkdown, Source: "by a human"}})
	})
}

// conflictCells returns the cell ids listed in a conflict failure.
func conflictCells(t *testing.T, r *result) []string {
	t.Helper()
	var ids []string
	list, _ := r.Body["conflicts"].([]any)
	for _, x := range list {
		ids = append(ids, str(asMap(t, x)["cell_id"]))
	}
	return ids
}

func TestConflictOnCellChangedByHuman(t *testing.T) {
	e := editEnv(t)
	read := e.ok("get_notebook", map[string]any{"format": "json", "path": editPath})
	v := str(read["version"])
	humanSetSource(e, "c", "C by a human")
	afterHuman := e.snapshot(editPath)

	// Updating the changed cell against the old version fails, naming it.
	r := e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": v,
		"updates": []any{map[string]any{"cell_id": "c", "content": "C by the agent"}}})
	msg := errorText(r)
	mustContain(t, "conflict error", msg, "conflict", "c", "nothing was modified")
	if got := conflictCells(t, r); !slices.Equal(got, []string{"c"}) {
		t.Errorf("conflicts = %v, want [c]", got)
	}
	c0 := asMap(t, asList(t, r.Body["conflicts"])[0])
	if !slices.Contains(asList(t, c0["changed"]), any("source")) || num(t, c0["index"]) != 2 {
		t.Errorf("conflict entry = %v, want changed source at index 2", c0)
	}
	cur := str(r.Body["current_version"])
	if cur == "" || cur == v {
		t.Errorf("current_version = %q (read %q)", cur, v)
	}
	if e.snapshot(editPath) != afterHuman {
		t.Fatal("the refused update changed the notebook")
	}
	if got := e.serverCell(editPath, "c").Source; got != "C by a human" {
		t.Fatalf("the human's text was overwritten: %q", got)
	}

	// The same batch with an untouched cell in it fails as a whole.
	r = e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": v,
		"updates": []any{map[string]any{"cell_id": "a", "content": "A2"}, map[string]any{"cell_id": "c", "content": "C2"}}})
	if got := conflictCells(t, r); !slices.Equal(got, []string{"c"}) {
		t.Errorf("conflicts = %v, want [c]", got)
	}
	if e.snapshot(editPath) != afterHuman {
		t.Fatal("a batch with a conflicting cell changed the notebook")
	}

	// Deleting or moving the changed cell against the old version fails too.
	r = e.fail("batch_delete_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "cell_ids": []any{"c"}})
	mustContain(t, "delete conflict", errorText(r), "conflict")
	r = e.fail("move_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "cell_ids": []any{"c"}, "after_cell_id": "e"})
	mustContain(t, "move conflict", errorText(r), "conflict")
	if e.snapshot(editPath) != afterHuman {
		t.Fatal("a refused delete or move changed the notebook")
	}

	// Another cell, with the same old version, is fine.
	body := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": v,
		"updates": []any{map[string]any{"cell_id": "a", "content": "A by the agent"}}})
	if got := e.serverSources(editPath); !slices.Equal(got, []string{"A by the agent", "## B", "C by a human", "D", "E"}) {
		t.Errorf("server sources %q", got)
	}
	// Retrying with the current version succeeds.
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": body["version"],
		"updates": []any{map[string]any{"cell_id": "c", "content": "C merged"}}})
	if got := e.serverCell(editPath, "c").Source; got != "C merged" {
		t.Errorf("server source of c = %q", got)
	}
}

func TestConflictIndexAddressingAfterHumanInsert(t *testing.T) {
	e := editEnv(t)
	v := e.nbVersion(editPath)
	humanInsert(e, 0, "h")
	before := e.snapshot(editPath)

	r := e.fail("batch_delete_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "start_index": 2, "end_index": 3})
	mustContain(t, "index conflict", errorText(r), "conflict")
	r = e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "start_index": 1,
		"updates": []any{map[string]any{"content": "x"}}})
	mustContain(t, "index conflict", errorText(r), "conflict")
	r = e.fail("batch_insert_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "start_position": 1, "cells": newCells("X")})
	mustContain(t, "index conflict", errorText(r), "conflict")
	r = e.fail("batch_insert_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "positions": []any{1}, "cells": newCells("X")})
	mustContain(t, "index conflict", errorText(r), "conflict")
	r = e.fail("move_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "cell_ids": []any{"a"}, "to_index": 2})
	mustContain(t, "index conflict", errorText(r), "conflict")
	// The index range now starting at the human's cell names it.
	r = e.fail("batch_delete_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "start_index": 0})
	if got := conflictCells(t, r); !slices.Equal(got, []string{"h"}) {
		t.Errorf("conflicts = %v, want the inserted cell h", got)
	}
	if e.snapshot(editPath) != before {
		t.Fatal("a refused index-addressed edit changed the notebook")
	}

	// Addressing by id is unaffected by the insert.
	e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "cell_ids": []any{"b", "c"}})
	wantIDs(t, "after deleting by id", e.srv.CellIDs(editPath), []string{"h", "a", "d", "e"})
	e.ok("batch_insert_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "after_cell_id": "d", "cells": newCells("X")})
	wantIDs(t, "after inserting by anchor", e.srv.CellIDs(editPath), []string{"h", "a", "d", "X", "e"})
	// Without expected_version, index addressing just acts on the current notebook.
	e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "start_index": 0})
	wantIDs(t, "after an unguarded delete", e.srv.CellIDs(editPath), []string{"a", "d", "X", "e"})
}

func TestConflictHumanDeletedCell(t *testing.T) {
	e := editEnv(t)
	v := e.nbVersion(editPath)
	e.humanEdit(editPath, ydoc.KindNotebook, func(tx *ydoc.Txn) error { return tx.DeleteCells(tx.CellIndex("d"), 1) })
	before := e.snapshot(editPath)
	// The anchor of an insert is gone.
	r := e.fail("batch_insert_notebook_cells", map[string]any{"path": editPath, "expected_version": v, "after_cell_id": "d", "cells": newCells("X")})
	mustContain(t, "insert after a deleted cell", errorText(r), "d")
	// An update addressing it says it is not there.
	r = e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": v,
		"updates": []any{map[string]any{"cell_id": "d", "content": "x"}}})
	mustContain(t, "update of a deleted cell", errorText(r), `"d"`)
	if e.snapshot(editPath) != before {
		t.Fatal("a refused edit changed the notebook")
	}
}

func TestConflictSourceHash(t *testing.T) {
	e := editEnv(t)
	cells := cellsOf(t, e.ok("get_notebook", map[string]any{"format": "json", "path": editPath}))
	hashC := str(cells[2]["source_hash"])
	hashA := str(cells[0]["source_hash"])
	humanSetSource(e, "c", "C by a human")
	before := e.snapshot(editPath)

	r := e.fail("batch_update_notebook_cells", map[string]any{"path": editPath,
		"updates": []any{map[string]any{"cell_id": "c", "content": "agent", "expected_source_hash": hashC}}})
	mustContain(t, "hash conflict", errorText(r), "conflict", "c")
	if got := conflictCells(t, r); !slices.Equal(got, []string{"c"}) {
		t.Errorf("conflicts = %v", got)
	}
	r = e.fail("batch_update_notebook_cells", map[string]any{"path": editPath,
		"updates": []any{
			map[string]any{"cell_id": "a", "content": "agent a", "expected_source_hash": hashA},
			map[string]any{"cell_id": "c", "content": "agent c", "expected_source_hash": hashC},
		}})
	if got := conflictCells(t, r); !slices.Equal(got, []string{"c"}) {
		t.Errorf("conflicts = %v", got)
	}
	r = e.fail("batch_delete_notebook_cells", map[string]any{"path": editPath, "cell_ids": []any{"c"},
		"expected_source_hashes": map[string]any{"c": hashC}})
	mustContain(t, "delete hash conflict", errorText(r), "conflict")
	r = e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "cell_ids": []any{"a"},
		"updates":                []any{map[string]any{"content": "x"}},
		"expected_source_hashes": map[string]any{"c": hashC}})
	mustContain(t, "hash of another cell", errorText(r), "c")
	if e.snapshot(editPath) != before {
		t.Fatal("a refused edit changed the notebook")
	}

	// The right hashes pass.
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath,
		"updates": []any{
			map[string]any{"cell_id": "a", "content": "agent a", "expected_source_hash": hashA},
			map[string]any{"cell_id": "c", "content": "agent c", "expected_source_hash": sourceHash("C by a human")},
		}})
	if got := e.serverSources(editPath); got[0] != "agent a" || got[2] != "agent c" {
		t.Errorf("server sources %q", got)
	}
}

func TestConflictBadVersion(t *testing.T) {
	e := editEnv(t)
	before := e.snapshot(editPath)
	v := e.nbVersion(editPath)
	epoch, _, _ := strings.Cut(v, "-")
	for _, bad := range []string{"garbage", "abc-1", "zzzzzz-0", epoch + "-999999", epoch + "-x"} {
		r := e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": bad,
			"updates": []any{map[string]any{"cell_id": "a", "content": "x"}}})
		mustContain(t, "bad version "+bad, errorText(r), bad, "re-read")
		if str(r.Body["current_version"]) != v {
			t.Errorf("current_version = %v, want %s", r.Body["current_version"], v)
		}
		r = e.fail("batch_insert_notebook_cells", map[string]any{"path": editPath, "expected_version": bad, "cells": newCells("X")})
		mustContain(t, "bad version on insert "+bad, errorText(r), bad)
	}
	if e.snapshot(editPath) != before {
		t.Fatal("an edit with a bad version changed the notebook")
	}
}

// injectPeer makes a collaborator appear in the room's awareness, as JupyterLab's awareness
// update would (the fake forwards it to the sidecar).
func injectPeer(t *testing.T, e *env, path string, clientID uint64, username, display string) {
	t.Helper()
	state, _ := json.Marshal(map[string]any{"user": map[string]any{
		"username": username, "name": display, "display_name": display, "initials": display[:1], "color": "#ff0000"}})
	room := e.m.Get(path, ydoc.KindNotebook)
	sub := room.Subscribe(256)
	defer sub.Close()
	e.srv.Inject(ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(clientID, 1, state)))
	timer := time.NewTimer(testutil.WaitLimit)
	defer timer.Stop()
	for {
		for _, c := range room.Info().Collaborators {
			if c.ClientID == clientID {
				return
			}
		}
		select {
		case <-sub.C: // re-check after every room event (awareness changes publish one)
		case <-timer.C:
			t.Fatalf("peer %d never showed up in the room's collaborators", clientID)
		}
	}
}

func TestCollaboratorsAndConflictAuthors(t *testing.T) {
	e := editEnv(t)
	human := e.srv.DocClientID(editPath)
	injectPeer(t, e, editPath, human, "alice", "Alice A.")
	injectPeer(t, e, editPath, human+1000, "alice", "Alice A.") // a second browser tab
	injectPeer(t, e, editPath, human+2000, "bob", "Bob")

	body := e.ok("get_notebook", map[string]any{"format": "json", "path": editPath})
	var names []string
	for _, x := range asList(t, asMap(t, body["collaboration"])["collaborators"]) {
		m := asMap(t, x)
		names = append(names, str(m["username"])+"="+str(m["name"]))
		if str(m["color"]) == "" {
			t.Errorf("collaborator without color: %v", m)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"alice=Alice A.", "bob=Bob"}) {
		t.Errorf("collaborators = %v, want alice once and bob", names)
	}
	list := e.ok("list_notebooks", map[string]any{})
	for _, x := range asList(t, list["notebooks"]) {
		m := asMap(t, x)
		if m["path"] == editPath && len(asList(t, m["collaborators"])) != 2 {
			t.Errorf("list_notebooks collaborators of the open notebook = %v", m["collaborators"])
		}
	}

	v := e.nbVersion(editPath)
	humanSetSource(e, "c", "Alice was here")
	r := e.fail("batch_update_notebook_cells", map[string]any{"path": editPath, "expected_version": v,
		"updates": []any{map[string]any{"cell_id": "c", "content": "agent"}}})
	mustContain(t, "conflict message", errorText(r), "c (by Alice A.)")
	by := asList(t, asMap(t, asList(t, r.Body["conflicts"])[0])["by"])
	if len(by) != 1 || by[0] != "Alice A." {
		t.Errorf("conflict by = %v", by)
	}
}
