package ydoc

import (
	"slices"

	y "github.com/skyterra/y-crdt"
)

// WrittenCell is a cell as one writer put it into a notebook: what that writer did, whatever
// others did beside it.
type WrittenCell struct {
	Deleted bool // deleted since (by anyone)
	// Outputs: the writer put outputs into the cell, whether they are still there or were
	// cleared since (a cell run again, outputs cleared by hand).
	Outputs bool
}

// CellsWrittenBy returns the cells client inserted into the notebook, in the order it inserted
// them (its clock), deleted ones included. For the server's loader (client 0, which writes the
// file's cells in the file's order) it is how far the load has come, unchanged by anyone's edits
// beside it: a cell inserted above the loaded ones, one moved (a move is a delete and an insert
// by the mover), outputs cleared.
func (d *Doc) CellsWrittenBy(client uint64) []WrittenCell {
	if d.kind != KindNotebook {
		return nil
	}
	type written struct {
		clock int
		cell  WrittenCell
	}
	var cells []written
	_ = d.run(func() error {
		for n := d.cells.StartItem(); n != nil; n = n.Right {
			if uint64(n.ID.Client) != client {
				continue
			}
			w := written{clock: int(n.ID.Clock), cell: WrittenCell{Deleted: n.Deleted()}}
			if ct, ok := n.Content.(*y.ContentType); ok && !w.cell.Deleted {
				if m, ok := ct.Type.(*y.YMap); ok {
					w.cell.Outputs = outputsWrittenBy(m, client)
				}
			}
			cells = append(cells, w)
		}
		return nil
	})
	slices.SortFunc(cells, func(a, b written) int { return a.clock - b.clock })
	out := make([]WrittenCell, len(cells))
	for i, c := range cells {
		out[i] = c.cell
	}
	return out
}

// outputsWrittenBy reports whether client put outputs into a cell: an item of its outputs array
// (live or deleted), or a plain outputs list it set. Every value the cell's outputs key held is
// looked at (a writer may have replaced the array).
func outputsWrittenBy(m *y.YMap, client uint64) bool {
	for it := m.GetMap()["outputs"]; it != nil; it = it.Left {
		switch c := it.Content.(type) {
		case *y.ContentType:
			if a, ok := c.Type.(*y.YArray); ok {
				for n := a.StartItem(); n != nil; n = n.Right {
					if uint64(n.ID.Client) == client {
						return true
					}
				}
			}
		case *y.ContentAny:
			if uint64(it.ID.Client) != client || it.Deleted() {
				continue
			}
			for _, v := range c.GetContent() {
				if l, ok := v.(y.ArrayAny); ok && len(l) > 0 {
					return true
				}
			}
		}
	}
	return false
}
