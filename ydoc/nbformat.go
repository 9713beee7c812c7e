package ydoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Conversion between the notebook model and nbformat 4 JSON, following jupyter_ydoc's get/set:
// execution_state is not part of the file; cell ids are dropped for nbformat 4.0-4.4; empty
// attachments are dropped; an empty notebook gets one empty code cell.

// ParseNBFormat reads nbformat 4 JSON. Multiline strings (lists of strings) are joined.
func ParseNBFormat(b []byte) (Notebook, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw struct {
		Cells         []map[string]any `json:"cells"`
		Metadata      map[string]any   `json:"metadata"`
		NBFormat      json.Number      `json:"nbformat"`
		NBFormatMinor json.Number      `json:"nbformat_minor"`
	}
	if err := dec.Decode(&raw); err != nil {
		return Notebook{}, fmt.Errorf("parse notebook: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Notebook{}, fmt.Errorf("parse notebook: unexpected data after the notebook object")
	}
	major, err := raw.NBFormat.Int64()
	if err != nil || major != 4 {
		return Notebook{}, fmt.Errorf("parse notebook: nbformat %q is not supported (need 4)", raw.NBFormat.String())
	}
	minor, _ := raw.NBFormatMinor.Int64()
	nb := Notebook{NBFormat: 4, NBFormatMinor: int(minor), Metadata: plainJSON(raw.Metadata).(map[string]any)}
	for i, rc := range raw.Cells {
		c, err := cellFromJSON(rc)
		if err != nil {
			return Notebook{}, fmt.Errorf("parse notebook: cell %d: %w", i, err)
		}
		nb.Cells = append(nb.Cells, c)
	}
	return nb, nil
}

func cellFromJSON(rc map[string]any) (Cell, error) {
	c := Cell{Metadata: map[string]any{}}
	c.Type, _ = rc["cell_type"].(string)
	if !ValidCellType(c.Type) {
		return c, fmt.Errorf("cell_type %v: must be code, markdown or raw", rc["cell_type"])
	}
	c.ID, _ = rc["id"].(string)
	c.Source = joinText(rc["source"])
	if md, ok := plainJSON(rc["metadata"]).(map[string]any); ok {
		c.Metadata = md
	}
	if c.Type == CellCode {
		if n, ok := asInt(plainJSON(rc["execution_count"])); ok {
			c.ExecutionCount = &n
		}
		outs, _ := rc["outputs"].([]any)
		c.Outputs = make([]map[string]any, 0, len(outs))
		for _, o := range outs {
			om, ok := plainJSON(o).(map[string]any)
			if !ok {
				return c, fmt.Errorf("output is not an object")
			}
			rejoinOutput(om)
			c.Outputs = append(c.Outputs, om)
		}
	} else if a, ok := plainJSON(rc["attachments"]).(map[string]any); ok && len(a) > 0 {
		for _, att := range a {
			if bundle, ok := att.(map[string]any); ok {
				rejoinBundle(bundle)
			}
		}
		c.Attachments = a
	}
	return c, nil
}

// rejoinOutput joins multiline strings as nbformat's rejoin_lines does: stream text, and every
// non-JSON entry of a mime bundle.
func rejoinOutput(o map[string]any) {
	switch o["output_type"] {
	case "execute_result", "display_data":
		if data, ok := o["data"].(map[string]any); ok {
			rejoinBundle(data)
		}
	default:
		if _, ok := o["text"].([]any); ok {
			o["text"] = joinText(o["text"])
		}
	}
}

func rejoinBundle(data map[string]any) {
	for mime, v := range data {
		if isJSONMime(mime) {
			continue
		}
		lines, ok := v.([]any)
		if !ok {
			continue
		}
		allStrings := true
		for _, l := range lines {
			if _, ok := l.(string); !ok {
				allStrings = false
				break
			}
		}
		if allStrings {
			data[mime] = joinText(lines)
		}
	}
}

func isJSONMime(mime string) bool {
	return mime == "application/json" || (strings.HasPrefix(mime, "application/") && strings.HasSuffix(mime, "+json"))
}

// plainJSON turns json.Number into int (when integral) or float64, recursively.
func plainJSON(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return int(i)
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		o := make(map[string]any, len(t))
		for k, x := range t {
			o[k] = plainJSON(x)
		}
		return o
	case []any:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = plainJSON(x)
		}
		return a
	case nil:
		return nil
	}
	return v
}

// JSON returns the notebook as nbformat 4 JSON values, as jupyter_ydoc's get() does.
func (nb Notebook) JSON() map[string]any {
	withIDs := nb.NBFormat > 4 || (nb.NBFormat == 4 && nb.NBFormatMinor >= 5)
	cells := make([]any, 0, len(nb.Cells))
	for _, c := range nb.Cells {
		cells = append(cells, c.JSON(withIDs))
	}
	md := nb.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return map[string]any{
		"cells":          cells,
		"metadata":       md,
		"nbformat":       nb.NBFormat,
		"nbformat_minor": nb.NBFormatMinor,
	}
}

// JSON returns the cell as nbformat JSON values.
func (c Cell) JSON(withID bool) map[string]any {
	md := c.Metadata
	if md == nil {
		md = map[string]any{}
	}
	out := map[string]any{"cell_type": c.Type, "source": c.Source, "metadata": md}
	if withID {
		out["id"] = c.ID
	}
	switch c.Type {
	case CellCode:
		var count any
		if c.ExecutionCount != nil {
			count = *c.ExecutionCount
		}
		out["execution_count"] = count
		outs := make([]any, 0, len(c.Outputs))
		for _, o := range c.Outputs {
			outs = append(outs, o)
		}
		out["outputs"] = outs
	default:
		if len(c.Attachments) > 0 {
			out["attachments"] = c.Attachments
		}
	}
	return out
}

// LoadNotebook writes a whole notebook into an empty document (meta first, then cells), as the
// server does when it builds a room from a file. An empty cell list becomes one empty code cell.
func (tx *Txn) LoadNotebook(nb Notebook) error {
	if tx.d.kind != KindNotebook {
		return ErrWrongKind
	}
	if tx.NumCells() != 0 {
		return fmt.Errorf("load notebook: document already has %d cells", tx.NumCells())
	}
	cells := append([]Cell(nil), nb.Cells...)
	if len(cells) == 0 {
		cells = []Cell{{Type: CellCode, Metadata: map[string]any{"trusted": true}}}
	}
	seen := map[string]bool{}
	for i := range cells {
		if err := validateCell(&cells[i]); err != nil {
			return fmt.Errorf("load notebook: cell %d: %w", i, err)
		}
		if seen[cells[i].ID] { // checked here too: nothing may be written before every check passed
			return fmt.Errorf("load notebook: cell %d: id %q is used twice", i, cells[i].ID)
		}
		seen[cells[i].ID] = true
	}
	md := nb.Metadata
	if md == nil {
		md = map[string]any{}
	}
	if _, err := toAny(md); err != nil {
		return fmt.Errorf("load notebook: metadata: %w", err)
	}
	if err := setMapAny(tx.tr, tx.d.meta, "nbformat", nb.NBFormat); err != nil {
		return err
	}
	if err := setMapAny(tx.tr, tx.d.meta, "nbformat_minor", nb.NBFormatMinor); err != nil {
		return err
	}
	ymd := newPrelimMap()
	tx.d.meta.Set("metadata", ymd)
	for _, k := range sortedKeys(md) {
		if err := setMapAny(tx.tr, ymd, k, md[k]); err != nil {
			return err
		}
	}
	return tx.InsertCells(0, cells)
}
