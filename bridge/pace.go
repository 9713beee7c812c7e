package bridge

import (
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Pacing a busy room's edits. jupyter-server serves every room on one event loop, and each
// update message costs it about the same whatever its size (apply, store in its update log,
// broadcast). Agents that edit one notebook without pause each keep an update on its way, so a
// busy room kept several messages queued at the server ahead of every other room's, and a human
// typing in another notebook waited behind them (issue 29's interference probe: p50 4×, p99 20×
// the room alone). So a room keeps at most one run of its own updates at the server:
//
//   - An edit made while nothing the room sent is unconfirmed leaves at once, as before: an agent
//     that edits, waits for the confirmation and edits again never waits here.
//   - An edit made while an earlier one is unconfirmed is applied to the replica at once (reads
//     see it, the journal has it) and its frames wait; the waiting frames leave as one update
//     (ydoc.ChainLocalUpdates) once the earlier ones are confirmed and twice as long again has
//     passed as their round trip took (paceGapFactor, at most maxPaceGap). Twice, because the
//     round trip understates what a message costs the server: jupyter-collaboration echoes an
//     update first and writes it to its update store after (most of its time in the probe,
//     profiled with py-spy). The server then has time for the other rooms, and the edits that
//     piled up meanwhile cost it one message, not many.

// maxPaceGap bounds the pause after a confirmation (paceGapFactor times the round trip);
// maxPaceHold bounds how long frames wait for a confirmation that does not come (an echo lost
// with its connection is followed by a resync that sends them anyway).
const (
	maxPaceGap    = 50 * time.Millisecond
	maxPaceHold   = 250 * time.Millisecond
	paceGapFactor = 2
)

// paceState is what a room holds back (owned by the room goroutine).
type paceState struct {
	frames    [][]byte    // frames of edits made while earlier ones were on their way, in order
	edits     int         // edits those frames carry (counted in the replica's in-flight edits)
	since     time.Time   // when the first of them was held
	sentAt    time.Time   // when the room's last edit frames left
	notBefore time.Time   // the held frames leave no earlier (zero: not decided yet)
	timer     *time.Timer // wakes the loop at notBefore
}

// pacing reports whether an edit made now waits: something the room sent is unconfirmed, or
// frames are held already (edits leave in the order they were made).
func (l *roomLoop) pacing() bool {
	return !l.r.opts.NoPacing && l.link != nil && (len(l.pace.frames) > 0 || l.replica.InFlight() > l.pace.edits)
}

// sentEdit notes that a local edit's frames left now.
func (l *roomLoop) sentEdit(now time.Time) { l.pace.sentAt = now }

// holdFrames keeps a local edit's frames back; added is how many in-flight edits it added.
func (l *roomLoop) holdFrames(frames [][]byte, added int, now time.Time) {
	if len(l.pace.frames) == 0 {
		l.pace.since = now
		l.armPace(maxPaceHold)
	}
	l.pace.frames = append(l.pace.frames, frames...)
	l.pace.edits += added
}

// releasePaced sends the held frames, as one update where they chain, when their time has come.
func (l *roomLoop) releasePaced(now time.Time) {
	p := &l.pace
	if len(p.frames) == 0 || l.link == nil {
		return
	}
	if p.notBefore.IsZero() {
		confirmed := l.replica.InFlight() <= p.edits
		if !confirmed && now.Sub(p.since) < maxPaceHold {
			return // what was sent is not confirmed yet
		}
		p.notBefore = now // waited long enough for a confirmation that did not come
		if confirmed {
			p.notBefore = now.Add(min(max(paceGapFactor*now.Sub(p.sentAt), 0), maxPaceGap))
		}
	}
	if now.Before(p.notBefore) {
		l.armPace(p.notBefore.Sub(now))
		return
	}
	frames := ydoc.ChainLocalUpdates(p.frames)
	l.clearPaced()
	for _, f := range frames {
		l.send(f)
	}
	p.sentAt = now
}

// armPace sets the loop's wake-up for the held frames d from now.
func (l *roomLoop) armPace(d time.Duration) {
	if l.pace.timer == nil {
		l.pace.timer = time.NewTimer(d)
		return
	}
	l.pace.timer.Reset(d)
}

// paceWake is the channel the loop waits on for held frames (nil: none held).
func (l *roomLoop) paceWake() <-chan time.Time {
	if l.pace.timer == nil || len(l.pace.frames) == 0 {
		return nil
	}
	return l.pace.timer.C
}

// clearPaced forgets the held frames (sent, or in the replica for the next handshake to send).
func (l *roomLoop) clearPaced() {
	if l.pace.timer != nil {
		l.pace.timer.Stop()
	}
	l.pace = paceState{timer: l.pace.timer, sentAt: l.pace.sentAt}
}
