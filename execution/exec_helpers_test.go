package execution_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Helpers of the executor tests: a manager on the fake collaboration server, an executor on
// the fake kernels, notebook fixtures and waits.

const (
	execUser   = "agent"
	runsKey    = "jupyter_collab_mcp_runs" // the executor's run marker key in the room state
	execPath   = "run.ipynb"
	otherPath  = "other.ipynb"
	heartbeat  = 20 * time.Millisecond
	gateNever  = "never" // a gate the tests never open
	execWaitTO = testutil.WaitLimit
)

// execEnv is an executor running on the fake kernels, over a manager on the fake server.
type execEnv struct {
	t   *testing.T
	srv *bridgetest.Server
	ks  *bridgetest.Kernels
	m   *bridge.Manager
	x   *execution.ClientExecutor
	// stopRun ends Executor.Run and waits for it (idempotent).
	stopRun func()
}

// newExecEnv starts an executor (with Run going) for a fake holding files; mod adjusts its
// options.
func newExecEnv(t *testing.T, files []bridgetest.File, mod func(*execution.ClientOptions)) *execEnv {
	t.Helper()
	return newExecEnvWith(t, files, mod, nil)
}

// newExecEnvWith is newExecEnv with the manager's options adjusted too.
func newExecEnvWith(t *testing.T, files []bridgetest.File, mod func(*execution.ClientOptions), modManager func(*bridge.ManagerOptions)) *execEnv {
	t.Helper()
	srv := bridgetest.New(files...)
	m := newManager(t, srv, modManager)
	ks := bridgetest.NewKernels()
	opts := execution.ClientOptions{Manager: m, Kernels: ks, Logger: bridgetest.FastRoomOptions().Logger, Username: execUser, Heartbeat: heartbeat}
	if mod != nil {
		mod(&opts)
	}
	x, err := execution.NewClientExecutor(opts)
	if err != nil {
		t.Fatalf("NewClientExecutor: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- x.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("Executor.Run = %v", err)
			}
		case <-time.After(testutil.WaitLimit):
			t.Errorf("Executor.Run did not return within %v", testutil.WaitLimit)
		}
	}
	t.Cleanup(stop)
	return &execEnv{t: t, srv: srv, ks: ks, m: m, x: x, stopRun: stop}
}

// execFiles is a file table holding notebooks made of cells.
func execFiles(nbs map[string][]ydoc.Cell) []bridgetest.File {
	var out []bridgetest.File
	for p, cells := range nbs {
		out = append(out, bridgetest.File{Path: p, Type: "notebook", Notebook: ydoc.Notebook{
			NBFormat: 4, NBFormatMinor: 5,
			Metadata: map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3"}},
			Cells:    cells,
		}})
	}
	return out
}

// oneNotebook is execFiles with execPath only.
func oneNotebook(cells ...ydoc.Cell) []bridgetest.File {
	return execFiles(map[string][]ydoc.Cell{execPath: cells})
}

func codeCell(id, src string) ydoc.Cell {
	return ydoc.Cell{ID: id, Type: ydoc.CellCode, Source: src, Outputs: []map[string]any{}}
}

// staleCell is a code cell with an old count and output, as a notebook run earlier has.
func staleCell(id, src string) ydoc.Cell {
	n := 7
	c := codeCell(id, src)
	c.ExecutionCount = &n
	c.Outputs = []map[string]any{{"output_type": "stream", "name": "stdout", "text": "stale\n"}}
	return c
}

func textCell(id, typ, src string) ydoc.Cell { return ydoc.Cell{ID: id, Type: typ, Source: src} }

// start starts a job and fails the test on an error.
func (e *execEnv) start(path string, ids []string, opts execution.RunOptions) *execution.Job {
	e.t.Helper()
	j, err := e.x.Start(testutil.Context(e.t), path, ids, opts)
	if err != nil {
		e.t.Fatalf("Start %s %v: %v", path, ids, err)
	}
	return j
}

// run starts a job and waits for it.
func (e *execEnv) run(path string, ids []string, opts execution.RunOptions) execution.JobView {
	e.t.Helper()
	return awaitJob(e.t, e.start(path, ids, opts))
}

// awaitJob waits for a job to finish and returns its final view.
func awaitJob(t *testing.T, j *execution.Job) execution.JobView {
	t.Helper()
	select {
	case <-j.Done():
		return j.View()
	case <-time.After(execWaitTO):
		t.Fatalf("job %s did not finish within %v: %s", j.ID, execWaitTO, describeJob(j.View()))
	}
	return execution.JobView{}
}

// notDone fails if the job already finished.
func notDone(t *testing.T, j *execution.Job, why string) {
	t.Helper()
	select {
	case <-j.Done():
		t.Fatalf("job finished %s: %s", why, describeJob(j.View()))
	default:
	}
}

func describeJob(v execution.JobView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status %s note %q kernel %s;", v.Status, v.Note, v.KernelID)
	for _, c := range v.Cells {
		cnt := "null"
		if c.ExecutionCount != nil {
			cnt = fmt.Sprint(*c.ExecutionCount)
		}
		fmt.Fprintf(&b, " [%s #%d %s count %s note %q outputs %s]", c.CellID, c.Index, c.Status, cnt, c.Note, compactJSON(c.Outputs))
	}
	return b.String()
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 400 {
		b = append(b[:400], "…"...)
	}
	return string(b)
}

// cellRun returns a job view's cell by id.
func cellRun(t *testing.T, v execution.JobView, id string) execution.CellRun {
	t.Helper()
	for _, c := range v.Cells {
		if c.CellID == id {
			return c
		}
	}
	t.Fatalf("job has no cell %q: %s", id, describeJob(v))
	return execution.CellRun{}
}

// wantStatuses checks the status of every cell of a job, in order.
func wantStatuses(t *testing.T, v execution.JobView, want ...execution.CellStatus) {
	t.Helper()
	var got []execution.CellStatus
	for _, c := range v.Cells {
		got = append(got, c.Status)
	}
	if !slices.Equal(got, want) {
		t.Errorf("cell statuses %v, want %v: %s", got, want, describeJob(v))
	}
}

// serverCell returns the fake server's copy of a cell.
func serverCell(t *testing.T, srv *bridgetest.Server, path, id string) ydoc.Cell {
	t.Helper()
	c, ok := findServerCell(srv, path, id)
	if !ok {
		t.Fatalf("server notebook %s has no cell %q (cells %v)", path, id, srv.CellIDs(path))
	}
	return c
}

func findServerCell(srv *bridgetest.Server, path, id string) (ydoc.Cell, bool) {
	nb, err := srv.Notebook(path)
	if err != nil {
		return ydoc.Cell{}, false
	}
	for _, c := range nb.Cells {
		if c.ID == id {
			return c, true
		}
	}
	return ydoc.Cell{}, false
}

// awaitCell waits until the server's copy of a cell satisfies cond.
func awaitCell(t *testing.T, srv *bridgetest.Server, path, id, what string, cond func(ydoc.Cell) bool) ydoc.Cell {
	t.Helper()
	var last ydoc.Cell
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	err := srv.Await(ctx, func() bool {
		c, ok := findServerCell(srv, path, id)
		last = c
		return ok && cond(c)
	})
	if err != nil {
		t.Fatalf("waiting for cell %s to be %s: %v; cell is %s", id, what, err, describeCell(last))
	}
	return last
}

func describeCell(c ydoc.Cell) string {
	cnt := "null"
	if c.ExecutionCount != nil {
		cnt = fmt.Sprint(*c.ExecutionCount)
	}
	return fmt.Sprintf("{%s %s state %q count %s outputs %s}", c.ID, c.Type, c.ExecutionState, cnt, compactJSON(c.Outputs))
}

// runMarkers returns the run markers in the server's room state (cell id → marker).
func runMarkers(srv *bridgetest.Server, path string) map[string]any {
	m, _ := srv.State(path)[runsKey].(map[string]any)
	return m
}

// awaitKernels waits until cond holds on the fake kernels.
func awaitKernels(t *testing.T, ks *bridgetest.Kernels, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	if err := ks.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// awaitGate waits until n requests wait at a gate.
func awaitGate(t *testing.T, ks *bridgetest.Kernels, gate string, n int) {
	t.Helper()
	awaitKernels(t, ks, fmt.Sprintf("%d request(s) at gate %q", n, gate), func() bool { return ks.AtGate(gate) == n })
}

// kernelOf returns the kernel of a notebook's session, failing when there is none.
func kernelOf(t *testing.T, ks *bridgetest.Kernels, path string) string {
	t.Helper()
	id := ks.KernelFor(path)
	if id == "" {
		t.Fatalf("no kernel session for %s", path)
	}
	return id
}

// streamText returns the text of the outputs of a cell that are streams, concatenated.
func streamText(outs []map[string]any) string {
	var b strings.Builder
	for _, o := range outs {
		if o["output_type"] == "stream" {
			s, _ := o["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// outputTypes lists the output_type of each output.
func outputTypes(outs []map[string]any) []string {
	var out []string
	for _, o := range outs {
		s, _ := o["output_type"].(string)
		out = append(out, s)
	}
	return out
}

func countIs(c *int, n int) bool { return c != nil && *c == n }

// numIs compares a JSON-ish number (int, int64 or float64) with n.
func numIs(v any, n int) bool {
	switch x := v.(type) {
	case int:
		return x == n
	case int64:
		return x == int64(n)
	case float64:
		return x == float64(n)
	}
	return false
}

func mustContainStr(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not mention %q: %q", what, sub, s)
		}
	}
}

// awaitReplica waits until the sidecar's replica of a notebook satisfies cond.
func awaitReplica(t *testing.T, room *bridge.Room, what string, cond func(*ydoc.Doc) bool) {
	t.Helper()
	testutil.Eventually(t, what, func() bool {
		ok := false
		_ = room.View(testutil.Context(t), func(d *ydoc.Doc) error {
			ok = cond(d)
			return nil
		})
		return ok
	})
}
