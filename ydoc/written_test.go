package ydoc

import (
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

// What the server's loader (client 0) wrote stays what it wrote, whatever others did beside it —
// in the replica that saw the edits happen and in one that joins afterwards (deleted items then
// arrive without their content).
func TestCellsWrittenBy(t *testing.T) {
	loader, err := NewLoaderDoc(KindNotebook, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{"output_type": "stream", "name": "stdout", "text": "1\n"}
	u, _ := transact(t, loader, func(tx *Txn) error {
		return tx.LoadNotebook(Notebook{NBFormat: 4, NBFormatMinor: 5, Cells: []Cell{
			{ID: "a", Type: CellCode, Source: "print(1)", Outputs: []map[string]any{out}},
			{ID: "b", Type: CellMarkdown, Source: "# b"},
			{ID: "c", Type: CellCode, Source: "x", Outputs: []map[string]any{}},
			{ID: "d", Type: CellCode, Source: "print(1)", Outputs: []map[string]any{out}},
		}})
	})
	d := newTestDoc(t, KindNotebook)
	apply(t, d, u)
	want := []WrittenCell{{Outputs: true}, {}, {}, {Outputs: true}}
	if got := d.CellsWrittenBy(0); !slices.Equal(got, want) {
		t.Fatalf("loaded: %+v, want %+v", got, want)
	}
	transact(t, d, func(tx *Txn) error { return tx.InsertCells(0, []Cell{{ID: "mine", Type: CellCode}}) })
	transact(t, d, func(tx *Txn) error { return tx.ClearOutputs(tx.CellIndex("a")) })
	transact(t, d, func(tx *Txn) error { return tx.MoveCells(tx.CellIndex("b"), 1, 0) })
	transact(t, d, func(tx *Txn) error { return tx.DeleteCells(tx.CellIndex("d"), 1) })
	want = []WrittenCell{{Outputs: true}, {Deleted: true}, {}, {Deleted: true}}
	if got := d.CellsWrittenBy(0); !slices.Equal(got, want) {
		t.Errorf("after others' edits: %+v, want %+v", got, want)
	}
	if got := d.CellsWrittenBy(uint64(d.ClientID())); len(got) != 2 {
		t.Errorf("the editor's own cells: %+v, want 2 (the new one, the moved one)", got)
	}
	late := newTestDoc(t, KindNotebook)
	apply(t, late, fullUpdate(t, d))
	if got := late.CellsWrittenBy(0); !slices.Equal(got, want) {
		t.Errorf("in a replica that joined later: %+v, want %+v", got, want)
	}
}
