package tools

import (
	"context"
	"errors"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// History and undo: the versions of a document the sidecar saw (restorable as a forward edit
// everyone sees), and undo/redo of the agent's own edits only.

func (s *Server) registerHistoryTools() {
	docPath := brief("path", str("A notebook or text file path."))
	s.register(&operation{
		Name:     "get_document_history",
		Title:    "Document history",
		Category: "history",
		Scope:    auth.ScopeRead,
		Description: "A document's versions, newest first: when, who and what changed; restore one with " +
			"restore_document_version.",
		Input: object(docPath,
			brief("limit", integer("Maximum number of versions.").def(10).min(1).max(500)),
		).required("path"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "limit": 10},
		ReadOnly: true, Idempotent: true, Forkable: true, Budgeted: true,
		Doc: historyDoc,
		Run: handle(s.getDocumentHistory, renderHistory),
	})
	s.register(&operation{
		Name:        "restore_document_version",
		Title:       "Restore a version",
		Category:    "history",
		Scope:       auth.ScopeWrite,
		Description: "Bring a document back to an earlier version, as a new edit that undo_last_edit can take back.",
		Input: object(docPath,
			brief("version_id", str("A version_id from get_document_history.")),
		).required("path", "version_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "version_id": "a1b2c3-42"},
		Destructive: true, Idempotent: true, Forkable: true, Budgeted: true, Retryable: true,
		Doc: docRef{Arg: "path", Ref: refAny, Open: true, Parts: []string{"version_id"}},
		Run: handleEdit(s, editTool[historyArgs, restored]{build: s.restoreEdit, finish: restoredOf, render: renderRestored}),
	})
	s.register(&operation{
		Name:        "undo_last_edit",
		Title:       "Undo the agent's edits",
		Category:    "history",
		Scope:       auth.ScopeWrite,
		Description: "Undo the agent's own last edits, never anyone else's: text others typed around them stays.",
		Input: object(docPath,
			brief("steps", integer("How many of the agent's edits to undo.").def(1).min(1).max(ydoc.MaxUndo)),
		).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "steps": 1},
		Destructive: true, Forkable: true, Retryable: true,
		Doc: historyDoc,
		Run: handleEdit(s, editTool[historyArgs, undone]{build: undoEdit, finish: undoneOf, render: renderUndone, failed: undoFailed}),
	})
	s.register(&operation{
		Name:        "redo_edit",
		Title:       "Redo",
		Category:    "history",
		Scope:       auth.ScopeWrite,
		Description: "Re-apply what the last undo_last_edit took back.",
		Input:       object(docPath).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb"},
		Destructive: true, Forkable: true, Retryable: true,
		Doc: historyDoc,
		Run: handleEdit(s, editTool[historyArgs, undone]{build: redoEdit, finish: undoneOf, render: renderRedone, failed: undoFailed}),
	})
}

// historyDoc is the document of the history tools (or its fork, with fork_id).
var historyDoc = docRef{Arg: "path", Ref: refAny, Open: true}

type historyArgs struct {
	Limit     int    `json:"limit"`
	VersionID string `json:"version_id"`
	Steps     int    `json:"steps"`
}

// historyRead is a document's versions and undo depth.
type historyRead struct {
	versions   []bridge.VersionInfo // newest first, at most limit
	kept       int
	undo, redo int
}

func (s *Server) getDocumentHistory(ctx context.Context, c *call, a historyArgs) (historyRead, error) {
	versions, err := c.Room.Versions(ctx)
	if err != nil {
		return historyRead{}, err
	}
	h := historyRead{kept: len(versions), versions: versions}
	if len(versions) > a.Limit {
		h.versions = versions[:a.Limit]
	}
	h.undo, h.redo, err = c.Room.UndoDepth(ctx)
	return h, err
}

// versionView is a version as get_document_history shows it.
type versionView struct {
	Version bridge.Version `json:"version_id"`
	At      time.Time      `json:"at"`
	By      []string       `json:"by,omitempty"`
	Agent   bool           `json:"agent,omitempty"`
	Summary string         `json:"summary"`
	Current bool           `json:"current,omitempty"`
}

func renderHistory(c *call, _ historyArgs, h historyRead) result {
	views := make([]versionView, len(h.versions))
	for i, v := range h.versions {
		views[i] = versionView{Version: v.Version, At: v.At, By: v.By, Agent: v.Agent, Summary: v.Summary, Current: v.Current}
	}
	out := map[string]any{"path": c.Room.Path(), "versions": views, "count": len(views), "kept": h.kept,
		"undo_steps": h.undo, "redo_steps": h.redo}
	if c.Fork != "" {
		out["fork_id"] = c.Fork
	}
	return result{Data: out}
}

// restored is a version brought back, as an edit.
type restored struct {
	version bridge.Version
	summary string
	changes any // ydoc.NotebookDiff, or a unified text diff
}

func (s *Server) restoreEdit(ctx context.Context, c *call, a historyArgs) (bridge.Proposal, error) {
	nb, text, err := c.Room.VersionContent(ctx, bridge.Version(a.VersionID))
	if err != nil {
		if errors.Is(err, bridge.ErrNoSuchVersion) {
			return bridge.Proposal{}, invalid([]any{"version_id"}, "%v (versions are kept within a memory budget; list them with get_document_history)", err)
		}
		return bridge.Proposal{}, err
	}
	return bridge.Proposal{Edit: ydoc.Restore{Notebook: nb, Text: text}}, nil
}

func restoredOf(_ context.Context, _ *call, _ historyArgs, ed bridge.Edited) restored {
	r := restored{version: ed.Version}
	if rs := ed.Outcome.Restored; rs != nil {
		r.summary = rs.Summary
		switch {
		case rs.Text != nil:
			r.changes = rs.Text.Unified()
		case rs.Notebook != nil:
			r.changes = *rs.Notebook
		}
	}
	return r
}

func renderRestored(c *call, a historyArgs, r restored) result {
	return result{Data: map[string]any{"path": c.Room.Path(), "restored": a.VersionID, "version": r.version, "summary": r.summary, "changes": r.changes}}
}

// undone is an undo or redo applied.
type undone struct {
	steps      int // undo: steps taken back
	version    bridge.Version
	change     ydoc.Change
	undo, redo int // steps left
}

func undoEdit(_ context.Context, _ *call, a historyArgs) (bridge.Proposal, error) {
	return bridge.Proposal{Edit: ydoc.Undo{Steps: a.Steps}}, nil
}

func redoEdit(context.Context, *call, historyArgs) (bridge.Proposal, error) {
	return bridge.Proposal{Edit: ydoc.Redo{}}, nil
}

// undoneOf is an undo's or a redo's outcome, with the steps left.
func undoneOf(ctx context.Context, c *call, _ historyArgs, ed bridge.Edited) undone {
	u := undone{steps: ed.Outcome.Steps, version: ed.Version, change: ed.Change}
	u.undo, u.redo, _ = c.Room.UndoDepth(ctx)
	return u
}

func undoFailed(err error) error {
	switch {
	case errors.Is(err, ydoc.ErrNothingToUndo):
		return &toolError{Message: "nothing to undo: the agent has made no edit to this document since the sidecar joined it (or since its replica was rebuilt after a reconnect), or others already removed what it did; restore_document_version can go back to any listed version"}
	case errors.Is(err, ydoc.ErrNothingToRedo):
		return &toolError{Message: "nothing to redo: no undo since the agent's last edit"}
	case errors.Is(err, ydoc.ErrNotReplayed):
		return &toolError{Message: "the connection to jupyter-server was lost before it confirmed this undo or redo, and the replica was rebuilt without the agent's undo history, so it is not run again: it may or may not have taken effect. Re-read the document; restore_document_version can go back to any listed version"}
	}
	return nil
}

func renderUndone(c *call, _ historyArgs, u undone) result {
	return result{Data: map[string]any{"path": c.Room.Path(), "undone": u.steps, "version": u.version, "changed": describeEdit(u.change), "undo_steps_left": u.undo, "redo_steps": u.redo}}
}

func renderRedone(c *call, _ historyArgs, u undone) result {
	return result{Data: map[string]any{"path": c.Room.Path(), "version": u.version, "changed": describeEdit(u.change)}}
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
