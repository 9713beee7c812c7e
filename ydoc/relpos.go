package ydoc

import (
	"errors"
	"fmt"

	y "github.com/skyterra/y-crdt"
)

// Cursors in awareness are Yjs relative positions inside a text: the id of the character a
// position sits before, so it survives edits around it. In a notebook the text is a cell's source
// (a nested Y.Text: "type" is the id of its item, "tname" null); in a text file it is the root
// "source" (tname "source", type null). This is the JSON JupyterLab's cursors use.

// ItemID is a Yjs item id in JSON.
type ItemID struct {
	Client uint64 `json:"client"`
	Clock  uint64 `json:"clock"`
}

// RelPos is a Yjs RelativePosition in its JSON form.
type RelPos struct {
	Type  *ItemID `json:"type"`
	Tname *string `json:"tname"`
	Item  *ItemID `json:"item"`
	Assoc int     `json:"assoc"`
}

// ErrNoSuchText is returned when a position refers to a text that is not there.
var ErrNoSuchText = errors.New("ydoc: no such text")

// textOf returns the Y.Text of a cell's source, or the text file's source for cellID "".
func (d *Doc) textOf(cellID string) (*y.YText, error) {
	if cellID == "" {
		if d.kind != KindText {
			return nil, fmt.Errorf("a notebook position needs a cell id: %w", ErrNoSuchText)
		}
		return d.source, nil
	}
	if d.kind != KindNotebook {
		return nil, fmt.Errorf("a text file has no cells: %w", ErrNoSuchText)
	}
	if i := d.ord.indexOfID(cellID); i >= 0 {
		if t, ok := mustGet(d.ord.maps[i], "source").(*y.YText); ok {
			return t, nil
		}
		return nil, fmt.Errorf("cell %q has no shared source text: %w", cellID, ErrNoSuchText)
	}
	return nil, fmt.Errorf("cell %q: %w", cellID, ErrCellNotFound)
}

// RelativePosition makes a relative position at UTF-16 index of a cell's source (or of the
// text file for cellID ""). An index past the end is clamped to the end.
func (d *Doc) RelativePosition(cellID string, index int) (RelPos, error) {
	var rp RelPos
	err := d.run(func() error {
		t, err := d.textOf(cellID)
		if err != nil {
			return err
		}
		if index < 0 {
			index = 0
		}
		if n := t.GetLength(); index > n {
			index = n
		}
		if item := t.GetItem(); item != nil {
			rp.Type = &ItemID{uint64(item.ID.Client), uint64(item.ID.Clock)}
		} else {
			name := rootSource
			rp.Tname = &name
		}
		for n := t.StartItem(); n != nil; n = n.Right {
			if n.Deleted() || !n.Countable() {
				continue
			}
			if n.Length > index {
				rp.Item = &ItemID{uint64(n.ID.Client), uint64(n.ID.Clock + index)}
				return nil
			}
			index -= n.Length
		}
		return nil // at the end: no item, the position follows the end of the text
	})
	return rp, err
}

// ResolvePosition finds where a relative position is now: the cell it is in ("" for a text
// file) and its UTF-16 index. ok is false when it points nowhere in this document (another
// document, a deleted cell, not yet received).
func (d *Doc) ResolvePosition(rp RelPos) (cellID string, index int, ok bool) {
	_ = d.run(func() error {
		// Positions come from other people's awareness: anything y-crdt would choke on (ids out
		// of JavaScript's integer range, clients this replica never saw, clocks beyond what it
		// holds) points nowhere.
		for _, id := range []*ItemID{rp.Type, rp.Item} {
			if id != nil && !d.knownID(*id) {
				return nil
			}
		}
		var rel y.RelativePosition
		if rp.Type != nil {
			rel.Type = &y.ID{Client: int(rp.Type.Client), Clock: int(rp.Type.Clock)}
		}
		if rp.Tname != nil {
			rel.Tname = *rp.Tname
		}
		if rp.Item != nil {
			rel.Item = &y.ID{Client: int(rp.Item.Client), Clock: int(rp.Item.Clock)}
		}
		rel.Assoc = rp.Assoc
		if rel.Tname != "" && rel.Tname != rootSource {
			return nil
		}
		if rel.Tname == rootSource && d.kind != KindText {
			return nil
		}
		if rel.Tname == rootSource && rel.Item == nil {
			// The end (or, assoc < 0, the start) of the file. y-crdt looks a named root up with
			// GetMap whatever its type, which is not our Y.Text: answer as yjs does.
			cellID, index, ok = "", 0, true
			if rel.Assoc >= 0 {
				index = d.source.GetLength()
			}
			return nil
		}
		abs := y.CreateAbsolutePositionFromRelativePosition(&rel, d.yd)
		if abs == nil || abs.Type == nil {
			return nil
		}
		if d.kind == KindText {
			if abs.Type == y.IAbstractType(d.source) {
				cellID, index, ok = "", abs.Index, true
			}
			return nil
		}
		if _, cell, field := d.locate(abs.Type); cell != nil && field == "source" {
			cellID, index, ok = cellIDOf(cell), abs.Index, true
		}
		return nil
	})
	return cellID, index, ok
}

// maxSafeInt is JavaScript's Number.MAX_SAFE_INTEGER: Yjs ids never exceed it.
const maxSafeInt = 1<<53 - 1

// knownID reports whether an item id is one this replica holds (y-crdt lock held).
func (d *Doc) knownID(id ItemID) bool {
	if id.Client > maxSafeInt || id.Clock > maxSafeInt {
		return false
	}
	if _, ok := d.yd.Store.Clients[int(id.Client)]; !ok {
		return false
	}
	return int(id.Clock) < y.GetState(d.yd.Store, int(id.Client))
}
