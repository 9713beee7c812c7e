//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// Notebooks whose cells jupyter-server gives new random ids on every read — nbformat v3 (its
// upgrade to v4), v4.5 cells without an id and a v4.5 cell whose id another cell already has (its
// validator's repairs) — are read at once: the wait for a notebook the server is still loading
// must not take the file's ids (a fresh read of them) for the room's (another one). Each is a
// real file (integration/testdata/notebooks: nbformat's own test notebooks) or made of one (the
// jupyter-mcp-server fixture with 4 of every 5 cells without an id). What the agent reads is
// what an independent yjs peer in the same room sees.
func TestUntrustedCellIDsDoNotStallReads(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	cases := []struct {
		name    string
		content []byte
	}{
		{"v3", fixture(t, "notebooks/test3.ipynb")},
		{"v4.5 without ids", fixture(t, "notebooks/v4_5_no_cell_id.ipynb")},
		{"duplicate ids", fixture(t, "notebooks/invalid_unique_cell_id.ipynb")},
		{"v4.5 with most ids missing", partialCellIDs(t, fixture(t, "jupyter-mcp-server--notebook.ipynb"), 5)},
	}
	a := newAgent(t, shared)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := uniqueName(t, ".ipynb")
			if err := shared.WriteFile(name, c.content); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out := a.ok(ctx, "get_notebook", map[string]any{"path": name, "format": "json", "include_outputs": false, "max_content_length": 5_000_000})
			took := time.Since(start)
			t.Logf("first read of %s: %s", c.name, took.Round(time.Millisecond))
			if took > 5*time.Second {
				t.Errorf("the first read took %s (it must not wait for ids that never come)", took.Round(time.Millisecond))
			}
			p := newPeer(t)
			if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
				t.Fatal(err)
			}
			snap := mustSnapshot(t, ctx, p)
			var got []string
			for _, cell := range cellResults(out) {
				s, _ := cell["source"].(string)
				got = append(got, s)
			}
			if want := peerSources(snap); len(want) == 0 || !jsonEq(got, want) {
				t.Errorf("the agent read %d cells, the peer sees %d:\nagent %q\npeer  %q", len(got), len(want), got, want)
			}
		})
	}
}

// partialCellIDs turns a notebook into nbformat 4.5 with an id on one cell of every n only, as
// generated notebooks often are.
func partialCellIDs(t testing.TB, b []byte, n int) []byte {
	t.Helper()
	var nb map[string]any
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatal(err)
	}
	for i, c := range nb["cells"].([]any) {
		cell := c.(map[string]any)
		delete(cell, "id")
		if i%n == 0 {
			cell["id"] = fmt.Sprintf("kept-%d", i)
		}
	}
	nb["nbformat_minor"] = 5
	out, err := json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
