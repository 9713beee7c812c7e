package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Text documents (any text file JupyterLab opens collaboratively). Positions are in Unicode code
// points of the current text; Yjs counts UTF-16 units, and the conversion happens here.

var docPathField = field("path", str("Text file path relative to the Jupyter server root, e.g. \"src/model.py\"."))

func (s *Server) registerDocumentTools() {
	s.register(&operation{
		Name:     "list_documents",
		Title:    "List text documents",
		Category: "documents",
		Description: "List text files under the Jupyter root (recursively; notebooks and binary files excluded) with " +
			"their collaboration status.",
		Input: object(
			field("path_filter", str("A path prefix (\"src/\") or a glob on the path (\"src/*.py\", \"*.md\").").def("")),
			field("file_type", str("Only files with this extension, e.g. \"py\" or \"md\".")),
			field("max_results", integer("Maximum number of documents returned.").def(50).min(1).max(1000)),
		),
		Example:  map[string]any{"path_filter": "src/", "file_type": "py"},
		ReadOnly: true, Idempotent: true,
		Run: s.listDocuments,
	})
	s.register(&operation{
		Name:     "get_document",
		Title:    "Read a text document",
		Category: "documents",
		Description: "Read a live text document as every collaborator sees it now, with its version, length in code " +
			"points and line count. line_range reads only some lines; content beyond max_content_length is cut at a " +
			"line boundary and the result says how to read the rest.",
		Input: object(
			docPathField,
			field("max_content_length", integer("Upper bound of the returned content in characters.").def(100000).min(100).max(5000000)),
			field("include_collaboration_state", boolean("Include who is in the room and the room status.").def(true)),
			field("line_range", object(
				field("start", integer("First line, 1-based.").min(1)),
				field("end", integer("Last line, inclusive; omit for the end.").min(1)),
			).desc("Only these lines.")),
		).required("path"),
		Example:  map[string]any{"path": "src/model.py", "line_range": map[string]any{"start": 1, "end": 40}},
		ReadOnly: true, Idempotent: true,
		Run: s.getDocument,
	})
	s.register(&operation{
		Name:     "create_document_session",
		Title:    "Open a document session",
		Category: "documents",
		Description: "Join (or reuse) the collaboration room of a text file, creating an empty file first when " +
			"create_if_missing is true. Returns room id, session id, file id, length, line count and version.",
		Input: object(
			docPathField,
			field("create_if_missing", boolean("Create an empty file at path if there is none.").def(false)),
			field("file_type", str("Expected extension (e.g. \"md\"): refuses a path with another one, to catch typos.")),
		).required("path"),
		Example:    map[string]any{"path": "notes/todo.md", "create_if_missing": true},
		Idempotent: true,
		Run:        s.createDocumentSession,
	})
	positionSchema := func(desc string) *schema { return integer(desc).min(-1) }
	s.register(&operation{
		Name:     "batch_update_document",
		Title:    "Replace text",
		Category: "documents",
		Description: "Replace ranges of a text document in one transaction: each operation replaces length code points " +
			"at position with content (position -1 appends). Positions refer to the text before this call; operations " +
			"must not overlap.",
		Input: object(
			docPathField,
			field("operations", array("Replacements.", object(
				field("content", str("Text to put in.").def("")),
				field("position", positionSchema("Code point offset in the current text; -1 = end.").def(-1)),
				field("length", integer("Code points to replace (0 = insert).").def(0).min(0)),
			)).items(1, maxBatch)),
			versionField,
		).required("path", "operations"),
		Example:     map[string]any{"path": "notes/todo.md", "operations": []any{map[string]any{"position": 0, "length": 6, "content": "# TODO"}}},
		Destructive: true,
		Run:         s.textEdit("batch_update_document"),
	})
	s.register(&operation{
		Name:        "batch_insert_text",
		Title:       "Insert text",
		Category:    "documents",
		Description: "Insert text at code point positions of the current text, in one transaction (position -1 appends).",
		Input: object(
			docPathField,
			field("operations", array("Insertions.", object(
				field("text", str("Text to insert.")),
				field("position", positionSchema("Code point offset in the current text; -1 = end.")),
			).required("text", "position")).items(1, maxBatch)),
			versionField,
		).required("path", "operations"),
		Example: map[string]any{"path": "notes/todo.md", "operations": []any{map[string]any{"position": -1, "text": "\n- review the plots\n"}}},
		Run:     s.textEdit("batch_insert_text"),
	})
	s.register(&operation{
		Name:        "batch_delete_text",
		Title:       "Delete text",
		Category:    "documents",
		Description: "Delete ranges of code points of the current text, in one transaction; ranges must not overlap.",
		Input: object(
			docPathField,
			field("operations", array("Deletions.", object(
				field("position", integer("Code point offset in the current text.").min(0)),
				field("length", integer("Code points to delete.").min(1)),
			).required("position", "length")).items(1, maxBatch)),
			versionField,
		).required("path", "operations"),
		Example:     map[string]any{"path": "notes/todo.md", "operations": []any{map[string]any{"position": 10, "length": 5}}},
		Destructive: true,
		Run:         s.textEdit("batch_delete_text"),
	})
}

// binaryExt are extensions whose files are not text documents.
var binaryExt = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "bmp": true, "ico": true, "webp": true, "tif": true, "tiff": true,
	"pdf": true, "zip": true, "gz": true, "tgz": true, "bz2": true, "xz": true, "7z": true, "tar": true, "jar": true,
	"whl": true, "so": true, "dylib": true, "dll": true, "exe": true, "bin": true, "pyc": true, "o": true, "a": true,
	"parquet": true, "feather": true, "h5": true, "hdf5": true, "npy": true, "npz": true, "pkl": true, "pickle": true,
	"db": true, "sqlite": true, "mp3": true, "mp4": true, "wav": true, "mov": true, "avi": true, "woff": true, "woff2": true, "ttf": true, "otf": true,
	"xlsx": true, "xls": true, "docx": true, "pptx": true, "ipynb": true,
}

func extOf(p string) string { return strings.ToLower(strings.TrimPrefix(path.Ext(p), ".")) }

type listDocumentsArgs struct {
	PathFilter string `json:"path_filter"`
	FileType   string `json:"file_type"`
	MaxResults int    `json:"max_results"`
}

type documentEntry struct {
	Path          string         `json:"path"`
	LastModified  string         `json:"last_modified,omitempty"`
	Size          *int64         `json:"size,omitempty"`
	Open          bool           `json:"open"`
	Collaborators []collaborator `json:"collaborators,omitempty"`
}

func (s *Server) listDocuments(ctx context.Context, raw map[string]any) (result, error) {
	args := listDocumentsArgs{MaxResults: 50}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	prefix, glob := args.PathFilter, ""
	if strings.ContainsAny(args.PathFilter, "*?[") {
		if _, err := path.Match(args.PathFilter, ""); err != nil {
			return result{}, invalid([]any{"path_filter"}, "is not a valid glob: %v", err)
		}
		glob = args.PathFilter
		prefix = args.PathFilter[:strings.IndexAny(args.PathFilter, "*?[")]
		if i := strings.LastIndex(prefix, "/"); i >= 0 {
			prefix = prefix[:i+1]
		} else {
			prefix = ""
		}
	}
	files, truncatedWalk, err := s.walk(ctx, prefix, "file", "path_filter")
	if err != nil {
		return result{}, err
	}
	want := strings.ToLower(strings.TrimPrefix(args.FileType, "."))
	var picked []bridge.FileInfo
	for _, f := range files {
		ext := extOf(f.Path)
		switch {
		case binaryExt[ext]:
			continue
		case want != "" && ext != want:
			continue
		case glob != "":
			ok, _ := path.Match(glob, f.Path)
			base, _ := path.Match(glob, path.Base(f.Path))
			if !ok && !(base && !strings.Contains(glob, "/")) {
				continue
			}
		}
		picked = append(picked, f)
	}
	total := len(picked)
	if len(picked) > args.MaxResults {
		picked = picked[:args.MaxResults]
	}
	entries := make([]documentEntry, 0, len(picked))
	for _, f := range picked {
		e := documentEntry{Path: f.Path}
		if !f.LastModified.IsZero() {
			e.LastModified = f.LastModified.UTC().Format("2006-01-02T15:04:05Z")
		}
		if f.Size >= 0 {
			size := f.Size
			e.Size = &size
		}
		if room := s.opts.Manager.Get(f.Path, ydoc.KindText); room != nil {
			e.Open = true
			e.Collaborators = collabOf(room.Info()).Collaborators
		}
		entries = append(entries, e)
	}
	out := map[string]any{"documents": entries, "count": len(entries)}
	if total > len(entries) || truncatedWalk {
		out["truncated"] = true
		out["note"] = fmt.Sprintf("showing %d of %d documents found; narrow path_filter or raise max_results", len(entries), total)
	}
	return result{Data: out}, nil
}

func (s *Server) openText(ctx context.Context, p string) (*bridge.Room, error) {
	room, err := s.openRoom(ctx, p, ydoc.KindText)
	if err != nil {
		if errors.Is(err, bridge.ErrBadPath) {
			return nil, invalid([]any{"path"}, "%v", err)
		}
		return nil, err
	}
	return room, nil
}

type getDocumentArgs struct {
	Path             string `json:"path"`
	MaxContentLength int    `json:"max_content_length"`
	IncludeCollab    *bool  `json:"include_collaboration_state"`
	LineRange        *struct {
		Start *int `json:"start"`
		End   *int `json:"end"`
	} `json:"line_range"`
}

func (s *Server) getDocument(ctx context.Context, raw map[string]any) (result, error) {
	args := getDocumentArgs{MaxContentLength: 100000}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.openText(ctx, args.Path)
	if err != nil {
		return result{}, err
	}
	var text string
	var version bridge.Version
	if err := room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
		text, err = d.Text()
		version = h.Version()
		return err
	}); err != nil {
		return result{}, err
	}
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first, last := 1, len(lines)
	if args.LineRange != nil {
		if args.LineRange.Start != nil {
			first = *args.LineRange.Start
		}
		if args.LineRange.End != nil {
			last = min(*args.LineRange.End, len(lines))
		}
		if first > len(lines) && len(lines) > 0 {
			return result{}, invalid([]any{"line_range", "start"}, "is %d but the document has %d lines", first, len(lines))
		}
		if last < first && len(lines) > 0 {
			return result{}, invalid([]any{"line_range", "end"}, "is before start %d", first)
		}
	}
	var b strings.Builder
	budget := args.MaxContentLength
	next := first
	cutLine := 0
	for i := first; i <= last && i >= 1; i++ {
		l := lines[i-1]
		n := utf8.RuneCountInString(l)
		if n > budget {
			if i == first { // one huge line: cut inside it
				cut, _ := capText(l, budget)
				b.WriteString(cut)
				next = i + 1
				cutLine = i
			}
			break
		}
		budget -= n
		b.WriteString(l)
		next = i + 1
	}
	content := b.String()
	reason := fmt.Sprintf("max_content_length %d reached", args.MaxContentLength)
	if budgetTokens := s.maxTokensOf(raw) - 200; cutLine == 0 && next > first && s.tokens.Count(content) > budgetTokens {
		// Over the token budget: keep the most lines that fit (binary search on the line count).
		lo, hi, keep := 1, next-first, 1
		for lo <= hi {
			mid := (lo + hi) / 2
			if s.tokens.Count(strings.Join(lines[first-1:first-1+mid], "")) <= budgetTokens {
				keep, lo = mid, mid+1
			} else {
				hi = mid - 1
			}
		}
		content = strings.Join(lines[first-1:first-1+keep], "")
		next = first + keep
		reason = fmt.Sprintf("max_tokens %d reached", s.maxTokensOf(raw))
	}
	out := map[string]any{
		"path": room.Path(), "version": version, "content": content,
		"length": utf8.RuneCountInString(text), "line_count": len(lines),
	}
	if args.LineRange != nil {
		out["lines"] = map[string]int{"start": first, "end": next - 1}
	}
	if next <= last || cutLine > 0 {
		t := map[string]any{
			"returned_lines": map[string]int{"start": first, "end": next - 1},
			"reason":         reason,
		}
		if next <= last {
			t["next_call"] = map[string]any{"line_range": map[string]int{"start": next, "end": last}}
		}
		if cutLine > 0 {
			t["cut_line"] = cutLine
			t["note"] = "that line alone exceeds max_content_length and was cut; raise max_content_length to read it whole"
		}
		out["truncated"] = t
	}
	if boolOr(args.IncludeCollab, true) {
		out["collaboration"] = collabOf(room.Info())
	}
	return result{Data: out}, nil
}

func (s *Server) createDocumentSession(ctx context.Context, raw map[string]any) (result, error) {
	var args sessionArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	if want := strings.ToLower(strings.TrimPrefix(args.FileType, ".")); want != "" && extOf(args.Path) != want {
		return result{}, invalid([]any{"path"}, "has extension %q, not the file_type %q you asked for", extOf(args.Path), want)
	}
	if extOf(args.Path) == "ipynb" {
		return result{}, invalid([]any{"path"}, "is a notebook; use create_notebook_session")
	}
	room, created, err := s.openOrCreate(ctx, args.Path, ydoc.KindText, args.CreateIfMissing, nil, nil)
	if err != nil {
		return result{}, err
	}
	var text string
	var version bridge.Version
	if err := room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
		text, err = d.Text()
		version = h.Version()
		return err
	}); err != nil {
		return result{}, err
	}
	info := room.Info()
	return result{Data: map[string]any{
		"path": room.Path(), "created": created, "room_id": info.RoomID, "session_id": info.SessionID, "file_id": info.FileID,
		"length": utf8.RuneCountInString(text), "line_count": strings.Count(text, "\n") + boolInt(text != "" && !strings.HasSuffix(text, "\n")),
		"version": version, "collaboration": collabOf(info),
	}}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type textOp struct {
	Content  *string `json:"content"`
	Text     *string `json:"text"`
	Position *int    `json:"position"`
	Length   int     `json:"length"`
}

type textEditArgs struct {
	Path       string   `json:"path"`
	Operations []textOp `json:"operations"`
	guardArgs
}

// lastStart is where the last operation given starts (code points of text).
func (a textEditArgs) lastStart(text string) int {
	op := a.Operations[len(a.Operations)-1]
	if op.Position == nil || *op.Position < 0 {
		return utf8.RuneCountInString(text)
	}
	return *op.Position
}

// span is one operation as a replacement of [start, end) code points by ins.
type span struct {
	index      int
	start, end int
	ins        string
}

// planText validates operations against the text (code points) and orders them for applying
// from the end. It changes nothing.
func planText(text string, ops []textOp) ([]span, error) {
	n := utf8.RuneCountInString(text)
	spans := make([]span, len(ops))
	for i, op := range ops {
		pos := -1
		if op.Position != nil {
			pos = *op.Position
		}
		ins := ""
		switch {
		case op.Content != nil:
			ins = *op.Content
		case op.Text != nil:
			ins = *op.Text
		}
		if pos == -1 {
			if op.Length != 0 {
				return nil, invalid([]any{"operations", i, "length"}, "must be 0 when position is -1 (append)")
			}
			pos = n
		}
		if pos > n {
			return nil, invalid([]any{"operations", i, "position"}, "is %d but the text has %d code points (valid 0..%d, or -1 for the end)", pos, n, n)
		}
		if pos+op.Length > n {
			return nil, invalid([]any{"operations", i, "length"}, "runs to %d, past the end of the text (%d code points)", pos+op.Length, n)
		}
		spans[i] = span{index: i, start: pos, end: pos + op.Length, ins: ins}
	}
	// Pairwise: ranges may not intersect, and an insertion may not fall strictly inside a range.
	// (At most 500 operations, so quadratic is fine and obviously right.)
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			if a, b := spans[i], spans[j]; spansOverlap(a, b) {
				return nil, invalid([]any{"operations", b.index}, "overlaps operation %d (code points %d..%d and %d..%d); operations must touch disjoint ranges", a.index, a.start, a.end, b.start, b.end)
			}
		}
	}
	// Operations at the same position merge into one replacement whose text is their texts in
	// the order given (there is at most one non-empty range per position); then apply from the
	// end, so earlier positions stay valid.
	byStart := map[int]*span{}
	for _, sp := range spans {
		if g, ok := byStart[sp.start]; ok {
			g.end = max(g.end, sp.end)
			g.ins += sp.ins
			continue
		}
		c := sp
		byStart[sp.start] = &c
	}
	merged := make([]span, 0, len(byStart))
	for _, g := range byStart {
		merged = append(merged, *g)
	}
	sort.Slice(merged, func(a, b int) bool { return merged[a].start > merged[b].start })
	return merged, nil
}

func spansOverlap(a, b span) bool {
	switch {
	case a.start == a.end && b.start == b.end:
		return false
	case a.start == a.end:
		return b.start < a.start && a.start < b.end
	case b.start == b.end:
		return a.start < b.start && b.start < a.end
	}
	return a.start < b.end && b.start < a.end
}

func (s *Server) textEdit(name string) func(ctx context.Context, raw map[string]any) (result, error) {
	return func(ctx context.Context, raw map[string]any) (result, error) {
		var args textEditArgs
		if err := decodeArgs(raw, &args); err != nil {
			return result{}, err
		}
		room, err := s.openText(ctx, args.Path)
		if err != nil {
			return result{}, err
		}
		var length, cursor int
		ed, err := room.Apply(ctx, func(tx *ydoc.Txn, h bridge.History, replaying bool) error {
			tx.Undoable() // the agent may take it back (undo_last_edit)
			text, err := tx.Text()
			if err != nil {
				return err
			}
			if !replaying && args.ExpectedVersion != "" {
				ch, err := h.Since(bridge.Version(args.ExpectedVersion))
				if err != nil {
					return &toolError{Message: fmt.Sprintf("conflict: cannot tell what changed since version %q (%v); re-read the document", args.ExpectedVersion, err), Extra: map[string]any{"current_version": h.Version()}}
				}
				if ch.Text {
					return &toolError{Message: fmt.Sprintf("conflict: the document changed since version %s, so positions may have moved; nothing was modified. Re-read it and retry", args.ExpectedVersion), Extra: map[string]any{"current_version": h.Version()}}
				}
			}
			plan, err := planText(text, args.Operations)
			if err != nil {
				return err
			}
			for _, sp := range plan {
				from, err := ydoc.CodePointsToUTF16(text, sp.start)
				if err != nil {
					return err
				}
				to, err := ydoc.CodePointsToUTF16(text, sp.end)
				if err != nil {
					return err
				}
				if err := tx.DeleteText(from, to-from); err != nil {
					return err
				}
				if err := tx.InsertText(from, sp.ins); err != nil {
					return err
				}
			}
			after, _ := tx.Text()
			length = utf8.RuneCountInString(after)
			// The agent's cursor goes after the last operation given, in the new text.
			if len(plan) > 0 {
				last, ls := plan[0], args.lastStart(text)
				for _, sp := range plan {
					if sp.start == ls {
						last = sp // operations at one position were merged into one span
					}
				}
				shift := 0
				for _, sp := range plan {
					if sp.start < last.start {
						shift += utf8.RuneCountInString(sp.ins) - (sp.end - sp.start)
					}
				}
				cp := last.start + shift + utf8.RuneCountInString(last.ins)
				cursor, _ = ydoc.CodePointsToUTF16(after, min(cp, length))
			}
			return nil
		})
		if err != nil {
			return result{}, err
		}
		s.moveCursorTo(ctx, room, "", cursor)
		return result{Data: map[string]any{"path": room.Path(), "version": ed.Version, "applied": len(args.Operations), "length": length}}, nil
	}
}

// jsonEqual compares JSON-like values after a round trip (numbers by value).
func jsonEqual(a, b any) bool {
	norm := func(v any) any {
		bs, _ := json.Marshal(v)
		var out any
		_ = json.Unmarshal(bs, &out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
