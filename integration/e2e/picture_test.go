//go:build integration

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pictureEnv names the file TestReadmePicture writes.
const pictureEnv = "JCM_README_PICTURE"

// TestReadmePicture makes the README's picture when JCM_README_PICTURE names the PNG to write
// (make readme-picture): a person's JupyterLab with the agent in the same notebook — its status
// in the collaborators panel, the cells it inserted and ran, its cursor — while the person types
// in a cell above. Skipped otherwise: it checks nothing the other tests do not.
func TestReadmePicture(t *testing.T) {
	out := os.Getenv(pictureEnv)
	if out == "" {
		t.Skip("set " + pictureEnv + "=<file.png> to make the README's picture")
	}
	ctx := ctxT(t, 3*time.Minute)
	name := "sales.ipynb"
	notebookFixture(t, name,
		[2]string{"data", `sales = {"Jan": 120, "Feb": 135, "Mar": 160, "Apr": 152, "May": 171}`},
		[2]string{"total", "total = sum(sales.values())\nprint(f\"total: {total}\")"})
	openNotebook(t, ctx, name)
	waitKernelIdle(t, ctx)
	if err := env.browser.Call(ctx, "click", map[string]any{"selector": `.jp-SideBar .lm-TabBar-tab[data-id="jp-collaboration-panel"]`}, nil); err != nil {
		t.Fatalf("open the collaboration panel: %v", err)
	}

	call(t, ctx, "batch_execute_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"data", "total"}})
	call(t, ctx, "set_user_presence", map[string]any{"status": "busy", "activity_type": "editing", "description": "adding month-over-month growth"})
	call(t, ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "after_cell_id": "total", "cells": []any{
		map[string]any{"id": "growth-md", "cell_type": "markdown", "content": "## Month-over-month growth"},
		map[string]any{"id": "growth", "content": "months = list(sales)\nfor prev, cur in zip(months, months[1:]):\n" +
			"    growth = (sales[cur] - sales[prev]) / sales[prev]\n    print(f\"{cur}: {growth:+.1%}\")"},
	}})
	call(t, ctx, "update_cursor_position", map[string]any{"document_path": name, "cell_id": "growth", "position": map[string]any{"line": 3, "column": 15}})
	if err := env.browser.Type(ctx, 1, "  # checked against the ledger", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := env.browser.WaitFor(ctx, `cells.length === 4 && cells[3].outputs.join('').includes('May:') &&
		document.querySelector('.jp-remote-cursor') !== null &&
		[...document.querySelectorAll('.jp-CollaboratorsList .jp-Collaborator')].some((c) => c.textContent.includes(arg))`,
		agentName, 60*time.Second, nil); err != nil {
		t.Fatalf("the scene never came together: %v", err)
	}
	p, err := filepath.Abs(out)
	if err != nil {
		t.Fatal(err)
	}
	// The top of the page, where the scene is (the viewport is 1400×900).
	clip := map[string]any{"x": 0, "y": 0, "width": 1400, "height": 480}
	if err := env.browser.Call(ctx, "screenshot", map[string]any{"path": p, "clip": clip}, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("picture: %s", p)
}
