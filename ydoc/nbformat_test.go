package ydoc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseNBFormatJoinsMultiline(t *testing.T) {
	nb := parseFixture(t, "testdata/values_metadata.ipynb")
	if nb.NBFormat != 4 || nb.NBFormatMinor != 5 || len(nb.Cells) != 4 {
		t.Fatalf("parsed %d.%d with %d cells", nb.NBFormat, nb.NBFormatMinor, len(nb.Cells))
	}
	c := nb.Cells[0]
	if c.ID != "code-floats" || c.Type != CellCode || c.Source != "x = 0.1\ny = None\nx" {
		t.Errorf("cell 0 = %q %q %q", c.ID, c.Type, c.Source)
	}
	if c.ExecutionCount == nil || *c.ExecutionCount != 3 {
		t.Errorf("execution count %v", c.ExecutionCount)
	}
	if nb.Cells[1].ExecutionCount != nil {
		t.Errorf("null execution count parsed as %d", *nb.Cells[1].ExecutionCount)
	}
	if got := c.Outputs[0]["text"]; got != "line 1\nline 2\n" {
		t.Errorf("stream text list not joined: %#v", got)
	}
	if got := c.Outputs[1]["text"]; got != "warning\n" {
		t.Errorf("stream text string changed: %#v", got)
	}
	data := c.Outputs[2]["data"].(map[string]any)
	if got := data["text/plain"]; got != "[1, 2.5]" {
		t.Errorf("text/plain not joined: %#v", got)
	}
	if got := data["text/html"]; got != "<b>bold</b>" {
		t.Errorf("text/html not joined: %#v", got)
	}
	if got := canonJSON(t, data["application/json"]); got != `[1,2.5,null,{"k":"v"}]` {
		t.Errorf("application/json list changed: %s", got)
	}
	if got := canonJSON(t, data["application/vnd.custom+json"]); got != `["a","b"]` {
		t.Errorf("+json list was joined: %s", got)
	}
	if got := canonJSON(t, c.Outputs[3]["traceback"]); got != `["line a","line b"]` {
		t.Errorf("error traceback changed: %s", got)
	}
	if got := nb.Cells[2].Attachments["image.png"].(map[string]any)["text/plain"]; got != "alt text" {
		t.Errorf("attachment bundle not joined: %#v", got)
	}
	if got := nb.Cells[3].Source; got != "raw\ntext" {
		t.Errorf("raw source %q", got)
	}
	if f, ok := c.Metadata["ratio"].(float64); !ok || f != 0.1 {
		t.Errorf("float metadata %#v", c.Metadata["ratio"])
	}
	if n, ok := c.Metadata["int32_max"].(int); !ok || n != 2147483647 {
		t.Errorf("int metadata %#v", c.Metadata["int32_max"])
	}
	if v, ok := nb.Metadata["nothing"]; !ok || v != nil {
		t.Errorf("null notebook metadata %#v, %v", v, ok)
	}
}

func TestParseNBFormatErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"nbformat 3", `{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}`},
		{"nbformat 5", `{"nbformat": 5, "nbformat_minor": 0, "cells": [], "metadata": {}}`},
		{"missing nbformat", `{"cells": [], "metadata": {}}`},
		{"float nbformat", `{"nbformat": 4.5, "cells": []}`},
		{"not JSON", `{"nbformat": 4,`},
		{"not an object", `[1, 2]`},
		{"bad cell type", `{"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "heading", "source": ""}]}`},
		{"missing cell type", `{"nbformat": 4, "nbformat_minor": 5, "cells": [{"source": ""}]}`},
		{"output not an object", `{"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "code", "source": "", "outputs": [1]}]}`},
		{"cells not a list", `{"nbformat": 4, "cells": {}}`},
		{"empty", ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "ParseNBFormat", func() { _, err = ParseNBFormat([]byte(tc.in)) })
			if err == nil {
				t.Fatalf("ParseNBFormat(%s) succeeded", tc.in)
			}
		})
	}
}

func TestParseNBFormatMinimal(t *testing.T) {
	nb, err := ParseNBFormat([]byte(`{"nbformat": 4, "cells": [{"cell_type": "markdown", "source": ["a", "b"]}, {"cell_type": "code", "source": "x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if nb.NBFormatMinor != 0 || nb.Metadata == nil || len(nb.Metadata) != 0 {
		t.Errorf("defaults: minor %d metadata %#v", nb.NBFormatMinor, nb.Metadata)
	}
	if nb.Cells[0].Source != "ab" || nb.Cells[0].Outputs != nil || nb.Cells[0].Metadata == nil {
		t.Errorf("markdown cell %+v", nb.Cells[0])
	}
	if c := nb.Cells[1]; c.Outputs == nil || len(c.Outputs) != 0 || c.ExecutionCount != nil {
		t.Errorf("code cell without outputs %+v", c)
	}
}

func TestNotebookJSONCellIDs(t *testing.T) {
	cells := []Cell{
		{ID: "a", Type: CellCode, Source: "x", ExecutionState: "running", ExecutionCount: intp(2), Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "x"}}},
		{ID: "b", Type: CellMarkdown, Source: "y", Attachments: map[string]any{}},
		{ID: "c", Type: CellRaw, Source: "z", Attachments: map[string]any{"f": map[string]any{"text/plain": "t"}}},
		{ID: "d", Type: CellCode},
	}
	tests := []struct {
		major, minor int
		ids          bool
	}{{4, 0, false}, {4, 4, false}, {4, 5, true}, {4, 6, true}, {5, 0, true}}
	for _, tc := range tests {
		j := Notebook{NBFormat: tc.major, NBFormatMinor: tc.minor, Cells: cells}.JSON()
		if j["nbformat"] != tc.major || j["nbformat_minor"] != tc.minor {
			t.Errorf("%d.%d: header %v %v", tc.major, tc.minor, j["nbformat"], j["nbformat_minor"])
		}
		if _, ok := j["metadata"].(map[string]any); !ok {
			t.Errorf("%d.%d: metadata %#v", tc.major, tc.minor, j["metadata"])
		}
		for i, c := range j["cells"].([]any) {
			cm := c.(map[string]any)
			id, has := cm["id"]
			if has != tc.ids || (has && id != cells[i].ID) {
				t.Errorf("%d.%d cell %d: id %v (present %v), want present=%v", tc.major, tc.minor, i, id, has, tc.ids)
			}
			if _, ok := cm["execution_state"]; ok {
				t.Errorf("execution_state written to nbformat")
			}
		}
	}
	j := Notebook{NBFormat: 4, NBFormatMinor: 5, Cells: cells}.JSON()
	got := canonJSON(t, j)
	want := `{"cells":[` +
		`{"cell_type":"code","execution_count":2,"id":"a","metadata":{},"outputs":[{"name":"stdout","output_type":"stream","text":"x"}],"source":"x"},` +
		`{"cell_type":"markdown","id":"b","metadata":{},"source":"y"},` +
		`{"attachments":{"f":{"text/plain":"t"}},"cell_type":"raw","id":"c","metadata":{},"source":"z"},` +
		`{"cell_type":"code","execution_count":null,"id":"d","metadata":{},"outputs":[],"source":""}` +
		`],"metadata":{},"nbformat":4,"nbformat_minor":5}`
	if got != want {
		t.Errorf("JSON()\n got %s\nwant %s", got, want)
	}
}

// TestNBFormatRoundTripFixtures: file -> parse -> doc -> JSON -> parse gives the same notebook,
// and ids are kept exactly for nbformat 4.5.
func TestNBFormatRoundTripFixtures(t *testing.T) {
	for _, path := range fixtureNames(t) {
		t.Run(path, func(t *testing.T) {
			raw := readFixture(t, path)
			parsed := parseFixture(t, path)
			d, _ := loadNotebook(t, parsed)
			out := readNotebook(t, d).JSON()
			b, err := json.Marshal(out)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			again, err := ParseNBFormat(b)
			if err != nil {
				t.Fatalf("re-parse: %v", err)
			}
			withIDs := parsed.NBFormatMinor >= 5
			compareNotebooks(t, parsed, again, withIDs)
			if !withIDs && strings.Contains(string(b), `"id":`) {
				// Only cell ids would be at this key at the top level of a cell.
				for i, c := range out["cells"].([]any) {
					if _, ok := c.(map[string]any)["id"]; ok {
						t.Fatalf("cell %d of a %d.%d notebook has an id", i, parsed.NBFormat, parsed.NBFormatMinor)
					}
				}
			}
			// Cell sources equal the original file's joined sources.
			var orig struct {
				Cells []struct {
					Source any `json:"source"`
				} `json:"cells"`
			}
			if err := json.Unmarshal(raw, &orig); err != nil {
				t.Fatal(err)
			}
			for i, c := range orig.Cells {
				if want := joinText(c.Source); again.Cells[i].Source != want {
					t.Fatalf("cell %d source %q, want %q", i, again.Cells[i].Source, want)
				}
			}
		})
	}
}

// TestParseNBFormatTrailingData: a file with data after the notebook object is not valid JSON
// (nbformat's json.loads rejects it with "Extra data"); accepting it hides corrupted files.
func TestParseNBFormatTrailingData(t *testing.T) {
	for _, in := range []string{
		`{"nbformat": 4, "nbformat_minor": 5, "cells": []} garbage`,
		`{"nbformat": 4, "nbformat_minor": 5, "cells": []}{"nbformat": 3}`,
	} {
		if _, err := ParseNBFormat([]byte(in)); err == nil {
			t.Errorf("BUG (minor): ParseNBFormat accepts trailing data after the notebook object: %q", in)
		}
	}
}
