package tools_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

const editPath = "edit.ipynb"

// editNotebook has five cells a..e of every type; a and e carry outputs, counts and metadata.
func editNotebook() ydoc.Notebook {
	one, two := 1, 2
	return notebook(
		ydoc.Cell{ID: "a", Type: ydoc.CellCode, Source: "A = 1\nprint(A)", ExecutionCount: &one,
			Metadata: map[string]any{"tags": []any{"t"}, "collapsed": true},
			Outputs:  []map[string]any{{"output_type": "stream", "name": "stdout", "text": "1\n"}}},
		ydoc.Cell{ID: "b", Type: ydoc.CellMarkdown, Source: "## B"},
		ydoc.Cell{ID: "c", Type: ydoc.CellCode, Source: "C", Outputs: []map[string]any{}},
		ydoc.Cell{ID: "d", Type: ydoc.CellRaw, Source: "D"},
		ydoc.Cell{ID: "e", Type: ydoc.CellCode, Source: "E", ExecutionCount: &two,
			Metadata: map[string]any{"scrolled": false},
			Outputs: []map[string]any{{"output_type": "execute_result", "execution_count": 2, "metadata": map[string]any{},
				"data": map[string]any{"text/plain": "2"}}}},
	)
}

var editIDs = []string{"a", "b", "c", "d", "e"}

// editEnv opens a fresh fake with the edit notebook and joins its room.
func editEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	e := newEnv(t, []bridgetest.File{nbFile(editPath, editNotebook()), textFile("notes.txt", "x\n")}, opts...)
	e.nbVersion(editPath)
	return e
}

func newCells(specs ...string) []any {
	var out []any
	for _, s := range specs {
		out = append(out, map[string]any{"content": "new " + s, "id": s})
	}
	return out
}

// cellJSON is a server cell as nbformat JSON, for comparing content across moves.
func cellJSON(t *testing.T, c ydoc.Cell) string {
	t.Helper()
	b, err := json.Marshal(c.JSON(true))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// placed decodes an inserted/deleted list into id → index.
func placed(t *testing.T, v any) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, x := range asList(t, v) {
		m := asMap(t, x)
		out[str(m["id"])] = num(t, m["index"])
	}
	return out
}

// --- insert --------------------------------------------------------------------------------------

func TestInsertPlacement(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  map[string]any
		cells []any
		want  []string
	}{
		{"after_cell_id", map[string]any{"after_cell_id": "b"}, newCells("X", "Y"), []string{"a", "b", "X", "Y", "c", "d", "e"}},
		{"after the last cell", map[string]any{"after_cell_id": "e"}, newCells("X"), []string{"a", "b", "c", "d", "e", "X"}},
		{"before_cell_id", map[string]any{"before_cell_id": "a"}, newCells("X", "Y"), []string{"X", "Y", "a", "b", "c", "d", "e"}},
		{"before a middle cell", map[string]any{"before_cell_id": "d"}, newCells("X"), []string{"a", "b", "c", "X", "d", "e"}},
		{"start_position", map[string]any{"start_position": 2}, newCells("X", "Y", "Z"), []string{"a", "b", "X", "Y", "Z", "c", "d", "e"}},
		{"start_position 0", map[string]any{"start_position": 0}, newCells("X"), []string{"X", "a", "b", "c", "d", "e"}},
		{"start_position at the end", map[string]any{"start_position": 5}, newCells("X"), []string{"a", "b", "c", "d", "e", "X"}},
		{"positions", map[string]any{"positions": []any{0, 2, 2, 5, 3}}, newCells("W", "X", "Y", "Z", "V"),
			[]string{"W", "a", "b", "X", "Y", "c", "V", "d", "e", "Z"}},
		{"positions all equal keep their order", map[string]any{"positions": []any{1, 1, 1}}, newCells("X", "Y", "Z"),
			[]string{"a", "X", "Y", "Z", "b", "c", "d", "e"}},
		{"positions out of order", map[string]any{"positions": []any{4, 0}}, newCells("X", "Y"),
			[]string{"Y", "a", "b", "c", "d", "X", "e"}},
		{"default appends", map[string]any{}, newCells("X", "Y"), []string{"a", "b", "c", "d", "e", "X", "Y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := editEnv(t)
			args := map[string]any{"path": editPath, "cells": tc.cells}
			for k, v := range tc.args {
				args[k] = v
			}
			v0 := e.nbVersion(editPath)
			body := e.ok("batch_insert_notebook_cells", args)
			wantIDs(t, "server", e.srv.CellIDs(editPath), tc.want)
			got := placed(t, body["inserted"])
			if len(got) != len(tc.cells) {
				t.Errorf("inserted = %v, want %d cells", body["inserted"], len(tc.cells))
			}
			for id, i := range got {
				if tc.want[i] != id {
					t.Errorf("inserted says %s is at %d, but the server has %s there", id, i, tc.want[i])
				}
			}
			// Results list the inserted cells in the order given.
			var order []string
			for _, x := range asList(t, body["inserted"]) {
				order = append(order, str(asMap(t, x)["id"]))
			}
			var given []string
			for _, c := range tc.cells {
				given = append(given, str(c.(map[string]any)["id"]))
			}
			if !slices.Equal(order, given) {
				t.Errorf("inserted order %v, want %v", order, given)
			}
			if num(t, body["cell_count"]) != len(tc.want) {
				t.Errorf("cell_count = %v, want %d", body["cell_count"], len(tc.want))
			}
			if v := str(body["version"]); v == "" || v == v0 {
				t.Errorf("version %q after the insert (was %q)", v, v0)
			}
			// Untouched cells keep their content.
			if c := e.serverCell(editPath, "a"); c.Source != "A = 1\nprint(A)" || len(c.Outputs) != 1 {
				t.Errorf("cell a changed: %+v", c)
			}
		})
	}
}

func TestInsertCellContent(t *testing.T) {
	e := editEnv(t)
	body := e.ok("batch_insert_notebook_cells", map[string]any{"path": editPath, "after_cell_id": "a", "cells": []any{
		map[string]any{"content": "# Notes\ntext", "cell_type": "markdown"},
		map[string]any{"content": "x = 1", "metadata": map[string]any{"tags": []any{"new"}, "n": 2}},
		map[string]any{"content": "raw!", "cell_type": "raw"},
		map[string]any{},
	}})
	ins := asList(t, body["inserted"])
	if len(ins) != 4 {
		t.Fatalf("inserted %v", ins)
	}
	ids := e.srv.CellIDs(editPath)
	if len(ids) != 9 || ids[0] != "a" || ids[5] != "b" {
		t.Fatalf("server cells %v", ids)
	}
	nb := e.serverNotebook(editPath)
	for k, want := range []struct{ typ, src string }{{"markdown", "# Notes\ntext"}, {"code", "x = 1"}, {"raw", "raw!"}, {"code", ""}} {
		c := nb.Cells[1+k]
		if c.Type != want.typ || c.Source != want.src {
			t.Errorf("new cell %d = %s %q, want %s %q", k, c.Type, c.Source, want.typ, want.src)
		}
		if id := str(asMap(t, ins[k])["id"]); c.ID != id || id == "" {
			t.Errorf("new cell %d has id %q, result says %q", k, c.ID, id)
		}
	}
	if md := nb.Cells[2].Metadata; fmt.Sprint(md["tags"]) != "[new]" || fmt.Sprint(md["n"]) != "2" {
		t.Errorf("metadata of the new code cell = %v", md)
	}
	// Generated ids are distinct.
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("id %s twice: %v", id, ids)
		}
		seen[id] = true
	}
}

func TestInsertRefusals(t *testing.T) {
	e := editEnv(t)
	before := e.snapshot(editPath)
	for _, tc := range []struct {
		name string
		args map[string]any
		path []any
		says []string
	}{
		{"unknown after_cell_id", map[string]any{"after_cell_id": "zz", "cells": newCells("X")}, []any{"after_cell_id"}, []string{"zz"}},
		{"unknown before_cell_id", map[string]any{"before_cell_id": "zz", "cells": newCells("X")}, []any{"before_cell_id"}, []string{"zz"}},
		{"start_position past the end", map[string]any{"start_position": 6, "cells": newCells("X")}, []any{"start_position"}, []string{"6", "5"}},
		{"second position out of range", map[string]any{"positions": []any{0, 99}, "cells": newCells("X", "Y")}, []any{"positions", 1}, []string{"99"}},
		{"positions length", map[string]any{"positions": []any{0}, "cells": newCells("X", "Y")}, []any{"positions"}, []string{"1", "2"}},
		{"two placements", map[string]any{"after_cell_id": "a", "start_position": 0, "cells": newCells("X")}, []any{"positions"}, []string{"at most one"}},
		{"duplicate new ids", map[string]any{"cells": []any{map[string]any{"id": "q"}, map[string]any{"id": "q"}}}, []any{"cells", 1, "id"}, []string{"q"}},
		{"existing id", map[string]any{"cells": []any{map[string]any{"id": "X"}, map[string]any{"id": "c"}}}, []any{"cells"}, []string{`"c"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"path": editPath}
			for k, v := range tc.args {
				args[k] = v
			}
			r := e.fail("batch_insert_notebook_cells", args)
			d := findDetail(t, r, tc.path...)
			mustContain(t, "detail", d.msg, tc.says...)
			if after := e.snapshot(editPath); after != before {
				t.Errorf("the server notebook changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// --- update --------------------------------------------------------------------------------------

func updatedOf(t *testing.T, body map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, x := range asList(t, body["updated"]) {
		m := asMap(t, x)
		var ch []string
		for _, f := range asList(t, m["changed"]) {
			ch = append(ch, str(f))
		}
		out[str(m["id"])] = ch
	}
	return out
}

func TestUpdateAddressing(t *testing.T) {
	t.Run("cell_id per update", func(t *testing.T) {
		e := editEnv(t)
		body := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{
			map[string]any{"cell_id": "c", "content": "C2"},
			map[string]any{"cell_id": "a", "content": "A = 2\nprint(A)"},
		}})
		if got := e.serverSources(editPath); !slices.Equal(got, []string{"A = 2\nprint(A)", "## B", "C2", "D", "E"}) {
			t.Errorf("server sources %q", got)
		}
		up := asList(t, body["updated"])
		if len(up) != 2 || str(asMap(t, up[0])["id"]) != "c" || num(t, asMap(t, up[0])["index"]) != 2 || num(t, asMap(t, up[1])["index"]) != 0 {
			t.Errorf("updated = %s", compact(up))
		}
		if ch := updatedOf(t, body)["c"]; !slices.Equal(ch, []string{"source"}) {
			t.Errorf("changed = %v", ch)
		}
		if str(body["version"]) == "" {
			t.Error("no version")
		}
		// A source edit keeps outputs, count and metadata.
		a := e.serverCell(editPath, "a")
		if len(a.Outputs) != 1 || a.ExecutionCount == nil || *a.ExecutionCount != 1 || a.Metadata["collapsed"] != true {
			t.Errorf("cell a lost outputs/count/metadata: %+v", a)
		}
	})
	t.Run("cell_ids", func(t *testing.T) {
		e := editEnv(t)
		e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "cell_ids": []any{"e", "b"},
			"updates": []any{map[string]any{"content": "E2"}, map[string]any{"content": "## B2"}}})
		if got := e.serverSources(editPath); !slices.Equal(got, []string{"A = 1\nprint(A)", "## B2", "C", "D", "E2"}) {
			t.Errorf("server sources %q", got)
		}
	})
	t.Run("index range", func(t *testing.T) {
		e := editEnv(t)
		body := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "start_index": 1, "end_index": 3,
			"updates": []any{map[string]any{"content": "b1"}, map[string]any{"content": "c1"}, map[string]any{"content": "d1"}}})
		if got := e.serverSources(editPath); !slices.Equal(got, []string{"A = 1\nprint(A)", "b1", "c1", "d1", "E"}) {
			t.Errorf("server sources %q", got)
		}
		if len(updatedOf(t, body)) != 3 {
			t.Errorf("updated = %v", body["updated"])
		}
	})
	t.Run("start_index alone", func(t *testing.T) {
		e := editEnv(t)
		e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "start_index": 4, "updates": []any{map[string]any{"content": "last"}}})
		if got := e.serverSources(editPath); got[4] != "last" || got[3] != "D" {
			t.Errorf("server sources %q", got)
		}
	})
	t.Run("unchanged content", func(t *testing.T) {
		e := editEnv(t)
		body := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{map[string]any{"cell_id": "c", "content": "C"}}})
		if ch := updatedOf(t, body)["c"]; len(ch) != 0 {
			t.Errorf("changed = %v for an update that changes nothing", ch)
		}
	})
}

func TestUpdateCellType(t *testing.T) {
	e := editEnv(t)
	body := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{
		map[string]any{"cell_id": "a", "cell_type": "markdown"},
		map[string]any{"cell_id": "b", "cell_type": "code", "content": "b = 2"},
		map[string]any{"cell_id": "d", "cell_type": "raw"},
	}})
	wantIDs(t, "ids after type changes", e.srv.CellIDs(editPath), editIDs)
	a := e.serverCell(editPath, "a")
	if a.Type != "markdown" || a.Source != "A = 1\nprint(A)" || len(a.Outputs) != 0 || a.Metadata["collapsed"] != true {
		t.Errorf("a after code→markdown: %+v", a)
	}
	b := e.serverCell(editPath, "b")
	if b.Type != "code" || b.Source != "b = 2" {
		t.Errorf("b after markdown→code: %+v", b)
	}
	ch := updatedOf(t, body)
	if !slices.Contains(ch["a"], "cell_type") || !slices.Contains(ch["b"], "cell_type") || !slices.Contains(ch["b"], "source") {
		t.Errorf("changed = %v", ch)
	}
	if len(ch["d"]) != 0 {
		t.Errorf("d: changed %v for its own type", ch["d"])
	}
	// get_notebook sees the same.
	cells := cellsOf(t, e.ok("get_notebook", map[string]any{"format": "json", "path": editPath}))
	if cells[0]["cell_type"] != "markdown" || cells[0]["id"] != "a" || cells[1]["cell_type"] != "code" {
		t.Errorf("get_notebook after type changes: %s", compact(cells[:2]))
	}
}

func TestUpdateMetadata(t *testing.T) {
	e := editEnv(t)
	body := e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{
		map[string]any{"cell_id": "a", "metadata": map[string]any{"collapsed": nil, "owner": "ai", "tags": []any{"t", "u"}}},
		map[string]any{"cell_id": "e", "metadata": map[string]any{"only": map[string]any{"k": 1}}, "metadata_mode": "replace"},
	}})
	a := e.serverCell(editPath, "a")
	if want := map[string]any{"owner": "ai", "tags": []any{"t", "u"}}; !reflect.DeepEqual(jsonRoundTrip(t, a.Metadata), jsonRoundTrip(t, want)) {
		t.Errorf("merged metadata = %v, want %v", a.Metadata, want)
	}
	ecell := e.serverCell(editPath, "e")
	if want := map[string]any{"only": map[string]any{"k": 1}}; !reflect.DeepEqual(jsonRoundTrip(t, ecell.Metadata), jsonRoundTrip(t, want)) {
		t.Errorf("replaced metadata = %v, want %v", ecell.Metadata, want)
	}
	if a.Source != "A = 1\nprint(A)" || len(ecell.Outputs) != 1 {
		t.Error("a metadata update touched source or outputs")
	}
	ch := updatedOf(t, body)
	if !slices.Equal(ch["a"], []string{"metadata"}) || !slices.Equal(ch["e"], []string{"metadata"}) {
		t.Errorf("changed = %v", ch)
	}
	// Replacing with an empty object clears it.
	e.ok("batch_update_notebook_cells", map[string]any{"path": editPath, "updates": []any{
		map[string]any{"cell_id": "e", "metadata": map[string]any{}, "metadata_mode": "replace"}}})
	if md := e.serverCell(editPath, "e").Metadata; len(md) != 0 {
		t.Errorf("metadata after replace with {} = %v", md)
	}
}

func TestUpdateRefusals(t *testing.T) {
	e := editEnv(t)
	before := e.snapshot(editPath)
	for _, tc := range []struct {
		name string
		args map[string]any
		path []any
		says []string
	}{
		{"unknown id in the second update", map[string]any{"updates": []any{
			map[string]any{"cell_id": "a", "content": "changed"}, map[string]any{"cell_id": "ghost", "content": "x"}}},
			[]any{"updates", 1, "cell_id"}, []string{"ghost"}},
		{"unknown id in cell_ids", map[string]any{"cell_ids": []any{"a", "ghost"}, "updates": []any{
			map[string]any{"content": "changed"}, map[string]any{"content": "x"}}},
			[]any{"cell_ids", 1}, []string{"ghost"}},
		{"end_index past the end", map[string]any{"start_index": 3, "end_index": 5, "updates": []any{
			map[string]any{"content": "1"}, map[string]any{"content": "2"}, map[string]any{"content": "3"}}},
			[]any{"end_index"}, []string{"5"}},
		{"start_index past the end", map[string]any{"start_index": 5, "updates": []any{map[string]any{"content": "1"}}},
			[]any{"start_index"}, []string{"5"}},
		{"range and updates differ in length", map[string]any{"start_index": 0, "end_index": 2, "updates": []any{
			map[string]any{"content": "1"}, map[string]any{"content": "2"}}},
			[]any{"end_index"}, []string{"3", "2"}},
		{"cell_ids and updates differ in length", map[string]any{"cell_ids": []any{"a"}, "updates": []any{
			map[string]any{"content": "1"}, map[string]any{"content": "2"}}},
			[]any{"cell_ids"}, []string{"1", "2"}},
		{"cell_id in some updates only", map[string]any{"updates": []any{
			map[string]any{"cell_id": "a", "content": "1"}, map[string]any{"content": "2"}}},
			[]any{"updates"}, []string{"every update"}},
		{"cell_id and cell_ids", map[string]any{"cell_ids": []any{"a"}, "updates": []any{map[string]any{"cell_id": "a", "content": "1"}}},
			[]any{"cell_ids"}, nil},
		{"update changing nothing", map[string]any{"updates": []any{map[string]any{"cell_id": "a", "content": "ok"}, map[string]any{"cell_id": "b"}}},
			[]any{"updates", 1}, []string{"content"}},
		{"replace without metadata", map[string]any{"updates": []any{map[string]any{"cell_id": "a", "content": "x", "metadata_mode": "replace"}}},
			[]any{"updates", 0, "metadata"}, nil},
		{"no addressing", map[string]any{"updates": []any{map[string]any{"content": "x"}}},
			[]any{"cell_ids"}, nil},
		{"duplicate id", map[string]any{"updates": []any{map[string]any{"cell_id": "a", "content": "1"}, map[string]any{"cell_id": "a", "content": "2"}}},
			[]any{"cell_ids"}, []string{"twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"path": editPath}
			for k, v := range tc.args {
				args[k] = v
			}
			r := e.fail("batch_update_notebook_cells", args)
			d := findDetail(t, r, tc.path...)
			mustContain(t, "detail", d.msg, tc.says...)
			if after := e.snapshot(editPath); after != before {
				t.Errorf("the server notebook changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// --- delete --------------------------------------------------------------------------------------

func TestDelete(t *testing.T) {
	t.Run("by ids", func(t *testing.T) {
		e := editEnv(t)
		body := e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "cell_ids": []any{"d", "b"}})
		wantIDs(t, "server", e.srv.CellIDs(editPath), []string{"a", "c", "e"})
		if got := placed(t, body["deleted"]); !reflect.DeepEqual(got, map[string]int{"d": 3, "b": 1}) {
			t.Errorf("deleted = %v", got)
		}
		if num(t, body["cell_count"]) != 3 || str(body["version"]) == "" {
			t.Errorf("cell_count/version = %v/%v", body["cell_count"], body["version"])
		}
	})
	t.Run("by range", func(t *testing.T) {
		e := editEnv(t)
		body := e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "start_index": 1, "end_index": 3})
		wantIDs(t, "server", e.srv.CellIDs(editPath), []string{"a", "e"})
		if got := placed(t, body["deleted"]); !reflect.DeepEqual(got, map[string]int{"b": 1, "c": 2, "d": 3}) {
			t.Errorf("deleted = %v", got)
		}
	})
	t.Run("start_index alone", func(t *testing.T) {
		e := editEnv(t)
		e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "start_index": 0})
		wantIDs(t, "server", e.srv.CellIDs(editPath), []string{"b", "c", "d", "e"})
	})
	t.Run("everything", func(t *testing.T) {
		e := editEnv(t)
		e.ok("batch_delete_notebook_cells", map[string]any{"path": editPath, "start_index": 0, "end_index": 4})
		if ids := e.srv.CellIDs(editPath); len(ids) != 0 {
			t.Errorf("server cells %v", ids)
		}
	})
	t.Run("refusals change nothing", func(t *testing.T) {
		e := editEnv(t)
		before := e.snapshot(editPath)
		for _, tc := range []struct {
			args map[string]any
			path []any
		}{
			{map[string]any{"cell_ids": []any{"a", "ghost"}}, []any{"cell_ids", 1}},
			{map[string]any{"start_index": 2, "end_index": 9}, []any{"end_index"}},
			{map[string]any{"start_index": 9}, []any{"start_index"}},
			{map[string]any{"start_index": 3, "end_index": 1}, []any{"end_index"}},
			{map[string]any{"end_index": 1}, []any{"start_index"}},
			{map[string]any{"cell_ids": []any{"a"}, "start_index": 0}, []any{"cell_ids"}},
			{map[string]any{}, []any{"cell_ids"}},
			{map[string]any{"cell_ids": []any{"a", "a"}}, []any{"cell_ids"}},
		} {
			args := map[string]any{"path": editPath}
			for k, v := range tc.args {
				args[k] = v
			}
			r := e.fail("batch_delete_notebook_cells", args)
			findDetail(t, r, tc.path...)
			if after := e.snapshot(editPath); after != before {
				t.Fatalf("%v changed the server notebook", tc.args)
			}
		}
	})
}

// --- move ----------------------------------------------------------------------------------------

func TestMove(t *testing.T) {
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"to_index 0", map[string]any{"cell_ids": []any{"d", "b"}, "to_index": 0}, []string{"d", "b", "a", "c", "e"}},
		{"to_index end", map[string]any{"cell_ids": []any{"a"}, "to_index": 4}, []string{"b", "c", "d", "e", "a"}},
		{"to_index middle", map[string]any{"cell_ids": []any{"a", "b"}, "to_index": 2}, []string{"c", "d", "a", "b", "e"}},
		{"non-contiguous", map[string]any{"cell_ids": []any{"e", "a"}, "to_index": 1}, []string{"b", "e", "a", "c", "d"}},
		{"after_cell_id", map[string]any{"cell_ids": []any{"a"}, "after_cell_id": "c"}, []string{"b", "c", "a", "d", "e"}},
		{"after the last cell", map[string]any{"cell_ids": []any{"b", "a"}, "after_cell_id": "e"}, []string{"c", "d", "e", "b", "a"}},
		// The anchor's index once the moved cells before it are out (it was decremented while
		// being compared, which put these cells one place too far, or past the end).
		{"after_cell_id, cells right before it", map[string]any{"cell_ids": []any{"b", "c"}, "after_cell_id": "d"}, []string{"a", "d", "b", "c", "e"}},
		{"before_cell_id", map[string]any{"cell_ids": []any{"a", "b"}, "before_cell_id": "e"}, []string{"c", "d", "a", "b", "e"}},
		{"before_cell_id backwards", map[string]any{"cell_ids": []any{"e", "c"}, "before_cell_id": "b"}, []string{"a", "e", "c", "b", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := editEnv(t)
			before := map[string]string{}
			for _, c := range e.serverNotebook(editPath).Cells {
				before[c.ID] = cellJSON(t, c)
			}
			args := map[string]any{"path": editPath}
			for k, v := range tc.args {
				args[k] = v
			}
			body := e.ok("move_notebook_cells", args)
			wantIDs(t, "server", e.srv.CellIDs(editPath), tc.want)
			for _, c := range e.serverNotebook(editPath).Cells {
				if got := cellJSON(t, c); got != before[c.ID] {
					t.Errorf("cell %s changed in the move:\nbefore %s\nafter  %s", c.ID, before[c.ID], got)
				}
			}
			for _, x := range asList(t, body["moved"]) {
				m := asMap(t, x)
				id := str(m["id"])
				if from := num(t, m["from"]); editIDs[from] != id {
					t.Errorf("moved %s from %d, but %s was there", id, from, editIDs[from])
				}
				if to := num(t, m["to"]); tc.want[to] != id {
					t.Errorf("moved %s to %d, but the server has %s there", id, to, tc.want[to])
				}
			}
			if len(asList(t, body["moved"])) != len(asList(t, tc.args["cell_ids"])) {
				t.Errorf("moved = %v", body["moved"])
			}
		})
	}
}

func TestMoveNoOp(t *testing.T) {
	e := editEnv(t)
	before := e.snapshot(editPath)
	v := e.nbVersion(editPath)
	for _, args := range []map[string]any{
		{"cell_ids": []any{"a"}, "to_index": 0},
		{"cell_ids": []any{"b", "c"}, "after_cell_id": "a"},
		{"cell_ids": []any{"d"}, "before_cell_id": "e"},
	} {
		args["path"] = editPath
		body := e.ok("move_notebook_cells", args)
		for _, x := range asList(t, body["moved"]) {
			m := asMap(t, x)
			if m["from"] != m["to"] {
				t.Errorf("no-op move reports %v", m)
			}
		}
		if body["version"] != v {
			t.Errorf("no-op move changed the version from %s to %v", v, body["version"])
		}
	}
	if after := e.snapshot(editPath); after != before {
		t.Errorf("a no-op move changed the notebook")
	}
	if e.nbVersion(editPath) != v {
		t.Error("a no-op move changed the version")
	}
}

func TestMoveRefusals(t *testing.T) {
	e := editEnv(t)
	before := e.snapshot(editPath)
	for _, tc := range []struct {
		args map[string]any
		path []any
	}{
		{map[string]any{"cell_ids": []any{"a", "b"}, "to_index": 4}, []any{"to_index"}},
		{map[string]any{"cell_ids": []any{"a", "ghost"}, "to_index": 0}, []any{"cell_ids", 1}},
		{map[string]any{"cell_ids": []any{"a"}, "after_cell_id": "ghost"}, []any{"after_cell_id"}},
		{map[string]any{"cell_ids": []any{"a"}, "before_cell_id": "ghost"}, []any{"before_cell_id"}},
		{map[string]any{"cell_ids": []any{"a", "b"}, "after_cell_id": "b"}, []any{"cell_ids"}},
		{map[string]any{"cell_ids": []any{"a"}}, []any{"to_index"}},
		{map[string]any{"cell_ids": []any{"a"}, "to_index": 1, "after_cell_id": "c"}, []any{"to_index"}},
		{map[string]any{"cell_ids": []any{"a", "a"}, "to_index": 1}, []any{"cell_ids"}},
	} {
		args := map[string]any{"path": editPath}
		for k, v := range tc.args {
			args[k] = v
		}
		r := e.fail("move_notebook_cells", args)
		findDetail(t, r, tc.path...)
		if after := e.snapshot(editPath); after != before {
			t.Fatalf("%v changed the server notebook", tc.args)
		}
	}
}

// An edit returns only once jupyter-server holds it.
func TestEditWaitsForServerConfirmation(t *testing.T) {
	e := editEnv(t)
	e.srv.HoldEchoes()
	done := make(chan *result, 1)
	go func() {
		done <- e.callNoFatal("batch_update_notebook_cells", map[string]any{"path": editPath,
			"updates": []any{map[string]any{"cell_id": "c", "content": "confirmed?"}}})
	}()
	ctx := testutil.Context(t)
	if err := e.srv.Await(ctx, func() bool { return e.srv.Held() > 0 }); err != nil {
		t.Fatalf("the edit never reached the server: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the edit returned before the server confirmed it: %v", r)
	default:
	}
	e.srv.ReleaseEchoes()
	select {
	case r := <-done:
		if r == nil || r.IsError {
			t.Fatalf("edit failed: %v", r)
		}
	case <-ctx.Done():
		t.Fatal("the edit did not return after the server confirmed it")
	}
	if got := e.serverCell(editPath, "c").Source; got != "confirmed?" {
		t.Errorf("server source %q", got)
	}
}
