//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// chromiumArgs are the launch flags the suite runs Chromium with (the profile directory is passed
// separately: playwright owns --user-data-dir).
var chromiumArgs = []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync"}

// Browser drives browser.mjs (playwright-core + Debian's Chromium) over the harness's JSON
// lines (integration.NodeProc).
type Browser struct {
	*integration.NodeProc
	profile string
}

// PageCell is a notebook cell as the page displays it.
type PageCell struct {
	Type     string   `json:"type"`
	Prompt   string   `json:"prompt"`   // "[ ]:", "[*]:", "[3]:"
	Source   *string  `json:"source"`   // the editor's text; nil when no editor is shown (rendered markdown)
	Rendered *string  `json:"rendered"` // rendered markdown text
	Outputs  []string `json:"outputs"`
	Active   bool     `json:"active"`
}

// StartBrowser launches Chromium with a fresh profile.
func StartBrowser(ctx context.Context, dir, executable string) (*Browser, error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		return nil, fmt.Errorf("playwright-core missing (run `make e2e-deps`): %w", err)
	}
	profile, err := os.MkdirTemp("", "jcm-e2e-profile-")
	if err != nil {
		return nil, fmt.Errorf("profile dir: %w", err)
	}
	proc, err := integration.StartNodeScript(filepath.Join(dir, "browser.mjs"))
	if err != nil {
		return nil, err
	}
	b := &Browser{NodeProc: proc, profile: profile}
	var r struct {
		Version string `json:"version"`
	}
	if err := b.Call(ctx, "launch", map[string]any{"executablePath": executable, "userDataDir": profile,
		"args": chromiumArgs, "timeoutMs": 60000}, &r); err != nil {
		b.Close()
		return nil, fmt.Errorf("launch %s: %w", executable, err)
	}
	return b, nil
}

// Open loads a JupyterLab URL and waits for the notebook's cells.
func (b *Browser) Open(ctx context.Context, url, marker string) error {
	return b.Call(ctx, "open", map[string]any{"url": url, "marker": marker, "timeoutMs": 90000}, nil)
}

// WaitFor waits (bounded by timeout) until expr — JavaScript over cells ([]PageCell) and arg — is
// truthy in the page, and decodes its value into out (may be nil).
func (b *Browser) WaitFor(ctx context.Context, expr string, arg any, timeout time.Duration, out any) error {
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	if err := b.Call(ctx, "waitFor", map[string]any{"expr": expr, "arg": arg, "timeoutMs": timeout.Milliseconds()}, &r); err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(r.Value, out)
	}
	return nil
}

// Eval runs a JavaScript function body (async allowed, arg and readCells in scope) in the page.
func (b *Browser) Eval(ctx context.Context, body string, arg any, out any) error {
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	if err := b.Call(ctx, "eval", map[string]any{"body": body, "arg": arg}, &r); err != nil {
		return err
	}
	if out != nil && len(r.Value) > 0 {
		return json.Unmarshal(r.Value, out)
	}
	return nil
}

// Cells returns the notebook as the page shows it now.
func (b *Browser) Cells(ctx context.Context) ([]PageCell, error) {
	var r struct {
		Cells []PageCell `json:"cells"`
	}
	err := b.Call(ctx, "cells", nil, &r)
	return r.Cells, err
}

// Type clicks into cell index's editor, goes to the end of its text and types text, one key
// every delay.
func (b *Browser) Type(ctx context.Context, cell int, text string, delay time.Duration) error {
	return b.Call(ctx, "type", map[string]any{"cell": cell, "text": text, "delayMs": delay.Milliseconds()}, nil)
}

// Screenshot saves a PNG of the page.
func (b *Browser) Screenshot(ctx context.Context, path string) error {
	return b.Call(ctx, "screenshot", map[string]any{"path": path}, nil)
}

// Close closes Chromium, the script and the profile directory.
func (b *Browser) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = b.Call(ctx, "close", nil, nil)
	closed := make(chan struct{})
	go func() { _ = b.NodeProc.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		b.Kill()
		<-closed
	}
	_ = os.RemoveAll(b.profile)
}
