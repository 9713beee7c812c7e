//go:build integration

// Package packaging checks what users install: the static binary the Dockerfile builds, and the
// wheel that turns a plain `pip install` + jupyter-server into an MCP endpoint under Jupyter's own
// URL and authentication. The wheel is built by `make wheel`, installed with pip into a throwaway
// --target directory (never into .venv), and run by the pinned jupyter-server from .venv.
package packaging

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// version is stamped into the binary (-X main.version) and the wheel by the Makefile; the MCP
// server reports it, which proves the endpoint is served by the bundled binary.
const version = "0.1.0.dev7"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := integration.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// runMake runs a target of the repository's Makefile with variable overrides.
func runMake(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"-s", "-C", repoRoot(t)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestStaticBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "jupyter-collab-mcp")
	runMake(t, "static", "STATIC_BIN="+bin, "PKG_VERSION="+version)

	out, err := exec.Command("file", "-b", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("file: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "statically linked") || !strings.Contains(string(out), "stripped") ||
		strings.Contains(string(out), "not stripped") {
		t.Errorf("file says %q; want a statically linked, stripped executable", out)
	}
	// ldd exits non-zero for static executables; what matters is what it says.
	out, _ = exec.Command("ldd", bin).CombinedOutput()
	if !strings.Contains(string(out), "not a dynamic executable") && !strings.Contains(string(out), "statically linked") {
		t.Errorf("ldd says %q; want no shared libraries", out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	// -trimpath: no path of this checkout is baked into the binary.
	if root := repoRoot(t); bytes.Contains(data, []byte(root+"/")) {
		t.Errorf("the binary contains the build path %s: -trimpath missing", root)
	}
	if !bytes.Contains(data, []byte(version)) {
		t.Errorf("the binary does not contain its version %q (-X main.version)", version)
	}

	// The Dockerfile's build stage must build the same thing as `make static`.
	df, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`, "./cmd/jupyter-collab-mcp", "USER 65532:65532"} {
		if !bytes.Contains(df, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// wheelFile builds the wheel with `make wheel` into a temp dir and returns its path.
func wheelFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	runMake(t, "wheel", "STATIC_BIN="+filepath.Join(dir, "bin", "jupyter-collab-mcp"), "WHEEL_DIR="+filepath.Join(dir, "dist"), "PKG_VERSION="+version)
	matches, err := filepath.Glob(filepath.Join(dir, "dist", "jupyter_collab_mcp-"+version+"-py3-none-*.whl"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("make wheel made %v (%v); want one wheel", matches, err)
	}
	return matches[0]
}

// checkWheel verifies the archive the way an installer would: every file listed in RECORD with
// its sha256 and size, the binary executable, the extension's enabling data file present.
func checkWheel(t *testing.T, path string) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
	}
	read := func(name string) []byte {
		t.Helper()
		f := files[name]
		if f == nil {
			t.Fatalf("wheel lacks %s", name)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	distInfo := "jupyter_collab_mcp-" + version + ".dist-info/"
	rows, err := csv.NewReader(bytes.NewReader(read(distInfo + "RECORD"))).ReadAll()
	if err != nil {
		t.Fatalf("RECORD: %v", err)
	}
	listed := map[string]bool{}
	for _, row := range rows {
		name := row[0]
		listed[name] = true
		if name == distInfo+"RECORD" {
			continue
		}
		data := read(name)
		sum := sha256.Sum256(data)
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); row[1] != want {
			t.Errorf("RECORD hash of %s is %s, content hashes to %s", name, row[1], want)
		}
		if row[2] != strconv.Itoa(len(data)) {
			t.Errorf("RECORD size of %s is %s, content is %d bytes", name, row[2], len(data))
		}
	}
	for name := range files {
		if !listed[name] {
			t.Errorf("%s is in the wheel but not in RECORD", name)
		}
	}
	if bin := files["jupyter_collab_mcp/bin/jupyter-collab-mcp"]; bin == nil || bin.Mode().Perm()&0o111 == 0 {
		t.Errorf("bundled binary missing or not executable in the archive")
	}
	var cfg map[string]map[string]map[string]bool
	if err := json.Unmarshal(read("jupyter_collab_mcp-"+version+".data/data/etc/jupyter/jupyter_server_config.d/jupyter_collab_mcp.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg["ServerApp"]["jpserver_extensions"]["jupyter_collab_mcp"] {
		t.Errorf("the data file does not enable the extension: %v", cfg)
	}
	wheel := string(read(distInfo + "WHEEL"))
	for _, want := range []string{"Root-Is-Purelib: false", "Tag: py3-none-manylinux_2_17_"} {
		if !strings.Contains(wheel, want) {
			t.Errorf("WHEEL lacks %q:\n%s", want, wheel)
		}
	}
	if md := string(read(distInfo + "METADATA")); !strings.Contains(md, "Name: jupyter-collab-mcp\n") || !strings.Contains(md, "Version: "+version+"\n") {
		t.Errorf("METADATA name/version wrong:\n%.400s", md)
	}
}

// installWheel installs the wheel with .venv's pip into a fresh --target dir (so .venv, which
// others use, is untouched) and points the test process's environment at it: StartJupyter passes
// os.Environ() on, so PYTHONPATH finds the package and JUPYTER_CONFIG_PATH the data file that
// enables it, as sys.prefix/etc/jupyter would in a real environment.
func installWheel(t *testing.T, wheel string) string {
	t.Helper()
	py, err := integration.VenvBin("python")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "site")
	out, err := exec.Command(py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index", "--target", target, wheel).CombinedOutput()
	if err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(target, "etc", "jupyter", "jupyter_server_config.d", "jupyter_collab_mcp.json")); err != nil {
		t.Fatalf("pip did not install the data file: %v", err)
	}
	t.Setenv("PYTHONPATH", target)
	t.Setenv("JUPYTER_CONFIG_PATH", filepath.Join(target, "etc", "jupyter"))
	return target
}

var startedRE = regexp.MustCompile(`jupyter-collab-mcp started \(pid (\d+)\) on 127\.0\.0\.1:(\d+)`)

// sidecarsStarted lists the (pid, port) of every sidecar the extension logged starting.
func sidecarsStarted(srv *integration.JupyterServer) [][2]int {
	var out [][2]int
	for _, m := range startedRE.FindAllStringSubmatch(srv.Log(), -1) {
		pid, _ := strconv.Atoi(m[1])
		port, _ := strconv.Atoi(m[2])
		out = append(out, [2]int{pid, port})
	}
	return out
}

// processEnded: no such process, or a zombie (exited; its new parent has not reaped it).
func processEnded(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "Z"
}

// waitFor polls cond every 100 ms until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// do sends one HTTP request to the server and returns status, headers and body.
func do(t *testing.T, method, url, auth string, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// startServer starts the pinned jupyter-server (with the installed wheel on its path) under a
// JupyterHub-like base_url and waits until the extension's sidecar answers through Jupyter.
func startServer(t *testing.T) *integration.JupyterServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{BaseURL: "/user/alice/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if !waitFor(60*time.Second, func() bool {
		code, _, _ := do(t, http.MethodGet, srv.URL+"mcp/healthz", "token "+srv.Token, "", nil)
		return code == http.StatusOK
	}) {
		t.Fatalf("the sidecar never became healthy behind %smcp/healthz\n--- server log ---\n%s", srv.URL, srv.Log())
	}
	if n := len(sidecarsStarted(srv)); n != 1 {
		t.Fatalf("the extension logged %d sidecar starts, want 1\n%s", n, srv.Log())
	}
	return srv
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"packaging-test","version":"1"}}}`

func TestWheelServesMCPUnderJupyter(t *testing.T) {
	wheel := wheelFile(t)
	checkWheel(t, wheel)
	installWheel(t, wheel)
	srv := startServer(t)
	endpoint := srv.URL + "mcp" // srv.URL ends in the base_url, /user/alice/
	nb := `{"cells":[{"cell_type":"markdown","id":"c1","metadata":{},"source":"# packaged"}],"metadata":{},"nbformat":4,"nbformat_minor":5}`
	if err := srv.WriteFile("packaged.ipynb", []byte(nb)); err != nil {
		t.Fatal(err)
	}

	// The sidecar's readiness (jupyter-server reachable at the base_url it was given) is
	// visible below the endpoint.
	if !waitFor(30*time.Second, func() bool {
		code, _, _ := do(t, http.MethodGet, endpoint+"/readyz", "token "+srv.Token, "", nil)
		return code == http.StatusOK
	}) {
		code, _, body := do(t, http.MethodGet, endpoint+"/readyz", "token "+srv.Token, "", nil)
		t.Errorf("%s/readyz: %d %s", endpoint, code, body)
	}
	if code, _, _ := do(t, http.MethodGet, endpoint+"/metrics", "token "+srv.Token, "", nil); code != http.StatusNotFound {
		t.Errorf("%s/metrics: %d; only healthz and readyz are relayed below the endpoint", endpoint, code)
	}

	// Jupyter refuses requests without (or with a wrong) token; they never reach the sidecar.
	for _, auth := range []string{"", "token wrong-wrong-wrong-wrong", "Bearer wrong-wrong-wrong-wrong"} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			code, _, body := do(t, method, endpoint, auth, initialize, nil)
			if code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Errorf("%s %s with Authorization %q: %d, want 401/403\n%s", method, endpoint, auth, code, body)
			}
		}
	}

	// Raw protocol: the session id comes back, is honoured on the next request, and DELETE ends it.
	code, hdr, body := do(t, http.MethodPost, endpoint, "token "+srv.Token, initialize, nil)
	if code != http.StatusOK {
		t.Fatalf("initialize through Jupyter: %d %s", code, body)
	}
	sid := hdr.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no Mcp-Session-Id in the relayed response (headers %v)", hdr)
	}
	if !strings.Contains(body, `"version":"`+version+`"`) {
		t.Errorf("initialize did not come from the bundled binary (want version %s): %s", version, body)
	}
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
	if code, _, body := do(t, http.MethodPost, endpoint, "token "+srv.Token, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); code != http.StatusAccepted {
		t.Errorf("initialized notification: %d %s, want 202", code, body)
	}
	code, _, body = do(t, http.MethodPost, endpoint, "token "+srv.Token, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, session)
	if code != http.StatusOK || !strings.Contains(body, "list_notebooks") {
		t.Errorf("tools/list in the session: %d %.300s", code, body)
	}
	if code, _, body := do(t, http.MethodDelete, endpoint, "token "+srv.Token, "", session); code != http.StatusOK && code != http.StatusNoContent {
		t.Errorf("DELETE session: %d %s", code, body)
	}
	if code, _, _ := do(t, http.MethodPost, endpoint, "token "+srv.Token, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, session); code != http.StatusNotFound && code != http.StatusBadRequest {
		t.Errorf("the deleted session still answers (%d): DELETE or Mcp-Session-Id not relayed", code)
	}

	// The official SDK client, with both schemes Jupyter accepts.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clients := map[string]*integration.MCPClient{}
	for _, scheme := range []string{"token", "Bearer"} {
		c, err := integration.StartMCPClient()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		var info struct {
			Server struct {
				Version string `json:"version"`
			} `json:"server"`
		}
		if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": endpoint, "headers": map[string]string{"Authorization": scheme + " " + srv.Token}}, &info); err != nil {
			t.Fatalf("SDK client with %q: %v\n--- server log ---\n%s", scheme, err, srv.Log())
		}
		if info.Server.Version != version {
			t.Errorf("server version %q, want %q", info.Server.Version, version)
		}
		res, err := c.CallTool(ctx, "list_notebooks", map[string]any{})
		if err != nil || res.IsError || !strings.Contains(res.Text(), "packaged.ipynb") {
			t.Fatalf("list_notebooks with %q: %v %v %.500s", scheme, err, res.IsError, res.Text())
		}
		clients[scheme] = c
	}

	// Server-to-client events on the GET SSE stream pass through the proxy as they happen: one
	// client subscribes to the notebook, the other edits it.
	watcher, editor := clients["token"], clients["Bearer"]
	var listing struct {
		Contents []map[string]any `json:"contents"`
	}
	if err := watcher.Call(ctx, "readResource", map[string]any{"uri": "jupyter://notebooks"}, &listing); err != nil || len(listing.Contents) == 0 {
		t.Fatalf("read jupyter://notebooks: %v", err)
	}
	var nbs struct {
		Notebooks []struct {
			Path   string `json:"path"`
			FileID string `json:"file_id"`
		} `json:"notebooks"`
	}
	text, _ := listing.Contents[0]["text"].(string)
	if err := json.Unmarshal([]byte(text), &nbs); err != nil {
		t.Fatalf("jupyter://notebooks: %v\n%s", err, text)
	}
	uri := ""
	for _, n := range nbs.Notebooks {
		if n.Path == "packaged.ipynb" {
			uri = "jupyter://notebooks/" + n.FileID
		}
	}
	if uri == "" {
		t.Fatalf("jupyter://notebooks does not list packaged.ipynb: %s", text)
	}
	if err := watcher.Call(ctx, "subscribe", map[string]any{"uri": uri}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := editor.CallTool(ctx, "batch_insert_notebook_cells", map[string]any{"path": "packaged.ipynb", "exec": false,
		"cells": []map[string]any{{"cell_type": "markdown", "content": "added through the proxy"}}})
	if err != nil || res.IsError {
		t.Fatalf("insert through the proxy: %v %s", err, res.Text())
	}
	if err := watcher.Call(ctx, "waitNotification", map[string]any{"uri": uri, "timeoutMs": 20000}, nil); err != nil {
		t.Errorf("no resources/updated over the relayed SSE stream: %v", err)
	}

	// Stopping jupyter-server stops the sidecar. It runs in its own session, so the SIGTERM the
	// harness sends to the server's process group does not reach it: the extension must stop it.
	started := sidecarsStarted(srv)
	pid, port := started[0][0], started[0][1]
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("sidecar pgid %d (%v), want its own group %d", pgid, err, pid)
	}
	srv.Stop()
	if !waitFor(20*time.Second, func() bool { return processEnded(pid) }) {
		t.Fatalf("sidecar pid %d still running 20 s after jupyter-server stopped\n%s", pid, srv.Log())
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Errorf("something still listens on the sidecar's port %d", port)
	}
	if !strings.Contains(srv.Log(), "jupyter-collab-mcp stopped") {
		t.Errorf("the extension did not log stopping the sidecar")
	}
}

func TestSidecarRestartedAndDiesWithKilledServer(t *testing.T) {
	installWheel(t, wheelFile(t))
	srv := startServer(t)
	first := sidecarsStarted(srv)[0][0]

	// A sidecar that dies on its own is replaced, and the endpoint serves again.
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { return len(sidecarsStarted(srv)) >= 2 }) {
		t.Fatalf("the extension did not restart the killed sidecar\n%s", srv.Log())
	}
	if !waitFor(30*time.Second, func() bool {
		code, _, _ := do(t, http.MethodPost, srv.URL+"mcp", "token "+srv.Token, initialize, nil)
		return code == http.StatusOK
	}) {
		t.Fatalf("the endpoint does not serve after the restart\n%s", srv.Log())
	}
	second := sidecarsStarted(srv)[1][0]

	// jupyter-server killed outright (no cleanup runs): the sidecar still goes (PR_SET_PDEATHSIG).
	srv.Kill()
	if !waitFor(20*time.Second, func() bool { return processEnded(second) }) {
		t.Fatalf("sidecar pid %d outlived a SIGKILLed jupyter-server by 20 s", second)
	}
}

// noExecuteAuthorizer is a Jupyter authorizer that allows everything but running code.
const noExecuteAuthorizer = `from jupyter_server.auth import Authorizer


class NoExecute(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return not (resource == "kernels" and action == "execute")
`

// toolNames lists the tools a fresh session sees, over raw HTTP through Jupyter.
// toolNames lists the tools through the relay; header is an optional header name and value sent
// with every request.
func toolNames(t *testing.T, endpoint, token string, header ...string) []string {
	t.Helper()
	extra := map[string]string{}
	if len(header) == 2 {
		extra[header[0]] = header[1]
	}
	code, hdr, body := do(t, http.MethodPost, endpoint, "token "+token, initialize, extra)
	if code != http.StatusOK {
		t.Fatalf("initialize: %d %s", code, body)
	}
	session := map[string]string{"Mcp-Session-Id": hdr.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-06-18"}
	for k, v := range extra {
		session[k] = v
	}
	do(t, http.MethodPost, endpoint, "token "+token, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
	code, _, body = do(t, http.MethodPost, endpoint, "token "+token, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, session)
	if code != http.StatusOK {
		t.Fatalf("tools/list: %d %s", code, body)
	}
	var r struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("tools/list: %v\n%.300s", err, body)
	}
	var names []string
	for _, tool := range r.Result.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestJupyterPermissionsLimitTools: the proxy picks the sidecar grant from Jupyter's authorizer,
// so a user Jupyter does not let run code gets no execution tools, and one it lets do everything
// gets them all.
func TestJupyterPermissionsLimitTools(t *testing.T) {
	target := installWheel(t, wheelFile(t))
	full := startServer(t)
	all := toolNames(t, full.URL+"mcp?toolsets=all", full.Token) // the query reaches the sidecar through the relay
	for _, want := range []string{"list_notebooks", "batch_update_notebook_cells", "execute_notebook_cell", "restart_kernel"} {
		if !slices.Contains(all, want) {
			t.Errorf("with every Jupyter permission, tools/list lacks %s: %v", want, all)
		}
	}
	full.Stop()

	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "noexec_authorizer.py"), []byte(noExecuteAuthorizer), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", target+string(os.PathListSeparator)+mod)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{BaseURL: "/user/alice/", ExtraArgs: []string{"--ServerApp.authorizer_class=noexec_authorizer.NoExecute"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if !waitFor(60*time.Second, func() bool {
		code, _, _ := do(t, http.MethodGet, srv.URL+"mcp/healthz", "token "+srv.Token, "", nil)
		return code == http.StatusOK
	}) {
		t.Fatalf("sidecar not healthy\n%s", srv.Log())
	}
	limited := toolNames(t, srv.URL+"mcp", srv.Token, "X-MCP-Toolsets", "all") // and the header
	for _, want := range []string{"list_notebooks", "batch_update_notebook_cells"} {
		if !slices.Contains(limited, want) {
			t.Errorf("without kernels:execute, tools/list still should have %s: %v", want, limited)
		}
	}
	for _, gone := range []string{"execute_notebook_cell", "batch_execute_notebook_cells", "restart_kernel"} {
		if slices.Contains(limited, gone) {
			t.Errorf("without kernels:execute, tools/list offers %s", gone)
		}
	}
}

// TestSidecarThatCannotStart: jupyter-server still serves, the endpoint answers 503 with
// Retry-After (not a hang or a 500), and the extension keeps retrying with backoff.
func TestSidecarThatCannotStart(t *testing.T) {
	installWheel(t, wheelFile(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := integration.StartJupyter(ctx, integration.ServerOptions{BaseURL: "/user/alice/", ExtraArgs: []string{"--CollabMCPApp.binary=/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	// Each failed attempt logs one "restarting in"; two mean it was retried.
	if !waitFor(30*time.Second, func() bool { return strings.Count(srv.Log(), "restarting in") >= 2 }) {
		t.Fatalf("the extension did not retry the failing sidecar\n%s", srv.Log())
	}
	code, hdr, body := do(t, http.MethodPost, srv.URL+"mcp", "token "+srv.Token, initialize, nil)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("with no sidecar: %d (Retry-After %q) %s; want 503 with Retry-After", code, hdr.Get("Retry-After"), body)
	}
	if code, _, _ := do(t, http.MethodGet, srv.URL+"api/status", "token "+srv.Token, "", nil); code != http.StatusOK {
		t.Errorf("jupyter-server itself: /api/status %d", code)
	}
}
