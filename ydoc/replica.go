package ydoc

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"
)

// EditResult is what became of an edit: what it did (Outcome, a copy of its own), what it
// changed in the replica, or why it failed.
type EditResult struct {
	ID      uint64
	Change  Change
	Outcome Outcome
	Err     error
}

// Output is what the caller must do after a Replica call.
type Output struct {
	Frames   [][]byte     // send to the server, in order
	Changes  []Change     // document changes to publish, in order
	Done     []EditResult // edits now confirmed (Err nil) or failed
	Synced   bool         // the replica became synced in this call
	Resynced bool         // a step 1 was sent to heal pending structs
	// Saved: the server said it saved the document (its state hash changed, or dirty turned
	// false). Everything it had received before is in the file.
	Saved bool
	// SaveNow: confirmed edits are piling up without a save; the caller should ask for one.
	SaveNow bool
	// Rescue reports what the replica did with the document the server lost (after a sync that
	// followed ResetServerLost).
	Rescue *RescueReport
	// Strays counts cells into which typing that landed in a cell the rescue had replaced was
	// moved (rescue_strays.go).
	Strays int
}

func (o *Output) merge(p Output) {
	o.Frames = append(o.Frames, p.Frames...)
	o.Changes = append(o.Changes, p.Changes...)
	o.Done = append(o.Done, p.Done...)
	o.Synced = o.Synced || p.Synced
	o.Resynced = o.Resynced || p.Resynced
	o.Saved = o.Saved || p.Saved
	o.SaveNow = o.SaveNow || p.SaveNow
	if p.Rescue != nil {
		o.Rescue = p.Rescue
	}
	o.Strays += p.Strays
}

// ErrNotSynced is returned for calls that need a synced replica.
var ErrNotSynced = errors.New("ydoc: replica not synced")

type pendingEdit struct {
	id       uint64
	edit     Edit
	since    *Since    // the version guard, for the first run (dropped after it)
	outcome  *Outcome  // what the last run did: reported at confirmation, read by a replay
	client   uint64    // client id the edit was applied under
	structs  []IDRange // what it inserted
	deletes  []IDRange // what it deleted
	change   Change
	replayed bool
	// durable edits are kept after the server confirmed them, until a save shows they reached
	// the file (see unsaved).
	durable bool
	// covers are the edits a rescue edit brings back with the rest of the lost replica: they are
	// confirmed with it. Only rescue edits (id 0) have them.
	covers []*pendingEdit
	rescue bool
	marker uint64 // Replica.markers when it was confirmed (unsaved edits)
}

// Replica is the sidecar's copy of one room's document and the Yjs sync protocol that keeps it
// in step with the server's, as a pure state machine in the style of etcd's
// raft RawNode. It owns the room's document (a Doc), the edits not yet confirmed, and what the
// server is known to hold. Inputs are method calls — Connect for a fresh transport, Receive for
// a server frame, Propose for a local edit, Withdraw, Tick for logical time,
// Reset or ResetServerLost to rebuild the document — and outputs are the Output each returns
// (frames to send, document changes, edit outcomes), for the caller to carry out. It starts no
// goroutines, reads no clock and touches no socket; bridge.Room's goroutine drives it, and tests
// drive it directly.
//
// Edits are values over the typed model (Edit: edit.go), not raw updates, so that after a reset
// (a new server session, a conflict) the ones the server never acknowledged can be run again on
// the fresh replica, by the rules each edit carries; every run's outcome is a fresh value the
// replica reports, never written into the proposer's memory. An edit is confirmed only when the
// server is known to hold it: its inserted IDs are
// covered by the server's state vector (learned from the server's step 1 and from the echo the
// server broadcasts for every update, ours included) and its deletions by the delete sets the
// server sends (each step 2 carries its full delete set; echoes carry the transaction's).
type Replica struct {
	kind Kind
	log  zerolog.Logger
	doc  *Doc

	synced bool

	queued   []*pendingEdit // waiting for the first sync; not applied yet
	inflight []*pendingEdit // applied to the replica, not yet confirmed
	replay   []*pendingEdit // applied to a discarded replica; checked and re-run after sync
	// unsaved are durable edits the server confirmed but has not saved yet. A server killed
	// before it saved comes back with the file's older content; these are then re-run like
	// unconfirmed edits (unless the whole lost replica is brought back, see lost). A save marker
	// from the server (state hash, or dirty turning false) proves them saved: a save task that
	// sets it saw every change the server had received (any change arriving while it runs
	// cancels it before it sets the marker). Nothing else lets them go: not another peer's later
	// change (the file a restarted server reloads holds none of those either), and not their
	// number (reaching unsavedSaveAt asks the caller for a save instead).
	unsaved []*pendingEdit
	// markers counts save markers; an unsaved edit records the count when it was confirmed.
	// With laggingMarkers (a server whose periodic saves mark the document saved although a save
	// may have started before the last change it received: jupyter-server-documents), a marker
	// proves saved only the edits confirmed before the previous marker (the save that set it
	// started after that one was set).
	markers        uint64
	laggingMarkers bool
	// rerunDurable: the last reset was for a lost server room (ResetServerLost).
	rerunDurable bool
	// lost is the replica as it was when the server lost the room (ResetServerLost, AdoptLost),
	// kept until the next sync does what plan says with it (RescueFrom, FileWins, NoRescue).
	lost *lostReplica
	plan rescuePlan
	// everSynced: the replica received the server's state since the last reset (a replica
	// that never synced holds nothing worth keeping as lost).
	everSynced bool
	wantSave   bool // unsavedSaveAt reached: ask for a save in the next output
	// rescueWaits counts step 2s that left the replica with pending structs while a lost
	// replica waits to be brought back (the sync is held until it is whole, a few times at most).
	rescueWaits int

	// history, when kept (KeepHistory), records every version of the replica's content.
	history *History
	// lostMark is how many versions the history had recorded when the replica the server lost
	// was set aside (taken at the first change after ResetServerLost or AdoptLost): the versions
	// after it are the rebuilt room's.
	lostMark    int
	markPending bool
	// serverHist holds the states the server went through before the loss (ServerHeld), for
	// the next rescue.
	serverHist *History
	// guard, after a lost room was not restored by id, heals a peer's merge of an old copy.
	guard *staleGuard
	// strays, after a rescue deleted cells people may still be typing into, moves what they type
	// there into the cells that replaced them (rescue_strays.go).
	strays *strayWatch

	serverSV      StateVector // inserts the server is known to hold
	serverDeletes IDSet       // deletions the server is known to hold
	// pendingAsked is the pending set we last asked the server to heal with a step 1: the same
	// stuck set is not asked about again on every frame (the periodic Tick retries it).
	pendingAsked string
	// unanswered counts the step 1s sent on this connection whose step 2 has not arrived (the
	// server answers each, in order). While one is on its way, pending structs wait for it
	// instead of asking again: a replica that is still empty at the join would otherwise ask,
	// with an empty state vector, once per broadcast that arrives before the server's step 2,
	// and get the whole document back each time.
	unanswered int
}

// askState returns a sync step 1 with the replica's state vector, counted as unanswered.
func (s *Replica) askState() []byte {
	s.unanswered++
	return EncodeSync(SyncStep1, s.doc.StateVector().Encode())
}

// NewReplica creates a replica with a fresh, empty document.
func NewReplica(kind Kind, clientID uint32, log zerolog.Logger) (*Replica, error) {
	doc, err := NewDoc(kind, clientID, log)
	if err != nil {
		return nil, err
	}
	return &Replica{kind: kind, log: log, doc: doc, serverSV: StateVector{}, serverDeletes: IDSet{}}, nil
}

// Doc returns the replica. Callers must not keep it across Reset.
func (s *Replica) Doc() *Doc { return s.doc }

// Synced reports whether the replica has received the server's state since the last connect.
func (s *Replica) Synced() bool { return s.synced }

// Pending returns the number of edits not yet confirmed (queued, in flight or awaiting replay).
func (s *Replica) Pending() int { return len(s.queued) + len(s.inflight) + len(s.replay) }

// InFlight returns the number of edits applied to the replica and sent, not yet confirmed.
func (s *Replica) InFlight() int { return len(s.inflight) }

// Connect starts the handshake on a fresh transport: it returns our sync step 1. The replica is
// not synced until the server's step 2 arrives.
func (s *Replica) Connect() Output {
	s.synced, s.unanswered = false, 0
	return Output{Frames: [][]byte{s.askState()}}
}

// Disconnected marks the transport gone. Edits in flight stay in the replica; the next
// handshake delivers whatever the server lacks.
func (s *Replica) Disconnected() { s.synced, s.unanswered = false, 0 }

// Reset discards the replica (new server session, conflict, long absence, broken doc) and starts
// a fresh one under a new client id. Unconfirmed edits, and confirmed ones not yet saved, are
// checked against the server's state after the next sync and re-run if it does not have them.
func (s *Replica) Reset(clientID uint32) error {
	return s.reset(clientID, false)
}

// ResetServerLost is Reset after the server lost its room (it restarted, or closed our session
// with 1003): the room comes back rebuilt from the file, without whatever the server had not
// saved. The replica as it is now is kept as the lost one: after the next sync it is brought
// back (RescueFrom) or, failing that (NoRescue, or neither called), durable edits run again even
// where the server holds their items, because a restarted server may have rebuilt the room from
// its store and then reloaded an older file over it, deleting them (re-running one whose effect
// survived changes nothing), and the sync's Output.Rescue reports what was not restored. After
// other resets (a conflict, a broken replica) the server's document is the one it had, and an
// item of ours it holds deleted was deleted by someone: re-running the edit would undo their
// change.
func (s *Replica) ResetServerLost(clientID uint32) error {
	return s.reset(clientID, true)
}

func (s *Replica) reset(clientID uint32, serverLost bool) error {
	if serverLost && s.everSynced && s.doc.Err() == nil {
		snap, err := s.doc.Snapshot()
		if err != nil {
			s.log.Warn().Err(err).Msg("could not keep the replica the server lost")
		} else {
			// The replica itself is kept, as CRDT state: its items, with their ids, are what a
			// restore by id brings back (rescue_ids.go). It is read, never written, from here on.
			s.lost, s.plan = &lostReplica{doc: s.doc, snap: snap}, rescuePlan{}
			s.markPending = true
		}
	}
	doc, err := NewDoc(s.kind, clientID, s.log)
	if err != nil {
		return fmt.Errorf("reset replica: %w", err)
	}
	// A rescue edit is not re-run (its merge belongs to the replica it was made on): the edits
	// it brought back are, and the lost replica it restored is kept above.
	var again []*pendingEdit
	for _, e := range append(s.unsaved, s.inflight...) {
		if e.rescue {
			again = append(again, e.covers...)
			continue
		}
		again = append(again, e)
	}
	if s.history != nil {
		s.history.rebind()
	}
	s.replay = append(s.replay, again...)
	slices.SortStableFunc(s.replay, func(a, b *pendingEdit) int { return cmp.Compare(a.id, b.id) }) // in the order they were made
	s.unsaved = nil
	s.inflight = nil
	s.rerunDurable = s.rerunDurable || serverLost
	s.guard = nil
	s.strays = nil
	s.doc = doc
	s.synced = false
	s.everSynced = false
	s.serverSV = StateVector{}
	s.serverDeletes = IDSet{}
	return nil
}

// AdoptLost installs a replica the sidecar held before it restarted (its whole state, one Yjs
// update, as a write-ahead log replays it) as the one the server lost: the next sync treats it
// exactly as after ResetServerLost (RescueFrom, FileWins or NoRescue decide what becomes of it).
// It must be called on a replica that has not synced yet. An empty state installs nothing. An
// invalid or incomplete state (structs whose dependencies it lacks) is refused and changes
// nothing.
func (s *Replica) AdoptLost(state []byte) error {
	if s.synced || s.everSynced {
		return errors.New("adopt lost replica: the replica has already synced")
	}
	meta, err := ParseUpdate(state)
	if err != nil {
		return fmt.Errorf("adopt lost replica: %w", err)
	}
	if meta.Empty() {
		return nil
	}
	doc, err := newScratchDoc(s.kind, s.log)
	if err != nil {
		return fmt.Errorf("adopt lost replica: %w", err)
	}
	if _, _, err := doc.Apply(state); err != nil {
		return fmt.Errorf("adopt lost replica: %w", err)
	}
	if doc.HasPending() {
		return errors.New("adopt lost replica: the state is incomplete (it holds items whose dependencies it lacks)")
	}
	if other := doc.foreignRoots(); other != "" {
		return fmt.Errorf("adopt lost replica: the state holds a %q root, not a %s's", other, s.kind)
	}
	snap, err := doc.Snapshot()
	if err != nil {
		return fmt.Errorf("adopt lost replica: %w", err)
	}
	s.lost, s.plan = &lostReplica{doc: doc, snap: snap}, rescuePlan{}
	s.markPending = true
	return nil
}

// LostState returns the encoded state of the replica the server lost while it waits for the next
// sync (after ResetServerLost or AdoptLost), or nil when none waits: what a write-ahead log keeps
// when the room cannot be rescued now.
func (s *Replica) LostState() []byte {
	if s.lost == nil {
		return nil
	}
	b, err := s.lost.doc.EncodeStateAsUpdate(nil)
	if err != nil {
		s.log.Warn().Err(err).Msg("could not encode the lost replica")
		return nil
	}
	return b
}

// RescueFrom says that the file the server rebuilds the lost room from is one the replica held
// (a save of the server: the caller compared it with the replica's history, see History), so
// that the room is to be restored. After the next sync the room is brought back to the replica
// as it was before the loss, as one edit, merged three-way with file as the common ancestor so
// that changes made on the rebuilt room in the meantime stay (theirs win where both changed the
// same thing). The restore keeps the original item ids where the rebuilt room allows it (see
// rescue_ids.go; RescueReport.Method says which way it went). The edits in flight or unsaved at
// the loss are in that replica and are confirmed with the restore instead of being re-run. No
// effect unless a lost replica is pending (after ResetServerLost or AdoptLost).
func (s *Replica) RescueFrom(file Snapshot) {
	if s.lost == nil {
		return
	}
	f := file
	s.plan = rescuePlan{kind: planRestore, base: &f, file: &f}
}

// FileWins says that file, the file the server rebuilds the lost room from, holds content the
// replica never held: it was changed outside the server. After the next sync the replica's
// changes since base (the last version it held that the server saved) are merged onto the room
// three-way, the file winning every conflict (inserts both made at one place included);
// RescueReport.FileWins is set, Reason is reason and NotRestored lists what of the replica's was
// dropped (for the agents' notice). The edits in flight or unsaved at the loss are confirmed with
// the merge, not re-run. A nil base (no saved version known) is NoRescue(reason): the file wins
// outright and only the agents' own edits are re-run.
func (s *Replica) FileWins(base *Snapshot, file Snapshot, reason string) {
	if s.lost == nil {
		return
	}
	if base == nil {
		s.NoRescue(reason)
		return
	}
	b, f := *base, file
	s.plan = rescuePlan{kind: planFileWins, base: &b, file: &f, reason: reason}
}

// NoRescue says the lost replica cannot be brought back (the file could not be checked): after
// the next sync only the agents' own edits are re-run, and the report lists what the replica held
// that the room does not hold then.
func (s *Replica) NoRescue(reason string) {
	if s.lost == nil {
		return
	}
	s.plan = rescuePlan{kind: planNone, reason: reason}
}

// KeepHistory makes the replica feed h with every version of the replica's content from now on
// (and the current one), so that h can tell whether a file is one the replica held (see History,
// RescueFrom, FileWins). h keeps what it recorded before, whether from another replica or from
// Apply (a replayed log; its own document is dropped then). h must be of the replica's kind.
func (s *Replica) KeepHistory(h *History) error {
	if h == nil {
		s.history = nil
		return nil
	}
	if h.kind != s.kind {
		return fmt.Errorf("keep history: a %s history for a %s replica", h.kind, s.kind)
	}
	h.doc = nil
	h.bind()
	s.history = h
	if s.everSynced {
		h.observe(s.doc, Change{})
	}
	return nil
}

// ServerHeld gives the next rescue the states the server itself went through before it lost the
// room (a write-ahead log replayed in the server's order; nil: none): what the rebuilt room was
// loaded from is looked up there as well as in the replica's history (rescue_loaded.go). h's own
// document is dropped; the rescue forgets h.
func (s *Replica) ServerHeld(h *History) {
	if h != nil {
		if h.kind != s.kind {
			return
		}
		h.doc = nil
	}
	s.serverHist = h
}

// History returns the history the session feeds (nil when none).
func (s *Replica) History() *History { return s.history }

// observe feeds the history a change of the replica.
func (s *Replica) observe(c Change) {
	if s.history != nil && !c.Empty() {
		if s.markPending {
			s.lostMark, s.markPending = s.history.Versions(), false
		}
		s.history.observe(s.doc, c)
	}
}

// Receive handles one sync frame from the server.
func (s *Replica) Receive(f Frame) (Output, error) {
	var out Output
	if f.Type != MsgSync {
		return out, fmt.Errorf("replica receive: not a sync frame (type %d)", f.Type)
	}
	switch f.Sync {
	case SyncStep1:
		sv, err := DecodeStateVector(f.Payload)
		if err != nil {
			return out, fmt.Errorf("server step 1: %w", err)
		}
		for client, clock := range sv {
			s.serverSV[client] = max(s.serverSV[client], clock)
		}
		diff, err := s.doc.EncodeStateAsUpdate(f.Payload)
		if err != nil {
			return out, fmt.Errorf("answer step 1: %w", err)
		}
		out.Frames = append(out.Frames, EncodeSync(SyncStep2, diff))
		out.Done = append(out.Done, s.confirm()...)
		out.SaveNow = s.takeWantSave()
	case SyncStep2, SyncUpdate:
		if f.Sync == SyncStep2 && s.unanswered > 0 {
			s.unanswered--
		}
		var pre *Snapshot
		if s.guard != nil && s.synced {
			if m, err := ParseUpdate(f.Payload); err == nil && s.guard.brings(m, s.doc.StateVector()) {
				if snap, err := s.doc.Snapshot(); err == nil {
					pre = &snap
				}
			}
		}
		meta, change, err := s.doc.Apply(f.Payload)
		if err != nil {
			return out, fmt.Errorf("apply %s: %w", f.Sync, err)
		}
		s.learn(meta)
		s.observe(change)
		if s.synced && s.savedMarker(change) {
			if s.history != nil {
				s.history.saved(s.doc)
			}
			out.Saved = true
			s.markers++
			keep := s.unsaved[:0]
			for _, e := range s.unsaved {
				if s.laggingMarkers && e.marker+1 >= s.markers {
					keep = append(keep, e)
				}
			}
			if n := len(s.unsaved) - len(keep); n > 0 {
				s.log.Debug().Int("edits", n).Strs("state", change.State).Msg("confirmed edits saved by the server")
			}
			clear(s.unsaved[len(keep):])
			s.unsaved = keep
		}
		if !change.Empty() {
			out.Changes = append(out.Changes, change)
		}
		if s.strays != nil && s.synced {
			out.merge(s.followStrays(f.Payload, meta))
		}
		if pre != nil {
			out.merge(s.heal(*pre))
		}
		if f.Sync == SyncStep2 && !s.synced {
			if s.lost != nil && s.doc.HasPending() && (s.unanswered > 0 || s.rescueWaits < maxRescueWaits) {
				// The replica is not whole yet (y-crdt kept structs pending, and may have lost
				// deletes of them): a merge against it would restore the wrong text. Heal first:
				// the step 1 below makes the server send its state again — or the answer to a
				// step 1 still on its way does.
				if s.unanswered == 0 {
					s.rescueWaits++
					s.pendingAsked = ""
					s.log.Info().Int("attempt", s.rescueWaits).Msg("the replica has pending structs: healing before bringing back the lost replica")
				}
			} else {
				s.rescueWaits = 0
				s.synced = true
				s.everSynced = true
				out.Synced = true
				out.merge(s.afterSync())
			}
		}
		out.Done = append(out.Done, s.confirm()...)
		out.SaveNow = out.SaveNow || s.takeWantSave()
		if fp := s.doc.PendingFingerprint(); fp != "" && fp != s.pendingAsked && s.unanswered == 0 {
			// y-crdt loses deletes that arrive before their inserts; a step 1 makes the server
			// send the missing structs and its full delete set again. Asked once per pending
			// set, so a set that cannot be healed does not ping-pong, and only when no step 2
			// is on its way: that one may bring what is missing, and is checked again then.
			s.pendingAsked = fp
			out.Frames = append(out.Frames, s.askState())
			out.Resynced = true
		}
	default:
		return out, fmt.Errorf("replica receive: %w", malformed("sync subtype %d", f.Sync))
	}
	return out, nil
}

// learn records what a server message shows the server holds.
func (s *Replica) learn(meta UpdateMeta) {
	for _, r := range meta.Structs {
		s.serverSV[r.Client] = max(s.serverSV[r.Client], r.Clock+r.Len)
	}
	s.serverDeletes.AddAll(meta.Deletes) // a step 2 carries the whole delete set: merge in bulk
}

// held reports whether the server holds everything an edit wrote.
func (s *Replica) held(e *pendingEdit) bool {
	for _, r := range e.structs {
		if !s.serverSV.Covers(r) {
			return false
		}
	}
	for _, r := range e.deletes {
		if !s.serverDeletes.Contains(r) {
			return false
		}
	}
	return true
}

// confirm moves edits the server now holds out of flight.
func (s *Replica) confirm() []EditResult {
	var done []EditResult
	kept := s.inflight[:0]
	for _, e := range s.inflight {
		if s.held(e) {
			if !e.rescue {
				done = append(done, e.result(nil))
			}
			s.keepUnsaved(e)
			for _, c := range e.covers {
				done = append(done, c.result(nil))
				s.keepUnsaved(c)
			}
		} else {
			kept = append(kept, e)
		}
	}
	s.inflight = kept
	return done
}

// afterSync runs once the server's state has arrived: a replica the server lost is brought
// back (RescueFrom) or its edits are checked; edits from a discarded replica are confirmed if
// the server has them (a room rebuilt from its store keeps old client ids) or run again (after a
// lost server room, durable ones always run again); then queued edits run.
func (s *Replica) afterSync() Output {
	var out Output
	replay := s.replay
	s.replay = nil
	defer func() { s.rerunDurable = false }()
	lost, plan := s.lost, s.plan
	s.lost, s.plan = nil, rescuePlan{}
	defer func() { s.serverHist = nil }()
	why := plan.reason
	rescued := false
	if lost != nil && plan.base != nil {
		var res Output
		res, rescued = s.rescue(lost, plan, replay)
		out.merge(res)
		if !rescued {
			why = res.Rescue.Reason
		}
	}
	var report *RescueReport
	if lost != nil && !rescued {
		report = &RescueReport{Reason: why}
	}
	if !rescued {
		for _, e := range replay {
			// After a lost server room a durable edit runs again even when the server holds its
			// items (see ResetServerLost).
			if !(e.durable && s.rerunDurable) && len(e.structs)+len(e.deletes) > 0 && s.held(e) {
				out.Done = append(out.Done, e.result(nil))
				continue
			}
			e.replayed = true
			res := s.apply(e)
			if report != nil {
				report.Replayed++
				for _, d := range res.Done {
					if d.Err != nil {
						report.Failed++
						report.add(fmt.Sprintf("edit %d could not be re-applied: %v", d.ID, d.Err))
					}
				}
			}
			out.merge(res)
		}
	}
	if report != nil {
		report.compare(lost.snap, s.doc)
		out.Rescue = report
	}
	if lost != nil && !(rescued && out.Rescue != nil && out.Rescue.Method == RestoredByIDs) {
		s.guard = &staleGuard{lostSV: lost.doc.StateVector()}
	}
	queued := s.queued
	s.queued = nil
	for _, e := range queued {
		out.merge(s.apply(e))
	}
	return out
}

// maxRescueWaits bounds how many times a sync is held for a replica to heal before a rescue.
const maxRescueWaits = 3

// unsavedSaveAt is how many confirmed edits may wait for a save before the replica asks for one
// (and again at every further multiple): nothing is let go, the server is asked to save.
const unsavedSaveAt = 256

func (s *Replica) keepUnsaved(e *pendingEdit) {
	if !e.durable {
		return
	}
	e.marker = s.markers
	s.unsaved = append(s.unsaved, e)
	if len(s.unsaved)%unsavedSaveAt == 0 {
		s.log.Info().Int("unsaved", len(s.unsaved)).Msg("confirmed edits are waiting for a save; asking for one")
		s.wantSave = true
	}
}

func (s *Replica) takeWantSave() bool {
	w := s.wantSave
	s.wantSave = false
	return w
}

// savedMarker reports a remote change that says the server saved the document.
func (s *Replica) savedMarker(c Change) bool {
	if c.Local {
		return false
	}
	for _, k := range c.State {
		if k == "hash" {
			return true
		}
		if k == "dirty" {
			if dirty, ok := s.doc.State()["dirty"].(bool); ok && !dirty {
				return true
			}
		}
	}
	return false
}

// LaggingSaveMarkers says the server marks the document saved after periodic saves that may have
// started before the last change it received (jupyter-server-documents): a marker then proves
// saved only the edits confirmed before the previous one (see markers).
func (s *Replica) LaggingSaveMarkers(on bool) { s.laggingMarkers = on }

// Unsaved returns how many confirmed edits wait for the server to save them.
func (s *Replica) Unsaved() int { return len(s.unsaved) }

// Propose submits an edit. It runs at once when synced, otherwise after the next sync. Durable
// edits (Edit.Durable) are kept after confirmation until the server saved them (see unsaved).
func (s *Replica) Propose(id uint64, p Proposal) Output {
	e := &pendingEdit{id: id, edit: p.Edit, durable: p.Edit.Durable(), since: p.Since, replayed: p.Replay}
	if p.Prev != nil {
		prev := p.Prev.clone()
		e.outcome = &prev
	}
	if !s.synced {
		s.queued = append(s.queued, e)
		return Output{}
	}
	return s.apply(e)
}

// result is the edit's outcome as the replica reports it: a copy of its own.
func (e *pendingEdit) result(err error) EditResult {
	r := EditResult{ID: e.id, Change: e.change, Err: err}
	if e.outcome != nil {
		r.Outcome = e.outcome.clone()
	}
	return r
}

// Withdraw removes an edit that has not been applied yet. It reports false when the edit is
// already in the replica (it will reach the server) or unknown.
func (s *Replica) Withdraw(id uint64) bool {
	for i, e := range s.queued {
		if e.id == id {
			s.queued = append(s.queued[:i], s.queued[i+1:]...)
			return true
		}
	}
	return false
}

func (s *Replica) apply(e *pendingEdit) Output {
	var out Output
	var oc Outcome
	run := editRun{replay: e.replayed, prev: e.outcome, since: e.since}
	update, change, err := s.doc.Transact(func(tx *Txn) error {
		var err error
		oc, err = e.edit.run(tx, run)
		return err
	})
	oc.Replayed = e.replayed
	change.EditID = e.id
	s.observe(change)
	e.since = nil // guards are for the first run
	e.outcome, e.change = &oc, change
	if err != nil && e.replayed {
		err = fmt.Errorf("re-applying after the room was reset: %w", err)
	}
	if update == nil {
		out.Done = append(out.Done, e.result(err))
		return out
	}
	meta, perr := ParseUpdate(update)
	out.Frames = append(out.Frames, EncodeSync(SyncUpdate, update))
	if perr != nil {
		// y-crdt produced, for our own edit, something our parser rejects: a bug, not input. The
		// update is in the replica and is sent, but without knowing what it holds it cannot be
		// confirmed.
		s.log.Error().Err(perr).Msg("local update does not parse")
		out.Done = append(out.Done, e.result(fmt.Errorf("internal: the local update could not be tracked, so the server's acknowledgement cannot be checked: %w", perr)))
		return out
	}
	if len(meta.Structs) == 0 && len(meta.Deletes) > 0 {
		// A delete-only update the server already holds (someone deleted the same thing first)
		// produces no echo. A step 1 right behind it makes the server answer with its full delete
		// set, which confirms the edit in one round trip.
		out.Frames = append(out.Frames, s.askState())
	}
	if !change.Empty() {
		out.Changes = append(out.Changes, change)
	}
	if err != nil {
		// Partially applied: what is in the replica must still reach the server, but the
		// caller learns that the edit failed.
		out.Done = append(out.Done, e.result(err))
		return out
	}
	e.client = s.doc.ClientID()
	e.structs, e.deletes, e.change = meta.Structs, meta.Deletes, change
	s.inflight = append(s.inflight, e)
	return out
}

// Tick asks the server for anything we miss (a periodic step 1), healing lost messages.
func (s *Replica) Tick() Output {
	if !s.synced {
		return Output{}
	}
	return Output{Frames: [][]byte{s.askState()}}
}

// Abort ends every pending edit (the room is closing or failed for good). notApplied are the
// edits that never ran (nothing changed); unconfirmed were applied to a replica and may or may
// not have reached the server.
func (s *Replica) Abort() (notApplied, unconfirmed []EditResult) {
	for _, e := range s.queued {
		notApplied = append(notApplied, EditResult{ID: e.id})
	}
	for _, list := range [][]*pendingEdit{s.inflight, s.replay} {
		for _, e := range list {
			if !e.rescue {
				unconfirmed = append(unconfirmed, e.result(nil))
			}
			for _, c := range e.covers {
				unconfirmed = append(unconfirmed, c.result(nil))
			}
		}
	}
	s.queued, s.inflight, s.replay, s.unsaved = nil, nil, nil, nil
	return notApplied, unconfirmed
}

// Resync returns a sync step 1 whatever the state (to retry a handshake that did not complete).
func (s *Replica) Resync() Output {
	return Output{Frames: [][]byte{s.askState()}}
}
