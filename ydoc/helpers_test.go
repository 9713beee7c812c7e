package ydoc

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	y "github.com/skyterra/y-crdt"
)

// Shared helpers for the ydoc tests.

// nextTestClient hands out distinct client ids so no two test docs share one.
var nextTestClient atomic.Uint32

func init() { nextTestClient.Store(1000) }

func freshClientID() uint32 { return nextTestClient.Add(1) }

// newTestDoc creates an empty document of the given kind with a fresh client id.
func newTestDoc(t testing.TB, kind Kind) *Doc {
	t.Helper()
	d, err := NewDoc(kind, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatalf("NewDoc(%v): %v", kind, err)
	}
	return d
}

// transact runs fn and fails the test on an error.
func transact(t testing.TB, d *Doc, fn func(*Txn) error) ([]byte, Change) {
	t.Helper()
	u, ch, err := d.Transact(fn)
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	return u, ch
}

// apply applies an update and fails the test on an error.
func apply(t testing.TB, d *Doc, update []byte) (UpdateMeta, Change) {
	t.Helper()
	meta, ch, err := d.Apply(update)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return meta, ch
}

// fullUpdate returns the whole state of d as one update.
func fullUpdate(t testing.TB, d *Doc) []byte {
	t.Helper()
	u, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatalf("EncodeStateAsUpdate: %v", err)
	}
	return u
}

// readNotebook returns d's notebook and fails the test on an error.
func readNotebook(t testing.TB, d *Doc) Notebook {
	t.Helper()
	nb, err := d.Notebook()
	if err != nil {
		t.Fatalf("Notebook: %v", err)
	}
	return nb
}

// fixtureNames lists the notebooks in testdata.
func fixtureNames(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.ipynb"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixture notebooks in testdata: %v", err)
	}
	sort.Strings(paths)
	return paths
}

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

func parseFixture(t testing.TB, path string) Notebook {
	t.Helper()
	nb, err := ParseNBFormat(readFixture(t, path))
	if err != nil {
		t.Fatalf("ParseNBFormat(%s): %v", path, err)
	}
	return nb
}

// loadNotebook creates a doc holding nb and returns the doc and its load update.
func loadNotebook(t testing.TB, nb Notebook) (*Doc, []byte) {
	t.Helper()
	d := newTestDoc(t, KindNotebook)
	u, _ := transact(t, d, func(tx *Txn) error { return tx.LoadNotebook(nb) })
	if u == nil {
		t.Fatalf("LoadNotebook produced no update")
	}
	return d, u
}

// canonJSON renders a JSON-like value canonically (sorted keys; ints and integral floats alike).
func canonJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

// cellSummary is a comparable view of a cell.
func cellSummary(t testing.TB, c Cell) string {
	t.Helper()
	count := "null"
	if c.ExecutionCount != nil {
		count = strings.TrimSpace(canonJSON(t, *c.ExecutionCount))
	}
	return strings.Join([]string{
		"type=" + c.Type,
		"source=" + canonJSON(t, c.Source),
		"metadata=" + canonJSON(t, c.Metadata),
		"count=" + count,
		"outputs=" + canonJSON(t, c.Outputs),
		"attachments=" + canonJSON(t, c.Attachments),
	}, "\n")
}

// compareNotebooks reports every difference between two notebooks. Cell ids are compared when
// checkIDs is set.
func compareNotebooks(t testing.TB, want, got Notebook, checkIDs bool) {
	t.Helper()
	if want.NBFormat != got.NBFormat || want.NBFormatMinor != got.NBFormatMinor {
		t.Errorf("nbformat: want %d.%d, got %d.%d", want.NBFormat, want.NBFormatMinor, got.NBFormat, got.NBFormatMinor)
	}
	if w, g := canonJSON(t, want.Metadata), canonJSON(t, got.Metadata); w != g {
		t.Errorf("notebook metadata:\nwant %s\n got %s", w, g)
	}
	if len(want.Cells) != len(got.Cells) {
		t.Fatalf("cell count: want %d, got %d", len(want.Cells), len(got.Cells))
	}
	for i := range want.Cells {
		w, g := want.Cells[i], got.Cells[i]
		if checkIDs && w.ID != g.ID {
			t.Errorf("cell %d id: want %q, got %q", i, w.ID, g.ID)
		}
		if ws, gs := cellSummary(t, w), cellSummary(t, g); ws != gs {
			t.Errorf("cell %d (%s) differs:\nwant %s\n got %s", i, g.ID, ws, gs)
		}
	}
}

// requireMalformed checks that err is non-nil and wraps ErrMalformed.
func requireMalformed(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: want an error wrapping ErrMalformed, got nil", what)
	}
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("%s: error %q does not wrap ErrMalformed", what, err)
	}
}

// noPanic runs fn and fails the test if it panics.
func noPanic(t testing.TB, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s panicked: %v", what, r)
		}
	}()
	fn()
}

func intp(n int) *int { return &n }

// walkedMaps reads the live cell maps from the cells array itself, not from the kept order
// (y-crdt lock held).
func walkedMaps(d *Doc) []*y.YMap {
	_, maps := walkCells(d.cells)
	return maps
}
