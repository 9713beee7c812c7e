package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
)

// The chores of issue 29, done with run_script and tool by tool, measured in what a model pays:
// calls, the tokens of the arguments it writes and of the results it reads (o200k_base; the
// text items, and structuredContent for clients that hand the model that instead), and the
// definitions every turn carries. Run:
//
//	go test -count=1 -run TestScriptChoreTokens -v ./tools/
//
// The project folder holds analysis.ipynb (tools/testdata/chores: jupyter-mcp-server's 161-cell
// dev notebook with a pandas section run in a real kernel: three errors, two pandas imports, a
// table and plots) and four real notebooks of ydoc/testdata.

const (
	choreErrors = `out = []
for c in cells("project/analysis.ipynb"):
    for o in c["outputs"]:
        if o["type"] == "error":
            out.append({"index": c["index"], "source": c["source"], "error": o["traceback"][-1]})
out`
	chorePandas = `[{"index": c["index"], "count": c["execution_count"]}
 for c in cells("project/analysis.ipynb") if "import pandas" in c["source"]]`
	choreOutline = `out = []
for p in notebooks("project/"):
    out.append(p)
    for c in cells(p):
        if c["type"] == "markdown":
            out += ["  " + l for l in c["source"].split("\n") if l.startswith("#")]
"\n".join(out)`
)

// choresEnv serves the project folder (every toolset, as the tool-by-tool plans need them).
func choresEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	files := []bridgetest.File{dirFile("project"), nbFile("project/analysis.ipynb", readFixture(t, "testdata/chores/analysis.ipynb"))}
	for _, f := range []string{"jupyterlab--markdownCells", "jupyterlab--mermaid_diagrams", "jupyterlab--example", "jupyterlab--vega-extension"} {
		name := strings.TrimPrefix(f, "jupyterlab--")
		files = append(files, nbFile("project/"+name+".ipynb", readFixture(t, "../ydoc/testdata/"+f+".ipynb")))
	}
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("choresEnv needs a *testing.T")
	}
	return newXEnv(tt, files, opts...).env // with an executor, as a server with kernels lists its tools
}

// callCost is what one call cost the model.
type callCost struct {
	tool             string
	args, text, strc int
}

func tokenCount(t *testing.T, enc tokenizer.Codec, s string) int {
	t.Helper()
	n, err := enc.Count(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// measure makes a call and counts it.
func measure(t *testing.T, e *env, enc tokenizer.Codec, tool string, args map[string]any) (callCost, *result) {
	t.Helper()
	r := e.call(tool, args)
	if r.IsError {
		t.Fatalf("%s(%s): %s", tool, compact(args), r)
	}
	a, _ := json.Marshal(args)
	s, _ := json.Marshal(r.Structured)
	c := callCost{tool: tool, args: tokenCount(t, enc, string(a)), strc: tokenCount(t, enc, string(s))}
	for _, x := range r.Texts {
		c.text += tokenCount(t, enc, x)
	}
	return c, r
}

func sumCosts(cs []callCost) (args, text, strc int) {
	for _, c := range cs {
		args, text, strc = args+c.args, text+c.text, strc+c.strc
	}
	return
}

func TestScriptChoreTokens(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	e := choresEnv(t)
	const nb = "project/analysis.ipynb"

	type plan struct {
		chore  string
		script []callCost
		tools  []callCost
		how    string
	}
	var plans []plan

	// 1. Every cell whose output has an error: its source and the last traceback line.
	// Tool by tool, the cheapest plan we found: a search of the outputs for the line a read
	// starts an error with ("error Name: value", which is the traceback's last line), then a
	// read of each of those cells without outputs for its source. (Reading the outline and then
	// each cell with its outputs costs about 5,000 tokens.)
	p := plan{chore: "errors: source + last traceback line"}
	c, r := measure(t, e, enc, "run_script", map[string]any{"script": choreErrors})
	p.script = append(p.script, c)
	var errCells []int
	for _, x := range r.Structured.(map[string]any)["result"].([]any) {
		errCells = append(errCells, int(x.(map[string]any)["index"].(float64)))
	}
	c, r = measure(t, e, enc, "search_notebook", map[string]any{"path": nb, "pattern": "^error ", "regex": true, "case_sensitive": true, "in": "outputs", "context": 0})
	p.tools = append(p.tools, c)
	if !strings.Contains(r.Texts[0], "3 matches") || len(errCells) != 3 {
		t.Fatalf("the search finds %s; the script found %v", r.Texts[0], errCells)
	}
	for _, i := range errCells {
		c, _ = measure(t, e, enc, "get_notebook", map[string]any{"path": nb, "cell_range": map[string]any{"start": i, "end": i}, "include_outputs": false, "include_collaboration_state": false})
		p.tools = append(p.tools, c)
	}
	p.how = "search_notebook for ^error in outputs, then get_notebook cell_range (no outputs) for each of the 3 error cells"
	plans = append(plans, p)

	// 2. The cells that import pandas, with their execution counts. Tool by tool: a search of
	// the sources finds them; a read of each (without outputs) shows its execution count.
	p = plan{chore: "pandas imports + execution counts"}
	c, r = measure(t, e, enc, "run_script", map[string]any{"script": chorePandas})
	p.script = append(p.script, c)
	var pdCells []int
	for _, x := range r.Structured.(map[string]any)["result"].([]any) {
		pdCells = append(pdCells, int(x.(map[string]any)["index"].(float64)))
	}
	c, r = measure(t, e, enc, "search_notebook", map[string]any{"path": nb, "pattern": "import pandas", "in": "sources", "context": 0})
	p.tools = append(p.tools, c)
	if !strings.Contains(r.Texts[0], "2 matches") || len(pdCells) != 2 {
		t.Fatalf("search: %s; script: %v", r.Texts[0], pdCells)
	}
	for _, i := range pdCells {
		c, _ = measure(t, e, enc, "get_notebook", map[string]any{"path": nb, "cell_range": map[string]any{"start": i, "end": i}, "include_outputs": false, "include_collaboration_state": false})
		p.tools = append(p.tools, c)
	}
	p.how = "search_notebook in sources, then get_notebook cell_range (no outputs) for each of the 2 matches"
	plans = append(plans, p)

	// 3. Across every notebook under a folder, the markdown headings. Tool by tool: one search
	// for lines starting with # (it cannot tell markdown from code comments, which come too).
	p = plan{chore: "outline of the folder's headings"}
	c, _ = measure(t, e, enc, "run_script", map[string]any{"script": choreOutline})
	p.script = append(p.script, c)
	c, _ = measure(t, e, enc, "search_notebook", map[string]any{"path_prefix": "project/", "pattern": "^#{1,6} ", "regex": true, "in": "sources", "context": 0, "max_matches": 1000})
	p.tools = append(p.tools, c)
	p.how = "one search_notebook for ^#{1,6} over the folder (code comments match too)"
	plans = append(plans, p)

	// Definitions a turn: the default list, and a session that takes only the scripts set.
	defs := func(spec ...string) (int, int) {
		le := choresEnv(t, toolsets(spec...))
		res, err := le.c.ListTools(ctxT(t), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := definitionTokens(t, res.Tools)
		return n, len(res.Tools)
	}
	defDefault, nDefault := defs()
	defScripts, nScripts := defs("scripts")
	init, err := e.c.Initialize(ctxT(t), mcp.InitializeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	instr := tokenCount(t, enc, init.Instructions)

	var b strings.Builder
	fmt.Fprintf(&b, "\n| chore | way | calls | argument tokens | result tokens (text) | result tokens (structuredContent) |\n|---|---|---|---|---|---|\n")
	var sCalls, tCalls, sArgs, sText, sStrc, tArgs, tText, tStrc int
	for _, p := range plans {
		a, x, s := sumCosts(p.script)
		fmt.Fprintf(&b, "| %s | run_script | %d | %d | %d | %d |\n", p.chore, len(p.script), a, x, s)
		sCalls, sArgs, sText, sStrc = sCalls+len(p.script), sArgs+a, sText+x, sStrc+s
		a2, x2, s2 := sumCosts(p.tools)
		fmt.Fprintf(&b, "| | tool by tool: %s | %d | %d | %d | %d |\n", p.how, len(p.tools), a2, x2, s2)
		tCalls, tArgs, tText, tStrc = tCalls+len(p.tools), tArgs+a2, tText+x2, tStrc+s2
		if len(p.script) > len(p.tools) || x >= x2 {
			t.Errorf("%s: run_script %d calls, %d tokens; tool by tool %d calls, %d tokens", p.chore, len(p.script), x, len(p.tools), x2)
		}
	}
	fmt.Fprintf(&b, "| **three chores** | run_script | %d | %d | %d | %d |\n", sCalls, sArgs, sText, sStrc)
	fmt.Fprintf(&b, "| | tool by tool | %d | %d | %d | %d |\n", tCalls, tArgs, tText, tStrc)
	fmt.Fprintf(&b, "\nDefinitions a turn (tools/list, o200k_base): default set %d tools %d tokens; toolsets=scripts %d tools %d tokens; server instructions %d tokens (once a session).\n",
		nDefault, defDefault, nScripts, defScripts, instr)
	// A session: one model request per call, plus one per chore for the answer; each request
	// carries the definitions. Results and arguments are counted once (what enters the context).
	session := func(calls, defs, args, results int) int { return (calls+len(plans))*defs + instr + args + results }
	fmt.Fprintf(&b, "\nThree-chore session (requests = calls + 3 answers; each request carries the definitions; + instructions once + arguments + text results):\n")
	fmt.Fprintf(&b, "- toolsets=scripts, run_script: %d requests × %d + %d + %d + %d = %d tokens\n", sCalls+3, defScripts, instr, sArgs, sText, session(sCalls, defScripts, sArgs, sText))
	fmt.Fprintf(&b, "- default set, run_script: %d requests × %d + %d + %d + %d = %d tokens\n", sCalls+3, defDefault, instr, sArgs, sText, session(sCalls, defDefault, sArgs, sText))
	fmt.Fprintf(&b, "- default set, tool by tool: %d requests × %d + %d + %d + %d = %d tokens\n", tCalls+3, defDefault, instr, tArgs, tText, session(tCalls, defDefault, tArgs, tText))
	t.Log(b.String())
}
