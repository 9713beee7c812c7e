package tools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// BenchmarkResponseSize reports the bytes on the wire and the tokens (o200k_base) a model reads
// for typical calls, lean and with the schema embedded. Run:
//
//	go test -run '^$' -bench ResponseSize -benchtime 1x ./tools/
func BenchmarkResponseSize(b *testing.B) {
	raw, err := os.ReadFile("../ydoc/testdata/jupyter-mcp-server--notebook.ipynb")
	if err != nil {
		b.Fatal(err)
	}
	nb, err := ydoc.ParseNBFormat(raw)
	if err != nil {
		b.Fatal(err)
	}
	srv := bridgetest.New(bridgetest.File{Path: "demo.ipynb", Type: "notebook", Notebook: nb})
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, embed := range []bool{false, true} {
		ts, err := tools.New(tools.Options{Manager: m, AlwaysEmbedSchema: embed})
		if err != nil {
			b.Fatal(err)
		}
		c, err := client.NewInProcessClient(ts.MCP())
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
			b.Fatal(err)
		}
		mode := "lean"
		if embed {
			mode = "with-schema"
		}
		for _, sc := range []struct {
			name string
			tool string
			args map[string]any
		}{
			{"read-20-cells", "get_notebook", map[string]any{"path": "demo.ipynb", "cell_range": map[string]any{"start": 0, "end": 19}}},
			{"read-all-default", "get_notebook", map[string]any{"path": "demo.ipynb"}},
			{"outline-all", "get_notebook", map[string]any{"path": "demo.ipynb", "format": "outline"}},
			{"insert-2-cells", "batch_insert_notebook_cells", map[string]any{"path": "demo.ipynb", "cells": []any{map[string]any{"content": "x = 1"}, map[string]any{"cell_type": "markdown", "content": "# note"}}}},
			{"invalid-call", "batch_insert_notebook_cells", map[string]any{"path": "demo.ipynb", "cells": []any{map[string]any{"cell_type": "python"}}}},
		} {
			res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: sc.tool, Arguments: sc.args}})
			if err != nil {
				b.Fatal(err)
			}
			wire, _ := json.Marshal(res)
			var read string // what a model reads: text and embedded resource text
			for _, ct := range res.Content {
				switch v := ct.(type) {
				case mcp.TextContent:
					read += v.Text
				case mcp.EmbeddedResource:
					if r, ok := v.Resource.(mcp.TextResourceContents); ok {
						read += r.Text
					}
				}
			}
			ids, _, _ := enc.Encode(read)
			b.ReportMetric(float64(len(wire)), sc.name+"/"+mode+"-bytes")
			b.ReportMetric(float64(len(ids)), sc.name+"/"+mode+"-tokens")
			b.Logf("%-17s %-11s %8d bytes on the wire %7d tokens read", sc.name, mode, len(wire), len(ids))
		}
		_ = c.Close()
	}
}

// BenchmarkReadTokens200Cells reports the tokens (o200k_base) a model spends to read a 200-cell
// notebook with outputs (text, tables, plots): the .ipynb JSON as naive servers return it, the
// default view (paged by max_tokens until the whole notebook is read), markdown, the outline,
// and a change-aware re-read after a human edited one cell. Run:
//
//	go test -run '^$' -bench ReadTokens200Cells -benchtime 1x ./tools/
func BenchmarkReadTokens200Cells(b *testing.B) {
	nb := bigNotebook(200)
	raw, err := json.MarshalIndent(nb.JSON(), "", " ") // as on disk
	if err != nil {
		b.Fatal(err)
	}
	srv := bridgetest.New(bridgetest.File{Path: "big.ipynb", Type: "notebook", Notebook: nb})
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	count := func(s string) int { n, _ := enc.Count(s); return n }
	ts, err := tools.New(tools.Options{Manager: m})
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.NewInProcessClient(ts.MCP())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		b.Fatal(err)
	}
	call := func(args map[string]any) (string, map[string]any) {
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "get_notebook", Arguments: args}})
		if err != nil || res.IsError {
			b.Fatalf("get_notebook %v: %v %v", args, err, res)
		}
		text := res.Content[0].(mcp.TextContent).Text
		out, _ := res.StructuredContent.(map[string]any)
		if out == nil {
			_ = json.Unmarshal([]byte(text), &out)
		}
		return text, out
	}
	// readAll pages with truncated.next_call until the notebook is read; it returns the tokens
	// and the number of calls.
	readAll := func(args map[string]any) (int, int) {
		total, calls := 0, 0
		for {
			text, out := call(args)
			total += count(text)
			calls++
			t, ok := out["truncated"].(map[string]any)
			if !ok {
				return total, calls
			}
			next, ok := t["next_call"].(map[string]any)
			if !ok || calls > 100 {
				return total, calls
			}
			args = map[string]any{"path": "big.ipynb", "format": args["format"], "cell_range": next["cell_range"]}
		}
	}
	report := func(name string, tokens, calls int) {
		b.ReportMetric(float64(tokens), name+"-tokens")
		b.Logf("%-28s %8d tokens in %d call(s)", name, tokens, calls)
	}
	report("ipynb-json", count(string(raw)), 1)
	tk, n := readAll(map[string]any{"path": "big.ipynb", "format": "json"})
	report("default-json-paged", tk, n)
	tk, n = readAll(map[string]any{"path": "big.ipynb", "format": "markdown"})
	report("markdown-paged", tk, n)
	tk, n = readAll(map[string]any{"path": "big.ipynb", "format": "outline"})
	report("outline", tk, n)

	_, out := call(map[string]any{"path": "big.ipynb", "cell_range": map[string]any{"start": 0, "end": 0}})
	version := out["version"]
	if err := srv.EditDoc("big.ipynb", func(tx *ydoc.Txn) error { return tx.SetSource(57, "df = load('other.csv')\nprint(df.shape)") }); err != nil {
		b.Fatal(err)
	}
	testutil.Eventually(b, "the edit to arrive", func() bool {
		_, o := call(map[string]any{"path": "big.ipynb", "cell_range": map[string]any{"start": 0, "end": 0}})
		return o["version"] != version
	})
	tk, n = readAll(map[string]any{"path": "big.ipynb", "format": "json", "since_version": version})
	report("since-version-after-1-edit", tk, n)
}

// bigNotebook is n cells: a markdown heading every tenth, code cells with printed text, a
// table (HTML and text) or a plot (a 20 kB PNG) as outputs.
func bigNotebook(n int) ydoc.Notebook {
	png := make([]byte, 20000)
	for i := range png {
		png[i] = byte(i * 7)
	}
	plot := base64.StdEncoding.EncodeToString(png)
	cells := make([]ydoc.Cell, n)
	for i := range cells {
		id := fmt.Sprintf("cell-%03d", i)
		if i%10 == 0 {
			cells[i] = ydoc.Cell{ID: id, Type: ydoc.CellMarkdown, Source: fmt.Sprintf("## Step %d\n\nWhat this step does and why, in a sentence or two of prose.", i/10)}
			continue
		}
		count := i
		c := ydoc.Cell{ID: id, Type: ydoc.CellCode, ExecutionCount: &count, Metadata: map[string]any{},
			Source: fmt.Sprintf("result_%d = compute(data, step=%d)\nsummary = result_%d.describe()\nprint(summary)", i, i, i)}
		var lines strings.Builder
		for k := 0; k < 30; k++ {
			fmt.Fprintf(&lines, "metric_%02d  %10.4f  %10.4f  %10.4f\n", k, float64(i*k)/7, float64(k)/3, float64(i)/11)
		}
		c.Outputs = []map[string]any{{"output_type": "stream", "name": "stdout", "text": lines.String()}}
		switch i % 3 {
		case 1:
			var table strings.Builder
			table.WriteString("<table><tr><th>a</th><th>b</th></tr>")
			for k := 0; k < 40; k++ {
				fmt.Fprintf(&table, "<tr><td>%d</td><td>%d</td></tr>", k, k*i)
			}
			table.WriteString("</table>")
			c.Outputs = append(c.Outputs, map[string]any{"output_type": "execute_result", "execution_count": count, "metadata": map[string]any{},
				"data": map[string]any{"text/html": table.String(), "text/plain": "   a    b\n0  0    0\n..."}})
		case 2:
			c.Outputs = append(c.Outputs, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": plot, "text/plain": "<Figure size 640x480 with 1 Axes>"}})
		}
		cells[i] = c
	}
	return ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"kernelspec": map[string]any{"name": "python3", "language": "python", "display_name": "Python 3"}}, Cells: cells}
}
