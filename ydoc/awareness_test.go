package ydoc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func awUpdate(client, clock uint64, state string) []byte {
	if state == "null" {
		return EncodeAwarenessUpdate(client, clock, nil)
	}
	return EncodeAwarenessUpdate(client, clock, json.RawMessage(state))
}

// decodeOne decodes an update with exactly one record.
func decodeOne(t *testing.T, u []byte) awarenessRecord {
	t.Helper()
	recs, err := decodeAwareness(u)
	if err != nil || len(recs) != 1 {
		t.Fatalf("decodeAwareness(% x) = %v, %v; want one record", u, recs, err)
	}
	return recs[0]
}

func TestAwarenessPeerLifecycle(t *testing.T) {
	const peer = 77
	alice := `{"user":{"username":"alice","display_name":"Alice A","color":"#f00"},"cursors":[]}`
	alice2 := `{"user":{"username":"alice","display_name":"Alice A","color":"#f00"},"cursors":[{"x":1}]}`
	steps := []struct {
		name     string
		at       time.Duration
		update   []byte
		want     AwarenessChange
		live     bool
		clock    uint64
		state    string
		updated  time.Duration // expected Peer.Updated offset (when live)
		tickOnly bool
	}{
		{name: "new peer", at: 0, update: awUpdate(peer, 1, alice), want: AwarenessChange{Added: []uint64{peer}}, live: true, clock: 1, state: alice, updated: 0},
		{name: "echo with equal clock", at: time.Second, update: awUpdate(peer, 1, alice), live: true, clock: 1, state: alice, updated: time.Second},
		{name: "equal clock, different state ignored", at: 2 * time.Second, update: awUpdate(peer, 1, alice2), live: true, clock: 1, state: alice, updated: 2 * time.Second},
		{name: "renewal, same state", at: 3 * time.Second, update: awUpdate(peer, 2, alice), live: true, clock: 2, state: alice, updated: 3 * time.Second},
		{name: "changed state", at: 4 * time.Second, update: awUpdate(peer, 3, alice2), want: AwarenessChange{Updated: []uint64{peer}}, live: true, clock: 3, state: alice2, updated: 4 * time.Second},
		{name: "older clock ignored", at: 5 * time.Second, update: awUpdate(peer, 2, alice), live: true, clock: 3, state: alice2, updated: 4 * time.Second},
		{name: "not yet outdated", at: 33*time.Second + time.Second/2, tickOnly: true, live: true, clock: 3, state: alice2, updated: 4 * time.Second},
		{name: "outdated", at: 34 * time.Second, tickOnly: true, want: AwarenessChange{Removed: []uint64{peer}}},
		{name: "back with a higher clock", at: 35 * time.Second, update: awUpdate(peer, 4, alice), want: AwarenessChange{Added: []uint64{peer}}, live: true, clock: 4, state: alice, updated: 35 * time.Second},
		{name: "removed by null", at: 36 * time.Second, update: awUpdate(peer, 5, "null"), want: AwarenessChange{Removed: []uint64{peer}}},
		{name: "null again is quiet", at: 37 * time.Second, update: awUpdate(peer, 6, "null")},
		{name: "stale state after removal ignored", at: 38 * time.Second, update: awUpdate(peer, 5, alice)},
		{name: "returns", at: 39 * time.Second, update: awUpdate(peer, 7, alice), want: AwarenessChange{Added: []uint64{peer}}, live: true, clock: 7, state: alice, updated: 39 * time.Second},
		{name: "equal clock null removes", at: 40 * time.Second, update: awUpdate(peer, 7, " null "), want: AwarenessChange{Removed: []uint64{peer}}},
	}
	a := NewAwareness(1)
	var since time.Time
	for _, s := range steps {
		now := t0.Add(s.at)
		var ch AwarenessChange
		if s.tickOnly {
			var u []byte
			u, ch = a.Tick(now)
			if u != nil {
				t.Fatalf("%s: Tick without a local state sent % x", s.name, u)
			}
		} else {
			var reply []byte
			var err error
			ch, reply, err = a.Apply(s.update, now)
			if err != nil {
				t.Fatalf("%s: Apply: %v", s.name, err)
			}
			if reply != nil {
				t.Fatalf("%s: unexpected reply % x", s.name, reply)
			}
		}
		if !reflect.DeepEqual(ch, s.want) {
			t.Fatalf("%s: change %+v, want %+v", s.name, ch, s.want)
		}
		if ch.Empty() != (len(s.want.Added)+len(s.want.Updated)+len(s.want.Removed) == 0) {
			t.Fatalf("%s: Empty() = %v", s.name, ch.Empty())
		}
		peers := a.Peers()
		if !s.live {
			if len(peers) != 0 {
				t.Fatalf("%s: peers %+v, want none", s.name, peers)
			}
			continue
		}
		if len(peers) != 1 {
			t.Fatalf("%s: %d peers, want 1", s.name, len(peers))
		}
		p := peers[0]
		if len(s.want.Added) > 0 {
			since = now
		}
		if p.ClientID != peer || p.Clock != s.clock || string(p.State) != s.state || !p.Updated.Equal(t0.Add(s.updated)) || !p.Since.Equal(since) {
			t.Fatalf("%s: peer %+v (since %v updated %v), want clock %d state %s updated +%v since %v", s.name, p, p.Since, p.Updated, s.clock, s.state, s.updated, since)
		}
		if p.User == nil || p.User.Username != "alice" || p.User.DisplayName != "Alice A" || p.User.Color != "#f00" {
			t.Fatalf("%s: user %+v", s.name, p.User)
		}
	}
}

func TestAwarenessPeersSortedAndCopied(t *testing.T) {
	a := NewAwareness(1)
	u := encodeAwareness([]awarenessRecord{
		{client: 30, clock: 1, state: json.RawMessage(`{"user":{"username":"c"}}`)},
		{client: 10, clock: 1, state: json.RawMessage(`{"user":{"name":"no username"}}`)},
		{client: 20, clock: 1, state: json.RawMessage(`{}`)},
		{client: 40, clock: 1},
	})
	ch, _, err := a.Apply(u, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ch.Added, []uint64{30, 10, 20}) {
		t.Errorf("Added %v, want records order [30 10 20] (null adds nothing)", ch.Added)
	}
	peers := a.Peers()
	var ids []uint64
	for _, p := range peers {
		ids = append(ids, p.ClientID)
	}
	if !reflect.DeepEqual(ids, []uint64{10, 20, 30}) {
		t.Fatalf("peer ids %v, want sorted [10 20 30]", ids)
	}
	if peers[0].User != nil || peers[1].User != nil || peers[2].User == nil || peers[2].User.Username != "c" {
		t.Errorf("users: %+v %+v %+v", peers[0].User, peers[1].User, peers[2].User)
	}
	peers[2].State[0] = 'X'
	if a.Peers()[2].State[0] != '{' {
		t.Errorf("Peers() aliases internal state")
	}
}

func TestAwarenessLocalRenew(t *testing.T) {
	const me = 5
	a := NewAwareness(me)
	if a.ClientID() != me || a.Local() != nil || a.Current() != nil {
		t.Fatalf("fresh awareness has state")
	}
	u, err := a.SetLocal(map[string]any{"user": map[string]any{"username": "bot"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeOne(t, u)
	if r.client != me || r.clock != 1 || string(r.state) != `{"user":{"username":"bot"}}` {
		t.Fatalf("SetLocal update %+v", r)
	}
	if cur := decodeOne(t, a.Current()); cur.clock != 1 || !bytes.Equal(cur.state, r.state) {
		t.Fatalf("Current() = %+v", cur)
	}
	if u, ch := a.Tick(t0.Add(AwarenessRenew - time.Millisecond)); u != nil || !ch.Empty() {
		t.Fatalf("renewed too early")
	}
	u, _ = a.Tick(t0.Add(AwarenessRenew))
	if u == nil {
		t.Fatalf("no renewal after %v", AwarenessRenew)
	}
	if r := decodeOne(t, u); r.clock != 2 || string(r.state) != `{"user":{"username":"bot"}}` {
		t.Fatalf("renewal %+v, want clock 2 and the same state", r)
	}
	if u, _ := a.Tick(t0.Add(AwarenessRenew + time.Second)); u != nil {
		t.Fatalf("renewed again right after a renewal")
	}
	if u, _ := a.Tick(t0.Add(2 * AwarenessRenew)); u == nil || decodeOne(t, u).clock != 3 {
		t.Fatalf("second renewal missing or wrong")
	}
	// Leaving.
	u = a.ClearLocal(t0.Add(time.Minute))
	if r := decodeOne(t, u); r.client != me || r.clock != 4 || r.state != nil {
		t.Fatalf("ClearLocal update %+v", r)
	}
	if a.Current() != nil || a.Local() != nil {
		t.Fatalf("local state kept after ClearLocal")
	}
	if u, _ := a.Tick(t0.Add(time.Hour)); u != nil {
		t.Fatalf("renewed a cleared state")
	}
	// SetLocal(nil) clears too; an unmarshalable state is an error.
	if u, err := a.SetLocal(nil, t0); err != nil || decodeOne(t, u).state != nil {
		t.Fatalf("SetLocal(nil) = % x, %v", u, err)
	}
	if _, err := a.SetLocal(map[string]any{"f": func() {}}, t0); err == nil {
		t.Fatalf("SetLocal with an unmarshalable state succeeded")
	}
}

func TestAwarenessDefendsLocalState(t *testing.T) {
	const me = 9
	state := `{"user":{"username":"me"}}`
	tests := []struct {
		name      string
		update    func(localClock uint64) []byte
		wantReply bool
	}{
		{"remote removes us (equal clock)", func(c uint64) []byte { return awUpdate(me, c, "null") }, true},
		{"remote removes us (higher clock)", func(c uint64) []byte { return awUpdate(me, c+5, "null") }, true},
		{"remote overrides us", func(c uint64) []byte { return awUpdate(me, c+1, `{"user":{"username":"evil"}}`) }, true},
		{"stale removal", func(c uint64) []byte { return awUpdate(me, c-1, "null") }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAwareness(me)
			a.SetLocal(json.RawMessage(state), t0)
			u, _ := a.SetLocal(json.RawMessage(state), t0)
			clock := decodeOne(t, u).clock
			remote := tc.update(clock)
			incoming := decodeOne(t, remote).clock
			ch, reply, err := a.Apply(remote, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if !ch.Empty() || len(a.Peers()) != 0 {
				t.Fatalf("our own id became a peer: %+v %+v", ch, a.Peers())
			}
			if !tc.wantReply {
				if reply != nil {
					t.Fatalf("unexpected reply % x", reply)
				}
				return
			}
			if reply == nil {
				t.Fatalf("no re-announcement")
			}
			r := decodeOne(t, reply)
			if r.client != me || r.clock <= incoming || string(r.state) != state {
				t.Fatalf("reply %+v, want our state with a clock above %d", r, incoming)
			}
			if string(a.Local()) != state {
				t.Fatalf("local state replaced by %s", a.Local())
			}
		})
	}
	t.Run("no local state: nothing to defend", func(t *testing.T) {
		a := NewAwareness(me)
		_, reply, err := a.Apply(awUpdate(me, 3, "null"), t0)
		if err != nil || reply != nil {
			t.Fatalf("reply % x, %v", reply, err)
		}
	})
}

// TestAwarenessOwnEcho: the Jupyter server forwards every awareness frame to all clients, the
// sender included. An echo of our own current state (same clock, same state) must not be
// answered, or client and server ping-pong forever.
func TestAwarenessOwnEcho(t *testing.T) {
	a := NewAwareness(9)
	u, err := a.SetLocal(map[string]any{"user": map[string]any{"username": "me"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	replies := 0
	echo := u
	for i := 0; i < 5 && echo != nil; i++ {
		_, reply, err := a.Apply(echo, t0.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if reply != nil {
			replies++
		}
		echo = reply // the server echoes the reply back as well
	}
	if replies > 0 {
		t.Errorf("Awareness.Apply answered the server's echo of our own update %d times in 5 rounds: a ping-pong", replies)
	}
}

func TestAwarenessReset(t *testing.T) {
	a := NewAwareness(1)
	if u := a.Reset(2, t0); u != nil {
		t.Fatalf("Reset without local state sent % x", u)
	}
	a.Apply(awUpdate(50, 1, `{}`), t0)
	a.SetLocal(map[string]any{"a": 1}, t0)
	a.SetLocal(map[string]any{"a": 2}, t0)
	u := a.Reset(3, t0.Add(time.Second))
	r := decodeOne(t, u)
	if r.client != 3 || r.clock != 1 || string(r.state) != `{"a":2}` || a.ClientID() != 3 {
		t.Fatalf("Reset announcement %+v", r)
	}
	if len(a.Peers()) != 0 {
		t.Fatalf("peers kept across Reset")
	}
}

func TestAwarenessMalformed(t *testing.T) {
	big := append(appendVarUint([]byte{1, 1, 1}, maxAwarenessState+1), []byte(`"`+strings.Repeat("x", maxAwarenessState-1)+`"`)...)
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"count beyond input", []byte{5, 1, 1}},
		{"truncated state", []byte{1, 7, 1, 10, '{'}},
		{"missing clock", []byte{1, 7}},
		{"not JSON", append([]byte{1, 7, 1}, appendVarString(nil, "{nope")...)},
		{"empty state", []byte{1, 7, 1, 0}},
		{"trailing bytes", append(awUpdate(7, 1, `{}`), 0)},
		{"state too large", big},
		{"overflowing clock", append([]byte{1, 7}, append(bytes.Repeat([]byte{0xff}, 10), 0x01, 2, '{', '}')...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAwareness(1)
			a.Apply(awUpdate(7, 1, `{}`), t0)
			var err error
			var ch AwarenessChange
			noPanic(t, "Apply", func() { ch, _, err = a.Apply(tc.in, t0) })
			requireMalformed(t, err, "Awareness.Apply")
			if !ch.Empty() || len(a.Peers()) != 1 || a.Peers()[0].Clock != 1 {
				t.Fatalf("malformed update changed state: %+v %+v", ch, a.Peers())
			}
		})
	}
}

func TestAwarenessEncodeDecode(t *testing.T) {
	recs := []awarenessRecord{
		{client: 1, clock: 0, state: json.RawMessage(`{}`)},
		{client: 1 << 40, clock: 1 << 50, state: json.RawMessage(`{"user":{"username":"😀"}}`)},
		{client: 3, clock: 2},
	}
	got, err := decodeAwareness(encodeAwareness(recs))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if got, err := decodeAwareness([]byte{0}); err != nil || len(got) != 0 {
		t.Fatalf("empty update = %v, %v", got, err)
	}
}

// Awareness is anyone's to write: a flood of peers stops at the cap (those already here stay),
// and a clock for our own id past JavaScript's integers is ignored (ours would wrap).
func TestAwarenessLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewAwareness(7)
	if _, err := a.SetLocal(map[string]any{"user": map[string]any{"username": "me"}}, now); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxAwarenessPeers+50; i++ {
		if _, _, err := a.Apply(EncodeAwarenessUpdate(uint64(100+i), 1, json.RawMessage(`{"user":{"username":"u"}}`)), now); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.Peers()); n != maxAwarenessPeers {
		t.Errorf("%d live peers, want the cap %d", n, maxAwarenessPeers)
	}
	if u := a.Users(); u[100].Username != "u" {
		t.Errorf("the first peer's user: %+v", u[100])
	}
	_, reply, _ := a.Apply(EncodeAwarenessUpdate(7, 1<<60, json.RawMessage(`{"user":{"username":"fake"}}`)), now)
	if reply != nil {
		t.Errorf("a clock of 2^60 for our id was adopted: we re-announced %x", reply)
	}
	if next := a.Refresh(now); next == nil {
		t.Fatal("no local state")
	}
}

func TestAwarenessCursorsMovedAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := NewAwareness(7)
	apply := func(clock uint64, state string, at time.Time) {
		t.Helper()
		if _, _, err := a.Apply(EncodeAwarenessUpdate(9, clock, json.RawMessage(state)), at); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, `{"user":{"username":"u"},"cursors":[1]}`, t0)
	apply(2, `{"user":{"username":"u"},"cursors":[1]}`, t0.Add(time.Minute))              // renewal
	apply(3, `{"user":{"username":"u","name":"x"},"cursors":[1]}`, t0.Add(2*time.Minute)) // other field
	if at := a.Peers()[0].CursorsAt; !at.Equal(t0) {
		t.Errorf("cursors unchanged since %v, reported moved at %v", t0, at)
	}
	apply(4, `{"user":{"username":"u"},"cursors":[2]}`, t0.Add(3*time.Minute))
	if at := a.Peers()[0].CursorsAt; !at.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("cursors moved at %v, reported %v", t0.Add(3*time.Minute), at)
	}
}
