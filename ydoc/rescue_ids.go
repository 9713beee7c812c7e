package ydoc

import (
	"bytes"
	"fmt"
	"reflect"
	"unicode/utf16"

	y "github.com/skyterra/y-crdt"
)

// Restores by id. A room the server rebuilt after losing it holds the file's content under item
// ids of its own; the replica it lost holds the room as it was, under the original ids, and so
// does every JupyterLab tab that was open (it reconnects with its copy). Bringing the lost
// replica back by content (RestoreNotebook) gives the room the right content under new ids, and
// a tab that then merges its old copy doubles it (jupyter-collaboration #621). Bringing it back
// by id instead (the lost replica's own items and deletions, applied to the rebuilt room, and the
// rebuild's copies of what they supersede deleted) makes the room hold the items every old copy
// holds: a tab that merges its copy, before or after, brings nothing new.
//
// That is possible only when no item id means two different things. A rebuild by
// jupyter-collaboration without its update store loads the file into a document of client 0,
// deterministically: when the file was saved since the room was first loaded, the rebuilt
// room's client-0 items carry the same ids as the lost room's first load but other content, and
// an id can neither be reused nor undeleted. idConflicts finds that case (then the restore is by
// content, as before). jupyter-server-documents loads under a fresh random client, and
// jupyter-collaboration with its store keeps the old items and reloads the file over them under
// a fresh client: both leave the ids apart.

// idConflict is the first place where two documents hold one item id with different structure
// or content.
type idConflict struct {
	n       int             // overlapping struct ranges that differ
	why     string          // the first of them
	clients map[uint64]bool // the clients whose ids collide
}

// idConflicts compares every item id both documents hold: its origin, right origin, parent, key
// and content (where neither side collected it). Garbage-collected structs and deleted content
// carry nothing to compare and are taken as agreeing.
func idConflicts(a, b *Doc) (idConflict, error) {
	c := idConflict{clients: map[uint64]bool{}}
	err := a.run(func() error {
		na, nb := rootNames(a.yd), rootNames(b.yd)
		for client, pa := range a.yd.Store.Clients {
			pb, ok := b.yd.Store.Clients[client]
			if !ok {
				continue
			}
			xs, ys := *pa, *pb
			for i, j := 0, 0; i < len(xs) && j < len(ys); {
				x, z := xs[i], ys[j]
				xs0, zs0 := x.GetID().Clock, z.GetID().Clock
				xe, ze := xs0+x.GetLength(), zs0+z.GetLength()
				if lo, hi := max(xs0, zs0), min(xe, ze); lo < hi {
					if why := sameRange(x, z, lo, hi, na, nb); why != "" {
						c.n++
						c.clients[uint64(client)] = true
						if c.why == "" {
							c.why = fmt.Sprintf("item %d:%d (%s)", client, lo, why)
						}
					}
				}
				switch {
				case xe < ze:
					i++
				case ze < xe:
					j++
				default:
					i++
					j++
				}
			}
		}
		return nil
	})
	return c, err
}

// sameRange compares the clocks [lo, hi) that structs x and z (of one client) both cover; it
// returns "" when they agree, or what differs.
func sameRange(x, z y.IAbstractStruct, lo, hi int, na, nb map[y.IAbstractType]string) string {
	xi, ok1 := x.(*y.Item)
	zi, ok2 := z.(*y.Item)
	if !ok1 || !ok2 {
		return "" // garbage collected on one side: nothing left to compare
	}
	if !sameID(originAt(xi, lo), originAt(zi, lo)) {
		return "origin"
	}
	if !sameID(xi.RightOrigin, zi.RightOrigin) {
		return "right origin"
	}
	if parentName(xi, na) != parentName(zi, nb) || xi.ParentSub != zi.ParentSub {
		return "parent"
	}
	xo, zo := lo-xi.ID.Clock, lo-zi.ID.Clock
	n := hi - lo
	switch xc := xi.Content.(type) {
	case *y.ContentDeleted:
		return ""
	case *y.ContentString:
		zc, ok := zi.Content.(*y.ContentString)
		if !ok {
			return contentKind(zi.Content, xi.Content)
		}
		xu, zu := utf16.Encode([]rune(xc.Str)), utf16.Encode([]rune(zc.Str))
		if xo+n > len(xu) || zo+n > len(zu) {
			return "" // surrogate halves replaced on a split: lengths no longer line up
		}
		for k := 0; k < n; k++ {
			if xu[xo+k] != zu[zo+k] {
				return "text"
			}
		}
	case *y.ContentAny:
		zc, ok := zi.Content.(*y.ContentAny)
		if !ok {
			return contentKind(zi.Content, xi.Content)
		}
		if !sameValues(xc.Arr, zc.Arr, xo, zo, n) {
			return "value"
		}
	case *y.ContentJson:
		zc, ok := zi.Content.(*y.ContentJson)
		if !ok {
			return contentKind(zi.Content, xi.Content)
		}
		if !sameValues(xc.Arr, zc.Arr, xo, zo, n) {
			return "value"
		}
	case *y.ContentType:
		zc, ok := zi.Content.(*y.ContentType)
		if !ok {
			return contentKind(zi.Content, xi.Content)
		}
		if reflect.TypeOf(xc.Type) != reflect.TypeOf(zc.Type) {
			return "type"
		}
	case *y.ContentBinary:
		zc, ok := zi.Content.(*y.ContentBinary)
		if !ok {
			return contentKind(zi.Content, xi.Content)
		}
		if !bytes.Equal(xc.Content, zc.Content) {
			return "value"
		}
	case *y.ContentEmbed:
		zc, ok := zi.Content.(*y.ContentEmbed)
		if !ok || !nearJSON(fromAny(xc.Embed), fromAny(zc.Embed)) {
			return "value"
		}
	case *y.ContentFormat:
		zc, ok := zi.Content.(*y.ContentFormat)
		if !ok || xc.Key != zc.Key || !nearJSON(fromAny(xc.Value), fromAny(zc.Value)) {
			return "format"
		}
	}
	return ""
}

// contentKind says that two contents differ in kind ("" when one of them was collected).
func contentKind(a, b y.IAbstractContent) string {
	if _, ok := a.(*y.ContentDeleted); ok {
		return ""
	}
	if _, ok := b.(*y.ContentDeleted); ok {
		return ""
	}
	return "content kind"
}

func sameValues(a, b y.ArrayAny, ao, bo, n int) bool {
	if ao+n > len(a) || bo+n > len(b) {
		return false
	}
	for k := 0; k < n; k++ {
		if !nearJSON(fromAny(a[ao+k]), fromAny(b[bo+k])) {
			return false
		}
	}
	return true
}

// originAt is the origin of the piece of item that starts at clock: the item's own origin at its
// start, the previous clock inside it (as a split sets it).
func originAt(it *y.Item, clock int) *y.ID {
	if clock > it.ID.Clock {
		return &y.ID{Client: it.ID.Client, Clock: clock - 1}
	}
	return it.Origin
}

func sameID(a, b *y.ID) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Client == b.Client && a.Clock == b.Clock
}

// rootNames maps a document's root types to their names.
func rootNames(d *y.Doc) map[y.IAbstractType]string {
	m := make(map[y.IAbstractType]string, len(d.Share))
	for name, t := range d.Share {
		m[t] = name
	}
	return m
}

// parentName names an item's parent: a root by its name, a nested type by its item's id.
func parentName(it *y.Item, roots map[y.IAbstractType]string) string {
	switch p := it.Parent.(type) {
	case *y.ID: // before IAbstractType, which an ID satisfies (it embeds AbstractType)
		return fmt.Sprintf("%d:%d", p.Client, p.Clock)
	case y.IAbstractType:
		if pi := p.GetItem(); pi != nil {
			return fmt.Sprintf("%d:%d", pi.ID.Client, pi.ID.Clock)
		}
		if name, ok := roots[p]; ok {
			return "root " + name
		}
		return "root ?"
	}
	return "none"
}

// heldBy reports whether an item id is one of the lost replica's (its state vector covers it).
func heldBy(sv StateVector, id y.ID) bool {
	return uint64(id.Clock) < sv[uint64(id.Client)]
}

// loaderClients finds the clients that loaded a file into the sequence t of a rebuilt room:
// client 0 when it put items there that the lost replica lacks (jupyter-collaboration's
// deterministic load of a file that grew since the first load: no peer writes as client 0), and
// clients whose first item there (by clock), not the lost replica's, was inserted into t while t
// was empty (no origin on either side), as a load into a fresh document does. What such a
// client put into t is the rebuild's copy of a file the lost replica holds as it was.
func loaderClients(t y.IAbstractType, lostSV StateVector) map[int]bool {
	first := map[int]*y.Item{}
	for n := t.StartItem(); n != nil; n = n.Right {
		if heldBy(lostSV, n.ID) && (n.ID.Client != 0 || heldBy(lostSV, y.ID{Client: 0, Clock: n.ID.Clock + n.Length - 1})) {
			continue
		}
		if f, ok := first[n.ID.Client]; !ok || n.ID.Clock < f.ID.Clock {
			first[n.ID.Client] = n
		}
	}
	out := map[int]bool{}
	for c, it := range first {
		if c == 0 || it.Origin == nil && it.RightOrigin == nil {
			out[c] = true
		}
	}
	return out
}

// textLoaders is loaderClients for a text, with the client that reloaded the file over the
// text by clearing it (clearingReloader).
func (d *Doc) textLoaders(lostSV StateVector) map[int]bool {
	out := loaderClients(d.source, lostSV)
	if c, ok := clearingReloader(d.yd.Store, d.source, lostSV); ok {
		out[c] = true
	}
	return out
}

// clearingReloader finds the client that reloaded the file over a text of the lost replica's
// lineage by clearing it, as jupyter_ydoc's YUnicode.set does on jupyter-collaboration with its
// store when difflib finds the texts "very different" (its autojunk heuristic says so of nearly
// any long text of few distinct characters): the text is deleted and the file appended, which
// pycrdt places after the last, now deleted, item. That client's first item not the lost
// replica's has for origin a deleted item of the lost replica's and no right origin; a client
// typing (JupyterLab's yjs) never inserts after a deleted item at the end. What it put there is
// the reload's copy of a file the lost replica holds as it was, as a loader's is: the lost
// replica's items the store lacked, which its state brings back (or a tab's old copy does)
// into the cleared text, must not be taken for the room's own text beside it.
func clearingReloader(store *y.StructStore, t *y.YText, lostSV StateVector) (int, bool) {
	first := map[int]*y.Item{}
	for n := t.StartItem(); n != nil; n = n.Right {
		if heldBy(lostSV, n.ID) {
			continue
		}
		if f, ok := first[n.ID.Client]; !ok || n.ID.Clock < f.ID.Clock {
			first[n.ID.Client] = n
		}
	}
	for c, it := range first {
		if it.RightOrigin != nil || it.Origin == nil || !heldBy(lostSV, *it.Origin) {
			continue
		}
		if _, ok := store.Clients[it.Origin.Client]; !ok {
			continue
		}
		if o, err := y.Find(store, *it.Origin); err == nil && o.Deleted() {
			return c, true
		}
	}
	return 0, false
}

// textRun is a run of live text: UTF-16 position and length.
type textRun struct{ pos, n int }

// splitText walks a text's live items and returns the rebuilt room's own text (the items the lost
// replica does not hold, and all of the loaders', which a deterministic load shares with it) and
// the runs the items the lost replica does not hold occupy.
//
// A deterministic load (client 0 a loader) is the file, load, from clock 0: of its items, those
// deleted by the lost replica's own deletions (lostDeletes) — a tab's old copy merged before the
// sync brings them — are the load's too. Under ids the load reused they deleted other content
// (the lost replica's first load, collected on its side: the ids compare as agreeing), and the
// merge must not take that for the room's edit; they are read back from the file.
func splitText(t *y.YText, lostSV StateVector, loaders map[int]bool, load []uint16, lostDeletes IDSet) (string, []textRun) {
	var own []uint16
	var runs []textRun
	pos := 0
	for n := t.StartItem(); n != nil; n = n.Right {
		if n.Deleted() {
			// (Collected: its content is gone, ContentDeleted, not countable.)
			if n.ID.Client == 0 && loaders[0] && n.ID.Clock+n.Length <= len(load) &&
				lostDeletes.Contains(IDRange{Client: 0, Clock: uint64(n.ID.Clock), Len: uint64(n.Length)}) {
				own = append(own, load[n.ID.Clock:n.ID.Clock+n.Length]...)
			}
			continue
		}
		if !n.Countable() {
			continue
		}
		length := n.Length
		from := 0 // offset in the item where the room's own part starts
		if end := lostSV[uint64(n.ID.Client)]; uint64(n.ID.Clock) < end {
			from = min(int(end)-n.ID.Clock, length)
		}
		ownFrom := from
		if loaders[n.ID.Client] {
			ownFrom = 0
		}
		if s, ok := n.Content.(*y.ContentString); ok && ownFrom < length {
			u := utf16.Encode([]rune(s.Str))
			if ownFrom < len(u) {
				own = append(own, u[ownFrom:]...)
			}
		}
		if from < length {
			if k := len(runs) - 1; k >= 0 && runs[k].pos+runs[k].n == pos+from {
				runs[k].n += length - from
			} else {
				runs = append(runs, textRun{pos: pos + from, n: length - from})
			}
		}
		pos += length
	}
	return string(utf16.Decode(own)), runs
}

// RebuiltUnder reports whether update, a state the server sent, holds a load of the file into a
// fresh document: a client this replica does not know whose first item in the document's root
// sequence (the cells, or the text) went into it while it was empty, as jupyter-server-documents
// loads a file (jupyter-collaboration's restarts are told by their new session id). A room this
// replica shares always holds the replica's items there (deleted ones stay, as tombstones), so no
// later client finds that sequence empty: the server rebuilt the room. A peer that reconnected
// with its old copy first (a JupyterLab tab) brings every old client id back into the rebuilt
// room, which hides the rebuild from a comparison of state vectors; this does not. False for a
// replica whose sequence holds nothing yet (a first join).
func (s *Replica) RebuiltUnder(update []byte) (bool, error) {
	known := s.doc.StateVector()
	empty := true
	_ = s.doc.run(func() error {
		empty = rootSequence(s.doc).StartItem() == nil
		return nil
	})
	if empty {
		return false, nil
	}
	scratch, err := newScratchDoc(s.kind, s.log)
	if err != nil {
		return false, err
	}
	if _, _, err := scratch.Apply(update); err != nil {
		return false, fmt.Errorf("the server's state does not apply: %w", err)
	}
	rebuilt := false
	_ = scratch.run(func() error {
		rebuilt = len(loaderClients(rootSequence(scratch), known)) > 0
		return nil
	})
	return rebuilt, nil
}

// rootSequence is the document's root sequence: its cells, or its text.
func rootSequence(d *Doc) y.IAbstractType {
	if d.kind == KindText {
		return d.source
	}
	return d.cells
}
