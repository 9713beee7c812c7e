package tools

import (
	"fmt"
	"sort"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Addressing cells and guarding edits: which cells a call means (ids or an index range), and
// whether they changed since the version (or the source hashes) the caller read.

type targetArgs struct {
	CellIDs    []string `json:"cell_ids"`
	StartIndex *int     `json:"start_index"`
	EndIndex   *int     `json:"end_index"`
}

type guardArgs struct {
	ExpectedVersion      string         `json:"expected_version"`
	ExpectedSourceHashes map[string]any `json:"expected_source_hashes"`
	AvoidBusyCells       bool           `json:"avoid_busy_cells"`
}

// resolve returns the indices and ids of the addressed cells, in the order given.
func resolve(tx *ydoc.Txn, t targetArgs) (indices []int, ids []string, byIndex bool, err error) {
	return resolveIDs(tx, t)
}

// cellList is a notebook's cells as addressing needs them (a ydoc.Txn or ydoc.Doc): lookups
// that cost the same whatever the notebook's size.
type cellList interface {
	NumCells() int
	CellIndex(id string) int
	CellID(i int) string
}

// resolveIDs addresses cells among the current cells.
func resolveIDs(cells cellList, t targetArgs) (indices []int, ids []string, byIndex bool, err error) {
	n := cells.NumCells()
	switch {
	case len(t.CellIDs) > 0 && (t.StartIndex != nil || t.EndIndex != nil):
		return nil, nil, false, invalid([]any{"cell_ids"}, "give either cell_ids or start_index/end_index, not both")
	case len(t.CellIDs) > 0:
		seen := map[string]bool{}
		var missing []string
		for _, id := range t.CellIDs {
			if seen[id] {
				return nil, nil, false, invalid([]any{"cell_ids"}, "cell id %q is listed twice", id)
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
			return nil, nil, false, invalid([]any{"cell_ids"}, "no cell with id %s in the notebook (it has %d cells; re-read it to get current ids)", quoteList(missing), n)
		}
		return indices, ids, false, nil
	case t.StartIndex != nil:
		start, end := *t.StartIndex, *t.StartIndex
		if t.EndIndex != nil {
			end = *t.EndIndex
		}
		if start >= n {
			return nil, nil, true, invalid([]any{"start_index"}, "is %d but the notebook has %d cells (indices 0..%d)", start, n, n-1)
		}
		if end < start {
			return nil, nil, true, invalid([]any{"end_index"}, "is %d, before start_index %d", end, start)
		}
		if end >= n {
			return nil, nil, true, invalid([]any{"end_index"}, "is %d but the last cell index is %d", end, n-1)
		}
		for i := start; i <= end; i++ {
			indices = append(indices, i)
			ids = append(ids, cells.CellID(i))
		}
		return indices, ids, true, nil
	case t.EndIndex != nil:
		return nil, nil, true, invalid([]any{"start_index"}, "is required with end_index")
	}
	return nil, nil, false, invalid([]any{"cell_ids"}, "say which cells: give cell_ids or start_index/end_index")
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// conflict describes a cell someone else changed.
type conflict struct {
	CellID  string   `json:"cell_id"`
	Index   *int     `json:"index,omitempty"` // nil when the cell is gone
	Changed []string `json:"changed"`
	By      []string `json:"by,omitempty"`
}

// guard refuses the edit when the addressed cells changed since the caller's version, or their
// sources differ from the hashes the caller expects. It runs inside the room goroutine, right
// before the edit, so nothing can slip in between the check and the change.
func guard(tx *ydoc.Txn, h bridge.History, g guardArgs, targets []string, byIndex bool) error {
	var conflicts []conflict
	indexOf := func(id string) *int {
		if i := tx.CellIndex(id); i >= 0 {
			return &i
		}
		return nil
	}
	if g.ExpectedVersion != "" {
		entries, err := h.Entries(bridge.Version(g.ExpectedVersion))
		if err != nil {
			return &toolError{
				Message: fmt.Sprintf("conflict: cannot tell what changed since version %q (%v); re-read the notebook and retry with its version", g.ExpectedVersion, err),
				Extra:   map[string]any{"current_version": h.Version()},
			}
		}
		changed := map[string][]string{}
		authors := map[string][]string{}
		structure := false
		note := func(id, what string, by []string) {
			if !contains(changed[id], what) {
				changed[id] = append(changed[id], what)
			}
			for _, a := range by {
				if !contains(authors[id], a) {
					authors[id] = append(authors[id], a)
				}
			}
		}
		for _, e := range entries {
			for _, c := range e.Change.Cells {
				for _, f := range c.Fields {
					note(c.ID, f, e.Authors)
				}
			}
			for _, id := range e.Change.Deleted {
				note(id, "deleted", e.Authors)
			}
			for _, id := range e.Change.Inserted {
				note(id, "inserted", e.Authors)
			}
			structure = structure || len(e.Change.Inserted)+len(e.Change.Deleted) > 0 || e.Change.Moved
		}
		for _, id := range targets {
			if f, ok := changed[id]; ok {
				conflicts = append(conflicts, conflict{CellID: id, Index: indexOf(id), Changed: f, By: authors[id]})
			}
		}
		if byIndex && structure && len(conflicts) == 0 {
			return &toolError{
				Message: fmt.Sprintf("conflict: cells were inserted, deleted or moved since version %s, so the indices you gave may point at other cells; address cells by id or re-read the notebook", g.ExpectedVersion),
				Extra:   map[string]any{"current_version": h.Version()},
			}
		}
	}
	ids := make([]string, 0, len(g.ExpectedSourceHashes))
	for id := range g.ExpectedSourceHashes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		want, _ := g.ExpectedSourceHashes[id].(string)
		i := indexOf(id)
		if i == nil {
			conflicts = append(conflicts, conflict{CellID: id, Changed: []string{"deleted"}})
			continue
		}
		c, err := tx.Cell(*i)
		if err != nil {
			return err
		}
		if sourceHash(c.Source) != want {
			conflicts = append(conflicts, conflict{CellID: id, Index: i, Changed: []string{"source"}})
		}
	}
	if len(conflicts) == 0 {
		return nil
	}
	names := make([]string, len(conflicts))
	for i, c := range conflicts {
		names[i] = c.CellID
		if len(c.By) > 0 {
			names[i] += " (by " + strings.Join(c.By, ", ") + ")"
		}
	}
	return &toolError{
		Message: fmt.Sprintf("conflict: %s changed since you read them; nothing was modified. Re-read the cells and retry", strings.Join(names, ", ")),
		Extra:   map[string]any{"conflicts": conflicts, "current_version": h.Version()},
	}
}

func hashesFromUpdates(g *guardArgs, ids []string, updates []cellUpdate) {
	for i, u := range updates {
		if u.ExpectedSourceHash != "" && i < len(ids) {
			if g.ExpectedSourceHashes == nil {
				g.ExpectedSourceHashes = map[string]any{}
			}
			g.ExpectedSourceHashes[ids[i]] = u.ExpectedSourceHash
		}
	}
}
