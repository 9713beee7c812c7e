package bridge

import (
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Fresh reads. The replica follows the server's document as updates arrive, so a read shows what
// the server broadcast to the sidecar so far — but an edit a collaborator made a moment ago may
// still be on its way: in the server's queue of broadcasts, or in the socket. A fresh read first
// asks the server (a sync step 1 with the replica's state vector) and waits for its answer (the
// step 2 with everything the replica lacks): it then shows everything the server held when the
// read began.
//
// It takes two round trips, not one. A server reads its sockets in the order its event loop polls
// them, not in the order their bytes arrived: a collaborator's update already in the server's
// socket when the read's step 1 got there can be read just after the step 1, and be missing from
// its answer (2–4 of 100 immediate reads missed a yjs peer's edit on a loaded machine, on
// jupyter-collaboration and jupyter-server-documents alike, with one round trip). The answer to
// the first step 1 shows that the server has polled its sockets since the step 1 arrived — the
// collaborator's update with it; a second step 1, sent once that answer is in, is read after the
// update, and its answer holds it. Reads waiting at the same time share the step 1s.
//
// The server answers each step 1 of a connection with one step 2, in order (pycrdt-websocket's
// YRoom and jupyter-server-documents alike), and sends none unasked; so the link counts the step 1s
// sent and the step 2s applied, and a read whose step 1 was the n-th waits until n step 2s were
// applied. A read that cannot be fresh — no connection, the connection dropped before the answer,
// no answer within freshWait — shows what the replica holds, as a read without fresh does.

// freshWait bounds how long a fresh read waits for the server's answer before it shows what the
// replica holds (a server that stopped answering is found out by the loop's tick).
const freshWait = 5 * time.Second

// freshRead is a read waiting for the server's answers to its two step 1s.
type freshRead struct {
	rc     *readCall
	after  uint64    // the step 2s of the link that must have been applied
	second bool      // after is the second round trip's step 1 (the first was answered)
	at     time.Time // when it asked
}

// countSent counts the sync step 1s sent on the link.
func (k *link) countSent(f []byte) {
	if len(f) >= 2 && f[0] == byte(ydoc.MsgSync) && f[1] == byte(ydoc.SyncStep1) {
		k.stepOnes++
	}
}

// freshen sends a sync step 1 for a read and holds the read until the server has answered it and
// a second step 1, sent once the first answer is in (stepTwoArrived), and that answer is applied.
// It reports false when the read cannot be fresh (not connected, not synced): run it now.
func (l *roomLoop) freshen(rc *readCall) bool {
	if l.link == nil || !l.replica.Synced() {
		return false
	}
	for _, f := range l.replica.Resync().Frames {
		l.send(f)
	}
	l.fresh = append(l.fresh, freshRead{rc: rc, after: l.link.stepOnes, at: l.r.opts.Now()})
	return true
}

// stepTwoArrived counts a step 2 of the server (applied, or rejected: either way an answer): the
// fresh reads whose first step 1 it answers ask again, with one step 1 for all of them, and those
// whose second step 1 it answers run.
func (l *roomLoop) stepTwoArrived() {
	if l.link == nil {
		return
	}
	l.link.stepTwos++
	asked := false
	for i := range l.fresh {
		f := &l.fresh[i]
		if f.second || f.after > l.link.stepTwos {
			continue
		}
		if !asked {
			for _, fr := range l.replica.Resync().Frames {
				l.send(fr)
			}
			asked = true
		}
		f.after, f.second = l.link.stepOnes, true
	}
	l.runFresh(func(f freshRead) bool { return f.second && f.after <= l.link.stepTwos })
}

// runFresh runs the fresh reads that are due, keeping the others.
func (l *roomLoop) runFresh(due func(freshRead) bool) {
	if len(l.fresh) == 0 {
		return
	}
	kept := l.fresh[:0]
	var run []freshRead
	for _, f := range l.fresh {
		if due(f) {
			run = append(run, f)
		} else {
			kept = append(kept, f)
		}
	}
	clear(l.fresh[len(kept):])
	l.fresh = kept
	for _, f := range run {
		f.rc.run(l, nil)
	}
}

// expireFresh runs the fresh reads that waited freshWait for an answer: they show the replica.
func (l *roomLoop) expireFresh(now time.Time) {
	n := len(l.fresh)
	l.runFresh(func(f freshRead) bool { return now.Sub(f.at) >= freshWait })
	if gone := n - len(l.fresh); gone > 0 {
		l.log.Warn().Int("reads", gone).Dur("waited", freshWait).Msg("the server did not answer a fresh read's sync step 1 in time: the read shows what the replica holds")
	}
}

// releaseFresh runs every fresh read waiting (the connection ended: no answer will come), or fails
// them with cause (the room stopped).
func (l *roomLoop) releaseFresh(cause error) {
	fresh := l.fresh
	l.fresh = nil
	for _, f := range fresh {
		f.rc.run(l, cause)
	}
}
