package bridge

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

type snapFixture struct {
	t   *testing.T
	d   *ydoc.Doc
	s   *snapshotStore
	seq int
	now time.Time
}

func newSnapFixture(t *testing.T, budget int) *snapFixture {
	d, err := ydoc.NewDoc(ydoc.KindNotebook, 77, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	f := &snapFixture{t: t, d: d, s: newSnapshotStore(ydoc.KindNotebook, budget), now: time.Unix(1_800_000_000, 0)}
	f.edit(false, "", func(tx *ydoc.Txn) error {
		return tx.InsertCells(0, []ydoc.Cell{{ID: "a", Type: "code", Source: "a = 1"}, {ID: "b", Type: "markdown", Source: "# b"}})
	})
	if err := f.s.observe(d, ydoc.Change{}, "e-0", nil, f.now, true); err != nil {
		t.Fatal(err)
	}
	return f
}

// edit changes the doc and records it as a change by author (agent: an undoable edit).
func (f *snapFixture) edit(agent bool, author string, fn func(*ydoc.Txn) error) Version {
	f.t.Helper()
	_, c, err := f.d.Transact(func(tx *ydoc.Txn) error {
		if agent {
			tx.Undoable()
		}
		return fn(tx)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if !agent {
		c.Local = false
	}
	f.seq++
	v := Version("e-" + string(rune('0'+f.seq%10)) + strings.Repeat("x", f.seq/10))
	if len(f.s.snaps) == 0 {
		return v // before the initial snapshot
	}
	var authors []string
	if author != "" {
		authors = []string{author}
	}
	if err := f.s.observe(f.d, c, v, authors, f.now, false); err != nil {
		f.t.Fatal(err)
	}
	return v
}

func TestSnapshotsCoalesceTypingAndPinAgentEdits(t *testing.T) {
	f := newSnapFixture(t, 1<<20)
	// Alice types three keystrokes within a second: one version.
	for i, src := range []string{"a = 1!", "a = 1!!", "a = 1!!!"} {
		f.now = f.now.Add(300 * time.Millisecond)
		f.edit(false, "Alice", func(tx *ydoc.Txn) error { return tx.SetSource(0, src) })
		_ = i
	}
	// The agent edits: its own version.
	f.now = f.now.Add(time.Second)
	agentV := f.edit(true, "", func(tx *ydoc.Txn) error {
		return tx.InsertCells(2, []ydoc.Cell{{ID: "c", Type: "code", Source: "agent()"}})
	})
	// Alice again right after: a new version (the agent's is pinned).
	f.now = f.now.Add(500 * time.Millisecond)
	f.edit(false, "Alice", func(tx *ydoc.Txn) error { return tx.SetSource(1, "# b, edited") })
	list := f.s.list()
	if len(list) != 4 {
		t.Fatalf("%d versions, want 4 (joined, Alice typing, agent, Alice): %+v", len(list), list)
	}
	if !list[0].Current || list[0].Summary != "edited b" || list[0].By[0] != "Alice" {
		t.Errorf("newest: %+v", list[0])
	}
	if list[1].Version != agentV || !list[1].Agent || list[1].Summary != "added c" {
		t.Errorf("agent's version: %+v", list[1])
	}
	if list[2].Summary != "edited a" || list[3].Summary != "the document as the sidecar found it when joining" {
		t.Errorf("older: %+v / %+v", list[2], list[3])
	}
	// The state before the agent's edit is restorable, with Alice's last keystroke in it.
	sn, err := f.s.find(list[2].Version)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := f.s.notebook(sn)
	if err != nil || len(nb.Cells) != 2 || nb.Cells[0].Source != "a = 1!!!" || nb.Cells[1].Source != "# b" {
		t.Fatalf("version before the agent's edit: %+v %v", nb.Cells, err)
	}
	if _, err := f.s.find("nope"); !errors.Is(err, ErrNoSuchVersion) {
		t.Errorf("unknown version: %v", err)
	}
}

// Invisible changes (state flags) make no version; unchanged cells are stored once.
func TestSnapshotsShareCellsAndSkipInvisibleChanges(t *testing.T) {
	f := newSnapFixture(t, 1<<20)
	used := f.s.used
	f.edit(false, "Bob", func(tx *ydoc.Txn) error { return tx.SetState("dirty", false) })
	if n := len(f.s.snaps); n != 1 {
		t.Fatalf("a state change made a version: %d", n)
	}
	f.now = f.now.Add(time.Minute)
	f.edit(false, "Bob", func(tx *ydoc.Txn) error { return tx.SetSource(0, "a = 2") })
	// the new version's own bookkeeping, and the one chunk of cell ids it rewrote
	overhead := snapshotOverhead(f.s.last().Content) + chunkOverhead(f.s.last().Content.Chunks[0])
	if grown := f.s.used - used - overhead; grown > 200 {
		t.Errorf("one edited cell grew the store by %d bytes: unchanged cells are not shared", grown)
	}
}

func TestSnapshotsBudgetDropsTheOldest(t *testing.T) {
	f := newSnapFixture(t, 4<<10)
	for i := 0; i < 40; i++ {
		f.now = f.now.Add(time.Minute)
		src := strings.Repeat("x", 500) + string(rune('A'+i%26))
		f.edit(true, "", func(tx *ydoc.Txn) error { return tx.SetSource(0, src) })
	}
	if f.s.used > 4<<10 {
		t.Errorf("store uses %d bytes, budget 4096", f.s.used)
	}
	if n := len(f.s.snaps); n < 2 || n > 10 {
		t.Errorf("%d versions kept", n)
	}
	if last := f.s.list()[0]; !last.Current {
		t.Errorf("the current version was dropped: %+v", last)
	}
}

func TestSnapshotsPersist(t *testing.T) {
	f := newSnapFixture(t, 1<<20)
	f.now = f.now.Add(time.Minute)
	v := f.edit(true, "", func(tx *ydoc.Txn) error { return tx.SetSource(0, "saved()") })
	file := snapshotPath(t.TempDir(), "dir/nb.ipynb", ydoc.KindNotebook)
	if err := saveSnapshots(file, f.s.image("dir/nb.ipynb")); err != nil {
		t.Fatal(err)
	}
	back, err := loadSnapshots(file, "dir/nb.ipynb", ydoc.KindNotebook, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := back.find(v)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := back.notebook(sn)
	if err != nil || nb.Cells[0].Source != "saved()" || len(back.list()) != 2 {
		t.Fatalf("loaded: %+v %v (%d versions)", nb.Cells, err, len(back.list()))
	}
	if _, err := loadSnapshots(file, "other.ipynb", ydoc.KindNotebook, 1<<20); err == nil {
		t.Error("a history file was loaded for another document")
	}
	if s, err := loadSnapshots(filepath.Join(t.TempDir(), "none.json.gz"), "x", ydoc.KindNotebook, 1); err != nil || len(s.snaps) != 0 {
		t.Errorf("a missing file: %v", err)
	}
}

// Many tiny edits: each version's bookkeeping counts against the budget, so the number of
// versions is bounded too, not only their content.
func TestSnapshotBudgetCountsVersionBookkeeping(t *testing.T) {
	const budget = 64 << 10
	f := newSnapFixture(t, budget)
	for i := 0; i < 2000; i++ {
		f.now = f.now.Add(time.Minute) // no coalescing
		f.edit(true, "agent", func(tx *ydoc.Txn) error { return tx.SetSource(0, fmt.Sprintf("a = %d", i)) })
	}
	if f.s.used > budget {
		t.Errorf("store uses %d bytes, budget %d", f.s.used, budget)
	}
	if n, max := len(f.s.snaps), budget/snapshotOverhead(f.s.last().Content); n > max {
		t.Errorf("%d versions kept; the budget holds at most %d", n, max)
	}
}

// A version is derived from the one before by touching only the chunks of the cells a change
// names. Over a random run of edits on a notebook large enough for many chunks (inserts at the
// start, middle and end, deletes, moves, type changes, sources, metadata, outputs, invisible
// state, other people's typing that coalesces), it must hold exactly what computing every
// version from scratch holds, and list the same versions with the same summaries.
func TestSnapshotsIncrementalMatchesScratch(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			d, err := ydoc.NewDoc(ydoc.KindNotebook, 91, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			var initial []ydoc.Cell
			for i := 0; i < 300; i++ {
				initial = append(initial, ydoc.Cell{ID: fmt.Sprintf("c%d", i), Type: "code", Source: fmt.Sprintf("x = %d", i)})
			}
			if _, _, err := d.Transact(func(tx *ydoc.Txn) error { return tx.InsertCells(0, initial) }); err != nil {
				t.Fatal(err)
			}
			inc := newSnapshotStore(ydoc.KindNotebook, 64<<20)
			scratch := newSnapshotStore(ydoc.KindNotebook, 64<<20)
			now := time.Unix(1_800_000_000, 0)
			for _, s := range []*snapshotStore{inc, scratch} {
				if err := s.observe(d, ydoc.Change{}, "v-0", nil, now, true); err != nil {
					t.Fatal(err)
				}
			}
			next := 1000
			for step := 1; step <= 400; step++ {
				agent := rng.Intn(3) == 0
				op := rng.Intn(9)
				_, c, err := d.Transact(func(tx *ydoc.Txn) error {
					if agent {
						tx.Undoable()
					}
					n := tx.NumCells()
					switch {
					case op == 0 || n < 5:
						next++
						at := []int{0, n / 2, n, rng.Intn(n + 1)}[rng.Intn(4)]
						return tx.InsertCells(at, []ydoc.Cell{{ID: fmt.Sprintf("c%d", next), Type: "markdown", Source: "new"}, {ID: fmt.Sprintf("c%d", next+5000), Source: "more"}})
					case op == 1:
						return tx.DeleteCells(rng.Intn(n-2), 1+rng.Intn(2))
					case op == 2:
						return tx.MoveCells(rng.Intn(n), 1, rng.Intn(n))
					case op == 3:
						return tx.SetCellType(rng.Intn(n), []string{"code", "markdown", "raw"}[rng.Intn(3)])
					case op == 4:
						return tx.SetCellMetadata(rng.Intn(n), map[string]any{"tags": []any{fmt.Sprint(step)}})
					case op == 5:
						return tx.SetState("dirty", rng.Intn(2) == 0)
					case op == 6:
						i := rng.Intn(n)
						if c, _ := tx.Cell(i); c.Type == "code" {
							return tx.AppendOutput(i, map[string]any{"output_type": "stream", "name": "stdout", "text": "out\n"})
						}
						return nil
					default:
						return tx.SetSource(rng.Intn(n), fmt.Sprintf("edited %d", step))
					}
				})
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				c.Local = agent
				now = now.Add(time.Duration(rng.Intn(4000)) * time.Millisecond)
				v := Version(fmt.Sprintf("v-%d", step))
				authors := []string{"Alice"}
				if agent {
					authors = []string{"agent"}
				}
				if err := inc.observe(d, c, v, authors, now, false); err != nil {
					t.Fatal(err)
				}
				scratch.indexed = false // from scratch every time
				if err := scratch.observe(d, c, v, authors, now, false); err != nil {
					t.Fatal(err)
				}
				if !inc.indexed {
					t.Fatalf("step %d: the incremental store lost its index", step)
				}
				if len(inc.snaps) != len(scratch.snaps) {
					t.Fatalf("step %d: %d versions, from scratch %d", step, len(inc.snaps), len(scratch.snaps))
				}
				a, b := inc.last(), scratch.last()
				if a.Version != b.Version || a.Content.Header != b.Content.Header || !slices.Equal(a.Content.cells(), b.Content.cells()) {
					t.Fatalf("step %d: newest version differs from the one computed from scratch", step)
				}
				for id, ch := range inc.where {
					if !slices.ContainsFunc(ch.cells, func(cr [2]string) bool { return cr[0] == id }) || !slices.Contains(a.Content.Chunks, ch) {
						t.Fatalf("step %d: index of %s points elsewhere", step, id)
					}
				}
				if len(inc.where) != d.NumCells() {
					t.Fatalf("step %d: index holds %d cells of %d", step, len(inc.where), d.NumCells())
				}
				for _, ch := range a.Content.Chunks {
					if len(ch.cells) == 0 || len(ch.cells) >= chunkMax {
						t.Fatalf("step %d: a chunk of %d cells", step, len(ch.cells))
					}
				}
			}
			la, lb := inc.list(), scratch.list()
			if len(la) != len(lb) {
				t.Fatalf("%d versions listed, from scratch %d", len(la), len(lb))
			}
			for i := range la {
				if la[i].Version != lb[i].Version || la[i].Summary != lb[i].Summary {
					t.Errorf("version %d: %+v, from scratch %+v", i, la[i], lb[i])
				}
			}
			for _, sn := range inc.snaps[max(0, len(inc.snaps)-20):] {
				got, err := inc.notebook(sn)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := scratch.find(sn.Version)
				wantNB, _ := scratch.notebook(want)
				if !reflect.DeepEqual(got, wantNB) {
					t.Fatalf("version %s restores differently", sn.Version)
				}
			}
			// Sharing: the versions together hold far fewer chunk entries than cells × versions.
			chunks := map[*cellChunk]bool{}
			entries, cells := 0, 0
			for _, sn := range inc.snaps {
				cells += sn.Content.numCells()
				for _, ch := range sn.Content.Chunks {
					if !chunks[ch] {
						chunks[ch] = true
						entries += len(ch.cells)
					}
				}
			}
			if entries*4 > cells {
				t.Errorf("%d versions of ~300 cells hold %d distinct chunk entries: chunks are not shared", len(inc.snaps), entries)
			}
		})
	}
}
