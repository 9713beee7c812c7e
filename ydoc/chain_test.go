package ydoc

import (
	"slices"
	"testing"
)

// Edits whose updates travel as one: the server holds exactly what the parts would have given
// it, every edit is confirmed by the one echo, and a peer converges.
func TestChainLocalUpdatesOneFrameForManyEdits(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	b := srv.newClient("b")
	a.connect()
	b.connect()
	srv.flush()

	a.propose(1, appendSource("c1", "\nx = 1"))
	a.propose(2, func(tx *Txn, _ bool) error { return tx.SetSource(2, "") })    // a delete only
	a.propose(3, func(tx *Txn, _ bool) error { return tx.SetSource(0, "# T") }) // a delete and an insert
	a.propose(4, appendSource("c1", "\ny = 2"))
	if len(a.toServer) != 5 {
		t.Fatalf("%d frames for four edits, want 5 (four updates, a step 1 behind the delete-only one)", len(a.toServer))
	}
	chained := ChainLocalUpdates(a.toServer)
	if len(chained) != 2 {
		t.Fatalf("ChainLocalUpdates gave %d frames, want 2 (the updates as one, then the step 1)", len(chained))
	}
	if f, err := DecodeFrame(chained[1]); err != nil || f.Sync != SyncStep1 {
		t.Fatalf("the second frame is %v (%v), want the step 1", f.Sync, err)
	}
	f, err := DecodeFrame(chained[0])
	if err != nil || f.Sync != SyncUpdate {
		t.Fatalf("chained frame: %v, %v", f.Sync, err)
	}
	if _, err := ParseUpdate(f.Payload); err != nil {
		t.Fatalf("the chained update does not parse: %v", err)
	}
	a.toServer = chained
	srv.flush()
	if got := a.doneIDs(); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("confirmed %v, want all four edits", got)
	}
	for _, r := range a.done {
		if r.Err != nil {
			t.Fatalf("edit %d: %v", r.ID, r.Err)
		}
	}
	srv.requireConverged()
	nb := readNotebook(t, srv.doc)
	if nb.Cells[1].Source != baseNotebook().Cells[1].Source+"\nx = 1\ny = 2" || nb.Cells[2].Source != "" || nb.Cells[0].Source != "# T" {
		t.Fatalf("server's notebook after the chained update: %q, %q, %q", nb.Cells[0].Source, nb.Cells[1].Source, nb.Cells[2].Source)
	}
}

// Frames that are not local updates of one client in sequence stay as they are and in place.
func TestChainLocalUpdatesKeepsWhatCannotChain(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	c := srv.newClient("c")
	a.connect()
	c.connect()
	srv.flush()
	a.propose(1, appendSource("c1", "a"))
	c.propose(2, appendSource("c1", "c")) // another client's update
	a.propose(3, appendSource("c1", "b"))
	step1 := EncodeSync(SyncStep1, a.replica.Doc().StateVector().Encode())
	in := [][]byte{step1, a.toServer[0], c.toServer[0], a.toServer[1], {0xff}}
	out := ChainLocalUpdates(in)
	if len(out) != len(in) {
		t.Fatalf("%d frames out of %d, want each kept", len(out), len(in))
	}
	for i := range in {
		if !slices.Equal(in[i], out[i]) {
			t.Fatalf("frame %d changed", i)
		}
	}
	// Two of a's updates with one of c's between them: a's are not adjacent, nothing chains.
	out = ChainLocalUpdates([][]byte{a.toServer[0], c.toServer[0], a.toServer[1]})
	if len(out) != 3 {
		t.Fatalf("%d frames, want 3", len(out))
	}
	// a's second update without its first does not follow anything: a gap is never closed.
	out = ChainLocalUpdates([][]byte{a.toServer[1], a.toServer[0]})
	if len(out) != 2 {
		t.Fatalf("out-of-order updates chained into %d frames, want 2", len(out))
	}
}

func FuzzChainLocalUpdates(f *testing.F) {
	f.Add([]byte{0, 2, 1, 0, 0})
	f.Add(EncodeSync(SyncUpdate, []byte{1, 1, 5, 0, 4, 1, 1, 'x', 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fr := range ChainLocalUpdates([][]byte{b, b}) {
			if f, err := DecodeFrame(fr); err == nil && f.Type == MsgSync && f.Sync == SyncUpdate && !slices.Equal(fr, b) {
				if _, err := ParseUpdate(f.Payload); err != nil {
					t.Fatalf("chained update does not parse: %v", err)
				}
			}
		}
	})
}
