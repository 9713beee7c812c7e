package ydoc

import (
	"math"
	"reflect"
	"slices"
	"strings"
)

// Three-way merges for the crash rescue: after jupyter-server lost a room and rebuilt it from its
// file, the replica as it was before the loss ("ours") is brought back onto the rebuilt room
// ("theirs", which may already hold edits made since the restart), with the file as the common
// ancestor ("base"). What changed on one side only is taken from that side; where both sides
// changed the same thing, the later side (theirs) wins and the merge counts a conflict. Nothing
// is taken twice: identical changes on both sides are applied once.

// MergeStats counts what a merge could not take from ours.
type MergeStats struct {
	Conflicts int      // places where theirs won over a different change of ours
	Lost      []string // what of ours is not in the result, one line each (cell ids, fields)
}

func (m *MergeStats) lose(format string) {
	m.Conflicts++
	if len(m.Lost) < 50 {
		m.Lost = append(m.Lost, format)
	}
}

// MergeText merges two descendants of base at character level.
func MergeText(base, ours, theirs string) (string, int) {
	switch {
	case ours == theirs, theirs == base:
		return ours, 0
	case ours == base:
		return theirs, 0
	}
	b, o, t := []rune(base), []rune(ours), []rune(theirs)
	eo, ok1 := runeEdits(b, o)
	et, ok2 := runeEdits(b, t)
	if !ok1 || !ok2 {
		// Too different to merge by character: theirs is the document people now see.
		return theirs, 1
	}
	type sided struct {
		runeEdit
		ours bool
	}
	all := make([]sided, 0, len(eo)+len(et))
	for _, e := range eo {
		all = append(all, sided{e, true})
	}
	for _, e := range et {
		all = append(all, sided{e, false})
	}
	// Order by position; at one position inserts come before ranges, ours before theirs.
	slices.SortStableFunc(all, func(x, y sided) int {
		if x.start != y.start {
			return x.start - y.start
		}
		if xi, yi := x.end == x.start, y.end == y.start; xi != yi {
			if xi {
				return -1
			}
			return 1
		}
		if x.ours != y.ours {
			if x.ours {
				return -1
			}
			return 1
		}
		return 0
	})
	// Group into clusters of overlapping edits: two ranges overlap when they share a character;
	// an insert overlaps a range it falls strictly inside; inserts never overlap each other (an
	// insert at a range's start or end is next to it, not inside).
	var chosen []runeEdit
	conflicts := 0
	for i := 0; i < len(all); {
		j := i + 1
		end := all[i].end
		// Sorted by start (inserts first at one position), an edit overlaps the cluster when it
		// starts before the cluster's end: inside a range, or sharing characters with it.
		for j < len(all) && all[j].start < end {
			end = max(end, all[j].end)
			j++
		}
		cluster := all[i:j]
		i = j
		var mine, other []runeEdit
		for _, e := range cluster {
			if e.ours {
				mine = append(mine, e.runeEdit)
			} else {
				other = append(other, e.runeEdit)
			}
		}
		switch {
		case len(other) == 0:
			chosen = append(chosen, mine...)
		case len(mine) == 0:
			chosen = append(chosen, other...)
		case equalRuneEdits(mine, other):
			chosen = append(chosen, other...)
		default:
			chosen = append(chosen, other...)
			conflicts++
		}
	}
	// Inserts at one point from both sides: identical ones are taken once.
	var out []runeEdit
	for _, e := range chosen {
		if n := len(out); n > 0 && e.start == e.end && out[n-1].start == out[n-1].end && out[n-1].start == e.start && string(out[n-1].ins) == string(e.ins) {
			continue
		}
		out = append(out, e)
	}
	var sb strings.Builder
	pos := 0
	for _, e := range out {
		sb.WriteString(string(b[pos:e.start]))
		sb.WriteString(string(e.ins))
		pos = e.end
	}
	sb.WriteString(string(b[pos:]))
	return sb.String(), conflicts
}

func equalRuneEdits(a, b []runeEdit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].start != b[i].start || a[i].end != b[i].end || string(a[i].ins) != string(b[i].ins) {
			return false
		}
	}
	return true
}

// runeEdit replaces a[start:end] with ins.
type runeEdit struct {
	start, end int
	ins        []rune
}

// maxMergeDistance bounds the edit distance runeEdits computes (its memory grows with its square).
const maxMergeDistance = 4000

// runeEdits is a shortest edit script from a to b (Myers' O(ND) algorithm), as replacements of
// ranges of a; ok is false when the texts differ by more than maxMergeDistance characters.
func runeEdits(a, b []rune) ([]runeEdit, bool) {
	// Common prefix and suffix cost nothing and keep the search small.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	am, bm := a[p:len(a)-s], b[p:len(b)-s]
	n, m := len(am), len(bm)
	if n == 0 && m == 0 {
		return nil, true
	}
	if n == 0 || m == 0 {
		return []runeEdit{{start: p, end: p + n, ins: slices.Clone(bm)}}, true
	}
	maxD := min(n+m, maxMergeDistance)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int // trace[d]: v before step d, over diagonals -(d+1)..d+1
	found := -1
	for d := 0; d <= maxD && found < 0; d++ {
		trace = append(trace, slices.Clone(v[off-d-1:off+d+2]))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && am[x] == bm[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 {
		return nil, false
	}
	// Walk back from (n, m), collecting deleted and inserted characters per position of a.
	type op struct {
		x   int  // position in am
		del bool // delete am[x]; else insert ch before am[x]
		ch  rune
	}
	var ops []op
	x, y := n, m
	for d := found; d > 0; d-- {
		prev := trace[d]
		at := func(k int) int { return prev[k+d+1] }
		k := x - y
		down := k == -d || (k != d && at(k-1) < at(k+1)) // came from diagonal k+1: an insert
		pk := k - 1
		if down {
			pk = k + 1
		}
		px := at(pk)
		py := px - pk
		if down {
			ops = append(ops, op{x: px, ch: bm[py]})
		} else {
			ops = append(ops, op{x: px, del: true})
		}
		x, y = px, py
	}
	slices.Reverse(ops)
	// Fold into replacements: consecutive deletes and the inserts at their positions.
	var edits []runeEdit
	for i := 0; i < len(ops); {
		start := ops[i].x
		end := start
		var ins []rune
		j := i
		for j < len(ops) {
			o := ops[j]
			if o.del && o.x == end {
				end++
			} else if !o.del && o.x == end {
				ins = append(ins, o.ch)
			} else {
				break
			}
			j++
		}
		edits = append(edits, runeEdit{start: p + start, end: p + end, ins: ins})
		i = j
	}
	return edits, true
}

// MergeNotebooks merges two descendants of base by cell id:
//
//   - a cell of ours stays unless theirs deleted it (it is in base but not in theirs); a cell
//     only theirs has stays unless ours deleted it (it is in base but not in ours) and theirs
//     did not change it;
//   - cells are in ours' order; cells only theirs has follow the cell they follow in theirs;
//   - a kept cell's fields are merged: the source by character (MergeText), metadata key by key,
//     type, outputs with execution count, and attachments as wholes; a field only one side
//     changed is taken from that side, theirs wins where both changed it;
//   - notebook metadata key by key, nbformat as a whole.
//
// base must carry the cell ids of the file (nbformat 4.5): a base without them matches nothing,
// so the caller should not merge then.
func MergeNotebooks(base, ours, theirs Notebook) (Notebook, MergeStats) {
	var st MergeStats
	bIdx, oIdx, tIdx := cellIndex(base), cellIndex(ours), cellIndex(theirs)
	out := Notebook{NBFormat: ours.NBFormat, NBFormatMinor: ours.NBFormatMinor}
	if theirs.NBFormat != base.NBFormat || theirs.NBFormatMinor != base.NBFormatMinor {
		out.NBFormat, out.NBFormatMinor = theirs.NBFormat, theirs.NBFormatMinor
	}
	out.Metadata = mergeMaps(base.Metadata, ours.Metadata, theirs.Metadata, "notebook metadata", &st)

	kept := map[string]bool{}
	var order []string
	for _, c := range ours.Cells {
		if c.ID == "" || kept[c.ID] {
			continue
		}
		_, inB := bIdx[c.ID]
		_, inT := tIdx[c.ID]
		if inB && !inT {
			if b := base.Cells[bIdx[c.ID]]; !sameCell(b, c) {
				st.lose("cell " + c.ID + ": deleted since the restart; its earlier changes were not restored")
			}
			continue
		}
		kept[c.ID] = true
		order = append(order, c.ID)
	}
	// Cells only theirs has, after the cell they follow in theirs.
	for ti, c := range theirs.Cells {
		if c.ID == "" || kept[c.ID] {
			continue
		}
		if _, inO := oIdx[c.ID]; inO {
			continue // duplicate id in theirs
		}
		if bi, inB := bIdx[c.ID]; inB && sameCell(base.Cells[bi], c) {
			continue // ours deleted it and theirs did not touch it
		} else if inB {
			st.lose("cell " + c.ID + ": changed since the restart, so its deletion was not restored")
		}
		at := 0
		for k := ti - 1; k >= 0; k-- {
			if i := slices.Index(order, theirs.Cells[k].ID); i >= 0 && kept[theirs.Cells[k].ID] {
				at = i + 1
				break
			}
		}
		order = slices.Insert(order, at, c.ID)
		kept[c.ID] = true
	}
	for _, id := range order {
		oi, inO := oIdx[id]
		ti, inT := tIdx[id]
		switch {
		case inO && inT:
			b := theirs.Cells[ti] // no common ancestor: bring ours back
			if bi, inB := bIdx[id]; inB {
				b = base.Cells[bi]
			}
			out.Cells = append(out.Cells, mergeCell(b, ours.Cells[oi], theirs.Cells[ti], &st))
		case inO:
			out.Cells = append(out.Cells, ours.Cells[oi])
		default:
			out.Cells = append(out.Cells, theirs.Cells[ti])
		}
	}
	return out, st
}

func cellIndex(nb Notebook) map[string]int {
	m := make(map[string]int, len(nb.Cells))
	for i, c := range nb.Cells {
		if _, dup := m[c.ID]; !dup && c.ID != "" {
			m[c.ID] = i
		}
	}
	return m
}

func mergeCell(b, o, t Cell, st *MergeStats) Cell {
	out := Cell{ID: o.ID, ExecutionState: t.ExecutionState}
	what := "cell " + o.ID + ": "
	out.Type = pick3(b.Type, o.Type, t.Type, what+"cell type", st)
	src, n := MergeText(b.Source, o.Source, t.Source)
	out.Source = src
	for range n {
		st.lose(what + "part of the source, changed on both sides")
	}
	out.Metadata = mergeMaps(b.Metadata, o.Metadata, t.Metadata, what+"metadata", st)
	type run struct {
		Count   *int
		Outputs []any
	}
	r := pick3(run{b.ExecutionCount, outputsJSON(b.Outputs)}, run{o.ExecutionCount, outputsJSON(o.Outputs)}, run{t.ExecutionCount, outputsJSON(t.Outputs)}, what+"outputs", st)
	if r.Count == t.ExecutionCount && nearJSON(r.Outputs, outputsJSON(t.Outputs)) {
		out.ExecutionCount, out.Outputs = t.ExecutionCount, t.Outputs
	} else {
		out.ExecutionCount, out.Outputs = o.ExecutionCount, o.Outputs
	}
	out.Attachments = pick3(b.Attachments, o.Attachments, t.Attachments, what+"attachments", st)
	return out
}

// pick3 takes ours unless theirs changed the value (then theirs, counting a conflict when ours
// changed it differently).
func pick3[T any](b, o, t T, what string, st *MergeStats) T {
	if nearJSON(t, b) {
		return o
	}
	if !nearJSON(o, b) && !nearJSON(o, t) {
		st.lose(what + ", changed on both sides")
	}
	return t
}

// mergeMaps merges JSON objects key by key (an absent key is a value: null removes nothing).
func mergeMaps(b, o, t map[string]any, what string, st *MergeStats) map[string]any {
	out := map[string]any{}
	keys := map[string]bool{}
	for _, m := range []map[string]any{b, o, t} {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range keys {
		bv, bok := b[k]
		ov, ook := o[k]
		tv, tok := t[k]
		var v any
		var ok bool
		if tok == bok && nearJSON(tv, bv) {
			v, ok = ov, ook
		} else {
			v, ok = tv, tok
			if (ook != bok || !nearJSON(ov, bv)) && (ook != tok || !nearJSON(ov, tv)) {
				st.lose(what + " " + k + ", changed on both sides")
			}
		}
		if ok {
			out[k] = v
		}
	}
	return out
}

// sameCell compares the content of two cells (not their runtime state).
func sameCell(a, b Cell) bool {
	return a.Type == b.Type && a.Source == b.Source && nearJSON(a.Metadata, b.Metadata) &&
		equalCount(a.ExecutionCount, b.ExecutionCount) && nearJSON(outputsJSON(a.Outputs), outputsJSON(b.Outputs)) &&
		nearJSON(a.Attachments, b.Attachments)
}

// nearJSON compares JSON-like values, numbers by value within a relative 1e-6: a file loaded by
// the server can come back with float32 numbers.
func nearJSON(a, b any) bool {
	return nearNorm(normJSON(a), normJSON(b))
}

func nearNorm(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		return math.Abs(x-y) <= 1e-6*math.Max(math.Abs(x), math.Abs(y))
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !nearNorm(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !nearNorm(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
