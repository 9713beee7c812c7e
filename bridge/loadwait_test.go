package bridge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The wait for a notebook the server is still loading (bridge/outputs.go), against a fake whose
// rooms are written by the loader (client 0) and whose file reads give new random ids to the
// cells jupyter-server gives them to.

// loaderServer is a fake holding one nbformat 4.5 notebook at path, whose rooms the loader writes.
func loaderServer(cells ...ydoc.Cell) *bridgetest.Server {
	nb := bridgetest.DefaultNotebook()
	nb.Cells = cells
	srv := bridgetest.New(bridgetest.File{Path: bridgetest.NotebookPath, Type: "notebook", Notebook: nb})
	srv.LoadAsLoader(true)
	return srv
}

func stream(text string) []map[string]any {
	return []map[string]any{{"output_type": "stream", "name": "stdout", "text": text}}
}

func readCells(ctx context.Context, r *bridge.Room) ([]ydoc.Cell, error) {
	var cells []ydoc.Cell
	err := r.View(ctx, func(d *ydoc.Doc) error {
		var err error
		cells, err = d.Cells(nil)
		return err
	})
	return cells, err
}

// Cells without an id and a cell with another's id get new ids on every read of the file: the
// first read must not wait for them (it waited the whole LoadWait, 60 s, before).
func TestLoadWaitUntrustedIDsAnswerAtOnce(t *testing.T) {
	srv := loaderServer(
		ydoc.Cell{Type: ydoc.CellCode, Source: "a", Outputs: stream("1\n")},
		ydoc.Cell{ID: "kept", Type: ydoc.CellMarkdown, Source: "b"},
		ydoc.Cell{ID: "kept", Type: ydoc.CellCode, Source: "c", Outputs: stream("2\n")},
		ydoc.Cell{Type: ydoc.CellRaw, Source: "d"},
	)
	h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.LoadWait = time.Minute })
	start := time.Now()
	cells, err := readCells(ctxT(t), h.room) // ctxT: a wait for the ids would fail here after 5 s
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the read took %s", took)
	}
	var got []string
	for _, c := range cells {
		got = append(got, c.Source)
	}
	if strings.Join(got, ",") != "a,b,c,d" {
		t.Errorf("cells %q", got)
	}
}

// A load still going on is awaited: the read answers once the loader has written what the file
// holds (here the outputs it holds back, as jupyter-collaboration 5.0 does above a size).
func TestLoadWaitAwaitsTheLoader(t *testing.T) {
	srv := loaderServer(ydoc.Cell{Type: ydoc.CellCode, Source: "x = 1", Outputs: []map[string]any{}}, ydoc.Cell{Type: ydoc.CellMarkdown, Source: "m"})
	h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.LoadWait = time.Minute })
	// The file holds outputs the room has not got yet.
	f, _ := srv.File(bridgetest.NotebookPath)
	f.Notebook.Cells[0].Outputs = stream("1\n")
	srv.WriteFile(f)
	type read struct {
		cells []ydoc.Cell
		err   error
	}
	done := make(chan read, 1)
	go func() {
		cells, err := readCells(ctxT(t), h.room)
		done <- read{cells, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("the read did not wait for the outputs: %v %v", r.cells, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := srv.EditDoc(bridgetest.NotebookPath, func(tx *ydoc.Txn) error { return tx.AppendOutput(0, stream("1\n")[0]) }); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.cells) != 2 || len(r.cells[0].Outputs) != 1 {
			t.Fatalf("read %v, %v", r.cells, r.err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the read did not end once the outputs arrived")
	}
}

// A load that goes on past LoadWait fails the read, saying what it waited for; a loader that
// stopped short of the file (the document changed while it loaded) does not: the room is the
// document.
func TestLoadWaitIsBounded(t *testing.T) {
	srv := loaderServer(ydoc.Cell{Type: ydoc.CellCode, Source: "1"})
	const wait = 300 * time.Millisecond
	h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.LoadWait = wait })
	f, _ := srv.File(bridgetest.NotebookPath)
	f.Notebook.Cells = append(f.Notebook.Cells, ydoc.Cell{Type: ydoc.CellMarkdown, Source: "never loaded"}, ydoc.Cell{Type: ydoc.CellRaw})
	srv.WriteFile(f)

	// The loader keeps writing (it is still loading): the read gives up after LoadWait.
	stop := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for i := 0; i < 200; i++ { // bounded: 200 × 10 ms
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_ = srv.EditDoc(bridgetest.NotebookPath, func(tx *ydoc.Txn) error {
				return tx.SetCellMetadata(0, map[string]any{"tick": i})
			})
		}
	}()
	start := time.Now()
	_, err := readCells(ctxT(t), h.room)
	took := time.Since(start)
	close(stop)
	<-writing
	if err == nil || !strings.Contains(err.Error(), "still loading") || !strings.Contains(err.Error(), "2 of the file's 3 cells") {
		t.Fatalf("read while the loader writes: %v", err)
	}
	if took < wait || took > wait+2*time.Second {
		t.Errorf("the read gave up after %s (LoadWait %s)", took, wait)
	}

	// The loader is quiet now: the next read waits once more, then reads what the room holds.
	cells, err := readCells(ctxT(t), h.room)
	if err != nil || len(cells) != 1 {
		t.Fatalf("read after the loader stopped: %d cells, %v", len(cells), err)
	}
	// And the load is over: no more waiting.
	start = time.Now()
	if _, err := readCells(ctxT(t), h.room); err != nil || time.Since(start) > wait/2 {
		t.Errorf("a read after the load: %v after %s", err, time.Since(start))
	}
}

// A read waits for a replica that is being rebuilt (the server restarted) at most ReadyWait, then
// fails saying what it waited for.
func TestReadyWaitIsBounded(t *testing.T) {
	srv := newServer(t)
	const wait = 200 * time.Millisecond
	h := startSynced(t, srv, func(o *bridge.RoomOptions) { o.ReadyWait = wait })
	srv.RejectConnections(bridgetest.CloseAbnormal, "the room cannot load")
	srv.Restart(bridgetest.RestartOptions{}) // a new session: the replica is rebuilt, and never syncs
	h.await("the reset", kindIs(bridge.EventReset))
	start := time.Now()
	_, err := readCells(ctxT(t), h.room)
	if err == nil || !strings.Contains(err.Error(), "not in sync with the server") || !strings.Contains(err.Error(), "waited 200ms") {
		t.Fatalf("read of a replica that never syncs: %v", err)
	}
	if took := time.Since(start); took < wait || took > wait+2*time.Second {
		t.Errorf("the read gave up after %s (ReadyWait %s)", took, wait)
	}
	srv.AcceptConnections()
	if _, err := readCells(ctxT(t), h.room); err != nil {
		t.Errorf("a read once the room synced again: %v", err)
	}
}
