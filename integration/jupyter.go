// Package integration runs the sidecar against a real jupyter-server with jupyter-collaboration
// (from the pinned .venv the Makefile creates) and checks its work with an independent Yjs peer
// (yjs + y-protocols from npm). The harness here is shared by the tests (build tag
// "integration") and by `make run`.
package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
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

// RepoRoot finds the repository root (the directory holding go.mod) from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("integration: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Engine names one of the pinned server environments the harness can start (the compatibility
// matrix; docs/engines.md).
type Engine string

const (
	// EngineJC5 is jupyter-server with jupyter-collaboration 5.0.x (.venv, requirements.txt).
	EngineJC5 Engine = "jc5"
	// EngineJC4 is jupyter-collaboration 4.4.x, what jupyter-ai[rtc] installs (.venv-jc4).
	EngineJC4 Engine = "jc4"
	// EngineJSD is jupyter-server-documents 0.3.x, what jupyter-ai[rtc-jsd] installs (.venv-jsd).
	EngineJSD Engine = "jsd"
)

// Engines lists every environment of the matrix.
var Engines = []Engine{EngineJC5, EngineJC4, EngineJSD}

// DefaultEngine is the environment of a test run: JCM_ENGINE (jc5, jc4 or jsd), jc5 when unset.
// An unknown name panics: a typo must not quietly test the default.
func DefaultEngine() Engine {
	e := Engine(os.Getenv("JCM_ENGINE"))
	if e == "" {
		return EngineJC5
	}
	if !e.valid() {
		panic(fmt.Sprintf("integration: JCM_ENGINE=%q: want one of %v", string(e), Engines))
	}
	return e
}

func (e Engine) valid() bool {
	for _, k := range Engines {
		if e == k {
			return true
		}
	}
	return false
}

// Documents reports whether the engine is jupyter-server-documents (no session API, no forks,
// no RAW save, server-side saving).
func (e Engine) Documents() bool { return e == EngineJSD }

// Venv is the engine's virtualenv directory name under the repository root.
func (e Engine) Venv() string {
	if e == EngineJC5 || e == "" {
		return ".venv"
	}
	return ".venv-" + string(e)
}

// VenvBin returns the path of a program in the pinned virtualenv of the run's engine (JCM_VENV,
// else <repo>/.venv, .venv-jc4 or .venv-jsd after JCM_ENGINE).
func VenvBin(name string) (string, error) { return EngineBin(DefaultEngine(), name) }

// EngineBin returns the path of a program in an engine's virtualenv (JCM_VENV overrides the
// default engine's).
func EngineBin(e Engine, name string) (string, error) {
	venv := os.Getenv("JCM_VENV")
	if venv == "" || e != DefaultEngine() {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		venv = filepath.Join(root, e.Venv())
	}
	p := filepath.Join(venv, "bin", name)
	if _, err := os.Stat(p); err != nil {
		target := "venv"
		if e != EngineJC5 {
			target = "venv-" + string(e)
		}
		return "", fmt.Errorf("integration: %s not found (run `make %s` first): %w", p, target, err)
	}
	return p, nil
}

// RandomToken returns a random hex token.
func RandomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FreePort returns a TCP port on 127.0.0.1 that is free now and that nothing else will take
// before the caller binds it, or binds it again after a restart.
//
// A port the kernel picked (listen on port 0) is in the ephemeral range, which the kernel also
// hands out on its own: to the kernels' ZMQ sockets and to the local end of every outgoing
// connection. Between FreePort closing its probe and jupyter-server binding the port (or while a
// killed server is restarted on the same port), such a socket could take it ("address already
// in use"). Ports below the ephemeral range are never assigned automatically, so the harness picks
// one there at random, checks it is free, and never hands it out twice in this process.
func FreePort() (int, error) {
	low := ephemeralLow()
	const first = 20000
	if low-first < 1000 {
		return 0, fmt.Errorf("integration: the ephemeral port range starts at %d, leaving no room below it for test servers", low)
	}
	freePorts.mu.Lock()
	defer freePorts.mu.Unlock()
	var b [4]byte
	for range 200 {
		_, _ = rand.Read(b[:])
		port := first + int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))%(low-first)
		if freePorts.given[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use
		}
		_ = l.Close()
		freePorts.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("integration: no free port found in %d–%d after 200 tries", first, low-1)
}

// freePorts are the ports FreePort handed out in this process (a test harness's bookkeeping,
// shared by every server it starts).
var freePorts = struct {
	mu    sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 1024 {
		return 32768
	}
	return n
}

// ServerOptions configure a jupyter-server for tests.
type ServerOptions struct {
	Root      string   // notebook root; a temp dir when empty
	StateDir  string   // config/data/runtime dirs and the server's cwd (YStore); a temp dir when empty
	Token     string   // random when empty
	Port      int      // free port when 0
	ExtraArgs []string // more --Config.option=value arguments
	Log       io.Writer
	// BaseURL serves the server under a base_url, as JupyterHub runs single-user servers
	// ("/user/alice/"); the server's URL then includes it. Empty: "/".
	BaseURL string
	// Engine picks the server environment (jc5, jc4, jsd); empty: DefaultEngine (JCM_ENGINE).
	Engine Engine
	// Bin is the jupyter-server program to run (one of another virtualenv, e.g. the
	// benchmarks'); empty: the engine's.
	Bin string
}

// JupyterServer is a running jupyter-server process.
type JupyterServer struct {
	URL    string // http://127.0.0.1:PORT/
	Token  string
	Root   string
	Port   int
	Engine Engine

	opts ServerOptions
	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
	log  *lockedBuffer
}

// StartJupyter starts jupyter-server with the options' collaboration engine on 127.0.0.1 and
// waits until it answers. Always call Stop (or use t.Cleanup).
func StartJupyter(ctx context.Context, opts ServerOptions) (*JupyterServer, error) {
	var err error
	if opts.Root == "" {
		if opts.Root, err = os.MkdirTemp("", "jcm-root-"); err != nil {
			return nil, err
		}
	}
	if opts.StateDir == "" {
		if opts.StateDir, err = os.MkdirTemp("", "jcm-state-"); err != nil {
			return nil, err
		}
	}
	for _, dir := range []string{opts.Root, opts.StateDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if opts.Token == "" {
		opts.Token = RandomToken()
	}
	if opts.Port == 0 {
		if opts.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	if opts.BaseURL == "" {
		opts.BaseURL = "/"
	}
	if opts.Engine == "" {
		opts.Engine = DefaultEngine()
	}
	if !opts.Engine.valid() {
		return nil, fmt.Errorf("integration: unknown engine %q (want one of %v)", opts.Engine, Engines)
	}
	if !strings.HasPrefix(opts.BaseURL, "/") || !strings.HasSuffix(opts.BaseURL, "/") {
		return nil, fmt.Errorf("integration: base_url %q must start and end with /", opts.BaseURL)
	}
	if opts.BaseURL != "/" {
		opts.ExtraArgs = append([]string{"--ServerApp.base_url=" + opts.BaseURL}, opts.ExtraArgs...)
	}
	s := &JupyterServer{
		URL:    fmt.Sprintf("http://127.0.0.1:%d%s", opts.Port, opts.BaseURL),
		Token:  opts.Token,
		Root:   opts.Root,
		Port:   opts.Port,
		Engine: opts.Engine,
		opts:   opts,
		log:    &lockedBuffer{},
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *JupyterServer) start(ctx context.Context) error {
	bin := s.opts.Bin
	if bin == "" {
		var err error
		if bin, err = EngineBin(s.opts.Engine, "jupyter-server"); err != nil {
			return err
		}
	}
	args := []string{
		"--ServerApp.ip=127.0.0.1",
		"--ServerApp.port=" + strconv.Itoa(s.Port),
		"--ServerApp.port_retries=0",
		"--ServerApp.open_browser=False",
		"--ServerApp.root_dir=" + s.Root,
		"--allow-root",
		// Tests poll the file on disk; keep the server's own cadence at its defaults otherwise.
	}
	args = append(args, s.opts.ExtraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.opts.StateDir
	cmd.Env = append(os.Environ(),
		"JUPYTER_TOKEN="+s.Token,
		"JUPYTER_CONFIG_DIR="+filepath.Join(s.opts.StateDir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(s.opts.StateDir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(s.opts.StateDir, "runtime"),
		"IPYTHONDIR="+filepath.Join(s.opts.StateDir, "ipython"),
		"JUPYTER_PLATFORM_DIRS=1",
		"PYTHONUNBUFFERED=1",
		// A sidecar the server starts (the pip extension) keeps its state here, not in the home.
		"XDG_STATE_HOME="+filepath.Join(s.opts.StateDir, "xdg-state"),
	)
	var w io.Writer = s.log
	if s.opts.Log != nil {
		w = io.MultiWriter(s.log, s.opts.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = ChildProcAttr() // kernels die with the server, the server with the test
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start jupyter-server: %w", err)
	}
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	s.mu.Lock()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()
	if err := s.waitReady(ctx, exit); err != nil {
		s.kill()
		return fmt.Errorf("%w\n--- jupyter-server log ---\n%s", err, s.log.String())
	}
	return nil
}

func (s *JupyterServer) waitReady(ctx context.Context, exit <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"api/status", nil)
		req.Header.Set("Authorization", "token "+s.Token)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exit:
			return errors.New("jupyter-server exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("jupyter-server not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Log returns everything the server printed.
func (s *JupyterServer) Log() string { return s.log.String() }

// Pid returns the server process id (0 before it started).
func (s *JupyterServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill stops the server with SIGKILL (a crash) and waits for it to exit.
func (s *JupyterServer) Kill() { s.kill() }

func (s *JupyterServer) kill() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exit
}

// Stop asks the server to shut down (SIGTERM), waiting up to 15 s before killing it.
func (s *JupyterServer) Stop() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(15 * time.Second):
		s.kill()
	}
}

// Restart starts the server again on the same port, root, state and token.
func (s *JupyterServer) Restart(ctx context.Context) error {
	s.kill()
	deadline := time.Now().Add(20 * time.Second)
	for { // the port can linger briefly after a kill
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port))
		if err == nil {
			l.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still busy: %w", s.Port, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s.start(ctx)
}

// WriteFile writes a file under the server root (before any room for it is open).
func (s *JupyterServer) WriteFile(rel string, data []byte) error {
	p := filepath.Join(s.Root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// ReadFile reads a file under the server root.
func (s *JupyterServer) ReadFile(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.Root, filepath.FromSlash(rel)))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 4<<20 { // keep the tail only
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
