package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Requests to a room: every public method that reads or changes what the room goroutine owns
// hands it a function and waits — for the answer (call), for the replica to be ready
// (whenReady), for the server to confirm an edit (apply) or a save (Save) — or for the room's end
// or the caller's context. The room goroutine never waits for a caller.

// do hands fn to the room goroutine. When do returns nil, fn is running or has run.
func (r *Room) do(ctx context.Context, fn func(*roomLoop)) error {
	select {
	case r.reqs <- fn:
		return nil
	case <-r.done:
		return r.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is a request with an answer: it hands fn to the room goroutine and waits for what fn
// returns, the room's end, or ctx's. fn runs on the room goroutine: it must be short and must
// not call Room or Manager methods.
func call[T any](ctx context.Context, r *Room, fn func(*roomLoop) (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	res := make(chan answer, 1)
	var zero T
	if err := r.do(ctx, func(l *roomLoop) { v, err := fn(l); res <- answer{v, err} }); err != nil {
		return zero, err
	}
	select {
	case a := <-res:
		return a.v, a.err
	case <-r.done:
		select {
		case a := <-res:
			return a.v, a.err
		default:
			return zero, r.stoppedErr()
		}
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// whenReady is call for requests that need the replica to hold the server's state: fn runs
// after the first sync (and again after a reset). The caller may give up until fn starts —
// then fn never runs, so it may write the caller's variables — and waits for it once it has.
func (r *Room) whenReady(ctx context.Context, fn func(*roomLoop) error) error {
	rc := &readCall{fn: fn, errc: make(chan error, 1)}
	if err := r.do(ctx, func(l *roomLoop) { l.whenReady(rc) }); err != nil {
		return err
	}
	select {
	case err := <-rc.errc:
		return err
	case <-r.done:
		select {
		case err := <-rc.errc:
			return err
		default:
			return r.stoppedErr()
		}
	case <-ctx.Done():
		if rc.state.CompareAndSwap(readPending, readCancelled) {
			return ctx.Err() // it will not run: nothing touches the caller's variables later
		}
		return <-rc.errc // already running on the room goroutine: wait for it (callbacks are short)
	}
}

// View runs fn on the replica in the room goroutine, once the replica holds the server's state
// (after the first sync, and again after a reset). fn must not keep the doc.
func (r *Room) View(ctx context.Context, fn func(*ydoc.Doc) error) error {
	return r.Read(ctx, func(d *ydoc.Doc, _ History) error { return fn(d) })
}

// Read is View with the room's change history (the replica's version, what changed since an
// earlier one). fn must not keep either.
//
// fn (like every callback handed to a room: View, Apply, OnEvent) runs on the room goroutine,
// Apply's with the CRDT engine locked for all rooms: it must be short and must not call any
// Room or Manager method, or it deadlocks. A panic in fn is returned as an error.
//
// A read shows the document as it is meant to be: it waits while the server is still loading a
// notebook progressively, and shows the outputs an outputs service's placeholders stand for
// (outputs.go).
func (r *Room) Read(ctx context.Context, fn func(*ydoc.Doc, History) error) error {
	r.touch()
	if err := r.prepareRead(ctx); err != nil {
		return err
	}
	return r.readRaw(ctx, true, fn)
}

// readRaw runs a read on the room goroutine once the replica is ready; resolve shows the
// outputs placeholders stand for.
func (r *Room) readRaw(ctx context.Context, resolve bool, fn func(*ydoc.Doc, History) error) error {
	return r.whenReady(ctx, func(l *roomLoop) error {
		d := l.sess.Doc()
		if f := l.r.prep.filter(); resolve && f != nil {
			d.SetOutputFilter(f)
			defer d.SetOutputFilter(nil)
		}
		return fn(d, History{l.hist})
	})
}

// readCall is a request waiting on the room goroutine for the replica to be ready (whenReady);
// the caller may cancel it until it starts.
type readCall struct {
	fn    func(*roomLoop) error
	state atomic.Int32
	errc  chan error
}

const (
	readPending int32 = iota
	readRunning
	readCancelled
)

// run executes the read (or reports why it cannot), unless the caller gave up.
func (rc *readCall) run(l *roomLoop, cause error) {
	if !rc.state.CompareAndSwap(readPending, readRunning) {
		return
	}
	err := cause
	if err == nil {
		err = func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("bridge: read callback panicked: %v", p)
				}
			}()
			return rc.fn(l)
		}()
	}
	rc.errc <- err
}

// Edited is the outcome of a confirmed edit.
type Edited struct {
	Change  ydoc.Change
	Version Version // the replica's version right after this edit was applied
}

type editOutcome struct {
	res     ydoc.EditResult
	version Version
}

// Edit applies fn as one transaction and returns once the server holds the result. fn must
// validate before it mutates (see ydoc.Txn). If ctx ends first, the error says whether the edit
// was withdrawn (*WithdrawnError, nothing changed) or is on its way (*UnconfirmedError).
func (r *Room) Edit(ctx context.Context, fn ydoc.EditFunc) (ydoc.Change, error) {
	out, err := r.Apply(ctx, func(tx *ydoc.Txn, _ History, replaying bool) error { return fn(tx, replaying) })
	return out.Change, err
}

// Apply is Edit with the room's history available to fn (to refuse an edit when the cells it
// touches changed since a version the caller read), and the version the edit produced.
func (r *Room) Apply(ctx context.Context, fn func(tx *ydoc.Txn, h History, replaying bool) error) (Edited, error) {
	return r.apply(ctx, fn, false, nil)
}

// ApplyNotify is Apply that also calls applied as soon as the edit is in the replica and on its
// way to the server, ahead of every later edit (the room sends in order): before the server
// confirmed it. It is called on the room goroutine (it must not block), and only when that
// happens at once — the room connected and synced, the edit without error; an edit that waits
// for a sync, or fails, is known only from Apply's result.
func (r *Room) ApplyNotify(ctx context.Context, fn func(tx *ydoc.Txn, h History, replaying bool) error, applied func()) (Edited, error) {
	return r.apply(ctx, fn, false, applied)
}

// ApplyDurable is Apply for edits that are safe to run twice (the second run over a document
// that already holds the first changes nothing: cells inserted by id, content set). Such an edit
// is re-run if the server dies after confirming it but before saving it (ydoc.Session.unsaved).
func (r *Room) ApplyDurable(ctx context.Context, fn func(tx *ydoc.Txn, h History, replaying bool) error) (Edited, error) {
	return r.apply(ctx, fn, true, nil)
}

func (r *Room) apply(ctx context.Context, fn func(tx *ydoc.Txn, h History, replaying bool) error, durable bool, applied func()) (Edited, error) {
	r.touch()
	id := r.editSeq.Add(1)
	res := make(chan editOutcome, 1)
	err := r.do(ctx, func(l *roomLoop) {
		l.waiters[id] = res
		propose := l.sess.Propose
		if durable {
			propose = l.sess.ProposeDurable
		}
		out := propose(id, func(tx *ydoc.Txn, replaying bool) (err error) {
			// A panic in the caller's function is its bug, not the engine's: report it instead
			// of marking the replica broken.
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("bridge: edit function panicked: %v", p)
				}
			}()
			return fn(tx, History{l.hist}, replaying) // runs in the room goroutine
		})
		onItsWay := applied != nil && l.link != nil && appliedNow(out, id)
		l.handle(out)
		l.publishPending()
		if onItsWay {
			applied()
		}
	})
	if err != nil {
		if ctx.Err() != nil { // the loop never took the edit: nothing happened
			return Edited{}, &WithdrawnError{Err: ctx.Err()}
		}
		return Edited{}, err
	}
	result := func(o editOutcome) (Edited, error) {
		return Edited{Change: o.res.Change, Version: o.version}, o.res.Err
	}
	select {
	case out := <-res:
		return result(out)
	case <-r.done:
		select {
		case out := <-res:
			return result(out)
		default:
			return Edited{}, r.stoppedErr()
		}
	case <-ctx.Done():
	}
	// The caller gave up: withdraw the edit if it has not been applied yet. The loop never blocks
	// on the network, so this answers promptly; the bound is a safety net.
	withdrawn := make(chan bool, 1)
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	werr := r.do(wctx, func(l *roomLoop) {
		ok := l.sess.Withdraw(id)
		if ok {
			delete(l.waiters, id)
			l.publishPending()
		}
		withdrawn <- ok
	})
	select {
	case out := <-res: // finished meanwhile
		return result(out)
	default:
	}
	if werr == nil && <-withdrawn {
		return Edited{}, &WithdrawnError{Err: ctx.Err()}
	}
	return Edited{}, &UnconfirmedError{Err: ctx.Err()}
}

// appliedNow reports whether a session output shows the edit applied without error: its change
// is there and it did not fail (or it changed nothing at all).
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

// Save asks the server to write the document to disk now (Jupyter's RAW save message) and
// returns its status: success, skipped (a save or reload was in progress) or failed.
func (r *Room) Save(ctx context.Context) (string, error) {
	r.touch()
	res := make(chan saveResult, 1)
	err := r.do(ctx, func(l *roomLoop) {
		if l.ds.Engine.SavesItself {
			res <- saveResult{err: ErrSavesItself}
			return
		}
		if l.link == nil || !l.sess.Synced() {
			res <- saveResult{err: ErrNotSynced}
			return
		}
		l.saveSeq++
		l.saves[l.saveSeq] = res
		l.send(ydoc.EncodeSaveRequest(l.saveSeq))
	})
	if err != nil {
		return "", err
	}
	select {
	case out := <-res:
		return out.status, out.err
	case <-r.done:
		return "", r.stoppedErr()
	case <-ctx.Done():
		forget, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.do(forget, func(l *roomLoop) {
			for id, c := range l.saves {
				if c == res {
					delete(l.saves, id)
				}
			}
		})
		return "", ctx.Err()
	}
}

type saveResult struct {
	status string
	err    error
}
