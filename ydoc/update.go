package ydoc

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Our own reader for Yjs update v1 and state vectors. Every update from the network is parsed
// here before y-crdt sees it: the library trusts length prefixes and can hang or panic on
// garbage, so only structurally valid updates reach it. The parse also yields which ID ranges an
// update inserts and deletes, which is how edits are confirmed.

// Limits on what a well-formed update may contain; far above anything a notebook needs.
const (
	maxAnyDepth = 256
	maxClock    = 1 << 53 // JS safe integers
)

// IDRange is a run of Yjs item IDs of one client: clocks [Clock, Clock+Len).
type IDRange struct {
	Client uint64
	Clock  uint64
	Len    uint64
}

// UpdateMeta describes an update: the item ranges it carries and the ranges it deletes.
type UpdateMeta struct {
	Structs []IDRange // GC and item structs; skips are gaps and are left out
	Deletes []IDRange
}

// Empty reports whether the update changes nothing.
func (m UpdateMeta) Empty() bool { return len(m.Structs) == 0 && len(m.Deletes) == 0 }

// ParseUpdate validates a v1 update and returns what it contains.
func ParseUpdate(b []byte) (UpdateMeta, error) {
	meta, _, err := parseUpdate(b)
	return meta, err
}

// parseUpdate is ParseUpdate, and the offset where the delete set begins.
func parseUpdate(b []byte) (UpdateMeta, int, error) {
	d := newDecoder(b)
	var meta UpdateMeta
	nClients, err := d.length(3)
	if err != nil {
		return meta, 0, fmt.Errorf("update client count: %w", err)
	}
	for i := 0; i < nClients; i++ {
		nStructs, err := d.length(1)
		if err != nil {
			return meta, 0, fmt.Errorf("update struct count: %w", err)
		}
		client, err := d.varUint()
		if err != nil {
			return meta, 0, fmt.Errorf("update client: %w", err)
		}
		clock, err := d.varUint()
		if err != nil {
			return meta, 0, fmt.Errorf("update clock: %w", err)
		}
		for j := 0; j < nStructs; j++ {
			n, skip, err := readStruct(d)
			if err != nil {
				return meta, 0, fmt.Errorf("update client %d struct %d: %w", client, j, err)
			}
			if clock+n > maxClock || clock+n < clock {
				return meta, 0, malformed("clock overflow for client %d", client)
			}
			if !skip && n > 0 {
				meta.Structs = appendRange(meta.Structs, IDRange{client, clock, n})
			}
			clock += n
		}
	}
	dsAt := d.pos
	if meta.Deletes, err = readDeleteSet(d); err != nil {
		return meta, 0, err
	}
	if !d.done() {
		return meta, 0, malformed("%d trailing bytes after the delete set", d.remaining())
	}
	return meta, dsAt, nil
}

func appendRange(rs []IDRange, r IDRange) []IDRange {
	if n := len(rs); n > 0 {
		last := &rs[n-1]
		if last.Client == r.Client && last.Clock+last.Len == r.Clock {
			last.Len += r.Len
			return rs
		}
	}
	return append(rs, r)
}

// Struct info bits (yjs encoding.js).
const (
	infoRefMask        = 0x1f
	infoHasParentSub   = 0x20
	infoHasRightOrigin = 0x40
	infoHasOrigin      = 0x80
	refGC              = 0
	refSkip            = 10
)

// readStruct reads one struct and returns its clock length and whether it is a skip.
func readStruct(d *decoder) (uint64, bool, error) {
	info, err := d.byte()
	if err != nil {
		return 0, false, err
	}
	switch info & infoRefMask {
	case refGC, refSkip:
		n, err := d.varUint()
		if err != nil {
			return 0, false, err
		}
		if n == 0 {
			return 0, false, malformed("empty gc/skip struct")
		}
		return n, info&infoRefMask == refSkip, nil
	}
	if info&infoHasOrigin != 0 {
		if err := readID(d); err != nil {
			return 0, false, fmt.Errorf("origin: %w", err)
		}
	}
	if info&infoHasRightOrigin != 0 {
		if err := readID(d); err != nil {
			return 0, false, fmt.Errorf("right origin: %w", err)
		}
	}
	if info&(infoHasOrigin|infoHasRightOrigin) == 0 {
		parentIsKey, err := d.varUint()
		if err != nil {
			return 0, false, err
		}
		if parentIsKey == 1 {
			if _, err := d.varBytes(); err != nil {
				return 0, false, fmt.Errorf("parent key: %w", err)
			}
		} else if err := readID(d); err != nil {
			return 0, false, fmt.Errorf("parent id: %w", err)
		}
		if info&infoHasParentSub != 0 {
			if _, err := d.varBytes(); err != nil {
				return 0, false, fmt.Errorf("parent sub: %w", err)
			}
		}
	}
	return readContent(d, info&infoRefMask)
}

func readID(d *decoder) error {
	if _, err := d.varUint(); err != nil {
		return err
	}
	_, err := d.varUint()
	return err
}

// readContent skips one item content of the given ref and returns its length in clock units.
func readContent(d *decoder, ref byte) (uint64, bool, error) {
	switch ref {
	case 1: // deleted
		n, err := d.varUint()
		if err == nil && n == 0 {
			err = malformed("empty deleted content")
		}
		return n, false, err
	case 2: // JSON: strings, each JSON text or "undefined"
		n, err := d.length(1)
		if err != nil {
			return 0, false, err
		}
		for i := 0; i < n; i++ {
			s, err := d.varBytes()
			if err != nil {
				return 0, false, err
			}
			if string(s) != "undefined" && !json.Valid(s) {
				return 0, false, malformed("json content is not JSON")
			}
		}
		if n == 0 {
			return 0, false, malformed("empty json content")
		}
		return uint64(n), false, nil
	case 3: // binary
		_, err := d.varBytes()
		return 1, false, err
	case 4: // string; its clock length is its UTF-16 length
		s, err := d.varString()
		if err != nil {
			return 0, false, err
		}
		n := utf16Len(s)
		if n == 0 {
			return 0, false, malformed("empty string content")
		}
		return uint64(n), false, nil
	case 5: // embed: JSON
		s, err := d.varBytes()
		if err == nil && !json.Valid(s) {
			err = malformed("embed content is not JSON")
		}
		return 1, false, err
	case 6: // format: key and JSON value
		if _, err := d.varBytes(); err != nil {
			return 0, false, err
		}
		s, err := d.varBytes()
		if err == nil && !json.Valid(s) {
			err = malformed("format content is not JSON")
		}
		return 1, false, err
	case 7: // type
		ref, err := d.varUint()
		if err != nil {
			return 0, false, err
		}
		if ref > 6 {
			return 0, false, malformed("unknown type ref %d", ref)
		}
		if ref == 3 || ref == 5 { // XmlElement and XmlHook carry a name
			if _, err := d.varBytes(); err != nil {
				return 0, false, err
			}
		}
		return 1, false, nil
	case 8: // any
		n, err := d.length(1)
		if err != nil {
			return 0, false, err
		}
		if n == 0 {
			return 0, false, malformed("empty any content")
		}
		for i := 0; i < n; i++ {
			if err := skipAny(d, 0); err != nil {
				return 0, false, err
			}
		}
		return uint64(n), false, nil
	case 9: // subdocument: guid and options
		if _, err := d.varBytes(); err != nil {
			return 0, false, err
		}
		return 1, false, skipAny(d, 0)
	}
	return 0, false, malformed("unknown content ref %d", ref)
}

// skipAny validates one lib0 "any" value.
func skipAny(d *decoder, depth int) error {
	if depth > maxAnyDepth {
		return malformed("value nested deeper than %d", maxAnyDepth)
	}
	tag, err := d.byte()
	if err != nil {
		return err
	}
	switch tag {
	case 127, 126, 121, 120: // undefined, null, false, true
		return nil
	case 125: // varint
		_, err := d.varInt()
		return err
	case 124: // float32
		_, err := d.fixed(4)
		return err
	case 123, 122: // float64, bigint64
		_, err := d.fixed(8)
		return err
	case 119: // string
		_, err := d.varBytes()
		return err
	case 118: // object
		n, err := d.length(2)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := d.varBytes(); err != nil {
				return err
			}
			if err := skipAny(d, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 117: // array
		n, err := d.length(1)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := skipAny(d, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 116: // bytes
		_, err := d.varBytes()
		return err
	}
	return malformed("unknown value tag %d", tag)
}

func readDeleteSet(d *decoder) ([]IDRange, error) {
	nClients, err := d.length(2)
	if err != nil {
		return nil, fmt.Errorf("delete set client count: %w", err)
	}
	var out []IDRange
	for i := 0; i < nClients; i++ {
		client, err := d.varUint()
		if err != nil {
			return nil, fmt.Errorf("delete set client: %w", err)
		}
		n, err := d.length(2)
		if err != nil {
			return nil, fmt.Errorf("delete set length: %w", err)
		}
		for j := 0; j < n; j++ {
			clock, err := d.varUint()
			if err != nil {
				return nil, err
			}
			length, err := d.varUint()
			if err != nil {
				return nil, err
			}
			if clock+length > maxClock || clock+length < clock {
				return nil, malformed("delete range overflows for client %d", client)
			}
			if length > 0 {
				out = append(out, IDRange{client, clock, length})
			}
		}
	}
	return out, nil
}

// StateVector maps a client ID to the next clock expected from it.
type StateVector map[uint64]uint64

// DecodeStateVector parses an encoded state vector.
func DecodeStateVector(b []byte) (StateVector, error) {
	d := newDecoder(b)
	n, err := d.length(2)
	if err != nil {
		return nil, fmt.Errorf("state vector length: %w", err)
	}
	sv := make(StateVector, n)
	for i := 0; i < n; i++ {
		client, err := d.varUint()
		if err != nil {
			return nil, fmt.Errorf("state vector client: %w", err)
		}
		clock, err := d.varUint()
		if err != nil {
			return nil, fmt.Errorf("state vector clock: %w", err)
		}
		if clock > maxClock {
			return nil, malformed("state vector clock %d too large", clock)
		}
		sv[client] = clock
	}
	if !d.done() {
		return nil, malformed("%d trailing bytes after the state vector", d.remaining())
	}
	return sv, nil
}

// Encode writes the state vector in lib0 form, clients in ascending order for stable bytes.
func (sv StateVector) Encode() []byte {
	clients := make([]uint64, 0, len(sv))
	for c := range sv {
		clients = append(clients, c)
	}
	sort.Slice(clients, func(i, j int) bool { return clients[i] < clients[j] })
	b := appendVarUint(nil, uint64(len(clients)))
	for _, c := range clients {
		b = appendVarUint(b, c)
		b = appendVarUint(b, sv[c])
	}
	return b
}

// Covers reports whether every struct in r is below the state vector's clock for its client.
func (sv StateVector) Covers(r IDRange) bool { return sv[r.Client] >= r.Clock+r.Len }

// String lists the clients and their clocks, by client ("client:clock …"), for logs.
func (sv StateVector) String() string {
	clients := make([]uint64, 0, len(sv))
	for c := range sv {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	var b strings.Builder
	for i, c := range clients {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", c, sv[c])
	}
	return b.String()
}

// IDSet is a set of item IDs kept as sorted, merged ranges per client (like a Yjs delete set).
type IDSet map[uint64][]IDRange

// Add inserts a range, merging with neighbours.
func (s IDSet) Add(r IDRange) {
	if r.Len == 0 {
		return
	}
	rs := s[r.Client]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Clock+rs[i].Len >= r.Clock })
	// Merge every range that touches or overlaps r, starting at i.
	lo, hi := r.Clock, r.Clock+r.Len
	j := i
	for j < len(rs) && rs[j].Clock <= hi {
		lo = min(lo, rs[j].Clock)
		hi = max(hi, rs[j].Clock+rs[j].Len)
		j++
	}
	merged := IDRange{r.Client, lo, hi - lo}
	out := make([]IDRange, 0, len(rs)-(j-i)+1)
	out = append(out, rs[:i]...)
	out = append(out, merged)
	out = append(out, rs[j:]...)
	s[r.Client] = out
}

// AddAll inserts many ranges at once: append, sort and merge per client, O(n log n) instead of
// one copy per range.
func (s IDSet) AddAll(rs []IDRange) {
	if len(rs) < 8 {
		for _, r := range rs {
			s.Add(r)
		}
		return
	}
	byClient := map[uint64][]IDRange{}
	for _, r := range rs {
		if r.Len > 0 {
			byClient[r.Client] = append(byClient[r.Client], r)
		}
	}
	for client, add := range byClient {
		all := append(append([]IDRange(nil), s[client]...), add...)
		sort.Slice(all, func(i, j int) bool { return all[i].Clock < all[j].Clock })
		merged := all[:0]
		for _, r := range all {
			if n := len(merged); n > 0 && merged[n-1].Clock+merged[n-1].Len >= r.Clock {
				last := &merged[n-1]
				last.Len = max(last.Clock+last.Len, r.Clock+r.Len) - last.Clock
				continue
			}
			merged = append(merged, r)
		}
		s[client] = merged
	}
}

// Contains reports whether the whole range is in the set.
func (s IDSet) Contains(r IDRange) bool {
	if r.Len == 0 {
		return true
	}
	rs := s[r.Client]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Clock+rs[i].Len > r.Clock })
	return i < len(rs) && rs[i].Clock <= r.Clock && rs[i].Clock+rs[i].Len >= r.Clock+r.Len
}
