package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// The expected values come from jupyter-server-documents 0.3.3's own
// ynotebook_room._source_hash, run on the same strings.
func TestRunHashMatchesJupyterServerDocuments(t *testing.T) {
	for src, want := range map[string]string{
		"":                           "0",
		"a":                          "2456313694",
		"ab":                         "446775395",
		"abc":                        "324500635",
		"abcd":                       "646393889",
		"print('hello')":             "3975440051",
		"x = 1\ny = 2\nprint(x + y)": "916535401",
		"é ü — 日本語 🎉":                "1242813108",
		strings.Repeat("a", 1000):    "3755052211",
	} {
		if got := RunHash(src); got != want {
			t.Errorf("RunHash(%q) = %s, want %s", src, got, want)
		}
	}
}

func TestExecuteCells(t *testing.T) {
	var got ExecuteCellsRequest
	srv := fakeRoutes(t, map[string]http.HandlerFunc{
		"POST /api/kernels/k1/execute": func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewDecoder(r.Body).Decode(&got)
			_, _ = w.Write([]byte("null"))
		},
		"POST /api/kernels/k2/execute": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error": "source_mismatch", "cell_id": "c1"}`))
		},
		"POST /api/kernels/k3/execute": func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"message": "YNotebookRoom is not connected to a kernel"}`, http.StatusBadRequest)
		},
		"POST /api/kernels/k4/execute": func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"message": "Cell 'c1' not found in document"}`, http.StatusBadRequest)
		},
	})
	c := newTestClient(t, srv.URL+"/")
	req := ExecuteCellsRequest{DocumentID: "json:notebook:f1", Cells: []CellToRun{{CellID: "c1", RunHash: RunHash("1+1")}}, RequestID: "r1"}
	if err := c.ExecuteCells(context.Background(), "k1", req); err != nil {
		t.Fatal(err)
	}
	if got.DocumentID != "json:notebook:f1" || len(got.Cells) != 1 || got.Cells[0].RunHash != RunHash("1+1") || got.RequestID != "r1" {
		t.Errorf("the server got %+v", got)
	}
	if err := c.ExecuteCells(context.Background(), "k2", req); !errors.Is(err, ErrSourceMismatch) {
		t.Errorf("409: %v", err)
	}
	if err := c.ExecuteCells(context.Background(), "k3", req); !errors.Is(err, ErrRoomWithoutKernel) || !strings.Contains(err.Error(), "not connected to a kernel") {
		t.Errorf("400 without a kernel: %v", err)
	}
	if err := c.ExecuteCells(context.Background(), "k4", req); err == nil || errors.Is(err, ErrRoomWithoutKernel) || errors.Is(err, ErrSourceMismatch) {
		t.Errorf("another 400 is none of the typed errors: %v", err)
	}
}

func TestUpdateSessionKernel(t *testing.T) {
	var got map[string]any
	srv := fakeRoutes(t, map[string]http.HandlerFunc{
		"PATCH /api/sessions/s1": func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewDecoder(r.Body).Decode(&got)
			_, _ = w.Write([]byte(`{"id": "s1", "path": "a.ipynb", "kernel": {"id": "k1", "name": "python3"}}`))
		},
	})
	c := newTestClient(t, srv.URL+"/")
	s, err := c.UpdateSessionKernel(context.Background(), "s1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := got["kernel"].(map[string]any); k["id"] != "k1" || s.Kernel == nil || s.Kernel.ID != "k1" {
		t.Errorf("sent %v, got %+v", got, s)
	}
}
