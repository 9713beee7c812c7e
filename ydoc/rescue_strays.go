package ydoc

import (
	"fmt"
	"sort"

	y "github.com/skyterra/y-crdt"
)

// Typing that lands in a cell a rescue deleted. A rescue edits the room as the sync showed it,
// but the people in the room go on typing meanwhile, and what they type until they receive the
// rescue is written into the cells as they had them. When the rescue deleted such a cell — the
// rebuild's copy of a cell the lost replica holds by its original ids (rescueByID keeps the
// original), or a cell a restore by content moved (a move re-creates it) — that typing lands in
// a deleted cell and vanishes: on jupyter-server-documents, which holds every other client's
// updates while one client's handshake runs and applies them after it, two or three keystrokes
// of a human typing during the sidecar's join were lost that way.
//
// A strayWatch keeps, for a while after the rescue, a shadow of the room as the sync showed it
// (a scratch document) and applies every later update from the server to it too, without the
// rescue's own deletions (they arrive in the echo of the rescue, in jupyter-server-documents'
// catch-up diff and in later step 2s), so the watched cells stay alive there. When a watched
// cell's source changes in the shadow, the change is merged into the live cell with the same id
// (three-way, against the source the shadow showed before), as one local edit. The caller ends
// the watch (StopStrayWatch) once nobody can still be typing into the old cells.
type strayWatch struct {
	shadow *Doc
	cells  map[string][]*strayCell // by cell id
	maps   []IDRange               // the watched cells' map items (one clock each)
	strip  IDSet                   // the deletions the rescue made
	moved  int                     // stray changes moved so far
}

// strayCell is one watched cell of the shadow: a cell the rescue deleted whose id lives on.
type strayCell struct {
	id  string
	m   *y.YMap // in the shadow
	src string  // its source as last seen there
}

// liveCell is a cell map of the replica and its id.
type liveCell struct {
	m  *y.YMap
	id string
}

// liveCells lists the replica's live cells (notebooks only).
func (d *Doc) liveCells() []liveCell {
	var out []liveCell
	if d.kind != KindNotebook {
		return nil
	}
	_ = d.run(func() error {
		for i, m := range d.ord.maps {
			out = append(out, liveCell{m: m, id: d.ord.ids[i]})
		}
		return nil
	})
	return out
}

// watchStrays starts watching the cells of before (the room's live cells before an edit, whose
// state was room) that the edit deleted while a live cell carries their id; deletes are the
// edit's deletions. Nothing is watched when no such cell exists.
func (s *Replica) watchStrays(before []liveCell, room []byte, deletes []IDRange) {
	if s.kind != KindNotebook || len(before) == 0 {
		return
	}
	type gone struct {
		item IDRange
		id   string
	}
	var watched []gone
	_ = s.doc.run(func() error {
		for _, c := range before {
			it := c.m.GetItem()
			if it == nil || !it.Deleted() || c.id == "" {
				continue
			}
			if s.doc.ord.indexOfID(c.id) >= 0 {
				watched = append(watched, gone{item: itemRange(it), id: c.id})
			}
		}
		return nil
	})
	if len(watched) == 0 {
		return
	}
	shadow, err := newScratchDoc(s.kind, s.log)
	if err == nil {
		_, _, err = shadow.Apply(room)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("typing into the cells the rescue replaced cannot be followed")
		return
	}
	w := &strayWatch{shadow: shadow, cells: map[string][]*strayCell{}, strip: IDSet{}}
	w.strip.AddAll(deletes)
	byItem := map[IDRange]string{}
	for _, g := range watched {
		byItem[g.item] = g.id
	}
	_ = shadow.run(func() error {
		for _, m := range shadow.ord.maps {
			it := m.GetItem()
			if it == nil {
				continue
			}
			id, ok := byItem[itemRange(it)]
			if !ok {
				continue
			}
			w.cells[id] = append(w.cells[id], &strayCell{id: id, m: m, src: sourceOf(m)})
			w.maps = append(w.maps, itemRange(it))
		}
		return nil
	})
	if len(w.maps) == 0 {
		return
	}
	s.strays = w
	s.log.Debug().Int("cells", len(w.maps)).Msg("following typing into the cells the rescue replaced")
}

// itemRange is the id of an item's first clock, as a range of one.
func itemRange(it *y.Item) IDRange {
	return IDRange{Client: uint64(it.ID.Client), Clock: uint64(it.ID.Clock), Len: 1}
}

// sourceOf is a cell map's source (engine lock held).
func sourceOf(m *y.YMap) string {
	raw, _ := mapGet(m, "source")
	switch s := raw.(type) {
	case *y.YText:
		return textString(s)
	case string:
		return s
	}
	return ""
}

// StrayWatch reports whether typing into cells a rescue replaced is being followed
// (StopStrayWatch ends it).
func (s *Replica) StrayWatch() bool { return s.strays != nil }

// StopStrayWatch stops following typing into the cells a rescue replaced: the caller calls it once
// every peer has had time to receive the rescue (a few seconds after it, or after the last stray
// change was moved).
func (s *Replica) StopStrayWatch() {
	if s.strays != nil {
		s.log.Debug().Int("moved", s.strays.moved).Msg("stopped following typing into the cells the rescue replaced")
	}
	s.strays = nil
}

// followStrays applies an update from the server to the shadow and moves what it typed into a
// watched cell into the live cell with the same id.
func (s *Replica) followStrays(update []byte, meta UpdateMeta) Output {
	w := s.strays
	var out Output
	if w.carriesRescue(meta) {
		stripped, err := withoutDeletes(update, w.strip)
		if err != nil {
			s.log.Warn().Err(err).Msg("stopped following typing into the cells the rescue replaced")
			s.strays = nil
			return out
		}
		update = stripped
	}
	_, ch, err := w.shadow.Apply(update)
	if err != nil {
		s.log.Warn().Err(err).Msg("stopped following typing into the cells the rescue replaced")
		s.strays = nil
		return out
	}
	type stray struct {
		id       string
		old, now string
	}
	var found []stray
	_ = w.shadow.run(func() error {
		for _, cc := range ch.Cells {
			for _, c := range w.cells[cc.ID] {
				if it := c.m.GetItem(); it == nil || it.Deleted() {
					continue // someone deleted the old cell itself: nothing more can land in it
				}
				if now := sourceOf(c.m); now != c.src {
					found = append(found, stray{id: c.id, old: c.src, now: now})
					c.src = now
				}
			}
		}
		return nil
	})
	if len(found) == 0 {
		return out
	}
	var moved []string
	update2, change, err := s.doc.Transact(func(tx *Txn) error {
		tx.byWords = true
		for _, f := range found {
			i := tx.CellIndex(f.id)
			if i < 0 {
				continue // the live cell went too
			}
			cur, err := tx.Cell(i)
			if err != nil {
				return err
			}
			target, _ := mergeText(f.old, cur.Source, f.now, false)
			if target == cur.Source {
				continue
			}
			if err := tx.SetSource(i, target); err != nil {
				return err
			}
			moved = append(moved, f.id)
		}
		return nil
	})
	s.observe(change)
	if !change.Empty() {
		out.Changes = append(out.Changes, change)
	}
	if update2 != nil {
		out.Frames = append(out.Frames, EncodeSync(SyncUpdate, update2))
		if m, perr := ParseUpdate(update2); perr == nil {
			s.inflight = append(s.inflight, &pendingEdit{rescue: true, client: s.doc.ClientID(), structs: m.Structs, deletes: m.Deletes, change: change})
		}
	}
	if err != nil {
		s.log.Error().Err(err).Msg("could not move typing from a cell the rescue replaced")
		return out
	}
	if len(moved) > 0 {
		w.moved += len(moved)
		out.Strays += len(moved)
		s.log.Info().Strs("cells", moved).Msg("typing landed in cells the rescue had replaced: moved into the cells that replaced them")
	}
	return out
}

// carriesRescue reports whether an update deletes a watched cell: the echo of the rescue (or of
// a later heal), a catch-up diff or a step 2 with the room's whole delete set. Its deletions
// the rescue made are kept out of the shadow. A peer's own update never deletes a watched cell
// unless the peer deleted that cell, which ends what can land in it anyway.
func (w *strayWatch) carriesRescue(meta UpdateMeta) bool {
	if len(meta.Deletes) == 0 {
		return false
	}
	ds := IDSet{}
	ds.AddAll(meta.Deletes)
	for _, r := range w.maps {
		if ds.Contains(r) {
			return true
		}
	}
	return false
}

// withoutDeletes returns a v1 update with the deletions in drop left out of its delete set.
func withoutDeletes(update []byte, drop IDSet) ([]byte, error) {
	meta, dsAt, err := parseUpdate(update)
	if err != nil {
		return nil, err
	}
	byClient := map[uint64][]IDRange{}
	for _, r := range meta.Deletes {
		byClient[r.Client] = append(byClient[r.Client], subtractRange(r, drop[r.Client])...)
	}
	clients := make([]uint64, 0, len(byClient))
	for c, rs := range byClient {
		if len(rs) > 0 {
			clients = append(clients, c)
		}
	}
	sort.Slice(clients, func(i, j int) bool { return clients[i] > clients[j] })
	out := append([]byte(nil), update[:dsAt]...)
	out = appendVarUint(out, uint64(len(clients)))
	for _, c := range clients {
		rs := byClient[c]
		out = appendVarUint(out, c)
		out = appendVarUint(out, uint64(len(rs)))
		for _, r := range rs {
			out = appendVarUint(out, r.Clock)
			out = appendVarUint(out, r.Len)
		}
	}
	if _, err := ParseUpdate(out); err != nil {
		return nil, fmt.Errorf("internal: an update without some deletions does not parse: %w", err)
	}
	return out, nil
}

// subtractRange returns what of r is not in drop (sorted, merged ranges of r's client).
func subtractRange(r IDRange, drop []IDRange) []IDRange {
	var out []IDRange
	lo, hi := r.Clock, r.Clock+r.Len
	for _, d := range drop {
		dlo, dhi := d.Clock, d.Clock+d.Len
		if dhi <= lo || dlo >= hi {
			continue
		}
		if dlo > lo {
			out = append(out, IDRange{Client: r.Client, Clock: lo, Len: dlo - lo})
		}
		lo = max(lo, dhi)
		if lo >= hi {
			return out
		}
	}
	if lo < hi {
		out = append(out, IDRange{Client: r.Client, Clock: lo, Len: hi - lo})
	}
	return out
}
