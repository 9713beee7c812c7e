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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
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
	log := newLogger(cfg, stderr)
	if cfg.tokenFromFlag {
		log.Warn().Msg("--mcp-token is visible to other users in the process list; prefer MCP_TOKEN or --mcp-token-file")
	}
	client, err := jupyter.New(jupyter.Options{URL: cfg.JupyterURL, Token: cfg.JupyterToken, Timeout: cfg.JupyterTimeout, Logger: log})
	if err != nil {
		return err
	}
	checkJupyter(ctx, client, log)

	manager, err := bridge.NewManager(bridge.ManagerOptions{
		Server:          jupyterserver.New(client),
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
			NoAutosave:    cfg.NoAutosave,
			HistoryBudget: cfg.HistoryBudgetMB << 20,
			HistoryDir:    cfg.StateDir,
		},
	})
	if err != nil {
		return err
	}
	executor, err := bridge.NewExecutor(bridge.ExecutorOptions{
		Manager:  manager,
		Kernels:  jupyterserver.Kernels{C: client, Username: cfg.AgentUsername},
		Logger:   log,
		Username: cfg.AgentUsername,
	})
	if err != nil {
		return err
	}
	mcpServer, err := tools.New(tools.Options{Manager: manager, Executor: executor, Logger: log, Version: version,
		CallTimeout: cfg.CallTimeout, AlwaysEmbedSchema: cfg.AlwaysEmbedSchema, AgentName: cfg.AgentName,
		MaxResponseTokens: cfg.MaxResponseTokens, Tokenizer: cfg.Tokenizer})
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
		_ = executor.Run(managerCtx)
	}()
	subsCtx, stopSubs := context.WithCancel(ctx)
	subsDone := make(chan struct{})
	go func() { // resource subscriptions and listed rooms, for as long as the transport serves
		defer close(subsDone)
		_ = mcpServer.Run(subsCtx)
	}()
	g.Go(func() error {
		if cfg.Listen == "" {
			log.Info().Str("jupyter", client.BaseURL()).Msg("serving MCP over stdio")
			return mcpServer.ServeStdio(gctx, stdin, stdout)
		}
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		var protect func(http.Handler) http.Handler
		if !cfg.InsecureNoAuth {
			protect = func(h http.Handler) http.Handler {
				var tokens []string
				if cfg.MCPToken != "" {
					tokens = []string{cfg.MCPToken}
				}
				p, err := auth.Bearer(auth.BearerOptions{Tokens: tokens, Entries: cfg.TokenEntries}, h)
				if err != nil {
					panic(err) // validated in loadConfig
				}
				return p
			}
		} else {
			log.Warn().Str("addr", cfg.Listen).Msg("HTTP endpoint is open without authentication (--insecure-no-auth, loopback only)")
		}
		return mcpServer.ServeHTTP(gctx, tools.HTTPOptions{Listener: l, Protect: protect, SessionIdleTTL: cfg.SessionIdleTTL})
	})
	err = g.Wait()
	stopSubs()
	<-subsDone
	executor.Close() // runs end before their rooms close
	<-executorDone
	stopManager()
	select {
	case <-managerDone:
	case <-time.After(10 * time.Second):
		log.Warn().Msg("rooms did not close within 10s")
	}
	log.Info().Msg("stopped")
	return err
}

// checkJupyter reports early whether the server answers and accepts the token. It does not
// fail: in a pod the server may start after the sidecar, and tools report errors per call.
func checkJupyter(ctx context.Context, c *jupyter.Client, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, _, err := c.Me(ctx, nil)
	if err != nil {
		log.Warn().Err(err).Str("jupyter", c.BaseURL()).Msg("jupyter-server is not reachable yet, or refused the token")
		return
	}
	log.Info().Str("jupyter", c.BaseURL()).Str("jupyter_user", id.Username).Msg("connected to jupyter-server")
}

func newLogger(cfg Config, w io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(cfg.LogLevel)
	if cfg.LogFormat == "console" || (cfg.LogFormat == "auto" && stderrIsTerminal()) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
