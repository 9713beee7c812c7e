package bridgetest

import (
	"reflect"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// stateVector is the state vector of an encoded room state.
func stateVector(t *testing.T, state []byte) map[uint64]uint64 {
	t.Helper()
	meta, err := ydoc.ParseUpdate(state)
	if err != nil {
		t.Fatal(err)
	}
	sv := map[uint64]uint64{}
	for _, r := range meta.Structs {
		sv[r.Client] = max(sv[r.Client], r.Clock+r.Len)
	}
	return sv
}

// The fake rebuilds rooms the three ways the engines do.
func TestRoomLoads(t *testing.T) {
	typed := func(s *Server) {
		t.Helper()
		if err := s.EditDoc(NotebookPath, func(tx *ydoc.Txn) error { return tx.SetSource(1, "# Title, edited") }); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("deterministic", func(t *testing.T) {
		s := New()
		s.SetRoomLoad(LoadDeterministic)
		dial(t, s, NotebookPath)
		first := s.RoomState(NotebookPath)
		if _, ok := stateVector(t, first)[0]; !ok {
			t.Fatal("no client-0 items in a deterministic load")
		}
		typed(s)
		s.Restart(RestartOptions{})
		dial(t, s, NotebookPath)
		// The same items under the same ids (the bytes may differ: nested JSON objects are
		// encoded in Go's map order).
		a, _ := ydoc.ParseUpdate(first)
		b, _ := ydoc.ParseUpdate(s.RoomState(NotebookPath))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("the same file rebuilt as %+v, first %+v", b, a)
		}
		// A file saved since: the same ids, other content.
		typed(s)
		if err := s.SaveFile(NotebookPath); err != nil {
			t.Fatal(err)
		}
		s.Restart(RestartOptions{})
		dial(t, s, NotebookPath)
		if nb, _ := s.Notebook(NotebookPath); nb.Cells[1].Source != "# Title, edited" {
			t.Errorf("rebuilt from %q", nb.Cells[1].Source)
		}
		if sv := stateVector(t, s.RoomState(NotebookPath)); len(sv) != 1 {
			t.Errorf("clients %v, want client 0 alone", sv)
		}
	})
	t.Run("fresh", func(t *testing.T) {
		s := New()
		dial(t, s, NotebookPath)
		a := stateVector(t, s.RoomState(NotebookPath))
		s.Restart(RestartOptions{})
		dial(t, s, NotebookPath)
		b := stateVector(t, s.RoomState(NotebookPath))
		for c := range a {
			if _, shared := b[c]; shared || c == 0 {
				t.Errorf("client %d in both loads", c)
			}
		}
	})
	t.Run("store", func(t *testing.T) {
		s := New()
		s.SetRoomLoad(LoadStore)
		dial(t, s, NotebookPath)
		typed(s) // unsaved
		before := stateVector(t, s.RoomState(NotebookPath))
		s.Restart(RestartOptions{})
		dial(t, s, NotebookPath)
		after := stateVector(t, s.RoomState(NotebookPath))
		for c, k := range before {
			if after[c] < k {
				t.Errorf("client %d: %d items kept, had %d", c, after[c], k)
			}
		}
		if len(after) != len(before)+1 {
			t.Errorf("clients %v after, %v before: want the reload's client added", after, before)
		}
		if nb, _ := s.Notebook(NotebookPath); nb.Cells[1].Source != "# Title" {
			t.Errorf("the file was not reloaded over the store: %q", nb.Cells[1].Source)
		}
		s.Restart(RestartOptions{DropStore: true})
		dial(t, s, NotebookPath)
		if sv := stateVector(t, s.RoomState(NotebookPath)); len(sv) != 1 || sv[0] == 0 {
			t.Errorf("without the store: clients %v, want client 0 alone", sv)
		}
	})
}
