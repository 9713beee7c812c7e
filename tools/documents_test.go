package tools_test

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

const docPath = "doc.txt"

// uniText mixes characters outside the BMP (two UTF-16 units each: 👋, the flag's two regional
// indicators, 𝒳) and combining sequences (e + U+0301 is two code points).
const uniText = "héllo 👋 wörld\ne\u0301 café 🇫🇷 end\n𝒳 last\n"

func docEnv(t *testing.T, text string) *env {
	t.Helper()
	e := newEnv(t, []bridgetest.File{textFile(docPath, text), nbFile("nb.ipynb", notebook(code("c0", "x")))})
	e.ok("get_document", map[string]any{"path": docPath})
	return e
}

// cp returns the code point offset of the first occurrence of sub in s.
func cp(t *testing.T, s, sub string) int {
	t.Helper()
	i := strings.Index(s, sub)
	if i < 0 {
		t.Fatalf("%q not in %q", sub, s)
	}
	return utf8.RuneCountInString(s[:i])
}

// refOp is one operation for the reference implementation: replace [pos, pos+len) by ins.
type refOp struct {
	pos, len int
	ins      string
}

// applyRef applies non-overlapping operations given in code points of the original text, with
// insertions at one position kept in the order given.
func applyRef(text string, ops []refOp) string {
	r := []rune(text)
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ops[idx[a]].pos < ops[idx[b]].pos })
	var b strings.Builder
	at := 0
	for _, i := range idx {
		op := ops[i]
		b.WriteString(string(r[at:op.pos]))
		b.WriteString(op.ins)
		at = op.pos + op.len
	}
	b.WriteString(string(r[at:]))
	return b.String()
}

func TestGetDocument(t *testing.T) {
	e := docEnv(t, uniText)
	body := e.ok("get_document", map[string]any{"path": docPath})
	if body["content"] != uniText {
		t.Errorf("content = %q", body["content"])
	}
	if num(t, body["length"]) != utf8.RuneCountInString(uniText) {
		t.Errorf("length = %v, want %d code points", body["length"], utf8.RuneCountInString(uniText))
	}
	if num(t, body["line_count"]) != 3 {
		t.Errorf("line_count = %v, want 3", body["line_count"])
	}
	if str(body["version"]) == "" || body["path"] != docPath {
		t.Errorf("version/path = %v/%v", body["version"], body["path"])
	}
	if asMap(t, body["collaboration"])["status"] != "synced" {
		t.Errorf("collaboration = %v", body["collaboration"])
	}
	if _, ok := body["truncated"]; ok {
		t.Errorf("truncated: %v", body["truncated"])
	}
	body = e.ok("get_document", map[string]any{"path": docPath, "include_collaboration_state": false})
	if _, ok := body["collaboration"]; ok {
		t.Error("collaboration present with include_collaboration_state=false")
	}
}

func TestGetDocumentLineRange(t *testing.T) {
	e := docEnv(t, uniText)
	lines := strings.SplitAfter(uniText, "\n")
	body := e.ok("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"start": 2, "end": 3}})
	if body["content"] != lines[1]+lines[2] {
		t.Errorf("lines 2..3 = %q", body["content"])
	}
	if lr := asMap(t, body["lines"]); num(t, lr["start"]) != 2 || num(t, lr["end"]) != 3 {
		t.Errorf("lines = %v", lr)
	}
	body = e.ok("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"start": 2}})
	if body["content"] != lines[1]+lines[2] {
		t.Errorf("lines 2.. = %q", body["content"])
	}
	body = e.ok("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"end": 1}})
	if body["content"] != lines[0] {
		t.Errorf("lines ..1 = %q", body["content"])
	}
	body = e.ok("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"start": 3, "end": 99}})
	if body["content"] != lines[2] {
		t.Errorf("lines 3..99 = %q", body["content"])
	}
	r := e.fail("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"start": 4}})
	mustContain(t, "start past the end", findDetail(t, r, "line_range", "start").msg, "4", "3 lines")
	r = e.fail("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"start": 3, "end": 2}})
	findDetail(t, r, "line_range", "end")
	r = e.fail("get_document", map[string]any{"path": docPath, "line_range": map[string]any{"start": 0}})
	findDetail(t, r, "line_range", "start")
}

func TestGetDocumentTruncationPages(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "line %02d ü👋 %s\n", i, strings.Repeat("·", i%9))
	}
	text := b.String()
	e := docEnv(t, text)
	var got strings.Builder
	args := map[string]any{"path": docPath, "max_content_length": 150, "include_collaboration_state": false}
	pages := 0
	for {
		pages++
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		body := e.ok("get_document", args)
		content := str(body["content"])
		if content == "" {
			t.Fatalf("page %d is empty: %v", pages, body)
		}
		if n := utf8.RuneCountInString(content); n > 150 {
			t.Errorf("page %d has %d characters, over max_content_length", pages, n)
		}
		if !strings.HasSuffix(content, "\n") {
			t.Errorf("page %d is not cut at a line boundary: %q", pages, content)
		}
		got.WriteString(content)
		tr, ok := body["truncated"]
		if !ok {
			break
		}
		nc := asMap(t, asMap(t, asMap(t, tr)["next_call"])["line_range"])
		rl := asMap(t, asMap(t, tr)["returned_lines"])
		if num(t, nc["start"]) != num(t, rl["end"])+1 {
			t.Errorf("page %d: returned %v, next_call %v", pages, rl, nc)
		}
		args["line_range"] = nc
	}
	if got.String() != text {
		t.Errorf("pages concatenated differ from the text:\n%q\nwant\n%q", got.String(), text)
	}
	if pages < 5 {
		t.Errorf("%d pages", pages)
	}
}

// A line longer than max_content_length can only be shown cut; the result must say so.
func TestGetDocumentHugeLineIsReportedTruncated(t *testing.T) {
	e := docEnv(t, strings.Repeat("z", 500))
	body := e.ok("get_document", map[string]any{"path": docPath, "max_content_length": 100})
	content := str(body["content"])
	if !strings.HasPrefix(content, strings.Repeat("z", 100)) || strings.HasPrefix(content, strings.Repeat("z", 101)) {
		t.Errorf("huge line not cut at 100: %d characters", len(content))
	}
	mustContain(t, "cut line", content, "400 more characters")
	if _, ok := body["truncated"]; !ok {
		t.Error("BUG: get_document cuts a line longer than max_content_length but reports no \"truncated\" (next = i+1 makes next > last for the last line; documents.go getDocument), so a caller reading structured fields cannot tell the content is incomplete")
	}
}

func TestTextInsertCodePoints(t *testing.T) {
	e := docEnv(t, uniText)
	afterWave := cp(t, uniText, "👋") + 1
	afterE := cp(t, uniText, "e\u0301") + 1 // between e and its combining accent
	flag := cp(t, uniText, "🇫🇷")
	ops := []any{
		map[string]any{"text": "[0]", "position": 0},
		map[string]any{"text": "[wave]", "position": afterWave},
		map[string]any{"text": "[e]", "position": afterE},
		map[string]any{"text": "[mid-flag]", "position": flag + 1},
		map[string]any{"text": "[end]", "position": -1},
		map[string]any{"text": "[end2]", "position": -1},
	}
	body := e.ok("batch_insert_text", map[string]any{"path": docPath, "operations": ops})
	want := applyRef(uniText, []refOp{{0, 0, "[0]"}, {afterWave, 0, "[wave]"}, {afterE, 0, "[e]"}, {flag + 1, 0, "[mid-flag]"},
		{utf8.RuneCountInString(uniText), 0, "[end]"}, {utf8.RuneCountInString(uniText), 0, "[end2]"}})
	if got := e.serverText(docPath); got != want {
		t.Errorf("server text:\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(want, "👋[wave]") || !strings.Contains(want, "e[e]\u0301") || !strings.HasSuffix(want, "[end][end2]") {
		t.Fatalf("reference is wrong: %q", want)
	}
	if num(t, body["applied"]) != 6 || num(t, body["length"]) != utf8.RuneCountInString(want) || str(body["version"]) == "" {
		t.Errorf("result = %v", body)
	}
	if got := str(e.ok("get_document", map[string]any{"path": docPath})["content"]); got != want {
		t.Errorf("get_document after the insert = %q", got)
	}
}

func TestTextInsertSamePositionKeepsOrder(t *testing.T) {
	e := docEnv(t, "ab👋cd")
	e.ok("batch_insert_text", map[string]any{"path": docPath, "operations": []any{
		map[string]any{"text": "1", "position": 3},
		map[string]any{"text": "2", "position": 3},
		map[string]any{"text": "0", "position": 1},
	}})
	if got := e.serverText(docPath); got != "a0b👋12cd" {
		t.Errorf("server text %q, want %q", got, "a0b👋12cd")
	}
}

func TestTextDeleteCodePoints(t *testing.T) {
	e := docEnv(t, uniText)
	wave := cp(t, uniText, "👋")
	flag := cp(t, uniText, "🇫🇷")
	accent := cp(t, uniText, "\u0301")
	x := cp(t, uniText, "𝒳")
	body := e.ok("batch_delete_text", map[string]any{"path": docPath, "operations": []any{
		map[string]any{"position": flag, "length": 2},
		map[string]any{"position": wave, "length": 2}, // the emoji and the space after it
		map[string]any{"position": accent, "length": 1},
		map[string]any{"position": x, "length": 1},
	}})
	want := applyRef(uniText, []refOp{{flag, 2, ""}, {wave, 2, ""}, {accent, 1, ""}, {x, 1, ""}})
	if want != "héllo wörld\ne café  end\n last\n" {
		t.Fatalf("reference is wrong: %q", want)
	}
	if got := e.serverText(docPath); got != want {
		t.Errorf("server text %q, want %q", got, want)
	}
	if num(t, body["length"]) != utf8.RuneCountInString(want) {
		t.Errorf("length = %v", body["length"])
	}
	// Deleting to the very end.
	n := utf8.RuneCountInString(want)
	e.ok("batch_delete_text", map[string]any{"path": docPath, "operations": []any{map[string]any{"position": n - 6, "length": 6}}})
	if got := e.serverText(docPath); got != "héllo wörld\ne café  end\n" {
		t.Errorf("server text %q", got)
	}
}

func TestTextUpdateDocument(t *testing.T) {
	e := docEnv(t, uniText)
	wave := cp(t, uniText, "👋")
	flag := cp(t, uniText, "🇫🇷")
	n := utf8.RuneCountInString(uniText)
	e.ok("batch_update_document", map[string]any{"path": docPath, "operations": []any{
		map[string]any{"position": wave, "length": 1, "content": "🌍🌍"},
		map[string]any{"position": flag, "length": 2, "content": "FR"},
		map[string]any{"position": 0, "length": 5, "content": "HELLO"},
		map[string]any{"content": "appended\n"},                        // position -1, length 0 by default
		map[string]any{"position": n - 5, "length": 4},                 // delete "last" (content defaults to "")
		map[string]any{"position": 5, "length": 0, "content": "<ins>"}, // insertion where the replaced "héllo" ends
	}})
	want := applyRef(uniText, []refOp{{wave, 1, "🌍🌍"}, {flag, 2, "FR"}, {0, 5, "HELLO"}, {n, 0, "appended\n"}, {n - 5, 4, ""}, {5, 0, "<ins>"}})
	if got := e.serverText(docPath); got != want {
		t.Errorf("server text:\n%q\nwant\n%q", got, want)
	}
	if !strings.HasPrefix(want, "HELLO<ins> 🌍🌍 wörld") || !strings.Contains(want, "FR end\n𝒳 \nappended\n") {
		t.Fatalf("reference is wrong: %q", want)
	}
}

func TestTextRandomBatchesMatchReference(t *testing.T) {
	alphabet := []rune("ab\n é👋\u0301🇫𝒳ü")
	rng := rand.New(rand.NewSource(7))
	randText := func(n int) string {
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return string(r)
	}
	text := randText(80)
	e := docEnv(t, text)
	for round := 0; round < 15; round++ {
		n := utf8.RuneCountInString(text)
		// Disjoint ranges: pick sorted cut points and use some of the gaps.
		var ops []refOp
		at := 0
		for at < n && len(ops) < 6 {
			start := at + rng.Intn(min(8, n-at)+1)
			if start > n {
				break
			}
			length := 0
			if start < n && rng.Intn(2) == 0 {
				length = 1 + rng.Intn(min(4, n-start))
			}
			ops = append(ops, refOp{start, length, randText(rng.Intn(4))})
			at = start + length + 1
		}
		rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
		var args []any
		for _, op := range ops {
			args = append(args, map[string]any{"position": op.pos, "length": op.len, "content": op.ins})
		}
		if len(args) == 0 {
			continue
		}
		e.ok("batch_update_document", map[string]any{"path": docPath, "operations": args})
		text = applyRef(text, ops)
		if got := e.serverText(docPath); got != text {
			t.Fatalf("round %d: ops %+v\nserver %q\nwant   %q", round, ops, got, text)
		}
	}
}

func TestTextRefusalsChangeNothing(t *testing.T) {
	e := docEnv(t, uniText)
	n := utf8.RuneCountInString(uniText)
	for _, tc := range []struct {
		name string
		tool string
		ops  []any
		path []any
		says []string
	}{
		{"overlapping deletes", "batch_delete_text", []any{
			map[string]any{"position": 2, "length": 3}, map[string]any{"position": 4, "length": 3}},
			[]any{"operations", 1}, []string{"overlaps", "0"}},
		{"overlapping deletes given backwards", "batch_delete_text", []any{
			map[string]any{"position": 4, "length": 3}, map[string]any{"position": 2, "length": 3}},
			[]any{"operations"}, []string{"overlap"}},
		{"same range twice", "batch_delete_text", []any{
			map[string]any{"position": 0, "length": 1}, map[string]any{"position": 5, "length": 2}, map[string]any{"position": 5, "length": 2}},
			[]any{"operations"}, []string{"overlap"}},
		{"insertion inside a replaced range", "batch_update_document", []any{
			map[string]any{"position": 2, "length": 4, "content": "x"}, map[string]any{"position": 3, "content": "y"}},
			[]any{"operations", 1}, []string{"overlap"}},
		{"overlapping replacements", "batch_update_document", []any{
			map[string]any{"position": 0, "length": 5, "content": "x"}, map[string]any{"position": 4, "length": 5, "content": "y"}},
			[]any{"operations", 1}, []string{"overlap"}},
		{"insert past the end", "batch_insert_text", []any{
			map[string]any{"text": "ok", "position": 0}, map[string]any{"text": "x", "position": n + 1}},
			[]any{"operations", 1, "position"}, []string{fmt.Sprint(n + 1), fmt.Sprint(n)}},
		{"delete past the end", "batch_delete_text", []any{
			map[string]any{"position": 0, "length": 1}, map[string]any{"position": n - 1, "length": 2}},
			[]any{"operations", 1, "length"}, []string{fmt.Sprint(n)}},
		{"delete starting past the end", "batch_delete_text", []any{map[string]any{"position": n, "length": 1}},
			[]any{"operations", 0}, nil},
		{"replace past the end", "batch_update_document", []any{map[string]any{"position": n + 3, "content": "x"}},
			[]any{"operations", 0, "position"}, nil},
		{"append with a length", "batch_update_document", []any{map[string]any{"position": -1, "length": 2, "content": "x"}},
			[]any{"operations", 0, "length"}, []string{"-1"}},
		{"zero-length delete", "batch_delete_text", []any{map[string]any{"position": 0, "length": 0}},
			[]any{"operations", 0, "length"}, []string{"at least 1"}},
		{"insert with a length field", "batch_insert_text", []any{map[string]any{"text": "x", "position": 0, "length": 1}},
			[]any{"operations", 0, "length"}, []string{"unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.fail(tc.tool, map[string]any{"path": docPath, "operations": tc.ops})
			var d detail
			found := false
			for _, x := range details(r) {
				if len(x.path) >= len(tc.path) && (detail{path: x.path[:len(tc.path)]}).pathIs(tc.path...) {
					d, found = x, true
				}
			}
			if !found {
				t.Fatalf("no detail under %v: %s", tc.path, r)
			}
			mustContain(t, "detail", d.msg, tc.says...)
			if got := e.serverText(docPath); got != uniText {
				t.Fatalf("the server text changed: %q", got)
			}
		})
	}
}

// An insertion exactly at the start of a deleted range touches no deleted character; whether
// it is accepted must not depend on the order the operations are listed in.
func TestTextInsertAtRangeStartOrderIndependent(t *testing.T) {
	e := docEnv(t, "0123456789")
	first := e.call("batch_update_document", map[string]any{"path": docPath, "operations": []any{
		map[string]any{"position": 2, "length": 3, "content": ""}, map[string]any{"position": 2, "content": "X"}}})
	text1 := e.serverText(docPath)
	e2 := docEnv(t, "0123456789")
	second := e2.call("batch_update_document", map[string]any{"path": docPath, "operations": []any{
		map[string]any{"position": 2, "content": "X"}, map[string]any{"position": 2, "length": 3, "content": ""}}})
	if first.IsError != second.IsError {
		t.Errorf("BUG: planText's overlap check depends on operation order: [delete 2..5, insert@2] isError=%v, [insert@2, delete 2..5] isError=%v (sort.SliceStable by start keeps a zero-length op after a range at the same start, then b.start < a.end flags it; documents.go planText). texts %q / %q",
			first.IsError, second.IsError, text1, e2.serverText(docPath))
	}
}

func TestTextConflictAfterHumanEdit(t *testing.T) {
	e := docEnv(t, "alpha beta gamma\n")
	v := str(e.ok("get_document", map[string]any{"path": docPath})["version"])
	e.humanEdit(docPath, ydoc.KindText, func(tx *ydoc.Txn) error { return tx.InsertText(0, "human: ") })
	before := e.serverText(docPath)
	for _, tc := range []struct {
		tool string
		op   map[string]any
	}{
		{"batch_insert_text", map[string]any{"text": "X", "position": 6}},
		{"batch_delete_text", map[string]any{"position": 6, "length": 4}},
		{"batch_update_document", map[string]any{"position": 6, "length": 4, "content": "BETA"}},
	} {
		r := e.fail(tc.tool, map[string]any{"path": docPath, "expected_version": v, "operations": []any{tc.op}})
		mustContain(t, tc.tool+" conflict", errorText(r), "conflict", "nothing was modified")
		if str(r.Body["current_version"]) == "" || r.Body["current_version"] == v {
			t.Errorf("current_version = %v", r.Body["current_version"])
		}
		if got := e.serverText(docPath); got != before {
			t.Fatalf("%s changed the text despite the conflict: %q", tc.tool, got)
		}
	}
	r := e.fail("batch_insert_text", map[string]any{"path": docPath, "expected_version": "nonsense", "operations": []any{map[string]any{"text": "X", "position": 0}}})
	mustContain(t, "bad version", errorText(r), "nonsense")
	// With the current version the edit goes through.
	cur := str(e.ok("get_document", map[string]any{"path": docPath})["version"])
	body := e.ok("batch_update_document", map[string]any{"path": docPath, "expected_version": cur, "operations": []any{
		map[string]any{"position": 13, "length": 4, "content": "BETA"}}})
	if got := e.serverText(docPath); got != "human: alpha BETA gamma\n" {
		t.Errorf("server text %q", got)
	}
	// The version an edit returns is good for the next edit.
	e.ok("batch_insert_text", map[string]any{"path": docPath, "expected_version": body["version"], "operations": []any{
		map[string]any{"text": "!", "position": -1}}})
	if got := e.serverText(docPath); got != "human: alpha BETA gamma\n!" {
		t.Errorf("server text %q", got)
	}
}

func TestTextToolsRefuseNotebooks(t *testing.T) {
	e := docEnv(t, "x")
	e.nbVersion("nb.ipynb")
	r := e.fail("get_document", map[string]any{"path": "nb.ipynb"})
	mustContain(t, "notebook as text", errorText(r), "not a text file")
	r = e.fail("batch_insert_text", map[string]any{"path": "nb.ipynb", "operations": []any{map[string]any{"text": "x", "position": 0}}})
	mustContain(t, "notebook as text", errorText(r), "not a text file")
	if got := e.serverNotebook("nb.ipynb").Cells[0].Source; got != "x" {
		t.Errorf("notebook changed: %q", got)
	}
}

func TestTextEmptyDocument(t *testing.T) {
	e := docEnv(t, "")
	body := e.ok("get_document", map[string]any{"path": docPath})
	if body["content"] != "" || num(t, body["length"]) != 0 || num(t, body["line_count"]) != 0 {
		t.Errorf("empty document read as %v", body)
	}
	e.ok("batch_insert_text", map[string]any{"path": docPath, "operations": []any{map[string]any{"text": "first 👋", "position": 0}}})
	e.ok("batch_update_document", map[string]any{"path": docPath, "operations": []any{map[string]any{"content": "\nsecond"}}})
	if got := e.serverText(docPath); got != "first 👋\nsecond" {
		t.Errorf("server text %q", got)
	}
	body = e.ok("get_document", map[string]any{"path": docPath})
	if num(t, body["line_count"]) != 2 || num(t, body["length"]) != 14 {
		t.Errorf("line_count/length = %v/%v", body["line_count"], body["length"])
	}
}
