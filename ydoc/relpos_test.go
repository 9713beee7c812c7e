package ydoc

import (
	"encoding/json"
	"testing"
)

func TestRelativePositionsFollowEdits(t *testing.T) {
	d := newTestDoc(t, KindNotebook)
	transact(t, d, func(tx *Txn) error {
		return tx.InsertCells(0, []Cell{{ID: "a", Source: "hello world"}, {ID: "b", Source: "second 😀 cell"}})
	})
	rp, err := d.RelativePosition("a", 6) // before "world"
	if err != nil {
		t.Fatal(err)
	}
	if rp.Type == nil || rp.Tname != nil || rp.Item == nil {
		t.Fatalf("a cell position must name the text's item and a character: %+v", rp)
	}
	end, _ := d.RelativePosition("b", 1000) // clamped to the end: no item
	if end.Item != nil {
		t.Errorf("end position has an item: %+v", end)
	}
	// Someone types before the cursor: it moves with its character.
	other := newTestDoc(t, KindNotebook)
	apply(t, other, fullUpdate(t, d))
	u, _ := transact(t, other, func(tx *Txn) error { return tx.SetSource(0, ">> hello world") })
	apply(t, d, u)
	if cell, idx, ok := d.ResolvePosition(rp); !ok || cell != "a" || idx != 9 {
		t.Errorf("after an insert before it: %q %d %v, want a 9", cell, idx, ok)
	}
	if cell, idx, ok := d.ResolvePosition(end); !ok || cell != "b" || idx != utf16Len("second 😀 cell") {
		t.Errorf("end position resolves to %q %d %v", cell, idx, ok)
	}
	// JSON round trip in the shape JupyterLab uses.
	b, _ := json.Marshal(rp)
	var back RelPos
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if cell, _, ok := d.ResolvePosition(back); !ok || cell != "a" {
		t.Errorf("JSON round trip lost the position: %s", b)
	}
	if _, _, ok := d.ResolvePosition(RelPos{Item: &ItemID{Client: 999999, Clock: 5}}); ok {
		t.Error("a position in an unknown item resolved")
	}
	if _, err := d.RelativePosition("missing", 0); err == nil {
		t.Error("a position in a missing cell")
	}
	// Text files use the root name.
	td := newTestDoc(t, KindText)
	transact(t, td, func(tx *Txn) error { return tx.InsertText(0, "abc") })
	trp, err := td.RelativePosition("", 1)
	if err != nil || trp.Tname == nil || *trp.Tname != "source" || trp.Type != nil {
		t.Fatalf("text file position %+v %v", trp, err)
	}
	if cell, idx, ok := td.ResolvePosition(trp); !ok || cell != "" || idx != 1 {
		t.Errorf("text position resolves to %q %d %v", cell, idx, ok)
	}
	// The end of a file names no character; it resolves to the length now (and assoc -1 to 0).
	tend, _ := td.RelativePosition("", 3)
	transact(t, td, func(tx *Txn) error { return tx.InsertText(3, "de") })
	if cell, idx, ok := td.ResolvePosition(tend); !ok || cell != "" || idx != 5 {
		t.Errorf("end of a text file resolves to %q %d %v, want 5", cell, idx, ok)
	}
	tend.Assoc = -1
	if _, idx, ok := td.ResolvePosition(tend); !ok || idx != 0 {
		t.Errorf("end of a text file with assoc -1 resolves to %d %v, want 0", idx, ok)
	}
}

// Cursors come from anyone's awareness: ids y-crdt would panic on resolve to nothing, and the
// replica stays usable.
func TestResolvePositionRejectsForeignIDs(t *testing.T) {
	d := newTestDoc(t, KindNotebook)
	transact(t, d, func(tx *Txn) error { return tx.InsertCells(0, []Cell{{ID: "a", Source: "hello"}}) })
	good, _ := d.RelativePosition("a", 2)
	for _, rp := range []RelPos{
		{Item: &ItemID{Client: 424242, Clock: 1 << 63}},
		{Item: &ItemID{Client: 424242, Clock: 3}},
		{Type: &ItemID{Client: 424242, Clock: 1 << 63}},
		{Item: &ItemID{Client: good.Item.Client, Clock: 1 << 40}},
		{Item: &ItemID{Client: 1 << 60, Clock: 0}},
	} {
		if _, _, ok := d.ResolvePosition(rp); ok {
			t.Errorf("%+v resolved", rp)
		}
	}
	if d.Err() != nil {
		t.Fatalf("the replica broke: %v", d.Err())
	}
	if cell, idx, ok := d.ResolvePosition(good); !ok || cell != "a" || idx != 2 {
		t.Errorf("a good position after the bad ones: %q %d %v", cell, idx, ok)
	}
	transact(t, d, func(tx *Txn) error { return tx.SetSource(0, "hello!") })
}
