package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Versions and undo: what a room can give back.

// ErrNoHistory is returned by history calls on rooms that keep none (awareness-only rooms).
var ErrNoHistory = errors.New("bridge: this room keeps no history")

// withSnapshots asks fn a question about the room's version store, on the room goroutine.
func withSnapshots[T any](ctx context.Context, r *Room, fn func(*snapshotStore) (T, error)) (T, error) {
	r.touch()
	return call(ctx, r, func(l *roomLoop) (T, error) {
		if l.snaps == nil {
			var zero T
			return zero, ErrNoHistory
		}
		return fn(l.snaps)
	})
}

// Versions lists the restorable versions of the document, newest first.
func (r *Room) Versions(ctx context.Context) ([]VersionInfo, error) {
	return withSnapshots(ctx, r, func(s *snapshotStore) ([]VersionInfo, error) { return s.list(), nil })
}

// VersionContent returns a version of a notebook (nb) or of a text file (text).
func (r *Room) VersionContent(ctx context.Context, v Version) (nb ydoc.Notebook, text string, err error) {
	type content struct {
		nb   ydoc.Notebook
		text string
	}
	c, err := withSnapshots(ctx, r, func(s *snapshotStore) (content, error) {
		sn, err := s.find(v)
		if err != nil {
			return content{}, err
		}
		if s.kind == ydoc.KindText {
			return content{text: s.text(sn)}, nil
		}
		nb, err := s.notebook(sn)
		return content{nb: nb}, err
	})
	return c.nb, c.text, err
}

// UndoDepth returns how many undo and redo steps the room holds.
func (r *Room) UndoDepth(ctx context.Context) (undo, redo int, err error) {
	err = r.View(ctx, func(d *ydoc.Doc) error {
		undo, redo = d.UndoDepth()
		return nil
	})
	return undo, redo, err
}

// RoomSizes is what a room holds in memory.
type RoomSizes struct {
	ReplicaBytes int // the replica's state as one update, as last measured (sizeEvery)
	HistoryBytes int // distinct content kept for restorable versions
	Versions     int
}

// sizeEvery is how often a changing room re-measures its replica. Measuring encodes the whole
// state under the y-crdt lock that every room shares (a 3,000-cell notebook: 35-75 ms on the
// 2-core machine, during which no room can apply an edit), so it is done by the room's own loop,
// at most this often, only after a change and never on behalf of a reader; a large document is
// measured less often still: after an encode that took d, the next waits sizeCostFactor × d, so
// measuring takes at most 0.5% of y-crdt's time. Right after the first sync the size is the
// one of the server's step 2, which is the whole document: joining encodes nothing.
const (
	sizeEvery      = 5 * time.Second
	sizeCostFactor = 200
)

// Sizes returns the room's memory figures as its loop last recorded them. It takes no y-crdt
// lock and does not wait for the room: scraping metrics costs nothing per room.
func (r *Room) Sizes() RoomSizes {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sizes
}

// sizedBySync takes the replica's size from the server's first step 2 (the whole document, as
// the server encodes it) instead of encoding it again.
func (l *roomLoop) sizedBySync(n int) {
	if !l.sizedAt.IsZero() {
		return // a later sync's step 2 holds only what the replica lacked
	}
	l.sizedAt = l.r.opts.Now()
	l.r.mu.Lock()
	l.r.sizes.ReplicaBytes = n
	l.r.mu.Unlock()
}

// measure records the figures Sizes returns: the history's always (counters), the replica's
// when it changed and sizeEvery has passed since it was last encoded.
func (l *roomLoop) measure(now time.Time) {
	sz := l.r.Sizes()
	if l.snaps != nil {
		sz.HistoryBytes, sz.Versions = l.snaps.used, len(l.snaps.snaps)
	}
	if l.ready && l.sizeDirty && (l.sizedAt.IsZero() || now.Sub(l.sizedAt) >= max(sizeEvery, sizeCostFactor*l.sizeCost)) {
		start := l.r.opts.Now()
		if u, err := l.replica.Doc().EncodeStateAsUpdate(nil); err == nil {
			sz.ReplicaBytes = len(u)
		}
		l.sizeCost = l.r.opts.Now().Sub(start)
		l.sizeDirty, l.sizedAt = false, now
	}
	l.r.mu.Lock()
	l.r.sizes = sz
	l.r.mu.Unlock()
}
