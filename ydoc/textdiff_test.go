package ydoc

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// applyEditsUTF16 applies edits to old in UTF-16 code units, independently of y-crdt.
func applyEditsUTF16(t *testing.T, old string, edits []textEdit) string {
	t.Helper()
	units := utf16.Encode([]rune(old))
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		if e.Pos < 0 || e.Del < 0 || e.Pos+e.Del > len(units) {
			t.Fatalf("edit %+v out of range for %d units of %q", e, len(units), old)
		}
		ins := utf16.Encode([]rune(e.Ins))
		units = append(units[:e.Pos:e.Pos], append(ins, units[e.Pos+e.Del:]...)...)
	}
	return string(utf16.Decode(units))
}

// checkEdits verifies structural properties of diffText's output.
func checkEdits(t *testing.T, old, new string, edits []textEdit) {
	t.Helper()
	if old == new {
		if edits != nil {
			t.Fatalf("diffText(%q, %q) of equal texts = %+v", old, new, edits)
		}
		return
	}
	if len(edits) == 0 {
		t.Fatalf("diffText(%q, %q) returned no edits", old, new)
	}
	// Code point boundaries of old, in UTF-16 units.
	boundary := map[int]bool{0: true}
	n := 0
	for _, r := range old {
		n += len(utf16.Encode([]rune{r}))
		boundary[n] = true
	}
	end := -1
	for i, e := range edits {
		if e.Del == 0 && e.Ins == "" {
			t.Fatalf("diffText(%q, %q): edit %d is empty: %+v", old, new, i, edits)
		}
		if e.Pos <= end && i > 0 {
			t.Fatalf("diffText(%q, %q): edits overlap or are unsorted: %+v", old, new, edits)
		}
		if !boundary[e.Pos] || !boundary[e.Pos+e.Del] {
			t.Fatalf("diffText(%q, %q): edit %+v splits a code point", old, new, e)
		}
		if !utf8.ValidString(e.Ins) {
			t.Fatalf("diffText(%q, %q): edit %+v inserts invalid UTF-8", old, new, e)
		}
		end = e.Pos + e.Del
	}
	if got := applyEditsUTF16(t, old, edits); got != new {
		t.Fatalf("applying diffText(%q, %q) = %+v gives %q", old, new, edits, got)
	}
}

var diffTokens = []string{
	"a", "b", "c", "x", " ", "\t", "\n", "\n", "\n", "\r\n", "é", "e\u0301", "中", "文", "😀", "😃", "🇫🇷",
	"👨\u200d👩\u200d👧", "\U0010FFFF", "\uFFFD", "\x00", "line one\n", "def f():\n", "    return 1\n", "# 标题\n",
}

func randText(rng *rand.Rand, maxTokens int) string {
	var b strings.Builder
	for i := rng.Intn(maxTokens + 1); i > 0; i-- {
		b.WriteString(diffTokens[rng.Intn(len(diffTokens))])
	}
	return b.String()
}

// mutate derives a related text: local insertions, deletions and line edits.
func mutate(rng *rand.Rand, s string) string {
	rs := []rune(s)
	for ops := 1 + rng.Intn(4); ops > 0; ops-- {
		switch rng.Intn(5) {
		case 0: // insert
			p := rng.Intn(len(rs) + 1)
			ins := []rune(randText(rng, 4))
			rs = append(rs[:p:p], append(ins, rs[p:]...)...)
		case 1: // delete a run
			if len(rs) > 0 {
				p := rng.Intn(len(rs))
				q := p + rng.Intn(min(len(rs)-p, 6)+1)
				rs = append(rs[:p:p], rs[q:]...)
			}
		case 2: // replace one line
			lines := strings.SplitAfter(string(rs), "\n")
			lines[rng.Intn(len(lines))] = randText(rng, 3) + "\n"
			rs = []rune(strings.Join(lines, ""))
		case 3: // duplicate or drop a line
			lines := strings.SplitAfter(string(rs), "\n")
			i := rng.Intn(len(lines))
			if rng.Intn(2) == 0 {
				lines = append(lines[:i:i], append([]string{lines[i]}, lines[i:]...)...)
			} else {
				lines = append(lines[:i:i], lines[i+1:]...)
			}
			rs = []rune(strings.Join(lines, ""))
		case 4: // replace a character
			if len(rs) > 0 {
				rs[rng.Intn(len(rs))] = []rune(diffTokens[rng.Intn(len(diffTokens))])[0]
			}
		}
	}
	return string(rs)
}

func diffPairs(rng *rand.Rand, n int) [][2]string {
	pairs := [][2]string{
		{"", ""}, {"", "a"}, {"a", ""}, {"abc", "abc"}, {"abc", "abd"}, {"abc", "xbc"},
		{"😀", "😃"}, {"a😀b", "a😃b"}, {"😀😀", "😀"}, {"中文", "中国"}, {"é", "e"}, {"e\u0301", "e"},
		{"🇫🇷", "🇩🇪"}, {"\n", "\n\n"}, {"\n\n\n", "\n"}, {"a\nb\nc\n", "a\nc\n"}, {"a\nb\nc", "a\nB\nc"},
		{"x\r\ny\r\n", "x\ny\n"}, {"\x00", "\x00\x00"}, {"\uFFFD", "\uFFFD\uFFFD"},
		{"line\n😀\nline\n", "line\n😃\nline\n"}, {"a\nb\n", "b\na\n"}, {"same\nsame\nsame\n", "same\nsame\n"},
		{"def f():\n    return 1\n", "def f():\n    x = 2\n    return x\n"},
		{strings.Repeat("ab\n", 50), strings.Repeat("ab\n", 49) + "ac\n"},
	}
	for i := 0; i < n; i++ {
		old := randText(rng, 30)
		if rng.Intn(4) == 0 {
			pairs = append(pairs, [2]string{old, randText(rng, 30)})
		} else {
			pairs = append(pairs, [2]string{old, mutate(rng, old)})
		}
	}
	return pairs
}

func TestDiffTextProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for _, p := range diffPairs(rng, 5000) {
		checkEdits(t, p[0], p[1], diffText(p[0], p[1]))
	}
}

// TestApplyTextDiffYText applies the edits to real Y.Texts, locally and on a remote replica.
func TestApplyTextDiffYText(t *testing.T) {
	rng := rand.New(rand.NewSource(99))
	for i, p := range diffPairs(rng, 300) {
		old, new := p[0], p[1]
		a := newTestDoc(t, KindText)
		b := newTestDoc(t, KindText)
		u, _ := transact(t, a, func(tx *Txn) error { return tx.InsertText(0, old) })
		if u != nil {
			apply(t, b, u)
		}
		u, _ = transact(t, a, func(tx *Txn) error { return tx.SetText(new) })
		if (u == nil) != (old == new) {
			t.Fatalf("pair %d: SetText(%q -> %q) update=%v", i, old, new, u != nil)
		}
		if u != nil {
			apply(t, b, u)
		}
		for name, d := range map[string]*Doc{"local": a, "remote": b} {
			got, err := d.Text()
			if err != nil || got != new {
				t.Fatalf("pair %d (%s): %q -> %q gave %q, %v; edits %+v", i, name, old, new, got, err, diffText(old, new))
			}
		}
		transact(t, a, func(tx *Txn) error {
			if n := tx.TextLength(); n != utf16Len(new) {
				t.Fatalf("pair %d: Y.Text length %d, want %d UTF-16 units", i, n, utf16Len(new))
			}
			return nil
		})
	}
}

// TestSetSourceYText does the same through a notebook cell.
func TestSetSourceYText(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	a := newTestDoc(t, KindNotebook)
	b := newTestDoc(t, KindNotebook)
	u, _ := transact(t, a, func(tx *Txn) error { return tx.InsertCells(0, []Cell{{ID: "c"}}) })
	apply(t, b, u)
	cur := ""
	for i := 0; i < 150; i++ {
		next := mutate(rng, cur)
		if rng.Intn(10) == 0 {
			next = randText(rng, 20)
		}
		u, _ := transact(t, a, func(tx *Txn) error { return tx.SetSource(0, next) })
		if u != nil {
			apply(t, b, u)
		}
		for name, d := range map[string]*Doc{"local": a, "remote": b} {
			cells, err := d.Cells([]int{0})
			if err != nil || cells[0].Source != next {
				t.Fatalf("step %d (%s): %q -> %q gave %q", i, name, cur, next, cells[0].Source)
			}
		}
		cur = next
	}
}

// TestDiffTextMinimal: edits stay inside the changed region.
func TestDiffTextMinimal(t *testing.T) {
	var lines []string
	for i := 0; i < 200; i++ {
		lines = append(lines, fmt.Sprintf("line %03d: some text 😀 中文\n", i))
	}
	base := strings.Join(lines, "")
	pos := func(line int) int { return utf16Len(strings.Join(lines[:line], "")) }
	with := func(repl map[int]string) string {
		out := append([]string(nil), lines...)
		for i, s := range repl {
			out[i] = s
		}
		return strings.Join(out, "")
	}
	lineLen := utf16Len(lines[0])
	tests := []struct {
		name string
		new  string
		want []textEdit
	}{
		{"head", "# header\n" + base, []textEdit{{0, 0, "# header\n"}}},
		{"first char", "L" + base[1:], []textEdit{{0, 1, "L"}}},
		{"tail", base + "extra", []textEdit{{utf16Len(base), 0, "extra"}}},
		{"drop last newline", base[:len(base)-1], []textEdit{{utf16Len(base) - 1, 1, ""}}},
		{"middle word", with(map[int]string{100: "line 100: some TEXT 😀 中文\n"}), []textEdit{{pos(100) + 15, 4, "TEXT"}}},
		{"middle after emoji", with(map[int]string{100: "line 100: some text 😃 中文\n"}), []textEdit{{pos(100) + 20, 2, "😃"}}},
		{"delete a middle line", with(map[int]string{57: ""}), nil},
		{"two distant lines", with(map[int]string{10: "line 010: some text 😀 中X\n", 190: "line 190: changed 😀 中文\n"}),
			[]textEdit{{pos(10) + 24, 1, "X"}, {pos(190) + 10, 9, "changed"}}},
		{"three lines", with(map[int]string{5: "five\n", 50: "fifty\n", 150: "one fifty\n"}), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			edits := diffText(base, tc.new)
			checkEdits(t, base, tc.new, edits)
			total := 0
			for _, e := range edits {
				total += e.Del + utf16Len(e.Ins)
			}
			if tc.want != nil {
				if fmt.Sprint(edits) != fmt.Sprint(tc.want) {
					t.Fatalf("edits %+v, want %+v", edits, tc.want)
				}
				return
			}
			// Without exact expectations: the edits cover no more than the changed lines.
			changed := 0
			for i, l := range lines {
				if !strings.Contains(tc.new, l) {
					changed += utf16Len(l)
					_ = i
				}
			}
			if total > changed+3*lineLen {
				t.Fatalf("edits touch %d units, changed lines hold %d: %+v", total, changed, edits)
			}
		})
	}
}

// TestDiffTextLongTextFallback: beyond the LCS cap the middle is one block, still correct.
func TestDiffTextLongTextFallback(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < 2100; i++ {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	old := "head\n" + a.String() + "tail\n"
	new := "head\n" + b.String() + "tail\n"
	edits := diffText(old, new)
	checkEdits(t, old, new, edits)
	if len(edits) != 1 || edits[0].Pos != 5 {
		t.Fatalf("want one block edit after the common head, got %d edits starting %+v", len(edits), edits[0].Pos)
	}
}

// TestSetTextInvalidUTF8 never breaks the document; the stored text is what was set.
func TestSetTextInvalidUTF8(t *testing.T) {
	pairs := [][2]string{
		{"a\xffb", "a\xfeb"}, {"\xf0\x9f", "\xf0\x9f\x98\x80"}, {"x\xe4\xb8", "x中"}, {"é", "\xc3"}, {"\xed\xa0\x80", "ok"},
	}
	for _, p := range pairs {
		d := newTestDoc(t, KindText)
		noPanic(t, "SetText", func() {
			transact(t, d, func(tx *Txn) error { return tx.InsertText(0, p[0]) })
			transact(t, d, func(tx *Txn) error { return tx.SetText(p[1]) })
		})
		if d.Err() != nil {
			t.Fatalf("%q -> %q broke the doc: %v", p[0], p[1], d.Err())
		}
		if got, _ := d.Text(); got != p[1] {
			t.Errorf("%q -> %q gave %q", p[0], p[1], got)
		}
	}
}

func TestJSONEqual(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{1, 1.0, true}, {int64(2), float32(2), true}, {int32(3), 3, true}, {1, 2, false},
		{map[string]any{"a": []any{1}}, map[string]any{"a": []any{1.0}}, true},
		{[]string{"a"}, []any{"a"}, true}, {nil, nil, true}, {nil, 0, false}, {"1", 1, false},
	}
	for _, tc := range tests {
		if got := jsonEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("jsonEqual(%#v, %#v) = %v", tc.a, tc.b, got)
		}
	}
}

// An insert or delete that could sit at several places (the text around it repeats) goes to word
// and line boundaries, not inside a word: a collaborator typing at the boundary at the same time
// must not see their text land inside the inserted word.
func TestDiffTextWordsAlignsToBoundaries(t *testing.T) {
	for _, tc := range []struct {
		old, new string
		want     textEdit
	}{
		{"«h1k00153»«h1k00202»", "«h1k00153»«h1k00250»«h1k00202»", textEdit{Pos: 10, Ins: "«h1k00250»"}},
		{"«h1k00153»«h1k00250»«h1k00202»", "«h1k00153»«h1k00202»", textEdit{Pos: 10, Del: 10}},
		{"foo bar", "foo bar bar", textEdit{Pos: 7, Ins: " bar"}},
		{"x = 1\nx = 1\n", "x = 1\nx = 1\nx = 1\n", textEdit{Pos: 12, Ins: "x = 1\n"}},
		{"aaa", "aaaa", textEdit{Pos: 3, Ins: "a"}}, // no boundary inside: where a minimal diff puts it
	} {
		got := diffTextWords(tc.old, tc.new)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("diffTextWords(%q, %q) = %+v, want [%+v]", tc.old, tc.new, got, tc.want)
		}
	}
}

// Several changes in one line are several small edits, each at word boundaries, not one
// replacement of everything between them.
func TestDiffTextWordsSeveralChangesInALine(t *testing.T) {
	old := "«h0k00087»«h1k00138»«h0k00002»«h1k00069»"
	new := "«h0k00087»«h0k00277»«h1k00138»«h0k00002»«h1k00456»«h1k00069»"
	got := diffTextWords(old, new)
	want := []textEdit{{Pos: 10, Ins: "«h0k00277»"}, {Pos: 30, Ins: "«h1k00456»"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diffTextWords = %+v, want %+v", got, want)
	}
	if got := diffTextWords("x = foo(a, b)", "x = fob(a, c)"); len(got) != 2 {
		t.Errorf("two changed words: %+v", got)
	}
}
