package ydoc

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	y "github.com/skyterra/y-crdt"
)

// The notebook model, as jupyter_ydoc 4.x and @jupyter/ydoc 4.x build it:
//   meta:  Y.Map {nbformat, nbformat_minor, metadata: Y.Map of plain values}
//   cells: Y.Array of Y.Map {id, cell_type, source: Y.Text, metadata: Y.Map,
//          code only: execution_count, outputs: Y.Array of Y.Map (stream text: Y.Text), execution_state}
//   state: Y.Map {dirty, path, hash, document_id}

// Cell types.
const (
	CellCode     = "code"
	CellMarkdown = "markdown"
	CellRaw      = "raw"
)

// ValidCellType reports whether t is a notebook cell type.
func ValidCellType(t string) bool { return t == CellCode || t == CellMarkdown || t == CellRaw }

// Cell is a plain copy of one cell.
type Cell struct {
	ID             string
	Type           string
	Source         string
	Metadata       map[string]any
	ExecutionCount *int             // code cells; nil is null
	ExecutionState string           // code cells: idle or running ("" when absent)
	Outputs        []map[string]any // code cells, nbformat output dicts
	Attachments    map[string]any   // markdown and raw cells, when present
}

// Notebook is a plain copy of a notebook replica.
type Notebook struct {
	NBFormat      int
	NBFormatMinor int
	Metadata      map[string]any
	Cells         []Cell
}

// Errors for edits that address something that is not there.
var (
	ErrWrongKind    = errors.New("ydoc: operation does not apply to this document kind")
	ErrCellNotFound = errors.New("ydoc: cell not found")
	ErrOutOfRange   = errors.New("ydoc: index out of range")
)

// NewCellID returns a fresh cell id in the form JupyterLab uses (a uuid4).
func NewCellID() string { return uuid.NewString() }

// Notebook returns a copy of the whole notebook.
func (d *Doc) Notebook() (Notebook, error) {
	return d.readNotebookWith(func() Notebook {
		nb := d.readNotebook()
		d.filterOutputs(nb.Cells)
		return nb
	})
}

// Header returns the notebook without its cells (nbformat versions and metadata).
func (d *Doc) Header() (Notebook, error) { return d.readNotebookWith(d.readNotebookHeader) }

// readNotebookWith runs a notebook reader under the engine lock.
func (d *Doc) readNotebookWith(read func() Notebook) (Notebook, error) {
	if d.kind != KindNotebook {
		return Notebook{}, ErrWrongKind
	}
	var nb Notebook
	err := d.run(func() error {
		nb = read()
		return nil
	})
	return nb, err
}

// CellIDs returns the ids of the cells in order.
func (d *Doc) CellIDs() []string {
	if d.kind != KindNotebook {
		return nil
	}
	var ids []string
	_ = d.run(func() error {
		ids = slices.Clone(d.ord.ids)
		return nil
	})
	return ids
}

// OutputCounts returns how many outputs each cell holds, in order, without reading them.
func (d *Doc) OutputCounts() []int {
	var out []int
	_ = d.run(func() error {
		out = make([]int, len(d.ord.maps))
		for i, m := range d.ord.maps {
			raw, _ := mapGet(m, "outputs")
			switch a := raw.(type) {
			case *y.YArray:
				out[i] = len(arrayItems(a))
			case y.ArrayAny:
				out[i] = len(a)
			}
		}
		return nil
	})
	return out
}

// NumCells returns the number of cells.
func (d *Doc) NumCells() int {
	n := 0
	_ = d.run(func() error {
		n = len(d.ord.ids)
		return nil
	})
	return n
}

// CellIndex returns the index of the cell with the id, or -1.
func (d *Doc) CellIndex(id string) int {
	i := -1
	if d.kind != KindNotebook {
		return i
	}
	_ = d.run(func() error {
		i = d.ord.indexOfID(id)
		return nil
	})
	return i
}

// CellID returns the id of the cell at index i ("" when out of range).
func (d *Doc) CellID(i int) string {
	id := ""
	_ = d.run(func() error {
		if i >= 0 && i < len(d.ord.ids) {
			id = d.ord.ids[i]
		}
		return nil
	})
	return id
}

// Cells returns copies of the cells at the given indices (all cells when indices is nil).
func (d *Doc) Cells(indices []int) ([]Cell, error) {
	if d.kind != KindNotebook {
		return nil, ErrWrongKind
	}
	var out []Cell
	err := d.run(func() error {
		maps := d.ord.maps
		if indices == nil {
			for _, m := range maps {
				out = append(out, readCell(m))
			}
			d.filterOutputs(out)
			return nil
		}
		for _, i := range indices {
			if i < 0 || i >= len(maps) {
				return fmt.Errorf("cell %d of %d: %w", i, len(maps), ErrOutOfRange)
			}
			out = append(out, readCell(maps[i]))
		}
		d.filterOutputs(out)
		return nil
	})
	return out, err
}

// State returns a copy of the state map (dirty, path, hash, document_id, ...).
func (d *Doc) State() map[string]any {
	var st map[string]any
	_ = d.run(func() error {
		st = mapValues(d.state)
		return nil
	})
	return st
}

func (d *Doc) readNotebook() Notebook {
	nb := d.readNotebookHeader()
	for _, m := range d.ord.maps {
		nb.Cells = append(nb.Cells, readCell(m))
	}
	return nb
}

func (d *Doc) readNotebookHeader() Notebook {
	nb := Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}}
	if v, ok := mapGet(d.meta, "nbformat"); ok {
		if n, ok := asInt(v); ok {
			nb.NBFormat = n
		}
	}
	if v, ok := mapGet(d.meta, "nbformat_minor"); ok {
		if n, ok := asInt(v); ok {
			nb.NBFormatMinor = n
		}
	}
	if v, ok := mapGet(d.meta, "metadata"); ok {
		if m, ok := fromAny(v).(map[string]any); ok {
			nb.Metadata = m
		}
	}
	return nb
}

func readCell(m *y.YMap) Cell {
	c := Cell{Metadata: map[string]any{}}
	for _, key := range mapKeys(m) {
		raw, _ := mapGet(m, key)
		switch key {
		case "id":
			c.ID, _ = raw.(string)
		case "cell_type":
			c.Type, _ = raw.(string)
		case "source":
			switch s := raw.(type) {
			case *y.YText:
				c.Source = textString(s)
			case string: // tolerated: old or foreign writers
				c.Source = s
			}
		case "metadata":
			if md, ok := fromAny(raw).(map[string]any); ok {
				c.Metadata = md
			}
		case "execution_count":
			if n, ok := asInt(raw); ok {
				c.ExecutionCount = &n
			}
		case "execution_state":
			c.ExecutionState, _ = raw.(string)
		case "outputs":
			c.Outputs = append(c.Outputs, outputsOf(raw)...)
		case "attachments":
			if a, ok := fromAny(raw).(map[string]any); ok && len(a) > 0 {
				c.Attachments = a
			}
		}
	}
	if c.Type == CellCode && c.Outputs == nil {
		c.Outputs = []map[string]any{}
	}
	return c
}

// Txn edits a document inside one transaction. Mutators validate their arguments before they
// change anything; a batch is all-or-nothing only if its function validates everything first.
type Txn struct {
	d  *Doc
	tr *y.Transaction
	// byWords: text changes are diffed by words and placed at boundaries (diffTextWords), for
	// a restore made while others type (the crash rescue).
	byWords bool
	// keepWeight: how much a restore should avoid moving a cell (a move re-creates the cell, and
	// what someone types in it meanwhile is lost); nil: every cell alike.
	keepWeight func(id string) int
	// clean: edits do not mark the document dirty (a server loading a file: LoadDeterministic).
	clean bool
}

// Kind returns the document model.
func (tx *Txn) Kind() Kind { return tx.d.kind }

// Notebook returns a copy of the notebook as it is inside the transaction.
func (tx *Txn) Notebook() (Notebook, error) {
	if tx.d.kind != KindNotebook {
		return Notebook{}, ErrWrongKind
	}
	tx.order()
	return tx.d.readNotebook(), nil
}

// order is the cell order as it is inside the transaction.
func (tx *Txn) order() *cellOrder { return tx.d.orderIn(tx.tr) }

// NumCells returns the number of cells.
func (tx *Txn) NumCells() int {
	if tx.d.kind != KindNotebook {
		return 0
	}
	return len(tx.order().maps)
}

// CellIDs returns the cell ids in order.
func (tx *Txn) CellIDs() []string {
	if tx.d.kind != KindNotebook {
		return nil
	}
	return slices.Clone(tx.order().ids)
}

// CellIndex returns the index of the cell with the id, or -1.
func (tx *Txn) CellIndex(id string) int {
	if tx.d.kind != KindNotebook {
		return -1
	}
	return tx.order().indexOfID(id)
}

// CellID returns the id of the cell at index i ("" when out of range).
func (tx *Txn) CellID(i int) string {
	if tx.d.kind != KindNotebook {
		return ""
	}
	ids := tx.order().ids
	if i < 0 || i >= len(ids) {
		return ""
	}
	return ids[i]
}

// Cell returns a copy of the cell at index i.
func (tx *Txn) Cell(i int) (Cell, error) {
	m, err := tx.cellMap(i)
	if err != nil {
		return Cell{}, err
	}
	return readCell(m), nil
}

func (tx *Txn) cellMap(i int) (*y.YMap, error) {
	if tx.d.kind != KindNotebook {
		return nil, ErrWrongKind
	}
	maps := tx.order().maps
	if i < 0 || i >= len(maps) {
		return nil, fmt.Errorf("cell index %d of %d: %w", i, len(maps), ErrOutOfRange)
	}
	return maps[i], nil
}

// Cells are the Y.Maps of the cells array; anything else a peer put there is skipped when
// reading, so cell indices (model indices) are converted to array positions before use.

// rawIndex is the array position of cell i (the array's length for i == the number of cells).
func (tx *Txn) rawIndex(i int) int {
	if o := tx.order(); tx.d.cells.GetLength() == len(o.maps) {
		return i // only cells in the array: positions are indices
	}
	pos, n := 0, 0
	for _, v := range arrayItems(tx.d.cells) {
		if _, ok := v.(*y.YMap); ok {
			if n == i {
				return pos
			}
			n++
		}
		pos++
	}
	return pos
}

// deleteCells deletes cells [index, index+count), deeply, leaving non-cell entries alone.
func (tx *Txn) deleteCells(index, count int) {
	defer tx.d.markStale(tx.tr)
	if o := tx.order(); tx.d.cells.GetLength() == len(o.maps) { // only cells: positions are indices
		maps := slices.Clone(o.maps[index : index+count])
		tx.d.cells.Delete(index, count)
		for _, m := range maps {
			deleteChildren(tx.tr, m)
		}
		return
	}
	var positions []int
	pos, n := 0, 0
	for _, v := range arrayItems(tx.d.cells) {
		if _, ok := v.(*y.YMap); ok {
			if n >= index && n < index+count {
				positions = append(positions, pos)
			}
			n++
		}
		pos++
	}
	for k := len(positions) - 1; k >= 0; k-- { // from the end: earlier positions stay valid
		tx.deleteRange(tx.d.cells, positions[k], 1)
	}
}

// validateCell checks a cell before it is written.
func validateCell(c *Cell) error {
	if c.Type == "" {
		c.Type = CellCode
	}
	if !ValidCellType(c.Type) {
		return fmt.Errorf("cell type %q: must be code, markdown or raw", c.Type)
	}
	if c.ID == "" {
		c.ID = NewCellID()
	}
	for k, v := range c.Metadata {
		if _, err := toAny(v); err != nil {
			return fmt.Errorf("cell metadata %q: %w", k, err)
		}
	}
	for i, o := range c.Outputs {
		if _, err := toAny(map[string]any(o)); err != nil {
			return fmt.Errorf("cell output %d: %w", i, err)
		}
	}
	if _, err := toAny(c.Attachments); c.Attachments != nil && err != nil {
		return fmt.Errorf("cell attachments: %w", err)
	}
	return nil
}

// InsertCells inserts cells at index (0..NumCells). Empty ids get fresh uuids; the ids used are
// written back into cells.
func (tx *Txn) InsertCells(index int, cells []Cell) error {
	if tx.d.kind != KindNotebook {
		return ErrWrongKind
	}
	n := tx.NumCells()
	if index < 0 || index > n {
		return fmt.Errorf("insert at %d of %d: %w", index, n, ErrOutOfRange)
	}
	adding := make(map[string]bool, len(cells))
	for i := range cells {
		if err := validateCell(&cells[i]); err != nil {
			return err
		}
		if adding[cells[i].ID] || tx.CellIndex(cells[i].ID) >= 0 {
			return fmt.Errorf("cell id %q is already in the notebook", cells[i].ID)
		}
		adding[cells[i].ID] = true
	}
	return tx.insertCellMaps(index, cells)
}

// insertCellMaps integrates empty cell maps at index and fills them with validated cells.
func (tx *Txn) insertCellMaps(index int, cells []Cell) error {
	maps := make(y.ArrayAny, len(cells))
	for i := range cells {
		maps[i] = y.NewYMap(nil)
	}
	defer tx.d.markStale(tx.tr)
	tx.d.cells.Insert(tx.rawIndex(index), maps)
	for i := range cells {
		if err := tx.fillCell(maps[i].(*y.YMap), cells[i]); err != nil {
			return err
		}
	}
	return tx.markDirty()
}

// fillCell writes a validated cell into a freshly integrated, empty cell map, in the key order
// @jupyter/ydoc's createCell uses.
func (tx *Txn) fillCell(m *y.YMap, c Cell) error {
	m.Set("source", y.NewYText(c.Source))
	md := y.NewYMap(nil)
	m.Set("metadata", md)
	if err := setMapAny(tx.tr, m, "cell_type", c.Type); err != nil {
		return err
	}
	if err := setMapAny(tx.tr, m, "id", c.ID); err != nil {
		return err
	}
	for _, k := range sortedKeys(c.Metadata) {
		if err := setMapAny(tx.tr, md, k, c.Metadata[k]); err != nil {
			return err
		}
	}
	switch c.Type {
	case CellCode:
		outs := y.NewYArray()
		m.Set("outputs", outs)
		var count any
		if c.ExecutionCount != nil {
			count = *c.ExecutionCount
		}
		if err := setMapAny(tx.tr, m, "execution_count", count); err != nil {
			return err
		}
		state := c.ExecutionState
		if state == "" {
			state = "idle"
		}
		if err := setMapAny(tx.tr, m, "execution_state", state); err != nil {
			return err
		}
		if len(c.Outputs) > 0 {
			if err := tx.insertOutputs(outs, 0, c.Outputs); err != nil {
				return err
			}
		}
	default:
		if len(c.Attachments) > 0 {
			if err := setMapAny(tx.tr, m, "attachments", c.Attachments); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteCells deletes count cells starting at index.
func (tx *Txn) DeleteCells(index, count int) error {
	if tx.d.kind != KindNotebook {
		return ErrWrongKind
	}
	n := tx.NumCells()
	if index < 0 || count < 0 || index+count > n {
		return fmt.Errorf("delete %d cells at %d of %d: %w", count, index, n, ErrOutOfRange)
	}
	if count == 0 {
		return nil
	}
	tx.deleteCells(index, count)
	return tx.markDirty()
}

// MoveCells moves count cells starting at from so that the first lands at index to of the
// resulting list. Like @jupyter/ydoc, a move is delete plus re-create with identical content
// (ids, outputs and metadata kept), because Yjs 13 has no move.
func (tx *Txn) MoveCells(from, count, to int) error {
	if tx.d.kind != KindNotebook {
		return ErrWrongKind
	}
	n := tx.NumCells()
	if from < 0 || count <= 0 || from+count > n {
		return fmt.Errorf("move %d cells from %d of %d: %w", count, from, n, ErrOutOfRange)
	}
	if to < 0 || to > n-count {
		return fmt.Errorf("move to %d (valid 0..%d): %w", to, n-count, ErrOutOfRange)
	}
	if to == from {
		return nil
	}
	maps := tx.order().maps
	clones := make([]Cell, count)
	for i := 0; i < count; i++ {
		clones[i] = readCell(maps[from+i])
	}
	tx.deleteCells(from, count)
	return tx.insertCellMaps(to, clones)
}

// SetSource replaces the source of cell i with a minimal diff, so other users' cursors in the
// unchanged parts stay where they are.
func (tx *Txn) SetSource(i int, src string) error {
	m, err := tx.cellMap(i)
	if err != nil {
		return err
	}
	raw, _ := mapGet(m, "source")
	t, ok := raw.(*y.YText)
	if !ok { // foreign writer stored a plain string: replace it with a Y.Text
		m.Set("source", y.NewYText(src))
		return tx.markDirty()
	}
	if tx.applyTextDiff(t, textString(t), src) {
		return tx.markDirty()
	}
	return nil
}

// SetCellType changes a cell's type. The cell is re-created under the same id with the same
// source, metadata and attachments, as JupyterLab does; outputs go when it stops being code.
func (tx *Txn) SetCellType(i int, cellType string) error {
	if !ValidCellType(cellType) {
		return fmt.Errorf("cell type %q: must be code, markdown or raw", cellType)
	}
	m, err := tx.cellMap(i)
	if err != nil {
		return err
	}
	c := readCell(m)
	if c.Type == cellType {
		return nil
	}
	c.Type = cellType
	if cellType != CellCode {
		c.Outputs, c.ExecutionCount, c.ExecutionState = nil, nil, ""
	}
	tx.deleteCells(i, 1)
	fresh := y.NewYMap(nil)
	defer tx.d.markStale(tx.tr)
	tx.d.cells.Insert(tx.rawIndex(i), y.ArrayAny{fresh})
	if err := tx.fillCell(fresh, c); err != nil {
		return err
	}
	return tx.markDirty()
}

// SetCellMetadata replaces the metadata of cell i key by key: removed keys are deleted, changed
// keys rewritten, unchanged keys untouched.
func (tx *Txn) SetCellMetadata(i int, md map[string]any) error {
	for k, v := range md {
		if _, err := toAny(v); err != nil {
			return fmt.Errorf("metadata %q: %w", k, err)
		}
	}
	m, err := tx.cellMap(i)
	if err != nil {
		return err
	}
	return tx.replaceMetadata(m, md)
}

// replaceMetadata makes the "metadata" map of parent (a cell, or the notebook's meta) hold
// exactly md, key by key, and marks the document dirty when that changed something.
func (tx *Txn) replaceMetadata(parent *y.YMap, md map[string]any) error {
	raw, _ := mapGet(parent, "metadata")
	ymd, ok := raw.(*y.YMap)
	if !ok {
		ymd = y.NewYMap(nil)
		parent.Set("metadata", ymd)
	}
	changed, err := tx.replaceMap(ymd, md)
	if err != nil {
		return err
	}
	if changed {
		return tx.markDirty()
	}
	return nil
}

func (tx *Txn) replaceMap(ymd *y.YMap, md map[string]any) (bool, error) {
	current := mapValues(ymd)
	changed := false
	for _, k := range sortedKeys(current) {
		if _, keep := md[k]; !keep {
			ymd.Delete(k)
			changed = true
		}
	}
	for _, k := range sortedKeys(md) {
		if old, ok := current[k]; ok && jsonEqual(old, md[k]) {
			continue
		}
		if err := setMapAny(tx.tr, ymd, k, md[k]); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// SetNotebookMetadata replaces the notebook-level metadata key by key.
func (tx *Txn) SetNotebookMetadata(md map[string]any) error {
	if tx.d.kind != KindNotebook {
		return ErrWrongKind
	}
	for k, v := range md {
		if _, err := toAny(v); err != nil {
			return fmt.Errorf("metadata %q: %w", k, err)
		}
	}
	return tx.replaceMetadata(tx.d.meta, md)
}

// DeleteCellMetadataKey removes one metadata key of a cell (no-op when absent).
func (tx *Txn) DeleteCellMetadataKey(i int, key string) error {
	m, err := tx.cellMap(i)
	if err != nil {
		return err
	}
	if md, ok := mustGet(m, "metadata").(*y.YMap); ok {
		if _, present := mapGet(md, key); present {
			md.Delete(key)
			return tx.markDirty()
		}
	}
	return nil
}

// StateValue reads one key of the state map.
func (tx *Txn) StateValue(key string) (any, bool) {
	v, ok := mapGet(tx.d.state, key)
	if !ok {
		return nil, false
	}
	return fromAny(v), true
}

// DeleteState removes a key of the state map.
func (tx *Txn) DeleteState(key string) {
	if _, ok := mapGet(tx.d.state, key); ok {
		tx.d.state.Delete(key)
	}
}

func mustGet(m *y.YMap, key string) any {
	v, _ := mapGet(m, key)
	return v
}

// SetState sets a key of the state map if its value differs.
func (tx *Txn) SetState(key string, value any) error {
	if old, ok := mapGet(tx.d.state, key); ok && jsonEqual(fromAny(old), value) {
		return nil
	}
	return setMapAny(tx.tr, tx.d.state, key, value)
}

// markDirty sets state.dirty = true after an edit, as @jupyter/ydoc 4.x does.
func (tx *Txn) markDirty() error {
	if tx.clean {
		return nil
	}
	return tx.SetState("dirty", true)
}

func newPrelimMap() *y.YMap { return y.NewYMap(nil) }

// deleteRange deletes array elements and, for shared types among them, everything inside, as
// Yjs does: y-crdt leaves a deleted type's children live (ContentType.Delete is a TODO), so
// they would never be garbage-collected and our delete set would differ from a yjs peer's.
func (tx *Txn) deleteRange(a *y.YArray, index, count int) {
	var nested []y.IAbstractType
	for i, v := range arrayItems(a) {
		if i >= index+count {
			break
		}
		if t, ok := v.(y.IAbstractType); ok && i >= index {
			nested = append(nested, t)
		}
	}
	a.Delete(index, count)
	for _, t := range nested {
		deleteChildren(tx.tr, t)
	}
}

// deleteChildren deletes every live item inside a shared type, recursively.
func deleteChildren(tr *y.Transaction, t y.IAbstractType) {
	for n := t.StartItem(); n != nil; n = n.Right {
		deleteItemDeep(tr, n)
	}
	for _, n := range t.GetMap() {
		deleteItemDeep(tr, n)
	}
}

func deleteItemDeep(tr *y.Transaction, item *y.Item) {
	if item.Deleted() {
		return
	}
	item.Delete(tr) // parent first, as Yjs does, so the parents are not reported as changed
	if ct, ok := item.Content.(*y.ContentType); ok {
		deleteChildren(tr, ct.Type)
	}
}
