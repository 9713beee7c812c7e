package bridge

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Restorable versions: the sidecar's own record of the states of a document it saw. Each
// snapshot is the document's content right after a change; a run of changes by the same
// people within a few seconds (a human typing) shares one snapshot, while every edit of the
// agent starts its own, so "the state before the agent's edit" is always there. Cells are
// stored by content hash, so a snapshot of a 1,000-cell notebook after one keystroke costs one
// cell. The store is bounded in bytes (oldest snapshots go first) and, with a state directory,
// survives restarts.

// ErrNoSuchVersion is returned for a version id the store does not hold.
var ErrNoSuchVersion = errors.New("bridge: no such version")

// coalesceWindow is how long changes by the same people share a snapshot.
const coalesceWindow = 3 * time.Second

// snapshotContent is one version's content. A notebook's cells are a list of (cell id, blob)
// pairs cut into chunks; chunks are immutable and shared by every version that holds them
// unchanged, so a version after a one-cell edit costs one new chunk and a slice of chunk
// pointers, not a copy of the whole list.
type snapshotContent struct {
	Header string       // notebooks: blob of nbformat and metadata
	Chunks []*cellChunk // notebooks: the cells, in order
	Text   string       // text files: blob
}

// cellChunk is a run of a version's cells: [cell id, blob] pairs. Its cells never change once
// a version holds it (the saver reads them off the room goroutine); refs is the store's count
// of versions holding it.
type cellChunk struct {
	cells [][2]string
	refs  int
}

// Chunks are split when they reach chunkMax cells, into halves; an edit rewrites one chunk.
const chunkMax = 64

// contentJSON is the on-disk form of a content: the cells as one list.
type contentJSON struct {
	Header string      `json:"header,omitempty"`
	Cells  [][2]string `json:"cells,omitempty"`
	Text   string      `json:"text,omitempty"`
}

func (c snapshotContent) MarshalJSON() ([]byte, error) {
	return json.Marshal(contentJSON{Header: c.Header, Cells: c.cells(), Text: c.Text})
}

func (c *snapshotContent) UnmarshalJSON(b []byte) error {
	var j contentJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = snapshotContent{Header: j.Header, Text: j.Text, Chunks: chunked(j.Cells, nil)}
	return nil
}

// cells returns the cells as one list.
func (c snapshotContent) cells() [][2]string {
	var out [][2]string
	for _, ch := range c.Chunks {
		out = append(out, ch.cells...)
	}
	return out
}

func (c snapshotContent) numCells() int {
	n := 0
	for _, ch := range c.Chunks {
		n += len(ch.cells)
	}
	return n
}

// chunked cuts a cell list into chunks, reusing those of like whose cells are the same.
func chunked(cells [][2]string, like []*cellChunk) []*cellChunk {
	var out []*cellChunk
	for k := 0; k*chunkMax/2 < len(cells); k++ {
		part := cells[k*chunkMax/2 : min((k+1)*chunkMax/2, len(cells))]
		if k < len(like) && slices.Equal(like[k].cells, part) {
			out = append(out, like[k])
			continue
		}
		out = append(out, &cellChunk{cells: slices.Clone(part)})
	}
	return out
}

// snapshot is immutable once stored (coalescing replaces it), so it can be handed to the saver.
type snapshot struct {
	Version Version         `json:"version"`
	At      time.Time       `json:"at"`
	Authors []string        `json:"by,omitempty"`
	Agent   bool            `json:"agent,omitempty"`  // an edit of this sidecar
	Pinned  bool            `json:"pinned,omitempty"` // never merged with later changes
	Initial bool            `json:"initial,omitempty"`
	Content snapshotContent `json:"content"`
}

// snapshotStore is a room's restorable versions, owned by the room goroutine.
type snapshotStore struct {
	kind   ydoc.Kind
	budget int
	used   int
	blobs  map[string]string // blob id → content (immutable, shared with saved images)
	refs   map[string]int    // blob id → holders (versions for header and text, chunks for cells)
	snaps  []*snapshot       // oldest first
	dirty  bool              // changed since the last save
	fresh  []string          // blobs added by the observe running, dropped if nobody holds them

	// where says which chunk of the newest version holds each cell id, when indexed: an edit
	// then finds the cells it changed without looking at the others.
	where   map[string]*cellChunk
	indexed bool
}

func newSnapshotStore(kind ydoc.Kind, budget int) *snapshotStore {
	return &snapshotStore{kind: kind, budget: budget, blobs: map[string]string{}, refs: map[string]int{}}
}

func (s *snapshotStore) put(data []byte) string {
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:12])
	if _, ok := s.blobs[id]; !ok {
		s.blobs[id] = string(data)
		s.used += len(data)
		s.fresh = append(s.fresh, id)
	}
	return id
}

func (s *snapshotStore) hold(blob string) {
	if blob != "" {
		s.refs[blob]++
	}
}

func (s *snapshotStore) drop(blob string) {
	if blob == "" {
		return
	}
	if s.refs[blob]--; s.refs[blob] <= 0 {
		delete(s.refs, blob)
		s.used -= len(s.blobs[blob])
		delete(s.blobs, blob)
	}
}

// snapshotOverhead estimates what a version costs beside its blobs and chunks (the struct, its
// version and authors, its chunk pointers); chunkOverhead what a chunk costs (a cell-id/blob-id
// pair per cell), counted once however many versions share it. Counting both keeps the budget a
// budget when edits are many and small: 10,000 versions of a one-line change hold little content
// but megabytes of these.
func snapshotOverhead(c snapshotContent) int { return 256 + 8*len(c.Chunks) }

func chunkOverhead(ch *cellChunk) int { return 64 + 64*len(ch.cells) }

func (s *snapshotStore) retain(c snapshotContent) {
	s.hold(c.Header)
	s.hold(c.Text)
	for _, ch := range c.Chunks {
		if ch.refs++; ch.refs == 1 {
			for _, cr := range ch.cells {
				s.hold(cr[1])
			}
			s.used += chunkOverhead(ch)
		}
	}
	s.used += snapshotOverhead(c)
}

func (s *snapshotStore) release(c snapshotContent) {
	s.used -= snapshotOverhead(c)
	for _, ch := range c.Chunks {
		if ch.refs--; ch.refs == 0 {
			s.used -= chunkOverhead(ch)
			for _, cr := range ch.cells {
				s.drop(cr[1])
			}
		}
	}
	s.drop(c.Header)
	s.drop(c.Text)
}

// dropFresh forgets the blobs this observe made that no version holds.
func (s *snapshotStore) dropFresh() {
	for _, id := range s.fresh {
		if s.refs[id] == 0 {
			s.used -= len(s.blobs[id])
			delete(s.blobs, id)
		}
	}
	s.fresh = s.fresh[:0]
}

func (s *snapshotStore) last() *snapshot {
	if len(s.snaps) == 0 {
		return nil
	}
	return s.snaps[len(s.snaps)-1]
}

// cellJSON is how a cell is stored: nbformat fields.
type cellJSON struct {
	ID             string           `json:"id"`
	Type           string           `json:"cell_type"`
	Source         string           `json:"source"`
	Metadata       map[string]any   `json:"metadata"`
	ExecutionCount *int             `json:"execution_count,omitempty"`
	Outputs        []map[string]any `json:"outputs,omitempty"`
	Attachments    map[string]any   `json:"attachments,omitempty"`
}

type headerJSON struct {
	NBFormat      int            `json:"nbformat"`
	NBFormatMinor int            `json:"nbformat_minor"`
	Metadata      map[string]any `json:"metadata"`
}

func encodeCell(c ydoc.Cell) []byte {
	b, _ := json.Marshal(cellJSON{ID: c.ID, Type: c.Type, Source: c.Source, Metadata: c.Metadata, ExecutionCount: c.ExecutionCount, Outputs: c.Outputs, Attachments: c.Attachments})
	return b
}

func (s *snapshotStore) headerBlob(d *ydoc.Doc) (string, error) {
	h, err := d.Header()
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(headerJSON{NBFormat: h.NBFormat, NBFormatMinor: h.NBFormatMinor, Metadata: h.Metadata})
	return s.put(b), nil
}

// contentOf computes the replica's content from scratch, reading only the cells a change touched
// (all of them when prev is nil), and indexes it.
func (s *snapshotStore) contentOf(d *ydoc.Doc, prev *snapshotContent, c ydoc.Change) (snapshotContent, error) {
	if s.kind == ydoc.KindText {
		if prev != nil && !c.Text {
			return *prev, nil
		}
		t, err := d.Text()
		if err != nil {
			return snapshotContent{}, err
		}
		return snapshotContent{Text: s.put([]byte(t))}, nil
	}
	out := snapshotContent{}
	if prev != nil && !c.Meta {
		out.Header = prev.Header
	} else {
		h, err := s.headerBlob(d)
		if err != nil {
			return snapshotContent{}, err
		}
		out.Header = h
	}
	known := map[string]string{}
	if prev != nil {
		for _, cr := range prev.cells() {
			known[cr[0]] = cr[1]
		}
		for _, id := range c.Inserted {
			delete(known, id)
		}
		for _, cc := range c.Cells {
			delete(known, cc.ID)
		}
	}
	ids := d.CellIDs()
	var read []int
	for i, id := range ids {
		if _, ok := known[id]; !ok {
			read = append(read, i)
		}
	}
	if len(read) > 0 {
		cells, err := d.Cells(read)
		if err != nil {
			return snapshotContent{}, err
		}
		for _, cell := range cells {
			known[cell.ID] = s.put(encodeCell(cell))
		}
	}
	list := make([][2]string, len(ids))
	for i, id := range ids {
		list[i] = [2]string{id, known[id]}
	}
	var like []*cellChunk
	if prev != nil {
		like = prev.Chunks
	}
	out.Chunks = chunked(list, like)
	s.index(out)
	return out, nil
}

// index records where the cells of the newest version are. A notebook with repeated cell ids
// (a foreign writer's) is not indexed: its versions are computed from scratch.
func (s *snapshotStore) index(c snapshotContent) {
	s.where = make(map[string]*cellChunk, c.numCells())
	s.indexed = true
	for _, ch := range c.Chunks {
		for _, cr := range ch.cells {
			if _, dup := s.where[cr[0]]; dup {
				s.indexed = false
			}
			s.where[cr[0]] = ch
		}
	}
}

// nextContent derives the content after a change from the newest version's, touching only the
// chunks of the cells the change names. ok is false when it cannot (the change does not fit the
// content it knows): the caller then computes the content from scratch.
func (s *snapshotStore) nextContent(d *ydoc.Doc, prev snapshotContent, c ydoc.Change) (out snapshotContent, changed, ok bool, err error) {
	out = snapshotContent{Header: prev.Header, Chunks: prev.Chunks}
	if c.Meta {
		h, err := s.headerBlob(d)
		if err != nil {
			return out, false, false, err
		}
		changed = h != out.Header
		out.Header = h
	}
	owned := map[*cellChunk]bool{} // chunks made by this change: still editable
	cloned := false
	editable := func(ch *cellChunk) (*cellChunk, int) {
		k := slices.Index(out.Chunks, ch)
		if k < 0 || owned[ch] {
			return ch, k
		}
		if !cloned {
			out.Chunks, cloned = slices.Clone(out.Chunks), true
		}
		cp := &cellChunk{cells: slices.Clone(ch.cells)}
		owned[cp] = true
		out.Chunks[k] = cp
		for _, cr := range cp.cells {
			s.where[cr[0]] = cp
		}
		return cp, k
	}
	remove := func(id string) bool {
		ch, k := editable(s.where[id])
		if k < 0 {
			return false
		}
		i := slices.IndexFunc(ch.cells, func(cr [2]string) bool { return cr[0] == id })
		if i < 0 {
			return false
		}
		ch.cells = slices.Delete(ch.cells, i, i+1)
		delete(s.where, id)
		if len(ch.cells) == 0 {
			out.Chunks = slices.Delete(out.Chunks, k, k+1)
		}
		changed = true
		return true
	}
	// Cells that left (deleted, or re-created elsewhere under their id: placed again below).
	var place []string
	for _, id := range c.Deleted {
		if !remove(id) {
			return out, false, false, nil
		}
	}
	var edited []string
	for _, cc := range c.Cells {
		if slices.Contains(cc.Fields, "*") {
			if !remove(cc.ID) {
				return out, false, false, nil
			}
			place = append(place, cc.ID)
		} else if _, known := s.where[cc.ID]; known {
			edited = append(edited, cc.ID)
		} else {
			return out, false, false, nil
		}
	}
	if c.Moved && len(place) == 0 {
		return out, false, false, nil // cells changed places without being re-created
	}
	place = append(place, c.Inserted...)
	// Read what changed in one go.
	indices := make([]int, 0, len(edited)+len(place))
	for _, id := range append(slices.Clone(edited), place...) {
		i := d.CellIndex(id)
		if i < 0 {
			return out, false, false, nil
		}
		indices = append(indices, i)
	}
	cells, err := d.Cells(indices)
	if err != nil {
		return out, false, false, err
	}
	blobs := make(map[string]string, len(cells))
	for _, cell := range cells {
		blobs[cell.ID] = s.put(encodeCell(cell))
	}
	for _, id := range edited {
		ch := editableIfDiffers(s.where[id], id, blobs[id], editable)
		if ch == nil {
			continue
		}
		i := slices.IndexFunc(ch.cells, func(cr [2]string) bool { return cr[0] == id })
		ch.cells[i][1] = blobs[id]
		changed = true
	}
	// New and re-created cells go right after the cell before them in the document, in document
	// order, so that cell is always placed already.
	at := indices[len(edited):]
	order := make([]int, len(place))
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int { return at[a] - at[b] })
	for _, k := range order {
		id, i := place[k], at[k]
		entry := [2]string{id, blobs[id]}
		if _, dup := s.where[id]; dup {
			return out, false, false, nil
		}
		if i == 0 {
			if len(out.Chunks) == 0 {
				if !cloned {
					out.Chunks, cloned = slices.Clone(out.Chunks), true
				}
				ch := &cellChunk{}
				owned[ch] = true
				out.Chunks = append(out.Chunks, ch)
			}
			ch, _ := editable(out.Chunks[0])
			ch.cells = slices.Insert(ch.cells, 0, entry)
			s.where[id] = ch
			s.split(&out, ch, owned)
			changed = true
			continue
		}
		left := d.CellID(i - 1)
		ch, k := editable(s.where[left])
		if k < 0 {
			return out, false, false, nil
		}
		j := slices.IndexFunc(ch.cells, func(cr [2]string) bool { return cr[0] == left })
		ch.cells = slices.Insert(ch.cells, j+1, entry)
		s.where[id] = ch
		s.split(&out, ch, owned)
		changed = true
	}
	if out.numCells() != d.NumCells() {
		return out, false, false, nil
	}
	return out, changed, true, nil
}

// editableIfDiffers returns the editable chunk of a cell whose blob changes, or nil when it
// keeps its blob.
func editableIfDiffers(ch *cellChunk, id, blob string, editable func(*cellChunk) (*cellChunk, int)) *cellChunk {
	i := slices.IndexFunc(ch.cells, func(cr [2]string) bool { return cr[0] == id })
	if i < 0 || ch.cells[i][1] == blob {
		return nil
	}
	ch, _ = editable(ch)
	return ch
}

// split halves an editable chunk that reached chunkMax cells.
func (s *snapshotStore) split(c *snapshotContent, ch *cellChunk, owned map[*cellChunk]bool) {
	if len(ch.cells) < chunkMax {
		return
	}
	k := slices.Index(c.Chunks, ch)
	half := len(ch.cells) / 2
	tail := &cellChunk{cells: slices.Clone(ch.cells[half:])}
	ch.cells = slices.Clip(ch.cells[:half])
	owned[tail] = true
	c.Chunks = slices.Insert(c.Chunks, k+1, tail)
	for _, cr := range tail.cells {
		s.where[cr[0]] = tail
	}
}

// observe records the replica's state after a change. initial marks the document arriving in a
// (re)sync.
func (s *snapshotStore) observe(d *ydoc.Doc, c ydoc.Change, v Version, authors []string, at time.Time, initial bool) error {
	defer s.dropFresh()
	last := s.last()
	var content snapshotContent
	changed, done := false, false
	if last != nil && !initial && s.kind == ydoc.KindNotebook && s.indexed {
		var err error
		content, changed, done, err = s.nextContent(d, last.Content, c)
		if err != nil {
			s.indexed = false
			return err
		}
	}
	if !done {
		var prev *snapshotContent
		if last != nil && !initial {
			prev = &last.Content
		}
		var err error
		content, err = s.contentOf(d, prev, c)
		if err != nil {
			s.indexed = false
			return err
		}
		changed = last == nil || !content.equal(last.Content)
	}
	if !changed {
		return nil // nothing a reader could see changed (dirty flags, run markers)
	}
	snap := &snapshot{Version: v, At: at, Authors: authors, Agent: c.Local && c.Undoable, Pinned: c.Undoable, Initial: initial, Content: content}
	s.retain(content)
	if last != nil && !last.Pinned && !last.Initial && !snap.Pinned && !initial && at.Sub(last.At) < coalesceWindow && slices.Equal(last.Authors, authors) {
		s.release(last.Content) // a human still typing: this snapshot replaces the last
		s.snaps[len(s.snaps)-1] = snap
	} else {
		s.snaps = append(s.snaps, snap)
	}
	for s.used > s.budget && len(s.snaps) > 1 {
		s.release(s.snaps[0].Content)
		s.snaps = s.snaps[1:]
	}
	s.dirty = true
	return nil
}

// equal compares two contents (chunks shared by both are not looked into).
func (c snapshotContent) equal(o snapshotContent) bool {
	if c.Header != o.Header || c.Text != o.Text {
		return false
	}
	if slices.Equal(c.Chunks, o.Chunks) {
		return true
	}
	return slices.Equal(c.cells(), o.cells())
}

// VersionInfo describes a restorable version.
type VersionInfo struct {
	Version Version
	At      time.Time
	By      []string // who made the changes that led to it
	Agent   bool     // an edit of this sidecar
	Summary string   // what changed since the version before
	Current bool     // the document as it is now
}

// list returns the versions, newest first, each with what changed since the one before it.
func (s *snapshotStore) list() []VersionInfo {
	out := make([]VersionInfo, 0, len(s.snaps))
	for i := len(s.snaps) - 1; i >= 0; i-- {
		sn := s.snaps[i]
		vi := VersionInfo{Version: sn.Version, At: sn.At, By: sn.Authors, Agent: sn.Agent, Current: i == len(s.snaps)-1}
		switch {
		case sn.Initial:
			vi.Summary = "the document as the sidecar found it when joining"
		case i == 0:
			vi.Summary = "the oldest version kept"
		default:
			vi.Summary = s.summary(s.snaps[i-1].Content, sn.Content)
		}
		out = append(out, vi)
	}
	return out
}

// summary says in one line what changed between two contents.
func (s *snapshotStore) summary(a, b snapshotContent) string {
	if s.kind == ydoc.KindText {
		d := ydoc.DiffText(s.blobs[a.Text], s.blobs[b.Text])
		return fmt.Sprintf("text: +%d −%d lines", d.Added, d.Removed)
	}
	// Chunks both hold at the start and at the end are the same cells in the same places: only
	// the chunks between differ.
	ca, cb := a.Chunks, b.Chunks
	for len(ca) > 0 && len(cb) > 0 && ca[0] == cb[0] {
		ca, cb = ca[1:], cb[1:]
	}
	for len(ca) > 0 && len(cb) > 0 && ca[len(ca)-1] == cb[len(cb)-1] {
		ca, cb = ca[:len(ca)-1], cb[:len(cb)-1]
	}
	before, after := map[string]string{}, map[string]string{}
	var orderA, orderB []string
	for _, cr := range (snapshotContent{Chunks: ca}).cells() {
		before[cr[0]] = cr[1]
		orderA = append(orderA, cr[0])
	}
	for _, cr := range (snapshotContent{Chunks: cb}).cells() {
		after[cr[0]] = cr[1]
		orderB = append(orderB, cr[0])
	}
	var added, removed, edited []string
	for _, id := range orderB {
		if old, ok := before[id]; !ok {
			added = append(added, id)
		} else if old != after[id] {
			edited = append(edited, id)
		}
	}
	for _, id := range orderA {
		if _, ok := after[id]; !ok {
			removed = append(removed, id)
		}
	}
	var parts []string
	list := func(verb string, ids []string) {
		if len(ids) == 0 {
			return
		}
		shown := ids
		if len(shown) > 5 {
			shown = shown[:5]
		}
		p := fmt.Sprintf("%s %s", verb, strings.Join(shown, ", "))
		if len(ids) > 5 {
			p += fmt.Sprintf(" and %d more", len(ids)-5)
		}
		parts = append(parts, p)
	}
	list("added", added)
	list("removed", removed)
	list("edited", edited)
	keptA, keptB := keep(orderA, after), keep(orderB, before)
	if len(added) == 0 && len(removed) == 0 && !slices.Equal(keptA, keptB) {
		parts = append(parts, "cells reordered")
	}
	if a.Header != b.Header {
		parts = append(parts, "notebook metadata changed")
	}
	if len(parts) == 0 {
		return "no visible change"
	}
	return strings.Join(parts, "; ")
}

func keep(order []string, in map[string]string) []string {
	var out []string
	for _, id := range order {
		if _, ok := in[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// find returns a snapshot by version.
func (s *snapshotStore) find(v Version) (*snapshot, error) {
	for _, sn := range s.snaps {
		if sn.Version == v {
			return sn, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrNoSuchVersion, v)
}

// notebook rebuilds a notebook from a snapshot.
func (s *snapshotStore) notebook(sn *snapshot) (ydoc.Notebook, error) {
	var h headerJSON
	if err := json.Unmarshal([]byte(s.blobs[sn.Content.Header]), &h); err != nil {
		return ydoc.Notebook{}, fmt.Errorf("version %s: header: %w", sn.Version, err)
	}
	nb := ydoc.Notebook{NBFormat: h.NBFormat, NBFormatMinor: h.NBFormatMinor, Metadata: h.Metadata}
	for _, cr := range sn.Content.cells() {
		var c cellJSON
		if err := json.Unmarshal([]byte(s.blobs[cr[1]]), &c); err != nil {
			return ydoc.Notebook{}, fmt.Errorf("version %s: cell %s: %w", sn.Version, cr[0], err)
		}
		nb.Cells = append(nb.Cells, ydoc.Cell{ID: c.ID, Type: c.Type, Source: c.Source, Metadata: c.Metadata, ExecutionCount: c.ExecutionCount, Outputs: c.Outputs, Attachments: c.Attachments})
	}
	return nb, nil
}

func (s *snapshotStore) text(sn *snapshot) string { return s.blobs[sn.Content.Text] }

func blobsOf(cells [][2]string) []string {
	out := make([]string, len(cells))
	for i, cr := range cells {
		out[i] = cr[1]
	}
	return out
}

// ---- persistence ----

// snapshotFile is the on-disk form of a store.
type snapshotFile struct {
	Format    int               `json:"format"`
	Path      string            `json:"path"`
	Kind      string            `json:"kind"`
	Snapshots []*snapshot       `json:"snapshots"`
	Blobs     map[string]string `json:"blobs"`
}

// snapshotPath is where a document's history lives in a state directory.
func snapshotPath(dir, path string, kind ydoc.Kind) string {
	sum := sha256.Sum256([]byte(kind.String() + ":" + path))
	return filepath.Join(dir, "history", hex.EncodeToString(sum[:12])+".json.gz")
}

// image returns an immutable copy for saving outside the room goroutine (snapshots, their
// chunks and blobs never change once stored; the maps holding them do).
func (s *snapshotStore) image(path string) snapshotFile {
	return snapshotFile{Format: 1, Path: path, Kind: s.kind.String(), Snapshots: slices.Clone(s.snaps), Blobs: maps.Clone(s.blobs)}
}

// saveSnapshots writes a store image atomically (temp file, rename).
func saveSnapshots(file string, img snapshotFile) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(img); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	return nil
}

// loadSnapshots reads a saved store; a missing file is an empty store.
func loadSnapshots(file string, path string, kind ydoc.Kind, budget int) (*snapshotStore, error) {
	s := newSnapshotStore(kind, budget)
	raw, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("load history: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return s, fmt.Errorf("load history %s: %w", file, err)
	}
	var f snapshotFile
	if err := json.NewDecoder(zr).Decode(&f); err != nil {
		return s, fmt.Errorf("load history %s: %w", file, err)
	}
	if f.Format != 1 || f.Path != path || f.Kind != kind.String() {
		return s, fmt.Errorf("load history %s: it is for %s %q (format %d)", file, f.Kind, f.Path, f.Format)
	}
	for id, b := range f.Blobs {
		s.blobs[id] = b
		s.used += len(b)
	}
	for _, sn := range f.Snapshots {
		if sn == nil {
			continue
		}
		ok := true
		for _, b := range append([]string{sn.Content.Header, sn.Content.Text}, blobsOf(sn.Content.cells())...) {
			if _, have := s.blobs[b]; b != "" && !have {
				ok = false
			}
		}
		if ok {
			sn.Pinned = true // a new run's first changes never merge into an old snapshot
			s.snaps = append(s.snaps, sn)
		}
	}
	sort.SliceStable(s.snaps, func(i, j int) bool { return s.snaps[i].At.Before(s.snaps[j].At) })
	var like []*cellChunk
	for _, sn := range s.snaps { // consecutive versions share the chunks they have in common
		sn.Content.Chunks = chunked(sn.Content.cells(), like)
		like = sn.Content.Chunks
		s.retain(sn.Content)
	}
	for id, b := range s.blobs { // blobs no version holds
		if s.refs[id] == 0 {
			s.used -= len(b)
			delete(s.blobs, id)
		}
	}
	for s.used > s.budget && len(s.snaps) > 1 {
		s.release(s.snaps[0].Content)
		s.snaps = s.snaps[1:]
	}
	return s, nil
}
