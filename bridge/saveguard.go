package bridge

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Saves that adapt. A save by jupyter-server rewrites the whole document (Y→JSON, validation,
// dump) on the server's one event loop: every other room of that server, every human typing in
// another notebook, waits meanwhile, and the wait grows with the notebook, not with the change.
// What reached the sidecar is safe in its journal (journal.go) whatever happens to the server,
// so a save is only a convenience for the file on disk, and the room asks for as few as keep the
// file reasonably current:
//
//   - never while the server's own autosave is pending: jupyter-collaboration saves by itself a
//     second after the last change (document_save_delay), so the room waits until the changes
//     paused for RoomOptions.AutosaveWait (2 s) and asks only if no save was reported by then
//     (autosave off for every client, or a save a keystroke cancelled before it published);
//   - a document that never pauses (a cell streaming output, a busy agent) postpones that
//     autosave for ever: it is asked once its oldest unsaved change is RoomOptions.SaveInterval
//     old, so the file lags behind by at most about that much;
//   - one request in flight per room, and the next no sooner than five times the last save's
//     duration (as jupyter-server-documents spaces its own saves) or RoomOptions.SaveSpacing
//     (1 s) after it ended; across rooms at most Saves' concurrency at once, granted in the
//     order asked.
//
// A save is known to have happened when the server says so in the room's state (a new hash, or
// dirty turning false), not when it answers the request: jupyter-collaboration answers "success"
// also when a change arriving meanwhile cancelled the save.
//
// The guard is a room capability: an engine whose rooms have no save message (or save by
// themselves) runs its rooms with SaveInterval 0.

// SaveStats counts save requests across a manager's rooms, by outcome.
type SaveStats struct {
	Asked        int64 `json:"asked"`
	Success      int64 `json:"success"`      // the server answered success (see above: not proof of a save)
	Skipped      int64 `json:"skipped"`      // a save or reload was already running
	Failed       int64 `json:"failed"`       // the server could not save
	TimedOut     int64 `json:"timed_out"`    // no answer within RoomOptions.SaveTimeout
	Disconnected int64 `json:"disconnected"` // the connection dropped before the answer
	Marked       int64 `json:"marked"`       // saves the servers reported in the rooms' state (theirs and ours)
	// Took: the answered requests' total time (request to answer, seconds), their number, and
	// the longest.
	TookSeconds    float64 `json:"took_seconds"`
	Timed          int64   `json:"timed"`
	MaxTookSeconds float64 `json:"max_took_seconds"`
}

// Saves is shared by a manager's rooms: it bounds how many save requests are in flight at once
// across them and counts them. The zero value is not usable; a nil *Saves grants every request at
// once and counts nothing.
type Saves struct {
	mu    sync.Mutex
	limit int
	busy  int
	queue []chan struct{}

	asked, success, skipped, failed, timedOut, disconnected, marked atomic.Int64

	tookMu    sync.Mutex
	tookSum   time.Duration
	tookCount int64
	tookMax   time.Duration
}

// took records how long an answered save took.
func (s *Saves) took(d time.Duration) {
	if s == nil {
		return
	}
	s.tookMu.Lock()
	defer s.tookMu.Unlock()
	s.tookSum += d
	s.tookCount++
	s.tookMax = max(s.tookMax, d)
}

// NewSaves returns a limiter for at most concurrency save requests at once (1 when less).
func NewSaves(concurrency int) *Saves {
	return &Saves{limit: max(concurrency, 1)}
}

// request asks for a slot. It is granted by a send on grant (capacity 1), now or when a slot
// frees up, in the order asked.
func (s *Saves) request(grant chan struct{}) {
	if s == nil {
		grant <- struct{}{}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy < s.limit {
		s.busy++
		grant <- struct{}{}
		return
	}
	s.queue = append(s.queue, grant)
}

// release frees a slot, handing it to the oldest request waiting.
func (s *Saves) release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		next <- struct{}{} // busy stays: the slot passes on
		return
	}
	s.busy--
}

// cancel withdraws a request: still queued, it leaves the queue; already granted (the grant
// unread in the channel), the slot is given back.
func (s *Saves) cancel(grant chan struct{}) {
	if s == nil {
		select {
		case <-grant:
		default:
		}
		return
	}
	s.mu.Lock()
	if i := slices.Index(s.queue, grant); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	select {
	case <-grant:
		s.release()
	default:
	}
}

func (s *Saves) count(outcome string) {
	if s == nil {
		return
	}
	switch outcome {
	case "asked":
		s.asked.Add(1)
	case "success":
		s.success.Add(1)
	case "skipped":
		s.skipped.Add(1)
	case "timeout":
		s.timedOut.Add(1)
	case "disconnected":
		s.disconnected.Add(1)
	case "marked":
		s.marked.Add(1)
	default:
		s.failed.Add(1)
	}
}

// Stats returns the counts so far.
func (s *Saves) Stats() SaveStats {
	if s == nil {
		return SaveStats{}
	}
	s.tookMu.Lock()
	defer s.tookMu.Unlock()
	return SaveStats{
		Asked: s.asked.Load(), Success: s.success.Load(), Skipped: s.skipped.Load(), Failed: s.failed.Load(),
		TimedOut: s.timedOut.Load(), Disconnected: s.disconnected.Load(), Marked: s.marked.Load(),
		TookSeconds: s.tookSum.Seconds(), Timed: s.tookCount, MaxTookSeconds: s.tookMax.Seconds(),
	}
}

// saveGuard is a room's save state, owned by the room goroutine.
type saveGuard struct {
	grant        chan struct{} // a slot from Saves
	waiting      bool          // a slot was asked for and not yet used
	inflight     uint64        // our save request waiting for its answer (0: none)
	sentAt       time.Time
	lastAsked    time.Time
	unsavedSince time.Time     // the oldest change the server has not saved (zero: none)
	lastChange   time.Time     // the latest change to the content
	soon         bool          // ask without waiting for the interval (the session's unsaved bound)
	markedAt     time.Time     // the server last reported a save in the room's state
	lastTook     time.Duration // how long the last answered save took (request to answer)
	lastEnded    time.Time     // when it was answered
}

// guarded reports whether this room asks for saves: not when the agent asked for no autosave,
// nor on an engine that saves by itself and has no save message (Engine.SavesItself).
func (l *roomLoop) guarded() bool {
	o := l.r.opts
	return o.SaveInterval > 0 && !o.NoAutosave && o.Fork == "" && o.Transient == "" && !l.ds.Engine.SavesItself
}

// noteChanges records the document changes of a session output: local ones and remote ones
// after the initial load are unsaved until the server says it saved.
func (l *roomLoop) noteChanges(out ydoc.Output, now time.Time) {
	for _, c := range out.Changes {
		if !contentChanged(c) || (!l.ready && !c.Local) {
			continue
		}
		l.guard.lastChange = now
		if l.guard.unsavedSince.IsZero() {
			l.guard.unsavedSince = now
			l.publishSaveInfo()
		}
	}
	if out.Saved {
		l.r.opts.Saves.count("marked")
		// Every change the server had received is in the file: all but our edits still on
		// their way to it.
		l.guard.unsavedSince = time.Time{}
		if l.sess.InFlight() > 0 {
			l.guard.unsavedSince = now
		}
		l.guard.markedAt = now
		h, _ := l.sess.Doc().State()["hash"].(string)
		l.log.Debug().Str(logfield.FileHash, short(h)).Msg("the server saved the document")
		l.r.mu.Lock()
		l.r.info.LastSaved = now
		l.r.mu.Unlock()
		l.publishSaveInfo()
	}
	if out.SaveNow {
		l.guard.soon = true
	}
}

// contentChanged reports a change to what the file holds (cells, metadata, text), not to the
// room's state map.
func contentChanged(c ydoc.Change) bool {
	return len(c.Inserted) > 0 || len(c.Deleted) > 0 || c.Moved || len(c.Cells) > 0 || c.Meta || c.Text
}

// maybeSave asks for a slot when a save is due (see above).
func (l *roomLoop) maybeSave(now time.Time) {
	g := &l.guard
	if !l.guarded() || l.link == nil || !l.sess.Synced() || g.inflight != 0 || g.waiting || g.unsavedSince.IsZero() {
		return
	}
	if now.Sub(g.lastEnded) < l.saveSpacing() {
		return
	}
	// Checked every tick. The server's autosave gets its whole wait; a lagging file is asked for
	// on the last tick before the interval is over.
	paused := now.Sub(g.lastChange) >= l.r.opts.AutosaveWait
	lagging := now.Sub(g.unsavedSince) >= l.r.opts.SaveInterval-l.r.opts.TickInterval
	if !g.soon && !paused && !lagging {
		return
	}
	g.waiting = true
	l.r.opts.Saves.request(g.grant)
}

// saveSpacing is the least time between the end of a save and the next request: five times
// what the last one took, at least SaveSpacing.
func (l *roomLoop) saveSpacing() time.Duration {
	return max(l.r.opts.SaveSpacing, 5*l.guard.lastTook)
}

// granted sends the save request with the slot just granted, or gives the slot back when the
// save is no longer needed or possible.
func (l *roomLoop) granted(now time.Time) {
	g := &l.guard
	g.waiting = false
	if l.link == nil || !l.sess.Synced() || g.unsavedSince.IsZero() {
		l.r.opts.Saves.release()
		return
	}
	l.saveSeq++
	g.inflight, g.sentAt, g.lastAsked, g.soon = l.saveSeq, now, now, false
	l.r.opts.Saves.count("asked")
	l.log.Debug().Uint64("save", g.inflight).Msg("asking the server to save")
	l.send(ydoc.EncodeSaveRequest(g.inflight))
	l.r.mu.Lock()
	l.r.info.SavesAsked++
	l.r.info.LastSaveAsked = now
	l.r.info.LastSaveStatus = "pending"
	l.r.mu.Unlock()
}

// saveAnswered ends the request in flight with an outcome (the server's status, timeout or
// disconnected) and frees its slot.
func (l *roomLoop) saveAnswered(outcome string) {
	g := &l.guard
	if g.inflight == 0 {
		return
	}
	sentAt := g.sentAt
	g.inflight = 0
	l.r.opts.Saves.count(outcome)
	l.r.opts.Saves.release()
	if outcome == "success" || outcome == "failed" || outcome == "timeout" {
		now := l.r.opts.Now()
		g.lastTook, g.lastEnded = now.Sub(sentAt), now
		l.r.opts.Saves.took(g.lastTook)
	} else {
		g.lastEnded = l.r.opts.Now()
	}
	if outcome != "success" {
		l.log.Info().Str(logfield.Outcome, outcome).Msg("save request not done")
	} else {
		l.log.Debug().Msg("save request answered")
	}
	l.r.mu.Lock()
	l.r.info.LastSaveStatus = outcome
	l.r.info.LastSaveTook = g.lastTook
	l.r.info.SaveSpacing = l.saveSpacing()
	l.r.mu.Unlock()
}

// saveTick times a request out and asks for the next save when due.
func (l *roomLoop) saveTick(now time.Time) {
	g := &l.guard
	if g.inflight != 0 && now.Sub(g.sentAt) >= l.r.opts.SaveTimeout {
		l.saveAnswered("timeout")
	}
	l.maybeSave(now)
	l.publishSaveInfo()
}

// stopSaving ends what the guard holds when the connection goes: the request in flight, a slot
// asked for.
func (l *roomLoop) stopSaving() {
	l.saveAnswered("disconnected")
	if l.guard.waiting {
		l.guard.waiting = false
		l.r.opts.Saves.cancel(l.guard.grant)
	}
}

func (l *roomLoop) publishSaveInfo() {
	l.r.mu.Lock()
	l.r.info.UnsavedSince = l.guard.unsavedSince
	l.r.mu.Unlock()
}
