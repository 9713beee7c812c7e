package jupyterserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
)

// documentsServer stands in for jupyter-server-documents: /api/fileid/index only (POST), and
// every other route unknown.
func documentsServer(t *testing.T, probes *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/fileid/index" && r.Method == http.MethodPost:
			_, _ = w.Write([]byte(`{"id": "f1le-1d", "path": "` + r.URL.Query().Get("path") + `"}`))
		case r.URL.Path == "/api/fileid/index":
			probes.Add(1)
			w.WriteHeader(http.StatusMethodNotAllowed)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("<!DOCTYPE HTML><html>404</html>"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDocumentsEngine(t *testing.T) {
	var probes atomic.Int32
	srv := documentsServer(t, &probes)
	c, err := jupyter.New(jupyter.Options{URL: srv.URL + "/", Token: "tok-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	s := New(c)
	ctx := context.Background()
	ds, err := s.OpenDocSession(ctx, "a/b.ipynb", "json", "notebook")
	if err != nil {
		t.Fatal(err)
	}
	if ds.RoomID != "json:notebook:f1le-1d" || ds.FileID != "f1le-1d" || ds.SessionID != "" {
		t.Errorf("session %+v", ds)
	}
	if !ds.Engine.SavesItself || !ds.Engine.NoForks || ds.Engine.Name != "jupyter-server-documents" {
		t.Errorf("engine %+v", ds.Engine)
	}
	if _, err := s.OpenDocSession(ctx, "c.txt", "text", "file"); err != nil {
		t.Fatal(err)
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("the engine was probed %d times; detection is cached after the first answer", n)
	}
	if _, err := s.CreateFork(ctx, ds.RoomID, bridge.ForkInfo{Title: "x"}); !errors.Is(err, bridge.ErrNoForks) || !strings.Contains(err.Error(), "jupyter-server-documents") {
		t.Errorf("fork on jupyter-server-documents: %v", err)
	}
	if _, err := s.ListForks(ctx, ds.RoomID); !errors.Is(err, bridge.ErrNoForks) {
		t.Errorf("list forks: %v", err)
	}
}

func TestForcedEngineIsNotProbed(t *testing.T) {
	var probes atomic.Int32
	srv := documentsServer(t, &probes)
	c, err := jupyter.New(jupyter.Options{URL: srv.URL + "/", Token: "tok-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewWithEngine(c, jupyter.EngineDocuments).EngineInfo(context.Background())
	if err != nil || e.Name != "jupyter-server-documents" || probes.Load() != 0 {
		t.Fatalf("engine %+v, %v, %d probes", e, err, probes.Load())
	}
}
