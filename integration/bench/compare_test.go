//go:build integration

package bench

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// compare starts one jupyter-server, both MCP servers and their clients, runs cfg and writes
// results.md and chart.png to out.
func compare(t *testing.T, cfg Config, timeout time.Duration, out, command string) *Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	js, err := integration.StartJupyter(ctx, integration.ServerOptions{Root: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start jupyter-server: %v", err)
	}
	t.Cleanup(js.Stop)
	bin, err := BuildSidecar()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	sc, err := StartSidecar(ctx, js, bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	jm, err := StartJupyterMCP(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(jm.Stop)
	clients := map[string]*Client{}
	for _, s := range []*Server{sc, jm} {
		c, err := Connect(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[s.Name] = c
	}
	r := &Runner{Cfg: cfg, JS: js, Counter: clients[Sidecar], Logf: t.Logf, Targets: []*Target{
		{Server: sc, Client: clients[Sidecar], Adapter: SidecarAdapter{C: clients[Sidecar]}},
		{Server: jm, Client: clients[JupyterMCP], Adapter: JupyterMCPAdapter{C: clients[JupyterMCP]}},
	}}
	res := r.Run(ctx)
	if dir := os.Getenv("JCM_BENCH_DUMP"); dir != "" { // the servers' logs, to look for errors they did not report
		_ = os.WriteFile(filepath.Join(dir, Sidecar+".log"), []byte(sc.Log()), 0o644)
		_ = os.WriteFile(filepath.Join(dir, JupyterMCP+".log"), []byte(jm.Log()), 0o644)
	}
	env := Describe(ctx, js, command, clients)
	if err := Write(out, res, env); err != nil {
		t.Fatal(err)
	}
	if t.Failed() || len(res.Failures()) > 0 {
		t.Logf("sidecar log tail:\n%s\njupyter-mcp-server log tail:\n%s", tail(sc.Log(), 3000), tail(jm.Log(), 3000))
	}
	return res
}

// TestCompareSmoke runs every operation a few times against both servers and checks that each
// answered correctly (edits reach the peer, inserted cells arrive once and in order, reads
// cover every cell, executions return 2) and that the report is written — to a temp dir.
func TestCompareSmoke(t *testing.T) {
	out := t.TempDir()
	res := compare(t, Smoke(), 20*time.Minute, out, "go test -tags integration -run TestCompareSmoke ./integration/bench/")
	for _, f := range res.Failures() {
		t.Errorf("%s", f)
	}
	for _, m := range res.Metrics {
		for _, s := range res.Servers {
			if _, na := m.NA[s]; na {
				continue
			}
			if _, ok := m.Values[s]; !ok {
				t.Errorf("%s: no value for %q", s, m.Label)
			}
		}
	}
	expect := func(key, server string, want float64) {
		if m := res.Get(key); m == nil || m.Values[server] != want {
			t.Errorf("%s %s = %v, want %v", server, key, m, want)
		}
	}
	expect("insert-calls", Sidecar, 1)
	expect("insert-calls", JupyterMCP, float64(Smoke().InsertCells))
	for _, s := range res.Servers {
		expect("edit-lost", s, 0)
		expect("sustained-missed", s, 0)
		for _, k := range []string{"read-out-tokens", "read-src-tokens", "hwm", "exec-p50", "join-ms"} {
			if m := res.Get(k); m == nil || m.Values[s] <= 0 {
				t.Errorf("%s %s not measured: %+v", s, k, m)
			}
		}
	}
	// Issue 21's budgets for what a client sends on every turn, measured as the client lists them.
	for key, limit := range map[string]float64{"defs-default-tools": 20, "defs-default-tokens": 4000, "defs-all-tokens": 9000} {
		if m := res.Get(key); m == nil || m.Values[Sidecar] <= 0 || m.Values[Sidecar] > limit {
			t.Errorf("%s %s: want 1..%v, got %+v", Sidecar, key, limit, m)
		}
	}
	if m := res.Get("defs-all-tokens"); m == nil || m.Values[JupyterMCP] <= 0 {
		t.Errorf("%s tool definitions not measured: %+v", JupyterMCP, m)
	}
	if m := res.Get("read-md-tokens"); m == nil || m.Values[Sidecar] <= 0 || m.NA[JupyterMCP] == "" {
		t.Errorf("markdown read: want a sidecar value and n/a for jupyter-mcp-server, got %+v", m)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| measurement | better | jupyter-collab-mcp | jupyter-mcp-server | ratio |", "single-cell edit", "edits/s", "VmHWM", "command: `go test", JupyterMCPVersion} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	f, err := os.Open(filepath.Join(out, "chart.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chart.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 30*len(res.Metrics) {
		t.Errorf("chart.png is %v for %d rows", b, len(res.Metrics))
	}
	t.Logf("results:\n%s", md)
}

// TestCompareFull is `make bench-compare`: the full run, written to JCM_BENCH_OUT (docs/benchmarks).
// jupyter-mcp-server's failures are results; the sidecar's fail the test.
func TestCompareFull(t *testing.T) {
	out := os.Getenv("JCM_BENCH_OUT")
	if out == "" {
		t.Skip("set JCM_BENCH_OUT (make bench-compare does) to run the full comparison")
	}
	command := os.Getenv("JCM_BENCH_COMMAND")
	if command == "" {
		command = "make bench-compare"
	}
	res := compare(t, Full(), 50*time.Minute, out, command)
	for _, f := range res.Failures() {
		if strings.HasPrefix(f, Sidecar+":") {
			t.Errorf("%s", f)
		} else {
			t.Logf("recorded: %s", f)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	t.Logf("written to %s:\n%s", out, md)
}
