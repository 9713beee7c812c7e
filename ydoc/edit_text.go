package ydoc

import (
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"
)

// Text edits, restores and undo as values.

// EditText replaces ranges of a text document in one transaction. Positions are code points of
// the text before the edit; operations must touch disjoint ranges (insertions at one position
// keep the order given).
type EditText struct {
	Ops []TextOp
}

// TextOp replaces Len code points at Pos with Insert. Pos -1 is the end (then Len must be 0).
type TextOp struct {
	Pos    int
	Len    int
	Insert string
}

// ErrTextMoved refuses to run a text edit again on a text that is neither the one it was planned
// on nor its result: its positions would mean something else.
var ErrTextMoved = errors.New("ydoc: the text changed before the edit could run again, so its positions no longer fit; it was not re-applied")

// Durable: no — positions are only meaningful in the text they were planned on (a replay checks
// that, see the package rules), and the crash rescue brings text back by words.
func (e EditText) Durable() bool { return false }

func (e EditText) run(tx *Txn, r editRun) (Outcome, error) {
	if err := tx.beginEdit(KindText); err != nil {
		return Outcome{}, err
	}
	text, err := tx.Text()
	if err != nil {
		return Outcome{}, err
	}
	if r.replay && r.prev != nil && r.prev.textBefore != "" {
		switch h := textHash(text); h {
		case r.prev.textBefore:
		case r.prev.textAfter: // already there
			o := r.prev.clone()
			return o, nil
		default:
			return Outcome{}, ErrTextMoved
		}
	}
	if !r.replay && r.since != nil && r.since.Text {
		return Outcome{}, &ConflictError{Version: r.since.Version, Text: true}
	}
	plan, err := planText(text, e.Ops)
	if err != nil {
		return Outcome{}, err
	}
	for _, sp := range plan {
		from, err := CodePointsToUTF16(text, sp.start)
		if err != nil {
			return Outcome{}, err
		}
		to, err := CodePointsToUTF16(text, sp.end)
		if err != nil {
			return Outcome{}, err
		}
		if err := tx.DeleteText(from, to-from); err != nil {
			return Outcome{}, err
		}
		if err := tx.InsertText(from, sp.ins); err != nil {
			return Outcome{}, err
		}
	}
	after, _ := tx.Text()
	out := Outcome{Length: utf8.RuneCountInString(after), textBefore: textHash(text), textAfter: textHash(after)}
	if len(plan) > 0 {
		cur, _ := CodePointsToUTF16(after, min(cursorAfter(plan, lastStart(text, e.Ops)), out.Length))
		out.Cursor = &Cursor{Offset: cur}
	}
	return out, nil
}

// lastStart is where the last operation given starts (code points of text).
func lastStart(text string, ops []TextOp) int {
	if len(ops) == 0 {
		return 0
	}
	op := ops[len(ops)-1]
	if op.Pos < 0 {
		return utf8.RuneCountInString(text)
	}
	return op.Pos
}

// span is one operation as a replacement of [start, end) code points by ins.
type span struct {
	index      int
	start, end int
	ins        string
}

// planText validates operations against the text (code points) and orders them for applying
// from the end. It changes nothing.
func planText(text string, ops []TextOp) ([]span, error) {
	n := utf8.RuneCountInString(text)
	spans := make([]span, len(ops))
	for i, op := range ops {
		pos := op.Pos
		if pos < -1 {
			return nil, invalidf([]any{"operations", i, "position"}, "is %d (valid 0..%d, or -1 for the end)", pos, n)
		}
		if op.Len < 0 {
			return nil, invalidf([]any{"operations", i, "length"}, "is %d, below 0", op.Len)
		}
		if pos == -1 {
			if op.Len != 0 {
				return nil, invalidf([]any{"operations", i, "length"}, "must be 0 when position is -1 (append)")
			}
			pos = n
		}
		if pos > n {
			return nil, invalidf([]any{"operations", i, "position"}, "is %d but the text has %d code points (valid 0..%d, or -1 for the end)", pos, n, n)
		}
		if pos+op.Len > n {
			return nil, invalidf([]any{"operations", i, "length"}, "runs to %d, past the end of the text (%d code points)", pos+op.Len, n)
		}
		spans[i] = span{index: i, start: pos, end: pos + op.Len, ins: op.Insert}
	}
	// Pairwise: ranges may not intersect, and an insertion may not fall strictly inside a range.
	// (At most a few hundred operations, so quadratic is fine and obviously right.)
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			if a, b := spans[i], spans[j]; spansOverlap(a, b) {
				return nil, invalidf([]any{"operations", b.index}, "overlaps operation %d (code points %d..%d and %d..%d); operations must touch disjoint ranges", a.index, a.start, a.end, b.start, b.end)
			}
		}
	}
	// Operations at the same position merge into one replacement whose text is their texts in
	// the order given (there is at most one non-empty range per position); then apply from the
	// end, so earlier positions stay valid.
	byStart := map[int]*span{}
	for _, sp := range spans {
		if g, ok := byStart[sp.start]; ok {
			g.end = max(g.end, sp.end)
			g.ins += sp.ins
			continue
		}
		c := sp
		byStart[sp.start] = &c
	}
	merged := make([]span, 0, len(byStart))
	for _, g := range byStart {
		merged = append(merged, *g)
	}
	sort.Slice(merged, func(a, b int) bool { return merged[a].start > merged[b].start })
	return merged, nil
}

func spansOverlap(a, b span) bool {
	switch {
	case a.start == a.end && b.start == b.end:
		return false
	case a.start == a.end:
		return b.start < a.start && a.start < b.end
	case b.start == b.end:
		return a.start < b.start && b.start < a.end
	}
	return a.start < b.end && b.start < a.end
}

// cursorAfter is where, in the new text, the last operation given ends (code points): its span
// (operations at one position were merged into one), shifted by the spans before it.
func cursorAfter(plan []span, lastStart int) int {
	last := plan[0]
	for _, sp := range plan {
		if sp.start == lastStart {
			last = sp
		}
	}
	shift := 0
	for _, sp := range plan {
		if sp.start < last.start {
			shift += utf8.RuneCountInString(sp.ins) - (sp.end - sp.start)
		}
	}
	return last.start + shift + utf8.RuneCountInString(last.ins)
}

// Restore brings a document back to a version: a notebook (Notebook, for notebook rooms) or a
// text (Text), applied as minimal changes by cell id (RestoreNotebook, RestoreText). The outcome
// says what it changed.
type Restore struct {
	Notebook Notebook
	Text     string
}

// Durable: no — a restore is made against the document as it is now.
func (e Restore) Durable() bool { return false }

func (e Restore) run(tx *Txn, _ editRun) (Outcome, error) {
	tx.Undoable()
	if tx.Kind() == KindText {
		cur, err := tx.Text()
		if err != nil {
			return Outcome{}, err
		}
		d := DiffText(cur, e.Text)
		out := Outcome{Restored: &Restored{Summary: fmt.Sprintf("+%d −%d lines", d.Added, d.Removed), Text: &d}}
		return out, tx.RestoreText(e.Text)
	}
	cur, err := tx.Notebook()
	if err != nil {
		return Outcome{}, err
	}
	d := DiffNotebooks(cur, e.Notebook)
	out := Outcome{Restored: &Restored{Summary: d.Summary(), Notebook: &d}}
	if _, err := tx.RestoreNotebook(e.Notebook); err != nil {
		return Outcome{}, err
	}
	out.Count = tx.NumCells()
	return out, nil
}

// Undo reverts the agent's last Steps undoable edits (at least one; fewer when fewer are left),
// leaving everyone else's edits alone. The undo is itself a forward edit, so collaborators see it
// as one. The undo stack belongs to the replica it was recorded on: after a reset (a fresh
// replica) earlier edits can no longer be undone, and an undo is never run again (ErrNotReplayed):
// on a fresh replica its stack holds other steps, if any, and undoing them would take back
// something the caller did not ask for.
type Undo struct{ Steps int }

// ErrNotReplayed refuses to run an Undo or a Redo again after a reset: whether it reached the
// server is unknown, and the fresh replica's stack is not the one it was asked of.
var ErrNotReplayed = errors.New("ydoc: an undo or redo is not run again after a reset")

// Durable: no — the undo stack belongs to the replica it was recorded on.
func (e Undo) Durable() bool { return false }

func (e Undo) run(tx *Txn, r editRun) (Outcome, error) {
	if r.replay {
		return Outcome{}, ErrNotReplayed
	}
	before := len(tx.d.undo.undo)
	taken := func() Outcome { return Outcome{Steps: before - len(tx.d.undo.undo)} }
	for i := 0; i < max(e.Steps, 1); i++ {
		if err := tx.Undo(); err != nil {
			if i > 0 && errors.Is(err, ErrNothingToUndo) {
				return taken(), nil // undid what there was
			}
			return taken(), err
		}
	}
	return taken(), nil
}

// Redo re-applies what the last Undo reverted (never again after a reset: see Undo).
type Redo struct{}

// Durable: no (see Undo).
func (e Redo) Durable() bool { return false }

func (e Redo) run(tx *Txn, r editRun) (Outcome, error) {
	if r.replay {
		return Outcome{}, ErrNotReplayed
	}
	return Outcome{}, tx.Redo()
}
