//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Execution against the real server and ipykernel: what the tool returns, what the independent
// peer sees in the room, and what lands on disk must all match what JupyterLab produces.

// pngCode writes a w×h PNG with the standard library only (no matplotlib in the venv) and
// displays it.
func pngCode(w, h int) string {
	return fmt.Sprintf(`import zlib, struct
from IPython.display import Image, display
W, H = %d, %d
raw = b"".join(b"\x00" + bytes(v for x in range(W) for v in (x*255//W, y*255//H, 128)) for y in range(H))
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
display(Image(data=png))`, w, h)
}

func TestExecuteOutputs(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	cells := []struct {
		id, code string
		check    func(t *testing.T, run map[string]any, peer PeerCell)
	}{
		{"print", "print('hello')", func(t *testing.T, run map[string]any, peer PeerCell) {
			outs := run["outputs"].([]any)
			if len(outs) != 1 || outs[0].(map[string]any)["text"] != "hello\n" {
				t.Errorf("outputs %v", outs)
			}
			if peer.Outputs[0]["text"] != "hello\n" {
				t.Errorf("peer outputs %v", peer.Outputs)
			}
		}},
		{"expr", "6 * 7", func(t *testing.T, run map[string]any, peer PeerCell) {
			if d := run["outputs"].([]any)[0].(map[string]any)["data"].(map[string]any); d["text/plain"] != "42" {
				t.Errorf("result %v", d)
			}
		}},
		{"error", "raise ValueError('bad \\x1b[31mred\\x1b[0m value')", func(t *testing.T, run map[string]any, peer PeerCell) {
			if run["status"] != "error" {
				t.Errorf("status %v", run["status"])
			}
			o := run["outputs"].([]any)[0].(map[string]any)
			if o["ename"] != "ValueError" || strings.Contains(fmt.Sprint(o["traceback"]), "\x1b[") || !strings.Contains(fmt.Sprint(o["traceback"]), "ValueError") {
				t.Errorf("error output %v", o)
			}
			if peer.Outputs[0]["output_type"] != "error" {
				t.Errorf("peer outputs %v", peer.Outputs)
			}
		}},
		{"stream-then-result", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nprint('out2')\n'done'", func(t *testing.T, run map[string]any, peer PeerCell) {
			// ipykernel buffers each stream, so the two stdout prints may arrive as one message;
			// what JupyterLab shows (and we must write) is every stream's text, in its order,
			// and the result last.
			var stdout, stderr string
			for _, o := range peer.Outputs {
				switch o["name"] {
				case "stdout":
					stdout += o["text"].(string)
				case "stderr":
					stderr += o["text"].(string)
				}
			}
			last := peer.Outputs[len(peer.Outputs)-1]
			if stdout != "out\nout2\n" || stderr != "err\n" || last["output_type"] != "execute_result" {
				t.Errorf("peer outputs %v", peer.Outputs)
			}
		}},
		{"merged-stream", "for i in range(3):\n    print(i)", func(t *testing.T, run map[string]any, peer PeerCell) {
			if outs := run["outputs"].([]any); len(outs) != 1 || outs[0].(map[string]any)["text"] != "0\n1\n2\n" {
				t.Errorf("the run's consecutive prints are not one stream: %v", outs)
			}
			if runsOnServer(shared) { // the server writes every stream message as it comes
				if runStreamText(peer.Outputs) != "0\n1\n2\n" {
					t.Errorf("peer outputs %v", peer.Outputs)
				}
				return
			}
			if len(peer.Outputs) != 1 || peer.Outputs[0]["text"] != "0\n1\n2\n" {
				t.Errorf("consecutive prints were not merged into one stream: %v", peer.Outputs)
			}
		}},
		{"clear", "from IPython.display import clear_output\nprint('first')\nclear_output()\nprint('second')\nclear_output(wait=True)\nprint('third')", func(t *testing.T, run map[string]any, peer PeerCell) {
			if len(peer.Outputs) != 1 || peer.Outputs[0]["text"] != "third\n" {
				t.Errorf("after clear_output: %v", peer.Outputs)
			}
		}},
		{"display-update", "from IPython.display import display\nh = display('before', display_id=True)\nprint('between')\nh.update('after')", func(t *testing.T, run map[string]any, peer PeerCell) {
			if runsOnServer(shared) {
				// jupyter-server-documents 0.3.3 replaces a display only with its outputs
				// service on; without it the update is appended (output_processor.py ::
				// _write_output): the notebook shows both, and so does the run.
				if len(peer.Outputs) != 3 || peer.Outputs[2]["data"].(map[string]any)["text/plain"] != "'after'" || len(run["outputs"].([]any)) != 3 {
					t.Errorf("display update: peer %v, run %v", peer.Outputs, run["outputs"])
				}
				return
			}
			if len(peer.Outputs) != 2 || peer.Outputs[0]["data"].(map[string]any)["text/plain"] != "'after'" {
				t.Errorf("display update: %v", peer.Outputs)
			}
		}},
		{"progress-bar", "for i in range(5):\n    print(f'\\r{i*25}%', end='')", func(t *testing.T, run map[string]any, peer PeerCell) {
			if outs := run["outputs"].([]any); len(outs) != 1 || outs[0].(map[string]any)["text"] != "100%" {
				t.Errorf("the run's carriage returns: %q", outs)
			}
			if runsOnServer(shared) { // the server writes the raw text; JupyterLab's output area applies \r
				if !strings.HasSuffix(runStreamText(peer.Outputs), "\r100%") {
					t.Errorf("carriage returns: %q", peer.Outputs)
				}
				return
			}
			if len(peer.Outputs) != 1 || peer.Outputs[0]["text"] != "100%" {
				t.Errorf("carriage returns: %q", peer.Outputs)
			}
		}},
		{"input", "input('name? ')", func(t *testing.T, run map[string]any, peer PeerCell) {
			if run["status"] != "error" || !strings.Contains(fmt.Sprint(run["outputs"]), "StdinNotImplementedError") {
				t.Errorf("input() should fail at once: %v", run)
			}
		}},
	}
	var ins []any
	for _, c := range cells {
		ins = append(ins, map[string]any{"id": c.id, "content": c.code})
	}
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": ins})
	var ids []any
	for _, c := range cells {
		ids = append(ids, c.id)
	}
	out := a.ok(ctx, "batch_execute_notebook_cells", map[string]any{"path": name, "cell_ids": ids, "stop_on_error": false, "timeout": 120})
	if out["status"] != "failed" { // two cells raise
		t.Errorf("job status %v", out["status"])
	}
	runs := cellResults(out)
	snap, err := p.WaitFor(ctx, `nb.cells.slice(0, `+fmt.Sprint(len(cells))+`).every(c => c.execution_count !== null && c.execution_state === 'idle')`, 20000)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cells {
		t.Run(c.id, func(t *testing.T) {
			run, peer := runs[i], snap.Cells[i]
			if run["cell_id"] != c.id {
				t.Fatalf("result %d is for %v", i, run["cell_id"])
			}
			if n, ok := run["execution_count"].(float64); !ok || peer.ExecutionCount == nil || *peer.ExecutionCount != n {
				t.Errorf("count: tool %v, peer %v", run["execution_count"], peer.ExecutionCount)
			}
			// How the outputs are written is ours to get right where we write them; on
			// jupyter-server-documents the server writes them (plain JSON objects in the outputs
			// array, as its own front end reads them).
			for j, o := range peer.Types["outputItems"].([]any) {
				om := o.(map[string]any)
				if !runsOnServer(shared) && (om["self"] != "Map" || (peer.Outputs[j]["output_type"] == "stream" && om["text"] != "Text")) {
					t.Errorf("output %d written as %v, not as JupyterLab writes it", j, om)
				}
			}
			c.check(t, run, peer)
		})
	}
	// On disk after the autosave: the same outputs and counts, no execution_state.
	disk := waitDisk(t, shared, name, "the outputs", func(nb ydoc.Notebook) bool {
		return len(nb.Cells) > 0 && nb.Cells[0].ExecutionCount != nil && len(nb.Cells[len(cells)-1].Outputs) > 0
	})
	for i := range cells {
		d, peer := disk.Cells[i], snap.Cells[i]
		if !jsonEq(d.Outputs, peer.Outputs) || d.ExecutionCount == nil || float64(*d.ExecutionCount) != *peer.ExecutionCount {
			t.Errorf("cell %s on disk: count %v outputs %v; peer count %v outputs %v", d.ID, d.ExecutionCount, d.Outputs, *peer.ExecutionCount, peer.Outputs)
		}
	}
}

func TestExecuteImages(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": []any{
		map[string]any{"id": "small", "content": pngCode(64, 48)},
		map[string]any{"id": "big", "content": pngCode(1200, 900)},
	}})
	_, res := a.call(ctx, "batch_execute_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"small", "big"}, "timeout": 120})
	if res.IsError {
		t.Fatalf("%v", res.Content)
	}
	var images []mcp.ImageContent
	for _, c := range res.Content {
		if im, ok := c.(mcp.ImageContent); ok {
			images = append(images, im)
		}
	}
	if len(images) != 2 {
		t.Fatalf("%d images attached, want 2", len(images))
	}
	text := res.Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, "image/png 64x48 attached as image 1") || !strings.Contains(text, "image/png 1200x900 attached as image 2, downscaled to 800x600") {
		t.Errorf("image descriptions: %s", text)
	}
	if strings.Contains(text, "iVBORw0KGgo") {
		t.Error("base64 image data in the text")
	}
	if len(images[1].Data) > 700_000 {
		t.Errorf("the downscaled image is %d base64 bytes", len(images[1].Data))
	}
	// include_images=false: one line each, no image content.
	out, res := a.call(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "big", "include_images": false})
	for _, c := range res.Content {
		if _, ok := c.(mcp.ImageContent); ok {
			t.Error("include_images=false attached an image")
		}
	}
	if s := fmt.Sprint(out); !strings.Contains(s, "[image/png 1200x900") {
		t.Errorf("no one-line description: %s", s)
	}
	// The full image stays in the notebook.
	nb := replica(t, ctx, mustRoom(t, ctx, a, name))
	for _, c := range nb.Cells {
		if c.ID == "big" {
			data := c.Outputs[0]["data"].(map[string]any)
			if s, _ := data["image/png"].(string); len(s) < 1000 {
				t.Errorf("the notebook's image was altered: %d bytes", len(s))
			}
		}
	}
}

func mustRoom(t *testing.T, ctx context.Context, a *agent, name string) *bridge.Room {
	t.Helper()
	r, err := a.sc.manager.Open(ctx, name, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A long loop: wait=false gives a job id at once; get_execution polls; the wait is capped by
// timeout while the run goes on; cancel interrupts it and leaves the cell idle with a
// KeyboardInterrupt.
func TestExecuteLongRunAndCancel(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": []any{
		map[string]any{"id": "loop", "content": "import time\nfor i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(1)"},
		map[string]any{"id": "after", "content": "'after'"},
	}})
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := a.ok(ctx, "batch_execute_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"loop", "after"}, "wait": false})
	if time.Since(start) > 2*time.Second || out["job_id"] == nil {
		t.Fatalf("wait=false took %v: %v", time.Since(start), out)
	}
	job := out["job_id"].(string)
	// The human sees [*] and the ticks arriving.
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'running' && nb.cells[0].outputs.map(o => o.text || '').join('').includes('tick 1')`, 10000); err != nil {
		t.Fatal(err)
	}
	out = a.ok(ctx, "get_execution", map[string]any{"job_id": job, "timeout": 1})
	if out["status"] != "running" || !strings.Contains(fmt.Sprint(out["note"]), "still running") {
		t.Errorf("a capped wait: %v", out)
	}
	out = a.ok(ctx, "cancel_execution", map[string]any{"job_id": job})
	runs := cellResults(out)
	if out["status"] != "cancelled" || runs[0]["status"] != "cancelled" || runs[1]["status"] != "cancelled" || !strings.Contains(fmt.Sprint(runs[0]["outputs"]), "KeyboardInterrupt") {
		t.Errorf("after cancel: %v", out)
	}
	if time.Since(start) > 8*time.Second {
		t.Errorf("cancel took until %v: the loop ran to its end", time.Since(start))
	}
	if _, err := p.WaitFor(ctx, `nb.cells[0].execution_state === 'idle' && nb.cells[0].execution_count !== null && nb.cells[1].execution_count === null`, 10000); err != nil {
		t.Fatal(err)
	}
	if _, res := a.call(ctx, "get_execution", map[string]any{"job_id": "job-nope"}); !res.IsError {
		t.Error("an unknown job id was accepted")
	}
}

// The kernel is killed between two calls: the next call gets a working kernel and a note, not a
// hang.
func TestExecuteAfterKernelKilled(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, shared)
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": []any{
		map[string]any{"id": "set", "content": "x = 41\nimport os; os.getpid()"},
		map[string]any{"id": "use", "content": "x + 1"},
	}})
	out := a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "set"})
	pidText := cellResults(out)[0]["outputs"].([]any)[0].(map[string]any)["data"].(map[string]any)["text/plain"].(string)
	var pid int
	fmt.Sscan(pidText, &pid)
	if pid <= 1 {
		t.Fatalf("kernel pid %q", pidText)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out = a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "use", "timeout": 60})
	run := cellResults(out)[0]
	notes := fmt.Sprint(out["note"])
	if run["status"] == "aborted" {
		// Sent before the server noticed the death: it did not reach the new kernel, and a cell
		// is never sent twice (nobody can tell whether the old process began it). Run it again.
		if !strings.Contains(fmt.Sprint(run["note"]), "not sent again") {
			t.Errorf("aborted without saying why: %v", out)
		}
		out = a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "use", "timeout": 60})
		run = cellResults(out)[0]
		notes += fmt.Sprint(out["note"])
	}
	if run["status"] != "error" || !strings.Contains(fmt.Sprint(run["outputs"]), "NameError") {
		t.Errorf("after the kernel was killed, x should be gone: %v (full %v)", run, out)
	}
	if !strings.Contains(strings.ToLower(notes), "kernel") {
		t.Errorf("no note that the kernel was replaced: %v", out)
	}
	if time.Since(start) > 45*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

// Two agents run cells in different notebooks at the same time.
func TestExecuteTwoNotebooksAtOnce(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	a := newAgent(t, shared)
	var names []string
	for i := 0; i < 2; i++ {
		name := uniqueName(t, ".ipynb")
		if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": []any{
			map[string]any{"id": "sleep", "content": fmt.Sprintf("import time, os\nt0 = time.time()\ntime.sleep(2)\n('nb%d', os.getpid(), 'ran %%.3f %%.3f' %% (t0, time.time()))", i)},
		}})
	}
	start := time.Now()
	var wg sync.WaitGroup
	results := make([]map[string]any, 2)
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "sleep"})
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var pids []string
	for i, r := range results {
		run := cellResults(r)[0]
		text := fmt.Sprint(run["outputs"])
		if run["status"] != "ok" || !strings.Contains(text, fmt.Sprintf("'nb%d'", i)) {
			t.Errorf("notebook %d: %v", i, run)
		}
		pids = append(pids, text)
	}
	if pids[0] == pids[1] {
		t.Error("both notebooks ran in the same kernel")
	}
	// In parallel means the two sleeps overlapped in the kernels' own clocks; the wall time of
	// the calls also counts starting two kernels, which a loaded machine stretches.
	var spans [2][2]float64
	for i, text := range pids {
		if _, err := fmt.Sscanf(text[strings.Index(text, "ran ")+len("ran "):], "%f %f", &spans[i][0], &spans[i][1]); err != nil {
			t.Fatalf("notebook %d: no run times in %q: %v", i, text, err)
		}
	}
	if !(spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1]) {
		t.Errorf("the two 2-second cells did not overlap (kernel clocks %v; calls took %v): not in parallel", spans, elapsed)
	}
}

// Scratch code runs in the notebook's kernel (sharing its variables) without touching the
// notebook or moving its execution counter; interrupt and restart work on the same kernel. On
// jupyter-server-documents it goes through a kernel websocket of the sidecar's own (nobody else
// holds one here; TestScratchCodeSparesTheHumansKernelConnection is the case where someone does).
func TestExecuteCodeAndKernelControl(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	a := newScratchAgent(t, shared)
	a.ok(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "start_position": 0, "exec": false, "cells": []any{
		map[string]any{"id": "def", "content": "secret = 'shared state'"},
		map[string]any{"id": "probe", "content": "'secret' in globals()"},
	}})
	first := cellResults(a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "def"}))[0]
	before := replica(t, ctx, mustRoom(t, ctx, a, name))
	scratch := func(code string) (map[string]any, *mcp.CallToolResult) {
		return a.call(ctx, "execute_code", map[string]any{"path": name, "code": code})
	}
	out, _ := scratch("secret.upper()")
	if !strings.Contains(fmt.Sprint(out["result"]), "SHARED STATE") {
		t.Errorf("scratch code: %v", out)
	}
	if out, _ := scratch("1/0"); !strings.Contains(fmt.Sprint(out["result"]), "ZeroDivisionError") || !strings.Contains(fmt.Sprint(out["result"]), `status:error`) {
		t.Errorf("failing scratch code: %v", out)
	}
	after := replica(t, ctx, mustRoom(t, ctx, a, name))
	if !jsonEq(before.JSON(), after.JSON()) {
		t.Error("scratch code changed the notebook")
	}
	// The counter did not move: the next cell gets the count after the last cell's.
	next := cellResults(a.ok(ctx, "execute_notebook_cell", map[string]any{"path": name, "cell_id": "probe"}))[0]
	if c1, ok1 := first["execution_count"].(float64); !ok1 || next["execution_count"] != c1+1 {
		t.Errorf("execution counts %v then %v around the scratch code: the counter moved", first["execution_count"], next["execution_count"])
	}
	a.ok(ctx, "interrupt_kernel", map[string]any{"path": name})
	a.ok(ctx, "restart_kernel", map[string]any{"path": name})
	out, _ = scratch("'secret' in globals()")
	if !strings.Contains(fmt.Sprint(out["result"]), "False") {
		t.Errorf("after restart the variable survived: %v", out)
	}
	if _, res := a.call(ctx, "interrupt_kernel", map[string]any{"path": "no-kernel.ipynb"}); !res.IsError {
		t.Error("interrupting a notebook without a kernel succeeded")
	}
}
