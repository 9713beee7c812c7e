package ydoc

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

// fakeServer is a minimal in-memory Jupyter room: one Doc, and a broadcast of every update that
// changed it to every connected client, the sender included (as pycrdt-websocket does).
type fakeServer struct {
	t     *testing.T
	doc   *Doc
	conns []*fakeConn
	// hold: updates are applied but not broadcast (jupyter-server-documents during a client's
	// handshake); catchUp sends what was held.
	hold bool
}

// catchUp broadcasts everything the server gained since sv as one update with its whole delete
// set, as jupyter-server-documents does when a handshake ends.
func (s *fakeServer) catchUp(sv StateVector) {
	s.t.Helper()
	diff, err := s.doc.EncodeStateAsUpdate(sv.Encode())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, o := range s.conns {
		if o.open {
			o.toClient = append(o.toClient, EncodeSync(SyncUpdate, diff))
		}
	}
}

// fakeConn is one client's websocket: frames queued in each direction.
type fakeConn struct {
	name     string
	replica  *Replica
	srv      *fakeServer
	toServer [][]byte
	toClient [][]byte
	open     bool

	done    []EditResult
	changes []Change
	synced  int
	rescue  *RescueReport // the last rescue report
	saveNow int           // outputs asking for a save
}

func newFakeServer(t *testing.T, nb *Notebook) *fakeServer {
	t.Helper()
	s := &fakeServer{t: t, doc: newTestDoc(t, KindNotebook)}
	if nb != nil {
		transact(t, s.doc, func(tx *Txn) error { return tx.LoadNotebook(*nb) })
	}
	return s
}

func (s *fakeServer) newClient(name string) *fakeConn {
	s.t.Helper()
	replica, err := NewReplica(KindNotebook, freshClientID(), zerolog.Nop())
	if err != nil {
		s.t.Fatalf("NewSession: %v", err)
	}
	c := &fakeConn{name: name, replica: replica, srv: s}
	s.conns = append(s.conns, c)
	return c
}

// connect opens the transport: the client sends its step 1, the server its own step 1.
func (c *fakeConn) connect() {
	c.open = true
	c.toServer = nil
	c.toClient = nil
	c.record(c.replica.Connect())
	c.toClient = append(c.toClient, EncodeSync(SyncStep1, c.srv.doc.StateVector().Encode()))
}

func (c *fakeConn) disconnect() {
	c.open = false
	c.toServer = nil
	c.toClient = nil
	c.replica.Disconnected()
}

func (c *fakeConn) record(out Output) {
	if c.open {
		c.toServer = append(c.toServer, out.Frames...)
	}
	c.done = append(c.done, out.Done...)
	c.changes = append(c.changes, out.Changes...)
	if out.Synced {
		c.synced++
	}
	if out.Rescue != nil {
		c.rescue = out.Rescue
	}
	if out.SaveNow {
		c.saveNow++
	}
}

func (c *fakeConn) propose(id uint64, fn EditFunc) {
	c.record(c.replica.Propose(id, Proposal{Edit: fn}))
}

// appendSource is an edit that types text at the end of a cell's source, as a person would.
func appendSource(cellID, text string) EditFunc {
	return func(tx *Txn, _ bool) error {
		i := tx.CellIndex(cellID)
		c, err := tx.Cell(i)
		if err != nil {
			return err
		}
		return tx.SetSource(i, c.Source+text)
	}
}

// proposeDurable proposes a function as a durable edit.
func (s *Replica) proposeDurable(id uint64, fn func(*Txn, bool) error) Output {
	return s.Propose(id, Proposal{Edit: DurableFunc(fn)})
}

// serverReceive handles one frame from c at the server.
func (s *fakeServer) receive(c *fakeConn, b []byte) {
	s.t.Helper()
	f, err := DecodeFrame(b)
	if err != nil {
		s.t.Fatalf("server: bad frame from %s: %v", c.name, err)
	}
	if f.Type != MsgSync {
		return
	}
	switch f.Sync {
	case SyncStep1:
		diff, err := s.doc.EncodeStateAsUpdate(f.Payload)
		if err != nil {
			s.t.Fatalf("server: %v", err)
		}
		c.toClient = append(c.toClient, EncodeSync(SyncStep2, diff))
	case SyncStep2, SyncUpdate:
		// Like yrs, the server broadcasts when the transaction inserted something or deleted
		// something that was not deleted before.
		before := s.doc.StateVector()
		deletedBefore := s.deleteSet()
		meta, _, err := s.doc.Apply(f.Payload)
		if err != nil {
			s.t.Fatalf("server: apply from %s: %v", c.name, err)
		}
		changed := !reflect.DeepEqual(before, s.doc.StateVector())
		for _, r := range meta.Deletes {
			changed = changed || !deletedBefore.Contains(r)
		}
		if !changed || s.hold {
			return
		}
		for _, o := range s.conns {
			if o.open {
				o.toClient = append(o.toClient, EncodeSync(SyncUpdate, f.Payload))
			}
		}
	}
}

// logPending describes every unconfirmed edit, for failure messages.
func (s *fakeServer) logPending(t *testing.T) {
	t.Helper()
	for _, c := range s.conns {
		for _, e := range c.replica.inflight {
			t.Logf("%s: edit %d in flight: structs %+v deletes %+v; server known to hold %v, deletes %v; server state %v",
				c.name, e.id, e.structs, e.deletes, c.replica.serverSV, c.replica.serverDeletes, s.doc.StateVector())
		}
		t.Logf("%s: %d queued, %d awaiting replay", c.name, len(c.replica.queued), len(c.replica.replay))
	}
}

// deleteSet is everything the server's store has deleted.
func (s *fakeServer) deleteSet() IDSet {
	s.t.Helper()
	meta, err := ParseUpdate(fullUpdate(s.t, s.doc))
	if err != nil {
		s.t.Fatalf("server: own state does not parse: %v", err)
	}
	set := IDSet{}
	for _, r := range meta.Deletes {
		set.Add(r)
	}
	return set
}

// clientReceive delivers one frame to the session.
func (c *fakeConn) receive(b []byte) {
	c.srv.t.Helper()
	f, err := DecodeFrame(b)
	if err != nil {
		c.srv.t.Fatalf("%s: bad frame: %v", c.name, err)
	}
	out, err := c.replica.Receive(f)
	if err != nil {
		c.srv.t.Fatalf("%s: Receive(%v): %v", c.name, f.Sync, err)
	}
	c.record(out)
}

// deliverToServer hands every queued client frame to the server.
func (c *fakeConn) deliverToServer() {
	frames := c.toServer
	c.toServer = nil
	for _, b := range frames {
		c.srv.receive(c, b)
	}
}

// deliverToClient hands every queued server frame to the client.
func (c *fakeConn) deliverToClient() {
	frames := c.toClient
	c.toClient = nil
	for _, b := range frames {
		c.receive(b)
	}
}

// flush runs the network until nothing is in flight.
func (s *fakeServer) flush() {
	s.t.Helper()
	for round := 0; ; round++ {
		if round > 100 {
			s.t.Fatalf("network did not settle")
		}
		busy := false
		for _, c := range s.conns {
			if len(c.toServer) > 0 || len(c.toClient) > 0 {
				busy = true
			}
			c.deliverToServer()
		}
		for _, c := range s.conns {
			c.deliverToClient()
		}
		if !busy {
			return
		}
	}
}

func (c *fakeConn) doneIDs() []uint64 {
	var ids []uint64
	for _, r := range c.done {
		ids = append(ids, r.ID)
	}
	return ids
}

func (c *fakeConn) result(id uint64) (EditResult, bool) {
	for _, r := range c.done {
		if r.ID == id {
			return r, true
		}
	}
	return EditResult{}, false
}

// requireConverged checks that every client's replica equals the server's.
func (s *fakeServer) requireConverged() {
	s.t.Helper()
	want := readNotebook(s.t, s.doc)
	for _, c := range s.conns {
		compareNotebooks(s.t, want, readNotebook(s.t, c.replica.Doc()), true)
		if c.replica.Doc().HasPending() {
			s.t.Errorf("%s has pending structs", c.name)
		}
	}
}

// countingEdit wraps an edit, recording each call's replaying flag.
type countingEdit struct {
	calls []bool
	fn    func(*Txn) error
}

func (e *countingEdit) edit(tx *Txn, replaying bool) error {
	e.calls = append(e.calls, replaying)
	return e.fn(tx)
}

func sessionNotebook() *Notebook {
	nb := baseNotebook()
	return &nb
}

func TestReplicaHandshake(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	b := srv.newClient("b")
	if a.replica.Synced() || a.replica.Pending() != 0 || a.replica.Doc() == nil {
		t.Fatalf("fresh session state wrong")
	}
	if out := a.replica.Tick(); len(out.Frames) != 0 {
		t.Fatalf("Tick before sync sent frames")
	}
	a.connect()
	b.connect()
	if len(a.toServer) != 1 {
		t.Fatalf("Connect sent %d frames, want one step 1", len(a.toServer))
	}
	if f, _ := DecodeFrame(a.toServer[0]); f.Sync != SyncStep1 {
		t.Fatalf("Connect sent %v", f.Sync)
	}
	srv.flush()
	for _, c := range []*fakeConn{a, b} {
		if !c.replica.Synced() || c.synced != 1 {
			t.Fatalf("%s: synced=%v, Synced outputs %d", c.name, c.replica.Synced(), c.synced)
		}
		if len(c.changes) == 0 || len(c.changes[0].Inserted) != 4 {
			t.Fatalf("%s: initial change %+v, want 4 inserted cells", c.name, c.changes)
		}
	}
	srv.requireConverged()
	// A periodic step 1 brings nothing new.
	a.record(a.replica.Tick())
	if len(a.toServer) != 1 {
		t.Fatalf("Tick sent %d frames", len(a.toServer))
	}
	n := len(a.changes)
	srv.flush()
	if len(a.changes) != n || a.synced != 1 {
		t.Fatalf("resync reported changes or a second sync")
	}
}

func TestReplicaEditDoneOnlyAfterEcho(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	b := srv.newClient("b")
	a.connect()
	b.connect()
	srv.flush()
	bChanges := len(b.changes)

	e := &countingEdit{fn: func(tx *Txn) error { return tx.SetSource(2, "x = 42") }}
	a.propose(1, e.edit)
	if len(a.toServer) != 1 || len(a.done) != 0 || a.replica.Pending() != 1 {
		t.Fatalf("after Propose: %d frames, done %v, pending %d", len(a.toServer), a.doneIDs(), a.replica.Pending())
	}
	if len(a.changes) == 0 || !slices.Equal(a.changes[len(a.changes)-1].Cells[0].Fields, []string{"source"}) {
		t.Fatalf("local change not reported: %+v", a.changes)
	}
	a.deliverToServer()
	if len(a.toClient) != 1 || len(b.toClient) != 1 {
		t.Fatalf("server broadcast %d/%d frames, want the update to both clients", len(a.toClient), len(b.toClient))
	}
	// The server has the edit, but a has not heard back yet.
	a.replica.Tick()
	if len(a.done) != 0 {
		t.Fatalf("edit reported done before the echo: %+v", a.done)
	}
	b.deliverToClient()
	if len(b.done) != 0 || len(b.changes) != bChanges+1 {
		t.Fatalf("b: done %v, changes %d (want one new change)", b.doneIDs(), len(b.changes)-bChanges)
	}
	a.deliverToClient()
	r, ok := a.result(1)
	if !ok || r.Err != nil {
		t.Fatalf("edit not done after the echo: %+v", a.done)
	}
	if len(r.Change.Cells) != 1 || r.Change.Cells[0].ID != "c2" {
		t.Fatalf("result change %+v", r.Change)
	}
	if a.replica.Pending() != 0 || len(e.calls) != 1 {
		t.Fatalf("pending %d, calls %v", a.replica.Pending(), e.calls)
	}
	srv.requireConverged()
}

func TestReplicaQueuedBeforeSync(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	e := &countingEdit{fn: func(tx *Txn) error {
		return tx.InsertCells(tx.NumCells(), []Cell{{ID: "queued", Source: "q"}})
	}}
	a.propose(1, e.edit)
	if len(e.calls) != 0 || a.replica.Pending() != 1 {
		t.Fatalf("edit ran before sync: calls %v pending %d", e.calls, a.replica.Pending())
	}
	a.connect()
	// Deliver the server's step 1 alone: not synced yet, the edit still waits.
	a.deliverToServer()
	first := a.toClient[0]
	a.toClient = a.toClient[1:]
	a.receive(first)
	if a.replica.Synced() || len(e.calls) != 0 {
		t.Fatalf("edit ran on the server's step 1")
	}
	a.deliverToClient() // the step 2
	if !a.replica.Synced() || len(e.calls) != 1 || e.calls[0] {
		t.Fatalf("after step 2: synced %v calls %v", a.replica.Synced(), e.calls)
	}
	if len(a.done) != 0 {
		t.Fatalf("queued edit done before the echo")
	}
	srv.flush()
	if r, ok := a.result(1); !ok || r.Err != nil || !slices.Equal(r.Change.Inserted, []string{"queued"}) {
		t.Fatalf("result %+v (found %v)", r, ok)
	}
	if ids := srv.doc.CellIDs(); ids[len(ids)-1] != "queued" {
		t.Fatalf("server cells %v", ids)
	}
	srv.requireConverged()
}

func TestReplicaWithdraw(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	e1 := &countingEdit{fn: func(tx *Txn) error { return tx.SetSource(0, "one") }}
	e2 := &countingEdit{fn: func(tx *Txn) error { return tx.SetSource(2, "two") }}
	a.propose(1, e1.edit)
	a.propose(2, e2.edit)
	if !a.replica.Withdraw(1) {
		t.Fatalf("Withdraw of a queued edit failed")
	}
	if a.replica.Withdraw(1) || a.replica.Withdraw(99) {
		t.Fatalf("Withdraw of a withdrawn or unknown edit succeeded")
	}
	if a.replica.Pending() != 1 {
		t.Fatalf("pending %d, want 1", a.replica.Pending())
	}
	a.connect()
	srv.flush()
	if len(e1.calls) != 0 || len(e2.calls) != 1 {
		t.Fatalf("calls: withdrawn %v, kept %v", e1.calls, e2.calls)
	}
	if _, ok := a.result(1); ok {
		t.Fatalf("withdrawn edit reported")
	}
	if _, ok := a.result(2); !ok {
		t.Fatalf("edit 2 not done")
	}
	// An edit already in the replica cannot be withdrawn.
	a.propose(3, func(tx *Txn, _ bool) error { return tx.SetSource(0, "three") })
	if a.replica.Withdraw(3) {
		t.Fatalf("Withdraw of an applied edit succeeded")
	}
	srv.flush()
	srv.requireConverged()
}

func TestReplicaResetServerHoldsEdit(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*Txn) error
	}{
		{"insert", func(tx *Txn) error { return tx.InsertCells(1, []Cell{{ID: "kept", Source: "k"}}) }},
		{"source", func(tx *Txn) error { return tx.SetSource(0, "changed") }},
		{"delete only", func(tx *Txn) error { return tx.DeleteCells(1, 1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, sessionNotebook())
			a := srv.newClient("a")
			a.connect()
			srv.flush()
			e := &countingEdit{fn: tc.fn}
			a.propose(1, e.edit)
			a.deliverToServer()
			a.toClient = nil // the echo is lost
			want := readNotebook(t, srv.doc)
			a.disconnect()
			if err := a.replica.Reset(freshClientID()); err != nil {
				t.Fatal(err)
			}
			if a.replica.Synced() || a.replica.Pending() != 1 {
				t.Fatalf("after Reset: synced %v pending %d", a.replica.Synced(), a.replica.Pending())
			}
			a.connect()
			srv.flush()
			r, ok := a.result(1)
			if !ok || r.Err != nil {
				t.Fatalf("edit not confirmed after resync: %+v", a.done)
			}
			if len(e.calls) != 1 {
				t.Fatalf("EditFunc ran %d times (%v), want once", len(e.calls), e.calls)
			}
			if a.replica.Pending() != 0 {
				t.Fatalf("pending %d", a.replica.Pending())
			}
			compareNotebooks(t, want, readNotebook(t, srv.doc), true)
			srv.requireConverged()
		})
	}
}

func TestReplicaResetServerLostEdit(t *testing.T) {
	tests := []struct {
		name  string
		fn    func(*Txn) error
		check func(t *testing.T, nb Notebook)
	}{
		{"insert", func(tx *Txn) error { return tx.InsertCells(1, []Cell{{ID: "again", Source: "k"}}) },
			func(t *testing.T, nb Notebook) { wantOrder(t, nb, "c0", "again", "c1", "c2", "c3") }},
		{"source", func(tx *Txn) error { return tx.SetSource(0, "changed") },
			func(t *testing.T, nb Notebook) {
				if nb.Cells[0].Source != "changed" {
					t.Errorf("source %q", nb.Cells[0].Source)
				}
			}},
		{"delete only", func(tx *Txn) error { return tx.DeleteCells(1, 1) },
			func(t *testing.T, nb Notebook) { wantOrder(t, nb, "c0", "c2", "c3") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, sessionNotebook())
			a := srv.newClient("a")
			a.connect()
			srv.flush()
			e := &countingEdit{fn: tc.fn}
			a.propose(1, e.edit)
			a.disconnect() // the update never reaches the server
			if err := a.replica.Reset(freshClientID()); err != nil {
				t.Fatal(err)
			}
			a.connect()
			srv.flush()
			if !slices.Equal(e.calls, []bool{false, true}) {
				t.Fatalf("EditFunc calls %v, want [false true] (re-run with replaying=true)", e.calls)
			}
			r, ok := a.result(1)
			if !ok || r.Err != nil {
				t.Fatalf("replayed edit not confirmed: %+v", a.done)
			}
			tc.check(t, readNotebook(t, srv.doc))
			srv.requireConverged()
		})
	}
}

func TestReplicaReplayFailure(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	b := srv.newClient("b")
	a.connect()
	b.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, replaying bool) error {
		i := tx.CellIndex("c3")
		if i < 0 {
			return ErrCellNotFound
		}
		return tx.SetSource(i, "edited")
	})
	a.disconnect() // lost
	b.propose(2, func(tx *Txn, _ bool) error { return tx.DeleteCells(3, 1) })
	srv.flush()
	a.replica.Reset(freshClientID())
	a.connect()
	srv.flush()
	r, ok := a.result(1)
	if !ok || !errors.Is(r.Err, ErrCellNotFound) {
		t.Fatalf("replay of an edit whose cell is gone: %+v (found %v)", r, ok)
	}
	if a.replica.Pending() != 0 {
		t.Fatalf("pending %d", a.replica.Pending())
	}
}

// TestReplicaDeleteConfirmedByStep2: a delete-only edit whose echo was lost is confirmed by
// the delete set of the server's next step 2.
func TestReplicaDeleteConfirmedByStep2(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	a.connect()
	srv.flush()
	e := &countingEdit{fn: func(tx *Txn) error { return tx.DeleteCells(0, 2) }}
	a.propose(1, e.edit)
	u, _ := DecodeFrame(a.toServer[0])
	if meta, _ := ParseUpdate(u.Payload); len(meta.Structs) != 0 || len(meta.Deletes) == 0 {
		t.Fatalf("edit is not delete-only: %+v", meta)
	}
	a.deliverToServer()
	a.toClient = nil // echo lost
	if len(a.done) != 0 {
		t.Fatalf("done without any server message")
	}
	a.record(a.replica.Tick())
	srv.flush()
	if r, ok := a.result(1); !ok || r.Err != nil {
		t.Fatalf("delete-only edit not confirmed by step 2: %+v", a.done)
	}
	if len(e.calls) != 1 {
		t.Fatalf("calls %v", e.calls)
	}
	srv.requireConverged()
}

// TestReplicaReconnectDeliversInflight: edits in the replica reach the server on reconnect.
func TestReplicaReconnectDeliversInflight(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	a.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, _ bool) error { return tx.SetSource(1, "offline edit") })
	a.propose(2, func(tx *Txn, _ bool) error { return tx.DeleteCells(3, 1) })
	a.disconnect()
	a.propose(3, func(tx *Txn, _ bool) error { return tx.SetSource(0, "queued while offline") })
	if a.replica.Pending() != 3 {
		t.Fatalf("pending %d", a.replica.Pending())
	}
	a.connect()
	srv.flush()
	if ids := a.doneIDs(); len(ids) != 3 {
		t.Fatalf("done %v, want all three", ids)
	}
	for _, r := range a.done {
		if r.Err != nil {
			t.Fatalf("edit %d failed: %v", r.ID, r.Err)
		}
	}
	nb := readNotebook(t, srv.doc)
	if nb.Cells[1].Source != "offline edit" || nb.Cells[0].Source != "queued while offline" || len(nb.Cells) != 3 {
		t.Fatalf("server notebook %+v", nb.Cells)
	}
	srv.requireConverged()
}

func TestReplicaConcurrentEditsConverge(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	b := srv.newClient("b")
	a.connect()
	b.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, _ bool) error { return tx.SetSource(0, "A was here\n"+mustSource(tx, 0)) })
	b.propose(2, func(tx *Txn, _ bool) error { return tx.SetSource(0, mustSource(tx, 0)+"B was here\n") })
	a.propose(3, func(tx *Txn, _ bool) error { return tx.InsertCells(0, []Cell{{ID: "from-a"}}) })
	b.propose(4, func(tx *Txn, _ bool) error { return tx.InsertCells(0, []Cell{{ID: "from-b"}}) })
	b.propose(5, func(tx *Txn, _ bool) error { return tx.DeleteCells(3, 1) })
	a.propose(6, func(tx *Txn, _ bool) error {
		return tx.AppendOutput(tx.CellIndex("c0"), map[string]any{"output_type": "stream", "name": "stdout", "text": "A\n"})
	})
	b.propose(7, func(tx *Txn, _ bool) error {
		return tx.SetCellMetadata(tx.CellIndex("c1"), map[string]any{"b": 1.5})
	})
	srv.flush()
	srv.requireConverged()
	for _, c := range []*fakeConn{a, b} {
		for _, r := range c.done {
			if r.Err != nil {
				t.Errorf("%s: edit %d failed: %v", c.name, r.ID, r.Err)
			}
		}
		if c.replica.Pending() != 0 {
			t.Errorf("%s: %d edits pending", c.name, c.replica.Pending())
		}
	}
	nb := readNotebook(t, srv.doc)
	src := nb.Cells[slices.IndexFunc(nb.Cells, func(c Cell) bool { return c.ID == "c0" })].Source
	if src != "A was here\nprint('a')\nprint('b')\nB was here\n" {
		t.Errorf("merged source %q", src)
	}
}

func mustSource(tx *Txn, i int) string {
	c, err := tx.Cell(i)
	if err != nil {
		return ""
	}
	return c.Source
}

// TestReplicaRandomConcurrency drives two sessions with random edits and random delivery.
func TestReplicaRandomConcurrency(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			srv := newFakeServer(t, sessionNotebook())
			clients := []*fakeConn{srv.newClient("a"), srv.newClient("b")}
			for _, c := range clients {
				c.connect()
			}
			srv.flush()
			id := uint64(0)
			proposed := map[*fakeConn]int{}
			for step := 0; step < 60; step++ {
				c := clients[rng.Intn(len(clients))]
				switch rng.Intn(4) {
				case 0, 1:
					id++
					proposed[c]++
					op := rng.Intn(5)
					n := rng.Intn(40)
					c.propose(id, func(tx *Txn, _ bool) error {
						cells := tx.NumCells()
						switch {
						case op == 0 || cells == 0:
							return tx.InsertCells(rng.Intn(cells+1), []Cell{{Source: fmt.Sprint("new ", n)}})
						case op == 1 && cells > 1:
							return tx.DeleteCells(rng.Intn(cells), 1)
						case op == 2:
							i := rng.Intn(cells)
							return tx.SetSource(i, mutate(rng, mustSource(tx, i)))
						case op == 3 && cells > 1:
							return tx.MoveCells(rng.Intn(cells), 1, rng.Intn(cells))
						default:
							return tx.SetCellMetadata(rng.Intn(cells), map[string]any{"n": n})
						}
					})
				case 2:
					c.deliverToServer()
				case 3:
					c.deliverToClient()
				}
			}
			srv.flush()
			srv.requireConverged()
			for _, c := range clients {
				if c.replica.Pending() != 0 || len(c.done) != proposed[c] {
					t.Errorf("%s: pending %d, done %d of %d", c.name, c.replica.Pending(), len(c.done), proposed[c])
					srv.logPending(t)
				}
			}
		})
	}
}

func TestReplicaOutOfOrderResync(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	b := srv.newClient("b")
	a.connect()
	b.connect()
	srv.flush()
	b.propose(1, func(tx *Txn, _ bool) error { return tx.SetSource(2, "one") })
	b.propose(2, func(tx *Txn, _ bool) error { return tx.SetSource(2, "one two") })
	b.deliverToServer()
	if len(a.toClient) != 2 {
		t.Fatalf("a has %d frames", len(a.toClient))
	}
	// Deliver the second update first: its dependencies are missing.
	second := a.toClient[1]
	a.toClient = a.toClient[:1]
	f, _ := DecodeFrame(second)
	out, err := a.replica.Receive(f)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Resynced || len(out.Frames) != 1 {
		t.Fatalf("pending update did not trigger a step 1: %+v", out)
	}
	if sf, _ := DecodeFrame(out.Frames[0]); sf.Sync != SyncStep1 {
		t.Fatalf("resync frame is %v", sf.Sync)
	}
	a.record(out)
	srv.flush()
	srv.requireConverged()
}

func TestReplicaReceiveErrors(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	a.connect()
	srv.flush()
	before := readNotebook(t, a.replica.Doc())
	tests := []struct {
		name string
		f    Frame
	}{
		{"awareness frame", Frame{Type: MsgAwareness, Payload: []byte{0}}},
		{"bad step 1", Frame{Type: MsgSync, Sync: SyncStep1, Payload: []byte{9}}},
		{"bad step 2", Frame{Type: MsgSync, Sync: SyncStep2, Payload: []byte{1, 2, 3}}},
		{"bad update", Frame{Type: MsgSync, Sync: SyncUpdate, Payload: nil}},
		{"unknown subtype", Frame{Type: MsgSync, Sync: 9, Payload: []byte{0, 0}}},
	}
	for _, tc := range tests {
		if _, err := a.replica.Receive(tc.f); err == nil {
			t.Errorf("%s: Receive succeeded", tc.name)
		}
	}
	compareNotebooks(t, before, readNotebook(t, a.replica.Doc()), true)
	if !a.replica.Synced() {
		t.Errorf("errors unsynced the session")
	}
}

func TestReplicaFailedAndNoopEdits(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	a.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, _ bool) error { return tx.DeleteCells(10, 1) })
	a.propose(2, func(tx *Txn, _ bool) error { return nil })
	if len(a.toServer) != 0 {
		t.Fatalf("failed or empty edits sent frames")
	}
	r1, _ := a.result(1)
	r2, ok2 := a.result(2)
	if !errors.Is(r1.Err, ErrOutOfRange) || !ok2 || r2.Err != nil {
		t.Fatalf("results %+v %+v", r1, r2)
	}
	// An edit that fails after mutating is reported failed, and its update still goes out.
	boom := errors.New("boom")
	a.propose(3, func(tx *Txn, _ bool) error {
		if err := tx.SetSource(0, "partial"); err != nil {
			return err
		}
		return boom
	})
	r3, _ := a.result(3)
	if !errors.Is(r3.Err, boom) || len(a.toServer) != 1 {
		t.Fatalf("partial edit: result %+v, %d frames", r3, len(a.toServer))
	}
	srv.flush()
	srv.requireConverged()
	if a.replica.Pending() != 0 {
		t.Fatalf("pending %d", a.replica.Pending())
	}
}

func TestReplicaAbort(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	a.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, _ bool) error { return tx.SetSource(0, "x") }) // in flight
	a.disconnect()
	a.replica.Reset(freshClientID())                                          // now awaiting replay
	a.propose(2, func(tx *Txn, _ bool) error { return tx.SetSource(0, "y") }) // queued
	notApplied, unconfirmed := a.replica.Abort()
	if a.replica.Pending() != 0 {
		t.Fatalf("pending %d after Abort", a.replica.Pending())
	}
	if len(notApplied) != 1 || notApplied[0].ID != 2 {
		t.Errorf("not applied = %+v, want edit 2 (queued)", notApplied)
	}
	if len(unconfirmed) != 1 || unconfirmed[0].ID != 1 {
		t.Errorf("unconfirmed = %+v, want edit 1 (applied before the reset)", unconfirmed)
	}
}

// A pending set that cannot be healed is asked about once, not on every frame.
func TestReplicaPendingStep1NotRepeated(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("a")
	a.connect()
	srv.flush()
	// A delete of items nobody has: pending forever.
	orphan := EncodeSync(SyncUpdate, []byte{0x00, 0x01, 0x99, 0x01, 0x01, 0x00, 0x03})
	step1s := 0
	for i := 0; i < 5; i++ {
		f, err := DecodeFrame(orphan)
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.replica.Receive(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range out.Frames {
			if g, _ := DecodeFrame(fr); g.Type == MsgSync && g.Sync == SyncStep1 {
				step1s++
			}
		}
	}
	if step1s != 1 {
		t.Errorf("%d step 1 frames for the same stuck pending set, want 1", step1s)
	}
}

// A replica that joins a busy room receives the server's broadcasts before the step 2 answering
// its handshake: each leaves structs pending (the replica is still empty), a new pending set
// every time. Asking the server to heal each one — a step 1 with an empty state vector, answered
// with the whole document — made a join with a large notebook and fast typists bring the whole
// document back dozens of times, and the server and the sidecar spent minutes on it. While a step
// 1 is unanswered, pending structs wait for its answer; after it, one still pending set is asked
// about once.
func TestReplicaPendingWaitsForTheUnansweredStep1(t *testing.T) {
	srv := newFakeServer(t, sessionNotebook())
	b := srv.newClient("b")
	b.connect()
	srv.flush()
	// Typing by b: each keystroke's update depends on the one before.
	var keys [][]byte
	for i := 0; i < 6; i++ {
		b.toServer = nil
		src := fmt.Sprintf("typed %d", i)
		b.propose(uint64(i+1), func(tx *Txn, _ bool) error { return tx.SetSource(0, src) })
		if len(b.toServer) != 1 {
			t.Fatalf("keystroke %d: %d frames, want 1 update", i, len(b.toServer))
		}
		keys = append(keys, b.toServer[0])
	}
	srv.flush()

	countStep1s := func(out Output) int {
		n := 0
		for _, fr := range out.Frames {
			if g, _ := DecodeFrame(fr); g.Type == MsgSync && g.Sync == SyncStep1 {
				n++
			}
		}
		return n
	}
	receive := func(r *Replica, b []byte) Output {
		t.Helper()
		f, err := DecodeFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Receive(f)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	a, err := NewReplica(KindNotebook, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if n := countStep1s(a.Connect()); n != 1 {
		t.Fatalf("Connect sent %d step 1s, want 1", n)
	}
	// The broadcasts of keystrokes 2..6 arrive before the server's step 2: all pending.
	asked := 0
	for _, k := range keys[1:] {
		asked += countStep1s(receive(a, k))
	}
	if !a.doc.HasPending() {
		t.Fatal("the keystrokes did not leave the empty replica with pending structs")
	}
	if asked != 0 {
		t.Errorf("%d step 1s sent for pending structs while the handshake's step 1 was unanswered, want 0", asked)
	}
	// The server's step 2 answers the handshake with everything; a set y-crdt still keeps pending
	// (deletes that came before their inserts) is asked about once, with a whole state vector.
	full, err := srv.doc.EncodeStateAsUpdate(StateVector{}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	srv1 := EncodeSync(SyncStep1, srv.doc.StateVector().Encode())
	receive(a, srv1)
	out := receive(a, EncodeSync(SyncStep2, full))
	if !out.Synced {
		t.Fatal("not synced after the step 2")
	}
	if n, want := countStep1s(out), map[bool]int{false: 0, true: 1}[a.doc.HasPending()]; n != want {
		t.Errorf("%d step 1s after the handshake's step 2 (pending left: %v), want %d", n, a.doc.HasPending(), want)
	}
	if got := readNotebook(t, a.doc); !reflect.DeepEqual(got, readNotebook(t, srv.doc)) {
		t.Errorf("the replica does not hold the server's notebook after the step 2")
	}

	// Another fresh replica whose handshake answer does not heal (it predates the typing): the
	// still pending set is asked about once, after the answer, and not again on every frame.
	c, err := NewReplica(KindNotebook, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	c.Connect()
	asked = 0
	for _, k := range keys[2:4] {
		asked += countStep1s(receive(c, k))
	}
	receive(c, srv1)
	asked += countStep1s(receive(c, EncodeSync(SyncStep2, []byte{0, 0})))
	for _, k := range keys[4:] {
		asked += countStep1s(receive(c, k))
	}
	if asked != 1 {
		t.Errorf("%d step 1s for a pending set the handshake's answer left, want 1 (after the answer)", asked)
	}
}

// AddAll merges like repeated Add, in bulk.
func TestIDSetAddAllMatchesAdd(t *testing.T) {
	var rs []IDRange
	for i := 0; i < 3000; i++ {
		rs = append(rs, IDRange{Client: uint64(i % 3), Clock: uint64((i * 7919) % 20000), Len: uint64(1 + i%5)})
	}
	one, bulk := IDSet{}, IDSet{}
	for _, r := range rs {
		one.Add(r)
	}
	bulk.AddAll(rs)
	for c := range one {
		if len(one[c]) != len(bulk[c]) {
			t.Fatalf("client %d: %d ranges by Add, %d by AddAll", c, len(one[c]), len(bulk[c]))
		}
		for i := range one[c] {
			if one[c][i] != bulk[c][i] {
				t.Fatalf("client %d range %d: %+v vs %+v", c, i, one[c][i], bulk[c][i])
			}
		}
	}
}

func TestNewSessionErrors(t *testing.T) {
	if _, err := NewReplica(KindNotebook, 0, zerolog.Nop()); err == nil {
		t.Error("NewSession with client 0 succeeded")
	}
	s, err := NewReplica(KindText, freshClientID(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(0); err == nil {
		t.Error("Reset to client 0 succeeded")
	}
}

// runChaos drives two sessions with random edits, random delivery, disconnects and resets.
func runChaos(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	srv := newFakeServer(t, sessionNotebook())
	clients := []*fakeConn{srv.newClient("a"), srv.newClient("b")}
	for _, c := range clients {
		c.connect()
	}
	srv.flush()
	id := uint64(0)
	proposed := map[*fakeConn]int{}
	for step := 0; step < steps; step++ {
		c := clients[rng.Intn(len(clients))]
		switch r := rng.Intn(20); {
		case r < 8:
			id++
			proposed[c]++
			op := rng.Intn(6)
			n := rng.Intn(40)
			pick := rng.Int63()
			c.propose(id, func(tx *Txn, _ bool) error {
				rr := rand.New(rand.NewSource(pick))
				cells := tx.NumCells()
				switch {
				case op == 0 || cells == 0:
					return tx.InsertCells(rr.Intn(cells+1), []Cell{{Source: fmt.Sprint("new ", n)}})
				case op == 1 && cells > 1:
					return tx.DeleteCells(rr.Intn(cells), 1)
				case op == 2:
					i := rr.Intn(cells)
					return tx.SetSource(i, mutate(rr, mustSource(tx, i)))
				case op == 3 && cells > 1:
					return tx.MoveCells(rr.Intn(cells), 1, rr.Intn(cells))
				case op == 4:
					i := rr.Intn(cells)
					if c, _ := tx.Cell(i); c.Type == CellCode {
						return tx.AppendOutput(i, map[string]any{"output_type": "stream", "name": "stdout", "text": fmt.Sprint(n)})
					}
					return tx.SetCellType(i, CellCode)
				default:
					return tx.SetCellMetadata(rr.Intn(cells), map[string]any{"n": n})
				}
			})
		case r < 12:
			if c.open {
				c.deliverToServer()
			}
		case r < 16:
			if c.open {
				c.deliverToClient()
			}
		case r < 17:
			if c.open {
				c.disconnect()
			} else {
				c.connect()
			}
		case r < 18:
			c.disconnect()
			if err := c.replica.Reset(freshClientID()); err != nil {
				t.Fatal(err)
			}
			c.connect()
		case r < 19:
			if c.open {
				c.record(c.replica.Tick())
			}
		default:
			if !c.open {
				c.connect()
			}
		}
	}
	for _, c := range clients {
		if !c.open {
			c.connect()
		}
	}
	srv.flush()
	// One periodic step 1 each heals anything a lost echo left unconfirmed.
	for _, c := range clients {
		c.record(c.replica.Tick())
	}
	srv.flush()
	srv.requireConverged()
	for _, c := range clients {
		if c.replica.Pending() != 0 || len(c.done) != proposed[c] {
			t.Errorf("seed %d: %s: pending %d, done %d of %d", seed, c.name, c.replica.Pending(), len(c.done), proposed[c])
			srv.logPending(t)
		}
	}
}

func TestReplicaChaos(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runChaos(t, seed, 150) })
	}
}

// A server that dies after confirming an edit but before saving it comes back with the file's
// older content: a durable edit is re-run then, unless a save marker came first. Someone else's
// later change does not cancel the re-run: the reloaded file holds none of it either.
func TestReplicaDurableEditsSurviveUnsavedRestart(t *testing.T) {
	insert := func(tx *Txn, replaying bool) error {
		if replaying && tx.CellIndex("agent") >= 0 {
			return nil
		}
		return tx.InsertCells(1, []Cell{{ID: "agent", Source: "kept"}})
	}
	for _, tc := range []struct {
		name       string
		between    func(srv *fakeServer, a, b *fakeConn)
		wantReplay bool
	}{
		{"not saved: re-run", func(*fakeServer, *fakeConn, *fakeConn) {}, true},
		{"saved (hash): let go", func(srv *fakeServer, a, b *fakeConn) {
			b.propose(10, func(tx *Txn, _ bool) error { return tx.SetState("hash", "after-save") })
			srv.flush()
		}, false},
		{"saved (dirty false): let go", func(srv *fakeServer, a, b *fakeConn) {
			b.propose(10, func(tx *Txn, _ bool) error { return tx.SetState("dirty", false) })
			srv.flush()
		}, false},
		{"dirty true is no save", func(srv *fakeServer, a, b *fakeConn) {
			b.propose(10, func(tx *Txn, _ bool) error { return tx.SetState("dirty", true) })
			srv.flush()
		}, true},
		{"someone else edited later: still re-run", func(srv *fakeServer, a, b *fakeConn) {
			b.propose(10, func(tx *Txn, _ bool) error { return tx.SetSource(0, "human") })
			srv.flush()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, sessionNotebook())
			a, b := srv.newClient("agent"), srv.newClient("human")
			a.connect()
			b.connect()
			srv.flush()
			calls := 0
			a.record(a.replica.proposeDurable(1, func(tx *Txn, replaying bool) error { calls++; return insert(tx, replaying) }))
			srv.flush()
			if r, ok := a.result(1); !ok || r.Err != nil {
				t.Fatalf("edit not confirmed: %+v", a.done)
			}
			if a.replica.Unsaved() != 1 {
				t.Fatalf("confirmed durable edit not kept for a save: %d", a.replica.Unsaved())
			}
			tc.between(srv, a, b)

			// The server dies; its replacement loaded the file, which lacks the edit.
			srv2 := newFakeServer(t, sessionNotebook())
			a.srv, srv2.conns = srv2, []*fakeConn{a}
			a.disconnect()
			if err := a.replica.ResetServerLost(freshClientID()); err != nil {
				t.Fatal(err)
			}
			a.connect()
			srv2.flush()
			has := slices.ContainsFunc(readNotebook(t, srv2.doc).Cells, func(c Cell) bool { return c.ID == "agent" })
			if has != tc.wantReplay || (calls == 2) != tc.wantReplay {
				t.Errorf("after the restart: cell present %v, EditFunc ran %d times; want re-run %v", has, calls, tc.wantReplay)
			}
			if a.replica.Pending() != 0 {
				t.Errorf("%d edits still pending", a.replica.Pending())
			}
		})
	}
	// Plain (non-durable) edits are not kept.
	srv := newFakeServer(t, sessionNotebook())
	a := srv.newClient("agent")
	a.connect()
	srv.flush()
	a.propose(1, func(tx *Txn, r bool) error { return insert(tx, r) })
	srv.flush()
	if a.replica.Unsaved() != 0 {
		t.Errorf("a plain edit was kept: %d", a.replica.Unsaved())
	}
}

// A restarted server may rebuild the room from its store (our items, old ids) and then reload an
// older file over it, deleting them: after ResetServerLost the durable edit runs again. After a
// plain reset (conflict, broken replica) the same deleted items mean someone deleted the cell,
// and re-running would undo that.
func TestReplicaDurableRerunOnlyForLostServer(t *testing.T) {
	for _, lost := range []bool{true, false} {
		srv := newFakeServer(t, sessionNotebook())
		a, b := srv.newClient("agent"), srv.newClient("other")
		a.connect()
		b.connect()
		srv.flush()
		a.record(a.replica.proposeDurable(1, func(tx *Txn, replaying bool) error {
			if replaying && tx.CellIndex("agent") >= 0 {
				return nil
			}
			return tx.InsertCells(1, []Cell{{ID: "agent", Source: "kept"}})
		}))
		srv.flush()
		// The cell is deleted on the server (the reload, or a person) while the agent is away.
		a.disconnect()
		b.propose(2, func(tx *Txn, _ bool) error { return tx.DeleteCells(tx.CellIndex("agent"), 1) })
		srv.flush()
		reset := a.replica.Reset
		if lost {
			reset = a.replica.ResetServerLost
		}
		if err := reset(freshClientID()); err != nil {
			t.Fatal(err)
		}
		a.connect()
		srv.flush()
		has := slices.ContainsFunc(readNotebook(t, srv.doc).Cells, func(c Cell) bool { return c.ID == "agent" })
		if has != lost {
			t.Errorf("server lost %v: cell present after the reset %v, want %v", lost, has, lost)
		}
	}
}
