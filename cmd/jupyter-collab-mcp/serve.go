package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// serveHTTP serves the MCP endpoint on l (HTTPS with a certificate and key) until ctx ends,
// then shuts down: the endpoint's MCP sessions first (http.Server.Shutdown waits for no
// notification stream to end), then the server, within 5 s. Requests are not cancelled by the
// end of ctx: they finish or are cut by the shutdown.
func serveHTTP(ctx context.Context, l net.Listener, h *tools.HTTPHandler, certFile, keyFile string, logger zerolog.Logger) error {
	hlog := logger.With().Str(logfield.Transport, "http").Logger()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(hlog, "", 0),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	scheme := "http"
	if certFile != "" {
		scheme = "https"
		go func() { errc <- srv.ServeTLS(l, certFile, keyFile) }()
	} else {
		go func() { errc <- srv.Serve(l) }()
	}
	hlog.Info().Str(logfield.Addr, l.Addr().String()).Str(logfield.Scheme, scheme).Msg("serving MCP over Streamable HTTP on /mcp")
	select {
	case err := <-errc:
		_ = h.Shutdown(context.WithoutCancel(ctx))
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = h.Shutdown(shutdown)
	err := srv.Shutdown(shutdown)
	<-errc
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown http: %w", err)
	}
	return nil
}
