package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// History and undo: the versions of a document the sidecar saw (restorable as a forward edit
// everyone sees), and undo/redo of the agent's own edits only.

func (s *Server) registerHistoryTools() {
	docPath := field("path", str("A notebook or text file path."))
	s.register(&operation{
		Name:     "get_document_history",
		Title:    "Document history",
		Category: "history",
		Description: "Versions of a document, newest first, with when, by whom and a one-line summary of what changed " +
			"since the version before. A human typing in bursts is one version; each agent edit is its own. Kept " +
			"within a memory budget (and on disk with --state-dir); pass a version_id to restore_document_version.",
		Input: object(docPath,
			field("limit", integer("Maximum number of versions.").def(10).min(1).max(500)),
		).required("path"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "limit": 10},
		ReadOnly: true, Idempotent: true,
		Run: s.getDocumentHistory,
	})
	s.register(&operation{
		Name:     "restore_document_version",
		Title:    "Restore a version",
		Category: "history",
		Description: "Bring the document back to a version from get_document_history, as a new edit on top of the " +
			"current state (every collaborator sees it return; nothing is rewritten, and undo_last_edit takes the " +
			"restore back). Cells keep their ids where they still exist. Returns what changed.",
		Input: object(docPath,
			field("version_id", str("A version_id from get_document_history.")),
		).required("path", "version_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "version_id": "a1b2c3-42"},
		Destructive: true, Idempotent: true,
		Run: s.restoreVersion,
	})
	s.register(&operation{
		Name:     "undo_last_edit",
		Title:    "Undo the agent's edits",
		Category: "history",
		Description: "Undo the agent's own most recent edits (steps of them), never anyone else's: text a human typed " +
			"inside or around the agent's change stays. Outputs written by running cells are not edits and are not " +
			"undone. Steps whose changes others already removed are skipped.",
		Input: object(docPath,
			field("steps", integer("How many of the agent's edits to undo.").def(1).min(1).max(ydoc.MaxUndo)),
		).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "steps": 1},
		Destructive: true,
		Run:         s.undoLastEdit,
	})
	s.register(&operation{
		Name:        "redo_edit",
		Title:       "Redo",
		Category:    "history",
		Description: "Re-apply what the last undo_last_edit took back (until the agent makes a new edit).",
		Input:       object(docPath).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb"},
		Destructive: true,
		Run:         s.redoEdit,
	})
}

type historyArgs struct {
	Path      string `json:"path"`
	Limit     int    `json:"limit"`
	VersionID string `json:"version_id"`
	Steps     int    `json:"steps"`
}

func (s *Server) historyRoom(ctx context.Context, p string) (*bridge.Room, error) {
	if p == "" {
		return nil, invalid([]any{"path"}, "is required")
	}
	room, err := s.openRoom(ctx, p, kindOfPath(p))
	if err != nil && errors.Is(err, bridge.ErrBadPath) {
		return nil, invalid([]any{"path"}, "%v", err)
	}
	return room, err
}

func (s *Server) getDocumentHistory(ctx context.Context, raw map[string]any) (result, error) {
	args := historyArgs{Limit: 10}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.historyRoom(ctx, args.Path)
	if err != nil {
		return result{}, err
	}
	versions, err := room.Versions(ctx)
	if err != nil {
		return result{}, err
	}
	total := len(versions)
	if len(versions) > args.Limit {
		versions = versions[:args.Limit]
	}
	undo, redo, err := room.UndoDepth(ctx)
	if err != nil {
		return result{}, err
	}
	out := map[string]any{"path": room.Path(), "versions": versions, "count": len(versions), "kept": total,
		"undo_steps": undo, "redo_steps": redo}
	if f := forkFrom(ctx); f != "" {
		out["fork_id"] = f
	}
	return result{Data: out}, nil
}

func (s *Server) restoreVersion(ctx context.Context, raw map[string]any) (result, error) {
	var args historyArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.historyRoom(ctx, args.Path)
	if err != nil {
		return result{}, err
	}
	nb, text, err := room.VersionContent(ctx, bridge.Version(args.VersionID))
	if err != nil {
		if errors.Is(err, bridge.ErrNoSuchVersion) {
			return result{}, invalid([]any{"version_id"}, "%v", err)
		}
		return result{}, err
	}
	var summary string
	var changes any
	ed, err := room.Apply(ctx, func(tx *ydoc.Txn, _ bridge.History, _ bool) error {
		tx.Undoable()
		if tx.Kind() == ydoc.KindText {
			cur, err := tx.Text()
			if err != nil {
				return err
			}
			d := ydoc.DiffText(cur, text)
			summary, changes = fmt.Sprintf("+%d −%d lines", d.Added, d.Removed), d.Unified()
			return tx.RestoreText(text)
		}
		cur, err := tx.Notebook()
		if err != nil {
			return err
		}
		d := ydoc.DiffNotebooks(cur, nb)
		summary, changes = d.Summary(), d
		_, err = tx.RestoreNotebook(nb)
		return err
	})
	if err != nil {
		return result{}, err
	}
	return result{Data: map[string]any{"path": room.Path(), "restored": args.VersionID, "version": ed.Version, "summary": summary, "changes": changes}}, nil
}

func (s *Server) undoLastEdit(ctx context.Context, raw map[string]any) (result, error) {
	args := historyArgs{Steps: 1}
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.historyRoom(ctx, args.Path)
	if err != nil {
		return result{}, err
	}
	before, _, err := room.UndoDepth(ctx)
	if err != nil {
		return result{}, err
	}
	ed, err := room.Undo(ctx, args.Steps)
	if err != nil {
		if errors.Is(err, ydoc.ErrNothingToUndo) {
			return result{}, &toolError{Message: "nothing to undo: the agent has made no edit to this document since the sidecar joined it (or since its replica was rebuilt after a reconnect), or others already removed what it did; restore_document_version can go back to any listed version"}
		}
		return result{}, err
	}
	after, redo, _ := room.UndoDepth(ctx)
	return result{Data: map[string]any{"path": room.Path(), "undone": before - after, "version": ed.Version, "changed": describeEdit(ed.Change), "undo_steps_left": after, "redo_steps": redo}}, nil
}

func (s *Server) redoEdit(ctx context.Context, raw map[string]any) (result, error) {
	var args historyArgs
	if err := decodeArgs(raw, &args); err != nil {
		return result{}, err
	}
	room, err := s.historyRoom(ctx, args.Path)
	if err != nil {
		return result{}, err
	}
	ed, err := room.Redo(ctx)
	if err != nil {
		if errors.Is(err, ydoc.ErrNothingToRedo) {
			return result{}, &toolError{Message: "nothing to redo: no undo since the agent's last edit"}
		}
		return result{}, err
	}
	return result{Data: map[string]any{"path": room.Path(), "version": ed.Version, "changed": describeEdit(ed.Change)}}, nil
}

// describeEdit lists the cells an edit touched.
func describeEdit(c ydoc.Change) map[string]any {
	out := map[string]any{}
	if len(c.Inserted) > 0 {
		out["inserted"] = c.Inserted
	}
	if len(c.Deleted) > 0 {
		out["deleted"] = c.Deleted
	}
	var edited []string
	for _, cc := range c.Cells {
		edited = append(edited, cc.ID)
	}
	if len(edited) > 0 {
		out["edited"] = edited
	}
	if c.Text {
		out["text"] = true
	}
	return out
}
