package ydoc

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	y "github.com/skyterra/y-crdt"
)

// The kept cell order (cellorder.go) against the array itself: after every local and remote
// transaction of a random run — inserts, deletes, moves, type changes, restores, undo and redo,
// foreign writers' non-cell values, repeated ids and rewritten ids, several changes in one
// transaction, updates delivered late and out of order — the order must equal a walk of the
// array, and the change must report what comparing the whole orders before and after reports.

// orderSnapshot is a walk of the array (y-crdt lock taken here).
func orderSnapshot(t *testing.T, d *Doc) ([]string, []*y.YMap) {
	t.Helper()
	var ids []string
	var maps []*y.YMap
	if err := d.run(func() error {
		ids, maps = walkCells(d.cells)
		return nil
	}); err != nil {
		t.Fatalf("walk: %v", err)
	}
	return ids, maps
}

// checkOrder compares the kept order with the array, and a change's structural part with the
// whole-order comparison from before to after.
func checkOrder(t *testing.T, step string, d *Doc, beforeIDs []string, beforeMaps []*y.YMap, ch Change) {
	t.Helper()
	ids, maps := orderSnapshot(t, d)
	if !slices.Equal(ids, d.ord.ids) || !slices.Equal(maps, d.ord.maps) {
		t.Fatalf("%s: kept order %v, array holds %v", step, d.ord.ids, ids)
	}
	for i, id := range ids {
		if !d.ord.dup && d.ord.byID[id] != maps[i] {
			t.Fatalf("%s: byID[%q] is not the map at %d", step, id, i)
		}
	}
	if !d.ord.dup && len(d.ord.byID) != len(ids) {
		t.Fatalf("%s: byID holds %d ids for %d cells", step, len(d.ord.byID), len(ids))
	}
	var want Change
	if !slices.Equal(beforeMaps, maps) || !slices.Equal(beforeIDs, ids) {
		diffOrder(&want, beforeIDs, beforeMaps, ids, maps)
	}
	want = want.normalize()
	replaced := func(c Change) []string {
		var out []string
		for _, cc := range c.Cells {
			if slices.Contains(cc.Fields, "*") {
				out = append(out, cc.ID)
			}
		}
		return out
	}
	if !slices.Equal(ch.Inserted, want.Inserted) || !slices.Equal(ch.Deleted, want.Deleted) ||
		ch.Moved != want.Moved || !slices.Equal(replaced(ch), replaced(want)) {
		t.Fatalf("%s: change inserted %v deleted %v moved %v replaced %v; whole-order comparison: inserted %v deleted %v moved %v replaced %v",
			step, ch.Inserted, ch.Deleted, ch.Moved, replaced(ch), want.Inserted, want.Deleted, want.Moved, replaced(want))
	}
}

func TestCellOrderFollowsEveryTransaction(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runOrderModel(t, seed, 200, true) })
	}
}

// Without foreign writers (repeated or rewritten ids) the order always matches the array: no
// transaction needs a rebuild because of a cell it could not place. (Concurrent moves of one
// cell still leave two cells with its id, and while they exist the order is rebuilt.)
func TestCellOrderIsIncremental(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runOrderModel(t, seed, 200, false) })
	}
}

func runOrderModel(t *testing.T, seed int64, steps int, foreign bool) {
	rng := rand.New(rand.NewSource(seed))
	a, b := newTestDoc(t, KindNotebook), newTestDoc(t, KindNotebook)
	next := 0
	newCells := func(n int) []Cell {
		out := make([]Cell, n)
		for i := range out {
			next++
			typ := []string{CellCode, CellMarkdown, CellRaw}[rng.Intn(3)]
			out[i] = Cell{ID: fmt.Sprintf("c%d", next), Type: typ, Source: fmt.Sprintf("src %d", next)}
		}
		return out
	}
	u, _ := transact(t, a, func(tx *Txn) error { return tx.InsertCells(0, newCells(12)) })
	apply(t, b, u)
	queue := map[*Doc][][]byte{} // updates waiting to be delivered to each doc
	other := func(d *Doc) *Doc {
		if d == a {
			return b
		}
		return a
	}
	for step := 0; step < steps; step++ {
		d := a
		if rng.Intn(2) == 1 {
			d = b
		}
		// Deliver some waiting updates first, sometimes out of order.
		if q := queue[d]; len(q) > 0 && rng.Intn(3) > 0 {
			i := 0
			if rng.Intn(4) == 0 {
				i = rng.Intn(len(q))
			}
			beforeIDs, beforeMaps := orderSnapshot(t, d)
			_, ch := apply(t, d, q[i])
			queue[d] = slices.Delete(q, i, i+1)
			checkOrder(t, fmt.Sprintf("step %d: remote update", step), d, beforeIDs, beforeMaps, ch)
			continue
		}
		beforeIDs, beforeMaps := orderSnapshot(t, d)
		op := rng.Intn(14)
		var name string
		u, ch, err := d.Transact(func(tx *Txn) error {
			n := tx.NumCells()
			if d == a {
				tx.Undoable()
			}
			switch {
			case op == 0 || n == 0:
				name = "insert"
				return tx.InsertCells(rng.Intn(n+1), newCells(1+rng.Intn(3)))
			case op == 1:
				name = "delete"
				i := rng.Intn(n)
				return tx.DeleteCells(i, 1+rng.Intn(min(3, n-i)))
			case op == 2 && n > 1:
				name = "move"
				from := rng.Intn(n)
				count := 1 + rng.Intn(min(2, n-from))
				return tx.MoveCells(from, count, rng.Intn(n-count+1))
			case op == 3:
				name = "cell type"
				return tx.SetCellType(rng.Intn(n), []string{CellCode, CellMarkdown, CellRaw}[rng.Intn(3)])
			case op == 4:
				name = "source"
				return tx.SetSource(rng.Intn(n), fmt.Sprintf("edited %d", step))
			case op == 5:
				name = "restore"
				nb := tx.d.readNotebook()
				seen := map[string]bool{}
				nb.Cells = slices.DeleteFunc(nb.Cells, func(c Cell) bool {
					drop := !ValidCellType(c.Type) || seen[c.ID]
					seen[c.ID] = true
					return drop
				})
				rng.Shuffle(len(nb.Cells), func(i, j int) { nb.Cells[i], nb.Cells[j] = nb.Cells[j], nb.Cells[i] })
				nb.Cells = append(nb.Cells[:rng.Intn(len(nb.Cells)+1)], newCells(rng.Intn(3))...)
				_, err := tx.RestoreNotebook(nb)
				return err
			case op == 6 && d == a:
				name = "undo"
				if err := tx.Undo(); err != nil && err != ErrNothingToUndo {
					return err
				}
				return nil
			case op == 7 && d == a:
				name = "redo"
				if err := tx.Redo(); err != nil && err != ErrNothingToRedo {
					return err
				}
				return nil
			case op == 8:
				name = "insert, read, delete, insert in one transaction"
				i := rng.Intn(n + 1)
				if err := tx.InsertCells(i, newCells(2)); err != nil {
					return err
				}
				if tx.NumCells() != n+2 || tx.CellIndex(tx.CellID(i)) != i {
					return fmt.Errorf("inside the transaction the order is stale")
				}
				if err := tx.DeleteCells(rng.Intn(n+2), 1); err != nil {
					return err
				}
				return tx.InsertCells(rng.Intn(n+2), newCells(1))
			case op == 9:
				name = "delete and re-create a cell under its id"
				i := rng.Intn(n)
				c, err := tx.Cell(i)
				if err != nil {
					return err
				}
				if err := tx.DeleteCells(i, 1); err != nil {
					return err
				}
				if tx.CellIndex(c.ID) >= 0 {
					return nil // another cell carries the id
				}
				return tx.InsertCells(rng.Intn(n), []Cell{c})
			case op == 10 && foreign && rng.Intn(2) == 0:
				name = "foreign value"
				tx.d.cells.Insert(rng.Intn(tx.d.cells.GetLength()+1), y.ArrayAny{"not a cell"})
				return nil
			case op == 11 && foreign && rng.Intn(3) == 0:
				name = "repeated id"
				m := y.NewYMap(nil)
				tx.d.cells.Insert(rng.Intn(tx.d.cells.GetLength()+1), y.ArrayAny{m})
				return setMapAny(tx.tr, m, "id", tx.CellID(rng.Intn(n)))
			case op == 12 && foreign && rng.Intn(2) == 0:
				name = "rewritten id"
				m, err := tx.cellMap(rng.Intn(n))
				if err != nil {
					return err
				}
				next++
				return setMapAny(tx.tr, m, "id", fmt.Sprintf("r%d", next))
			default:
				name = "metadata"
				return tx.SetCellMetadata(rng.Intn(n), map[string]any{"k": step})
			}
		})
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, name, err)
		}
		checkOrder(t, fmt.Sprintf("step %d: %s", step, name), d, beforeIDs, beforeMaps, ch)
		if u != nil {
			o := other(d)
			queue[o] = append(queue[o], u)
		}
	}
	// Deliver everything: both converge, and their orders still match their arrays.
	for _, d := range []*Doc{a, b} {
		for _, u := range queue[d] {
			beforeIDs, beforeMaps := orderSnapshot(t, d)
			_, ch := apply(t, d, u)
			checkOrder(t, "final delivery", d, beforeIDs, beforeMaps, ch)
		}
	}
	for _, pair := range [][2]*Doc{{a, b}, {b, a}} {
		beforeIDs, beforeMaps := orderSnapshot(t, pair[1])
		_, ch := apply(t, pair[1], fullUpdate(t, pair[0]))
		checkOrder(t, "full sync", pair[1], beforeIDs, beforeMaps, ch)
	}
	if !foreign && a.ord.mismatches+b.ord.mismatches > 0 {
		t.Errorf("the order did not match the array %d times without a foreign writer", a.ord.mismatches+b.ord.mismatches)
	}
}
