package ydoc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Edits as values. An Edit says what to change — insert these cells there, update those, delete,
// move, clear outputs, replace text ranges, restore a version, undo — together with its guards
// (source hashes the caller read, cells collaborators are typing in, the anchors it names) and
// its rules for running again. The Replica runs it inside one transaction and reports what it
// did as an Outcome: a fresh value handed to whoever waits for the edit, never written into the
// caller's memory. After a reset (a new server session, a conflict, a server that lost the room)
// the Replica runs unconfirmed edits, and confirmed ones not yet saved, again on the fresh
// replica; the edit then follows its replay rules, which live here with it:
//
//   - guards are not checked again: they held when the caller was answered (or they refused it);
//   - what is already there is done: cells inserted by id that are present are not inserted
//     again, cells to delete that are gone count as deleted, content set again changes nothing;
//   - what cannot be found any more is left out and said in the outcome's Warnings: cells to
//     update, move or clear that are gone; an anchor that is gone puts inserted cells at the end
//     and leaves moved cells where they are; an index past the end becomes the end;
//   - cells addressed by index are addressed by the ids the first run resolved (the earlier
//     outcome), so a replay never touches other cells than the first run did;
//   - text operations (positions in the text) run again only on the text they were planned on;
//     if the text is already the result, nothing runs; otherwise the replay fails, changing
//     nothing, rather than put text at positions that now mean something else.
//
// An edit value is read, never changed, by the Replica: the same value may run several times.
// The one escape hatch is EditFunc (and DurableFunc): a function over the transaction, for writes
// that are not an agent's edits (execution's outputs and run markers, tests). Such a function may
// run again after the caller returned, so it must not write memory its caller reads.
type Edit interface {
	// Durable reports whether the edit is safe to run again over a document that already holds
	// it (a second run changes nothing more). Durable edits are kept after the server confirmed
	// them until the server saved them, and run again if it lost them (Replica.unsaved).
	Durable() bool
	// run applies the edit in tx and returns what it did. It validates before it changes
	// anything: an error with nothing changed is a refusal.
	run(tx *Txn, r editRun) (Outcome, error)
}

// editRun is how an edit runs this time.
type editRun struct {
	replay bool     // a re-run: guards are skipped, replay rules apply
	prev   *Outcome // the outcome of the previous run, when there was one
	since  *Since   // the version guard (first run only)
}

// beginEdit opens an agent's edit: it refuses a document of another kind than the edit's
// (ErrWrongKind), and marks the transaction undoable.
func (tx *Txn) beginEdit(kind Kind) error {
	if tx.Kind() != kind {
		return ErrWrongKind
	}
	tx.Undoable()
	return nil
}

// Proposal is an edit handed to a Replica.
type Proposal struct {
	Edit Edit
	// Since is what changed after the version the caller read (the room's history knows it;
	// bridge builds it). The edit refuses, changing nothing, when what it touches is in it. It is
	// checked on the first run only.
	Since *Since
	// Replay: the edit may already be in the document — the same request made again after the
	// room that ran it first was lost before confirming it. It runs by its replay rules, from
	// Prev (that run's outcome) when known.
	Replay bool
	Prev   *Outcome
}

// Outcome is what an edit did. Each run produces a fresh one; the Replica hands out copies.
type Outcome struct {
	// Cells are the cells the edit placed, changed, deleted, moved or cleared, in the order the
	// edit names them.
	Cells []CellOutcome
	// Count is the number of cells after the edit (notebook edits).
	Count int
	// Length is a text document's length in code points after the edit (text edits).
	Length int
	// Cursor is where the agent's cursor goes after the edit (nil: it stays).
	Cursor *Cursor
	// Busy are the cells the edit touched that collaborators are typing in (Guard.Busy).
	Busy []BusyCell
	// Warnings say what the edit left out and why (cells gone before a replay, cells without
	// outputs asked to be cleared).
	Warnings []string
	// Replayed: this outcome is from a run after a reset, not from the first run.
	Replayed bool
	// Restored is what a Restore changed.
	Restored *Restored
	// Steps is how many of the agent's recorded edits an Undo took off its stack (steps whose
	// changes others had removed included: they are skipped).
	Steps int

	// text edits: the hash of the text the operations were planned on, and of the result.
	textBefore, textAfter string
}

// CellOutcome is one cell an edit touched.
type CellOutcome struct {
	ID    string
	Index int // its index after the edit; for deletions, before it
	From  int // moves: its index before the move
	// Changed lists what changed: source, cell_type, metadata (updates); outputs,
	// execution_count, metadata (clears). Empty when the cell already was as asked.
	Changed []string
	Type    string // the cell's type after the edit
}

// Cursor is a position for the agent's cursor: a cell's source (notebooks) or the text, in
// UTF-16 units as Yjs counts them.
type Cursor struct {
	CellID string
	Offset int
}

// BusyCell is a cell someone is typing in, with their names.
type BusyCell struct {
	ID    string
	Names []string
}

// Restored is what a Restore changed.
type Restored struct {
	Summary  string
	Notebook *NotebookDiff
	Text     *TextDiff
}

func (o Outcome) clone() Outcome {
	c := o
	c.Cells = slices.Clone(o.Cells)
	for i := range c.Cells {
		c.Cells[i].Changed = slices.Clone(c.Cells[i].Changed)
	}
	if o.Cursor != nil {
		cur := *o.Cursor
		c.Cursor = &cur
	}
	c.Busy = slices.Clone(o.Busy)
	for i := range c.Busy {
		c.Busy[i].Names = slices.Clone(c.Busy[i].Names)
	}
	c.Warnings = slices.Clone(o.Warnings)
	if o.Restored != nil {
		r := *o.Restored
		c.Restored = &r
	}
	return c
}

// ids are the ids of the cells an outcome names, in order.
func (o *Outcome) ids() []string {
	if o == nil {
		return nil
	}
	ids := make([]string, len(o.Cells))
	for i, c := range o.Cells {
		ids[i] = c.ID
	}
	return ids
}

// Guard is what an edit checks before it changes anything, on its first run.
type Guard struct {
	// Hashes maps cell ids to the SourceHash of their source as the caller read it: the edit is
	// refused when one differs (or the cell is gone).
	Hashes map[string]string
	// Busy maps the cells collaborators are typing in to their names, as the caller sees the
	// room's awareness. Touched busy cells are listed in the outcome, or refuse the edit with
	// AvoidBusy.
	Busy      map[string][]string
	AvoidBusy bool
}

// Since is what changed in a document after a version a caller read: the room's history tells
// (bridge builds it), and an edit checks the cells it touches against it on its first run.
type Since struct {
	Version   string
	Cells     map[string]CellSince // cells changed after Version
	Structure bool                 // cells were inserted, deleted or moved after Version
	Text      bool                 // a text document's text changed after Version
}

// CellSince is what changed in one cell after a version, and by whom.
type CellSince struct {
	Fields []string // source, metadata, outputs, …, inserted, deleted
	By     []string
}

// Note records a change of a cell (for builders of a Since).
func (s *Since) Note(id, field string, by []string) {
	if s.Cells == nil {
		s.Cells = map[string]CellSince{}
	}
	c := s.Cells[id]
	if !slices.Contains(c.Fields, field) {
		c.Fields = append(c.Fields, field)
	}
	for _, a := range by {
		if !slices.Contains(c.By, a) {
			c.By = append(c.By, a)
		}
	}
	s.Cells[id] = c
}

// SourceHash is the short hash of a cell's source that reads show and guards compare
// (expected_source_hash): the first hex digits of its SHA-256. Not jupyter-server-documents'
// run hash (jupyter.RunHash).
func SourceHash(src string) string {
	sum := sha256.Sum256([]byte(src))
	return hex.EncodeToString(sum[:6])
}

func textHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// --- refusals ----------------------------------------------------------------------------------

// InvalidError refuses an edit whose arguments do not fit the document (or each other); nothing
// changed. Field names the edit's field the way the tools' arguments do (snake case, with
// indices), e.g. ["positions", 2].
type InvalidError struct {
	Field []any
	Msg   string
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	for i, p := range e.Field {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, p)
		}
	}
	return b.String() + ": " + e.Msg
}

func invalidf(field []any, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ConflictError refuses an edit because what it touches changed since the caller read it;
// nothing changed.
type ConflictError struct {
	Version   string     // the version the caller read ("" when only source hashes were given)
	Conflicts []Conflict // the cells that changed
	// Structure: cells were inserted, deleted or moved since Version and the edit addresses
	// cells by index (which may now point at other cells).
	Structure bool
	// Text: a text document changed since Version (positions may have moved).
	Text bool
}

func (e *ConflictError) Error() string {
	switch {
	case e.Text:
		return fmt.Sprintf("conflict: the text changed since version %s", e.Version)
	case e.Structure:
		return fmt.Sprintf("conflict: cells were inserted, deleted or moved since version %s", e.Version)
	}
	ids := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		ids[i] = c.CellID
	}
	return "conflict: " + strings.Join(ids, ", ") + " changed"
}

// Conflict is a cell that changed since the caller read it.
type Conflict struct {
	CellID  string
	Index   *int // nil when the cell is gone
	Changed []string
	By      []string
}

// BusyError refuses an edit (Guard.AvoidBusy) that touches cells collaborators are typing in.
type BusyError struct{ Cells []BusyCell }

func (e *BusyError) Error() string {
	ids := make([]string, len(e.Cells))
	for i, c := range e.Cells {
		ids[i] = c.ID
	}
	return "busy: collaborators are editing " + strings.Join(ids, ", ")
}

// check refuses the edit when the cells it touches (targets) changed since the caller's version
// or their sources differ from the hashes the caller expects. byIndex: the edit addresses cells
// by index, which cells inserted, deleted or moved since make unsafe.
func (g Guard) check(tx *Txn, since *Since, targets []string, byIndex bool) error {
	var conflicts []Conflict
	indexOf := func(id string) *int {
		if i := tx.CellIndex(id); i >= 0 {
			return &i
		}
		return nil
	}
	if since != nil {
		for _, id := range targets {
			if c, ok := since.Cells[id]; ok {
				conflicts = append(conflicts, Conflict{CellID: id, Index: indexOf(id), Changed: slices.Clone(c.Fields), By: slices.Clone(c.By)})
			}
		}
		if byIndex && since.Structure && len(conflicts) == 0 {
			return &ConflictError{Version: since.Version, Structure: true}
		}
	}
	ids := make([]string, 0, len(g.Hashes))
	for id := range g.Hashes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		i := indexOf(id)
		if i == nil {
			conflicts = append(conflicts, Conflict{CellID: id, Changed: []string{"deleted"}})
			continue
		}
		c, err := tx.Cell(*i)
		if err != nil {
			return err
		}
		if SourceHash(c.Source) != g.Hashes[id] {
			conflicts = append(conflicts, Conflict{CellID: id, Index: i, Changed: []string{"source"}})
		}
	}
	if len(conflicts) == 0 {
		return nil
	}
	v := ""
	if since != nil {
		v = since.Version
	}
	return &ConflictError{Version: v, Conflicts: conflicts}
}

// busy lists the touched cells collaborators are typing in, or refuses with AvoidBusy.
func (g Guard) busy(ids []string) ([]BusyCell, error) {
	var out []BusyCell
	for _, id := range ids {
		if names := g.Busy[id]; len(names) > 0 {
			out = append(out, BusyCell{ID: id, Names: slices.Clone(names)})
		}
	}
	if g.AvoidBusy && len(out) > 0 {
		return nil, &BusyError{Cells: out}
	}
	return out, nil
}

// --- the escape hatch --------------------------------------------------------------------------

// EditFunc is an edit written as a function over the transaction: replaying is true when it runs
// again on a fresh replica after a reset. It is the escape hatch for writes that are not values
// (execution's outputs and run markers, tests); it is not durable. A panic in it is returned as
// an error. It may run again after its caller returned: it must not write memory the caller
// reads.
type EditFunc func(tx *Txn, replaying bool) error

// Durable: a function is not known to be safe to run twice.
func (f EditFunc) Durable() bool { return false }

func (f EditFunc) run(tx *Txn, r editRun) (o Outcome, err error) {
	return Outcome{}, callEditFunc(f, tx, r.replay)
}

// DurableFunc is EditFunc for functions that are safe to run twice (running it over a document
// that holds its change changes nothing more).
type DurableFunc func(tx *Txn, replaying bool) error

// Durable: yes, by the function's promise.
func (f DurableFunc) Durable() bool { return true }

func (f DurableFunc) run(tx *Txn, r editRun) (Outcome, error) {
	return Outcome{}, callEditFunc(f, tx, r.replay)
}

// callEditFunc runs a caller's function: its panic is its bug, not y-crdt's, so it is
// returned as an error instead of marking the replica broken.
func callEditFunc(f func(*Txn, bool) error, tx *Txn, replaying bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ydoc: edit function panicked: %v", p)
		}
	}()
	return f(tx, replaying)
}
