//go:build integration

// Package e2e checks the sidecar against what a person sees: a real JupyterLab (the pinned
// jupyterlab and collaboration engine of the run's environment: jupyter-collaboration 5.0 in
// .venv, or with JCM_ENGINE=jsd jupyter-server-documents and its front end in .venv-jsd) in
// headless Chromium (Debian's package, driven by playwright-core from browser.mjs), with the real
// binary serving MCP over HTTP to the official TypeScript SDK client.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// The agent as collaborators must see it (as the sidecar shows it by default when the README's
// picture is made: picture_test.go).
var (
	agentName     = "E2E Agent"
	agentInitials = "EA"
	agentColor    = "#0b7285"
	agentColorRGB = "rgb(11, 114, 133)" // how the DOM reports agentColor
)

var env struct {
	srv       *integration.JupyterServer
	sidecar   *integration.SidecarProcess
	mcp       *integration.MCPClient
	browser   *Browser
	artifacts string
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := integration.RepoRoot()
	if err != nil {
		return 0, err
	}
	if os.Getenv(pictureEnv) != "" {
		agentName, agentInitials, agentColor, agentColorRGB = "AI Agent", "AI", "#7c3aed", "rgb(124, 58, 237)"
	}
	env.artifacts = os.Getenv("JCM_ARTIFACTS")
	if env.artifacts == "" {
		env.artifacts = filepath.Join("integration", "e2e", "artifacts")
	}
	if !filepath.IsAbs(env.artifacts) { // relative to the repository, wherever go test runs
		env.artifacts = filepath.Join(root, env.artifacts)
	}
	chromium := os.Getenv("JCM_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		return 0, fmt.Errorf("chromium not installed (run `make e2e-deps`): %w", err)
	}

	stateDir, err := os.MkdirTemp("", "jcm-e2e-state-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(stateDir)
	if err := writeLabSettings(stateDir); err != nil {
		return 0, err
	}
	env.srv, err = integration.StartJupyter(ctx, integration.ServerOptions{StateDir: stateDir})
	if err != nil {
		return 0, fmt.Errorf("start jupyter-server: %w", err)
	}
	defer env.srv.Stop()
	defer os.RemoveAll(env.srv.Root)

	env.sidecar, err = integration.StartHTTPSidecar(ctx, env.srv,
		"AGENT_NAME="+agentName, "AGENT_INITIALS="+agentInitials, "AGENT_COLOR="+agentColor,
		"MCP_TOOLSETS=default,forks,presence") // the browser sees the agent's cursor and a suggestion
	if err != nil {
		return 0, fmt.Errorf("start sidecar: %w", err)
	}
	defer env.sidecar.Stop()

	env.mcp, err = integration.StartMCPClient()
	if err != nil {
		return 0, fmt.Errorf("start MCP client: %w", err)
	}
	defer env.mcp.Close()
	if err := env.mcp.Call(ctx, "connect", map[string]any{"transport": "http", "url": env.sidecar.URL,
		"headers": map[string]string{"Authorization": "Bearer " + env.sidecar.Token}}, nil); err != nil {
		return 0, fmt.Errorf("connect MCP client: %w", err)
	}

	env.browser, err = StartBrowser(ctx, filepath.Join(root, "integration", "e2e"), chromium)
	if err != nil {
		return 0, err
	}
	defer env.browser.Close()

	code := m.Run()
	if code != 0 {
		var errs struct {
			Errors []string `json:"errors"`
		}
		if err := env.browser.Call(context.Background(), "consoleErrors", nil, &errs); err == nil && len(errs.Errors) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: the page logged %d console errors:\n%s\n", len(errs.Errors), strings.Join(errs.Errors, "\n"))
		}
	}
	return code, nil
}

// writeLabSettings turns off JupyterLab's news prompt, which would otherwise cover part of every
// screenshot (user settings live under the server's JUPYTER_CONFIG_DIR, which the harness puts in
// the state directory).
func writeLabSettings(stateDir string) error {
	dir := filepath.Join(stateDir, "config", "lab", "user-settings", "@jupyterlab", "apputils-extension")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lab settings: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "notification.jupyterlab-settings"), []byte(`{"fetchNews": "false", "checkForUpdates": false}`), 0o644)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// call runs an MCP tool through the official client and fails the test on any error.
func call(t *testing.T, ctx context.Context, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, err := callRaw(ctx, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// callRaw runs an MCP tool; a tool error is returned as an error.
func callRaw(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	res, err := env.mcp.CallTool(ctx, tool, args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n--- sidecar log tail ---\n%s", tool, err, tail(env.sidecar.Log.String(), 3000))
	}
	if res.IsError {
		return nil, fmt.Errorf("%s failed: %s", tool, res.Text())
	}
	return res.JSON(), nil
}

// notebookFixture writes a notebook of code cells (id → source, in order) with a Python kernelspec,
// so JupyterLab starts the kernel without asking.
func notebookFixture(t *testing.T, name string, cells ...[2]string) {
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
	if err := env.srv.WriteFile(name, b); err != nil {
		t.Fatal(err)
	}
}

// openNotebook shows the notebook in the browser, in a workspace of its own (so nothing the
// previous test had open is restored), and waits until its cells are displayed.
func openNotebook(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ws := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	url := fmt.Sprintf("%slab/workspaces/%s/tree/%s?token=%s", env.srv.URL, ws, name, env.srv.Token)
	if err := env.browser.Open(ctx, url, t.Name()); err != nil {
		t.Fatalf("open %s in JupyterLab: %v", name, err)
	}
}

// waitKernelIdle waits until the notebook's toolbar shows the kernel started and idle.
func waitKernelIdle(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := env.browser.WaitFor(ctx, `document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'`,
		nil, 90*time.Second, nil); err != nil {
		t.Fatalf("kernel never idle in the page: %v", err)
	}
}

// assertNotReloaded checks the marker openNotebook left is still in the page.
func assertNotReloaded(t *testing.T, ctx context.Context) {
	t.Helper()
	var marker string
	if err := env.browser.Eval(ctx, `return window.__e2eMarker ?? ''`, nil, &marker); err != nil {
		t.Fatal(err)
	}
	if marker != t.Name() {
		t.Logf("browser stderr: %s", env.browser.Stderr())
		t.Errorf("the page was reloaded (marker %q, want %q)", marker, t.Name())
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	p := filepath.Join(env.artifacts, name)
	if err := env.browser.Screenshot(ctx, p); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", p)
}

// diskSources reads the notebook file and returns its cells' sources by id.
func diskSources(name string) (map[string]string, []string, error) {
	b, err := env.srv.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	var nb struct {
		Cells []struct {
			ID     string          `json:"id"`
			Source json.RawMessage `json:"source"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", name, err)
	}
	out := map[string]string{}
	var order []string
	for _, c := range nb.Cells {
		var s string
		if json.Unmarshal(c.Source, &s) != nil {
			var lines []string
			if err := json.Unmarshal(c.Source, &lines); err != nil {
				return nil, nil, fmt.Errorf("cell %s source: %w", c.ID, err)
			}
			s = strings.Join(lines, "")
		}
		out[c.ID] = s
		order = append(order, c.ID)
	}
	return out, order, nil
}

// waitDisk polls the file (the server autosaves about a second after a change) until cond holds.
func waitDisk(t *testing.T, name, what string, cond func(map[string]string, []string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last map[string]string
	var lastErr error
	for time.Now().Before(deadline) {
		src, order, err := diskSources(name)
		if err == nil && cond(src, order) {
			return
		}
		last, lastErr = src, err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s on disk never showed %s; last: %v (err %v)", name, what, last, lastErr)
}

// replicaSources reads the sidecar's replica through MCP get_notebook.
func replicaSources(t *testing.T, ctx context.Context, name string) (map[string]string, []string) {
	t.Helper()
	nb := call(t, ctx, "get_notebook", map[string]any{"format": "json", "path": name})
	cells, _ := nb["cells"].([]any)
	out := map[string]string{}
	var order []string
	for _, c := range cells {
		m, _ := c.(map[string]any)
		id, _ := m["id"].(string)
		src, _ := m["source"].(string)
		out[id] = src
		order = append(order, id)
	}
	return out, order
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
