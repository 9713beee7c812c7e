package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Forks: the agent proposes instead of overwriting. A fork is a server-side copy of the live
// document; edit and execute tools work in it when given fork_id; a human (or the agent) then
// merges or discards it. With suggestion_for_cell the fork is described so that the
// jupyter-suggestions extension shows it in JupyterLab as a suggestion on that cell.

type forkKey struct{}

// forkFrom returns the fork a tool call works in ("" for the document itself).
func forkFrom(ctx context.Context) string {
	f, _ := ctx.Value(forkKey{}).(string)
	return f
}

var forkField = field("fork_id", str("Work in this fork of the document (from fork_document) instead of the document itself."))

// forkable tools take fork_id.
var forkable = map[string]bool{
	"get_notebook": true, "batch_insert_notebook_cells": true, "batch_update_notebook_cells": true,
	"batch_delete_notebook_cells": true, "move_notebook_cells": true, "batch_execute_notebook_cells": true,
	"execute_notebook_cell": true, "get_document": true, "batch_insert_text": true, "batch_delete_text": true,
	"batch_update_document": true, "undo_last_edit": true, "redo_edit": true, "get_document_history": true,
	"restore_document_version": true,
}

// openRoom opens the document's room, or its fork's when the call names one.
func (s *Server) openRoom(ctx context.Context, p string, kind ydoc.Kind) (*bridge.Room, error) {
	if clean, err := bridge.CleanPath(p); err == nil {
		if err := mayRead(ctx, clean); err != nil {
			return nil, failf("%v", err)
		}
	}
	if fork := forkFrom(ctx); fork != "" {
		room, err := s.opts.Manager.OpenFork(ctx, p, kind, fork)
		var gone *bridge.ForkGoneError
		if errors.As(err, &gone) {
			return nil, &toolError{Message: gone.Error(), Details: []detail{{Path: []any{"fork_id"}, Message: "no such fork"}}}
		}
		return room, err
	}
	return s.opts.Manager.Open(ctx, p, kind)
}

func kindOfPath(p string) ydoc.Kind {
	_, kind := parseSession(p)
	return kind
}

func (s *Server) registerForkTools() {
	docPath := field("path", str("A notebook or text file path."))
	forkID := field("fork_id", str("The fork (from fork_document or list_forks)."))
	s.register(&operation{
		Name:     "fork_document",
		Title:    "Fork a document",
		Category: "forks",
		Description: "Make a server-side copy of a live notebook or text file to work in without touching it: pass the " +
			"returned fork_id to the edit and execute tools, show the changes with diff_fork, then merge_document_fork " +
			"or discard_document_fork. With suggestion_for_cell, JupyterLab's suggestions extension shows the fork as a " +
			"suggestion on that cell, for a human to accept or reject. synchronize keeps the document's later changes " +
			"flowing into the fork. Forks live in the server's memory: a server restart loses them.",
		Input: object(
			docPath,
			field("title", str("A short title.")),
			field("description", str("What the fork is for (ignored with suggestion_for_cell, whose description the extension defines).")),
			field("synchronize", boolean("Keep receiving the document's changes.").def(false)),
			field("suggestion_for_cell", str("Make the fork a suggestion on this cell (jupyter-suggestions).")),
			field("suggestion_type", str("With suggestion_for_cell: a change to the cell, or its deletion.").enum("change", "delete").def("change")),
		).required("path"),
		Example: map[string]any{"path": "analysis/report.ipynb", "title": "Vectorise the loop", "suggestion_for_cell": "a1b2"},
		Run:     s.forkDocument,
	})
	s.register(&operation{
		Name:        "list_forks",
		Title:       "List forks",
		Category:    "forks",
		Description: "The forks of a document on the server (anyone's), with title, description, whether they follow the document, and whether this sidecar made or joined them.",
		Input:       object(docPath).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb"},
		ReadOnly:    true, Idempotent: true,
		Run: s.listForks,
	})
	s.register(&operation{
		Name:     "diff_fork",
		Title:    "What a fork changes",
		Category: "forks",
		Description: "How the fork differs from the document now: cells added, removed, moved and edited, with unified " +
			"line diffs of sources (max_lines caps them), or a line diff for text files.",
		Input: object(docPath, forkID,
			field("max_lines", integer("Diff lines kept per cell or text.").def(200).min(1).max(5000)),
		).required("path", "fork_id"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		ReadOnly: true, Idempotent: true,
		Run: s.diffFork,
	})
	s.register(&operation{
		Name:     "merge_document_fork",
		Title:    "Merge a fork",
		Category: "forks",
		Description: "Apply the fork to the document (a CRDT merge on the server: the fork's edits and deletions join the " +
			"document, alongside anything collaborators did meanwhile) and delete the fork. Returns what the merge " +
			"changed. Refused when the document was reloaded since the fork was made (a merge would duplicate content).",
		Input:       object(docPath, forkID).required("path", "fork_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		Destructive: true,
		Run:         s.closeFork(true),
	})
	s.register(&operation{
		Name:        "discard_document_fork",
		Title:       "Discard a fork",
		Category:    "forks",
		Description: "Delete the fork without applying it: the document is untouched.",
		Input:       object(docPath, forkID).required("path", "fork_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		Destructive: true, Idempotent: true,
		Run: s.closeFork(false),
	})
}

type forkArgs struct {
	Path              string `json:"path"`
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
	case errors.Is(err, bridge.ErrBadPath):
		return invalid([]any{"path"}, "%v", err)
	}
	var gone *bridge.ForkGoneError
	if errors.As(err, &gone) {
		return &toolError{Message: gone.Error(), Details: []detail{{Path: []any{"fork_id"}, Message: "no such fork"}}}
	}
	return err
}

func (s *Server) forkDocument(ctx context.Context, raw map[string]any) (result, error) {
	args := forkArgs{SuggestionType: "change"}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	kind := kindOfPath(args.Path)
	info := bridge.ForkInfo{Title: args.Title, Description: args.Description, Synchronize: args.Synchronize}
	if args.SuggestionForCell != "" {
		if kind != ydoc.KindNotebook {
			return result{}, invalid([]any{"suggestion_for_cell"}, "suggestions are on notebook cells")
		}
		desc, err := s.suggestionDescription(ctx, args)
		if err != nil {
			return result{}, err
		}
		info.Description = desc
		info.Synchronize = true // as the extension makes them: the suggestion follows the notebook
	}
	room, err := s.opts.Manager.CreateFork(ctx, args.Path, kind, info)
	if err != nil {
		return result{}, forkError(err)
	}
	out := map[string]any{"path": room.Path(), "fork_id": room.Info().RoomID, "synchronize": info.Synchronize,
		"note": "pass fork_id to the edit and execute tools to work in the fork; diff_fork shows your changes; merge_document_fork or discard_document_fork ends it"}
	if args.SuggestionForCell != "" {
		out["suggestion_for_cell"] = args.SuggestionForCell
		out["note"] = "edit the cell in the fork (fork_id): JupyterLab's suggestions panel shows the fork as a suggestion on it; a human accepting it merges the fork"
	}
	return result{Data: out}, nil
}

// suggestionDescription is the fork description jupyter-suggestions reads: the cell, the
// notebook path, the cell's mime type, the kind of suggestion and its author.
func (s *Server) suggestionDescription(ctx context.Context, args forkArgs) (string, error) {
	room, err := s.opts.Manager.Open(ctx, args.Path, ydoc.KindNotebook)
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
			if nb.Cells[i].ID == args.SuggestionForCell {
				cell = &nb.Cells[i]
			}
		}
		return nil
	}); err != nil {
		return "", err
	}
	if cell == nil {
		return "", invalid([]any{"suggestion_for_cell"}, "no cell with id %q", args.SuggestionForCell)
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
		"suggestionType": strings.ToUpper(args.SuggestionType),
		"metadata":       map[string]any{"author": u},
	})
	return string(b), err
}

func (s *Server) listForks(ctx context.Context, raw map[string]any) (result, error) {
	var args forkArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	forks, err := s.opts.Manager.Forks(ctx, args.Path, kindOfPath(args.Path))
	if err != nil {
		return result{}, forkError(err)
	}
	type view struct {
		ForkID      string `json:"fork_id"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
		Synchronize bool   `json:"synchronize"`
		Suggestion  any    `json:"suggestion,omitempty"`
		Ours        bool   `json:"created_by_agent"`
		Joined      bool   `json:"joined"`
	}
	list := make([]view, 0, len(forks))
	for _, f := range forks {
		v := view{ForkID: f.ID, Title: f.Info.Title, Description: f.Info.Description, Synchronize: f.Info.Synchronize, Ours: f.Ours, Joined: f.Open}
		var sug map[string]any
		if json.Unmarshal([]byte(f.Info.Description), &sug) == nil && sug["cellId"] != nil {
			v.Suggestion, v.Description = map[string]any{"cell_id": sug["cellId"], "type": sug["suggestionType"]}, ""
		}
		list = append(list, v)
	}
	return result{Data: map[string]any{"path": args.Path, "forks": list, "count": len(list)}}, nil
}

// forkDiff compares the document and its fork as they are now.
func (s *Server) forkDiff(ctx context.Context, p, forkID string, maxLines int) (any, string, error) {
	kind := kindOfPath(p)
	fork, err := s.opts.Manager.OpenFork(ctx, p, kind, forkID)
	if err != nil {
		return nil, "", forkError(err)
	}
	root := s.opts.Manager.Get(p, kind)
	if root == nil {
		return nil, "", fmt.Errorf("the document %s is not open", p)
	}
	opt := ydoc.DiffOptions{Context: 3, MaxLines: maxLines}
	if kind == ydoc.KindText {
		var a, b string
		if err := root.View(ctx, func(d *ydoc.Doc) (err error) { a, err = d.Text(); return }); err != nil {
			return nil, "", err
		}
		if err := fork.View(ctx, func(d *ydoc.Doc) (err error) { b, err = d.Text(); return }); err != nil {
			return nil, "", err
		}
		d := ydoc.DiffTextWith(a, b, opt)
		return map[string]any{"diff": d.Unified(), "added_lines": d.Added, "removed_lines": d.Removed}, fmt.Sprintf("+%d −%d lines", d.Added, d.Removed), nil
	}
	var a, b ydoc.Notebook
	if err := root.View(ctx, func(d *ydoc.Doc) (err error) { a, err = d.Notebook(); return }); err != nil {
		return nil, "", err
	}
	if err := fork.View(ctx, func(d *ydoc.Doc) (err error) { b, err = d.Notebook(); return }); err != nil {
		return nil, "", err
	}
	d := ydoc.DiffNotebooksWith(a, b, opt)
	return d, d.Summary(), nil
}

func (s *Server) diffFork(ctx context.Context, raw map[string]any) (result, error) {
	args := forkArgs{MaxLines: 200}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	diff, summary, err := s.forkDiff(ctx, args.Path, args.ForkID, args.MaxLines)
	if err != nil {
		return result{}, err
	}
	return result{Data: map[string]any{"path": args.Path, "fork_id": args.ForkID, "summary": summary, "changes": diff}}, nil
}

func (s *Server) closeFork(merge bool) func(context.Context, map[string]any) (result, error) {
	return func(ctx context.Context, raw map[string]any) (result, error) {
		var args forkArgs
		if err := decodeArgs(raw, &args); err != nil {
			return result{}, err
		}
		kind := kindOfPath(args.Path)
		out := map[string]any{"path": args.Path, "fork_id": args.ForkID}
		if merge {
			// What the merge brings, as the fork differs from the document now.
			_, summary, err := s.forkDiff(ctx, args.Path, args.ForkID, 50)
			if err != nil {
				return result{}, err
			}
			out["merged"] = summary
		}
		if err := s.opts.Manager.CloseFork(ctx, args.Path, kind, args.ForkID, merge); err != nil {
			if errors.Is(err, bridge.ErrForkDiverged) {
				return result{}, &toolError{Message: err.Error()}
			}
			return result{}, forkError(err)
		}
		if merge {
			out["note"] = "merged into the document on the server; collaborators (and the agent's replica) receive it as an edit"
		} else {
			out["note"] = "discarded; the document was not changed"
		}
		return result{Data: out}, nil
	}
}
