package ydoc

import (
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

// rebase gives a FileWins plan of a notebook the version the file was saved from, when the file
// is such a version plus cells added outside Jupyter: the file without the cells the replica never
// held (ids that neither the lost replica nor the base have) is looked up among the versions the
// replica held before the loss. The base a FileWins plan comes with is the last save the replica
// heard of; a save the server made by itself and never announced (jupyter-collaboration's
// autosave, whose publication a keystroke cancels) is newer, and against the older base the
// typing between the two saves counts as changed on both sides and is lost to the file.
func (s *Replica) rebase(lost *lostReplica, plan *rescuePlan) {
	if plan.kind != planFileWins || s.history == nil || plan.file == nil || plan.base == nil || plan.file.Kind != KindNotebook {
		return
	}
	known := map[string]bool{}
	for _, c := range lost.snap.Notebook.Cells {
		known[c.ID] = true
	}
	for _, c := range plan.base.Notebook.Cells {
		known[c.ID] = true
	}
	candidate := *plan.file
	candidate.Notebook.Cells = nil
	for _, c := range plan.file.Notebook.Cells {
		if c.ID == "" {
			return // cells without ids cannot be told apart: keep the plan
		}
		if known[c.ID] {
			candidate.Notebook.Cells = append(candidate.Notebook.Cells, c)
		}
	}
	if !s.history.heldBefore(candidate, s.lostMark) && !(s.serverHist != nil && s.serverHist.Held(candidate)) {
		return
	}
	plan.base = &candidate
}
