package tools_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// pngBase64 is a real 4x3 PNG, base64-encoded as nbformat stores it.
func pngBase64(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for x := 0; x < 4; x++ {
		for y := 0; y < 3; y++ {
			img.Set(x, y, color.RGBA{R: uint8(60 * x), G: uint8(80 * y), B: 200, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

const richPath = "rich.ipynb"

// richNotebook has a code cell with every kind of output, a markdown cell, a raw cell and an
// empty code cell.
func richNotebook(t *testing.T) (ydoc.Notebook, string) {
	t.Helper()
	b64 := pngBase64(t)
	three := 3
	long := strings.Repeat("x", 5000)
	cells := []ydoc.Cell{
		{ID: "c-code", Type: ydoc.CellCode, Source: "print('hi')\nplot()", ExecutionCount: &three,
			Metadata: map[string]any{"tags": []any{"keep"}},
			Outputs: []map[string]any{
				{"output_type": "stream", "name": "stdout", "text": "hi \x1b[32mgreen\x1b[0m\n"},
				{"output_type": "stream", "name": "stderr", "text": long},
				{"output_type": "display_data", "metadata": map[string]any{}, "data": map[string]any{
					"image/png": b64, "text/plain": "<Figure size 4x3>",
				}},
				{"output_type": "error", "ename": "ValueError", "evalue": "bad \x1b[31mthing\x1b[0m", "traceback": []any{
					"\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
					"\x1b[0;31mValueError\x1b[0m                                Traceback (most recent call last)",
					"Cell \x1b[0;32mIn[3], line 2\x1b[0m\n\x1b[1;32m----> 2\x1b[0m plot()",
				}},
				{"output_type": "execute_result", "execution_count": 3, "metadata": map[string]any{}, "data": map[string]any{
					"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "   a\n0  1",
				}},
			}},
		{ID: "c-md", Type: ydoc.CellMarkdown, Source: "intro\n# Heading\nbody"},
		{ID: "c-raw", Type: ydoc.CellRaw, Source: "raw text"},
		{ID: "c-empty", Type: ydoc.CellCode, Source: "", Outputs: []map[string]any{}},
	}
	return notebook(cells...), b64
}

func richEnv(t *testing.T) (*env, string) {
	nb, b64 := richNotebook(t)
	return newEnv(t, []bridgetest.File{nbFile(richPath, nb)}), b64
}

func TestGetNotebookJSON(t *testing.T) {
	e, b64 := richEnv(t)
	r := e.call("get_notebook", map[string]any{"format": "json", "path": richPath})
	if r.IsError {
		t.Fatalf("get_notebook: %s", r)
	}
	body := r.Body
	if body["path"] != richPath || num(t, body["cell_count"]) != 4 {
		t.Errorf("path/cell_count = %v/%v", body["path"], body["cell_count"])
	}
	if str(body["version"]) == "" {
		t.Error("no version")
	}
	if _, ok := body["truncated"]; ok {
		t.Errorf("a small notebook was truncated: %v", body["truncated"])
	}
	collab := asMap(t, body["collaboration"])
	if collab["status"] != "synced" {
		t.Errorf("collaboration status = %v", collab["status"])
	}
	if _, ok := collab["collaborators"].([]any); !ok {
		t.Errorf("collaborators = %v, want a list", collab["collaborators"])
	}
	cells := cellsOf(t, body)
	wantIDs(t, "get_notebook", idsOf(cells), []string{"c-code", "c-md", "c-raw", "c-empty"})
	wantTypes := []string{"code", "markdown", "raw", "code"}
	nb, _ := richNotebook(t)
	for i, c := range cells {
		if num(t, c["index"]) != i {
			t.Errorf("cell %d: index %v", i, c["index"])
		}
		if c["cell_type"] != wantTypes[i] {
			t.Errorf("cell %d: cell_type %v, want %s", i, c["cell_type"], wantTypes[i])
		}
		if c["source"] != nb.Cells[i].Source {
			t.Errorf("cell %d: source %q, want %q", i, c["source"], nb.Cells[i].Source)
		}
		if c["source_hash"] != sourceHash(nb.Cells[i].Source) {
			t.Errorf("cell %d: source_hash %v, want %s", i, c["source_hash"], sourceHash(nb.Cells[i].Source))
		}
	}
	code := cells[0]
	if num(t, code["execution_count"]) != 3 {
		t.Errorf("execution_count = %v", code["execution_count"])
	}
	if md := asMap(t, code["metadata"]); fmt.Sprint(md["tags"]) != "[keep]" {
		t.Errorf("metadata = %v", code["metadata"])
	}
	outs := asList(t, code["outputs"])
	if len(outs) != 5 {
		t.Fatalf("%d outputs, want 5: %s", len(outs), compact(outs))
	}

	// Stream: ANSI stripped; the long one capped at the default 2000 characters with a note.
	o0 := asMap(t, outs[0])
	if o0["output_type"] != "stream" || o0["name"] != "stdout" || o0["text"] != "hi green\n" {
		t.Errorf("stream output = %v", o0)
	}
	o1 := str(asMap(t, outs[1])["text"])
	if !strings.HasPrefix(o1, strings.Repeat("x", 2000)) || strings.HasPrefix(o1, strings.Repeat("x", 2001)) {
		t.Errorf("long stream not capped at 2000 characters: %d characters", utf8.RuneCountInString(o1))
	}
	mustContain(t, "capped stream", o1, "3000 more characters")

	// Image: summarised with its size, never the base64.
	o2 := asMap(t, outs[2])
	data := asMap(t, o2["data"])
	img := str(data["image/png"])
	mustContain(t, "image summary", img, "image/png", "4x3", "not shown")
	if data["text/plain"] != "<Figure size 4x3>" {
		t.Errorf("text/plain of the figure = %v", data["text/plain"])
	}
	for _, s := range append(r.Texts, compact(r.Structured)) {
		if strings.Contains(s, b64[:24]) || strings.Contains(s, "iVBORw0KGgo") {
			t.Fatalf("the result carries the PNG's base64")
		}
	}

	// Error: ANSI stripped from evalue and traceback.
	o3 := asMap(t, outs[3])
	if o3["ename"] != "ValueError" || o3["evalue"] != "bad thing" {
		t.Errorf("error output = %v", o3)
	}
	tb := str(o3["traceback"])
	if strings.Contains(tb, "\x1b") || strings.Contains(tb, "[0;31m") {
		t.Errorf("traceback keeps ANSI escapes: %q", tb)
	}
	mustContain(t, "traceback", tb, "ValueError", "Traceback (most recent call last)", "----> 2 plot()")

	// Rich HTML summarised, the plain text given.
	o4 := asMap(t, outs[4])
	d4 := asMap(t, o4["data"])
	if d4["text/plain"] != "   a\n0  1" {
		t.Errorf("execute_result text/plain = %v", d4["text/plain"])
	}
	if h := str(d4["text/html"]); strings.Contains(h, "<table>") || !strings.Contains(h, "HTML") {
		t.Errorf("text/html not summarised: %q", h)
	}
	if num(t, o4["execution_count"]) != 3 {
		t.Errorf("execute_result execution_count = %v", o4["execution_count"])
	}
	for _, s := range r.Texts {
		if strings.Contains(s, "\x1b") || strings.Contains(s, `\u001b`) {
			t.Errorf("the result carries an ANSI escape")
		}
	}
}

func TestGetNotebookOptions(t *testing.T) {
	e, _ := richEnv(t)
	body := e.ok("get_notebook", map[string]any{"format": "json", "path": richPath, "include_outputs": false, "include_collaboration_state": false})
	if _, ok := body["collaboration"]; ok {
		t.Errorf("collaboration present with include_collaboration_state=false")
	}
	cells := cellsOf(t, body)
	if _, ok := cells[0]["outputs"]; ok {
		t.Errorf("outputs present with include_outputs=false: %v", cells[0]["outputs"])
	}
	if num(t, cells[0]["output_count"]) != 5 {
		t.Errorf("output_count = %v, want 5", cells[0]["output_count"])
	}
	if _, ok := cells[1]["output_count"]; ok {
		t.Errorf("a markdown cell has an output_count")
	}

	// max_output_chars caps each output's text.
	body = e.ok("get_notebook", map[string]any{"format": "json", "path": richPath, "max_output_chars": 100})
	outs := asList(t, cellsOf(t, body)[0]["outputs"])
	long := str(asMap(t, outs[1])["text"])
	if !strings.HasPrefix(long, strings.Repeat("x", 100)+"\n") {
		t.Errorf("stream not cut at 100 characters: %q", long[:min(len(long), 120)])
	}
	mustContain(t, "capped stream", long, "4900 more characters not shown")
	if utf8.RuneCountInString(long) > 200 {
		t.Errorf("capped stream is %d characters long", utf8.RuneCountInString(long))
	}
	tb := str(asMap(t, outs[3])["traceback"])
	if utf8.RuneCountInString(strings.SplitN(tb, "\n…", 2)[0]) > 100 {
		t.Errorf("traceback not capped: %q", tb)
	}
}

func TestGetNotebookCellRange(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("ten.ipynb", notebook(simpleCells(10)...))})
	body := e.ok("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"start": 3, "end": 5}})
	cells := cellsOf(t, body)
	wantIDs(t, "cells 3..5", idsOf(cells), []string{"c3", "c4", "c5"})
	if num(t, cells[0]["index"]) != 3 {
		t.Errorf("index of the first cell = %v, want 3", cells[0]["index"])
	}
	if num(t, body["cell_count"]) != 10 {
		t.Errorf("cell_count = %v, want the whole notebook's 10", body["cell_count"])
	}
	if _, ok := body["truncated"]; ok {
		t.Errorf("a range read is reported truncated: %v", body["truncated"])
	}

	body = e.ok("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"start": 8}})
	wantIDs(t, "cells 8..", idsOf(cellsOf(t, body)), []string{"c8", "c9"})
	body = e.ok("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"end": 1}})
	wantIDs(t, "cells ..1", idsOf(cellsOf(t, body)), []string{"c0", "c1"})
	body = e.ok("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"start": 9, "end": 400}})
	wantIDs(t, "cells 9..400", idsOf(cellsOf(t, body)), []string{"c9"})

	r := e.fail("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"start": 10}})
	d := findDetail(t, r, "cell_range", "start")
	mustContain(t, "out-of-range start", d.msg, "10", "0..9")
	r = e.fail("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"start": 5, "end": 2}})
	findDetail(t, r, "cell_range", "end")
	r = e.fail("get_notebook", map[string]any{"format": "json", "path": "ten.ipynb", "cell_range": map[string]any{"start": -1}})
	findDetail(t, r, "cell_range", "start")
}

// pageThrough reads a notebook with max_content_length, following truncated.next_call until
// the end, and returns the cell ids in the order read.
func pageThrough(t *testing.T, e *env, path string, max int, first map[string]any) ([]string, int) {
	t.Helper()
	var ids []string
	args := map[string]any{"path": path, "format": "json", "max_content_length": max, "include_collaboration_state": false}
	if first != nil {
		args["cell_range"] = first
	}
	pages := 0
	for {
		pages++
		if pages > 1000 {
			t.Fatal("pagination does not end")
		}
		body := e.ok("get_notebook", args)
		cells := cellsOf(t, body)
		if len(cells) == 0 {
			t.Fatalf("page %d is empty: %s", pages, compact(body))
		}
		size := 0
		for _, c := range cells {
			b, _ := json.Marshal(c)
			size += utf8.RuneCount(b)
		}
		if size > max {
			t.Errorf("page %d: %d characters of cells, over max_content_length %d", pages, size, max)
		}
		ids = append(ids, idsOf(cells)...)
		tr, ok := body["truncated"]
		if !ok {
			return ids, pages
		}
		trm := asMap(t, tr)
		rc := asMap(t, trm["returned_cells"])
		if num(t, rc["start"]) != num(t, cells[0]["index"]) || num(t, rc["end"]) != num(t, cells[len(cells)-1]["index"]) {
			t.Errorf("page %d: returned_cells %v but cells %v..%v", pages, rc, cells[0]["index"], cells[len(cells)-1]["index"])
		}
		nc := asMap(t, asMap(t, trm["next_call"])["cell_range"])
		if num(t, nc["start"]) != num(t, cells[len(cells)-1]["index"])+1 {
			t.Errorf("page %d: next_call starts at %v after cell %v", pages, nc["start"], cells[len(cells)-1]["index"])
		}
		args["cell_range"] = nc
	}
}

func TestGetNotebookPaginationLosesNothing(t *testing.T) {
	cells := make([]ydoc.Cell, 200)
	var want []string
	for i := range cells {
		id := fmt.Sprintf("cell-%03d", i)
		cells[i] = code(id, fmt.Sprintf("# cell %d\n%s", i, strings.Repeat(fmt.Sprintf("v%d = %d\n", i, i), 1+i%7)))
		want = append(want, id)
	}
	e := newEnv(t, []bridgetest.File{nbFile("big.ipynb", notebook(cells...))})
	got, pages := pageThrough(t, e, "big.ipynb", 2000, nil)
	wantIDs(t, "pages concatenated", got, want)
	if pages < 5 {
		t.Errorf("only %d pages for 200 cells at 2000 characters", pages)
	}
	// Starting from a range, the pages cover exactly that range.
	got, _ = pageThrough(t, e, "big.ipynb", 1000, map[string]any{"start": 50, "end": 120})
	wantIDs(t, "pages of 50..120", got, want[50:121])
}

func TestGetNotebookCellLargerThanBudget(t *testing.T) {
	big := strings.Repeat("y = 1\n", 1000) // 6000 characters
	e := newEnv(t, []bridgetest.File{nbFile("huge.ipynb", notebook(code("big", big), code("small", "x")))})
	body := e.ok("get_notebook", map[string]any{"format": "json", "path": "huge.ipynb", "max_content_length": 1000})
	cells := cellsOf(t, body)
	wantIDs(t, "first page", idsOf(cells), []string{"big"})
	if src := str(cells[0]["source"]); len(src) >= len(big) || !strings.Contains(src, "more characters not shown") {
		t.Errorf("the oversized cell was not cut: %d characters", len(src))
	}
	tr := asMap(t, body["truncated"])
	if num(t, tr["cut_cell"]) != 0 || str(tr["note"]) == "" {
		t.Errorf("truncated = %v, want cut_cell 0 and a note", tr)
	}
	nc := asMap(t, asMap(t, tr["next_call"])["cell_range"])
	if num(t, nc["start"]) != 1 {
		t.Errorf("next_call = %v, want to continue at cell 1", nc)
	}
	// The source_hash still identifies the whole source, so edits can be guarded.
	if cells[0]["source_hash"] != sourceHash(big) {
		t.Errorf("source_hash of a cut cell = %v, want the hash of the whole source", cells[0]["source_hash"])
	}
}

func TestGetNotebookMarkdown(t *testing.T) {
	e, b64 := richEnv(t)
	r := e.call("get_notebook", map[string]any{"path": richPath, "format": "markdown"})
	if r.IsError || len(r.Texts) != 1 {
		t.Fatalf("get_notebook markdown: %s", r)
	}
	md := r.Texts[0]
	mustContain(t, "markdown", md,
		"# "+richPath,
		"<!-- cell 0 | code | id=c-code | [3] -->",
		"```python\nprint('hi')\nplot()\n```",
		"<!-- cell 1 | markdown | id=c-md -->\nintro\n# Heading\nbody",
		"<!-- cell 2 | raw | id=c-raw -->\n```\nraw text\n```",
		"hi green",
		"image/png 4x3",
		"ValueError",
	)
	if strings.Contains(md, b64[:24]) || strings.Contains(md, "\x1b") {
		t.Error("markdown carries base64 or ANSI escapes")
	}
	st := asMap(t, r.Structured)
	if st["format"] != "markdown" || str(st["version"]) == "" || num(t, st["cell_count"]) != 4 {
		t.Errorf("structuredContent = %s", compact(st))
	}
	// Outputs left out are counted.
	md = e.call("get_notebook", map[string]any{"path": richPath, "format": "markdown", "include_outputs": false}).Texts[0]
	mustContain(t, "markdown without outputs", md, "_5 output(s) not shown_")
	if strings.Contains(md, "hi green") {
		t.Error("markdown shows outputs with include_outputs=false")
	}
}

func TestGetNotebookOutline(t *testing.T) {
	e, b64 := richEnv(t)
	r := e.call("get_notebook", map[string]any{"path": richPath, "format": "outline"})
	if r.IsError {
		t.Fatalf("outline: %s", r)
	}
	text := r.Texts[0]
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var cellLines []string
	for _, l := range lines {
		if len(l) > 0 && l[0] >= '0' && l[0] <= '9' {
			cellLines = append(cellLines, l)
		}
	}
	if len(cellLines) != 4 {
		t.Fatalf("outline has %d cell lines, want 4:\n%s", len(cellLines), text)
	}
	// Cells by handle: the shortest prefix of the id, of at least 4 characters, no other id has.
	mustContain(t, "code line", cellLines[0], "0 code c-co [3] (2 lines): print('hi')", "image/png 4x3", "error ValueError")
	mustContain(t, "markdown line", cellLines[1], "1 markdown c-md (3 lines): # Heading")
	mustContain(t, "raw line", cellLines[2], "2 raw c-ra (1 lines): raw text")
	mustContain(t, "empty line", cellLines[3], "3 code c-em (0 lines)")
	if strings.Contains(text, b64[:24]) {
		t.Error("outline carries base64")
	}
}

func TestGetNotebookMarkdownTruncation(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("many.ipynb", notebook(simpleCells(100)...))})
	r := e.call("get_notebook", map[string]any{"path": "many.ipynb", "format": "markdown", "max_content_length": 1000})
	if r.IsError {
		t.Fatal(r)
	}
	st := asMap(t, r.Structured)
	tr := asMap(t, st["truncated"])
	nc := asMap(t, asMap(t, tr["next_call"])["cell_range"])
	next := num(t, nc["start"])
	if next <= 0 || next >= 100 {
		t.Fatalf("next_call start %d", next)
	}
	mustContain(t, "truncated markdown header", r.Texts[0], "truncated, continue with", fmt.Sprintf(`"start":%d`, next))
	if strings.Contains(r.Texts[0], fmt.Sprintf("id=c%d ", next)) {
		t.Errorf("cell %d is both shown and promised for the next call", next)
	}
	if !strings.Contains(r.Texts[0], fmt.Sprintf("id=c%d ", next-1)) && !strings.Contains(r.Texts[0], fmt.Sprintf("id=c%d -->", next-1)) {
		t.Errorf("cell %d (the last before next_call) is not shown", next-1)
	}
}

func TestGetNotebookVersionChanges(t *testing.T) {
	e := newEnv(t, nil)
	v1 := e.nbVersion("nb.ipynb")
	if v1 == "" {
		t.Fatal("no version")
	}
	if again := e.nbVersion("nb.ipynb"); again != v1 {
		t.Errorf("version changed without an edit: %s then %s", v1, again)
	}
	ins := e.ok("batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb", "cells": []any{map[string]any{"content": "new"}}})
	v2 := e.nbVersion("nb.ipynb")
	if v2 == v1 {
		t.Errorf("version %s unchanged after an insert", v1)
	}
	if ins["version"] != v2 {
		t.Errorf("insert returned version %v, get_notebook then says %s", ins["version"], v2)
	}
	e.humanEdit("nb.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return tx.SetSource(0, "changed by a human") })
	v3 := e.nbVersion("nb.ipynb")
	if v3 == v2 {
		t.Errorf("version %s unchanged after a collaborator's edit", v2)
	}
}

// Structured content mirrors the text content (MCP: the two must be equivalent). For markdown
// and outline the text is the document itself.
func TestGetNotebookMarkdownStructuredCarriesText(t *testing.T) {
	e, _ := richEnv(t)
	r := e.call("get_notebook", map[string]any{"path": richPath, "format": "markdown"})
	if r.IsError {
		t.Fatal(r)
	}
	if !strings.Contains(compact(r.Structured)+fmt.Sprint(r.Structured), "print('hi')") {
		t.Error("BUG: format=markdown/outline returns structuredContent {path, version, cell_count, format, collaboration} without the rendered text or the cells (result.Data lacks result.Text, getNotebook in notebooks.go): a client that reads structuredContent gets no content")
	}
}

func TestGetNotebookErrors(t *testing.T) {
	e := newEnv(t, nil)
	r := e.fail("get_notebook", map[string]any{"format": "json", "path": "notes.txt"})
	mustContain(t, "text file as notebook", errorText(r), "not a notebook")
	r = e.fail("get_notebook", map[string]any{"format": "json", "path": "data"})
	mustContain(t, "directory", errorText(r), "directory")
	r = e.fail("get_notebook", map[string]any{"format": "json", "path": "nope/missing.ipynb"})
	mustContain(t, "missing", errorText(r), "no such file")
}
