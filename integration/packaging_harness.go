package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// StartJupyterWithBaseURL starts jupyter-server like StartJupyter, but under a base_url, as
// JupyterHub runs single-user servers (/user/<name>/). The returned server's URL includes the
// base_url (http://127.0.0.1:PORT/user/alice/), which is also where readiness is polled.
func StartJupyterWithBaseURL(ctx context.Context, opts ServerOptions, baseURL string) (*JupyterServer, error) {
	if !strings.HasPrefix(baseURL, "/") || !strings.HasSuffix(baseURL, "/") {
		return nil, fmt.Errorf("integration: base_url %q must start and end with /", baseURL)
	}
	var err error
	if opts.Root == "" {
		if opts.Root, err = os.MkdirTemp("", "jcm-root-"); err != nil {
			return nil, err
		}
	}
	if opts.StateDir == "" {
		if opts.StateDir, err = os.MkdirTemp("", "jcm-state-"); err != nil {
			return nil, err
		}
	}
	for _, dir := range []string{opts.Root, opts.StateDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if opts.Token == "" {
		opts.Token = RandomToken()
	}
	if opts.Port == 0 {
		if opts.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	opts.ExtraArgs = append([]string{"--ServerApp.base_url=" + baseURL}, opts.ExtraArgs...)
	s := &JupyterServer{
		URL:   fmt.Sprintf("http://127.0.0.1:%d%s", opts.Port, baseURL),
		Token: opts.Token,
		Root:  opts.Root,
		Port:  opts.Port,
		opts:  opts,
		log:   &lockedBuffer{},
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
