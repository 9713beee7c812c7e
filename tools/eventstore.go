package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// eventStore keeps the recent SSE events of each HTTP session so a client whose stream broke
// can resume (Last-Event-ID) without losing notifications. mcp-go's in-memory store keeps every
// event until the session ends, which for a long-lived agent session is every result it was
// ever sent; this one keeps a byte budget per session and forgets the oldest events first. A
// client resuming from a forgotten event gets ErrUnknownEventID, as the spec allows.
type eventStore struct {
	maxBytes  int // per session
	maxEvents int // per session

	mu       sync.Mutex
	seq      int64
	sessions map[string]*eventLog
	bytes    int // across sessions, for metrics
}

type eventLog struct {
	events []storedEvent // in id order, all streams
	bytes  int
}

type storedEvent struct {
	id      int64
	stream  string
	message json.RawMessage
}

var _ server.EventStore = (*eventStore)(nil)

func newEventStore(maxBytes, maxEvents int) *eventStore {
	return &eventStore{maxBytes: maxBytes, maxEvents: maxEvents, sessions: map[string]*eventLog{}}
}

func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.sessions[sessionID]
	if log == nil {
		log = &eventLog{}
		s.sessions[sessionID] = log
	}
	s.seq++
	msg := append(json.RawMessage(nil), message...) // the caller may reuse its buffer
	log.events = append(log.events, storedEvent{id: s.seq, stream: streamID, message: msg})
	log.bytes += len(msg)
	s.bytes += len(msg)
	drop := 0
	for len(log.events)-drop > 1 && (log.bytes > s.maxBytes || len(log.events)-drop > s.maxEvents) {
		log.bytes -= len(log.events[drop].message)
		s.bytes -= len(log.events[drop].message)
		drop++
	}
	if drop > 0 {
		log.events = append(log.events[:0:0], log.events[drop:]...) // release the dropped messages
	}
	return strconv.FormatInt(s.seq, 10), nil
}

func (s *eventStore) ReplayEventsAfter(ctx context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	id, err := strconv.ParseInt(lastEventID, 10, 64)
	if err != nil {
		return "", fmt.Errorf("event %q: %w", lastEventID, server.ErrUnknownEventID)
	}
	s.mu.Lock()
	var after []storedEvent
	stream := ""
	if log := s.sessions[sessionID]; log != nil {
		i := sort.Search(len(log.events), func(i int) bool { return log.events[i].id >= id })
		if i < len(log.events) && log.events[i].id == id {
			stream = log.events[i].stream
			for _, e := range log.events[i+1:] {
				if e.stream == stream {
					after = append(after, e)
				}
			}
		}
	}
	s.mu.Unlock()
	if stream == "" {
		return "", fmt.Errorf("event %q (forgotten or never sent): %w", lastEventID, server.ErrUnknownEventID)
	}
	for _, e := range after { // sent outside the lock: send writes to the network
		if err := ctx.Err(); err != nil {
			return stream, err
		}
		if err := send(strconv.FormatInt(e.id, 10), e.message); err != nil {
			return stream, err
		}
	}
	return stream, nil
}

func (s *eventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if log := s.sessions[sessionID]; log != nil {
		s.bytes -= log.bytes
	}
	delete(s.sessions, sessionID)
	return nil
}

// size returns the bytes held across sessions.
func (s *eventStore) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}
