package bridge

import (
	"context"
	"errors"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Versions and undo: what a room can give back.

// ErrNoHistory is returned by history calls on rooms that keep none (awareness-only rooms).
var ErrNoHistory = errors.New("bridge: this room keeps no history")

// withSnapshots runs fn on the room goroutine with the room's version store.
func (r *Room) withSnapshots(ctx context.Context, fn func(*snapshotStore) error) error {
	r.touch()
	errc := make(chan error, 1)
	if err := r.do(ctx, func(l *roomLoop) {
		if l.snaps == nil {
			errc <- ErrNoHistory
			return
		}
		errc <- fn(l.snaps)
	}); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-r.done:
		return r.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Versions lists the restorable versions of the document, newest first.
func (r *Room) Versions(ctx context.Context) ([]VersionInfo, error) {
	res := make(chan []VersionInfo, 1)
	if err := r.withSnapshots(ctx, func(s *snapshotStore) error {
		res <- s.list()
		return nil
	}); err != nil {
		return nil, err
	}
	return <-res, nil
}

// VersionContent returns a version of a notebook (nb) or of a text file (text).
func (r *Room) VersionContent(ctx context.Context, v Version) (nb ydoc.Notebook, text string, err error) {
	type out struct {
		nb   ydoc.Notebook
		text string
	}
	res := make(chan out, 1)
	err = r.withSnapshots(ctx, func(s *snapshotStore) error {
		sn, err := s.find(v)
		if err != nil {
			return err
		}
		if s.kind == ydoc.KindText {
			res <- out{text: s.text(sn)}
			return nil
		}
		nb, err := s.notebook(sn)
		res <- out{nb: nb}
		return err
	})
	if err != nil {
		return ydoc.Notebook{}, "", err
	}
	o := <-res
	return o.nb, o.text, nil
}

// Undo reverts the agent's last steps undoable edits (tools mark theirs; execution output is
// never undone), leaving everyone else's edits alone. The undo is itself a forward edit, so
// collaborators see it as one. After the replica was rebuilt (a reconnect that needed a fresh
// client id) earlier edits can no longer be undone: restore a version instead.
func (r *Room) Undo(ctx context.Context, steps int) (Edited, error) {
	return r.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		for i := 0; i < max(steps, 1); i++ {
			if err := tx.Undo(); err != nil {
				if i > 0 && errors.Is(err, ydoc.ErrNothingToUndo) {
					return nil // undid what there was
				}
				return err
			}
		}
		return nil
	})
}

// Redo re-applies what the last Undo reverted.
func (r *Room) Redo(ctx context.Context) (Edited, error) {
	return r.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error { return tx.Redo() })
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
	ReplicaBytes int `json:"replica_bytes"` // the replica's state as one update
	HistoryBytes int `json:"history_bytes"` // distinct content kept for restorable versions
	Versions     int `json:"versions"`
}

// Sizes measures the room's memory (the replica is encoded: call it rarely).
func (r *Room) Sizes(ctx context.Context) (RoomSizes, error) {
	res := make(chan RoomSizes, 1)
	errc := make(chan error, 1)
	if err := r.do(ctx, func(l *roomLoop) {
		var sz RoomSizes
		if u, err := l.sess.Doc().EncodeStateAsUpdate(nil); err == nil {
			sz.ReplicaBytes = len(u)
		}
		if l.snaps != nil {
			sz.HistoryBytes, sz.Versions = l.snaps.used, len(l.snaps.snaps)
		}
		res <- sz
		errc <- nil
	}); err != nil {
		return RoomSizes{}, err
	}
	select {
	case <-errc:
		return <-res, nil
	case <-r.done:
		return RoomSizes{}, r.stoppedErr()
	case <-ctx.Done():
		return RoomSizes{}, ctx.Err()
	}
}
