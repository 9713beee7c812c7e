package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

var teapot = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })

func TestOriginGuard(t *testing.T) {
	var reasons []string
	h := OriginGuard(OriginOptions{
		AllowedHosts:   append(DefaultAllowedHosts(), "*.example.org"),
		AllowedOrigins: []string{"https://lab.example.org/"},
		OnReject:       func(r string) { reasons = append(reasons, r) },
	}, teapot)
	for _, tc := range []struct {
		name, host, origin string
		want               int
	}{
		{"loopback, no origin (CLI client)", "127.0.0.1:8080", "", 418},
		{"localhost", "localhost:8080", "", 418},
		{"ipv6 loopback", "[::1]:8080", "", 418},
		{"subdomain wildcard", "mcp.example.org", "", 418},
		{"rebinding host", "evil.attacker.test:8080", "", 403},
		{"wildcard is not the apex", "example.org", "", 403},
		{"same origin", "127.0.0.1:8080", "http://127.0.0.1:8080", 418},
		{"allowed origin", "127.0.0.1:8080", "https://lab.example.org", 418},
		{"cross-site origin", "127.0.0.1:8080", "https://evil.attacker.test", 403},
		{"same host, other port", "127.0.0.1:8080", "http://127.0.0.1:9999", 403},
		{"null origin", "127.0.0.1:8080", "null", 403},
		{"file origin", "127.0.0.1:8080", "file://", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/mcp", nil)
			req.Host = tc.host
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
		})
	}
	if strings.Join(reasons, ",") != "host,host,origin,origin,origin,origin" {
		t.Errorf("reject reasons %v", reasons)
	}
	// No host list: any host (a server on 0.0.0.0 cannot know its public names).
	open := OriginGuard(OriginOptions{}, teapot)
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Host = "anything.test"
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, req)
	if rec.Code != 418 {
		t.Errorf("open guard: status %d", rec.Code)
	}
}

func TestRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	limited := 0
	h := RateLimit(RateLimitOptions{PerSecond: 2, Burst: 3, OnLimited: func() { limited++ }, now: func() time.Time { return now }}, teapot)
	alice, _ := NewIdentity("alice", AllScopes, nil)
	bob, _ := NewIdentity("bob", AllScopes, nil)
	call := func(id Identity) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/mcp", nil).WithContext(WithIdentity(context.Background(), id))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := 0; i < 3; i++ {
		if rec := call(alice); rec.Code != 418 {
			t.Fatalf("burst request %d: status %d", i, rec.Code)
		}
	}
	rec := call(alice)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("over the burst: status %d, want 429", rec.Code)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1 (half a second, rounded up)", ra)
	}
	if !strings.Contains(rec.Body.String(), "rate_limited") {
		t.Errorf("body %s", rec.Body)
	}
	if rec := call(bob); rec.Code != 418 {
		t.Errorf("another token is limited by alice's use: %d", rec.Code)
	}
	now = now.Add(500 * time.Millisecond) // one token refilled
	if rec := call(alice); rec.Code != 418 {
		t.Errorf("after refill: status %d", rec.Code)
	}
	if rec := call(alice); rec.Code != 429 {
		t.Errorf("refill gave more than one token: status %d", rec.Code)
	}
	if limited != 2 {
		t.Errorf("OnLimited called %d times, want 2", limited)
	}
}

func TestSessionConcurrency(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusTeapot)
	})
	h := SessionConcurrency(2, nil, slow)
	post := func(session string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/mcp", nil)
		req.Header.Set("Mcp-Session-Id", session)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- post("s1").Code }()
	}
	for i := 0; i < 2; i++ {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("the first two requests did not start")
		}
	}
	if rec := post("s1"); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("third concurrent request: status %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Another session is not affected.
	done := make(chan int, 1)
	go func() { done <- post("s2").Code }()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("another session's request was held back")
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 418 {
			t.Errorf("an admitted request got %d", c)
		}
	}
	if c := <-done; c != 418 {
		t.Errorf("s2 got %d", c)
	}
	// Slots are released: s1 may run again.
	entered2 := make(chan struct{})
	h2 := SessionConcurrency(1, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { close(entered2) }))
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Set("Mcp-Session-Id", "s1")
	h2.ServeHTTP(httptest.NewRecorder(), req)
	<-entered2
	entered3 := 0
	h3 := SessionConcurrency(1, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { entered3++ }))
	for i := 0; i < 3; i++ {
		h3.ServeHTTP(httptest.NewRecorder(), req)
	}
	if entered3 != 3 {
		t.Errorf("sequential requests admitted %d of 3: slots leak", entered3)
	}
}

func TestJupyterAuthenticator(t *testing.T) {
	calls := 0
	down := false
	lookup := func(_ context.Context, token string) (JupyterUser, error) {
		calls++
		switch {
		case down:
			return JupyterUser{}, errors.New("connection refused")
		case token == "alice-token":
			return JupyterUser{Username: "alice", Permissions: map[string][]string{"contents": {"read", "write"}, "kernels": {"execute"}}}, nil
		case token == "reader-token":
			return JupyterUser{Username: "rita", Permissions: map[string][]string{"contents": {"read"}}}, nil
		case token == "nobody-token":
			return JupyterUser{Username: "nobody", Permissions: map[string][]string{}}, nil
		}
		return JupyterUser{}, ErrInvalidToken
	}
	now := time.Unix(0, 0)
	a := NewJupyterAuthenticator(lookup, time.Minute)
	a.now = func() time.Time { return now }
	ctx := context.Background()
	id, err := a.Authenticate(ctx, "alice-token")
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "jupyter:alice" || !id.Delegated || !id.Can(ScopeWrite) || !id.Can(ScopeExecute) || id.Can(ScopeAdmin) {
		t.Errorf("alice: %+v scopes %v", id, id.Scopes())
	}
	if _, err := a.Authenticate(ctx, "alice-token"); err != nil || calls != 1 {
		t.Errorf("cached answer: err %v, lookups %d (want 1)", err, calls)
	}
	if id, _ := a.Authenticate(ctx, "reader-token"); id.Can(ScopeWrite) || !id.Can(ScopeRead) {
		t.Errorf("reader scopes %v", id.Scopes())
	}
	if _, err := a.Authenticate(ctx, "nobody-token"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a user without contents:read: %v, want ErrInvalidToken", err)
	}
	if _, err := a.Authenticate(ctx, "wrong"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("wrong token: %v", err)
	}
	before := calls
	if _, err := a.Authenticate(ctx, "wrong"); !errors.Is(err, ErrInvalidToken) || calls != before {
		t.Errorf("a refused token is asked again at once (lookups %d → %d)", before, calls)
	}
	now = now.Add(2 * time.Minute)
	down = true
	if _, err := a.Authenticate(ctx, "alice-token"); err == nil || errors.Is(err, ErrInvalidToken) {
		t.Errorf("jupyter down after expiry: %v, want an unavailable error (not invalid)", err)
	}
	// Through the middleware an outage is 503, not 401.
	h := Middleware(MiddlewareOptions{Authenticator: a}, teapot)
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("outage: status %d", rec.Code)
	}
	if strings.Contains(rec.Body.String(), "alice-token") {
		t.Error("the token is echoed")
	}
}

func TestScopesFromJupyter(t *testing.T) {
	all := map[string][]string{"contents": {"read", "write"}, "kernels": {"execute", "write"}}
	if got := ScopesFromJupyter(all); len(got) != 4 {
		t.Errorf("full permissions: %v", got)
	}
	// kernels:write alone must not grant admin, which includes write.
	if got := ScopesFromJupyter(map[string][]string{"contents": {"read"}, "kernels": {"write", "execute"}}); len(got) != 2 || got[1] != ScopeExecute {
		t.Errorf("read+kernels: %v", got)
	}
}

func TestMetadata(t *testing.T) {
	h := Middleware(MiddlewareOptions{
		Authenticator:    mustStatic(t),
		ResourceMetadata: func(r *http.Request) string { return MetadataURL("", r) },
	}, teapot)
	req := httptest.NewRequest("POST", "http://127.0.0.1:8080/mcp", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	want := `resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"`
	if got := rec.Header().Get("WWW-Authenticate"); !strings.Contains(got, want) {
		t.Errorf("WWW-Authenticate %q, want %s", got, want)
	}
	if got := MetadataURL("https://hub.example.org/user/alice/mcp-proxy/", req); got != "https://hub.example.org/.well-known/oauth-protected-resource/user/alice/mcp-proxy/mcp" {
		t.Errorf("metadata URL under a public path: %s", got)
	}
	rec = httptest.NewRecorder()
	MetadataHandler("", nil, "").ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp", nil))
	var md ResourceMetadata
	if err := json.Unmarshal(rec.Body.Bytes(), &md); err != nil {
		t.Fatal(err)
	}
	if md.Resource != "http://127.0.0.1:8080/mcp" || len(md.ScopesSupported) != 4 || md.BearerMethodsSupported[0] != "header" {
		t.Errorf("metadata %+v", md)
	}
}

func mustStatic(t *testing.T) *StaticTokens {
	s, err := NewStaticTokens([]string{"0123456789abcdef-static"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
