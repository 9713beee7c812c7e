package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// largeNotebook is n code cells of about 1.5 kB of source with a stream output and a result each,
// like integration/bench's LargeNotebook.
func largeNotebook(n int) ydoc.Notebook {
	nb := bridgetest.DefaultNotebook()
	nb.Cells = nil
	for i := 0; i < n; i++ {
		count := i + 1
		nb.Cells = append(nb.Cells, ydoc.Cell{
			ID: fmt.Sprintf("cell-%04d", i), Type: ydoc.CellCode, ExecutionCount: &count,
			Source: strings.Repeat(fmt.Sprintf("value_%d = compute(%d, window=30)  # step %d\n", i, i, i), 30),
			Outputs: []map[string]any{
				{"output_type": "stream", "name": "stdout", "text": strings.Repeat(fmt.Sprintf("epoch %d: loss 0.%04d ok\n", i, i), 12)},
				{"output_type": "execute_result", "execution_count": count, "metadata": map[string]any{},
					"data": map[string]any{"text/plain": "[" + strings.Repeat("0.123456789, ", 24) + "]"}},
			},
		})
	}
	return nb
}

// The sidecar's own part of a cold join of a large notebook: the fake server hands the whole
// document over at once (no network, no server load), so what is timed is the replica applying
// the server's state, the read's preparation (the load wait reads the file and compares) and
// the read. go test -run '^$' -bench JoinLarge -cpuprofile cpu.out ./bridge/
func BenchmarkJoinLarge(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			nb := largeNotebook(n)
			for i := 0; i < b.N; i++ {
				srv := bridgetest.New(bridgetest.File{Path: bridgetest.NotebookPath, Type: "notebook", Notebook: nb})
				srv.LoadAsLoader(true) // as jupyter-collaboration loads it: the read compares with the file
				m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				room, err := m.Open(ctx, bridgetest.NotebookPath, ydoc.KindNotebook)
				if err != nil {
					b.Fatal(err)
				}
				if err := room.View(ctx, func(d *ydoc.Doc) error {
					_, err := d.Notebook()
					return err
				}); err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
		})
	}
}
