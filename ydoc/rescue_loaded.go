package ydoc

import (
	"slices"

	y "github.com/skyterra/y-crdt"
)

// What the room was rebuilt from. A decision taken before the join compares the file with the
// versions the replica held; but the room moves on between the restart and the sidecar's join:
// people who reloaded type into it, and a server that saves by itself (jupyter-server-documents
// every half second, jupyter-collaboration a second after a change) writes their typing to the
// file. The file then holds content no version of the replica held, though nobody changed it
// outside Jupyter: taken for an outside change, it would win every conflict with the replica's
// unsaved changes (typing both made at the end of one cell, for one). What the room was loaded
// from is still in the room: the items of the client that loaded it into a fresh document (the
// server's own, random on jupyter-server-documents, 0 on jupyter-collaboration without its
// store), apart from what others added since. When that content is a version the replica held,
// the room was rebuilt from a save of the server: the rescue restores over it, with it as the
// merge's base, whatever the file says by now.

// loadedContent returns the content the room was loaded from: the room (at the sync) with every
// item of a client other than the loaders deleted, on a scratch copy. ok is false when no
// loader is found (a room rebuilt from its store over the lost replica's own items, a text the
// lost replica already shared) or the copy cannot be made. Someone's deletion of loaded content
// since the load cannot be undone (the server collected it): the result then differs from what
// was loaded, and is not matched.
func (s *Replica) loadedContent(lostSV StateVector) (Snapshot, bool) {
	var loaders map[int]bool
	_ = s.doc.run(func() error {
		if s.kind == KindText {
			loaders = s.doc.textLoaders(lostSV)
		} else {
			loaders = loaderClients(s.doc.cells, lostSV)
		}
		return nil
	})
	if roomSV := s.doc.StateVector(); roomSV[0] > 0 && !loaders[0] {
		// jupyter-collaboration without its store loads as client 0, under the ids of the lost
		// replica's first load when the file did not grow: client 0 is the loader unless the
		// room holds the lost replica's other items too (a store's, or a peer's old copy).
		shared := false
		for c := range roomSV {
			if c != 0 && lostSV[c] > 0 {
				shared = true
			}
		}
		if !shared {
			if loaders == nil {
				loaders = map[int]bool{}
			}
			loaders[0] = true
		}
	}
	if len(loaders) == 0 {
		return Snapshot{}, false
	}
	room, err := s.doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return Snapshot{}, false
	}
	scratch, err := newScratchDoc(s.kind, s.log)
	if err != nil {
		return Snapshot{}, false
	}
	if _, _, err := scratch.Apply(room); err != nil {
		return Snapshot{}, false
	}
	_, _, err = scratch.Transact(func(tx *Txn) error {
		var walk func(t y.IAbstractType)
		visit := func(n *y.Item) {
			if n.Deleted() {
				return
			}
			if !loaders[n.ID.Client] {
				n.Delete(tx.tr)
				return
			}
			if ct, ok := n.Content.(*y.ContentType); ok {
				walk(ct.Type)
			}
		}
		walk = func(t y.IAbstractType) {
			for n := t.StartItem(); n != nil; n = n.Right {
				visit(n)
			}
			for _, n := range t.GetMap() {
				visit(n)
			}
		}
		for name, t := range scratch.yd.Share {
			if name == rootState {
				continue
			}
			walk(t)
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, false
	}
	snap, err := scratch.Snapshot()
	if err != nil {
		return Snapshot{}, false
	}
	return snap, true
}

// reconsider turns a FileWins plan into a restore when the room was rebuilt from a version the
// replica held before the loss (see above; the versions since include the rebuilt room itself): the file holds the room's changes since, saved by the server. It
// returns why, or "".
func (s *Replica) reconsider(lost *lostReplica, plan *rescuePlan) string {
	if plan.kind != planFileWins || s.history == nil {
		return ""
	}
	loaded, ok := s.loadedContent(lost.doc.StateVector())
	if !ok || !(s.history.heldBefore(loaded, s.lostMark) || s.serverHist != nil && s.serverHist.Held(loaded)) {
		return ""
	}
	*plan = rescuePlan{kind: planRestore, base: &loaded, file: &loaded}
	return "the room was rebuilt from a version the replica held; the file's content the replica never held was typed into the rebuilt room since and saved by the server, not changed outside: restored over the rebuilt room"
}

// rebase gives a FileWins plan of a notebook, cell by cell, the version each cell of the file
// was saved from. The base a FileWins plan comes with is the last save the replica heard of, and
// it is the wrong ancestor for cells the server saved since: a save the server made by itself
// and never announced (jupyter-collaboration's autosave, whose publication a keystroke cancels)
// is newer, and the content noted when a save was announced is newer than what the server wrote
// (typing and agents' cells went on while it wrote). Against the older base, typing between the
// two counts as changed on both sides; against the newer one, as deleted by the file: lost
// either way. Nor is the file, saved by the server in its own order of everyone's updates,
// usually a version the replica held as a whole. But each of its cells that nobody changed
// outside Jupyter is a version of that cell the replica held (same id, same content):
//   - that version is the cell's base: the replica's changes since are its own (a cell the
//     replica held and deleted since is in the base, so that the deletion stands), and what
//     people typed into it in the rebuilt room is merged beside them as a restore merges it
//     (savedCells), not over them;
//   - a cell of the base that the file lacks is newer than the save when the replica first held
//     its version after every cell version the file holds (the others' cells: the replica
//     applies them in the server's order), or when one of the replica's own edits not proven
//     saved at the loss made it (pending: its own edits it may have applied before others' that
//     the server applied first). The file then does not say it was deleted: it leaves the base
//     and stays. Otherwise a file that lacks it deletes it, as a cell deleted outside;
//   - the file's other cells (changed outside, or never held) merge against the base as before.
func (s *Replica) rebase(lost *lostReplica, plan *rescuePlan, pending []*pendingEdit) {
	if plan.kind != planFileWins || s.history == nil || plan.file == nil || plan.base == nil ||
		plan.file.Kind != KindNotebook || !notebookHasIDs(plan.base.Notebook) {
		if plan.kind == planFileWins {
			s.log.Debug().Bool("history", s.history != nil).Bool("base_ids", plan.base != nil && notebookHasIDs(plan.base.Notebook)).
				Msg("file wins: merged against the last save known (no cell-by-cell base)")
		}
		return
	}
	var outside []string
	saved := map[string]bool{}
	base := *plan.base
	base.Notebook.Cells = slices.Clone(plan.base.Notebook.Cells)
	at := cellIndex(base.Notebook)
	inFile := map[string]bool{}
	savedAt, rebased := -1, false // the last version that first held a cell version the file holds
	for _, c := range plan.file.Notebook.Cells {
		if c.ID == "" {
			return // cells without ids cannot be told apart: keep the plan
		}
		inFile[c.ID] = true
		first, ok := s.history.cellFirstHeld(c)
		if ok && first < s.lostMark {
			savedAt = max(savedAt, first)
		} else if !(s.serverHist != nil && s.serverHist.cellHeldBefore(c, s.serverHist.Versions()+1)) {
			outside = append(outside, c.ID)
			continue // changed outside (or never held): merged against the last save
		}
		saved[c.ID] = true
		if i, ok := at[c.ID]; ok {
			base.Notebook.Cells[i] = c
		} else {
			at[c.ID] = len(base.Notebook.Cells)
			base.Notebook.Cells = append(base.Notebook.Cells, c)
		}
		rebased = true
	}
	if len(outside) > 8 {
		outside = append(outside[:8], "…")
	}
	defer func() {
		s.log.Debug().Bool("rebased", rebased).Int("file_cells", len(plan.file.Notebook.Cells)).Strs("not_held", outside).
			Int("saved_at", savedAt).Int("lost_mark", s.lostMark).Msg("file wins: each cell the replica held merged against that version")
	}()
	if !rebased {
		return
	}
	made := IDSet{} // what the replica's own edits not proven saved created
	for _, e := range pending {
		for _, r := range e.structs {
			made.Add(r)
		}
	}
	base.Notebook.Cells = slices.DeleteFunc(base.Notebook.Cells, func(c Cell) bool {
		if inFile[c.ID] {
			return false
		}
		if first, ok := s.history.cellFirstHeld(c); ok && first > savedAt {
			return true
		}
		return lost.doc.cellMadeBy(c.ID, made)
	})
	plan.base, plan.savedCells = &base, saved
}

// cellMadeBy reports whether the live cell with the id was created within the ranges made.
func (d *Doc) cellMadeBy(id string, made IDSet) bool {
	in := false
	_ = d.run(func() error {
		if m, ok := d.ord.byID[id]; ok && m.Item != nil {
			in = made.Contains(IDRange{Client: uint64(m.Item.ID.Client), Clock: uint64(m.Item.ID.Clock), Len: 1})
		}
		return nil
	})
	return in
}
