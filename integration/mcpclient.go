package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MCPClient drives the official MCP TypeScript SDK client (integration/node/mcpclient.mjs).
type MCPClient struct{ *NodeProc }

// StartMCPClient starts the client process; Connect attaches it to a server.
func StartMCPClient() (*MCPClient, error) {
	p, err := startNode("mcpclient.mjs")
	if err != nil {
		return nil, err
	}
	return &MCPClient{p}, nil
}

// ToolResult is an MCP tools/call result.
type ToolResult struct {
	Content           []map[string]any `json:"content"`
	StructuredContent map[string]any   `json:"structuredContent"`
	IsError           bool             `json:"isError"`
}

// Text returns the first text content.
func (r ToolResult) Text() string {
	for _, c := range r.Content {
		if c["type"] == "text" {
			s, _ := c["text"].(string)
			return s
		}
	}
	return ""
}

// JSON decodes the first text content.
func (r ToolResult) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Text()), &m)
	return m
}

// Embedded returns the embedded resources of the result.
func (r ToolResult) Embedded() []map[string]any {
	var out []map[string]any
	for _, c := range r.Content {
		if c["type"] == "resource" {
			out = append(out, c)
		}
	}
	return out
}

// CallTool calls a tool.
func (c *MCPClient) CallTool(ctx context.Context, name string, args map[string]any) (ToolResult, error) {
	var r struct {
		Result ToolResult `json:"result"`
	}
	err := c.Call(ctx, "call", map[string]any{"name": name, "arguments": args}, &r)
	return r.Result, err
}

// BuildSidecar builds the binary (with the race detector) once per test process.
var BuildSidecar = sync.OnceValues(func() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "jcm-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "jupyter-collab-mcp")
	cmd := exec.Command("go", "build", "-race", "-o", bin, "./cmd/jupyter-collab-mcp")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build sidecar: %v\n%s", err, out)
	}
	return bin, nil
})

// SidecarProcess is the binary serving Streamable HTTP.
type SidecarProcess struct {
	URL   string // http://127.0.0.1:PORT/mcp
	Token string
	// StateDir is the sidecar's --state-dir: a fresh temporary directory (removed by Stop and
	// Kill) unless extraEnv sets STATE_DIR, so that tests never write to the user's.
	StateDir string
	ownState bool
	cmd      *exec.Cmd
	exit     chan struct{}
	Log      *lockedBuffer
}

// StartHTTPSidecar runs the binary with --listen on a free loopback port, attached to srv.
func StartHTTPSidecar(ctx context.Context, srv *JupyterServer, extraEnv ...string) (*SidecarProcess, error) {
	bin, err := BuildSidecar()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	p := &SidecarProcess{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Token: RandomToken(), exit: make(chan struct{}), Log: &lockedBuffer{}}
	for _, e := range extraEnv {
		if v, ok := strings.CutPrefix(e, "STATE_DIR="); ok {
			p.StateDir = v
		}
	}
	if p.StateDir == "" {
		if p.StateDir, err = os.MkdirTemp("", "jcm-state-"); err != nil {
			return nil, err
		}
		p.ownState = true
	}
	p.cmd = exec.Command(bin, "--listen", "127.0.0.1:"+strconv.Itoa(port), "--log-format", "json", "--log-level", "debug")
	p.cmd.Env = append(os.Environ(), "JUPYTER_URL="+srv.URL, "JUPYTER_TOKEN="+srv.Token, "MCP_TOKEN="+p.Token, "STATE_DIR="+p.StateDir)
	p.cmd.Env = append(p.cmd.Env, extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	p.cmd.SysProcAttr = ChildProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.exit) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
			return p, nil
		}
		select {
		case <-p.exit:
			return nil, fmt.Errorf("sidecar exited at start:\n%s", p.Log.String())
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("sidecar not listening after 30s:\n%s", p.Log.String())
		}
	}
}

// Stop sends SIGTERM and waits (SIGKILL after 10 s).
func (p *SidecarProcess) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exit:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
	p.removeState()
}

func (p *SidecarProcess) removeState() {
	if p.ownState {
		_ = os.RemoveAll(p.StateDir)
	}
}

// Kill stops the process with SIGKILL (a crash: no goodbye, nothing cleaned up).
func (p *SidecarProcess) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exit
	p.removeState()
}

// Pid is the sidecar's process id (for memory readings).
func (p *SidecarProcess) Pid() int { return p.cmd.Process.Pid }

// RSS returns the process's resident set size in bytes, from /proc.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
