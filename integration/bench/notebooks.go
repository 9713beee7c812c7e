//go:build integration

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// notebookJSON builds an nbformat 4.5 notebook of code cells with the given ids and sources.
func notebookJSON(ids, sources []string) []byte {
	cells := make([]any, len(ids))
	for i := range ids {
		cells[i] = map[string]any{"cell_type": "code", "id": ids[i], "metadata": map[string]any{},
			"execution_count": nil, "outputs": []any{}, "source": sources[i]}
	}
	b, _ := json.Marshal(map[string]any{"cells": cells, "nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}}})
	return b
}

// LargeNotebook generates the 1,000-cell notebook: each cell about 1.5 kB of source, a stream
// output and an execute_result, like a long analysis notebook (about 2 MB in all).
func LargeNotebook(n int) []byte {
	cells := make([]any, n)
	for i := range cells {
		src := strings.Repeat(fmt.Sprintf("value_%d = compute(%d, window=30)  # step %d\n", i, i, i), 30)
		text := strings.Repeat(fmt.Sprintf("epoch %d: loss 0.%04d ok\n", i, i), 12)
		data := strings.Repeat("0.123456789, ", 24)
		cells[i] = map[string]any{
			"cell_type": "code", "id": largeCellID(i), "metadata": map[string]any{},
			"execution_count": i + 1, "source": src,
			"outputs": []any{
				map[string]any{"output_type": "stream", "name": "stdout", "text": text},
				map[string]any{"output_type": "execute_result", "execution_count": i + 1, "metadata": map[string]any{},
					"data": map[string]any{"text/plain": "[" + data + "]"}},
			},
		}
	}
	b, _ := json.Marshal(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5})
	return b
}

func largeCellID(i int) string { return fmt.Sprintf("cell-%04d", i) }

// FixtureDir is ydoc/testdata, where the shared fixtures are vendored so a clean clone has them
// (JCM_FIXTURES overrides).
func FixtureDir() (string, error) {
	if d := os.Getenv("JCM_FIXTURES"); d != "" {
		return d, nil
	}
	root, err := integration.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "ydoc", "testdata"), nil
}

// ReadNotebookSource names where the 200-cell read fixture comes from (for the report).
const ReadNotebookSource = "jupyter-mcp-server--notebook.ipynb (161 cells, 118 outputs incl. PNG images) followed by its first 39 cells again"

// ReadNotebook builds the 200-cell notebook with outputs for the read benchmark from the one
// fixture with real outputs (Datalayer's own demo notebook: 161 cells, PNG images): its cells,
// then its first cells again up to 200. Its nbformat 4.2 has no cell ids; the server adds them.
func ReadNotebook(cells int) ([]byte, error) {
	dir, err := FixtureDir()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "jupyter-mcp-server--notebook.ipynb"))
	if err != nil {
		return nil, fmt.Errorf("bench: read fixture (see ydoc/testdata/README.md): %w", err)
	}
	var nb map[string]any
	if err := json.Unmarshal(raw, &nb); err != nil {
		return nil, fmt.Errorf("bench: parse fixture: %w", err)
	}
	src, _ := nb["cells"].([]any)
	if len(src) == 0 {
		return nil, fmt.Errorf("bench: fixture has no cells")
	}
	out := make([]any, 0, cells)
	for i := 0; len(out) < cells; i++ {
		out = append(out, src[i%len(src)])
	}
	nb["cells"] = out
	return json.Marshal(nb)
}
