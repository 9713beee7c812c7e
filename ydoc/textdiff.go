package ydoc

import (
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	y "github.com/skyterra/y-crdt"
)

// Minimal text edits: replacing a source wholesale would move every collaborator's cursor to
// the end. diffText finds the changed regions (common prefix and suffix, then a line-level LCS
// of the middle, then a character-level trim of each changed block) and returns them as edits
// in UTF-16 positions of the old text.

// textEdit replaces Del UTF-16 units at Pos (in the old text) with Ins.
type textEdit struct {
	Pos int
	Del int
	Ins string
}

// lcsCellCap bounds the line-level LCS table; beyond it the middle is replaced as one block.
const lcsCellCap = 4 << 20

func diffText(old, new string) []textEdit {
	if old == new {
		return nil
	}
	// Common prefix and suffix, on rune boundaries.
	p := commonPrefix(old, new)
	s := commonSuffix(old[p:], new[p:])
	oldMid, newMid := old[p:len(old)-s], new[p:len(new)-s]
	base := utf16Len(old[:p])
	if oldMid == "" || newMid == "" || !strings.Contains(oldMid, "\n") || !strings.Contains(newMid, "\n") {
		return []textEdit{{Pos: base, Del: utf16Len(oldMid), Ins: newMid}}
	}
	a, b := splitLines(oldMid), splitLines(newMid)
	if len(a)*len(b) > lcsCellCap {
		return []textEdit{{Pos: base, Del: utf16Len(oldMid), Ins: newMid}}
	}
	var edits []textEdit
	// Positions in UTF-16 code units.
	changedBlocks(a, b, base, utf16Len, func(pos int, oldBlock, newBlock string) {
		bp := commonPrefix(oldBlock, newBlock)
		bs := commonSuffix(oldBlock[bp:], newBlock[bp:])
		edits = append(edits, textEdit{
			Pos: pos + utf16Len(oldBlock[:bp]),
			Del: utf16Len(oldBlock[bp : len(oldBlock)-bs]),
			Ins: newBlock[bp : len(newBlock)-bs],
		})
	})
	return edits
}

// changedBlocks calls fn with each changed block of the line diff of a and b (lineHunks): the
// old and the new lines of the block, joined, and the block's position in the old text — base
// plus the width of every old line before it.
func changedBlocks(a, b []string, base int, width func(string) int, fn func(pos int, oldBlock, newBlock string)) {
	pos := base
	for _, h := range lineHunks(a, b) {
		for _, l := range a[h.eqStart:h.aStart] {
			pos += width(l)
		}
		oldBlock := strings.Join(a[h.aStart:h.aEnd], "")
		fn(pos, oldBlock, strings.Join(b[h.bStart:h.bEnd], ""))
		pos += width(oldBlock)
	}
}

// diffTextWords is diffText for concurrent restores (the crash rescue): the changed blocks are
// diffed word by word (blockEdits), and each insert or delete that could sit at several places is
// slid to word and line boundaries (alignEdit). A minimal character diff keeps the longest
// common prefix, which can end inside a word, and replaces everything between the first and the
// last change of a line as one edit; a collaborator typing at a word boundary at the same time
// then sees their text land inside the restored words (y-crdt puts the replacement after the
// deleted run, and their insert, anchored in it, before).
func diffTextWords(old, new string) []textEdit {
	if old == new {
		return nil
	}
	var edits []byteEdit
	// Common prefix and suffix, on rune boundaries.
	p := commonPrefix(old, new)
	s := commonSuffix(old[p:], new[p:])
	oldMid, newMid := old[p:len(old)-s], new[p:len(new)-s]
	if oldMid == "" || newMid == "" || !strings.Contains(oldMid, "\n") || !strings.Contains(newMid, "\n") {
		edits = blockEdits(old, new, 0, byteEdit{start: p, end: p + len(oldMid), ins: newMid})
	} else if a, b := splitLines(oldMid), splitLines(newMid); len(a)*len(b) > lcsCellCap {
		edits = []byteEdit{{start: p, end: p + len(oldMid), ins: newMid}}
	} else {
		// Positions in bytes.
		changedBlocks(a, b, p, func(s string) int { return len(s) }, func(pos int, oldBlock, newBlock string) {
			bp := commonPrefix(oldBlock, newBlock)
			bs := commonSuffix(oldBlock[bp:], newBlock[bp:])
			trimmed := byteEdit{start: pos + bp, end: pos + len(oldBlock) - bs, ins: newBlock[bp : len(newBlock)-bs]}
			edits = append(edits, blockEdits(oldBlock, newBlock, pos, trimmed)...)
		})
	}
	out := make([]textEdit, len(edits))
	lo := 0
	for i, e := range edits {
		hi := len(old)
		if i+1 < len(edits) {
			hi = edits[i+1].start
		}
		e = alignEdit(old, e, lo, hi, i+1 == len(edits))
		lo = e.end
		if lo < len(old) { // edits do not touch: the next starts a rune after this one ends
			_, size := utf8.DecodeRuneInString(old[lo:])
			lo += size
		}
		out[i] = textEdit{Pos: utf16Len(old[:e.start]), Del: utf16Len(old[e.start:e.end]), Ins: e.ins}
	}
	return out
}

// maxBlockWords bounds the words of a changed block diffed word by word; a larger block is
// replaced as one edit.
const maxBlockWords = 20000

// blockEdits turns a changed block (old bytes from base on) into edits: word by word when it is
// small enough, so that several changes in one line are several small edits rather than one
// replacement of everything between them (a replacement deletes and re-creates what lies
// between, and a collaborator typing there at the same time sees their text land in odd
// places); a word changed inside keeps its common start and end. Otherwise it is the single
// edit given (the block with its common start and end trimmed).
func blockEdits(oldBlock, newBlock string, base int, single byteEdit) []byteEdit {
	one := []byteEdit{single}
	if single.start == single.end || single.ins == "" {
		return one // a pure insert or delete: alignEdit places it
	}
	ow, nw := words(oldBlock), words(newBlock)
	if len(ow)+len(nw) > maxBlockWords {
		return one
	}
	wes, ok := wordEdits(ow, nw)
	if !ok || len(wes) <= 1 && (len(wes) == 0 || (wes[0].start == 0 && wes[0].end == len(ow))) {
		return one
	}
	offs := make([]int, len(ow)+1)
	for i, w := range ow {
		offs[i+1] = offs[i] + len(w)
	}
	out := make([]byteEdit, 0, len(wes))
	for _, we := range wes {
		start, end := offs[we.start], offs[we.end]
		del := oldBlock[start:end]
		if del != "" && we.ins != "" { // a word changed inside: keep its common start and end
			bp := commonPrefix(del, we.ins)
			bs := commonSuffix(del[bp:], we.ins[bp:])
			start, end = start+bp, end-bs
			we.ins = we.ins[bp : len(we.ins)-bs]
		}
		out = append(out, byteEdit{start: base + start, end: base + end, ins: we.ins})
	}
	return out
}

// byteEdit replaces old[start:end] (byte offsets) with ins.
type byteEdit struct {
	start, end int
	ins        string
}

// alignEdit slides a pure insert or a pure delete, where the text around it allows (inserting
// "b»«a" after "«a" is inserting "«ab»" before it), to the place whose ends fall best on word and
// line boundaries, starting at lo or later and ending before hi (unless last): a minimal diff puts
// it after the longest common prefix, which can be inside a word, so that a collaborator typing
// at the word's boundary at the same time would see their text land inside the inserted word.
// The result is the same text.
func alignEdit(old string, e byteEdit, lo, hi int, last bool) byteEdit {
	pureIns, pureDel := e.start == e.end && e.ins != "", e.start < e.end && e.ins == ""
	if !pureIns && !pureDel {
		return e
	}
	moved := e.ins // the text that slides: inserted, or deleted
	if pureDel {
		moved = old[e.start:e.end]
	}
	// Leftmost placement: the rune before equals the moved text's last (bytes compared, so that
	// invalid UTF-8 never slides).
	for e.start > lo {
		_, size := utf8.DecodeLastRuneInString(old[lo:e.start])
		if size > len(moved) || old[e.start-size:e.start] != moved[len(moved)-size:] || !utf8.ValidString(old[e.start-size:e.start]) {
			break
		}
		moved = old[e.start-size:e.start] + moved[:len(moved)-size]
		e.start -= size
	}
	best, bestScore, bestText := e.start, -1, moved
	for at, text := e.start, moved; ; {
		after := at
		if pureDel {
			after = at + len(text)
		}
		score := boundaryScore(old[:at], text) + boundaryScore(text, old[after:])
		if score >= bestScore { // ties: the rightmost, as a minimal diff would place it
			best, bestScore, bestText = at, score, text
		}
		if after >= len(old) {
			break
		}
		_, size := utf8.DecodeRuneInString(old[after:])
		if size > len(text) || old[after:after+size] != text[:size] || !utf8.ValidString(text[:size]) || (!last && after+size >= hi) {
			break
		}
		text = text[size:] + old[after:after+size]
		at += size
	}
	if pureIns {
		return byteEdit{start: best, end: best, ins: bestText}
	}
	return byteEdit{start: best, end: best + len(bestText)}
}

// boundaryScore rates the boundary between the end of a and the start of b, as
// diff-match-patch's semantic cleanup does: the edges of the text, blank lines, line breaks,
// the end of a sentence, white space or the outside of brackets and quotes, other punctuation,
// inside a word.
func boundaryScore(a, b string) int {
	if a == "" || b == "" {
		return 6
	}
	c1, _ := utf8.DecodeLastRuneInString(a)
	c2, _ := utf8.DecodeRuneInString(b)
	nonWord1 := !unicode.IsLetter(c1) && !unicode.IsDigit(c1)
	nonWord2 := !unicode.IsLetter(c2) && !unicode.IsDigit(c2)
	space1, space2 := nonWord1 && unicode.IsSpace(c1), nonWord2 && unicode.IsSpace(c2)
	break1, break2 := c1 == '\n' || c1 == '\r', c2 == '\n' || c2 == '\r'
	switch {
	case (break1 && strings.HasSuffix(a, "\n\n")) || (break2 && strings.HasPrefix(b, "\n\n")):
		return 5
	case break1 || break2:
		return 4
	case nonWord1 && !space1 && space2:
		return 3
	case space1 || space2:
		return 2
	case (nonWord1 && unicode.In(c1, unicode.Pe, unicode.Pf)) || (nonWord2 && unicode.In(c2, unicode.Ps, unicode.Pi)):
		return 2 // after a closing bracket or quote, or before an opening one
	case nonWord1 || nonWord2:
		return 1
	}
	return 0
}

// applyTextDiff rewrites t from old to new with minimal edits (by words in a byWords
// transaction); it reports whether anything changed.
func (tx *Txn) applyTextDiff(t *y.YText, old, new string) bool {
	if tx.byWords {
		return applyEdits(t, diffTextWords(old, new))
	}
	return applyTextDiff(t, old, new)
}

// applyTextDiff rewrites t from old to new with minimal edits; it reports whether anything changed.
func applyTextDiff(t *y.YText, old, new string) bool {
	return applyEdits(t, diffText(old, new))
}

func applyEdits(t *y.YText, edits []textEdit) bool {
	// Apply from the end so earlier positions stay valid.
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		if e.Del > 0 {
			t.Delete(e.Pos, e.Del)
		}
		if e.Ins != "" {
			t.Insert(e.Pos, e.Ins, nil)
		}
	}
	return len(edits) > 0
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !isRuneStart(a[n]) { // back up to a rune boundary
		n--
	}
	return n
}

func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	for n > 0 && n < len(a) && !isRuneStart(a[len(a)-n]) {
		n--
	}
	return n
}

func isRuneStart(c byte) bool { return c&0xc0 != 0x80 }

// splitLines splits keeping the newline on each line.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// hunk is a changed block: a[aStart:aEnd] becomes b[bStart:bEnd]; a[eqStart:aStart] is the run
// of equal lines before it.
type hunk struct{ eqStart, aStart, aEnd, bStart, bEnd int }

// lineHunks computes the changed blocks between two line lists from an LCS table.
func lineHunks(a, b []string) []hunk {
	n, m := len(a), len(b)
	// lcs[i][j] = LCS length of a[i:], b[j:]
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var hunks []hunk
	i, j, eq := 0, 0, 0
	for i < n || j < m {
		if i < n && j < m && a[i] == b[j] {
			i++
			j++
			continue
		}
		h := hunk{eqStart: eq, aStart: i, bStart: j}
		for (i < n || j < m) && !(i < n && j < m && a[i] == b[j]) {
			if j >= m || (i < n && lcs[i+1][j] >= lcs[i][j+1]) {
				i++
			} else {
				j++
			}
		}
		h.aEnd, h.bEnd = i, j
		hunks = append(hunks, h)
		eq = i
	}
	return hunks
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonEqual compares JSON-like values, treating all numeric types by value.
func jsonEqual(a, b any) bool { return reflect.DeepEqual(normJSON(a), normJSON(b)) }

func normJSON(v any) any {
	switch t := v.(type) {
	case int:
		return float64(t)
	case int64:
		return float64(t)
	case int32:
		return float64(t)
	case float32:
		return float64(t)
	case float64:
		if math.IsNaN(t) {
			return "NaN"
		}
		return t
	case map[string]any:
		o := make(map[string]any, len(t))
		for k, x := range t {
			o[k] = normJSON(x)
		}
		return o
	case []any:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = normJSON(x)
		}
		return a
	case []string:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = x
		}
		return a
	}
	return v
}
