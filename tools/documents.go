package tools

import (
	"context"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Text documents (any text file JupyterLab opens collaboratively). Positions are in Unicode code
// points of the current text; Yjs counts UTF-16 units, and the conversion happens here.

var docPathField = brief("path", str("Text file path relative to the Jupyter server root, e.g. \"src/model.py\"."))

func (s *Server) registerDocumentTools() {
	s.register(&operation{
		Name:        "list_documents",
		Title:       "List text documents",
		Category:    "documents",
		Scope:       auth.ScopeRead,
		Description: "List text files (not notebooks) under a prefix or matching a glob, with whether each is open and who is in it.",
		Input: object(
			field("path_filter", str("A path prefix (\"src/\") or a glob on the path (\"src/*.py\", \"*.md\").").def("")),
			brief("file_type", str("Only files with this extension, e.g. \"py\" or \"md\".")),
			brief("max_results", integer("Maximum number of documents returned.").def(50).min(1).max(1000)),
		),
		Example:  map[string]any{"path_filter": "src/", "file_type": "py"},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Run: handle(s.listDocuments, renderListing[listDocumentsArgs]("documents", "path_filter")),
	})
	s.register(&operation{
		Name:        "get_document",
		Title:       "Read a text document",
		Category:    "documents",
		Scope:       auth.ScopeRead,
		Description: "Read a text file as it is now, with its version for edits; line_range reads some lines.",
		Input: object(
			docPathField,
			brief("max_content_length", integer("Upper bound of the returned content in characters.").def(100000).min(100).max(5000000)),
			brief("include_collaboration_state", boolean("Include who is in the room and the room status.").def(true)),
			field("line_range", object(
				brief("start", integer("First line, 1-based.").min(1)),
				brief("end", integer("Last line, inclusive; omit for the end.").min(1)),
			).desc("Only these lines (1-based, inclusive).")),
		).required("path"),
		Example:  map[string]any{"path": "src/model.py", "line_range": map[string]any{"start": 1, "end": 40}},
		ReadOnly: true, Idempotent: true, Forkable: true, Budgeted: true,
		Doc: docRef{Arg: "path", Ref: refText, Open: true},
		Run: handle(s.readDocumentLines, s.renderDocument),
	})
	s.register(&operation{
		Name:        "create_document_session",
		Title:       "Open a document session",
		Category:    "documents",
		Scope:       auth.ScopeWrite,
		Description: "Create a text file (create_if_missing) or join one ahead of use; the other tools join a file on first use.",
		Input: object(
			docPathField,
			brief("create_if_missing", boolean("Create an empty file at path if there is none.").def(false)),
			brief("file_type", str("Expected extension (e.g. \"md\"): refuses a path with another one, to catch typos.")),
		).required("path"),
		Example:    map[string]any{"path": "notes/todo.md", "create_if_missing": true},
		Idempotent: true,
		Doc:        docRef{Arg: "path", Ref: refText},
		Run:        handle(s.createDocumentSession, renderSession),
	})
	positionSchema := func(desc string) *schema { return integer(desc).min(-1) }
	s.register(&operation{
		Name:     "batch_update_document",
		Title:    "Replace text",
		Category: "documents",
		Scope:    auth.ScopeWrite,
		Description: "Replace ranges of a text file in one transaction: length characters at position (of the current text; " +
			"-1 appends) become content.",
		Input: object(
			docPathField,
			brief("operations", array("Replacements.", object(
				brief("content", str("Text to put in.").def("")),
				brief("position", positionSchema("Code point offset in the current text; -1 = end.").def(-1)),
				brief("length", integer("Code points to replace (0 = insert).").def(0).min(0)),
			)).items(1, maxBatch)),
			versionField,
		).required("path", "operations"),
		Example:     map[string]any{"path": "notes/todo.md", "operations": []any{map[string]any{"position": 0, "length": 6, "content": "# TODO"}}},
		Destructive: true, Forkable: true, Retryable: true,
		Doc: textEditDoc,
		Run: handleEdit(s, s.textEditTool()),
	})
	s.register(&operation{
		Name:        "batch_insert_text",
		Title:       "Insert text",
		Category:    "documents",
		Scope:       auth.ScopeWrite,
		Description: "Insert text at character positions of the current text, in one transaction (-1 appends).",
		Input: object(
			docPathField,
			brief("operations", array("Insertions.", object(
				brief("text", str("Text to insert.")),
				brief("position", positionSchema("Code point offset in the current text; -1 = end.")),
			).required("text", "position")).items(1, maxBatch)),
			versionField,
		).required("path", "operations"),
		Example:  map[string]any{"path": "notes/todo.md", "operations": []any{map[string]any{"position": -1, "text": "\n- review the plots\n"}}},
		Forkable: true, Retryable: true,
		Doc: textEditDoc,
		Run: handleEdit(s, s.textEditTool()),
	})
	s.register(&operation{
		Name:        "batch_delete_text",
		Title:       "Delete text",
		Category:    "documents",
		Scope:       auth.ScopeWrite,
		Description: "Delete character ranges of the current text, in one transaction.",
		Input: object(
			docPathField,
			brief("operations", array("Deletions.", object(
				brief("position", integer("Code point offset in the current text.").min(0)),
				brief("length", integer("Code points to delete.").min(1)),
			).required("position", "length")).items(1, maxBatch)),
			versionField,
		).required("path", "operations"),
		Example:     map[string]any{"path": "notes/todo.md", "operations": []any{map[string]any{"position": 10, "length": 5}}},
		Destructive: true, Forkable: true, Retryable: true,
		Doc: textEditDoc,
		Run: handleEdit(s, s.textEditTool()),
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

func (s *Server) listDocuments(ctx context.Context, _ *call, a listDocumentsArgs) (listing, error) {
	prefix, glob := a.PathFilter, ""
	if strings.ContainsAny(a.PathFilter, "*?[") {
		if _, err := path.Match(a.PathFilter, ""); err != nil {
			return listing{}, invalid([]any{"path_filter"}, "is not a valid glob: %v", err)
		}
		glob = a.PathFilter
		prefix = a.PathFilter[:strings.IndexAny(a.PathFilter, "*?[")]
		if i := strings.LastIndex(prefix, "/"); i >= 0 {
			prefix = prefix[:i+1]
		} else {
			prefix = ""
		}
	}
	files, walkCut, err := s.walk(ctx, prefix, "file", "path_filter")
	if err != nil {
		return listing{}, err
	}
	want := strings.ToLower(strings.TrimPrefix(a.FileType, "."))
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
	l := listing{total: len(picked), walkCut: walkCut, entries: []docEntry{}}
	if len(picked) > a.MaxResults {
		picked = picked[:a.MaxResults]
	}
	for _, f := range picked {
		l.entries = append(l.entries, s.entryOf(ctx, f, ydoc.KindText))
	}
	return l, nil
}

type getDocumentArgs struct {
	MaxContentLength int        `json:"max_content_length"`
	IncludeCollab    bool       `json:"include_collaboration_state"`
	LineRange        *cellRange `json:"line_range"`
}

// documentRead is a text document as read for get_document: its lines, and which to show.
type documentRead struct {
	path        string
	version     bridge.Version
	text        string
	lines       []string // with their line ends
	first, last int      // 1-based, inclusive
	collab      *collab
}

func (s *Server) readDocumentLines(ctx context.Context, c *call, a getDocumentArgs) (documentRead, error) {
	r := documentRead{path: c.Room.Path()}
	if err := c.Room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
		r.text, err = d.Text()
		r.version = h.Version()
		return err
	}); err != nil {
		return documentRead{}, err
	}
	r.lines = strings.SplitAfter(r.text, "\n")
	if len(r.lines) > 0 && r.lines[len(r.lines)-1] == "" {
		r.lines = r.lines[:len(r.lines)-1]
	}
	r.first, r.last = 1, len(r.lines)
	if a.LineRange != nil {
		if a.LineRange.Start != nil {
			r.first = *a.LineRange.Start
		}
		if a.LineRange.End != nil {
			r.last = min(*a.LineRange.End, len(r.lines))
		}
		if r.first > len(r.lines) && len(r.lines) > 0 {
			return documentRead{}, invalid([]any{"line_range", "start"}, "is %d but the document has %d lines", r.first, len(r.lines))
		}
		if r.last < r.first && len(r.lines) > 0 {
			return documentRead{}, invalid([]any{"line_range", "end"}, "is before start %d", r.first)
		}
	}
	if a.IncludeCollab {
		cs := collabOf(c.Room.Info())
		r.collab = &cs
	}
	return r, nil
}

// renderDocument shows whole lines until the budget (characters, tokens) is spent; a first line
// alone over it is cut.
func (s *Server) renderDocument(c *call, a getDocumentArgs, r documentRead) result {
	n := max(r.last-r.first+1, 0)
	if r.first < 1 {
		n = 0
	}
	pg := s.fitPage(n, pageBudget{chars: a.MaxContentLength, tokens: c.budget - 200}, // 200: the envelope
		func(k int) string { return r.lines[r.first-1+k] },
		func(k int, b pageBudget) string {
			cut, _ := capText(r.lines[r.first-1+k], min(b.chars, b.tokens*2))
			return cut
		})
	next := r.first + len(pg.pieces)
	out := map[string]any{
		"path": r.path, "version": r.version, "content": strings.Join(pg.pieces, ""),
		"length": utf8.RuneCountInString(r.text), "line_count": len(r.lines),
	}
	if a.LineRange != nil {
		out["lines"] = map[string]int{"start": r.first, "end": next - 1}
	}
	if next <= r.last || pg.cut {
		reason := fmt.Sprintf("max_content_length %d reached", a.MaxContentLength)
		if pg.hit == "tokens" {
			reason = fmt.Sprintf("max_tokens %d reached", c.budget)
		}
		var nc map[string]any
		if next <= r.last {
			nc = nextRange(linePages, next, r.last)
		}
		var cutAt *int
		if pg.cut {
			cutAt = &r.first
		}
		out["truncated"] = truncation(linePages, r.first, next-1, reason, nc, cutAt)
	}
	if r.collab != nil {
		out["collaboration"] = *r.collab
	}
	return result{Data: out}
}

func (s *Server) createDocumentSession(ctx context.Context, c *call, a sessionArgs) (sessionOpened, error) {
	if want := strings.ToLower(strings.TrimPrefix(a.FileType, ".")); want != "" && extOf(c.Path) != want {
		return sessionOpened{}, invalid([]any{"path"}, "has extension %q, not the file_type %q you asked for", extOf(c.Path), want)
	}
	if extOf(c.Path) == "ipynb" {
		return sessionOpened{}, invalid([]any{"path"}, "is a notebook; use create_notebook_session")
	}
	return s.openSession(ctx, c.doc, a.CreateIfMissing, nil, nil)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// textOp is one operation of the text edit tools; position is required or has its schema's
// default (-1, the end, for batch_update_document).
type textOp struct {
	Content  *string `json:"content"`
	Text     *string `json:"text"`
	Position int     `json:"position"`
	Length   int     `json:"length"`
}

type textEditArgs struct {
	Operations []textOp `json:"operations"`
	guardArgs
}

// textEditDoc is the document of the text edit tools.
var textEditDoc = docRef{Arg: "path", Ref: refText, Open: true}

// textEdited is the outcome of a text edit.
type textEdited struct {
	path    string
	version bridge.Version
	length  int // code points after the edit
}

// textEditTool applies the operations as one transaction (refused, changing nothing, when the
// text changed since expected_version) and moves the agent's cursor after the last one.
func (s *Server) textEditTool() editTool[textEditArgs, textEdited] {
	return editTool[textEditArgs, textEdited]{
		build: func(_ context.Context, _ *call, a textEditArgs) (bridge.Proposal, error) {
			ops := make([]ydoc.TextOp, len(a.Operations))
			for i, op := range a.Operations {
				ops[i] = ydoc.TextOp{Pos: op.Position, Len: op.Length}
				switch {
				case op.Content != nil:
					ops[i].Insert = *op.Content
				case op.Text != nil:
					ops[i].Insert = *op.Text
				}
			}
			return bridge.Proposal{Since: a.since(), Edit: ydoc.EditText{Ops: ops}}, nil
		},
		finish: func(ctx context.Context, c *call, _ textEditArgs, ed bridge.Edited) textEdited {
			cursor := 0
			if cur := ed.Outcome.Cursor; cur != nil {
				cursor = cur.Offset
			}
			s.moveCursorTo(ctx, c.Room, "", cursor)
			return textEdited{path: c.Room.Path(), version: ed.Version, length: ed.Outcome.Length}
		},
		render: renderTextEdit,
	}
}

func renderTextEdit(_ *call, a textEditArgs, e textEdited) result {
	return result{Data: map[string]any{"path": e.path, "version": e.version, "applied": len(a.Operations), "length": e.length}}
}
