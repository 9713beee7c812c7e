package ydoc

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"
)

// Session is the Yjs sync protocol for one room, as a pure state machine in the style of etcd's
// raft RawNode: inputs are method calls (Connect, Receive, Propose, Tick, Reset), outputs are
// returned values (frames to send, changes, edit outcomes). It starts no goroutines, reads no
// clock and touches no socket; bridge.Room drives it.
//
// Edits are functions over the typed model, not raw updates, so that after a reset (a new server
// session, a conflict) the ones the server never acknowledged can be run again on the fresh
// replica. An edit is confirmed only when the server is known to hold it: its inserted IDs are
// covered by the server's state vector (learned from the server's step 1 and from the echo the
// server broadcasts for every update, ours included) and its deletions by the delete sets the
// server sends (each step 2 carries its full delete set; echoes carry the transaction's).

// EditFunc changes a document inside one transaction. Replaying is true when the edit runs again
// on a fresh replica after a reset; functions can then treat "already gone" as success.
type EditFunc func(tx *Txn, replaying bool) error

// EditResult is the outcome of an edit: what it changed, or why it failed.
type EditResult struct {
	ID     uint64
	Change Change
	Err    error
}

// Output is what the caller must do after a Session call.
type Output struct {
	Frames   [][]byte     // send to the server, in order
	Changes  []Change     // document changes to publish, in order
	Done     []EditResult // edits now confirmed (Err nil) or failed
	Synced   bool         // the session became synced in this call
	Resynced bool         // a step 1 was sent to heal pending structs
}

func (o *Output) merge(p Output) {
	o.Frames = append(o.Frames, p.Frames...)
	o.Changes = append(o.Changes, p.Changes...)
	o.Done = append(o.Done, p.Done...)
	o.Synced = o.Synced || p.Synced
	o.Resynced = o.Resynced || p.Resynced
}

// ErrNotSynced is returned for calls that need a synced session.
var ErrNotSynced = errors.New("ydoc: session not synced")

type pendingEdit struct {
	id       uint64
	fn       EditFunc
	client   uint64    // client id the edit was applied under
	structs  []IDRange // what it inserted
	deletes  []IDRange // what it deleted
	change   Change
	replayed bool
	// durable edits are kept after the server confirmed them, until a save shows they reached
	// the file (see unsaved).
	durable bool
}

// Session state.
type Session struct {
	kind Kind
	log  zerolog.Logger
	doc  *Doc

	synced bool

	queued   []*pendingEdit // waiting for the first sync; not applied yet
	inflight []*pendingEdit // applied to the replica, not yet confirmed
	replay   []*pendingEdit // applied to a discarded replica; checked and re-run after sync
	// unsaved are durable edits the server confirmed but has not saved yet. A server killed
	// before its autosave (which waits for a second of quiet) comes back with the file's older
	// content; these are then re-run like unconfirmed edits. A save marker from the server
	// (state hash, or dirty turning false) proves them saved: the save task that sets it was
	// started after the last document change the server received (any change cancels a running
	// one), so its content includes every edit the server had confirmed before. A change by
	// anyone else ends them too: re-running an edit over a later one could undo it.
	unsaved         []*pendingEdit
	unsavedOverflow bool // maxUnsaved was reached since the last save (warned once)
	// rerunDurable: the last reset was for a lost server room (ResetServerLost).
	rerunDurable bool

	serverSV      StateVector // inserts the server is known to hold
	serverDeletes IDSet       // deletions the server is known to hold
	// pendingAsked is the pending set we last asked the server to heal with a step 1: the same
	// stuck set is not asked about again on every frame (the periodic Tick retries it).
	pendingAsked string
}

// NewSession creates a session with a fresh, empty replica.
func NewSession(kind Kind, clientID uint32, log zerolog.Logger) (*Session, error) {
	doc, err := NewDoc(kind, clientID, log)
	if err != nil {
		return nil, err
	}
	return &Session{kind: kind, log: log, doc: doc, serverSV: StateVector{}, serverDeletes: IDSet{}}, nil
}

// Doc returns the replica. Callers must not keep it across Reset.
func (s *Session) Doc() *Doc { return s.doc }

// Synced reports whether the replica has received the server's state since the last connect.
func (s *Session) Synced() bool { return s.synced }

// Pending returns the number of edits not yet confirmed (queued, in flight or awaiting replay).
func (s *Session) Pending() int { return len(s.queued) + len(s.inflight) + len(s.replay) }

// Connect starts the handshake on a fresh transport: it returns our sync step 1. The session is
// not synced until the server's step 2 arrives.
func (s *Session) Connect() Output {
	s.synced = false
	return Output{Frames: [][]byte{EncodeSync(SyncStep1, s.doc.StateVector().Encode())}}
}

// Disconnected marks the transport gone. Edits in flight stay in the replica; the next
// handshake delivers whatever the server lacks.
func (s *Session) Disconnected() { s.synced = false }

// Reset discards the replica (new server session, conflict, long absence, broken doc) and starts
// a fresh one under a new client id. Unconfirmed edits, and confirmed ones not yet saved, are
// checked against the server's state after the next sync and re-run if it does not have them.
func (s *Session) Reset(clientID uint32) error {
	return s.reset(clientID, false)
}

// ResetServerLost is Reset after the server lost its room (it restarted): durable edits run
// again even where the server holds their items, because a restarted server may have rebuilt the
// room from its store and then reloaded an older file over it, deleting them. Re-running one
// whose effect survived changes nothing. After other resets (a conflict, a broken replica) the
// server's document is the one it had, and an item of ours it holds deleted was deleted by
// someone: re-running the edit would undo their change.
func (s *Session) ResetServerLost(clientID uint32) error {
	return s.reset(clientID, true)
}

func (s *Session) reset(clientID uint32, serverLost bool) error {
	doc, err := NewDoc(s.kind, clientID, s.log)
	if err != nil {
		return fmt.Errorf("reset session: %w", err)
	}
	s.replay = append(append(s.replay, s.unsaved...), s.inflight...)
	slices.SortStableFunc(s.replay, func(a, b *pendingEdit) int { return cmp.Compare(a.id, b.id) }) // in the order they were made
	s.unsaved = nil
	s.inflight = nil
	s.rerunDurable = s.rerunDurable || serverLost
	s.doc = doc
	s.synced = false
	s.serverSV = StateVector{}
	s.serverDeletes = IDSet{}
	return nil
}

// Receive handles one sync frame from the server.
func (s *Session) Receive(f Frame) (Output, error) {
	var out Output
	if f.Type != MsgSync {
		return out, fmt.Errorf("session receive: not a sync frame (type %d)", f.Type)
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
	case SyncStep2, SyncUpdate:
		meta, change, err := s.doc.Apply(f.Payload)
		if err != nil {
			return out, fmt.Errorf("apply %s: %w", f.Sync, err)
		}
		s.learn(meta)
		if s.synced && len(s.unsaved) > 0 {
			if saved, other := s.savedMarker(change), documentChanged(change); saved || other {
				s.log.Debug().Int("edits", len(s.unsaved)).Bool("saved", saved).Bool("superseded", other).
					Strs("state", change.State).Msg("confirmed edits let go")
				s.unsaved, s.unsavedOverflow = nil, false // saved, or superseded by someone else's edit
			}
		}
		if !change.Empty() {
			out.Changes = append(out.Changes, change)
		}
		if f.Sync == SyncStep2 && !s.synced {
			s.synced = true
			out.Synced = true
			out.merge(s.afterSync())
		}
		out.Done = append(out.Done, s.confirm()...)
		if fp := s.doc.PendingFingerprint(); fp != "" && fp != s.pendingAsked {
			// y-crdt loses deletes that arrive before their inserts; a step 1 makes the server
			// send the missing structs and its full delete set again. Asked once per pending
			// set, so a set that cannot be healed does not ping-pong.
			s.pendingAsked = fp
			out.Frames = append(out.Frames, EncodeSync(SyncStep1, s.doc.StateVector().Encode()))
			out.Resynced = true
		}
	default:
		return out, fmt.Errorf("session receive: %w", malformed("sync subtype %d", f.Sync))
	}
	return out, nil
}

// learn records what a server message shows the server holds.
func (s *Session) learn(meta UpdateMeta) {
	for _, r := range meta.Structs {
		s.serverSV[r.Client] = max(s.serverSV[r.Client], r.Clock+r.Len)
	}
	s.serverDeletes.AddAll(meta.Deletes) // a step 2 carries the whole delete set: merge in bulk
}

// held reports whether the server holds everything an edit wrote.
func (s *Session) held(e *pendingEdit) bool {
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
func (s *Session) confirm() []EditResult {
	var done []EditResult
	kept := s.inflight[:0]
	for _, e := range s.inflight {
		if s.held(e) {
			done = append(done, EditResult{ID: e.id, Change: e.change})
			s.keepUnsaved(e)
		} else {
			kept = append(kept, e)
		}
	}
	s.inflight = kept
	return done
}

// afterSync runs once the server's state has arrived: edits from a discarded replica are
// confirmed if the server has them (a room rebuilt from its store keeps old client ids) or run
// again (durable ones always run again), then queued edits run.
func (s *Session) afterSync() Output {
	var out Output
	replay := s.replay
	s.replay = nil
	defer func() { s.rerunDurable = false }()
	for _, e := range replay {
		// After a lost server room a durable edit runs again even when the server holds its
		// items (see ResetServerLost).
		if !(e.durable && s.rerunDurable) && len(e.structs)+len(e.deletes) > 0 && s.held(e) {
			out.Done = append(out.Done, EditResult{ID: e.id, Change: e.change})
			continue
		}
		e.replayed = true
		out.merge(s.apply(e))
	}
	queued := s.queued
	s.queued = nil
	for _, e := range queued {
		out.merge(s.apply(e))
	}
	return out
}

// maxUnsaved bounds the confirmed edits kept for a save; past it the oldest are let go.
const maxUnsaved = 512

func (s *Session) keepUnsaved(e *pendingEdit) {
	if !e.durable {
		return
	}
	if len(s.unsaved) >= maxUnsaved {
		if !s.unsavedOverflow { // once per stretch without a save, not once per edit
			s.unsavedOverflow = true
			s.log.Warn().Int("kept", maxUnsaved).Msg("the server has not saved for a long stream of edits; the oldest can no longer be re-applied if it dies")
		}
		s.unsaved = append(s.unsaved[:0], s.unsaved[1:]...)
	}
	s.unsaved = append(s.unsaved, e)
}

// savedMarker reports a remote change that says the server saved the document.
func (s *Session) savedMarker(c Change) bool {
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

// documentChanged reports a remote change to the content (not to state or awareness).
func documentChanged(c Change) bool {
	return !c.Local && (len(c.Inserted) > 0 || len(c.Deleted) > 0 || c.Moved || len(c.Cells) > 0 || c.Meta || c.Text)
}

// Unsaved returns how many confirmed edits wait for the server to save them.
func (s *Session) Unsaved() int { return len(s.unsaved) }

// ProposeDurable submits an edit that is re-run after a reset until the server has saved it
// (see unsaved). Only edits that are safe to run twice qualify: re-running one the file already
// holds must change nothing (inserting cells by id, setting a cell's content).
func (s *Session) ProposeDurable(id uint64, fn EditFunc) Output {
	e := &pendingEdit{id: id, fn: fn, durable: true}
	if !s.synced {
		s.queued = append(s.queued, e)
		return Output{}
	}
	return s.apply(e)
}

// Propose submits an edit. It runs at once when synced, otherwise after the next sync.
func (s *Session) Propose(id uint64, fn EditFunc) Output {
	e := &pendingEdit{id: id, fn: fn}
	if !s.synced {
		s.queued = append(s.queued, e)
		return Output{}
	}
	return s.apply(e)
}

// Withdraw removes an edit that has not been applied yet. It reports false when the edit is
// already in the replica (it will reach the server) or unknown.
func (s *Session) Withdraw(id uint64) bool {
	for i, e := range s.queued {
		if e.id == id {
			s.queued = append(s.queued[:i], s.queued[i+1:]...)
			return true
		}
	}
	return false
}

func (s *Session) apply(e *pendingEdit) Output {
	var out Output
	update, change, err := s.doc.Transact(func(tx *Txn) error { return e.fn(tx, e.replayed) })
	change.EditID = e.id
	if err != nil && e.replayed {
		err = fmt.Errorf("re-applying after the room was reset: %w", err)
	}
	if update == nil {
		out.Done = append(out.Done, EditResult{ID: e.id, Change: change, Err: err})
		return out
	}
	meta, perr := ParseUpdate(update)
	out.Frames = append(out.Frames, EncodeSync(SyncUpdate, update))
	if perr != nil {
		// Our own engine produced something our parser rejects: a bug, not input. The update is
		// in the replica and is sent, but without knowing what it holds it cannot be confirmed.
		s.log.Error().Err(perr).Msg("local update does not parse")
		out.Done = append(out.Done, EditResult{ID: e.id, Change: change, Err: fmt.Errorf("internal: the local update could not be tracked, so the server's acknowledgement cannot be checked: %w", perr)})
		return out
	}
	if len(meta.Structs) == 0 && len(meta.Deletes) > 0 {
		// A delete-only update the server already holds (someone deleted the same thing first)
		// produces no echo. A step 1 right behind it makes the server answer with its full delete
		// set, which confirms the edit in one round trip.
		out.Frames = append(out.Frames, EncodeSync(SyncStep1, s.doc.StateVector().Encode()))
	}
	if !change.Empty() {
		out.Changes = append(out.Changes, change)
	}
	if err != nil {
		// Partially applied: what is in the replica must still reach the server, but the
		// caller learns that the edit failed.
		out.Done = append(out.Done, EditResult{ID: e.id, Change: change, Err: err})
		return out
	}
	e.client = s.doc.ClientID()
	e.structs, e.deletes, e.change = meta.Structs, meta.Deletes, change
	s.inflight = append(s.inflight, e)
	return out
}

// Tick asks the server for anything we miss (a periodic step 1), healing lost messages.
func (s *Session) Tick() Output {
	if !s.synced {
		return Output{}
	}
	return Output{Frames: [][]byte{EncodeSync(SyncStep1, s.doc.StateVector().Encode())}}
}

// Abort ends every pending edit (the room is closing or failed for good). notApplied are the
// edits that never ran (nothing changed); unconfirmed were applied to a replica and may or may
// not have reached the server.
func (s *Session) Abort() (notApplied, unconfirmed []EditResult) {
	for _, e := range s.queued {
		notApplied = append(notApplied, EditResult{ID: e.id})
	}
	for _, list := range [][]*pendingEdit{s.inflight, s.replay} {
		for _, e := range list {
			unconfirmed = append(unconfirmed, EditResult{ID: e.id, Change: e.change})
		}
	}
	s.queued, s.inflight, s.replay, s.unsaved = nil, nil, nil, nil
	return notApplied, unconfirmed
}

// Resync returns a sync step 1 whatever the state (to retry a handshake that did not complete).
func (s *Session) Resync() Output {
	return Output{Frames: [][]byte{EncodeSync(SyncStep1, s.doc.StateVector().Encode())}}
}
