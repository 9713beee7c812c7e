package bridge_test

import (
	"errors"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Apply reports the version its own change produced, and an edit function can see what changed
// since a version it read.
func TestApplyVersions(t *testing.T) {
	srv := newServer(t)
	hr := startSynced(t, srv, nil)
	ctx := ctxT(t)
	var v0 bridge.Version
	if err := hr.room.Read(ctx, func(_ *ydoc.Doc, h bridge.History) error { v0 = h.Version(); return nil }); err != nil {
		t.Fatal(err)
	}
	ed, err := hr.room.Apply(ctx, func(tx *ydoc.Txn, h bridge.History, _ bool) error {
		if h.Version() != v0 {
			t.Errorf("version moved before the edit: %s → %s", v0, h.Version())
		}
		return tx.SetSource(0, "changed")
	})
	if err != nil {
		t.Fatal(err)
	}
	if ed.Version == v0 || ed.Version == "" {
		t.Fatalf("edit version %q, want a new one after %q", ed.Version, v0)
	}
	_, err = hr.room.Apply(ctx, func(tx *ydoc.Txn, h bridge.History, _ bool) error {
		ch, err := h.Since(v0)
		if err != nil {
			return err
		}
		if len(ch.Cells) != 1 || ch.Cells[0].ID != "cell-a" {
			t.Errorf("Since(v0) = %+v, want cell-a changed", ch)
		}
		if h.Version() != ed.Version {
			t.Errorf("current version %s, want the edit's %s", h.Version(), ed.Version)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Create writes a new document and opens it; an existing path is refused.
func TestManagerCreate(t *testing.T) {
	srv := newServer(t)
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Room: fastOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ctx := ctxT(t)
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
