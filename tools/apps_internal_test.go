package tools

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// rejectCells takes cells out of a fork's proposal: after it, the diff between the notebook and
// the fork no longer names them, and still names the others; running it twice (a replay after a
// reset) ends the same.
func TestRejectCellsTakesThemOutOfTheProposal(t *testing.T) {
	one, two := 1, 7
	base := []ydoc.Cell{
		{ID: "a", Type: ydoc.CellMarkdown, Source: "# A"},
		{ID: "b", Type: ydoc.CellCode, Source: "b = 1", ExecutionCount: &one, Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "1\n"}}},
		{ID: "c", Type: ydoc.CellCode, Source: "c = 1"},
		{ID: "d", Type: ydoc.CellCode, Source: "d = 1"},
		{ID: "e", Type: ydoc.CellCode, Source: "e = 1"},
	}
	doc := notebookDoc(t, base)
	fork := notebookDoc(t, base)
	edit(t, fork, func(tx *ydoc.Txn) error {
		if err := tx.SetSource(1, "b = 2  # the agent's"); err != nil { // b edited and re-run
			return err
		}
		if err := tx.ClearOutputs(1); err != nil {
			return err
		}
		if err := tx.AppendOutput(1, map[string]any{"output_type": "stream", "name": "stdout", "text": "2\n"}); err != nil {
			return err
		}
		if err := tx.SetExecutionCount(1, &two); err != nil {
			return err
		}
		if err := tx.DeleteCells(2, 1); err != nil { // c deleted
			return err
		}
		if err := tx.InsertCells(0, []ydoc.Cell{{ID: "n", Type: ydoc.CellCode, Source: "new = 1"}}); err != nil { // n added
			return err
		}
		if err := tx.SetSource(tx.CellIndex("d"), "d = 2"); err != nil { // d edited (kept)
			return err
		}
		return tx.MoveCells(tx.CellIndex("e"), 1, 1) // e moved up
	})
	from, to := notebookOf(t, doc), notebookOf(t, fork)
	before := ydoc.DiffNotebooks(from, to)
	if len(before.Added) != 1 || len(before.Removed) != 1 || len(before.Changed) != 2 || len(before.Moved) == 0 {
		t.Fatalf("the fork's proposal is not what the test means: %s", before.Summary())
	}
	var targets []rejectTarget
	for _, id := range []string{"b", "c", "n", "e"} {
		tg := rejectTarget{id: id}
		for _, m := range before.Moved {
			tg.moved = tg.moved || m.ID == id
		}
		for i := range from.Cells {
			if from.Cells[i].ID == id {
				cell := from.Cells[i]
				tg.cell = &cell
				if i > 0 {
					tg.prev = from.Cells[i-1].ID
				}
			}
		}
		targets = append(targets, tg)
	}
	for run := 1; run <= 2; run++ {
		edit(t, fork, func(tx *ydoc.Txn) error { return rejectCells(tx, targets) })
		after := ydoc.DiffNotebooks(from, notebookOf(t, fork))
		if len(after.Added) != 0 || len(after.Removed) != 0 || len(after.Moved) != 0 || len(after.Changed) != 1 || after.Changed[0].ID != "d" {
			t.Fatalf("run %d: the fork still proposes %s; want only d's edit", run, after.Summary())
		}
		got := notebookOf(t, fork)
		var ids []string
		for _, c := range got.Cells {
			ids = append(ids, c.ID)
		}
		if want := []string{"a", "b", "c", "d", "e"}; !sameJSON(ids, want) {
			t.Errorf("run %d: cells %v, want %v", run, ids, want)
		}
		if b := got.Cells[1]; b.Source != "b = 1" || b.ExecutionCount == nil || *b.ExecutionCount != 1 || !sameJSON(b.Outputs, base[1].Outputs) {
			t.Errorf("run %d: b is %+v", run, b)
		}
	}
}

func notebookDoc(t *testing.T, cells []ydoc.Cell) *ydoc.Doc {
	t.Helper()
	d, err := ydoc.NewDoc(ydoc.KindNotebook, 11, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	edit(t, d, func(tx *ydoc.Txn) error { return tx.InsertCells(0, cells) })
	return d
}

func edit(t *testing.T, d *ydoc.Doc, fn func(*ydoc.Txn) error) {
	t.Helper()
	if _, _, err := d.Transact(fn); err != nil {
		t.Fatal(err)
	}
}

func notebookOf(t *testing.T, d *ydoc.Doc) ydoc.Notebook {
	t.Helper()
	nb, err := d.Notebook()
	if err != nil {
		t.Fatal(err)
	}
	return nb
}
