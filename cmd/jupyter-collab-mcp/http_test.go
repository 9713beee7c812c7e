package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the whole binary's wiring (run) on a loopback port against a stand-in
// jupyter-server that answers only what the HTTP endpoint needs (/api/status, /api/me). The
// real server is exercised by the integration suite; here the subject is the HTTP guard rail:
// authentication, metadata, Origin/Host, body size, rate limit, metrics, readiness, and that no
// secret reaches the log.

const (
	sidecarJupyterToken = "jt-sidecar-secret-0123456789"
	mcpToken            = "mcp-static-secret-0123456789"
	aliceJupyterToken   = "alice-jupyter-secret-0123456789"
	ritaJupyterToken    = "rita-jupyter-secret-0123456789"
)

func fakeJupyter(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		user, perms := "", map[string][]string{}
		switch auth {
		case "token " + sidecarJupyterToken:
			user = "sidecar"
		case "token " + aliceJupyterToken:
			user, perms = "alice", map[string][]string{"contents": {"read", "write"}, "kernels": {"execute", "write"}}
		case "token " + ritaJupyterToken:
			user, perms = "rita", map[string][]string{"contents": {"read"}}
		}
		if user == "" {
			http.Error(w, `{"message":"Forbidden"}`, http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/api/status":
			_, _ = io.WriteString(w, `{"started":"2026-01-01T00:00:00Z"}`)
		case "/api/me":
			var asked map[string][]string
			_ = json.Unmarshal([]byte(r.URL.Query().Get("permissions")), &asked)
			granted := map[string][]string{}
			for res, actions := range asked {
				for _, a := range actions {
					for _, g := range perms[res] {
						if g == a {
							granted[res] = append(granted[res], a)
						}
					}
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"identity": map[string]any{"username": user, "name": user}, "permissions": granted})
		case "/api/collaboration/session/jcm-engine-probe":
			// jupyter-collaboration's session route answers GET with 405 (it has only PUT): the
			// sidecar's engine detection.
			http.Error(w, `{"message":"Method Not Allowed"}`, http.StatusMethodNotAllowed)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type runningSidecar struct {
	base string
	logs *syncBuffer
	stop func()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startRun(t *testing.T, jupyterURL string, env map[string]string, args ...string) *runningSidecar {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	full := map[string]string{"JUPYTER_URL": jupyterURL, "JUPYTER_TOKEN": sidecarJupyterToken, "NO_GLOBAL_AWARENESS": "true",
		"LOG_FORMAT": "json", "LOG_LEVEL": "debug", "MCP_LISTEN": addr}
	for k, v := range env {
		full[k] = v
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return full[k] }, strings.NewReader(""), io.Discard, logs)
	}()
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("run ended at start: %v\n%s", err, logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("not listening after 10s:\n%s", logs)
		}
	}
	s := &runningSidecar{base: base, logs: logs}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Error("run did not stop within 15s")
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

type rpcReply struct {
	status  int
	header  http.Header
	body    string
	result  map[string]any
	session string
}

// rpc posts one JSON-RPC request the way a Streamable HTTP client does.
func rpc(t *testing.T, base, token, session, method string, params any, mutate ...func(*http.Request)) rpcReply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	for _, m := range mutate {
		m(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := rpcReply{status: resp.StatusCode, header: resp.Header, body: string(raw), session: resp.Header.Get("Mcp-Session-Id")}
	payload := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				payload = []byte(d) // the last data line is the response
			}
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
	}
	if json.Unmarshal(payload, &msg) == nil {
		out.result = msg.Result
	}
	return out
}

func initialize(t *testing.T, base, token string) string {
	t.Helper()
	r := rpc(t, base, token, "", "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "http-test", "version": "1"}})
	if r.status != 200 || r.session == "" {
		t.Fatalf("initialize: status %d session %q body %s", r.status, r.session, r.body)
	}
	rpc(t, base, token, r.session, "notifications/initialized", map[string]any{})
	return r.session
}

func get(t *testing.T, url, token string, mutate ...func(*http.Request)) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, m := range mutate {
		m(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestHTTPEndpointGuards(t *testing.T) {
	jup := fakeJupyter(t)
	sc := startRun(t, jup.URL+"/", map[string]string{"MCP_TOKEN": mcpToken, "MCP_RATE_LIMIT": "0.5", "MCP_RATE_BURST": "40", "MCP_TOOLSETS": "default,admin"})

	// Missing and wrong tokens: 401 with a challenge that points at the metadata.
	for _, token := range []string{"", "wrong-token-0123456789"} {
		r := rpc(t, sc.base, token, "", "initialize", map[string]any{})
		if r.status != 401 {
			t.Fatalf("token %q: status %d", token, r.status)
		}
		if ch := r.header.Get("WWW-Authenticate"); !strings.Contains(ch, `resource_metadata="`+sc.base+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("challenge %q lacks the metadata URL", ch)
		}
	}
	code, _, body := get(t, sc.base+"/.well-known/oauth-protected-resource/mcp", "")
	if code != 200 || !strings.Contains(body, `"resource":"`+sc.base+`/mcp"`) {
		t.Errorf("metadata: %d %s", code, body)
	}

	session := initialize(t, sc.base, mcpToken)
	r := rpc(t, sc.base, mcpToken, session, "tools/call", map[string]any{"name": "count_tokens", "arguments": map[string]any{"input": "hello world"}})
	if r.status != 200 || r.result == nil || r.result["isError"] == true {
		t.Fatalf("count_tokens: %d %s", r.status, r.body)
	}

	// DNS rebinding and cross-site browser requests.
	if r := rpc(t, sc.base, mcpToken, session, "tools/list", nil, func(q *http.Request) { q.Host = "rebind.attacker.test" }); r.status != 403 {
		t.Errorf("foreign Host: status %d", r.status)
	}
	if r := rpc(t, sc.base, mcpToken, session, "tools/list", nil, func(q *http.Request) { q.Header.Set("Origin", "https://attacker.test") }); r.status != 403 {
		t.Errorf("foreign Origin: status %d", r.status)
	}
	if r := rpc(t, sc.base, mcpToken, session, "tools/list", nil, func(q *http.Request) { q.Header.Set("Origin", sc.base) }); r.status != 200 {
		t.Errorf("same Origin: status %d %s", r.status, r.body)
	}

	// Oversized body: refused before it is read.
	req, _ := http.NewRequest("POST", sc.base+"/mcp", io.LimitReader(zeros{}, 17<<20))
	req.ContentLength = 17 << 20
	req.Header.Set("Authorization", "Bearer "+mcpToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("oversized body: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized body: status %d, want 413", resp.StatusCode)
		}
	}

	// Metrics need a token and count the call above.
	if code, _, _ := get(t, sc.base+"/metrics", ""); code != 401 {
		t.Errorf("/metrics without a token: %d", code)
	}
	code, _, metrics := get(t, sc.base+"/metrics", mcpToken)
	if code != 200 || !strings.Contains(metrics, `jcm_tool_calls_total{outcome="ok",tool="count_tokens"} 1`) ||
		!strings.Contains(metrics, `jcm_http_rejected_total{reason="host"} 1`) || !strings.Contains(metrics, `jcm_tokens_served_total{tool="count_tokens"}`) {
		t.Errorf("/metrics: %d\n%s", code, grepLines(metrics, "jcm_"))
	}
	if code, _, body := get(t, sc.base+"/readyz", ""); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Errorf("/readyz: %d %s", code, body)
	}

	// Rate limit: the burst is spent, then 429 with Retry-After.
	limited := false
	for i := 0; i < 60 && !limited; i++ {
		r := rpc(t, sc.base, mcpToken, session, "ping", nil)
		if r.status == 429 {
			limited = true
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
			}
		}
	}
	if !limited {
		t.Error("60 requests at once with burst 40 and 0.5/s were never limited")
	}

	sc.stop()
	logs := sc.logs.String()
	for _, secret := range []string{mcpToken, sidecarJupyterToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret appears in the log")
		}
	}
	if !strings.Contains(logs, "serving MCP over Streamable HTTP") {
		t.Errorf("log not captured:\n%s", logs)
	}
}

func TestHTTPJupyterDelegatedAuth(t *testing.T) {
	jup := fakeJupyter(t)
	sc := startRun(t, jup.URL+"/", map[string]string{"MCP_AUTH": "jupyter", "MCP_TOOLSETS": "all"}) // the scopes' tools, kernels' included
	if r := rpc(t, sc.base, "not-a-jupyter-token-0123", "", "initialize", map[string]any{}); r.status != 401 {
		t.Errorf("unknown Jupyter token: %d", r.status)
	}
	names := func(token string) []string {
		session := initialize(t, sc.base, token)
		r := rpc(t, sc.base, token, session, "tools/list", map[string]any{})
		var out []string
		list, _ := r.result["tools"].([]any)
		for _, tool := range list {
			out = append(out, tool.(map[string]any)["name"].(string))
		}
		return out
	}
	alice, rita := names(aliceJupyterToken), names(ritaJupyterToken)
	if !contains(alice, "batch_insert_notebook_cells") || !contains(alice, "restart_kernel") {
		t.Errorf("alice (contents write, kernels execute+write) sees %v", alice)
	}
	if contains(rita, "batch_insert_notebook_cells") || contains(rita, "execute_code") || !contains(rita, "get_notebook") {
		t.Errorf("rita (contents read) sees %v", rita)
	}
	// jupyter-server gone: not ready, and a token it can no longer vouch for gets 503, not 401.
	if code, _, body := get(t, sc.base+"/readyz", ""); code != 200 || !strings.Contains(body, `"engine":"jupyter-collaboration"`) {
		t.Errorf("/readyz with jupyter up: %d %s (want 200 naming the engine)", code, body)
	}
	jup.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, body := get(t, sc.base+"/readyz", "")
		if code == 503 && strings.Contains(body, "unreachable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s 10s after jupyter-server stopped", code, body)
		}
		time.Sleep(200 * time.Millisecond) // the answer is cached for 2s
	}
	if r := rpc(t, sc.base, "unseen-jupyter-token-0123456789", "", "initialize", map[string]any{}); r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("token check with jupyter down: %d %s", r.status, r.body)
	}
	sc.stop()
	logs := sc.logs.String()
	for _, secret := range []string{aliceJupyterToken, ritaJupyterToken, sidecarJupyterToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret appears in the log")
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func TestHTTPServesTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := dir+"/cert.pem", dir+"/key.pem"
	pool := writeSelfSigned(t, certFile, keyFile)
	jup := fakeJupyter(t)
	sc := startRunTLS(t, jup.URL+"/", map[string]string{"MCP_TOKEN": mcpToken, "MCP_TLS_CERT": certFile, "MCP_TLS_KEY": keyFile})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", sc+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+mcpToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("https /metrics: %d tls=%v", resp.StatusCode, resp.TLS != nil)
	}
	plain := strings.Replace(sc, "https://", "http://", 1)
	if resp, err := http.Get(plain + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP is served next to TLS")
		}
	}
}

// startRunTLS is startRun for an HTTPS endpoint; it returns the base URL.
func startRunTLS(t *testing.T, jupyterURL string, env map[string]string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	full := map[string]string{"JUPYTER_URL": jupyterURL, "JUPYTER_TOKEN": sidecarJupyterToken, "NO_GLOBAL_AWARENESS": "true", "LOG_FORMAT": "json", "MCP_LISTEN": addr}
	for k, v := range env {
		full[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		done <- run(ctx, nil, func(k string) string { return full[k] }, strings.NewReader(""), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("run did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "https://" + addr
		}
		select {
		case err := <-done:
			t.Fatalf("run ended: %v\n%s", err, logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("not listening:\n%s", logs)
	return ""
}

func writeSelfSigned(t *testing.T, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// JUPYTER_URL set to the URL JupyterLab printed (token in the query) connects with that token,
// and the token reaches no log line.
func TestPastedJupyterLabURL(t *testing.T) {
	jup := fakeJupyter(t)
	sc := startRun(t, jup.URL+"/lab/tree/x.ipynb?token="+sidecarJupyterToken, map[string]string{"JUPYTER_TOKEN": "", "MCP_TOKEN": mcpToken})
	resp, err := http.Get(sc.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz = %d with the token from the URL", resp.StatusCode)
	}
	sc.stop()
	logs := sc.logs.String()
	if !strings.Contains(logs, `"jupyter_user":"sidecar"`) || !strings.Contains(logs, `"jupyter":"`+jup.URL+`/"`) {
		t.Errorf("no connection as the sidecar's user to the base URL in the log:\n%s", logs)
	}
	if strings.Contains(logs, sidecarJupyterToken) {
		t.Errorf("the Jupyter token is in the log:\n%s", logs)
	}
}
