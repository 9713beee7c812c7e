package jupyter

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeRoutes is a stand-in jupyter-server that registers the given routes the way tornado does:
// a registered route without a handler for the method answers 405, an unknown route 404 with an
// HTML page.
func fakeRoutes(t *testing.T, routes map[string]http.HandlerFunc, prefixes ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.Method+" "+r.URL.Path]; ok {
			h(w, r)
			return
		}
		for _, p := range prefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				w.WriteHeader(http.StatusMethodNotAllowed)
				_, _ = w.Write([]byte(`{"message": "Method Not Allowed"}`))
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<!DOCTYPE HTML>\n<html><head><title>404: Not Found</title></head><body>secret page</body></html>"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newTestClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := New(Options{URL: url, Token: "tok-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDetectEngine(t *testing.T) {
	const session, index = "/api/collaboration/session/", "/api/fileid/index"
	for _, tc := range []struct {
		name     string
		prefixes []string
		want     Engine
		noEngine bool
		both     bool
	}{
		{"jupyter-collaboration", []string{session}, EngineCollaboration, false, false},
		{"jupyter-server-documents", []string{index}, EngineDocuments, false, false},
		{"no engine", nil, EngineAuto, true, false},
		{"both", []string{session, index}, EngineAuto, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeRoutes(t, nil, tc.prefixes...)
			got, err := newTestClient(t, srv.URL+"/").DetectEngine(context.Background())
			if got != tc.want {
				t.Errorf("engine %q, want %q", got, tc.want)
			}
			var ne *NoEngineError
			if tc.noEngine != errors.As(err, &ne) {
				t.Fatalf("error %v: want NoEngineError %v", err, tc.noEngine)
			}
			if !tc.noEngine {
				return
			}
			if ne.Both != tc.both || !ne.Permanent() {
				t.Errorf("NoEngineError %+v", ne)
			}
			msg := err.Error()
			if strings.Contains(msg, "<!DOCTYPE") || strings.Contains(msg, "<html") || strings.Contains(msg, "secret page") {
				t.Errorf("the error carries the server's page: %s", msg)
			}
			if !tc.both && (!strings.Contains(msg, "pip install") || !strings.Contains(msg, "jupyter-collaboration") || !strings.Contains(msg, "jupyter-server-documents")) {
				t.Errorf("the error does not say what to install: %s", msg)
			}
		})
	}
}

func TestDetectEngineServerErrorIsNotAnAnswer(t *testing.T) {
	srv := fakeRoutes(t, map[string]http.HandlerFunc{
		"GET /api/collaboration/session/jcm-engine-probe": func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"message":"starting"}`, http.StatusServiceUnavailable)
		},
	})
	_, err := newTestClient(t, srv.URL+"/").DetectEngine(context.Background())
	var ne *NoEngineError
	var api *APIError
	if errors.As(err, &ne) || !errors.As(err, &api) || api.Permanent() {
		t.Fatalf("a 503 must be a retryable error, not a verdict: %v", err)
	}
}

func TestDetectEngineUnderBaseURL(t *testing.T) {
	srv := fakeRoutes(t, nil, "/user/alice/api/fileid/index")
	got, err := newTestClient(t, srv.URL+"/user/alice/").DetectEngine(context.Background())
	if err != nil || got != EngineDocuments {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestIndexFileID(t *testing.T) {
	var gotPath string
	srv := fakeRoutes(t, map[string]http.HandlerFunc{
		"POST /api/fileid/index": func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "token tok-0123456789" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			gotPath = r.URL.Query().Get("path")
			_, _ = w.Write([]byte(`{"id": "3f2a-file-id", "path": "` + gotPath + `"}`))
		},
	})
	id, err := newTestClient(t, srv.URL+"/").IndexFileID(context.Background(), "/dir/a b&c.ipynb")
	if err != nil || id != "3f2a-file-id" {
		t.Fatalf("got %q, %v", id, err)
	}
	if gotPath != "dir/a b&c.ipynb" {
		t.Errorf("the server got path %q", gotPath)
	}
}

func TestOpenDocSessionWithoutEngineHasNoHTML(t *testing.T) {
	srv := fakeRoutes(t, nil)
	_, err := newTestClient(t, srv.URL+"/").OpenDocSession(context.Background(), "demo.ipynb", "json", "notebook")
	if err == nil || strings.Contains(err.Error(), "<html") || strings.Contains(err.Error(), "secret page") {
		t.Fatalf("error %v: want one without the server's HTML page", err)
	}
	if !strings.Contains(err.Error(), "jupyter-collaboration is not installed") {
		t.Errorf("error %v does not say what is missing", err)
	}
}

func TestParseEngine(t *testing.T) {
	for in, want := range map[string]Engine{"": EngineAuto, "auto": EngineAuto, "Collaboration": EngineCollaboration,
		"jupyter-server-documents": EngineDocuments, "documents": EngineDocuments} {
		if got, err := ParseEngine(in); err != nil || got != want {
			t.Errorf("ParseEngine(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseEngine("jupyverse"); err == nil {
		t.Error("an unknown engine must be refused")
	}
}
