package bridge

import (
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// EventKind says what happened in a room.
type EventKind int

const (
	EventChanged      EventKind = iota + 1 // the document changed (Change set)
	EventSynced                            // the replica caught up with the server (after join or reconnect)
	EventDisconnected                      // the connection dropped; reconnecting
	EventReset                             // the replica was rebuilt from scratch (new server session, conflict)
	EventFailed                            // the room failed for good (Err set)
	EventClosed                            // the room was closed
	EventAwareness                         // collaborators joined, left or moved
	EventNotice                            // something agents must be told (Notice set): work lost in a server crash, an edit that could not be re-applied
)

func (k EventKind) String() string {
	switch k {
	case EventChanged:
		return "changed"
	case EventSynced:
		return "synced"
	case EventDisconnected:
		return "disconnected"
	case EventReset:
		return "reset"
	case EventFailed:
		return "failed"
	case EventClosed:
		return "closed"
	case EventAwareness:
		return "awareness"
	case EventNotice:
		return "notice"
	}
	return "unknown"
}

// Event is published to subscribers for every room change and state transition.
type Event struct {
	Path string
	// DocKind, Fork and Transient say which room: a document, a fork of it, or an
	// awareness-only room.
	DocKind   ydoc.Kind
	Fork      string
	Transient bool
	Kind      EventKind
	Time      time.Time
	Change    ydoc.Change // EventChanged
	// Authors names the collaborators whose client ids contributed to the change, when their
	// awareness says who they are; Local is true for the sidecar's own edits.
	Authors []string
	Version Version // EventChanged: the room's version after the change
	Err     error   // EventFailed, EventDisconnected
	Notice  *Notice // EventNotice
}

// Subscription receives events on C until Close. A subscriber that falls behind by more than
// its buffer loses events rather than stalling rooms; Dropped counts them.
type Subscription struct {
	C       <-chan Event
	c       chan Event
	hub     *hub
	mu      sync.Mutex
	dropped int
	closed  bool
}

// Dropped returns how many events were lost because the buffer was full.
func (s *Subscription) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Close unsubscribes and closes C.
func (s *Subscription) Close() { s.hub.remove(s) }

// hub fans events out to subscribers without ever blocking the publisher.
type hub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

func newHub() *hub { return &hub{subs: map[*Subscription]struct{}{}} }

func (h *hub) subscribe(buffer int) *Subscription {
	if buffer <= 0 {
		buffer = 64
	}
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	s.mu.Lock()
	s.closed = true
	close(s.c)
	s.mu.Unlock()
}

func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.c <- e:
		default:
			s.mu.Lock()
			s.dropped++
			s.mu.Unlock()
		}
	}
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *hub) closeAll() {
	h.mu.Lock()
	subs := make([]*Subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		h.remove(s)
	}
}
