package ydoc

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Edits as values: what each does on its first run (guards, refusals, outcome), and its replay
// rules on a document that changed in between.

func strp(s string) *string { return &s }

// editNotebook is a notebook with three cells: a (code, with an output and a count), b
// (markdown), c (code).
func editNotebook(t *testing.T) *Doc {
	t.Helper()
	d := newTestDoc(t, KindNotebook)
	one := 1
	transact(t, d, func(tx *Txn) error {
		return tx.LoadNotebook(Notebook{NBFormat: 4, NBFormatMinor: 5, Cells: []Cell{
			{ID: "a", Type: CellCode, Source: "x = 1", ExecutionCount: &one, Metadata: map[string]any{"execution": map[string]any{"t": "now"}, "tags": []any{"keep"}},
				Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "hi\n"}}},
			{ID: "b", Type: CellMarkdown, Source: "# B"},
			{ID: "c", Type: CellCode, Source: "y = 2"},
		}})
	})
	return d
}

// runEdit runs an edit the way the Replica does.
func runEdit(t *testing.T, d *Doc, e Edit, r editRun) (Outcome, error) {
	t.Helper()
	var out Outcome
	_, _, err := d.Transact(func(tx *Txn) error {
		var err error
		out, err = e.run(tx, r)
		return err
	})
	return out, err
}

func mustRun(t *testing.T, d *Doc, e Edit, r editRun) Outcome {
	t.Helper()
	out, err := runEdit(t, d, e, r)
	if err != nil {
		t.Fatalf("%T: %v", e, err)
	}
	return out
}

func cellByID(t *testing.T, d *Doc, id string) Cell {
	t.Helper()
	for _, c := range readNotebook(t, d).Cells {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no cell %s", id)
	return Cell{}
}

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Field) == 0 || inv.Field[0] != field {
		t.Fatalf("err %v, want an InvalidError on %s", err, field)
	}
}

func TestInsertCellsFirstRun(t *testing.T) {
	d := editNotebook(t)
	out := mustRun(t, d, InsertCells{Cells: []Cell{{ID: "n1", Source: "new"}, {Source: "héllo 𝄞"}}, After: "a"}, editRun{})
	ids := d.CellIDs()
	if len(ids) != 5 || ids[1] != "n1" || out.Cells[1].ID == "" || ids[2] != out.Cells[1].ID {
		t.Fatalf("cells %v, outcome %+v", ids, out)
	}
	if out.Count != 5 || out.Cells[0].Index != 1 || out.Cells[1].Index != 2 || out.Cells[0].Type != CellCode {
		t.Errorf("outcome %+v", out)
	}
	if out.Cursor == nil || out.Cursor.CellID != out.Cells[1].ID || out.Cursor.Offset != 8 { // 𝄞 is two UTF-16 units
		t.Errorf("cursor %+v", out.Cursor)
	}
	before := d.CellIDs()
	for _, tc := range []struct {
		name  string
		e     InsertCells
		field string
	}{
		{"id already there", InsertCells{Cells: []Cell{{ID: "a"}}}, "cells"},
		{"anchor missing", InsertCells{Cells: []Cell{{ID: "z"}}, Before: "nope"}, "before_cell_id"},
		{"position past the end", InsertCells{Cells: []Cell{{ID: "z"}}, Positions: []int{9}}, "positions"},
		{"start past the end", InsertCells{Cells: []Cell{{ID: "z"}}, At: intp(9)}, "start_position"},
		{"two placements", InsertCells{Cells: []Cell{{ID: "z"}}, At: intp(0), After: "a"}, "positions"},
		{"positions per cell", InsertCells{Cells: []Cell{{ID: "z"}, {ID: "w"}}, Positions: []int{0}}, "positions"},
		{"an id twice", InsertCells{Cells: []Cell{{ID: "z"}, {ID: "z"}}}, "cells"},
	} {
		_, err := runEdit(t, d, tc.e, editRun{})
		wantInvalid(t, err, tc.field)
		if got := d.CellIDs(); !slices.Equal(got, before) {
			t.Fatalf("%s: the refused insert changed the cells: %v", tc.name, got)
		}
	}
}

func TestInsertCellsReplay(t *testing.T) {
	d := editNotebook(t)
	e := InsertCells{Cells: []Cell{{ID: "n1"}, {ID: "n2"}}, After: "b"}
	first := mustRun(t, d, e, editRun{})
	// The room was rebuilt: one of the cells made it, the anchor did not.
	transact(t, d, func(tx *Txn) error { return tx.DeleteCells(tx.CellIndex("n2"), 1) })
	transact(t, d, func(tx *Txn) error { return tx.DeleteCells(tx.CellIndex("b"), 1) })
	out := mustRun(t, d, e, editRun{replay: true, prev: &first})
	if ids := d.CellIDs(); !slices.Equal(ids, []string{"a", "n1", "c", "n2"}) {
		t.Fatalf("after the replay %v: n1 kept once, n2 at the end", ids)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "cell b was gone") {
		t.Errorf("warnings %v", out.Warnings)
	}
	if out.Cells[0].Index != 1 || out.Cells[1].Index != 3 {
		t.Errorf("replayed outcome %+v", out.Cells)
	}
	// A position past the end on a replay is the end; generated ids come back from the first run.
	d2 := editNotebook(t)
	e2 := InsertCells{Cells: []Cell{{Source: "gen"}}, Positions: []int{3}}
	first2 := mustRun(t, d2, e2, editRun{})
	gen := first2.Cells[0].ID
	transact(t, d2, func(tx *Txn) error { return tx.DeleteCells(2, 2) })
	mustRun(t, d2, e2, editRun{replay: true, prev: &first2})
	if ids := d2.CellIDs(); !slices.Equal(ids, []string{"a", "b", gen}) {
		t.Errorf("replay with a shrunk notebook: %v", ids)
	}
}

func TestUpdateCellsGuardsAndOutcome(t *testing.T) {
	d := editNotebook(t)
	// Hashes: the edit refuses when a source differs; a stale per-update hash too.
	_, err := runEdit(t, d, UpdateCells{Updates: []CellUpdate{{CellID: "c", Source: strp("z")}}, Guard: Guard{Hashes: map[string]string{"a": "000000000000"}}}, editRun{})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || len(conflict.Conflicts) != 1 || conflict.Conflicts[0].CellID != "a" || *conflict.Conflicts[0].Index != 0 {
		t.Fatalf("err %v, want a conflict on a", err)
	}
	// The version guard: cells changed since, and index addressing after cells moved.
	since := &Since{Version: "v1"}
	since.Note("c", "source", []string{"Ann"})
	_, err = runEdit(t, d, UpdateCells{Updates: []CellUpdate{{CellID: "c", Source: strp("z")}}}, editRun{since: since})
	if !errors.As(err, &conflict) || conflict.Version != "v1" || !slices.Equal(conflict.Conflicts[0].By, []string{"Ann"}) {
		t.Fatalf("err %v, want a conflict on c by Ann", err)
	}
	moved := &Since{Version: "v1", Structure: true}
	_, err = runEdit(t, d, UpdateCells{Target: Target{Start: intp(0)}, Updates: []CellUpdate{{Source: strp("z")}}}, editRun{since: moved})
	if !errors.As(err, &conflict) || !conflict.Structure {
		t.Fatalf("err %v, want a structure conflict", err)
	}
	if _, err := runEdit(t, d, UpdateCells{Updates: []CellUpdate{{CellID: "a", Source: strp("z")}}}, editRun{since: moved}); err != nil {
		t.Fatalf("by id after a structure change: %v", err)
	}
	// Busy cells: listed, or the edit refused.
	busy := Guard{Busy: map[string][]string{"c": {"Bea"}}}
	out := mustRun(t, d, UpdateCells{Updates: []CellUpdate{{CellID: "c", Source: strp("y = 3")}}, Guard: busy}, editRun{})
	if len(out.Busy) != 1 || out.Busy[0].ID != "c" || out.Cells[0].Changed[0] != "source" {
		t.Errorf("outcome %+v", out)
	}
	busy.AvoidBusy = true
	var be *BusyError
	if _, err := runEdit(t, d, UpdateCells{Updates: []CellUpdate{{CellID: "c", Source: strp("y = 4")}}, Guard: busy}, editRun{}); !errors.As(err, &be) {
		t.Fatalf("err %v, want busy", err)
	}
	// Type, metadata merge (nil removes), and an update that changes nothing.
	out = mustRun(t, d, UpdateCells{Updates: []CellUpdate{
		{CellID: "b", Type: CellCode},
		{CellID: "a", Metadata: map[string]any{"tags": nil, "new": 1}},
		{CellID: "c", Source: strp("y = 3")},
	}}, editRun{})
	if !slices.Equal(out.Cells[0].Changed, []string{"cell_type"}) || out.Cells[0].Type != CellCode ||
		!slices.Equal(out.Cells[1].Changed, []string{"metadata"}) || len(out.Cells[2].Changed) != 0 {
		t.Errorf("outcome %+v", out.Cells)
	}
	if md := cellByID(t, d, "a").Metadata; md["tags"] != nil || md["new"] == nil {
		t.Errorf("merged metadata %v", md)
	}
	for _, tc := range []struct {
		e     UpdateCells
		field string
	}{
		{UpdateCells{Updates: []CellUpdate{{CellID: "a"}}}, "updates"},
		{UpdateCells{Updates: []CellUpdate{{CellID: "a", ReplaceMetadata: true}}}, "updates"},
		{UpdateCells{Updates: []CellUpdate{{CellID: "a", Source: strp("")}, {Source: strp("")}}}, "updates"},
		{UpdateCells{Target: Target{IDs: []string{"a"}}, Updates: []CellUpdate{{CellID: "a", Source: strp("")}}}, "cell_ids"},
		{UpdateCells{Target: Target{IDs: []string{"a", "b"}}, Updates: []CellUpdate{{Source: strp("")}}}, "cell_ids"},
		{UpdateCells{Target: Target{Start: intp(0), End: intp(1)}, Updates: []CellUpdate{{Source: strp("")}}}, "end_index"},
		{UpdateCells{Updates: []CellUpdate{{CellID: "gone", Source: strp("")}}}, "cell_ids"},
	} {
		_, err := runEdit(t, d, tc.e, editRun{})
		wantInvalid(t, err, tc.field)
	}
}

// An update addressed by index replays on the cells the first run resolved, not on whatever sits
// at those indices after the room was rebuilt; cells gone meanwhile are left out.
func TestUpdateCellsReplayByResolvedIDs(t *testing.T) {
	d := editNotebook(t)
	e := UpdateCells{Target: Target{Start: intp(1), End: intp(2)}, Updates: []CellUpdate{{Source: strp("B2")}, {Source: strp("C2")}}}
	first := mustRun(t, d, e, editRun{})
	if ids := first.ids(); !slices.Equal(ids, []string{"b", "c"}) {
		t.Fatalf("first run resolved %v", ids)
	}
	// Rebuilt without the edit, with a cell inserted at the top and c deleted.
	transact(t, d, func(tx *Txn) error { return tx.SetSource(1, "# B") })
	transact(t, d, func(tx *Txn) error { return tx.InsertCells(0, []Cell{{ID: "top", Source: "top"}}) })
	transact(t, d, func(tx *Txn) error { return tx.DeleteCells(tx.CellIndex("c"), 1) })
	out := mustRun(t, d, e, editRun{replay: true, prev: &first})
	if got := cellByID(t, d, "b").Source; got != "B2" {
		t.Errorf("b %q, want the update re-applied", got)
	}
	if got := cellByID(t, d, "a").Source; got != "x = 1" {
		t.Errorf("a %q: the replay touched the cell now at index 1", got)
	}
	if len(out.Cells) != 1 || out.Cells[0].ID != "b" || len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "cell c gone") {
		t.Errorf("replayed outcome %+v", out)
	}
}

func TestDeleteAndMoveReplay(t *testing.T) {
	d := editNotebook(t)
	del := DeleteCells{Target: Target{Start: intp(0), End: intp(1)}}
	first := mustRun(t, d, del, editRun{})
	if ids := d.CellIDs(); !slices.Equal(ids, []string{"c"}) || first.Count != 1 {
		t.Fatalf("after delete %v (%+v)", ids, first)
	}
	// Rebuilt: a came back (the server never got the delete), b is gone anyway, x is new at 0.
	transact(t, d, func(tx *Txn) error {
		return tx.InsertCells(0, []Cell{{ID: "x", Source: "x"}, {ID: "a", Source: "a"}})
	})
	out := mustRun(t, d, del, editRun{replay: true, prev: &first})
	if ids := d.CellIDs(); !slices.Equal(ids, []string{"x", "c"}) {
		t.Fatalf("after the replayed delete %v: a deleted by id, x kept", ids)
	}
	if got := out.ids(); !slices.ContainsFunc(got, func(s string) bool { return s == "a" }) || !slices.Contains(got, "b") {
		t.Errorf("replayed outcome names %v, want a and b deleted", got)
	}

	d = editNotebook(t)
	mv := MoveCells{IDs: []string{"a", "b"}, After: "c"}
	out = mustRun(t, d, mv, editRun{})
	if ids := d.CellIDs(); !slices.Equal(ids, []string{"c", "a", "b"}) || out.Cells[0].From != 0 || out.Cells[0].Index != 1 {
		t.Fatalf("after move %v (%+v)", ids, out.Cells)
	}
	again := mustRun(t, d, mv, editRun{replay: true})
	if ids := d.CellIDs(); !slices.Equal(ids, []string{"c", "a", "b"}) || again.Cells[0].From != again.Cells[0].Index {
		t.Fatalf("a replayed move in place changed %v (%+v)", ids, again.Cells)
	}
	transact(t, d, func(tx *Txn) error { return tx.DeleteCells(tx.CellIndex("c"), 1) })
	out = mustRun(t, d, mv, editRun{replay: true})
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "stayed where they were") {
		t.Errorf("anchor gone: warnings %v", out.Warnings)
	}
	if _, err := runEdit(t, d, MoveCells{IDs: []string{"a"}, Before: "c"}, editRun{}); err == nil {
		t.Error("a first run against a missing anchor went ahead")
	}
	if _, err := runEdit(t, d, MoveCells{IDs: []string{"a"}, To: intp(5)}, editRun{}); err == nil {
		t.Error("to_index past the end went ahead")
	}
	mustRun(t, d, MoveCells{IDs: []string{"a", "gone"}, To: intp(5)}, editRun{replay: true}) // clamped, gone skipped
	if ids := d.CellIDs(); !slices.Equal(ids, []string{"b", "a"}) {
		t.Errorf("replay to a clamped index: %v", ids)
	}
}

func TestClearOutputs(t *testing.T) {
	d := editNotebook(t)
	one := 1
	transact(t, d, func(tx *Txn) error { return tx.SetExecutionCount(2, &one) })
	out := mustRun(t, d, ClearOutputs{}, editRun{})
	a := cellByID(t, d, "a")
	if len(a.Outputs) != 0 || a.ExecutionCount != nil || a.Metadata["execution"] != nil || a.Metadata["tags"] == nil {
		t.Fatalf("a after clear: %+v", a)
	}
	if c := cellByID(t, d, "c"); c.ExecutionCount != nil {
		t.Errorf("c's count %v", *c.ExecutionCount)
	}
	if len(out.Cells) != 2 || !slices.Equal(out.Cells[0].Changed, []string{"outputs", "execution_count", "metadata"}) ||
		!slices.Equal(out.Cells[1].Changed, []string{"execution_count"}) || out.Count != 3 {
		t.Errorf("outcome %+v", out)
	}
	// Clearing again changes nothing; naming a markdown cell says so.
	u, _, err := d.Transact(func(tx *Txn) error {
		o, err := ClearOutputs{IDs: []string{"a", "b"}}.run(tx, editRun{})
		if err == nil && (len(o.Warnings) != 1 || !strings.Contains(o.Warnings[0], `"b": not a code cell`)) {
			t.Errorf("warnings %v", o.Warnings)
		}
		return err
	})
	if err != nil || u != nil {
		t.Errorf("a second clear: update %v, err %v", u, err)
	}
	_, err = runEdit(t, d, ClearOutputs{IDs: []string{"nope"}}, editRun{})
	wantInvalid(t, err, "cell_ids")
}

func TestEditTextReplayOnlyWhereItFits(t *testing.T) {
	d := newTestDoc(t, KindText)
	transact(t, d, func(tx *Txn) error { return tx.InsertText(0, "hello world") })
	e := EditText{Ops: []TextOp{{Pos: 0, Len: 5, Insert: "HELLO"}, {Pos: -1, Insert: "!"}}}
	first := mustRun(t, d, e, editRun{})
	if s, _ := d.Text(); s != "HELLO world!" || first.Length != 12 || first.Cursor.Offset != 12 {
		t.Fatalf("text %q, outcome %+v", s, first)
	}
	// Already there: nothing runs.
	u, _, err := d.Transact(func(tx *Txn) error { _, err := e.run(tx, editRun{replay: true, prev: &first}); return err })
	if err != nil || u != nil {
		t.Fatalf("replay over its own result: update %v err %v", u, err)
	}
	// The text it was planned on: it runs again.
	transact(t, d, func(tx *Txn) error { return tx.SetText("hello world") })
	mustRun(t, d, e, editRun{replay: true, prev: &first})
	if s, _ := d.Text(); s != "HELLO world!" {
		t.Fatalf("replay on the planned text: %q", s)
	}
	// Another text: refused, nothing changed.
	transact(t, d, func(tx *Txn) error { return tx.SetText("someone typed here") })
	if _, err := runEdit(t, d, e, editRun{replay: true, prev: &first}); !errors.Is(err, ErrTextMoved) {
		t.Fatalf("replay on a moved text: %v", err)
	}
	if s, _ := d.Text(); s != "someone typed here" {
		t.Fatalf("refused replay changed the text: %q", s)
	}
	var conflict *ConflictError
	if _, err := runEdit(t, d, e, editRun{since: &Since{Version: "v", Text: true}}); !errors.As(err, &conflict) || !conflict.Text {
		t.Fatalf("version guard: %v", err)
	}
	_, err = runEdit(t, d, EditText{Ops: []TextOp{{Pos: 0, Len: 4}, {Pos: 2, Len: 4}}}, editRun{})
	wantInvalid(t, err, "operations")
}

// The outcome a caller gets is its own: a replay after a reset (the edit confirmed, then the
// server lost it) reports a fresh outcome and leaves the first one as it was, and what the
// caller does to its copy changes nothing the session keeps.
func TestReplicaOutcomesAreValues(t *testing.T) {
	nb := func(ids ...string) *Notebook {
		n := &Notebook{NBFormat: 4, NBFormatMinor: 5}
		for _, id := range ids {
			n.Cells = append(n.Cells, Cell{ID: id, Type: CellCode, Source: id})
		}
		return n
	}
	srv := newFakeServer(t, nb("a"))
	c := srv.newClient("agent")
	c.connect()
	srv.flush()
	c.record(c.replica.Propose(1, Proposal{Edit: InsertCells{Cells: []Cell{{ID: "n", Source: "new"}}, Before: "a"}}))
	srv.flush()
	if len(c.done) != 1 || c.done[0].Err != nil {
		t.Fatalf("done %+v", c.done)
	}
	got := c.done[0].Outcome
	keep := got.clone()
	if got.Replayed || got.Cells[0].Index != 0 {
		t.Fatalf("first outcome %+v", got)
	}
	got.Cells[0].Index = 99 // the caller's copy

	// The server loses the room before saving: the durable insert runs again, on a room where a
	// human put a cell first.
	srv2 := newFakeServer(t, nb("h", "a"))
	c.srv, srv2.conns = srv2, []*fakeConn{c}
	c.disconnect()
	if err := c.replica.ResetServerLost(freshClientID()); err != nil {
		t.Fatal(err)
	}
	c.replica.NoRescue("test")
	c.connect()
	srv2.flush()
	if len(c.done) != 2 || c.done[1].Err != nil {
		t.Fatalf("done after the replay: %+v", c.done)
	}
	re := c.done[1].Outcome
	if !re.Replayed || re.Cells[0].ID != "n" || re.Cells[0].Index != 1 {
		t.Errorf("replayed outcome %+v, want n placed before a, at 1", re)
	}
	if got.Cells[0].Index != 99 || !reflect.DeepEqual(keep.Cells, []CellOutcome{{ID: "n", Index: 0, Type: CellCode}}) {
		t.Errorf("the first outcome changed: %+v (kept %+v)", got, keep)
	}
}

// An Undo says how many steps it took; an Undo or Redo is never run again after a reset (the
// fresh replica's stack is not the one it was asked of), and its refusal changes nothing.
func TestUndoStepsAndNoReplay(t *testing.T) {
	d := editNotebook(t)
	for _, src := range []string{"one", "two"} {
		s := src
		mustRun(t, d, UpdateCells{Updates: []CellUpdate{{CellID: "a", Source: &s}}}, editRun{})
	}
	out := mustRun(t, d, Undo{Steps: 5}, editRun{})
	if out.Steps != 2 || cellByID(t, d, "a").Source != "x = 1" {
		t.Fatalf("undo of 5 with 2 recorded: steps %d, a %q", out.Steps, cellByID(t, d, "a").Source)
	}
	for _, e := range []Edit{Redo{}, Undo{Steps: 1}} {
		before := readNotebook(t, d)
		u, _, err := d.Transact(func(tx *Txn) error { _, err := e.run(tx, editRun{replay: true}); return err })
		if !errors.Is(err, ErrNotReplayed) || u != nil {
			t.Fatalf("%T replayed: update %v, err %v", e, u, err)
		}
		if after := readNotebook(t, d); !reflect.DeepEqual(before, after) {
			t.Fatalf("%T's refused replay changed the notebook", e)
		}
	}
	mustRun(t, d, Redo{}, editRun{}) // the stack is still there for a first run: the whole undo
	if got := cellByID(t, d, "a").Source; got != "two" {
		t.Errorf("a %q after the redo, want two", got)
	}
}
