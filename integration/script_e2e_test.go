//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run_script end to end: the official TypeScript SDK client, over Streamable HTTP, sends scripts
// to the real binary attached to the real jupyter-server. A script reads a notebook from its file
// (the room not joined), then — once the agent has added a cell and run it in a real kernel —
// the live replica with the kernel's traceback; it outlines a folder; a broken script fails at
// its line.
func TestRunScriptEndToEnd(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	analysis, err := os.ReadFile(filepath.Join(root, "tools", "testdata", "chores", "analysis.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSuffix(uniqueName(t, ""), "_")
	nb := dir + "/analysis.ipynb"
	if err := shared.WriteFile(nb, analysis); err != nil {
		t.Fatal(err)
	}
	if err := shared.WriteFile(dir+"/example.ipynb", fixture(t, "jupyterlab--example.ipynb")); err != nil {
		t.Fatal(err)
	}
	sp, err := StartHTTPSidecar(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	c, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer " + sp.Token}}, nil); err != nil {
		t.Fatal(err)
	}
	script := func(src string) ToolResult {
		t.Helper()
		res, err := c.CallTool(ctx, "run_script", map[string]any{"script": src})
		if err != nil {
			t.Fatalf("run_script: %v\n%s", err, tail(sp.Log.String(), 3000))
		}
		return res
	}
	errorsOf := `[o["traceback"][-1] for c in cells("` + nb + `") for o in c["outputs"] if o["type"] == "error"]`

	res := script(errorsOf)
	want := `["FileNotFoundError: [Errno 2] No such file or directory: 'data/sales.csv'","KeyError: 'revenue'","ZeroDivisionError: division by zero"]`
	if res.IsError || res.Text() != want {
		t.Fatalf("errors from the file: %s\nwant %s", res.Text(), want)
	}
	if got, ok := res.StructuredContent["result"].([]any); !ok || len(got) != 3 {
		t.Errorf("structuredContent: %v", res.StructuredContent)
	}

	// The agent adds a cell and runs it in a real kernel; the script now reads the live replica.
	start := time.Now()
	// (At the end: a cell inserted above the others of this file, which has no cell ids, makes the
	// next read wait a minute for the server's progressive load — bridge's missingFromFile
	// matches id-less cells by index. Reported, not this test's subject.)
	ins, err := c.CallTool(ctx, "batch_insert_notebook_cells", map[string]any{"path": nb, "start_position": 169, "exec": false,
		"cells": []any{map[string]any{"id": "fails", "content": "{'a': 1}['b']"}}})
	if err != nil || ins.IsError {
		t.Fatalf("insert: %v %s\n%s", err, ins.Text(), tail(sp.Log.String(), 3000))
	}
	t.Logf("joined and inserted in %v", time.Since(start))
	var run struct {
		Result ToolResult `json:"result"`
	}
	start = time.Now()
	if err := c.Call(ctx, "call", map[string]any{"name": "execute_notebook_cell", "arguments": map[string]any{"path": nb, "cell_id": "fails", "timeout": 90},
		"timeoutMs": 120000}, &run); err != nil || run.Result.IsError {
		t.Fatalf("run: %v %s\n%s", err, run.Result.Text(), tail(sp.Log.String(), 3000))
	}
	t.Logf("ran in %v", time.Since(start))
	res = script(errorsOf)
	if res.IsError || !strings.HasPrefix(res.Text(), `["FileNotFoundError`) || !strings.HasSuffix(res.Text(), `"ZeroDivisionError: division by zero","KeyError: 'b'"]`) {
		t.Errorf("errors from the live notebook: %s", res.Text())
	}

	res = script(`out = []
for p in notebooks("` + dir + `/"):
    out.append(p)
    for c in cells(p):
        if c["type"] == "markdown":
            out += ["  " + l for l in c["source"].split("\n") if l.startswith("#")]
"\n".join(out)`)
	for _, want := range []string{dir + "/analysis.ipynb\n  # Matplotlib Examples\n", "  ## Sales data\n", dir + "/example.ipynb\n"} {
		if res.IsError || !strings.Contains(res.Text(), want) {
			t.Errorf("outline lacks %q: %s", want, res.Text())
		}
	}

	res = script("n = 0\nfor c in cells(\"" + nb + "\"):\n    n += c[\"execution_count\"]")
	if !res.IsError || !strings.Contains(res.Text(), "line 3, column 7: unknown binary op: int + NoneType") {
		t.Errorf("a failing script: %s", res.Text())
	}
}
