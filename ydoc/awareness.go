package ydoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Awareness implements the y-protocols awareness CRDT (presence, cursors) without y-crdt, whose
// helpers are unreliable. It is pure: time comes in as arguments, nothing runs in the background.
//
// Wire format: varUint(n), then n × (varUint(clientID), varUint(clock), varString(JSON | "null")).

// Awareness timing, as y-protocols and the Jupyter server use it.
const (
	AwarenessOutdated = 30 * time.Second // peers not renewed within this are dropped
	AwarenessRenew    = 15 * time.Second // the local state is re-sent this often
)

// maxAwarenessState caps one peer's state (JupyterLab's are a few hundred bytes) and
// maxAwarenessPeers the live peers of a room: awareness is anyone's to write.
const (
	maxAwarenessState = 64 << 10
	maxAwarenessPeers = 1000
)

// AwarenessUser is the "user" field JupyterLab puts in awareness states.
type AwarenessUser struct {
	Username    string `json:"username"`
	Name        string `json:"name,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
	Initials    string `json:"initials,omitempty"`
	Color       string `json:"color,omitempty"`
	AvatarURL   string `json:"avatar_url,omitempty"`
}

// Peer is one remote awareness entry.
type Peer struct {
	ClientID  uint64
	Clock     uint64
	State     json.RawMessage // the JSON state object
	User      *AwarenessUser  // parsed from State["user"], nil when absent
	Since     time.Time       // when the entry first appeared
	Updated   time.Time       // when it was last renewed
	CursorsAt time.Time       // when its "cursors" last changed (JupyterLab never clears them on blur)
}

// AwarenessChange reports which clients were added, updated (state changed) or removed.
type AwarenessChange struct {
	Added, Updated, Removed []uint64
}

// Empty reports whether nothing changed.
func (c AwarenessChange) Empty() bool {
	return len(c.Added) == 0 && len(c.Updated) == 0 && len(c.Removed) == 0
}

type awarenessEntry struct {
	clock     uint64
	state     json.RawMessage // nil: removed (tombstone keeps the clock)
	user      *AwarenessUser  // parsed once from state
	cursors   string          // the state's "cursors", to notice when they move
	cursorsAt time.Time       // when they last moved
	since     time.Time
	updated   time.Time
}

// parse reads the parts of a new state that are looked at often.
func (e *awarenessEntry) parse(now time.Time) {
	var s struct {
		User    *AwarenessUser  `json:"user"`
		Cursors json.RawMessage `json:"cursors"`
	}
	e.user = nil
	if json.Unmarshal(e.state, &s) != nil {
		return
	}
	if s.User != nil && s.User.Username != "" {
		e.user = s.User
	}
	if c := string(s.Cursors); c != e.cursors {
		e.cursors, e.cursorsAt = c, now
	}
}

// Awareness holds the local state and every peer's.
type Awareness struct {
	clientID   uint64
	localClock uint64
	local      json.RawMessage
	localSent  time.Time
	peers      map[uint64]*awarenessEntry
}

// NewAwareness creates an awareness instance for a doc client id (the same id, so that
// JupyterLab's renderers can tell the local cursor from remote ones).
func NewAwareness(clientID uint64) *Awareness {
	return &Awareness{clientID: clientID, peers: map[uint64]*awarenessEntry{}}
}

// ClientID returns the local client id.
func (a *Awareness) ClientID() uint64 { return a.clientID }

// Reset switches to a new client id (a fresh doc) and forgets every peer. The local state is
// kept; the returned update announces it under the new id.
func (a *Awareness) Reset(clientID uint64, now time.Time) []byte {
	a.clientID = clientID
	a.localClock = 0
	a.peers = map[uint64]*awarenessEntry{}
	if a.local == nil {
		return nil
	}
	return a.announce(now)
}

// SetLocal sets the local state (any JSON-marshalable object) and returns the update to send.
func (a *Awareness) SetLocal(state any, now time.Time) ([]byte, error) {
	b, err := json.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("awareness state: %w", err)
	}
	if bytes.Equal(b, []byte("null")) {
		return a.ClearLocal(now), nil
	}
	a.local = b
	return a.announce(now), nil
}

// Local returns the local state JSON, nil when none.
func (a *Awareness) Local() json.RawMessage { return a.local }

// ClearLocal removes the local state (leaving) and returns the update to send.
func (a *Awareness) ClearLocal(now time.Time) []byte {
	a.local = nil
	a.localClock++
	a.localSent = now
	return encodeAwareness([]awarenessRecord{{a.clientID, a.localClock, nil}})
}

// Goodbye returns a null state for the current client id, keeping the local state (to announce
// it under a new id after a Reset): peers drop the old id at once instead of after a timeout.
func (a *Awareness) Goodbye() []byte {
	if a.local == nil {
		return nil
	}
	return encodeAwareness([]awarenessRecord{{a.clientID, a.localClock + 1, nil}})
}

// Refresh re-announces the local state with a higher clock (peers ignore equal clocks). Used
// when a new peer appears: the server never forwards existing states to a joining client, so
// without this it would not see us until our next renewal.
func (a *Awareness) Refresh(now time.Time) []byte {
	if a.local == nil {
		return nil
	}
	return a.announce(now)
}

// Current returns an update carrying the current local state without changing it (for a fresh
// connection), or nil when there is none.
func (a *Awareness) Current() []byte {
	if a.local == nil {
		return nil
	}
	return encodeAwareness([]awarenessRecord{{a.clientID, a.localClock, a.local}})
}

func (a *Awareness) announce(now time.Time) []byte {
	a.localClock++
	a.localSent = now
	return encodeAwareness([]awarenessRecord{{a.clientID, a.localClock, a.local}})
}

// Tick renews the local state when due (returning the update to send, or nil) and drops peers
// that have not renewed within AwarenessOutdated.
func (a *Awareness) Tick(now time.Time) ([]byte, AwarenessChange) {
	var update []byte
	if a.local != nil && now.Sub(a.localSent) >= AwarenessRenew {
		update = a.announce(now)
	}
	var ch AwarenessChange
	for id, e := range a.peers {
		switch {
		case e.state != nil && now.Sub(e.updated) >= AwarenessOutdated:
			e.state = nil
			e.updated = now
			ch.Removed = append(ch.Removed, id)
		case e.state == nil && now.Sub(e.updated) >= AwarenessOutdated:
			// A tombstone only needs to outlive late copies of the peer's last messages; every
			// browser reload is a new client id, so keeping them forever would grow unbounded.
			delete(a.peers, id)
		}
	}
	sortIDs(ch.Removed)
	return update, ch
}

// Apply merges a remote awareness update.
func (a *Awareness) Apply(update []byte, now time.Time) (AwarenessChange, []byte, error) {
	records, err := decodeAwareness(update)
	if err != nil {
		return AwarenessChange{}, nil, err
	}
	var ch AwarenessChange
	var reply []byte
	for _, r := range records {
		if r.client == a.clientID {
			if r.clock > maxSafeInt {
				continue // a JS peer could not count past it, and ours would wrap
			}
			// Never let a peer remove or replace the local state: re-assert it with a higher clock
			// when someone sent a newer state for our id, or a null at our clock. The server
			// echoes our own frames back to us (same clock, our state): those are ignored, or the
			// two sides would ping-pong forever.
			if a.local != nil && (r.clock > a.localClock || (r.clock == a.localClock && r.state == nil)) {
				a.localClock = r.clock
				reply = a.announce(now)
			}
			continue
		}
		e := a.peers[r.client]
		if e != nil && (r.clock < e.clock || (r.clock == e.clock && (r.state != nil || e.state == nil))) {
			// Older or an echo, except that an equal-clock null removes (y-protocols rule).
			if r.clock == e.clock && e.state != nil {
				e.updated = now
			}
			continue
		}
		switch {
		case r.state == nil:
			if e != nil && e.state != nil {
				ch.Removed = append(ch.Removed, r.client)
			}
			if e == nil {
				e = &awarenessEntry{}
				a.peers[r.client] = e
			}
			e.clock, e.state, e.updated = r.clock, nil, now
		case e == nil || e.state == nil:
			if a.live() >= maxAwarenessPeers {
				continue // a flood of fake peers: the ones already here stay visible
			}
			ne := &awarenessEntry{clock: r.clock, state: r.state, since: now, updated: now}
			ne.parse(now)
			a.peers[r.client] = ne
			ch.Added = append(ch.Added, r.client)
		default:
			if !bytes.Equal(e.state, r.state) {
				ch.Updated = append(ch.Updated, r.client)
				e.state = r.state
				e.parse(now)
			}
			e.clock, e.updated = r.clock, now
		}
	}
	return ch, reply, nil
}

// Users returns the user of every live peer that has one (cheaper than Peers).
func (a *Awareness) Users() map[uint64]AwarenessUser {
	out := make(map[uint64]AwarenessUser, len(a.peers))
	for id, e := range a.peers {
		if e.state != nil && e.user != nil {
			out[id] = *e.user
		}
	}
	return out
}

// Since returns when a live peer first appeared.
func (a *Awareness) Since(id uint64) time.Time {
	if e := a.peers[id]; e != nil {
		return e.since
	}
	return time.Time{}
}

func (a *Awareness) live() int {
	n := 0
	for _, e := range a.peers {
		if e.state != nil {
			n++
		}
	}
	return n
}

// Peers returns the live remote entries ordered by client id.
func (a *Awareness) Peers() []Peer {
	ids := make([]uint64, 0, len(a.peers))
	for id, e := range a.peers {
		if e.state != nil {
			ids = append(ids, id)
		}
	}
	sortIDs(ids)
	out := make([]Peer, 0, len(ids))
	for _, id := range ids {
		e := a.peers[id]
		p := Peer{ClientID: id, Clock: e.clock, State: append(json.RawMessage(nil), e.state...), Since: e.since, Updated: e.updated, CursorsAt: e.cursorsAt}
		if e.user != nil {
			u := *e.user
			p.User = &u
		}
		out = append(out, p)
	}
	return out
}

type awarenessRecord struct {
	client, clock uint64
	state         json.RawMessage // nil for "null"
}

func encodeAwareness(records []awarenessRecord) []byte {
	b := appendVarUint(nil, uint64(len(records)))
	for _, r := range records {
		b = appendVarUint(b, r.client)
		b = appendVarUint(b, r.clock)
		if r.state == nil {
			b = appendVarString(b, "null")
		} else {
			b = appendVarString(b, string(r.state))
		}
	}
	return b
}

// DecodeAwareness parses an awareness update; exported for fuzzing and tests.
func decodeAwareness(b []byte) ([]awarenessRecord, error) {
	d := newDecoder(b)
	n, err := d.length(3)
	if err != nil {
		return nil, fmt.Errorf("awareness count: %w", err)
	}
	out := make([]awarenessRecord, 0, n)
	for i := 0; i < n; i++ {
		client, err := d.varUint()
		if err != nil {
			return nil, fmt.Errorf("awareness client: %w", err)
		}
		clock, err := d.varUint()
		if err != nil {
			return nil, fmt.Errorf("awareness clock: %w", err)
		}
		s, err := d.varBytes()
		if err != nil {
			return nil, fmt.Errorf("awareness state: %w", err)
		}
		if len(s) > maxAwarenessState {
			return nil, malformed("awareness state of %d bytes", len(s))
		}
		r := awarenessRecord{client: client, clock: clock}
		if !bytes.Equal(bytes.TrimSpace(s), []byte("null")) {
			if !json.Valid(s) {
				return nil, malformed("awareness state of client %d is not JSON", client)
			}
			r.state = append(json.RawMessage(nil), s...)
		}
		out = append(out, r)
	}
	if !d.done() {
		return nil, malformed("%d trailing bytes after awareness update", d.remaining())
	}
	return out, nil
}

// EncodeAwarenessUpdate encodes one entry; for tests and fakes.
func EncodeAwarenessUpdate(client, clock uint64, state json.RawMessage) []byte {
	return encodeAwareness([]awarenessRecord{{client, clock, state}})
}

func sortIDs(ids []uint64) { sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] }) }
