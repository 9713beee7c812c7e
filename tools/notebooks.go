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

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Reading notebooks: list, read (json, markdown, outline), open a session.

var pathField = field("path", str("Notebook path relative to the Jupyter server root, e.g. \"analysis/report.ipynb\"."))

func (s *Server) registerNotebookTools() {
	s.register(&operation{
		Name:     "list_notebooks",
		Title:    "List notebooks",
		Category: "notebooks",
		Description: "List notebooks under the Jupyter root (recursively), with their collaboration status: " +
			"whether the sidecar has the room open, who is in it, and the cell count of open rooms.",
		Input: object(
			field("path_prefix", str("Only notebooks whose path starts with this (a directory like \"analysis/\" or a name prefix).").def("")),
			field("max_results", integer("Maximum number of notebooks returned.").def(50).min(1).max(1000)),
		),
		Example:  map[string]any{"path_prefix": "analysis/", "max_results": 20},
		ReadOnly: true, Idempotent: true,
		Run: s.listNotebooks,
	})
	s.register(&operation{
		Name:     "get_notebook",
		Title:    "Read a notebook",
		Category: "notebooks",
		Description: "Read a live notebook as every collaborator sees it now: cells with id, index, type, source, " +
			"source_hash, execution count and outputs (text capped, images summarised), plus the notebook's version " +
			"(pass it as expected_version to edits). Content beyond max_content_length is cut at a cell boundary and " +
			"the result says how to read the rest. format=markdown gives a readable document, format=outline one line per cell.",
		Input: object(
			pathField,
			field("format", str("json (cells as objects), markdown (readable), or outline (one line per cell, with output sizes).").enum("json", "markdown", "outline").def("json")),
			field("include_outputs", boolean("Include cell outputs.").def(true)),
			field("include_collaboration_state", boolean("Include who is in the room and the room status.").def(true)),
			field("max_content_length", integer("Upper bound of the returned content in characters; the cut falls on a cell boundary.").def(100000).min(1000).max(5000000)),
			field("max_output_chars", integer("Upper bound of each output's text in characters.").def(2000).min(0).max(1000000)),
			field("since_version", str("Only the cells added or changed since this version (from an earlier read or edit), plus the ids of cells removed since: re-reading after someone's edit costs the change, not the notebook.")),
			field("cell_range", object(
				field("start", integer("First cell index (0-based).").min(0)),
				field("end", integer("Last cell index, inclusive; omit for the end of the notebook.").min(0)),
			).desc("Only these cells.")),
		).required("path"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "format": "json", "cell_range": map[string]any{"start": 0, "end": 9}},
		ReadOnly: true, Idempotent: true,
		Run: s.getNotebook,
	})
	s.register(&operation{
		Name:     "create_notebook_session",
		Title:    "Open a notebook session",
		Category: "notebooks",
		Description: "Join (or reuse) the collaboration room of a notebook, creating the notebook first when " +
			"create_if_missing is true. Returns room id, session id, file id, cell count, collaborators and version.",
		Input: object(
			pathField,
			field("create_if_missing", boolean("Create an empty notebook at path if there is none.").def(false)),
			field("template", str("With create_if_missing: start the new notebook from this template (jupyter://templates/{name}) instead of empty.").enum(templateNames()...)),
		).required("path"),
		Example:     map[string]any{"path": "scratch/new.ipynb", "create_if_missing": true, "template": "analysis"},
		Idempotent:  true,
		Destructive: false,
		Run:         s.createNotebookSession,
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

type notebookEntry struct {
	Path          string         `json:"path"`
	LastModified  string         `json:"last_modified,omitempty"`
	Size          *int64         `json:"size,omitempty"`
	Open          bool           `json:"open"`
	CellCount     *int           `json:"cell_count,omitempty"`
	Collaborators []collaborator `json:"collaborators,omitempty"`
}

// maxWalkDirs bounds a recursive listing.
const maxWalkDirs = 2000

func (s *Server) listNotebooks(ctx context.Context, raw map[string]any) (result, error) {
	args := listNotebooksArgs{MaxResults: 50}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	files, truncatedWalk, err := s.walk(ctx, args.PathPrefix, "notebook", "path_prefix")
	if err != nil {
		return result{}, err
	}
	total := len(files)
	if len(files) > args.MaxResults {
		files = files[:args.MaxResults]
	}
	entries := make([]notebookEntry, 0, len(files))
	for _, f := range files {
		e := notebookEntry{Path: f.Path}
		if !f.LastModified.IsZero() {
			e.LastModified = f.LastModified.UTC().Format("2006-01-02T15:04:05Z")
		}
		if f.Size >= 0 {
			size := f.Size
			e.Size = &size
		}
		if room := s.opts.Manager.Get(f.Path, ydoc.KindNotebook); room != nil {
			e.Open = true
			e.Collaborators = collabOf(room.Info()).Collaborators
			_ = room.View(ctx, func(d *ydoc.Doc) error {
				n := len(d.CellIDs())
				e.CellCount = &n
				return nil
			})
		}
		entries = append(entries, e)
	}
	out := map[string]any{"notebooks": entries, "count": len(entries)}
	if total > len(entries) || truncatedWalk {
		out["truncated"] = true
		out["note"] = fmt.Sprintf("showing %d of %d notebooks found; narrow path_prefix or raise max_results", len(entries), total)
	}
	return result{Data: out}, nil
}

// walk lists files of a type (notebook, file) whose path starts with prefix, breadth first,
// sorted. A prefix ending in "/" is a directory; otherwise it is a path prefix ("analysis"
// matches analysis/… and analysis_old.ipynb). field names the argument in error details.
func (s *Server) walk(ctx context.Context, prefix, fileType, field string) ([]bridge.FileInfo, bool, error) {
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
		entries, err := s.opts.Manager.List(ctx, dir)
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
			case e.Type == fileType && strings.HasPrefix(e.Path, match) && visible(ctx, e.Path):
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
	Path             string     `json:"path"`
	SinceVersion     string     `json:"since_version"`
	Format           string     `json:"format"`
	IncludeOutputs   *bool      `json:"include_outputs"`
	IncludeCollab    *bool      `json:"include_collaboration_state"`
	MaxContentLength int        `json:"max_content_length"`
	MaxOutputChars   *int       `json:"max_output_chars"`
	CellRange        *cellRange `json:"cell_range"`
}

func (s *Server) getNotebook(ctx context.Context, raw map[string]any) (result, error) {
	args := getNotebookArgs{Format: "json", MaxContentLength: 100000}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	maxOut := 2000
	if args.MaxOutputChars != nil {
		maxOut = *args.MaxOutputChars
	}
	room, err := s.openNotebook(ctx, args.Path)
	if err != nil {
		return result{}, err
	}
	var nb ydoc.Notebook
	var version bridge.Version
	var since ydoc.Change
	if err := room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
		if args.SinceVersion != "" {
			if since, err = h.Since(bridge.Version(args.SinceVersion)); err != nil {
				return invalid([]any{"since_version"}, "%v; read the notebook without since_version", err)
			}
		}
		nb, err = d.Notebook()
		version = h.Version()
		return err
	}); err != nil {
		return result{}, err
	}
	first, last, err := resolveRange(args.CellRange, len(nb.Cells))
	if err != nil {
		return result{}, err
	}
	opts := viewOpts{outputs: boolOr(args.IncludeOutputs, true), maxChars: maxOut}
	out := map[string]any{"path": room.Path(), "version": version, "cell_count": len(nb.Cells)}
	if boolOr(args.IncludeCollab, true) {
		out["collaboration"] = collabOf(room.Info())
	}
	saved := map[string]int{}
	// The cells to show: the range, or those of it that changed since a version.
	var idxs []int
	for i := first; i <= last; i++ {
		idxs = append(idxs, i)
	}
	if args.SinceVersion != "" {
		changed := map[string]bool{}
		for _, id := range since.Inserted {
			changed[id] = true
		}
		for _, cc := range since.Cells {
			changed[cc.ID] = true
		}
		present := map[string]bool{}
		var keep []int
		for _, i := range idxs {
			present[nb.Cells[i].ID] = true
			if changed[nb.Cells[i].ID] {
				keep = append(keep, i)
			} else {
				saved[savedChangeAware] += cellWeight(nb.Cells[i]) // what a full re-read would have cost
			}
		}
		idxs = keep
		var removed []string
		for _, id := range since.Deleted {
			if !present[id] {
				removed = append(removed, id)
			}
		}
		out["since_version"] = args.SinceVersion
		out["changed_cells"] = len(idxs)
		if len(removed) > 0 {
			out["removed_cell_ids"] = removed
		}
		if since.Moved {
			out["order_changed"] = true
		}
		if since.Meta {
			out["notebook_metadata_changed"] = true
		}
	}

	// Render cell by cell until a budget (characters, tokens) is spent; never cut inside a cell
	// unless the first cell alone is too big.
	budget := args.MaxContentLength
	tokenBudget := s.maxTokensOf(raw) - 300 // room for the envelope
	lang := notebookLanguage(nb.Metadata)
	var cells []cellView
	var md strings.Builder
	next := len(idxs)
	cutCell := false
	for k, i := range idxs {
		c := nb.Cells[i]
		var piece string
		var view cellView
		switch args.Format {
		case "outline":
			piece = outlineCell(i, c)
		default:
			view = newCellView(i, c, opts)
			if args.Format == "markdown" {
				piece = markdownCell(view, lang)
			} else {
				b, _ := json.Marshal(view)
				piece = string(b)
			}
		}
		n := utf8.RuneCountInString(piece)
		tk := s.tokens.Count(piece)
		if n > budget || tk > tokenBudget {
			if k != 0 {
				next = k
				break
			}
			// The first cell alone is over the budget: cut its source and outputs.
			view = newCellView(i, c, viewOpts{outputs: false})
			view.Source, _ = capText(view.Source, max(budget/2, 200))
			piece = markdownCell(view, lang)
			if args.Format == "outline" {
				piece = outlineCell(i, c)
			}
			cutCell = true
			tk = s.tokens.Count(piece)
		}
		budget -= n
		tokenBudget -= tk
		switch args.Format {
		case "json":
			cells = append(cells, view)
		default:
			md.WriteString(piece)
		}
		if cutCell {
			next = k + 1
			break
		}
	}
	if next < len(idxs) || cutCell {
		lastShown := first - 1
		if next > 0 {
			lastShown = idxs[next-1]
		}
		t := map[string]any{
			"returned_cells": map[string]int{"start": first, "end": lastShown},
			"total_cells":    len(nb.Cells),
			"reason":         fmt.Sprintf("max_content_length %d or max_tokens %d reached", args.MaxContentLength, s.maxTokensOf(raw)),
		}
		if next < len(idxs) {
			nc := map[string]any{"cell_range": map[string]int{"start": idxs[next], "end": last}}
			if args.SinceVersion != "" {
				nc["since_version"] = args.SinceVersion
			}
			t["next_call"] = nc
			for _, i := range idxs[next:] {
				saved[savedCaps] += cellWeight(nb.Cells[i])
			}
		}
		if cutCell {
			t["cut_cell"] = idxs[0]
			t["note"] = "that cell alone exceeds the budget: its source was cut and its outputs left out; raise max_content_length or max_tokens to read it whole"
		}
		out["truncated"] = t
	}
	switch args.Format {
	case "json":
		if cells == nil {
			cells = []cellView{}
		}
		out["cells"] = cells
		return result{Data: out, Saved: saved}, nil
	default:
		out["format"] = args.Format
		header := fmt.Sprintf("# %s\nversion %s · %d cells", room.Path(), version, len(nb.Cells))
		if args.SinceVersion != "" {
			header += fmt.Sprintf(" · %d cells changed since %s", len(idxs), args.SinceVersion)
		} else if first != 0 || next < len(idxs) || last != len(nb.Cells)-1 {
			end := first - 1
			if next > 0 {
				end = idxs[next-1]
			}
			header += fmt.Sprintf(" · showing cells %d–%d", first, end)
		}
		if t, ok := out["truncated"].(map[string]any); ok {
			if nc, ok := t["next_call"]; ok {
				b, _ := json.Marshal(nc)
				header += " · truncated, continue with " + string(b)
			}
		}
		if args.Format == "outline" {
			header += "\nindex type id [count] (lines): first line → outputs"
		}
		text := header + "\n\n" + md.String()
		out["content"] = text // structured clients get the rendering too
		return result{Data: out, Text: text, Saved: saved}, nil
	}
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

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// openNotebook joins a notebook's room, with errors phrased for the model.
func (s *Server) openNotebook(ctx context.Context, p string) (*bridge.Room, error) {
	if p == "" {
		return nil, invalid([]any{"path"}, "is required")
	}
	room, err := s.openRoom(ctx, p, ydoc.KindNotebook)
	if err != nil {
		if errors.Is(err, bridge.ErrBadPath) {
			return nil, invalid([]any{"path"}, "%v", err)
		}
		return nil, err
	}
	return room, nil
}

type sessionArgs struct {
	Path            string `json:"path"`
	CreateIfMissing bool   `json:"create_if_missing"`
	FileType        string `json:"file_type"`
	Template        string `json:"template"`
}

// emptyNotebook is what a new notebook starts as (the server turns no cells into one empty code cell).
const emptyNotebook = `{"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}`

func (s *Server) createNotebookSession(ctx context.Context, raw map[string]any) (result, error) {
	var args sessionArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	content := []byte(emptyNotebook)
	if args.Template != "" {
		if !args.CreateIfMissing {
			return result{}, invalid([]any{"template"}, "applies only with create_if_missing")
		}
		content = templateContent(args.Template)
	}
	room, created, err := s.openOrCreate(ctx, args.Path, ydoc.KindNotebook, args.CreateIfMissing, content, func() error {
		if extOf(args.Path) != "ipynb" {
			return invalid([]any{"path"}, "a new notebook needs the .ipynb extension (got %q); use create_document_session for other files", args.Path)
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	var cells int
	var version bridge.Version
	if err := room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		cells, version = len(d.CellIDs()), h.Version()
		return nil
	}); err != nil {
		return result{}, err
	}
	info := room.Info()
	return result{Data: map[string]any{
		"path": room.Path(), "created": created, "room_id": info.RoomID, "session_id": info.SessionID,
		"file_id": info.FileID, "cell_count": cells, "version": version, "collaboration": collabOf(info),
	}}, nil
}

// openOrCreate opens a document's room, creating the document when asked and missing (after
// beforeCreate, when given, accepts the path).
func (s *Server) openOrCreate(ctx context.Context, p string, kind ydoc.Kind, create bool, content []byte, beforeCreate func() error) (*bridge.Room, bool, error) {
	room, err := s.opts.Manager.Open(ctx, p, kind)
	if err == nil {
		return room, false, nil
	}
	if errors.Is(err, bridge.ErrBadPath) {
		return nil, false, invalid([]any{"path"}, "%v", err)
	}
	if !create || !bridge.IsNotFound(err) {
		if bridge.IsNotFound(err) {
			return nil, false, fmt.Errorf("%w (pass create_if_missing=true to create it)", err)
		}
		return nil, false, err
	}
	if beforeCreate != nil {
		if err := beforeCreate(); err != nil {
			return nil, false, err
		}
	}
	room, err = s.opts.Manager.Create(ctx, p, kind, content)
	if err != nil {
		return nil, false, err
	}
	return room, true, nil
}

// cellWeight estimates the tokens a cell costs in a full read (4 bytes a token): counting what
// was not sent would cost what not sending saved.
func cellWeight(c ydoc.Cell) int {
	n := len(c.Source) + 80
	for _, o := range c.Outputs {
		n += min(len(outputText(o)), 2000) // reads cap outputs
	}
	return n / 4
}
