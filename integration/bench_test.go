//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Benchmarks against the real server. They report numbers (b.ReportMetric); nothing here
// asserts a speed. Run with `make bench` (-benchtime 1x: each benchmark does its own loop).

// BenchmarkEditToPeer: an edit in the sidecar until the independent peer sees it, over 1,000
// sequential edits of one cell; also the time until the server confirmed the edit (Apply
// returned).
func BenchmarkEditToPeer(b *testing.B) {
	const edits = 1000
	ctx := ctxT(b, 5*time.Minute)
	name := uniqueName(b, ".ipynb")
	if err := shared.WriteFile(name, fixture(b, "jupyter_ydoc--nb0.ipynb")); err != nil {
		b.Fatal(err)
	}
	sc := newSidecar(b, shared, nil)
	room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		b.Fatal(err)
	}
	cellID := replica(b, ctx, room).Cells[0].ID
	p := newPeer(b)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		b.Fatal(err)
	}
	if err := p.Call(ctx, "watchText", map[string]any{"cellId": cellID, "tail": 12}, nil); err != nil {
		b.Fatal(err)
	}
	seen := make([]time.Duration, 0, edits)
	confirmed := make([]time.Duration, 0, edits)
	b.ResetTimer()
	for i := 0; i < edits; i++ {
		marker := fmt.Sprintf("e%d;", i)
		start := time.Now()
		if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
			idx := tx.CellIndex(cellID)
			c, err := tx.Cell(idx)
			if err != nil {
				return err
			}
			return tx.SetSource(idx, c.Source+marker)
		})); err != nil {
			b.Fatal(err)
		}
		confirmed = append(confirmed, time.Since(start))
		if err := awaitTail(ctx, p, marker); err != nil {
			b.Fatal(err)
		}
		seen = append(seen, time.Since(start))
	}
	b.StopTimer()
	report(b, "peer", seen)
	report(b, "confirm", confirmed)
}

func awaitTail(ctx context.Context, p *Peer, marker string) error {
	for {
		select {
		case ev := <-p.Events():
			if ev.Event == "text" && strings.HasSuffix(ev.Tail, marker) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("peer never saw %q: %w", marker, ctx.Err())
		}
	}
}

func report(b *testing.B, what string, ds []time.Duration) {
	slices.Sort(ds)
	pct := func(p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), what+"-p50-ms")
	b.ReportMetric(pct(0.99), what+"-p99-ms")
	b.Logf("%s latency over %d samples: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms", what, len(ds), pct(0.5), pct(0.9), pct(0.99), pct(1))
}

// generatedNotebook builds a notebook of n code cells of about size bytes each (source, a
// stream output and a rich result), like a long analysis notebook.
func generatedNotebook(n, size int) []byte {
	cells := make([]any, n)
	chunk := size / 3
	for i := range cells {
		src := strings.Repeat(fmt.Sprintf("value_%d = compute(%d)  # step\n", i, i), max(1, chunk/30))
		text := strings.Repeat(fmt.Sprintf("progress %d ok\n", i), max(1, chunk/15))
		data := strings.Repeat("0.123456789,", max(1, chunk/12))
		cells[i] = map[string]any{
			"cell_type": "code", "id": fmt.Sprintf("cell-%04d", i), "metadata": map[string]any{"tags": []any{"generated"}},
			"execution_count": i + 1, "source": src,
			"outputs": []any{
				map[string]any{"output_type": "stream", "name": "stdout", "text": text},
				map[string]any{"output_type": "execute_result", "execution_count": i + 1, "metadata": map[string]any{}, "data": map[string]any{"text/plain": data}},
			},
		}
	}
	b, _ := json.Marshal(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5})
	return b
}

// BenchmarkJoinLargeNotebook: join + full sync of a 1,000-cell, ~5 MB notebook; time and the
// heap the replica holds. "cold" includes the server loading the file into a new room; "warm"
// joins a room the server already has in memory (another client is connected).
func BenchmarkJoinLargeNotebook(b *testing.B) {
	raw := generatedNotebook(1000, 5000)
	ctx := ctxT(b, 5*time.Minute)
	var cold, warm []time.Duration
	var heap []float64
	const runs = 5
	for i := 0; i < runs; i++ {
		name := uniqueName(b, ".ipynb")
		if err := shared.WriteFile(name, raw); err != nil {
			b.Fatal(err)
		}
		// cold
		sc := newSidecar(b, shared, nil)
		start := time.Now()
		room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
		if err != nil {
			b.Fatal(err)
		}
		cold = append(cold, time.Since(start))
		// warm: a second sidecar joins while the first keeps the server's room alive
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		sc2 := newSidecar(b, shared, func(o *bridge.ManagerOptions) {})
		start = time.Now()
		room2, err := sc2.manager.Open(ctx, name, ydoc.KindNotebook)
		if err != nil {
			b.Fatal(err)
		}
		warm = append(warm, time.Since(start))
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap = append(heap, float64(after.HeapAlloc)-float64(before.HeapAlloc))
		if n := len(replica(b, ctx, room2).Cells); n != 1000 {
			b.Fatalf("replica has %d cells", n)
		}
		_ = room
		sc2.stop()
		sc.stop()
	}
	report(b, "join-cold", cold)
	report(b, "join-warm", warm)
	slices.Sort(heap)
	mb := float64(len(raw)) / (1 << 20)
	b.ReportMetric(mb, "doc-MB")
	b.ReportMetric(heap[len(heap)/2]/(1<<20), "replica-heap-MB")
	b.Logf("notebook %.2f MB on disk; replica heap (median of %d) %.2f MB = %.1fx the document", mb, runs, heap[len(heap)/2]/(1<<20), heap[len(heap)/2]/float64(len(raw)))
}

// BenchmarkExecuteOverhead: a trivial cell through the tool (edit the room: reset, outputs,
// count; wait for the server's confirmations) against the raw kernel round trip on the same
// kernel; and a batch of 50 trivial cells against 50 raw round trips.
func BenchmarkExecuteOverhead(b *testing.B) {
	const runs = 200
	ctx := ctxT(b, 10*time.Minute)
	name := uniqueName(b, ".ipynb")
	if err := shared.WriteFile(name, fixture(b, "jupyter_ydoc--nb0.ipynb")); err != nil {
		b.Fatal(err)
	}
	a := newAgent(b, shared)
	var cells []any
	var ids []any
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("t%02d", i)
		cells = append(cells, map[string]any{"id": id, "content": fmt.Sprintf("%d + 1", i)})
		ids = append(ids, id)
	}
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "cells": cells, "exec": false})
	// Warm up (kernel start) and find the kernel the tool uses.
	a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "t00"})
	sessions, err := a.sc.client.Sessions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	kernelID := ""
	for _, s := range sessions {
		if s.Path == name && s.Kernel != nil {
			kernelID = s.Kernel.ID
		}
	}
	raw, err := a.sc.client.ConnectKernel(ctx, kernelID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rawOnce := func() time.Duration {
		start := time.Now()
		e, err := raw.Execute(ctx, jupyter.ExecuteRequest{Code: "1 + 1", StoreHistory: true})
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, done, err := e.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if done {
				return time.Since(start)
			}
		}
	}
	// Blocks of raw and tool runs alternate, so that the shared machine's load, which drifts over
	// seconds, weighs on both alike; the first run of each block, which may wait on the other's
	// trailing traffic, is not counted.
	const block = 10
	var rawTimes, toolTimes []time.Duration
	for len(toolTimes) < runs {
		for i := 0; i <= block; i++ {
			if d := rawOnce(); i > 0 {
				rawTimes = append(rawTimes, d)
			}
		}
		for i := 0; i <= block; i++ {
			start := time.Now()
			a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "t01"})
			if i > 0 {
				toolTimes = append(toolTimes, time.Since(start))
			}
		}
	}
	report(b, "raw-kernel", append([]time.Duration(nil), rawTimes...))
	report(b, "tool-cell", append([]time.Duration(nil), toolTimes...))
	slices.Sort(rawTimes)
	slices.Sort(toolTimes)
	b.ReportMetric(float64((toolTimes[runs/2]-rawTimes[runs/2]).Microseconds())/1000, "overhead-p50-ms")
	b.ReportMetric(float64((toolTimes[runs*99/100]-rawTimes[runs*99/100]).Microseconds())/1000, "overhead-p99-ms")

	var batchTool, batchRaw []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		out := a.ok(ctx, "batch_execute_notebook_cells", map[string]any{"path": name, "cell_ids": ids, "timeout": 300})
		if out["status"] != "completed" {
			b.Fatalf("batch: %v", out["status"])
		}
		batchTool = append(batchTool, time.Since(start))
		start = time.Now()
		for j := 0; j < 50; j++ {
			rawOnce()
		}
		batchRaw = append(batchRaw, time.Since(start))
	}
	slices.Sort(batchTool)
	slices.Sort(batchRaw)
	b.ReportMetric(float64(batchTool[2].Microseconds())/1000, "batch50-tool-ms")
	b.ReportMetric(float64(batchRaw[2].Microseconds())/1000, "batch50-raw-ms")
	b.Logf("batch of 50 trivial cells (median of 5): tool %.0f ms, raw kernel %.0f ms, overhead %.1f ms per cell",
		float64(batchTool[2].Microseconds())/1000, float64(batchRaw[2].Microseconds())/1000, float64((batchTool[2]-batchRaw[2]).Microseconds())/1000/50)
}

// BenchmarkEditScaling: the single-cell update and the one-cell insert tool round trips
// (in-process MCP client, tools, room, real server; exec off) in notebooks of 10, 1,000 and
// 3,000 generated cells of about 1.5 kB each. Rounds alternate between the sizes, so a change
// in the shared machine's load falls on all of them alike. The cost of an edit should not grow
// with the notebook: *-ratio is the 3,000-cell p50 over the 10-cell p50.
//
//	go test -tags integration -run '^$' -bench EditScaling -benchtime 1x ./integration/
func BenchmarkEditScaling(b *testing.B) {
	const rounds, updates, inserts = 10, 20, 10
	sizes := []int{10, 1000, 3000}
	ctx := ctxT(b, 15*time.Minute)
	a := newAgent(b, shared)
	type target struct {
		name, cell     string
		update, insert []time.Duration
	}
	targets := make([]*target, len(sizes))
	for k, n := range sizes {
		name := uniqueName(b, fmt.Sprintf("-%d.ipynb", n))
		if err := shared.WriteFile(name, generatedNotebook(n, 1500)); err != nil {
			b.Fatal(err)
		}
		a.ok(ctx, "create_notebook_session", map[string]any{"path": name})
		targets[k] = &target{name: name, cell: fmt.Sprintf("cell-%04d", n/2)}
	}
	for r := 0; r < rounds; r++ {
		for _, t := range targets {
			for i := 0; i < updates; i++ {
				start := time.Now()
				a.ok(ctx, "batch_update_notebook_cells", map[string]any{"path": t.name, "exec": false,
					"updates": []any{map[string]any{"cell_id": t.cell, "content": fmt.Sprintf("x = %d  # round %d", i, r)}}})
				t.update = append(t.update, time.Since(start))
			}
			for i := 0; i < inserts; i++ {
				start := time.Now()
				a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": t.name, "exec": false, "after_cell_id": t.cell,
					"cells": []any{map[string]any{"content": fmt.Sprintf("y = %d  # round %d", i, r)}}})
				t.insert = append(t.insert, time.Since(start))
			}
		}
	}
	p50 := func(ds []time.Duration) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	for k, t := range targets {
		report(b, fmt.Sprintf("update-%d", sizes[k]), t.update)
		report(b, fmt.Sprintf("insert-%d", sizes[k]), t.insert)
	}
	first, last := targets[0], targets[len(targets)-1]
	b.ReportMetric(p50(last.update)/p50(first.update), "update-ratio")
	b.ReportMetric(p50(last.insert)/p50(first.insert), "insert-ratio")
}
