//go:build integration

package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The join profile (docs/notebooks.md, "Joining a large notebook"): where the time of a cold join
// goes, the sidecar's beside an independent yjs peer's (the server's own load time), on
// jupyter-collaboration 5.0 with and without progressive loading and on jupyter-server-documents.
// A measurement, not a test: it runs only with JCM_JOIN_PROFILE set (a directory for the CPU
// profiles of the sidecar's joins) and takes a few minutes:
//
//	JCM_JOIN_PROFILE=/tmp/joinprof go test -count=1 -tags integration \
//	  -run TestJoinProfile -v -timeout 30m ./integration/
//
// JCM_JOIN_ENGINES (jc5,jc5-progressive,jsd by default) and JCM_JOIN_ROUNDS (3) narrow it.
func TestJoinProfile(t *testing.T) {
	dir := os.Getenv("JCM_JOIN_PROFILE")
	if dir == "" {
		t.Skip("a measurement: set JCM_JOIN_PROFILE to a directory for the profiles")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	engines := strings.Split(envOr("JCM_JOIN_ENGINES", "jc5,jc5-progressive,jsd"), ",")
	rounds := 3
	if n, err := fmt.Sscan(os.Getenv("JCM_JOIN_ROUNDS"), &rounds); n != 1 || err != nil {
		rounds = 3
	}
	notebooks := []profiledNotebook{
		{"1000-cells", largeNotebook(1000), 1000},
		{"5000-cells", largeNotebook(5000), 5000},
		{"20MB-images", imagesNotebook(100, 150<<10), 100},
	}
	var report []string
	for _, e := range engines {
		t.Run(e, func(t *testing.T) { report = append(report, profileEngine(t, e, dir, rounds, notebooks)...) })
	}
	t.Logf("\n| engine | notebook | yjs peer: synced | yjs peer: every cell and output | sidecar: first answer | sidecar: synced | sidecar: ready to edit | sidecar: first edit |\n|---|---|---|---|---|---|---|---|\n%s", strings.Join(report, "\n"))
}

// profiledNotebook is a notebook of the join profile.
type profiledNotebook struct {
	name string
	data []byte
	n    int
}

// profileEngine measures the joins of every notebook on one engine; each row is a table line.
func profileEngine(t *testing.T, e, dir string, rounds int, notebooks []profiledNotebook) []string {
	var report []string
	{
		opts := ServerOptions{Root: t.TempDir(), StateDir: t.TempDir()}
		switch e {
		case "jc5":
			opts.Engine = EngineJC5
		case "jc5-progressive":
			opts.Engine = EngineJC5
			opts.ExtraArgs = []string{"--YDocExtension.document_load_progressively=True"}
		case "jsd":
			opts.Engine = EngineJSD
		default:
			t.Fatalf("unknown engine %q", e)
		}
		ctx := ctxT(t, 20*time.Minute)
		srv, err := StartJupyter(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		a := newAgentWith(t, srv, func(o *bridge.ManagerOptions) { o.FirstReadWait = 150 * time.Millisecond }, nil)
		warm := "warm.ipynb"
		if err := srv.WriteFile(warm, largeNotebook(2)); err != nil {
			t.Fatal(err)
		}
		a.ok(ctx, "get_notebook", map[string]any{"path": warm})
		for _, nb := range notebooks {
			var peerSync, peerAll, first, synced, join, edit []time.Duration
			fromFile := 0
			prof, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s.cpu.pprof", e, nb.name)))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < rounds; i++ {
				// The peer: a cold room of its own file.
				pname := fmt.Sprintf("peer-%s-%d.ipynb", nb.name, i)
				if err := srv.WriteFile(pname, nb.data); err != nil {
					t.Fatal(err)
				}
				p := newPeer(t)
				start := time.Now()
				if err := p.Connect(ctx, srv, pname, "notebook"); err != nil {
					t.Fatal(err)
				}
				peerSync = append(peerSync, time.Since(start))
				if err := peerHoldsAll(ctx, p, nb.n); err != nil {
					t.Fatal(err)
				}
				peerAll = append(peerAll, time.Since(start))
				_ = p.Close()

				// The sidecar: its first answer, then ready to edit, then an edit.
				sname := fmt.Sprintf("sidecar-%s-%d.ipynb", nb.name, i)
				if err := srv.WriteFile(sname, nb.data); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					if err := pprof.StartCPUProfile(prof); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(pprof.StopCPUProfile) // a failed round must not keep it for the next engine
				}
				start = time.Now()
				_, res := a.call(ctx, "get_notebook", map[string]any{"path": sname, "format": "outline", "max_content_length": 5_000_000})
				first = append(first, time.Since(start))
				out, _ := res.StructuredContent.(map[string]any)
				if got, _ := out["cell_count"].(float64); res.IsError || int(got) != nb.n {
					t.Fatalf("%s %s: the first read gave %v cells: %v", e, nb.name, out["cell_count"], res.Content)
				}
				if _, ok := out["from_file"]; ok {
					fromFile++
				}
				room, err := a.sc.manager.Open(ctx, sname, ydoc.KindNotebook)
				if err != nil {
					t.Fatal(err)
				}
				// The load awaited: a read gives up after LoadWait while a progressive load goes on,
				// and is asked again.
				for deadline := time.Now().Add(3 * time.Minute); ; {
					err := room.View(ctx, func(*ydoc.Doc) error { return nil })
					if err == nil {
						break
					}
					if !strings.Contains(err.Error(), "still loading") || time.Now().After(deadline) {
						t.Fatal(err)
					}
				}
				join = append(join, time.Since(start))
				synced = append(synced, room.Info().JoinedAt.Sub(start))
				estart := time.Now()
				if _, err := room.Edit(ctx, func(tx *ydoc.Txn, _ bool) error { return tx.SetSource(nb.n/2, "edited = True") }); err != nil {
					t.Fatal(err)
				}
				edit = append(edit, time.Since(estart))
				if i == 0 {
					pprof.StopCPUProfile()
				}
				a.sc.manager.CloseRoom(sname, ydoc.KindNotebook)
			}
			_ = prof.Close()
			line := fmt.Sprintf("| %s | %s | %s | %s | %s (%d of %d from the file) | %s | %s | %s |", e, nb.name, p50(peerSync), p50(peerAll), p50(first), fromFile, rounds, p50(synced), p50(join), p50(edit))
			report = append(report, line)
			t.Log(line)
		}
	}
	return report
}

// peerHoldsAll polls the peer (a cheap look, every 20 ms: a snapshot per update would cost the
// peer more than the load) until its replica holds n cells, the last with its outputs when the
// file gives it some.
func peerHoldsAll(ctx context.Context, p *Peer, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var r struct {
			Result bool `json:"result"`
		}
		if err := p.Call(ctx, "transact", map[string]any{"code": `const c = cells.get(cells.length - 1); return cells.length === args.n && (c.get('outputs') === undefined || c.get('outputs').length > 0)`, "args": map[string]any{"n": n}}, &r); err != nil {
			return err
		}
		if r.Result {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the peer never held %d cells", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func p50(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2].Round(time.Millisecond).String()
}

// largeNotebook is integration/bench's LargeNotebook: n code cells of about 1.5 kB of source,
// a stream output and a result each (about 2 kB a cell), with ids.
func largeNotebook(n int) []byte {
	cells := make([]any, n)
	for i := range cells {
		src := strings.Repeat(fmt.Sprintf("value_%d = compute(%d, window=30)  # step %d\n", i, i, i), 30)
		text := strings.Repeat(fmt.Sprintf("epoch %d: loss 0.%04d ok\n", i, i), 12)
		data := strings.Repeat("0.123456789, ", 24)
		cells[i] = map[string]any{
			"cell_type": "code", "id": fmt.Sprintf("cell-%04d", i), "metadata": map[string]any{},
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

// imagesNotebook is n code cells each with a PNG output of about size bytes (base64 of random
// bytes behind a PNG signature: what matters to the server and the sidecar is its size).
func imagesNotebook(n, size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	cells := make([]any, n)
	for i := range cells {
		raw := make([]byte, size*3/4)
		for j := range raw {
			raw[j] = byte(rng.IntN(256))
		}
		copy(raw, "\x89PNG\r\n\x1a\n")
		cells[i] = map[string]any{
			"cell_type": "code", "id": fmt.Sprintf("img-%03d", i), "metadata": map[string]any{},
			"execution_count": i + 1, "source": fmt.Sprintf("plot(figure=%d)", i),
			"outputs": []any{map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(raw), "text/plain": "<Figure>"}}},
		}
	}
	b, _ := json.Marshal(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5})
	return b
}
