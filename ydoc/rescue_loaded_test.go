package ydoc

import (
	"fmt"
	"strings"
	"testing"
)

// A human who reloaded typed into the rebuilt room before the sidecar came back, and the server
// saved it: the file holds content the replica never held, though nobody changed it outside.
// The room was loaded from a save the replica held, so the rescue restores (both the replica's
// unsaved typing and the human's stay, once) instead of letting the file win. A file that was
// really changed outside before the restart still wins.
func TestRescueFileHoldsTypingSavedSinceTheRebuild(t *testing.T) {
	for _, mode := range []rebuildMode{rebuildFresh, rebuildDeterministic} {
		for _, outside := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/outside=%v", mode, outside), func(t *testing.T) {
				sc := lostScenario{mode: mode, save: true, cells: 8}
				lr := sc.run(t)
				loaded := asRead(t, lr.saved, false)
				if outside {
					for i, c := range loaded.Cells {
						if c.ID == "cell-05" {
							loaded.Cells[i].Source = "# rewritten outside"
						}
					}
				}
				srv2 := roomFrom(t, mode, Snapshot{Kind: KindNotebook, Notebook: loaded}, lr.srv.doc)
				moveTo(lr.agent, srv2)
				human := newConn(t, srv2, "human", KindNotebook)
				human.connect()
				srv2.flush()
				human.propose(900, appendSource("cell-02", " typed since the restart"))
				srv2.flush()
				// The server saved the rebuilt room: the file the sidecar reads.
				file := Snapshot{Kind: KindNotebook, Notebook: asRead(t, readNotebook(t, srv2.doc), false)}
				if err := lr.agent.replica.ResetServerLost(freshClientID()); err != nil {
					t.Fatal(err)
				}
				h := lr.agent.replica.History()
				if h == nil {
					var err error
					if h, err = NewHistory(KindNotebook, MatchOptions{}, lr.agent.replica.log); err != nil {
						t.Fatal(err)
					}
					h.NoteSaved(Snapshot{Kind: KindNotebook, Notebook: asRead(t, lr.saved, false)})
					h.NoteSaved(Snapshot{Kind: KindNotebook, Notebook: asRead(t, lr.held, false)})
					if err := lr.agent.replica.KeepHistory(h); err != nil {
						t.Fatal(err)
					}
				}
				if h.Held(file) {
					t.Fatal("the replica held the file: nothing to test")
				}
				old := Snapshot{Kind: KindNotebook, Notebook: lr.first} // a stale last save
				lr.agent.replica.FileWins(&old, file, "the file changed outside Jupyter")
				lr.agent.connect()
				srv2.flush()
				rep := lr.agent.rescue
				if rep == nil || !rep.Restored {
					t.Fatalf("report %+v", rep)
				}
				if rep.FileWins == (rep.Reconsidered != "") || rep.FileWins != outside {
					t.Errorf("file wins %v, reconsidered %q: want file wins %v", rep.FileWins, rep.Reconsidered, outside)
				}
				src := cellSource(t, srv2.doc, "cell-02")
				for _, want := range []string{"# typed after the save", "typed since the restart"} {
					n := strings.Count(src, want)
					if outside && want == "# typed after the save" && n == 0 && len(rep.NotRestored) > 0 {
						continue // both typed at the end of the cell: the file wins that conflict
					}
					if n != 1 {
						t.Errorf("cell-02 %q holds %q %d times", src, want, n)
					}
				}
				for _, id := range []string{"agent-2", "agent-3"} {
					if n := countCells(t, srv2.doc, id); n != 1 {
						t.Errorf("%s there %d times", id, n)
					}
				}
				srv2.requireConverged()
			})
		}
	}
}

// The file was changed outside Jupyter while the server was down (a cell added), and the server
// had saved by itself before the crash without the sidecar hearing of it: the last save the
// replica knows is older than the one the file came from. The rescue merges against the save the
// file came from (the file without the cell added outside is a version the replica held), so the
// typing between the two saves and after them stays, once, beside the cell added outside
// (TestFaultInjection's rounds that change the file outside lost up to 19 keystrokes this way).
func TestRescueFileWinsAgainstTheSaveTheFileCameFrom(t *testing.T) {
	for _, mode := range []rebuildMode{rebuildFresh, rebuildDeterministic} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			sc := lostScenario{mode: mode, save: true, cells: 8}
			lr := sc.run(t)
			// After the save nobody heard of, the human types on where they typed before it.
			lr.tab.propose(2000, appendSource("cell-01", " and on after it"))
			lr.srv.flush()
			lr.held = readNotebook(t, lr.srv.doc)
			// The file: the save, and a cell added outside Jupyter while the server was down.
			loaded := asRead(t, lr.saved, false)
			loaded.Cells = append(loaded.Cells, Cell{ID: "outside-1", Type: CellMarkdown, Source: "added outside", Metadata: map[string]any{}})
			file := Snapshot{Kind: KindNotebook, Notebook: loaded}
			srv2 := roomFrom(t, mode, file, lr.srv.doc)
			moveTo(lr.agent, srv2)
			if err := lr.agent.replica.ResetServerLost(freshClientID()); err != nil {
				t.Fatal(err)
			}
			h := lr.agent.replica.History()
			if h == nil {
				var err error
				if h, err = NewHistory(KindNotebook, MatchOptions{}, lr.agent.replica.log); err != nil {
					t.Fatal(err)
				}
				h.NoteSaved(Snapshot{Kind: KindNotebook, Notebook: asRead(t, lr.saved, false)})
				h.NoteSaved(Snapshot{Kind: KindNotebook, Notebook: asRead(t, lr.held, false)})
				if err := lr.agent.replica.KeepHistory(h); err != nil {
					t.Fatal(err)
				}
			}
			old := Snapshot{Kind: KindNotebook, Notebook: lr.first} // the last save the replica heard of
			lr.agent.replica.FileWins(&old, file, "the file changed outside Jupyter")
			lr.agent.connect()
			srv2.flush()
			rep := lr.agent.rescue
			if rep == nil || !rep.Restored || !rep.FileWins {
				t.Fatalf("report %+v", rep)
			}
			for id, wants := range map[string][]string{
				"cell-01": {"# typed before the save", " and on after it"},
				"cell-02": {"# typed after the save"},
			} {
				src := cellSource(t, srv2.doc, id)
				for _, want := range wants {
					if n := strings.Count(src, want); n != 1 {
						t.Errorf("%s %q holds %q %d times", id, src, want, n)
					}
				}
			}
			for _, id := range []string{"agent-1", "agent-2", "agent-3", "outside-1"} {
				if n := countCells(t, srv2.doc, id); n != 1 {
					t.Errorf("%s there %d times", id, n)
				}
			}
			srv2.requireConverged()
		})
	}
}

// The server saved by itself, in its own order of everyone's updates: the file holds the human's
// typing in cell-02 but not the agent's cells inserted before it (the replica applied its own
// edits first), so no version the replica held is the file as a whole, with or without the cell
// added outside Jupyter. And the last save the replica knows is either older than the file, or
// newer than what the server wrote (the content noted when the save was announced, after more
// typing in cell-01). A human who reloaded types at the end of cell-01 before the sidecar is
// back, where the replica's unsaved typing went. Each of the file's cells the replica held is
// that cell's base, merged as a restore merges (both typings kept): all the typing stays once,
// the agent's cells and its deletion stand, and the cell added outside stays.
// (TestFaultInjection's rounds that change the file outside lost up to 9 keystrokes this way.)
func TestRescueFileWinsMergesEachCellAgainstTheVersionItWasSavedFrom(t *testing.T) {
	for _, mode := range []rebuildMode{rebuildFresh, rebuildDeterministic} {
		for _, lastSave := range []string{"older", "newer"} {
			t.Run(fmt.Sprintf("%s/last-save-%s", mode, lastSave), func(t *testing.T) {
				sc := lostScenario{mode: mode, save: true, cells: 8, history: true}
				lr := sc.run(t)
				saved02 := cellSource(t, lr.srv.doc, "cell-02") // typed after the save
				lr.tab.propose(2000, appendSource("cell-01", " and on after it"))
				lr.srv.flush()
				announced := asRead(t, readNotebook(t, lr.srv.doc), false)
				// The file: the save before the agent's cells, with the human's typing in cell-02
				// the server had applied first, and a cell added outside while the server was down.
				loaded := asRead(t, lr.saved, false)
				for i, c := range loaded.Cells {
					if c.ID == "cell-02" {
						loaded.Cells[i].Source = saved02
					}
				}
				loaded.Cells = append(loaded.Cells, Cell{ID: "outside-1", Type: CellMarkdown, Source: "added outside", Metadata: map[string]any{}})
				file := Snapshot{Kind: KindNotebook, Notebook: loaded}
				h := lr.agent.replica.History()
				without := file
				without.Notebook.Cells = loaded.Cells[:len(loaded.Cells)-1]
				if h.Held(file) || h.Held(without) {
					t.Fatal("the replica held the file as a whole: nothing to test")
				}
				srv2 := roomFrom(t, mode, file, lr.srv.doc)
				moveTo(lr.agent, srv2)
				// A human who reloaded types on at the end of cell-01 before the sidecar is back,
				// where the replica's unsaved typing went too.
				human := newConn(t, srv2, "human", KindNotebook)
				human.connect()
				srv2.flush()
				human.propose(900, appendSource("cell-01", " typed since the restart"))
				srv2.flush()
				if err := lr.agent.replica.ResetServerLost(freshClientID()); err != nil {
					t.Fatal(err)
				}
				last := Snapshot{Kind: KindNotebook, Notebook: lr.first}
				if lastSave == "newer" {
					last.Notebook = announced
				}
				lr.agent.replica.FileWins(&last, file, "the file changed outside Jupyter")
				lr.agent.connect()
				srv2.flush()
				rep := lr.agent.rescue
				if rep == nil || !rep.Restored || !rep.FileWins {
					t.Fatalf("report %+v", rep)
				}
				if len(rep.NotRestored) > 0 {
					t.Errorf("not restored: %v", rep.NotRestored)
				}
				for id, wants := range map[string][]string{
					"cell-01": {"# typed before the save", " and on after it", " typed since the restart"},
					"cell-02": {"# typed after the save"},
				} {
					src := cellSource(t, srv2.doc, id)
					for _, want := range wants {
						if n := strings.Count(src, want); n != 1 {
							t.Errorf("%s %q holds %q %d times", id, src, want, n)
						}
					}
				}
				for id, want := range map[string]int{"agent-1": 1, "agent-2": 1, "agent-3": 1, "outside-1": 1, "cell-06": 0} {
					if n := countCells(t, srv2.doc, id); n != want {
						t.Errorf("%s there %d times, want %d", id, n, want)
					}
				}
				srv2.requireConverged()
			})
		}
	}
}
