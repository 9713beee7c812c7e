package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A first read of a notebook whose room is slow to join answers from the file, marked as such
// and without a version; the ids the room will not share (a cell without one, a second cell with
// the same one) are left out and counted; edits wait for the room; once it has joined, reads come
// from it again.
func TestFirstReadFromTheFileWhileTheRoomJoins(t *testing.T) {
	nb := bridgetest.DefaultNotebook()
	nb.Cells = append(nb.Cells, ydoc.Cell{Type: ydoc.CellMarkdown, Source: "no id"}, ydoc.Cell{ID: "cell-a", Type: ydoc.CellRaw, Source: "same id"})
	e := newEnvWith(t, []bridgetest.File{{Path: "slow.ipynb", Type: "notebook", Notebook: nb}},
		func(o *bridge.ManagerOptions) { o.FirstReadWait = 20 * time.Millisecond })
	e.srv.BlockOpen() // the join cannot go further than the document session
	start := time.Now()
	out := e.ok("get_notebook", map[string]any{"path": "slow.ipynb", "format": "json"})
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("a read of cells without ids answered from the file after %s: it gives the room 2 s", took)
	}
	ff, ok := out["from_file"].(map[string]any)
	if !ok || out["version"] != nil {
		t.Fatalf("a read while the room joins: %s", compact(out))
	}
	if ff["cells_without_id"] != float64(2) || !strings.Contains(ff["note"].(string), "edits wait for the room") {
		t.Errorf("from_file: %s", compact(ff))
	}
	cells := out["cells"].([]any)
	if len(cells) != 4 || cells[0].(map[string]any)["id"] != "cell-a" || cells[2].(map[string]any)["source"] != "no id" {
		t.Errorf("cells: %s", compact(cells))
	}
	for _, i := range []int{2, 3} {
		if id := cells[i].(map[string]any)["id"]; id != nil && id != "" {
			t.Errorf("cell %d shows id %v, which the room will not have", i, id)
		}
	}
	if text := e.call("get_notebook", map[string]any{"path": "slow.ipynb"}); text.IsError || !strings.Contains(text.Texts[0], "read from the file while the room loads") {
		t.Errorf("text read: %s", text)
	}
	// An edit waits for the room.
	done := make(chan *result, 1)
	go func() {
		done <- e.callNoFatal("batch_update_notebook_cells", map[string]any{"path": "slow.ipynb",
			"updates": []any{map[string]any{"cell_id": "cell-b", "content": "# Edited"}}})
	}()
	select {
	case r := <-done:
		t.Fatalf("an edit did not wait for the room: %s", r)
	case <-time.After(50 * time.Millisecond):
	}
	e.srv.UnblockOpen()
	select {
	case r := <-done:
		if r == nil || r.IsError {
			t.Fatalf("the edit once the room joined: %v", r)
		}
	case <-time.After(waitLimit):
		t.Fatal("the edit did not end once the room joined")
	}
	out = e.ok("get_notebook", map[string]any{"path": "slow.ipynb", "format": "json"})
	if out["from_file"] != nil || out["version"] == nil {
		t.Errorf("a read once the room joined: %s", compact(out))
	}
}

// A notebook whose cells all have ids is read from the file once FirstReadWait has passed.
func TestFirstReadFromTheFileAtOnce(t *testing.T) {
	e := newEnvWith(t, nil, func(o *bridge.ManagerOptions) { o.FirstReadWait = 20 * time.Millisecond })
	e.srv.BlockOpen()
	defer e.srv.UnblockOpen()
	start := time.Now()
	out := e.ok("get_notebook", map[string]any{"path": bridgetest.NotebookPath, "format": "json"})
	if ff, ok := out["from_file"].(map[string]any); !ok || ff["cells_without_id"] != nil || len(out["cells"].([]any)) != 2 {
		t.Errorf("read: %s", compact(out))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the read took %s", took)
	}
}

// A notebook whose room joins within FirstReadWait is read from the room.
func TestFirstReadFromTheRoomWhenItJoinsInTime(t *testing.T) {
	e := newEnvWith(t, nil, func(o *bridge.ManagerOptions) { o.FirstReadWait = waitLimit })
	out := e.ok("get_notebook", map[string]any{"path": bridgetest.NotebookPath, "format": "json"})
	if out["from_file"] != nil || out["version"] == nil {
		t.Errorf("read: %s", compact(out))
	}
}

// A notebook the server refuses to load may be read from the file first (the refusal comes with
// the join); the next read gives the server's reason, not the file again.
func TestFirstReadFromTheFileThenTheRefusal(t *testing.T) {
	e := newEnvWith(t, nil, func(o *bridge.ManagerOptions) { o.FirstReadWait = 20 * time.Millisecond })
	e.srv.BlockOpen()
	e.srv.RejectConnections(bridgetest.CloseBadRequest, "Error initializing: nb.ipynb.")
	out := e.ok("get_notebook", map[string]any{"path": bridgetest.NotebookPath, "format": "json"})
	if out["from_file"] == nil {
		t.Fatalf("first read: %s", compact(out))
	}
	e.srv.UnblockOpen()
	deadline := time.Now().Add(waitLimit)
	for {
		r := e.call("get_notebook", map[string]any{"path": bridgetest.NotebookPath, "format": "json"})
		if r.IsError {
			if !strings.Contains(r.Texts[0], "refused to load the document") {
				t.Errorf("the refusal: %s", r.Texts[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads kept answering from the file: %s", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
