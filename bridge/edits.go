package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Edits: a caller hands a room an edit value (ydoc.Edit) with the version it read; the room runs
// it on its goroutine once the replica holds the server's state, checks the version there (the
// room's history is where versions live), and the caller — or anyone holding the Pending — learns
// the outcome once the server holds the edit. Outcomes are values: an edit run again after a
// reset reports a fresh one, and nothing the room does writes into a caller's memory.

// Proposal is an edit for a room.
type Proposal struct {
	Edit ydoc.Edit
	// Since refuses the edit, changing nothing, when the cells (or the text) it touches changed
	// after this version (one a read returned). "": no version guard.
	Since Version
	// Replay: the edit may already be in the document — the same request made again after the
	// room that ran it first stopped before confirming it. It runs by its replay rules (what is
	// already there counts as done), from Prev, the outcome of that run, when known.
	Replay bool
	Prev   *ydoc.Outcome
	// Applied, if not nil, is called on the room goroutine (it must not block) as soon as the
	// edit is in the replica and on its way to the server, ahead of every later edit (the room
	// sends in order): before the server confirmed it. Only when that happens at once — the room
	// connected and synced, the edit without error; an edit that waits for a sync, or fails, is
	// known only from its outcome.
	Applied func()
}

// Edited is the outcome of an edit: what it did, what it changed and the version it produced.
type Edited struct {
	Outcome ydoc.Outcome
	Change  ydoc.Change
	// Version is the replica's version right after the edit was applied (for an edit that was
	// refused or changed nothing, the version when it ran).
	Version Version
}

// VersionError refuses an edit whose expected version the room cannot judge (a version from
// another room or an earlier run of the sidecar, or older than the room's change history).
type VersionError struct {
	Version Version
	Err     error // ErrUnknownVersion or ErrVersionTooOld
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("cannot tell what changed since version %q: %v", e.Version, e.Err)
}
func (e *VersionError) Unwrap() error { return e.Err }

// Pending is an edit handed to a room, until its outcome is known: confirmed (the server holds
// it), refused or failed, withdrawn (never applied), or unconfirmed for good (the room stopped
// with the edit in its replica). Any number of goroutines may wait for it; a caller that stops
// waiting (Wait's context) leaves it running unless it could still be withdrawn.
type Pending struct {
	r    *Room
	id   uint64
	done chan struct{}
	res  Edited
	err  error
}

// Done is closed once the outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Result is the outcome, once Done is closed.
func (p *Pending) Result() (Edited, error) {
	<-p.done
	return p.res, p.err
}

// finish records the outcome (the room goroutine, once).
func (p *Pending) finish(res Edited, err error) {
	p.res, p.err = res, err
	close(p.done)
}

// Wait returns the outcome once the server holds the edit (or it failed). If ctx ends first the
// edit is withdrawn when it was not applied yet (*WithdrawnError: nothing changed, for good);
// otherwise it is on its way (*UnconfirmedError) and the Pending keeps running: wait again, or
// let it be.
func (p *Pending) Wait(ctx context.Context) (Edited, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-p.r.done:
		select {
		case <-p.done:
			return p.res, p.err
		default:
			return Edited{}, p.r.stoppedErr()
		}
	case <-ctx.Done():
	}
	// The caller gave up: withdraw the edit if it has not been applied yet. The loop never blocks
	// on the network, so this answers promptly; the bound is a safety net.
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = call(wctx, p.r, func(l *roomLoop) (bool, error) {
		if !l.withdraw(p.id) {
			return false, nil
		}
		l.finishEdit(ydoc.EditResult{ID: p.id, Err: &WithdrawnError{Err: ctx.Err()}})
		l.publishPending()
		return true, nil
	})
	select {
	case <-p.done: // withdrawn, or finished meanwhile
		return p.res, p.err
	default:
	}
	return Edited{}, &UnconfirmedError{Err: ctx.Err()}
}

// Propose hands an edit to the room and returns at once (it runs when the replica holds the
// server's state). The error is the room's end or ctx's before the room took the edit
// (*WithdrawnError: nothing changed).
func (r *Room) Propose(ctx context.Context, p Proposal) (*Pending, error) {
	if p.Edit == nil {
		return nil, fmt.Errorf("bridge: no edit proposed")
	}
	r.touch()
	pend := &Pending{r: r, id: r.editSeq.Add(1), done: make(chan struct{})}
	err := r.do(ctx, func(l *roomLoop) {
		l.waiters[pend.id] = pend
		l.propose(&proposal{id: pend.id, p: p})
		l.publishPending()
	})
	if err != nil {
		if ctx.Err() != nil { // the loop never took the edit: nothing happened
			return nil, &WithdrawnError{Err: ctx.Err()}
		}
		return nil, err
	}
	return pend, nil
}

// Apply runs an edit as one transaction and returns once the server holds it: Propose, then
// Wait. If ctx ends first, the error says whether the edit was withdrawn (*WithdrawnError,
// nothing changed) or is on its way (*UnconfirmedError).
//
// An edit written as a function (ydoc.EditFunc: the escape hatch for writes that are not edit
// values — execution's outputs and run markers, tests) runs on the room goroutine with the y-crdt
// lock held for every room: it must be short, must not call a Room or Manager method, and —
// since it may run again after a reset, after Apply returned — must not write memory its caller
// reads. A caller that wants to know when the edit is on its way to the server, before the
// confirmation, proposes it with Proposal.Applied and waits on the Pending.
func (r *Room) Apply(ctx context.Context, e ydoc.Edit) (Edited, error) {
	p, err := r.Propose(ctx, Proposal{Edit: e})
	if err != nil {
		return Edited{}, err
	}
	return p.Wait(ctx)
}

// proposal is an edit the room took, waiting to run.
type proposal struct {
	id uint64
	p  Proposal
}

// propose runs an edit now if the replica holds the server's state, or after the next sync:
// its version guard must see every change the sync brings, which the history records only once
// the sync's output is handled.
func (l *roomLoop) propose(pr *proposal) {
	if !l.ready || !l.replica.Synced() {
		l.proposals = append(l.proposals, pr)
		return
	}
	var since *ydoc.Since
	if pr.p.Since != "" {
		s, err := l.since(pr.p.Since)
		if err != nil {
			l.finishEdit(ydoc.EditResult{ID: pr.id, Err: err})
			return
		}
		since = s
	}
	pace, inflight := l.pacing(), l.replica.InFlight()
	out := l.replica.Propose(pr.id, ydoc.Proposal{Edit: pr.p.Edit, Since: since, Replay: pr.p.Replay, Prev: pr.p.Prev})
	onItsWay := pr.p.Applied != nil && l.link != nil && appliedNow(out, pr.id)
	if pace && len(out.Frames) > 0 {
		l.holdFrames(out.Frames, max(0, l.replica.InFlight()-inflight), l.r.opts.Now())
		l.handleHeld(out)
	} else {
		if len(out.Frames) > 0 {
			l.sentEdit(l.r.opts.Now())
		}
		l.handle(out)
	}
	if onItsWay {
		pr.p.Applied()
	}
}

// appliedNow reports whether a session output shows the edit applied without error: it is
// confirmed already, or its change is there.
func appliedNow(out ydoc.Output, id uint64) bool {
	for _, d := range out.Done {
		if d.ID == id {
			return d.Err == nil
		}
	}
	for _, c := range out.Changes {
		if c.Local && c.EditID == id {
			return true
		}
	}
	return false
}

// runProposals runs the edits that waited for a sync, in the order they came.
func (l *roomLoop) runProposals() {
	waiting := l.proposals
	l.proposals = nil
	for _, pr := range waiting {
		l.propose(pr)
	}
}

// withdraw takes back an edit that has not run yet.
func (l *roomLoop) withdraw(id uint64) bool {
	for i, pr := range l.proposals {
		if pr.id == id {
			l.proposals = append(l.proposals[:i], l.proposals[i+1:]...)
			return true
		}
	}
	return l.replica.Withdraw(id)
}

// since is what changed after version v, for the version guard of an edit about to run.
func (l *roomLoop) since(v Version) (*ydoc.Since, error) {
	entries, err := l.hist.entriesSince(v)
	if err != nil {
		return nil, &VersionError{Version: v, Err: err}
	}
	s := &ydoc.Since{Version: string(v)}
	for _, e := range entries {
		for _, c := range e.Change.Cells {
			for _, f := range c.Fields {
				s.Note(c.ID, f, e.Authors)
			}
		}
		for _, id := range e.Change.Deleted {
			s.Note(id, "deleted", e.Authors)
		}
		for _, id := range e.Change.Inserted {
			s.Note(id, "inserted", e.Authors)
		}
		s.Structure = s.Structure || len(e.Change.Inserted)+len(e.Change.Deleted) > 0 || e.Change.Moved
		s.Text = s.Text || e.Change.Text
	}
	return s, nil
}
