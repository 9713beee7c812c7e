package tools_test

import (
	"strings"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// search_notebook on the fake server: live replicas for open rooms, files otherwise; sources,
// outputs, regex, context, limits; documents the caller may not see are never searched.

func searchEnv(t *testing.T) *env {
	withOut := code("c-out", "load()")
	withOut.Outputs = []map[string]any{
		{"output_type": "error", "ename": "KeyError", "evalue": "'df_raw'", "traceback": []any{"Traceback", "KeyError: 'df_raw'"}},
		{"output_type": "stream", "name": "stdout", "text": "rows: 10\n"},
	}
	return newEnv(t, []bridgetest.File{
		dirFile("analysis"), dirFile("other"),
		nbFile("analysis/live.ipynb", notebook(markdown("m-intro", "# Intro"), code("c-load", "import pandas as pd\ndf_raw = pd.read_csv(p)\ndf = df_raw.dropna()\nprint(len(df))"), withOut)),
		nbFile("analysis/closed.ipynb", notebook(code("k-1", "x = 1"), code("k-2", "y = DF_RAW + x"))),
		textFile("analysis/notes.md", "# Notes\n\ncheck df_raw columns\nnothing here\n"),
		nbFile("other/elsewhere.ipynb", notebook(code("e-1", "df_raw = None"))),
		bridgetest.File{Path: "analysis/image.png", Type: "file", Text: "df_raw"}, // binary by extension: not searched
	})
}

func TestSearchSourcesAndOutputsLiveAndOnDisk(t *testing.T) {
	e := searchEnv(t)
	// The live notebook is open, and a human typed a marker the file does not have.
	e.ok("get_notebook", map[string]any{"format": "json", "path": "analysis/live.ipynb"})
	if err := e.srv.EditDoc("analysis/live.ipynb", func(tx *ydoc.Txn) error { return tx.SetSource(0, "# Intro\nmarker-typed-live") }); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the sidecar has the human's marker", func() bool {
		return strings.Contains(e.call("get_notebook", map[string]any{"path": "analysis/live.ipynb"}).Texts[0], "marker-typed-live")
	})
	r := e.call("search_notebook", map[string]any{"pattern": "df_raw", "path_prefix": "analysis/"})
	if r.IsError {
		t.Fatalf("search: %s", r)
	}
	text := r.Texts[0]
	for _, want := range []string{
		`"df_raw" in sources and outputs: 5 matches in 3 of 3 documents searched`,
		"analysis/closed.ipynb (file)\n@1 k-2\n1:y = DF_RAW + x\n", // case ignored by default; a closed file from disk
		"analysis/live.ipynb (live)\n@1 c-lo\n1-import pandas as pd\n2:df_raw = pd.read_csv(p)\n3:df = df_raw.dropna()\n4-print(len(df))\n",
		"@2 c-ou out\n1:error KeyError: 'df_raw'\n2-Traceback\n", // the traceback's last line repeats the error: left out
		"analysis/notes.md (file)\n2-\n3:check df_raw columns\n4-nothing here\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the result lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "elsewhere") || strings.Contains(text, "image.png") {
		t.Errorf("searched outside the prefix or a binary:\n%s", text)
	}
	st := asMap(t, r.Structured)
	if st["matches"] != float64(5) || st["documents"] != float64(3) || st["content"] != text {
		t.Errorf("structuredContent %s", compact(st))
	}
	// The replica, not the file: the human's unsaved typing is found.
	r = e.call("search_notebook", map[string]any{"pattern": "marker-typed-live"})
	if !strings.Contains(r.Texts[0], "analysis/live.ipynb (live)\n@0 m-in\n1-# Intro\n2:marker-typed-live\n") {
		t.Errorf("the live marker:\n%s", r.Texts[0])
	}
}

func TestSearchOptions(t *testing.T) {
	e := searchEnv(t)
	search := func(args map[string]any) string {
		t.Helper()
		r := e.call("search_notebook", args)
		if r.IsError {
			t.Fatalf("search %v: %s", args, r)
		}
		return r.Texts[0]
	}
	if got := search(map[string]any{"pattern": "df_raw", "path": "analysis/live.ipynb", "in": "outputs", "context": 0}); !strings.Contains(got, ": 1 match in 1 of 1 documents") || strings.Contains(got, "read_csv") || !strings.Contains(got, "@2 c-ou out\n1:error KeyError") {
		t.Errorf("outputs only:\n%s", got)
	}
	if got := search(map[string]any{"pattern": "df_raw", "path": "analysis/live.ipynb", "in": "sources", "context": 0}); strings.Contains(got, "KeyError") || !strings.Contains(got, "2:df_raw = pd") {
		t.Errorf("sources only:\n%s", got)
	}
	if got := search(map[string]any{"pattern": "DF_RAW", "case_sensitive": true}); !strings.Contains(got, ": 1 match in 1 of") {
		t.Errorf("case-sensitive:\n%s", got)
	}
	if got := search(map[string]any{"pattern": `^df\w* = `, "regex": true, "context": 0}); !strings.Contains(got, "(regex)") || !strings.Contains(got, "2:df_raw = pd.read_csv(p)\n3:df = df_raw.dropna()") || !strings.Contains(got, "other/elsewhere.ipynb (file)\n@0 e-1\n1:df_raw = None") {
		t.Errorf("regex over the whole root:\n%s", got)
	}
	got := search(map[string]any{"pattern": "df_raw", "max_matches": 2, "context": 0})
	if !strings.Contains(got, "2 shown (max_matches)") || strings.Count(got, ":") < 2 {
		t.Errorf("max_matches:\n%s", got)
	}
	if r := e.fail("search_notebook", map[string]any{"pattern": "(unclosed", "regex": true}); !strings.Contains(errorText(r), "not a valid regular expression") {
		t.Errorf("a bad regex: %s", r)
	}
	if r := e.fail("search_notebook", map[string]any{"pattern": "x", "path": "analysis/missing.ipynb"}); r.Body == nil {
		t.Errorf("a missing file: %s", r)
	}
	// A handle in a result names the cell in the next call.
	e.ok("batch_update_notebook_cells", map[string]any{"path": "analysis/live.ipynb", "updates": []any{map[string]any{"cell_id": "c-lo", "content": "df_raw = 1"}}})
	if got := e.serverSources("analysis/live.ipynb"); got[1] != "df_raw = 1" {
		t.Errorf("edit by the handle search gave: %v", got)
	}
}

// A caller limited to some paths searches only those: the walk lists, and the door reads, no
// other document.
func TestSearchOnlyWhatTheCallerMaySee(t *testing.T) {
	d := newDoorEnv(t)
	full := decodeResult(t, d.call(d.full, "search_notebook", map[string]any{"pattern": "hush"}))
	if full.IsError || !strings.Contains(full.Texts[0], secretNB) || !strings.Contains(full.Texts[0], secretText) {
		t.Fatalf("the full token's search: %s", full)
	}
	limited := decodeResult(t, d.call(d.limited, "search_notebook", map[string]any{"pattern": "hush"}))
	if limited.IsError || !strings.Contains(limited.Texts[0], ": 0 matches in 0 of ") {
		t.Errorf("the limited token's search: %s", limited)
	}
	if m := d.leak(limited.Raw); m != "" {
		t.Errorf("the limited token's search leaks %q: %s", m, limited)
	}
	if r := decodeResult(t, d.call(d.limited, "search_notebook", map[string]any{"pattern": "hush", "path": secretNB})); !r.IsError || d.leak(r.Raw) != "" && d.leak(r.Raw) != "secret" {
		t.Errorf("the limited token searched a secret notebook: %s", r)
	}
}
