//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/jupyter"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// 1. Joining a notebook room gives a replica whose cells equal the file's, for real notebooks
// with floats, nulls, images, old nbformat minors and many cells.
func TestJoinReplicaEqualsFile(t *testing.T) {
	fixtures := []string{
		"jupyter_ydoc--nb0.ipynb",
		"jupyter_ydoc--nb1.ipynb",
		"jupyterlab--example.ipynb",
		"jupyterlab--vega-extension.ipynb",
		"jupyterlab--200_empty_cells.ipynb",
		"jupyter-mcp-server--notebook.ipynb",
		"jupyterlab--long_outputs.ipynb",
	}
	sc := newSidecar(t, shared, nil)
	for _, fx := range fixtures {
		t.Run(fx, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			name := uniqueName(t, ".ipynb")
			raw := fixture(t, fx)
			if err := shared.WriteFile(name, raw); err != nil {
				t.Fatal(err)
			}
			want, err := ydoc.ParseNBFormat(raw)
			if err != nil {
				t.Fatal(err)
			}
			room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
			if err != nil {
				t.Fatal(err)
			}
			got := replica(t, ctx, room)
			if len(got.Cells) != len(want.Cells) {
				t.Fatalf("replica has %d cells, file has %d", len(got.Cells), len(want.Cells))
			}
			withIDs := want.NBFormat == 4 && want.NBFormatMinor >= 5
			for i := range want.Cells {
				w, g := want.Cells[i], got.Cells[i]
				if g.Type != w.Type || g.Source != w.Source {
					t.Fatalf("cell %d: replica %s %q, file %s %q", i, g.Type, g.Source, w.Type, w.Source)
				}
				if withIDs && g.ID != w.ID {
					t.Errorf("cell %d: id %q, file has %q", i, g.ID, w.ID)
				}
				if !jsonEq(g.JSON(false)["outputs"], w.JSON(false)["outputs"]) {
					t.Errorf("cell %d outputs differ:\nreplica %v\nfile    %v", i, g.Outputs, w.Outputs)
				}
				if !jsonEq(g.ExecutionCount, w.ExecutionCount) {
					t.Errorf("cell %d execution_count %v, file %v", i, g.ExecutionCount, w.ExecutionCount)
				}
				wmd := w.Metadata
				delete(g.Metadata, "trusted") // the server marks trust when it loads
				delete(wmd, "trusted")
				if !jsonEq(g.Metadata, wmd) {
					t.Errorf("cell %d metadata %v, file %v", i, g.Metadata, wmd)
				}
			}
			if !jsonEq(got.Metadata, want.Metadata) {
				t.Errorf("notebook metadata differs:\nreplica %v\nfile    %v", got.Metadata, want.Metadata)
			}
			// The independent peer sees the same document.
			p := newPeer(t)
			if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
				t.Fatal(err)
			}
			snap, err := p.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(peerIDs(snap), ids(got)) || !slices.Equal(peerSources(snap), sources(got)) {
				t.Fatalf("peer and replica disagree: peer ids %v, replica ids %v", peerIDs(snap), ids(got))
			}
		})
	}
}

// 2. Cells inserted, edited (minimal diff) and deleted by the sidecar reach the independent
// peer, with the Yjs types JupyterLab expects, and reach the file after the server's autosave.
func TestSidecarEditsReachPeerAndDisk(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb1.ipynb")); err != nil {
		t.Fatal(err)
	}
	sc := newSidecar(t, shared, nil)
	room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	before := replica(t, ctx, room)
	n0 := len(before.Cells)
	// Every value state.dirty takes, as the peer receives it (the server may save and clear it
	// before a snapshot is taken).
	if err := p.Transact(ctx, `globalThis.dirtySeen = []; state.observe(e => { if (e.keysChanged.has('dirty')) globalThis.dirtySeen.push(state.get('dirty')) })`, nil); err != nil {
		t.Fatal(err)
	}

	// Insert a code cell with metadata containing floats and nulls, and a markdown cell.
	one := 1
	inserted := []ydoc.Cell{
		{ID: "agent-code-1", Type: "code", Source: "x = 1.5\nprint(x)\n", Metadata: map[string]any{"tags": []any{"agent"}, "ratio": 0.25, "none": nil}, ExecutionCount: &one,
			Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "1.5\n"}, {"output_type": "execute_result", "execution_count": 1, "data": map[string]any{"text/plain": "1.5"}, "metadata": map[string]any{}}}},
		{ID: "agent-md-1", Type: "markdown", Source: "# Agent notes\n\nline two\n"},
	}
	ed, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertCells(1, inserted) }))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ed.Change.Inserted, []string{"agent-code-1", "agent-md-1"}) {
		t.Errorf("change.Inserted = %v", ed.Change.Inserted)
	}
	snap, err := p.WaitFor(ctx, `nb.cells.length === `+fmt.Sprint(n0+2)+` && nb.cells[1].id === "agent-code-1" && nb.cells[2].id === "agent-md-1"`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	c1 := snap.Cells[1]
	wantTypes := map[string]any{"source": "Text", "metadata": "Map", "outputs": "Array", "cell_type": "string", "id": "string", "execution_count": "number", "execution_state": "string"}
	for k, v := range wantTypes {
		if c1.Types[k] != v {
			t.Errorf("peer sees cell field %s as %v, want %v (types %v)", k, c1.Types[k], v, c1.Types)
		}
	}
	items, _ := c1.Types["outputItems"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["self"] != "Map" || items[0].(map[string]any)["text"] != "Text" || items[1].(map[string]any)["data"] != "object" {
		t.Errorf("peer sees outputs as %v; want Y.Map outputs with stream text as Y.Text", items)
	}
	if c1.Metadata["ratio"] != 0.25 || c1.Metadata["none"] != nil || !reflect.DeepEqual(c1.Metadata["tags"], []any{"agent"}) {
		t.Errorf("peer sees metadata %v", c1.Metadata)
	}
	if _, present := c1.Metadata["none"]; !present {
		t.Errorf("null metadata value was dropped: %v", c1.Metadata)
	}
	// The edit marks the document dirty, as JupyterLab's edits do. jupyter-collaboration saves
	// a second after the last change, so the snapshot still shows it; jupyter-server-documents
	// saves on its own within half a second and sets dirty back to false (docs/engines.md,
	// "Messages, saving"), so there only the peer's record of the values shows it.
	var seen struct {
		Result []any `json:"result"`
	}
	if err := p.Call(ctx, "transact", map[string]any{"code": `return globalThis.dirtySeen`}, &seen); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: state.dirty took the values %v", shared.Engine, seen.Result)
	if !slices.Contains(seen.Result, any(true)) {
		t.Errorf("state.dirty took the values %v after the edit, never true", seen.Result)
	}
	if !shared.Engine.Documents() && snap.State["dirty"] != true {
		t.Errorf("state.dirty = %v, want true after an edit", snap.State["dirty"])
	}

	// A human cursor in the unchanged tail of the markdown cell must stay on the same character
	// when the agent edits the head: minimal diffs, not clear-and-insert.
	if err := p.Transact(ctx, `
		const c = cells.toArray().find(c => c.get('id') === 'agent-md-1');
		globalThis.cursor = Y.createRelativePositionFromTypeIndex(c.get('source'), 15);`, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
		return tx.SetSource(tx.CellIndex("agent-md-1"), "# Agent's notes (edited)\n\nline two\n")
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitFor(ctx, `nb.cells[2].source.startsWith("# Agent's notes (edited)")`, 10000); err != nil {
		t.Fatal(err)
	}
	var pos struct {
		Result struct {
			Index int    `json:"index"`
			Char  string `json:"char"`
		} `json:"result"`
	}
	if err := p.Call(ctx, "transact", map[string]any{"code": `
		const c = cells.toArray().find(c => c.get('id') === 'agent-md-1');
		const abs = Y.createAbsolutePositionFromRelativePosition(globalThis.cursor, doc);
		return { index: abs.index, char: c.get('source').toString()[abs.index] };`}, &pos); err != nil {
		t.Fatal(err)
	}
	if pos.Result.Char != "l" || pos.Result.Index != len("# Agent's notes (edited)\n\n") {
		t.Errorf("a cursor before 'line two' moved to index %d (%q): the edit was not minimal", pos.Result.Index, pos.Result.Char)
	}

	// Delete the first original cell.
	firstID := before.Cells[0].ID
	if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.DeleteCells(tx.CellIndex(firstID), 1) })); err != nil {
		t.Fatal(err)
	}
	final, err := p.WaitFor(ctx, `!nb.cells.some(c => c.id === `+jsString(firstID)+`) && nb.cells.length === `+fmt.Sprint(n0+1), 10000)
	if err != nil {
		t.Fatal(err)
	}
	// The file on disk gets the same cells after the autosave.
	disk := waitDisk(t, shared, name, "the agent's edits", func(nb ydoc.Notebook) bool {
		return slices.Equal(sources(nb), peerSources(final))
	})
	if !slices.Equal(ids(disk), peerIDs(final)) {
		t.Errorf("disk ids %v, peer ids %v", ids(disk), peerIDs(final))
	}
	if c := disk.Cells[0]; c.ID != "agent-code-1" || len(c.Outputs) != 2 || c.Outputs[0]["text"] != "1.5\n" || c.ExecutionCount == nil || *c.ExecutionCount != 1 {
		t.Errorf("disk cell 0 = %+v", c)
	}
}

// 3. Edits by the independent peer reach the replica, with change events naming the cells.
func TestPeerEditsReachReplica(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sc := newSidecar(t, shared, nil)
	sub := sc.manager.Subscribe(256)
	room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	if err := p.Call(ctx, "insertCell", map[string]any{"index": 0, "cell": map[string]any{"id": "human-1", "cell_type": "code", "source": "print('from the human')"}}, nil); err != nil {
		t.Fatal(err)
	}
	ev := awaitEvent(t, ctx, sub, func(e bridge.Event) bool {
		return e.Kind == bridge.EventChanged && slices.Contains(e.Change.Inserted, "human-1")
	})
	if ev.Change.Local {
		t.Errorf("a peer's edit was reported as local")
	}
	if len(ev.Authors) == 0 || ev.Authors[0] != "Independent Peer" {
		t.Logf("authors %v (awareness may not have arrived yet)", ev.Authors)
	}
	if err := p.Transact(ctx, `cells.get(0).get('source').insert(5, '("edited") or ')`, nil); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, ctx, sub, func(e bridge.Event) bool {
		return e.Kind == bridge.EventChanged && len(e.Change.Cells) == 1 && e.Change.Cells[0].ID == "human-1" && slices.Contains(e.Change.Cells[0].Fields, "source")
	})
	nb := replica(t, ctx, room)
	if nb.Cells[0].ID != "human-1" || nb.Cells[0].Source != `print("edited") or ('from the human')` {
		t.Fatalf("replica cell 0 = %q %q", nb.Cells[0].ID, nb.Cells[0].Source)
	}
}

func awaitEvent(t testing.TB, ctx context.Context, sub *bridge.Subscription, match func(bridge.Event) bool) bridge.Event {
	t.Helper()
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				t.Fatal("subscription closed")
			}
			if match(e) {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("event not seen: %v", ctx.Err())
		}
	}
}

// 4. The sidecar and the peer edit the same cell at the same time: both sides converge to the
// same text containing every contribution, and so does the file.
func TestConcurrentEditsConverge(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sc := newSidecar(t, shared, nil)
	room, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	cellID := replica(t, ctx, room).Cells[0].ID
	const rounds = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // the agent prepends
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			_, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
				c, err := tx.Cell(tx.CellIndex(cellID))
				if err != nil {
					return err
				}
				return tx.SetSource(tx.CellIndex(cellID), fmt.Sprintf("A%02d;", i)+c.Source)
			}))
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // the human appends and types in the middle
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			err := p.Transact(ctx, `
				const t = cells.toArray().find(c => c.get('id') === args.id).get('source');
				t.insert(t.length, args.tail);
				const s = t.toString();
				const at = s.indexOf(';', Math.floor(s.length / 2));
				t.insert(at < 0 ? s.length : at + 1, args.mid);`, map[string]any{"id": cellID, "tail": fmt.Sprintf("H%02d;", i), "mid": "m;"})
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Converge: wait until the peer's text equals the replica's (both sides quiesced).
	var text string
	deadline := time.Now().Add(20 * time.Second)
	for {
		nb := replica(t, ctx, room)
		text = nb.Cells[0].Source
		snap, err := p.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Cells[0].Source == text {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence:\nreplica %q\npeer    %q", text, snap.Cells[0].Source)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < rounds; i++ {
		for _, tok := range []string{fmt.Sprintf("A%02d;", i), fmt.Sprintf("H%02d;", i)} {
			if strings.Count(text, tok) != 1 {
				t.Errorf("token %s appears %d times in the converged text", tok, strings.Count(text, tok))
			}
		}
	}
	if n := strings.Count(text, "m;"); n != rounds {
		t.Errorf("the human's mid-text insertions: %d of %d survived", n, rounds)
	}
	waitDisk(t, shared, name, "the converged text", func(nb ydoc.Notebook) bool { return len(nb.Cells) > 0 && nb.Cells[0].Source == text })
}

// 6. The same for a text file room: join, edits both ways, concurrent edits, disk.
func TestTextFileRoom(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	name := uniqueName(t, ".txt")
	if err := shared.WriteFile(name, []byte("line one\nline two\nünïcödé 🎉 line three\n")); err != nil {
		t.Fatal(err)
	}
	sc := newSidecar(t, shared, nil)
	room, err := sc.manager.Open(ctx, name, ydoc.KindText)
	if err != nil {
		t.Fatal(err)
	}
	readText := func() string {
		var s string
		if err := room.View(ctx, func(d *ydoc.Doc) error {
			var err error
			s, err = d.Text()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := readText(); got != "line one\nline two\nünïcödé 🎉 line three\n" {
		t.Fatalf("replica text %q", got)
	}
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "file"); err != nil {
		t.Fatal(err)
	}
	// Sidecar inserts after the emoji (code points → UTF-16 conversion).
	if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
		s, _ := tx.Text()
		pos, err := ydoc.CodePointsToUTF16(s, len([]rune("line one\nline two\nünïcödé 🎉")))
		if err != nil {
			return err
		}
		return tx.InsertText(pos, " (agent)")
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitFor(ctx, `nb.text.includes("🎉 (agent) line three")`, 10000); err != nil {
		t.Fatal(err)
	}
	// Peer edits; replica sees it.
	if err := p.Transact(ctx, `source.insert(0, "# header\n")`, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(readText(), "# header\n") {
		if time.Now().After(deadline) {
			t.Fatalf("replica never saw the peer's edit: %q", readText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Concurrent: both edit at once.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			_, _ = room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return tx.InsertText(tx.TextLength(), fmt.Sprintf("a%02d\n", i)) }))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			_ = p.Transact(ctx, `source.insert(0, args.s)`, map[string]any{"s": fmt.Sprintf("h%02d\n", i)})
		}
	}()
	wg.Wait()
	var final string
	for deadline := time.Now().Add(10 * time.Second); ; {
		final = readText()
		snap, _ := p.Snapshot(ctx)
		if snap.Text == final {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("text rooms did not converge:\nreplica %q\npeer    %q", final, snap.Text)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		if strings.Count(final, fmt.Sprintf("a%02d\n", i)) != 1 || strings.Count(final, fmt.Sprintf("h%02d\n", i)) != 1 {
			t.Fatalf("contribution %d missing or duplicated in %q", i, final)
		}
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		b, _ := shared.ReadFile(name)
		if string(b) == final {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file on disk %q, want %q", b, final)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refusedRequest is the server's access-log line for a request it refused with 403
// ("[W 2026-11-28 09:24:03.117 ServerApp] 403 GET /api/contents/… (@127.0.0.1) 1.02ms"). Counting
// "403" anywhere counted timestamps' milliseconds and ids too: jupyter-server-documents logs
// enough lines with those to make the count flaky.
var refusedRequest = regexp.MustCompile(`(?m)^.*\] 403 [A-Z]+ /.*$`)

// refusedRequests lists the 403 access-log lines in a server log, in order.
func refusedRequests(log string) []string { return refusedRequest.FindAllString(log, -1) }

// 7. Bad inputs get clear errors: a wrong token fails at once without a retry storm; missing
// files, directories and non-notebooks are refused before joining.
func TestBadInputs(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	if err := shared.WriteFile("plain.txt", []byte("not a notebook")); err != nil {
		t.Fatal(err)
	}
	t.Run("wrong token", func(t *testing.T) {
		wrong := &JupyterServer{URL: shared.URL, Token: "not-the-token"}
		sc := newSidecar(t, wrong, nil)
		logBefore := len(refusedRequests(shared.Log()))
		start := time.Now()
		_, err := sc.manager.Open(ctx, name, ydoc.KindNotebook)
		if err == nil {
			t.Fatal("opened a room with a wrong token")
		}
		var api *jupyter.APIError
		if !errors.As(err, &api) || api.Status != 403 {
			t.Fatalf("error %v is not an HTTP 403 from the server", err)
		}
		if !strings.Contains(err.Error(), "JUPYTER_TOKEN") {
			t.Errorf("error does not tell the user what to check: %v", err)
		}
		if strings.Contains(err.Error(), "not-the-token") {
			t.Errorf("error leaks the token: %v", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("a refused token took %v to report", time.Since(start))
		}
		time.Sleep(2 * time.Second) // room for a retry storm to show up in the server log
		switch refused := refusedRequests(shared.Log())[logBefore:]; {
		case len(refused) == 0:
			t.Errorf("the server logged no refused request (its access-log line changed?), though the sidecar was refused")
		case len(refused) > 2:
			t.Errorf("server logged %d refused requests: retry storm:\n%s", len(refused), strings.Join(refused, "\n"))
		}
		if rooms := sc.manager.Rooms(); len(rooms) != 0 {
			t.Errorf("a room was left running: %v", rooms[0].Info())
		}
	})
	sc := newSidecar(t, shared, nil)
	for _, tc := range []struct {
		path string
		kind ydoc.Kind
		want string
	}{
		{"does-not-exist.ipynb", ydoc.KindNotebook, "no such file"},
		{"plain.txt", ydoc.KindNotebook, "not a notebook"},
		{"", ydoc.KindNotebook, "is a directory"},
		{name, ydoc.KindText, "not a text file"},
		{"missing.txt", ydoc.KindText, "no such file"},
	} {
		t.Run(tc.path+"/"+tc.kind.String(), func(t *testing.T) {
			_, err := sc.manager.Open(ctx, tc.path, tc.kind)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q, %s) = %v, want an error saying %q", tc.path, tc.kind, err, tc.want)
			}
		})
	}
	if _, err := bridge.CleanPath("../etc/passwd"); err == nil {
		t.Error("CleanPath accepted a traversal")
	}
}

// TestParallelJoinsOnAFreshServer: the sidecar opening many notebooks at once on a server that
// has never opened a room (no .jupyter_ystore.db yet) leaves the server's YStore intact and every
// room syncs promptly. Rooms starting together on such a server each create the database schema,
// and one that looks while another is half-way moves the file aside; the rooms still writing to
// the moved file fail and never sync their joiners (this made TestLoad's joins time out).
func TestParallelJoinsOnAFreshServer(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	const n = 10
	for i := range n {
		if err := srv.WriteFile(fmt.Sprintf("fresh-%02d.ipynb", i), fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
			t.Fatal(err)
		}
	}
	sc := newSidecar(t, srv, nil)
	defer sc.stop() // before the server stops
	start := time.Now()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := sc.manager.Open(ctx, fmt.Sprintf("fresh-%02d.ipynb", i), ydoc.KindNotebook)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	took := time.Since(start)
	log := srv.Log()
	for _, bad := range []string{"SQLite exception", "YStore version mismatch", "Document Room Exception"} {
		if c := strings.Count(log, bad); c > 0 {
			t.Errorf("the server logged %q %d times while %d rooms were joined at once", bad, c, n)
		}
	}
	if took > 20*time.Second { // normally about a second; a broken room never syncs (30 s join timeout)
		t.Errorf("%d joins took %v", n, took)
	}
	t.Logf("%d joins on a fresh server: %v", n, took.Round(time.Millisecond))
}
