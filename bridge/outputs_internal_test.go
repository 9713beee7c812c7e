package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

const testFileID = "0b5e8a52-0d8e-4a1c-9d0a-5d0f3e1c2a7b"

func placeholder(typ, url string) map[string]any {
	return map[string]any{"output_type": typ, "metadata": map[string]any{"url": url}}
}

// Only the outputs service's URLs for the room's own file are placeholders: a collaborator who
// writes another URL into an output gets nothing fetched with the sidecar's token.
func TestPlaceholderURL(t *testing.T) {
	ok := "/api/outputs/" + testFileID + "/c1/0.output"
	for u, want := range map[string]string{
		ok:                                    ok,
		"/api/contents/secret.txt":            "",
		"/api/outputs/other-file/c1/0.output": "",
		"https://example.org/api/outputs/" + testFileID + "/c1/0.output": "",
		"/api/outputs/" + testFileID + "/c1/0.json":                      "",
	} {
		if got := placeholderURL(placeholder("display_data", u), testFileID); got != want {
			t.Errorf("placeholderURL(%q) = %q, want %q", u, got, want)
		}
	}
	if placeholderURL(map[string]any{"output_type": "stream", "text": "x"}, testFileID) != "" {
		t.Error("an output without metadata is a placeholder")
	}
}

// The read-side filter shows what a placeholder stands for, or says why it cannot: never the
// placeholder itself; other outputs pass as they are.
func TestPlaceholderFilter(t *testing.T) {
	p := &readPrep{}
	p.engineChanged(Engine{OutputPlaceholders: true}, testFileID)
	got := "/api/outputs/" + testFileID + "/c1/0.output"
	failed := "/api/outputs/" + testFileID + "/c1/1.output"
	missing := "/api/outputs/" + testFileID + "/c1/2.output"
	p.store(got, fetchedOutput{out: map[string]any{"output_type": "stream", "name": "stdout", "text": "hi\n"}, size: 10})
	p.store(failed, fetchedOutput{err: "HTTP 404"})
	plain := map[string]any{"output_type": "execute_result", "data": map[string]any{"text/plain": "1"}}
	outs := p.filter()("c1", []map[string]any{placeholder("stream", got), placeholder("display_data", failed), placeholder("stream", missing), plain})
	if outs[0]["text"] != "hi\n" {
		t.Errorf("fetched: %v", outs[0])
	}
	if s := outs[1]["data"].(map[string]any)["text/plain"].(string); !strings.Contains(s, "HTTP 404") || !strings.Contains(s, failed) {
		t.Errorf("failed: %v", outs[1])
	}
	if outs[2]["output_type"] != "stream" || !strings.Contains(outs[2]["text"].(string), "not fetched") {
		t.Errorf("not fetched: %v", outs[2])
	}
	if outs[3]["data"].(map[string]any)["text/plain"] != "1" {
		t.Errorf("a plain output changed: %v", outs[3])
	}
	// Off where the engine has no placeholders.
	q := &readPrep{}
	q.engineChanged(Engine{}, testFileID)
	if q.filter() != nil {
		t.Error("a filter without placeholders")
	}
	// The cache stays bounded.
	big := &readPrep{}
	for i := 0; i < 10; i++ {
		big.store(strings.Repeat("u", i+1), fetchedOutput{out: map[string]any{}, size: outputCacheBytes / 4})
	}
	if big.bytes > outputCacheBytes || len(big.outputs) > 4 {
		t.Errorf("cache holds %d bytes in %d outputs", big.bytes, len(big.outputs))
	}
}

func TestOnlyLoaderAndMissingFromFile(t *testing.T) {
	for sv, want := range map[*ydoc.StateVector]bool{
		{}:                  true,
		{0: 5}:              true,
		{0: 5, 99: 1}:       true,
		{0: 5, 99: 1, 7: 3}: false,
		{99: 1}:             false,
	} {
		if got := onlyLoader(*sv); got != want {
			t.Errorf("onlyLoader(%v) = %v", *sv, got)
		}
	}
	d, err := ydoc.NewDoc(ydoc.KindNotebook, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	out := []map[string]any{{"output_type": "stream", "name": "stdout", "text": "x"}}
	file := &ydoc.Notebook{Cells: []ydoc.Cell{
		{ID: "a", Type: ydoc.CellCode, Source: "1", Outputs: out},
		{ID: "b", Type: ydoc.CellMarkdown, Source: "b"},
	}}
	if n := matchFile(d, shape(file)).missing(); n != 2 {
		t.Errorf("empty replica: %d missing, want 2", n)
	}
	if _, _, err := d.Transact(func(tx *ydoc.Txn) error {
		return tx.InsertCells(0, []ydoc.Cell{{ID: "a", Type: ydoc.CellCode, Source: "1", Outputs: []map[string]any{}}, {ID: "b", Type: ydoc.CellMarkdown, Source: "b"}})
	}); err != nil {
		t.Fatal(err)
	}
	if n := matchFile(d, shape(file)).missing(); n != 1 {
		t.Errorf("outputs still to come: %d missing, want 1", n)
	}
	if _, _, err := d.Transact(func(tx *ydoc.Txn) error { return tx.AppendOutput(0, out[0]) }); err != nil {
		t.Fatal(err)
	}
	if n := matchFile(d, shape(file)).missing(); n != 0 {
		t.Errorf("all there: %d missing", n)
	}
	// A file without cell ids (nbformat < 4.5) is matched by position.
	noIDs := &ydoc.Notebook{Cells: []ydoc.Cell{{Type: ydoc.CellCode, Outputs: out}, {Type: ydoc.CellMarkdown}, {Type: ydoc.CellMarkdown}}}
	if n := matchFile(d, shape(noIDs)).missing(); n != 1 {
		t.Errorf("by position: %d missing, want 1", n)
	}
	// Ids the server made up for this read of the file (nbformat v3, v4.5 cells without an id or
	// with another cell's): no cell of the replica has them, and the cells are there.
	random := &ydoc.Notebook{Cells: []ydoc.Cell{{ID: "r1", Type: ydoc.CellCode, Outputs: out}, {ID: "r2", Type: ydoc.CellMarkdown}}}
	if m := matchFile(d, shape(random)); m.missing() != 0 {
		t.Errorf("new random ids: %v", m)
	}
	// Some ids kept, the rest made up: the kept ones match theirs, the others the rest in order.
	mixed := &ydoc.Notebook{Cells: []ydoc.Cell{{ID: "x", Type: ydoc.CellCode, Outputs: out}, {ID: "b", Type: ydoc.CellMarkdown}, {ID: "y", Type: ydoc.CellRaw}}}
	if m := matchFile(d, shape(mixed)); m.lacking != 1 || m.outputs != 0 || m.cells != 3 {
		t.Errorf("mixed ids: %+v, want one cell lacking", m)
	}
	if s := matchFile(d, shape(mixed)).String(); !strings.Contains(s, "1 of the file's 3 cells") {
		t.Errorf("what is missing: %q", s)
	}
}

// shape is what the load wait compares of a notebook (readFileCells).
func shape(nb *ydoc.Notebook) []fileCell {
	out := make([]fileCell, len(nb.Cells))
	for i, c := range nb.Cells {
		out[i] = fileCell{id: c.ID, code: c.Type == ydoc.CellCode, outputs: len(c.Outputs)}
	}
	return out
}

// A refusal is remembered for refusalMemory, per path.
func TestRefusalsAreRemembered(t *testing.T) {
	var f refusals
	now := time.Unix(1000, 0)
	if f.recent("a.ipynb", now) {
		t.Error("a refusal before any")
	}
	f.add("a.ipynb", now)
	if !f.recent("a.ipynb", now.Add(refusalMemory-time.Second)) || f.recent("b.ipynb", now) {
		t.Error("the refusal of a.ipynb is not remembered, or is b.ipynb's")
	}
	if f.recent("a.ipynb", now.Add(refusalMemory)) {
		t.Error("a refusal remembered past refusalMemory")
	}
	f.add("b.ipynb", now.Add(2*refusalMemory))
	if len(f.at) != 1 {
		t.Errorf("old refusals kept: %v", f.at)
	}
}
