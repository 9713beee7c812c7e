package tools

import (
	"fmt"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The text format: get_notebook's default, made for a model to read. What an agent needs from a
// read is every cell's source, where each cell is (to edit or run it) and what its outputs say;
// everything else costs tokens on every read. So:
//
//	report.ipynb · version 3f2a9c-17 · 3 cells · with Alice
//	@0 a1f3 md
//	# Sales
//	@1 b2c4 [5]
//	df = load("sales.csv")
//	df.shape
//	→ (1200, 8)
//	@2 9e0d [6]
//	df.plot()
//	→ [image/png 640x480, 23.1 kB]
//
// One header line per cell: @index, the handle (handles.go: a short prefix of the id that every
// cell argument takes), the type when it is not code, the execution count ([*] while running),
// tags, and the source hash only when asked for (hashes: true). The source follows as it is —
// plain text, not a JSON string (no escaped quotes and newlines). Each output is one "→" block
// (on the arrow's line when it is one line, below it otherwise, so tables keep their columns):
// text capped at max_output_chars, errors as "error Name: value" and their traceback, images and
// rich HTML as a one-line description; a plot's "<Figure …>" text is left out beside its image.
// The notebook's version appears once, in the header; so do the collaborators.
//
// Without outputs (include_outputs: false) a whole read is the sources, each after a blank line
// and its handle (the type, tags and hash as above): what such a read is for is the code, and the
// index and execution count cost a model more than the source of a short cell (200 cells of the
// benchmark's notebook: 3,888 tokens against 4,708 with "@index handle [n]" headers, the sources
// alone 3,135). A read of the cells changed since a version keeps the index (where they are is
// its news), and so does any read in which a source line starts with a shown cell's handle, or
// a cell has no handle yet: then a handle line could be taken for a line of source.

// sourceCell renders one cell for a sources-only read (see above).
func sourceCell(handle string, c ydoc.Cell, withHash bool) string {
	var b strings.Builder
	b.WriteString("\n" + handle)
	writeCellRest(&b, c, false, withHash)
	return b.String()
}

// writeCellRest writes what follows a cell's index and handle in a text read: the header's type,
// execution count (when count), tags and hash (when withHash), then the source, ending with a
// newline.
func writeCellRest(b *strings.Builder, c ydoc.Cell, count, withHash bool) {
	switch c.Type {
	case ydoc.CellMarkdown:
		b.WriteString(" md")
	case ydoc.CellRaw:
		b.WriteString(" raw")
	}
	switch {
	case !count:
	case c.ExecutionState == "running":
		b.WriteString(" [*]")
	case c.ExecutionCount != nil:
		fmt.Fprintf(b, " [%d]", *c.ExecutionCount)
	}
	if tags := cellTags(c.Metadata); len(tags) > 0 {
		b.WriteString(" tags=" + strings.Join(tags, ","))
	}
	if withHash {
		b.WriteString(" #" + sourceHash(c.Source))
	}
	b.WriteByte('\n')
	if c.Source != "" {
		b.WriteString(c.Source)
		if !strings.HasSuffix(c.Source, "\n") {
			b.WriteByte('\n')
		}
	}
}

// handleLinesClear reports whether the cells' handle lines cannot be taken for source: every
// cell has a handle, and no line of any source starts with one (its first word).
func handleLinesClear(cells []ydoc.Cell, handles map[string]string) bool {
	shown := make(map[string]bool, len(cells))
	for _, c := range cells {
		h := handles[c.ID]
		if h == "" {
			return false
		}
		shown[h] = true
	}
	for _, c := range cells {
		for _, line := range strings.Split(c.Source, "\n") {
			first, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if shown[first] {
				return false
			}
		}
	}
	return true
}

// textCell renders one cell for format=text.
func textCell(i int, handle string, c ydoc.Cell, o viewOpts, withHash bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%d", i)
	if handle != "" { // a cell read from a file without its id: no handle until the room has it
		b.WriteString(" " + handle)
	}
	writeCellRest(&b, c, true, withHash)
	if c.Type != ydoc.CellCode {
		return b.String()
	}
	if !o.outputs {
		return b.String()
	}
	for _, out := range c.Outputs {
		s := strings.TrimRight(textOutput(out, o.maxChars), "\n")
		switch {
		case s == "":
		case strings.Contains(s, "\n"): // a table keeps its columns: below the arrow
			b.WriteString("→\n" + s + "\n")
		default:
			b.WriteString("→ " + s + "\n")
		}
	}
	return b.String()
}

// textOutput renders one nbformat output as its "→ " block (without the arrow).
func textOutput(o map[string]any, maxChars int) string {
	switch o["output_type"] {
	case "stream":
		s, _ := capText(stripANSI(asString(o["text"])), maxChars)
		if o["name"] == "stderr" {
			return "stderr: " + s
		}
		return s
	case "error":
		head := fmt.Sprintf("error %v: %s", o["ename"], stripANSI(asString(o["evalue"])))
		var tb []string
		if lines, ok := o["traceback"].([]any); ok {
			for _, l := range lines {
				if l := stripANSI(asString(l)); strings.Trim(l, "-") != "" { // IPython's rule line
					tb = append(tb, l)
				}
			}
		}
		// The last line of a Python traceback repeats the error; its frames are what helps.
		if n := len(tb); n > 0 && strings.HasPrefix(strings.TrimSpace(tb[n-1]), fmt.Sprint(o["ename"])) {
			tb = tb[:n-1]
		}
		if len(tb) == 0 {
			return head
		}
		return head + "\n" + capTail(strings.Join(tb, "\n"), maxChars)
	case "execute_result", "display_data":
		data, _ := o["data"].(map[string]any)
		var parts []string
		image := false
		for _, mime := range sortedMimes(data) {
			if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
				parts = append(parts, strings.TrimSuffix(summariseMime(mime, data[mime]), "; not shown]")+"]")
				image = true
			}
		}
		for _, mime := range []string{"text/plain", "text/markdown", "text/latex", "application/json"} {
			v, ok := data[mime]
			if !ok || image && mime == "text/plain" { // "<Figure size 640x480 with 1 Axes>"
				continue
			}
			s := asString(v)
			if _, isString := v.(string); !isString && mime == "application/json" {
				s = fmt.Sprint(v)
			}
			s, _ = capText(stripANSI(s), maxChars)
			parts = append(parts, s)
			break // one text rendering is enough
		}
		if len(parts) == 0 {
			for _, mime := range sortedMimes(data) {
				parts = append(parts, strings.TrimSuffix(summariseMime(mime, data[mime]), "; not shown]")+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	return fmt.Sprintf("[%v]", o["output_type"])
}

// capTail keeps the last max characters of s (a traceback ends with what matters).
func capTail(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	if max <= 0 {
		return fmt.Sprintf("[%d characters not shown]", len(r))
	}
	return fmt.Sprintf("[… %d characters not shown]\n", len(r)-max) + string(r[len(r)-max:])
}

// cellTags returns the cell's tags (metadata.tags), the one piece of metadata a read shows.
func cellTags(md map[string]any) []string {
	list, _ := md["tags"].([]any)
	var out []string
	for _, t := range list {
		if s, ok := t.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// collaboratorNames lists who is in the room, for the text header.
func collaboratorNames(c *collab) string {
	if c == nil || len(c.Collaborators) == 0 {
		return ""
	}
	names := make([]string, len(c.Collaborators))
	for i, p := range c.Collaborators {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
