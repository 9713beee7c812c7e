package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

func (s *Server) registerNotebookTools() {
	s.mcp.AddTool(mcp.NewTool("get_notebook",
		mcp.WithDescription("Read a live notebook: its cells (id, index, type, source, execution count, outputs) as every collaborator sees them right now."),
		mcp.WithTitleAnnotation("Read notebook"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("path", mcp.Required(), mcp.Description("Notebook path relative to the Jupyter root, e.g. analysis/report.ipynb")),
	), s.getNotebook)
}

type cellView struct {
	Index          int              `json:"index"`
	ID             string           `json:"id"`
	Type           string           `json:"cell_type"`
	Source         string           `json:"source"`
	ExecutionCount *int             `json:"execution_count,omitempty"`
	Outputs        []map[string]any `json:"outputs,omitempty"`
}

func (s *Server) getNotebook(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	path, err := req.RequireString("path")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	room, err := s.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	var nb ydoc.Notebook
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		var err error
		nb, err = d.Notebook()
		return err
	}); err != nil {
		return mcp.NewToolResultError(fmt.Sprintf("read %s: %v", path, err)), nil
	}
	cells := make([]cellView, len(nb.Cells))
	for i, c := range nb.Cells {
		cells[i] = cellView{Index: i, ID: c.ID, Type: c.Type, Source: c.Source, ExecutionCount: c.ExecutionCount, Outputs: c.Outputs}
	}
	out := map[string]any{"path": room.Path(), "cell_count": len(cells), "cells": cells}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(string(b)), nil
}
