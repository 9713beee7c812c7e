package tools

import (
	"context"
	"sort"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Editing notebooks. Every edit is one transaction in the live room: all of it lands or none of
// it does, and the tool returns only when jupyter-server has confirmed it. Cells are addressed by
// id (preferred: ids survive other people's edits) or by index range. expected_version and
// expected_source_hashes refuse the edit, changing nothing, when the cells it touches changed
// since the caller read them.

const maxBatch = 500

var (
	cellIDsField = func(desc string) prop {
		return field("cell_ids", array(desc, str("A cell id.")).items(1, maxBatch))
	}
	startIndexField = field("start_index", integer("First cell index (0-based) of a range, instead of cell_ids.").min(0))
	endIndexField   = field("end_index", integer("Last cell index of the range, inclusive (default: start_index).").min(0))
	versionField    = field("expected_version", str("The version returned by your last read or edit: the call fails, changing nothing, if the cells it touches were changed by someone else since (or if cells were inserted, deleted or moved and you address cells by index)."))
	hashesField     = field("expected_source_hashes", freeObject("Map of cell id → source_hash (from get_notebook): the call fails, changing nothing, if any of those cells' source changed."))
	busyField       = field("avoid_busy_cells", boolean("Refuse, changing nothing, if a collaborator's cursor is in one of the cells (by default the edit goes ahead and the result warns).").def(false))
	cellTypeSchema  = func() *schema {
		return str("Cell type.").enum(ydoc.CellCode, ydoc.CellMarkdown, ydoc.CellRaw)
	}
)

// execFields are the options of running edited cells (present when execution is available).
func (s *Server) execFields() []prop {
	if s.opts.Executor == nil {
		return nil
	}
	return []prop{
		field("exec", boolean("Run the affected code cells after the edit (inserted code cells; updated cells whose source or type changed); the result includes their outputs.").def(true)),
		timeoutField,
		field("wait", boolean("With exec: wait for the run (up to timeout); false returns its job_id at once.").def(true)),
		field("stop_on_error", boolean("With exec: stop at the first cell that raises.").def(true)),
		outCapField, imagesField, pixelsField,
	}
}

func (s *Server) registerNotebookEditTools() {
	s.register(&operation{
		Name:     "batch_insert_notebook_cells",
		Title:    "Insert cells",
		Category: "notebooks",
		Description: "Insert one or more cells into a live notebook in one transaction. Place them with after_cell_id or " +
			"before_cell_id (preferred), start_position (all consecutively at that index), or positions (one index per " +
			"cell, each meaning \"before the cell now at this index\"); by default at the end. Returns the new cells' ids " +
			"and indices and the notebook's new version.",
		Input: object(
			pathField,
			field("cells", array("The cells to insert, in order.", object(
				field("content", str("The cell's source.").def("")),
				field("cell_type", cellTypeSchema().def(ydoc.CellCode)),
				field("metadata", freeObject("Cell metadata (JSON object).")),
				field("id", str("Id for the new cell (generated when omitted).")),
			)).items(1, maxBatch)),
			field("after_cell_id", str("Insert after this cell.")),
			field("before_cell_id", str("Insert before this cell.")),
			field("start_position", integer("Insert all cells consecutively at this index (0 = top; the cell count = end).").min(0)),
			field("positions", array("One index per cell (same length as cells): each cell goes before the cell now at that index.", integer("").min(0)).items(1, maxBatch)),
			versionField,
		).required("path", "cells").with(s.execFields()),
		Example: map[string]any{"path": "analysis/report.ipynb", "after_cell_id": "a1b2c3", "cells": []any{
			map[string]any{"cell_type": "markdown", "content": "## Results"},
			map[string]any{"cell_type": "code", "content": "df.describe()"},
		}},
		Forkable: true,
		Doc:      nbEditDoc("after_cell_id", "before_cell_id"),
		Run:      handle(insertArgs{}, s.batchInsert, renderEdit[insertArgs](s)),
	})
	s.register(&operation{
		Name:     "batch_update_notebook_cells",
		Title:    "Update cells",
		Category: "notebooks",
		Description: "Change the source, type and/or metadata of one or more cells in one transaction. Source changes are " +
			"applied as minimal text diffs, so the cursors of people typing elsewhere in the cell stay put. Address cells " +
			"with a cell_id in each update (preferred), with cell_ids (parallel to updates), or with start_index/end_index.",
		Input: object(
			pathField,
			field("updates", array("One update per cell.", object(
				field("cell_id", str("The cell to update.")),
				field("content", str("New source of the cell.")),
				field("cell_type", cellTypeSchema().desc("New type of the cell (the cell keeps its id, source and metadata; outputs go when it stops being code).")),
				field("metadata", freeObject("Metadata to write.")),
				field("metadata_mode", str("merge: set these keys (a null value removes a key); replace: the cell's metadata becomes exactly this.").enum("merge", "replace").def("merge")),
				field("expected_source_hash", str("source_hash of the cell as you read it: the update fails if the source changed since.")),
			)).items(1, maxBatch)),
			cellIDsField("The cells to update, parallel to updates (instead of a cell_id per update)."),
			startIndexField,
			endIndexField,
			versionField,
			hashesField,
			busyField,
		).required("path", "updates").with(s.execFields()),
		Example: map[string]any{"path": "analysis/report.ipynb", "updates": []any{
			map[string]any{"cell_id": "a1b2c3", "content": "df = load('data.csv')\ndf.head()", "expected_source_hash": "3f2a9c1b7d4e"},
		}},
		Destructive: true, Idempotent: true, Forkable: true,
		Doc: nbEditDoc("cell_ids"),
		Run: handle(updateArgs{}, s.batchUpdate, renderEdit[updateArgs](s)),
	})
	s.register(&operation{
		Name:        "batch_delete_notebook_cells",
		Title:       "Delete cells",
		Category:    "notebooks",
		Description: "Delete cells, addressed by cell_ids (preferred) or start_index/end_index, in one transaction.",
		Input: object(
			pathField,
			cellIDsField("The cells to delete."),
			startIndexField,
			endIndexField,
			versionField,
			hashesField,
			busyField,
		).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "cell_ids": []any{"a1b2c3", "d4e5f6"}},
		Destructive: true, Forkable: true,
		Doc: nbEditDoc("cell_ids"),
		Run: handle(deleteArgs{}, s.batchDelete, renderEdit[deleteArgs](s)),
	})
	s.register(&operation{
		Name:     "move_notebook_cells",
		Title:    "Move cells",
		Category: "notebooks",
		Description: "Move cells (keeping their ids, outputs and metadata) so that they sit consecutively, in the order " +
			"given, at to_index of the resulting notebook, or right after/before another cell.",
		Input: object(
			pathField,
			cellIDsField("The cells to move, in the order they should end up."),
			field("to_index", integer("Index in the resulting notebook of the first moved cell.").min(0)),
			field("after_cell_id", str("Put the cells right after this cell (instead of to_index).")),
			field("before_cell_id", str("Put the cells right before this cell (instead of to_index).")),
			versionField,
			busyField,
		).required("path", "cell_ids"),
		Example:    map[string]any{"path": "analysis/report.ipynb", "cell_ids": []any{"d4e5f6"}, "to_index": 0},
		Idempotent: true, Forkable: true,
		Doc: nbEditDoc("cell_ids", "after_cell_id", "before_cell_id"),
		Run: handle(moveArgs{}, s.moveCells, renderEdit[moveArgs](s)),
	})
}

// --- insert ----------------------------------------------------------------------------------

type newCell struct {
	Content  string         `json:"content"`
	CellType string         `json:"cell_type"`
	Metadata map[string]any `json:"metadata"`
	ID       string         `json:"id"`
}

type insertArgs struct {
	Cells         []newCell `json:"cells"`
	AfterCellID   string    `json:"after_cell_id"`
	BeforeCellID  string    `json:"before_cell_id"`
	StartPosition *int      `json:"start_position"`
	Positions     []int     `json:"positions"`
	guardArgs
}

type placedCell struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
}

// nbEditDoc is the notebook of an edit tool (or its fork, with fork_id), whose cells it names
// with parts.
func nbEditDoc(parts ...string) docRef {
	return docRef{Arg: "path", Ref: refNotebook, Open: true, Parts: parts}
}

// cellsEdited is the outcome of a notebook edit: the cells it placed, changed, deleted or moved
// (under key), and the run of the code cells it affected when asked.
type cellsEdited struct {
	path      string
	version   bridge.Version
	key       string // inserted, updated, deleted, moved
	cells     any    // []placedCell, []updatedCell, []placedCell, []movedCell
	cellCount *int
	warnings  []string
	run       *jobRun // exec: the run of the affected code cells
	runErr    error   // exec: why they could not be run
}

// renderEdit is the renderer of every notebook edit.
func renderEdit[A any](s *Server) func(*call, A, cellsEdited) result {
	return func(_ *call, _ A, e cellsEdited) result { return s.renderCellsEdited(e) }
}

func (s *Server) renderCellsEdited(e cellsEdited) result {
	out := map[string]any{"path": e.path, "version": e.version, e.key: e.cells}
	if e.cellCount != nil {
		out["cell_count"] = *e.cellCount
	}
	if len(e.warnings) > 0 {
		out["warnings"] = e.warnings
	}
	res := result{Data: out}
	switch {
	case e.runErr != nil:
		out["execution"] = map[string]any{"error": "the edit was applied, but the cells could not be run: " + e.runErr.Error()}
	case e.run != nil:
		r := s.renderJob(*e.run)
		out["execution"] = r.Data
		res.Extra = append(res.Extra, r.Extra...)
	}
	return res
}

func (s *Server) batchInsert(ctx context.Context, c *call, args insertArgs) (cellsEdited, error) {
	modes := 0
	for _, set := range []bool{args.AfterCellID != "", args.BeforeCellID != "", args.StartPosition != nil, args.Positions != nil} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return cellsEdited{}, invalid([]any{"positions"}, "give at most one of after_cell_id, before_cell_id, start_position and positions")
	}
	if args.Positions != nil && len(args.Positions) != len(args.Cells) {
		return cellsEdited{}, invalid([]any{"positions"}, "has %d entries for %d cells; give one position per cell", len(args.Positions), len(args.Cells))
	}
	cells := make([]ydoc.Cell, len(args.Cells))
	seen := map[string]bool{}
	for i, c := range args.Cells {
		typ := c.CellType
		if typ == "" {
			typ = ydoc.CellCode
		}
		id := c.ID
		if id == "" {
			id = ydoc.NewCellID() // chosen now, so a replay after a reset inserts the same cell
		}
		if seen[id] {
			return cellsEdited{}, invalid([]any{"cells", i, "id"}, "id %q is used twice", id)
		}
		seen[id] = true
		cells[i] = ydoc.Cell{ID: id, Type: typ, Source: c.Content, Metadata: c.Metadata}
	}
	room := c.Room
	var placed []placedCell
	var count int
	// Durable: re-running skips the cells already there, so it may be re-run if the server dies
	// before saving (bridge.Room.ApplyDurable).
	ed, err := room.ApplyDurable(ctx, func(tx *ydoc.Txn, h bridge.History, replaying bool) error {
		tx.Undoable() // the agent may take it back (undo_last_edit)
		numCells := tx.NumCells()
		todo := cells
		if replaying { // cells that made it before the reset are already there
			todo = nil
			for _, c := range cells {
				if tx.CellIndex(c.ID) < 0 {
					todo = append(todo, c)
				}
			}
		} else {
			for _, c := range cells {
				if tx.CellIndex(c.ID) >= 0 {
					return invalid([]any{"cells"}, "a cell with id %q is already in the notebook", c.ID)
				}
			}
			anchors := []string{}
			if args.AfterCellID != "" {
				anchors = append(anchors, args.AfterCellID)
			}
			if args.BeforeCellID != "" {
				anchors = append(anchors, args.BeforeCellID)
			}
			byIndex := args.StartPosition != nil || args.Positions != nil
			if err := guard(tx, h, args.guardArgs, anchors, byIndex); err != nil {
				return err
			}
		}
		// Plan (position, cell) pairs against the current notebook, then insert from the
		// highest position down so earlier positions stay valid.
		type group struct {
			pos   int
			cells []ydoc.Cell
		}
		var groups []group
		switch {
		case args.Positions != nil:
			byPos := map[int][]ydoc.Cell{}
			for i, c := range cells {
				p := args.Positions[i]
				if p > numCells {
					return invalid([]any{"positions", i}, "is %d but the notebook has %d cells (use %d to append)", p, numCells, numCells)
				}
				if contains(cellIDs(todo), c.ID) {
					byPos[p] = append(byPos[p], c)
				}
			}
			for p, cs := range byPos {
				groups = append(groups, group{p, cs})
			}
		default:
			pos := numCells
			switch {
			case args.StartPosition != nil:
				pos = *args.StartPosition
				if pos > numCells && !replaying {
					return invalid([]any{"start_position"}, "is %d but the notebook has %d cells (use %d to append)", pos, numCells, numCells)
				}
			case args.AfterCellID != "":
				i := tx.CellIndex(args.AfterCellID)
				switch {
				case i >= 0:
					pos = i + 1
				case !replaying:
					return invalid([]any{"after_cell_id"}, "no cell with id %q (re-read the notebook for current ids)", args.AfterCellID)
				} // run again after the room was rebuilt without the anchor: at the end, not lost
			case args.BeforeCellID != "":
				i := tx.CellIndex(args.BeforeCellID)
				switch {
				case i >= 0:
					pos = i
				case !replaying:
					return invalid([]any{"before_cell_id"}, "no cell with id %q (re-read the notebook for current ids)", args.BeforeCellID)
				}
			}
			if pos > numCells {
				pos = numCells
			}
			groups = []group{{pos, todo}}
		}
		sort.Slice(groups, func(i, j int) bool { return groups[i].pos > groups[j].pos })
		for _, g := range groups {
			if len(g.cells) == 0 {
				continue
			}
			if err := tx.InsertCells(g.pos, g.cells); err != nil {
				return err
			}
		}
		placed = placed[:0]
		for _, c := range cells {
			placed = append(placed, placedCell{ID: c.ID, Index: tx.CellIndex(c.ID)})
		}
		count = tx.NumCells()
		return nil
	})
	if err != nil {
		return cellsEdited{}, err
	}
	if n := len(cells); n > 0 {
		s.moveCursorTo(ctx, room, cells[n-1].ID, utf16Units(cells[n-1].Source))
	}
	e := cellsEdited{path: room.Path(), version: ed.Version, key: "inserted", cells: placed, cellCount: &count}
	var run []string
	for _, cell := range cells {
		if cell.Type == ydoc.CellCode && strings.TrimSpace(cell.Source) != "" {
			run = append(run, cell.ID)
		}
	}
	s.execAfterEdit(ctx, c, run, &e)
	return e, nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func cellIDs(cells []ydoc.Cell) []string {
	ids := make([]string, len(cells))
	for i, c := range cells {
		ids[i] = c.ID
	}
	return ids
}

// --- update ----------------------------------------------------------------------------------

type cellUpdate struct {
	CellID             string         `json:"cell_id"`
	Content            *string        `json:"content"`
	CellType           string         `json:"cell_type"`
	Metadata           map[string]any `json:"metadata"`
	MetadataMode       string         `json:"metadata_mode"`
	ExpectedSourceHash string         `json:"expected_source_hash"`
}

type updateArgs struct {
	Updates []cellUpdate `json:"updates"`
	targetArgs
	guardArgs
}

type updatedCell struct {
	ID      string   `json:"id"`
	Index   int      `json:"index"`
	Changed []string `json:"changed"`
}

func (s *Server) batchUpdate(ctx context.Context, c *call, args updateArgs) (cellsEdited, error) {
	perUpdate := 0
	for i, u := range args.Updates {
		if u.CellID != "" {
			perUpdate++
		}
		if u.Content == nil && u.CellType == "" && u.Metadata == nil {
			return cellsEdited{}, invalid([]any{"updates", i}, "changes nothing: give content, cell_type and/or metadata")
		}
		if u.MetadataMode == "replace" && u.Metadata == nil {
			return cellsEdited{}, invalid([]any{"updates", i, "metadata"}, "is required with metadata_mode=replace")
		}
	}
	outside := len(args.CellIDs) > 0 || args.StartIndex != nil || args.EndIndex != nil
	switch {
	case perUpdate > 0 && perUpdate < len(args.Updates):
		return cellsEdited{}, invalid([]any{"updates"}, "give a cell_id in every update, or in none (and use cell_ids or start_index/end_index)")
	case perUpdate > 0 && outside:
		return cellsEdited{}, invalid([]any{"cell_ids"}, "the updates carry cell_id already; drop cell_ids/start_index/end_index")
	case perUpdate > 0:
		for _, u := range args.Updates {
			args.CellIDs = append(args.CellIDs, u.CellID)
		}
	case len(args.CellIDs) > 0 && len(args.CellIDs) != len(args.Updates):
		return cellsEdited{}, invalid([]any{"cell_ids"}, "has %d ids for %d updates; they are matched one to one", len(args.CellIDs), len(args.Updates))
	}
	room := c.Room
	busy := s.busyCells(ctx, room, args.AvoidBusyCells)
	var updated []updatedCell
	var warnings []string
	var lastID string
	var lastEnd int
	apply := room.Apply
	if args.StartIndex == nil && args.EndIndex == nil {
		apply = room.ApplyDurable // by cell id, content set: running it twice changes nothing more
	}
	ed, err := apply(ctx, func(tx *ydoc.Txn, h bridge.History, replaying bool) error {
		tx.Undoable() // the agent may take it back (undo_last_edit)
		indices, ids, byIndex, err := resolve(tx, args.targetArgs)
		if err != nil {
			return err
		}
		if len(indices) != len(args.Updates) {
			return invalid([]any{"end_index"}, "the range holds %d cells for %d updates; they are matched one to one", len(indices), len(args.Updates))
		}
		if !replaying {
			g := args.guardArgs
			hashesFromUpdates(&g, ids, args.Updates)
			if err := guard(tx, h, g, ids, byIndex); err != nil {
				return err
			}
			if warnings, err = busyCheck(busy, ids, args.AvoidBusyCells); err != nil {
				return err
			}
		}
		// Validate every update before changing anything.
		for k, u := range args.Updates {
			if u.Metadata != nil {
				if _, err := mergedMetadata(tx, indices[k], u); err != nil {
					return invalid([]any{"updates", k, "metadata"}, "%v", err)
				}
			}
		}
		updated = updated[:0]
		for k, u := range args.Updates {
			i := indices[k]
			var changed []string
			before, err := tx.Cell(i)
			if err != nil {
				return err
			}
			if u.CellType != "" && u.CellType != before.Type {
				if err := tx.SetCellType(i, u.CellType); err != nil {
					return err
				}
				changed = append(changed, "cell_type")
			}
			if u.Content != nil && *u.Content != before.Source {
				if err := tx.SetSource(i, *u.Content); err != nil {
					return err
				}
				changed = append(changed, "source")
			}
			if u.Metadata != nil {
				md, _ := mergedMetadata(tx, i, u)
				if !jsonEqual(md, before.Metadata) {
					if err := tx.SetCellMetadata(i, md); err != nil {
						return err
					}
					changed = append(changed, "metadata")
				}
			}
			if changed == nil {
				changed = []string{}
			}
			updated = append(updated, updatedCell{ID: ids[k], Index: i, Changed: changed})
			if after, err := tx.Cell(tx.CellIndex(ids[k])); err == nil {
				lastID, lastEnd = ids[k], utf16Units(after.Source)
			}
		}
		return nil
	})
	if err != nil {
		return cellsEdited{}, err
	}
	s.moveCursorTo(ctx, room, lastID, lastEnd)
	e := cellsEdited{path: room.Path(), version: ed.Version, key: "updated", cells: updated,
		warnings: append(warnings, s.busyUnknown(ctx, room, args.AvoidBusyCells)...)}
	var run []string
	for k, u := range updated {
		if contains(u.Changed, "source") || (contains(u.Changed, "cell_type") && args.Updates[k].CellType == ydoc.CellCode) {
			run = append(run, u.ID)
		}
	}
	s.execAfterEdit(ctx, c, run, &e)
	return e, nil
}

// execAfterEdit runs the edited code cells when asked (exec defaults to true when execution is
// available) and adds the run to the edit's outcome. The edit stands whatever the run does.
func (s *Server) execAfterEdit(ctx context.Context, c *call, cellIDs []string, e *cellsEdited) {
	if s.opts.Executor == nil || len(cellIDs) == 0 {
		return
	}
	if run, ok := c.args["exec"].(bool); ok && !run {
		return
	}
	var args execArgs
	if err := decodeArgs(c.args, &args); err != nil {
		return
	}
	run, err := s.runAndWait(ctx, c, cellIDs, args)
	if err != nil {
		e.runErr = err
		return
	}
	e.run = &run
}

// mergedMetadata is the metadata a cell gets from an update.
func mergedMetadata(tx *ydoc.Txn, i int, u cellUpdate) (map[string]any, error) {
	if u.MetadataMode == "replace" {
		return u.Metadata, nil
	}
	c, err := tx.Cell(i)
	if err != nil {
		return nil, err
	}
	md := make(map[string]any, len(c.Metadata)+len(u.Metadata))
	for k, v := range c.Metadata {
		md[k] = v
	}
	for k, v := range u.Metadata {
		if v == nil {
			delete(md, k)
		} else {
			md[k] = v
		}
	}
	return md, nil
}

// --- delete ----------------------------------------------------------------------------------

type deleteArgs struct {
	targetArgs
	guardArgs
}

func (s *Server) batchDelete(ctx context.Context, c *call, args deleteArgs) (cellsEdited, error) {
	room := c.Room
	busy := s.busyCells(ctx, room, args.AvoidBusyCells)
	var warnings []string
	var deleted []placedCell
	var count int
	apply := room.Apply
	if args.StartIndex == nil && args.EndIndex == nil {
		apply = room.ApplyDurable // by cell id: cells already gone count as deleted when re-run
	}
	ed, err := apply(ctx, func(tx *ydoc.Txn, h bridge.History, replaying bool) error {
		tx.Undoable() // the agent may take it back (undo_last_edit)
		t := args.targetArgs
		if replaying && len(t.CellIDs) > 0 { // cells already gone before the reset count as deleted
			var still []string
			for _, id := range t.CellIDs {
				if tx.CellIndex(id) >= 0 {
					still = append(still, id)
				}
			}
			if len(still) == 0 {
				count = tx.NumCells()
				return nil
			}
			t.CellIDs = still
		}
		indices, ids, byIndex, err := resolve(tx, t)
		if err != nil {
			return err
		}
		if !replaying {
			if err := guard(tx, h, args.guardArgs, ids, byIndex); err != nil {
				return err
			}
			if warnings, err = busyCheck(busy, ids, args.AvoidBusyCells); err != nil {
				return err
			}
		}
		deleted = deleted[:0]
		for k, i := range indices {
			deleted = append(deleted, placedCell{ID: ids[k], Index: i})
		}
		order := append([]int(nil), indices...)
		sort.Sort(sort.Reverse(sort.IntSlice(order)))
		for _, i := range order {
			if err := tx.DeleteCells(i, 1); err != nil {
				return err
			}
		}
		count = tx.NumCells()
		return nil
	})
	if err != nil {
		return cellsEdited{}, err
	}
	if deleted == nil {
		deleted = []placedCell{}
	}
	return cellsEdited{path: room.Path(), version: ed.Version, key: "deleted", cells: deleted, cellCount: &count,
		warnings: append(warnings, s.busyUnknown(ctx, room, args.AvoidBusyCells)...)}, nil
}

// --- move ------------------------------------------------------------------------------------

type moveArgs struct {
	CellIDs      []string `json:"cell_ids"`
	ToIndex      *int     `json:"to_index"`
	AfterCellID  string   `json:"after_cell_id"`
	BeforeCellID string   `json:"before_cell_id"`
	guardArgs
}

type movedCell struct {
	ID   string `json:"id"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

func (s *Server) moveCells(ctx context.Context, c *call, args moveArgs) (cellsEdited, error) {
	modes := 0
	for _, set := range []bool{args.ToIndex != nil, args.AfterCellID != "", args.BeforeCellID != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return cellsEdited{}, invalid([]any{"to_index"}, "give exactly one of to_index, after_cell_id and before_cell_id")
	}
	for _, anchor := range []string{args.AfterCellID, args.BeforeCellID} {
		if anchor != "" && contains(args.CellIDs, anchor) {
			return cellsEdited{}, invalid([]any{"cell_ids"}, "cell %q cannot be moved next to itself", anchor)
		}
	}
	room := c.Room
	busy := s.busyCells(ctx, room, args.AvoidBusyCells)
	var warnings []string
	var moved []movedCell
	// Durable: by cell id, and a cell already in place is left alone, so running it again after
	// the server lost it moves nothing more (bridge.Room.ApplyDurable).
	ed, err := room.ApplyDurable(ctx, func(tx *ydoc.Txn, h bridge.History, replaying bool) error {
		tx.Undoable() // the agent may take it back (undo_last_edit)
		indices, ids, _, err := resolve(tx, targetArgs{CellIDs: args.CellIDs})
		if err != nil {
			return err
		}
		if !replaying {
			anchors := append([]string(nil), ids...)
			for _, a := range []string{args.AfterCellID, args.BeforeCellID} {
				if a != "" {
					anchors = append(anchors, a)
				}
			}
			if err := guard(tx, h, args.guardArgs, anchors, args.ToIndex != nil); err != nil {
				return err
			}
			if warnings, err = busyCheck(busy, ids, args.AvoidBusyCells); err != nil {
				return err
			}
		}
		n := tx.NumCells()
		remaining := n - len(ids)
		var to int
		switch {
		case args.ToIndex != nil:
			to = *args.ToIndex
			if to > remaining {
				return invalid([]any{"to_index"}, "is %d but moving %d of %d cells allows 0..%d", to, len(ids), n, remaining)
			}
		default:
			anchor := args.AfterCellID + args.BeforeCellID
			ai := tx.CellIndex(anchor)
			if ai < 0 && replaying {
				return nil // run again after the room was rebuilt without the anchor: left in place
			}
			if ai < 0 {
				name := "after_cell_id"
				if args.BeforeCellID != "" {
					name = "before_cell_id"
				}
				return invalid([]any{name}, "no cell with id %q (re-read the notebook for current ids)", anchor)
			}
			// the anchor's index once the moved cells are out
			for _, i := range indices {
				if i < ai {
					ai--
				}
			}
			to = ai
			if args.AfterCellID != "" {
				to++
			}
		}
		// Already in place: nothing to do (a move is delete + re-create, so skip the churn).
		rest := make([]string, 0, n)
		for _, id := range tx.CellIDs() {
			if !contains(ids, id) {
				rest = append(rest, id)
			}
		}
		final := append(append(append([]string{}, rest[:to]...), ids...), rest[to:]...)
		if equalStrings(final, tx.CellIDs()) {
			moved = moved[:0]
			for k, id := range ids {
				moved = append(moved, movedCell{ID: id, From: indices[k], To: indices[k]})
			}
			return nil
		}
		clones := make([]ydoc.Cell, len(indices))
		for k, i := range indices {
			c, err := tx.Cell(i)
			if err != nil {
				return err
			}
			clones[k] = c
		}
		order := append([]int(nil), indices...)
		sort.Sort(sort.Reverse(sort.IntSlice(order)))
		for _, i := range order {
			if err := tx.DeleteCells(i, 1); err != nil {
				return err
			}
		}
		if err := tx.InsertCells(to, clones); err != nil {
			return err
		}
		moved = moved[:0]
		for k, id := range ids {
			moved = append(moved, movedCell{ID: id, From: indices[k], To: tx.CellIndex(id)})
		}
		return nil
	})
	if err != nil {
		return cellsEdited{}, err
	}
	return cellsEdited{path: room.Path(), version: ed.Version, key: "moved", cells: moved,
		warnings: append(warnings, s.busyUnknown(ctx, room, args.AvoidBusyCells)...)}, nil
}
