//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// chromiumArgs are the launch flags the suite runs Chromium with (the profile directory is passed
// separately: playwright owns --user-data-dir).
var chromiumArgs = []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync"}

// Browser drives browser.mjs (playwright-core + Debian's Chromium) over JSON lines.
type Browser struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	wmu     sync.Mutex // one request line at a time on stdin
	seq     atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan json.RawMessage
	done    chan struct{}
	stderr  *syncBuffer
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
	cmd := exec.Command("node", filepath.Join(dir, "browser.mjs"))
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b := &Browser{cmd: cmd, stdin: stdin, pending: map[int64]chan json.RawMessage{}, done: make(chan struct{}),
		stderr: &syncBuffer{}, profile: profile}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start browser.mjs: %w", err)
	}
	go b.readLoop(stdout)
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

func (b *Browser) readLoop(r io.Reader) {
	defer close(b.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var head struct {
			ID *int64 `json:"id"`
		}
		if json.Unmarshal(line, &head) != nil || head.ID == nil {
			continue
		}
		b.mu.Lock()
		c := b.pending[*head.ID]
		delete(b.pending, *head.ID)
		b.mu.Unlock()
		if c != nil {
			c <- line
		}
	}
}

// Call sends one request and decodes the reply into out (may be nil). Safe for concurrent use.
func (b *Browser) Call(ctx context.Context, op string, args map[string]any, out any) error {
	id := b.seq.Add(1)
	req := map[string]any{"id": id, "op": op}
	for k, v := range args {
		req[k] = v
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c := make(chan json.RawMessage, 1)
	b.mu.Lock()
	b.pending[id] = c
	b.mu.Unlock()
	b.wmu.Lock()
	_, err = b.stdin.Write(append(line, '\n'))
	b.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("browser %s: %w (stderr: %s)", op, err, b.stderr.String())
	}
	select {
	case reply := <-c:
		var res struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(reply, &res); err != nil {
			return fmt.Errorf("browser %s: bad reply: %w", op, err)
		}
		if !res.OK {
			return fmt.Errorf("browser %s: %s", op, res.Error)
		}
		if out != nil {
			return json.Unmarshal(reply, out)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("browser %s: browser.mjs exited (stderr: %s)", op, b.stderr.String())
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("browser %s: %w", op, ctx.Err())
	}
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
	_ = b.stdin.Close()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
	}
	_ = b.cmd.Wait()
	_ = os.RemoveAll(b.profile)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		s.b.Reset()
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
