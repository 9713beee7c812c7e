//go:build integration

// Package apps checks the MCP Apps as a person in a chat sees them: the real binary serving
// Streamable HTTP against the pinned jupyter-server, the official MCP client calling its tools as
// a model would, and each app's ui:// resource shown by a host page built on the SDK's host
// bridge (AppBridge) in Debian's headless Chromium, sandboxed under MCP Apps' restrictive default
// CSP (host.mjs, host-page.js). What the tests assert is read from the app's DOM; what the edits
// did is checked by the independent yjs peer (integration/node/peer.mjs) and the file on disk.
package apps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

var env struct {
	srv       *integration.JupyterServer
	sidecar   *integration.SidecarProcess
	host      *integration.NodeProc
	artifacts string
	pictures  string // JCM_APPS_PICTURES: where the docs' screenshots go (make apps-pictures)
}

// chromiumArgs are the flags this machine runs Chromium with (as integration/e2e).
var chromiumArgs = []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync"}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apps:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := integration.RepoRoot()
	if err != nil {
		return 0, err
	}
	env.artifacts = filepath.Join(root, "integration", "apps", "artifacts")
	if p := os.Getenv("JCM_APPS_PICTURES"); p != "" {
		env.pictures, _ = filepath.Abs(p)
	}
	chromium := os.Getenv("JCM_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		return 0, fmt.Errorf("chromium not installed (run `make apps-test-deps`): %w", err)
	}
	dir := filepath.Join(root, "integration", "apps")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "ext-apps")); err != nil {
		return 0, fmt.Errorf("the host's packages are missing (run `make apps-test-deps`): %w", err)
	}
	env.srv, err = integration.StartJupyter(ctx, integration.ServerOptions{})
	if err != nil {
		return 0, fmt.Errorf("start jupyter-server: %w", err)
	}
	defer env.srv.Stop()
	defer os.RemoveAll(env.srv.Root)
	// MCP_APPS is left at its default (auto): the host announces the extension.
	env.sidecar, err = integration.StartHTTPSidecar(ctx, env.srv, "MCP_TOOLSETS=default,forks", "AGENT_NAME=Apps Agent")
	if err != nil {
		return 0, fmt.Errorf("start sidecar: %w", err)
	}
	defer env.sidecar.Stop()
	env.host, err = integration.StartNodeScript(filepath.Join(dir, "host.mjs"))
	if err != nil {
		return 0, err
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer ccancel()
		_ = env.host.Call(cctx, "close", nil, nil)
		_ = env.host.Close()
	}()
	if err := env.host.Call(ctx, "launch", map[string]any{"executablePath": chromium, "args": chromiumArgs,
		"mcpUrl": env.sidecar.URL, "token": env.sidecar.Token, "timeoutMs": 60000}, nil); err != nil {
		return 0, fmt.Errorf("launch the host: %w", err)
	}
	code := m.Run()
	var rep report
	if err := env.host.Call(context.Background(), "report", nil, &rep); err == nil && code != 0 {
		fmt.Fprintf(os.Stderr, "apps: host report: %+v\n", rep)
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "apps: sidecar log tail:\n%s\n", tail(env.sidecar.Log.String(), 4000))
	}
	return code, nil
}

type report struct {
	Outside       []string `json:"outside"`
	Requests      int      `json:"requests"`
	ConsoleErrors []string `json:"consoleErrors"`
	Opened        []string `json:"opened"`
	CSP           []string `json:"csp"`
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// shown is a tool call and the app the host showed for it.
type shown struct {
	URI       string         `json:"uri"`
	Result    map[string]any `json:"result"`
	InitMS    int            `json:"initMs"`
	HTMLBytes int            `json:"htmlBytes"`
}

// show calls a tool as the model would and shows its app in frame.
func show(t *testing.T, ctx context.Context, frame, tool string, args map[string]any) shown {
	t.Helper()
	var s shown
	if err := env.host.Call(ctx, "show", map[string]any{"frame": frame, "tool": tool, "args": args}, &s); err != nil {
		t.Fatalf("show %s: %v", tool, err)
	}
	if isErr, _ := s.Result["isError"].(bool); isErr {
		t.Fatalf("%s failed: %v", tool, s.Result["content"])
	}
	t.Logf("%s → %s (%d kB), the app initialized in %d ms", tool, s.URI, s.HTMLBytes>>10, s.InitMS)
	return s
}

// call runs a tool as the model would and returns its structured content.
func call(t *testing.T, ctx context.Context, tool string, args map[string]any) map[string]any {
	t.Helper()
	var r struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
			Content           []any          `json:"content"`
		} `json:"result"`
	}
	if err := env.host.Call(ctx, "call", map[string]any{"tool": tool, "args": args}, &r); err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if r.Result.IsError {
		t.Fatalf("%s failed: %v", tool, r.Result.Content)
	}
	return r.Result.StructuredContent
}

// waitApp waits until a JS expression is truthy in an app's frame and decodes its value.
func waitApp(t *testing.T, ctx context.Context, frame, expr string, timeout time.Duration, out any) {
	t.Helper()
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	if err := env.host.Call(ctx, "waitFor", map[string]any{"frame": frame, "expr": expr, "timeoutMs": timeout.Milliseconds()}, &r); err != nil {
		t.Fatalf("app %s: %v", frame, err)
	}
	if out != nil {
		if err := json.Unmarshal(r.Value, out); err != nil {
			t.Fatalf("app %s: %v", frame, err)
		}
	}
}

func click(t *testing.T, ctx context.Context, frame, selector string) {
	t.Helper()
	if err := env.host.Call(ctx, "click", map[string]any{"frame": frame, "selector": selector}, nil); err != nil {
		t.Fatalf("click %s in %s: %v", selector, frame, err)
	}
}

// picture saves the frame's screenshot as an artifact and, with JCM_APPS_PICTURES, for the docs.
func picture(t *testing.T, ctx context.Context, frame, name string) {
	t.Helper()
	for _, dir := range []string{env.artifacts, env.pictures} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := env.host.Call(ctx, "screenshot", map[string]any{"frame": frame, "path": p}, nil); err != nil {
			t.Errorf("screenshot: %v", err)
			continue
		}
		t.Logf("screenshot: %s", p)
	}
}

// notebook writes a notebook of code cells (id → source) with a Python kernelspec.
func notebook(t *testing.T, name string, cells ...[2]string) {
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
	b, err := json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.srv.WriteFile(name, b); err != nil {
		t.Fatal(err)
	}
}

// The outputs app shows what a real kernel made, from the live notebook: a matplotlib PNG at
// its own size (the model's copy is downscaled), a pandas table as HTML (the model gets text),
// a stream and a traceback.
func TestOutputsAppShowsTheKernelsPlotAndTable(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	const nb = "outputs.ipynb"
	notebook(t, nb,
		[2]string{"plot", "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\nimport matplotlib.pyplot as plt\n" +
			"fig, ax = plt.subplots(figsize=(12, 8), dpi=100)\nax.plot([0, 1, 2, 3], [1, 4, 2, 5])\nax.set_title('from the kernel')\nplt.show()"},
		[2]string{"table", "import pandas as pd\npd.DataFrame({'city': ['Lisbon', 'Oslo', 'Quito'], 'visits': [3, 5, 8]})"},
		[2]string{"boom", "print('hello from the kernel')\n1 / 0"},
	)
	s := show(t, ctx, "outputs", "batch_execute_notebook_cells", map[string]any{"path": nb, "cell_ids": []any{"plot", "table", "boom"}, "timeout": 120})
	text := contentText(s.Result)
	// What the model got: the image downscaled (its original size said), the table as text.
	m := regexp.MustCompile(`image/png (\d+)x(\d+) attached as image \d+, downscaled`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the model's result does not say it downscaled a PNG: %.600s", text)
	}
	w, _ := strconv.Atoi(m[1])
	h, _ := strconv.Atoi(m[2])
	if strings.Contains(text, "<table") {
		t.Errorf("the model's result carries the HTML table: %.300s", text)
	}
	var got struct {
		W, H    int
		Rows    []string
		Stream  string
		Error   string
		Prompts []string
	}
	waitApp(t, ctx, "outputs", `(() => {
		const img = document.querySelector('.cell[data-cell-id="plot"] img.output.image')
		const table = document.querySelector('.cell[data-cell-id="table"] .output.html table.dataframe')
		const err = document.querySelector('.cell[data-cell-id="boom"] .output.error')
		if (!img || !img.complete || !img.naturalWidth || !table || !err) return false
		return { w: img.naturalWidth, h: img.naturalHeight,
			rows: [...table.querySelectorAll('tbody tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim()),
			stream: document.querySelector('.cell[data-cell-id="boom"] .output.stream')?.innerText ?? '',
			error: err.innerText,
			prompts: [...document.querySelectorAll('.cell .prompt')].map(p => p.innerText) }
	})()`, 30*time.Second, &got)
	if got.W != w || got.H != h {
		t.Errorf("the app shows the plot at %dx%d, want its own size %dx%d", got.W, got.H, w, h)
	}
	if len(got.Rows) != 3 || !strings.Contains(got.Rows[0], "Lisbon") || !strings.Contains(got.Rows[0], "3") || !strings.Contains(got.Rows[2], "Quito") {
		t.Errorf("the table's rows: %q", got.Rows)
	}
	if !strings.Contains(got.Stream, "hello from the kernel") || !strings.Contains(got.Error, "ZeroDivisionError") || !strings.Contains(got.Error, "1 / 0") {
		t.Errorf("stream %q, traceback %q", got.Stream, got.Error)
	}
	if len(got.Prompts) != 3 || got.Prompts[0] == "[ ]:" || got.Prompts[0] == "[*]:" {
		t.Errorf("prompts %q", got.Prompts)
	}
	// The table's markup reached the page sanitised: no script, no handler.
	var unsafe int
	if err := env.host.Call(ctx, "eval", map[string]any{"frame": "outputs", "expr": `document.querySelectorAll('.output.html script, .output.html [onclick], .output.html style').length`}, &struct {
		Value *int `json:"value"`
	}{&unsafe}); err != nil || unsafe != 0 {
		t.Errorf("unsafe markup in the outputs: %d (%v)", unsafe, err)
	}
	picture(t, ctx, "outputs", "app-outputs.png")
	checkNothingFetched(t, ctx)
}

// The live notebook app shows a human's edit, made by an independent yjs peer in the room,
// within a second, and links the notebook in JupyterLab.
func TestNotebookAppShowsAHumansEditLive(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	const nb = "live.ipynb"
	notebook(t, nb, [2]string{"l1", "total = 40 + 2\ntotal"}, [2]string{"l2", "print('two')"})
	show(t, ctx, "live", "create_notebook_session", map[string]any{"path": nb})
	waitApp(t, ctx, "live", `document.querySelectorAll('.cells .cell').length === 2 && document.querySelector('.cell[data-cell-id="l1"] .input').innerText.includes('40 + 2')`, 20*time.Second, nil)

	peer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	// The human, as JupyterLab's awareness names them.
	if err := peer.Call(ctx, "connect", map[string]any{"url": env.srv.URL, "token": env.srv.Token, "path": nb, "kind": "notebook",
		"engine": string(env.srv.Engine), "awareness": map[string]any{"user": map[string]any{"username": "ada", "name": "Ada Lovelace",
			"display_name": "Ada Lovelace", "initials": "AL", "color": "#e91e63"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Give the app's long poll time to be waiting (it answers a change either way).
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := peer.Transact(ctx, `cells.get(1).get('source').insert(0, "# a human was here\n")`, nil); err != nil {
		t.Fatal(err)
	}
	waitApp(t, ctx, "live", `document.querySelector('.cell[data-cell-id="l2"] .input')?.innerText.includes('a human was here')`, 10*time.Second, nil)
	took := time.Since(start)
	t.Logf("the human's edit reached the app in %v", took)
	if took > time.Second {
		t.Errorf("the human's edit took %v to show in the app, want within a second", took)
	}
	// Who is where: the human's cursor in the second cell.
	if err := peer.Call(ctx, "setCursor", map[string]any{"cellId": "l2", "anchor": 3}, nil); err != nil {
		t.Fatal(err)
	}
	waitApp(t, ctx, "live", `document.querySelector('.cell[data-cell-id="l2"] .where .chip')?.innerText === 'Ada Lovelace' && document.querySelector('.cell[data-cell-id="l2"]').classList.contains('peer-here')`, 10*time.Second, nil)
	// The agent runs the first cell: its count and output arrive in the view.
	call(t, ctx, "execute_notebook_cell", map[string]any{"path": nb, "cell_id": "l1", "timeout": 60})
	waitApp(t, ctx, "live", `document.querySelector('.cell[data-cell-id="l1"] .prompt').innerText === '[1]:' && document.querySelector('.cell[data-cell-id="l1"] .outputs')?.innerText.trim() === '42'`, 30*time.Second, nil)
	// A cell the human adds appears too, in its place.
	if err := peer.Transact(ctx, `const c = new Y.Map(); c.set('id', 'h1'); c.set('cell_type', 'markdown'); c.set('source', new Y.Text('## Added by a human')); c.set('metadata', new Y.Map()); cells.insert(1, [c])`, nil); err != nil {
		t.Fatal(err)
	}
	waitApp(t, ctx, "live", `[...document.querySelectorAll('.cells .cell')].map(c => c.dataset.cellId).join() === 'l1,h1,l2' && document.querySelector('.cell[data-cell-id="h1"] h2')?.innerText === 'Added by a human'`, 10*time.Second, nil)
	click(t, ctx, "live", `button[data-action="open-lab"]`)
	var rep report
	if err := env.host.Call(ctx, "report", nil, &rep); err != nil {
		t.Fatal(err)
	}
	if want := env.srv.URL + "lab/tree/" + nb; len(rep.Opened) == 0 || rep.Opened[len(rep.Opened)-1] != want {
		t.Errorf("Open in JupyterLab asked the host to open %q, want %q", rep.Opened, want)
	}
	picture(t, ctx, "live", "app-notebook.png")
	// The app follows the host's theme: its colours, light then dark.
	waitApp(t, ctx, "live", `document.documentElement.dataset.theme === 'light' && getComputedStyle(document.body).backgroundColor === 'rgb(253, 252, 247)'`, 5*time.Second, nil)
	if err := env.host.Call(ctx, "theme", map[string]any{"frame": "live", "theme": "dark"}, nil); err != nil {
		t.Fatal(err)
	}
	waitApp(t, ctx, "live", `document.documentElement.dataset.theme === 'dark' && getComputedStyle(document.body).backgroundColor === 'rgb(24, 24, 27)'`, 5*time.Second, nil)
	checkNothingFetched(t, ctx)
}

// The suggestion app shows a fork's changes cell by cell; a person rejects one and accepts the
// rest: the fork is merged without it, as an independent peer and the file show.
func TestSuggestionAppAcceptMergesTheFork(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	const nb = "suggest.ipynb"
	notebook(t, nb, [2]string{"s1", "rate = 0.1"}, [2]string{"s2", "print(rate)"})
	peer, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.Connect(ctx, env.srv, nb, "notebook"); err != nil {
		t.Fatal(err)
	}
	fork := call(t, ctx, "fork_document", map[string]any{"path": nb, "title": "Tune the rate"})
	id, _ := fork["fork_id"].(string)
	if id == "" {
		t.Fatalf("fork_document: %v", fork)
	}
	call(t, ctx, "batch_update_notebook_cells", map[string]any{"path": nb, "fork_id": id, "exec": false,
		"updates": []any{map[string]any{"cell_id": "s1", "content": "rate = 0.25  # tuned by the agent"}}})
	call(t, ctx, "batch_insert_notebook_cells", map[string]any{"path": nb, "fork_id": id, "exec": false,
		"cells": []any{map[string]any{"cell_type": "code", "id": "s3", "content": "print('an extra the person does not want')"}}})
	show(t, ctx, "suggest", "diff_fork", map[string]any{"path": nb, "fork_id": id})
	waitApp(t, ctx, "suggest", `document.querySelectorAll('.change').length === 2 &&
		document.querySelector('.change[data-cell-id="s1"] .diff').innerText.includes('+rate = 0.25') &&
		document.querySelector('.change[data-cell-id="s3"]').dataset.status === 'added'`, 20*time.Second, nil)
	click(t, ctx, "suggest", `.change[data-cell-id="s3"] button[data-action="reject-cell"]`)
	waitApp(t, ctx, "suggest", `document.querySelector('button[data-action="accept"]').innerText === 'Accept 1, reject 1'`, 5*time.Second, nil)
	picture(t, ctx, "suggest", "app-suggestion.png")
	click(t, ctx, "suggest", `button[data-action="accept"]`)
	waitApp(t, ctx, "suggest", `document.querySelector('.done-banner')?.innerText.startsWith('Accepted')`, 30*time.Second, nil)

	// The independent peer sees the merged notebook: the accepted edit, not the rejected cell.
	if _, err := peer.WaitFor(ctx, `nb.cells.map(c => c.id).join() === 's1,s2' && nb.cells[0].source === 'rate = 0.25  # tuned by the agent' && nb.cells[1].source === 'print(rate)'`, 15000); err != nil {
		snap, _ := peer.Snapshot(ctx)
		t.Fatalf("the peer does not see the merge: %v (%+v)", err, snap.Cells)
	}
	// And the file, once the server saved it.
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		b, err := env.srv.ReadFile(nb)
		last = string(b)
		if err == nil && strings.Contains(last, "tuned by the agent") && !strings.Contains(last, "does not want") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the file never showed the merge: %.500s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	forks := call(t, ctx, "list_forks", map[string]any{"path": nb})
	if n, _ := forks["count"].(float64); n != 0 {
		t.Errorf("the fork is still there after the merge: %v", forks)
	}
	checkNothingFetched(t, ctx)
}

// checkNothingFetched: the page requested nothing but the host page itself (the apps load
// nothing from anywhere), and no CSP rule was broken.
func checkNothingFetched(t *testing.T, ctx context.Context) {
	t.Helper()
	var rep report
	if err := env.host.Call(ctx, "report", nil, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Outside) > 0 || len(rep.CSP) > 0 {
		t.Errorf("the apps reached outside (%q) or broke the CSP (%q)", rep.Outside, rep.CSP)
	}
	if len(rep.ConsoleErrors) > 0 {
		t.Logf("console errors: %q", rep.ConsoleErrors)
	}
}

func contentText(res map[string]any) string {
	var b strings.Builder
	items, _ := res["content"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["type"] == "text" {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
