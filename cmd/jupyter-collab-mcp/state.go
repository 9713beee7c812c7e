package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/journal"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
)

// stateDirs is where this sidecar keeps what survives a restart, and the journal it opened.
type stateDirs struct {
	dir       string // the jupyter-server's directory under --state-dir ("" memory only)
	legacyDir string // --state-dir itself, where histories lived before they were kept per server
	journal   *journal.Store
}

func (s stateDirs) close() { _ = s.journal.Close() }

// openState opens the state directory of the configured jupyter-server (created if missing) and
// its write-ahead log. The default location (--state-dir auto) that cannot be used leaves the
// sidecar with the log in memory and a warning; a location given explicitly must work.
func openState(cfg Config, log zerolog.Logger) (stateDirs, error) {
	opts := journal.Options{Logger: log} // fsync within 100ms (journal.Options.SyncInterval)
	var st stateDirs
	if cfg.StateDir != "" {
		st.dir, st.legacyDir = filepath.Join(cfg.StateDir, serverKey(cfg.JupyterURL)), cfg.StateDir
		opts.Dir = filepath.Join(st.dir, "journal")
		err := writeServerNote(st.dir, cfg.JupyterURL)
		if err == nil {
			st.journal, err = journal.Open(opts)
		}
		switch {
		case err == nil:
			log.Info().Str(logfield.Dir, st.dir).Msg("keeping the write-ahead log and histories on disk")
			return st, nil
		case !cfg.stateDirAuto:
			return st, fmt.Errorf("--state-dir: %w", err)
		}
		log.Warn().Err(err).Str(logfield.Dir, st.dir).Msg("the default state directory cannot be used: the write-ahead log and histories stay in memory (set --state-dir to a writable directory)")
		st.dir, st.legacyDir, opts.Dir = "", "", ""
	} else {
		log.Warn().Msg("no state directory (--state-dir none, or no $HOME): the write-ahead log and histories stay in memory and do not survive a restart of the sidecar")
	}
	j, err := journal.Open(opts)
	if err != nil {
		return st, err
	}
	st.journal = j
	return st, nil
}

// serverKey names a jupyter-server's directory under the state directory, so that two servers
// (two ports, two hosts, two base URLs) never share a document's log or history: the host and
// port, readable, and a hash of the whole base URL.
func serverKey(base string) string {
	u, err := url.Parse(base)
	host := "server"
	if err == nil && u.Host != "" {
		host = u.Host
	}
	sum := sha256.Sum256([]byte(strings.TrimSuffix(base, "/")))
	return unsafeName.ReplaceAllString(host, "_") + "-" + hex.EncodeToString(sum[:4])
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// writeServerNote creates the server's directory with a note saying which server it belongs to
// (the base URL: it never carries the token).
func writeServerNote(dir, base string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	note := fmt.Sprintf("jupyter-server: %s\nfirst used: %s\n", base, time.Now().UTC().Format(time.RFC3339))
	path := filepath.Join(dir, "server.txt")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return os.WriteFile(path, []byte(note), 0o600)
}
