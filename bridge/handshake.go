package bridge

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The handshake, engine-neutral. jupyter-collaboration sends its own sync step 1 as soon as it
// serves a connection, before it answers ours with a step 2; jupyter-server-documents answers
// our step 1 with its step 2 first and then sends its step 1 (and closes a client that does not
// answer that step 1 within 5 s). Either way the server's step 1 carries what we must know
// before taking its state: its state vector. So the room holds the server's step 2 (and any
// update) until the server's step 1 of the connection has arrived, and then checks it:
//
// A replica that holds history the server does not know (a client id other than ours that is
// absent from the server's state vector) meets a new server document: the server freed the
// room, or restarted, and loaded the file again under fresh client ids. Merging the two would
// duplicate every cell. The replica is dropped (answering the server's step 1 with an empty
// step 2 first, so its handshake completes and nothing of the old history reaches it) and the
// room reconnects with a fresh one, re-running edits the server may not have
// (ResetServerLost). Our own client id is not evidence: our latest edits may simply not have
// reached the server yet.

// emptyUpdate is a Yjs v1 update with no structs and an empty delete set.
var emptyUpdate = []byte{0, 0}

// leaveError ends a connection after sending last frames (then a normal close).
type leaveError struct {
	last [][]byte
	err  error
}

func (e *leaveError) Error() string { return e.err.Error() }
func (e *leaveError) Unwrap() error { return e.err }

// receiveSync handles a sync frame: held until the server's step 1 of this connection, then
// checked for a new server document, then applied.
func (l *roomLoop) receiveSync(f ydoc.Frame) error {
	if f.Sync == ydoc.SyncStep2 {
		l.resyncAskedAt = time.Time{}
	}
	if !l.serverStepOne {
		if f.Sync != ydoc.SyncStep1 {
			if len(l.held) >= maxHeldFrames {
				return fmt.Errorf("the server sent %d sync messages without its sync step 1", len(l.held))
			}
			l.held = append(l.held, f)
			return nil
		}
		l.serverStepOne = true
		if reason := l.divergence(f.Payload); reason != "" {
			l.held = nil
			l.requestResetServerLost(reason)
			l.log.Info().Str(logfield.Reason, reason).Msg("the server has a new document; dropping the replica")
			return &leaveError{last: [][]byte{ydoc.EncodeSync(ydoc.SyncStep2, emptyUpdate)}, err: errReconnect}
		}
		if err := l.releaseHeld(); err != nil {
			return err
		}
	}
	return l.applySync(f)
}

// maxHeldFrames bounds what is held for a server that never sends its step 1.
const maxHeldFrames = 4096

// releaseHeld applies the frames held while waiting for the server's step 1, in order.
func (l *roomLoop) releaseHeld() error {
	held := l.held
	l.held = nil
	l.serverStepOne = true
	for _, h := range held {
		if err := l.applySync(h); err != nil {
			return err
		}
	}
	return nil
}

// releaseHeldAfter lets a server that never sends its own step 1 (none we know of) still be
// joined: after the handshake timeout the held frames are applied unchecked.
func (l *roomLoop) releaseHeldAfter(now time.Time) error {
	if l.serverStepOne || l.link == nil || now.Sub(l.connectedAt) < l.r.opts.HandshakeTimeout {
		return nil
	}
	if len(l.held) > 0 {
		l.log.Warn().Int("frames", len(l.held)).Msg("no sync step 1 from the server; applying its state unchecked")
	}
	return l.releaseHeld()
}

// divergence says why the replica cannot be merged with a server whose state vector is sv
// ("" when it can). An empty server state vector (jupyter-collaboration 4.4 sends its step 1
// before it has loaded the document) proves nothing.
func (l *roomLoop) divergence(payload []byte) string {
	sv, err := ydoc.DecodeStateVector(payload)
	if err != nil || len(sv) == 0 {
		return "" // Replica.Receive reports a malformed one
	}
	doc := l.replica.Doc()
	own := doc.ClientID()
	var unknown []uint64
	for client := range doc.StateVector() {
		if _, ok := sv[client]; !ok && client != own {
			unknown = append(unknown, client)
		}
	}
	if len(unknown) == 0 {
		return l.rebuiltUnder()
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i] < unknown[j] })
	return fmt.Sprintf("the server's document does not know %d of the replica's client ids (e.g. %d): it was rebuilt from the file", len(unknown), unknown[0])
}

// rebuiltUnder looks into what the server sent before its step 1 (jupyter-server-documents'
// step 2) for a load of the file into a fresh document: a server that rebuilt the room and then
// took the old copy of a tab that reconnected first knows every client id of the replica again
// (ydoc.Replica.RebuiltUnder). Merged as a plain reconnection, the replica would add every cell
// and keystroke a second time; it is a lost room, rescued as one.
func (l *roomLoop) rebuiltUnder() string {
	for _, h := range l.held {
		if h.Sync != ydoc.SyncStep2 && h.Sync != ydoc.SyncUpdate {
			continue
		}
		rebuilt, err := l.replica.RebuiltUnder(h.Payload)
		if err != nil {
			continue // Session.Receive reports a malformed one
		}
		if rebuilt {
			return "the server's document was loaded from the file anew (a peer had brought the replica's items back into it): it was rebuilt"
		}
	}
	return ""
}

// applySync hands a sync frame to the session.
func (l *roomLoop) applySync(f ydoc.Frame) error {
	if f.Sync == ydoc.SyncStep2 {
		defer l.stepTwoArrived() // after it was applied: the fresh reads it answers see it
	}
	out, err := l.replica.Receive(f)
	if err != nil {
		if errors.Is(err, ydoc.ErrDocBroken) {
			l.brokenNoSync++
			if l.brokenNoSync >= maxBrokenNoSync {
				return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("y-crdt cannot load this document (failed %d times in a row): %w", l.brokenNoSync, err)}
			}
			l.requestReset("the local replica broke: " + err.Error())
			return errReconnect
		}
		l.log.Warn().Err(err).Str(logfield.Sync, f.Sync.String()).Msg("bad sync message from server; resyncing")
		l.handle(l.replica.Resync())
		return nil
	}
	l.logRemote(f, out)
	l.handle(out)
	if out.Synced && f.Sync == ydoc.SyncStep2 {
		l.sizedBySync(len(f.Payload))
	}
	return nil
}
