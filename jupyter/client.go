// Package jupyter talks to a jupyter-server: REST (identity, contents, collaboration sessions)
// and the collaboration room websocket, authenticated with the Jupyter token.
package jupyter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Options configure a Client.
type Options struct {
	// URL of the server including any base_url, e.g. http://127.0.0.1:8888/ or
	// https://hub.example.org/user/alice/.
	URL string
	// Token is the Jupyter token; empty for servers without token auth (XSRF is then used).
	Token string
	// Timeout bounds each REST call (default 30s). Websocket handshakes use it too.
	Timeout time.Duration
	// Logger receives request logs at debug level; tokens are never logged.
	Logger zerolog.Logger
	// Transport overrides the HTTP transport (tests). The default one dials like the
	// websockets do (see dialTCP).
	Transport http.RoundTripper
	// PingInterval is how often kernel websockets are pinged (15s); at most IdleTimeout/2, so
	// that a live but quiet socket always answers before its read deadline.
	PingInterval time.Duration
}

// Client is a jupyter-server client. It keeps cookies, so the server sees one stable identity
// (token logins are otherwise a new anonymous user on every request).
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	jar     http.CookieJar
	timeout time.Duration
	ping    time.Duration // kernel websocket ping interval
	idle    time.Duration // websocket read deadline (IdleTimeout; shorter in tests)
	log     zerolog.Logger
	xsrf    string
}

// New validates options and creates a client. It does no I/O.
func New(opts Options) (*Client, error) {
	if opts.URL == "" {
		return nil, errors.New("jupyter: server URL is required")
	}
	base, err := url.Parse(opts.URL)
	if err != nil {
		// url.Parse quotes the whole URL in its error, and a URL may carry a token.
		return nil, errors.New("jupyter: the server URL does not parse (expected e.g. http://127.0.0.1:8888/)")
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("jupyter: server URL scheme %q: must be http or https", base.Scheme)
	}
	if base.Host == "" {
		return nil, errors.New("jupyter: server URL has no host")
	}
	if base.User != nil {
		return nil, errors.New("jupyter: server URL must not carry credentials; use the token")
	}
	if q := base.Query(); q.Has("token") {
		return nil, errors.New("jupyter: pass the token separately (JUPYTER_TOKEN), not in the URL")
	}
	base.RawQuery, base.Fragment = "", ""
	if !strings.HasSuffix(base.Path, "/") {
		// Keep the base path as the server spells it: tornado routes on the escaped path, so a
		// hub's /user/a%40b/ is not /user/a@b/.
		raw := base.EscapedPath()
		base.Path += "/"
		base.RawPath = raw + "/"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if err := CheckPingInterval(opts.PingInterval); err != nil {
		return nil, err
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, fmt.Errorf("jupyter: cookie jar: %w", err)
	}
	transport := opts.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = dialTCP
		transport = t
	}
	c := &Client{
		base:    base,
		token:   opts.Token,
		jar:     jar,
		timeout: opts.Timeout,
		ping:    opts.PingInterval,
		idle:    IdleTimeout,
		log:     opts.Logger,
		http: &http.Client{
			Transport: transport,
			Jar:       jar,
			// Redirects could carry the Authorization header elsewhere; the API never redirects.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	if c.token == "" {
		// Token-less servers check XSRF on writes; any matching cookie/header pair passes.
		var b [16]byte
		_, _ = rand.Read(b[:])
		c.xsrf = hex.EncodeToString(b[:])
		c.jar.SetCookies(base, []*http.Cookie{{Name: "_xsrf", Value: c.xsrf, Path: "/"}})
	}
	return c, nil
}

// BaseURL returns the server URL (without token).
func (c *Client) BaseURL() string { return c.base.String() }

// endpoint joins path segments onto the base URL. Segments are unescaped and may contain "/"
// (document paths); each part is escaped.
func (c *Client) endpoint(segments ...string) *url.URL {
	u := *c.base
	p := strings.TrimSuffix(u.Path, "/")
	raw := strings.TrimSuffix(u.EscapedPath(), "/")
	for _, s := range segments {
		for _, part := range strings.Split(s, "/") {
			p += "/" + part
			raw += "/" + url.PathEscape(part)
		}
	}
	u.Path, u.RawPath = p, raw
	return &u
}

func (c *Client) authorize(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "token "+c.token)
	} else if c.xsrf != "" {
		h.Set("X-XSRFToken", c.xsrf)
	}
}

// do performs a JSON request. The error names method, path and status, never the token.
func (c *Client) do(ctx context.Context, method string, u *url.URL, body, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encode body: %w", method, u.Path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	c.authorize(req.Header)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, &RequestError{Method: method, Path: u.Path, Err: scrubURLError(err)}
	}
	defer resp.Body.Close()
	c.log.Debug().Str("method", method).Str("path", u.Path).Int("status", resp.StatusCode).
		Dur("took", time.Since(start)).Msg("jupyter request")
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, &RequestError{Method: method, Path: u.Path, Err: err}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, &APIError{Method: method, Path: u.Path, Status: resp.StatusCode, Message: serverMessage(data, c.token)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode response: %w", method, u.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// maxResponse caps REST response bodies (a notebook fetched through contents can be large).
const maxResponse = 512 << 20

// serverMessage extracts jupyter-server's {"message": ...} or {"reason": ...} from an error body:
// one line of at most 200 characters, never an HTML page (an unknown route, a proxy's error page:
// nothing in it belongs in our errors), with each of secrets (tokens) replaced by "[redacted]".
func serverMessage(b []byte, secrets ...string) string {
	var m struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
	}
	s := ""
	if json.Unmarshal(b, &m) == nil {
		for _, v := range []string{m.Message, m.Reason, m.Error} {
			if v != "" {
				s = v
				break
			}
		}
	}
	if s == "" {
		s = strings.TrimSpace(string(b))
		if strings.HasPrefix(s, "<") {
			return "" // an HTML error page
		}
	}
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	s = strings.Join(strings.Fields(s), " ") // one line
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// scrubURLError drops the URL from *url.Error (it is already in our message and might one day
// carry a query string).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Identity is the user jupyter-server associates with our token (GET /api/me).
type Identity struct {
	Username    string `json:"username"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
	Initials    string `json:"initials"`
	AvatarURL   string `json:"avatar_url"`
	Color       string `json:"color"`
}

// meURL is GET /api/me's URL, asking for permissions (resource → actions) when given.
func (c *Client) meURL(permissions map[string][]string) (*url.URL, error) {
	u := c.endpoint("api", "me")
	if len(permissions) > 0 {
		b, err := json.Marshal(permissions)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", u.Path, err)
		}
		u.RawQuery = url.Values{"permissions": {string(b)}}.Encode()
	}
	return u, nil
}

// Me returns the identity and, when asked, permissions for resource → actions.
func (c *Client) Me(ctx context.Context, permissions map[string][]string) (Identity, map[string][]string, error) {
	u, err := c.meURL(permissions)
	if err != nil {
		return Identity{}, nil, err
	}
	var out struct {
		Identity    Identity            `json:"identity"`
		Permissions map[string][]string `json:"permissions"`
	}
	if _, err := c.do(ctx, http.MethodGet, u, nil, &out); err != nil {
		return Identity{}, nil, err
	}
	return out.Identity, out.Permissions, nil
}

// WhoIs asks the server who another token belongs to (GET /api/me with that token), with the
// answers to a permissions query. It uses no cookies, so the sidecar's own session and the
// caller's never mix. A refused token is an *APIError with Status 401 or 403.
func (c *Client) WhoIs(ctx context.Context, token string, permissions map[string][]string) (Identity, map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u, err := c.meURL(permissions)
	if err != nil {
		return Identity{}, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("GET %s: %w", u.Path, err)
	}
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Transport: c.http.Transport, CheckRedirect: c.http.CheckRedirect}
	resp, err := client.Do(req)
	if err != nil {
		return Identity{}, nil, &RequestError{Method: http.MethodGet, Path: u.Path, Err: scrubURLError(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Identity{}, nil, &RequestError{Method: http.MethodGet, Path: u.Path, Err: err}
	}
	if resp.StatusCode >= 300 {
		return Identity{}, nil, &APIError{Method: http.MethodGet, Path: u.Path, Status: resp.StatusCode, Message: serverMessage(data, token, c.token)}
	}
	var out struct {
		Identity    Identity            `json:"identity"`
		Permissions map[string][]string `json:"permissions"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return Identity{}, nil, fmt.Errorf("GET %s: decode response: %w", u.Path, err)
	}
	return out.Identity, out.Permissions, nil
}

// Status checks the server answers (GET /api/status).
func (c *Client) Status(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, c.endpoint("api", "status"), nil, nil)
	return err
}

// Entry is a contents API model (without content unless requested).
type Entry struct {
	Name         string          `json:"name"`
	Path         string          `json:"path"`
	Type         string          `json:"type"` // directory, notebook, file
	Format       string          `json:"format"`
	Mimetype     string          `json:"mimetype"`
	Size         *int64          `json:"size"`
	Writable     bool            `json:"writable"`
	Created      time.Time       `json:"created"`
	LastModified time.Time       `json:"last_modified"`
	Content      json.RawMessage `json:"content,omitempty"`
	Hash         string          `json:"hash,omitempty"` // with ContentsHashed: the hash jupyter-collaboration publishes after a save
}

// Contents fetches a file or directory model; content=false asks for metadata only (for a
// directory, content=true lists its entries).
func (c *Client) Contents(ctx context.Context, path string, content bool) (Entry, error) {
	u := c.endpoint("api", "contents", strings.Trim(path, "/"))
	q := url.Values{"content": {"0"}}
	if content {
		q.Set("content", "1")
	}
	u.RawQuery = q.Encode()
	var e Entry
	_, err := c.do(ctx, http.MethodGet, u, nil, &e)
	return e, err
}

// ContentsHashed fetches a file's model with its hash (?hash=1, jupyter-server ≥ 2.11: the
// contents manager's hash of the file, the one jupyter-collaboration puts in a room's state after
// saving it) and, when content is true, its content as docType ("notebook" as nbformat JSON,
// "file" as text).
func (c *Client) ContentsHashed(ctx context.Context, path, docType string, content bool) (Entry, error) {
	u := c.endpoint("api", "contents", strings.Trim(path, "/"))
	q := url.Values{"content": {"0"}, "hash": {"1"}}
	if content {
		q.Set("content", "1")
		q.Set("type", docType)
		if docType != "notebook" { // a notebook's only format is JSON, and naming it is refused
			q.Set("format", "text")
		}
	}
	u.RawQuery = q.Encode()
	var e Entry
	_, err := c.do(ctx, http.MethodGet, u, nil, &e)
	if err == nil && e.Hash == "" {
		err = fmt.Errorf("GET %s: the server gave no hash (jupyter-server older than 2.11?)", u.Path)
	}
	return e, err
}

// FileText fetches a file's content as text, whatever its type (for a notebook: its JSON as it is
// on disk, without the server's nbformat upgrade and repairs).
func (c *Client) FileText(ctx context.Context, path string) (string, error) {
	u := c.endpoint("api", "contents", strings.Trim(path, "/"))
	u.RawQuery = url.Values{"content": {"1"}, "type": {"file"}, "format": {"text"}}.Encode()
	var e struct {
		Content *string `json:"content"` // decoded straight into the text: a notebook can be large
	}
	if _, err := c.do(ctx, http.MethodGet, u, nil, &e); err != nil {
		return "", err
	}
	if e.Content == nil {
		return "", fmt.Errorf("GET %s: no text content", u.Path)
	}
	return *e.Content, nil
}

// List returns the entries of a directory.
func (c *Client) List(ctx context.Context, dir string) ([]Entry, error) {
	e, err := c.Contents(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	if e.Type != "directory" {
		return nil, fmt.Errorf("list %q: not a directory (%s)", dir, e.Type)
	}
	var entries []Entry
	if err := json.Unmarshal(e.Content, &entries); err != nil {
		return nil, fmt.Errorf("list %q: decode entries: %w", dir, err)
	}
	return entries, nil
}

// SaveContents writes a file through the contents API. Only for files without a live room (a
// write to a live room's file is an out-of-band change that overwrites unsaved edits).
func (c *Client) SaveContents(ctx context.Context, path, docType, format string, content any) (Entry, error) {
	u := c.endpoint("api", "contents", strings.Trim(path, "/"))
	body := map[string]any{"type": docType}
	if docType != "directory" {
		body["format"], body["content"] = format, content
	}
	var e Entry
	_, err := c.do(ctx, http.MethodPut, u, body, &e)
	return e, err
}

// DocSession is the answer of PUT /api/collaboration/session/{path}.
type DocSession struct {
	Format    string `json:"format"`
	Type      string `json:"type"`
	FileID    string `json:"fileId"`
	SessionID string `json:"sessionId"`
}

// RoomID is the collaboration room id format:type:fileId.
func (s DocSession) RoomID() string { return s.Format + ":" + s.Type + ":" + s.FileID }

// OpenDocSession asks jupyter-collaboration for a document session. format/type are
// json/notebook for notebooks and text/file for text files. (jupyter-server-documents has no
// session API: see IndexFileID.)
func (c *Client) OpenDocSession(ctx context.Context, path, format, docType string) (DocSession, error) {
	u := c.endpoint("api", "collaboration", "session", strings.Trim(path, "/"))
	var s DocSession
	status, err := c.do(ctx, http.MethodPut, u, map[string]string{"format": format, "type": docType}, &s)
	if err != nil {
		var api *APIError
		if errors.As(err, &api) && api.Status == http.StatusNotFound && api.Message == "" {
			api.Message = "no collaboration session API: jupyter-collaboration is not installed or not enabled in this server"
		}
		return DocSession{}, err
	}
	if s.FileID == "" || s.SessionID == "" {
		return DocSession{}, fmt.Errorf("PUT %s: status %d without fileId/sessionId", u.Path, status)
	}
	return s, nil
}
