package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
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
	m, err := bridge.NewManager(bridge.ManagerOptions{Server: srv})
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
