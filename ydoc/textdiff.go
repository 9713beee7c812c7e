package ydoc

import (
	"math"
	"reflect"
	"sort"
	"strings"

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
	pos := base // UTF-16 position in old of the current line
	for _, h := range lineHunks(a, b) {
		for _, l := range a[h.eqStart:h.aStart] {
			pos += utf16Len(l)
		}
		oldBlock := strings.Join(a[h.aStart:h.aEnd], "")
		newBlock := strings.Join(b[h.bStart:h.bEnd], "")
		bp := commonPrefix(oldBlock, newBlock)
		bs := commonSuffix(oldBlock[bp:], newBlock[bp:])
		edits = append(edits, textEdit{
			Pos: pos + utf16Len(oldBlock[:bp]),
			Del: utf16Len(oldBlock[bp : len(oldBlock)-bs]),
			Ins: newBlock[bp : len(newBlock)-bs],
		})
		pos += utf16Len(oldBlock)
	}
	return edits
}

// applyTextDiff rewrites t from old to new with minimal edits; it reports whether anything changed.
func applyTextDiff(t *y.YText, old, new string) bool {
	edits := diffText(old, new)
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
