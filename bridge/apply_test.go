package bridge_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Apply reports the version its own change produced and what the edit did; a proposal made
// against an earlier version is refused, changing nothing, when the cells it touches changed
// since, and goes ahead when others changed.
func TestApplyVersions(t *testing.T) {
	srv := newServer(t)
	hr := startSynced(t, srv, nil)
	ctx := testutil.Context(t)
	var v0 bridge.Version
	if err := hr.room.Read(ctx, func(_ *ydoc.Doc, h bridge.History) error { v0 = h.Version(); return nil }); err != nil {
		t.Fatal(err)
	}
	src := "changed"
	ed, err := hr.room.Apply(ctx, ydoc.UpdateCells{Updates: []ydoc.CellUpdate{{CellID: "cell-a", Source: &src}}})
	if err != nil {
		t.Fatal(err)
	}
	if ed.Version == v0 || ed.Version == "" {
		t.Fatalf("edit version %q, want a new one after %q", ed.Version, v0)
	}
	if o := ed.Outcome; len(o.Cells) != 1 || o.Cells[0].ID != "cell-a" || !slices.Equal(o.Cells[0].Changed, []string{"source"}) {
		t.Errorf("outcome %+v, want cell-a's source changed", o)
	}

	// Against v0: cell-a changed since (by us), cell-b did not.
	again := "again"
	p, err := hr.room.Propose(ctx, bridge.Proposal{Since: v0, Edit: ydoc.UpdateCells{Updates: []ydoc.CellUpdate{{CellID: "cell-a", Source: &again}}}})
	if err != nil {
		t.Fatal(err)
	}
	refused, err := p.Wait(ctx)
	var conflict *ydoc.ConflictError
	if !errors.As(err, &conflict) || len(conflict.Conflicts) != 1 || conflict.Conflicts[0].CellID != "cell-a" || conflict.Version != string(v0) {
		t.Fatalf("edit of a cell changed since v0: err %v, want a conflict on cell-a", err)
	}
	if refused.Version != ed.Version {
		t.Errorf("refused edit's version %s, want the current %s", refused.Version, ed.Version)
	}
	p, err = hr.room.Propose(ctx, bridge.Proposal{Since: v0, Edit: ydoc.UpdateCells{Updates: []ydoc.CellUpdate{{CellID: "cell-b", Source: &again}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("edit of a cell nobody changed since v0: %v", err)
	}
	if got := serverSource(t, srv, nbPath, "cell-a"); got != "changed" {
		t.Errorf("cell-a %q: the refused edit changed it", got)
	}

	// A version from elsewhere cannot be judged.
	p, err = hr.room.Propose(ctx, bridge.Proposal{Since: "ffffff-1", Edit: ydoc.UpdateCells{Updates: []ydoc.CellUpdate{{CellID: "cell-b", Source: &src}}}})
	if err != nil {
		t.Fatal(err)
	}
	var verr *bridge.VersionError
	if _, err := p.Wait(ctx); !errors.As(err, &verr) || !errors.Is(err, bridge.ErrUnknownVersion) {
		t.Errorf("unknown version: err %v", err)
	}
}

// Create writes a new document and opens it; an existing path is refused.
func TestManagerCreate(t *testing.T) {
	srv := newServer(t)
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Room: bridgetest.FastRoomOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ctx := testutil.Context(t)
	nb := `{"cells": [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "# new"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}`
	room, err := m.Create(ctx, "data/new.ipynb", ydoc.KindNotebook, []byte(nb))
	if err != nil {
		t.Fatal(err)
	}
	if ids := roomCellIDs(t, room); len(ids) != 1 || ids[0] != "m1" {
		t.Errorf("new notebook cells %v", ids)
	}
	if _, err := m.Create(ctx, "data/new.ipynb", ydoc.KindNotebook, []byte(nb)); !errors.Is(err, bridge.ErrExists) {
		t.Errorf("second Create err = %v, want ErrExists", err)
	}
	if _, err := m.Create(ctx, "new-dir/deeper/x.txt", ydoc.KindText, []byte("x")); err != nil {
		t.Errorf("Create in missing directories: %v", err)
	}
	if fi, err := m.Stat(ctx, "new-dir/deeper"); err != nil || fi.Type != "directory" {
		t.Errorf("parent directories were not created: %+v %v", fi, err)
	}
	if _, err := m.Create(ctx, bridgetest.TextPath+"/x.txt", ydoc.KindText, []byte("x")); err == nil {
		t.Error("Create under a file succeeded")
	}
	if _, err := m.Create(ctx, "../escape.txt", ydoc.KindText, []byte("x")); !errors.Is(err, bridge.ErrBadPath) {
		t.Errorf("Create outside the root err = %v, want ErrBadPath", err)
	}
	if _, err := m.Create(ctx, bridgetest.TextPath, ydoc.KindText, []byte("x")); !errors.Is(err, bridge.ErrExists) {
		t.Errorf("Create over an existing file err = %v", err)
	}
}
