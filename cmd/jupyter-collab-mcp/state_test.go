package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// --state-dir is on by default, in the user's state directory; none turns it off; a path is
// taken as given.
func TestStateDirDefault(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string {
			if k == "JUPYTER_URL" {
				return "http://127.0.0.1:8888/"
			}
			return kv[k]
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
		auto bool
	}{
		{"XDG_STATE_HOME", nil, map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "/x/state/jupyter-collab-mcp", true},
		{"HOME", nil, map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/jupyter-collab-mcp", true},
		{"relative XDG ignored", nil, map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/home/u"}, "/home/u/.local/state/jupyter-collab-mcp", true},
		{"no home", nil, nil, "", true},
		{"none", []string{"--state-dir", "none"}, map[string]string{"HOME": "/home/u"}, "", false},
		{"none from the environment", nil, map[string]string{"HOME": "/home/u", "STATE_DIR": "none"}, "", false},
		{"explicit", []string{"--state-dir", "/data/jcm"}, map[string]string{"HOME": "/home/u"}, "/data/jcm", false},
	} {
		c, err := loadConfig(tc.args, env(tc.env), os.ReadFile, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.StateDir != tc.want || c.stateDirAuto != tc.auto {
			t.Errorf("%s: state dir %q (auto %v), want %q (auto %v)", tc.name, c.StateDir, c.stateDirAuto, tc.want, tc.auto)
		}
	}
}

// Two jupyter-servers never share a directory: another port, host or base URL is another key.
func TestServerKeysDiffer(t *testing.T) {
	urls := []string{"http://127.0.0.1:8888/", "http://127.0.0.1:8889/", "http://localhost:8888/", "http://127.0.0.1:8888/user/alice/", "http://127.0.0.1:8888/user/bob/"}
	seen := map[string]string{}
	for _, u := range urls {
		k := serverKey(u)
		if strings.ContainsAny(k, "/:") {
			t.Errorf("key %q of %s is not a plain file name", k, u)
		}
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s share the key %s", u, other, k)
		}
		seen[k] = u
	}
	if serverKey("http://127.0.0.1:8888/") != serverKey("http://127.0.0.1:8888") {
		t.Error("a trailing slash makes another server")
	}
}

// The state directory gets the server's subdirectory with a note and the journal; an explicit
// one that cannot be used is an error, the default one falls back to memory.
func TestOpenState(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{StateDir: dir, JupyterURL: "http://127.0.0.1:8888/"}
	st, err := openState(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	st.close()
	note, err := os.ReadFile(filepath.Join(st.dir, "server.txt"))
	if err != nil || !strings.Contains(string(note), "http://127.0.0.1:8888/") || filepath.Dir(st.dir) != dir {
		t.Fatalf("server dir %s, note %q, %v", st.dir, note, err)
	}
	if fi, err := os.Stat(filepath.Join(st.dir, "journal")); err != nil || !fi.IsDir() {
		t.Errorf("no journal directory: %v", err)
	}
	blocked := filepath.Join(dir, "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = blocked
	if _, err := openState(cfg, zerolog.Nop()); err == nil {
		t.Error("an explicit state directory that cannot be created was accepted")
	}
	cfg.stateDirAuto = true
	st, err = openState(cfg, zerolog.Nop())
	if err != nil || st.dir != "" || st.journal.Durable() {
		t.Errorf("default location unusable: dir %q, err %v", st.dir, err)
	}
	st.close()
}
