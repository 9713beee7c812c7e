package ydoc

import (
	"slices"

	y "github.com/skyterra/y-crdt"
)

// cellOrder is a notebook's cell list as its cells array holds it: the live cell maps in order,
// with their ids. Almost every notebook operation starts from it (find a cell by id, count the
// cells, address one by index), so instead of walking the array each time, the order is kept
// up to date after every transaction, incrementally: a transaction's new structs and its delete
// set say which cell maps came and went, and only those are placed or removed. The work is
// proportional to what the transaction changed; what remains proportional to the notebook is a
// scan of pointers to find the index where a change lands (microseconds for thousands of
// cells) and, for moves only, the comparison that says whether cells changed places.
//
// Anything the incremental path cannot vouch for (duplicate or changed cell ids, a struct it
// does not expect) rebuilds the order from the array instead, and the change is then computed
// as before, by comparing the whole old and new orders.
//
// Within a transaction, Txn's structural mutators (insertCellMaps, deleteCells, undo) mark the
// order stale and the next read follows the transaction so far (follow); the transaction's end
// (afterTransaction) follows it completely and classifies what changed.
type cellOrder struct {
	ids  []string
	maps []*y.YMap
	// byID maps each id to its live cell map. It is exact unless dup is set: some id is carried
	// by two cells (a foreign writer), and lookups then scan ids.
	byID map[string]*y.YMap
	dup  bool

	// The transaction being followed.
	tr      *y.Transaction
	placed  map[int]int // per client: clock up to which new structs were placed
	dsSeen  map[int]int // per client: delete items already applied (before the set is sorted)
	ops     []orderOp   // changes made to ids/maps in this transaction, in order
	stale   bool        // a mutator changed the array since the last follow
	rebuild bool        // something did not add up: rebuild from the array at the end
	// oldIDs/oldMaps are the order as the transaction found it, kept once the order was
	// rebuilt within it (ops then no longer lead back to it).
	haveOld bool
	oldIDs  []string
	oldMaps []*y.YMap

	mismatches int // times the array did not match the order and it was rebuilt (for tests)
}

// orderOp is one change to the order: a map inserted at index, or removed from it.
type orderOp struct {
	insert bool
	index  int
	m      *y.YMap
	id     string
}

func newCellOrder() cellOrder { return cellOrder{byID: map[string]*y.YMap{}} }

// index returns the position of a map in the order, or -1.
func (o *cellOrder) index(m *y.YMap) int { return slices.Index(o.maps, m) }

// indexOfID returns the index of the first cell with the id, or -1.
func (o *cellOrder) indexOfID(id string) int {
	if o.dup {
		return slices.Index(o.ids, id)
	}
	m, ok := o.byID[id]
	if !ok {
		return -1
	}
	return o.index(m)
}

// holds reports whether m is a cell of the order.
func (o *cellOrder) holds(m *y.YMap) bool {
	if o.dup {
		return o.index(m) >= 0
	}
	return o.byID[cellIDOf(m)] == m
}

func (o *cellOrder) insertAt(i int, m *y.YMap, id string) {
	o.ids = slices.Insert(o.ids, i, id)
	o.maps = slices.Insert(o.maps, i, m)
	if _, taken := o.byID[id]; taken {
		o.dup = true
	} else {
		o.byID[id] = m
	}
	o.ops = append(o.ops, orderOp{insert: true, index: i, m: m, id: id})
}

func (o *cellOrder) removeAt(i int) {
	m, id := o.maps[i], o.ids[i]
	o.ids = slices.Delete(o.ids, i, i+1)
	o.maps = slices.Delete(o.maps, i, i+1)
	if o.byID[id] == m {
		delete(o.byID, id)
		if o.dup { // another cell may carry the id
			if j := slices.Index(o.ids, id); j >= 0 {
				o.byID[id] = o.maps[j]
			}
		}
	}
	o.ops = append(o.ops, orderOp{index: i, m: m, id: id})
}

// set replaces the order with a walk of the array.
func (o *cellOrder) set(ids []string, maps []*y.YMap) {
	o.ids, o.maps = ids, maps
	o.byID = make(map[string]*y.YMap, len(ids))
	o.dup = false
	for i, id := range ids {
		if _, taken := o.byID[id]; taken {
			o.dup = true
			continue
		}
		o.byID[id] = maps[i]
	}
}

// before reconstructs the order as it was when the followed transaction began.
func (o *cellOrder) before() ([]string, []*y.YMap) {
	if o.haveOld {
		return o.oldIDs, o.oldMaps
	}
	ids, maps := slices.Clone(o.ids), slices.Clone(o.maps)
	for k := len(o.ops) - 1; k >= 0; k-- {
		op := o.ops[k]
		if op.insert {
			ids = slices.Delete(ids, op.index, op.index+1)
			maps = slices.Delete(maps, op.index, op.index+1)
		} else {
			ids = slices.Insert(ids, op.index, op.id)
			maps = slices.Insert(maps, op.index, op.m)
		}
	}
	return ids, maps
}

// fallBack rebuilds the order from the array for the rest of the transaction, keeping the order
// the transaction found for its change.
func (o *cellOrder) fallBack(a *y.YArray) {
	if !o.haveOld {
		o.oldIDs, o.oldMaps = o.before()
		o.haveOld = true
	}
	o.rebuild = true
	o.ops = o.ops[:0]
	ids, maps := walkCells(a)
	o.set(ids, maps)
}

// walkCells reads the cell order from the array.
func walkCells(a *y.YArray) ([]string, []*y.YMap) {
	var ids []string
	var maps []*y.YMap
	for n := a.StartItem(); n != nil; n = n.Right {
		if m := liveCellMap(n); m != nil {
			ids = append(ids, cellIDOf(m))
			maps = append(maps, m)
		}
	}
	return ids, maps
}

// liveCellMap returns the cell map an item of the cells array carries, or nil when the item is
// deleted or is not a map (a foreign writer's value).
func liveCellMap(n *y.Item) *y.YMap {
	if n.Deleted() || !n.Countable() {
		return nil
	}
	ct, ok := n.Content.(*y.ContentType)
	if !ok {
		return nil
	}
	m, _ := ct.Type.(*y.YMap)
	return m
}

// begin starts following a transaction.
func (o *cellOrder) begin(tr *y.Transaction) {
	o.tr = tr
	o.placed = make(map[int]int, len(tr.BeforeState))
	for c, clock := range tr.BeforeState {
		o.placed[c] = clock
	}
	o.dsSeen = map[int]int{}
	o.ops = o.ops[:0]
	o.stale, o.rebuild = false, false
	o.haveOld, o.oldIDs, o.oldMaps = false, nil, nil
}

// orderIn returns the current order, following the running transaction first if a mutator
// changed the array (tr nil: no transaction runs).
func (d *Doc) orderIn(tr *y.Transaction) *cellOrder {
	o := &d.ord
	if tr != nil && o.stale {
		d.follow(tr, false)
	}
	return o
}

// markStale says the running transaction changed the cells array.
func (d *Doc) markStale(tr *y.Transaction) {
	if d.ord.tr != tr {
		d.ord.begin(tr)
	}
	d.ord.stale = true
}

// follow brings the order up to date with what tr did so far; final is the transaction's end
// (its delete set is then sorted and merged, and every client's new structs are known).
func (d *Doc) follow(tr *y.Transaction, final bool) {
	o := &d.ord
	if o.tr != tr {
		o.begin(tr)
	}
	o.stale = false
	if o.rebuild || o.dup {
		if !final { // mid-transaction reads get a fresh walk; the end rebuilds again
			o.fallBack(d.cells)
		}
		o.rebuild = true
		return
	}
	store := d.yd.Store
	// Removed cells: the delete set's structs that are cell maps of the order. Before the end,
	// only the delete items added since the last follow (the set is appended to); at the end,
	// all of them again (it was sorted and merged meanwhile), skipping maps already removed.
	for client, items := range tr.DeleteSet.Clients {
		start := 0
		if !final {
			start = min(o.dsSeen[client], len(items))
			o.dsSeen[client] = len(items)
		}
		for _, di := range items[start:] {
			eachStruct(store, client, di.Clock, di.Length, func(it *y.Item) {
				if !isChildOf(it, d.cells) {
					return
				}
				ct, ok := it.Content.(*y.ContentType)
				if !ok {
					return
				}
				if m, ok := ct.Type.(*y.YMap); ok {
					if i := o.index(m); i >= 0 {
						o.removeAt(i)
					}
				}
			})
		}
	}
	// New cells: structs created since the last follow whose parent is the cells array.
	var fresh []*y.Item
	clients := tr.AfterState
	if !final {
		clients = map[int]int{int(d.clientID): y.GetState(store, int(d.clientID))}
	}
	for client, end := range clients {
		from := o.placed[client]
		if end <= from {
			continue
		}
		o.placed[client] = end
		eachStruct(store, client, from, end-from, func(it *y.Item) {
			if isChildOf(it, d.cells) && it.ParentSub == "" && liveCellMap(it) != nil {
				fresh = append(fresh, it)
			}
		})
	}
	if len(fresh) > 0 && !d.place(fresh) {
		o.mismatches++
		o.fallBack(d.cells)
	}
}

// place inserts new cell items into the order. Each goes into the run of new cells that
// follows its nearest left neighbour already in the order (its anchor); a run is read by
// walking right from the anchor. It reports false when the array does not match the order.
func (d *Doc) place(fresh []*y.Item) bool {
	o := &d.ord
	isNew := make(map[*y.Item]bool, len(fresh))
	for _, it := range fresh {
		isNew[it] = true
	}
	anchorOf := map[*y.Item]*y.Item{} // nil: the start of the array
	anchors := []*y.Item{}
	seen := map[*y.Item]bool{}
	for _, it := range fresh {
		if o.holds(liveCellMap(it)) {
			continue // placed by a rebuild already
		}
		var anchor *y.Item
		var path []*y.Item
		for n := it.Left; n != nil; n = n.Left {
			if a, ok := anchorOf[n]; ok {
				anchor = a
				break
			}
			m := liveCellMap(n)
			if m == nil {
				continue
			}
			if isNew[n] {
				path = append(path, n)
				continue
			}
			if !o.holds(m) {
				return false // a live cell that is neither new nor known
			}
			anchor = n
			break
		}
		anchorOf[it] = anchor
		for _, p := range path {
			anchorOf[p] = anchor
		}
		if !seen[anchor] {
			seen[anchor] = true
			anchors = append(anchors, anchor)
		}
	}
	for _, a := range anchors {
		at := 0
		n := d.cells.StartItem()
		if a != nil {
			i := o.index(liveCellMap(a))
			if i < 0 {
				return false
			}
			at, n = i+1, a.Right
		}
		for ; n != nil; n = n.Right {
			m := liveCellMap(n)
			if m == nil {
				continue
			}
			if !isNew[n] {
				if !o.holds(m) {
					return false
				}
				break // the next known cell ends the run
			}
			if o.holds(m) { // placed by a rebuild already
				if at = o.index(m) + 1; at == 0 {
					return false
				}
				continue
			}
			o.insertAt(at, m, cellIDOf(m))
			at++
		}
	}
	return true
}

// isChildOf reports whether an item sits directly in the array.
func isChildOf(it *y.Item, a *y.YArray) bool {
	p, ok := it.Parent.(y.IAbstractType)
	return ok && p == y.IAbstractType(a)
}

// eachStruct calls fn for every item of a client overlapping [clock, clock+length), without
// splitting structs (read only).
func eachStruct(store *y.StructStore, client, clock, length int, fn func(*y.Item)) {
	ss, ok := store.Clients[client]
	if !ok || ss == nil || len(*ss) == 0 || length <= 0 {
		return
	}
	structs := *ss
	i, err := y.FindIndexSS(structs, clock)
	if err != nil {
		return
	}
	for ; i < len(structs); i++ {
		s := structs[i]
		if s.GetID().Clock >= clock+length {
			return
		}
		if it, ok := s.(*y.Item); ok {
			fn(it)
		}
	}
}

// finishOrder follows the transaction to its end and, when change is not nil, records the cells
// inserted, deleted, replaced (deleted and re-created under the same id, as moves and type
// changes do) and whether surviving cells changed places. idChanged says a cell's id key was
// written: the order is then rebuilt.
func (d *Doc) finishOrder(tr *y.Transaction, structural, idChanged bool, c *Change) {
	o := &d.ord
	if !structural && !idChanged && !(o.tr == tr && (o.stale || len(o.ops) > 0)) {
		return
	}
	d.follow(tr, true)
	defer func() {
		o.tr, o.ops, o.placed, o.dsSeen = nil, o.ops[:0], nil, nil
		o.haveOld, o.oldIDs, o.oldMaps = false, nil, nil
	}()
	if o.rebuild || o.dup || idChanged {
		oldIDs, oldMaps := o.before()
		ids, maps := walkCells(d.cells)
		o.set(ids, maps)
		if c != nil && (!slices.Equal(oldMaps, maps) || !slices.Equal(oldIDs, ids)) {
			diffOrder(c, oldIDs, oldMaps, ids, maps)
		}
		return
	}
	if c == nil || len(o.ops) == 0 {
		return
	}
	added := map[*y.YMap]bool{}
	var removed []orderOp // maps of the old order that left it
	for _, op := range o.ops {
		switch {
		case op.insert:
			added[op.m] = true
		case added[op.m]:
			delete(added, op.m) // came and went within the transaction
		default:
			removed = append(removed, op)
		}
	}
	replaced := map[string]bool{}
	for _, op := range removed {
		if _, live := o.byID[op.id]; live {
			replaced[op.id] = true
			c.Cells = append(c.Cells, CellChange{ID: op.id, Fields: []string{"*"}})
		} else {
			c.Deleted = append(c.Deleted, op.id)
		}
	}
	for _, op := range o.ops {
		if op.insert && added[op.m] && !replaced[op.id] {
			c.Inserted = append(c.Inserted, op.id)
		}
	}
	if len(replaced) > 0 && !c.Moved {
		oldIDs, _ := o.before()
		c.Moved = survivorsMoved(oldIDs, o.ids)
	}
}

// survivorsMoved reports whether the ids present in both orders appear in a different order.
func survivorsMoved(old, now []string) bool {
	inOld := make(map[string]bool, len(old))
	for _, id := range old {
		inOld[id] = true
	}
	inNow := make(map[string]bool, len(now))
	for _, id := range now {
		inNow[id] = true
	}
	i, j := 0, 0
	for {
		for i < len(old) && !inNow[old[i]] {
			i++
		}
		for j < len(now) && !inOld[now[j]] {
			j++
		}
		if i == len(old) || j == len(now) {
			return i != len(old) || j != len(now)
		}
		if old[i] != now[j] {
			return true
		}
		i++
		j++
	}
}

// diffOrder records inserted, deleted, replaced and moved cells by comparing two whole orders.
func diffOrder(c *Change, oldIDs []string, oldMaps []*y.YMap, ids []string, maps []*y.YMap) {
	old := make(map[string]*y.YMap, len(oldIDs))
	for i, id := range oldIDs {
		old[id] = oldMaps[i]
	}
	now := make(map[string]bool, len(ids))
	var kept []string
	for i, id := range ids {
		now[id] = true
		prev, existed := old[id]
		switch {
		case !existed:
			c.Inserted = append(c.Inserted, id)
		case prev != maps[i]:
			c.Cells = append(c.Cells, CellChange{ID: id, Fields: []string{"*"}})
			kept = append(kept, id)
		default:
			kept = append(kept, id)
		}
	}
	var before []string
	for _, id := range oldIDs {
		if !now[id] {
			c.Deleted = append(c.Deleted, id)
		} else {
			before = append(before, id)
		}
	}
	if !slices.Equal(before, kept) {
		c.Moved = true
	}
}
