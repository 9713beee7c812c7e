package ydoc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/rs/zerolog"
	y "github.com/skyterra/y-crdt"
)

// Kind is the document model of a room: what jupyter_ydoc calls a YNotebook or a YUnicode/YFile.
type Kind int

const (
	KindNotebook Kind = iota + 1 // format json, type notebook
	KindText                     // format text, type file
)

func (k Kind) String() string {
	switch k {
	case KindNotebook:
		return "notebook"
	case KindText:
		return "file"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Root names, as jupyter_ydoc defines them.
const (
	rootState  = "state"
	rootMeta   = "meta"
	rootCells  = "cells"
	rootSource = "source"
)

// ErrDocBroken is returned by every method of a Doc after y-crdt panicked on it.
var ErrDocBroken = errors.New("ydoc: document is broken and must be rebuilt")

// Origin tags a transaction so the change it produced can be attributed.
type origin string

const (
	originLocal  origin = "local"
	originRemote origin = "remote"
)

// Doc is one Yjs replica with the typed roots of a Jupyter document. It is not safe for
// concurrent use: one owner (a room loop) drives it. Calls into the CRDT library are
// serialised across all documents by the y-crdt lock.
type Doc struct {
	kind     Kind
	yd       *y.Doc
	log      zerolog.Logger
	broken   error
	clientID uint64

	state  *y.YMap
	meta   *y.YMap   // notebooks
	cells  *y.YArray // notebooks
	source *y.YText  // text files

	// ord is the cell order (cellorder.go), kept up to date after every transaction.
	ord cellOrder

	// set by the library's event handlers during a transaction (y-crdt lock held)
	lastUpdate []byte
	change     *Change

	undo undoState // the agent's undoable edits (undo.go)

	outputFilter OutputFilter // applied by reads (outputfilter.go)
}

// NewDoc creates an empty replica. clientID must be non-zero (the server rebuilds rooms with
// client 0) and never reused for another fresh document.
func NewDoc(kind Kind, clientID uint32, log zerolog.Logger) (*Doc, error) {
	if kind != KindNotebook && kind != KindText {
		return nil, fmt.Errorf("new doc: unknown kind %d", int(kind))
	}
	if clientID == 0 {
		return nil, errors.New("new doc: client id 0 is reserved for the server's deterministic rebuild")
	}
	return newDoc(kind, clientID, log)
}

// NewLoaderDoc creates an empty document written by client 0, as jupyter-collaboration's loader
// writes a room it builds from a file: for fakes of the server (bridge/bridgetest), never for a
// replica.
func NewLoaderDoc(kind Kind, log zerolog.Logger) (*Doc, error) {
	if kind != KindNotebook && kind != KindText {
		return nil, fmt.Errorf("new doc: unknown kind %d", int(kind))
	}
	return newDoc(kind, 0, log)
}

// newDoc is NewDoc without the check on the client id (LoadDeterministic writes as client 0).
func newDoc(kind Kind, clientID uint32, log zerolog.Logger) (*Doc, error) {
	d := &Doc{kind: kind, log: log, clientID: uint64(clientID), ord: newCellOrder()}
	err := withCRDTLock(log, func() error {
		d.yd = y.NewDoc("", true, y.DefaultGCFilter, nil, false)
		d.yd.ClientID = int(clientID)
		state, ok := d.yd.GetMap(rootState).(*y.YMap)
		if !ok {
			return errors.New("state root is not a map")
		}
		d.state = state
		if kind == KindNotebook {
			meta, ok := d.yd.GetMap(rootMeta).(*y.YMap)
			if !ok {
				return errors.New("meta root is not a map")
			}
			d.meta = meta
			d.cells = d.yd.GetArray(rootCells)
		} else {
			d.source = d.yd.GetText(rootSource)
		}
		d.yd.On("update", y.NewObserverHandler(func(v ...any) {
			// Only Transact reads the update: one a remote update produced (a first sync
			// holds the whole document) is neither copied nor kept.
			if len(v) < 2 || v[1] != originLocal {
				return
			}
			if b, ok := v[0].([]byte); ok {
				d.lastUpdate = append([]byte(nil), b...)
			}
		}))
		d.yd.On("afterTransaction", y.NewObserverHandler(func(v ...any) {
			tr, ok := v[0].(*y.Transaction)
			if !ok {
				return
			}
			if d.cells != nil {
				_, structural := tr.Changed[d.cells]
				d.finishOrder(tr, structural, d.cellIDWritten(tr), d.change)
			}
			if d.change != nil {
				d.observe(tr)
			}
			d.recordUndo(tr)
		}))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("new doc: %w", err)
	}
	return d, nil
}

// Kind returns the document model.
func (d *Doc) Kind() Kind { return d.kind }

// ClientID is this replica's Yjs client id.
func (d *Doc) ClientID() uint64 { return d.clientID }

// Err returns ErrDocBroken (wrapped with the cause) once the document can no longer be used.
func (d *Doc) Err() error { return d.broken }

// run executes fn under the y-crdt lock, marking the doc broken on a panic.
func (d *Doc) run(fn func() error) error {
	if d.broken != nil {
		return d.broken
	}
	err := withCRDTLock(d.log, fn)
	if errors.Is(err, ErrCRDTPanic) {
		d.broken = fmt.Errorf("%w: %w", ErrDocBroken, err)
		return d.broken
	}
	return err
}

// Apply integrates a remote update after validating it. It returns what the update contained
// and what it changed in the document.
func (d *Doc) Apply(update []byte) (UpdateMeta, Change, error) {
	meta, err := ParseUpdate(update)
	if err != nil {
		return meta, Change{}, fmt.Errorf("apply update: %w", err)
	}
	if meta.Empty() {
		return meta, Change{}, nil
	}
	change := Change{}
	err = d.run(func() error {
		d.change = &change
		defer func() { d.change = nil }()
		y.ApplyUpdate(d.yd, update, originRemote)
		return nil
	})
	if err != nil {
		return meta, Change{}, fmt.Errorf("apply update: %w", err)
	}
	// y-crdt's text observers run nested local cleanup transactions; the change is remote.
	change.Local = false
	return meta, change.normalize(), nil
}

// HasPending reports whether the replica holds structs or deletes waiting for missing
// dependencies (the cure is another sync step 1).
func (d *Doc) HasPending() bool { return d.PendingFingerprint() != "" }

// PendingFingerprint identifies what is pending ("" when nothing is): the missing clocks and
// the pending bytes. It changes only when the pending set does.
func (d *Doc) PendingFingerprint() string {
	fp := ""
	_ = d.run(func() error {
		st := d.yd.Store
		if st.PendingStructs == nil && len(st.PendingDs) == 0 {
			return nil
		}
		h := sha256.New()
		if ps := st.PendingStructs; ps != nil {
			clients := make([]int, 0, len(ps.Missing))
			for c := range ps.Missing {
				clients = append(clients, c)
			}
			sort.Ints(clients)
			for _, c := range clients {
				fmt.Fprintf(h, "%d:%d;", c, ps.Missing[c])
			}
			h.Write(ps.Update)
		}
		h.Write([]byte{0})
		h.Write(st.PendingDs)
		fp = hex.EncodeToString(h.Sum(nil)[:8])
		return nil
	})
	return fp
}

// StateVector returns the replica's state vector.
func (d *Doc) StateVector() StateVector {
	sv := StateVector{}
	_ = d.run(func() error {
		for client, clock := range y.GetStateVector(d.yd.Store) {
			sv[uint64(client)] = uint64(clock)
		}
		return nil
	})
	return sv
}

// EncodeStateAsUpdate returns everything the replica has that a peer with state vector sv
// lacks, plus the full delete set (a sync step 2 payload). A nil sv means everything.
func (d *Doc) EncodeStateAsUpdate(sv []byte) ([]byte, error) {
	if sv != nil {
		if _, err := DecodeStateVector(sv); err != nil {
			return nil, fmt.Errorf("encode diff: %w", err)
		}
	}
	var out []byte
	err := d.run(func() error {
		out = y.EncodeStateAsUpdate(d.yd, sv)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("encode diff: %w", err)
	}
	return out, nil
}

// Transact runs fn as one local transaction and returns the update it produced (nil when fn
// changed nothing) and the change. fn must validate before it mutates: an error returned after
// a mutation cannot undo what was already integrated, so the update is still returned and must
// still be sent.
func (d *Doc) Transact(fn func(*Txn) error) ([]byte, Change, error) {
	change := Change{}
	var fnErr error
	err := d.run(func() error {
		d.change = &change
		d.lastUpdate = nil
		defer func() {
			change.Undoable = d.undo.mode != undoOff
			d.change, d.undo.mode = nil, undoOff
		}()
		d.yd.Transact(func(tr *y.Transaction) {
			// A panic must not escape the library's Transact: it has no deferred cleanup and
			// would wedge the doc. Recover here, let the transaction finish, then re-panic so
			// the doc is marked broken.
			defer func() {
				if r := recover(); r != nil {
					fnErr = fmt.Errorf("%w: %v", ErrCRDTPanic, r)
				}
			}()
			fnErr = fn(&Txn{d: d, tr: tr})
		}, originLocal)
		if errors.Is(fnErr, ErrCRDTPanic) {
			return fnErr
		}
		return nil
	})
	if err != nil {
		return nil, Change{}, fmt.Errorf("transact: %w", err)
	}
	update := d.lastUpdate
	d.lastUpdate = nil
	change.Local = true
	return update, change.normalize(), fnErr
}

// Change describes what one transaction changed.
type Change struct {
	Local    bool
	EditID   uint64       // the edit (Replica.Propose's id) that produced a local change; 0 for remote changes
	Inserted []string     // cell ids added
	Deleted  []string     // cell ids removed
	Moved    bool         // the order of surviving cells changed
	Cells    []CellChange // cells changed in place (not in Inserted)
	Meta     bool         // notebook metadata or nbformat changed
	State    []string     // state keys changed (dirty, path, hash, document_id, ...)
	Text     bool         // a text document's source changed
	Clients  []uint64     // client ids that contributed new items
	// Undoable marks the agent's own edits (and its undos and redos): the points a document
	// history is worth keeping.
	Undoable bool
}

// CellChange lists the fields of one cell that changed.
type CellChange struct {
	ID     string
	Fields []string // source, outputs, metadata, execution_count, execution_state, cell_type, ...
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool {
	return len(c.Inserted) == 0 && len(c.Deleted) == 0 && !c.Moved && len(c.Cells) == 0 &&
		!c.Meta && len(c.State) == 0 && !c.Text
}

// Merge folds a later change into c.
func (c *Change) Merge(o Change) {
	c.Local = c.Local || o.Local
	c.Undoable = c.Undoable || o.Undoable
	c.EditID = 0 // a merge is no single edit's
	c.Inserted = append(c.Inserted, o.Inserted...)
	c.Deleted = append(c.Deleted, o.Deleted...)
	c.Moved = c.Moved || o.Moved
	c.Cells = append(c.Cells, o.Cells...)
	c.Meta = c.Meta || o.Meta
	c.State = append(c.State, o.State...)
	c.Text = c.Text || o.Text
	c.Clients = append(c.Clients, o.Clients...)
	*c = c.normalize()
}

// normalize sorts and deduplicates, and drops cell changes for inserted or deleted cells.
func (c Change) normalize() Change {
	c.Inserted = dedupe(c.Inserted)
	c.Deleted = dedupe(c.Deleted)
	c.State = dedupe(c.State)
	c.Clients = slices.Compact(slices.Sorted(slices.Values(c.Clients)))
	byID := map[string][]string{}
	for _, cc := range c.Cells {
		if slices.Contains(c.Inserted, cc.ID) || slices.Contains(c.Deleted, cc.ID) {
			continue
		}
		byID[cc.ID] = append(byID[cc.ID], cc.Fields...)
	}
	c.Cells = nil // a fresh array: copies of a Change must not share it
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c.Cells = append(c.Cells, CellChange{ID: id, Fields: dedupe(byID[id])})
	}
	return c
}

func dedupe(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// observe classifies the types a transaction touched. Built on Transaction.Changed rather than
// deep observers, which y-crdt gets wrong.
func (d *Doc) observe(tr *y.Transaction) {
	c := d.change
	for client, clock := range tr.AfterState {
		if tr.BeforeState[client] != clock {
			c.Clients = append(c.Clients, uint64(client))
		}
	}
	for key, subs := range tr.Changed {
		t, ok := key.(y.IAbstractType)
		if !ok {
			continue
		}
		switch {
		case d.state != nil && t == y.IAbstractType(d.state):
			for k := range subs {
				if s, ok := k.(string); ok {
					c.State = append(c.State, s)
				}
			}
			continue
		case d.source != nil && t == y.IAbstractType(d.source):
			c.Text = true
			continue
		case d.cells != nil && t == y.IAbstractType(d.cells):
			continue // the order's changes are recorded by finishOrder
		case d.meta != nil && t == y.IAbstractType(d.meta):
			c.Meta = true
			continue
		}
		root, cell, field := d.locate(t)
		switch {
		case root == d.meta && d.meta != nil:
			c.Meta = true
		case cell != nil:
			if field == "" { // the cell map itself: its changed keys
				for k := range subs {
					if s, ok := k.(string); ok {
						c.Cells = append(c.Cells, CellChange{ID: cellIDOf(cell), Fields: []string{s}})
					}
				}
			} else {
				c.Cells = append(c.Cells, CellChange{ID: cellIDOf(cell), Fields: []string{field}})
			}
		}
	}
}

// cellIDWritten reports whether a transaction wrote the id key of a cell map.
func (d *Doc) cellIDWritten(tr *y.Transaction) bool {
	for key, subs := range tr.Changed {
		m, ok := key.(*y.YMap)
		if !ok || !subs.Has("id") {
			continue
		}
		if it := m.GetItem(); it != nil && isChildOf(it, d.cells) {
			return true
		}
	}
	return false
}

// locate walks up from a nested type to its root. For types inside a cell it returns the cell
// map and the cell key under which the type lives ("" when t is the cell map itself).
func (d *Doc) locate(t y.IAbstractType) (root any, cell *y.YMap, field string) {
	sub := ""
	for t != nil {
		item := t.GetItem()
		if item == nil {
			return t, nil, ""
		}
		if item.Deleted() {
			return nil, nil, ""
		}
		parent, ok := item.Parent.(y.IAbstractType)
		if !ok {
			return nil, nil, ""
		}
		if d.cells != nil && parent == y.IAbstractType(d.cells) {
			m, _ := t.(*y.YMap)
			return d.cells, m, sub
		}
		sub = item.ParentSub
		t = parent
	}
	return nil, nil, ""
}

func cellIDOf(m *y.YMap) string {
	v, _ := mapGet(m, "id")
	s, _ := v.(string)
	return s
}
