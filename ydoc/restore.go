package ydoc

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	y "github.com/skyterra/y-crdt"
)

// Restoring a document to a snapshot (a checkpoint, the file on disk, an earlier copy) as one
// forward edit. Replacing everything would delete every cell and re-create it: collaborators
// would lose their cursors, selections and scroll positions, and the update would be as large as
// the notebook. RestoreNotebook instead keeps every cell whose id survives and changes only
// what differs.

// RestoreStats counts what RestoreNotebook did.
type RestoreStats struct {
	Inserted int  `json:"inserted,omitempty"` // cells created
	Deleted  int  `json:"deleted,omitempty"`  // cells removed
	Moved    int  `json:"moved,omitempty"`    // kept cells moved (re-created in place, as moves are)
	Changed  int  `json:"changed,omitempty"`  // kept cells with at least one field rewritten
	Metadata bool `json:"metadata,omitempty"` // notebook metadata or nbformat version rewritten
}

// Empty reports whether the restore changed nothing.
func (s RestoreStats) Empty() bool { return s == RestoreStats{} }

// ErrInvalidTarget is wrapped by RestoreNotebook and RestoreText errors about the target.
var ErrInvalidTarget = errors.New("ydoc: invalid restore target")

// RestoreNotebook transforms the notebook into target inside the caller's transaction:
//
//   - cells are matched by id; live cells whose id is not in target (and live cells with empty
//     or repeated ids) are deleted;
//   - kept cells are moved into target order with as few moves as possible (the longest run
//     already in target order stays put); like every move, a moved cell is re-created under
//     its id with its content;
//   - target cells that are missing are inserted at their positions with all their fields;
//   - of kept cells only what differs is rewritten: source with a minimal text diff, cell type
//     (which re-creates the cell, as SetCellType does), metadata key by key, outputs (common
//     leading and trailing outputs kept), execution_count, attachments;
//   - notebook metadata is rewritten key by key when it differs, nbformat when it differs or is
//     missing (a target with nbformat 0 leaves the version alone).
//
// execution_state is runtime state, not part of a snapshot: it is left alone on kept cells and
// inserted cells start idle. Outputs and execution counts of non-code cells and attachments of
// code cells are ignored, as the notebook model has no place for them. An empty target cell
// list yields an empty notebook.
//
// The whole target is validated before anything changes (ids non-empty and unique, known cell
// types, valid UTF-8 sources, JSON-representable metadata, outputs and attachments): an invalid
// target returns an error wrapping ErrInvalidTarget and leaves the document untouched.
func (tx *Txn) RestoreNotebook(target Notebook) (RestoreStats, error) {
	var st RestoreStats
	if tx.d.kind != KindNotebook {
		return st, fmt.Errorf("restore notebook: %w", ErrWrongKind)
	}
	want, err := canonicalNotebook(target)
	if err != nil {
		return st, fmt.Errorf("restore notebook: %w: %w", ErrInvalidTarget, err)
	}
	if err := tx.restoreNotebook(want, &st); err != nil {
		return st, fmt.Errorf("restore notebook: %w", err)
	}
	return st, nil
}

// RestoreText replaces a text document's content with target using a minimal diff, so that
// collaborators' cursors in unchanged parts stay where they are.
func (tx *Txn) RestoreText(target string) error {
	if tx.d.kind != KindText {
		return fmt.Errorf("restore text: %w", ErrWrongKind)
	}
	if !utf8.ValidString(target) {
		return fmt.Errorf("restore text: %w: not valid UTF-8", ErrInvalidTarget)
	}
	if err := tx.SetText(target); err != nil {
		return fmt.Errorf("restore text: %w", err)
	}
	return nil
}

// canonicalNotebook validates target and returns a copy in the form readNotebook would return
// after it was written: values round-tripped through the CRDT value conversion, stream text
// joined, fields the model does not keep dropped, nil maps and output lists made empty.
func canonicalNotebook(target Notebook) (Notebook, error) {
	out := Notebook{NBFormat: target.NBFormat, NBFormatMinor: target.NBFormatMinor}
	if target.NBFormat != 0 && target.NBFormat != 4 {
		return out, fmt.Errorf("nbformat %d is not supported (need 4)", target.NBFormat)
	}
	if target.NBFormat == 0 && target.NBFormatMinor != 0 {
		return out, fmt.Errorf("nbformat_minor %d without nbformat", target.NBFormatMinor)
	}
	if target.NBFormatMinor < 0 {
		return out, fmt.Errorf("nbformat_minor %d is negative", target.NBFormatMinor)
	}
	md, err := canonicalMap(target.Metadata)
	if err != nil {
		return out, fmt.Errorf("notebook metadata: %w", err)
	}
	out.Metadata = md
	seen := make(map[string]int, len(target.Cells))
	out.Cells = make([]Cell, len(target.Cells))
	for i, c := range target.Cells {
		cc, err := canonicalCell(c)
		if err != nil {
			return out, fmt.Errorf("cell %d (id %q): %w", i, c.ID, err)
		}
		if j, dup := seen[c.ID]; dup {
			return out, fmt.Errorf("cell %d: id %q is also the id of cell %d", i, c.ID, j)
		}
		seen[c.ID] = i
		out.Cells[i] = cc
	}
	return out, nil
}

func canonicalCell(c Cell) (Cell, error) {
	out := Cell{ID: c.ID, Type: c.Type, Source: c.Source}
	if c.ID == "" {
		return out, errors.New("empty cell id")
	}
	if !ValidCellType(c.Type) {
		return out, fmt.Errorf("cell type %q: must be code, markdown or raw", c.Type)
	}
	if !utf8.ValidString(c.Source) {
		return out, errors.New("source is not valid UTF-8")
	}
	md, err := canonicalMap(c.Metadata)
	if err != nil {
		return out, fmt.Errorf("metadata: %w", err)
	}
	out.Metadata = md
	if c.Type == CellCode {
		if c.ExecutionCount != nil {
			n := *c.ExecutionCount
			out.ExecutionCount = &n
		}
		out.Outputs = make([]map[string]any, 0, len(c.Outputs))
		for j, o := range c.Outputs {
			co, err := canonicalOutput(o)
			if err != nil {
				return out, fmt.Errorf("output %d: %w", j, err)
			}
			out.Outputs = append(out.Outputs, co)
		}
		return out, nil
	}
	if len(c.Attachments) > 0 {
		a, err := canonicalMap(c.Attachments)
		if err != nil {
			return out, fmt.Errorf("attachments: %w", err)
		}
		out.Attachments = a
	}
	return out, nil
}

// canonicalMap round-trips a JSON object through the CRDT value conversion (nil becomes empty).
func canonicalMap(m map[string]any) (map[string]any, error) {
	if m == nil {
		return map[string]any{}, nil
	}
	v, err := toAny(m)
	if err != nil {
		return nil, err
	}
	out, _ := fromAny(v).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// canonicalOutput is what reading back an output written by insertOutputs gives.
func canonicalOutput(o map[string]any) (map[string]any, error) {
	out, err := canonicalMap(o)
	if err != nil {
		return nil, err
	}
	if t, ok := o["text"]; ok && o["output_type"] == "stream" {
		s := joinText(t)
		if !utf8.ValidString(s) {
			return nil, errors.New("stream text is not valid UTF-8")
		}
		out["text"] = s
	}
	return out, nil
}

// restoreNotebook applies a canonical, validated target. Only y-crdt failures can make the
// Txn methods it calls fail now.
func (tx *Txn) restoreNotebook(want Notebook, st *RestoreStats) error {
	targetIdx := make(map[string]int, len(want.Cells))
	for i, c := range want.Cells {
		targetIdx[c.ID] = i
	}

	// 1. Delete live cells that are not in the target (and repeated or empty ids).
	liveIDs := tx.CellIDs()
	keep := make([]bool, len(liveIDs))
	seen := make(map[string]bool, len(liveIDs))
	for i, id := range liveIDs {
		if _, ok := targetIdx[id]; ok && !seen[id] {
			keep[i] = true
			seen[id] = true
		}
	}
	for end := len(liveIDs); end > 0; {
		if keep[end-1] {
			end--
			continue
		}
		start := end - 1
		for start > 0 && !keep[start-1] {
			start--
		}
		if err := tx.DeleteCells(start, end-start); err != nil {
			return fmt.Errorf("delete cells %d..%d: %w", start, end-1, err)
		}
		st.Deleted += end - start
		end = start
	}

	// 2. Move kept cells into target order, keeping a longest increasing run in place.
	var cur []string // kept ids, in document order
	for i, id := range liveIDs {
		if keep[i] {
			cur = append(cur, id)
		}
	}
	var order []string // kept ids, in target order
	for _, c := range want.Cells {
		if seen[c.ID] {
			order = append(order, c.ID)
		}
	}
	moved, err := tx.restoreOrder(cur, order)
	if err != nil {
		return err
	}
	st.Moved = moved

	// 3. Insert missing cells; the kept cells are now in target order, so each run of missing
	// cells goes at its target index.
	for j := 0; j < len(want.Cells); {
		if seen[want.Cells[j].ID] {
			j++
			continue
		}
		k := j
		for k < len(want.Cells) && !seen[want.Cells[k].ID] {
			k++
		}
		run := slices.Clone(want.Cells[j:k])
		if err := tx.InsertCells(j, run); err != nil {
			return fmt.Errorf("insert cells at %d: %w", j, err)
		}
		st.Inserted += k - j
		j = k
	}

	// 4. Rewrite the fields of kept cells that differ.
	for j, c := range want.Cells {
		if !seen[c.ID] {
			continue
		}
		changed, err := tx.restoreCell(j, c)
		if err != nil {
			return fmt.Errorf("cell %d (id %q): %w", j, c.ID, err)
		}
		if changed {
			st.Changed++
		}
	}

	// 5. Notebook metadata and version.
	live := tx.d.readNotebookHeader()
	if !jsonEqual(live.Metadata, want.Metadata) {
		if err := tx.SetNotebookMetadata(want.Metadata); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		st.Metadata = true
	}
	_, hasMajor := mapGet(tx.d.meta, "nbformat")
	_, hasMinor := mapGet(tx.d.meta, "nbformat_minor")
	if want.NBFormat != 0 && (live.NBFormat != want.NBFormat || live.NBFormatMinor != want.NBFormatMinor || !hasMajor || !hasMinor) {
		if err := setMapAny(tx.tr, tx.d.meta, "nbformat", want.NBFormat); err != nil {
			return err
		}
		if err := setMapAny(tx.tr, tx.d.meta, "nbformat_minor", want.NBFormatMinor); err != nil {
			return err
		}
		if err := tx.markDirty(); err != nil {
			return err
		}
		st.Metadata = true
	}
	return nil
}

// restoreOrder reorders the document, whose cells are exactly cur, into order (a permutation
// of cur) and returns the number of cells moved. The cells of a longest subsequence of cur
// that is already in target order stay; every other cell is moved right after its target
// predecessor, in target order, so the placed cells are always in target order among
// themselves. Runs of cells that travel together are moved as one block.
func (tx *Txn) restoreOrder(cur, order []string) (int, error) {
	rank := make(map[string]int, len(order))
	for i, id := range order {
		rank[id] = i
	}
	seq := make([]int, len(cur))
	for i, id := range cur {
		seq[i] = rank[id]
	}
	stays := make(map[string]bool, len(cur))
	mask := lisMask
	if tx.keepWeight != nil && len(seq) <= maxWeightedOrder {
		w := make([]int, len(cur))
		for i, id := range cur {
			w[i] = tx.keepWeight(id)
		}
		mask = func(seq []int) []bool { return heaviestIncreasing(seq, w) }
	}
	for i, in := range mask(seq) {
		if in {
			stays[cur[i]] = true
		}
	}
	cur = slices.Clone(cur)
	moved := 0
	for k := 0; k < len(order); {
		if stays[order[k]] {
			k++
			continue
		}
		from := slices.Index(cur, order[k])
		count := 1
		for k+count < len(order) && !stays[order[k+count]] &&
			from+count < len(cur) && cur[from+count] == order[k+count] {
			count++
		}
		to := 0
		if k > 0 {
			q := slices.Index(cur, order[k-1])
			if from > q {
				to = q + 1
			} else {
				to = q - count + 1
			}
		}
		if to != from {
			if err := tx.MoveCells(from, count, to); err != nil {
				return moved, fmt.Errorf("move %d cells from %d to %d: %w", count, from, to, err)
			}
			block := slices.Clone(cur[from : from+count])
			cur = slices.Delete(cur, from, from+count)
			cur = slices.Insert(cur, to, block...)
			moved += count
		}
		k += count
	}
	if !slices.Equal(cur, order) { // cannot happen: the invariant above
		return moved, fmt.Errorf("reorder ended in %v, want %v", cur, order)
	}
	return moved, nil
}

// maxWeightedOrder bounds the cells heaviestIncreasing orders (it is quadratic).
const maxWeightedOrder = 3000

// heaviestIncreasing marks a strictly increasing subsequence of seq of the largest total weight.
func heaviestIncreasing(seq, w []int) []bool {
	best := make([]int, len(seq))
	prev := make([]int, len(seq))
	end := -1
	for i := range seq {
		best[i], prev[i] = w[i], -1
		for j := 0; j < i; j++ {
			if seq[j] < seq[i] && best[j]+w[i] > best[i] {
				best[i], prev[i] = best[j]+w[i], j
			}
		}
		if end < 0 || best[i] > best[end] {
			end = i
		}
	}
	mask := make([]bool, len(seq))
	for i := end; i >= 0; i = prev[i] {
		mask[i] = true
	}
	return mask
}

// lisMask marks one longest strictly increasing subsequence of seq.
func lisMask(seq []int) []bool {
	tails := []int{}              // tails[l]: index in seq of the smallest tail of an increasing run of length l+1
	prev := make([]int, len(seq)) // predecessor index in the run ending at i
	for i, v := range seq {
		l, _ := slices.BinarySearchFunc(tails, v, func(t, v int) int { return seq[t] - v })
		if l > 0 {
			prev[i] = tails[l-1]
		} else {
			prev[i] = -1
		}
		if l == len(tails) {
			tails = append(tails, i)
		} else {
			tails[l] = i
		}
	}
	mask := make([]bool, len(seq))
	if len(tails) > 0 {
		for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
			mask[i] = true
		}
	}
	return mask
}

// restoreCell rewrites the fields of the kept cell at index j that differ from want (canonical).
func (tx *Txn) restoreCell(j int, want Cell) (bool, error) {
	m, err := tx.cellMap(j)
	if err != nil {
		return false, err
	}
	cur := readCell(m)
	changed := false
	if cur.Type != want.Type {
		if err := tx.SetCellType(j, want.Type); err != nil {
			return changed, fmt.Errorf("cell type: %w", err)
		}
		changed = true
		if m, err = tx.cellMap(j); err != nil {
			return changed, err
		}
		cur = readCell(m)
	}
	if _, isText := mustGet(m, "source").(*y.YText); cur.Source != want.Source || !isText {
		if err := tx.SetSource(j, want.Source); err != nil {
			return changed, fmt.Errorf("source: %w", err)
		}
		changed = true
	}
	if !jsonEqual(cur.Metadata, want.Metadata) {
		if err := tx.SetCellMetadata(j, want.Metadata); err != nil {
			return changed, fmt.Errorf("metadata: %w", err)
		}
		changed = true
	}
	if want.Type == CellCode {
		if !equalCount(cur.ExecutionCount, want.ExecutionCount) {
			if err := tx.SetExecutionCount(j, want.ExecutionCount); err != nil {
				return changed, fmt.Errorf("execution count: %w", err)
			}
			changed = true
		}
		if !jsonEqual(outputsJSON(cur.Outputs), outputsJSON(want.Outputs)) {
			if err := tx.restoreOutputs(j, want.Outputs); err != nil {
				return changed, fmt.Errorf("outputs: %w", err)
			}
			changed = true
		}
		return changed, nil
	}
	if !jsonEqual(cur.Attachments, want.Attachments) {
		if len(want.Attachments) == 0 {
			m.Delete("attachments")
		} else if err := setMapAny(tx.tr, m, "attachments", want.Attachments); err != nil {
			return changed, fmt.Errorf("attachments: %w", err)
		}
		if err := tx.markDirty(); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// restoreOutputs replaces the outputs of code cell j with want, keeping the outputs the two
// lists share at the start and at the end.
func (tx *Txn) restoreOutputs(j int, want []map[string]any) error {
	m, err := tx.codeCell(j)
	if err != nil {
		return err
	}
	outs := tx.outputsArray(m)
	n := len(arrayItems(outs))
	cur := outputsOf(outs)
	p, s := 0, 0
	if len(cur) == n { // every element is an output object: indices line up
		for p < len(cur) && p < len(want) && jsonEqual(cur[p], want[p]) {
			p++
		}
		for s < len(cur)-p && s < len(want)-p && jsonEqual(cur[len(cur)-1-s], want[len(want)-1-s]) {
			s++
		}
	}
	if del := n - p - s; del > 0 {
		tx.deleteRange(outs, p, del)
	}
	if mid := want[p : len(want)-s]; len(mid) > 0 {
		if err := tx.insertOutputs(outs, p, mid); err != nil {
			return err
		}
	}
	return tx.markDirty()
}

func equalCount(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// outputsJSON turns an output list into a JSON array for jsonEqual (nil and empty alike).
func outputsJSON(outs []map[string]any) []any {
	a := make([]any, len(outs))
	for i, o := range outs {
		a[i] = o
	}
	return a
}
