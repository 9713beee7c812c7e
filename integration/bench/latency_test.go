//go:build integration

package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// BenchmarkSidecarLatency is the comparison's single-cell edit and trivial-execution rows for the
// sidecar alone (the same operations, client and checks as `make bench-compare`, without
// jupyter-mcp-server): a quick way to see the tool round trips users wait for.
//
//	go test -tags integration -run '^$' -bench SidecarLatency -benchtime 1x ./integration/bench/
//
// To profile the sidecar under this load: JCM_BENCH_PPROF=127.0.0.1:6060 (its --pprof-listen)
// and JCM_BENCH_EDITS=3000 (a longer edit loop), then
// `go tool pprof 'http://127.0.0.1:6060/debug/pprof/profile?seconds=10'` while it runs.
func BenchmarkSidecarLatency(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	js, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: b.TempDir(), StateDir: b.TempDir()})
	if err != nil {
		b.Fatalf("start jupyter-server: %v", err)
	}
	defer js.Stop()
	b.Logf("jupyter-server at %s", js.URL)
	bin, err := BuildSidecar()
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(filepath.Dir(bin))
	sc, err := StartSidecar(ctx, js, bin)
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Stop()
	b.Logf("sidecar at %s", sc.URL)
	c, err := Connect(ctx, sc)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cfg := Full()
	if n, err := strconv.Atoi(os.Getenv("JCM_BENCH_EDITS")); err == nil && n > 0 { // longer runs to profile
		cfg.Edits = n
	}
	r := &Runner{Cfg: cfg, JS: js, Counter: c, Logf: b.Logf,
		Targets: []*Target{{Server: sc, Client: c, Adapter: SidecarAdapter{C: c}}}}
	r.res = &Results{Config: cfg, Started: time.Now(), Servers: []string{Sidecar}}
	for i := 0; i < b.N; i++ {
		r.edits(ctx)
		r.executes(ctx)
	}
	if f := r.res.Failures(); len(f) > 0 {
		b.Fatalf("failures: %v", f)
	}
	for _, key := range []string{"edit-rt-p50", "edit-rt-p99", "edit-drv-p99", "edit-peer-p50", "edit-peer-p99", "exec-p50", "exec-p99"} {
		b.ReportMetric(r.res.Get(key).Values[Sidecar], key+"-ms")
	}
}
