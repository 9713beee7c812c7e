package tools

import (
	"context"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
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
		return brief("cell_ids", array(desc, str("A cell id or handle.")).items(1, maxBatch))
	}
	startIndexField = brief("start_index", integer("First cell index (0-based) of a range, instead of cell_ids.").min(0))
	endIndexField   = brief("end_index", integer("Last cell index of the range, inclusive (default: start_index).").min(0))
	versionField    = brief("expected_version", str("The version returned by your last read or edit: the call fails, changing nothing, if the cells it touches were changed by someone else since (or if cells were inserted, deleted or moved and you address cells by index)."))
	hashesField     = brief("expected_source_hashes", freeObject("Map of cell id → source hash (get_notebook with hashes: true): the call fails, changing nothing, if any of those cells' source changed."))
	busyField       = brief("avoid_busy_cells", boolean("Refuse, changing nothing, if a collaborator's cursor is in one of the cells (by default the edit goes ahead and the result warns).").def(false))
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
		brief("exec", boolean("Run the affected code cells after the edit (inserted code cells; updated cells whose source or type changed); the result includes their outputs.").def(true)),
		timeoutField,
		waitField,
		stopField, outCapField, imagesField, pixelsField,
	}
}

func (s *Server) registerNotebookEditTools() {
	s.register(&operation{
		Name:     "batch_insert_notebook_cells",
		Title:    "Insert cells",
		Category: "notebooks",
		Default:  true,
		Scope:    auth.ScopeWrite,
		Description: "Insert cells after or before a cell, at an index, or at the end (default), in one transaction. " +
			"Inserted code cells run unless exec is false, and the result has their outputs.",
		Input: object(
			pathField,
			brief("cells", array("The cells to insert, in order.", object(
				brief("content", str("The cell's source.").def("")),
				brief("cell_type", cellTypeSchema().def(ydoc.CellCode)),
				brief("metadata", freeObject("Cell metadata (JSON object).")),
				brief("id", str("Id for the new cell (generated when omitted).")),
			)).items(1, maxBatch)),
			brief("after_cell_id", str("Insert after this cell.")),
			brief("before_cell_id", str("Insert before this cell.")),
			brief("start_position", integer("Insert all cells consecutively at this index (0 = top; the cell count = end).").min(0)),
			field("positions", array("One index per cell: each goes before the cell now at that index.", integer("").min(0)).items(1, maxBatch)),
			versionField,
		).required("path", "cells").with(s.execFields()),
		Example: map[string]any{"path": "analysis/report.ipynb", "after_cell_id": "a1b2c3", "cells": []any{
			map[string]any{"cell_type": "markdown", "content": "## Results"},
			map[string]any{"cell_type": "code", "content": "df.describe()"},
		}},
		Forkable: true, Retryable: true,
		Doc: nbEditDoc("after_cell_id", "before_cell_id"),
		Run: handleEdit(s, editTool[insertArgs, cellsEdited]{build: s.insertEdit, finish: s.inserted, render: renderEdit[insertArgs](s)}),
	})
	s.register(&operation{
		Name:     "batch_update_notebook_cells",
		Title:    "Update cells",
		Category: "notebooks",
		Default:  true,
		Scope:    auth.ScopeWrite,
		Description: "Change cells' source, type or metadata in one transaction; sources change by minimal diff, so " +
			"collaborators' cursors stay put. Changed code cells run unless exec is false.",
		Input: object(
			pathField,
			brief("updates", array("One update per cell.", object(
				brief("cell_id", str("The cell to update (id or handle).")),
				brief("content", str("New source of the cell.")),
				brief("cell_type", cellTypeSchema().desc("New type of the cell (the cell keeps its id, source and metadata; outputs go when it stops being code).")),
				brief("metadata", freeObject("Metadata to write.")),
				field("metadata_mode", str("merge sets these keys (null removes one); replace sets them all.").enum("merge", "replace").def("merge")),
				brief("expected_source_hash", str("The cell's source hash as you read it (get_notebook with hashes: true): the update fails if the source changed since.")),
			)).items(1, maxBatch)),
			cellIDsField("The cells to update, parallel to updates (instead of a cell_id per update)."),
			startIndexField,
			endIndexField,
			versionField,
			hashesField,
			busyField,
		).required("path", "updates").with(s.execFields()),
		Example: map[string]any{"path": "analysis/report.ipynb", "updates": []any{
			map[string]any{"cell_id": "a1b2c3", "content": "df = load('data.csv')\ndf.head()"},
		}},
		Destructive: true, Idempotent: true, Forkable: true, Retryable: true,
		Doc: nbEditDoc("cell_ids", "updates[].cell_id", "expected_source_hashes{}"),
		Run: handleEdit(s, editTool[updateArgs, cellsEdited]{build: s.updateEdit, finish: s.updated, render: renderEdit[updateArgs](s)}),
	})
	s.register(&operation{
		Name:        "batch_delete_notebook_cells",
		Title:       "Delete cells",
		Category:    "notebooks",
		Default:     true,
		Scope:       auth.ScopeWrite,
		Description: "Delete cells, by cell_ids or an index range, in one transaction.",
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
		Destructive: true, Forkable: true, Retryable: true,
		Doc: nbEditDoc("cell_ids", "expected_source_hashes{}"),
		Run: handleEdit(s, editTool[deleteArgs, cellsEdited]{build: s.deleteEdit, finish: s.deleted, render: renderEdit[deleteArgs](s)}),
	})
	s.register(&operation{
		Name:        "move_notebook_cells",
		Title:       "Move cells",
		Category:    "notebooks",
		Default:     true,
		Scope:       auth.ScopeWrite,
		Description: "Move cells, keeping their ids and outputs, to to_index or after or before a cell.",
		Input: object(
			pathField,
			cellIDsField("The cells to move, in the order they should end up."),
			brief("to_index", integer("Index in the resulting notebook of the first moved cell.").min(0)),
			brief("after_cell_id", str("Put the cells right after this cell (instead of to_index).")),
			brief("before_cell_id", str("Put the cells right before this cell (instead of to_index).")),
			versionField,
			busyField,
		).required("path", "cell_ids"),
		Example:    map[string]any{"path": "analysis/report.ipynb", "cell_ids": []any{"d4e5f6"}, "to_index": 0},
		Idempotent: true, Forkable: true, Retryable: true,
		Doc: nbEditDoc("cell_ids", "after_cell_id", "before_cell_id"),
		Run: handleEdit(s, editTool[moveArgs, cellsEdited]{build: s.moveEdit, finish: s.moved, render: renderEdit[moveArgs](s)}),
	})
	s.register(&operation{
		Name:        "clear_outputs",
		Title:       "Clear outputs",
		Category:    "notebooks",
		Default:     true,
		Scope:       auth.ScopeWrite,
		Description: "Clear the outputs and execution counts of the given code cells, or of the whole notebook when cell_ids is omitted, in one transaction.",
		Input: object(
			pathField,
			cellIDsField("The cells to clear (default: every cell)."),
			versionField,
			busyField,
		).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "cell_ids": []any{"a1b2c3"}},
		Destructive: true, Idempotent: true, Forkable: true, Retryable: true,
		Doc: nbEditDoc("cell_ids"),
		Run: handleEdit(s, editTool[clearArgs, cellsEdited]{build: s.clearEdit, finish: s.cleared, render: renderEdit[clearArgs](s)}),
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
// with the arguments cells.
func nbEditDoc(cells ...string) docRef {
	return docRef{Arg: "path", Ref: refNotebook, Open: true, Cells: cells}
}

// cellsEdited is the outcome of a notebook edit: the cells it placed, changed, deleted or moved
// (under key), and the run of the code cells it affected when asked.
type cellsEdited struct {
	path      string
	version   bridge.Version
	key       string // inserted, updated, deleted, moved, cleared
	cells     any    // []placedCell, []updatedCell, []placedCell, []movedCell, []placedCell
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

// edited starts the outcome of a notebook edit: where the agent's cursor goes, and what the
// edit warns about.
func (s *Server) edited(ctx context.Context, c *call, ed bridge.Edited, key string, cells any, avoidBusy bool) cellsEdited {
	if cur := ed.Outcome.Cursor; cur != nil {
		s.moveCursorTo(ctx, c.Room, cur.CellID, cur.Offset)
	}
	warnings := append(busyWarnings(ed.Outcome.Busy), ed.Outcome.Warnings...)
	return cellsEdited{path: c.Room.Path(), version: ed.Version, key: key, cells: cells,
		warnings: append(warnings, s.busyUnknown(ctx, c.Room, avoidBusy)...)}
}

func (s *Server) insertEdit(_ context.Context, _ *call, a insertArgs) (bridge.Proposal, error) {
	cells := make([]ydoc.Cell, len(a.Cells))
	for i, c := range a.Cells {
		id := c.ID
		if id == "" {
			id = ydoc.NewCellID() // chosen now: a replay, or a repeat of the request, inserts the same cell
		}
		cells[i] = ydoc.Cell{ID: id, Type: c.CellType, Source: c.Content, Metadata: c.Metadata}
	}
	return bridge.Proposal{Since: a.since(), Edit: ydoc.InsertCells{Cells: cells, After: a.AfterCellID, Before: a.BeforeCellID,
		At: a.StartPosition, Positions: a.Positions, Guard: a.guard(nil)}}, nil
}

func (s *Server) inserted(ctx context.Context, c *call, a insertArgs, ed bridge.Edited) cellsEdited {
	placed := make([]placedCell, len(ed.Outcome.Cells))
	var run []string
	for k, cell := range ed.Outcome.Cells {
		placed[k] = placedCell{ID: cell.ID, Index: cell.Index}
		if cell.Type == ydoc.CellCode && k < len(a.Cells) && strings.TrimSpace(a.Cells[k].Content) != "" {
			run = append(run, cell.ID)
		}
	}
	e := s.edited(ctx, c, ed, "inserted", placed, false)
	count := ed.Outcome.Count
	e.cellCount = &count
	s.execAfterEdit(ctx, c, run, &e)
	return e
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

func (s *Server) updateEdit(ctx context.Context, c *call, a updateArgs) (bridge.Proposal, error) {
	updates := make([]ydoc.CellUpdate, len(a.Updates))
	for i, u := range a.Updates {
		updates[i] = ydoc.CellUpdate{CellID: u.CellID, Source: u.Content, Type: u.CellType, Metadata: u.Metadata,
			ReplaceMetadata: u.MetadataMode == "replace", ExpectedHash: u.ExpectedSourceHash}
	}
	return bridge.Proposal{Since: a.since(), Edit: ydoc.UpdateCells{Target: a.target(), Updates: updates,
		Guard: a.guard(s.busyCells(ctx, c.Room, a.AvoidBusyCells))}}, nil
}

func (s *Server) updated(ctx context.Context, c *call, a updateArgs, ed bridge.Edited) cellsEdited {
	cells := make([]updatedCell, len(ed.Outcome.Cells))
	var run []string
	for k, cell := range ed.Outcome.Cells {
		cells[k] = updatedCell{ID: cell.ID, Index: cell.Index, Changed: cell.Changed}
		if contains(cell.Changed, "source") || (contains(cell.Changed, "cell_type") && cell.Type == ydoc.CellCode) {
			run = append(run, cell.ID)
		}
	}
	e := s.edited(ctx, c, ed, "updated", cells, a.AvoidBusyCells)
	s.execAfterEdit(ctx, c, run, &e)
	return e
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

// --- delete ----------------------------------------------------------------------------------

type deleteArgs struct {
	targetArgs
	guardArgs
}

func (s *Server) deleteEdit(ctx context.Context, c *call, a deleteArgs) (bridge.Proposal, error) {
	return bridge.Proposal{Since: a.since(), Edit: ydoc.DeleteCells{Target: a.target(), Guard: a.guard(s.busyCells(ctx, c.Room, a.AvoidBusyCells))}}, nil
}

func (s *Server) deleted(ctx context.Context, c *call, a deleteArgs, ed bridge.Edited) cellsEdited {
	e := s.edited(ctx, c, ed, "deleted", placedCells(ed.Outcome.Cells), a.AvoidBusyCells)
	count := ed.Outcome.Count
	e.cellCount = &count
	return e
}

func placedCells(cells []ydoc.CellOutcome) []placedCell {
	out := make([]placedCell, len(cells))
	for k, cell := range cells {
		out[k] = placedCell{ID: cell.ID, Index: cell.Index}
	}
	return out
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

func (s *Server) moveEdit(ctx context.Context, c *call, a moveArgs) (bridge.Proposal, error) {
	return bridge.Proposal{Since: a.since(), Edit: ydoc.MoveCells{IDs: a.CellIDs, To: a.ToIndex, After: a.AfterCellID,
		Before: a.BeforeCellID, Guard: a.guard(s.busyCells(ctx, c.Room, a.AvoidBusyCells))}}, nil
}

func (s *Server) moved(ctx context.Context, c *call, a moveArgs, ed bridge.Edited) cellsEdited {
	cells := make([]movedCell, len(ed.Outcome.Cells))
	for k, cell := range ed.Outcome.Cells {
		cells[k] = movedCell{ID: cell.ID, From: cell.From, To: cell.Index}
	}
	return s.edited(ctx, c, ed, "moved", cells, a.AvoidBusyCells)
}

// --- clear outputs ---------------------------------------------------------------------------

type clearArgs struct {
	CellIDs []string `json:"cell_ids"`
	guardArgs
}

func (s *Server) clearEdit(ctx context.Context, c *call, a clearArgs) (bridge.Proposal, error) {
	return bridge.Proposal{Since: a.since(), Edit: ydoc.ClearOutputs{IDs: a.CellIDs, Guard: a.guard(s.busyCells(ctx, c.Room, a.AvoidBusyCells))}}, nil
}

// cleared lists the cells that had something to clear.
func (s *Server) cleared(ctx context.Context, c *call, a clearArgs, ed bridge.Edited) cellsEdited {
	cells := []placedCell{}
	for _, cell := range ed.Outcome.Cells {
		if len(cell.Changed) > 0 {
			cells = append(cells, placedCell{ID: cell.ID, Index: cell.Index})
		}
	}
	e := s.edited(ctx, c, ed, "cleared", cells, a.AvoidBusyCells)
	count := ed.Outcome.Count
	e.cellCount = &count
	return e
}
