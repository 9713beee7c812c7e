package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The room goroutine's work while connected: frames in, frames out, requests, housekeeping.

// errReconnect ends a connection on purpose (conflict, reset needed); the loop reconnects.
var errReconnect = errors.New("bridge: reconnecting")

// errNoStepTwo: the server never answered a handshake.
var errNoStepTwo = errors.New("no sync step 2 from the server")

// Give up on a room that resets again and again without ever syncing (a document y-crdt
// cannot load, a server that rejects every session), instead of reconnecting forever.
const (
	maxResetsNoSync = 8
	maxBrokenNoSync = 3
)

func (l *roomLoop) serve(ctx context.Context) error {
	tick := time.NewTicker(l.r.opts.TickInterval)
	defer tick.Stop()
	for {
		var outc chan []byte
		var next []byte
		if len(l.outbox) > 0 {
			outc, next = l.link.out, l.outbox[0]
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case in := <-l.link.in:
			if err := l.receive(in); err != nil {
				var le *leaveError
				if errors.As(err, &le) {
					l.leaveLink(le.last)
					return le.err
				}
				l.dropLink()
				return err
			}
		case err := <-l.link.errc:
			l.dropLink()
			return l.classifyClose(err)
		case outc <- next:
			l.outbox[0] = nil
			l.outbox = l.outbox[1:]
		case fn := <-l.r.reqs:
			fn(l)
		case <-l.guard.grant:
			l.granted(l.r.opts.Now())
		case <-l.paceWake():
			l.releasePaced(l.r.opts.Now())
		case <-tick.C:
			if err := l.tick(l.r.opts.Now()); err != nil {
				l.dropLink()
				return err
			}
		}
	}
}

// classifyClose turns a connection error into the loop's decision: reset and retry, retry, or
// give up.
func (l *roomLoop) classifyClose(err error) error {
	var ce closeError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.CloseCode() {
	case closeSessionProblem:
		var reason struct {
			Reason     string `json:"reason"`
			Reloadable *bool  `json:"reloadable"`
			Detail     string `json:"errorReason"`
		}
		_ = json.Unmarshal([]byte(ce.CloseReason()), &reason)
		if reason.Reason == "initialization_error" || (reason.Reloadable != nil && !*reason.Reloadable) {
			// Any exception while the server loads the file ends up here, transient ones too:
			// retry a few times before calling it permanent.
			l.initErrors++
			if l.initErrors < 3 {
				return err
			}
			msg := "the server could not load the document"
			if reason.Detail != "" {
				msg += ": " + reason.Detail
			}
			return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("%s: %w", msg, err)}
		}
		l.requestResetServerLost("the server closed the session (" + nonEmpty(reason.Reason, ce.CloseReason()) + ")")
		if l.resetsNoSync >= maxResetsNoSync {
			return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("the server keeps refusing our session (%d times without a sync): %w", l.resetsNoSync, err)}
		}
		return err
	case closeFileNotFound:
		return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("file not found: %w", err)}
	case closeMovedOutOfBand:
		return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("the file was moved or deleted outside Jupyter: %w", err)}
	case closeDeleted:
		return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("the file was deleted: %w", err)}
	case closeBadRequest:
		return &RoomError{Path: l.r.opts.Path, Err: fmt.Errorf("the server refused to load the document as a %s: %w", l.r.opts.Kind, err)}
	}
	return err
}

func nonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// receive handles one frame; a non-nil error drops the connection.
func (l *roomLoop) receive(in inbound) error {
	if in.err != nil {
		// A frame we cannot decode may have carried an update (or the step 2 we wait for): ask
		// for a full diff.
		l.log.Warn().Err(in.err).Msg("dropping malformed frame from server; resyncing")
		l.handle(l.replica.Resync())
		return nil
	}
	f := in.frame
	now := l.r.opts.Now()
	switch f.Type {
	case ydoc.MsgSync:
		return l.receiveSync(f)
	case ydoc.MsgAwareness:
		ch, reply, err := l.aw.Apply(f.Payload, now)
		if err != nil {
			l.log.Debug().Err(err).Msg("ignoring malformed awareness update")
			return nil
		}
		if reply == nil && len(ch.Added) > 0 {
			reply = l.aw.Refresh(now) // let the newcomer see us now, not at our next renewal
		}
		if reply != nil {
			l.send(ydoc.EncodeAwarenessFrame(reply))
		}
		if !ch.Empty() {
			l.publishInfo()
			l.r.emit(Event{Path: l.r.opts.Path, Kind: EventAwareness, Time: now})
		}
	case ydoc.MsgRaw:
		msg, err := ydoc.ParseRaw(f.Raw)
		if err != nil {
			l.log.Debug().Err(err).Msg("ignoring malformed raw message")
			return nil
		}
		switch msg.Type {
		case "save":
			if msg.ResponseTo != nil && *msg.ResponseTo == l.guard.inflight {
				l.saveAnswered(msg.Status)
			} else if msg.ResponseTo != nil {
				if c, ok := l.saves[*msg.ResponseTo]; ok {
					delete(l.saves, *msg.ResponseTo)
					c <- saveResult{status: msg.Status}
				}
			}
		case "conflict":
			// The server could not integrate our history (a room rebuilt under us): start over.
			l.requestReset("the server reported a conflict with our history")
			return errReconnect
		}
	}
	return nil
}

// handle carries out a session output.
func (l *roomLoop) handle(out ydoc.Output) { l.carryOut(out, true) }

// handleHeld carries out a local edit's output whose frames pacing holds back (pace.go).
func (l *roomLoop) handleHeld(out ydoc.Output) { l.carryOut(out, false) }

func (l *roomLoop) carryOut(out ydoc.Output, send bool) {
	logged := l.logLocal(out) // the log has every update before the replica's next one
	defer l.afterOutput()
	if send {
		for _, f := range out.Frames {
			l.send(f)
		}
	}
	now := l.r.opts.Now()
	for _, c := range out.Changes {
		if l.ready && !c.Local && slices.Contains(c.Clients, 0) {
			// The server's loader (client 0) writes after the sync: a progressive load goes on.
			l.r.prep.loaderWrote(now)
		}
		if l.ready && contentChanged(c) && (c.Local || slices.ContainsFunc(c.Clients, func(id uint64) bool { return id != 0 })) {
			l.r.prep.othersWrote() // the room holds more than its file: reads come from it (firstread.go)
		}
		authors := l.authorsOf(c)
		l.watchChange(c, now)
		seq := l.hist.record(c, authors, now, !l.ready && !c.Local)
		if c.EditID != 0 {
			l.versions[c.EditID] = seq
		}
		if l.snaps != nil && l.ready {
			if err := l.snaps.observe(l.replica.Doc(), c, l.hist.versionAt(seq), authors, now, false); err != nil {
				l.log.Warn().Err(err).Msg("could not record a version")
			}
		}
		l.r.emit(Event{Path: l.r.opts.Path, Kind: EventChanged, Time: now, Change: c, Authors: authors, Version: l.hist.versionAt(seq)})
	}
	l.noteChanges(out, now) // before the sync below marks the replica ready: a load is no change
	if out.Saved {
		l.logSaved(logged)
		h, _ := l.replica.Doc().State()["hash"].(string)
		l.watchSaved(h, now)
	}
	if out.Rescue != nil || out.Strays > 0 {
		// Typing into cells the rescue replaced is followed while peers may not have it yet.
		l.strayUntil = now.Add(strayWatchFor)
	}
	if out.Rescue != nil {
		l.onRescue(out.Rescue, now)
		if h := l.replica.History(); h != nil && l.rescueFile != nil {
			h.NoteSaved(*l.rescueFile)
			l.wal.savedLogged = false
			l.logSavedContent()
		}
		l.rescueFile = nil
	} else if out.Synced && l.walPending() {
		l.walDecided("nothing to rescue") // the lost replica had never synced
	}
	for _, d := range out.Done {
		if !l.finishEdit(d) && d.Err != nil && out.Rescue == nil { // a rescue report lists its failures
			l.reapplyFailed(d, now)
		}
	}
	if len(out.Changes) > 0 || out.Synced {
		l.sizeDirty = true
	}
	if out.Synced {
		if l.r.opts.Kind == ydoc.KindNotebook && onlyLoader(l.replica.Doc().StateVector()) {
			// Everything the replica holds came from the server's loader (client 0): the room
			// was loaded from the file just now, and may still be loading (outputs.go).
			l.r.prep.loaderWrote(now)
		}
		l.ready = true
		h, _ := l.replica.Doc().State()["hash"].(string)
		l.outside = outsideWatch{hash: h}
		if l.snaps != nil {
			if err := l.snaps.observe(l.replica.Doc(), ydoc.Change{}, l.hist.version(), nil, now, true); err != nil {
				l.log.Warn().Err(err).Msg("could not record the joined version")
			}
		}
		l.awayFrom = time.Time{}
		l.lastSync = now
		l.resetsNoSync, l.brokenNoSync, l.initErrors, l.unanswered = 0, 0, 0, 0
		l.bo.Reset()
		// The times first: a caller woken by synced reads them (presence warm-up).
		l.r.mu.Lock()
		l.r.info.SyncedAt = now
		if l.r.info.JoinedAt.IsZero() {
			l.r.info.JoinedAt = now
		}
		l.r.mu.Unlock()
		select {
		case <-l.r.synced:
		default:
			close(l.r.synced)
		}
		for _, rc := range l.deferred {
			rc.run(l, nil)
		}
		l.deferred = nil
		l.runProposals()
		l.setStatus(StatusSynced, nil)
		l.log.Info().Str(logfield.RoomID, l.ds.RoomID).Msg("room synced")
		l.r.emit(Event{Path: l.r.opts.Path, Kind: EventSynced, Time: now})
	}
	if len(out.Done) > 0 || len(out.Frames) > 0 {
		l.publishPending()
	}
	if out.SaveNow {
		l.maybeSave(now)
	}
	if len(out.Done) > 0 {
		l.releasePaced(now)
	}
}

// finishEdit hands an edit's outcome to its Pending, with the version it produced (the current
// version when it changed nothing). It reports false when nobody holds it any more (an edit
// confirmed earlier, run again after a reset).
func (l *roomLoop) finishEdit(d ydoc.EditResult) bool {
	seq, ok := l.versions[d.ID]
	if !ok {
		seq = l.hist.seq
	}
	delete(l.versions, d.ID)
	if p, ok := l.waiters[d.ID]; ok {
		delete(l.waiters, d.ID)
		p.finish(Edited{Outcome: d.Outcome, Change: d.Change, Version: l.hist.versionAt(seq)}, d.Err)
		return true
	}
	return false
}

// send queues a frame for the writer; frames produced while disconnected are dropped (the next
// handshake regenerates everything the server lacks).
func (l *roomLoop) send(f []byte) {
	if l.link == nil {
		return
	}
	l.link.countSent(f)
	l.outbox = append(l.outbox, f)
}

func (l *roomLoop) tick(now time.Time) error {
	if err := l.releaseHeldAfter(now); err != nil {
		return err
	}
	l.releasePaced(now)
	if l.link != nil && !l.replica.Synced() && now.Sub(l.connectedAt) >= l.r.opts.HandshakeTimeout {
		if l.handshakeAsked {
			return fmt.Errorf("%w within %s", errNoStepTwo, 2*l.r.opts.HandshakeTimeout)
		}
		l.handshakeAsked = true
		l.connectedAt = now
		l.log.Warn().Msg("no sync step 2 yet; asking again")
		l.handle(l.replica.Resync())
	}
	if update, ch := l.aw.Tick(now); update != nil || !ch.Empty() {
		if update != nil {
			l.send(ydoc.EncodeAwarenessFrame(update))
		}
		if !ch.Empty() {
			l.publishInfo()
			l.r.emit(Event{Path: l.r.opts.Path, Kind: EventAwareness, Time: now})
		}
	}
	l.publishRisk()
	if l.replica.StrayWatch() && now.After(l.strayUntil) {
		l.replica.StopStrayWatch()
	}
	if l.snaps != nil && l.snaps.dirty && now.Sub(l.lastSave) >= 10*time.Second {
		l.queueSave()
	}
	l.measure(now)
	l.saveTick(now)
	l.expireFresh(now)
	if l.link != nil && !l.resyncAskedAt.IsZero() && now.Sub(l.resyncAskedAt) >= 2*l.r.opts.HandshakeTimeout {
		// A server answers every step 1 with a step 2: one that no longer does serves nobody
		// (a jupyter-server-documents room that lost its message task) though the socket lives.
		return fmt.Errorf("%w to a resync within %s", errNoStepTwo, 2*l.r.opts.HandshakeTimeout)
	}
	if l.replica.Synced() && now.Sub(l.lastSync) >= l.r.opts.ResyncInterval {
		l.lastSync = now
		if l.resyncAskedAt.IsZero() {
			l.resyncAskedAt = now
		}
		l.handle(l.replica.Tick())
	}
	return nil
}

// dropLink tears the connection down after an error.
func (l *roomLoop) dropLink() { l.endLink(nil, false) }

// leaveLink ends the connection on purpose: the last frames are sent, then a normal
// close.
func (l *roomLoop) leaveLink(last [][]byte) { l.endLink(last, true) }

func (l *roomLoop) endLink(last [][]byte, graceful bool) {
	if l.link == nil {
		return
	}
	lastRecv := l.link.lastReceived()
	if graceful {
		l.link.closeGracefully(last, 2*time.Second) // not the outbox: it may carry the history being dropped
	} else {
		l.link.close()
	}
	l.link = nil
	l.releaseFresh(nil)
	l.held = nil
	l.outbox = nil
	l.clearPaced() // in the replica: the next handshake sends what the server lacks
	l.replica.Disconnected()
	// Away since we last heard from the server, not since we noticed: a silent network
	// failure is only detected by the read deadline.
	l.awayFrom = l.r.opts.Now()
	if !lastRecv.IsZero() && lastRecv.Before(l.awayFrom) {
		l.awayFrom = lastRecv
	}
	for id, c := range l.saves {
		delete(l.saves, id)
		c <- saveResult{err: fmt.Errorf("disconnected before the server answered the save: %w", ErrNotSynced)}
	}
	l.stopSaving()
	l.publishRisk()
	l.r.mu.Lock()
	l.r.info.Reconnects++
	l.r.mu.Unlock()
	l.r.emit(Event{Path: l.r.opts.Path, Kind: EventDisconnected, Time: l.awayFrom})
}

func (l *roomLoop) requestReset(reason string) {
	if l.needReset == "" {
		l.needReset = reason
	}
}

// requestResetServerLost is requestReset when the server lost the room (it restarted): see
// ydoc.Replica.ResetServerLost.
func (l *roomLoop) requestResetServerLost(reason string) {
	l.requestReset(reason)
	l.serverLost = true
}

// reset rebuilds the replica under a new client id. Unconfirmed edits are checked and re-run
// after the next sync; views wait for it.
func (l *roomLoop) reset() error {
	id := l.r.opts.NewClientID()
	reset, lost := l.replica.Reset, l.serverLost
	if lost {
		reset = l.replica.ResetServerLost
	}
	l.serverLost = false
	if err := reset(id); err != nil {
		return err
	}
	l.walReset(l.needReset, lost)
	if bye := l.aw.Goodbye(); bye != nil {
		l.send(ydoc.EncodeAwarenessFrame(bye)) // the old client id (and its cursor) goes now
	}
	l.aw.Reset(uint64(id), l.r.opts.Now())
	l.ready = false
	l.guard.unsavedSince, l.guard.soon = time.Time{}, false // the next sync starts from the server's state
	l.publishSaveInfo()
	l.resetsNoSync++
	l.log.Info().Str(logfield.Reason, l.needReset).Msg("rebuilding the replica")
	l.needReset = ""
	l.r.mu.Lock()
	l.r.info.Resets++
	l.r.mu.Unlock()
	l.r.emit(Event{Path: l.r.opts.Path, Kind: EventReset, Time: l.r.opts.Now()})
	return nil
}

// maxDeferred bounds reads waiting for a sync.
const maxDeferred = 1024

// whenReady runs a read now if the replica holds the server's state, or after the next sync.
func (l *roomLoop) whenReady(rc *readCall) {
	if l.ready {
		if rc.fresh && l.freshen(rc) {
			return
		}
		rc.run(l, nil)
		return
	}
	kept := l.deferred[:0] // drop reads whose callers gave up
	for _, d := range l.deferred {
		if d.state.Load() == readPending {
			kept = append(kept, d)
		}
	}
	clear(l.deferred[len(kept):])
	l.deferred = kept
	if len(l.deferred) >= maxDeferred {
		rc.run(l, fmt.Errorf("bridge: %d reads are already waiting for room %s to sync; try again later", len(l.deferred), l.r.opts.Path))
		return
	}
	l.deferred = append(l.deferred, rc)
}

// stop ends the room: pending callers learn why, and a live connection is left politely (null
// awareness state so peers drop us at once, then a normal close).
func (l *roomLoop) stop(err error) {
	cause := err
	if cause == nil {
		cause = ErrRoomClosed
	}
	l.abortEdits(cause)
	for id, c := range l.saves {
		delete(l.saves, id)
		c <- saveResult{err: cause}
	}
	for _, rc := range l.deferred {
		rc.run(l, cause)
	}
	l.deferred = nil
	l.releaseFresh(cause)
	if l.link != nil {
		last := append(append(l.outbox, ydoc.ChainLocalUpdates(l.pace.frames)...), ydoc.EncodeAwarenessFrame(l.aw.ClearLocal(l.r.opts.Now())))
		l.clearPaced()
		l.link.closeGracefully(last, 2*time.Second)
		l.link = nil
	}
	// Requests racing with the shutdown still run (so their callers are not left waiting), then
	// everything they registered fails: nothing can be sent any more.
	for drained := false; !drained; {
		select {
		case fn := <-l.r.reqs:
			fn(l)
		default:
			drained = true
		}
	}
	l.abortEdits(cause)
	for _, rc := range l.deferred {
		rc.run(l, cause)
	}
	l.deferred = nil
}

// abortEdits ends every pending edit: the ones that never ran changed nothing; the ones already
// in the replica were sent and may have reached the server, so their outcome is unknown.
func (l *roomLoop) abortEdits(cause error) {
	notApplied, unconfirmed := l.replica.Abort()
	for _, pr := range l.proposals {
		notApplied = append(notApplied, ydoc.EditResult{ID: pr.id})
	}
	l.proposals = nil
	for _, d := range notApplied {
		d.Err = &WithdrawnError{Err: cause}
		l.finishEdit(d)
	}
	for _, d := range unconfirmed {
		d.Err = &UnconfirmedError{Err: cause}
		l.finishEdit(d)
	}
	// The callers hear it from their calls; an agent whose call gave up waiting hears it here.
	if n := len(notApplied); n > 0 {
		l.r.logNotice(Notice{Kind: "withdrawn", Level: NoticeWarning, Topic: TopicEdit, Data: map[string]any{"withdrawn": n},
			Message: fmt.Sprintf("%d edit(s) to %s withdrawn, nothing changed: the room stopped before applying them (%v)", n, l.r.opts.Path, cause)})
	}
	if n := len(unconfirmed); n > 0 {
		l.r.logNotice(Notice{Kind: "unconfirmed", Level: NoticeWarning, Topic: TopicEdit, Data: map[string]any{"unconfirmed": n},
			Message: fmt.Sprintf("%d edit(s) to %s were sent but not confirmed when the room stopped (%v): re-read the document before making them again", n, l.r.opts.Path, cause)})
	}
}

func (l *roomLoop) setStatus(s Status, err error) {
	l.r.mu.Lock()
	l.r.info.Status = s
	if err != nil {
		l.r.info.Err = err.Error()
	} else if s == StatusSynced {
		l.r.info.Err = ""
	}
	l.r.info.ClientID = l.replica.Doc().ClientID()
	l.r.mu.Unlock()
}

func (l *roomLoop) publishPending() {
	l.r.mu.Lock()
	l.r.info.PendingEdits = l.replica.Pending() + len(l.proposals)
	l.r.mu.Unlock()
}

// publishInfo refreshes the collaborator list in the info snapshot.
func (l *roomLoop) publishInfo() {
	var cs []Collaborator
	for id, u := range l.aw.Users() {
		cs = append(cs, Collaborator{ClientID: id, User: u, Since: l.aw.Since(id)})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].ClientID < cs[j].ClientID })
	l.r.mu.Lock()
	l.r.info.Collaborators = cs
	l.r.info.PendingEdits = l.replica.Pending() + len(l.proposals)
	l.r.mu.Unlock()
}

// authorsOf names the collaborators whose client ids contributed to a change.
func (l *roomLoop) authorsOf(c ydoc.Change) []string {
	if c.Local {
		return []string{l.r.opts.User.DisplayName}
	}
	users := l.aw.Users()
	var out []string
	for _, id := range c.Clients {
		if u, ok := users[id]; ok {
			out = append(out, nonEmpty(u.DisplayName, nonEmpty(u.Name, u.Username)))
		}
	}
	return out
}

// queueSave hands the saver the history as it is now (replacing an image not yet written).
func (l *roomLoop) queueSave() {
	if l.saveCh == nil || !l.snaps.dirty {
		return
	}
	img := l.snaps.image(l.r.opts.Path)
	l.snaps.dirty = false
	l.lastSave = l.r.opts.Now()
	select {
	case <-l.saveCh:
	default:
	}
	l.saveCh <- img
}
