package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// Config is everything the binary needs. Precedence: flags, then environment, then defaults.
// Secrets (the Jupyter token, the MCP bearer token) come from the environment or a file, not
// from flag values, which other users can read in `ps`.
type Config struct {
	JupyterURL        string
	JupyterToken      string // secret
	JupyterTimeout    time.Duration
	Engine            jupyter.Engine // EngineAuto: detected from the server
	Listen            string         // empty: stdio
	MCPToken          string         // secret
	InsecureNoAuth    bool
	LogLevel          string
	LogFormat         string
	AgentName         string
	AgentUsername     string
	AgentInitials     string
	AgentColor        string
	NoAutosave        bool
	SaveInterval      time.Duration
	IdleTimeout       time.Duration
	DeadRoomWait      time.Duration
	SessionIdleTTL    time.Duration
	CallTimeout       time.Duration
	AlwaysEmbedSchema bool
	Toolsets          []string // toolsets and tools offered (tools/toolsets.go)
	Apps              tools.AppsMode
	LabURL            string // where the apps link a notebook to; empty: JupyterURL
	NoGlobalAwareness bool
	StateDir          string // "" memory only (resolved: never "auto" or "none" after loadConfig)
	stateDirAuto      bool   // StateDir is the default location (not given): failing to use it is not fatal
	HistoryBudgetMB   int
	MaxResponseTokens int
	Tokenizer         string
	Auth              string // token or jupyter
	AuthCacheTTL      time.Duration
	TLSCert, TLSKey   string
	AllowedHosts      []string
	AllowedOrigins    []string
	PublicURL         string
	RateLimit         float64 // requests per second per caller; 0: off
	RateBurst         int
	MaxConcurrent     int // requests in flight per MCP session
	MaxBodyMB         int
	Metrics           bool
	PprofListen       string // loopback address of the profiling endpoint; empty: none
	ConfigFile        string
	ShowVersion       bool
	tokenFromFlag     bool // --mcp-token was used (warn: visible in ps)
	urlTokenFromFlag  bool // --jupyter-url carried a token (warn: visible in ps)
	jupyterTokenFile  string
	mcpTokenFile      string
	tokensFile        string
	TokenEntries      []auth.TokenEntry // from --tokens-file
}

// option describes one setting: its flag, environment variable, default and help. The table
// drives the flag set, the environment lookup and --help, so they cannot drift apart.
type option struct {
	flag, env, def, help string
	kind                 string // string, bool, duration, int, float, list
	secret               bool
	set                  func(c *Config, v string) error
}

func options() []option {
	str := func(dst func(*Config) *string) func(*Config, string) error {
		return func(c *Config, v string) error { *dst(c) = v; return nil }
	}
	boolean := func(dst func(*Config) *bool) func(*Config, string) error {
		return func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("not a boolean: %q", v)
			}
			*dst(c) = b
			return nil
		}
	}
	duration := func(dst func(*Config) *time.Duration) func(*Config, string) error {
		return func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("not a duration (like 30s, 10m): %q", v)
			}
			*dst(c) = d
			return nil
		}
	}
	integer := func(dst func(*Config) *int) func(*Config, string) error {
		return func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("not a positive integer: %q", v)
			}
			*dst(c) = n
			return nil
		}
	}
	number := func(dst func(*Config) *float64) func(*Config, string) error {
		return func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return fmt.Errorf("not a non-negative number: %q", v)
			}
			*dst(c) = f
			return nil
		}
	}
	list := func(dst func(*Config) *[]string) func(*Config, string) error {
		return func(c *Config, v string) error {
			*dst(c) = nil
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					*dst(c) = append(*dst(c), item)
				}
			}
			return nil
		}
	}
	return []option{
		{"version", "", "false", "print the version and exit", "bool", false, boolean(func(c *Config) *bool { return &c.ShowVersion })},
		{"config", "JCM_CONFIG", "", "YAML or JSON file of options, keyed by flag name (flags and environment override it)", "string", false, str(func(c *Config) *string { return &c.ConfigFile })},
		{"jupyter-url", "JUPYTER_URL", "http://127.0.0.1:8888/", "jupyter-server URL, including any base_url (e.g. https://hub/user/alice/); or the URL JupyterLab printed or shows, with its ?token= (e.g. http://127.0.0.1:8888/lab?token=...)", "string", false, str(func(c *Config) *string { return &c.JupyterURL })},
		{"", "JUPYTER_TOKEN", "", "Jupyter token (environment only; or --jupyter-token-file)", "string", true, str(func(c *Config) *string { return &c.JupyterToken })},
		{"jupyter-token-file", "JUPYTER_TOKEN_FILE", "", "file holding the Jupyter token", "string", false, str(func(c *Config) *string { return &c.jupyterTokenFile })},
		{"jupyter-timeout", "JUPYTER_TIMEOUT", "30s", "timeout of each jupyter-server request", "duration", false, duration(func(c *Config) *time.Duration { return &c.JupyterTimeout })},
		{"engine", "JUPYTER_ENGINE", "auto", "the server's collaboration engine: auto (ask the server on first use), collaboration (jupyter-collaboration 4.4/5.0) or documents (jupyter-server-documents 0.3); see docs/engines.md", "string", false, func(c *Config, v string) error {
			e, err := jupyter.ParseEngine(v)
			c.Engine = e
			return err
		}},
		{"listen", "MCP_LISTEN", "", "serve MCP over Streamable HTTP on this address (path /mcp); empty: stdio", "string", false, str(func(c *Config) *string { return &c.Listen })},
		{"", "MCP_TOKEN", "", "bearer token required on the HTTP endpoint (environment only; or --mcp-token-file)", "string", true, str(func(c *Config) *string { return &c.MCPToken })},
		{"mcp-token-file", "MCP_TOKEN_FILE", "", "file holding the MCP bearer token", "string", false, str(func(c *Config) *string { return &c.mcpTokenFile })},
		{"tokens-file", "MCP_TOKENS_FILE", "", "JSON file of scoped tokens: [{name, token_sha256, scopes: [read|write|execute|admin], paths: [globs]}]", "string", false, str(func(c *Config) *string { return &c.tokensFile })},
		{"mcp-token", "", "", "MCP bearer token (discouraged: flag values are visible in ps; prefer MCP_TOKEN)", "string", true, func(c *Config, v string) error { c.MCPToken = v; c.tokenFromFlag = true; return nil }},
		{"insecure-no-auth", "MCP_INSECURE_NO_AUTH", "false", "serve HTTP without a bearer token (only allowed on a loopback address)", "bool", false, boolean(func(c *Config) *bool { return &c.InsecureNoAuth })},
		{"auth", "MCP_AUTH", "token", "how HTTP callers authenticate: token (MCP_TOKEN / --tokens-file) or jupyter (the bearer is a Jupyter token, checked with jupyter-server's GET /api/me; scopes from its authorizer)", "string", false, str(func(c *Config) *string { return &c.Auth })},
		{"auth-cache-ttl", "MCP_AUTH_CACHE_TTL", "30s", "with --auth jupyter: how long jupyter-server's answer about a token is reused", "duration", false, duration(func(c *Config) *time.Duration { return &c.AuthCacheTTL })},
		{"tls-cert", "MCP_TLS_CERT", "", "certificate file (PEM) to serve HTTPS; with --tls-key", "string", false, str(func(c *Config) *string { return &c.TLSCert })},
		{"tls-key", "MCP_TLS_KEY", "", "private key file (PEM) to serve HTTPS; with --tls-cert", "string", false, str(func(c *Config) *string { return &c.TLSKey })},
		{"allowed-hosts", "MCP_ALLOWED_HOSTS", "", "comma-separated Host names the HTTP endpoint answers to (DNS-rebinding protection; *.domain allowed); default on a loopback address: localhost, 127.0.0.1, ::1; otherwise any", "list", false, list(func(c *Config) *[]string { return &c.AllowedHosts })},
		{"allowed-origins", "MCP_ALLOWED_ORIGINS", "", "comma-separated browser Origins allowed besides the endpoint's own (requests with another Origin get 403)", "list", false, list(func(c *Config) *[]string { return &c.AllowedOrigins })},
		{"public-url", "MCP_PUBLIC_URL", "", "the endpoint's public base URL behind a proxy (for OAuth protected-resource metadata); default: from each request", "string", false, str(func(c *Config) *string { return &c.PublicURL })},
		{"rate-limit", "MCP_RATE_LIMIT", "50", "HTTP requests per second per token (429 with Retry-After beyond); 0: no limit", "float", false, number(func(c *Config) *float64 { return &c.RateLimit })},
		{"rate-burst", "MCP_RATE_BURST", "100", "requests a token may make at once before --rate-limit applies", "int", false, integer(func(c *Config) *int { return &c.RateBurst })},
		{"max-concurrent", "MCP_MAX_CONCURRENT", "8", "requests one MCP session may have in flight (429 beyond)", "int", false, integer(func(c *Config) *int { return &c.MaxConcurrent })},
		{"max-body-mb", "MCP_MAX_BODY_MB", "16", "largest HTTP request body in MiB (413 beyond)", "int", false, integer(func(c *Config) *int { return &c.MaxBodyMB })},
		{"metrics", "MCP_METRICS", "true", "serve Prometheus metrics on /metrics (behind the same authentication as /mcp)", "bool", false, boolean(func(c *Config) *bool { return &c.Metrics })},
		{"pprof-listen", "PPROF_LISTEN", "", "serve Go's profiler (net/http/pprof, /debug/pprof/) on this loopback address, without authentication (e.g. 127.0.0.1:6060); empty: off", "string", false, str(func(c *Config) *string { return &c.PprofListen })},
		{"log-level", "LOG_LEVEL", "info", "debug, info, warn or error", "string", false, str(func(c *Config) *string { return &c.LogLevel })},
		{"log-format", "LOG_FORMAT", "auto", "json, console, or auto (console when stderr is a terminal)", "string", false, str(func(c *Config) *string { return &c.LogFormat })},
		{"agent-name", "AGENT_NAME", "AI Agent", "name collaborators see for the agent", "string", false, str(func(c *Config) *string { return &c.AgentName })},
		{"agent-username", "AGENT_USERNAME", "jupyter-collab-mcp", "awareness username (distinct from the humans')", "string", false, str(func(c *Config) *string { return &c.AgentUsername })},
		{"agent-initials", "AGENT_INITIALS", "AI", "initials shown in JupyterLab's collaborator list", "string", false, str(func(c *Config) *string { return &c.AgentInitials })},
		{"agent-color", "AGENT_COLOR", "#7c3aed", "cursor and avatar colour", "string", false, str(func(c *Config) *string { return &c.AgentColor })},
		{"no-global-awareness", "NO_GLOBAL_AWARENESS", "false", "do not join JupyterLab's global awareness room (the agent then does not appear in the collaborators panel)", "bool", false, boolean(func(c *Config) *bool { return &c.NoGlobalAwareness })},
		{"no-autosave", "NO_AUTOSAVE", "false", "do not ask the server to autosave (by default the agent asks, so edits reach the file)", "bool", false, boolean(func(c *Config) *bool { return &c.NoAutosave })},
		{"save-interval", "SAVE_INTERVAL", "60s", "how far the file on disk may lag behind a document that never pauses (jupyter-server saves by itself a second after the last change; the sidecar asks for a save when that did not happen, spaced by five times what a save takes; the write-ahead log, not the file, keeps changes safe); 0: leave saving to the server", "duration", false, func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("not a duration of 0 or more (like 60s; 0 turns the sidecar's save requests off): %q", v)
			}
			c.SaveInterval = d
			return nil
		}},
		{"idle-timeout", "ROOM_IDLE_TIMEOUT", "10m", "leave rooms nobody used for this long", "duration", false, duration(func(c *Config) *time.Duration { return &c.IdleTimeout })},
		{"dead-room-wait", "DEAD_ROOM_WAIT", "6m", "on jupyter-server-documents, stay away this long from a room that stopped answering, so the server frees it and loads it afresh (its defaults free a room 60s after its last activity, at a pass every 300s)", "duration", false, duration(func(c *Config) *time.Duration { return &c.DeadRoomWait })},
		{"session-idle-ttl", "MCP_SESSION_IDLE_TTL", "30m", "free HTTP MCP sessions idle for this long", "duration", false, duration(func(c *Config) *time.Duration { return &c.SessionIdleTTL })},
		{"call-timeout", "MCP_CALL_TIMEOUT", "2m", "upper bound of one tool call", "duration", false, duration(func(c *Config) *time.Duration { return &c.CallTimeout })},
		{"state-dir", "STATE_DIR", "auto", "directory for state that survives restarts, per jupyter-server: the write-ahead log of the open documents (journal/) and their histories (history/); auto: $XDG_STATE_HOME/jupyter-collab-mcp, else ~/.local/state/jupyter-collab-mcp; none: memory only (the log is then kept in memory and lost with the process)", "string", false, str(func(c *Config) *string { return &c.StateDir })},
		{"history-budget-mb", "HISTORY_BUDGET_MB", "32", "megabytes of restorable versions kept per document", "int", false, integer(func(c *Config) *int { return &c.HistoryBudgetMB })},
		{"max-response-tokens", "MAX_RESPONSE_TOKENS", strconv.Itoa(tools.DefaultMaxResponseTokens), "default max_tokens of content tools and the cap of resources (some clients reject results over 25000 tokens)", "int", false, integer(func(c *Config) *int { return &c.MaxResponseTokens })},
		{"tokenizer", "TOKENIZER", "o200k_base", "token encoding for counts and budgets: o200k_base or cl100k_base (both compiled in)", "string", false, str(func(c *Config) *string { return &c.Tokenizer })},
		{"toolsets", "MCP_TOOLSETS", "default", "the tools sessions are offered, comma-separated: toolsets (" + strings.Join(tools.ToolsetNames(), ", ") + "; default is the daily loop, all every tool) and tool names; over HTTP a request may choose its own (" + tools.ToolsetHeader + " header or ?" + tools.ToolsetQuery + "=)", "list", false, list(func(c *Config) *[]string { return &c.Toolsets })},
		{"apps", "MCP_APPS", "auto", "MCP Apps (docs/apps.md): the outputs, live-notebook and suggestion views a chat host shows beside the tools' results. auto: for sessions whose client announces them; always: for every session; off: none (no ui:// resources, no _meta.ui, no app-only tools)", "string", false, func(c *Config, v string) error {
			m, err := tools.ParseAppsMode(v)
			c.Apps = m
			return err
		}},
		{"lab-url", "LAB_URL", "", "the jupyter-server's address as people open it in a browser (e.g. https://hub.example.org/user/alice/), for the apps' \"Open in JupyterLab\"; default: --jupyter-url without its token", "string", false, str(func(c *Config) *string { return &c.LabURL })},
		{"always-embed-schema", "ALWAYS_EMBED_SCHEMA", "false", "embed each tool's input schema in every result (by default only in failures and when a call passes includeSchema)", "bool", false, boolean(func(c *Config) *bool { return &c.AlwaysEmbedSchema })},
	}
}

// errHelp is returned for -h/--help after the usage was printed.
var errHelp = errors.New("help requested")

// loadConfig builds the configuration from args and the environment. It is pure apart from
// readFile, so precedence is table-testable.
func loadConfig(args []string, getenv func(string) string, readFile func(string) ([]byte, error), usageOut io.Writer) (Config, error) {
	var c Config
	opts := options()
	fileVals, err := readConfigFile(args, getenv, readFile, opts)
	if err != nil {
		return c, err
	}
	// defaults, then the config file, then environment
	for _, o := range opts {
		v, src := o.def, "default of --"+o.flag
		if fv, ok := fileVals[o.flag]; ok && o.flag != "" {
			v, src = fv, "config file: "+o.flag
		}
		if o.env != "" {
			if e := getenv(o.env); e != "" {
				v, src = e, o.env
			}
		}
		if v == "" && o.kind == "string" {
			continue
		}
		if err := o.set(&c, v); err != nil {
			return c, fmt.Errorf("%s: %w", src, err)
		}
	}
	// flags override
	fs := flag.NewFlagSet("jupyter-collab-mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagVals := map[string]*string{}
	for _, o := range opts {
		if o.flag == "" {
			continue
		}
		if o.kind == "bool" {
			flagVals[o.flag] = new(string)
			p := flagVals[o.flag]
			fs.BoolFunc(o.flag, o.help, func(v string) error { *p = v; return nil })
			continue
		}
		flagVals[o.flag] = fs.String(o.flag, "\x00", o.help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(usageOut)
			return c, errHelp
		}
		return c, fmt.Errorf("%w (see --help)", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	for _, o := range opts {
		if o.flag == "" {
			continue
		}
		v := *flagVals[o.flag]
		if v == "\x00" || (o.kind == "bool" && v == "") {
			continue
		}
		if err := o.set(&c, v); err != nil {
			return c, fmt.Errorf("--%s: %w", o.flag, err)
		}
		if o.flag == "jupyter-url" {
			c.urlTokenFromFlag = urlHasToken(v)
		}
	}
	if c.tokensFile != "" {
		b, err := readFile(c.tokensFile)
		if err != nil {
			return c, fmt.Errorf("read tokens file: %w", err)
		}
		if c.TokenEntries, err = auth.ParseTokens(b); err != nil {
			return c, err
		}
	}
	// secrets from files
	for _, f := range []struct {
		path string
		dst  *string
		name string
	}{{c.jupyterTokenFile, &c.JupyterToken, "Jupyter token"}, {c.mcpTokenFile, &c.MCPToken, "MCP token"}} {
		if f.path == "" {
			continue
		}
		b, err := readFile(f.path)
		if err != nil {
			return c, fmt.Errorf("read %s file: %w", f.name, err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	if c.ShowVersion {
		return c, nil
	}
	c.resolveStateDir(getenv)
	if err := c.splitJupyterURL(); err != nil {
		return c, err
	}
	return c, c.validate()
}

// uiSegments are the first path segments of JupyterLab's and Notebook's pages (and the login
// page) under a server's base URL: /lab, /lab/tree/x.ipynb, /doc/tree/x.ipynb, /tree,
// /notebooks/x.ipynb, /edit/x.txt, ...
var uiSegments = map[string]bool{"lab": true, "doc": true, "tree": true, "notebooks": true, "edit": true,
	"consoles": true, "terminals": true, "files": true, "view": true, "voila": true, "login": true}

// splitJupyterURL turns JupyterURL into the server's base URL, taking the token it may carry:
// the URL a person has in hand is the one JupyterLab printed or shows
// (http://127.0.0.1:8888/lab/tree/x.ipynb?token=…, /user/alice/lab?token=… under JupyterHub,
// /tree?token=…, /notebooks/x.ipynb?token=…). The path is cut before its first page segment
// (after /user/<name>/ and a named server under JupyterHub); a URL ending in "/" without a token
// is a base URL and kept as it is. A token given both in the URL and as JUPYTER_TOKEN (or its
// file) must be the same. No error quotes the URL or a token.
func (c *Config) splitJupyterURL() error {
	if c.JupyterURL == "" {
		return nil
	}
	u, err := url.Parse(c.JupyterURL)
	if err != nil {
		return errors.New("JUPYTER_URL / --jupyter-url does not parse as a URL (expected e.g. http://127.0.0.1:8888/ or the URL JupyterLab printed)")
	}
	q := u.Query()
	token := ""
	for _, t := range q["token"] {
		if t == "" {
			continue
		}
		if token != "" && t != token {
			return errors.New("JUPYTER_URL carries two different tokens")
		}
		token = t
	}
	if token == "" && strings.HasSuffix(u.Path, "/") {
		return nil // a base URL, as before: /lab/ may be a base_url
	}
	segments := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	cut := len(segments)
scan:
	for i := 0; i < len(segments); i++ {
		switch {
		case segments[i] == "user" && i+1 < len(segments):
			i++ // JupyterHub's /user/<name>/: the name may be anything, "lab" included
		case segments[i] == "hub":
			return errors.New("JUPYTER_URL is a JupyterHub hub page (/hub/...): give your server's URL instead (…/user/<name>/, as the browser shows once the server runs)")
		case uiSegments[segments[i]]:
			cut = i
			break scan
		}
	}
	base := "/"
	if cut > 0 && segments[0] != "" {
		base = "/" + strings.Join(segments[:cut], "/") + "/"
	}
	path, err := url.PathUnescape(base)
	if err != nil {
		return errors.New("JUPYTER_URL: the path has a bad escape")
	}
	// RawPath keeps the server's escapes (tornado routes on the escaped path).
	u.Path, u.RawPath, u.RawQuery, u.Fragment, u.RawFragment = path, base, "", "", ""
	c.JupyterURL = u.String()
	switch {
	case token == "":
	case c.JupyterToken == "":
		c.JupyterToken = token
	case c.JupyterToken != token:
		return errors.New("JUPYTER_URL carries a token that differs from JUPYTER_TOKEN (or --jupyter-token-file): give it once, or make them agree")
	}
	return nil
}

// resolveStateDir turns the state directory's special values into a path: auto is the user's
// state directory ($XDG_STATE_HOME, else ~/.local/state, as the XDG base directory
// specification says), none is memory only. Without either variable auto is memory only too.
func (c *Config) resolveStateDir(getenv func(string) string) {
	switch c.StateDir {
	case "none":
		c.StateDir = ""
	case "auto", "":
		c.stateDirAuto = true
		c.StateDir = ""
		if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
			c.StateDir = filepath.Join(x, "jupyter-collab-mcp")
		} else if h := getenv("HOME"); filepath.IsAbs(h) {
			c.StateDir = filepath.Join(h, ".local", "state", "jupyter-collab-mcp")
		}
	}
}

// urlHasToken reports whether a URL carries a ?token= query.
func urlHasToken(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Query().Get("token") != ""
}

// readConfigFile reads the optional config file named by --config (looked up in args before
// flags are parsed, since its values sit below them) or JCM_CONFIG. Keys are flag names; values
// are strings, numbers, booleans or (for lists) arrays. Unknown keys are errors: a typo must not
// silently leave a setting at its default.
func readConfigFile(args []string, getenv func(string) string, readFile func(string) ([]byte, error), opts []option) (map[string]string, error) {
	path := getenv("JCM_CONFIG")
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, errors.New("--config: a file name is required")
			}
			val = args[i+1]
		}
		path = val
	}
	if path == "" {
		return nil, nil
	}
	b, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	known := map[string]option{}
	for _, o := range opts {
		if o.flag != "" && o.flag != "config" && !o.secret {
			known[o.flag] = o
		}
	}
	out := map[string]string{}
	for k, v := range raw {
		o, ok := known[k]
		if !ok {
			return nil, fmt.Errorf("config file %s: unknown option %q (keys are flag names, see --help; tokens belong in the environment or a token file)", path, k)
		}
		switch v := v.(type) {
		case []any:
			if o.kind != "list" {
				return nil, fmt.Errorf("config file %s: %s takes one value, not a list", path, k)
			}
			parts := make([]string, 0, len(v))
			for _, item := range v {
				parts = append(parts, fmt.Sprint(item))
			}
			out[k] = strings.Join(parts, ",")
		case map[string]any:
			return nil, fmt.Errorf("config file %s: %s takes a value, not a mapping", path, k)
		case nil:
		default:
			out[k] = fmt.Sprint(v)
			if k == "jupyter-url" && urlHasToken(out[k]) {
				return nil, fmt.Errorf("config file %s: jupyter-url carries a token; tokens belong in the environment (JUPYTER_URL or JUPYTER_TOKEN) or a token file", path)
			}
		}
	}
	return out, nil
}

func (c Config) validate() error {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log level %q: must be debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "console", "auto":
	default:
		return fmt.Errorf("log format %q: must be json, console or auto", c.LogFormat)
	}
	if c.JupyterURL == "" {
		return errors.New("JUPYTER_URL / --jupyter-url is required")
	}
	if c.MaxResponseTokens < 1000 || c.MaxResponseTokens > 1000000 {
		return fmt.Errorf("--max-response-tokens %d: must be from 1000 to 1000000", c.MaxResponseTokens)
	}
	switch c.Tokenizer {
	case "o200k_base", "cl100k_base":
	default:
		return fmt.Errorf("--tokenizer %q: must be o200k_base or cl100k_base", c.Tokenizer)
	}
	switch c.Auth {
	case "token", "jupyter":
	default:
		return fmt.Errorf("--auth %q: must be token or jupyter", c.Auth)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey); err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	if c.PprofListen != "" {
		host, _, err := net.SplitHostPort(c.PprofListen)
		if err != nil {
			return fmt.Errorf("--pprof-listen %q: %w", c.PprofListen, err)
		}
		if !isLoopback(host) {
			return fmt.Errorf("--pprof-listen is unauthenticated and only allowed on a loopback address, not %q", host)
		}
	}
	if c.LabURL != "" {
		u, err := url.Parse(c.LabURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
			return errors.New("--lab-url: must be an http(s) URL without a query or credentials (people sign in to JupyterLab themselves)")
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--public-url %q: must be an http(s) URL", c.PublicURL)
		}
	}
	if c.Listen == "" {
		if c.Auth == "jupyter" {
			return errors.New("--auth jupyter authenticates HTTP callers: it needs --listen")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if c.Auth == "jupyter" {
		if c.InsecureNoAuth || c.MCPToken != "" || len(c.TokenEntries) > 0 {
			return errors.New("--auth jupyter contradicts --insecure-no-auth, MCP_TOKEN and --tokens-file: choose one")
		}
		return nil
	}
	if c.InsecureNoAuth {
		if c.MCPToken != "" || len(c.TokenEntries) > 0 {
			return errors.New("--insecure-no-auth contradicts MCP_TOKEN / --tokens-file: choose one")
		}
		if !isLoopback(host) {
			return fmt.Errorf("--insecure-no-auth is only allowed on a loopback address, not %q", host)
		}
		return nil
	}
	if c.MCPToken == "" && len(c.TokenEntries) > 0 {
		return nil
	}
	if c.MCPToken == "" {
		return errors.New("the HTTP endpoint needs a bearer token: set MCP_TOKEN (or --mcp-token-file, or --tokens-file), or run with --insecure-no-auth on a loopback address")
	}
	if len(c.MCPToken) < 16 {
		return errors.New("MCP_TOKEN must be at least 16 characters")
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, `jupyter-collab-mcp: an MCP server that works on live Jupyter notebooks as a real-time collaborator.

Usage: jupyter-collab-mcp [flags]

Without --listen it serves MCP over stdio (for clients that start it); with --listen it serves
Streamable HTTP on /mcp and requires a bearer token.

Options (flag / environment variable / default):`)
	for _, o := range options() {
		name := "(environment only)"
		if o.flag != "" {
			name = "--" + o.flag
		}
		env := o.env
		if env == "" {
			env = "-"
		}
		def := o.def
		if def == "" || o.secret {
			def = "-"
		}
		fmt.Fprintf(w, "  %-22s %-22s default %s\n      %s\n", name, env, def, o.help)
	}
}

// stderrIsTerminal reports whether stderr is a character device (for console logs).
func stderrIsTerminal() bool {
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
