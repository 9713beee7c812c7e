//go:build integration

// Package bench compares this sidecar with Datalayer's jupyter-mcp-server and jupyter-mcp-live
// (both from PyPI, in the virtualenv .venv-bench, whose jupyter-server the bench runs:
// servers_live.go) against the same jupyter-server, driven by the same MCP client (the official
// TypeScript SDK, integration/node/mcpclient.mjs) with one small adapter per server. It measures; it asserts nothing about speed. Correctness of each operation (edits
// arrive in an independent Yjs peer, inserted cells arrive once and in order, reads cover every
// cell, executions return their result) is checked, and a failure is recorded as a result.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// Server names, used as keys of the results.
const (
	Sidecar    = "jupyter-collab-mcp"
	JupyterMCP = "jupyter-mcp-server"
)

// JupyterMCPVersion is the exact jupyter-mcp-server release the Makefile installs (keep in sync
// with JMCP_VERSION in the Makefile's BENCH-SECTION).
const JupyterMCPVersion = "2.2.4"

// Server is one MCP server process under test.
type Server struct {
	Name  string
	URL   string // Streamable HTTP endpoint
	Token string // bearer token
	cmd   *exec.Cmd
	exit  chan struct{}
	log   *capBuffer
	// host is set for a server that runs inside the jupyter-server (jupyter-mcp-live): it has
	// no process of its own.
	host *integration.JupyterServer
}

// InProcess reports whether the server runs inside the jupyter-server (no process of its own).
func (s *Server) InProcess() bool { return s.host != nil }

// PID is the server's process id (whose memory is reported): the jupyter-server's for a server
// running inside it.
func (s *Server) PID() int {
	if s.host != nil {
		return s.host.Pid()
	}
	return s.cmd.Process.Pid
}

// Log returns the tail of what the server printed.
func (s *Server) Log() string {
	if s.host != nil {
		return s.host.Log()
	}
	return s.log.String()
}

// Exited reports whether the process has ended (a crash, when the run did not stop it).
func (s *Server) Exited() bool {
	if s.host != nil {
		pid := s.host.Pid()
		return pid == 0 || syscall.Kill(pid, 0) != nil
	}
	select {
	case <-s.exit:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the server's process group and waits, killing it after 10 s.
func (s *Server) Stop() {
	if s.host != nil || s.Exited() {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exit
	}
}

// BuildSidecar builds the real binary without the race detector (the race build is several
// times slower and larger, which would make the comparison meaningless).
func BuildSidecar() (string, error) {
	root, err := integration.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "jcm-bench-bin-")
	if err != nil {
		return "", fmt.Errorf("bench: temp dir for the binary: %w", err)
	}
	bin := filepath.Join(dir, "jupyter-collab-mcp")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/jupyter-collab-mcp")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: build sidecar: %v\n%s", err, out)
	}
	return bin, nil
}

// StartSidecar runs the binary over Streamable HTTP on a free loopback port, attached to js.
func StartSidecar(ctx context.Context, js *integration.JupyterServer, bin string) (*Server, error) {
	port, err := integration.FreePort()
	if err != nil {
		return nil, err
	}
	stateDir, err := os.MkdirTemp("", "jcm-bench-state-")
	if err != nil {
		return nil, fmt.Errorf("bench: sidecar state dir: %w", err)
	}
	s := &Server{Name: Sidecar, URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Token: integration.RandomToken()}
	args := []string{"--listen", "127.0.0.1:" + strconv.Itoa(port), "--state-dir", stateDir}
	if addr := os.Getenv("JCM_BENCH_PPROF"); addr != "" { // profile the sidecar while the bench drives it
		args = append(args, "--pprof-listen", addr)
	}
	cmd := exec.Command(bin, args...)
	// MCP_RATE_LIMIT=0: the default per-token limit (50 requests/s) would cap the sustained-edit
	// run, and jupyter-mcp-server has no such limit.
	cmd.Env = append(os.Environ(), "JUPYTER_URL="+js.URL, "JUPYTER_TOKEN="+js.Token, "MCP_TOKEN="+s.Token, "MCP_RATE_LIMIT=0",
		"MCP_TOOLSETS=default,admin") // admin: count_tokens, which the bench counts with
	return s, s.start(ctx, cmd, port)
}

// BenchVenv is the virtualenv holding jupyter-mcp-server (JCM_BENCH_VENV or <repo>/.venv-bench).
func BenchVenv() (string, error) {
	if v := os.Getenv("JCM_BENCH_VENV"); v != "" {
		return v, nil
	}
	root, err := integration.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".venv-bench"), nil
}

// StartJupyterMCP runs jupyter-mcp-server in its standalone MCP-server mode (its own RTC client
// to the document URL, kernels through the runtime URL) over Streamable HTTP, attached to js.
func StartJupyterMCP(ctx context.Context, js *integration.JupyterServer) (*Server, error) {
	venv, err := BenchVenv()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(venv, "bin", "jupyter-mcp-server")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("bench: %s missing (run `make bench-deps`): %w", bin, err)
	}
	port, err := integration.FreePort()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "jcm-bench-jmcp-")
	if err != nil {
		return nil, fmt.Errorf("bench: jupyter-mcp-server work dir: %w", err)
	}
	s := &Server{Name: JupyterMCP, URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Token: integration.RandomToken()}
	// Its URL joins paths with "/", so a trailing slash yields "//api/..." (404s): strip it.
	base := strings.TrimRight(js.URL, "/")
	cmd := exec.Command(bin, "start",
		"--transport", "streamable-http", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--document-url", base, "--document-token", js.Token,
		"--code-sandbox-url", base, "--code-sandbox-token", js.Token,
		"--mcp-token", s.Token)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+work, "PYTHONUNBUFFERED=1", "NO_COLOR=1", "COLUMNS=200")
	return s, s.start(ctx, cmd, port)
}

func (s *Server) start(ctx context.Context, cmd *exec.Cmd, port int) error {
	s.cmd, s.exit, s.log = cmd, make(chan struct{}), &capBuffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = integration.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start %s: %w", s.Name, err)
	}
	go func() { _ = cmd.Wait(); close(s.exit) }()
	// jupyter-mcp-server starts a kernel before it listens: allow a slow, shared machine.
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.exit:
			return fmt.Errorf("bench: %s exited at start:\n%s", s.Name, s.Log())
		case <-ctx.Done():
			s.Stop()
			return fmt.Errorf("bench: %s not listening: %w\n%s", s.Name, ctx.Err(), s.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Memory is a process's resident set (VmRSS) and its peak (VmHWM), in KiB, with the same for
// its descendant processes (none expected; counted so nothing hides in a child).
type Memory struct {
	RSSKiB, HWMKiB           int64
	ChildRSSKiB, ChildHWMKiB int64
	Children                 int
}

// ReadMemory reads /proc/PID/status of pid and of its descendants.
func ReadMemory(pid int) (Memory, error) {
	var m Memory
	var err error
	if m.RSSKiB, m.HWMKiB, err = procMem(pid); err != nil {
		return m, err
	}
	for _, c := range descendants(pid) {
		rss, hwm, err := procMem(c)
		if err != nil {
			continue // it exited meanwhile
		}
		m.Children++
		m.ChildRSSKiB += rss
		m.ChildHWMKiB += hwm
	}
	return m, nil
}

func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("bench: memory of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("bench: no VmRSS for %d", pid)
	}
	return rss, hwm, nil
}

// descendants lists the processes below pid (from the ppid field of /proc/*/stat).
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: fields follow the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for q, hops := parent[p], 0; q != 0 && hops < 64; q, hops = parent[q], hops+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// capBuffer keeps the last few MB a process printed.
type capBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.b.Len() > 4<<20 {
		tail := append([]byte(nil), c.b.Bytes()[c.b.Len()-(1<<20):]...)
		c.b.Reset()
		c.b.Write(tail)
	}
	return c.b.Write(p)
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

var _ io.Writer = (*capBuffer)(nil)

// errOf wraps a failed step with the server's name.
func errOf(server, step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", server, step, err)
}
