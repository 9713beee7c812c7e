//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// shared is one jupyter-server for the tests that do not restart it; each test uses its own
// files in it.
var shared *JupyterServer

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	shared, err = StartJupyter(ctx, ServerOptions{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot start jupyter-server:", err)
		os.Exit(1)
	}
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// fixture reads a notebook from the shared fixtures.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The shared fixtures are vendored under ydoc/testdata so a clean clone has them.
	for _, dir := range []string{filepath.Join(root, "ydoc", "testdata"), filepath.Join(root, "integration", "testdata")} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			return b
		}
	}
	t.Fatalf("fixture %s not found", name)
	return nil
}

// testLogger writes the sidecar's logs into the test log.
// JCM_TEST_LOG=debug shows the sidecar's debug logs.
func testLogger(t testing.TB) zerolog.Logger {
	level := zerolog.InfoLevel
	if l, err := zerolog.ParseLevel(os.Getenv("JCM_TEST_LOG")); err == nil && os.Getenv("JCM_TEST_LOG") != "" {
		level = l
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}, NoColor: true}).Level(level).With().Timestamp().Logger()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// sidecar is the bridge wired to a server, as cmd wires it.
type sidecar struct {
	client  *jupyter.Client
	manager *bridge.Manager
	cancel  context.CancelFunc
	done    chan struct{}
}

func newSidecar(t testing.TB, s *JupyterServer, mutate func(*bridge.ManagerOptions)) *sidecar {
	t.Helper()
	log := testLogger(t)
	c, err := jupyter.New(jupyter.Options{URL: s.URL, Token: s.Token, Logger: log, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A first read waits for the room (the tests read, then act on the room); tests of first reads
	// from the file set FirstReadWait.
	opts := bridge.ManagerOptions{Jupyter: jupyterserver.New(c), Logger: log, FirstReadWait: -1}
	opts.Room.MaxBackoff = 2 * time.Second
	if mutate != nil {
		mutate(&opts)
	}
	m, err := bridge.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &sidecar{client: c, manager: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(sc.stop)
	return sc
}

func (s *sidecar) stop() {
	s.cancel()
	<-s.done
}

func newPeer(t testing.TB) *Peer {
	t.Helper()
	p, err := StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName gives each test its own file in the shared server.
var nameMu sync.Mutex
var nameSeq int

func uniqueName(t testing.TB, ext string) string {
	nameMu.Lock()
	defer nameMu.Unlock()
	nameSeq++
	base := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%s_%d%s", base, nameSeq, ext)
}

// waitDisk polls the file until cond holds (the server autosaves about 1 s after the last change;
// a file has no event to await). A file that cannot be read or parsed yet — missing, or caught
// while the server is writing it — is "not yet", like one whose content does not hold yet; the
// failure after 20 s says which it last was.
func waitDisk(t testing.TB, s *JupyterServer, path string, what string, cond func(ydoc.Notebook) bool) ydoc.Notebook {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var nb ydoc.Notebook
	var last error // why the last read was not a notebook (nil: it was, and cond did not hold)
	for time.Now().Before(deadline) {
		b, err := s.ReadFile(path)
		if err == nil {
			var parsed ydoc.Notebook
			if parsed, err = ydoc.ParseNBFormat(b); err == nil {
				nb = parsed
				if cond(nb) {
					return nb
				}
			} else {
				err = fmt.Errorf("parse the %d bytes read: %w", len(b), err)
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("file %s on disk never showed %s; the last read: %v", path, what, last)
	}
	dump, _ := json.MarshalIndent(nb.JSON(), "", " ")
	t.Fatalf("file %s on disk never showed %s; last:\n%s", path, what, dump)
	return nb
}

// replica reads the sidecar's copy of a notebook.
func replica(t testing.TB, ctx context.Context, r *bridge.Room) ydoc.Notebook {
	t.Helper()
	var nb ydoc.Notebook
	if err := r.View(ctx, func(d *ydoc.Doc) error {
		var err error
		nb, err = d.Notebook()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return nb
}

func sources(nb ydoc.Notebook) []string {
	out := make([]string, len(nb.Cells))
	for i, c := range nb.Cells {
		out[i] = c.Source
	}
	return out
}

func peerSources(s PeerSnapshot) []string {
	out := make([]string, len(s.Cells))
	for i, c := range s.Cells {
		out[i] = c.Source
	}
	return out
}

func ids(nb ydoc.Notebook) []string {
	out := make([]string, len(nb.Cells))
	for i, c := range nb.Cells {
		out[i] = c.ID
	}
	return out
}

func peerIDs(s PeerSnapshot) []string {
	out := make([]string, len(s.Cells))
	for i, c := range s.Cells {
		out[i] = c.ID
	}
	return out
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonEq compares values after a JSON round trip (ints and floats alike, nil maps as empty).
func jsonEq(a, b any) bool {
	norm := func(v any) any {
		bs, err := json.Marshal(v)
		if err != nil {
			return err.Error()
		}
		var out any
		_ = json.Unmarshal(bs, &out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
