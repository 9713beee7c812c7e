package ydoc

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"unicode"
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

// MergeText merges two descendants of base. The diffs are taken over words (runs of letters and
// digits; every other character is a word of its own), so that an edit never splits a word, and
// each insert or delete that could sit at several places is slid to word and line boundaries:
// otherwise two sides' inserts next to similar words can interleave their characters.
func MergeText(base, ours, theirs string) (string, int) { return mergeText(base, ours, theirs, false) }

// mergeText is MergeText; with fileWins, inserts both sides made at one point (other than the
// same text) are a conflict too, which theirs wins: a file changed outside the server wins over
// the replica's change of the same place, where two people typing at one spot both stay.
func mergeText(base, ours, theirs string, fileWins bool) (string, int) {
	switch {
	case ours == theirs, theirs == base:
		return ours, 0
	case ours == base:
		return theirs, 0
	}
	b, o, t := words(base), words(ours), words(theirs)
	eo, ok1 := wordEdits(b, o)
	et, ok2 := wordEdits(b, t)
	if !ok1 || !ok2 {
		// Too different to merge: theirs is the document people now see.
		return theirs, 1
	}
	type sided struct {
		wordEdit
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
	// Group into clusters of overlapping edits: two ranges overlap when they share a word; an
	// insert overlaps a range it falls strictly inside; inserts never overlap each other (an
	// insert at a range's start or end is next to it, not inside).
	var chosen []wordEdit
	conflicts := 0
	for i := 0; i < len(all); {
		j := i + 1
		end := all[i].end
		insAt := -1 // fileWins: where the cluster holds an insert
		if all[i].start == all[i].end {
			insAt = all[i].start
		}
		// Sorted by start (inserts first at one position), an edit overlaps the cluster when it
		// starts before the cluster's end: inside a range, or sharing words with it.
		for j < len(all) && (all[j].start < end || fileWins && all[j].start == all[j].end && all[j].start == insAt) {
			end = max(end, all[j].end)
			if all[j].start == all[j].end {
				insAt = all[j].start
			}
			j++
		}
		cluster := all[i:j]
		i = j
		var mine, other []wordEdit
		for _, e := range cluster {
			if e.ours {
				mine = append(mine, e.wordEdit)
			} else {
				other = append(other, e.wordEdit)
			}
		}
		switch {
		case len(other) == 0:
			chosen = append(chosen, mine...)
		case len(mine) == 0:
			chosen = append(chosen, other...)
		case slices.Equal(mine, other):
			chosen = append(chosen, other...)
		default:
			chosen = append(chosen, other...)
			conflicts++
		}
	}
	var sb []byte
	pos := 0
	var prev *wordEdit
	prevAt := 0 // where prev's insert begins in sb
	for k := range chosen {
		e := &chosen[k]
		if prev != nil && e.start == e.end && prev.start == prev.end && prev.start == e.start {
			// Inserts at one point from both sides: what both hold is taken once (an identical
			// insert, or one side's typing that the other side also holds and went on from: a
			// base older than both).
			sb = append(sb[:prevAt], combineInserts(prev.ins, e.ins)...)
			prev = &wordEdit{start: e.start, end: e.end, ins: string(sb[prevAt:])}
			continue
		}
		sb = append(sb, strings.Join(b[pos:e.start], "")...)
		prevAt = len(sb)
		sb = append(sb, e.ins...)
		pos = e.end
		prev = e
	}
	sb = append(sb, strings.Join(b[pos:], "")...)
	return string(sb), conflicts
}

// combineInserts joins two inserts made at one point. When one of them is what the other begins
// and ends with (the other went on from it: typing both sides hold over a base older than both),
// it is the longer one; otherwise both, ours first. Whole words are compared, except that one
// insert the other starts with counts to the character: the typing one side holds may end in the
// middle of a word the other side's went on to finish (a kill between two keystrokes).
func combineInserts(ours, theirs string) string {
	switch {
	case ours == theirs:
		return ours
	case strings.HasPrefix(theirs, ours):
		return theirs
	case strings.HasPrefix(ours, theirs):
		return ours
	}
	wo, wt := words(ours), words(theirs)
	p := 0
	for p < len(wo) && p < len(wt) && wo[p] == wt[p] {
		p++
	}
	s := 0
	for s < len(wo)-p && s < len(wt)-p && wo[len(wo)-1-s] == wt[len(wt)-1-s] {
		s++
	}
	switch {
	case p+s == len(wo):
		return theirs
	case p+s == len(wt):
		return ours
	}
	return ours + theirs
}

// words splits a text into words: runs of letters and digits, and every other character alone.
func words(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		word := unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'
		if word {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, s[start:i])
			start = -1
		}
		out = append(out, string(r))
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// wordEdit replaces the words a[start:end] with ins.
type wordEdit struct {
	start, end int
	ins        string
}

// maxMergeDistance bounds the edit distance wordEdits computes (its memory grows with its square).
const maxMergeDistance = 4000

// wordEdits is a shortest edit script from a to b (Myers' O(ND) algorithm over words), as
// replacements of ranges of a, each pure insert or delete slid to the best boundary it can sit
// at (alignEdit); ok is false when the texts differ by more than maxMergeDistance words.
func wordEdits(a, b []string) ([]wordEdit, bool) {
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
	var edits []wordEdit
	switch {
	case n == 0 && m == 0:
		return nil, true
	case n == 0 || m == 0:
		edits = []wordEdit{{start: p, end: p + n, ins: strings.Join(bm, "")}}
	default:
		ops, ok := myersWords(am, bm)
		if !ok {
			return nil, false
		}
		// Fold into replacements: consecutive deletes and the inserts at their positions.
		for i := 0; i < len(ops); {
			start := ops[i].x
			end := start
			var ins strings.Builder
			j := i
			for j < len(ops) {
				o := ops[j]
				if o.del && o.x == end {
					end++
				} else if !o.del && o.x == end {
					ins.WriteString(bm[o.y])
				} else {
					break
				}
				j++
			}
			edits = append(edits, wordEdit{start: p + start, end: p + end, ins: ins.String()})
			i = j
		}
	}
	// Slide pure inserts and deletes to the best boundaries, keeping edits apart.
	lo := 0
	for i := range edits {
		hi := len(a)
		if i+1 < len(edits) {
			hi = edits[i+1].start - 1
		}
		edits[i] = slideWords(a, words(edits[i].ins), edits[i], lo, hi)
		lo = edits[i].end + 1
	}
	return edits, true
}

type myersOp struct {
	x, y int  // position in a; for an insert, the word of b inserted
	del  bool // delete a[x]; else insert b[y] before a[x]
}

// myersWords returns the operations of a shortest edit script from a to b, in order.
func myersWords(am, bm []string) ([]myersOp, bool) {
	n, m := len(am), len(bm)
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
	var ops []myersOp
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
			ops = append(ops, myersOp{x: px, y: py})
		} else {
			ops = append(ops, myersOp{x: px, del: true})
		}
		x, y = px, py
	}
	slices.Reverse(ops)
	return ops, true
}

// slideWords moves a pure insert (its words ins) or a pure delete along the words of a where
// the text around it allows, to where its ends fall on the best boundaries (boundaryScore),
// starting at lo or later and ending at hi or earlier.
func slideWords(a, ins []string, e wordEdit, lo, hi int) wordEdit {
	pureIns, pureDel := e.start == e.end && len(ins) > 0, e.start < e.end && len(ins) == 0
	if !pureIns && !pureDel {
		return e
	}
	moved := ins
	if pureDel {
		moved = slices.Clone(a[e.start:e.end])
	} else {
		moved = slices.Clone(moved)
	}
	for e.start > lo && a[e.start-1] == moved[len(moved)-1] {
		moved = append([]string{a[e.start-1]}, moved[:len(moved)-1]...)
		e.start--
	}
	text := func(ws []string) string { return strings.Join(ws, "") }
	best, bestScore, bestMoved := e.start, -1, slices.Clone(moved)
	for at := e.start; ; {
		after := at
		if pureDel {
			after = at + len(moved)
		}
		score := boundaryScore(text(a[:at]), text(moved)) + boundaryScore(text(moved), text(a[after:]))
		if score >= bestScore {
			best, bestScore, bestMoved = at, score, slices.Clone(moved)
		}
		if after >= len(a) || after >= hi || a[after] != moved[0] {
			break
		}
		moved = append(moved[1:], a[after])
		at++
	}
	if pureIns {
		return wordEdit{start: best, end: best, ins: text(bestMoved)}
	}
	return wordEdit{start: best, end: best + len(bestMoved)}
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
	return mergeNotebooks(base, ours, theirs, nil)
}

// mergeNotebooks is MergeNotebooks; the sources of the cells fileWins names (nil: none) merge as
// mergeText does with fileWins.
func mergeNotebooks(base, ours, theirs Notebook, fileWins func(id string) bool) (Notebook, MergeStats) {
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
			out.Cells = append(out.Cells, mergeCell(b, ours.Cells[oi], theirs.Cells[ti], fileWins != nil && fileWins(id), &st))
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

func mergeCell(b, o, t Cell, fileWins bool, st *MergeStats) Cell {
	out := Cell{ID: o.ID, ExecutionState: t.ExecutionState}
	what := "cell " + o.ID + ": "
	out.Type = pick3(b.Type, o.Type, t.Type, what+"cell type", st)
	src, n := mergeText(b.Source, o.Source, t.Source, fileWins)
	out.Source = src
	for range n {
		st.lose(what + "part of the source, changed on both sides")
	}
	out.Metadata = mergeMaps(withoutTransient(b.Metadata), withoutTransient(o.Metadata), withoutTransient(t.Metadata), what+"metadata", st)
	for k := range transientCellKeys {
		if v, ok := t.Metadata[k]; ok {
			out.Metadata[k] = v
		}
	}
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

// transientCellKeys are cell metadata keys the server writes on every load and strips from
// every save (nbformat's signature check marks each code cell trusted or not, and the answer
// changes once the server signed the notebook on a save): a merge takes the room's, never
// restores one, and a difference in them is no change.
var transientCellKeys = map[string]bool{"trusted": true}

// withoutTransient is md without the transient keys (md itself when it has none).
func withoutTransient(md map[string]any) map[string]any {
	has := false
	for k := range transientCellKeys {
		if _, ok := md[k]; ok {
			has = true
		}
	}
	if !has {
		return md
	}
	out := make(map[string]any, len(md))
	for k, v := range md {
		if !transientCellKeys[k] {
			out[k] = v
		}
	}
	return out
}

// sameCell compares the content of two cells (not their runtime state, nor the transient
// metadata the server sets on load).
func sameCell(a, b Cell) bool {
	return a.Type == b.Type && a.Source == b.Source && nearJSON(withoutTransient(a.Metadata), withoutTransient(b.Metadata)) &&
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
