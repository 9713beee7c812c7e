package ydoc

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"
)

// updateBuilder assembles hand-made v1 updates.
type updateBuilder struct{ b []byte }

func (u *updateBuilder) uint(n uint64) *updateBuilder { u.b = appendVarUint(u.b, n); return u }
func (u *updateBuilder) raw(p ...byte) *updateBuilder { u.b = append(u.b, p...); return u }
func (u *updateBuilder) str(s string) *updateBuilder  { u.b = appendVarString(u.b, s); return u }

// itemString writes a root-level string item (parent key "r") of one client.
func itemStringUpdate(client, clock uint64, s string) []byte {
	u := &updateBuilder{}
	u.uint(1).uint(1).uint(client).uint(clock)
	u.raw(4)           // info: ContentString, no origins, no parent sub
	u.uint(1).str("r") // parent is a root key
	u.str(s)
	u.uint(0) // empty delete set
	return u.b
}

func TestParseUpdateHandBuilt(t *testing.T) {
	gcSkip := (&updateBuilder{}).
		uint(1).uint(3).uint(5).uint(0).
		raw(0).uint(3).                                           // GC, 3 clocks: 0..2
		raw(10).uint(2).                                          // skip, 2 clocks: 3..4 (a gap, not reported)
		raw(0).uint(1).                                           // GC at clock 5
		uint(1).uint(7).uint(2).uint(0).uint(2).uint(10).uint(0). // deletes: client 7 [0,2) and an empty range
		b
	twoClients := (&updateBuilder{}).
		uint(2).
		uint(1).uint(9).uint(4).raw(0).uint(2).
		uint(1).uint(3).uint(0).raw(0).uint(1).
		uint(2).uint(9).uint(1).uint(1).uint(1).uint(3).uint(2).uint(0).uint(1).uint(5).uint(5).
		b
	anyItem := (&updateBuilder{}).
		uint(1).uint(1).uint(4).uint(0).
		raw(0x28).uint(1).str("state").str("dirty"). // ContentAny with parent sub
		uint(2).raw(120).raw(118).uint(1).str("k").raw(117).uint(2).raw(125, 0x41).raw(123, 0, 0, 0, 0, 0, 0, 0, 0).
		uint(0).b
	tests := []struct {
		name string
		in   []byte
		want UpdateMeta
	}{
		{"empty update", []byte{0, 0}, UpdateMeta{}},
		{"string item counts UTF-16 units", itemStringUpdate(3, 10, "a😀中"), UpdateMeta{Structs: []IDRange{{3, 10, 4}}}},
		{"gc and skip", gcSkip, UpdateMeta{Structs: []IDRange{{5, 0, 3}, {5, 5, 1}}, Deletes: []IDRange{{7, 0, 2}}}},
		{"two clients", twoClients, UpdateMeta{Structs: []IDRange{{9, 4, 2}, {3, 0, 1}}, Deletes: []IDRange{{9, 1, 1}, {3, 0, 1}, {3, 5, 5}}}},
		{"any content", anyItem, UpdateMeta{Structs: []IDRange{{4, 0, 2}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUpdate(tc.in)
			if err != nil {
				t.Fatalf("ParseUpdate(% x): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseUpdate = %+v, want %+v", got, tc.want)
			}
			if got.Empty() != (len(tc.want.Structs)+len(tc.want.Deletes) == 0) {
				t.Fatalf("Empty() = %v", got.Empty())
			}
		})
	}
}

func TestParseUpdateMalformed(t *testing.T) {
	deep := &updateBuilder{}
	deep.uint(1).uint(1).uint(1).uint(0).raw(0x08).uint(1).str("r").uint(1)
	for i := 0; i < maxAnyDepth+2; i++ {
		deep.raw(117).uint(1)
	}
	deep.raw(126).uint(0)
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"no delete set", []byte{0}},
		{"client count beyond input", []byte{5, 0, 0}},
		{"trailing bytes", []byte{0, 0, 0}},
		{"unknown content ref", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(11).uint(1).str("r").uint(0).b},
		{"empty string content", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(4).uint(1).str("r").str("").uint(0).b},
		{"empty gc", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(0).uint(0).uint(0).b},
		{"empty deleted content", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(1).uint(1).str("r").uint(0).uint(0).b},
		{"json content not JSON", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(2).uint(1).str("r").uint(1).str("{nope").uint(0).b},
		{"empty json content", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(2).uint(1).str("r").uint(0).uint(0).b},
		{"embed not JSON", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(5).uint(1).str("r").str("{").uint(0).b},
		{"format not JSON", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(6).uint(1).str("r").str("bold").str("tru").uint(0).b},
		{"unknown type ref", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(7).uint(1).str("r").uint(7).uint(0).b},
		{"unknown any tag", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(8).uint(1).str("r").uint(1).raw(100).uint(0).b},
		{"empty any content", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(8).uint(1).str("r").uint(0).uint(0).b},
		{"any nested too deep", deep.b},
		{"clock overflow", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(maxClock - 1).raw(0).uint(2).uint(0).b},
		{"clock wraps", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(1<<64 - 1).raw(0).uint(2).uint(0).b},
		{"delete range overflow", (&updateBuilder{}).uint(0).uint(1).uint(1).uint(1).uint(maxClock).uint(1).b},
		{"delete count beyond input", (&updateBuilder{}).uint(0).uint(1).uint(1).uint(9).uint(0).b},
		{"parent key beyond input", (&updateBuilder{}).uint(1).uint(1).uint(1).uint(0).raw(4).uint(1).uint(50).b},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "ParseUpdate", func() { _, err = ParseUpdate(tc.in) })
			requireMalformed(t, err, fmt.Sprintf("ParseUpdate(% x)", tc.in))
		})
	}
}

func TestParseUpdateFromTransactions(t *testing.T) {
	t.Run("text insert then delete", func(t *testing.T) {
		d := newTestDoc(t, KindText)
		c := d.ClientID()
		u, _ := transact(t, d, func(tx *Txn) error { return tx.InsertText(0, "hello world") })
		meta, err := ParseUpdate(u)
		if err != nil {
			t.Fatal(err)
		}
		// 11 characters plus the state.dirty entry.
		if want := []IDRange{{c, 0, 12}}; !reflect.DeepEqual(meta.Structs, want) || meta.Deletes != nil {
			t.Fatalf("insert: got %+v, want structs %+v and no deletes", meta, want)
		}
		if sv := d.StateVector(); sv[c] != 12 {
			t.Fatalf("state vector %v, want %d:12", sv, c)
		}
		u, _ = transact(t, d, func(tx *Txn) error { return tx.DeleteText(5, 6) })
		meta, err = ParseUpdate(u)
		if err != nil {
			t.Fatal(err)
		}
		if want := []IDRange{{c, 5, 6}}; meta.Structs != nil || !reflect.DeepEqual(meta.Deletes, want) {
			t.Fatalf("delete: got %+v, want only deletes %+v", meta, want)
		}
		u, _ = transact(t, d, func(tx *Txn) error { return tx.InsertText(2, "😀") })
		meta, _ = ParseUpdate(u)
		if want := []IDRange{{c, 12, 2}}; !reflect.DeepEqual(meta.Structs, want) {
			t.Fatalf("emoji insert: got %+v, want %+v (UTF-16 length 2)", meta.Structs, want)
		}
	})
	t.Run("remote delete of another client's text", func(t *testing.T) {
		a := newTestDoc(t, KindText)
		b := newTestDoc(t, KindText)
		u, _ := transact(t, a, func(tx *Txn) error { return tx.InsertText(0, "abcdef") })
		apply(t, b, u)
		u, _ = transact(t, b, func(tx *Txn) error { return tx.DeleteText(1, 3) })
		meta, err := ParseUpdate(u)
		if err != nil {
			t.Fatal(err)
		}
		// b also sets state.dirty (already true from a, so nothing new).
		if want := []IDRange{{a.ClientID(), 1, 3}}; !reflect.DeepEqual(meta.Deletes, want) {
			t.Fatalf("deletes %+v, want %+v", meta.Deletes, want)
		}
		for _, r := range meta.Structs {
			if r.Client != b.ClientID() {
				t.Fatalf("struct range %+v is not from b (%d)", r, b.ClientID())
			}
		}
	})
	t.Run("notebook cells", func(t *testing.T) {
		d := newTestDoc(t, KindNotebook)
		c := d.ClientID()
		var prev uint64
		steps := []struct {
			name    string
			fn      func(*Txn) error
			inserts bool
			deletes bool
		}{
			{"insert", func(tx *Txn) error {
				return tx.InsertCells(0, []Cell{{ID: "a", Source: "x = 1\n"}, {ID: "b", Type: CellMarkdown, Source: "# T"}, {ID: "c"}})
			}, true, false},
			{"edit source", func(tx *Txn) error { return tx.SetSource(0, "x = 2\n") }, true, true},
			{"append output", func(tx *Txn) error {
				return tx.AppendOutput(0, map[string]any{"output_type": "stream", "name": "stdout", "text": "hi\n"})
			}, true, false},
			{"delete cell", func(tx *Txn) error { return tx.DeleteCells(1, 1) }, false, true},
			{"clear outputs", func(tx *Txn) error { return tx.ClearOutputs(0) }, false, true},
			{"move", func(tx *Txn) error { return tx.MoveCells(0, 1, 1) }, true, true},
		}
		for _, s := range steps {
			u, _ := transact(t, d, s.fn)
			meta, err := ParseUpdate(u)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			now := d.StateVector()[c]
			if s.inserts {
				if want := []IDRange{{c, prev, now - prev}}; !reflect.DeepEqual(meta.Structs, want) {
					t.Fatalf("%s: structs %+v, want %+v", s.name, meta.Structs, want)
				}
			} else if meta.Structs != nil {
				t.Fatalf("%s: unexpected structs %+v", s.name, meta.Structs)
			}
			if s.deletes != (len(meta.Deletes) > 0) {
				t.Fatalf("%s: deletes %+v, want deletes=%v", s.name, meta.Deletes, s.deletes)
			}
			for _, r := range meta.Deletes {
				if r.Client != c || r.Clock+r.Len > now {
					t.Fatalf("%s: delete range %+v is not within this client's items (clock %d)", s.name, r, now)
				}
			}
			prev = now
		}
	})
}

func TestParseUpdateFixtures(t *testing.T) {
	for _, path := range fixtureNames(t) {
		t.Run(path, func(t *testing.T) {
			d, load := loadNotebook(t, parseFixture(t, path))
			full := fullUpdate(t, d)
			c := d.ClientID()
			for name, u := range map[string][]byte{"load": load, "full": full} {
				meta, err := ParseUpdate(u)
				if err != nil {
					t.Fatalf("ParseUpdate(%s update): %v", name, err)
				}
				if want := []IDRange{{c, 0, d.StateVector()[c]}}; !reflect.DeepEqual(meta.Structs, want) {
					t.Fatalf("%s update structs %+v, want %+v", name, meta.Structs, want)
				}
			}
			// Truncations: every offset for small updates, a sample for large ones.
			step := 1
			if len(full) > 16<<10 {
				step = len(full)/1500 + 1
			}
			for cut := 0; cut < len(full); cut += step {
				var err error
				noPanic(t, "ParseUpdate", func() { _, err = ParseUpdate(full[:cut]) })
				if err == nil {
					t.Fatalf("ParseUpdate of the first %d of %d bytes succeeded", cut, len(full))
				}
				requireMalformed(t, err, fmt.Sprintf("truncated at %d", cut))
			}
		})
	}
}

// TestParseUpdateTruncationsEveryOffset covers every prefix of updates from edits.
func TestParseUpdateTruncationsEveryOffset(t *testing.T) {
	a := newTestDoc(t, KindNotebook)
	b := newTestDoc(t, KindNotebook)
	var updates [][]byte
	u, _ := transact(t, a, func(tx *Txn) error {
		return tx.InsertCells(0, []Cell{
			{ID: "c1", Source: "print('😀')", Metadata: map[string]any{"f": 1.5, "n": nil, "o": map[string]any{"a": []any{1, "x", true}}}},
			{ID: "c2", Type: CellRaw, Attachments: map[string]any{"a.png": map[string]any{"image/png": "AAAA"}}},
		})
	})
	updates = append(updates, u)
	apply(t, b, u)
	u, _ = transact(t, b, func(tx *Txn) error { return tx.SetSource(0, "print('中文')") })
	updates = append(updates, u)
	apply(t, a, u)
	u, _ = transact(t, a, func(tx *Txn) error { return tx.DeleteCells(1, 1) })
	updates = append(updates, u, fullUpdate(t, a))
	for i, u := range updates {
		if _, err := ParseUpdate(u); err != nil {
			t.Fatalf("update %d does not parse: %v", i, err)
		}
		for cut := 0; cut < len(u); cut++ {
			var err error
			noPanic(t, "ParseUpdate", func() { _, err = ParseUpdate(u[:cut]) })
			requireMalformed(t, err, fmt.Sprintf("update %d truncated at %d of %d", i, cut, len(u)))
		}
	}
}

func TestStateVectorRoundTrip(t *testing.T) {
	tests := []StateVector{
		{},
		{1: 0},
		{1: 1, 2: 2},
		{0: 5, 1 << 32: 1 << 40, 12345: maxClock},
		{1<<64 - 1: 3},
	}
	for _, sv := range tests {
		b := sv.Encode()
		got, err := DecodeStateVector(b)
		if err != nil {
			t.Fatalf("DecodeStateVector(% x): %v", b, err)
		}
		if !reflect.DeepEqual(got, sv) {
			t.Fatalf("round trip of %v gave %v", sv, got)
		}
		if again := got.Encode(); !bytes.Equal(again, b) {
			t.Fatalf("Encode is not deterministic: % x vs % x", again, b)
		}
	}
	// Clients are written in ascending order.
	if got, want := (StateVector{300: 1, 2: 7}).Encode(), []byte{2, 2, 7, 0xac, 0x02, 1}; !bytes.Equal(got, want) {
		t.Fatalf("Encode = % x, want % x", got, want)
	}
	// A doc's own state vector decodes to the same map.
	d := newTestDoc(t, KindText)
	transact(t, d, func(tx *Txn) error { return tx.InsertText(0, "abc") })
	got, err := DecodeStateVector(d.StateVector().Encode())
	if err != nil || !reflect.DeepEqual(got, d.StateVector()) {
		t.Fatalf("doc state vector round trip: %v, %v vs %v", err, got, d.StateVector())
	}
}

func TestDecodeStateVectorMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"count beyond input", []byte{3, 1, 1}},
		{"truncated clock", []byte{1, 1}},
		{"trailing bytes", []byte{1, 1, 1, 0}},
		{"clock too large", append([]byte{1, 1}, appendVarUint(nil, maxClock+1)...)},
		{"overflowing client", append([]byte{1}, append(bytes.Repeat([]byte{0xff}, 10), 0x01, 0x01)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "DecodeStateVector", func() { _, err = DecodeStateVector(tc.in) })
			requireMalformed(t, err, "DecodeStateVector")
		})
	}
}

func TestStateVectorCovers(t *testing.T) {
	sv := StateVector{1: 10}
	tests := []struct {
		r    IDRange
		want bool
	}{
		{IDRange{1, 0, 10}, true}, {IDRange{1, 9, 1}, true}, {IDRange{1, 9, 2}, false},
		{IDRange{1, 10, 1}, false}, {IDRange{2, 0, 1}, false}, {IDRange{2, 0, 0}, true},
	}
	for _, tc := range tests {
		if got := sv.Covers(tc.r); got != tc.want {
			t.Errorf("Covers(%+v) = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestIDSetCases(t *testing.T) {
	tests := []struct {
		name string
		add  []IDRange
		want []IDRange // for client 1
	}{
		{"disjoint", []IDRange{{1, 10, 2}, {1, 0, 2}, {1, 5, 1}}, []IDRange{{1, 0, 2}, {1, 5, 1}, {1, 10, 2}}},
		{"adjacent merge", []IDRange{{1, 0, 2}, {1, 2, 3}}, []IDRange{{1, 0, 5}}},
		{"adjacent before", []IDRange{{1, 5, 2}, {1, 3, 2}}, []IDRange{{1, 3, 4}}},
		{"overlap", []IDRange{{1, 0, 5}, {1, 3, 5}}, []IDRange{{1, 0, 8}}},
		{"bridge", []IDRange{{1, 0, 2}, {1, 6, 2}, {1, 2, 4}}, []IDRange{{1, 0, 8}}},
		{"swallow many", []IDRange{{1, 1, 1}, {1, 3, 1}, {1, 5, 1}, {1, 0, 10}}, []IDRange{{1, 0, 10}}},
		{"contained", []IDRange{{1, 0, 10}, {1, 3, 2}}, []IDRange{{1, 0, 10}}},
		{"empty ignored", []IDRange{{1, 3, 0}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := IDSet{}
			for _, r := range tc.add {
				s.Add(r)
			}
			if got := s[1]; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ranges %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestIDSetBruteForce compares IDSet with a plain set of (client, clock) pairs.
func TestIDSetBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 300; round++ {
		s := IDSet{}
		ref := map[[2]uint64]bool{}
		for op := 0; op < 1+rng.Intn(12); op++ {
			r := IDRange{Client: uint64(rng.Intn(2)), Clock: uint64(rng.Intn(40)), Len: uint64(rng.Intn(6))}
			s.Add(r)
			for c := r.Clock; c < r.Clock+r.Len; c++ {
				ref[[2]uint64{r.Client, c}] = true
			}
			// Invariant: sorted, disjoint and non-adjacent.
			for client, rs := range s {
				if !sort.SliceIsSorted(rs, func(i, j int) bool { return rs[i].Clock < rs[j].Clock }) {
					t.Fatalf("client %d ranges not sorted: %+v", client, rs)
				}
				for i := range rs {
					if rs[i].Len == 0 || rs[i].Client != client {
						t.Fatalf("bad range %+v", rs[i])
					}
					if i > 0 && rs[i-1].Clock+rs[i-1].Len >= rs[i].Clock {
						t.Fatalf("client %d ranges overlap or touch: %+v", client, rs)
					}
				}
			}
		}
		for client := uint64(0); client < 2; client++ {
			for clock := uint64(0); clock < 50; clock++ {
				for l := uint64(0); l < 8; l++ {
					want := true
					for c := clock; c < clock+l; c++ {
						want = want && ref[[2]uint64{client, c}]
					}
					if got := s.Contains(IDRange{client, clock, l}); got != want {
						t.Fatalf("round %d: Contains(%d,%d,%d) = %v, want %v; set %+v", round, client, clock, l, got, want, s)
					}
				}
			}
		}
	}
}
