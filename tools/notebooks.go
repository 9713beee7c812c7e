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
		).required("path"),
		Example:     map[string]any{"path": "scratch/new.ipynb", "create_if_missing": true},
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
			case e.Type == fileType && strings.HasPrefix(e.Path, match):
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
	if err := room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
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

	// Render cell by cell until the budget is spent; never cut inside a cell unless the first
	// cell alone is too big.
	budget := args.MaxContentLength
	lang := notebookLanguage(nb.Metadata)
	var cells []cellView
	var md strings.Builder
	next := first
	cutCell := false
	for i := first; i <= last; i++ {
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
		if n > budget {
			if i != first {
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
		}
		budget -= n
		next = i + 1
		switch args.Format {
		case "json":
			cells = append(cells, view)
		default:
			md.WriteString(piece)
		}
		if cutCell {
			break
		}
	}
	if next <= last || cutCell {
		t := map[string]any{
			"returned_cells": map[string]int{"start": first, "end": next - 1},
			"total_cells":    len(nb.Cells),
			"reason":         fmt.Sprintf("max_content_length %d reached", args.MaxContentLength),
		}
		if next <= last {
			t["next_call"] = map[string]any{"cell_range": map[string]int{"start": next, "end": last}}
		}
		if cutCell {
			t["cut_cell"] = first
			t["note"] = "that cell alone exceeds max_content_length: its source was cut and its outputs left out; raise max_content_length to read it whole"
		}
		out["truncated"] = t
	}
	switch args.Format {
	case "json":
		if cells == nil {
			cells = []cellView{}
		}
		out["cells"] = cells
		return result{Data: out}, nil
	default:
		out["format"] = args.Format
		header := fmt.Sprintf("# %s\nversion %s · %d cells", room.Path(), version, len(nb.Cells))
		if first != 0 || next-1 != len(nb.Cells)-1 {
			header += fmt.Sprintf(" · showing cells %d–%d", first, next-1)
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
		return result{Data: out, Text: text}, nil
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
}

// emptyNotebook is what a new notebook starts as (the server turns no cells into one empty code cell).
const emptyNotebook = `{"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}`

func (s *Server) createNotebookSession(ctx context.Context, raw map[string]any) (result, error) {
	var args sessionArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, created, err := s.openOrCreate(ctx, args.Path, ydoc.KindNotebook, args.CreateIfMissing, []byte(emptyNotebook), func() error {
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
