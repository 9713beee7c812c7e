package ydoc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func applyWordEdits(a []string, edits []wordEdit) string {
	var sb strings.Builder
	pos := 0
	for _, e := range edits {
		sb.WriteString(strings.Join(a[pos:e.start], ""))
		sb.WriteString(e.ins)
		pos = e.end
	}
	sb.WriteString(strings.Join(a[pos:], ""))
	return sb.String()
}

func randomText(r *rand.Rand, n int) string {
	alphabet := []rune("ab \nxé😀«»")
	out := make([]rune, n)
	for i := range out {
		out[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(out)
}

// wordEdits is an edit script: applied to a it gives b, and its edits are ordered and apart.
func TestWordEditsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		a := randomText(r, r.IntN(40))
		b := []rune(a)
		for k := r.IntN(4); k > 0; k-- { // a few random edits
			p := r.IntN(len(b) + 1)
			if r.IntN(2) == 0 && p < len(b) {
				b = slices.Delete(b, p, min(len(b), p+1+r.IntN(3)))
			} else {
				b = slices.Insert(b, p, []rune(randomText(r, 1+r.IntN(3)))...)
			}
		}
		wa := words(a)
		if strings.Join(wa, "") != a {
			t.Fatalf("words(%q) = %q", a, wa)
		}
		edits, ok := wordEdits(wa, words(string(b)))
		if !ok {
			t.Fatalf("%q → %q: gave up", a, string(b))
		}
		if got := applyWordEdits(wa, edits); got != string(b) {
			t.Fatalf("%q → %q: edits %+v give %q", a, string(b), edits, got)
		}
		for k := 1; k < len(edits); k++ {
			if edits[k].start <= edits[k-1].end {
				t.Fatalf("%q → %q: edits overlap or touch: %+v", a, string(b), edits)
			}
		}
	}
	long := strings.Repeat("a ", maxMergeDistance+10)
	if _, ok := wordEdits(words(long), words(strings.ReplaceAll(long, "a", "b"))); ok {
		t.Error("an edit distance over the bound was computed")
	}
}

func TestMergeTextCases(t *testing.T) {
	for _, tc := range []struct {
		base, ours, theirs, want string
		conflicts                int
	}{
		{"abc", "abc", "abXc", "abXc", 0},
		{"abc", "aYbc", "abc", "aYbc", 0},
		{"hello world", "hello big world", "hello world!", "hello big world!", 0},
		{"x", "x A", "x B", "x A B", 0},               // both appended: ours first, both kept
		{"x", "x A", "x A", "x A", 0},                 // the same change on both sides: once
		{"x", "xA", "xB", "xB", 1},                    // both changed the same word: theirs
		{"one two", "one 2", "one TWO", "one TWO", 1}, // both rewrote the same word: theirs
		{"ab cd ef", "aX cd ef", "ab cd eY", "aX cd eY", 0},
		{"", "ours", "", "ours", 0},
		{"line1\nline2\n", "line1\nline2\nours\n", "theirs\nline1\nline2\n", "theirs\nline1\nline2\nours\n", 0},
	} {
		got, n := MergeText(tc.base, tc.ours, tc.theirs)
		if got != tc.want || n != tc.conflicts {
			t.Errorf("MergeText(%q, %q, %q) = %q (%d conflicts), want %q (%d)", tc.base, tc.ours, tc.theirs, got, n, tc.want, tc.conflicts)
		}
	}
}

// Tokens typed at token boundaries on both sides (keystrokes before a crash, and after the
// restart on the rebuilt text) all end up in the merge exactly once, whatever the positions.
func TestMergeTextTokensProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 500; round++ {
		var base []string
		for i := r.IntN(6); i > 0; i-- {
			base = append(base, fmt.Sprintf("b%d;", i))
		}
		type side struct {
			toks  []string
			typed []string
		}
		grow := func(name string) side {
			s := side{toks: slices.Clone(base)}
			for i := r.IntN(6); i > 0; i-- {
				tok := fmt.Sprintf("%s%d;", name, i)
				s.toks = slices.Insert(s.toks, r.IntN(len(s.toks)+1), tok)
				s.typed = append(s.typed, tok)
			}
			return s
		}
		o, th := grow("o"), grow("t")
		join := func(ts []string) string { return strings.Join(ts, "") }
		got, _ := MergeText(join(base), join(o.toks), join(th.toks))
		for _, tok := range append(append(slices.Clone(base), o.typed...), th.typed...) {
			if n := strings.Count(got, tok); n != 1 {
				t.Fatalf("base %q ours %q theirs %q: merge %q has %q %d times", join(base), join(o.toks), join(th.toks), got, tok, n)
			}
		}
	}
}

func TestMergeNotebooks(t *testing.T) {
	one := 1
	cell := func(id, src string) Cell {
		return Cell{ID: id, Type: CellCode, Source: src, Metadata: map[string]any{}, Outputs: []map[string]any{}}
	}
	base := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"k": "v"}, Cells: []Cell{
		cell("a", "A"), cell("b", "B"), cell("c", "C"), cell("d", "D"),
	}}
	// Before the crash: a edited, b deleted, n inserted after a, d moved to the front, an output
	// on c, notebook metadata changed.
	ours := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"k": "v", "lang": "py"}, Cells: []Cell{
		cell("d", "D"), cell("a", "A typed"), cell("n", "new"), cell("c", "C"),
	}}
	ours.Cells[3].ExecutionCount = &one
	ours.Cells[3].Outputs = []map[string]any{{"output_type": "stream", "name": "stdout", "text": "hi\n"}}
	// Since the restart: a edited at its start, c deleted, m inserted after d, metadata key.
	theirs := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"k": "v", "trusted": true}, Cells: []Cell{
		cell("x", "ahead"), cell("a", "> A"), cell("b", "B"), cell("d", "D"), cell("m", "after d"),
	}}
	got, st := MergeNotebooks(base, ours, theirs)
	var ids []string
	for _, c := range got.Cells {
		ids = append(ids, c.ID)
	}
	wantIDs := []string{"x", "d", "m", "a", "n"}
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("ids %v, want %v", ids, wantIDs)
	}
	if got.Cells[3].Source != "> A typed" {
		t.Errorf("a: %q, want both sides' typing", got.Cells[3].Source)
	}
	if !nearJSON(got.Metadata, map[string]any{"k": "v", "lang": "py", "trusted": true}) {
		t.Errorf("metadata %v", got.Metadata)
	}
	// c was deleted since the restart after ours gave it an output: theirs wins, reported.
	if st.Conflicts != 1 || len(st.Lost) != 1 || !strings.Contains(st.Lost[0], "cell c") {
		t.Errorf("stats %+v", st)
	}
	// The merge restores a notebook RestoreNotebook accepts.
	if _, err := canonicalNotebook(got); err != nil {
		t.Fatal(err)
	}
}

func TestNearJSON(t *testing.T) {
	if !nearJSON(map[string]any{"x": 0.1}, map[string]any{"x": float64(float32(0.1))}) {
		t.Error("float32 round trip not near")
	}
	if nearJSON(map[string]any{"x": 0.1}, map[string]any{"x": 0.2}) {
		t.Error("different numbers near")
	}
	if !nearJSON([]any{1, "a"}, []any{1.0, "a"}) {
		t.Error("int and float")
	}
}

// Tokens that look alike (as keystrokes of the storm test do: «h0k00310», «h1k00034»): a merge
// by characters could align one side's insert with the other's characters and interleave them;
// by words, slid to boundaries, every token ends up whole and once.
func TestMergeTextSimilarTokensProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 3000; round++ {
		seen := map[string]bool{}
		var base []string
		for i := r.IntN(8); i > 0; i-- {
			tok := fmt.Sprintf("«h%dk%05d»", r.IntN(2), r.IntN(40))
			if !seen[tok] {
				seen[tok] = true
				base = append(base, tok)
			}
		}
		grow := func() ([]string, []string) {
			toks := slices.Clone(base)
			var typed []string
			for i := r.IntN(5); i > 0; i-- {
				tok := fmt.Sprintf("«h%dk%05d»", r.IntN(2), 40+r.IntN(1000))
				if seen[tok] {
					continue
				}
				seen[tok] = true
				toks = slices.Insert(toks, r.IntN(len(toks)+1), tok)
				typed = append(typed, tok)
			}
			return toks, typed
		}
		o, ot := grow()
		th, tt := grow()
		join := func(ts []string) string { return strings.Join(ts, "") }
		got, _ := MergeText(join(base), join(o), join(th))
		for _, tok := range append(append(slices.Clone(base), ot...), tt...) {
			if n := strings.Count(got, tok); n != 1 {
				t.Fatalf("base %q\nours %q\ntheirs %q\nmerge %q: %q %d times", join(base), join(o), join(th), got, tok, n)
			}
		}
	}
}

// Inserts both sides made at one point, one side having gone on from the other (a base older than
// both: a save marker that lags, the file as first joined): what both hold is taken once. Inserts
// that only share a beginning or an end are both kept, whole.
func TestMergeTextInsertsBothHold(t *testing.T) {
	for _, c := range []struct{ base, ours, theirs, want string }{
		{"a", "a b", "a b c", "a b c"},
		{"a x", "a b c x", "a b x", "a b c x"},
		{"a\nz", "a\nU1 U2\nz", "a\nU1 U2 T\nz", "a\nU1 U2 T\nz"},
		{"a\nz", "a\nU1 T\nz", "a\nU1 U2 T\nz", "a\nU1 U2 T\nz"},
		{"«k1»", "«k1»«k2»", "«k1»«k3»", "«k1»«k2»«k3»"},
		{"x", "x«h0k00142»", "x«h1k00596»", "x«h0k00142»«h1k00596»"},
		// The replica held the typing up to a keystroke in the middle of a word (the server was
		// killed between two keys); the tab that reconnected went on from there (found by the
		// real-tab store-deleted crash test: every token typed before the kill was doubled).
		{"# typed:", "# typed:@t0001@@t0002@@t003", "# typed:@t0001@@t0002@@t0035@@t0036@", "# typed:@t0001@@t0002@@t0035@@t0036@"},
		{"# typed:", "# typed:@t0001@@t0002@@t0035@@t0036@", "# typed:@t0001@@t0002@@t003", "# typed:@t0001@@t0002@@t0035@@t0036@"},
	} {
		if got, n := MergeText(c.base, c.ours, c.theirs); got != c.want || n != 0 {
			t.Errorf("MergeText(%q, %q, %q) = %q (%d conflicts), want %q", c.base, c.ours, c.theirs, got, n, c.want)
		}
	}
}
