package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
)

// Options configure the MCP server.
type Options struct {
	Manager *bridge.Manager
	// Executor runs cells; nil leaves the execution tools out.
	Executor execution.Executor
	Logger   zerolog.Logger
	Version  string
	// CallTimeout bounds one tool call (default 2 min).
	CallTimeout time.Duration
	// AlwaysEmbedSchema embeds each tool's schema in every result, not only in failures and
	// when the call asks with includeSchema.
	AlwaysEmbedSchema bool
	// AgentName is the agent's name in awareness (for reporting how it is shown).
	AgentName string
	// Tokenizer is the encoding token counts and budgets use: o200k_base (default) or
	// cl100k_base.
	Tokenizer string
	// MaxResponseTokens is the default max_tokens of content tools (20,000).
	MaxResponseTokens int
	// Metrics, when set, receives the Prometheus series of tool calls, tokens and rooms.
	Metrics prometheus.Registerer
	// Toolsets chooses the tools sessions are offered (toolsets.go): set names, tool names,
	// "default" and "all", comma-separated; empty is the default set. Over HTTP a request may
	// choose its own (X-MCP-Toolsets, ?toolsets=).
	Toolsets []string
	// Apps says which sessions get the MCP Apps (apps.go); the zero value is none.
	Apps AppsMode
	// LabURL is the jupyter-server's address as people open it (its base URL, no token): the
	// apps link a notebook to <LabURL>/lab/tree/<path>. Empty: no link.
	LabURL string
}

// Server is the MCP server. Tool handlers are goroutine-safe: they only touch bridge, whose
// rooms serialise access to their replicas.
type Server struct {
	opts      Options
	log       zerolog.Logger
	mcp       *server.MCPServer
	ops       []*operation
	opsByName map[string]*operation
	tokens    *tokenCounter
	stats     *tokenStats
	acct      *accountant     // counts served tokens off the request path (accountant.go)
	current   currentDocs     // per client session: the documents …/current resources show
	subs      *subscriptions  // resource subscriptions (subscriptions.go)
	metrics   *metrics        // nil without Options.Metrics
	events    *eventStore     // what HTTP clients may resume (eventstore.go)
	noticed   noticeSeen      // per client session: the notices its results carried (notices.go)
	uses      roomUses        // which MCP sessions use which rooms (door.go)
	notices   *noticeSessions // who hears log messages (logging.go)
	tasks     *taskTable      // MCP tasks over execution jobs (tasks.go)
	requests  *requestStore   // edits' request ids (idempotent.go)
	scripts   chan struct{}   // a slot per script running (script.go)
	// toolsets is what sessions are offered unless a request chooses; sessionSets the sets
	// sessions turned on since (toolsets.go).
	toolsets    selection
	sessionSets sessionToolsets
}

// New builds the MCP server and registers every tool. It starts nothing.
func New(opts Options) (*Server, error) {
	if opts.Manager == nil {
		return nil, errors.New("tools: a room manager is required")
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Minute
	}
	if opts.AgentName == "" {
		opts.AgentName = bridge.DefaultUser().DisplayName
	}
	if opts.MaxResponseTokens <= 0 {
		opts.MaxResponseTokens = DefaultMaxResponseTokens
	}
	tc, err := newTokenCounter(opts.Tokenizer)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, opsByName: map[string]*operation{}, tokens: tc, stats: newTokenStats(), acct: newAccountant(), subs: newSubscriptions(),
		events: newEventStore(256<<10, 64), notices: newNoticeSessions(), tasks: newTaskTable(), requests: newRequestStore(time.Now),
		scripts: make(chan struct{}, maxScriptsRunning)}
	if opts.Metrics != nil {
		if s.metrics, err = newMetrics(opts.Metrics, opts.Manager, s.events, s.acct.flush); err != nil {
			return nil, fmt.Errorf("tools: register metrics: %w", err)
		}
	}
	hooks := s.hooks()
	s.addNoticeHooks(hooks)
	var taskCaps []server.ServerOption
	if opts.Executor != nil {
		taskCaps = append(taskCaps, server.WithTaskCapabilities(true, true, true)) // advertised only: tasks.go answers
	}
	if opts.Apps != AppsOff {
		taskCaps = append(taskCaps, server.WithExtensions(map[string]any{AppsExtension: map[string]any{}})) // apps.go
	}
	s.mcp = server.NewMCPServer("jupyter-collab-mcp", opts.Version, append([]server.ServerOption{
		server.WithToolCapabilities(true),           // list_changed: enable_toolset changes a session's list
		server.WithResourceCapabilities(true, true), // subscribe; list_changed as rooms open and close
		server.WithPromptCapabilities(false),
		server.WithCompletions(),
		server.WithResourceCompletionProvider(completer{s}),
		server.WithPromptCompletionProvider(completer{s}),
		server.WithHooks(hooks),
		server.WithLogging(), // logging.go
		server.WithRecovery(),
		server.WithResourceRecovery(),
	}, taskCaps...)...)
	s.registerNotebookTools()
	s.registerSearchTools()
	s.registerScriptTools()
	s.registerNotebookEditTools()
	s.registerDocumentTools()
	if opts.Executor != nil {
		s.registerExecutionTools()
		s.offerTasks()
	}
	s.registerAwarenessTools()
	s.registerForkTools()
	s.registerHistoryTools()
	s.registerTokenTools()
	s.registerToolsetTools()
	if opts.Apps != AppsOff {
		if err := s.registerApps(); err != nil {
			return nil, fmt.Errorf("tools: apps: %w", err)
		}
	}
	if s.toolsets, err = parseSelection(opts.Toolsets, s.opsByName); err != nil {
		return nil, fmt.Errorf("tools: toolsets: %w", err)
	}
	server.WithInstructions(s.instructions())(s.mcp) // they name the registered tools
	s.registerStatsResources()
	s.registerOperationResources()
	s.registerContentResources()
	s.registerPrompts()
	return s, nil
}

// MCP returns the underlying mcp-go server (tests, in-process clients).
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// limitBody answers 413 for bodies declared larger than max and cuts off longer ones as they
// are read, so a huge request cannot exhaust memory.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = fmt.Fprintf(w, "{\"error\":\"too_large\",\"message\":\"request body over %d bytes\"}\n", max)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		next.ServeHTTP(w, r)
	})
}

// ServeStdio serves one client over stdin/stdout until ctx ends or input closes.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ss := server.NewStdioServer(s.mcp)
	ss.SetErrorLogger(log.New(s.log.With().Str(logfield.Transport, "stdio").Logger(), "", 0))
	in, out, done := s.frontStdio(ctx, in, out) // tasks and resource error codes (front.go)
	defer done()
	err := ss.Listen(ctx, in, out)
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, io.EOF)) {
		return nil
	}
	return err
}

// HTTPOptions configure the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Protect wraps the MCP handler (authentication, rate and concurrency limits); nil serves it
	// open (cmd allows that only on loopback with an explicit flag).
	Protect func(http.Handler) http.Handler
	// Guard wraps every route (Origin and Host checks); nil: none.
	Guard func(http.Handler) http.Handler
	// Routes are more handlers by path (/metrics, /readyz, metadata), served as given, behind
	// Guard.
	Routes map[string]http.Handler
	// SessionIdleTTL frees sessions of clients that vanish without DELETE (default 30 min).
	SessionIdleTTL time.Duration
	// MaxBodyBytes bounds a request body (default 16 MiB); larger ones get 413.
	MaxBodyBytes int64
}

// HTTPHandler is the Streamable HTTP endpoint: MCP on /mcp, /healthz, and the routes of its
// options, behind their Guard. Whoever serves it owns the http.Server (cmd) and calls Shutdown
// when it stops serving.
type HTTPHandler struct {
	root http.Handler
	mcp  *server.StreamableHTTPServer
}

// HTTPHandler builds the Streamable HTTP endpoint. It starts mcp-go's sweeper of idle
// sessions, which Shutdown stops.
func (s *Server) HTTPHandler(opts HTTPOptions) *HTTPHandler {
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = 30 * time.Minute
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	hlog := s.log.With().Str(logfield.Transport, "http").Logger()
	mcpHTTP := server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithStateful(true),                      // a made-up session id must not run tools
		server.WithEventStore(s.events),                // resumability, bounded per session (eventstore.go)
		server.WithSessionIdleTTL(opts.SessionIdleTTL), // clients that never DELETE
		server.WithStreamableHTTPLogger(slog.New(zerolog.NewSlogHandler(hlog))),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			if id, ok := auth.IdentityFrom(r.Context()); ok { // set by Protect (auth.Middleware)
				ctx = auth.WithIdentity(ctx, id)
			}
			if sel, ok, _ := s.requestToolsets(r); ok { // checked by checkToolsetRequest
				ctx = withRequestToolsets(ctx, sel)
			}
			return ctx
		}),
	)
	var h http.Handler = s.checkToolsetRequest(s.front(mcpHTTP)) // toolsets (toolsets.go); tasks and resource error codes (front.go)
	if opts.Protect != nil {
		h = opts.Protect(h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", limitBody(opts.MaxBodyBytes, h))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	for path, route := range opts.Routes {
		mux.Handle(path, limitBody(opts.MaxBodyBytes, route))
	}
	var root http.Handler = mux
	if opts.Guard != nil {
		root = opts.Guard(root)
	}
	return &HTTPHandler{root: root, mcp: mcpHTTP}
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.root.ServeHTTP(w, r) }

// Shutdown ends the MCP sessions, whose notification streams http.Server.Shutdown would wait
// for to the end of its context, and stops the idle-session sweeper. Call it before the
// http.Server's Shutdown.
func (h *HTTPHandler) Shutdown(ctx context.Context) error { return h.mcp.Shutdown(ctx) }
