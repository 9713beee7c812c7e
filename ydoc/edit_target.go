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

func (t Target) byIndex() bool { return len(t.IDs) == 0 && (t.Start != nil || t.End != nil) }

// Resolve returns the indices and ids of the addressed cells among the current ones, in the
// order given; an *InvalidError says what does not fit.
func (t Target) Resolve(current []string) (indices []int, ids []string, err error) {
	switch {
	case len(t.IDs) > 0 && (t.Start != nil || t.End != nil):
		return nil, nil, invalidf([]any{"cell_ids"}, "give either cell_ids or start_index/end_index, not both")
	case len(t.IDs) > 0:
		pos := positions(current)
		seen := map[string]bool{}
		var missing []string
		for _, id := range t.IDs {
			if seen[id] {
				return nil, nil, invalidf([]any{"cell_ids"}, "cell id %q is listed twice", id)
			}
			seen[id] = true
			i, ok := pos[id]
			if !ok {
				missing = append(missing, id)
				continue
			}
			indices = append(indices, i)
			ids = append(ids, id)
		}
		if len(missing) > 0 {
			return nil, nil, invalidf([]any{"cell_ids"}, "no cell with id %s in the notebook (it has %d cells; re-read it to get current ids)", quoteList(missing), len(current))
		}
		return indices, ids, nil
	case t.Start != nil:
		start, end := *t.Start, *t.Start
		if t.End != nil {
			end = *t.End
		}
		if start < 0 || start >= len(current) {
			return nil, nil, invalidf([]any{"start_index"}, "is %d but the notebook has %d cells (indices 0..%d)", start, len(current), len(current)-1)
		}
		if end < start {
			return nil, nil, invalidf([]any{"end_index"}, "is %d, before start_index %d", end, start)
		}
		if end >= len(current) {
			return nil, nil, invalidf([]any{"end_index"}, "is %d but the last cell index is %d", end, len(current)-1)
		}
		for i := start; i <= end; i++ {
			indices = append(indices, i)
			ids = append(ids, current[i])
		}
		return indices, ids, nil
	case t.End != nil:
		return nil, nil, invalidf([]any{"start_index"}, "is required with end_index")
	}
	return nil, nil, invalidf([]any{"cell_ids"}, "say which cells: give cell_ids or start_index/end_index")
}

// present returns the indices of the ids still in the notebook, and the ids that are gone.
func present(current, ids []string) (indices []int, kept, gone []string) {
	pos := positions(current)
	for _, id := range ids {
		if i, ok := pos[id]; ok {
			indices = append(indices, i)
			kept = append(kept, id)
		} else {
			gone = append(gone, id)
		}
	}
	return indices, kept, gone
}

func positions(ids []string) map[string]int {
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	return pos
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
