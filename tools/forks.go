package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/apps"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Forks: the agent proposes instead of overwriting. A fork is a server-side copy of the live
// document; edit and execute tools work in it when given fork_id; a human (or the agent) then
// merges or discards it. With suggestion_for_cell the fork is described so that the
// jupyter-suggestions extension shows it in JupyterLab as a suggestion on that cell.

var forkField = unlisted("fork_id", str("Work in this fork of the document (from fork_document) instead of the document itself."))

func (s *Server) registerForkTools() {
	docPath := brief("path", str("A notebook or text file path."))
	forkID := brief("fork_id", str("The fork (from fork_document or list_forks)."))
	s.register(&operation{
		Name:     "fork_document",
		Title:    "Fork a document",
		Category: "forks",
		Scope:    auth.ScopeWrite,
		Description: "Copy a live document into a fork to change without touching it (pass fork_id to the read, edit and run " +
			"tools), or propose a change to one cell as a suggestion a human accepts or rejects (suggestion_for_cell).",
		Input: object(
			docPath,
			brief("title", str("A short title.")),
			brief("description", str("What the fork is for (ignored with suggestion_for_cell, whose description the extension defines).")),
			field("synchronize", boolean("Keep receiving the document's changes.").def(false)),
			brief("suggestion_for_cell", str("Make the fork a suggestion on this cell (jupyter-suggestions).")),
			brief("suggestion_type", str("With suggestion_for_cell: a change to the cell, or its deletion.").enum("change", "delete").def("change")),
		).required("path"),
		Example: map[string]any{"path": "analysis/report.ipynb", "title": "Vectorise the loop", "suggestion_for_cell": "a1b2"},
		Doc:     docRef{Arg: "path", Ref: refAny, Cells: []string{"suggestion_for_cell"}},
		Run:     handle(s.forkDocument, renderForked),
	})
	s.register(&operation{
		Name:        "list_forks",
		Title:       "List forks",
		Category:    "forks",
		Scope:       auth.ScopeRead,
		Description: "A document's forks (anyone's), with titles and whether they follow the document.",
		Input:       object(docPath).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb"},
		ReadOnly:    true, Idempotent: true, Budgeted: true,
		Doc: docRef{Arg: "path", Ref: refAny},
		Run: handle(s.listForks, renderForks),
	})
	s.register(&operation{
		Name:        "diff_fork",
		Title:       "What a fork changes",
		Category:    "forks",
		Scope:       auth.ScopeRead,
		Description: "What a fork changes: cells added, removed, moved and edited, with line diffs.",
		Input: object(docPath, forkID,
			brief("max_lines", integer("Diff lines kept per cell or text.").def(200).min(1).max(5000)),
		).required("path", "fork_id"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Doc: forkDoc,
		Run: handle(s.diffFork, renderForkDiff),
		App: apps.Suggestion.URI,
	})
	s.register(&operation{
		Name:        "merge_document_fork",
		Title:       "Merge a fork",
		Category:    "forks",
		Scope:       auth.ScopeWrite,
		Description: "Merge a fork into its document (collaborators' concurrent edits stay) and delete the fork.",
		Input:       object(docPath, forkID).required("path", "fork_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		Destructive: true,
		Doc:         forkDoc,
		Run:         handle(s.mergeFork, renderForkClosed),
	})
	s.register(&operation{
		Name:        "discard_document_fork",
		Title:       "Discard a fork",
		Category:    "forks",
		Scope:       auth.ScopeWrite,
		Description: "Delete a fork without applying it.",
		Input:       object(docPath, forkID).required("path", "fork_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		Destructive: true, Idempotent: true,
		Doc: forkDoc,
		Run: handle(s.discardFork, renderForkClosed),
	})
}

// forkDoc is the document of the tools that take a fork of it by fork_id.
var forkDoc = docRef{Arg: "path", Ref: refAny, Parts: []string{"fork_id"}}

type forkArgs struct {
	ForkID            string `json:"fork_id"`
	Title             string `json:"title"`
	Description       string `json:"description"`
	Synchronize       bool   `json:"synchronize"`
	SuggestionForCell string `json:"suggestion_for_cell"`
	SuggestionType    string `json:"suggestion_type"`
	MaxLines          int    `json:"max_lines"`
}

func forkError(err error) error {
	switch {
	case errors.Is(err, bridge.ErrNoForks):
		return &toolError{Message: "this jupyter-server offers no fork API (jupyter-collaboration 2.x or later has it)"}
	case errors.Is(err, bridge.ErrForkDiverged):
		return &toolError{Message: err.Error() + "; apply the fork's changes as edits instead (diff_fork shows them)"}
	}
	return openError("path", err)
}

// forked is a fork made, and joined.
type forked struct {
	path, id    string
	synchronize bool
}

func (s *Server) forkDocument(ctx context.Context, c *call, a forkArgs) (forked, error) {
	info := bridge.ForkInfo{Title: a.Title, Description: a.Description, Synchronize: a.Synchronize}
	if a.SuggestionForCell != "" {
		if c.Kind != ydoc.KindNotebook {
			return forked{}, invalid([]any{"suggestion_for_cell"}, "suggestions are on notebook cells")
		}
		desc, err := s.suggestionDescription(ctx, c.doc, a)
		if err != nil {
			return forked{}, err
		}
		info.Description = desc
		info.Synchronize = true // as the extension makes them: the suggestion follows the notebook
	}
	room, err := s.forkDoc(ctx, c.doc, info)
	if err != nil {
		return forked{}, forkError(err)
	}
	return forked{path: room.Path(), id: room.Info().RoomID, synchronize: info.Synchronize}, nil
}

func renderForked(_ *call, a forkArgs, f forked) result {
	out := map[string]any{"path": f.path, "fork_id": f.id, "synchronize": f.synchronize,
		"note": "pass fork_id to the edit and execute tools to work in the fork; diff_fork shows your changes; merge_document_fork or discard_document_fork ends it"}
	if a.SuggestionForCell != "" {
		out["suggestion_for_cell"] = a.SuggestionForCell
		out["note"] = "edit the cell in the fork (fork_id): JupyterLab's suggestions panel shows the fork as a suggestion on it; a human accepting it merges the fork"
	}
	return result{Data: out}
}

// suggestionDescription is the fork description jupyter-suggestions reads: the cell, the
// notebook path, the cell's mime type, the kind of suggestion and its author.
func (s *Server) suggestionDescription(ctx context.Context, d doc, a forkArgs) (string, error) {
	room, err := s.openDoc(ctx, d.Path, ydoc.KindNotebook, "")
	if err != nil {
		return "", forkError(err)
	}
	var cell *ydoc.Cell
	var lang string
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		nb, err := d.Notebook()
		if err != nil {
			return err
		}
		if li, ok := nb.Metadata["language_info"].(map[string]any); ok {
			lang, _ = li["name"].(string)
		}
		for i := range nb.Cells {
			if nb.Cells[i].ID == a.SuggestionForCell {
				cell = &nb.Cells[i]
			}
		}
		return nil
	}); err != nil {
		return "", err
	}
	if cell == nil {
		return "", invalid([]any{"suggestion_for_cell"}, "no cell with id %q", a.SuggestionForCell)
	}
	mime := "text/x-ipython"
	switch {
	case cell.Type == ydoc.CellMarkdown:
		mime = "text/x-ipythongfm"
	case cell.Type == ydoc.CellRaw:
		mime = "text/plain"
	case lang != "" && lang != "python":
		mime = "text/x-" + lang
	}
	u := s.opts.Manager.User()
	b, err := json.Marshal(map[string]any{
		"cellId": cell.ID, "path": room.Path(), "mimeType": mime,
		"suggestionType": strings.ToUpper(a.SuggestionType),
		"metadata":       map[string]any{"author": u},
	})
	return string(b), err
}

func (s *Server) listForks(ctx context.Context, c *call, _ forkArgs) ([]bridge.Fork, error) {
	forks, err := s.forksOf(ctx, c.doc)
	if err != nil {
		return nil, forkError(err)
	}
	return forks, nil
}

// forkView is a fork as list_forks shows it.
type forkView struct {
	ForkID      string `json:"fork_id"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Synchronize bool   `json:"synchronize"`
	Suggestion  any    `json:"suggestion,omitempty"`
	Ours        bool   `json:"created_by_agent"`
	Joined      bool   `json:"joined"`
}

func renderForks(c *call, _ forkArgs, forks []bridge.Fork) result {
	list := make([]forkView, 0, len(forks))
	for _, f := range forks {
		v := forkView{ForkID: f.ID, Title: f.Info.Title, Description: f.Info.Description, Synchronize: f.Info.Synchronize, Ours: f.Ours, Joined: f.Open}
		var sug map[string]any
		if json.Unmarshal([]byte(f.Info.Description), &sug) == nil && sug["cellId"] != nil {
			v.Suggestion, v.Description = map[string]any{"cell_id": sug["cellId"], "type": sug["suggestionType"]}, ""
		}
		list = append(list, v)
	}
	return result{Data: map[string]any{"path": c.Path, "forks": list, "count": len(list)}}
}

// forkDiffed is how a fork differs from its document now.
type forkDiffed struct {
	changes any // ydoc.NotebookDiff, or the text diff
	summary string
}

// forkDiff compares the document and its fork as they are now.
func (s *Server) forkDiff(ctx context.Context, d doc, forkID string, maxLines int) (forkDiffed, error) {
	fork, err := s.openDoc(ctx, d.Path, d.Kind, forkID)
	if err != nil {
		return forkDiffed{}, forkError(err)
	}
	root := s.liveRoom(ctx, d.Path, d.Kind)
	if root == nil {
		return forkDiffed{}, fmt.Errorf("the document %s is not open", d.Path)
	}
	opt := ydoc.DiffOptions{Context: 3, MaxLines: maxLines}
	if d.Kind == ydoc.KindText {
		var a, b string
		if err := root.View(ctx, func(d *ydoc.Doc) (err error) { a, err = d.Text(); return }); err != nil {
			return forkDiffed{}, err
		}
		if err := fork.View(ctx, func(d *ydoc.Doc) (err error) { b, err = d.Text(); return }); err != nil {
			return forkDiffed{}, err
		}
		td := ydoc.DiffTextWith(a, b, opt)
		return forkDiffed{changes: map[string]any{"diff": td.Unified(), "added_lines": td.Added, "removed_lines": td.Removed},
			summary: fmt.Sprintf("+%d −%d lines", td.Added, td.Removed)}, nil
	}
	var a, b ydoc.Notebook
	if err := root.View(ctx, func(d *ydoc.Doc) (err error) { a, err = d.Notebook(); return }); err != nil {
		return forkDiffed{}, err
	}
	if err := fork.View(ctx, func(d *ydoc.Doc) (err error) { b, err = d.Notebook(); return }); err != nil {
		return forkDiffed{}, err
	}
	nd := ydoc.DiffNotebooksWith(a, b, opt)
	return forkDiffed{changes: nd, summary: nd.Summary()}, nil
}

func (s *Server) diffFork(ctx context.Context, c *call, a forkArgs) (forkDiffed, error) {
	return s.forkDiff(ctx, c.doc, a.ForkID, a.MaxLines)
}

func renderForkDiff(c *call, a forkArgs, d forkDiffed) result {
	return result{Data: map[string]any{"path": c.Path, "fork_id": a.ForkID, "summary": d.summary, "changes": d.changes}}
}

// forkClosed is a fork merged (with what it brought) or discarded.
type forkClosed struct {
	merged  bool
	summary string
}

func (s *Server) mergeFork(ctx context.Context, c *call, a forkArgs) (forkClosed, error) {
	// What the merge brings, as the fork differs from the document now.
	d, err := s.forkDiff(ctx, c.doc, a.ForkID, 50)
	if err != nil {
		return forkClosed{}, err
	}
	if err := s.closeForkOf(ctx, c.doc, a.ForkID, true); err != nil {
		return forkClosed{}, forkError(err)
	}
	return forkClosed{merged: true, summary: d.summary}, nil
}

func (s *Server) discardFork(ctx context.Context, c *call, a forkArgs) (forkClosed, error) {
	if err := s.closeForkOf(ctx, c.doc, a.ForkID, false); err != nil {
		return forkClosed{}, forkError(err)
	}
	return forkClosed{}, nil
}

func renderForkClosed(c *call, a forkArgs, f forkClosed) result {
	out := map[string]any{"path": c.Path, "fork_id": a.ForkID}
	if f.merged {
		out["merged"] = f.summary
		out["note"] = "merged into the document on the server; collaborators (and the agent's replica) receive it as an edit"
	} else {
		out["note"] = "discarded; the document was not changed"
	}
	return result{Data: out}
}
