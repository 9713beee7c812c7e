package ydoc

import (
	"errors"

	y "github.com/skyterra/y-crdt"
)

// Undo of the agent's own edits, as Yjs's UndoManager does it: an edit marked undoable records
// the items it inserted and the ones it deleted (kept from garbage collection); undoing deletes
// the former and re-creates the latter where they were. Other people's edits — including text
// typed inside or around the agent's — are untouched, because they are other items.
//
// y-crdt has an UndoManager, but it cannot be used as is: popping never shortens its stacks,
// its redo copies a shared type with a deep structural copy of the whole document graph
// (ContentType.Copy), and it re-creates deleted items in random map order (a text comes back
// shuffled). The stack bookkeeping and the re-creation are ours; the item primitives are the
// library's.

// MaxUndo bounds the undo stack (the oldest steps are forgotten).
const MaxUndo = 100

// ErrNothingToUndo / ErrNothingToRedo are returned when the stack has nothing that still
// changes the document.
var (
	ErrNothingToUndo = errors.New("ydoc: nothing to undo")
	ErrNothingToRedo = errors.New("ydoc: nothing to redo")
)

type undoMode int

const (
	undoOff       undoMode = iota
	undoRecording          // an undoable edit
	undoUndoing            // its changes go to the redo stack
	undoRedoing            // its changes go back to the undo stack
)

type stackItem struct {
	insertions, deletions *y.DeleteSet
}

type undoState struct {
	undo, redo []*stackItem
	mode       undoMode // of the transaction running
}

// Undoable marks the transaction as an edit the agent may undo later.
func (tx *Txn) Undoable() {
	if tx.d.undo.mode == undoOff {
		tx.d.undo.mode = undoRecording
	}
}

// UndoDepth returns how many undo and redo steps are recorded.
func (d *Doc) UndoDepth() (undo, redo int) { return len(d.undo.undo), len(d.undo.redo) }

// Undo reverts the most recent undoable edit that still changes something (the edit's items may
// all have been deleted by someone else meanwhile: it is skipped). It must be the transaction's
// only operation.
func (tx *Txn) Undo() error {
	if !tx.pop(&tx.d.undo.undo, undoUndoing) {
		return ErrNothingToUndo
	}
	return nil
}

// Redo re-applies the most recently undone edit.
func (tx *Txn) Redo() error {
	if !tx.pop(&tx.d.undo.redo, undoRedoing) {
		return ErrNothingToRedo
	}
	return nil
}

// undoScope is what undo may touch: the cells, or the text; never the state map.
func (d *Doc) undoScope() y.IAbstractType {
	if d.kind == KindNotebook {
		return d.cells
	}
	return d.source
}

// inScope reports whether a changed type is the scope or inside it.
func inScope(scope, t y.IAbstractType) bool {
	for t != nil {
		if t == scope {
			return true
		}
		it := t.GetItem()
		if it == nil {
			return false
		}
		t, _ = it.Parent.(y.IAbstractType)
	}
	return false
}

// recordUndo runs after every transaction (y-crdt lock held): an undoable edit, an undo or a
// redo that changed the scope becomes a stack item, and what it deleted is kept.
func (d *Doc) recordUndo(tr *y.Transaction) {
	mode := d.undo.mode
	if mode == undoOff || tr.Origin != originLocal {
		return
	}
	scope := d.undoScope()
	touched := false
	for key := range tr.Changed {
		if t, ok := key.(y.IAbstractType); ok && inScope(scope, t) {
			touched = true
			break
		}
	}
	if !touched {
		return
	}
	insertions := y.NewDeleteSet()
	for client, end := range tr.AfterState {
		if start := tr.BeforeState[client]; end > start {
			y.AddToDeleteSet(insertions, client, start, end-start)
		}
	}
	item := &stackItem{insertions: insertions, deletions: y.MergeDeleteSets([]*y.DeleteSet{tr.DeleteSet})}
	switch mode {
	case undoRecording:
		d.undo.undo = append(d.undo.undo, item)
		d.forget(tr, &d.undo.redo, len(d.undo.redo)) // a new edit ends the redo history
	case undoUndoing:
		d.undo.redo = append(d.undo.redo, item)
	case undoRedoing:
		d.undo.undo = append(d.undo.undo, item)
	}
	y.IterateDeletedStructs(tr, tr.DeleteSet, func(s y.IAbstractStruct) {
		if it, ok := s.(*y.Item); ok && y.IsParentOf(scope, it) {
			y.KeepItem(it, true)
		}
	})
	if n := len(d.undo.undo) - MaxUndo; n > 0 {
		d.forget(tr, &d.undo.undo, n)
	}
}

// forget drops the n oldest items of a stack, letting what they kept be collected.
func (d *Doc) forget(tr *y.Transaction, stack *[]*stackItem, n int) {
	scope := d.undoScope()
	for _, si := range (*stack)[:n] {
		y.IterateDeletedStructs(tr, si.deletions, func(s y.IAbstractStruct) {
			if it, ok := s.(*y.Item); ok && y.IsParentOf(scope, it) {
				y.KeepItem(it, false)
			}
		})
	}
	*stack = append((*stack)[:0], (*stack)[n:]...)
}

// pop reverts stack items, newest first, until one changes the document.
func (tx *Txn) pop(stack *[]*stackItem, mode undoMode) bool {
	d, tr := tx.d, tx.tr
	store := tr.Doc.Store
	scope := d.undoScope()
	d.undo.mode = mode
	for len(*stack) > 0 {
		si := (*stack)[len(*stack)-1]
		*stack = (*stack)[:len(*stack)-1]
		var toDelete []*y.Item
		y.IterateDeletedStructs(tr, si.insertions, func(s y.IAbstractStruct) {
			it, ok := s.(*y.Item)
			if !ok {
				return
			}
			if it.Redone != nil {
				n := it.Length
				item, diff := y.FollowRedone(store, it.ID)
				if item != nil && diff > 0 {
					item = y.GetItemCleanStart(tr, y.GenID(item.ID.Client, item.ID.Clock+diff))
				}
				// Re-created neighbours may have merged into one struct (they get consecutive
				// clocks): delete the copy of this insertion only.
				if item != nil && item.Length > n {
					y.GetItemCleanEnd(tr, store, y.GenID(item.ID.Client, item.ID.Clock+n-1))
				}
				it = item
			}
			if it != nil && !gone(it) && y.IsParentOf(scope, it) {
				toDelete = append(toDelete, it)
			}
		})
		redo := map[*y.Item]bool{}
		y.IterateDeletedStructs(tr, si.deletions, func(s y.IAbstractStruct) {
			// Structs inserted and deleted by the same edit are never re-created.
			if it, ok := s.(*y.Item); ok && y.IsParentOf(scope, it) && !y.IsDeleted(si.insertions, &it.ID) {
				redo[it] = true
			}
		})
		performed := false
		tails := map[*y.Item]*y.Item{}
		for _, it := range documentOrder(redo) {
			if redoItem(tr, it, redo, tails) != nil {
				performed = true
			}
		}
		for i := len(toDelete) - 1; i >= 0; i-- {
			if !gone(toDelete[i]) {
				deleteItemDeep(tr, toDelete[i])
				performed = true
			}
		}
		if performed {
			dropSearchMarkers(tr)
			return true
		}
	}
	return false
}

// dropSearchMarkers forgets the search markers (the index → item cache of a list or text) of
// every list the transaction changed, as Yjs's UndoManager does at the end of popStackItem.
// Re-creating and deleting items directly (Integrate, Delete) bypasses the marker bookkeeping
// that the index-based edits do, so a marker can point at an item with an index it no longer
// has, and the next edit at an index lands in the wrong place. y-crdt's own UndoManager means to
// do this but tests the changed keys for nil, while y-crdt records a list change under ""
// (AddChangedTypeToTransaction's parentSub is a string), so it never does.
func dropSearchMarkers(tr *y.Transaction) {
	for t, keys := range tr.Changed {
		if at, ok := t.(y.IAbstractType); ok && keys.Has("") {
			at.SetSearchMarker(nil)
		}
	}
}

// documentOrder orders items to re-create left to right within each list (an item goes back
// next to its re-created left neighbour), parents before children.
func documentOrder(items map[*y.Item]bool) []*y.Item {
	var out []*y.Item
	seen := map[y.IAbstractType]bool{}
	depth := func(it *y.Item) int {
		n := 0
		for p, _ := it.Parent.(y.IAbstractType); p != nil && p.GetItem() != nil; p, _ = p.GetItem().Parent.(y.IAbstractType) {
			n++
		}
		return n
	}
	byDepth := map[int][]y.IAbstractType{}
	maxDepth := 0
	for it := range items {
		p, ok := it.Parent.(y.IAbstractType)
		if !ok || seen[p] {
			continue
		}
		seen[p] = true
		dp := depth(it)
		byDepth[dp] = append(byDepth[dp], p)
		maxDepth = max(maxDepth, dp)
	}
	for dp := 0; dp <= maxDepth; dp++ {
		for _, p := range byDepth[dp] {
			for n := p.StartItem(); n != nil; n = n.Right { // list items, in order
				if items[n] {
					out = append(out, n)
				}
			}
			for _, last := range p.GetMap() { // map entries: every value a key ever had
				for n := last; n != nil; n = n.Left {
					if items[n] {
						out = append(out, n)
					}
				}
			}
		}
	}
	return out
}

// gone reports whether an item or one of its ancestors is deleted. yjs deletes a deleted type's
// contents with it; y-crdt does not (its ContentType.Delete is a TODO), so the items of a cell a
// human deleted still look alive: without this an undo would "re-create" text inside the deleted
// cell, change nothing visible, and count as performed.
func gone(it *y.Item) bool {
	for it != nil {
		if it.Deleted() {
			return true
		}
		pt, ok := it.Parent.(y.IAbstractType)
		if !ok || pt == nil {
			return false
		}
		it = pt.GetItem()
	}
	return false
}

// redoItem re-creates a deleted item where it was (Yjs's redoItem), re-creating its parent
// first when that was deleted too and is to be re-created.
func redoItem(tr *y.Transaction, item *y.Item, redo map[*y.Item]bool, tails map[*y.Item]*y.Item) *y.Item {
	if item.Redone != nil {
		return y.GetItemCleanStart(tr, *item.Redone)
	}
	own := tr.Doc.ClientID
	parentType, ok := item.Parent.(y.IAbstractType)
	if !ok {
		return nil
	}
	parentItem := parentType.GetItem()
	var left, right *y.Item
	if item.ParentSub == "" {
		left, right = item.Left, item
	} else {
		// A map value comes back as the current value, unless someone else set the key since.
		left = item
		for left.Right != nil {
			left = left.Right
			if left.ID.Client != own {
				return nil
			}
		}
	}
	if parentItem != nil && parentItem.Redone == nil && gone(parentItem) {
		if !redo[parentItem] || redoItem(tr, parentItem, redo, tails) == nil {
			return nil
		}
	}
	if parentItem != nil && parentItem.Redone != nil {
		for parentItem.Redone != nil {
			parentItem = y.GetItemCleanStart(tr, *parentItem.Redone)
		}
		if item.ParentSub == "" {
			left, right = placeInCopy(tr, item, parentItem, tails)
		} else {
			left = nil // a map entry of a re-created map: the map is empty
			if cur, ok := parentItemType(parentItem).GetMap()[item.ParentSub]; ok {
				left = cur
			}
		}
	}
	content := copyContent(item.Content)
	if content == nil {
		return nil
	}
	parent := parentType
	if parentItem != nil {
		parent = parentItemType(parentItem)
	}
	if parent == nil {
		return nil
	}
	id := y.GenID(own, y.GetState(tr.Doc.Store, own))
	redone := y.NewItem(id, left, y.GetItemLastID(left), right, y.GetItemID(right), parent, item.ParentSub, content)
	item.Redone = &redone.ID
	y.KeepItem(redone, true)
	redone.Integrate(tr, 0)
	if item.ParentSub == "" && parentItem != nil && parentItem.Redone == nil && createdIn(tr, parentItem) {
		tails[parentItem] = redone
	}
	return redone
}

// createdIn reports whether an item was created by the transaction.
func createdIn(tr *y.Transaction, it *y.Item) bool {
	return it.ID.Clock >= tr.BeforeState[it.ID.Client]
}

// placeInCopy finds the neighbours for a list item re-created in a copy of its parent (the
// parent was deleted and re-created: parentItem is the copy's item).
//
// A copy made by this transaction holds only what this undo re-created from the old parent, in
// document order (documentOrder): the item goes at its end, and the copy reads as the old
// parent did. Yjs instead re-creates in clock order and finds each item's neighbours by following
// "redone" from its old neighbours; but a re-created copy sits left of the item it replaces, so
// following "redone" from a right neighbour can land on the left neighbour or left of it, and an
// item whose origins are not left and right of each other in that order is placed differently by
// every replica that decodes it (it splits its left neighbour to find its right one): the
// replicas stop converging.
//
// A copy made earlier (by another undo) may since hold other people's text: there the nearest
// old neighbours that have copies there give the neighbours, found as Yjs does (following
// "redone" from each neighbour's first unit), except that when they are not in order the item
// goes right after the left one.
func placeInCopy(tr *y.Transaction, item, parentItem *y.Item, tails map[*y.Item]*y.Item) (left, right *y.Item) {
	parent := parentItemType(parentItem)
	if parent == nil {
		return nil, nil
	}
	if createdIn(tr, parentItem) {
		left = tails[parentItem]
		if left == nil {
			left = parent.StartItem()
		}
		for left != nil && left.Right != nil {
			left = left.Right
		}
		return left, nil
	}
	for n := item.Left; n != nil; n = n.Left {
		if c := copyIn(tr, n.ID, parentItem); c != nil {
			left = c
			break
		}
	}
	for n := item; n != nil; n = n.Right {
		if c := copyIn(tr, n.ID, parentItem); c != nil {
			right = c
			break
		}
	}
	if !follows(left, right) {
		right = parent.StartItem()
		if left != nil {
			right = left.Right
		}
	}
	return left, right
}

// copyIn follows "redone" from one unit (a character, an element) of an item to that unit's
// copy in the list of parentItem, or nil; the copy's item is made to start there.
func copyIn(tr *y.Transaction, id y.ID, parentItem *y.Item) *y.Item {
	store := tr.Doc.Store
	for {
		it, ok := y.GetItem(store, id).(*y.Item)
		if !ok {
			return nil
		}
		if parentOf(it) == parentItem {
			return y.GetItemCleanStart(tr, id)
		}
		if it.Redone == nil {
			return nil
		}
		id = y.GenID(it.Redone.Client, it.Redone.Clock+(id.Clock-it.ID.Clock))
	}
}

// follows reports whether right comes after left in their list (nil left: the list's start;
// nil right: its end).
func follows(left, right *y.Item) bool {
	if left == nil || right == nil {
		return true
	}
	for n := left.Right; n != nil; n = n.Right {
		if n == right {
			return true
		}
	}
	return false
}

func parentOf(n *y.Item) *y.Item {
	if p, ok := n.Parent.(y.IAbstractType); ok {
		return p.GetItem()
	}
	return nil
}

func parentItemType(it *y.Item) y.IAbstractType {
	if ct, ok := it.Content.(*y.ContentType); ok {
		return ct.Type
	}
	return nil
}

// copyContent copies an item's content for re-creation: a shared type comes back empty (its
// children are re-created one by one), values are copied.
func copyContent(c y.IAbstractContent) y.IAbstractContent {
	switch c := c.(type) {
	case *y.ContentType:
		switch c.Type.(type) {
		case *y.YText:
			return y.NewContentType(y.NewYText(""))
		case *y.YMap:
			return y.NewContentType(y.NewYMap(nil))
		case *y.YArray:
			return y.NewContentType(y.NewYArray())
		}
		return nil
	case *y.ContentString, *y.ContentAny, *y.ContentBinary, *y.ContentJson:
		return c.Copy()
	}
	return nil // collected (ContentDeleted) or kinds Jupyter documents do not use
}
