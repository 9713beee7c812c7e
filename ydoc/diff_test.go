package ydoc

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func seqLines(from, to int, edit func(i int) []string) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		ls := []string{strconv.Itoa(i)}
		if edit != nil {
			ls = edit(i)
		}
		for _, l := range ls {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestDiffTextUnified checks hunks against what GNU diff -u prints for the same inputs.
func TestDiffTextUnified(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		context  int
		want     string
	}{
		{"equal", "a\nb\n", "a\nb\n", 3, ""},
		{"one line", "a\nb\nc\n", "a\nB\nc\n", 1, "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"into empty", "", "x\n", 3, "@@ -0,0 +1 @@\n+x\n"},
		{"to empty", "x\n", "", 3, "@@ -1 +0,0 @@\n-x\n"},
		{"no newlines", "a", "b", 3, "@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"},
		{"newline added", "a\nb", "a\nb\n", 3, "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"merged hunks", seqLines(1, 20, nil), seqLines(1, 20, func(i int) []string {
			switch i {
			case 5:
				return []string{"five"}
			case 10:
				return []string{"10", "new"}
			case 17:
				return []string{"seventeen"}
			}
			return []string{strconv.Itoa(i)}
		}), 3, "@@ -2,19 +2,20 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n 10\n+new\n 11\n 12\n 13\n 14\n 15\n 16\n-17\n+seventeen\n 18\n 19\n 20\n"},
		{"zero context delete", seqLines(1, 10, nil), seqLines(1, 10, func(i int) []string {
			if i == 3 {
				return nil
			}
			return []string{strconv.Itoa(i)}
		}), 0, "@@ -3 +2,0 @@\n-3\n"},
		{"zero context insert", seqLines(1, 10, nil), seqLines(1, 10, func(i int) []string {
			if i == 3 {
				return []string{"3", "ins"}
			}
			return []string{strconv.Itoa(i)}
		}), 0, "@@ -3,0 +4 @@\n+ins\n"},
		{"separate hunks", seqLines(1, 30, nil), seqLines(1, 30, func(i int) []string {
			if i == 2 || i == 29 {
				return []string{"x"}
			}
			return []string{strconv.Itoa(i)}
		}), 2, "@@ -1,4 +1,4 @@\n 1\n-2\n+x\n 3\n 4\n@@ -27,4 +27,4 @@\n 27\n 28\n-29\n+x\n 30\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DiffTextWith(tt.from, tt.to, DiffOptions{Context: tt.context})
			if got := d.Unified(); got != tt.want {
				t.Fatalf("unified diff:\n%s\nwant:\n%s", got, tt.want)
			}
			if d.Empty() != (tt.from == tt.to) {
				t.Fatalf("Empty() = %v", d.Empty())
			}
			checkReapply(t, tt.from, tt.to, d)
		})
	}
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// applyHunks applies a unified diff to from, checking every context and removed line.
func applyHunks(from string, hunks []Hunk) (string, error) {
	a := splitLines(from)
	var out []string
	pos := 0
	for hi, h := range hunks {
		m := hunkHeader.FindStringSubmatch(h.Header)
		if m == nil {
			return "", fmt.Errorf("hunk %d: bad header %q", hi, h.Header)
		}
		num := func(s string) int {
			if s == "" {
				return 1
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		fs, fc, ts, tc := num(m[1]), num(m[2]), num(m[3]), num(m[4])
		if fs != h.FromStart || fc != h.FromCount || ts != h.ToStart || tc != h.ToCount {
			return "", fmt.Errorf("hunk %d: header %q disagrees with %+v", hi, h.Header, h)
		}
		start := fs - 1
		if fc == 0 {
			start = fs
		}
		if start < pos || start > len(a) {
			return "", fmt.Errorf("hunk %d starts at %d, before %d or past %d", hi, start, pos, len(a))
		}
		out = append(out, a[pos:start]...)
		toStart := ts - 1
		if tc == 0 {
			toStart = ts
		}
		if toStart != len(out) {
			return "", fmt.Errorf("hunk %d: +%d but the output has %d lines", hi, ts, len(out))
		}
		pos = start
		nf, nt := 0, 0
		for i := 0; i < len(h.Lines); i++ {
			l := h.Lines[i]
			if l == NoNewlineMarker {
				return "", fmt.Errorf("hunk %d: stray marker at %d", hi, i)
			}
			text := l[1:] + "\n"
			if i+1 < len(h.Lines) && h.Lines[i+1] == NoNewlineMarker {
				text = l[1:]
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(a) || a[pos] != text {
					return "", fmt.Errorf("hunk %d: line %q does not match from line %d", hi, l, pos+1)
				}
				pos++
				nf++
				if l[0] == ' ' {
					out = append(out, text)
					nt++
				}
			case '+':
				out = append(out, text)
				nt++
			default:
				return "", fmt.Errorf("hunk %d: bad line %q", hi, l)
			}
		}
		if nf != fc || nt != tc {
			return "", fmt.Errorf("hunk %d: %d/%d lines, header says %d/%d", hi, nf, nt, fc, tc)
		}
	}
	out = append(out, a[pos:]...)
	return strings.Join(out, ""), nil
}

func checkReapply(t *testing.T, from, to string, d TextDiff) {
	t.Helper()
	got, err := applyHunks(from, d.Hunks)
	if err != nil {
		t.Fatalf("applying the diff of %q -> %q: %v\n%s", from, to, err, d.Unified())
	}
	if got != to {
		t.Fatalf("applying the diff of %q -> %q gives %q\n%s", from, to, got, d.Unified())
	}
}

// lcsLines is a reference LCS length.
func lcsLines(a, b []string) int {
	prev := make([]int, len(b)+1)
	for i := range a {
		cur := make([]int, len(b)+1)
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev = cur
	}
	return prev[len(b)]
}

func randLines(rng *rand.Rand, n int) string {
	alphabet := []string{"a", "b", "c", "d", "e", "", "    return x", "😀 中文"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(alphabet[rng.Intn(len(alphabet))] + "\n")
	}
	if rng.Intn(3) == 0 {
		b.WriteString(alphabet[rng.Intn(len(alphabet))]) // no final newline
	}
	return b.String()
}

func editLines(rng *rand.Rand, s string) string {
	ls := splitLines(s)
	for ops := rng.Intn(6); ops > 0; ops-- {
		i := rng.Intn(len(ls) + 1)
		switch rng.Intn(3) {
		case 0:
			ls = slices.Insert(ls, i, randLines(rng, 1+rng.Intn(3)))
		case 1:
			if i < len(ls) {
				ls = slices.Delete(ls, i, min(len(ls), i+1+rng.Intn(3)))
			}
		case 2:
			if i < len(ls) {
				ls[i] = randLines(rng, 1)
			}
		}
	}
	return strings.Join(ls, "")
}

func TestDiffTextProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for iter := 0; iter < 3000; iter++ {
		from := randLines(rng, rng.Intn(25))
		to := editLines(rng, from)
		if iter%4 == 0 {
			to = randLines(rng, rng.Intn(25))
		}
		if iter%50 == 0 {
			to = from
		}
		ctx := rng.Intn(5)
		d := DiffTextWith(from, to, DiffOptions{Context: ctx})
		checkReapply(t, from, to, d)
		a, b := splitLines(from), splitLines(to)
		if want := len(a) + len(b) - 2*lcsLines(a, b); d.Added+d.Removed != want {
			t.Fatalf("%q -> %q: %d added + %d removed, the shortest script has %d", from, to, d.Added, d.Removed, want)
		}
		if d.Approximate || d.CutLines != 0 || d.Empty() != (from == to) {
			t.Fatalf("%q -> %q: %+v", from, to, d)
		}
		plus, minus := 0, 0
		for _, h := range d.Hunks {
			// Context: at most ctx lines before the first and after the last change of a hunk.
			var body []string
			for _, l := range h.Lines {
				if l != NoNewlineMarker {
					body = append(body, l)
				}
			}
			lead := slices.IndexFunc(body, func(l string) bool { return l[0] != ' ' })
			trail := len(body) - 1
			for trail >= 0 && body[trail][0] == ' ' {
				trail--
			}
			if lead < 0 || lead > ctx || len(body)-1-trail > ctx {
				t.Fatalf("%q -> %q (context %d): hunk %v has %d leading, %d trailing context lines", from, to, ctx, h.Lines, lead, len(body)-1-trail)
			}
			for _, l := range body {
				switch l[0] {
				case '+':
					plus++
				case '-':
					minus++
				}
			}
		}
		if plus != d.Added || minus != d.Removed {
			t.Fatalf("%q -> %q: hunks have +%d -%d, counts say +%d -%d", from, to, plus, minus, d.Added, d.Removed)
		}
		// Truncated diffs are a valid prefix: they apply, and the cut count adds up.
		full := 0
		for _, h := range d.Hunks {
			full += len(h.Lines)
		}
		maxLines := 1 + rng.Intn(8)
		td := DiffTextWith(from, to, DiffOptions{Context: ctx, MaxLines: maxLines})
		shown := 0
		for _, h := range td.Hunks {
			shown += len(h.Lines)
		}
		if shown+td.CutLines != full || shown > maxLines+1 || (full > maxLines+1 && td.CutLines == 0) {
			t.Fatalf("%q -> %q max %d: shown %d + cut %d != %d", from, to, maxLines, shown, td.CutLines, full)
		}
		if td.Added != d.Added || td.Removed != d.Removed {
			t.Fatalf("truncation changed the counts: %+v vs %+v", td, d)
		}
		if _, err := applyHunks(from, td.Hunks); err != nil {
			t.Fatalf("%q -> %q max %d: truncated diff does not apply: %v\n%s", from, to, maxLines, err, td.Unified())
		}
	}
}

func TestDiffTextLarge(t *testing.T) {
	// Far-apart edits in a long text stay exact and cheap.
	from := seqLines(1, 20000, nil)
	to := seqLines(1, 20000, func(i int) []string {
		switch i {
		case 10, 10000, 19990:
			return []string{"changed " + strconv.Itoa(i)}
		}
		return []string{strconv.Itoa(i)}
	})
	d := DiffText(from, to)
	if d.Approximate || d.Added != 3 || d.Removed != 3 || len(d.Hunks) != 3 {
		t.Fatalf("scattered edits: %+v", d)
	}
	checkReapply(t, from, to, d)

	// Texts too different to align within the bound: one block, still exact to apply.
	a := seqLines(1, 3000, func(i int) []string { return []string{"a" + strconv.Itoa(i)} })
	b := seqLines(1, 3000, func(i int) []string { return []string{"b" + strconv.Itoa(i)} })
	a = "head\n" + a + "tail\n"
	b = "head\n" + b + "tail\n"
	d = DiffTextWith(a, b, DiffOptions{Context: 1})
	if !d.Approximate || d.Added != 3000 || d.Removed != 3000 || len(d.Hunks) != 1 {
		t.Fatalf("unrelated texts: approximate %v, +%d -%d, %d hunks", d.Approximate, d.Added, d.Removed, len(d.Hunks))
	}
	checkReapply(t, a, b, d)

	// Capped output.
	d = DiffText(a, b)
	if n := len(d.Hunks[0].Lines); n != DefaultDiffOptions.MaxLines || d.CutLines != 6000+2-n {
		t.Fatalf("capped: %d lines shown, %d cut", n, d.CutLines)
	}
	if !strings.HasSuffix(d.Unified(), fmt.Sprintf("... %d more diff lines\n", d.CutLines)) {
		t.Fatalf("Unified does not mention the cut")
	}
}

func TestDiffTextJSON(t *testing.T) {
	b, err := json.Marshal(DiffText("a\nb\n", "a\nc\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"added":1,"removed":1,"hunks":[{"header":"@@ -1,2 +1,2 @@","lines":[" a","-b","+c"]}]}`; string(b) != want {
		t.Fatalf("json = %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(DiffText("x", "x")); string(b) != `{}` {
		t.Fatalf("empty diff json = %s", b)
	}
}

func diffBase() Notebook {
	return Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"kernelspec": map[string]any{"name": "python3"}}, Cells: []Cell{
		{ID: "c0", Type: CellCode, Source: "import os\n", ExecutionCount: intp(1), Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": []any{"a", "\n"}}}},
		{ID: "c1", Type: CellMarkdown, Source: "# Title\n", Metadata: map[string]any{"tags": []any{"x"}}},
		{ID: "c2", Type: CellCode, Source: "x = 1\n"},
		{ID: "c3", Type: CellRaw, Source: "raw"},
		{ID: "c4", Type: CellCode, Source: "y = 2\n"},
	}}
}

func TestDiffNotebooks(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(nb *Notebook)
		summary string
		check   func(t *testing.T, d NotebookDiff)
	}{
		{"identical", func(nb *Notebook) {}, "no changes", nil},
		{"nil and empty alike", func(nb *Notebook) {
			nb.Cells[2].Outputs = []map[string]any{}
			nb.Cells[2].Metadata = map[string]any{}
			nb.Cells[0].Outputs[0]["text"] = "a\n" // joined stream text
			nb.Cells[0].ExecutionState = "running"
			nb.Cells[1].Outputs = []map[string]any{{"output_type": "stream"}} // not kept for markdown
		}, "no changes", nil},
		{"added", func(nb *Notebook) {
			nb.Cells = slices.Insert(nb.Cells, 1, Cell{ID: "n1", Type: CellCode, Source: "new()\n"})
			nb.Cells = append(nb.Cells, Cell{ID: "n2", Type: CellMarkdown, Source: "end"})
		}, "2 cells added", func(t *testing.T, d NotebookDiff) {
			if len(d.Added) != 2 || d.Added[0] != (CellEntry{ID: "n1", Index: 1, Type: CellCode, Source: "new()\n"}) || d.Added[1].Index != 6 {
				t.Errorf("added = %+v", d.Added)
			}
			if len(d.Moved) != 0 {
				t.Errorf("insertions reported as moves: %+v", d.Moved)
			}
		}},
		{"removed", func(nb *Notebook) { nb.Cells = slices.Delete(nb.Cells, 1, 2) }, "1 cell removed", func(t *testing.T, d NotebookDiff) {
			if len(d.Removed) != 1 || d.Removed[0].ID != "c1" || d.Removed[0].Index != 1 || d.Removed[0].Source != "# Title\n" {
				t.Errorf("removed = %+v", d.Removed)
			}
		}},
		{"moved", func(nb *Notebook) { nb.Cells = append(nb.Cells[1:], nb.Cells[0]) }, "1 cell moved", func(t *testing.T, d NotebookDiff) {
			if len(d.Moved) != 1 || d.Moved[0] != (CellMove{ID: "c0", From: 0, To: 4}) {
				t.Errorf("moved = %+v", d.Moved)
			}
		}},
		{"edited", func(nb *Notebook) {
			nb.Cells[1].Source = "# New title\n"
			nb.Cells[2].Metadata = map[string]any{"collapsed": true}
			nb.Cells[0].Outputs = nil
			nb.Cells[0].ExecutionCount = nil
			nb.Cells[3].Type = CellMarkdown
		}, "4 cells edited (c0: outputs, execution_count; c1: source; c2: metadata; c3: cell_type)",
			func(t *testing.T, d NotebookDiff) {
				c0, c1 := d.Changed[0], d.Changed[1]
				if *c0.Outputs != (FromTo[int]{1, 0}) || c0.ExecutionCount.From == nil || *c0.ExecutionCount.From != 1 || c0.ExecutionCount.To != nil {
					t.Errorf("c0 = %+v", c0)
				}
				if c1.Source == nil || c1.Source.Unified() != "@@ -1 +1 @@\n-# Title\n+# New title\n" {
					t.Errorf("c1 source = %+v", c1.Source)
				}
				if !slices.Equal(d.Changed[2].Metadata, []string{"collapsed"}) || *d.Changed[3].Type != (FromTo[string]{CellRaw, CellMarkdown}) {
					t.Errorf("changed = %+v", d.Changed)
				}
			}},
		{"notebook metadata", func(nb *Notebook) {
			nb.Metadata = map[string]any{"kernelspec": map[string]any{"name": "python3"}, "language_info": map[string]any{}}
			nb.NBFormatMinor = 4
		}, "nbformat 4.5 -> 4.4; notebook metadata changed (language_info)", nil},
		{"everything", func(nb *Notebook) {
			c2 := nb.Cells[2]
			c2.Source = "x = 2\n"
			nb.Cells = []Cell{nb.Cells[0], {ID: "n0", Type: CellCode}, nb.Cells[4], nb.Cells[1], c2, {ID: "n1", Type: CellRaw}}
			nb.Metadata = nil
		}, "2 cells added, 1 removed, 1 edited (c2: source), 1 moved; notebook metadata changed (kernelspec)", func(t *testing.T, d NotebookDiff) {
			if len(d.Moved) != 1 || d.Moved[0].ID != "c4" || d.Moved[0].From != 4 || d.Moved[0].To != 2 {
				t.Errorf("moved = %+v", d.Moved)
			}
			if d.Changed[0].Index != 4 {
				t.Errorf("changed index = %d, want the index in to", d.Changed[0].Index)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			to := diffBase()
			tt.edit(&to)
			d := DiffNotebooks(diffBase(), to)
			if got := d.Summary(); got != tt.summary {
				t.Errorf("summary = %q\nwant      %q", got, tt.summary)
			}
			if d.Empty() != (tt.summary == "no changes") {
				t.Errorf("Empty() = %v", d.Empty())
			}
			if tt.check != nil {
				tt.check(t, d)
			}
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if d.Empty() && string(b) != "{}" {
				t.Errorf("empty diff json = %s", b)
			}
			var back NotebookDiff
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("unmarshal %s: %v", b, err)
			}
			if back.Summary() != d.Summary() {
				t.Errorf("summary after a JSON round trip: %q", back.Summary())
			}
		})
	}
}

func TestDiffNotebooksJSONShape(t *testing.T) {
	to := diffBase()
	to.Cells[1].Source = "# T\n"
	to.Cells[0].ExecutionCount = intp(2)
	to.Cells = append(to.Cells[:4], Cell{ID: "n", Type: CellMarkdown, Source: "hi"})
	b, err := json.Marshal(DiffNotebooks(diffBase(), to))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"added":[{"id":"n","index":4,"cell_type":"markdown","source":"hi"}],` +
		`"removed":[{"id":"c4","index":4,"cell_type":"code","source":"y = 2\n"}],` +
		`"changed":[{"id":"c0","index":0,"fields":["execution_count"],"execution_count":{"from":1,"to":2}},` +
		`{"id":"c1","index":1,"fields":["source"],"source":{"added":1,"removed":1,"hunks":[{"header":"@@ -1 +1 @@","lines":["-# Title","+# T"]}]}}]}`
	if string(b) != want {
		t.Fatalf("json:\n%s\nwant\n%s", b, want)
	}
}

func TestDiffNotebooksSummaryCap(t *testing.T) {
	from, to := Notebook{}, Notebook{}
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("c%d", i)
		from.Cells = append(from.Cells, Cell{ID: id, Type: CellCode, Source: "a"})
		to.Cells = append(to.Cells, Cell{ID: id, Type: CellCode, Source: "b"})
	}
	want := "8 cells edited (c0: source; c1: source; c2: source; c3: source; c4: source; 3 more)"
	if got := DiffNotebooks(from, to).Summary(); got != want {
		t.Fatalf("summary = %q", got)
	}
}

func TestDiffNotebooksAddedSourceCap(t *testing.T) {
	to := Notebook{Cells: []Cell{{ID: "big", Type: CellCode, Source: seqLines(1, 10, nil)}}}
	d := DiffNotebooksWith(Notebook{}, to, DiffOptions{Context: 3, MaxLines: 4})
	if e := d.Added[0]; e.Source != "1\n2\n3\n4\n" || e.CutLines != 6 {
		t.Fatalf("added = %+v", e)
	}
}

func TestDiffNotebooksWithoutIDs(t *testing.T) {
	// nbformat 4.4 files have no cell ids: cells are matched by content, and edits in place
	// are paired by position.
	strip := func(nb Notebook) Notebook {
		nb.Cells = slices.Clone(nb.Cells)
		for i := range nb.Cells {
			nb.Cells[i].ID = ""
		}
		return nb
	}
	from := strip(diffBase())
	to := strip(diffBase())
	to.Cells[2].Source = "x = 10\n"
	to.Cells = slices.Delete(to.Cells, 3, 4)
	to.Cells = slices.Insert(to.Cells, 0, Cell{Type: CellMarkdown, Source: "intro"})
	d := DiffNotebooks(from, to)
	if got, want := d.Summary(), "1 cell added, 1 removed, 1 edited (#3: source)"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
	if d.Removed[0].Index != 3 || d.Added[0].Index != 0 {
		t.Fatalf("diff = %+v", d)
	}
	// With ids on one side only (a 4.4 file against a live notebook), content still matches.
	if d := DiffNotebooks(from, diffBase()); !d.Empty() {
		t.Fatalf("4.4 vs 4.5 of the same cells: %s", d.Summary())
	}
	// Duplicate ids: the second use is matched by content.
	dup := diffBase()
	dup.Cells[4].ID = "c0"
	if d := DiffNotebooks(dup, dup); !d.Empty() {
		t.Fatalf("duplicate ids: %s", d.Summary())
	}
}

func TestDiffNotebooksIdenticalProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for iter := 0; iter < 300; iter++ {
		a := randNotebook(rng, 0)
		if iter%3 == 0 { // some cells without ids
			for i := range a.Cells {
				if rng.Intn(2) == 0 {
					a.Cells[i].ID = ""
				}
			}
		}
		if d := DiffNotebooks(a, a); !d.Empty() {
			t.Fatalf("iteration %d: a notebook differs from itself: %s", iter, d.Summary())
		}
		b := related(rng, a)
		d := DiffNotebooks(a, b)
		if d.Empty() != (DiffNotebooks(b, a).Empty()) {
			t.Fatalf("iteration %d: Empty is not symmetric", iter)
		}
		rev := DiffNotebooks(b, a)
		if len(d.Added) != len(rev.Removed) || len(d.Removed) != len(rev.Added) || len(d.Changed) != len(rev.Changed) || len(d.Moved) != len(rev.Moved) {
			t.Fatalf("iteration %d: %s vs reverse %s", iter, d.Summary(), rev.Summary())
		}
		for _, c := range d.Changed {
			if c.Source != nil {
				var fromSrc, toSrc string
				for _, x := range a.Cells {
					if x.ID == c.ID {
						fromSrc = x.Source
					}
				}
				toSrc = b.Cells[c.Index].Source
				full := DiffTextWith(fromSrc, toSrc, DiffOptions{Context: 3})
				checkReapply(t, fromSrc, toSrc, full)
			}
		}
	}
}

func TestDiffNotebooksValueForms(t *testing.T) {
	// Values that the document model stores alike compare equal.
	a := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"n": json.Number("3"), "l": []string{"x"}}, Cells: []Cell{
		{ID: "c", Type: CellCode, Metadata: map[string]any{"w": int64(10), "f": float32(0.5)}, Outputs: []map[string]any{
			{"output_type": "display_data", "data": map[string]any{"text/plain": "x"}, "metadata": map[string]string{}},
		}},
	}}
	b := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"n": 3.0, "l": []any{"x"}}, Cells: []Cell{
		{ID: "c", Type: CellCode, Metadata: map[string]any{"w": 10, "f": 0.5}, Outputs: []map[string]any{
			{"output_type": "display_data", "data": map[string]any{"text/plain": "x"}, "metadata": map[string]any{}},
		}},
	}}
	if d := DiffNotebooks(a, b); !d.Empty() {
		t.Fatalf("diff = %s", d.Summary())
	}
}
