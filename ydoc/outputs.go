package ydoc

import (
	"fmt"

	y "github.com/skyterra/y-crdt"
)

// Code cells' execution state and outputs, written as JupyterLab writes them: each output a
// Y.Map, a stream's text a Y.Text (so a growing stream is an append, not a rewrite), the
// execution count and state plain values. execution writes runs through these.

// outputsOf reads the outputs array: Y.Maps as JupyterLab writes them, or plain objects as
// some server-side writers do.
func outputsOf(raw any) []map[string]any {
	var items []any
	switch a := raw.(type) {
	case *y.YArray:
		items = arrayItems(a)
	case y.ArrayAny:
		items = a
	}
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if o, ok := fromAny(it).(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

// insertOutputs writes outputs as Y.Maps, stream text as Y.Text, as JupyterLab does.
func (tx *Txn) insertOutputs(outs *y.YArray, index int, outputs []map[string]any) error {
	maps := make(y.ArrayAny, len(outputs))
	for i := range outputs {
		maps[i] = y.NewYMap(nil)
	}
	outs.Insert(index, maps)
	for i, o := range outputs {
		m := maps[i].(*y.YMap)
		stream := o["output_type"] == "stream"
		for _, k := range sortedKeys(o) {
			v := o[k]
			if stream && k == "text" {
				m.Set("text", y.NewYText(joinText(v)))
				continue
			}
			if err := setMapAny(tx.tr, m, k, v); err != nil {
				return fmt.Errorf("output %d: %w", i, err)
			}
		}
	}
	return nil
}

// joinText joins nbformat multiline strings (a string or a list of strings).
func joinText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		s := ""
		for _, x := range t {
			if xs, ok := x.(string); ok {
				s += xs
			}
		}
		return s
	case []string:
		s := ""
		for _, x := range t {
			s += x
		}
		return s
	}
	return ""
}

// SetExecutionCount sets a code cell's execution count (nil for null).
func (tx *Txn) SetExecutionCount(i int, count *int) error {
	m, err := tx.codeCell(i)
	if err != nil {
		return err
	}
	var v any
	if count != nil {
		v = *count
	}
	if err := setMapAny(tx.tr, m, "execution_count", v); err != nil {
		return err
	}
	return tx.markDirty()
}

// SetExecutionState sets a code cell's execution_state (idle or running).
func (tx *Txn) SetExecutionState(i int, state string) error {
	if state != "idle" && state != "running" {
		return fmt.Errorf("execution state %q: must be idle or running", state)
	}
	m, err := tx.codeCell(i)
	if err != nil {
		return err
	}
	if v, _ := mapGet(m, "execution_state"); v == state {
		return nil
	}
	return setMapAny(tx.tr, m, "execution_state", state)
}

// ClearOutputs removes every output of a code cell.
func (tx *Txn) ClearOutputs(i int) error {
	m, err := tx.codeCell(i)
	if err != nil {
		return err
	}
	outs := tx.outputsArray(m)
	if n := outs.GetLength(); n > 0 {
		tx.deleteRange(outs, 0, n)
		return tx.markDirty()
	}
	return nil
}

// outputsOfCell checks an output and returns the outputs array of the code cell it goes to.
func (tx *Txn) outputsOfCell(i int, out map[string]any) (*y.YArray, error) {
	if _, err := toAny(out); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	m, err := tx.codeCell(i)
	if err != nil {
		return nil, err
	}
	return tx.outputsArray(m), nil
}

// AppendOutput adds an output to a code cell. A stream output whose name matches the last
// output's is merged into it by appending to its text, as JupyterLab does.
func (tx *Txn) AppendOutput(i int, out map[string]any) error {
	outs, err := tx.outputsOfCell(i, out)
	if err != nil {
		return err
	}
	items := arrayItems(outs)
	if out["output_type"] == "stream" && len(items) > 0 {
		if last, ok := items[len(items)-1].(*y.YMap); ok {
			lt, _ := mapGet(last, "output_type")
			ln, _ := mapGet(last, "name")
			if lt == "stream" && ln == out["name"] {
				if txt, ok := mustGet(last, "text").(*y.YText); ok {
					txt.Insert(txt.GetLength(), joinText(out["text"]), nil)
					return tx.markDirty()
				}
			}
		}
	}
	if err := tx.insertOutputs(outs, len(items), []map[string]any{out}); err != nil {
		return err
	}
	return tx.markDirty()
}

// InsertOutput appends an output to a code cell without merging streams (the executor merges
// itself, as JupyterLab's output area does).
func (tx *Txn) InsertOutput(i int, out map[string]any) error {
	outs, err := tx.outputsOfCell(i, out)
	if err != nil {
		return err
	}
	if err := tx.insertOutputs(outs, outs.GetLength(), []map[string]any{out}); err != nil {
		return err
	}
	return tx.markDirty()
}

// ReplaceOutput replaces output j of a code cell (update_display_data).
func (tx *Txn) ReplaceOutput(i, j int, out map[string]any) error {
	outs, err := tx.outputsOfCell(i, out)
	if err != nil {
		return err
	}
	if j < 0 || j >= outs.GetLength() {
		return fmt.Errorf("output %d of %d: %w", j, outs.GetLength(), ErrOutOfRange)
	}
	tx.deleteRange(outs, j, 1)
	if err := tx.insertOutputs(outs, j, []map[string]any{out}); err != nil {
		return err
	}
	return tx.markDirty()
}

// SetStreamText rewrites the text of stream output j with a minimal diff (appending, in the
// common case; carriage-return progress bars rewrite the tail).
func (tx *Txn) SetStreamText(i, j int, text string) error {
	m, err := tx.codeCell(i)
	if err != nil {
		return err
	}
	items := arrayItems(tx.outputsArray(m))
	if j < 0 || j >= len(items) {
		return fmt.Errorf("output %d of %d: %w", j, len(items), ErrOutOfRange)
	}
	out, ok := items[j].(*y.YMap)
	if !ok {
		return fmt.Errorf("output %d is not a map", j)
	}
	t, ok := mustGet(out, "text").(*y.YText)
	if !ok {
		out.Set("text", y.NewYText(text))
		return tx.markDirty()
	}
	if tx.applyTextDiff(t, textString(t), text) {
		return tx.markDirty()
	}
	return nil
}

// OutputKind returns output j's output_type and, for streams, its name ("" when absent), so
// a writer can check the outputs are what it believes before changing them.
func (tx *Txn) OutputKind(i, j int) (outputType, name string, err error) {
	m, err := tx.codeCell(i)
	if err != nil {
		return "", "", err
	}
	items := arrayItems(tx.outputsArray(m))
	if j < 0 || j >= len(items) {
		return "", "", fmt.Errorf("output %d of %d: %w", j, len(items), ErrOutOfRange)
	}
	switch out := items[j].(type) {
	case *y.YMap:
		outputType, _ = mustGet(out, "output_type").(string)
		name, _ = mustGet(out, "name").(string)
	default: // a plain object, as the server writes after a reload
		if o, ok := fromAny(out).(map[string]any); ok {
			outputType, _ = o["output_type"].(string)
			name, _ = o["name"].(string)
		}
	}
	return outputType, name, nil
}

// NumOutputs is the number of outputs of a code cell.
func (tx *Txn) NumOutputs(i int) (int, error) {
	m, err := tx.codeCell(i)
	if err != nil {
		return 0, err
	}
	return tx.outputsArray(m).GetLength(), nil
}

func (tx *Txn) codeCell(i int) (*y.YMap, error) {
	m, err := tx.cellMap(i)
	if err != nil {
		return nil, err
	}
	if t, _ := mapGet(m, "cell_type"); t != CellCode {
		return nil, fmt.Errorf("cell %d is a %v cell, not code: %w", i, t, ErrWrongKind)
	}
	return m, nil
}

func (tx *Txn) outputsArray(m *y.YMap) *y.YArray {
	if a, ok := mustGet(m, "outputs").(*y.YArray); ok {
		return a
	}
	a := y.NewYArray()
	m.Set("outputs", a)
	return a
}
