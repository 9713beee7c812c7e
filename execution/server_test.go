package execution_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ServerExecutor against a fake of jupyter-server-documents' execution: the fake collaboration
// server holds the document, and docKernels plays the server's execute API, writing into the
// document as the server does (running when queued, each output as it comes, idle, then the
// count) when the test says so.

// docKernels fakes ServerKernels.
type docKernels struct {
	srv  *bridgetest.Server
	path string

	mu       sync.Mutex
	state    string // the kernel's execution_state
	calls    []string
	refuse   []error // returned by the next ExecuteCells calls, in order
	queued   chan string
	sessions int
	ours     string // the cell the test cancels: its own running mark is no one else's
	console  bool   // a console session uses the kernel too

	// scratch is the kernel ConnectScratch connects to (a fake kernel that runs scripts).
	scratch   *bridgetest.Kernels
	scratchID string
}

func newDocKernels(srv *bridgetest.Server) *docKernels {
	return &docKernels{srv: srv, path: execPath, state: "idle", queued: make(chan string, 16), scratch: bridgetest.NewKernels()}
}

// ConnectScratch connects to a fake kernel of its own (started at the first call): scratch
// code runs there, the document's cells run through ExecuteCells.
func (k *docKernels) ConnectScratch(ctx context.Context, _ string) (execution.KernelChannel, error) {
	k.log("connect scratch")
	k.mu.Lock()
	id := k.scratchID
	k.mu.Unlock()
	if id == "" {
		s, err := k.scratch.StartSession(ctx, "scratch-kernel", "")
		if err != nil {
			return nil, err
		}
		k.mu.Lock()
		k.scratchID, id = s.KernelID, s.KernelID
		k.mu.Unlock()
	}
	return k.scratch.Connect(ctx, id)
}

func (k *docKernels) log(s string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, s)
}

func (k *docKernels) called(s string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, c := range k.calls {
		if c == s {
			n++
		}
	}
	return n
}

func (k *docKernels) setState(s string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.state = s
}

func (k *docKernels) Sessions(context.Context) ([]execution.KernelSession, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sessions == 0 {
		return nil, nil
	}
	out := []execution.KernelSession{{ID: "s1", Path: k.path, KernelID: "k1", KernelName: "python3", State: k.state, Type: "notebook"}}
	if k.console {
		out = append(out, execution.KernelSession{ID: "s2", Path: "console-1-x", KernelID: "k1", KernelName: "python3", State: k.state, Type: "console"})
	}
	return out, nil
}

func (k *docKernels) StartSession(_ context.Context, path, _ string) (execution.KernelSession, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sessions++
	k.calls = append(k.calls, "start")
	return execution.KernelSession{ID: "s1", Path: path, KernelID: "k1", KernelName: "python3", State: "idle"}, nil
}

func (k *docKernels) KernelState(context.Context, string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state, nil
}

// Interrupt records the interrupt and which other cells the server's document shows running at
// that moment: an interrupt sent while someone else's cell runs would stop their cell.
func (k *docKernels) Interrupt(context.Context, string) error {
	k.log("interrupt")
	if nb, err := k.srv.Notebook(k.path); err == nil {
		for _, c := range nb.Cells {
			if c.ExecutionState == "running" && c.ID != k.ours {
				k.log("interrupt while " + c.ID + " ran")
			}
		}
	}
	return nil
}
func (k *docKernels) Restart(context.Context, string) error { k.log("restart"); return nil }

func (k *docKernels) AttachSession(context.Context, execution.KernelSession) error {
	k.log("attach")
	return nil
}

// ExecuteCells checks the source as the server does (409), then marks the cell running (its
// outputs cleared) and queues it for the test.
func (k *docKernels) ExecuteCells(_ context.Context, _, roomID string, cells []execution.CellSource, _ string) error {
	k.mu.Lock()
	if len(k.refuse) > 0 {
		err := k.refuse[0]
		k.refuse = k.refuse[1:]
		k.mu.Unlock()
		k.log("refused")
		return err
	}
	k.mu.Unlock()
	if !strings.HasPrefix(roomID, "json:notebook:") && !strings.Contains(roomID, ":") {
		return fmt.Errorf("bad room id %q", roomID)
	}
	c := cells[0]
	nb, err := k.srv.Notebook(k.path)
	if err != nil {
		return err
	}
	for _, cell := range nb.Cells {
		if cell.ID == c.CellID && cell.Source != c.Source {
			return fmt.Errorf("%w: 409", execution.ErrSourceChanged)
		}
	}
	if err := k.srv.EditDoc(k.path, func(tx *ydoc.Txn) error {
		i := tx.CellIndex(c.CellID)
		if err := tx.ClearOutputs(i); err != nil {
			return err
		}
		return tx.SetExecutionState(i, "running")
	}); err != nil {
		return err
	}
	k.log("execute " + c.CellID)
	k.queued <- c.CellID
	return nil
}

// next waits for the next cell the executor sends.
func (k *docKernels) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-k.queued:
		return id
	case <-time.After(testutil.WaitLimit):
		t.Fatal("no cell was sent to the server")
		return ""
	}
}

// write does what the server does while and after it runs a cell: each output its own write,
// then idle, then the count (nil: the run was lost, no count).
func (k *docKernels) write(t *testing.T, id string, outs []map[string]any, count *int) {
	t.Helper()
	edit := func(fn func(tx *ydoc.Txn, i int) error) {
		if err := k.srv.EditDoc(k.path, func(tx *ydoc.Txn) error { return fn(tx, tx.CellIndex(id)) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range outs {
		edit(func(tx *ydoc.Txn, i int) error { return tx.AppendOutput(i, o) })
	}
	edit(func(tx *ydoc.Txn, i int) error { return tx.SetExecutionState(i, "idle") })
	if count != nil {
		edit(func(tx *ydoc.Txn, i int) error { return tx.SetExecutionCount(i, count) })
	}
}

func stream(text string) map[string]any {
	return map[string]any{"output_type": "stream", "name": "stdout", "text": text}
}

func intp(n int) *int { return &n }

type serverEnv struct {
	m   *bridge.Manager
	srv *bridgetest.Server
	sub *bridge.Subscription // the manager's events, from the start
	k   *docKernels
	x   *execution.ServerExecutor
}

// notices returns the kinds of the kernel notices agents were given so far.
func (e *serverEnv) notices() []string {
	var kinds []string
	for {
		select {
		case ev := <-e.sub.C:
			if ev.Kind == bridge.EventNotice && ev.Notice != nil && ev.Notice.Topic == bridge.TopicKernel {
				kinds = append(kinds, ev.Notice.Kind)
			}
		default:
			return kinds
		}
	}
}

func newServerEnv(t *testing.T, cells ...ydoc.Cell) *serverEnv {
	t.Helper()
	return newServerEnvWith(t, nil, cells...)
}

func newServerEnvWith(t *testing.T, manager func(*bridge.ManagerOptions), cells ...ydoc.Cell) *serverEnv {
	t.Helper()
	srv := bridgetest.New(oneNotebook(cells...)...)
	m := newManager(t, srv, manager)
	k := newDocKernels(srv)
	sub := m.Subscribe(4096)
	t.Cleanup(sub.Close)
	x, err := execution.NewServerExecutor(execution.ServerOptions{Manager: m, Kernels: k, Logger: zerolog.Nop(),
		Heartbeat: heartbeat, EndGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &serverEnv{srv: srv, sub: sub, k: k, x: x, m: m}
}

func (e *serverEnv) start(t *testing.T, ids []string, opts execution.RunOptions) *execution.Job {
	t.Helper()
	j, err := e.x.Start(testutil.Context(t), execPath, ids, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return j
}

func waitJob(t *testing.T, j *execution.Job) execution.JobView {
	t.Helper()
	select {
	case <-j.Done():
		return j.View()
	case <-time.After(testutil.WaitLimit):
		t.Fatalf("job did not finish: %+v", j.View())
		return execution.JobView{}
	}
}

// A run as the server does it: the job reports what the document shows, the outputs as a human
// sees them (the server's one output per stream message merged, \r applied), the count, ok or
// error; with stop_on_error the cell after a failed one is not sent.
func TestServerExecutorRunsCellsAndReportsTheDocument(t *testing.T) {
	e := newServerEnv(t, staleCell("a", "print('x')"), codeCell("b", "1/0"), codeCell("c", "'never'"))
	j := e.start(t, []string{"a", "b", "c"}, execution.RunOptions{StopOnError: true})
	if id := e.k.next(t); id != "a" {
		t.Fatalf("sent %s first", id)
	}
	e.k.write(t, "a", []map[string]any{stream("0%"), stream("\r50%"), stream("\r100%\n")}, intp(8))
	if id := e.k.next(t); id != "b" {
		t.Fatalf("sent %s second", id)
	}
	e.k.write(t, "b", []map[string]any{{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": []any{}}}, intp(9))
	v := waitJob(t, j)
	if v.Status != execution.JobFailed || v.KernelID != "k1" {
		t.Fatalf("job %+v", v)
	}
	a, b, c := v.Cells[0], v.Cells[1], v.Cells[2]
	if a.Status != execution.CellOK || a.ExecutionCount == nil || *a.ExecutionCount != 8 || len(a.Outputs) != 1 || a.Outputs[0]["text"] != "100%\n" || a.Started.IsZero() {
		t.Errorf("cell a: %+v", a)
	}
	if b.Status != execution.CellError || b.ExecutionCount == nil || *b.ExecutionCount != 9 {
		t.Errorf("cell b: %+v", b)
	}
	if c.Status != execution.CellSkipped || !strings.Contains(c.Note, "stop_on_error") {
		t.Errorf("cell c: %+v", c)
	}
	if e.k.called("execute c") != 0 || e.k.called("start") != 1 {
		t.Errorf("calls %v", e.k.calls)
	}
	// The sidecar wrote nothing into the cells: the document holds the server's raw text, once.
	nb, _ := e.srv.Notebook(execPath)
	if got := fmt.Sprint(nb.Cells[0].Outputs); strings.Count(got, "100%") != 1 || !strings.Contains(got, "\r50%") {
		t.Errorf("the document holds %q in cell a, want the server's outputs", got)
	}
}

// A 409 from a replica that lags behind an edit is sent again with the new source; a room the
// server freed (no kernel) gets the session's kernel attached again, once.
func TestServerExecutorSendsAgainAfterA409AndAttachesAFreedRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newServerEnv(t, codeCell("a", "1"))
		e.k.refuse = []error{fmt.Errorf("%w: 400", execution.ErrRoomWithoutKernel), fmt.Errorf("%w: 409", execution.ErrSourceChanged)}
		j := e.start(t, []string{"a"}, execution.RunOptions{})
		e.k.next(t)
		e.k.write(t, "a", nil, intp(1))
		v := waitJob(t, j)
		if v.Status != execution.JobCompleted || e.k.called("attach") != 1 || e.k.called("refused") != 2 {
			t.Errorf("job %+v, calls %v", v, e.k.calls)
		}
		// A 409 that persists (someone keeps editing) ends as not run, saying why.
		e.k.mu.Lock()
		e.k.refuse = []error{execution.ErrSourceChanged, execution.ErrSourceChanged, execution.ErrSourceChanged}
		e.k.mu.Unlock()
		v = waitJob(t, e.start(t, []string{"a"}, execution.RunOptions{}))
		if c := v.Cells[0]; c.Status != execution.CellSkipped || !strings.Contains(c.Note, "another source") || v.Status != execution.JobFailed {
			t.Errorf("persistent 409: %+v", v)
		}
	})
}

// Cancel interrupts the kernel only once our cell is the one it runs: while it waits behind a
// human's cell the server runs first, nothing is interrupted.
func TestServerExecutorCancelInterruptsOnlyOurRun(t *testing.T) {
	e := newServerEnv(t, codeCell("human", "sleep"), codeCell("ours", "loop"), codeCell("after", "1"))
	e.k.ours = "ours"
	first, err := e.x.Start(testutil.Context(t), execPath, []string{"human"}, execution.RunOptions{}) // an earlier job on the notebook
	if err != nil {
		t.Fatal(err)
	}
	e.k.next(t)
	e.k.setState("busy")
	j := e.start(t, []string{"ours", "after"}, execution.RunOptions{})
	// The first job holds the notebook: ours waits in the executor, and is cancelled there.
	if _, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil {
		t.Fatal(err)
	}
	e.k.write(t, "human", nil, intp(1))
	waitJob(t, first)
	v := waitJob(t, j)
	if v.Status != execution.JobCancelled || v.Cells[0].Status != execution.CellCancelled || v.Cells[1].Status != execution.CellCancelled {
		t.Errorf("cancelled before it was sent: %+v", v)
	}
	if e.k.called("execute ours") != 0 || e.k.called("interrupt") != 0 {
		t.Errorf("a job cancelled while it waited was sent or interrupted: %v", e.k.calls)
	}

	// Sent and queued behind a cell the server runs for someone else (marked running in the
	// document): no interrupt until that cell ends, then ours is interrupted. The server's
	// running mark of the other cell reaches the sidecar only after ours was sent (held back
	// here), as it can when the server queued the other cell just before ours.
	e.srv.HoldEchoes()
	if err := e.srv.EditDoc(execPath, func(tx *ydoc.Txn) error { return tx.SetExecutionState(tx.CellIndex("human"), "running") }); err != nil {
		t.Fatal(err)
	}
	j = e.start(t, []string{"ours"}, execution.RunOptions{})
	if id := e.k.next(t); id != "ours" {
		t.Fatalf("sent %s", id)
	}
	e.srv.ReleaseEchoes()
	if _, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil {
		t.Fatal(err)
	}
	// The executor has taken the cancel and decided to wait (it says so in the job) before the
	// other cell ends.
	testutil.Eventually(t, "the cancel to wait for the cell queued before ours", func() bool {
		return strings.HasPrefix(j.View().Cells[0].Note, "cancelling") || e.k.called("interrupt") > 0
	})
	if n := e.k.called("interrupt while human ran"); n != 0 {
		t.Fatalf("%d interrupts while the kernel ran someone else's cell: %v", n, e.k.calls)
	}
	e.k.write(t, "human", nil, intp(2))
	testutil.Eventually(t, "an interrupt once our cell runs", func() bool { return e.k.called("interrupt") > 0 })
	e.k.write(t, "ours", []map[string]any{{"output_type": "error", "ename": "KeyboardInterrupt", "evalue": "", "traceback": []any{}}}, intp(3))
	v = waitJob(t, j)
	if v.Status != execution.JobCancelled || v.Cells[0].Status != execution.CellCancelled {
		t.Errorf("cancelled while running: %+v", v)
	}
	if n := e.k.called("interrupt while human ran"); n != 0 {
		t.Fatalf("%d interrupts while the kernel ran someone else's cell: %v", n, e.k.calls)
	}
}

// jupyter-server-documents 0.3.3 loses a run whose kernel restarted or died under it: the cell
// stays running while the kernel is idle. The executor attaches the kernel again (which makes
// the server drop the stuck run and set the cell idle) and reports the run aborted, saying why;
// a cell the server sets idle without a count ends aborted too.
func TestServerExecutorLostRuns(t *testing.T) {
	e := newServerEnv(t, codeCell("a", "1"), codeCell("b", "2"))
	j := e.start(t, []string{"a"}, execution.RunOptions{})
	e.k.next(t)
	testutil.Eventually(t, "the kernel attached again", func() bool { return e.k.called("attach") == 1 })
	e.k.write(t, "a", nil, nil) // the server's disconnect sets the stuck cell idle
	v := waitJob(t, j)
	if c := v.Cells[0]; c.Status != execution.CellAborted || !strings.Contains(c.Note, "attached the kernel") || !strings.Contains(c.Note, "not sent again") {
		t.Errorf("lost run: %+v", v)
	}
	if got := e.notices(); !slices.Contains(got, "lost") {
		t.Errorf("agents were not told the kernel was lost: notices %v", got)
	}
	if !strings.Contains(v.Note, "variables from earlier runs are lost") {
		t.Errorf("the job does not say the kernel's state is gone: %q", v.Note)
	}
	// Idle without a count, the kernel busy meanwhile: aborted after the grace, no attach.
	e.k.setState("busy")
	j = e.start(t, []string{"b"}, execution.RunOptions{})
	e.k.next(t)
	e.k.write(t, "b", []map[string]any{stream("partial\n")}, nil)
	v = waitJob(t, j)
	if c := v.Cells[0]; c.Status != execution.CellAborted || !strings.Contains(c.Note, "without a result") || len(c.Outputs) != 1 {
		t.Errorf("idle without a count: %+v", v)
	}
	if n := e.k.called("attach"); n != 1 {
		t.Errorf("%d attaches, want the first run's only", n)
	}
}

// An empty cell is cleared, not sent; a deleted cell ends its run; scratch code (without
// global awareness) and forks are refused with the reason.
func TestServerExecutorEmptyDeletedScratch(t *testing.T) {
	e := newServerEnv(t, staleCell("empty", "  "), codeCell("a", "1"), textCell("md", ydoc.CellMarkdown, "# x"))
	v := waitJob(t, e.start(t, []string{"empty", "md"}, execution.RunOptions{}))
	if v.Cells[0].Status != execution.CellSkipped || v.Cells[0].Note != "empty cell (outputs cleared)" || v.Cells[1].Status != execution.CellSkipped {
		t.Errorf("empty and markdown: %+v", v)
	}
	if nb, _ := e.srv.Notebook(execPath); len(nb.Cells[0].Outputs) != 0 || nb.Cells[0].ExecutionCount != nil {
		t.Errorf("the empty cell was not cleared: %+v", nb.Cells[0])
	}
	e.k.setState("busy")
	j := e.start(t, []string{"a"}, execution.RunOptions{})
	e.k.next(t)
	if err := e.srv.EditDoc(execPath, func(tx *ydoc.Txn) error { return tx.DeleteCells(tx.CellIndex("a"), 1) }); err != nil {
		t.Fatal(err)
	}
	v = waitJob(t, j)
	if c := v.Cells[0]; c.Status != execution.CellAborted || c.Index != -1 || !strings.Contains(c.Note, "deleted") {
		t.Errorf("deleted while running: %+v", v)
	}
	// Without global awareness the sidecar cannot tell whether a tab holds the kernel.
	if _, _, err := e.x.RunCode(testutil.Context(t), execPath, "1", ""); !errors.Is(err, execution.ErrScratchRefused) || !strings.Contains(err.Error(), "global awareness") ||
		!strings.Contains(err.Error(), "execute_notebook_cell") || e.k.called("connect scratch") != 0 {
		t.Errorf("RunCode: %v", err)
	}
	if _, err := e.x.Start(testutil.Context(t), execPath, []string{"a"}, execution.RunOptions{ForkID: "f"}); err == nil {
		t.Error("a fork run was accepted")
	}
	if ids := e.x.JobIDs(); len(ids) != 2 || !slices.Contains(ids, j.ID) {
		t.Errorf("job ids %v", ids)
	}
}

// Switch hands calls to the executor the engine needs and finds jobs in any of them.
func TestSwitchPicksTheEngine(t *testing.T) {
	e := newServerEnv(t, codeCell("a", "1"))
	other := newServerEnv(t, codeCell("a", "1"))
	pick := execution.Executor(e.x)
	s := execution.Switch{All: []execution.Executor{other.x, e.x}, Pick: func(context.Context) (execution.Executor, error) { return pick, nil }}
	j, err := s.Start(testutil.Context(t), execPath, []string{"a"}, execution.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.k.next(t)
	if got, err := s.Job(j.ID); err != nil || got != j {
		t.Errorf("Job: %v %v", got, err)
	}
	if _, err := s.Cancel(testutil.Context(t), j.ID); err != nil {
		t.Errorf("Cancel: %v", err)
	}
	if _, err := s.Job("job-nope"); !errors.Is(err, execution.ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
	if ids := s.JobIDs(); len(ids) != 1 || ids[0] != j.ID {
		t.Errorf("JobIDs %v", ids)
	}
	e.k.write(t, "a", nil, intp(1))
	waitJob(t, j)
	pickErr := errors.New("engine unknown")
	s.Pick = func(context.Context) (execution.Executor, error) { return nil, pickErr }
	if _, err := s.Start(testutil.Context(t), execPath, []string{"a"}, execution.RunOptions{}); !errors.Is(err, pickErr) {
		t.Errorf("Start without an engine: %v", err)
	}
}
