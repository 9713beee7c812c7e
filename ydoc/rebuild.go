package ydoc

import (
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	y "github.com/skyterra/y-crdt"
)

// How the servers rebuild a room they lost, for the fake server (bridgetest) and the tests that
// check rescues against each: a sidecar never writes like this.
//
//   - jupyter-collaboration without an update store entry loads the file into a fresh document
//     of client 0 and applies that update to the room (LoadDeterministic): the same file always
//     gives the same items under the same ids, and a different file gives other items under
//     the same ids.
//   - jupyter-collaboration with its store keeps the room's old items and, when the file
//     differs, reloads it over them under the room's own client (ReloadNotebook, or SetText
//     for text), deleting what the file does not hold.
//   - jupyter-server-documents loads the file into a fresh document under a random client.

// LoadDeterministic returns the update that loading content into a fresh document of client 0
// produces (rooms.py _apply_deterministic_source_content): the content alone, no state. Notebook
// cells without an id get fresh uuids, as jupyter_ydoc gives them: such a load is deterministic
// only for files with ids.
func LoadDeterministic(content Snapshot, log zerolog.Logger) ([]byte, error) {
	d, err := newDoc(content.Kind, 0, log)
	if err != nil {
		return nil, fmt.Errorf("deterministic load: %w", err)
	}
	update, _, err := d.Transact(func(tx *Txn) error {
		tx.clean = true // the load writes the content alone
		if content.Kind == KindText {
			return tx.SetText(content.Text)
		}
		return tx.LoadNotebook(content.Notebook)
	})
	if err != nil {
		return nil, fmt.Errorf("deterministic load: %w", err)
	}
	if update == nil {
		return EncodeEmptyUpdate(), nil
	}
	return update, nil
}

// EncodeEmptyUpdate is an update that holds nothing.
func EncodeEmptyUpdate() []byte { return []byte{0, 0} }

// ReloadNotebook makes the notebook hold nb the way jupyter_ydoc's YNotebook.set reloads a file
// into a live room (ynotebook.py _set): the version and metadata are rewritten when they differ
// (the metadata as a new map); cells are reconciled by id, the first of each id kept: an
// identical cell stays, a changed one is updated key by key (a changed source cleared and
// written again, changed metadata and outputs cleared and refilled) or, when its new outputs
// hold a stream or a key with a shared type is added, deleted and created again; cells not in
// nb and repeated ids are deleted; cells out of place are moved by delete and create; new cells
// are inserted. State keys other than dirty, path and document_id are deleted. Cells without
// an id get fresh uuids.
func (tx *Txn) ReloadNotebook(nb Notebook) error {
	if tx.d.kind != KindNotebook {
		return ErrWrongKind
	}
	cells := make([]Cell, len(nb.Cells))
	copy(cells, nb.Cells)
	for i := range cells {
		if cells[i].ID == "" {
			cells[i].ID = NewCellID()
		}
	}
	if len(cells) == 0 {
		cells = []Cell{{ID: NewCellID(), Type: CellCode, Metadata: map[string]any{"trusted": true}}}
	}
	target := nb
	target.Cells = cells
	want, err := canonicalNotebook(target)
	if err != nil {
		return fmt.Errorf("reload notebook: %w: %w", ErrInvalidTarget, err)
	}
	live := tx.d.readNotebookHeader()
	if want.NBFormat != 0 && live.NBFormat != want.NBFormat {
		if err := setMapAny(tx.tr, tx.d.meta, "nbformat", want.NBFormat); err != nil {
			return err
		}
	}
	if want.NBFormat != 0 && live.NBFormatMinor != want.NBFormatMinor {
		if err := setMapAny(tx.tr, tx.d.meta, "nbformat_minor", want.NBFormatMinor); err != nil {
			return err
		}
	}
	if !jsonEqual(live.Metadata, want.Metadata) {
		ymd := newPrelimMap()
		tx.d.meta.Set("metadata", ymd)
		for _, k := range sortedKeys(want.Metadata) {
			if err := setMapAny(tx.tr, ymd, k, want.Metadata[k]); err != nil {
				return err
			}
		}
	}
	// Which live cells are kept (updated in place where they differ).
	ids := tx.CellIDs()
	first := map[string]int{}
	for i, id := range ids {
		if _, ok := first[id]; !ok {
			first[id] = i
		}
	}
	retained := map[string]bool{}
	for _, c := range want.Cells {
		i, ok := first[c.ID]
		if !ok {
			continue
		}
		kept, err := tx.reloadCell(i, c)
		if err != nil {
			return fmt.Errorf("reload notebook: cell %q: %w", c.ID, err)
		}
		if kept {
			retained[c.ID] = true
		}
	}
	// Delete the cells not retained, and repeated ids.
	seen := map[string]bool{}
	for i := 0; i < tx.NumCells(); {
		id := tx.CellID(i)
		if !retained[id] || seen[id] {
			tx.deleteCells(i, 1)
			continue
		}
		seen[id] = true
		i++
	}
	// Put the cells in place: a retained cell found later is deleted and created again.
	for i, c := range want.Cells {
		if i < tx.NumCells() && tx.CellID(i) == c.ID {
			continue
		}
		if retained[c.ID] {
			for cur := i + 1; cur < tx.NumCells(); cur++ {
				if tx.CellID(cur) == c.ID {
					tx.deleteCells(cur, 1)
					if err := tx.insertCellMaps(i, []Cell{c}); err != nil {
						return err
					}
					break
				}
			}
			continue
		}
		if err := tx.insertCellMaps(i, []Cell{c}); err != nil {
			return err
		}
	}
	if n := tx.NumCells(); n > len(want.Cells) {
		tx.deleteCells(len(want.Cells), n-len(want.Cells))
	}
	for _, k := range mapKeys(tx.d.state) {
		if k != "dirty" && k != "path" && k != "document_id" {
			tx.d.state.Delete(k)
		}
	}
	return nil
}

// reloadCell updates live cell i to want key by key, as jupyter_ydoc's _update_cell does; kept is
// false when the cell must be created again instead (nothing was changed then).
func (tx *Txn) reloadCell(i int, want Cell) (kept bool, err error) {
	m, err := tx.cellMap(i)
	if err != nil {
		return false, err
	}
	cur := readCell(m)
	if cur.Type != want.Type {
		return false, nil // a key with a shared type comes or goes
	}
	src, isText := mustGet(m, "source").(*y.YText)
	if !isText {
		return false, nil
	}
	outputsChanged := want.Type == CellCode && !jsonEqual(outputsJSON(cur.Outputs), outputsJSON(want.Outputs))
	if outputsChanged {
		for _, o := range want.Outputs {
			if o["output_type"] == "stream" {
				return false, nil
			}
		}
	}
	if cur.Source != want.Source {
		if n := src.GetLength(); n > 0 {
			src.Delete(0, n)
		}
		if want.Source != "" {
			src.Insert(0, want.Source, nil)
		}
	}
	if !jsonEqual(cur.Metadata, want.Metadata) {
		raw, _ := mapGet(m, "metadata")
		ymd, ok := raw.(*y.YMap)
		if !ok {
			return false, errors.New("metadata is not a map")
		}
		for _, k := range mapKeys(ymd) {
			ymd.Delete(k)
		}
		for _, k := range sortedKeys(want.Metadata) {
			if err := setMapAny(tx.tr, ymd, k, want.Metadata[k]); err != nil {
				return true, err
			}
		}
	}
	if want.Type != CellCode {
		return true, nil
	}
	if !equalCount(cur.ExecutionCount, want.ExecutionCount) {
		var v any
		if want.ExecutionCount != nil {
			v = *want.ExecutionCount
		}
		if err := setMapAny(tx.tr, m, "execution_count", v); err != nil {
			return true, err
		}
	}
	if outputsChanged {
		outs := tx.outputsArray(m)
		if n := len(arrayItems(outs)); n > 0 {
			tx.deleteRange(outs, 0, n)
		}
		if err := tx.insertOutputs(outs, 0, want.Outputs); err != nil {
			return true, err
		}
	}
	return true, nil
}
