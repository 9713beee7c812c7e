package bridge

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

type snapshotContent struct {
	Header string      `json:"header,omitempty"` // notebooks: blob of nbformat and metadata
	Cells  [][2]string `json:"cells,omitempty"`  // notebooks: [cell id, blob], in order
	Text   string      `json:"text,omitempty"`   // text files: blob
}

func (c snapshotContent) blobs() []string {
	out := make([]string, 0, len(c.Cells)+1)
	if c.Header != "" {
		out = append(out, c.Header)
	}
	if c.Text != "" {
		out = append(out, c.Text)
	}
	for _, cr := range c.Cells {
		out = append(out, cr[1])
	}
	return out
}

func (c snapshotContent) equal(o snapshotContent) bool {
	return c.Header == o.Header && c.Text == o.Text && slices.Equal(c.Cells, o.Cells)
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

type snapshotStore struct {
	kind   ydoc.Kind
	budget int
	used   int
	blobs  map[string][]byte
	refs   map[string]int
	snaps  []*snapshot // oldest first
	dirty  bool        // changed since the last save
}

func newSnapshotStore(kind ydoc.Kind, budget int) *snapshotStore {
	return &snapshotStore{kind: kind, budget: budget, blobs: map[string][]byte{}, refs: map[string]int{}}
}

func (s *snapshotStore) put(data []byte) string {
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:12])
	if _, ok := s.blobs[id]; !ok {
		s.blobs[id] = data
		s.used += len(data)
	}
	return id
}

func (s *snapshotStore) retain(c snapshotContent) {
	for _, b := range c.blobs() {
		s.refs[b]++
	}
	s.used += snapshotOverhead(c)
}

// snapshotOverhead estimates what a snapshot costs beside its blobs (the struct, its version and
// authors, a cell-id/blob-id pair per cell). Counting it keeps the budget a budget when edits are
// many and small: 10,000 versions of a one-line change hold little content but megabytes of
// these.
func snapshotOverhead(c snapshotContent) int {
	return 256 + 96*len(c.Cells)
}

func (s *snapshotStore) release(c snapshotContent) {
	s.used -= snapshotOverhead(c)
	for _, b := range c.blobs() {
		if s.refs[b]--; s.refs[b] <= 0 {
			delete(s.refs, b)
			s.used -= len(s.blobs[b])
			delete(s.blobs, b)
		}
	}
}

// gc drops blobs no snapshot refers to (made for a content that was then not stored).
func (s *snapshotStore) gc() {
	for id, data := range s.blobs {
		if s.refs[id] == 0 {
			s.used -= len(data)
			delete(s.blobs, id)
		}
	}
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

// contentOf computes the replica's content, reading only the cells a change touched (all of
// them when prev is nil).
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
		h, err := d.Header()
		if err != nil {
			return snapshotContent{}, err
		}
		b, _ := json.Marshal(headerJSON{NBFormat: h.NBFormat, NBFormatMinor: h.NBFormatMinor, Metadata: h.Metadata})
		out.Header = s.put(b)
	}
	known := map[string]string{}
	if prev != nil {
		for _, cr := range prev.Cells {
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
	out.Cells = make([][2]string, len(ids))
	for i, id := range ids {
		out.Cells[i] = [2]string{id, known[id]}
	}
	return out, nil
}

// observe records the replica's state after a change. initial marks the document arriving in a
// (re)sync.
func (s *snapshotStore) observe(d *ydoc.Doc, c ydoc.Change, v Version, authors []string, at time.Time, initial bool) error {
	last := s.last()
	var prev *snapshotContent
	if last != nil && !initial {
		prev = &last.Content
	}
	content, err := s.contentOf(d, prev, c)
	if err != nil {
		return err
	}
	if last != nil && content.equal(last.Content) {
		s.gc()
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
	s.gc()
	for s.used > s.budget && len(s.snaps) > 1 {
		s.release(s.snaps[0].Content)
		s.snaps = s.snaps[1:]
	}
	s.dirty = true
	return nil
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
		d := ydoc.DiffText(string(s.blobs[a.Text]), string(s.blobs[b.Text]))
		return fmt.Sprintf("text: +%d −%d lines", d.Added, d.Removed)
	}
	before, after := map[string]string{}, map[string]string{}
	var orderA, orderB []string
	for _, cr := range a.Cells {
		before[cr[0]] = cr[1]
		orderA = append(orderA, cr[0])
	}
	for _, cr := range b.Cells {
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
	if err := json.Unmarshal(s.blobs[sn.Content.Header], &h); err != nil {
		return ydoc.Notebook{}, fmt.Errorf("version %s: header: %w", sn.Version, err)
	}
	nb := ydoc.Notebook{NBFormat: h.NBFormat, NBFormatMinor: h.NBFormatMinor, Metadata: h.Metadata}
	for _, cr := range sn.Content.Cells {
		var c cellJSON
		if err := json.Unmarshal(s.blobs[cr[1]], &c); err != nil {
			return ydoc.Notebook{}, fmt.Errorf("version %s: cell %s: %w", sn.Version, cr[0], err)
		}
		nb.Cells = append(nb.Cells, ydoc.Cell{ID: c.ID, Type: c.Type, Source: c.Source, Metadata: c.Metadata, ExecutionCount: c.ExecutionCount, Outputs: c.Outputs, Attachments: c.Attachments})
	}
	return nb, nil
}

func (s *snapshotStore) text(sn *snapshot) string { return string(s.blobs[sn.Content.Text]) }

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

// image returns an immutable copy for saving outside the room goroutine.
func (s *snapshotStore) image(path string) snapshotFile {
	f := snapshotFile{Format: 1, Path: path, Kind: s.kind.String(), Snapshots: slices.Clone(s.snaps), Blobs: make(map[string]string, len(s.blobs))}
	for id, b := range s.blobs {
		f.Blobs[id] = string(b)
	}
	return f
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
		s.blobs[id] = []byte(b)
		s.used += len(b)
	}
	for _, sn := range f.Snapshots {
		ok := true
		for _, b := range sn.Content.blobs() {
			if _, have := s.blobs[b]; !have {
				ok = false
			}
		}
		if ok && sn != nil {
			sn.Pinned = true // a new run's first changes never merge into an old snapshot
			s.snaps = append(s.snaps, sn)
			s.retain(sn.Content)
		}
	}
	sort.SliceStable(s.snaps, func(i, j int) bool { return s.snaps[i].At.Before(s.snaps[j].At) })
	s.gc()
	for s.used > s.budget && len(s.snaps) > 1 {
		s.release(s.snaps[0].Content)
		s.snaps = s.snaps[1:]
	}
	return s, nil
}
