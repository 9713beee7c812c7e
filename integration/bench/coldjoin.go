//go:build integration

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// FirstReader is a server whose first read of a notebook answers before its room has loaded
// (the sidecar's get_notebook reads the file meanwhile: docs/notebooks.md).
type FirstReader interface {
	FirstRead(ctx context.Context, path string) (cells int, err error)
}

// FirstRead implements FirstReader: get_notebook's outline of the whole notebook.
func (a SidecarAdapter) FirstRead(ctx context.Context, path string) (int, error) {
	r, err := a.C.Tool(ctx, "get_notebook", map[string]any{"path": path, "format": "outline", "max_content_length": 5_000_000})
	if err != nil {
		return 0, err
	}
	n, _ := r.Structured["cell_count"].(float64)
	return int(n), nil
}

// coldJoins measures what an agent waits for a notebook no one has open: its first answer (a
// 1,000-cell notebook) and being ready to edit (a 5,000-cell one), each beside an independent yjs
// peer's cold join of the same notebook — every cell in its replica: the server's own load time,
// which no client can beat. Each timed operation has a fresh file.
func (r *Runner) coldJoins(ctx context.Context) {
	rows := []row{
		{"first-answer-1000", "first answer: a cold 1,000-cell notebook (p50)", "ms", "lower"},
		{"peer-join-1000", "beside it: an independent yjs peer's cold join of that notebook (p50)", "ms", ""},
		{"ready-5000", "ready to edit: a cold 5,000-cell notebook (p50)", "ms", "lower"},
		{"peer-join-5000", "beside it: an independent yjs peer's cold join of that notebook (p50)", "ms", ""},
	}
	small, large := LargeNotebook(1000), LargeNotebook(5000)
	r.op(ctx, "cold joins", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		var first, peer1, ready, peer5 []float64
		for i := 0; i < r.Cfg.Joins; i++ {
			ms1, err := r.peerJoin(ctx, t, small, 1000)
			if err != nil {
				return err
			}
			peer1 = append(peer1, ms1)
			path, err := r.file(t, "cold1000", small)
			if err != nil {
				return err
			}
			start := time.Now()
			var cells int
			if fr, ok := t.Adapter.(FirstReader); ok {
				cells, err = fr.FirstRead(ctx, path)
			} else {
				cells, err = t.Adapter.Open(ctx, path)
			}
			if err != nil {
				return fmt.Errorf("first read %d: %w", i, err)
			}
			first = append(first, ms(time.Since(start)))
			if cells != 1000 {
				return fmt.Errorf("first read %d: %d cells, want 1000", i, cells)
			}
			ms5, err := r.peerJoin(ctx, t, large, 5000)
			if err != nil {
				return err
			}
			peer5 = append(peer5, ms5)
			if path, err = r.file(t, "cold5000", large); err != nil {
				return err
			}
			start = time.Now()
			if cells, err = t.Adapter.Open(ctx, path); err != nil {
				return fmt.Errorf("join %d: %w", i, err)
			}
			ready = append(ready, ms(time.Since(start)))
			if cells != 5000 {
				return fmt.Errorf("join %d: %d cells, want 5000", i, cells)
			}
		}
		put("first-answer-1000", pct(first, .5))
		put("peer-join-1000", pct(peer1, .5))
		put("ready-5000", pct(ready, .5))
		put("peer-join-5000", pct(peer5, .5))
		return nil
	})
}

// peerJoin times an independent yjs peer's cold join of a fresh copy of a notebook, until its
// replica holds every cell.
func (r *Runner) peerJoin(ctx context.Context, t *Target, data []byte, cells int) (float64, error) {
	path, err := r.file(t, "peer", data)
	if err != nil {
		return 0, err
	}
	p, err := integration.StartPeer()
	if err != nil {
		return 0, err
	}
	defer p.Close()
	start := time.Now() // the join, not the peer process's start
	if err := p.Connect(ctx, r.JS, path, "notebook"); err != nil {
		return 0, fmt.Errorf("peer connect: %w", err)
	}
	// A cheap look every 10 ms (a snapshot per update, as WaitFor takes, costs the peer more than
	// the join it measures).
	deadline := time.Now().Add(r.Cfg.PeerTimeout)
	for {
		var res struct {
			Result bool `json:"result"`
		}
		if err := p.Call(ctx, "transact", map[string]any{"code": "return cells.length === args.n", "args": map[string]any{"n": cells}}, &res); err != nil {
			return 0, err
		}
		if res.Result {
			return ms(time.Since(start)), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the peer's join never held %d cells", cells)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
