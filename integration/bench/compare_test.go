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

// compare starts one jupyter-server (with jupyter-mcp-live inside), the two other MCP servers and
// a client for each of the three, runs cfg and writes results.md and chart.png to out.
func compare(t *testing.T, cfg Config, timeout time.Duration, out, command string) *Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	opts, err := BenchJupyterOptions(t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	js, err := integration.StartJupyter(ctx, opts)
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
	live := LiveServer(js)
	clients := map[string]*Client{}
	for _, s := range []*Server{sc, jm, live} {
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
		{Server: live, Client: clients[Live], Adapter: LiveAdapter{C: clients[Live]}},
	}}
	res := r.Run(ctx)
	if dir := os.Getenv("JCM_BENCH_DUMP"); dir != "" { // the servers' logs, to look for errors they did not report
		_ = os.WriteFile(filepath.Join(dir, Sidecar+".log"), []byte(sc.Log()), 0o644)
		_ = os.WriteFile(filepath.Join(dir, JupyterMCP+".log"), []byte(jm.Log()), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "jupyter-server.log"), []byte(js.Log()), 0o644)
	}
	env := Describe(ctx, js, command, clients)
	if err := Write(out, res, env); err != nil {
		t.Fatal(err)
	}
	if t.Failed() || len(res.Failures()) > 0 {
		t.Logf("sidecar log tail:\n%s\njupyter-mcp-server log tail:\n%s\njupyter-server (and jupyter-mcp-live) log tail:\n%s", tail(sc.Log(), 3000), tail(jm.Log(), 3000), tail(js.Log(), 3000))
	}
	return res
}

// TestCompareSmoke runs every operation a few times against the three servers and checks that each
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
	if len(res.Servers) != 3 {
		t.Errorf("servers %v, want three", res.Servers)
	}
	expect("insert-calls", Sidecar, 1)
	expect("insert-calls", JupyterMCP, float64(Smoke().InsertCells))
	expect("insert-calls", Live, float64((Smoke().InsertCells+liveMaxToolCalls-1)/liveMaxToolCalls)) // scripts of at most 50 tool calls
	expect("defs-default-tools", Live, 3)
	expect("discovery-calls", Live, 2)
	for _, s := range res.Servers {
		expect("edit-lost", s, 0)
		expect("sustained-missed", s, 0)
		for _, k := range []string{"read-out-tokens", "read-src-tokens", "hwm", "exec-p50", "join-ms"} {
			if m := res.Get(k); m == nil || (m.Values[s] <= 0 && m.NA[s] == "") {
				t.Errorf("%s %s not measured: %+v", s, k, m)
			}
		}
	}
	if m := res.Get("discovery-tokens"); m == nil || m.Values[Live] <= 0 || m.NA[Sidecar] == "" || m.NA[JupyterMCP] == "" {
		t.Errorf("discovery: want a jupyter-mcp-live value, n/a for the others, got %+v", m)
	}
	if m := res.Get("hwm"); m == nil || m.Values[Sidecar] <= 0 || m.Values[JupyterMCP] <= 0 || m.NA[Live] == "" {
		t.Errorf("memory: want values for the two processes, n/a for the extension, got %+v", m)
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
	if m := res.Get("read-script-tokens"); m == nil || m.Values[Sidecar] <= 0 || m.Values[Live] <= 0 || m.NA[JupyterMCP] == "" {
		t.Errorf("sources by script: want values for the sidecar and jupyter-mcp-live, n/a for jupyter-mcp-server, got %+v", m)
	}
	if m := res.Get("read-md-tokens"); m == nil || m.Values[Sidecar] <= 0 || m.NA[JupyterMCP] == "" || m.NA[Live] == "" {
		t.Errorf("markdown read: want a sidecar value and n/a for the others, got %+v", m)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| measurement | better | jupyter-collab-mcp | jupyter-mcp-server | jupyter-mcp-live | ratio jupyter-mcp-server | ratio jupyter-mcp-live |",
		"single-cell edit", "edits/s", "VmHWM", "command: `go test", JupyterMCPVersion, "PyPI pin " + LiveVersion, "one-time tool discovery"} {
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
// The other servers' failures are results; the sidecar's fail the test.
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
