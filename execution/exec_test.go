package execution_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Tests of the executor on the fake collaboration server and the fake kernels
// of bridgetest: what lands in the room while and after cells run, job bookkeeping, and the
// ways a kernel goes wrong.

// localCellChanges collects the sidecar's own changes to one cell, one entry per transaction.
func localCellChanges(sub *bridge.Subscription, id string) [][]string {
	var out [][]string
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				return out
			}
			if e.Kind != bridge.EventChanged || !e.Change.Local {
				continue
			}
			for _, c := range e.Change.Cells {
				if c.ID == id {
					fields := slices.Clone(c.Fields)
					fields = append(fields, prefixed("state:", e.Change.State)...)
					out = append(out, fields)
				}
			}
		default:
			return out
		}
	}
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

func TestExecOneCellWritesLikeJupyterLab(t *testing.T) {
	e := newExecEnv(t, oneNotebook(staleCell("c1", "print:a\nblock:g1\nprint:b\nblock:g2\nresult:42")), nil)
	room, err := e.m.Open(testutil.Context(t), execPath, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	sub := room.Subscribe(1024)
	defer sub.Close()

	j := e.start(execPath, []string{"c1"}, execution.RunOptions{StopOnError: true})
	awaitGate(t, e.ks, "g1", 1)
	// The reset, then the first output: count null, running, our marker in the room state.
	c := awaitCell(t, e.srv, execPath, "c1", "showing the first output", func(c ydoc.Cell) bool {
		return streamText(c.Outputs) == "a\n"
	})
	if c.ExecutionCount != nil || c.ExecutionState != "running" || len(c.Outputs) != 1 {
		t.Errorf("while running: %s, want count null, running, one output", describeCell(c))
	}
	m, _ := runMarkers(e.srv, execPath)["c1"].(map[string]any)
	if m == nil || m["owner"] != execUser || m["instance"] == "" || m["since"] == "" {
		t.Errorf("run marker of c1 = %v in state %v, want owner %q with instance and since", m, e.srv.State(execPath), execUser)
	}
	if v := j.View(); v.Status != execution.JobRunning || cellRun(t, v, "c1").Status != execution.CellRunning {
		t.Errorf("while running the job is %s", describeJob(v))
	}
	changes := localCellChanges(sub, "c1")
	if len(changes) < 1 {
		t.Fatalf("no local change of c1 seen")
	}
	// One transaction for the reset: outputs, count, state and the marker together.
	for _, f := range []string{"outputs", "execution_count", "execution_state", "state:" + runsKey} {
		if !slices.Contains(changes[0], f) {
			t.Errorf("first transaction on c1 changed %v; want %q in it (the reset is one transaction)", changes[0], f)
		}
	}

	// The second print merges into the same stream output.
	e.ks.Release("g1")
	awaitGate(t, e.ks, "g2", 1)
	c = awaitCell(t, e.srv, execPath, "c1", "showing the merged stream", func(c ydoc.Cell) bool {
		return streamText(c.Outputs) == "a\nb\n"
	})
	if len(c.Outputs) != 1 || c.ExecutionState != "running" {
		t.Errorf("after the second print: %s, want one merged stream output, still running", describeCell(c))
	}

	e.ks.Release("g2")
	v := awaitJob(t, j)
	if v.Status != execution.JobCompleted || v.Note != "" {
		t.Errorf("job: %s, want completed without note", describeJob(v))
	}
	r := cellRun(t, v, "c1")
	if r.Status != execution.CellOK || !countIs(r.ExecutionCount, 1) || r.Index != 0 {
		t.Errorf("cell run: %s", describeJob(v))
	}
	if got := outputTypes(r.Outputs); !slices.Equal(got, []string{"stream", "execute_result"}) {
		t.Errorf("job outputs %v", got)
	}
	c = serverCell(t, e.srv, execPath, "c1")
	if !countIs(c.ExecutionCount, 1) || c.ExecutionState != "idle" {
		t.Errorf("after the run: %s, want count 1 and idle", describeCell(c))
	}
	if got := outputTypes(c.Outputs); !slices.Equal(got, []string{"stream", "execute_result"}) || streamText(c.Outputs) != "a\nb\n" {
		t.Errorf("room outputs %s", compactJSON(c.Outputs))
	} else if res := c.Outputs[1]; !numIs(res["execution_count"], 1) {
		t.Errorf("execute_result %v, want execution_count 1", res)
	} else if d, _ := res["data"].(map[string]any); d["text/plain"] != "42" {
		t.Errorf("execute_result data %v", res["data"])
	}
	if st := e.srv.State(execPath); st[runsKey] != nil {
		t.Errorf("run marker still in the room state after the run: %v", st[runsKey])
	}
	// The count and idle land together, as JupyterLab writes them on the reply.
	changes = localCellChanges(sub, "c1")
	if len(changes) == 0 {
		t.Fatal("no local change of c1 after the outputs")
	}
	lastTx := changes[len(changes)-1]
	for _, f := range []string{"execution_count", "execution_state"} {
		if !slices.Contains(lastTx, f) {
			t.Errorf("last transaction on c1 changed %v; want %q", lastTx, f)
		}
	}
	// The request is JupyterLab's.
	k := kernelOf(t, e.ks, execPath)
	reqs := e.ks.Requests(k)
	if len(reqs) != 1 || !reqs[0].StoreHistory || !reqs[0].StopOnError || reqs[0].Metadata["cellId"] != "c1" {
		t.Errorf("requests %+v, want one with store_history, stop_on_error and cellId c1", reqs)
	}
	if calls := e.ks.StartCalls(); len(calls) != 1 || calls[0].KernelName != "python3" || calls[0].Path != execPath {
		t.Errorf("StartSession calls %+v, want one for %s with the notebook's kernelspec python3", calls, execPath)
	}
}

func TestExecOutputKinds(t *testing.T) {
	e := newExecEnv(t, oneNotebook(
		codeCell("c1", "print:gone\nclear\nprint:kept\nstderr:warn\ndisplay:d:v1\nupdate:d:v2\nimage:4x3"),
		codeCell("c2", "print:x\nclearwait\nprint:y"),
	), nil)
	v := e.run(execPath, []string{"c1", "c2"}, execution.RunOptions{})
	wantStatuses(t, v, execution.CellOK, execution.CellOK)
	c := serverCell(t, e.srv, execPath, "c1")
	if got := outputTypes(c.Outputs); !slices.Equal(got, []string{"stream", "stream", "display_data", "display_data"}) {
		t.Fatalf("c1 outputs %s", compactJSON(c.Outputs))
	}
	if c.Outputs[0]["text"] != "kept\n" || c.Outputs[1]["name"] != "stderr" {
		t.Errorf("c1 streams %s", compactJSON(c.Outputs[:2]))
	}
	if d, _ := c.Outputs[2]["data"].(map[string]any); d["text/plain"] != "v2" {
		t.Errorf("updated display %v, want v2", c.Outputs[2])
	}
	if _, ok := c.Outputs[2]["transient"]; ok {
		t.Errorf("transient written to the room: %v", c.Outputs[2])
	}
	if d, _ := c.Outputs[3]["data"].(map[string]any); d["image/png"] != bridgetest.PNG(4, 3) {
		t.Errorf("image output %v", compactJSON(c.Outputs[3]))
	}
	if c2 := serverCell(t, e.srv, execPath, "c2"); streamText(c2.Outputs) != "y\n" || len(c2.Outputs) != 1 {
		t.Errorf("c2 after clear_output(wait) then print: %s", describeCell(c2))
	}
	if cnt := cellRun(t, v, "c2").ExecutionCount; !countIs(cnt, 2) {
		t.Errorf("c2 count %v, want 2", cnt)
	}
}

func TestExecStopOnError(t *testing.T) {
	for _, stop := range []bool{true, false} {
		t.Run(map[bool]string{true: "stop", false: "go on"}[stop], func(t *testing.T) {
			e := newExecEnv(t, oneNotebook(
				codeCell("c1", "print:one"),
				codeCell("c2", "print:before\nerror:ValueError:bad value"),
				staleCell("c3", "print:three"),
			), nil)
			v := e.run(execPath, []string{"c1", "c2", "c3"}, execution.RunOptions{StopOnError: stop})
			if v.Status != execution.JobFailed {
				t.Errorf("job status %s, want failed", v.Status)
			}
			k := kernelOf(t, e.ks, execPath)
			c2 := serverCell(t, e.srv, execPath, "c2")
			if got := outputTypes(c2.Outputs); !slices.Equal(got, []string{"stream", "error"}) || c2.Outputs[1]["ename"] != "ValueError" || c2.Outputs[1]["evalue"] != "bad value" {
				t.Errorf("c2 outputs %s", compactJSON(c2.Outputs))
			}
			if !countIs(c2.ExecutionCount, 2) || c2.ExecutionState != "idle" {
				t.Errorf("c2 after its error: %s, want count 2 and idle", describeCell(c2))
			}
			if r := cellRun(t, v, "c2"); r.Status != execution.CellError || !countIs(r.ExecutionCount, 2) {
				t.Errorf("c2 run: %s", describeJob(v))
			}
			c3 := serverCell(t, e.srv, execPath, "c3")
			if stop {
				wantStatuses(t, v, execution.CellOK, execution.CellError, execution.CellSkipped)
				mustContainStr(t, "c3 note", cellRun(t, v, "c3").Note, "stop_on_error")
				if e.ks.Received(k) != 2 {
					t.Errorf("kernel received %d requests, want 2", e.ks.Received(k))
				}
				if !countIs(c3.ExecutionCount, 7) || streamText(c3.Outputs) != "stale\n" || c3.ExecutionState == "running" {
					t.Errorf("skipped c3 was touched: %s", describeCell(c3))
				}
			} else {
				wantStatuses(t, v, execution.CellOK, execution.CellError, execution.CellOK)
				if !countIs(c3.ExecutionCount, 3) || streamText(c3.Outputs) != "three\n" {
					t.Errorf("c3 after the run: %s", describeCell(c3))
				}
			}
			for _, r := range e.ks.Requests(k) {
				if r.StopOnError != stop {
					t.Errorf("request %q sent with stop_on_error %v, want %v", r.Code, r.StopOnError, stop)
				}
			}
		})
	}
}

func TestExecSkipsWhatIsNotCode(t *testing.T) {
	empty := staleCell("e1", "  \n\t")
	e := newExecEnv(t, oneNotebook(
		textCell("m1", ydoc.CellMarkdown, "# title"),
		textCell("r1", ydoc.CellRaw, "raw"),
		empty,
		codeCell("c1", "print:x"),
	), nil)
	v := e.run(execPath, []string{"m1", "r1", "e1", "nope", "c1"}, execution.RunOptions{StopOnError: true})
	wantStatuses(t, v, execution.CellSkipped, execution.CellSkipped, execution.CellSkipped, execution.CellSkipped, execution.CellOK)
	if v.Status != execution.JobCompleted {
		t.Errorf("job %s, want completed (skips are no failure)", describeJob(v))
	}
	for id, want := range map[string]string{
		"m1":   "markdown cells are not executed",
		"r1":   "raw cells are not executed",
		"e1":   "empty cell (outputs cleared)",
		"nope": "no longer exists",
	} {
		mustContainStr(t, id+" note", cellRun(t, v, id).Note, want)
	}
	if r := cellRun(t, v, "nope"); r.Index != -1 {
		t.Errorf("unknown cell index %d, want -1", r.Index)
	}
	if r := cellRun(t, v, "m1"); r.Index != 0 {
		t.Errorf("markdown cell index %d, want 0", r.Index)
	}
	c := serverCell(t, e.srv, execPath, "e1")
	if len(c.Outputs) != 0 || c.ExecutionCount != nil || c.ExecutionState == "running" {
		t.Errorf("empty code cell after the run: %s, want outputs cleared, count null, not running", describeCell(c))
	}
	if k := kernelOf(t, e.ks, execPath); e.ks.Received(k) != 1 {
		t.Errorf("kernel received %d requests, want 1 (only c1)", e.ks.Received(k))
	}
	if m := runMarkers(e.srv, execPath); m != nil {
		t.Errorf("run markers left: %v", m)
	}
}

func TestExecCellDeletedBeforeOrWhileItRuns(t *testing.T) {
	e := newExecEnv(t, oneNotebook(
		codeCell("hold", "block:hold"),
		codeCell("d1", "print:x"),
		codeCell("d2", "print:a\nblock:del\nprint:b"),
	), nil)
	room, err := e.m.Open(testutil.Context(t), execPath, ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	deleteCell := func(id string) {
		t.Helper()
		if err := e.srv.EditDoc(execPath, func(tx *ydoc.Txn) error { return tx.DeleteCells(tx.CellIndex(id), 1) }); err != nil {
			t.Fatal(err)
		}
		awaitReplica(t, room, "the sidecar sees "+id+" deleted", func(d *ydoc.Doc) bool { return !slices.Contains(d.CellIDs(), id) })
	}

	// Deleted while its job waits behind another.
	j1 := e.start(execPath, []string{"hold"}, execution.RunOptions{})
	awaitGate(t, e.ks, "hold", 1)
	j2 := e.start(execPath, []string{"d1"}, execution.RunOptions{})
	deleteCell("d1")
	e.ks.Release("hold")
	awaitJob(t, j1)
	v := awaitJob(t, j2)
	wantStatuses(t, v, execution.CellSkipped)
	mustContainStr(t, "d1 note", cellRun(t, v, "d1").Note, "no longer exists")

	// Deleted while it runs: the rest of its outputs are not written, the marker goes.
	j3 := e.start(execPath, []string{"d2"}, execution.RunOptions{})
	awaitGate(t, e.ks, "del", 1)
	awaitCell(t, e.srv, execPath, "d2", "showing its first output", func(c ydoc.Cell) bool { return streamText(c.Outputs) == "a\n" })
	deleteCell("d2")
	e.ks.Release("del")
	v = awaitJob(t, j3)
	r := cellRun(t, v, "d2")
	if r.Status != execution.CellOK {
		t.Errorf("d2 status %s, want ok (the kernel ran it)", r.Status)
	}
	mustContainStr(t, "d2 note", r.Note, "deleted while it ran")
	if streamText(r.Outputs) != "a\nb\n" {
		t.Errorf("d2 outputs in the job %s, want all of them", compactJSON(r.Outputs))
	}
	if ids := e.srv.CellIDs(execPath); slices.Contains(ids, "d2") {
		t.Errorf("d2 came back: %v", ids)
	}
	if m := runMarkers(e.srv, execPath); m != nil {
		t.Errorf("run markers left: %v", m)
	}
}

func TestExecJobsOnOneNotebookQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newExecEnv(t, oneNotebook(codeCell("s1", "block:s"), codeCell("s2", "print:after")), nil)
		j1 := e.start(execPath, []string{"s1"}, execution.RunOptions{})
		awaitGate(t, e.ks, "s", 1)
		j2 := e.start(execPath, []string{"s2"}, execution.RunOptions{})
		k := kernelOf(t, e.ks, execPath)
		// j2 waits for j1: give it the time to go wrong, then look.
		time.Sleep(100 * time.Millisecond) // virtual: every timer due within it has fired
		synctest.Wait()
		if e.ks.Received(k) != 1 || j2.View().Status != execution.JobQueued {
			t.Fatalf("second job on the same notebook did not wait: kernel received %d, job %s", e.ks.Received(k), describeJob(j2.View()))
		}
		if c := serverCell(t, e.srv, execPath, "s2"); c.ExecutionState == "running" {
			t.Errorf("queued cell shown running: %s", describeCell(c))
		}
		e.ks.Release("s")
		v1, v2 := awaitJob(t, j1), awaitJob(t, j2)
		if !countIs(cellRun(t, v1, "s1").ExecutionCount, 1) || !countIs(cellRun(t, v2, "s2").ExecutionCount, 2) {
			t.Errorf("counts: %s / %s, want 1 then 2", describeJob(v1), describeJob(v2))
		}
		if v2.Status != execution.JobCompleted {
			t.Errorf("second job %s", describeJob(v2))
		}
	})
}

func TestExecJobsOnTwoNotebooksRunInParallel(t *testing.T) {
	e := newExecEnv(t, execFiles(map[string][]ydoc.Cell{
		execPath:  {codeCell("a1", "block:pa\nprint:a")},
		otherPath: {codeCell("b1", "block:pb\nprint:b")},
	}), nil)
	ja := e.start(execPath, []string{"a1"}, execution.RunOptions{})
	jb := e.start(otherPath, []string{"b1"}, execution.RunOptions{})
	// Both wait at their gate at the same time: they run side by side.
	awaitKernels(t, e.ks, "both runs at their gate", func() bool { return e.ks.AtGate("pa") == 1 && e.ks.AtGate("pb") == 1 })
	ka, kb := kernelOf(t, e.ks, execPath), kernelOf(t, e.ks, otherPath)
	if ka == kb {
		t.Errorf("both notebooks use kernel %s", ka)
	}
	e.ks.Release("pb")
	vb := awaitJob(t, jb)
	notDone(t, ja, "before its gate opened")
	e.ks.Release("pa")
	va := awaitJob(t, ja)
	if va.Status != execution.JobCompleted || vb.Status != execution.JobCompleted || va.KernelID != ka || vb.KernelID != kb {
		t.Errorf("jobs: %s / %s", describeJob(va), describeJob(vb))
	}
}

func TestExecCancel(t *testing.T) {
	e := newExecEnv(t, oneNotebook(
		codeCell("c1", "print:before\nblock:"+gateNever+"\nprint:after"),
		codeCell("c2", "print:x"),
		codeCell("c3", "print:y"),
		codeCell("q1", "print:queued"),
	), nil)
	j := e.start(execPath, []string{"c1", "c2", "c3"}, execution.RunOptions{StopOnError: false})
	awaitGate(t, e.ks, gateNever, 1)
	k := kernelOf(t, e.ks, execPath)
	queued := e.start(execPath, []string{"q1"}, execution.RunOptions{})

	// A queued job: nothing to interrupt, every cell cancelled when its turn comes.
	if _, err := e.x.Cancel(testutil.Context(t), queued.ID); err != nil {
		t.Fatalf("Cancel queued: %v", err)
	}
	if n := e.ks.Interrupts(k); n != 0 {
		t.Errorf("cancelling a queued job interrupted the kernel %d times", n)
	}

	got, err := e.x.Cancel(testutil.Context(t), j.ID)
	if err != nil || got != j {
		t.Fatalf("Cancel = %v, %v", got, err)
	}
	v := awaitJob(t, j)
	if v.Status != execution.JobCancelled {
		t.Errorf("job %s, want cancelled", describeJob(v))
	}
	wantStatuses(t, v, execution.CellCancelled, execution.CellCancelled, execution.CellCancelled)
	mustContainStr(t, "c2 note", cellRun(t, v, "c2").Note, "cancelled before it ran")
	if n := e.ks.Interrupts(k); n != 1 {
		t.Errorf("kernel interrupted %d times, want 1", n)
	}
	c := serverCell(t, e.srv, execPath, "c1")
	if c.ExecutionState != "idle" || streamText(c.Outputs) != "before\n" {
		t.Errorf("interrupted cell: %s, want idle with its output so far", describeCell(c))
	}
	if got := outputTypes(c.Outputs); len(got) != 2 || got[1] != "error" || c.Outputs[1]["ename"] != "KeyboardInterrupt" {
		t.Errorf("interrupted cell outputs %s, want the stream then KeyboardInterrupt", compactJSON(c.Outputs))
	}
	for _, id := range []string{"c2", "c3"} {
		if c := serverCell(t, e.srv, execPath, id); c.ExecutionState == "running" || len(c.Outputs) != 0 {
			t.Errorf("cancelled cell %s was touched: %s", id, describeCell(c))
		}
	}
	qv := awaitJob(t, queued)
	if qv.Status != execution.JobCancelled {
		t.Errorf("queued job %s, want cancelled", describeJob(qv))
	}
	wantStatuses(t, qv, execution.CellCancelled)
	if n := e.ks.Received(k); n != 1 {
		t.Errorf("kernel received %d requests, want 1", n)
	}
	if m := runMarkers(e.srv, execPath); m != nil {
		t.Errorf("run markers left: %v", m)
	}

	// Cancelling a finished job changes nothing; an unknown id is ErrUnknownJob.
	if got, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil || got.View().Status != execution.JobCancelled {
		t.Errorf("Cancel of a finished job = %v, %v", got, err)
	}
	if n := e.ks.Interrupts(k); n != 1 {
		t.Errorf("cancelling a finished job interrupted the kernel (%d interrupts)", n)
	}
	if _, err := e.x.Cancel(testutil.Context(t), "job-nope"); !errors.Is(err, execution.ErrUnknownJob) {
		t.Errorf("Cancel unknown = %v, want ErrUnknownJob", err)
	}
}

// TestExecCancelBeforeTheKernelBegins cancels a one-cell job whose request the kernel has
// received but not begun (it is busy with something else, silent here): the interrupt hits
// nothing, and the job ignores the cancellation.
func TestExecCancelBeforeTheKernelBegins(t *testing.T) {
	// Regression: Cancel while the running cell's request waits in the kernel (not begun yet) is lost: the cell then runs to the end and the job reports completed instead of cancelled (exec.go runJob: only CellError/CellAborted/CellCancelled look at j.cancelled; attempt never re-checks it once the kernel begins)
	e := newExecEnv(t, oneNotebook(codeCell("w", "print:warm"), codeCell("c1", "print:late")), nil)
	e.run(execPath, []string{"w"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	e.ks.Silence(k, true)
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitKernels(t, e.ks, "the request received", func() bool { return e.ks.Received(k) == 2 })
	if _, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.ks.Interrupts(k); n != 0 {
		t.Errorf("Cancel interrupted the kernel %d times before our request began: it would stop someone else's cell", n)
	}
	e.ks.Silence(k, false)
	v := awaitJob(t, j)
	if v.Status != execution.JobCancelled {
		t.Errorf("job after Cancel: %s, want cancelled", describeJob(v))
	}
}

// A cancel that arrives while our request waits in the kernel interrupts it as soon as it
// begins, not before.
func TestExecCancelInterruptsWhenTheRequestBegins(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("w", "print:warm"), codeCell("c1", "print:begun\nblock:"+gateNever+"\nprint:never")), nil)
	e.run(execPath, []string{"w"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	e.ks.Silence(k, true)
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitKernels(t, e.ks, "the request received", func() bool { return e.ks.Received(k) == 2 })
	if _, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil {
		t.Fatal(err)
	}
	e.ks.Silence(k, false)
	v := awaitJob(t, j)
	if n := e.ks.Interrupts(k); n != 1 {
		t.Errorf("%d interrupts, want 1 once the request began", n)
	}
	r := cellRun(t, v, "c1")
	if v.Status != execution.JobCancelled || r.Status != execution.CellCancelled || streamText(r.Outputs) != "begun\n" {
		t.Errorf("job %s, want cancelled with the output before the interrupt", describeJob(v))
	}
}

// A human clears the outputs of the cell while it runs: later outputs still reach the room
// (the run rewrites the cell's outputs from what it received), and the room matches the result.
func TestExecOutputsSurviveAHumanClearingThem(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:first\ndisplay:d:one\nblock:g1\nprint:second\nupdate:d:two")), nil)
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitGate(t, e.ks, "g1", 1)
	awaitCell(t, e.srv, execPath, "c1", "two outputs", func(c ydoc.Cell) bool { return len(c.Outputs) == 2 })
	if err := e.srv.EditDoc(execPath, func(tx *ydoc.Txn) error { return tx.ClearOutputs(tx.CellIndex("c1")) }); err != nil {
		t.Fatal(err)
	}
	// Once the sidecar has the clear (before, its writes and the clear merge as concurrent
	// edits: the clear wins for what it saw).
	awaitReplica(t, e.m.Get(execPath, ydoc.KindNotebook), "the clear", func(d *ydoc.Doc) bool {
		cells, err := d.Cells([]int{0})
		return err == nil && len(cells[0].Outputs) == 0
	})
	e.ks.Release("g1")
	v := awaitJob(t, j)
	r := cellRun(t, v, "c1")
	c := awaitCell(t, e.srv, execPath, "c1", "idle", func(c ydoc.Cell) bool { return c.ExecutionState == "idle" })
	if compactJSON(c.Outputs) != compactJSON(r.Outputs) || len(r.Outputs) != 3 || streamText(c.Outputs) != "first\nsecond\n" {
		t.Errorf("room outputs %s, job outputs %s: want the same three (first, the updated display, second)", compactJSON(c.Outputs), compactJSON(r.Outputs))
	}
}

// A kernel channel unused for ChannelIdle is closed (the server's culler ignores kernels with
// connections); the next run reconnects to the same kernel, with no note.
func TestExecIdleChannelIsClosed(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:x")), func(o *execution.ClientOptions) { o.ChannelIdle = 40 * time.Millisecond })
	v := e.run(execPath, []string{"c1"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	awaitKernels(t, e.ks, "the idle channel closed", func() bool { return e.ks.OpenChannels(k) == 0 })
	v2 := e.run(execPath, []string{"c1"}, execution.RunOptions{})
	if v2.KernelID != v.KernelID || v2.Note != "" || v2.Status != execution.JobCompleted || e.ks.Connects(k) != 2 {
		t.Errorf("after the idle close: %s (connects %d), want the same kernel, no note", describeJob(v2), e.ks.Connects(k))
	}
}

// TestExecCancelViewRace reads a job's view while it is being cancelled.
func TestExecCancelViewRace(t *testing.T) {
	// Regression: runJob sets c.Status = CellCancelled outside j.update (no j.mu), racing with Job.View (go test -race reports it when a reader, e.g. the tools' waitJob, looks at that moment)
	e := newExecEnv(t, oneNotebook(codeCell("c1", "block:"+gateNever)), nil)
	// Readers look at every update, as the tools' waitJob does. The race window is short:
	// about half the runs of this test see it.
	for range 100 {
		j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
		awaitGate(t, e.ks, gateNever, 1)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-j.Changed():
						_ = j.View()
					}
				}
			}()
		}
		if _, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil {
			t.Fatal(err)
		}
		awaitJob(t, j)
		close(stop)
		wg.Wait()
	}
}

func TestExecDeadKernelIsReplacedBetweenJobs(t *testing.T) {
	for name, opts := range map[string]bridgetest.KillOptions{
		"dead, channel closed": {},
		"gone (404), quiet":    {Gone: true, Quiet: true},
		"dead, quiet":          {Quiet: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), checkEveryJob)
			v1 := e.run(execPath, []string{"c1"}, execution.RunOptions{})
			k1 := kernelOf(t, e.ks, execPath)
			if v1.Note != "" || v1.KernelID != k1 {
				t.Errorf("first job %s", describeJob(v1))
			}
			e.ks.Kill(k1, opts)
			v2 := e.run(execPath, []string{"c1"}, execution.RunOptions{})
			k2 := kernelOf(t, e.ks, execPath)
			if k2 == k1 || v2.KernelID != k2 {
				t.Errorf("after the kernel died the job ran on %s (session kernel %s, dead %s)", v2.KernelID, k2, k1)
			}
			if v2.Status != execution.JobCompleted || !countIs(cellRun(t, v2, "c1").ExecutionCount, 1) {
				t.Errorf("second job %s", describeJob(v2))
			}
			mustContainStr(t, "second job note", v2.Note, k1, "was gone", "variables from earlier runs are lost")
			if n := len(e.ks.StartCalls()); n != 2 {
				t.Errorf("%d StartSession calls, want 2", n)
			}
			if n := e.ks.OpenChannels(k1); n != 0 {
				t.Errorf("%d channels to the dead kernel left open", n)
			}
			// Reported once.
			if v3 := e.run(execPath, []string{"c1"}, execution.RunOptions{}); v3.Note != "" || v3.KernelID != k2 {
				t.Errorf("third job %s, want no note on %s", describeJob(v3), k2)
			}
		})
	}
}

// A job on a kernel kept from an earlier job checks it with the server while the first cell's
// reset is written: the reset reaches the room during the check, and the request waits for the
// answer (the dead kernels above are replaced on it).
func TestExecKernelCheckOverlapsTheReset(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), checkEveryJob)
	e.run(execPath, []string{"c1"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	received := e.ks.Received(k)
	e.ks.HoldKernelState()
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitKernels(t, e.ks, "the kernel check", func() bool { return e.ks.KernelStateWaiting() == 1 })
	awaitCell(t, e.srv, execPath, "c1", "reset while the kernel is checked", func(c ydoc.Cell) bool {
		return c.ExecutionState == "running" && len(c.Outputs) == 0 && c.ExecutionCount == nil
	})
	if n := e.ks.Received(k); n != received {
		t.Fatalf("the request was sent before the kernel check answered (%d requests, %d before)", n, received)
	}
	e.ks.ReleaseKernelState()
	v := awaitJob(t, j)
	if v.Status != execution.JobCompleted || v.Note != "" || v.KernelID != k || !countIs(cellRun(t, v, "c1").ExecutionCount, 2) {
		t.Errorf("job after the check %s", describeJob(v))
	}
}

// checkEveryJob makes the executor check a kept kernel with the server before every job, however
// recently it was used (the tests above are about what that check finds).
func checkEveryJob(o *execution.ClientOptions) { o.CheckIdleKernel = -1 }

// A kernel used moments ago is not checked with the server before the next job (the server's
// restarter would not know of a death that recent either); one idle for CheckIdleKernel (the
// default, 3 s, passed on the executor's clock) is.
func TestExecKernelCheckedOnlyWhenIdle(t *testing.T) {
	var ahead atomic.Int64 // how far the executor's clock is ahead of the wall clock
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), func(o *execution.ClientOptions) {
		o.Heartbeat = time.Minute // only the check before a job can ask the server, not a silent run
		o.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	e.run(execPath, []string{"c1"}, execution.RunOptions{})
	before := e.ks.KernelStateCalls()
	if v := e.run(execPath, []string{"c1"}, execution.RunOptions{}); v.Status != execution.JobCompleted || v.Note != "" {
		t.Errorf("second job %s", describeJob(v))
	}
	if n := e.ks.KernelStateCalls() - before; n != 0 {
		t.Errorf("a job right after another asked the server about the kernel %d times, want 0", n)
	}

	ahead.Add(int64(3 * time.Second))
	before = e.ks.KernelStateCalls()
	if v := e.run(execPath, []string{"c1"}, execution.RunOptions{}); v.Status != execution.JobCompleted || v.Note != "" {
		t.Errorf("job after 3 s idle %s", describeJob(v))
	}
	if n := e.ks.KernelStateCalls() - before; n != 1 {
		t.Errorf("a job after 3 s idle asked the server about the kernel %d times, want 1", n)
	}
}

func TestExecKernelRestartBetweenJobsIsNoted(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), nil)
	e.run(execPath, []string{"c1"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	if err := e.ks.Restart(testutil.Context(t), k); err != nil { // someone restarted it (a human, the API)
		t.Fatal(err)
	}
	v := e.run(execPath, []string{"c1"}, execution.RunOptions{})
	mustContainStr(t, "job note", v.Note, "restarted", "variables from earlier runs are lost")
	if v.KernelID != k || !countIs(cellRun(t, v, "c1").ExecutionCount, 1) {
		t.Errorf("after a restart: %s, want the same kernel with its count back at 1", describeJob(v))
	}
	// A new connection after a restart: the server nudges the new process's iopub link only
	// when a client connects.
	if n := e.ks.Connects(k); n != 2 {
		t.Errorf("%d connections to the kernel, want 2 (one more after the restart)", n)
	}
	if v := e.run(execPath, []string{"c1"}, execution.RunOptions{}); v.Note != "" || e.ks.Connects(k) != 2 {
		t.Errorf("the restart was reported again (%q) or the kernel reconnected again (%d)", v.Note, e.ks.Connects(k))
	}
}

// restartSetup runs a first job (the kernel and channel exist), then silences the kernel and
// starts a job whose request the kernel receives but does not begin.
func restartSetup(t *testing.T, code string) (*execEnv, string, *execution.Job) {
	t.Helper()
	e := newExecEnv(t, oneNotebook(codeCell("w", "print:warm"), codeCell("c1", code)), nil)
	e.run(execPath, []string{"w"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	e.ks.Silence(k, true)
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitKernels(t, e.ks, "the request received", func() bool { return e.ks.Received(k) == 2 })
	awaitCell(t, e.srv, execPath, "c1", "running", func(c ydoc.Cell) bool { return c.ExecutionState == "running" })
	return e, k, j
}

func TestExecRestartWhileRequestWaitsDeliveredLate(t *testing.T) {
	t.Parallel()
	e, k, j := restartSetup(t, "print:late")
	e.ks.RestartKernel(k, bridgetest.KernelRestartOptions{Late: 150 * time.Millisecond})
	v := awaitJob(t, j)
	if n := e.ks.Received(k); n != 2 {
		t.Errorf("kernel received %d requests, want 2: the late request must not be sent again", n)
	}
	if n := e.ks.Executions(k); n != 2 {
		t.Errorf("kernel ran %d requests, want 2", n)
	}
	r := cellRun(t, v, "c1")
	if r.Status != execution.CellOK || !countIs(r.ExecutionCount, 1) || r.Note != "" {
		t.Errorf("cell %s, want ok with count 1 (the new kernel's first)", describeJob(v))
	}
	mustContainStr(t, "job note", v.Note, "restarted")
	c := serverCell(t, e.srv, execPath, "c1")
	if streamText(c.Outputs) != "late\n" || len(c.Outputs) != 1 || c.ExecutionState != "idle" || !countIs(c.ExecutionCount, 1) {
		t.Errorf("room cell %s", describeCell(c))
	}
}

// A request lost in a restart is reported, never sent again: nobody can tell whether the old
// process had partly run it (its last outputs die with it), and running code twice is worse.
func TestExecRestartWhileRequestWaitsNeverDelivered(t *testing.T) {
	t.Parallel()
	// Unsignalled: a restart nobody hears of (found by the fault injection: the sidecar's kernel
	// connection was made 300 ms before it). The liveness check finds the kernel idle and the
	// run follows it as a restart: the cell ends lost, not left running forever.
	for name, unsignalled := range map[string]bool{"signalled": false, "unsignalled": true} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, k, j := restartSetup(t, "print:again")
				e.ks.RestartKernel(k, bridgetest.KernelRestartOptions{LosePending: true, Unsignalled: unsignalled})
				v := awaitJob(t, j)
				if n := e.ks.Received(k); n != 2 {
					t.Errorf("kernel received %d requests, want 2 (the lost one is not sent again)", n)
				}
				if n := e.ks.Executions(k); n != 1 {
					t.Errorf("kernel ran %d requests, want 1", n)
				}
				r := cellRun(t, v, "c1")
				if r.Status != execution.CellAborted || v.Status != execution.JobFailed {
					t.Errorf("cell %s, want aborted, job failed", describeJob(v))
				}
				mustContainStr(t, "c1 note", r.Note, "did not run in the new kernel")
				mustContainStr(t, "c1 note", r.Note, "not sent again")
				c := serverCell(t, e.srv, execPath, "c1")
				if len(c.Outputs) != 0 || c.ExecutionState != "idle" || c.ExecutionCount != nil {
					t.Errorf("room cell %s, want idle, no outputs, no count", describeCell(c))
				}
			})
		})
	}
}

func TestExecRestartDuringTheRunAborts(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:half\nblock:"+gateNever+"\nprint:rest"), codeCell("c2", "print:next")), nil)
	j := e.start(execPath, []string{"c1", "c2"}, execution.RunOptions{StopOnError: true})
	awaitGate(t, e.ks, gateNever, 1)
	k := kernelOf(t, e.ks, execPath)
	e.ks.RestartKernel(k, bridgetest.KernelRestartOptions{})
	v := awaitJob(t, j)
	wantStatuses(t, v, execution.CellAborted, execution.CellSkipped)
	mustContainStr(t, "c1 note", cellRun(t, v, "c1").Note, "restarted during the run")
	if v.Status != execution.JobFailed {
		t.Errorf("job %s, want failed", describeJob(v))
	}
	if n := e.ks.Received(k); n != 1 {
		t.Errorf("kernel received %d requests, want 1 (a begun request is not resent)", n)
	}
	c := serverCell(t, e.srv, execPath, "c1")
	if c.ExecutionState != "idle" || streamText(c.Outputs) != "half\n" || c.ExecutionCount != nil {
		t.Errorf("room cell %s, want idle with its partial output and no count", describeCell(c))
	}
	if m := runMarkers(e.srv, execPath); m != nil {
		t.Errorf("run markers left: %v", m)
	}
}

func TestExecKernelLostDuringTheRun(t *testing.T) {
	for name, opts := range map[string]bridgetest.KillOptions{
		"connection drops":            {},
		"silent, heartbeat: dead":     {Quiet: true},
		"silent, heartbeat: 404 gone": {Quiet: true, Gone: true},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newExecEnv(t, oneNotebook(codeCell("w", "print:warm"), codeCell("c1", "print:x"), codeCell("c2", "print:y")), nil)
				e.run(execPath, []string{"w"}, execution.RunOptions{})
				k := kernelOf(t, e.ks, execPath)
				e.ks.Silence(k, true)
				j := e.start(execPath, []string{"c1", "c2"}, execution.RunOptions{StopOnError: true})
				awaitKernels(t, e.ks, "the request received", func() bool { return e.ks.Received(k) == 2 })
				awaitCell(t, e.srv, execPath, "c1", "running", func(c ydoc.Cell) bool { return c.ExecutionState == "running" })
				// A silent but live kernel is only busy: the cell keeps running through heartbeats.
				time.Sleep(5 * heartbeat) // virtual: five heartbeats answered
				synctest.Wait()
				notDone(t, j, "while the kernel was silent but alive")
				e.ks.Kill(k, opts)
				v := awaitJob(t, j)
				wantStatuses(t, v, execution.CellAborted, execution.CellSkipped)
				note := cellRun(t, v, "c1").Note
				switch {
				case opts.Quiet: // only the heartbeat can find out
					mustContainStr(t, "c1 note", note, "the kernel died during the run")
				case !strings.Contains(note, "connection was lost") && !strings.Contains(note, "the kernel died during the run"):
					// the channel closing, or the heartbeat if it looked first
					t.Errorf("c1 note %q, want the connection lost or the kernel dead", note)
				}
				c := awaitCell(t, e.srv, execPath, "c1", "idle", func(c ydoc.Cell) bool { return c.ExecutionState == "idle" })
				if c.ExecutionCount != nil || len(c.Outputs) != 0 {
					t.Errorf("lost cell %s, want no count and no outputs", describeCell(c))
				}
				if m := runMarkers(e.srv, execPath); m != nil {
					t.Errorf("run markers left: %v", m)
				}
				// The next job gets a new kernel and says so.
				v2 := e.run(execPath, []string{"c1"}, execution.RunOptions{})
				if v2.KernelID == k || v2.Status != execution.JobCompleted {
					t.Errorf("next job %s, want a new kernel", describeJob(v2))
				}
				mustContainStr(t, "next job note", v2.Note, "variables from earlier runs are lost")
			})
		})
	}
}

func TestExecClearsStaleRunsOfAnEarlierInstance(t *testing.T) {
	e := newExecEnv(t, oneNotebook(
		codeCell("mine", "block:own"),
		codeCell("s1", "x = 1"),
		codeCell("s2", "y = 2"),
		codeCell("h1", "z = 3"),
	), nil)
	// A run of ours in progress: a resync must not touch it.
	j := e.start(execPath, []string{"mine"}, execution.RunOptions{})
	awaitGate(t, e.ks, "own", 1)
	awaitCell(t, e.srv, execPath, "mine", "running", func(c ydoc.Cell) bool { return c.ExecutionState == "running" })
	ownMarker := runMarkers(e.srv, execPath)["mine"]
	if ownMarker == nil {
		t.Fatal("no run marker for our own run")
	}
	// A crashed sidecar left s1 running (its marker stopped beating long ago); another sidecar
	// is running s2 right now (its marker beats); a human runs h1 (no marker).
	err := e.srv.EditDoc(execPath, func(tx *ydoc.Txn) error {
		for _, id := range []string{"s1", "s2", "h1"} {
			if err := tx.SetExecutionState(tx.CellIndex(id), "running"); err != nil {
				return err
			}
		}
		v, _ := tx.StateValue(runsKey)
		m, _ := v.(map[string]any)
		nm := map[string]any{}
		for k, x := range m {
			nm[k] = x
		}
		nm["s1"] = map[string]any{"owner": execUser, "instance": "crashed-instance", "since": "2024-01-01T00:00:00Z"}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		nm["s2"] = map[string]any{"owner": "someone-else", "instance": "other-instance", "since": "2024-01-01T00:00:00Z", "beat": now}
		return tx.SetState(runsKey, nm)
	})
	if err != nil {
		t.Fatalf("EditDoc: %v", err)
	}
	// Make the room sync again (the executor cleans up on every sync); Run subscribed at start,
	// but retry in case the first sync raced with its subscription.
	cleared := func() bool {
		c, ok := findServerCell(e.srv, execPath, "s1")
		return ok && c.ExecutionState == "idle" && runMarkers(e.srv, execPath)["s1"] == nil
	}
	for i := 0; !cleared(); i++ {
		if i == 10 {
			t.Fatalf("stale run of s1 not cleared after %d resyncs: state %v, cell %s", i, e.srv.State(execPath), describeCell(serverCell(t, e.srv, execPath, "s1")))
		}
		e.srv.Restart(bridgetest.RestartOptions{KeepDoc: true, KeepSession: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = e.srv.Await(ctx, cleared)
		cancel()
	}
	markers := runMarkers(e.srv, execPath)
	if m, _ := markers["s2"].(map[string]any); m == nil || m["owner"] != "someone-else" {
		t.Errorf("a live run's marker (another sidecar's, beating) was removed: %v", markers)
	}
	if markers["mine"] == nil {
		t.Errorf("our own run's marker was removed: %v", markers)
	}
	for _, id := range []string{"s2", "h1", "mine"} {
		if c := serverCell(t, e.srv, execPath, id); c.ExecutionState != "running" {
			t.Errorf("%s was reset: %s", id, describeCell(c))
		}
	}
	e.ks.Release("own")
	if v := awaitJob(t, j); v.Status != execution.JobCompleted {
		t.Errorf("our run across the resync: %s", describeJob(v))
	}
	markers = runMarkers(e.srv, execPath)
	if markers["mine"] != nil || markers["s2"] == nil {
		t.Errorf("markers after our run: %v, want only s2's", markers)
	}
}

func TestExecRunCodeWritesNothing(t *testing.T) {
	e := newExecEnv(t, oneNotebook(staleCell("c1", "print:orig")), nil)
	// Open the room to compare before and after.
	if _, err := e.m.Open(testutil.Context(t), execPath, ydoc.KindNotebook); err != nil {
		t.Fatal(err)
	}
	before, _ := e.srv.Notebook(execPath)
	beforeState := e.srv.State(execPath)

	run, note, err := e.x.RunCode(testutil.Context(t), execPath, "print:hi\nresult:42", "")
	if err != nil {
		t.Fatalf("RunCode: %v", err)
	}
	if run.Status != execution.CellOK || note != "" || run.Note != "" {
		t.Errorf("RunCode = %+v, note %q", run, note)
	}
	if got := outputTypes(run.Outputs); !slices.Equal(got, []string{"stream", "execute_result"}) || streamText(run.Outputs) != "hi\n" {
		t.Errorf("RunCode outputs %s", compactJSON(run.Outputs))
	}
	after, _ := e.srv.Notebook(execPath)
	if compactJSON(after.JSON()) != compactJSON(before.JSON()) || compactJSON(e.srv.State(execPath)) != compactJSON(beforeState) {
		t.Errorf("RunCode changed the notebook:\nbefore %s %v\nafter  %s %v", compactJSON(before.JSON()), beforeState, compactJSON(after.JSON()), e.srv.State(execPath))
	}
	k := kernelOf(t, e.ks, execPath)
	reqs := e.ks.Requests(k)
	if len(reqs) != 1 || reqs[0].StoreHistory || reqs[0].StopOnError {
		t.Errorf("requests %+v, want one without store_history", reqs)
	}
	if n := e.ks.ExecutionCount(k); n != 0 {
		t.Errorf("execution counter moved to %d", n)
	}

	run, _, err = e.x.RunCode(testutil.Context(t), execPath, "error:NameError:name 'x' is not defined", "")
	if err != nil || run.Status != execution.CellError || outputTypes(run.Outputs)[0] != "error" {
		t.Errorf("RunCode raising = %+v, %v", run, err)
	}

	// A wait that ends first returns what there is so far.
	ctx, cancel := context.WithTimeout(testutil.Context(t), 100*time.Millisecond)
	run, _, err = e.x.RunCode(ctx, execPath, "print:so far\nblock:rc", "")
	cancel()
	if err != nil || run.Status != execution.CellRunning || streamText(run.Outputs) != "so far\n" {
		t.Errorf("RunCode cut short = %+v, %v", run, err)
	}
	mustContainStr(t, "cut-short note", run.Note, "still running")
	e.ks.Release("rc")

	// The kernel dies during it.
	done := make(chan struct{})
	var died execution.CellRun
	go func() {
		defer close(done)
		died, _, _ = e.x.RunCode(context.Background(), execPath, "block:rd", "")
	}()
	awaitGate(t, e.ks, "rd", 1)
	e.ks.Kill(k, bridgetest.KillOptions{})
	select {
	case <-done:
	case <-time.After(testutil.WaitLimit):
		t.Fatal("RunCode did not return after the kernel died")
	}
	if died.Status != execution.CellAborted {
		t.Errorf("RunCode on a dying kernel = %+v", died)
	}
	mustContainStr(t, "RunCode note", died.Note, "restarted or died")
	// The notebook never changed.
	if after, _ := e.srv.Notebook(execPath); compactJSON(after.JSON()) != compactJSON(before.JSON()) {
		t.Errorf("the notebook changed")
	}
}

func TestExecInterruptAndRestart(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), nil)
	if _, err := e.x.Interrupt(testutil.Context(t), execPath); !errors.Is(err, execution.ErrNoKernel) {
		t.Errorf("Interrupt without a kernel = %v, want ErrNoKernel", err)
	}
	if _, err := e.x.Restart(testutil.Context(t), execPath); !errors.Is(err, execution.ErrNoKernel) {
		t.Errorf("Restart without a kernel = %v, want ErrNoKernel", err)
	}
	if _, err := e.x.Interrupt(testutil.Context(t), "../outside.ipynb"); !errors.Is(err, bridge.ErrBadPath) {
		t.Errorf("Interrupt with a bad path = %v, want ErrBadPath", err)
	}
	if n := len(e.ks.StartCalls()); n != 0 {
		t.Errorf("Interrupt/Restart started %d kernels", n)
	}
	e.run(execPath, []string{"c1"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	s, err := e.x.Interrupt(testutil.Context(t), execPath)
	if err != nil || s.KernelID != k || s.Path != execPath {
		t.Errorf("Interrupt = %+v, %v", s, err)
	}
	if s, err := e.x.Restart(testutil.Context(t), execPath); err != nil || s.KernelID != k {
		t.Errorf("Restart = %+v, %v", s, err)
	}
	if e.ks.Interrupts(k) != 1 || e.ks.Restarts(k) != 1 {
		t.Errorf("kernel interrupted %d, restarted %d times; want 1 and 1", e.ks.Interrupts(k), e.ks.Restarts(k))
	}
}

func TestExecNoKernel(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), nil)
	e.ks.FailStartSession(&bridgetest.Error{Status: 500, Msg: "no such kernel spec"})
	v := e.run(execPath, []string{"c1"}, execution.RunOptions{KernelName: "ir"})
	if v.Status != execution.JobFailed {
		t.Errorf("job %s, want failed", describeJob(v))
	}
	mustContainStr(t, "job note", v.Note, "no kernel", "no such kernel spec")
	wantStatuses(t, v, execution.CellSkipped)
	if calls := e.ks.StartCalls(); len(calls) != 1 || calls[0].KernelName != "ir" {
		t.Errorf("StartSession calls %+v, want one asking for ir", calls)
	}
	if c := serverCell(t, e.srv, execPath, "c1"); c.ExecutionState == "running" {
		t.Errorf("cell shown running without a kernel: %s", describeCell(c))
	}
	if _, _, err := e.x.RunCode(testutil.Context(t), execPath, "print:x", ""); err == nil {
		t.Error("RunCode without a kernel succeeded")
	}
	// It recovers when kernels can be started again.
	e.ks.FailStartSession(nil)
	if v := e.run(execPath, []string{"c1"}, execution.RunOptions{}); v.Status != execution.JobCompleted {
		t.Errorf("job after recovery %s", describeJob(v))
	}
}

func TestExecForgetsOldJobs(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), func(o *execution.ClientOptions) { o.KeepJobs = 2 })
	var ids []string
	for range 3 {
		j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
		awaitJob(t, j)
		ids = append(ids, j.ID)
	}
	if _, err := e.x.Job(ids[0]); !errors.Is(err, execution.ErrUnknownJob) {
		t.Errorf("Job(oldest) = %v, want ErrUnknownJob", err)
	}
	for _, id := range ids[1:] {
		if j, err := e.x.Job(id); err != nil || j.ID != id {
			t.Errorf("Job(%s) = %v, %v", id, j, err)
		}
	}
	if _, err := e.x.Cancel(testutil.Context(t), ids[0]); !errors.Is(err, execution.ErrUnknownJob) {
		t.Errorf("Cancel(forgotten) = %v, want ErrUnknownJob", err)
	}
	if _, err := e.x.Job("job-0000"); !errors.Is(err, execution.ErrUnknownJob) || !strings.Contains(err.Error(), "job-0000") {
		t.Errorf("Job(unknown) = %v", err)
	}
	// A running job is never forgotten, however many finish meanwhile.
	e2 := newExecEnv(t, execFiles(map[string][]ydoc.Cell{
		execPath:  {codeCell("c1", "block:"+gateNever)},
		otherPath: {codeCell("o1", "print:1")},
	}), func(o *execution.ClientOptions) { o.KeepJobs = 1 })
	long := e2.start(execPath, []string{"c1"}, execution.RunOptions{})
	for range 3 {
		e2.run(otherPath, []string{"o1"}, execution.RunOptions{})
	}
	if _, err := e2.x.Job(long.ID); err != nil {
		t.Errorf("running job forgotten: %v", err)
	}
}

func TestExecCloseStopsRunningJobs(t *testing.T) {
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:a\nblock:"+gateNever), staleCell("c2", "print:b")), nil)
	j := e.start(execPath, []string{"c1", "c2"}, execution.RunOptions{StopOnError: false})
	awaitGate(t, e.ks, gateNever, 1)
	awaitCell(t, e.srv, execPath, "c1", "showing its output", func(c ydoc.Cell) bool { return streamText(c.Outputs) == "a\n" })
	k := kernelOf(t, e.ks, execPath)
	closed := make(chan struct{})
	go func() { defer close(closed); e.x.Close() }()
	select {
	case <-closed:
	case <-time.After(testutil.WaitLimit):
		t.Fatal("Executor.Close did not return")
	}
	select {
	case <-j.Done():
	default:
		t.Fatal("Close returned before its job finished")
	}
	v := j.View()
	r := cellRun(t, v, "c1")
	if r.Status != execution.CellAborted {
		t.Errorf("running cell after Close: %s", describeJob(v))
	}
	mustContainStr(t, "c1 note", r.Note, "shutting down")
	if s := cellRun(t, v, "c2").Status; s == execution.CellOK || s == execution.CellRunning || s == execution.CellPending {
		t.Errorf("c2 after Close: %s", describeJob(v))
	}
	c := serverCell(t, e.srv, execPath, "c1")
	if c.ExecutionState != "idle" || streamText(c.Outputs) != "a\n" {
		t.Errorf("c1 after Close: %s, want idle with its output", describeCell(c))
	}
	if c2 := serverCell(t, e.srv, execPath, "c2"); c2.ExecutionState == "running" || streamText(c2.Outputs) != "stale\n" {
		t.Errorf("c2 after Close: %s, want untouched", describeCell(c2))
	}
	if m := runMarkers(e.srv, execPath); m != nil {
		t.Errorf("run markers left: %v", m)
	}
	if n := e.ks.OpenChannels(k); n != 0 {
		t.Errorf("%d kernel channels left open", n)
	}
	if n := e.ks.Received(k); n != 1 {
		t.Errorf("kernel received %d requests, want 1", n)
	}
	if _, err := e.x.Start(testutil.Context(t), execPath, []string{"c1"}, execution.RunOptions{}); err == nil {
		t.Error("Start after Close succeeded")
	}
	e.stopRun()
}

// transient is a REST error that says nothing about the kernel (jupyter-server was slow).
var transient = &bridgetest.Error{Status: 503, Msg: "service unavailable"}

func TestExecTransientStateErrorDuringTheRun(t *testing.T) {
	// Regression: one failed GET /api/kernels/{id} during a silent stretch of a run (any error, not only a 404) makes attempt give the run up as "the kernel died during the run": the cell is marked idle and aborted while the kernel still runs it, and its later outputs are never written (exec.go attempt: `err != nil || state == "dead"`; bridge.IsNotFound is not used)
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:a\nblock:slow\nprint:b")), nil)
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitGate(t, e.ks, "slow", 1)
	e.ks.FailKernelState(transient, 1)
	awaitKernels(t, e.ks, "the failed liveness check", func() bool { return e.ks.KernelStateFailuresLeft() == 0 })
	e.ks.Release("slow")
	v := awaitJob(t, j)
	if r := cellRun(t, v, "c1"); r.Status != execution.CellOK || streamText(r.Outputs) != "a\nb\n" {
		t.Errorf("run across a transient REST error: %s, want ok with every output", describeJob(v))
	}
}

func TestExecTransientStateErrorBetweenJobs(t *testing.T) {
	// Regression: a failed GET /api/kernels/{id} (any error, e.g. a 503) when a job starts makes acquire drop a live kernel's channel and tell the model "the notebook's kernel was gone; a new kernel was started, so variables from earlier runs are lost" although the same kernel, with its variables, is reused (exec.go acquire: `alive = err == nil && state != "dead"`)
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), nil)
	v1 := e.run(execPath, []string{"c1"}, execution.RunOptions{})
	e.ks.FailKernelState(transient, 1)
	v2 := e.run(execPath, []string{"c1"}, execution.RunOptions{})
	if v2.KernelID != v1.KernelID {
		t.Errorf("kernel changed from %s to %s", v1.KernelID, v2.KernelID)
	}
	if strings.Contains(v2.Note, "lost") {
		t.Errorf("second job on the same live kernel says state was lost: %q", v2.Note)
	}
}

func TestExecRunCodeBehindARunningJob(t *testing.T) {
	// Regression: RunCode on a notebook whose job is running blocks in acquire on k.mu.Lock(), which ignores ctx: execute_code overruns its timeout (and the tool call its CallTimeout) until the job ends (exec.go acquire)
	e := newExecEnv(t, oneNotebook(codeCell("c1", "block:long")), nil)
	j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
	awaitGate(t, e.ks, "long", 1)
	defer func() { e.ks.Release("long"); awaitJob(t, j) }()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, _, err := e.x.RunCode(ctx, execPath, "print:x", "")
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Error("RunCode with a 100 ms context still blocked after 2 s behind a running job")
		e.ks.Release("long")
		<-done
	}
}

func TestExecRunCodeKernelRestarts(t *testing.T) {
	// Regression: RunCode ignores bridge.MsgKernelRestarting: when the kernel restarts while scratch code runs, the call waits for its whole timeout and then reports the code "still running in the kernel", though the process that ran it is gone (exec.go RunCode; attempt handles the message)
	e := newExecEnv(t, oneNotebook(codeCell("c1", "print:1")), nil)
	e.run(execPath, []string{"c1"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	type out struct {
		run execution.CellRun
		err error
	}
	done := make(chan out, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		run, _, err := e.x.RunCode(ctx, execPath, "print:a\nblock:"+gateNever, "")
		done <- out{run, err}
	}()
	awaitGate(t, e.ks, gateNever, 1)
	e.ks.RestartKernel(k, bridgetest.KernelRestartOptions{})
	o := <-done
	if el := time.Since(start); el > time.Second || o.run.Status == execution.CellRunning {
		t.Errorf("RunCode across a restart returned after %v with %+v, %v; want a prompt aborted result", el, o.run, o.err)
	}
}

func TestExecKernelDiesMidJobWithoutStopOnError(t *testing.T) {
	// Regression: when the kernel dies during a job run with stop_on_error=false, every later cell of the job is still reset in the room (outputs cleared, count null) and then fails at once with "the kernel connection failed": cells that never ran lose their outputs (exec.go runJob/runCell: the dead channel is only replaced by acquire, at the next job; runCell resets before Execute fails)
	e := newExecEnv(t, oneNotebook(codeCell("w", "print:warm"), codeCell("c1", "print:x"), staleCell("c2", "print:y")), nil)
	e.run(execPath, []string{"w"}, execution.RunOptions{})
	k := kernelOf(t, e.ks, execPath)
	e.ks.Silence(k, true)
	j := e.start(execPath, []string{"c1", "c2"}, execution.RunOptions{StopOnError: false})
	awaitKernels(t, e.ks, "the request received", func() bool { return e.ks.Received(k) == 2 })
	e.ks.Kill(k, bridgetest.KillOptions{})
	v := awaitJob(t, j)
	c2 := serverCell(t, e.srv, execPath, "c2")
	r := cellRun(t, v, "c2")
	ranElsewhere := r.Status == execution.CellOK && streamText(c2.Outputs) == "y\n"
	untouched := r.Status != execution.CellOK && streamText(c2.Outputs) == "stale\n" && countIs(c2.ExecutionCount, 7)
	if !ranElsewhere && !untouched {
		t.Errorf("c2 after the kernel died running c1: %s in the room, %s; want it run on a new kernel or left as it was", describeCell(c2), describeJob(v))
	}
}
