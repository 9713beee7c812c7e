//go:build integration

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// sidecarProc is the real binary serving Streamable HTTP, its JUPYTER_URL pointing at the proxy.
// Its log goes to a file so a failure can be read in full afterwards.
type sidecarProc struct {
	URL, Token string
	Pid        int
	LogPath    string
	cmd        *exec.Cmd
	exit       chan struct{}
	logFile    *os.File
}

func startSidecar(ctx context.Context, jupyterURL, jupyterToken, logPath string, env ...string) (*sidecarProc, error) {
	bin, err := integration.BuildSidecar()
	if err != nil {
		return nil, err
	}
	port, err := integration.FreePort()
	if err != nil {
		return nil, err
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("sidecar log: %w", err)
	}
	p := &sidecarProc{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Token: integration.RandomToken(), LogPath: logPath, exit: make(chan struct{}), logFile: lf}
	p.cmd = exec.Command(bin, "--listen", "127.0.0.1:"+strconv.Itoa(port), "--log-format", "json", "--log-level", "debug")
	// Its state (the write-ahead log, histories) beside its log, so a restarted sidecar of the
	// same run finds it (env may set another STATE_DIR), never in the user's home.
	p.cmd.Env = append(os.Environ(), "JUPYTER_URL="+jupyterURL, "JUPYTER_TOKEN="+jupyterToken, "MCP_TOKEN="+p.Token,
		"STATE_DIR="+filepath.Join(filepath.Dir(logPath), "state"))
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	p.cmd.SysProcAttr = integration.ChildProcAttr()
	if err := p.cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start sidecar: %w", err)
	}
	p.Pid = p.cmd.Process.Pid
	go func() { _ = p.cmd.Wait(); close(p.exit) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
			return p, nil
		}
		select {
		case <-p.exit:
			return nil, fmt.Errorf("sidecar exited at start; log %s:\n%s", logPath, p.tail(3000))
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("sidecar start: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("sidecar not listening after 60s; log %s:\n%s", logPath, p.tail(3000))
		}
	}
}

// alive reports whether the process is still the one started (it never exited).
func (p *sidecarProc) alive() bool {
	select {
	case <-p.exit:
		return false
	default:
		return syscall.Kill(p.Pid, 0) == nil
	}
}

func (p *sidecarProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exit:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
	_ = p.logFile.Close()
}

// kill ends the process with SIGKILL (a crash: nothing flushed, no goodbye) and waits for it.
func (p *sidecarProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exit
	_ = p.logFile.Close()
}

// logLinesFrom parses the JSON log lines written after offset (bytes) and returns them with the
// offset after the last whole line.
func (p *sidecarProc) logLinesFrom(offset int64) ([]map[string]any, int64) {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return nil, offset
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var out []map[string]any
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // a partial last line is read again next time
			return out, offset
		}
		offset += int64(len(line))
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			out = append(out, m)
		}
	}
}

// tail returns the end of the log file.
func (p *sidecarProc) tail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// grepLog returns the log lines (JSON) containing any of the needles, at most max of them, last
// first kept.
func (p *sidecarProc) grepLog(max int, needles ...string) []string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range needles {
			if strings.Contains(line, n) {
				if len(line) > 600 {
					line = line[:600] + "…"
				}
				out = append(out, line)
				break
			}
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// outcome classifies a tool call.
type outcome int

const (
	outOK          outcome = iota // success
	outUnconfirmed                // "applied in the replica, not confirmed": promised to arrive
	outWithdrawn                  // "nothing was changed"
	outFailed                     // any other error (tool error or transport error)
)

func (o outcome) String() string {
	return [...]string{"ok", "unconfirmed", "withdrawn", "failed"}[o]
}

// agent is the MCP client (mcp-go, Streamable HTTP) the test plays the model with.
type agent struct {
	c       *client.Client
	timeout time.Duration // client-side bound of one call
}

func newAgent(ctx context.Context, url, token string, timeout time.Duration) (*agent, error) {
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, fmt.Errorf("mcp client: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("mcp client start: %w", err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("mcp initialize: %w", err)
	}
	return &agent{c: c, timeout: timeout}, nil
}

// callResult is one tool call's outcome, decoded result and error text.
type callResult struct {
	out  outcome
	data map[string]any
	err  string
}

func (a *agent) call(ctx context.Context, name string, args map[string]any) callResult {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	res, err := a.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		return callResult{out: outFailed, err: "transport: " + err.Error()}
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text = tc.Text
			break
		}
	}
	var data map[string]any
	_ = json.Unmarshal([]byte(text), &data)
	if !res.IsError {
		return callResult{out: outOK, data: data}
	}
	msg, _ := data["error"].(string)
	if msg == "" {
		msg = text
	}
	switch {
	case strings.Contains(msg, "has not confirmed it yet"):
		return callResult{out: outUnconfirmed, data: data, err: msg}
	case strings.HasPrefix(msg, "nothing was changed"):
		return callResult{out: outWithdrawn, data: data, err: msg}
	}
	return callResult{out: outFailed, data: data, err: msg}
}

// restartKernel restarts the notebook's kernel through the server's REST API, as JupyterLab's
// Restart button does. It returns the kernel id, or "" when the notebook has no kernel yet.
func restartKernel(ctx context.Context, srv *integration.JupyterServer, path string) (string, error) {
	do := func(method, rel string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+rel, bytes.NewReader(nil))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "token "+srv.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, rel, err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s %s: %s: %s", method, rel, resp.Status, buf.String())
		}
		return buf.Bytes(), nil
	}
	b, err := do(http.MethodGet, "api/sessions")
	if err != nil {
		return "", err
	}
	var sessions []struct {
		Path   string `json:"path"`
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	if err := json.Unmarshal(b, &sessions); err != nil {
		return "", fmt.Errorf("sessions: %w", err)
	}
	for _, s := range sessions {
		if s.Path == path && s.Kernel.ID != "" {
			if _, err := do(http.MethodPost, "api/kernels/"+s.Kernel.ID+"/restart"); err != nil {
				return s.Kernel.ID, err
			}
			return s.Kernel.ID, nil
		}
	}
	return "", nil
}
