package ydoc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	y "github.com/skyterra/y-crdt"
)

// Rescues decided by content. After the server lost a room, the file it rebuilds the room from
// is either a save of the server (a version the replica held: restore the replica over it) or
// content the replica never held (changed outside the server: the file wins, merged). A History
// answers the question "did the replica ever hold exactly this content?" from fingerprints of
// every version the replica went through, kept as it goes: each change re-hashes only the cells
// it touched (and re-sums the cell order when cells came, went or moved), so thousands of
// updates to a notebook of thousands of cells cost what they changed, not the notebook each.
//
// Contents are compared the way the servers read and write files (ContentKey): cell ids are left
// out (a file without them gets new ones on every load), as are the trusted mark nbformat sets
// on load, execution_state, the nbformat version and the defaults jupyter_ydoc adds to empty
// metadata; multiline strings are joined, numbers compared by value (integral floats as
// integers, others at float32 precision: a file read back may carry float32 numbers); a
// notebook holding one empty code cell is the empty notebook; text is compared with CRLF as LF.
// With MatchOptions.IgnoreOutputs, outputs are left out too (jupyter-server-documents keeps
// placeholders in the room and the outputs elsewhere).
//
// A History is fed either by a Replica (Replica.KeepHistory: it observes its document after every
// change) or, for a log replayed after the sidecar restarted, by Apply with the base state and
// then each update in order (it keeps a document of its own). Fingerprints are seeded per
// process: they are not for storage. Not safe for concurrent use; pure (no clock, no files).
type History struct {
	kind Kind
	opts MatchOptions
	log  zerolog.Logger
	seed [2]maphash.Seed

	doc   *Doc // Apply's own document (nil while a Replica feeds it)
	bound bool // a Replica feeds it

	// The current version, notebooks: per live cell map its content hash (cache), the hashes
	// in order, their positional sum, and the header's hash.
	cells  map[*y.YMap]fp
	order  []fp
	sum    fp
	header fp
	stale  bool // the order must be rebuilt from the document
	cur    fp   // the current version's fingerprint
	empty  bool // no version recorded yet

	// The versions held: a ring of the last maxVersions fingerprints and their counts.
	ring     []fp
	next     int
	count    map[fp]int
	versions int // versions recorded in all

	// The cell versions held (notebooks): each cell's id with its content as some version held
	// it (cellKey), and the version it first appeared in; the last MaxVersions distinct ones.
	// A file saved by the server in its own order of updates, or when nobody heard, is not a
	// version the replica held as a whole, but each of its cells usually is (cellHeldBefore).
	cellSeen map[fp]int
	cellRing []fp
	cellNext int

	lastSaved *Snapshot // the content when the server last said it saved
}

// MatchOptions say how a History compares contents.
type MatchOptions struct {
	// IgnoreOutputs leaves cell outputs out (the room holds placeholders for them).
	IgnoreOutputs bool
	// MaxVersions bounds the versions remembered (0: DefaultMaxVersions); older ones are
	// forgotten first.
	MaxVersions int
}

// DefaultMaxVersions is how many versions a History remembers unless told otherwise: about a
// day of an agent editing every second; 16 bytes each, and as many cell versions (about 50 bytes
// each with their index).
const DefaultMaxVersions = 1 << 17

// fp is a 128-bit fingerprint (two independently seeded 64-bit hashes).
type fp struct{ a, b uint64 }

func (x fp) add(y fp) fp { return fp{x.a + y.a, x.b + y.b} }
func (x fp) sub(y fp) fp { return fp{x.a - y.a, x.b - y.b} }

// NewHistory returns an empty history of a document of the given kind.
func NewHistory(kind Kind, opts MatchOptions, log zerolog.Logger) (*History, error) {
	if kind != KindNotebook && kind != KindText {
		return nil, fmt.Errorf("new history: unknown kind %d", int(kind))
	}
	if opts.MaxVersions <= 0 {
		opts.MaxVersions = DefaultMaxVersions
	}
	return &History{kind: kind, opts: opts, log: log, seed: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, cells: map[*y.YMap]fp{},
		stale: true, empty: true, count: map[fp]int{}, cellSeen: map[fp]int{}}, nil
}

// Apply feeds the history one update the replica applied (the log's base state first, then each
// update in order). It is refused for a history a Replica feeds.
func (h *History) Apply(update []byte) error {
	if h.bound {
		return errors.New("history: a replica feeds this history")
	}
	if h.doc == nil {
		d, err := newScratchDoc(h.kind, h.log)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		h.doc = d
	}
	_, change, err := h.doc.Apply(update)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	h.observe(h.doc, change)
	if savedMarkerIn(h.doc, change) {
		h.saved(h.doc)
	}
	return nil
}

// State returns the state of Apply's document (for Replica.AdoptLost); nil when nothing was
// applied.
func (h *History) State() ([]byte, error) {
	if h.doc == nil {
		return nil, nil
	}
	return h.doc.EncodeStateAsUpdate(nil)
}

// Content returns the content of Apply's document.
func (h *History) Content() (Snapshot, error) {
	if h.doc == nil {
		return Snapshot{Kind: h.kind}, errors.New("history: nothing applied")
	}
	return h.doc.Snapshot()
}

// Versions returns how many versions were recorded (consecutive equal ones count once).
func (h *History) Versions() int { return h.versions }

// Held reports whether the replica held exactly this content (as ContentKey compares) in one of
// the versions remembered.
func (h *History) Held(content Snapshot) bool {
	if content.Kind != h.kind {
		return false
	}
	return h.count[h.fingerprint(content)] > 0
}

// heldBefore reports whether content is one of the versions remembered among the first n recorded
// (a Versions count taken earlier).
func (h *History) heldBefore(content Snapshot, n int) bool {
	if content.Kind != h.kind || len(h.ring) == 0 {
		return false
	}
	v := h.fingerprint(content)
	if h.count[v] == 0 {
		return false
	}
	// The k-th version recorded (from 0) sits at ring[k % MaxVersions]; the ring keeps the last
	// len(ring) of them.
	for k := max(0, h.versions-len(h.ring)); k < min(n, h.versions); k++ {
		if h.ring[k%h.opts.MaxVersions] == v {
			return true
		}
	}
	return false
}

// cellHeldBefore reports whether one of the first n versions recorded (a Versions count taken
// earlier) held a cell with c's id and, as ContentKey compares, c's content. A cell without an id
// is never held (ids tell cells apart).
func (h *History) cellHeldBefore(c Cell, n int) bool {
	at, ok := h.cellFirstHeld(c)
	return ok && at < n
}

// cellFirstHeld returns the first version (counted from 0 in the order recorded) that held a cell
// with c's id and content; ok is false when none did (or it was forgotten).
func (h *History) cellFirstHeld(c Cell) (int, bool) {
	if h.kind != KindNotebook || c.ID == "" {
		return 0, false
	}
	at, ok := h.cellSeen[h.cellKey(c.ID, h.cellFP(c))]
	return at, ok
}

// LastSaved returns the content the replica held when the server last said it saved the
// document (its state hash changed, or dirty turned false), or nil: the base to merge a file
// changed outside the server against (Replica.FileWins).
func (h *History) LastSaved() *Snapshot {
	if h.lastSaved == nil {
		return nil
	}
	s := *h.lastSaved
	return &s
}

// NoteSaved records content as saved by the server (for example the file as the sidecar read it
// when it joined the room): it becomes LastSaved and a version held.
func (h *History) NoteSaved(content Snapshot) {
	if content.Kind != h.kind {
		return
	}
	c := content
	h.lastSaved = &c
	if content.Kind == KindNotebook {
		for _, cell := range content.Notebook.Cells {
			h.recordCell(cell.ID, h.cellFP(cell))
		}
	}
	h.record(h.fingerprint(content))
}

// bind makes a Replica the history's feeder (its document is observed after every change).
func (h *History) bind() { h.bound, h.stale = true, true }

// rebind forgets what it knew of the replica's structure (the Replica replaced its document).
func (h *History) rebind() {
	clear(h.cells)
	h.order, h.stale = nil, true
}

// saved notes a save marker: the replica's content now is LastSaved.
func (h *History) saved(d *Doc) {
	if snap, err := d.Snapshot(); err == nil {
		h.lastSaved = &snap
	}
}

// savedMarkerIn reports a change that says the server saved the document.
func savedMarkerIn(d *Doc, c Change) bool {
	for _, k := range c.State {
		if k == "hash" {
			return true
		}
		if k == "dirty" {
			if dirty, ok := d.State()["dirty"].(bool); ok && !dirty {
				return true
			}
		}
	}
	return false
}

// observe brings the fingerprint up to date after change and records the version.
func (h *History) observe(d *Doc, c Change) {
	if !h.empty && !h.stale && !c.Text && !c.Meta && !c.Moved && len(c.Inserted) == 0 && len(c.Deleted) == 0 && len(c.Cells) == 0 {
		return // state only: the content is the version already recorded
	}
	_ = d.run(func() error {
		if h.kind == KindText {
			h.cur = h.textFP(textString(d.source))
			return nil
		}
		h.observeNotebook(d, c)
		return nil
	})
	h.record(h.cur)
}

// observeNotebook updates the cell hashes the change touched (y-crdt lock held).
func (h *History) observeNotebook(d *Doc, c Change) {
	o := &d.ord
	if c.Meta || h.stale {
		h.header = h.headerFP(d.readNotebookHeader())
	}
	structural := h.stale || c.Moved || len(c.Inserted) > 0 || len(c.Deleted) > 0 || o.dup || len(o.maps) != len(h.order)
	for _, cc := range c.Cells {
		if o.dup {
			clear(h.cells)
			break
		}
		m, ok := o.byID[cc.ID]
		if !ok {
			continue
		}
		old, had := h.cells[m]
		nh := h.cellVersion(readCell(m))
		h.cells[m] = nh
		if structural || !had {
			structural = true
			continue
		}
		if i := o.index(m); i >= 0 && h.order[i] == old {
			h.sum = h.sum.sub(h.mix(i, old)).add(h.mix(i, nh))
			h.order[i] = nh
		} else {
			structural = true
		}
	}
	if structural {
		h.rebuildOrder(o)
	}
	h.cur = h.combine()
}

// rebuildOrder re-sums the cell order from the cached hashes (hashing cells not cached yet) and
// drops cached hashes of cells no longer live.
func (h *History) rebuildOrder(o *cellOrder) {
	live := make(map[*y.YMap]bool, len(o.maps))
	h.order = h.order[:0]
	h.sum = fp{}
	for i, m := range o.maps {
		v, ok := h.cells[m]
		if !ok {
			v = h.cellVersion(readCell(m))
			h.cells[m] = v
		}
		live[m] = true
		h.order = append(h.order, v)
		h.sum = h.sum.add(h.mix(i, v))
	}
	if len(h.cells) > len(live) {
		for m := range h.cells {
			if !live[m] {
				delete(h.cells, m)
			}
		}
	}
	h.stale = false
}

// combine is the notebook's fingerprint from the header and the cells.
func (h *History) combine() fp {
	if len(h.order) == 1 && h.order[0] == h.emptyCellFP() {
		return h.notebookFP(h.header, fp{}, 0)
	}
	return h.notebookFP(h.header, h.sum, len(h.order))
}

func (h *History) notebookFP(header, sum fp, n int) fp {
	var buf [48]byte
	binary.LittleEndian.PutUint64(buf[0:], header.a)
	binary.LittleEndian.PutUint64(buf[8:], header.b)
	binary.LittleEndian.PutUint64(buf[16:], sum.a)
	binary.LittleEndian.PutUint64(buf[24:], sum.b)
	binary.LittleEndian.PutUint64(buf[32:], uint64(n))
	return h.hashBytes(buf[:40])
}

// record notes a version held.
func (h *History) record(v fp) {
	if !h.empty && h.ring != nil && h.ring[(h.next+len(h.ring)-1)%len(h.ring)] == v {
		return // the same content again
	}
	h.empty = false
	h.versions++
	if len(h.ring) < h.opts.MaxVersions {
		h.ring = append(h.ring, v)
		h.next = len(h.ring) % h.opts.MaxVersions
		h.count[v]++
		return
	}
	old := h.ring[h.next]
	if h.count[old]--; h.count[old] <= 0 {
		delete(h.count, old)
	}
	h.ring[h.next] = v
	h.next = (h.next + 1) % len(h.ring)
	h.count[v]++
}

// cellVersion is cellFP of a live cell, noting the cell version as held (in the version about
// to be recorded).
func (h *History) cellVersion(c Cell) fp {
	v := h.cellFP(c)
	h.recordCell(c.ID, v)
	return v
}

// recordCell notes the cell version (id, content hash v) as held from the next version recorded
// on, unless it was held before; the oldest is forgotten beyond MaxVersions.
func (h *History) recordCell(id string, v fp) {
	if id == "" {
		return
	}
	k := h.cellKey(id, v)
	if _, ok := h.cellSeen[k]; ok {
		return
	}
	if len(h.cellRing) < h.opts.MaxVersions {
		h.cellRing = append(h.cellRing, k)
	} else {
		delete(h.cellSeen, h.cellRing[h.cellNext])
		h.cellRing[h.cellNext] = k
		h.cellNext = (h.cellNext + 1) % len(h.cellRing)
	}
	h.cellSeen[k] = h.versions
}

// cellKey is the fingerprint of a cell version: its id and its content hash.
func (h *History) cellKey(id string, v fp) fp {
	b := make([]byte, 0, len(id)+17)
	b = append(b, id...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint64(b, v.a)
	b = binary.LittleEndian.AppendUint64(b, v.b)
	return h.hashBytes(b)
}

// fingerprint computes a content's fingerprint from scratch, as observe keeps it.
func (h *History) fingerprint(s Snapshot) fp {
	if s.Kind == KindText {
		return h.textFP(s.Text)
	}
	header := h.headerFP(s.Notebook)
	var sum fp
	n := len(s.Notebook.Cells)
	for i, c := range s.Notebook.Cells {
		v := h.cellFP(c)
		if n == 1 && v == h.emptyCellFP() {
			return h.notebookFP(header, fp{}, 0)
		}
		sum = sum.add(h.mix(i, v))
	}
	return h.notebookFP(header, sum, n)
}

func (h *History) textFP(s string) fp {
	return h.hashBytes([]byte(strings.ReplaceAll(s, "\r\n", "\n")))
}

func (h *History) headerFP(nb Notebook) fp {
	var b strings.Builder
	b.WriteString("notebook\x00")
	writeCanonical(&b, notebookMetadataKey(nb.Metadata))
	return h.hashBytes([]byte(b.String()))
}

func (h *History) cellFP(c Cell) fp {
	var b strings.Builder
	writeCellKey(&b, c, h.opts.IgnoreOutputs)
	return h.hashBytes([]byte(b.String()))
}

func (h *History) emptyCellFP() fp {
	return h.cellFP(Cell{Type: CellCode, Outputs: []map[string]any{}})
}

// mix is cell hash v's contribution at index i.
func (h *History) mix(i int, v fp) fp {
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], uint64(i))
	binary.LittleEndian.PutUint64(buf[8:], v.a)
	binary.LittleEndian.PutUint64(buf[16:], v.b)
	return h.hashBytes(buf[:])
}

func (h *History) hashBytes(b []byte) fp {
	return fp{maphash.Bytes(h.seed[0], b), maphash.Bytes(h.seed[1], b)}
}

// ContentKey is the canonical form in which a History compares contents (see History): two
// contents with the same key are the same file as far as a rescue is concerned. For tests and
// logs; a History keeps hashes of it.
func ContentKey(s Snapshot, opts MatchOptions) string {
	var b strings.Builder
	if s.Kind == KindText {
		return strings.ReplaceAll(s.Text, "\r\n", "\n")
	}
	b.WriteString("notebook\x00")
	writeCanonical(&b, notebookMetadataKey(s.Notebook.Metadata))
	cells := s.Notebook.Cells
	if len(cells) == 1 {
		var one, empty strings.Builder
		writeCellKey(&one, cells[0], opts.IgnoreOutputs)
		writeCellKey(&empty, Cell{Type: CellCode, Outputs: []map[string]any{}}, opts.IgnoreOutputs)
		if one.String() == empty.String() {
			cells = nil
		}
	}
	for _, c := range cells {
		b.WriteString("\x01")
		writeCellKey(&b, c, opts.IgnoreOutputs)
	}
	return b.String()
}

// notebookMetadataKey is notebook metadata as compared: without what the server adds or strips
// on its own (the defaults jupyter_ydoc adds to metadata it loads, the signature and original
// version nbformat strips).
func notebookMetadataKey(md map[string]any) map[string]any {
	out := make(map[string]any, len(md))
	for k, v := range md {
		switch k {
		case "orig_nbformat", "orig_nbformat_minor", "signature":
			continue
		case "language_info":
			if nearJSON(v, map[string]any{"name": ""}) {
				continue
			}
		case "kernelspec":
			if nearJSON(v, map[string]any{"name": "", "display_name": ""}) {
				continue
			}
		}
		out[k] = v
	}
	return out
}

// writeCellKey writes a cell as compared: type, source, metadata without the transient keys,
// and for code cells execution count and outputs (multiline strings joined), attachments for
// others; no id, no execution state.
func writeCellKey(b *strings.Builder, c Cell, ignoreOutputs bool) {
	t := c.Type
	if t == "" {
		t = CellCode
	}
	b.WriteString(t)
	b.WriteByte(0)
	b.WriteString(strings.ReplaceAll(c.Source, "\r\n", "\n"))
	b.WriteByte(0)
	writeCanonical(b, withoutTransient(c.Metadata))
	b.WriteByte(0)
	if t == CellCode {
		if c.ExecutionCount != nil {
			fmt.Fprintf(b, "%d", *c.ExecutionCount)
		} else {
			b.WriteString("null")
		}
		b.WriteByte(0)
		if !ignoreOutputs {
			b.WriteByte('[')
			for i, o := range c.Outputs {
				if i > 0 {
					b.WriteByte(',')
				}
				oc := make(map[string]any, len(o))
				for k, v := range o {
					oc[k] = v
				}
				if data, ok := oc["data"].(map[string]any); ok {
					dc := make(map[string]any, len(data))
					for k, v := range data {
						dc[k] = v
					}
					oc["data"] = dc
				}
				rejoinOutput(oc)
				if oc["output_type"] == "stream" {
					oc["text"] = joinText(oc["text"])
				}
				writeCanonical(b, oc)
			}
			b.WriteByte(']')
		}
		return
	}
	if len(c.Attachments) > 0 {
		writeCanonical(b, c.Attachments)
	}
}

// writeCanonical writes a JSON-like value canonically: keys sorted, numbers by value (integral
// ones as integers, others at float32 precision).
// writeString writes a string as its length and its bytes: as unambiguous as a quoted string,
// without escaping megabytes of output text on every fingerprint.
func writeString(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte('"')
	b.WriteString(s)
}

func writeCanonical(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writeString(b, t)
	case int:
		writeNumber(b, float64(t))
	case int64:
		writeNumber(b, float64(t))
	case int32:
		writeNumber(b, float64(t))
	case uint64:
		writeNumber(b, float64(t))
	case float32:
		writeNumber(b, float64(t))
	case float64:
		writeNumber(b, t)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCanonical(b, t[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, x)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, x)
		}
		b.WriteByte(']')
	case []map[string]any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, x)
		}
		b.WriteByte(']')
	default:
		if w := fromAny(v); reflect.TypeOf(w) != reflect.TypeOf(v) {
			writeCanonical(b, w)
			return
		}
		fmt.Fprintf(b, "%v", v)
	}
}

func writeNumber(b *strings.Builder, f float64) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		b.WriteString("NaN")
	case f == math.Trunc(f) && math.Abs(f) < 1<<53:
		fmt.Fprintf(b, "%d", int64(f))
	default:
		fmt.Fprintf(b, "%g", float32(f))
	}
}
