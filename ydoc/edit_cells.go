package ydoc

import (
	"fmt"
	"slices"
	"sort"

	y "github.com/skyterra/y-crdt"
)

// The notebook edits as values: insert, update, delete, move cells and clear outputs. Each is
// one transaction, marked undoable (the agent may take it back), all of it or nothing: every
// check runs before the first change.

// InsertCells inserts cells, placed by one of After, Before, At or Positions (none: at the end).
// Cells without an id get a fresh one on the first run, which replays reuse.
type InsertCells struct {
	Cells         []Cell
	After, Before string // next to this cell
	At            *int   // all consecutively at this index (0..NumCells)
	Positions     []int  // one index per cell: before the cell now at that index
	Guard         Guard
}

// Durable: cells are inserted by id, and a replay skips the ones already there.
func (e InsertCells) Durable() bool { return true }

func (e InsertCells) check() error {
	modes := 0
	for _, set := range []bool{e.After != "", e.Before != "", e.At != nil, e.Positions != nil} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return invalidf([]any{"positions"}, "give at most one of after_cell_id, before_cell_id, start_position and positions")
	}
	if e.Positions != nil && len(e.Positions) != len(e.Cells) {
		return invalidf([]any{"positions"}, "has %d entries for %d cells; give one position per cell", len(e.Positions), len(e.Cells))
	}
	seen := map[string]bool{}
	for i, c := range e.Cells {
		if c.ID == "" {
			continue
		}
		if seen[c.ID] {
			return invalidf([]any{"cells", i, "id"}, "id %q is used twice", c.ID)
		}
		seen[c.ID] = true
	}
	return nil
}

func (e InsertCells) run(tx *Txn, r editRun) (Outcome, error) {
	if err := e.check(); err != nil {
		return Outcome{}, err
	}
	if err := tx.beginEdit(KindNotebook); err != nil {
		return Outcome{}, err
	}
	cells := slices.Clone(e.Cells) // the value is shared with later runs: ids go into the copy
	for i := range cells {
		switch {
		case cells[i].ID != "":
		case r.prev != nil && i < len(r.prev.Cells):
			cells[i].ID = r.prev.Cells[i].ID
		default:
			cells[i].ID = NewCellID()
		}
		if cells[i].Type == "" {
			cells[i].Type = CellCode
		}
	}
	todo := cells
	if r.replay { // cells that made it before the reset are already there
		todo = nil
		for _, c := range cells {
			if tx.CellIndex(c.ID) < 0 {
				todo = append(todo, c)
			}
		}
	} else {
		for _, c := range cells {
			if tx.CellIndex(c.ID) >= 0 {
				return Outcome{}, invalidf([]any{"cells"}, "a cell with id %q is already in the notebook", c.ID)
			}
		}
		var anchors []string
		for _, a := range []string{e.After, e.Before} {
			if a != "" {
				anchors = append(anchors, a)
			}
		}
		if err := e.Guard.check(tx, r.since, anchors, e.At != nil || e.Positions != nil); err != nil {
			return Outcome{}, err
		}
	}
	var out Outcome
	// Plan (position, cells) groups against the current notebook, then insert from the highest
	// position down so earlier positions stay valid.
	type group struct {
		pos   int
		cells []Cell
	}
	var groups []group
	inTodo := map[string]bool{}
	for _, c := range todo {
		inTodo[c.ID] = true
	}
	n := tx.NumCells()
	switch {
	case e.Positions != nil:
		byPos := map[int][]Cell{}
		for i, c := range cells {
			p := e.Positions[i]
			if p < 0 || p > n {
				if !r.replay {
					return Outcome{}, invalidf([]any{"positions", i}, "is %d but the notebook has %d cells (use %d to append)", p, n, n)
				}
				p = min(max(p, 0), n) // the notebook shrank before the replay: the end
			}
			if inTodo[c.ID] {
				byPos[p] = append(byPos[p], c)
			}
		}
		for p, cs := range byPos {
			groups = append(groups, group{p, cs})
		}
	default:
		at := n
		switch {
		case e.At != nil:
			at = *e.At
			if at < 0 || at > n {
				if !r.replay {
					return Outcome{}, invalidf([]any{"start_position"}, "is %d but the notebook has %d cells (use %d to append)", at, n, n)
				}
				at = min(max(at, 0), n)
			}
		case e.After != "" || e.Before != "":
			anchor, field := e.After, "after_cell_id"
			if e.Before != "" {
				anchor, field = e.Before, "before_cell_id"
			}
			i := tx.CellIndex(anchor)
			ok := i >= 0
			switch {
			case ok && e.After != "":
				at = i + 1
			case ok:
				at = i
			case !r.replay:
				return Outcome{}, invalidf([]any{field}, "no cell with id %q (re-read the notebook for current ids)", anchor)
			default: // run again after the room was rebuilt without the anchor: at the end, not lost
				out.Warnings = append(out.Warnings, fmt.Sprintf("cell %s was gone when the edit ran again after the room was rebuilt: the cells went to the end", anchor))
			}
		}
		groups = []group{{at, todo}}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].pos > groups[j].pos })
	for _, g := range groups {
		if len(g.cells) == 0 {
			continue
		}
		if err := tx.InsertCells(g.pos, g.cells); err != nil {
			return Outcome{}, err
		}
	}
	for _, c := range cells {
		out.Cells = append(out.Cells, CellOutcome{ID: c.ID, Index: tx.CellIndex(c.ID), Type: c.Type})
	}
	out.Count = tx.NumCells()
	if k := len(cells); k > 0 {
		out.Cursor = &Cursor{CellID: cells[k-1].ID, Offset: utf16Len(cells[k-1].Source)}
	}
	return out, nil
}

// UpdateCells changes the source, type and/or metadata of cells. Cells are named by a CellID in
// every update, or by Target (ids parallel to the updates, or an index range).
type UpdateCells struct {
	Target  Target
	Updates []CellUpdate
	Guard   Guard
}

// CellUpdate is one cell's new content. Nil or empty fields stay as they are.
type CellUpdate struct {
	CellID   string
	Source   *string
	Type     string
	Metadata map[string]any
	// ReplaceMetadata: the cell's metadata becomes exactly Metadata; otherwise Metadata's keys
	// are set (a nil value removes the key).
	ReplaceMetadata bool
	ExpectedHash    string // the SourceHash the caller read (a Guard.Hashes entry)
}

// Durable: a replay sets the same content on the same cells (by id; an index range by the ids
// the first run resolved), which changes nothing more.
func (e UpdateCells) Durable() bool { return true }

// target is the cells addressed: the per-update ids, or Target.
func (e UpdateCells) target() (Target, error) {
	per := 0
	for i, u := range e.Updates {
		if u.CellID != "" {
			per++
		}
		if u.Source == nil && u.Type == "" && u.Metadata == nil {
			return Target{}, invalidf([]any{"updates", i}, "changes nothing: give content, cell_type and/or metadata")
		}
		if u.ReplaceMetadata && u.Metadata == nil {
			return Target{}, invalidf([]any{"updates", i, "metadata"}, "is required with metadata_mode=replace")
		}
		if u.Type != "" && !ValidCellType(u.Type) {
			return Target{}, invalidf([]any{"updates", i, "cell_type"}, "%q: must be code, markdown or raw", u.Type)
		}
		for k, v := range u.Metadata {
			if v == nil && !u.ReplaceMetadata {
				continue
			}
			if _, err := toAny(v); err != nil {
				return Target{}, invalidf([]any{"updates", i, "metadata"}, "%q: %v", k, err)
			}
		}
	}
	t := e.Target
	outside := len(t.IDs) > 0 || t.Start != nil || t.End != nil
	switch {
	case per > 0 && per < len(e.Updates):
		return Target{}, invalidf([]any{"updates"}, "give a cell_id in every update, or in none (and use cell_ids or start_index/end_index)")
	case per > 0 && outside:
		return Target{}, invalidf([]any{"cell_ids"}, "the updates carry cell_id already; drop cell_ids/start_index/end_index")
	case per > 0:
		t = Target{}
		for _, u := range e.Updates {
			t.IDs = append(t.IDs, u.CellID)
		}
	case len(t.IDs) > 0 && len(t.IDs) != len(e.Updates):
		return Target{}, invalidf([]any{"cell_ids"}, "has %d ids for %d updates; they are matched one to one", len(t.IDs), len(e.Updates))
	}
	return t, nil
}

func (e UpdateCells) run(tx *Txn, r editRun) (Outcome, error) {
	t, err := e.target()
	if err != nil {
		return Outcome{}, err
	}
	if err := tx.beginEdit(KindNotebook); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	var indices []int
	var ids []string
	updates := e.Updates
	switch {
	case r.replay && (len(t.IDs) > 0 || r.prev != nil):
		want := t.IDs
		if len(want) == 0 {
			want = r.prev.ids()
		}
		if len(want) != len(e.Updates) {
			return Outcome{}, fmt.Errorf("internal: %d cells resolved for %d updates", len(want), len(e.Updates))
		}
		updates = nil
		var gone []string
		for k, id := range want {
			if i := tx.CellIndex(id); i >= 0 {
				indices, ids, updates = append(indices, i), append(ids, id), append(updates, e.Updates[k])
			} else {
				gone = append(gone, id)
			}
		}
		if len(gone) > 0 {
			out.Warnings = append(out.Warnings, goneWarning("not updated", gone))
		}
	default:
		if indices, ids, err = t.Resolve(tx); err != nil {
			return Outcome{}, err
		}
		if len(indices) != len(e.Updates) {
			return Outcome{}, invalidf([]any{"end_index"}, "the range holds %d cells for %d updates; they are matched one to one", len(indices), len(e.Updates))
		}
	}
	if !r.replay {
		g := e.Guard
		for k, u := range e.Updates {
			if u.ExpectedHash != "" {
				hashes := make(map[string]string, len(g.Hashes)+1)
				for id, h := range g.Hashes {
					hashes[id] = h
				}
				hashes[ids[k]] = u.ExpectedHash
				g.Hashes = hashes
			}
		}
		if err := g.check(tx, r.since, ids, t.byIndex()); err != nil {
			return Outcome{}, err
		}
		if out.Busy, err = g.busy(ids); err != nil {
			return Outcome{}, err
		}
	}
	for k, u := range updates {
		i := indices[k]
		before, err := tx.Cell(i)
		if err != nil {
			return Outcome{}, err
		}
		changed := []string{}
		if u.Type != "" && u.Type != before.Type {
			if err := tx.SetCellType(i, u.Type); err != nil {
				return Outcome{}, err
			}
			changed = append(changed, "cell_type")
		}
		if u.Source != nil && *u.Source != before.Source {
			if err := tx.SetSource(i, *u.Source); err != nil {
				return Outcome{}, err
			}
			changed = append(changed, "source")
		}
		if u.Metadata != nil {
			md := mergedMetadata(before.Metadata, u)
			if !jsonEqual(md, before.Metadata) {
				if err := tx.SetCellMetadata(i, md); err != nil {
					return Outcome{}, err
				}
				changed = append(changed, "metadata")
			}
		}
		after, err := tx.Cell(i)
		if err != nil {
			return Outcome{}, err
		}
		out.Cells = append(out.Cells, CellOutcome{ID: ids[k], Index: i, Changed: changed, Type: after.Type})
		out.Cursor = &Cursor{CellID: ids[k], Offset: utf16Len(after.Source)}
	}
	out.Count = tx.NumCells()
	return out, nil
}

// mergedMetadata is the metadata a cell gets from an update.
func mergedMetadata(current map[string]any, u CellUpdate) map[string]any {
	if u.ReplaceMetadata {
		return u.Metadata
	}
	md := make(map[string]any, len(current)+len(u.Metadata))
	for k, v := range current {
		md[k] = v
	}
	for k, v := range u.Metadata {
		if v == nil {
			delete(md, k)
		} else {
			md[k] = v
		}
	}
	return md
}

// DeleteCells deletes cells.
type DeleteCells struct {
	Target Target
	Guard  Guard
}

// Durable: cells are deleted by id (a range by the ids the first run resolved), and cells
// already gone count as deleted.
func (e DeleteCells) Durable() bool { return true }

func (e DeleteCells) run(tx *Txn, r editRun) (Outcome, error) {
	if err := tx.beginEdit(KindNotebook); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	var indices []int
	var ids []string
	if r.replay && (len(e.Target.IDs) > 0 || r.prev != nil) {
		want := e.Target.IDs
		if len(want) == 0 {
			want = r.prev.ids()
		}
		// Cells gone before the replay count as deleted, where the first run found them.
		indices, ids, _ = present(tx, want)
		if r.prev != nil {
			for _, c := range r.prev.Cells {
				if !slices.Contains(ids, c.ID) {
					out.Cells = append(out.Cells, c)
				}
			}
		}
	} else {
		var err error
		if indices, ids, err = e.Target.Resolve(tx); err != nil {
			return Outcome{}, err
		}
		if !r.replay {
			if err := e.Guard.check(tx, r.since, ids, e.Target.byIndex()); err != nil {
				return Outcome{}, err
			}
			if out.Busy, err = e.Guard.busy(ids); err != nil {
				return Outcome{}, err
			}
		}
	}
	for k, i := range indices {
		out.Cells = append(out.Cells, CellOutcome{ID: ids[k], Index: i})
	}
	order := slices.Clone(indices)
	sort.Sort(sort.Reverse(sort.IntSlice(order)))
	for _, i := range order {
		if err := tx.DeleteCells(i, 1); err != nil {
			return Outcome{}, err
		}
	}
	out.Count = tx.NumCells()
	return out, nil
}

// MoveCells moves cells (keeping their ids, outputs and metadata) so that they sit
// consecutively, in the order given, at To of the resulting notebook, or right after or before
// another cell. A move is delete plus re-create, as in JupyterLab: cells already in place are
// left alone.
type MoveCells struct {
	IDs           []string
	To            *int
	After, Before string
	Guard         Guard
}

// Durable: by id, and cells already in place are left alone.
func (e MoveCells) Durable() bool { return true }

func (e MoveCells) check() error {
	modes := 0
	for _, set := range []bool{e.To != nil, e.After != "", e.Before != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return invalidf([]any{"to_index"}, "give exactly one of to_index, after_cell_id and before_cell_id")
	}
	for _, anchor := range []string{e.After, e.Before} {
		if anchor != "" && slices.Contains(e.IDs, anchor) {
			return invalidf([]any{"cell_ids"}, "cell %q cannot be moved next to itself", anchor)
		}
	}
	return nil
}

func (e MoveCells) run(tx *Txn, r editRun) (Outcome, error) {
	if err := e.check(); err != nil {
		return Outcome{}, err
	}
	if err := tx.beginEdit(KindNotebook); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	current := tx.CellIDs()
	var indices []int
	var ids []string
	if r.replay {
		var gone []string
		indices, ids, gone = present(tx, e.IDs)
		if len(gone) > 0 {
			out.Warnings = append(out.Warnings, goneWarning("not moved", gone))
		}
	} else {
		var err error
		if indices, ids, err = (Target{IDs: e.IDs}).Resolve(tx); err != nil {
			return Outcome{}, err
		}
		anchors := slices.Clone(ids)
		for _, a := range []string{e.After, e.Before} {
			if a != "" {
				anchors = append(anchors, a)
			}
		}
		if err := e.Guard.check(tx, r.since, anchors, e.To != nil); err != nil {
			return Outcome{}, err
		}
		if out.Busy, err = e.Guard.busy(ids); err != nil {
			return Outcome{}, err
		}
	}
	n := len(current)
	remaining := n - len(ids)
	stay := func() (Outcome, error) {
		for k, id := range ids {
			out.Cells = append(out.Cells, CellOutcome{ID: id, Index: indices[k], From: indices[k]})
		}
		out.Count = n
		return out, nil
	}
	var to int
	switch {
	case e.To != nil:
		to = *e.To
		if to < 0 || to > remaining {
			if !r.replay {
				return Outcome{}, invalidf([]any{"to_index"}, "is %d but moving %d of %d cells allows 0..%d", to, len(ids), n, remaining)
			}
			to = min(max(to, 0), remaining)
		}
	default:
		anchor := e.After + e.Before
		ai := slices.Index(current, anchor)
		if ai < 0 && r.replay { // run again after the room was rebuilt without the anchor: left in place
			out.Warnings = append(out.Warnings, fmt.Sprintf("cell %s was gone when the edit ran again after the room was rebuilt: the cells stayed where they were", anchor))
			return stay()
		}
		if ai < 0 {
			field := "after_cell_id"
			if e.Before != "" {
				field = "before_cell_id"
			}
			return Outcome{}, invalidf([]any{field}, "no cell with id %q (re-read the notebook for current ids)", anchor)
		}
		to = ai // the anchor's index once the moved cells before it are out
		for _, i := range indices {
			if i < ai {
				to--
			}
		}
		if e.After != "" {
			to++
		}
	}
	moving := map[string]bool{}
	for _, id := range ids {
		moving[id] = true
	}
	rest := make([]string, 0, n)
	for _, id := range current {
		if !moving[id] {
			rest = append(rest, id)
		}
	}
	final := append(append(append([]string{}, rest[:to]...), ids...), rest[to:]...)
	if slices.Equal(final, current) { // already in place: a move is delete + re-create, skip the churn
		return stay()
	}
	clones := make([]Cell, len(indices))
	for k, i := range indices {
		c, err := tx.Cell(i)
		if err != nil {
			return Outcome{}, err
		}
		clones[k] = c
	}
	order := slices.Clone(indices)
	sort.Sort(sort.Reverse(sort.IntSlice(order)))
	for _, i := range order {
		if err := tx.DeleteCells(i, 1); err != nil {
			return Outcome{}, err
		}
	}
	if err := tx.InsertCells(to, clones); err != nil {
		return Outcome{}, err
	}
	for k, id := range ids {
		out.Cells = append(out.Cells, CellOutcome{ID: id, Index: to + k, From: indices[k]})
	}
	out.Count = n
	return out, nil
}

// ClearOutputs clears the outputs and execution count of code cells (and their execution
// timing metadata), as JupyterLab's "Clear Outputs" does: the cells named by IDs, or every cell
// when IDs is empty. Cells of other types have nothing to clear.
type ClearOutputs struct {
	IDs   []string
	Guard Guard
}

// Durable: by id (the whole notebook by the cells the first run cleared); clearing a cleared
// cell changes nothing.
func (e ClearOutputs) Durable() bool { return true }

func (e ClearOutputs) run(tx *Txn, r editRun) (Outcome, error) {
	if err := tx.beginEdit(KindNotebook); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	current := tx.CellIDs()
	var indices []int
	var ids []string
	switch {
	case r.replay && (len(e.IDs) > 0 || r.prev != nil):
		want := e.IDs
		if len(want) == 0 {
			want = r.prev.ids()
		}
		var gone []string
		indices, ids, gone = present(tx, want)
		if len(gone) > 0 {
			out.Warnings = append(out.Warnings, goneWarning("not cleared", gone))
		}
	case len(e.IDs) > 0:
		var err error
		if indices, ids, err = (Target{IDs: e.IDs}).Resolve(tx); err != nil {
			return Outcome{}, err
		}
	default:
		ids = current
		for i := range current {
			indices = append(indices, i)
		}
	}
	if !r.replay {
		if err := e.Guard.check(tx, r.since, ids, false); err != nil {
			return Outcome{}, err
		}
		var err error
		if out.Busy, err = e.Guard.busy(ids); err != nil {
			return Outcome{}, err
		}
	}
	var notCode []string
	for k, i := range indices {
		m, err := tx.cellMap(i)
		if err != nil {
			return Outcome{}, err
		}
		if t, _ := mapGet(m, "cell_type"); t != CellCode {
			if len(e.IDs) > 0 {
				notCode = append(notCode, ids[k])
			}
			continue
		}
		changed := []string{}
		if n, err := tx.NumOutputs(i); err == nil && n > 0 {
			if err := tx.ClearOutputs(i); err != nil {
				return Outcome{}, err
			}
			changed = append(changed, "outputs")
		}
		if c, ok := mapGet(m, "execution_count"); ok {
			if _, isInt := asInt(c); isInt {
				if err := tx.SetExecutionCount(i, nil); err != nil {
					return Outcome{}, err
				}
				changed = append(changed, "execution_count")
			}
		}
		if had, err := tx.cellHasMetadataKey(i, "execution"); err == nil && had {
			if err := tx.DeleteCellMetadataKey(i, "execution"); err != nil {
				return Outcome{}, err
			}
			changed = append(changed, "metadata")
		}
		out.Cells = append(out.Cells, CellOutcome{ID: ids[k], Index: i, Changed: changed, Type: CellCode})
	}
	if len(notCode) > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: not a code cell, nothing to clear", quoteList(notCode)))
	}
	out.Count = len(current)
	return out, nil
}

// cellHasMetadataKey reports whether cell i's metadata holds key.
func (tx *Txn) cellHasMetadataKey(i int, key string) (bool, error) {
	m, err := tx.cellMap(i)
	if err != nil {
		return false, err
	}
	md, ok := mustGet(m, "metadata").(*y.YMap)
	if !ok {
		return false, nil
	}
	_, present := mapGet(md, key)
	return present, nil
}
