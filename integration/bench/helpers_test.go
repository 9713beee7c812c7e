//go:build integration

package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

func TestAnswers2(t *testing.T) {
	for text, want := range map[string]bool{
		"2\n[COMPLETED in 1.0s]":                                    true,
		`{"outputs":[{"output_type":"execute_result","text":"2"}]}`: true,
		`{"execution_count":2,"outputs":[]}`:                        false,
		"22\n12":                                                    false,
		"":                                                          false,
	} {
		if got := answers2(text); got != want {
			t.Errorf("answers2(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{5, 1, 4, 2, 3}
	if got := pct(s, .5); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := pct(s, .99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
	if got := pct([]float64{7}, .5); got != 7 {
		t.Errorf("p50 of one = %v", got)
	}
}

func TestCheckInserted(t *testing.T) {
	snap := func(srcs ...string) integration.PeerSnapshot {
		var s integration.PeerSnapshot
		for _, src := range srcs {
			s.Cells = append(s.Cells, integration.PeerCell{Source: src})
		}
		return s
	}
	want := []string{"a", "b"}
	if err := checkInserted(snap("# first", "a", "b"), want); err != nil {
		t.Errorf("exact: %v", err)
	}
	err := checkInserted(snap("# first", "a", "a", "b"), want)
	if err == nil || !strings.Contains(err.Error(), "duplicated 1") {
		t.Errorf("duplicate not reported: %v", err)
	}
	err = checkInserted(snap("# first", "b"), want)
	if err == nil || !strings.Contains(err.Error(), "missing 1") {
		t.Errorf("missing not reported: %v", err)
	}
	err = checkInserted(snap("# first", "b", "a"), want)
	if err == nil || !strings.Contains(err.Error(), "order differs: true") {
		t.Errorf("order not reported: %v", err)
	}
}

func TestReport(t *testing.T) {
	res := &Results{Config: Smoke(), Started: time.Now(), Servers: []string{Sidecar, JupyterMCP}}
	a := res.metric("a", "edit | p50", "ms", "lower")
	a.Values[Sidecar], a.Values[JupyterMCP] = 2, 8
	b := res.metric("b", "rate", "edits/s", "higher")
	b.Values[Sidecar] = 100
	b.Errors[JupyterMCP] = "lost\nedit"
	c := res.metric("c", "markdown", "tokens", "lower")
	c.Values[Sidecar] = 10
	c.NA[JupyterMCP] = "no such format"
	md := Markdown(res, Environment{Command: "make x"}, "chart.png")
	for _, want := range []string{`| edit \| p50 | lower | 2.0 ms | 8.0 ms | 4.00× |`, "**failed**: lost edit", "n/a (no such format)", "- jupyter-mcp-server: rate: lost\nedit"} {
		if !strings.Contains(md, strings.ReplaceAll(want, "\nedit", " edit")) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if f := res.Failures(); len(f) != 1 || !strings.HasPrefix(f[0], JupyterMCP+": rate:") {
		t.Errorf("failures = %q", f)
	}
	if img := Chart(res); img.Bounds().Dy() < 3*30 {
		t.Errorf("chart too small: %v", img.Bounds())
	}
}

// Three servers: a value and a ratio column per server, n/a where a row does not apply, and
// the chart grows a bar per server.
func TestReportThreeServers(t *testing.T) {
	res := &Results{Config: Smoke(), Started: time.Now(), Servers: []string{Sidecar, JupyterMCP, Live}}
	a := res.metric("a", "edit", "ms", "lower")
	a.Values[Sidecar], a.Values[JupyterMCP], a.Values[Live] = 2, 8, 5
	d := res.metric("d", "discovery", "tokens", "lower")
	d.Values[Live] = 1200
	d.NA[Sidecar], d.NA[JupyterMCP] = "every tool listed each turn", "every tool listed each turn"
	z := res.metric("z", "lost", "edits", "lower")
	z.Values[Sidecar], z.Values[JupyterMCP], z.Values[Live] = 0, 0, 0
	md := Markdown(res, Environment{Command: "make x"}, "")
	for _, want := range []string{
		"# jupyter-collab-mcp vs jupyter-mcp-server and jupyter-mcp-live",
		"| measurement | better | jupyter-collab-mcp | jupyter-mcp-server | jupyter-mcp-live | ratio jupyter-mcp-server | ratio jupyter-mcp-live |\n|---|---|---|---|---|---|---|\n",
		"| edit | lower | 2.0 ms | 8.0 ms | 5.0 ms | 4.00× | 2.50× |",
		"| discovery | lower | n/a (every tool listed each turn) | n/a (every tool listed each turn) | 1200 tokens | – | – |",
		"| lost | lower | 0 edits | 0 edits | 0 edits | equal | equal |",
		"| operation | jupyter-collab-mcp | jupyter-mcp-server | jupyter-mcp-live |",
		"Code Mode",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	two := Chart(&Results{Servers: []string{Sidecar, JupyterMCP}, Metrics: res.Metrics})
	if three := Chart(res); three.Bounds().Dy() <= two.Bounds().Dy() {
		t.Errorf("chart rows do not grow with a third server: %v vs %v", three.Bounds(), two.Bounds())
	}
}
