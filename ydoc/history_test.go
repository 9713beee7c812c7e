package ydoc

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/rs/zerolog"
)

func newHistory(t testing.TB, kind Kind, opts MatchOptions) *History {
	t.Helper()
	h, err := NewHistory(kind, opts, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// randomNotebookEdit makes one random edit of the kinds people and agents make.
func randomNotebookEdit(rng *rand.Rand, n *int) func(tx *Txn) error {
	return func(tx *Txn) error {
		cells := tx.NumCells()
		switch k := rng.Intn(10); {
		case k < 5 && cells > 0: // typing
			i := rng.Intn(cells)
			c, err := tx.Cell(i)
			if err != nil {
				return err
			}
			pos := rng.Intn(len(c.Source) + 1)
			return tx.SetSource(i, c.Source[:pos]+string(rune('a'+rng.Intn(26)))+c.Source[pos:])
		case k == 5 || cells == 0:
			*n++
			return tx.InsertCells(rng.Intn(cells+1), []Cell{{ID: fmt.Sprintf("r%d", *n), Type: CellCode, Source: fmt.Sprintf("y = %d", *n)}})
		case k == 6 && cells > 1:
			return tx.DeleteCells(rng.Intn(cells), 1)
		case k == 7 && cells > 1:
			return tx.MoveCells(rng.Intn(cells), 1, rng.Intn(cells))
		case k == 8:
			i := rng.Intn(cells)
			return tx.SetCellMetadata(i, map[string]any{"tags": []any{fmt.Sprint(rng.Intn(3))}, "scale": 0.5 + float64(rng.Intn(4))})
		default:
			i := rng.Intn(cells)
			if c, _ := tx.Cell(i); c.Type == CellCode {
				return tx.AppendOutput(i, map[string]any{"output_type": "stream", "name": "stdout", "text": "out\n"})
			}
			return tx.SetNotebookMetadata(map[string]any{"kernelspec": map[string]any{"name": fmt.Sprint("k", rng.Intn(3))}})
		}
	}
}

// The fingerprint kept incrementally, update by update, is always the one computed from scratch
// for the content the replica holds then; every version is held, and content never held is not.
func TestHistoryIncrementalMatchesScratch(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	src, first := loadNotebook(t, bigNotebook(30))
	h := newHistory(t, KindNotebook, MatchOptions{})
	if err := h.Apply(first); err != nil {
		t.Fatal(err)
	}
	var versions []Snapshot
	n := 0
	for step := range 600 {
		u, _ := transact(t, src, randomNotebookEdit(rng, &n))
		if u == nil {
			continue
		}
		if err := h.Apply(u); err != nil {
			t.Fatal(err)
		}
		snap, err := h.Content()
		if err != nil {
			t.Fatal(err)
		}
		if h.cur != h.fingerprint(snap) {
			t.Fatalf("step %d: incremental fingerprint differs from the one computed from scratch", step)
		}
		if step%50 == 0 {
			versions = append(versions, snap)
		}
	}
	for i, v := range versions {
		if !h.Held(v) {
			t.Errorf("version %d not held", i)
		}
	}
	never := versions[len(versions)-1]
	never.Notebook.Cells = append([]Cell(nil), never.Notebook.Cells...)
	never.Notebook.Cells[0].Source += " never typed"
	if h.Held(never) {
		t.Error("content never held is reported held")
	}
	if h.Versions() < 500 {
		t.Errorf("%d versions recorded", h.Versions())
	}
}

// A file is matched the way the server reads and writes it: without cell ids (nbformat < 4.5),
// with trusted marks, multiline strings, float or int numbers, the metadata defaults of a load,
// one empty cell for none, CRLF for LF.
func TestHistoryMatchesFilesAsTheServerWritesThem(t *testing.T) {
	held := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{
		"kernelspec": map[string]any{"name": "", "display_name": ""}, "language_info": map[string]any{"name": ""}, "ratio": 0.1,
	}, Cells: []Cell{
		{ID: "a", Type: CellCode, Source: "print(1)", ExecutionCount: intp(3), Metadata: map[string]any{"trusted": true, "n": 2},
			Outputs: []map[string]any{
				{"output_type": "stream", "name": "stdout", "text": "1\n2\n"},
				{"output_type": "execute_result", "execution_count": 3, "metadata": map[string]any{}, "data": map[string]any{"text/plain": "x\ny", "application/json": map[string]any{"k": 1}}},
			}},
		{ID: "b", Type: CellMarkdown, Source: "# t"},
	}}
	d, update := loadNotebook(t, held)
	h := newHistory(t, KindNotebook, MatchOptions{})
	if err := h.Apply(update); err != nil {
		t.Fatal(err)
	}
	file := Notebook{NBFormat: 4, NBFormatMinor: 4, Metadata: map[string]any{"ratio": float64(float32(0.1)), "signature": "sha256:x"}, Cells: []Cell{
		{Type: CellCode, Source: "print(1)", ExecutionCount: intp(3), Metadata: map[string]any{"n": 2.0},
			Outputs: []map[string]any{
				{"output_type": "stream", "name": "stdout", "text": []any{"1\n", "2\n"}},
				{"output_type": "execute_result", "execution_count": 3.0, "metadata": map[string]any{}, "data": map[string]any{"text/plain": []any{"x\n", "y"}, "application/json": map[string]any{"k": 1.0}}},
			}},
		{Type: CellMarkdown, Source: "# t", Metadata: map[string]any{}},
	}}
	if !h.Held(Snapshot{Kind: KindNotebook, Notebook: file}) {
		t.Errorf("the file as written is not matched:\nheld %q\nfile %q", ContentKey(Snapshot{Kind: KindNotebook, Notebook: readNotebook(t, d)}, MatchOptions{}),
			ContentKey(Snapshot{Kind: KindNotebook, Notebook: file}, MatchOptions{}))
	}
	changed := file
	changed.Cells = append([]Cell(nil), file.Cells...)
	changed.Cells[1].Source = "# u"
	if h.Held(Snapshot{Kind: KindNotebook, Notebook: changed}) {
		t.Error("a changed file is matched")
	}
	// Outputs left out: a room holding placeholders matches the file with the real outputs.
	ho := newHistory(t, KindNotebook, MatchOptions{IgnoreOutputs: true})
	if err := ho.Apply(update); err != nil {
		t.Fatal(err)
	}
	other := file
	other.Cells = append([]Cell(nil), file.Cells...)
	other.Cells[0].Outputs = []map[string]any{{"output_type": "display_data", "data": map[string]any{"image/png": "AAAA"}}}
	if !ho.Held(Snapshot{Kind: KindNotebook, Notebook: other}) {
		t.Error("outputs compared although ignored")
	}
	// An empty file is what a room loads as one empty code cell.
	_, emptyLoad := loadNotebook(t, Notebook{NBFormat: 4, NBFormatMinor: 5})
	he := newHistory(t, KindNotebook, MatchOptions{})
	if err := he.Apply(emptyLoad); err != nil {
		t.Fatal(err)
	}
	if !he.Held(Snapshot{Kind: KindNotebook, Notebook: Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}}}) {
		t.Error("the empty file is not matched by the empty room")
	}
	// Text: CRLF on disk.
	td := newTestDoc(t, KindText)
	u, _ := transact(t, td, func(tx *Txn) error { return tx.SetText("a\nb\n") })
	ht := newHistory(t, KindText, MatchOptions{})
	if err := ht.Apply(u); err != nil {
		t.Fatal(err)
	}
	if !ht.Held(Snapshot{Kind: KindText, Text: "a\r\nb\r\n"}) || ht.Held(Snapshot{Kind: KindText, Text: "a\nb"}) {
		t.Error("text matching")
	}
}

// A session keeps the history of its replica across a lost room: the file the server saved is
// a version it held (restore), a file changed outside is not (the file wins, merged against the
// content at the last save marker).
func TestHistoryKeptBySession(t *testing.T) {
	file := *sessionNotebook()
	srv := newFakeServer(t, &file)
	a, saver := srv.newClient("agent"), srv.newClient("server")
	h := newHistory(t, KindNotebook, MatchOptions{})
	if err := a.sess.KeepHistory(h); err != nil {
		t.Fatal(err)
	}
	a.connect()
	saver.connect()
	srv.flush()
	if !h.Held(Snapshot{Kind: KindNotebook, Notebook: file}) {
		t.Fatal("the loaded file is not held")
	}
	a.record(a.sess.proposeDurable(1, func(tx *Txn, _ bool) error {
		return tx.InsertCells(0, []Cell{{ID: "ag", Source: "agent"}})
	}))
	srv.flush()
	saved := readNotebook(t, srv.doc)
	saver.propose(100, func(tx *Txn, _ bool) error { return tx.SetState("hash", "h1") }) // the server saved
	srv.flush()
	a.propose(2, func(tx *Txn, _ bool) error { return tx.SetSource(tx.CellIndex("c2"), "x = 2") })
	srv.flush()
	if ls := h.LastSaved(); ls == nil || !slices2Equal(idsOf(ls.Notebook), idsOf(saved)) {
		t.Fatalf("last saved %+v, want the content at the marker", ls)
	}
	if err := a.sess.ResetServerLost(freshClientID()); err != nil {
		t.Fatal(err)
	}
	if !h.Held(Snapshot{Kind: KindNotebook, Notebook: asRead(t, saved, true)}) {
		t.Error("the saved file, read back, is not held")
	}
	outside := asRead(t, saved, false)
	outside.Cells[1].Source = "changed outside"
	if h.Held(Snapshot{Kind: KindNotebook, Notebook: outside}) {
		t.Error("a file changed outside is held")
	}
	n := h.Versions()
	srv2 := newFakeServer(t, &saved)
	moveTo(a, srv2)
	a.sess.RescueFrom(Snapshot{Kind: KindNotebook, Notebook: saved})
	a.connect()
	srv2.flush()
	if h.Versions() <= n {
		t.Error("the history stopped after the reset")
	}
	if !h.Held(Snapshot{Kind: KindNotebook, Notebook: readNotebook(t, srv2.doc)}) {
		t.Error("the restored content is not held")
	}
}

func slices2Equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// The history's ring forgets the oldest versions first.
func TestHistoryBounded(t *testing.T) {
	d := newTestDoc(t, KindText)
	h := newHistory(t, KindText, MatchOptions{MaxVersions: 4})
	for i := range 10 {
		u, _ := transact(t, d, func(tx *Txn) error { return tx.SetText(fmt.Sprint("v", i)) })
		if err := h.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	if h.Held(Snapshot{Kind: KindText, Text: "v5"}) || !h.Held(Snapshot{Kind: KindText, Text: "v6"}) || !h.Held(Snapshot{Kind: KindText, Text: "v9"}) {
		t.Error("the ring keeps the wrong versions")
	}
	if len(h.count) != 4 {
		t.Errorf("%d fingerprints kept", len(h.count))
	}
}

// BenchmarkHistory: one update of a 2,000-cell notebook (typing, and a cell inserted every
// 20th) applied to a replica, with and without a history kept.
func BenchmarkHistory(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	src, first := loadNotebook(b, bigNotebook(2000))
	updates := make([][]byte, 0, 4000)
	for i := 0; len(updates) < 4000; i++ {
		u, _ := transact(b, src, func(tx *Txn) error {
			if i%20 == 0 {
				return tx.InsertCells(rng.Intn(tx.NumCells()), []Cell{{ID: fmt.Sprint("n", i), Source: "new"}})
			}
			j := rng.Intn(tx.NumCells())
			c, _ := tx.Cell(j)
			return tx.SetSource(j, c.Source+"x")
		})
		updates = append(updates, u)
	}
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("history=%v", keep), func(b *testing.B) {
			if b.N > len(updates) {
				b.Skip("run with -benchtime up to 4000x")
			}
			d := newTestDoc(b, KindNotebook)
			apply(b, d, first)
			h := newHistory(b, KindNotebook, MatchOptions{})
			h.bind()
			h.observe(d, Change{})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, ch, err := d.Apply(updates[i])
				if err != nil {
					b.Fatal(err)
				}
				if keep {
					h.observe(d, ch)
				}
			}
		})
	}
}
