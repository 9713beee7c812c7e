//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// A person types in a real JupyterLab tab while an agent inserts cells, and jupyter-server is
// SIGKILLed and started again on the same port (issue 26): once with its update store
// (.jupyter_ystore.db in its working directory) kept, once with it deleted, as when a container
// is recreated with the notebooks on a volume and the server's working directory not
// (jupyter-server-documents keeps no such store: one run there). The tab is left open: its
// provider reconnects by itself with its old copy of the document, and the person goes on typing
// throughout. Nothing typed ≥ 1 s before the kill, nor any cell confirmed to the agent, may be
// lost or doubled; the tab (what the page shows), an independent peer, the sidecar and the file
// agree at the end. Screenshots go to the artifacts directory (crash-<variant>-*.png).
//
// With JCM_E2E_BASELINE=1 the same runs without the sidecar (the tab alone) are added: they
// measure what jupyter-server does by itself and assert only that the test could run.

// crashTokenRE matches a token the tab typed: @t0001@.
var crashTokenRE = regexp.MustCompile(`@t\d{4}@`)

type crashVariant struct {
	name        string
	deleteStore bool
	sidecar     bool
}

func TestTabTypingThroughServerCrash(t *testing.T) {
	variants := []crashVariant{{"store-kept", false, true}, {"store-deleted", true, true}}
	if env.srv.Engine.Documents() {
		variants = []crashVariant{{"no-store", false, true}}
	}
	if os.Getenv("JCM_E2E_BASELINE") != "" {
		for _, v := range slices.Clone(variants) {
			variants = append(variants, crashVariant{v.name + "-tab-alone", v.deleteStore, false})
		}
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { crashRun(t, v) })
	}
}

// crashAgentCell is one insert of the agent and what the tool said.
type crashAgentCell struct {
	marker string
	ok     bool
	end    time.Time
	err    string
}

// typedToken is one token the tab typed (browser.mjs startTyping).
type typedToken struct {
	Tok   string `json:"tok"`
	At    int64  `json:"at"` // ms since the epoch, when its last key was typed
	Shown bool   `json:"shown"`
}

type typingResult struct {
	Tokens  []typedToken `json:"tokens"`
	Dialogs []struct {
		At    int64  `json:"at"`
		Title string `json:"title"`
		Body  string `json:"body"`
	} `json:"dialogs"`
	Refocus int      `json:"refocus"`
	Errors  []string `json:"errors"`
}

func crashRun(t *testing.T, v crashVariant) {
	ctx := ctxT(t, 5*time.Minute)
	stateDir := t.TempDir()
	if err := writeLabSettings(stateDir); err != nil {
		t.Fatal(err)
	}
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(); _ = os.RemoveAll(srv.Root) })
	// The page is left (as a tab closed) before the server stops, so nothing of it keeps
	// reconnecting into the next test.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.browser.Call(ctx, "blank", nil, nil)
	})

	const name = "crash.ipynb"
	writeNotebook(t, srv, name, [2]string{"typed", "# typed by a person:"}, [2]string{"other", "x = 1"})

	var mcp *integration.MCPClient
	var sidecar *integration.SidecarProcess
	if v.sidecar {
		sidecar, err = integration.StartHTTPSidecar(ctx, srv, "MCP_TOOLSETS=default,admin", "MCP_CALL_TIMEOUT=20s")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sidecar.Stop)
		t.Cleanup(func() { // registered after Stop: runs before it
			if t.Failed() { // the sidecar's log beside the screenshots, to find why
				f := filepath.Join(env.artifacts, "crash-"+v.name+"-sidecar.log")
				if err := os.WriteFile(f, []byte(sidecar.Log.String()), 0o644); err == nil {
					t.Logf("sidecar log kept: %s", f)
				}
			}
		})
		mcp, err = integration.StartMCPClient()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mcp.Close() })
		if err := mcp.Call(ctx, "connect", map[string]any{"transport": "http", "url": sidecar.URL,
			"headers": map[string]string{"Authorization": "Bearer " + sidecar.Token}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ws := "crash-" + v.name
	url := fmt.Sprintf("%slab/workspaces/%s/tree/%s?token=%s", srv.URL, ws, name, srv.Token)
	if err := env.browser.Open(ctx, url, t.Name()); err != nil {
		t.Fatalf("open %s in JupyterLab: %v", name, err)
	}
	if err := env.browser.WaitFor(ctx, `cells.length === 2 && cells[0].source === '# typed by a person:'`, nil, 60*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	// The kernel the notebook asks for is started before the typing begins (its start moves the
	// focus); nothing here runs code.
	if err := env.browser.WaitFor(ctx, `document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'`,
		nil, 90*time.Second, nil); err != nil {
		t.Logf("the kernel is not idle in the page (typing anyway): %v", err)
	}
	shot := func(what string) { screenshot(t, ctx, fmt.Sprintf("crash-%s-%s.png", v.name, what)) }

	// The person types; the agent inserts a cell every 300 ms.
	if err := env.browser.Call(ctx, "startTyping", map[string]any{"cell": 0, "prefix": "t", "delayMs": 15,
		"dialogShots": filepath.Join(env.artifacts, "crash-"+v.name+"-dialog")}, nil); err != nil {
		t.Fatal(err)
	}
	typingStopped := false
	stopTyping := func() typingResult {
		var r typingResult
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := env.browser.Call(sctx, "stopTyping", nil, &r); err != nil {
			t.Fatalf("stop typing: %v", err)
		}
		typingStopped = true
		return r
	}
	defer func() {
		if !typingStopped {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = env.browser.Call(ctx, "stopTyping", nil, nil)
		}
	}()
	var mu sync.Mutex
	var agentCells []crashAgentCell
	agentLoop, stopAgent := context.WithCancel(ctx)
	var agentDone sync.WaitGroup
	if v.sidecar {
		agentDone.Add(1)
		go func() {
			defer agentDone.Done()
			for n := 1; agentLoop.Err() == nil; n++ {
				m := fmt.Sprintf("e%04d", n)
				_, err := callOn(ctx, mcp, sidecar, "batch_insert_notebook_cells", map[string]any{"path": name, "exec": false,
					"cells": []any{map[string]any{"cell_type": "code", "content": "# agent cell " + m}}})
				rec := crashAgentCell{marker: m, ok: err == nil, end: time.Now()}
				if err != nil {
					rec.err = err.Error()
				}
				mu.Lock()
				agentCells = append(agentCells, rec)
				mu.Unlock()
				select {
				case <-agentLoop.Done():
				case <-time.After(300 * time.Millisecond):
				}
			}
		}()
	}
	defer func() { stopAgent(); agentDone.Wait() }()

	sleepCtx(ctx, 8*time.Second)
	shot("1-before-kill")
	srv.Kill()
	killAt := time.Now()
	if v.deleteStore {
		for _, f := range []string{".jupyter_ystore.db", ".jupyter_ystore.db-journal", ".jupyter_ystore.db-wal"} {
			if err := os.Remove(filepath.Join(stateDir, f)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
	sleepCtx(ctx, time.Second)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	store := map[bool]string{true: "update store deleted", false: "update store kept"}[v.deleteStore]
	if srv.Engine.Documents() {
		store = "no update store on this engine"
	}
	t.Logf("jupyter-server killed (%s), back after %v", store, restarted.Sub(killAt).Round(100*time.Millisecond))

	// The tab reconnects by itself (y-websocket's backoff: at most 2.5 s): an independent peer
	// sees what it types after the restart. Then two more seconds of typing.
	peer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.Connect(ctx, srv, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	reconnected := false
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); {
		var st struct {
			Last *typedToken `json:"last"`
		}
		if err := env.browser.Call(ctx, "typingState", nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.Last != nil && time.UnixMilli(st.Last.At).After(restarted) {
			if _, err := peer.WaitFor(ctx, fmt.Sprintf(`nb.cells.some(c => c.source.includes(%q))`, st.Last.Tok), 1000); err == nil {
				reconnected = true
				break
			}
		} else {
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	if reconnected {
		t.Logf("the tab's typing after the restart reached the server %v after it was back", time.Since(restarted).Round(100*time.Millisecond))
	} else {
		t.Logf("45 s after the restart, nothing the tab typed since reached the server")
	}
	sleepCtx(ctx, 2*time.Second)
	shot("2-after-restart")
	stopAgent()
	agentDone.Wait()
	typed := stopTyping()

	// Settle: the page, an independent peer, the sidecar and the file agree.
	var page, peerSrc, fileSrc []string
	why := ""
	deadline := time.Now().Add(60 * time.Second)
	for {
		page, peerSrc, fileSrc, _, why = crashViews(t, ctx, peer, srv, name, mcp, sidecar)
		if why == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	shot("3-settled")
	if why != "" {
		if v.sidecar {
			t.Errorf("DISAGREE: 60 s after the typing stopped, %s", why)
		} else {
			t.Logf("without the sidecar, 60 s after the typing stopped: %s", why)
		}
	}

	// What the tab typed: once each; ≥ 1 s before the kill: there.
	counts := map[string]map[string]int{"page": {}, "peer": {}, "file": {}}
	for view, srcs := range map[string][]string{"page": page, "peer": peerSrc, "file": fileSrc} {
		for _, s := range srcs {
			for _, tok := range crashTokenRE.FindAllString(s, -1) {
				counts[view][tok]++
			}
		}
	}
	var typed1s, typedLate int
	lost1s, doubled := map[string][]string{}, map[string][]string{}
	var lateLost []string
	for _, tk := range typed.Tokens {
		if !tk.Shown {
			continue // the keys did not land in the editor (a dialog took them): never typed there
		}
		at := time.UnixMilli(tk.At)
		before := at.Before(killAt.Add(-time.Second))
		if before {
			typed1s++
		} else {
			typedLate++
		}
		for _, view := range []string{"page", "peer", "file"} {
			n := counts[view][tk.Tok]
			switch {
			case n > 1:
				doubled[view] = append(doubled[view], fmt.Sprintf("%s×%d", tk.Tok, n))
			case n == 0 && before:
				lost1s[view] = append(lost1s[view], tk.Tok)
			case n == 0 && view == "peer":
				lateLost = append(lateLost, tk.Tok)
			}
		}
	}
	notShown := 0
	for _, tk := range typed.Tokens {
		if !tk.Shown {
			notShown++
		}
	}
	var dialogs []string
	for _, d := range typed.Dialogs {
		dialogs = append(dialogs, fmt.Sprintf("%s at +%.1fs after the kill: %q", d.Title, time.UnixMilli(d.At).Sub(killAt).Seconds(), trimS(d.Body, 160)))
	}
	t.Logf("tab: %d tokens typed (%d ≥ 1 s before the kill, %d after; %d never shown in the editor), %d refocus, dialogs: %v, typing errors: %v",
		len(typed.Tokens), typed1s, typedLate, notShown, typed.Refocus, dialogs, typed.Errors)
	for _, view := range []string{"page", "peer", "file"} {
		t.Logf("%s: %d cells; of the tokens typed ≥ 1 s before the kill %d LOST, %d DOUBLED (any token)", view, len(map[string][]string{"page": page, "peer": peerSrc, "file": fileSrc}[view]), len(lost1s[view]), len(doubled[view]))
	}
	t.Logf("typed after the kill and missing from the peer's view: %d of %d", len(lateLost), typedLate)

	// The agent's cells: each confirmed one there once.
	var confirmed int
	agentLost, agentDoubled := map[string][]string{}, map[string][]string{}
	mu.Lock()
	for _, c := range agentCells {
		if c.ok {
			confirmed++
		}
		for view, srcs := range map[string][]string{"page": page, "peer": peerSrc, "file": fileSrc} {
			n := 0
			for _, s := range srcs {
				if s == "# agent cell "+c.marker {
					n++
				}
			}
			switch {
			case n > 1:
				agentDoubled[view] = append(agentDoubled[view], fmt.Sprintf("%s×%d", c.marker, n))
			case n == 0 && c.ok:
				agentLost[view] = append(agentLost[view], c.marker)
			}
		}
	}
	calls := len(agentCells)
	mu.Unlock()
	if v.sidecar {
		t.Logf("agent: %d inserts, %d confirmed; lost page/peer/file %d/%d/%d, doubled %d/%d/%d", calls, confirmed,
			len(agentLost["page"]), len(agentLost["peer"]), len(agentLost["file"]), len(agentDoubled["page"]), len(agentDoubled["peer"]), len(agentDoubled["file"]))
	}

	if len(typed.Tokens)-notShown < 20 || typed1s < 10 {
		t.Errorf("the tab typed too little to judge (%d tokens shown, %d ≥ 1 s before the kill; errors %v)", len(typed.Tokens)-notShown, typed1s, typed.Errors)
	}
	if !v.sidecar {
		return // a measurement of jupyter-server alone
	}
	if calls == 0 || confirmed == 0 {
		t.Errorf("the agent made %d inserts, %d confirmed: nothing to judge", calls, confirmed)
	}
	for _, view := range []string{"page", "peer", "file"} {
		if l := lost1s[view]; len(l) > 0 {
			t.Errorf("LOST (%s): %d tokens typed ≥ 1 s before the kill: %s", view, len(l), trimS(strings.Join(l, " "), 400))
		}
		if d := doubled[view]; len(d) > 0 {
			t.Errorf("DOUBLED (%s): %d tokens: %s", view, len(d), trimS(strings.Join(d, " "), 400))
		}
		if l := agentLost[view]; len(l) > 0 {
			t.Errorf("LOST (%s): %d cells confirmed to the agent: %s", view, len(l), trimS(strings.Join(l, " "), 400))
		}
		if d := agentDoubled[view]; len(d) > 0 {
			t.Errorf("DOUBLED (%s): %d agent cells: %s", view, len(d), trimS(strings.Join(d, " "), 400))
		}
	}
	if !reconnected {
		t.Errorf("the tab never reconnected: nothing it typed after the restart reached the server within 45 s")
	}
}

// crashViews reads the notebook as the page shows it, as an independent peer, the file and the
// sidecar (when there is one) hold it: each a list of cell sources in order. why is "" when they
// all agree, else the first difference.
func crashViews(t *testing.T, ctx context.Context, peer *integration.Peer, srv *integration.JupyterServer, name string,
	mcp *integration.MCPClient, sidecar *integration.SidecarProcess) (page, peerSrc, fileSrc, sideSrc []string, why string) {
	t.Helper()
	cells, err := env.browser.Cells(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		switch {
		case c.Source != nil:
			page = append(page, *c.Source)
		case c.Rendered != nil:
			page = append(page, *c.Rendered)
		default:
			page = append(page, "")
		}
	}
	snap, err := peer.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range snap.Cells {
		peerSrc = append(peerSrc, c.Source)
	}
	if b, err := srv.ReadFile(name); err == nil {
		var nb struct {
			Cells []struct {
				Source json.RawMessage `json:"source"`
			} `json:"cells"`
		}
		if json.Unmarshal(b, &nb) == nil {
			for _, c := range nb.Cells {
				var s string
				if json.Unmarshal(c.Source, &s) != nil {
					var lines []string
					_ = json.Unmarshal(c.Source, &lines)
					s = strings.Join(lines, "")
				}
				fileSrc = append(fileSrc, s)
			}
		}
	}
	if sidecar != nil {
		res, err := callOn(ctx, mcp, sidecar, "get_notebook", map[string]any{"format": "json", "path": name, "max_content_length": 5000000})
		if err == nil {
			list, _ := res["cells"].([]any)
			for _, c := range list {
				m, _ := c.(map[string]any)
				s, _ := m["source"].(string)
				sideSrc = append(sideSrc, s)
			}
		}
	}
	first := func(a, b []string, an, bn string) string {
		if len(a) != len(b) {
			return fmt.Sprintf("%s shows %d cells, %s %d", an, len(a), bn, len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				return fmt.Sprintf("cell %d: %s %q, %s %q", i, an, trimS(a[i], 200), bn, trimS(b[i], 200))
			}
		}
		return ""
	}
	if why = first(page, peerSrc, "the page", "the peer"); why != "" {
		return
	}
	if why = first(fileSrc, peerSrc, "the file", "the peer"); why != "" {
		return
	}
	if sidecar != nil {
		why = first(sideSrc, peerSrc, "the sidecar", "the peer")
	}
	return
}

// callOn runs a tool through an MCP client; a tool error is an error.
func callOn(ctx context.Context, mcp *integration.MCPClient, sidecar *integration.SidecarProcess, tool string, args map[string]any) (map[string]any, error) {
	res, err := mcp.CallTool(ctx, tool, args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n--- sidecar log tail ---\n%s", tool, err, tail(sidecar.Log.String(), 2000))
	}
	if res.IsError {
		return nil, fmt.Errorf("%s failed: %s", tool, res.Text())
	}
	return res.JSON(), nil
}

// writeNotebook writes a notebook of code cells (id → source) with a Python kernelspec.
func writeNotebook(t *testing.T, srv *integration.JupyterServer, name string, cells ...[2]string) {
	t.Helper()
	var list []map[string]any
	for _, c := range cells {
		list = append(list, map[string]any{"cell_type": "code", "id": c[0], "source": c[1], "metadata": map[string]any{},
			"outputs": []any{}, "execution_count": nil})
	}
	nb := map[string]any{"cells": list, "nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{
		"kernelspec":    map[string]any{"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
		"language_info": map[string]any{"name": "python"},
	}}
	b, err := json.MarshalIndent(nb, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteFile(name, b); err != nil {
		t.Fatal(err)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func trimS(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
