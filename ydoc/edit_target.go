package ydoc

import (
	"fmt"
	"strings"
)

// Target says which cells an edit addresses: by id (preferred: ids survive other people's edits)
// or by an index range.
type Target struct {
	IDs        []string
	Start, End *int // inclusive; End defaults to Start
}

// CellOrder is a notebook's cell order as addressing needs it (a *Doc or a *Txn): lookups whose
// cost does not grow with the notebook.
type CellOrder interface {
	NumCells() int
	CellIndex(id string) int // -1 when absent
	CellID(i int) string
}

func (t Target) byIndex() bool { return len(t.IDs) == 0 && (t.Start != nil || t.End != nil) }

// Resolve returns the indices and ids of the addressed cells among the current ones, in the
// order given; an *InvalidError says what does not fit.
func (t Target) Resolve(cells CellOrder) (indices []int, ids []string, err error) {
	n := cells.NumCells()
	switch {
	case len(t.IDs) > 0 && (t.Start != nil || t.End != nil):
		return nil, nil, invalidf([]any{"cell_ids"}, "give either cell_ids or start_index/end_index, not both")
	case len(t.IDs) > 0:
		seen := map[string]bool{}
		var missing []string
		for _, id := range t.IDs {
			if seen[id] {
				return nil, nil, invalidf([]any{"cell_ids"}, "cell id %q is listed twice", id)
			}
			seen[id] = true
			i := cells.CellIndex(id)
			if i < 0 {
				missing = append(missing, id)
				continue
			}
			indices = append(indices, i)
			ids = append(ids, id)
		}
		if len(missing) > 0 {
			return nil, nil, invalidf([]any{"cell_ids"}, "no cell with id %s in the notebook (it has %d cells; re-read it to get current ids)", quoteList(missing), n)
		}
		return indices, ids, nil
	case t.Start != nil:
		start, end := *t.Start, *t.Start
		if t.End != nil {
			end = *t.End
		}
		if start < 0 || start >= n {
			return nil, nil, invalidf([]any{"start_index"}, "is %d but the notebook has %d cells (indices 0..%d)", start, n, n-1)
		}
		if end < start {
			return nil, nil, invalidf([]any{"end_index"}, "is %d, before start_index %d", end, start)
		}
		if end >= n {
			return nil, nil, invalidf([]any{"end_index"}, "is %d but the last cell index is %d", end, n-1)
		}
		for i := start; i <= end; i++ {
			indices = append(indices, i)
			ids = append(ids, cells.CellID(i))
		}
		return indices, ids, nil
	case t.End != nil:
		return nil, nil, invalidf([]any{"start_index"}, "is required with end_index")
	}
	return nil, nil, invalidf([]any{"cell_ids"}, "say which cells: give cell_ids or start_index/end_index")
}

// present returns the indices of the ids still in the notebook, and the ids that are gone.
func present(cells CellOrder, ids []string) (indices []int, kept, gone []string) {
	for _, id := range ids {
		if i := cells.CellIndex(id); i >= 0 {
			indices = append(indices, i)
			kept = append(kept, id)
		} else {
			gone = append(gone, id)
		}
	}
	return indices, kept, gone
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// goneWarning says which cells a replay left out.
func goneWarning(what string, gone []string) string {
	return fmt.Sprintf("%s: cell %s gone when the edit ran again after the room was rebuilt", what, strings.Join(gone, ", "))
}
