package ydoc

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	y "github.com/skyterra/y-crdt"
)

// restoreBase is the notebook most restore table tests start from.
func restoreBase() Notebook {
	return Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"kernelspec": map[string]any{"name": "python3"}}, Cells: []Cell{
		{ID: "c0", Type: CellCode, Source: "import os\nprint('a')\nprint('b')\n", ExecutionCount: intp(1), Outputs: []map[string]any{
			{"output_type": "stream", "name": "stdout", "text": "a\n"},
			{"output_type": "stream", "name": "stdout", "text": "b\n"},
		}},
		{ID: "c1", Type: CellMarkdown, Source: "# Title\n\nSome text.", Metadata: map[string]any{"tags": []any{"x"}}},
		{ID: "c2", Type: CellCode, Source: "x = 1", Outputs: []map[string]any{}},
		{ID: "c3", Type: CellRaw, Source: "raw"},
		{ID: "c4", Type: CellMarkdown, Source: "![img](attachment:a.png)", Attachments: map[string]any{
			"a.png": map[string]any{"image/png": "iVBORw0KGgo="},
		}},
	}}
}

// cellMapsOf returns the live cell maps by id.
func cellMapsOf(t testing.TB, d *Doc) map[string]*y.YMap {
	t.Helper()
	out := map[string]*y.YMap{}
	if err := d.run(func() error {
		for _, m := range walkedMaps(d) {
			out[cellIDOf(m)] = m
		}
		return nil
	}); err != nil {
		t.Fatalf("cell maps: %v", err)
	}
	return out
}

// sourceTextOf returns the Y.Text of a cell's source.
func sourceTextOf(t testing.TB, d *Doc, id string) *y.YText {
	t.Helper()
	var yt *y.YText
	_ = d.run(func() error {
		for _, m := range walkedMaps(d) {
			if cellIDOf(m) == id {
				yt, _ = mustGet(m, "source").(*y.YText)
			}
		}
		return nil
	})
	return yt
}

// restoreInto runs RestoreNotebook on d and fails on an error.
func restoreInto(t testing.TB, d *Doc, target Notebook) ([]byte, Change, RestoreStats) {
	t.Helper()
	var st RestoreStats
	u, ch, err := d.Transact(func(tx *Txn) error {
		var err error
		st, err = tx.RestoreNotebook(target)
		return err
	})
	if err != nil {
		t.Fatalf("RestoreNotebook: %v", err)
	}
	return u, ch, st
}

// canonTarget is what a replica restored to nb reads back.
func canonTarget(t testing.TB, nb Notebook) Notebook {
	t.Helper()
	c, err := canonicalNotebook(nb)
	if err != nil {
		t.Fatalf("canonicalNotebook: %v", err)
	}
	return c
}

func TestRestoreNotebookTable(t *testing.T) {
	type check func(t *testing.T, before map[string]*y.YMap, d *Doc, ch Change)
	sameMap := func(ids ...string) check {
		return func(t *testing.T, before map[string]*y.YMap, d *Doc, _ Change) {
			after := cellMapsOf(t, d)
			for _, id := range ids {
				if before[id] == nil || before[id] != after[id] {
					t.Errorf("cell %s lost its Y.Map identity", id)
				}
			}
		}
	}
	tests := []struct {
		name   string
		edit   func(nb *Notebook)
		stats  RestoreStats
		change changeShape
		checks []check
	}{
		{"identical", func(nb *Notebook) {}, RestoreStats{}, changeShape{}, []check{sameMap("c0", "c1", "c2", "c3", "c4")}},
		{"source edit keeps the Y.Text", func(nb *Notebook) { nb.Cells[0].Source = "import os\nprint('A')\nprint('b')\n" },
			RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c0", Fields: []string{"source"}}}},
			[]check{sameMap("c0", "c1", "c2", "c3", "c4")}},
		{"delete two", func(nb *Notebook) { nb.Cells = slices.Delete(nb.Cells, 1, 3) },
			RestoreStats{Deleted: 2}, changeShape{Deleted: []string{"c1", "c2"}}, []check{sameMap("c0", "c3", "c4")}},
		{"delete all", func(nb *Notebook) { nb.Cells = nil },
			RestoreStats{Deleted: 5}, changeShape{Deleted: []string{"c0", "c1", "c2", "c3", "c4"}}, nil},
		{"insert with every field", func(nb *Notebook) {
			nb.Cells = slices.Insert(nb.Cells, 2, Cell{ID: "n1", Type: CellCode, Source: "y = 2\n", ExecutionCount: intp(7),
				Metadata: map[string]any{"collapsed": true}, Outputs: []map[string]any{
					{"output_type": "execute_result", "execution_count": 7, "data": map[string]any{"text/plain": "2"}, "metadata": map[string]any{}},
				}}, Cell{ID: "n2", Type: CellMarkdown, Source: "new", Attachments: map[string]any{"b.png": map[string]any{"image/png": "AA=="}}})
			nb.Cells = append(nb.Cells, Cell{ID: "n3", Type: CellRaw})
		}, RestoreStats{Inserted: 3}, changeShape{Inserted: []string{"n1", "n2", "n3"}}, []check{sameMap("c0", "c1", "c2", "c3", "c4")}},
		{"rotate moves one cell", func(nb *Notebook) { nb.Cells = append(nb.Cells[1:], nb.Cells[0]) },
			RestoreStats{Moved: 1}, changeShape{Moved: true, Cells: []CellChange{{ID: "c0", Fields: []string{"*"}}}},
			[]check{sameMap("c1", "c2", "c3", "c4")}},
		{"reverse moves n-1", func(nb *Notebook) { slices.Reverse(nb.Cells) },
			RestoreStats{Moved: 4}, changeShape{Moved: true, Cells: []CellChange{{ID: "c0", Fields: []string{"*"}}, {ID: "c1", Fields: []string{"*"}}, {ID: "c2", Fields: []string{"*"}}, {ID: "c3", Fields: []string{"*"}}}},
			nil},
		{"block move", func(nb *Notebook) {
			nb.Cells = []Cell{nb.Cells[0], nb.Cells[3], nb.Cells[4], nb.Cells[1], nb.Cells[2]}
		}, RestoreStats{Moved: 2}, changeShape{Moved: true, Cells: []CellChange{{ID: "c1", Fields: []string{"*"}}, {ID: "c2", Fields: []string{"*"}}}},
			[]check{sameMap("c0", "c3", "c4")}},
		{"move and edit", func(nb *Notebook) {
			nb.Cells = append(nb.Cells[1:], nb.Cells[0])
			nb.Cells[4].Source = "print('moved')\n"
			nb.Cells[4].Outputs = nil
		}, RestoreStats{Moved: 1, Changed: 1}, changeShape{Moved: true, Cells: []CellChange{{ID: "c0", Fields: []string{"*"}}}}, nil},
		{"cell type", func(nb *Notebook) {
			nb.Cells[3].Type = CellCode
			nb.Cells[3].ExecutionCount = intp(3)
		}, RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c3", Fields: []string{"*"}}}}, []check{sameMap("c0", "c1", "c2", "c4")}},
		{"code to markdown", func(nb *Notebook) {
			nb.Cells[0].Type = CellMarkdown
			nb.Cells[0].Outputs = nil
			nb.Cells[0].ExecutionCount = nil
		}, RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c0", Fields: []string{"*"}}}}, nil},
		{"metadata", func(nb *Notebook) { nb.Cells[1].Metadata = map[string]any{"tags": []any{"x", "y"}, "n": 1.5} },
			RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c1", Fields: []string{"metadata"}}}}, []check{sameMap("c1")}},
		{"append output keeps the first", func(nb *Notebook) {
			nb.Cells[0].Outputs = append(slices.Clone(nb.Cells[0].Outputs), map[string]any{"output_type": "stream", "name": "stderr", "text": []any{"w", "arn\n"}})
		}, RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c0", Fields: []string{"outputs"}}}},
			[]check{sameMap("c0"), firstOutputKept("c0")}},
		{"clear outputs and count", func(nb *Notebook) {
			nb.Cells[0].Outputs = nil
			nb.Cells[0].ExecutionCount = nil
		}, RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c0", Fields: []string{"execution_count", "outputs"}}}}, nil},
		{"attachments removed", func(nb *Notebook) { nb.Cells[4].Attachments = nil },
			RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c4", Fields: []string{"attachments"}}}}, nil},
		{"attachments changed", func(nb *Notebook) {
			nb.Cells[4].Attachments = map[string]any{"a.png": map[string]any{"image/png": "AAAA"}}
		}, RestoreStats{Changed: 1}, changeShape{Cells: []CellChange{{ID: "c4", Fields: []string{"attachments"}}}}, nil},
		{"notebook metadata", func(nb *Notebook) { nb.Metadata = map[string]any{"language_info": map[string]any{"name": "python"}} },
			RestoreStats{Metadata: true}, changeShape{Meta: true}, nil},
		{"nbformat minor", func(nb *Notebook) { nb.NBFormatMinor = 4 },
			RestoreStats{Metadata: true}, changeShape{Meta: true}, nil},
		{"everything", func(nb *Notebook) {
			c0 := nb.Cells[0]
			c0.Source = "print('changed')\n"
			nb.Cells = []Cell{{ID: "n0", Type: CellMarkdown, Source: "intro"}, nb.Cells[3], nb.Cells[1], c0, {ID: "n1", Type: CellCode}}
			nb.Metadata = nil
		}, RestoreStats{Inserted: 2, Deleted: 2, Moved: 2, Changed: 1, Metadata: true}, // c0 c1 c3 -> c3 c1 c0
			changeShape{Inserted: []string{"n0", "n1"}, Deleted: []string{"c2", "c4"}, Moved: true, Meta: true,
				Cells: []CellChange{{ID: "c0", Fields: []string{"*"}}, {ID: "c1", Fields: []string{"*"}}}}, []check{sameMap("c3")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := restoreBase()
			d, load := loadNotebook(t, base)
			peer := newTestDoc(t, KindNotebook)
			apply(t, peer, load)
			target := restoreBase()
			tt.edit(&target)
			want := canonTarget(t, target)
			before := cellMapsOf(t, d)
			peerBefore := cellMapsOf(t, peer)
			u, ch, st := restoreInto(t, d, target)
			if st != tt.stats {
				t.Errorf("stats = %+v, want %+v", st, tt.stats)
			}
			got := shapeOf(ch)
			if tt.change.Inserted == nil && tt.change.Deleted == nil && !tt.change.Moved && tt.change.Cells == nil && !tt.change.Meta {
				if u != nil || !ch.Empty() {
					t.Errorf("no-op restore produced update %d bytes, change %+v", len(u), ch)
				}
			} else if !shapesEqual(got, tt.change) {
				t.Errorf("change = %+v, want %+v", got, tt.change)
			}
			compareNotebooks(t, want, readNotebook(t, d), true)
			for _, c := range tt.checks {
				c(t, before, d, ch)
			}
			if u != nil {
				_, pch := apply(t, peer, u)
				compareNotebooks(t, want, readNotebook(t, peer), true)
				if !shapesEqual(shapeOf(pch), tt.change) {
					t.Errorf("peer change = %+v, want %+v", shapeOf(pch), tt.change)
				}
				for _, c := range tt.checks {
					c(t, peerBefore, peer, pch)
				}
			}
			if diff := DiffNotebooks(want, readNotebook(t, d)); !diff.Empty() {
				t.Errorf("after restore, diff = %s", diff.Summary())
			}
		})
	}
}

// changeShape and shapeOf come from doc_test.go; shapesEqual compares the fields restore tests use.
func shapesEqual(a, b changeShape) bool {
	if !slices.Equal(a.Inserted, b.Inserted) || !slices.Equal(a.Deleted, b.Deleted) || a.Moved != b.Moved || a.Meta != b.Meta {
		return false
	}
	if len(a.Cells) != len(b.Cells) {
		return false
	}
	for i := range a.Cells {
		if a.Cells[i].ID != b.Cells[i].ID || !slices.Equal(a.Cells[i].Fields, b.Cells[i].Fields) {
			return false
		}
	}
	return true
}

// firstOutputKept checks that a cell kept its map and that its first output is still live.
func firstOutputKept(id string) func(t *testing.T, before map[string]*y.YMap, d *Doc, ch Change) {
	return func(t *testing.T, before map[string]*y.YMap, d *Doc, _ Change) {
		t.Helper()
		m := cellMapsOf(t, d)[id]
		if before[id] != m {
			t.Errorf("cell %s map replaced", id)
		}
		_ = d.run(func() error { // cellMapsOf takes the y-crdt lock itself: not nested
			outs, _ := mustGet(m, "outputs").(*y.YArray)
			items := arrayItems(outs)
			if len(items) < 2 {
				t.Errorf("cell %s has %d outputs", id, len(items))
				return nil
			}
			first, _ := items[0].(*y.YMap)
			if first == nil || first.GetItem() == nil || first.GetItem().Deleted() {
				t.Errorf("first output of %s is not a live Y.Map", id)
			}
			return nil
		})
	}
}

func TestRestoreNotebookKeepsCursorText(t *testing.T) {
	d, _ := loadNotebook(t, restoreBase())
	before := sourceTextOf(t, d, "c1")
	target := restoreBase()
	target.Cells[1].Source = "# Title\n\nSome more text."
	target.Cells = append(target.Cells[:2], target.Cells[3:]...)
	restoreInto(t, d, target)
	if after := sourceTextOf(t, d, "c1"); after != before {
		t.Fatalf("the source Y.Text of an edited cell was replaced")
	}
}

func TestRestoreNotebookFirstOutputIdentity(t *testing.T) {
	d, _ := loadNotebook(t, restoreBase())
	outputMaps := func() []*y.YMap {
		var out []*y.YMap
		_ = d.run(func() error {
			m := walkedMaps(d)[0]
			for _, it := range arrayItems(mustGet(m, "outputs").(*y.YArray)) {
				om, _ := it.(*y.YMap)
				out = append(out, om)
			}
			return nil
		})
		return out
	}
	before := outputMaps()
	target := restoreBase()
	target.Cells[0].Outputs = []map[string]any{target.Cells[0].Outputs[0], {"output_type": "error", "ename": "E", "evalue": "v", "traceback": []any{}}, target.Cells[0].Outputs[1]}
	restoreInto(t, d, target)
	after := outputMaps()
	if len(after) != 3 || after[0] != before[0] || after[2] != before[1] {
		t.Fatalf("common leading and trailing outputs were not kept: before %p, after %p", before, after)
	}
}

func TestRestoreNotebookRemovesDuplicateIDs(t *testing.T) {
	// Two replicas insert a cell with the same id concurrently: after the merge the id is there twice.
	a, load := loadNotebook(t, restoreBase())
	b := newTestDoc(t, KindNotebook)
	apply(t, b, load)
	ua, _ := transact(t, a, func(tx *Txn) error { return tx.InsertCells(0, []Cell{{ID: "dup", Source: "from a"}}) })
	ub, _ := transact(t, b, func(tx *Txn) error { return tx.InsertCells(5, []Cell{{ID: "dup", Source: "from b"}}) })
	apply(t, a, ub)
	apply(t, b, ua)
	if ids := a.CellIDs(); len(ids) != 7 {
		t.Fatalf("setup: ids %v", ids)
	}
	target := restoreBase()
	target.Cells = append(target.Cells, Cell{ID: "dup", Type: CellCode, Source: "from b"})
	u, _, st := restoreInto(t, a, target)
	compareNotebooks(t, canonTarget(t, target), readNotebook(t, a), true)
	apply(t, b, u)
	compareNotebooks(t, canonTarget(t, target), readNotebook(t, b), true)
	if st.Deleted != 1 {
		t.Errorf("stats = %+v, want one deletion", st)
	}
}

func TestRestoreNotebookIntoEmptyDoc(t *testing.T) {
	d := newTestDoc(t, KindNotebook)
	peer := newTestDoc(t, KindNotebook)
	target := restoreBase()
	u, _, st := restoreInto(t, d, target)
	if st.Inserted != 5 || !st.Metadata {
		t.Errorf("stats = %+v", st)
	}
	compareNotebooks(t, canonTarget(t, target), readNotebook(t, d), true)
	apply(t, peer, u)
	compareNotebooks(t, canonTarget(t, target), readNotebook(t, peer), true)
	// The version is written even when it equals the defaults a reader assumes.
	var major, minor any
	_ = peer.run(func() error {
		major, _ = mapGet(peer.meta, "nbformat")
		minor, _ = mapGet(peer.meta, "nbformat_minor")
		return nil
	})
	if n, _ := asInt(major); n != 4 {
		t.Errorf("nbformat = %v", major)
	}
	if n, _ := asInt(minor); n != 5 {
		t.Errorf("nbformat_minor = %v", minor)
	}
}

func TestRestoreNotebookInvalidTargets(t *testing.T) {
	type bad struct{ x int }
	tests := []struct {
		name string
		edit func(nb *Notebook)
		want string
	}{
		{"duplicate id", func(nb *Notebook) { nb.Cells[3].ID = "c1" }, `id "c1" is also the id of cell 1`},
		{"empty id", func(nb *Notebook) { nb.Cells = append(nb.Cells, Cell{Type: CellCode}) }, "empty cell id"},
		{"unknown type", func(nb *Notebook) { nb.Cells[2].Type = "heading" }, `cell type "heading"`},
		{"empty type", func(nb *Notebook) { nb.Cells[2].Type = "" }, `cell type ""`},
		{"bad cell metadata", func(nb *Notebook) { nb.Cells[4].Metadata = map[string]any{"k": bad{1}} }, "metadata"},
		{"bad output", func(nb *Notebook) { nb.Cells[0].Outputs = []map[string]any{{"output_type": "x", "v": make(chan int)}} }, "output 0"},
		{"bad attachments", func(nb *Notebook) { nb.Cells[4].Attachments = map[string]any{"a": struct{}{}} }, "attachments"},
		{"bad notebook metadata", func(nb *Notebook) { nb.Metadata = map[string]any{"f": func() {}} }, "notebook metadata"},
		{"invalid utf-8 source", func(nb *Notebook) { nb.Cells[1].Source = "ok \xff" }, "UTF-8"},
		{"nbformat 3", func(nb *Notebook) { nb.NBFormat = 3 }, "nbformat 3"},
		// The last cell is invalid; everything before it would be a valid edit.
		{"late error", func(nb *Notebook) {
			nb.Cells = []Cell{{ID: "n0", Type: CellCode}, nb.Cells[2], nb.Cells[0], {ID: "n1", Type: "bogus"}}
		}, `cell 3 (id "n1")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := loadNotebook(t, restoreBase())
			before := readNotebook(t, d)
			maps := cellMapsOf(t, d)
			target := restoreBase()
			tt.edit(&target)
			u, ch, err := d.Transact(func(tx *Txn) error {
				_, err := tx.RestoreNotebook(target)
				return err
			})
			if err == nil || !errors.Is(err, ErrInvalidTarget) || !strings.Contains(err.Error(), tt.want) ||
				!strings.HasPrefix(err.Error(), "restore notebook: ") {
				t.Fatalf("error = %v, want ErrInvalidTarget mentioning %q", err, tt.want)
			}
			if u != nil || !ch.Empty() {
				t.Fatalf("invalid target changed the document: update %d bytes, change %+v", len(u), ch)
			}
			compareNotebooks(t, before, readNotebook(t, d), true)
			after := cellMapsOf(t, d)
			for id, m := range maps {
				if after[id] != m {
					t.Errorf("cell %s re-created", id)
				}
			}
		})
	}
}

func TestRestoreWrongKind(t *testing.T) {
	txt := newTestDoc(t, KindText)
	_, _, err := txt.Transact(func(tx *Txn) error { _, err := tx.RestoreNotebook(restoreBase()); return err })
	if !errors.Is(err, ErrWrongKind) {
		t.Errorf("RestoreNotebook on a text doc: %v", err)
	}
	nb := newTestDoc(t, KindNotebook)
	_, _, err = nb.Transact(func(tx *Txn) error { return tx.RestoreText("x") })
	if !errors.Is(err, ErrWrongKind) {
		t.Errorf("RestoreText on a notebook: %v", err)
	}
}

func TestRestoreText(t *testing.T) {
	tests := []struct{ from, to string }{
		{"", ""},
		{"", "hello\n"},
		{"hello\n", ""},
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"same", "same"},
		{"😀 emoji\n中文\n", "😀 emoji!\n中文\nmore\n"},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			d := newTestDoc(t, KindText)
			peer := newTestDoc(t, KindText)
			u, _ := transact(t, d, func(tx *Txn) error { return tx.InsertText(0, tt.from) })
			if u != nil {
				apply(t, peer, u)
			}
			u, ch := transact(t, d, func(tx *Txn) error { return tx.RestoreText(tt.to) })
			if got, _ := d.Text(); got != tt.to {
				t.Fatalf("text = %q, want %q", got, tt.to)
			}
			if (tt.from == tt.to) != (u == nil) || ch.Text != (tt.from != tt.to) {
				t.Fatalf("update %d bytes, change %+v for %q -> %q", len(u), ch, tt.from, tt.to)
			}
			if u != nil {
				apply(t, peer, u)
			}
			if got, _ := peer.Text(); got != tt.to {
				t.Fatalf("peer text = %q, want %q", got, tt.to)
			}
		})
	}
	d := newTestDoc(t, KindText)
	transact(t, d, func(tx *Txn) error { return tx.InsertText(0, "keep") })
	u, _, err := d.Transact(func(tx *Txn) error { return tx.RestoreText("bad \xfe") })
	if !errors.Is(err, ErrInvalidTarget) || u != nil {
		t.Fatalf("invalid UTF-8: err %v, update %d bytes", err, len(u))
	}
	if got, _ := d.Text(); got != "keep" {
		t.Fatalf("text changed to %q", got)
	}
}

// Random notebooks for the property tests.

var (
	propIDs     = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	propSources = []string{"", "x = 1", "x = 1\n", "print(x)\nprint(y)\n", "# Title\n\ntext", "for i in range(3):\n    print(i)\n", "😀\n中文"}
	propMeta    = []map[string]any{nil, {}, {"tags": []any{"a"}}, {"tags": []any{"a", "b"}, "collapsed": true}, {"scale": 0.5, "n": nil}}
	propOutputs = []map[string]any{
		{"output_type": "stream", "name": "stdout", "text": "hello\n"},
		{"output_type": "stream", "name": "stderr", "text": []any{"warn", "ing\n"}},
		{"output_type": "execute_result", "execution_count": 3, "data": map[string]any{"text/plain": "3"}, "metadata": map[string]any{}},
		{"output_type": "display_data", "data": map[string]any{"image/png": "AAAA", "text/plain": "<img>"}, "metadata": map[string]any{"w": 10}},
		{"output_type": "error", "ename": "E", "evalue": "bad", "traceback": []any{"l1", "l2"}},
	}
	propAttach = []map[string]any{nil, {"a.png": map[string]any{"image/png": "AA=="}}, {"b.gif": map[string]any{"image/gif": "R0lG"}}}
)

func randCell(rng *rand.Rand, id string) Cell {
	types := []string{CellCode, CellCode, CellMarkdown, CellRaw}
	c := Cell{ID: id, Type: types[rng.Intn(len(types))], Source: propSources[rng.Intn(len(propSources))]}
	if rng.Intn(3) == 0 {
		c.Source = mutate(rng, c.Source)
	}
	c.Metadata = propMeta[rng.Intn(len(propMeta))]
	switch c.Type {
	case CellCode:
		if rng.Intn(2) == 0 {
			c.ExecutionCount = intp(rng.Intn(3))
		}
		for i := rng.Intn(4); i > 0; i-- {
			c.Outputs = append(c.Outputs, propOutputs[rng.Intn(len(propOutputs))])
		}
	default:
		c.Attachments = propAttach[rng.Intn(len(propAttach))]
	}
	return c
}

func randNotebook(rng *rand.Rand, minCells int) Notebook {
	nb := Notebook{NBFormat: 4, NBFormatMinor: 4 + rng.Intn(2), Metadata: propMeta[rng.Intn(len(propMeta))]}
	ids := slices.Clone(propIDs)
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	n := minCells + rng.Intn(len(ids)-minCells+1)
	for _, id := range ids[:n] {
		nb.Cells = append(nb.Cells, randCell(rng, id))
	}
	return nb
}

// related derives a target from a: some cells kept as they are, some edited, removed, added,
// and the order partly shuffled.
func related(rng *rand.Rand, a Notebook) Notebook {
	b := randNotebook(rng, 0)
	byID := map[string]Cell{}
	for _, c := range a.Cells {
		byID[c.ID] = c
	}
	for i, c := range b.Cells {
		if old, ok := byID[c.ID]; ok && rng.Intn(2) == 0 {
			b.Cells[i] = old
			if rng.Intn(4) == 0 {
				b.Cells[i].Source = mutate(rng, old.Source)
			}
		}
	}
	if rng.Intn(2) == 0 {
		// Keep a's order for the kept cells most of the time, so few moves are needed.
		rank := map[string]int{}
		for i, c := range a.Cells {
			rank[c.ID] = i
		}
		slices.SortStableFunc(b.Cells, func(p, q Cell) int {
			rp, okp := rank[p.ID]
			rq, okq := rank[q.ID]
			if !okp || !okq {
				return 0
			}
			return rp - rq
		})
	}
	if rng.Intn(3) == 0 {
		b.Metadata = a.Metadata
		b.NBFormatMinor = a.NBFormatMinor
	}
	return b
}

// lisLen is an O(n²) longest increasing subsequence length, independent of lisMask.
func lisLen(seq []int) int {
	best := 0
	l := make([]int, len(seq))
	for i := range seq {
		l[i] = 1
		for j := 0; j < i; j++ {
			if seq[j] < seq[i] && l[j]+1 > l[i] {
				l[i] = l[j] + 1
			}
		}
		best = max(best, l[i])
	}
	return best
}

func TestRestoreNotebookProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var total RestoreStats
	retypes, noops, metas := 0, 0, 0
	defer func() {
		t.Logf("totals over 300 restores: %+v, %d kept cells retyped, %d metadata changes, %d no-ops", total, retypes, metas, noops)
	}()
	for iter := 0; iter < 300; iter++ {
		a := randNotebook(rng, 1)
		b := related(rng, a)
		switch iter % 10 {
		case 0:
			b = randNotebook(rng, 0)
		case 3:
			b = a
		}
		want := canonTarget(t, b)
		d, load := loadNotebook(t, a)
		peer := newTestDoc(t, KindNotebook)
		apply(t, peer, load)
		aNow := readNotebook(t, d)

		// Expected structure, computed independently.
		inA, inB := map[string]int{}, map[string]int{}
		for i, c := range aNow.Cells {
			inA[c.ID] = i
		}
		for i, c := range want.Cells {
			inB[c.ID] = i
		}
		var wantIns, wantDel []string
		var seq []int
		typeChanged := map[string]bool{}
		for _, c := range want.Cells {
			if i, ok := inA[c.ID]; ok {
				seq = append(seq, i)
				typeChanged[c.ID] = aNow.Cells[i].Type != c.Type
			} else {
				wantIns = append(wantIns, c.ID)
			}
		}
		for _, c := range aNow.Cells {
			if _, ok := inB[c.ID]; !ok {
				wantDel = append(wantDel, c.ID)
			}
		}
		wantMoves := len(seq) - lisLen(seq)

		before := cellMapsOf(t, d)
		peerBefore := cellMapsOf(t, peer)
		u, ch, st := restoreInto(t, d, b)
		total.Inserted += st.Inserted
		total.Deleted += st.Deleted
		total.Moved += st.Moved
		total.Changed += st.Changed
		for _, r := range typeChanged {
			if r {
				retypes++
			}
		}
		if u == nil {
			noops++
		}
		if st.Metadata {
			metas++
		}
		ctx := fmt.Sprintf("iteration %d: %v -> %v", iter, idsOf(aNow), idsOf(want))
		if st.Inserted != len(wantIns) || st.Deleted != len(wantDel) || st.Moved != wantMoves {
			t.Fatalf("%s: stats %+v, want %d inserted, %d deleted, %d moved", ctx, st, len(wantIns), len(wantDel), wantMoves)
		}
		compareNotebooks(t, want, readNotebook(t, d), true)
		if t.Failed() {
			t.Fatalf("%s: local replica differs", ctx)
		}
		// Agreement with DiffNotebooks.
		diff := DiffNotebooks(aNow, want)
		if len(diff.Added) != st.Inserted || len(diff.Removed) != st.Deleted || len(diff.Moved) != st.Moved || len(diff.Changed) != st.Changed ||
			(diff.NBFormat != nil || len(diff.Metadata) > 0) != st.Metadata {
			t.Fatalf("%s: diff %s disagrees with stats %+v", ctx, diff.Summary(), st)
		}
		if u == nil {
			if !diff.Empty() {
				t.Fatalf("%s: no update for a non-empty diff %s", ctx, diff.Summary())
			}
			continue
		}
		_, pch := apply(t, peer, u)
		compareNotebooks(t, want, readNotebook(t, peer), true)
		if t.Failed() {
			t.Fatalf("%s: peer replica differs", ctx)
		}
		for _, c := range []struct {
			name   string
			ch     Change
			before map[string]*y.YMap
			doc    *Doc
		}{{"local", ch, before, d}, {"peer", pch, peerBefore, peer}} {
			if !slices.Equal(c.ch.Inserted, dedupe(wantIns)) || !slices.Equal(c.ch.Deleted, dedupe(wantDel)) {
				t.Fatalf("%s: %s change inserted %v deleted %v, want %v and %v", ctx, c.name, c.ch.Inserted, c.ch.Deleted, dedupe(wantIns), dedupe(wantDel))
			}
			// Identity: a kept cell is re-created only when it was moved or retyped.
			after := cellMapsOf(t, c.doc)
			recreated := 0
			starred := map[string]bool{}
			for _, cc := range c.ch.Cells {
				if slices.Contains(cc.Fields, "*") {
					starred[cc.ID] = true
				}
			}
			retyped := 0
			for id := range inB {
				if _, kept := inA[id]; !kept {
					continue
				}
				if typeChanged[id] {
					retyped++
				}
				if after[id] != c.before[id] {
					recreated++
					if !starred[id] {
						t.Fatalf("%s: %s: cell %s re-created but not reported", ctx, c.name, id)
					}
				} else if starred[id] {
					t.Fatalf("%s: %s: cell %s reported re-created but kept", ctx, c.name, id)
				}
			}
			if recreated < st.Moved || recreated > st.Moved+retyped {
				t.Fatalf("%s: %s: %d kept cells re-created, moved %d, retyped %d", ctx, c.name, recreated, st.Moved, retyped)
			}
		}
		if after := DiffNotebooks(want, readNotebook(t, peer)); !after.Empty() {
			t.Fatalf("%s: peer differs after restore: %s", ctx, after.Summary())
		}
	}
}

func TestRestoreNotebookInvalidProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for iter := 0; iter < 60; iter++ {
		a := randNotebook(rng, 1)
		b := related(rng, a)
		if len(b.Cells) == 0 {
			b.Cells = append(b.Cells, randCell(rng, "z"))
		}
		i := rng.Intn(len(b.Cells))
		switch rng.Intn(3) {
		case 0:
			b.Cells = append(b.Cells, b.Cells[i])
		case 1:
			b.Cells[i].ID = ""
		case 2:
			b.Cells[i].Type = "text"
		}
		d, _ := loadNotebook(t, a)
		before := readNotebook(t, d)
		u, ch, err := d.Transact(func(tx *Txn) error { _, err := tx.RestoreNotebook(b); return err })
		if !errors.Is(err, ErrInvalidTarget) || u != nil || !ch.Empty() {
			t.Fatalf("iteration %d: err %v, update %d bytes, change %+v", iter, err, len(u), ch)
		}
		compareNotebooks(t, before, readNotebook(t, d), true)
	}
}

func TestLisMask(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for iter := 0; iter < 500; iter++ {
		seq := rng.Perm(rng.Intn(12))
		mask := lisMask(seq)
		var picked []int
		for i, in := range mask {
			if in {
				picked = append(picked, seq[i])
			}
		}
		if !slices.IsSorted(picked) || len(picked) != lisLen(seq) {
			t.Fatalf("lisMask(%v) picked %v, want an increasing run of %d", seq, picked, lisLen(seq))
		}
	}
}

// idsOf lists a notebook's cell ids (test diagnostics).
func idsOf(nb Notebook) []string {
	ids := make([]string, len(nb.Cells))
	for i, c := range nb.Cells {
		ids[i] = c.ID
	}
	return ids
}

func TestHeaviestIncreasing(t *testing.T) {
	// 0 1 2 in place with weight 1 each, or the heavy 3 alone (weight 10): the heavy one stays.
	got := heaviestIncreasing([]int{3, 0, 1, 2}, []int{10, 1, 1, 1})
	if want := []bool{true, false, false, false}; !slices.Equal(got, want) {
		t.Errorf("heavy: %v, want %v", got, want)
	}
	got = heaviestIncreasing([]int{3, 0, 1, 2}, []int{1, 1, 1, 1})
	if want := []bool{false, true, true, true}; !slices.Equal(got, want) {
		t.Errorf("equal weights: %v, want %v (the longest)", got, want)
	}
}
