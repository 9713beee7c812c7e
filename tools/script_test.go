package tools_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// readFixture parses a notebook of ydoc/testdata or tools/testdata.
func readFixture(t testing.TB, path string) ydoc.Notebook {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := ydoc.ParseNBFormat(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return nb
}

// scriptResult is a run_script result: the text a model reads and the structured result.
type scriptResult struct {
	*result
	text   string
	value  any
	output []any // printed lines
}

func (e *env) script(src string, extra ...map[string]any) scriptResult {
	e.t.Helper()
	args := map[string]any{"script": src}
	for _, x := range extra {
		for k, v := range x {
			args[k] = v
		}
	}
	r := e.call("run_script", args)
	out := scriptResult{result: r}
	if len(r.Texts) > 0 {
		out.text = r.Texts[0]
	}
	if m, ok := r.Structured.(map[string]any); ok {
		out.value = m["result"]
		out.output, _ = m["printed"].([]any)
	}
	return out
}

// The three chores of the issue, on a real notebook: the script returns exactly what it keeps.
func TestRunScriptDoesTheChores(t *testing.T) {
	e := choresEnv(t)
	r := e.script(choreErrors)
	if r.IsError {
		t.Fatalf("errors chore: %s", r.text)
	}
	want := `[{"index":101,"source":"df = pd.read_csv(\"data/sales.csv\")\ndf.head()","error":"FileNotFoundError: [Errno 2] No such file or directory: 'data/sales.csv'"},` +
		`{"index":103,"source":"df[\"revenue\"].sum()","error":"KeyError: 'revenue'"},` +
		`{"index":104,"source":"total = int(df[\"units\"].sum())\nrate = total / len(df[df[\"units\"] \u003e 1000])","error":"ZeroDivisionError: division by zero"}]`
	if r.text != want {
		t.Errorf("errors chore:\n got %s\nwant %s", r.text, want)
	}
	var wantValue any
	if err := json.Unmarshal([]byte(want), &wantValue); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.value, wantValue) {
		t.Errorf("errors chore structured: %s", compactJSON(t, r.value))
	}

	r = e.script(chorePandas)
	if want := `[{"index":99,"count":1},{"index":106,"count":6}]`; r.IsError || r.text != want {
		t.Errorf("pandas chore: %s, want %s", r.text, want)
	}

	r = e.script(choreOutline)
	if r.IsError {
		t.Fatalf("outline chore: %s", r.text)
	}
	for _, want := range []string{"project/analysis.ipynb\n  # Matplotlib Examples\n", "  ## Sales data\n  ### Units by region\n",
		"project/vega-extension.ipynb\n", "project/markdownCells.ipynb\n"} {
		if !strings.Contains(r.text, want) {
			t.Errorf("outline chore lacks %q:\n%s", want, r.text)
		}
	}
	if strings.Contains(r.text, "Generate sample data") { // a comment in a code cell
		t.Errorf("outline chore has a code comment:\n%s", r.text)
	}
	if r.value != r.text {
		t.Errorf("a string result is the text as it is: structured %q", r.value)
	}
}

func compactJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What a script sees of outputs: text as a read shows it, tracebacks as ANSI-free lines whose
// last is the error, images summarised, streams with their name; cells without outputs have an
// empty list, markdown cells no execution count.
func TestRunScriptSeesOutputsAsText(t *testing.T) {
	e := choresEnv(t)
	r := e.script(`c = cells("project/analysis.ipynb")
[c[103]["outputs"][0]["traceback"][0], c[103]["outputs"][0]["traceback"][-1], c[103]["outputs"][0]["ename"],
 c[106]["outputs"][0]["text"], c[98]["outputs"][0]["name"], c[100]["outputs"], c[100]["execution_count"], c[100]["type"],
 len([l for o in c[103]["outputs"] for l in o["traceback"] if "\x1b" in l])]`)
	if r.IsError {
		t.Fatal(r.text)
	}
	got := r.value.([]any)
	if !strings.Contains(got[0].(string), "KeyError") || got[1] != "KeyError: 'revenue'" || got[2] != "KeyError" {
		t.Errorf("traceback: %v", got[:3])
	}
	if s := got[3].(string); !strings.HasPrefix(s, "[image/png ") {
		t.Errorf("plot output text %q", s)
	}
	if got[4] != "stdout" || compactJSON(t, got[5]) != "[]" || got[6] != nil || got[7] != "markdown" || got[8] != 0.0 {
		t.Errorf("got %v", got[4:])
	}
}

// Every document a script touches passes the door with the caller's identity: a token limited
// to allowed/** lists, reads and finds nothing under secret/, while an unrestricted one does.
func TestRunScriptPassesTheDoor(t *testing.T) {
	d := newDoorEnv(t)
	run := func(tok string, src string) (bool, string) {
		c := d.limited
		if tok == "full" {
			c = d.full
		}
		res := d.call(c, "run_script", map[string]any{"script": src})
		text := res.Content[0].(mcp.TextContent).Text
		return res.IsError, text
	}
	isErr, text := run("limited", `[p for p in notebooks()] + [m["path"] for m in search("hush")] + [m["path"] for m in search("allowed")]`)
	if isErr || !strings.Contains(text, "allowed/a.ipynb") {
		t.Fatalf("limited listing: %s", text)
	}
	if m := d.leak(text); m != "" {
		t.Errorf("limited script saw %q: %s", m, text)
	}
	for _, src := range []string{`cells("secret/s.ipynb")`, `search("x", path="secret/s.txt")`, `search("x", path="secret/s.ipynb")`, `cells("allowed/../secret/s.ipynb")`} {
		isErr, text := run("limited", src)
		if !isErr || !strings.Contains(text, "not permitted") && !strings.Contains(text, "is not allowed") {
			t.Errorf("%s: error %v: %s", src, isErr, text)
		}
		for _, m := range d.markers[1:] { // the path the caller named itself may come back
			if m != "" && strings.Contains(text, m) {
				t.Errorf("%s: leaked %q: %s", src, m, text)
			}
		}
	}
	isErr, text = run("full", `[c["source"] for c in cells("secret/s.ipynb")][2] + " " + str(len(search("hush-hush")))`)
	if isErr || !strings.HasPrefix(text, "# hush-hush ") {
		t.Errorf("full: %s", text)
	}
}

// A failing script is a tool error that names the line and column, shows the line, keeps what
// the script printed, and carries the tool's schema like every failure.
func TestRunScriptFailuresNameTheLine(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", notebook(code("c1", "x = 1")))}, toolsets("scripts"))
	r := e.fail("run_script", map[string]any{"script": "print('reading')\nfor c in cells('a.ipynb'):\n    c['nope']"})
	msg := errorText(r)
	if !strings.Contains(msg, "line 3, column 6: key \"nope\" not in dict") || !strings.Contains(msg, "\n      c['nope']\n       ^") {
		t.Errorf("error: %s", msg)
	}
	if d := findDetail(t, r, "script"); d.msg != "line 3, column 6" {
		t.Errorf("detail %v", d)
	}
	if compactJSON(t, r.Body["printed"]) != `["reading"]` {
		t.Errorf("printed: %v", r.Body["printed"])
	}
	r = e.fail("run_script", map[string]any{"script": "cells('missing.ipynb')"})
	if msg := errorText(r); !strings.Contains(msg, "line 1, column 6: cells:") {
		t.Errorf("missing notebook: %s", msg)
	}
	r = e.fail("run_script", map[string]any{"script": `"x" * 200000`, "max_tokens": 1000})
	if msg := errorText(r); !strings.Contains(msg, "over max_tokens 1000") {
		t.Errorf("budget: %s", msg)
	}
	ok := e.script("x = 1")
	if ok.IsError || !strings.HasPrefix(ok.text, "(no result") || ok.value != nil {
		t.Errorf("no result: %s %v", ok.text, ok.value)
	}
	ok = e.script("print('a')\nprint('b')\n[1]")
	if ok.IsError || ok.text != "a\nb\n[1]" || compactJSON(t, ok.output) != `["a","b"]` {
		t.Errorf("printed and result: %q %v", ok.text, ok.output)
	}
}

// A script reads a notebook as it is now: an edit the agent made is there at once.
func TestRunScriptReadsTheLiveNotebook(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", notebook(code("c1", "x = 1")))})
	e.ok("batch_update_notebook_cells", map[string]any{"path": "a.ipynb", "updates": []any{map[string]any{"cell_id": "c1", "content": "x = 2"}}})
	r := e.script(`[c["source"] for c in cells("a.ipynb")]`)
	if r.IsError || r.text != `["x = 2"]` {
		t.Errorf("live read: %s", r.text)
	}
}
