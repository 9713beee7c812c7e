package tools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// scaleNotebook is a notebook of n cells: a markdown heading every tenth cell, code cells of a
// few lines with a stream output.
func scaleNotebook(n int) ydoc.Notebook {
	nb := ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("cell-%05d", i)
		if i%10 == 0 {
			nb.Cells = append(nb.Cells, ydoc.Cell{ID: id, Type: ydoc.CellMarkdown, Source: fmt.Sprintf("## Section %d\n\nSome words about it.", i/10)})
			continue
		}
		count := i
		nb.Cells = append(nb.Cells, ydoc.Cell{ID: id, Type: ydoc.CellCode, ExecutionCount: &count,
			Source:  fmt.Sprintf("x%d = load(%d)\ny%d = x%d * 2\nprint(y%d)", i, i, i, i, i),
			Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": strings.Repeat(fmt.Sprintf("%d ", i), 10) + "\n"}}})
	}
	return nb
}

// BenchmarkEditScaling edits notebooks of growing size through the tools layer (in-process MCP
// client, manager, room) on the in-memory fake server: a single-cell update and a one-cell
// insert. Its time per call should not grow with the notebook. Profile with
//
//	go test -run '^$' -bench EditScaling -cpuprofile cpu.out -memprofile mem.out ./tools/
func BenchmarkEditScaling(b *testing.B) {
	for _, n := range []int{10, 1000, 3000} {
		b.Run(fmt.Sprintf("cells=%d", n), func(b *testing.B) {
			srv := bridgetest.New(bridgetest.File{Path: "big.ipynb", Type: "notebook", Notebook: scaleNotebook(n)})
			m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ts, err := tools.New(tools.Options{Manager: m, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
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
			call := func(name string, args map[string]any) {
				res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError {
					b.Fatalf("%s: %v", name, res.Content)
				}
			}
			call("create_notebook_session", map[string]any{"path": "big.ipynb"})
			target := fmt.Sprintf("cell-%05d", n/2+1)
			b.Run("update", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					call("batch_update_notebook_cells", map[string]any{"path": "big.ipynb",
						"updates": []any{map[string]any{"cell_id": target, "content": fmt.Sprintf("x = %d", i)}}})
				}
			})
			b.Run("insert", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					call("batch_insert_notebook_cells", map[string]any{"path": "big.ipynb", "after_cell_id": target,
						"cells": []any{map[string]any{"content": fmt.Sprintf("y = %d", i)}}})
				}
			})
		})
	}
}
