package tools_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	_ "image/png"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Tests of the execution tools (tools/execute.go, images.go, exec on insert/update) with an
// executor on bridgetest's fake kernels. The code the fake kernels run is a tiny script (see
// bridgetest/kernels.go): print:<text>, result:<text>, error:<name>:<value>, block:<gate>,
// image:<w>x<h>, ...

const xPath = "run.ipynb"

// xenv is env with an executor on fake kernels.
type xenv struct {
	*env
	ks *bridgetest.Kernels
	x  *execution.ClientEngine
}

// newXEnv starts the tools with an executor (Run going, stopped when the test ends) over a
// fake holding files.
func newXEnv(t *testing.T, files []bridgetest.File, opts ...envOpt) *xenv {
	t.Helper()
	return newXEnvCaps(t, files, mcp.ClientCapabilities{}, opts...)
}

// newXEnvCaps is newXEnv with a client that announces caps at initialize.
func newXEnvCaps(t *testing.T, files []bridgetest.File, caps mcp.ClientCapabilities, opts ...envOpt) *xenv {
	t.Helper()
	ks := bridgetest.NewKernels()
	var x *execution.ClientEngine
	withExecutor := func(o *tools.Options) {
		ex, err := execution.NewClientEngine(execution.ClientOptions{
			Manager: o.Manager, Kernels: ks, Logger: zerolog.Nop(), Username: "agent", Heartbeat: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("NewClientEngine: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = ex.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(waitLimit):
				t.Error("Executor.Run did not return")
			}
		})
		o.Executor, x = ex, ex
	}
	e := newEnvCaps(t, files, caps, append([]envOpt{withExecutor}, opts...)...)
	return &xenv{env: e, ks: ks, x: x}
}

// xNotebook is a file table holding xPath with cells.
func xNotebook(cells ...ydoc.Cell) []bridgetest.File {
	return []bridgetest.File{nbFile(xPath, notebook(cells...))}
}

// kernel returns the kernel of xPath's session.
func (e *xenv) kernel() string {
	e.t.Helper()
	id := e.ks.KernelFor(xPath)
	if id == "" {
		e.t.Fatalf("no kernel for %s", xPath)
	}
	return id
}

// awaitGate waits until a request waits at a gate of the fake kernels.
func (e *xenv) awaitGate(gate string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.ks.Await(ctx, func() bool { return e.ks.AtGate(gate) > 0 }); err != nil {
		e.t.Fatalf("no request reached gate %q: %v", gate, err)
	}
}

// runCells returns the cells of an execution result.
func runCells(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range asList(t, body["cells"]) {
		out = append(out, asMap(t, c))
	}
	return out
}

// outputsOf returns the rendered outputs of a result cell (nil when it has none).
func outputsOf(t *testing.T, cell map[string]any) []map[string]any {
	t.Helper()
	if cell["outputs"] == nil {
		return nil
	}
	var out []map[string]any
	for _, o := range asList(t, cell["outputs"]) {
		out = append(out, asMap(t, o))
	}
	return out
}

// images returns the image content items of a result.
func images(r *result) []map[string]any {
	var out []map[string]any
	for _, c := range r.Content {
		if c["type"] == "image" {
			out = append(out, c)
		}
	}
	return out
}

// imageSize decodes a base64 image.
func imageSize(t *testing.T, b64 string) image.Point {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("image data is not base64: %v", err)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("image data does not decode: %v", err)
	}
	return image.Pt(cfg.Width, cfg.Height)
}

func TestExecBatchResultShape(t *testing.T) {
	e := newXEnv(t, xNotebook(
		code("c1", "print:hello\nresult:42"),
		markdown("m1", "# notes"),
		code("c3", "error:ValueError:bad value"),
		code("c4", "print:never"),
	))
	body := e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1", "m1", "c3", "c4"}})
	if id := str(body["job_id"]); !strings.HasPrefix(id, "job-") {
		t.Errorf("job_id = %v", body["job_id"])
	}
	if body["path"] != xPath || body["status"] != "failed" {
		t.Errorf("path %v status %v, want %s failed", body["path"], body["status"], xPath)
	}
	if ms, ok := body["elapsed_ms"].(float64); !ok || ms < 0 {
		t.Errorf("elapsed_ms = %v", body["elapsed_ms"])
	}
	if _, ok := body["note"]; ok {
		t.Errorf("unexpected note %v", body["note"])
	}
	cells := runCells(t, body)
	if len(cells) != 4 {
		t.Fatalf("%d cells: %s", len(cells), compact(body))
	}
	c1 := cells[0]
	if c1["cell_id"] != "c1" || num(t, c1["index"]) != 0 || c1["status"] != "ok" || num(t, c1["execution_count"]) != 1 {
		t.Errorf("c1 = %s", compact(c1))
	}
	outs := outputsOf(t, c1)
	if len(outs) != 2 || outs[0]["output_type"] != "stream" || outs[0]["text"] != "hello\n" || outs[0]["name"] != "stdout" {
		t.Fatalf("c1 outputs %s", compact(outs))
	}
	if outs[1]["output_type"] != "execute_result" || num(t, outs[1]["execution_count"]) != 1 || asMap(t, outs[1]["data"])["text/plain"] != "42" {
		t.Errorf("c1 result %s", compact(outs[1]))
	}
	if m1 := cells[1]; m1["status"] != "skipped" || !strings.Contains(str(m1["note"]), "markdown") || m1["outputs"] != nil || m1["execution_count"] != nil {
		t.Errorf("m1 = %s", compact(m1))
	}
	c3 := cells[2]
	if c3["status"] != "error" || num(t, c3["execution_count"]) != 2 {
		t.Errorf("c3 = %s", compact(c3))
	}
	if outs := outputsOf(t, c3); len(outs) != 1 || outs[0]["ename"] != "ValueError" || outs[0]["evalue"] != "bad value" {
		t.Errorf("c3 outputs %s", compact(outs))
	} else if tb := str(outs[0]["traceback"]); strings.Contains(tb, "\x1b[") || !strings.Contains(tb, "ValueError: bad value") {
		t.Errorf("traceback not rendered as plain text: %q", tb)
	}
	if c4 := cells[3]; c4["status"] != "skipped" || !strings.Contains(str(c4["note"]), "stop_on_error") {
		t.Errorf("c4 = %s", compact(c4))
	}
	// The room has what the result says.
	if c := e.serverCell(xPath, "c1"); c.ExecutionState != "idle" || c.ExecutionCount == nil || *c.ExecutionCount != 1 || len(c.Outputs) != 2 {
		t.Errorf("room c1 = %+v", c)
	}

	// stop_on_error=false runs c4; a range; execute_notebook_cell.
	body = e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c3", "c4"}, "stop_on_error": false})
	if cells := runCells(t, body); cells[1]["status"] != "ok" || body["status"] != "failed" {
		t.Errorf("stop_on_error=false: %s", compact(body))
	}
	body = e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "start_index": 0, "end_index": 1})
	if cells := runCells(t, body); len(cells) != 2 || cells[0]["cell_id"] != "c1" || cells[1]["cell_id"] != "m1" || body["status"] != "completed" {
		t.Errorf("range run: %s", compact(body))
	}
	body = e.ok("execute_notebook_cell", map[string]any{"path": xPath, "cell_id": "c1"})
	if cells := runCells(t, body); len(cells) != 1 || cells[0]["cell_id"] != "c1" || cells[0]["status"] != "ok" {
		t.Errorf("execute_notebook_cell: %s", compact(body))
	}
	// Unknown cells are refused before anything runs.
	n := e.ks.Received(e.kernel())
	r := e.fail("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"nope"}})
	findDetail(t, r, "cell_ids", 0)
	if e.ks.Received(e.kernel()) != n {
		t.Error("a refused call ran code")
	}
}

func TestExecNoWaitThenPoll(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:a\nblock:g\nprint:b")))
	body := e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}, "wait": false})
	id := str(body["job_id"])
	if id == "" || (body["status"] != "queued" && body["status"] != "running") {
		t.Fatalf("wait=false: %s", compact(body))
	}
	mustContain(t, "wait=false note", str(body["note"]), "get_execution")
	e.awaitGate("g")
	body = e.ok("get_execution", map[string]any{"job_id": id})
	if body["status"] != "running" || runCells(t, body)[0]["status"] != "running" {
		t.Errorf("get_execution while running: %s", compact(body))
	}
	mustContain(t, "running note", str(body["note"]), "still running")
	e.ks.Release("g")
	body = e.ok("get_execution", map[string]any{"job_id": id, "timeout": 5})
	if body["status"] != "completed" || body["job_id"] != id {
		t.Fatalf("get_execution after the run: %s", compact(body))
	}
	if outs := outputsOf(t, runCells(t, body)[0]); len(outs) != 1 || outs[0]["text"] != "a\nb\n" {
		t.Errorf("outputs %s", compact(outs))
	}
}

func TestExecTimeoutCapsTheWait(t *testing.T) {
	t.Parallel()
	e := newXEnv(t, xNotebook(code("c1", "print:so far\nblock:g\nprint:done")))
	start := time.Now()
	body := e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}, "timeout": 1})
	el := time.Since(start)
	if el < 900*time.Millisecond || el > 5*time.Second {
		t.Errorf("timeout 1 returned after %v", el)
	}
	if body["status"] != "running" || str(body["job_id"]) == "" {
		t.Fatalf("after the timeout: %s", compact(body))
	}
	mustContain(t, "timeout note", str(body["note"]), "still running after 1s", "get_execution")
	c := runCells(t, body)[0]
	if c["status"] != "running" || outputsOf(t, c)[0]["text"] != "so far\n" {
		t.Errorf("cell after the timeout: %s", compact(c))
	}
	// The run goes on; get_execution returns it finished.
	e.ks.Release("g")
	body = e.ok("get_execution", map[string]any{"job_id": body["job_id"], "timeout": 5})
	if body["status"] != "completed" {
		t.Errorf("get_execution: %s", compact(body))
	}
	if outs := outputsOf(t, runCells(t, body)[0]); outs[0]["text"] != "so far\ndone\n" {
		t.Errorf("outputs %s", compact(outs))
	}

	// execute_code's wait is capped the same way.
	start = time.Now()
	body = e.ok("execute_code", map[string]any{"path": xPath, "code": "print:partial\nblock:g2", "timeout": 1})
	if el := time.Since(start); el < 900*time.Millisecond || el > 5*time.Second {
		t.Errorf("execute_code timeout 1 returned after %v", el)
	}
	res := asMap(t, body["result"])
	if res["status"] != "running" || !strings.Contains(str(res["note"]), "still running") {
		t.Errorf("execute_code cut short: %s", compact(body))
	}
	e.ks.Release("g2")
}

func TestExecGetExecutionOfAFinishedJob(t *testing.T) {
	// Regression: get_execution (timeout 0) on a finished job says "still running after 0s; it goes on" about half the time: waitJob's select sees both job.Done() and the 0 s deadline ready and picks at random (tools/execute.go waitJob)
	e := newXEnv(t, xNotebook(code("c1", "print:a")))
	id := e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}})["job_id"]
	for range 20 {
		body := e.ok("get_execution", map[string]any{"job_id": id})
		if body["status"] != "completed" || strings.Contains(str(body["note"]), "still running") {
			t.Fatalf("get_execution of a finished job: %s", compact(body))
		}
	}
}

func TestExecCancelExecution(t *testing.T) {
	// The running cell holds on through the interrupt (code deaf to signals: hold), so the
	// cancellation's outcome does not depend on when the interrupt lands. Interrupted cells
	// ending cancelled are covered in bridge's TestExecCancel (the path has a data race, see
	// TestExecCancelViewRace there).
	e := newXEnv(t, xNotebook(code("c1", "print:a\nhold:h\nprint:b"), code("c2", "print:c"), code("c3", "print:d"), code("q1", "print:q")))
	body := e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1", "c2", "c3"}, "wait": false})
	id := body["job_id"]
	e.awaitGate("h")
	k := e.kernel()
	// A job queued behind it: cancelled, nothing to interrupt.
	queued, err := e.x.Start(ctxT(t), xPath, []string{"q1"}, execution.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.x.Cancel(ctxT(t), queued.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.ks.Interrupts(k); n != 0 {
		t.Errorf("cancelling a queued job interrupted the kernel %d times", n)
	}

	res := make(chan *result, 1)
	go func() { res <- e.callNoFatal("cancel_execution", map[string]any{"job_id": id}) }()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.ks.Await(ctx, func() bool { return e.ks.Interrupts(k) == 1 }); err != nil {
		t.Fatalf("cancel_execution sent no interrupt: %v", err)
	}
	e.ks.Release("h") // the cell finishes despite the interrupt
	var r *result
	select {
	case r = <-res:
	case <-time.After(waitLimit):
		t.Fatal("cancel_execution did not return")
	}
	if r == nil || r.IsError {
		t.Fatalf("cancel_execution failed: %v", r)
	}
	body = asMap(t, r.Raw["structuredContent"])
	if body["status"] != "cancelled" || body["job_id"] != id {
		t.Fatalf("cancel_execution: %s", compact(body))
	}
	cells := runCells(t, body)
	if cells[0]["status"] != "ok" || cells[1]["status"] != "cancelled" || cells[2]["status"] != "cancelled" || !strings.Contains(str(cells[1]["note"]), "cancelled before it ran") {
		t.Errorf("cells: %s", compact(cells))
	}
	if c := e.serverCell(xPath, "c1"); c.ExecutionState != "idle" {
		t.Errorf("room cell after cancel: %+v", c)
	}
	for _, id := range []string{"c2", "c3"} {
		if c := e.serverCell(xPath, id); c.ExecutionCount != nil || len(c.Outputs) != 0 {
			t.Errorf("cancelled cell %s was run: %+v", id, c)
		}
	}
	qb := e.ok("get_execution", map[string]any{"job_id": queued.ID, "timeout": 5})
	if qb["status"] != "cancelled" || runCells(t, qb)[0]["status"] != "cancelled" {
		t.Errorf("queued job after cancel: %s", compact(qb))
	}
	// Cancelling a finished job answers with it as it is, and interrupts nothing.
	if body := e.ok("cancel_execution", map[string]any{"job_id": id}); body["status"] != "cancelled" {
		t.Errorf("second cancel: %s", compact(body))
	}
	if n := e.ks.Interrupts(k); n != 1 {
		t.Errorf("kernel interrupted %d times, want 1", n)
	}
	if n := e.ks.Received(k); n != 1 {
		t.Errorf("kernel received %d requests, want 1", n)
	}
}

func TestExecUnknownJob(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:a")))
	for _, tool := range []string{"get_execution", "cancel_execution"} {
		r := e.fail(tool, map[string]any{"job_id": "job-0123456789abcdef"})
		d := findDetail(t, r, "job_id")
		// The same answer as for a job of a document the caller may not see (the door's
		// refusal): it names no job.
		mustContain(t, tool+" detail", d.msg, "unknown execution job")
		if len(details(r)) != 1 {
			t.Errorf("%s: details %v", tool, details(r))
		}
	}
	findDetail(t, e.fail("get_execution", map[string]any{}), "job_id") // required
}

func TestExecExecuteCode(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:a")))
	e.nbVersion(xPath) // open the room
	before := e.snapshot(xPath)
	body := e.ok("execute_code", map[string]any{"path": xPath, "code": "print:hi\nresult:42"})
	if body["path"] != xPath {
		t.Errorf("path %v", body["path"])
	}
	res := asMap(t, body["result"])
	if res["status"] != "ok" || res["cell_id"] != nil || res["index"] != nil || res["execution_count"] != nil {
		t.Errorf("result %s", compact(res))
	}
	outs := outputsOf(t, res)
	if len(outs) != 2 || outs[0]["text"] != "hi\n" || asMap(t, outs[1]["data"])["text/plain"] != "42" {
		t.Errorf("outputs %s", compact(outs))
	}
	if _, ok := body["note"]; ok {
		t.Errorf("note %v on the first run", body["note"])
	}
	body = e.ok("execute_code", map[string]any{"path": xPath, "code": "error:NameError:name 'df' is not defined"})
	if res := asMap(t, body["result"]); res["status"] != "error" || outputsOf(t, res)[0]["ename"] != "NameError" {
		t.Errorf("raising code: %s", compact(body))
	}
	if after := e.snapshot(xPath); after != before {
		t.Errorf("execute_code changed the notebook:\nbefore %s\nafter  %s", before, after)
	}
	for _, r := range e.ks.Requests(e.kernel()) {
		if r.StoreHistory {
			t.Errorf("scratch code sent with store_history: %+v", r)
		}
	}
	findDetail(t, e.fail("execute_code", map[string]any{"path": xPath}), "code")
}

func TestExecInterruptAndRestartKernel(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:a")))
	for _, tool := range []string{"interrupt_kernel", "restart_kernel"} {
		r := e.fail(tool, map[string]any{"path": xPath})
		mustContain(t, tool+" without a kernel", errorText(r), "no running kernel")
	}
	findDetail(t, e.fail("interrupt_kernel", map[string]any{"path": "../x.ipynb"}), "path")
	if n := len(e.ks.StartCalls()); n != 0 {
		t.Errorf("%d kernels started by interrupt/restart", n)
	}
	e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}})
	k := e.kernel()
	body := e.ok("interrupt_kernel", map[string]any{"path": xPath})
	if body["kernel_id"] != k || body["kernel_name"] != "python3" || body["path"] != xPath {
		t.Errorf("interrupt_kernel: %s", compact(body))
	}
	mustContain(t, "interrupt note", str(body["note"]), "interrupt")
	body = e.ok("restart_kernel", map[string]any{"path": xPath})
	if body["kernel_id"] != k {
		t.Errorf("restart_kernel: %s", compact(body))
	}
	mustContain(t, "restart note", str(body["note"]), "restarted")
	if e.ks.Interrupts(k) != 1 || e.ks.Restarts(k) != 1 {
		t.Errorf("kernel interrupted %d, restarted %d times", e.ks.Interrupts(k), e.ks.Restarts(k))
	}
	// The next run says the kernel's state is gone.
	body = e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}})
	mustContain(t, "run after restart note", str(body["note"]), "restarted")
	if num(t, runCells(t, body)[0]["execution_count"]) != 1 {
		t.Errorf("count after restart: %s", compact(body))
	}
}

func TestExecImages(t *testing.T) {
	e := newXEnv(t, xNotebook(code("img", "image:40x30\nimage:20x10"), code("big", "image:64x64")))
	run := func(args map[string]any) *result {
		t.Helper()
		r := e.call("batch_execute_notebook_cells", args)
		if r.IsError || r.Body == nil {
			t.Fatalf("run failed: %s", r)
		}
		return r
	}
	r := run(map[string]any{"path": xPath, "cell_ids": []any{"img"}})
	imgs := images(r)
	if len(imgs) != 2 || r.Content[0]["type"] != "text" {
		t.Fatalf("content %s, want the text then 2 images", compact(r.Content))
	}
	for i, want := range []image.Point{image.Pt(40, 30), image.Pt(20, 10)} {
		if imgs[i]["mimeType"] != "image/png" {
			t.Errorf("image %d mime %v", i, imgs[i]["mimeType"])
		}
		if got := imageSize(t, str(imgs[i]["data"])); got != want {
			t.Errorf("image %d is %v, want %v", i, got, want)
		}
	}
	if str(imgs[0]["data"]) != bridgetest.PNG(40, 30) {
		t.Error("a small image was re-encoded")
	}
	outs := outputsOf(t, runCells(t, r.Body)[0])
	d0, d1 := asMap(t, outs[0]["data"]), asMap(t, outs[1]["data"])
	if d0["image/png"] != "[image/png 40x30 attached as image 1]" || d1["image/png"] != "[image/png 20x10 attached as image 2]" {
		t.Errorf("image placeholders %v / %v", d0["image/png"], d1["image/png"])
	}
	if d0["text/plain"] != "<Figure size 40x30 with 1 Axes>" {
		t.Errorf("text/plain %v", d0["text/plain"])
	}
	// The structured content is the text (no image bytes in it).
	if strings.Contains(r.Texts[0], str(imgs[0]["data"])) {
		t.Error("the image's base64 is in the text content")
	}

	// Downscaled above max_image_pixels.
	r = run(map[string]any{"path": xPath, "cell_ids": []any{"big"}, "max_image_pixels": 1024})
	imgs = images(r)
	if len(imgs) != 1 {
		t.Fatalf("content %s", compact(r.Content))
	}
	if got := imageSize(t, str(imgs[0]["data"])); got != image.Pt(32, 32) {
		t.Errorf("downscaled image is %v, want 32x32", got)
	}
	if p := str(asMap(t, outputsOf(t, runCells(t, r.Body)[0])[0]["data"])["image/png"]); !strings.Contains(p, "64x64") || !strings.Contains(p, "downscaled to 32x32") {
		t.Errorf("placeholder %q", p)
	}
	// The room keeps the original.
	if c := e.serverCell(xPath, "big"); asMap(t, c.Outputs[0]["data"])["image/png"] != bridgetest.PNG(64, 64) {
		t.Error("the room's image was changed")
	}

	// include_images=false: no image content, a one-line description.
	r = run(map[string]any{"path": xPath, "cell_ids": []any{"img"}, "include_images": false})
	if n := len(images(r)); n != 0 || len(r.Content) != 1 {
		t.Errorf("include_images=false: %d images, content %s", n, compact(r.Content))
	}
	p := str(asMap(t, outputsOf(t, runCells(t, r.Body)[0])[0]["data"])["image/png"])
	if !strings.HasPrefix(p, "[image/png 40x30") || !strings.Contains(p, "not shown") {
		t.Errorf("include_images=false placeholder %q", p)
	}

	// get_execution attaches images too.
	id := r.Body["job_id"]
	r = e.call("get_execution", map[string]any{"job_id": id})
	if r.IsError || len(images(r)) != 2 {
		t.Errorf("get_execution: %d images: %s", len(images(r)), r)
	}
	// execute_code too.
	r = e.call("execute_code", map[string]any{"path": xPath, "code": "image:8x8"})
	if r.IsError || len(images(r)) != 1 {
		t.Errorf("execute_code: %d images: %s", len(images(r)), r)
	}
}

func TestExecMaxOutputChars(t *testing.T) {
	long := strings.Repeat("x", 300)
	e := newXEnv(t, xNotebook(code("c1", "print:"+long)))
	body := e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}, "max_output_chars": 50})
	text := str(outputsOf(t, runCells(t, body)[0])[0]["text"])
	if !strings.HasPrefix(text, strings.Repeat("x", 50)+"\n… [251 more characters not shown]") || strings.Count(text, "x") != 50 {
		t.Errorf("capped text %q", text)
	}
	if c := e.serverCell(xPath, "c1"); c.Outputs[0]["text"] != long+"\n" {
		t.Errorf("the room's output was capped: %v", c.Outputs[0])
	}
	body = e.ok("get_execution", map[string]any{"job_id": body["job_id"], "max_output_chars": 10})
	if text := str(outputsOf(t, runCells(t, body)[0])[0]["text"]); strings.Count(text, "x") != 10 {
		t.Errorf("get_execution capped text %q", text)
	}
	body = e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c1"}})
	if text := str(outputsOf(t, runCells(t, body)[0])[0]["text"]); text != long+"\n" {
		t.Errorf("default cap cut %d characters", len(long)+1-len(text))
	}
	body = e.ok("execute_code", map[string]any{"path": xPath, "code": "print:" + long, "max_output_chars": 5})
	if text := str(outputsOf(t, asMap(t, body["result"]))[0]["text"]); strings.Count(text, "x") != 5 {
		t.Errorf("execute_code capped text %q", text)
	}
}

func TestExecOnInsertAndUpdate(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:one"), markdown("m1", "# t")))
	received := func() int {
		if k := e.ks.KernelFor(xPath); k != "" {
			return e.ks.Received(k)
		}
		return 0
	}
	// exec=false: the edit only.
	body := e.ok("batch_insert_notebook_cells", map[string]any{"path": xPath, "exec": false, "cells": []any{
		map[string]any{"id": "n0", "cell_type": "code", "content": "print:not run"},
	}})
	if _, ok := body["execution"]; ok || received() != 0 {
		t.Errorf("exec=false ran code: %s", compact(body))
	}
	// By default the inserted code cells run (not markdown, not empty code).
	body = e.ok("batch_insert_notebook_cells", map[string]any{"path": xPath, "cells": []any{
		map[string]any{"id": "n1", "cell_type": "code", "content": "print:inserted"},
		map[string]any{"id": "n2", "cell_type": "markdown", "content": "## md"},
		map[string]any{"id": "n3", "cell_type": "code", "content": ""},
		map[string]any{"id": "n4", "cell_type": "code", "content": "result:4"},
	}})
	ex := asMap(t, body["execution"])
	if ex["status"] != "completed" || str(ex["job_id"]) == "" {
		t.Fatalf("execution after insert: %s", compact(body))
	}
	cells := runCells(t, ex)
	if len(cells) != 2 || cells[0]["cell_id"] != "n1" || cells[1]["cell_id"] != "n4" {
		t.Errorf("ran %s, want n1 and n4", compact(cells))
	}
	if outs := outputsOf(t, cells[0]); len(outs) != 1 || outs[0]["text"] != "inserted\n" {
		t.Errorf("n1 outputs %s", compact(outs))
	}
	if c := e.serverCell(xPath, "n1"); c.ExecutionCount == nil || len(c.Outputs) != 1 || c.ExecutionState != "idle" {
		t.Errorf("room n1 %+v", c)
	}
	if n := received(); n != 2 {
		t.Errorf("kernel received %d requests, want 2", n)
	}
	if _, ok := body["inserted"]; !ok || body["version"] == nil {
		t.Errorf("the edit's own result is missing: %s", compact(body))
	}

	// A source update runs the cell; a metadata-only update does not; exec=false does not.
	body = e.ok("batch_update_notebook_cells", map[string]any{"path": xPath, "updates": []any{
		map[string]any{"cell_id": "c1", "content": "print:updated"},
	}})
	if ex := asMap(t, body["execution"]); ex["status"] != "completed" || outputsOf(t, runCells(t, ex)[0])[0]["text"] != "updated\n" {
		t.Errorf("execution after a source update: %s", compact(body))
	}
	n := received()
	body = e.ok("batch_update_notebook_cells", map[string]any{"path": xPath, "updates": []any{
		map[string]any{"cell_id": "c1", "metadata": map[string]any{"tags": []any{"x"}}},
	}})
	if _, ok := body["execution"]; ok || received() != n {
		t.Errorf("a metadata-only update ran code: %s", compact(body))
	}
	body = e.ok("batch_update_notebook_cells", map[string]any{"path": xPath, "exec": false, "updates": []any{
		map[string]any{"cell_id": "c1", "content": "print:edited only"},
	}})
	if _, ok := body["execution"]; ok || received() != n {
		t.Errorf("exec=false update ran code: %s", compact(body))
	}
	// Turning a markdown cell into code runs it; wait=false returns the job to poll.
	body = e.ok("batch_update_notebook_cells", map[string]any{"path": xPath, "wait": false, "updates": []any{
		map[string]any{"cell_id": "m1", "cell_type": "code", "content": "print:now code"},
	}})
	ex = asMap(t, body["execution"])
	if str(ex["job_id"]) == "" {
		t.Fatalf("wait=false execution: %s", compact(body))
	}
	got := e.ok("get_execution", map[string]any{"job_id": ex["job_id"], "timeout": 5})
	if got["status"] != "completed" || runCells(t, got)[0]["cell_id"] != "m1" {
		t.Errorf("run of the converted cell: %s", compact(got))
	}
	// Images of an exec'd edit are attached to the edit's result.
	r := e.call("batch_insert_notebook_cells", map[string]any{"path": xPath, "cells": []any{
		map[string]any{"id": "n5", "cell_type": "code", "content": "image:10x10"},
	}})
	if r.IsError || len(images(r)) != 1 {
		t.Errorf("insert with an image output: %d images: %s", len(images(r)), r)
	}
}

func TestExecProgressNotifications(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:step one\nsleep:300\nprint:step two\nsleep:300\nprint:step three"), code("c2", "print:b")))
	var mu sync.Mutex
	var got []map[string]any
	e.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		mu.Lock()
		got = append(got, n.Params.AdditionalFields)
		mu.Unlock()
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	// Without a progress token: none.
	e.ok("batch_execute_notebook_cells", map[string]any{"path": xPath, "cell_ids": []any{"c2"}})

	req := mcp.CallToolRequest{}
	req.Params.Name = "batch_execute_notebook_cells"
	req.Params.Arguments = map[string]any{"path": xPath, "cell_ids": []any{"c1", "c2"}}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := e.c.CallTool(ctxT(t), req)
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %v %v", res, err)
	}
	deadline := time.Now().Add(waitLimit)
	for count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // notifications are forwarded asynchronously
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications, want at least 2 (outputs come 300 ms apart, reports at most every 250 ms): %v", len(got), got)
	}
	sawOutput := false
	last := -1.0
	for _, p := range got {
		v, ok := p["progress"].(float64)
		if !ok || v <= last || v < 0 || v > 2 {
			t.Errorf("progress %v after %v: must be a number in [0, total] that increases with every notification", p["progress"], last)
		}
		last = v
		if p["progressToken"] != "tok-1" {
			t.Errorf("notification for token %v, want tok-1 only (the call without a token gets none)", p["progressToken"])
		}
		if total, ok := anyInt(p["total"]); !ok || total != 2 {
			t.Errorf("total %v, want 2", p["total"])
		}
		msg, _ := p["message"].(string)
		if msg == "" {
			t.Errorf("no message in %v", p)
		}
		if strings.Contains(msg, "running cell 1 of 2 (c1)") && strings.Contains(msg, ": step") {
			sawOutput = true
		}
	}
	if !sawOutput {
		t.Errorf("no progress message names the running cell and its last output line: %v", got)
	}
}

// anyInt reads a number that may or may not have been through JSON.
func anyInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		return int(n), n == float64(int(n))
	}
	return 0, false
}
