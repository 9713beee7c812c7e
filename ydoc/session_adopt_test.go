package ydoc

import (
	"bytes"
	"testing"

	"github.com/rs/zerolog"
)

// The sidecar and the server die together: the replica's state comes back from the sidecar's log
// (AdoptLost) into a fresh session, which brings it back to the rebuilt room at its first sync
// exactly as after ResetServerLost.
func TestSessionAdoptLostRestoresAfterSidecarRestart(t *testing.T) {
	file := *sessionNotebook()
	srv := newFakeServer(t, &file)
	a := srv.newClient("agent")
	a.connect()
	srv.flush()
	a.record(a.sess.proposeDurable(1, func(tx *Txn, _ bool) error {
		return tx.InsertCells(1, []Cell{{ID: "ag1", Source: "agent cell"}})
	}))
	srv.flush()
	a.propose(2, func(tx *Txn, _ bool) error { return tx.SetSource(tx.CellIndex("c2"), "x = 2 # unsaved") })
	srv.flush()
	held := readNotebook(t, a.sess.Doc())
	state := fullUpdate(t, a.sess.Doc())

	// Both processes die; the server rebuilds the room from the (older) file.
	srv2 := newFakeServer(t, &file)
	sess, err := NewSession(KindNotebook, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.AdoptLost(state); err != nil {
		t.Fatalf("AdoptLost: %v", err)
	}
	if got := sess.LostState(); len(got) == 0 {
		t.Fatal("LostState is empty after AdoptLost")
	}
	b := &fakeConn{name: "agent after restart", sess: sess, srv: srv2}
	srv2.conns = []*fakeConn{b}
	sess.RescueFrom(Snapshot{Kind: KindNotebook, Notebook: file})
	b.connect()
	srv2.flush()
	if b.rescue == nil || !b.rescue.Restored || !b.rescue.Lossless() {
		t.Fatalf("rescue report %+v", b.rescue)
	}
	compareNotebooks(t, held, readNotebook(t, srv2.doc), true)
	srv2.requireConverged()
	if sess.LostState() != nil {
		t.Error("the lost replica is still kept after the sync decided")
	}
}

// AdoptLost refuses what it cannot use, and changes nothing then.
func TestSessionAdoptLostRefuses(t *testing.T) {
	nb, _ := loadNotebook(t, *sessionNotebook())
	state := fullUpdate(t, nb)
	newSess := func() *Session {
		s, err := NewSession(KindNotebook, freshClientID(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := newSess().AdoptLost([]byte{1, 2, 3}); err == nil {
		t.Error("garbage adopted")
	}
	// Only the second of two updates: its structs depend on the first.
	d := newTestDoc(t, KindNotebook)
	apply(t, d, state)
	second, _ := transact(t, d, func(tx *Txn) error { return tx.SetSource(0, "changed") })
	s := newSess()
	if err := s.AdoptLost(second); err == nil {
		t.Error("an incomplete state adopted")
	}
	if s.LostState() != nil {
		t.Error("a refused state was kept")
	}
	// After a sync it is too late.
	srv := newFakeServer(t, sessionNotebook())
	c := srv.newClient("c")
	c.connect()
	srv.flush()
	if err := c.sess.AdoptLost(state); err == nil {
		t.Error("adopted after the session synced")
	}
	// A notebook's state for a text session.
	ts, err := NewSession(KindText, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.AdoptLost(state); err == nil {
		t.Error("a notebook's state adopted by a text session")
	}
	// An empty state installs nothing.
	empty := fullUpdate(t, newTestDoc(t, KindNotebook))
	s = newSess()
	if err := s.AdoptLost(empty); err != nil || s.LostState() != nil {
		t.Errorf("empty state: err %v, kept %v", err, s.LostState() != nil)
	}
	// A valid one round-trips.
	s = newSess()
	if err := s.AdoptLost(state); err != nil {
		t.Fatal(err)
	}
	back := newTestDoc(t, KindNotebook)
	apply(t, back, s.LostState())
	compareNotebooks(t, readNotebook(t, nb), readNotebook(t, back), true)
	if bytes.Equal(s.LostState(), nil) {
		t.Error("no state")
	}
}
