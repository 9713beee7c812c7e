package jupyter

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "secret-token-4f2a9c"

// fakeServer is an httptest server with handlers by path (the escaped path as received).
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
}

func newFakeServer(t *testing.T, h http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Clone(context.Background()))
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func tokenClient(t *testing.T, url, token string) *Client {
	t.Helper()
	c, err := New(Options{URL: url, Token: token, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewValidatesTheURL(t *testing.T) {
	for _, tc := range []struct {
		url, want, wantErr string
	}{
		{url: "http://127.0.0.1:8888", want: "http://127.0.0.1:8888/"},
		{url: "https://hub.example.org/user/alice", want: "https://hub.example.org/user/alice/"},
		{url: "http://h:1/base/#frag", want: "http://h:1/base/"},
		{url: "", wantErr: "required"},
		{url: "ftp://h/", wantErr: "must be http or https"},
		{url: "http:///x", wantErr: "no host"},
		{url: "http://user:pw@h/", wantErr: "must not carry credentials"},
		{url: "http://h/?token=" + testToken, wantErr: "pass the token separately"},
		{url: "http://h:bad port/?token=" + testToken, wantErr: "does not parse"},
	} {
		c, err := New(Options{URL: tc.url})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New(%q) error = %v, want one containing %q", tc.url, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), testToken) {
				t.Errorf("New(%q) error carries the token: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", tc.url, err)
			continue
		}
		if got := c.BaseURL(); got != tc.want {
			t.Errorf("New(%q).BaseURL() = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestNewChecksThePingInterval(t *testing.T) {
	if _, err := New(Options{URL: "http://h/", PingInterval: IdleTimeout}); err == nil || !strings.Contains(err.Error(), "ping interval") {
		t.Errorf("a ping interval of IdleTimeout was accepted: %v", err)
	}
	if _, err := New(Options{URL: "http://h/", PingInterval: IdleTimeout / 2}); err != nil {
		t.Errorf("IdleTimeout/2: %v", err)
	}
	c, err := New(Options{URL: "http://h/"})
	if err != nil || c.ping != DefaultPingInterval {
		t.Errorf("default ping interval: %v, %v", c.ping, err)
	}
	if err := CheckPingInterval(DefaultPingInterval); err != nil {
		t.Errorf("the default ping interval is refused: %v", err)
	}
}

// Paths are built under base_url with every segment escaped, so document names with spaces,
// "#", "?", "%" or non-ASCII reach the server as the names they are.
func TestEndpointEscapesUnderBaseURL(t *testing.T) {
	for _, tc := range []struct {
		base     string
		segments []string
		want     string
	}{
		{"http://h/", []string{"api", "contents", "a b/c#d?.ipynb"}, "http://h/api/contents/a%20b/c%23d%3F.ipynb"},
		{"http://h/user/alice/", []string{"api", "contents", "100%/é.ipynb"}, "http://h/user/alice/api/contents/100%25/%C3%A9.ipynb"},
		{"http://h/user/a%40b", []string{"api", "me"}, "http://h/user/a%40b/api/me"},
		{"http://h/jh/user/x%2Fy/", []string{"api", "status"}, "http://h/jh/user/x%2Fy/api/status"},
	} {
		c := tokenClient(t, tc.base, "")
		if got := c.endpoint(tc.segments...).String(); got != tc.want {
			t.Errorf("endpoint(%q) under %s = %s, want %s", tc.segments, tc.base, got, tc.want)
		}
	}
}

// The server sees the document path as escaped, under base_url, with the token in a header and
// never in the URL.
func TestRequestsReachBaseURLWithTheTokenInAHeader(t *testing.T) {
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"name":"n b.ipynb","path":"dir/n b.ipynb","type":"notebook"}`)
	})
	c := tokenClient(t, f.URL+"/user/alice/", testToken)
	e, err := c.Contents(context.Background(), "/dir/n b.ipynb", false)
	if err != nil {
		t.Fatal(err)
	}
	if e.Path != "dir/n b.ipynb" {
		t.Errorf("decoded %+v", e)
	}
	r := f.last()
	if r.URL.EscapedPath() != "/user/alice/api/contents/dir/n%20b.ipynb" || r.URL.Query().Get("content") != "0" {
		t.Errorf("request URL %s", r.URL)
	}
	if got := r.Header.Get("Authorization"); got != "token "+testToken {
		t.Errorf("Authorization = %q", got)
	}
	if strings.Contains(r.URL.String(), testToken) {
		t.Errorf("the token is in the URL: %s", r.URL)
	}
}

func TestErrorsCarryNoHTMLAndNoToken(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string // the whole message
		permanent   bool
	}{
		{name: "jupyter JSON", status: 404, contentType: "application/json", body: `{"message": "No such file or directory: x.ipynb", "reason": null}`,
			want: "GET /api/contents/x.ipynb: HTTP 404: No such file or directory: x.ipynb", permanent: true},
		{name: "reason only", status: 400, contentType: "application/json", body: `{"message": "", "reason": "bad"}`,
			want: "GET /api/contents/x.ipynb: HTTP 400: bad", permanent: true},
		{name: "tornado HTML page", status: 403, contentType: "text/html",
			body: "<html><title>403: Forbidden</title><body>403: Forbidden<script>var t='x'</script></body></html>",
			want: "GET /api/contents/x.ipynb: HTTP 403 (check JUPYTER_TOKEN)", permanent: true},
		{name: "proxy HTML without title", status: 502, contentType: "text/html", body: "<!DOCTYPE html>\n<p>Bad gateway</p>",
			want: "GET /api/contents/x.ipynb: HTTP 502", permanent: false},
		{name: "401 empty", status: 401, want: "GET /api/contents/x.ipynb: HTTP 401 (check JUPYTER_TOKEN)", permanent: true},
		{name: "echoed token", status: 500, contentType: "application/json", body: `{"message": "bad token ` + testToken + `\nsecond line"}`,
			want: "GET /api/contents/x.ipynb: HTTP 500: bad token [redacted] second line", permanent: false},
		{name: "long text", status: 503, contentType: "text/plain", body: strings.Repeat("é", 300),
			want: "GET /api/contents/x.ipynb: HTTP 503: " + strings.Repeat("é", 200) + "…", permanent: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			c := tokenClient(t, f.URL, testToken)
			_, err := c.Contents(context.Background(), "x.ipynb", false)
			var api *APIError
			if !errors.As(err, &api) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if err.Error() != tc.want {
				t.Errorf("message\n got %q\nwant %q", err.Error(), tc.want)
			}
			if api.StatusCode() != tc.status || api.Permanent() != tc.permanent {
				t.Errorf("status %d permanent %v", api.StatusCode(), api.Permanent())
			}
			if strings.Contains(err.Error(), "<") || strings.Contains(err.Error(), testToken) {
				t.Errorf("message carries HTML or the token: %q", err)
			}
		})
	}
}

// A transport failure is a retryable RequestError that names method and path, not the URL.
func TestTransportErrorsAreRetryableAndNameNoURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := tokenClient(t, "http://"+addr+"/base/", testToken)
	err = c.Status(context.Background())
	var re *RequestError
	if !errors.As(err, &re) || re.Permanent() {
		t.Fatalf("err = %v (%T), want a retryable *RequestError", err, err)
	}
	if !strings.HasPrefix(err.Error(), "GET /base/api/status: ") || strings.Contains(err.Error(), "http://") {
		t.Errorf("message %q", err)
	}
}

// Without a token, writes carry an X-XSRFToken header equal to the _xsrf cookie (what
// jupyter-server checks); with a token, the Authorization header and no XSRF. Cookies the server
// sets are sent back (one stable identity).
func TestXSRFAndCookies(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		cookie, _ := r.Cookie("_xsrf")
		user, _ := r.Cookie("user")
		var cv, uv string
		if cookie != nil {
			cv = cookie.Value
		}
		if user != nil {
			uv = user.Value
		}
		mu.Lock()
		seen = append(seen, r.Method+" xsrf-header="+r.Header.Get("X-XSRFToken")+" xsrf-cookie="+cv+" user="+uv+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Method != http.MethodGet && cv == "" {
			w.WriteHeader(403)
			_, _ = io.WriteString(w, "<html><title>403: Forbidden</title><body>'_xsrf' argument missing from POST</body></html>")
			return
		}
		if r.Method != http.MethodGet && r.Header.Get("X-XSRFToken") != cv && r.Header.Get("Authorization") == "" {
			w.WriteHeader(403)
			_, _ = io.WriteString(w, `{"message": "XSRF cookie does not match POST argument"}`)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "user", Value: "u1", Path: "/"})
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	})
	t.Run("no token", func(t *testing.T) {
		seen = nil
		c := tokenClient(t, f.URL+"/base/", "")
		if err := c.Status(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.InterruptKernel(context.Background(), "k1"); err != nil {
			t.Fatalf("POST without a token: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		post := seen[1]
		if !strings.HasPrefix(post, "POST xsrf-header=") || !strings.Contains(post, "user=u1") || !strings.HasSuffix(post, "auth=") {
			t.Errorf("POST sent %q", post)
		}
		h := strings.TrimPrefix(strings.Fields(post)[1], "xsrf-header=")
		if h == "" || !strings.Contains(post, "xsrf-cookie="+h) {
			t.Errorf("XSRF header and cookie differ: %q", post)
		}
	})
	t.Run("token", func(t *testing.T) {
		seen = nil
		c := tokenClient(t, f.URL, testToken)
		err := c.InterruptKernel(context.Background(), "k1")
		var api *APIError
		if !errors.As(err, &api) || api.Status != 403 || strings.Contains(err.Error(), "<") {
			t.Fatalf("err = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[0] != "POST xsrf-header= xsrf-cookie= user= auth=token "+testToken {
			t.Errorf("POST sent %q", seen[0])
		}
	})
}

// WhoIs asks with the other token, without the sidecar's cookies or token, and never reports
// either token in an error.
func TestWhoIs(t *testing.T) {
	const other = "caller-token-77aa"
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token "+other || len(r.Cookies()) != 0 {
			w.WriteHeader(401)
			_, _ = io.WriteString(w, `{"message": "refused `+r.Header.Get("Authorization")+`"}`)
			return
		}
		if r.URL.Query().Get("permissions") != `{"contents":["read"]}` {
			w.WriteHeader(400)
			return
		}
		_, _ = io.WriteString(w, `{"identity": {"username": "bob"}, "permissions": {"contents": ["read"]}}`)
	})
	c := tokenClient(t, f.URL, testToken)
	id, perms, err := c.WhoIs(context.Background(), other, map[string][]string{"contents": {"read"}})
	if err != nil || id.Username != "bob" || len(perms["contents"]) != 1 {
		t.Fatalf("WhoIs = %+v %v %v", id, perms, err)
	}
	_, _, err = c.WhoIs(context.Background(), "wrong-token-1234", nil)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 401 || !api.Permanent() {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "wrong-token-1234") || strings.Contains(err.Error(), testToken) {
		t.Errorf("the error carries a token: %v", err)
	}
}

// The default transport dials like the websockets do (quick ACKs on Linux).
func TestDefaultTransportUsesTheQuickAckDialer(t *testing.T) {
	c := tokenClient(t, "http://h/", "")
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok || tr.DialContext == nil {
		t.Fatalf("transport %T without DialContext", c.http.Transport)
	}
	if tr == http.DefaultTransport {
		t.Error("the shared default transport was modified")
	}
}
