package bridge

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

func TestHistorySince(t *testing.T) {
	h := newHistory()
	v0 := h.version()
	h.record(ydoc.Change{Cells: []ydoc.CellChange{{ID: "a", Fields: []string{"source"}}}}, nil, time.Now(), false)
	v1 := h.version()
	h.record(ydoc.Change{Inserted: []string{"b"}}, nil, time.Now(), false)
	h.record(ydoc.Change{Cells: []ydoc.CellChange{{ID: "c", Fields: []string{"metadata"}}}}, nil, time.Now(), false)
	hist := History{h}

	got, err := hist.Since(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Inserted, []string{"b"}) || len(got.Cells) != 1 || got.Cells[0].ID != "c" {
		t.Errorf("Since(v1) = %+v", got)
	}
	if got, _ := hist.Since(v0); len(got.Cells) != 2 {
		t.Errorf("Since(v0) cells %+v, want a and c", got.Cells)
	}
	if got, _ := hist.Since(hist.Version()); !got.Empty() {
		t.Errorf("Since(now) = %+v, want nothing", got)
	}
	for _, bad := range []Version{"", "nonsense", "zzzzzz-1", Version(h.epoch + "-99"), Version(h.epoch + "-x")} {
		if _, err := hist.Since(bad); !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("Since(%q) err = %v, want ErrUnknownVersion", bad, err)
		}
	}
	// Fall out of the window.
	for i := 0; i < maxHistory+10; i++ {
		h.record(ydoc.Change{Text: true}, nil, time.Now(), false)
	}
	if _, err := hist.Since(v1); !errors.Is(err, ErrVersionTooOld) {
		t.Errorf("Since(an evicted version) err = %v, want ErrVersionTooOld", err)
	}
	if n := len(h.entries); n > maxHistory {
		t.Errorf("history holds %d entries, bound %d", n, maxHistory)
	}
	if recent := hist.Recent(3); len(recent) != 3 || recent[2].Seq != h.seq {
		t.Errorf("Recent(3) = %+v", recent)
	}
}
