package ydoc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A human goes on typing into the rebuilt room while the sidecar joins and rescues: what they
// type until the rescue reaches them lands in the cells as they had them, and a rescue that
// deleted such a cell (the rebuild's copy, restored by id; a cell a restore by content moved)
// must not take it with it. The keystrokes reach the server before the rescue, after it, or —
// as on jupyter-server-documents, which holds every broadcast during a handshake — all of it
// comes as one catch-up diff with the room's whole delete set. Every keystroke is there once, in
// the live cell, and the sidecar, the humans, an old tab merging its copy and the server agree.
func TestRescueKeepsTypingDuringTheJoin(t *testing.T) {
	type order int
	const (
		beforeRescue order = iota
		afterRescue
		catchUp
	)
	names := []string{"keystrokes before the rescue", "keystrokes after the rescue", "catch-up diff"}
	type tc struct {
		mode     rebuildMode
		fileWins bool
		tabFirst bool // the old tab merged its copy back before the sidecar came
		order    order
	}
	var cases []tc
	for _, o := range []order{beforeRescue, afterRescue, catchUp} {
		cases = append(cases,
			tc{mode: rebuildFresh, order: o},
			tc{mode: rebuildFresh, fileWins: true, order: o},
			tc{mode: rebuildDeterministic, order: o},
			tc{mode: rebuildStore, order: o})
		if o != afterRescue { // the old tab types into its own copy of the cell, which stays
			cases = append(cases, tc{mode: rebuildFresh, tabFirst: true, order: o})
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/file wins=%v/tab first=%v/%s", c.mode, c.fileWins, c.tabFirst, names[c.order]), func(t *testing.T) {
			sc := lostScenario{mode: c.mode, save: true, cells: 8}
			lr := sc.run(t)
			file := Snapshot{Kind: KindNotebook, Notebook: asRead(t, lr.saved, false)}
			if c.fileWins {
				file.Notebook.Cells = append(file.Notebook.Cells, Cell{ID: "outside", Type: CellMarkdown, Source: "added outside"})
			}
			srv2 := roomFrom(t, c.mode, file, lr.srv.doc)
			moveTo(lr.agent, srv2)
			moveTo(lr.tab, srv2)
			if err := lr.agent.replica.ResetServerLost(freshClientID()); err != nil {
				t.Fatal(err)
			}
			if c.fileWins {
				base := Snapshot{Kind: KindNotebook, Notebook: lr.saved}
				lr.agent.replica.FileWins(&base, file, "the file changed outside Jupyter")
			} else {
				lr.agent.replica.RescueFrom(file)
			}
			if c.tabFirst {
				lr.tab.connect()
			}
			human := newConn(t, srv2, "human", KindNotebook)
			human.connect()
			srv2.flush()
			n := 0
			typed := []string{}
			typeKey := func() {
				n++
				tok := fmt.Sprintf(" k%02d", n)
				typed = append(typed, tok)
				human.propose(uint64(700+n), func(tx *Txn, _ bool) error {
					i := tx.CellIndex("cell-04")
					cell, err := tx.Cell(i)
					if err != nil {
						return err
					}
					return tx.SetSource(i, cell.Source+tok)
				})
			}
			typeKey()
			srv2.flush()
			pre := srv2.doc.StateVector()
			srv2.hold = c.order == catchUp
			lr.agent.connect()
			lr.agent.deliverToServer()
			lr.agent.deliverToClient() // synced: the rescue is on its way
			if lr.agent.rescue == nil || !lr.agent.rescue.Restored {
				t.Fatalf("rescue %+v", lr.agent.rescue)
			}
			typeKey()
			switch c.order {
			case beforeRescue:
				human.deliverToServer()
				lr.agent.deliverToServer()
			case afterRescue:
				lr.agent.deliverToServer()
				human.deliverToServer()
			case catchUp:
				human.deliverToServer()
				lr.agent.deliverToServer()
				typeKey()
				human.deliverToServer()
				srv2.hold = false
				srv2.catchUp(pre)
			}
			typeKey() // before the human heard of anything
			srv2.flush()
			typeKey() // after
			srv2.flush()
			if c.tabFirst != lr.agent.replica.StrayWatch() {
				t.Errorf("following stray typing: %v", lr.agent.replica.StrayWatch())
			}
			src := cellSource(t, srv2.doc, "cell-04")
			for _, tok := range typed {
				if k := strings.Count(src, tok); k != 1 {
					t.Errorf("%q there %d times in cell-04 %q", tok, k, src)
				}
			}
			if src := cellSource(t, srv2.doc, "cell-02"); !strings.Contains(src, "# typed after the save") {
				t.Errorf("cell-02 lost the replica's unsaved typing: %q", src)
			}
			if countCells(t, srv2.doc, "cell-04") != 1 {
				t.Errorf("cell-04 there %d times", countCells(t, srv2.doc, "cell-04"))
			}
			if !c.tabFirst {
				lr.tab.connect()
				srv2.flush()
			}
			if got := cellSource(t, srv2.doc, "cell-04"); got != src {
				t.Errorf("the old tab's merge changed cell-04: %q, was %q", got, src)
			}
			if c.mode == rebuildDeterministic {
				// Its copy holds other content under the ids the rebuild reused: it must reload
				// (jupyter-collaboration #621); the room and everyone else hold the content once.
				srv2.conns = slices.DeleteFunc(srv2.conns, func(c *fakeConn) bool { return c == lr.tab })
			}
			srv2.requireConverged()
		})
	}
}

func TestWithoutDeletes(t *testing.T) {
	d := newTestDoc(t, KindNotebook)
	load, _ := transact(t, d, func(tx *Txn) error { return tx.LoadNotebook(bigNotebook(4)) })
	del, _ := transact(t, d, func(tx *Txn) error { return tx.DeleteCells(1, 2) })
	meta, err := ParseUpdate(del)
	if err != nil || len(meta.Deletes) < 2 {
		t.Fatalf("%v %+v", err, meta)
	}
	drop := IDSet{}
	drop.AddAll(meta.Deletes)
	none, err := withoutDeletes(del, drop)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ParseUpdate(none); err != nil || !m.Empty() {
		t.Errorf("%v %+v: want nothing left", err, m)
	}
	other := newTestDoc(t, KindNotebook)
	apply(t, other, load)
	apply(t, other, none)
	if n := len(readNotebook(t, other).Cells); n != 4 {
		t.Errorf("%d cells after applying without the deletions, want 4", n)
	}
	keep := IDSet{}
	keep.AddAll(meta.Deletes[1:])
	one, err := withoutDeletes(del, keep)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := ParseUpdate(one); len(m.Deletes) != 1 || m.Deletes[0] != meta.Deletes[0] {
		t.Errorf("deletes %v, want only %v", m.Deletes, meta.Deletes[0])
	}
	if got := subtractRange(IDRange{1, 0, 10}, []IDRange{{1, 2, 3}, {1, 7, 1}}); fmt.Sprint(got) != "[{1 0 2} {1 5 2} {1 8 2}]" {
		t.Errorf("subtract %v", got)
	}
	if got := subtractRange(IDRange{1, 4, 2}, []IDRange{{1, 0, 10}}); len(got) != 0 {
		t.Errorf("subtract %v", got)
	}
}
