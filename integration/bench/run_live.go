//go:build integration

package bench

import (
	"context"
	"fmt"
	"strings"
)

// shortNames name each server's files of a run (bench_<short>_<what>_<n>.ipynb), so the kernels
// left at the end can be told apart.
var shortNames = map[string]string{Sidecar: "jcm", JupyterMCP: "jmcp", Live: "live"}

// discovery: what a Code Mode server costs once per conversation besides its few listed tools
// (the definitions rows): the calls and tokens a model spends learning the tools it will call
// from its scripts (Discoverer). Servers that list every tool on every turn have no such cost.
func (r *Runner) discovery(ctx context.Context) {
	rows := []row{
		{"discovery-tokens", "one-time tool discovery (Code Mode), tokens returned", "tokens", "lower"},
		{"discovery-calls", "  … tool calls", "calls", "lower"},
	}
	r.op(ctx, "discovery", rows, func(ctx context.Context, t *Target, put func(string, float64)) error {
		d, ok := t.Adapter.(Discoverer)
		if !ok {
			for _, rw := range rows {
				r.res.Get(rw.key).NA[t.Server.Name] = "every tool listed each turn"
			}
			return nil
		}
		replies, err := d.Discover(ctx)
		if err != nil {
			return err
		}
		texts := make([]string, len(replies))
		for i, rep := range replies {
			texts[i] = rep.Text
		}
		tok, err := CountTokens(ctx, r.Counter, strings.Join(texts, "\n"))
		if err != nil {
			return fmt.Errorf("count tokens: %w", err)
		}
		put("discovery-tokens", float64(tok))
		put("discovery-calls", float64(len(replies)))
		return nil
	})
}
