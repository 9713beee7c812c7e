package bridge

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Forks: server-side copies of a live document (jupyter-collaboration's fork API) that the agent
// edits instead of the document, for a human to accept (merge) or reject (discard). The sidecar
// joins a fork like any room, with its own replica; the fork lives in the server's memory, so a
// server restart loses it.

// ErrNoForks is returned when the server does not offer the fork API.
var ErrNoForks = errors.New("bridge: the server does not offer forks")

// ForkGoneError says a fork no longer exists on the server.
type ForkGoneError struct{ Fork, Path string }

func (e *ForkGoneError) Error() string {
	return fmt.Sprintf("fork %s of %s no longer exists on the server (it was merged or discarded, or the server restarted: forks live in its memory)", e.Fork, e.Path)
}

// Permanent tells the room not to retry.
func (e *ForkGoneError) Permanent() bool { return true }

// ErrForkDiverged is returned by MergeFork when the document was rebuilt since the fork was made
// (its room closed, or the server restarted): the fork's content would be added again instead of
// merged.
var ErrForkDiverged = errors.New("bridge: the document was reloaded since the fork was made, so a merge would duplicate its content")

// Fork is a fork of a document.
type Fork struct {
	ID   string
	Info ForkInfo
	Ours bool // created by this sidecar
	Open bool // the sidecar has joined it
}

func (m *Manager) forks() (ForkServer, error) {
	fs, ok := m.opts.Jupyter.(ForkServer)
	if !ok {
		return nil, ErrNoForks
	}
	return fs, nil
}

// forkAlive is asked before a fork room (re)connects: joining a fork the server dropped would
// create an empty room, into which the replica would happily sync its content.
func (m *Manager) forkAlive(key roomKey) func(context.Context) error {
	return func(ctx context.Context) error {
		fs, err := m.forks()
		if err != nil {
			return err
		}
		root := m.Get(key.path, key.kind)
		if root == nil {
			return &ForkGoneError{Fork: key.fork, Path: key.path} // the sidecar left the document
		}
		list, err := fs.ListForks(ctx, root.Info().RoomID)
		if err != nil {
			return fmt.Errorf("check fork %s: %w", key.fork, err)
		}
		if _, ok := list[key.fork]; !ok {
			return &ForkGoneError{Fork: key.fork, Path: key.path}
		}
		return nil
	}
}

// forkRoot returns the fork API and the document's room (joined: forks are named by its room id).
func (m *Manager) forkRoot(ctx context.Context, path string, kind ydoc.Kind) (ForkServer, *Room, error) {
	fs, err := m.forks()
	if err != nil {
		return nil, nil, err
	}
	root, err := m.Open(ctx, path, kind)
	return fs, root, err
}

// stateVector reads a room's state vector.
func stateVector(ctx context.Context, r *Room) (ydoc.StateVector, error) {
	var sv ydoc.StateVector
	err := r.View(ctx, func(d *ydoc.Doc) error {
		sv = d.StateVector()
		return nil
	})
	return sv, err
}

// CreateFork forks a document's live room (joining the document first) and joins the fork.
func (m *Manager) CreateFork(ctx context.Context, path string, kind ydoc.Kind, info ForkInfo) (*Room, error) {
	fs, root, err := m.forkRoot(ctx, path, kind)
	if err != nil {
		return nil, err
	}
	// What the root holds now: at merge time the root must still contain it, or it was rebuilt.
	base, err := stateVector(ctx, root)
	if err != nil {
		return nil, err
	}
	info.RootRoomID = root.Info().RoomID
	id, err := fs.CreateFork(ctx, info.RootRoomID, info)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", root.Path(), err)
	}
	m.mu.Lock()
	if m.forkBases == nil {
		m.forkBases = map[string]ydoc.StateVector{}
	}
	m.forkBases[id] = base
	m.mu.Unlock()
	return m.OpenFork(ctx, root.Path(), kind, id)
}

// OpenFork joins a fork of a document (the document too: the fork is checked against it).
func (m *Manager) OpenFork(ctx context.Context, path string, kind ydoc.Kind, forkID string) (*Room, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	if forkID == "" {
		return nil, errors.New("open fork: no fork id")
	}
	if _, err := m.Open(ctx, path, kind); err != nil {
		return nil, err
	}
	key := roomKey{path: path, kind: kind, fork: forkID}
	m.mu.Lock()
	room := m.rooms[key]
	m.mu.Unlock()
	if room == nil || isStopped(room) {
		if room, err = m.start(key); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, m.opts.JoinTimeout)
	defer cancel()
	if err := room.WaitSynced(wctx); err != nil {
		var gone *ForkGoneError
		if errors.As(err, &gone) {
			return nil, gone
		}
		return nil, fmt.Errorf("join fork %s of %s: %w", forkID, path, err)
	}
	return room, nil
}

// Forks lists the forks of a document (joining it to learn its room id).
func (m *Manager) Forks(ctx context.Context, path string, kind ydoc.Kind) ([]Fork, error) {
	fs, root, err := m.forkRoot(ctx, path, kind)
	if err != nil {
		return nil, err
	}
	list, err := fs.ListForks(ctx, root.Info().RoomID)
	if err != nil {
		return nil, fmt.Errorf("list forks of %s: %w", root.Path(), err)
	}
	m.mu.Lock()
	out := make([]Fork, 0, len(list))
	for id, info := range list {
		r := m.rooms[roomKey{path: root.Path(), kind: kind, fork: id}]
		_, ours := m.forkBases[id]
		out = append(out, Fork{ID: id, Info: info, Ours: ours, Open: r != nil && !isStopped(r)})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// CloseFork deletes a fork on the server, merging it into the document first when merge is set,
// and leaves its room.
func (m *Manager) CloseFork(ctx context.Context, path string, kind ydoc.Kind, forkID string, merge bool) error {
	fs, root, err := m.forkRoot(ctx, path, kind)
	if err != nil {
		return err
	}
	list, err := fs.ListForks(ctx, root.Info().RoomID)
	if err != nil {
		return fmt.Errorf("list forks of %s: %w", root.Path(), err)
	}
	if _, ok := list[forkID]; !ok {
		return &ForkGoneError{Fork: forkID, Path: root.Path()}
	}
	if merge {
		m.mu.Lock()
		base, known := m.forkBases[forkID]
		m.mu.Unlock()
		if known {
			now, err := stateVector(ctx, root)
			if err != nil {
				return err
			}
			for client, clock := range base {
				if now[client] < clock {
					return ErrForkDiverged
				}
			}
		}
	}
	if err := fs.DeleteFork(ctx, forkID, merge); err != nil {
		return fmt.Errorf("delete fork %s: %w", forkID, err)
	}
	m.mu.Lock()
	delete(m.forkBases, forkID)
	r := m.rooms[roomKey{path: root.Path(), kind: kind, fork: forkID}]
	m.mu.Unlock()
	if r != nil {
		r.Close()
	}
	return nil
}

// GetFork returns the open room of a fork, or nil.
func (m *Manager) GetFork(path string, kind ydoc.Kind, forkID string) *Room {
	path, err := CleanPath(path)
	if err != nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rooms[roomKey{path: path, kind: kind, fork: forkID}]
}
