package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/apps"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Reading notebooks: list, read (json, markdown, outline), open a session.

var pathField = brief("path", str("Notebook path relative to the Jupyter root, e.g. \"analysis/report.ipynb\"."))

func (s *Server) registerNotebookTools() {
	s.register(&operation{
		Name:     "list_notebooks",
		Title:    "List notebooks",
		Category: "notebooks",
		Default:  true,
		Scope:    auth.ScopeRead,
		Description: "List the notebooks under a folder or path prefix, with whether each is open and who is in it. " +
			"To find text inside notebooks, use search_notebook.",
		Input: object(
			brief("path_prefix", str("Only notebooks whose path starts with this (a folder like \"analysis/\" or a name prefix).").def("")),
			brief("max_results", integer("Maximum number of notebooks returned.").def(50).min(1).max(1000)),
		),
		Example:  map[string]any{"path_prefix": "analysis/", "max_results": 20},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Run: handle(s.listNotebooks, renderListing[listNotebooksArgs]("notebooks", "path_prefix")),
	})
	s.register(&operation{
		Name:     "get_notebook",
		Title:    "Read a notebook",
		Category: "notebooks",
		Default:  true,
		Scope:    auth.ScopeRead,
		Description: "Read a notebook as it is now: each cell's handle, source and capped outputs, and the version to " +
			"pass to edits. Read less with cell_range or since_version (only what changed since a read); format " +
			"outline gives one line per cell, json and markdown other shapes.",
		Input: object(
			pathField,
			brief("format", str("text (compact, made for models: a header line per cell with its handle), json (cells as objects, with ids and source hashes), markdown (readable), or outline (one line per cell, with output sizes).").enum("text", "json", "markdown", "outline").def("text")),
			brief("include_outputs", boolean("Include cell outputs.").def(true)),
			field("since_version", str("Only the cells added or changed since this version, and the ids of those removed.")),
			brief("cell_range", object(
				brief("start", integer("First cell index (0-based).").min(0)),
				brief("end", integer("Last cell index, inclusive; omit for the end of the notebook.").min(0)),
			).desc("Only these cells.")),
			outCapField,
			field("hashes", boolean("Show each cell's source hash, for expected_source_hashes.").def(false)),
			brief("include_collaboration_state", boolean("Include who is in the room and the room status.").def(true)),
			brief("max_content_length", integer("Upper bound of the returned content in characters; the cut falls on a cell boundary.").def(100000).min(1000).max(5000000)),
		).required("path"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "cell_range": map[string]any{"start": 0, "end": 9}},
		ReadOnly: true, Idempotent: true, Forkable: true, Budgeted: true,
		Doc: docRef{Arg: "path", Ref: refNotebook, Open: true, FromFile: true},
		Run: handle(s.readNotebookCells, s.renderNotebook),
		App: apps.Outputs.URI,
	})
	s.register(&operation{
		Name:     "create_notebook_session",
		Title:    "Create or open a notebook",
		Category: "notebooks",
		Default:  true,
		Scope:    auth.ScopeWrite,
		Description: "Create a notebook (create_if_missing, optionally from a template) or join one ahead of use; the " +
			"other tools join a notebook on first use, so this is only needed to create one.",
		Input: object(
			pathField,
			brief("create_if_missing", boolean("Create an empty notebook at path if there is none.").def(false)),
			brief("template", str("With create_if_missing: start the new notebook from this template (jupyter://templates/{name}) instead of empty.").enum(templateNames()...)),
		).required("path"),
		Example:     map[string]any{"path": "scratch/new.ipynb", "create_if_missing": true, "template": "analysis"},
		Idempotent:  true,
		Destructive: false,
		Doc:         docRef{Arg: "path", Ref: refNotebook},
		Run:         handle(s.createNotebookSession, renderSession),
		App:         apps.Notebook.URI,
	})
}

// collab is the collaboration state returned by tools.
type collab struct {
	Status        string         `json:"status"`
	RoomID        string         `json:"room_id,omitempty"`
	Collaborators []collaborator `json:"collaborators"`
	PendingEdits  int            `json:"pending_edits,omitempty"`
	Error         string         `json:"error,omitempty"`
}

type collaborator struct {
	Name     string `json:"name"`
	Username string `json:"username"`
	Color    string `json:"color,omitempty"`
}

func collabOf(info bridge.RoomInfo) collab {
	c := collab{Status: string(info.Status), RoomID: info.RoomID, PendingEdits: info.PendingEdits, Collaborators: []collaborator{}}
	if info.Status != bridge.StatusSynced {
		c.Error = info.Err
	}
	seen := map[string]bool{}
	for _, p := range info.Collaborators {
		if seen[p.User.Username] { // one entry per person, not per browser tab
			continue
		}
		seen[p.User.Username] = true
		name := p.User.DisplayName
		if name == "" {
			name = p.User.Name
		}
		c.Collaborators = append(c.Collaborators, collaborator{Name: name, Username: p.User.Username, Color: p.User.Color})
	}
	return c
}

type listNotebooksArgs struct {
	PathPrefix string `json:"path_prefix"`
	MaxResults int    `json:"max_results"`
}

// docEntry is a notebook or text file in a listing.
type docEntry struct {
	Path          string         `json:"path"`
	LastModified  string         `json:"last_modified,omitempty"`
	Size          *int64         `json:"size,omitempty"`
	Open          bool           `json:"open"`
	CellCount     *int           `json:"cell_count,omitempty"`
	Collaborators []collaborator `json:"collaborators,omitempty"`
}

// listing is what list_notebooks and list_documents found.
type listing struct {
	entries []docEntry
	total   int  // matches found (more than entries when max_results cut them)
	walkCut bool // the walk stopped at maxWalkDirs directories
}

// renderListing renders a listing under key ("notebooks", "documents"); narrow names the
// argument that narrows it.
func renderListing[A any](key, narrow string) func(*call, A, listing) result {
	return func(_ *call, _ A, l listing) result {
		out := map[string]any{key: l.entries, "count": len(l.entries)}
		if l.total > len(l.entries) || l.walkCut {
			out["truncated"] = true
			out["note"] = fmt.Sprintf("showing %d of %d %s found; narrow %s or raise max_results", len(l.entries), l.total, key, narrow)
		}
		return result{Data: out}
	}
}

// entryOf describes a file found by a walk; kind says which room to look for.
func (s *Server) entryOf(ctx context.Context, f bridge.FileInfo, kind ydoc.Kind) docEntry {
	e := docEntry{Path: f.Path}
	if !f.LastModified.IsZero() {
		e.LastModified = f.LastModified.UTC().Format("2006-01-02T15:04:05Z")
	}
	if f.Size >= 0 {
		size := f.Size
		e.Size = &size
	}
	if room := s.liveRoom(ctx, f.Path, kind); room != nil {
		e.Open = true
		e.Collaborators = collabOf(room.Info()).Collaborators
		if kind == ydoc.KindNotebook {
			_ = room.View(ctx, func(d *ydoc.Doc) error {
				n := d.NumCells()
				e.CellCount = &n
				return nil
			})
		}
	}
	return e
}

// maxWalkDirs bounds a recursive listing.
const maxWalkDirs = 2000

func (s *Server) listNotebooks(ctx context.Context, _ *call, a listNotebooksArgs) (listing, error) {
	files, walkCut, err := s.walk(ctx, a.PathPrefix, "notebook", "path_prefix")
	if err != nil {
		return listing{}, err
	}
	l := listing{total: len(files), walkCut: walkCut, entries: []docEntry{}}
	if len(files) > a.MaxResults {
		files = files[:a.MaxResults]
	}
	for _, f := range files {
		l.entries = append(l.entries, s.entryOf(ctx, f, ydoc.KindNotebook))
	}
	return l, nil
}

// walk lists the files of a type (notebook, file) the caller may see whose path starts with
// prefix, breadth first, sorted. A prefix ending in "/" is a directory; otherwise it is a path
// prefix ("analysis" matches analysis/… and analysis_old.ipynb). field names the argument in
// error details.
func (s *Server) walk(ctx context.Context, prefix, fileType, field string) ([]bridge.FileInfo, bool, error) {
	return s.walkTypes(ctx, prefix, field, fileType)
}

// walkTypes is walk for files of any of the types.
func (s *Server) walkTypes(ctx context.Context, prefix, field string, fileTypes ...string) ([]bridge.FileInfo, bool, error) {
	prefix = strings.TrimPrefix(prefix, "/")
	clean, err := bridge.CleanPath(prefix)
	if err != nil {
		return nil, false, invalid([]any{field}, "%v", err)
	}
	match, start := clean, path.Dir(clean)
	if strings.HasSuffix(prefix, "/") && clean != "" {
		match, start = clean+"/", clean
	}
	if start == "." {
		start = ""
	}
	var out []bridge.FileInfo
	queue := []string{start}
	visited := 0
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if visited >= maxWalkDirs {
			sortFiles(out)
			return out, true, nil
		}
		dir := queue[0]
		queue = queue[1:]
		visited++
		entries, err := s.listDir(ctx, dir)
		if err != nil {
			if dir == start {
				if bridge.IsNotFound(err) {
					return nil, false, invalid([]any{field}, "no such directory %q", start)
				}
				return nil, false, err
			}
			continue // an unreadable subdirectory does not spoil the listing
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name, ".") {
				continue
			}
			switch {
			case e.Type == "directory":
				// descend where matches can be: inside the prefix, or on the way to it
				if strings.HasPrefix(e.Path+"/", match) || strings.HasPrefix(match, e.Path+"/") {
					queue = append(queue, e.Path)
				}
			case contains(fileTypes, e.Type) && strings.HasPrefix(e.Path, match):
				out = append(out, e)
			}
		}
	}
	sortFiles(out)
	return out, false, nil
}

func sortFiles(fs []bridge.FileInfo) {
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
}

type cellRange struct {
	Start *int `json:"start"`
	End   *int `json:"end"`
}

type getNotebookArgs struct {
	Hashes           bool       `json:"hashes"`
	SinceVersion     string     `json:"since_version"`
	Format           string     `json:"format"`
	IncludeOutputs   bool       `json:"include_outputs"`
	IncludeCollab    bool       `json:"include_collaboration_state"`
	MaxContentLength int        `json:"max_content_length"`
	MaxOutputChars   int        `json:"max_output_chars"`
	CellRange        *cellRange `json:"cell_range"`
}

// notebookReadDefaults are get_notebook's arguments when a call gives none but the path: its
// schema's defaults (for the resources and prompts that read a notebook as it does).
func (s *Server) notebookReadDefaults() getNotebookArgs {
	var a getNotebookArgs
	if err := decodeArgs(s.opsByName["get_notebook"].Input.withDefaults(map[string]any{}).(map[string]any), &a); err != nil {
		panic(err) // a programming error: the schema's defaults do not fit its arguments
	}
	return a
}

// notebookRead is a notebook as read for get_notebook: its cells now, and which of them to show.
type notebookRead struct {
	path        string
	nb          ydoc.Notebook
	version     bridge.Version
	collab      *collab
	first, last int              // the range asked for (inclusive)
	idxs        []int            // the cells to show: the range, or those of it changed since a version
	removed     []string         // since_version: cells deleted since
	file        *bridge.FileRead // read from the file while the room is joined (no version yet)
	since       ydoc.Change
	saved       int // since_version: what the cells not resent would have cost
}

// readNotebookCells reads the notebook and selects the cells to show.
func (s *Server) readNotebookCells(ctx context.Context, c *call, a getNotebookArgs) (notebookRead, error) {
	if c.File != nil && a.SinceVersion != "" { // what changed since a version: the room's history
		room, err := s.openDoc(ctx, c.Path, ydoc.KindNotebook, "")
		if err != nil {
			return notebookRead{}, err
		}
		c.Room, c.File = room, nil
	}
	if c.File != nil {
		r := notebookRead{path: c.Path, nb: c.File.Notebook, file: c.File}
		var err error
		if r.first, r.last, err = resolveRange(a.CellRange, len(r.nb.Cells)); err != nil {
			return notebookRead{}, err
		}
		if a.IncludeCollab {
			r.collab = &collab{Status: string(bridge.StatusConnecting), Collaborators: []collaborator{}}
		}
		for i := r.first; i <= r.last; i++ {
			r.idxs = append(r.idxs, i)
		}
		return r, nil
	}
	r := notebookRead{path: c.Room.Path()}
	if err := c.Room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
		if a.SinceVersion != "" {
			if r.since, err = h.Since(bridge.Version(a.SinceVersion)); err != nil {
				return invalid([]any{"since_version"}, "%v; read the notebook without since_version", err)
			}
		}
		r.nb, err = d.Notebook()
		r.version = h.Version()
		return err
	}); err != nil {
		return notebookRead{}, err
	}
	var err error
	if r.first, r.last, err = resolveRange(a.CellRange, len(r.nb.Cells)); err != nil {
		return notebookRead{}, err
	}
	if a.IncludeCollab {
		cs := collabOf(c.Room.Info())
		r.collab = &cs
	}
	for i := r.first; i <= r.last; i++ {
		r.idxs = append(r.idxs, i)
	}
	if a.SinceVersion == "" {
		return r, nil
	}
	changed := map[string]bool{}
	for _, id := range r.since.Inserted {
		changed[id] = true
	}
	for _, cc := range r.since.Cells {
		changed[cc.ID] = true
	}
	present := map[string]bool{}
	var keep []int
	for _, i := range r.idxs {
		present[r.nb.Cells[i].ID] = true
		if changed[r.nb.Cells[i].ID] {
			keep = append(keep, i)
		} else {
			r.saved += cellWeight(r.nb.Cells[i]) // what a full re-read would have cost
		}
	}
	r.idxs = keep
	for _, id := range r.since.Deleted {
		if !present[id] {
			r.removed = append(r.removed, id)
		}
	}
	return r, nil
}

// renderNotebook renders the selected cells (json, markdown or outline) cell by cell until the
// budget (characters, tokens) is spent, never cutting inside a cell unless the first alone is
// too big.
func (s *Server) renderNotebook(c *call, a getNotebookArgs, r notebookRead) result {
	opts := viewOpts{outputs: a.IncludeOutputs, maxChars: a.MaxOutputChars}
	out := map[string]any{"path": r.path, "version": r.version, "cell_count": len(r.nb.Cells)}
	if r.file != nil {
		delete(out, "version")
		out["from_file"] = fromFileNote(r.file)
	}
	if r.collab != nil {
		out["collaboration"] = *r.collab
	}
	saved := map[string]int{}
	if a.SinceVersion != "" {
		saved[savedChangeAware] += r.saved
		out["since_version"] = a.SinceVersion
		out["changed_cells"] = len(r.idxs)
		if len(r.removed) > 0 {
			out["removed_cell_ids"] = r.removed
		}
		if r.since.Moved {
			out["order_changed"] = true
		}
		if r.since.Meta {
			out["notebook_metadata_changed"] = true
		}
	}
	lang := notebookLanguage(r.nb.Metadata)
	var handles map[string]string
	if a.Format == "text" || a.Format == "outline" {
		ids := make([]string, len(r.nb.Cells))
		for i, cell := range r.nb.Cells {
			ids[i] = cell.ID
		}
		handles = cellHandles(ids)
	}
	sourcesOnly := false // readformat.go: a sources-only read without "@index" and counts
	if a.Format == "text" && !a.IncludeOutputs && a.SinceVersion == "" {
		shownCells := make([]ydoc.Cell, len(r.idxs))
		for k, i := range r.idxs {
			shownCells[k] = r.nb.Cells[i]
		}
		sourcesOnly = handleLinesClear(shownCells, handles)
	}
	piece := func(k int) string {
		i := r.idxs[k]
		cell := r.nb.Cells[i]
		switch {
		case sourcesOnly:
			return sourceCell(handles[cell.ID], cell, a.Hashes)
		case a.Format == "text":
			return textCell(i, handles[cell.ID], cell, opts, a.Hashes)
		case a.Format == "outline":
			return outlineCell(i, handles[cell.ID], cell)
		case a.Format == "markdown":
			return markdownCell(newCellView(i, cell, opts), lang)
		}
		b, _ := json.Marshal(newCellView(i, cell, opts))
		return string(b)
	}
	cut := func(k int, b pageBudget) string { // the first cell alone is over the budget
		i := r.idxs[k]
		cell := r.nb.Cells[i]
		switch a.Format {
		case "outline":
			return outlineCell(i, handles[cell.ID], cell)
		case "text":
			cell.Source, _ = capText(cell.Source, max(a.MaxContentLength/2, 200))
			if sourcesOnly {
				return sourceCell(handles[cell.ID], cell, a.Hashes)
			}
			return textCell(i, handles[cell.ID], cell, viewOpts{outputs: false}, a.Hashes)
		}
		view := newCellView(i, cell, viewOpts{outputs: false})
		view.Source, _ = capText(view.Source, max(a.MaxContentLength/2, 200))
		return markdownCell(view, lang)
	}
	pg := s.fitPage(len(r.idxs), pageBudget{chars: a.MaxContentLength, tokens: c.budget - 300}, piece, cut) // 300: the envelope
	shown := len(pg.pieces)
	if shown < len(r.idxs) || pg.cut {
		lastShown := r.first - 1
		if shown > 0 {
			lastShown = r.idxs[shown-1]
		}
		var next map[string]any
		if shown < len(r.idxs) {
			next = nextRange(cellPages, r.idxs[shown], r.last)
			if a.SinceVersion != "" {
				next["since_version"] = a.SinceVersion
			}
			for _, i := range r.idxs[shown:] {
				saved[savedCaps] += cellWeight(r.nb.Cells[i])
			}
		}
		var cutAt *int
		if pg.cut {
			cutAt = &r.idxs[0]
		}
		t := truncation(cellPages, r.first, lastShown, fmt.Sprintf("max_content_length %d or max_tokens %d reached", a.MaxContentLength, c.budget), next, cutAt)
		t["total_cells"] = len(r.nb.Cells)
		out["truncated"] = t
	}
	switch a.Format {
	case "json":
		cells := make([]json.RawMessage, len(pg.pieces))
		for k, p := range pg.pieces {
			cells[k] = json.RawMessage(p)
		}
		if pg.cut { // the cut cell is rendered as markdown: show it as a cell
			i := r.idxs[0]
			view := newCellView(i, r.nb.Cells[i], viewOpts{outputs: false})
			view.Source, _ = capText(view.Source, max(a.MaxContentLength/2, 200))
			b, _ := json.Marshal(view)
			cells[0] = b
		}
		out["cells"] = cells
		return result{Data: out, Saved: saved}
	case "text":
		return s.renderNotebookText(a, r, out, pg.pieces, shown, saved)
	}
	out["format"] = a.Format
	header := fmt.Sprintf("# %s\n%s · %d cells", r.path, versionLine(r), len(r.nb.Cells))
	if a.SinceVersion != "" {
		header += fmt.Sprintf(" · %d cells changed since %s", len(r.idxs), a.SinceVersion)
	} else if r.first != 0 || shown < len(r.idxs) || r.last != len(r.nb.Cells)-1 {
		end := r.first - 1
		if shown > 0 {
			end = r.idxs[shown-1]
		}
		header += fmt.Sprintf(" · showing cells %d–%d", r.first, end)
	}
	if t, ok := out["truncated"].(map[string]any); ok {
		if nc, ok := t["next_call"]; ok {
			b, _ := json.Marshal(nc)
			header += " · truncated, continue with " + string(b)
		}
	}
	if a.Format == "outline" {
		header += "\nindex type handle [count] (lines): first line → outputs"
	}
	text := header + "\n\n" + strings.Join(pg.pieces, "")
	out["content"] = text // structured clients get the rendering too
	return result{Data: out, Text: text, Saved: saved}
}

// renderNotebookText assembles format=text: one header line (path, version, cell count, who is
// there, what a partial or change-aware read covers), the cells, and how to read on when the
// budget cut the read. structuredContent carries the same text and the few fields a program
// needs (version, truncated.next_call), so a client that hands the model structuredContent only
// costs it about what the text costs (readformat.go).
func (s *Server) renderNotebookText(a getNotebookArgs, r notebookRead, full map[string]any, pieces []string, shown int, saved map[string]int) result {
	var h strings.Builder
	fmt.Fprintf(&h, "%s · %s · %d cells", r.path, versionLine(r), len(r.nb.Cells))
	if names := collaboratorNames(r.collab); names != "" {
		h.WriteString(" · with " + names)
	}
	if a.SinceVersion != "" {
		fmt.Fprintf(&h, " · %d changed since %s", len(r.idxs), a.SinceVersion)
		if len(r.removed) > 0 {
			short := make([]string, len(r.removed))
			for i, id := range r.removed {
				short[i] = id[:min(len(id), 8)]
			}
			h.WriteString(" · removed " + strings.Join(short, " "))
		}
		if r.since.Moved {
			h.WriteString(" · order changed")
		}
		if r.since.Meta {
			h.WriteString(" · notebook metadata changed")
		}
	} else if r.first != 0 || r.last != len(r.nb.Cells)-1 {
		fmt.Fprintf(&h, " · cells %d–%d", r.first, r.last)
	}
	h.WriteByte('\n')
	text := h.String() + strings.Join(pieces, "")
	out := map[string]any{"path": r.path, "version": r.version, "cell_count": len(r.nb.Cells), "format": "text"}
	if r.file != nil {
		delete(out, "version")
		out["from_file"] = fromFileNote(r.file)
	}
	if t, ok := full["truncated"].(map[string]any); ok {
		out["truncated"] = t
		more := "the rest of the cell is not shown"
		if shown < len(r.idxs) {
			more = fmt.Sprintf("cells %d–%d are not shown", r.idxs[shown], r.last)
		}
		text += "[" + more + ": the read reached its budget"
		if nc, ok := t["next_call"]; ok {
			b, _ := json.Marshal(nc)
			text += "; continue with " + string(b)
		}
		text += "]\n"
	}
	out["content"] = text
	return result{Data: out, Text: text, Saved: saved}
}

// versionLine is the header's "version v", or for a read from the file what it is.
func versionLine(r notebookRead) string {
	if r.file == nil {
		return "version " + string(r.version)
	}
	s := "read from the file while the room loads (no version yet; edits wait for the room"
	if r.file.NoIDs > 0 {
		s += fmt.Sprintf("; %d cells have no id until it has loaded: read again to edit them", r.file.NoIDs)
	}
	return s + ")"
}

// fromFileNote says, in a read's structured result, that it was read from the file.
func fromFileNote(f *bridge.FileRead) map[string]any {
	note := map[string]any{"note": "the notebook as its file holds it, read while the sidecar joins its room: unsaved changes " +
		"of collaborators are not in it, and it has no version yet; edits wait for the room"}
	if f.NoIDs > 0 {
		note["cells_without_id"] = f.NoIDs
		note["note"] = note["note"].(string) + fmt.Sprintf("; %d cells have no id until the room has loaded (the server gives them new ones): read again to edit them", f.NoIDs)
	}
	return note
}

// readNotebook reads a notebook the door admitted, as get_notebook does.
func (s *Server) readNotebook(ctx context.Context, room *bridge.Room, a getNotebookArgs, budget int) (result, error) {
	c := &call{doc: doc{Path: room.Path(), Kind: ydoc.KindNotebook, Room: room}, budget: budget}
	r, err := s.readNotebookCells(ctx, c, a)
	if err != nil {
		return result{}, err
	}
	return s.renderNotebook(c, a, r), nil
}

// resolveRange turns an optional inclusive cell range into bounds within n cells.
func resolveRange(r *cellRange, n int) (int, int, error) {
	first, last := 0, n-1
	if r == nil {
		return first, last, nil
	}
	if r.Start != nil {
		first = *r.Start
	}
	if r.End != nil {
		last = *r.End
	}
	if n == 0 {
		return 0, -1, nil
	}
	if first >= n {
		return 0, 0, invalid([]any{"cell_range", "start"}, "is %d but the notebook has %d cells (0..%d)", first, n, n-1)
	}
	if last >= n {
		last = n - 1
	}
	if last < first {
		return 0, 0, invalid([]any{"cell_range", "end"}, "is %d, before start %d", last, first)
	}
	return first, last, nil
}

type sessionArgs struct {
	CreateIfMissing bool   `json:"create_if_missing"`
	FileType        string `json:"file_type"`
	Template        string `json:"template"`
}

// sessionOpened is a document session joined (or created) for create_*_session.
type sessionOpened struct {
	room    *bridge.Room
	created bool
	version bridge.Version
	text    string // text files: the content, for length and line count
	cells   int    // notebooks: the cell count
}

// emptyNotebook is what a new notebook starts as (the server turns no cells into one empty code cell).
const emptyNotebook = `{"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}`

func (s *Server) createNotebookSession(ctx context.Context, c *call, a sessionArgs) (sessionOpened, error) {
	content := []byte(emptyNotebook)
	if a.Template != "" {
		if !a.CreateIfMissing {
			return sessionOpened{}, invalid([]any{"template"}, "applies only with create_if_missing")
		}
		content = templateContent(a.Template)
	}
	return s.openSession(ctx, c.doc, a.CreateIfMissing, content, func() error {
		if extOf(c.Path) != "ipynb" {
			return invalid([]any{"path"}, "a new notebook needs the .ipynb extension (got %q); use create_document_session for other files", c.Path)
		}
		return nil
	})
}

// openSession opens a document's room, creating the document when asked and missing (after
// beforeCreate, when given, accepts the path), and reads what create_*_session report.
func (s *Server) openSession(ctx context.Context, d doc, create bool, content []byte, beforeCreate func() error) (sessionOpened, error) {
	var o sessionOpened
	var err error
	o.room, err = s.openDoc(ctx, d.Path, d.Kind, "")
	switch {
	case err == nil:
	case errors.Is(err, bridge.ErrBadPath):
		return o, invalid([]any{"path"}, "%v", err)
	case !bridge.IsNotFound(err):
		return o, err
	case !create:
		return o, fmt.Errorf("%w (pass create_if_missing=true to create it)", err)
	default:
		if beforeCreate != nil {
			if err := beforeCreate(); err != nil {
				return o, err
			}
		}
		if o.room, err = s.createDoc(ctx, d, content); err != nil {
			return o, err
		}
		o.created = true
	}
	err = o.room.Read(ctx, func(doc *ydoc.Doc, h bridge.History) error {
		o.version = h.Version()
		if doc.Kind() == ydoc.KindNotebook {
			o.cells = doc.NumCells()
			return nil
		}
		var err error
		o.text, err = doc.Text()
		return err
	})
	return o, err
}

// renderSession is the result of create_notebook_session and create_document_session.
func renderSession(_ *call, _ sessionArgs, o sessionOpened) result {
	info := o.room.Info()
	out := map[string]any{
		"path": o.room.Path(), "created": o.created, "room_id": info.RoomID, "session_id": info.SessionID,
		"file_id": info.FileID, "version": o.version, "collaboration": collabOf(info),
	}
	if o.room.Kind() == ydoc.KindNotebook {
		out["cell_count"] = o.cells
	} else {
		out["length"] = utf8.RuneCountInString(o.text)
		out["line_count"] = strings.Count(o.text, "\n") + boolInt(o.text != "" && !strings.HasSuffix(o.text, "\n"))
	}
	return result{Data: out}
}

// cellWeight estimates the tokens a cell costs in a full read (4 bytes a token): counting what
// was not sent would cost what not sending saved.
func cellWeight(c ydoc.Cell) int {
	n := len(c.Source) + 80
	for _, o := range c.Outputs {
		n += min(len(outputText(o)), defaultOutputChars) // reads cap outputs
	}
	return n / 4
}
