package ydoc

import (
	"fmt"
	"unicode/utf16"

	y "github.com/skyterra/y-crdt"
)

// The replica's side of the crash rescue: after the sync with a room the server rebuilt, the
// replica it lost is brought back (RescueFrom), merged under the file (FileWins), or given up
// (NoRescue), as the caller decided before the sync.

type planKind int

const (
	planUndecided planKind = iota
	planRestore            // RescueFrom: the file is a version the replica held
	planFileWins           // FileWins: the file changed outside the server
	planNone               // NoRescue
)

// rescuePlan is what the caller decided for a lost replica: base is the merge's common ancestor
// (the file for a restore, the last saved version held for FileWins), file the file the room is
// rebuilt from; reason says why the file wins or why nothing is restored.
type rescuePlan struct {
	kind   planKind
	base   *Snapshot
	file   *Snapshot
	reason string
	// savedCells (FileWins, notebooks) are the file's cells in a version the replica held: saved
	// by the server, not changed outside (rebase). Their merge is a restore's: what the rebuilt
	// room typed into them since is kept beside the replica's changes, not over them.
	savedCells map[string]bool
}

// fileWins reports whether the file wins conflicts in the cell with the id.
func (p rescuePlan) fileWins(id string) bool { return p.kind == planFileWins && !p.savedCells[id] }

// rescue brings the lost replica back onto the room as one edit: by id where the rebuilt room
// allows it (rescueByID), by content otherwise (rescueByContent). ok is false when it could not
// (then out.Rescue.Reason says why; a partial change may have been sent).
func (s *Replica) rescue(lost *lostReplica, plan rescuePlan, covered []*pendingEdit) (Output, bool) {
	why := s.reconsider(lost, &plan)
	s.rebase(lost, &plan, covered)
	report := &RescueReport{FileWins: plan.kind == planFileWins, Reconsidered: why,
		RoomState: s.doc.StateVector().String(), LostState: lost.doc.StateVector().String()}
	if report.FileWins {
		report.Reason = plan.reason
	}
	if lost.snap.Kind != s.kind || plan.base.Kind != s.kind {
		report.Reason = "internal: the snapshots are not of this document's kind"
		return Output{Rescue: report}, false
	}
	before, err := s.doc.Snapshot()
	if err != nil {
		report.Reason = "the rebuilt room could not be read: " + err.Error()
		return Output{Rescue: report}, false
	}
	// The room as the sync showed it: people go on typing into its cells until the rescue reaches
	// them, and what lands in a cell the rescue deletes is followed (rescue_strays.go).
	live := s.doc.liveCells()
	room, err := s.doc.EncodeStateAsUpdate(nil)
	if err != nil {
		live = nil
	}
	var out Output
	ok := false
	if why, collided := s.byIDObstacle(lost); why == "" {
		report.Method = RestoredByIDs
		out, ok = s.rescueByID(lost, plan, report, covered)
	} else {
		report.Method, report.MethodReason = RestoredByContent, why
		if s.holdsStaleMerge(lost, collided) {
			// A peer (a JupyterLab tab reconnecting) merged its old copy of the lost room into
			// the rebuilt one before we came back: under colliding ids that mixes its items into
			// the load's (jupyter-collaboration #621), and the room's content is no measure of
			// what was changed on it since the rebuild.
			report.StaleMerge = true
		}
		out, ok = s.rescueByContent(lost, plan, report, covered)
	}
	out.Rescue = report
	if ok {
		report.listBrought(before, s.doc)
	}
	if len(live) > 0 {
		var deletes []IDRange
		for _, fr := range out.Frames {
			if f, err := DecodeFrame(fr); err == nil && f.Type == MsgSync && f.Sync == SyncUpdate {
				if m, err := ParseUpdate(f.Payload); err == nil {
					deletes = append(deletes, m.Deletes...)
				}
			}
		}
		s.watchStrays(live, room, deletes)
	}
	return out, ok
}

// byIDObstacle says why the lost replica cannot be applied to the room by its ids ("" when it
// can): an id both hold with different content, or items whose dependencies do not fit (tried
// on a scratch copy of the room, which also keeps a y-crdt failure away from the replica).
func (s *Replica) byIDObstacle(lost *lostReplica) (string, map[uint64]bool) {
	c, err := idConflicts(s.doc, lost.doc)
	if err != nil {
		return "the ids could not be compared: " + err.Error(), nil
	}
	if c.n > 0 {
		return fmt.Sprintf("the rebuilt room uses %d of the lost replica's item ids for other content (first: %s): the server reloaded a file saved since the room was first loaded under the same deterministic ids, so a tab's old copy cannot merge cleanly either", c.n, c.why), c.clients
	}
	return s.scratchObstacle(lost), nil
}

// holdsStaleMerge reports whether a room whose ids collide with the lost replica's holds items
// of the lost replica's lineage the rebuild cannot have made: ids of an old client other than 0
// (a deterministic rebuild writes as client 0 alone; any other old client's items were merged in
// by a peer, and may themselves differ from the lost replica's once mixed into other content).
func (s *Replica) holdsStaleMerge(lost *lostReplica, collided map[uint64]bool) bool {
	if len(collided) == 0 {
		return false
	}
	room := s.doc.StateVector()
	for c, k := range lost.doc.StateVector() {
		if c != 0 && k > 0 && room[c] > 0 {
			return true
		}
	}
	return false
}

// scratchObstacle tries the lost replica's items on a scratch copy of the room.
func (s *Replica) scratchObstacle(lost *lostReplica) string {
	room, err := s.doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return "the rebuilt room could not be copied: " + err.Error()
	}
	diff, err := lost.doc.EncodeStateAsUpdate(s.doc.StateVector().Encode())
	if err != nil {
		return "the lost replica could not be encoded: " + err.Error()
	}
	scratch, err := newScratchDoc(s.kind, s.log)
	if err != nil {
		return "internal: " + err.Error()
	}
	if _, _, err := scratch.Apply(room); err != nil {
		return "the rebuilt room could not be copied: " + err.Error()
	}
	if _, _, err := scratch.Apply(diff); err != nil {
		return "the lost replica's items could not be applied to a copy of the room: " + err.Error()
	}
	if scratch.HasPending() {
		return "the lost replica's items do not fit the rebuilt room (some depend on items neither holds)"
	}
	return ""
}

// rescueByID applies the lost replica's items and deletions the room lacks (sent to the server as
// they are: the lost replica's own ids), deletes what the rebuild created that they supersede,
// then edits the room to the three-way merge of base, the lost replica and the room's own
// content, which only touches what the rebuilt room changed since (or, for FileWins, what the
// file changed).
func (s *Replica) rescueByID(lost *lostReplica, plan rescuePlan, report *RescueReport, covered []*pendingEdit) (Output, bool) {
	var out Output
	var structs, deletes []IDRange
	svBefore := s.doc.StateVector()
	lostSV := lost.doc.StateVector()
	// The cells of the lost replica a peer already brought back into the room (a tab that
	// merged its old copy before we came): that peer types into them.
	mergedBack, atSync := map[string]bool{}, map[string]bool{}
	for _, c := range s.doc.liveCells() {
		atSync[c.id] = true
		if it := c.m.GetItem(); it != nil && heldBy(lostSV, it.ID) {
			mergedBack[c.id] = true
		}
	}
	// The room's own content is what it held at the sync: applying the lost replica's items puts
	// some of them into the room's cells and text (a text a reload over the store cleared keeps
	// the replica's items the store lacked), and a merge against that would take them twice.
	roomCells := s.doc.cellsAtSync(lostSV)
	diff, err := lost.doc.EncodeStateAsUpdate(svBefore.Encode())
	if err != nil {
		report.Reason = "the lost replica could not be encoded: " + err.Error()
		return out, false
	}
	meta, err := ParseUpdate(diff)
	if err != nil {
		report.Reason = "internal: the lost replica's update does not parse: " + err.Error()
		return out, false
	}
	structs = meta.Structs
	for _, r := range meta.Deletes {
		if !s.serverDeletes.Contains(r) {
			deletes = append(deletes, r)
		}
	}
	// A text's own content, too, is what the room held at the sync: the lost replica's items the
	// room lacks come back into a text a reload cleared, and its deletions reach items a
	// deterministic load reused for other content (collected on the lost replica's side, they
	// compare as agreeing); neither is the room's edit.
	var syncText string
	var textLoaders map[int]bool
	if s.kind == KindText {
		_ = s.doc.run(func() error {
			syncText = textString(s.doc.source)
			if textLoaders = s.doc.textLoaders(lostSV); len(textLoaders) > 0 {
				// The file loaded into a fresh document (or reloaded over a cleared text): the
				// room's own text is the load and what was typed into it; the lost replica's
				// text replaces the load.
				lostDeletes := IDSet{}
				for _, r := range meta.Deletes {
					lostDeletes.Add(r)
				}
				var load []uint16 // the file, when client 0 loaded exactly it
				if plan.file != nil {
					if u := utf16.Encode([]rune(plan.file.Text)); svBefore[0] == uint64(len(u)) {
						load = u
					}
				}
				syncText, _ = splitText(s.doc.source, lostSV, textLoaders, load, lostDeletes)
			}
			return nil
		})
	}
	if len(structs)+len(deletes) > 0 {
		_, ch, err := s.doc.Apply(diff)
		if err != nil {
			report.Reason = "the lost replica's items could not be applied: " + err.Error()
			return out, false
		}
		ch.Local = true
		s.observe(ch)
		if !ch.Empty() {
			out.Changes = append(out.Changes, ch)
		}
		for _, r := range structs {
			report.Items += int(r.Len)
		}
	}
	var merge MergeStats
	fn := func(tx *Txn) error {
		tx.byWords = true // others may be typing: see diffTextWords
		if s.kind == KindText {
			theirs := syncText
			if len(textLoaders) > 0 {
				_, runs := splitText(tx.d.source, lostSV, textLoaders, nil, nil)
				for k := len(runs) - 1; k >= 0; k-- {
					tx.d.source.Delete(runs[k].pos, runs[k].n)
				}
				report.Superseded = len(runs)
			}
			target, n := mergeText(plan.base.Text, lost.snap.Text, theirs, plan.kind == planFileWins)
			for range n {
				merge.lose("part of the text, changed on both sides")
			}
			return tx.RestoreText(target)
		}
		noIDs := !notebookHasIDs(plan.base.Notebook)
		split := tx.rebuildCopies(lostSV, noIDs, mergedBack, roomCells, plan)
		base, ours := alignBase(plan, lost.snap.Notebook, split.theirs)
		ours = withCells(ours, split.settled)
		target, st := mergeNotebooks(base, ours, split.theirs, plan.fileWins)
		merge = st
		for _, l := range split.lost {
			merge.lose(l)
		}
		for end := len(split.superseded); end > 0; { // from the end, a run of neighbours at a time
			start := end - 1
			for start > 0 && split.superseded[start-1] == split.superseded[start]-1 {
				start--
			}
			tx.deleteCells(split.superseded[start], end-start)
			end = start
		}
		report.Superseded = len(split.superseded)
		tx.keepWeight = restoreWeights(base, split.theirs, atSync)
		stats, err := tx.RestoreNotebook(target)
		report.Stats = stats
		return err
	}
	update, change, err := s.doc.Transact(fn)
	s.observe(change)
	if !change.Empty() {
		out.Changes = append(out.Changes, change)
	}
	if update != nil || len(structs)+len(deletes) > 0 {
		// One update for both (the lost replica's items and the edit over them), so that no
		// peer ever sees the rebuild's copies next to the lost replica's: everything the room
		// gained since the sync, with the whole delete set.
		all, eerr := s.doc.EncodeStateAsUpdate(svBefore.Encode())
		if eerr != nil {
			report.Reason = "the restore could not be encoded: " + eerr.Error()
			return out, false
		}
		out.Frames = append(out.Frames, EncodeSync(SyncUpdate, all))
	}
	if err != nil {
		// The lost replica's items are in the room (and on their way to the server): nothing
		// of it is lost, but the room's content was not brought to the merge.
		s.log.Error().Err(err).Msg("the restore edit failed")
		report.Reason = "bringing the replica back failed after its items were applied: " + err.Error()
		return out, false
	}
	report.Conflicts = merge.Conflicts
	for _, l := range merge.Lost {
		report.add(l)
	}
	if update != nil {
		m, perr := ParseUpdate(update)
		if perr != nil {
			s.log.Error().Err(perr).Msg("local update does not parse")
			for _, c := range covered {
				out.Done = append(out.Done, c.result(fmt.Errorf("internal: the rescue update could not be tracked: %w", perr)))
			}
			report.Restored, report.Changed = true, true
			return out, true
		}
		structs = append(structs, m.Structs...)
		deletes = append(deletes, m.Deletes...)
	}
	s.trackRestore(&out, report, structs, deletes, covered)
	return out, true
}

// rescueByContent edits the room to the three-way merge of base, the lost replica and the room
// (RestoreNotebook, RestoreText): the content comes back under new ids.
func (s *Replica) rescueByContent(lost *lostReplica, plan rescuePlan, report *RescueReport, covered []*pendingEdit) (Output, bool) {
	var out Output
	var merge MergeStats
	fn := func(tx *Txn) error {
		tx.byWords = true // others may be typing: see diffTextWords
		if s.kind == KindText {
			theirs, err := tx.Text()
			if err != nil {
				return err
			}
			if report.StaleMerge {
				theirs = plan.file.Text
			}
			target, n := mergeText(plan.base.Text, lost.snap.Text, theirs, plan.kind == planFileWins)
			for range n {
				merge.lose("part of the text, changed on both sides")
			}
			return tx.RestoreText(target)
		}
		theirs := tx.d.readNotebook()
		if report.StaleMerge {
			theirs = canonicalOrSelf(plan.file.Notebook)
		}
		base, ours := alignBase(plan, lost.snap.Notebook, theirs)
		target, st := mergeNotebooks(base, ours, theirs, plan.fileWins)
		merge = st
		// Cells being worked on since the restart, and big ones, are the last to be moved (a
		// move re-creates a cell: typing in it meanwhile would be lost).
		tx.keepWeight = restoreWeights(base, theirs, nil)
		stats, err := tx.RestoreNotebook(target)
		report.Stats = stats
		return err
	}
	update, change, err := s.doc.Transact(fn)
	s.observe(change)
	if err != nil {
		// A failed transaction may have left changes in the replica; they go to the server
		// like any edit's, but the lost edits are re-run as without a rescue.
		s.log.Error().Err(err).Msg("the rescue edit failed")
		report.Reason = "bringing the replica back failed: " + err.Error()
		if update != nil {
			out.Frames = append(out.Frames, EncodeSync(SyncUpdate, update))
			if !change.Empty() {
				out.Changes = append(out.Changes, change)
			}
		}
		return out, false
	}
	report.Conflicts = merge.Conflicts
	for _, l := range merge.Lost {
		report.add(l)
	}
	var structs, deletes []IDRange
	if update != nil {
		out.Frames = append(out.Frames, EncodeSync(SyncUpdate, update))
		if !change.Empty() {
			out.Changes = append(out.Changes, change)
		}
		meta, perr := ParseUpdate(update)
		if perr != nil {
			s.log.Error().Err(perr).Msg("local update does not parse")
			for _, c := range covered {
				out.Done = append(out.Done, c.result(fmt.Errorf("internal: the rescue update could not be tracked: %w", perr)))
			}
			report.Restored, report.Changed = true, true
			return out, true
		}
		structs, deletes = meta.Structs, meta.Deletes
	}
	s.trackRestore(&out, report, structs, deletes, covered)
	return out, true
}

// trackRestore records a restore that went through: as one edit in flight, confirmed when the
// server holds everything it wrote (with it, the edits it brought back), or at once when it
// wrote nothing.
func (s *Replica) trackRestore(out *Output, report *RescueReport, structs, deletes []IDRange, covered []*pendingEdit) {
	report.Restored = true
	report.Changed = len(structs)+len(deletes) > 0
	if !report.Changed { // the room already holds it all
		for _, c := range covered {
			out.Done = append(out.Done, c.result(nil))
			s.keepUnsaved(c)
		}
		return
	}
	e := &pendingEdit{rescue: true, covers: covered, client: s.doc.ClientID(), structs: structs, deletes: deletes}
	s.inflight = append(s.inflight, e)
	if len(structs) == 0 {
		// Deletions only: the server may hold them already and then sends no echo; a step 1
		// makes it answer with its full delete set.
		out.Frames = append(out.Frames, s.askState())
	}
}

// rebuildSplit is what a room holding both the lost replica's items and the rebuild's looks like.
type rebuildSplit struct {
	// superseded are the indices (ascending) of the cells that give way to another copy of the
	// same cell: see rebuildCopies.
	superseded []int
	// theirs is the room's own content: one cell per id, the rebuild's copy where both are live
	// (what was typed into it since the rebuild counts as a change made on the rebuilt room).
	theirs Notebook
	// settled are cells whose content is decided before the merge (in theirs and in ours): a
	// cell a peer brought back whose rebuild copy was typed into too holds both; lost says what
	// of ours that dropped.
	settled map[string]Cell
	lost    []string
}

// rebuildCopies splits the room's cells into the lost replica's and the rebuild's (lostSV: the
// lost replica's state vector) and chooses, for every cell both hold, the copy that stays: the
// one people type into, since what they type into the other one until the restore reaches them
// lands in a deleted cell (the server collects it with the cell: nobody can bring it back).
// When the server loaded the file into a fresh document (jupyter-server-documents, whose
// JupyterLab tabs reload the document when they reconnect), everyone in the room holds the
// fresh load's copy, and it stays — unless a peer (a tab reconnecting with its old document)
// brought the lost replica's own copy back before the sync (mergedBack: the ids of such cells):
// that peer types into the original, which stays. A copy a reload over the store re-created
// (jupyter-collaboration, whose tabs reconnect with their old document) gives way to the
// original. For a file without cell ids every cell the loader put into the fresh document gives
// way to the lost replica's.
//
// A cell whose original a peer brought back, and whose rebuild copy was typed into too, holds
// both after the restore (settled): the original as it now is (the lost replica's and the peer's
// changes) and the copy (the file's and what was typed into it since the rebuild), merged
// against the plan's base as the whole restore is.
//
// The content of a cell the room held at the sync is as it held it then (roomCells).
func (tx *Txn) rebuildCopies(lostSV StateVector, noIDs bool, mergedBack map[string]bool, roomCells map[string]Cell, plan rescuePlan) rebuildSplit {
	o := tx.order()
	maps, ids := o.maps, o.ids
	fromLost := make([]bool, len(maps))
	liveLost := map[string]bool{}
	liveOwn := map[string]bool{}
	for i, m := range maps {
		if it := m.GetItem(); it != nil && heldBy(lostSV, it.ID) {
			fromLost[i] = true
			liveLost[ids[i]] = true
		}
	}
	fresh := loaderClients(tx.d.cells, lostSV)
	var loaders map[int]bool
	if noIDs {
		loaders = fresh
	}
	loadedAt := make([]bool, len(maps))
	for i, m := range maps {
		if it := m.GetItem(); it != nil && !fromLost[i] {
			loadedAt[i] = loaders[it.ID.Client]
			if !loadedAt[i] && fresh[it.ID.Client] && !mergedBack[ids[i]] {
				liveOwn[ids[i]] = true // the fresh load's copy stays
			}
		}
	}
	sp := rebuildSplit{theirs: tx.d.readNotebookHeader()}
	at := map[string]int{}
	var lostCopy []bool
	originals := map[string]Cell{} // mergedBack cells: the original as it now is
	for i, m := range maps {
		switch {
		case loadedAt[i]:
			sp.superseded = append(sp.superseded, i)
		case !fromLost[i] && liveLost[ids[i]] && !liveOwn[ids[i]]:
			sp.superseded = append(sp.superseded, i) // the original stays
		case fromLost[i] && liveOwn[ids[i]]:
			sp.superseded = append(sp.superseded, i) // the fresh load's copy stays
		}
		if loadedAt[i] {
			continue // the load of a file without ids: the lost replica's cells stand for it
		}
		c := readCell(m)
		if fromLost[i] && mergedBack[c.ID] {
			originals[c.ID] = c
		}
		if rc, ok := roomCells[c.ID]; ok && c.ID != "" {
			c = rc
		}
		if j, dup := at[c.ID]; dup && c.ID != "" {
			if lostCopy[j] && !fromLost[i] {
				sp.theirs.Cells[j], lostCopy[j] = c, false
			}
			continue
		}
		at[c.ID] = len(sp.theirs.Cells)
		lostCopy = append(lostCopy, fromLost[i])
		sp.theirs.Cells = append(sp.theirs.Cells, c)
	}
	if len(originals) == 0 || plan.base == nil {
		return sp
	}
	baseSrc := map[string]string{}
	for _, c := range plan.base.Notebook.Cells {
		baseSrc[c.ID] = c.Source
	}
	for id, orig := range originals {
		j, ok := at[id]
		if !ok || lostCopy[j] {
			continue // no live copy of the rebuild's
		}
		n := 0
		orig.Source, n = mergeText(baseSrc[id], orig.Source, sp.theirs.Cells[j].Source, plan.fileWins(id))
		for range n {
			sp.lost = append(sp.lost, "cell "+id+": part of the source, changed on both sides")
		}
		sp.theirs.Cells[j] = orig
		if sp.settled == nil {
			sp.settled = map[string]Cell{}
		}
		sp.settled[id] = orig
	}
	return sp
}

// cellsAtSync reads the room's cells by id, as they are now; of a cell it holds twice, the copy
// that is not the lost replica's (lostSV).
func (d *Doc) cellsAtSync(lostSV StateVector) map[string]Cell {
	out := map[string]Cell{}
	if d.kind != KindNotebook {
		return out
	}
	own := map[string]bool{}
	_ = d.run(func() error {
		for i, m := range d.ord.maps {
			id := d.ord.ids[i]
			it := m.GetItem()
			mine := it == nil || !heldBy(lostSV, it.ID)
			if _, seen := out[id]; seen && (own[id] || !mine) {
				continue
			}
			c := readCell(m)
			// A source a reload over the store cleared (jupyter_ydoc clears a changed cell's
			// source and appends the file) holds, next to the reload's text, the lost replica's
			// items the store lacked that a tab reconnecting with its old document brought back
			// before the sync: they are the lost replica's, not the room's own typing (the
			// merge would take them twice); the room's own source is the reload and what was
			// typed since, as for a text (splitText).
			if raw, _ := mapGet(m, "source"); raw != nil {
				if t, ok := raw.(*y.YText); ok {
					if rc, ok := clearingReloader(d.yd.Store, t, lostSV); ok {
						c.Source, _ = splitText(t, lostSV, map[int]bool{rc: true}, nil, nil)
					}
				}
			}
			out[id], own[id] = c, mine
		}
		return nil
	})
	return out
}

// withCells returns nb with the cells of settled (by id) in place of its own.
func withCells(nb Notebook, settled map[string]Cell) Notebook {
	if len(settled) == 0 {
		return nb
	}
	out := nb
	out.Cells = make([]Cell, len(nb.Cells))
	for i, c := range nb.Cells {
		if s, ok := settled[c.ID]; ok {
			c = s
		}
		out.Cells[i] = c
	}
	return out
}

// alignBase returns the merge's common ancestor and "ours" for a notebook. Cells are merged by
// id; a file without cell ids (nbformat < 4.5) gets fresh ids on every load, so then the cells
// are paired by content: the base's (and, for a restore, ours') with the room's, taking the
// room's ids.
func alignBase(plan rescuePlan, ours, theirs Notebook) (Notebook, Notebook) {
	base := canonicalOrSelf(plan.base.Notebook)
	if notebookHasIDs(base) {
		return base, ours
	}
	aligned, moved := takeIDs(base, theirs, "base-")
	if plan.kind == planFileWins {
		// base is a version the replica held: ours shares its ids.
		return aligned, renameCells(ours, moved)
	}
	o, _ := takeIDs(ours, theirs, "")
	return aligned, o
}

// takeIDs pairs nb's cells with to's by content (matchCells, ids ignored) and gives each paired
// cell the id of its pair; unpaired cells keep their id or, lacking one, get prefix+index. It
// returns the result and the renames (old id → new id, for cells that had an id).
func takeIDs(nb, to Notebook, prefix string) (Notebook, map[string]string) {
	blank := func(cells []Cell) []Cell {
		out := make([]Cell, len(cells))
		for i, c := range cells {
			c.ID = ""
			out[i] = c
		}
		return out
	}
	out := nb
	out.Cells = make([]Cell, len(nb.Cells))
	copy(out.Cells, nb.Cells)
	renames := map[string]string{}
	paired := make([]bool, len(nb.Cells))
	for _, p := range matchCells(blank(nb.Cells), blank(to.Cells)) {
		if id := to.Cells[p[1]].ID; id != "" {
			if old := out.Cells[p[0]].ID; old != "" {
				renames[old] = id
			}
			out.Cells[p[0]].ID = id
			paired[p[0]] = true
		}
	}
	taken := map[string]bool{}
	for _, c := range to.Cells {
		taken[c.ID] = true
	}
	for i := range out.Cells {
		if !paired[i] && (out.Cells[i].ID == "" || taken[out.Cells[i].ID]) {
			out.Cells[i].ID = fmt.Sprintf("%s%d", prefix, i)
		}
	}
	return out, renames
}

// renameCells gives nb's cells the new ids of renames.
func renameCells(nb Notebook, renames map[string]string) Notebook {
	out := nb
	out.Cells = make([]Cell, len(nb.Cells))
	for i, c := range nb.Cells {
		if id, ok := renames[c.ID]; ok {
			c.ID = id
		}
		out.Cells[i] = c
	}
	return out
}

// restoreWeights says how much a restore should avoid moving each of the room's cells: cells
// changed since base (being worked on) and big ones weigh more. With atSync (the ids the room
// held at the sync), a cell the restore itself brought (the lost replica's own, nobody in the
// room has it yet) weighs least: moving it disturbs nobody.
func restoreWeights(base, theirs Notebook, atSync map[string]bool) func(string) int {
	changed := map[string]bool{}
	bIdx := cellIndex(base)
	for _, c := range theirs.Cells {
		if i, ok := bIdx[c.ID]; !ok || !sameCell(base.Cells[i], c) {
			changed[c.ID] = true
		}
	}
	size := map[string]int{}
	for _, c := range theirs.Cells {
		size[c.ID] = len(c.Source)
	}
	return func(id string) int {
		if atSync != nil && !atSync[id] {
			return 1
		}
		w := 1 + size[id]/64
		if changed[id] {
			w += 1000
		}
		return w
	}
}

func notebookHasIDs(nb Notebook) bool {
	if nb.NBFormat == 4 && nb.NBFormatMinor < 5 {
		return false
	}
	for _, c := range nb.Cells {
		if c.ID == "" {
			return false
		}
	}
	return true
}

// canonicalOrSelf is the notebook as the replica would read it back (values through the CRDT
// conversion), or itself when it does not validate.
func canonicalOrSelf(nb Notebook) Notebook {
	c, err := canonicalNotebook(nb)
	if err != nil {
		return nb
	}
	return c
}

// staleGuard watches a room restored other than by id (or not restored) for a peer merging its
// old copy of the lost room (a JupyterLab tab reconnecting with its document): such a merge
// brings items of the lost replica's lineage — ids below its state vector — that the room does
// not hold, and under ids the rebuild reused it mixes them into other content (#621). The
// replica then edits the room back to what it held just before (heal).
type staleGuard struct {
	lostSV StateVector
}

// brings reports whether an update brings items of the lost lineage the room lacks (roomSV).
func (g *staleGuard) brings(m UpdateMeta, roomSV StateVector) bool {
	for _, r := range m.Structs {
		if r.Clock < g.lostSV[r.Client] && r.Clock+r.Len > roomSV[r.Client] {
			return true
		}
	}
	return false
}

// heal edits the room back to pre, the content it held before a peer merged an old copy.
func (s *Replica) heal(pre Snapshot) Output {
	var out Output
	report := &RescueReport{StaleMerge: true, Method: RestoredByContent}
	out.Rescue = report
	before, _ := s.doc.Snapshot()
	update, change, err := s.doc.Transact(func(tx *Txn) error {
		tx.byWords = true
		if s.kind == KindText {
			return tx.RestoreText(pre.Text)
		}
		st, err := tx.RestoreNotebook(pre.Notebook)
		report.Stats = st
		return err
	})
	s.observe(change)
	if !change.Empty() {
		out.Changes = append(out.Changes, change)
	}
	if update != nil {
		out.Frames = append(out.Frames, EncodeSync(SyncUpdate, update))
		if meta, perr := ParseUpdate(update); perr == nil {
			s.inflight = append(s.inflight, &pendingEdit{rescue: true, client: s.doc.ClientID(), structs: meta.Structs, deletes: meta.Deletes, change: change})
		}
	}
	if err != nil {
		s.log.Error().Err(err).Msg("healing a stale merge failed")
		report.Reason = "a peer merged an old copy of the room and it could not be undone: " + err.Error()
		return out
	}
	report.Restored, report.Changed = true, update != nil
	report.listBrought(before, s.doc)
	s.log.Warn().Int("deleted", report.Stats.Deleted).Int("changed", report.Stats.Changed).Msg("a peer merged an old copy of the lost room; the room was brought back to what it held before")
	return out
}
