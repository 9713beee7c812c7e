package ydoc

// OutputFilter rewrites a cell's outputs as reads return them (Doc.Notebook, Doc.Cells): the
// room sets one around a read to show what output placeholders stand for (an engine's outputs
// service keeps the outputs out of the document). Edits (Txn) always see the stored outputs.
// It runs with the y-crdt lock held: it must be a lookup, never a wait.
type OutputFilter func(cellID string, outputs []map[string]any) []map[string]any

// SetOutputFilter sets the filter reads apply (nil: outputs as stored). The Doc's one owner
// sets and clears it around its reads.
func (d *Doc) SetOutputFilter(f OutputFilter) { d.outputFilter = f }

// filterOutputs applies the output filter to cells read for a caller.
func (d *Doc) filterOutputs(cells []Cell) {
	if d.outputFilter == nil {
		return
	}
	for i := range cells {
		if len(cells[i].Outputs) > 0 {
			cells[i].Outputs = d.outputFilter(cells[i].ID, cells[i].Outputs)
		}
	}
}
