package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

func TestLoadConfig(t *testing.T) {
	files := map[string]string{"/secrets/mcp": "file-token-0123456789\n", "/secrets/jupyter": "jt-from-file\n",
		"/etc/jcm.yaml": "agent-name: Config Agent\nlog-level: warn\nallowed-origins: [https://a.example, https://b.example]\nrate-limit: 2.5\nidle-timeout: 90s\nno-autosave: true\n",
		"/etc/bad.yaml": "agent-nme: typo\n", "/etc/secret.yaml": "mcp-token: inline-secret-0123456789\n", "/etc/list.yaml": "listen: [a, b]\n"}
	readFile := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	const longToken = "0123456789abcdef0123"
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, c Config) {
			if c.JupyterURL != "http://127.0.0.1:8888/" || c.Listen != "" || c.LogLevel != "info" || c.IdleTimeout != 10*time.Minute || c.AgentName != "AI Agent" {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "env over default", env: map[string]string{"JUPYTER_URL": "http://h:1/base/", "JUPYTER_TOKEN": "jt", "LOG_LEVEL": "debug", "ROOM_IDLE_TIMEOUT": "1m"}, check: func(t *testing.T, c Config) {
			if c.JupyterURL != "http://h:1/base/" || c.JupyterToken != "jt" || c.LogLevel != "debug" || c.IdleTimeout != time.Minute {
				t.Errorf("env: %+v", c)
			}
		}},
		{name: "flag over env", args: []string{"--jupyter-url", "http://flag:2/", "--log-level=warn"}, env: map[string]string{"JUPYTER_URL": "http://env:1/", "LOG_LEVEL": "debug"}, check: func(t *testing.T, c Config) {
			if c.JupyterURL != "http://flag:2/" || c.LogLevel != "warn" {
				t.Errorf("flags: %+v", c)
			}
		}},
		{name: "token files", args: []string{"--jupyter-token-file", "/secrets/jupyter", "--mcp-token-file", "/secrets/mcp", "--listen", "127.0.0.1:9000"}, check: func(t *testing.T, c Config) {
			if c.JupyterToken != "jt-from-file" || c.MCPToken != "file-token-0123456789" {
				t.Errorf("files: %+v", c)
			}
		}},
		{name: "apps: auto by default, a link without the token", env: map[string]string{"JUPYTER_URL": "http://h:1/user/al/lab?token=secret-jt"}, check: func(t *testing.T, c Config) {
			if c.Apps != tools.AppsAuto || labURL(c) != "http://h:1/user/al/" {
				t.Errorf("apps %v, lab URL %q", c.Apps, labURL(c))
			}
		}},
		{name: "apps off, lab url", args: []string{"--apps", "off", "--lab-url", "https://hub.example/user/al/"}, check: func(t *testing.T, c Config) {
			if c.Apps != tools.AppsOff || labURL(c) != "https://hub.example/user/al/" {
				t.Errorf("apps %v, lab URL %q", c.Apps, labURL(c))
			}
		}},
		{name: "apps always", env: map[string]string{"MCP_APPS": "always"}, check: func(t *testing.T, c Config) {
			if c.Apps != tools.AppsAlways {
				t.Errorf("apps %v", c.Apps)
			}
		}},
		{name: "apps typo", args: []string{"--apps", "sometimes"}, wantErr: "must be auto, always or off"},
		{name: "lab url with a token", args: []string{"--lab-url", "https://hub.example/lab?token=x"}, wantErr: "--lab-url"},
		{name: "http needs a token", args: []string{"--listen", "127.0.0.1:9000"}, wantErr: "needs a bearer token"},
		{name: "http with env token", args: []string{"--listen", "0.0.0.0:9000"}, env: map[string]string{"MCP_TOKEN": longToken}, check: func(t *testing.T, c Config) {
			if c.MCPToken != longToken || c.tokenFromFlag {
				t.Errorf("%+v", c)
			}
		}},
		{name: "short token", args: []string{"--listen", "127.0.0.1:9000"}, env: map[string]string{"MCP_TOKEN": "short"}, wantErr: "at least 16"},
		{name: "insecure on loopback", args: []string{"--listen", "127.0.0.1:9000", "--insecure-no-auth"}, check: func(t *testing.T, c Config) {
			if !c.InsecureNoAuth {
				t.Error("insecure flag not set")
			}
		}},
		{name: "insecure refused off loopback", args: []string{"--listen", "0.0.0.0:9000", "--insecure-no-auth"}, wantErr: "only allowed on a loopback"},
		{name: "insecure and token contradict", args: []string{"--listen", "127.0.0.1:9000", "--insecure-no-auth"}, env: map[string]string{"MCP_TOKEN": longToken}, wantErr: "contradicts"},
		{name: "flag token warns", args: []string{"--listen", "[::1]:9000", "--mcp-token", longToken}, check: func(t *testing.T, c Config) {
			if !c.tokenFromFlag || c.MCPToken != longToken {
				t.Errorf("%+v", c)
			}
		}},
		{name: "bad duration", env: map[string]string{"ROOM_IDLE_TIMEOUT": "soon"}, wantErr: "ROOM_IDLE_TIMEOUT"},
		{name: "bad bool", env: map[string]string{"NO_AUTOSAVE": "perhaps"}, wantErr: "NO_AUTOSAVE"},
		{name: "bad level", args: []string{"--log-level", "loud"}, wantErr: "log level"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "config file", args: []string{"--config", "/etc/jcm.yaml", "--log-level", "error"}, env: map[string]string{"AGENT_NAME": "Env Agent"}, check: func(t *testing.T, c Config) {
			if c.AgentName != "Env Agent" || c.LogLevel != "error" || len(c.AllowedOrigins) != 2 || c.AllowedOrigins[1] != "https://b.example" ||
				c.RateLimit != 2.5 || c.IdleTimeout != 90*time.Second || !c.NoAutosave {
				t.Errorf("config file under env and flags: %+v", c)
			}
		}},
		{name: "config file from env", env: map[string]string{"JCM_CONFIG": "/etc/jcm.yaml"}, check: func(t *testing.T, c Config) {
			if c.AgentName != "Config Agent" || c.LogLevel != "warn" {
				t.Errorf("%+v", c)
			}
		}},
		{name: "config file typo", args: []string{"--config=/etc/bad.yaml"}, wantErr: `unknown option "agent-nme"`},
		{name: "config file secret", args: []string{"--config", "/etc/secret.yaml"}, wantErr: "tokens belong in the environment"},
		{name: "config file list for a scalar", args: []string{"--config", "/etc/list.yaml"}, wantErr: "not a list"},
		{name: "missing config file", args: []string{"--config", "/nope.yaml"}, wantErr: "read config file"},
		{name: "auth jupyter", args: []string{"--listen", "127.0.0.1:9000", "--auth", "jupyter"}, check: func(t *testing.T, c Config) {
			if c.Auth != "jupyter" {
				t.Errorf("%+v", c)
			}
		}},
		{name: "auth jupyter and token", args: []string{"--listen", "127.0.0.1:9000", "--auth", "jupyter"}, env: map[string]string{"MCP_TOKEN": longToken}, wantErr: "contradicts"},
		{name: "auth jupyter on stdio", args: []string{"--auth", "jupyter"}, wantErr: "needs --listen"},
		{name: "bad auth", args: []string{"--auth", "magic"}, wantErr: "must be token or jupyter"},
		{name: "tls half", args: []string{"--tls-cert", "/c.pem"}, wantErr: "go together"},
		{name: "tls unreadable", args: []string{"--tls-cert", "/c.pem", "--tls-key", "/k.pem"}, wantErr: "--tls-cert/--tls-key"},
		{name: "bad public url", args: []string{"--public-url", "ftp://x"}, wantErr: "--public-url"},
		{name: "negative rate", env: map[string]string{"MCP_RATE_LIMIT": "-1"}, wantErr: "MCP_RATE_LIMIT"},
		{name: "pprof on loopback", args: []string{"--pprof-listen", "127.0.0.1:6060"}, check: func(t *testing.T, c Config) {
			if c.PprofListen != "127.0.0.1:6060" {
				t.Errorf("%+v", c)
			}
		}},
		{name: "pprof refused off loopback", env: map[string]string{"PPROF_LISTEN": "0.0.0.0:6060"}, wantErr: "only allowed on a loopback"},
		{name: "pprof without a port", args: []string{"--pprof-listen", "localhost"}, wantErr: "--pprof-listen"},
		{name: "missing token file", args: []string{"--mcp-token-file", "/nope"}, wantErr: "read MCP token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(tc.args, func(k string) string { return tc.env[k] }, readFile, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestHelpListsEveryOption(t *testing.T) {
	var out bytes.Buffer
	_, err := loadConfig([]string{"--help"}, func(string) string { return "" }, os.ReadFile, &out)
	if !errors.Is(err, errHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, o := range options() {
		if o.flag != "" && !strings.Contains(out.String(), "--"+o.flag) {
			t.Errorf("--help does not document --%s", o.flag)
		}
		if o.env != "" && !strings.Contains(out.String(), o.env) {
			t.Errorf("--help does not document %s", o.env)
		}
	}
}

// Only ydoc may import y-crdt: the workarounds live in one place.
func TestOnlyYdocImportsYCRDT(t *testing.T) {
	out, err := goList()
	if err != nil {
		t.Skip("go list unavailable:", err)
	}
	for _, line := range strings.Split(out, "\n") {
		pkg, imports, ok := strings.Cut(line, ":")
		if !ok || strings.HasSuffix(pkg, "/ydoc") {
			continue
		}
		if strings.Contains(imports, "github.com/skyterra/y-crdt") {
			t.Errorf("%s imports y-crdt; only ydoc may", pkg)
		}
	}
}

func goList() (string, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "github.com/jupyter-collab-mcp/jupyter-collab-mcp/...")
	cmd.Dir = "../.."
	b, err := cmd.Output()
	return string(b), err
}

// A pasted JupyterLab (or Notebook, or JupyterHub) URL becomes the base URL and the token.
func TestJupyterURLWithToken(t *testing.T) {
	const tok = "f00dfeed0123456789abcdef"
	for _, tc := range []struct {
		name      string
		url       string
		env       map[string]string
		args      []string
		wantURL   string
		wantToken string
		wantErr   string
	}{
		{name: "lab", url: "http://127.0.0.1:8888/lab?token=" + tok, wantURL: "http://127.0.0.1:8888/", wantToken: tok},
		{name: "lab tree", url: "http://127.0.0.1:8888/lab/tree/dir/x.ipynb?token=" + tok, wantURL: "http://127.0.0.1:8888/", wantToken: tok},
		{name: "root with token", url: "http://localhost:8888/?token=" + tok, wantURL: "http://localhost:8888/", wantToken: tok},
		{name: "no path with token", url: "http://localhost:8888?token=" + tok, wantURL: "http://localhost:8888/", wantToken: tok},
		{name: "notebook 7 tree", url: "http://h:8888/tree?token=" + tok, wantURL: "http://h:8888/", wantToken: tok},
		{name: "classic notebooks", url: "http://h:8888/notebooks/a%20b.ipynb?token=" + tok, wantURL: "http://h:8888/", wantToken: tok},
		{name: "doc mode", url: "http://h:8888/doc/tree/x.ipynb?token=" + tok, wantURL: "http://h:8888/", wantToken: tok},
		{name: "workspaces and other params", url: "http://h:8888/lab/workspaces/auto-x/tree/x.ipynb?reset&token=" + tok + "#frag", wantURL: "http://h:8888/", wantToken: tok},
		{name: "base_url", url: "https://h/jupyter/lab?token=" + tok, wantURL: "https://h/jupyter/", wantToken: tok},
		{name: "hub", url: "https://hub.example.org/user/alice/lab?token=" + tok, wantURL: "https://hub.example.org/user/alice/", wantToken: tok},
		{name: "hub tree", url: "https://hub.example.org/user/alice/lab/tree/x.ipynb?token=" + tok, wantURL: "https://hub.example.org/user/alice/", wantToken: tok},
		{name: "hub user named lab", url: "https://hub.example.org/user/lab/lab?token=" + tok, wantURL: "https://hub.example.org/user/lab/", wantToken: tok},
		{name: "hub named server", url: "https://hub.example.org/user/alice/gpu/lab/tree/x.ipynb?token=" + tok, wantURL: "https://hub.example.org/user/alice/gpu/", wantToken: tok},
		{name: "hub escaped name", url: "https://hub.example.org/user/a%40b.c/lab?token=" + tok, wantURL: "https://hub.example.org/user/a%40b.c/", wantToken: tok},
		{name: "hub base_url", url: "https://h/jh/user/alice/tree?token=" + tok, wantURL: "https://h/jh/user/alice/", wantToken: tok},
		{name: "hub root", url: "https://h/user/alice/?token=" + tok, wantURL: "https://h/user/alice/", wantToken: tok},
		{name: "hub page", url: "https://h/hub/user-redirect/lab?token=" + tok, wantErr: "JupyterHub hub page"},
		{name: "lab without token", url: "http://h:8888/lab", wantURL: "http://h:8888/", wantToken: ""},
		{name: "base URL as it was", url: "http://h:1/lab/", wantURL: "http://h:1/lab/", wantToken: ""},
		{name: "base URL without slash", url: "https://hub/user/alice", wantURL: "https://hub/user/alice/", wantToken: ""},
		{name: "empty token", url: "http://h:8888/lab?token=", wantURL: "http://h:8888/", wantToken: ""},
		{name: "same token both ways", url: "http://h/lab?token=" + tok, env: map[string]string{"JUPYTER_TOKEN": tok}, wantURL: "http://h/", wantToken: tok},
		{name: "token only in env", url: "http://h/lab", env: map[string]string{"JUPYTER_TOKEN": tok}, wantURL: "http://h/", wantToken: tok},
		{name: "tokens disagree", url: "http://h/lab?token=" + tok, env: map[string]string{"JUPYTER_TOKEN": "other-token-999"}, wantErr: "differs from JUPYTER_TOKEN"},
		{name: "token file disagrees", url: "http://h/lab?token=" + tok, args: []string{"--jupyter-token-file", "/tok"}, wantErr: "differs from JUPYTER_TOKEN"},
		{name: "two tokens", url: "http://h/lab?token=" + tok + "&token=other-token-999", wantErr: "two different tokens"},
		{name: "unparsable", url: "http://h:port/lab?token=" + tok, wantErr: "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"JUPYTER_URL": tc.url}
			for k, v := range tc.env {
				env[k] = v
			}
			readFile := func(string) ([]byte, error) { return []byte("file-token-1234\n"), nil }
			c, err := loadConfig(tc.args, func(k string) string { return env[k] }, readFile, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				for _, secret := range []string{tok, "other-token-999", "file-token-1234"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error carries a token: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.JupyterURL != tc.wantURL || c.JupyterToken != tc.wantToken {
				t.Errorf("got URL %q token %q, want %q %q", c.JupyterURL, c.JupyterToken, tc.wantURL, tc.wantToken)
			}
			if strings.Contains(c.JupyterURL, "token") {
				t.Errorf("the base URL still carries the token: %q", c.JupyterURL)
			}
		})
	}
}

// A token in --jupyter-url is accepted with a warning (flag values are visible in ps); in the
// config file it is refused, as every secret there is.
func TestJupyterURLTokenSources(t *testing.T) {
	const tok = "f00dfeed0123456789abcdef"
	c, err := loadConfig([]string{"--jupyter-url", "http://h/lab?token=" + tok}, func(string) string { return "" }, os.ReadFile, io.Discard)
	if err != nil || !c.urlTokenFromFlag || c.JupyterToken != tok {
		t.Fatalf("flag: %+v, %v", c, err)
	}
	c, err = loadConfig(nil, func(k string) string { return map[string]string{"JUPYTER_URL": "http://h/lab?token=" + tok}[k] }, os.ReadFile, io.Discard)
	if err != nil || c.urlTokenFromFlag {
		t.Fatalf("env: urlTokenFromFlag %v, %v", c.urlTokenFromFlag, err)
	}
	files := func(string) ([]byte, error) { return []byte("jupyter-url: http://h/lab?token=" + tok + "\n"), nil }
	_, err = loadConfig([]string{"--config", "/c.yaml"}, func(string) string { return "" }, files, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "jupyter-url carries a token") || strings.Contains(err.Error(), tok) {
		t.Fatalf("config file: err = %v", err)
	}
}
