// Command jupyter-collab-mcp runs next to a jupyter-server, joins its collaboration rooms as a
// Yjs peer and serves MCP tools over the live documents. This file only wires: flags and
// environment in, packages connected, signals handled.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/journalstore"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, errHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "jupyter-collab-mcp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, os.ReadFile, stdout)
	if err != nil {
		return err
	}
	if cfg.ShowVersion {
		fmt.Fprintln(stdout, "jupyter-collab-mcp", version)
		return nil
	}
	log := newLogger(cfg, stderr)
	if cfg.tokenFromFlag {
		log.Warn().Msg("--mcp-token is visible to other users in the process list; prefer MCP_TOKEN or --mcp-token-file")
	}
	if cfg.urlTokenFromFlag {
		log.Warn().Msg("the token in --jupyter-url is visible to other users in the process list; prefer JUPYTER_URL or JUPYTER_TOKEN")
	}
	client, err := jupyter.New(jupyter.Options{URL: cfg.JupyterURL, Token: cfg.JupyterToken, Timeout: cfg.JupyterTimeout, Logger: log})
	if err != nil {
		return err
	}
	adapter := jupyterserver.NewWithEngine(client, cfg.Engine)
	checkJupyter(ctx, client, adapter, log)
	state, err := openState(cfg, log)
	if err != nil {
		return err
	}
	defer state.close()

	manager, err := bridge.NewManager(bridge.ManagerOptions{
		Jupyter:         adapter,
		Logger:          log,
		IdleTimeout:     cfg.IdleTimeout,
		GlobalAwareness: !cfg.NoGlobalAwareness,
		Room: bridge.RoomOptions{
			User: ydoc.AwarenessUser{
				Username:    cfg.AgentUsername,
				Name:        cfg.AgentName,
				DisplayName: cfg.AgentName,
				Initials:    cfg.AgentInitials,
				Color:       cfg.AgentColor,
			},
			NoAutosave:       cfg.NoAutosave,
			SaveInterval:     cfg.SaveInterval,
			DeadRoomWait:     cfg.DeadRoomWait,
			HistoryBudget:    cfg.HistoryBudgetMB << 20,
			HistoryDir:       state.dir,
			HistoryLegacyDir: state.legacyDir,
		},
		Journal: journalstore.New(state.journal),
	})
	if err != nil {
		return err
	}
	kernels := jupyterserver.Kernels{C: client, Username: cfg.AgentUsername, Adapter: &adapter}
	clientEngine, err := execution.NewClientEngine(execution.ClientOptions{
		Manager:  manager,
		Kernels:  kernels,
		Logger:   log,
		Username: cfg.AgentUsername,
	})
	if err != nil {
		return err
	}
	serverEngine, err := execution.NewServerEngine(execution.ServerOptions{
		Manager: manager, Kernels: kernels, Logger: log,
	})
	if err != nil {
		return err
	}
	executor := executorFor(adapter, clientEngine, serverEngine)
	registry := prometheus.NewRegistry() // our own: no global registry
	registry.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsGC)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mcpServer, err := tools.New(tools.Options{Manager: manager, Executor: executor, Logger: log, Version: version,
		CallTimeout: cfg.CallTimeout, AlwaysEmbedSchema: cfg.AlwaysEmbedSchema, AgentName: cfg.AgentName,
		MaxResponseTokens: cfg.MaxResponseTokens, Tokenizer: cfg.Tokenizer, Metrics: registry, Toolsets: cfg.Toolsets,
		Apps: cfg.Apps, LabURL: labURL(cfg)})
	if err != nil {
		return err
	}

	// The manager outlives the transport: when the transport ends (stdin closed, signal), the
	// rooms are left politely before the process exits.
	g, gctx := errgroup.WithContext(ctx)
	managerCtx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	managerDone := make(chan struct{})
	go func() {
		defer close(managerDone)
		_ = manager.Run(managerCtx)
	}()
	executorDone := make(chan struct{})
	go func() {
		defer close(executorDone)
		_ = clientEngine.Run(managerCtx)
	}()
	serverExecutorDone := make(chan struct{})
	go func() {
		defer close(serverExecutorDone)
		_ = serverEngine.Run(managerCtx)
	}()
	subsCtx, stopSubs := context.WithCancel(ctx)
	subsDone := make(chan struct{})
	go func() { // resource subscriptions and listed rooms, for as long as the transport serves
		defer close(subsDone)
		_ = mcpServer.Run(subsCtx)
	}()
	pprofCtx, stopPprof := context.WithCancel(ctx)
	pprofDone := make(chan struct{})
	go func() { // the profiler, for as long as the transport serves
		defer close(pprofDone)
		if cfg.PprofListen == "" {
			return
		}
		log.Warn().Str(logfield.Addr, cfg.PprofListen).Msg("serving the Go profiler without authentication (--pprof-listen)")
		if err := servePprof(pprofCtx, cfg.PprofListen); err != nil {
			log.Error().Err(err).Msg("profiler stopped")
		}
	}()
	g.Go(func() error {
		if cfg.Listen == "" {
			log.Info().Str(logfield.Jupyter, client.BaseURL()).Msg("serving MCP over stdio")
			return mcpServer.ServeStdio(gctx, stdin, stdout)
		}
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		opts, err := httpOptions(cfg, client, mcpServer, registry, log)
		if err != nil {
			_ = l.Close()
			return err
		}
		return serveHTTP(gctx, l, mcpServer.HTTPHandler(opts), cfg.TLSCert, cfg.TLSKey, log)
	})
	err = g.Wait()
	stopPprof()
	<-pprofDone
	stopSubs()
	<-subsDone
	clientEngine.Close() // runs end before their rooms close
	serverEngine.Close()
	<-executorDone
	<-serverExecutorDone
	stopManager()
	select {
	case <-managerDone:
	case <-time.After(10 * time.Second):
		log.Warn().Msg("rooms did not close within 10s")
	}
	log.Info().Msg("stopped")
	return err
}

// labURL is where the apps send people to open a notebook: --lab-url, or the jupyter-server's
// base URL (its token already taken out by splitJupyterURL; credentials never go into a link).
func labURL(cfg Config) string {
	if cfg.LabURL != "" {
		return cfg.LabURL
	}
	u, err := url.Parse(cfg.JupyterURL)
	if err != nil || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// executorFor runs cells the way the server's collaboration engine needs: the sidecar is the
// kernel's client on jupyter-collaboration, the server runs them on jupyter-server-documents.
// The engine is asked per call (detected once the server answers).
func executorFor(server jupyterserver.Adapter, client *execution.ClientEngine, srv *execution.ServerEngine) execution.Executor {
	return execution.Switch{
		All: []execution.Executor{client, srv},
		Pick: func(ctx context.Context) (execution.Executor, error) {
			e, err := server.JupyterEngine(ctx)
			if err != nil {
				return nil, err
			}
			if e == jupyter.EngineDocuments {
				return srv, nil
			}
			return client, nil
		},
	}
}

// httpOptions assembles the HTTP endpoint from the configuration: authentication (static
// tokens or Jupyter-delegated), rate and concurrency limits on /mcp, Origin/Host checks on
// every route, metrics, readiness and protected-resource metadata.
func httpOptions(cfg Config, client *jupyter.Client, mcpServer *tools.Server, registry *prometheus.Registry, log zerolog.Logger) (tools.HTTPOptions, error) {
	var authn auth.Authenticator
	switch {
	case cfg.InsecureNoAuth:
		log.Warn().Str(logfield.Addr, cfg.Listen).Msg("HTTP endpoint is open without authentication (--insecure-no-auth, loopback only)")
	case cfg.Auth == "jupyter":
		authn = auth.NewJupyterAuthenticator(jupyterLookup(client), cfg.AuthCacheTTL)
	default:
		var tokens []string
		if cfg.MCPToken != "" {
			tokens = []string{cfg.MCPToken}
		}
		static, err := auth.NewStaticTokens(tokens, cfg.TokenEntries)
		if err != nil {
			return tools.HTTPOptions{}, err
		}
		authn = static
	}
	host, _, _ := net.SplitHostPort(cfg.Listen)
	if cfg.TLSCert == "" && !isLoopback(host) {
		log.Warn().Str(logfield.Addr, cfg.Listen).Msg("serving plain HTTP on a non-loopback address: bearer tokens travel in clear unless a proxy terminates TLS (--tls-cert/--tls-key)")
	}
	authenticate := func(h http.Handler) http.Handler {
		if authn == nil {
			return h
		}
		return auth.Middleware(auth.MiddlewareOptions{
			Authenticator:    authn,
			ResourceMetadata: func(r *http.Request) string { return auth.MetadataURL(cfg.PublicURL, r) },
			OnReject:         mcpServer.CountRejected,
		}, h)
	}
	opts := tools.HTTPOptions{
		SessionIdleTTL: cfg.SessionIdleTTL,
		MaxBodyBytes:   int64(cfg.MaxBodyMB) << 20,
		Routes:         map[string]http.Handler{},
		Protect: func(h http.Handler) http.Handler {
			h = auth.SessionConcurrency(cfg.MaxConcurrent, func() { mcpServer.CountRejected("concurrency") }, h)
			if cfg.RateLimit > 0 {
				h = auth.RateLimit(auth.RateLimitOptions{PerSecond: cfg.RateLimit, Burst: cfg.RateBurst,
					OnLimited: func() { mcpServer.CountRejected("rate_limited") }}, h)
			}
			return authenticate(h)
		},
	}
	hosts := cfg.AllowedHosts
	if len(hosts) == 0 && isLoopback(host) {
		hosts = append(auth.DefaultAllowedHosts(), host)
	}
	opts.Guard = func(h http.Handler) http.Handler {
		return auth.OriginGuard(auth.OriginOptions{AllowedHosts: hosts, AllowedOrigins: cfg.AllowedOrigins, OnReject: mcpServer.CountRejected}, h)
	}
	opts.Routes["/readyz"] = mcpServer.ReadyHandler(client.Status)
	if cfg.Metrics {
		opts.Routes["/metrics"] = authenticate(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	}
	if authn != nil {
		md := auth.MetadataHandler(cfg.PublicURL, nil, "https://github.com/jupyter-collab-mcp/jupyter-collab-mcp/blob/main/docs/security.md#tokens-and-scopes")
		opts.Routes[auth.ProtectedResourceMetadataPath] = md
		opts.Routes[auth.ProtectedResourceMetadataPath+"/"] = md // /…/mcp, and below a public URL's path
	}
	return opts, nil
}

// jupyterLookup asks jupyter-server about a caller's token (--auth jupyter).
func jupyterLookup(client *jupyter.Client) auth.JupyterLookup {
	return func(ctx context.Context, token string) (auth.JupyterUser, error) {
		id, perms, err := client.WhoIs(ctx, token, auth.JupyterPermissionsQuery)
		var apiErr *jupyter.APIError
		if errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden) {
			return auth.JupyterUser{}, auth.ErrInvalidToken
		}
		if err != nil {
			return auth.JupyterUser{}, err
		}
		return auth.JupyterUser{Username: id.Username, Permissions: perms}, nil
	}
}

// checkJupyter reports early whether the server answers and accepts the token. It does not
// fail: in a pod the server may start after the sidecar, and tools report errors per call.
func checkJupyter(ctx context.Context, c *jupyter.Client, s jupyterserver.Adapter, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, _, err := c.Me(ctx, nil)
	if err != nil {
		log.Warn().Err(err).Str(logfield.Jupyter, c.BaseURL()).Msg("jupyter-server is not reachable yet, or refused the token")
		return
	}
	engine, err := s.JupyterEngine(ctx)
	if err != nil {
		// Not fatal: tools report it per call, and the server may get an engine and a restart.
		log.Error().Err(err).Str(logfield.Jupyter, c.BaseURL()).Msg("cannot join collaboration rooms")
		return
	}
	log.Info().Str(logfield.Jupyter, c.BaseURL()).Str(logfield.User, id.Username).Str(logfield.Engine, engine.Package()).Msg("connected to jupyter-server")
}

func newLogger(cfg Config, w io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(cfg.LogLevel)
	if cfg.LogFormat == "console" || (cfg.LogFormat == "auto" && stderrIsTerminal()) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
