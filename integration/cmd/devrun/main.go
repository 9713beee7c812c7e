// Command devrun is `make run`: a local jupyter-server (pinned, from .venv) in a scratch root with
// a sample notebook and text file, the sidecar attached to it over Streamable HTTP, and
// instructions for a browser and an MCP client. Ctrl-C stops both.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	repo, err := integration.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(repo, "bin", "jupyter-collab-mcp")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s missing (make build): %w", bin, err)
	}
	scratch, err := os.MkdirTemp("", "jupyter-collab-mcp-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	root := filepath.Join(scratch, "notebooks")
	for name, dst := range map[string]string{"sample.ipynb": "sample.ipynb", "sample.md": "sample.md"} {
		b, err := os.ReadFile(filepath.Join(repo, "integration", "testdata", name))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, dst), b, 0o644); err != nil {
			return err
		}
	}

	fmt.Println("Starting jupyter-server (first start takes a few seconds)…")
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{
		Root:     root,
		StateDir: filepath.Join(scratch, "state"),
		Port:     envPort("JUPYTER_PORT", 8888),
	})
	if err != nil {
		return err
	}
	defer srv.Stop()

	mcpPort := envPort("MCP_PORT", 8765)
	mcpToken := integration.RandomToken()
	listen := "127.0.0.1:" + strconv.Itoa(mcpPort)
	sidecar := exec.Command(bin, "--listen", listen, "--log-format", "console")
	// One JUPYTER_URL carrying the token: the form printed below for stdio clients.
	jupyterURL := srv.URL + "?token=" + srv.Token
	sidecar.Env = append(os.Environ(),
		"JUPYTER_URL="+jupyterURL,
		"JUPYTER_TOKEN=",
		"MCP_TOKEN="+mcpToken,
	)
	sidecar.Stdout, sidecar.Stderr = os.Stdout, os.Stderr
	sidecar.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // our Ctrl-C handling stops it politely
	if err := sidecar.Start(); err != nil {
		return fmt.Errorf("start sidecar: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sidecar.Wait() }()
	if err := waitHTTP(ctx, "http://"+listen+"/healthz", exited); err != nil {
		_ = sidecar.Process.Kill()
		return err
	}

	fmt.Printf(`
────────────────────────────────────────────────────────────────────────────
 jupyter-collab-mcp is running.

 Watch in a browser (JupyterLab, with real-time collaboration):
   %slab/tree/sample.ipynb?token=%s

 Connect an MCP client (Streamable HTTP):
   URL:     http://%s/mcp
   Header:  Authorization: Bearer %s

   Claude Code:
     claude mcp add --transport http jupyter http://%s/mcp --header "Authorization: Bearer %s"
   MCP Inspector:
     npx @modelcontextprotocol/inspector --cli http://%s/mcp --method tools/list --header "Authorization: Bearer %s"

 Or let a client start it over stdio (any JupyterLab URL with its ?token= works):
   JUPYTER_URL='%s' %s

 Notebook root: %s   (deleted on exit)
 Ctrl-C stops the sidecar and jupyter-server.
────────────────────────────────────────────────────────────────────────────
`, srv.URL, srv.Token, listen, mcpToken, listen, mcpToken, listen, mcpToken, jupyterURL, bin, root)

	select {
	case <-ctx.Done():
		fmt.Println("\nStopping…")
	case err := <-exited:
		return fmt.Errorf("the sidecar exited: %v", err)
	}
	_ = sidecar.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = sidecar.Process.Kill()
	}
	return nil
}

func envPort(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if p, err := strconv.Atoi(v); err == nil {
			return p
		}
	}
	if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(def)); err == nil {
		l.Close()
		return def
	}
	p, err := integration.FreePort()
	if err != nil {
		return def
	}
	return p
}

func waitHTTP(ctx context.Context, url string, exited <-chan error) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the sidecar exited at start: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("the sidecar did not start listening within 20s")
}
