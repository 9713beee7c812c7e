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
// (whenReady), for the server to confirm an edit (Propose and Pending, edits.go) or a save
// (Save) — or for the room's end or the caller's context. The room goroutine never waits for a
// caller.

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
//
// A fresh request first asks the server for what the replica lacks and runs once the answer is in
// (fresh.go).
func (r *Room) whenReady(ctx context.Context, fresh bool, fn func(*roomLoop) error) error {
	rc := &readCall{fn: fn, fresh: fresh, errc: make(chan error, 1)}
	if err := r.do(ctx, func(l *roomLoop) { l.whenReady(rc) }); err != nil {
		return err
	}
	bound := time.NewTimer(r.opts.ReadyWait)
	defer bound.Stop()
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
	case <-bound.C:
		if rc.state.CompareAndSwap(readPending, readCancelled) {
			return r.notReadyErr()
		}
		return <-rc.errc
	}
}

// notReadyErr says why a request gave up waiting for the replica to be in sync.
func (r *Room) notReadyErr() error {
	info := r.Info()
	why := string(info.Status)
	if info.Err != "" {
		why += ": " + info.Err
	}
	return fmt.Errorf("room %s is not in sync with the server (%s): waited %s for it to sync; try again in a moment",
		r.opts.Path, why, r.opts.ReadyWait)
}

// View runs fn on the replica in the room goroutine, once the replica holds the server's state
// (after the first sync, and again after a reset). fn must not keep the doc.
func (r *Room) View(ctx context.Context, fn func(*ydoc.Doc) error) error {
	return r.Read(ctx, func(d *ydoc.Doc, _ History) error { return fn(d) })
}

// Read is View with the room's change history (the replica's version, what changed since an
// earlier one). fn must not keep either.
//
// fn (like every callback handed to a room: View, Edit, OnEvent) runs on the room goroutine,
// Edit's with the CRDT engine locked for all rooms: it must be short and must not call any
// Room or Manager method, or it deadlocks. A panic in fn is returned as an error.
//
// A read shows the document as it is meant to be: what the server held when the read began
// (fresh.go, unless NoFreshReads); it waits while the server is still loading a
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
	return r.whenReady(ctx, resolve && !r.opts.NoFreshReads, func(l *roomLoop) error {
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
	fresh bool // wait for the server's answer to a sync step 1 first (fresh.go)
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
