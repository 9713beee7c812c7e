package bridgetest

import (
	"context"
	"fmt"
	"slices"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// What tests do to and read from the fake besides its controls: change a document as a peer
// would, read the server's copy, count calls and connections, see the awareness clients sent,
// and wait for the fake's next change.

// EditDoc changes the server document of the room for path as a peer would, and broadcasts the
// update to every client (subject to HoldEchoes). The room must exist (a client joined it).
func (s *Server) EditDoc(p string, fn func(*ydoc.Txn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.roomByPathLocked(p)
	if r == nil {
		return fmt.Errorf("fake jupyter: no room for %s", p)
	}
	update, _, err := r.doc.Transact(fn)
	if update != nil {
		s.broadcastUpdateLocked(r, update)
	}
	s.bumpLocked()
	return err
}

// DocClientID returns the Yjs client id of the server document for path (0 without a room).
func (s *Server) DocClientID(p string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.roomByPathLocked(p); r != nil {
		return r.doc.ClientID()
	}
	return 0
}

// Notebook returns a copy of the server document for path.
func (s *Server) Notebook(p string) (ydoc.Notebook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.roomByPathLocked(p)
	if r == nil {
		return ydoc.Notebook{}, fmt.Errorf("fake jupyter: no room for %s", p)
	}
	return r.doc.Notebook()
}

// Text returns the text of the server document for path.
func (s *Server) Text(p string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.roomByPathLocked(p)
	if r == nil {
		return "", fmt.Errorf("fake jupyter: no room for %s", p)
	}
	return r.doc.Text()
}

// CellIDs returns the cell ids of the server document for path, nil without a room.
func (s *Server) CellIDs(p string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.roomByPathLocked(p); r != nil {
		return r.doc.CellIDs()
	}
	return nil
}

// CountCell returns how many cells of the server document for path have the id.
func (s *Server) CountCell(p, id string) int {
	n := 0
	for _, c := range s.CellIDs(p) {
		if c == id {
			n++
		}
	}
	return n
}

// SessionID returns the current session id.
func (s *Server) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

// OpenCalls returns how many times OpenDocSession was called.
func (s *Server) OpenCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openCalls
}

// DialCalls returns how many times DialRoom was called.
func (s *Server) DialCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dialCalls
}

// Conns returns every connection ever dialled, oldest first.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.conns)
}

// LiveConns returns the connections currently joined to a room.
func (s *Server) LiveConns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Conn
	for _, c := range s.conns {
		if c.room != nil && !c.isClosed() {
			out = append(out, c)
		}
	}
	return out
}

// Awareness returns every awareness record clients sent, in order.
func (s *Server) Awareness() []AwarenessRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.awareness)
}

// AwarenessOf returns the awareness records one client id sent, in order.
func (s *Server) AwarenessOf(clientID uint64) []AwarenessRecord {
	var out []AwarenessRecord
	for _, r := range s.Awareness() {
		if r.ClientID == clientID {
			out = append(out, r)
		}
	}
	return out
}

// Changed returns a channel closed at the next state change of the fake (a frame received, a
// call, a connection opened or closed, a control used).
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Await waits until cond holds, re-evaluating it after every state change, or ctx ends.
// cond must not be called with the fake's lock held, so it may use the accessors.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	return await(ctx, s.Changed, cond)
}

// await waits until cond holds, re-evaluating it whenever changed's channel closes, or ctx ends.
func await(ctx context.Context, changed func() <-chan struct{}, cond func() bool) error {
	for {
		ch := changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) set(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
	s.bumpLocked()
}
