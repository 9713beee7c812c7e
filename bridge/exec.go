package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Execution: cells run through the notebook's kernel, and their outputs are written into the
// room as JupyterLab writes them when a human presses Shift-Enter — one transaction clears the
// outputs and count and sets execution_state running; outputs arrive as Y.Maps (streams merged
// into Y.Text); the reply sets execution_count and idle. Only our own requests' messages are
// written. A run is a Job: it outlives the call that started it and can be waited on, polled
// and cancelled.

// ExecutorOptions configure an Executor. Zero values get defaults.
type ExecutorOptions struct {
	Manager *Manager
	Kernels Kernels
	Logger  zerolog.Logger
	// Username marks our runs in the room (so a later sidecar can clean up after a crash).
	Username string
	// Heartbeat is how long a run may be silent before the kernel's liveness is checked (5s).
	Heartbeat time.Duration
	// KeepJobs bounds the finished jobs kept for polling (200).
	KeepJobs int
}

// Executor runs cells. Its methods are safe for concurrent use; jobs on one notebook run one
// after the other, jobs on different notebooks in parallel.
type Executor struct {
	opts     ExecutorOptions
	log      zerolog.Logger
	instance string

	life   context.Context
	finish context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	kernels  map[string]*nbKernel // notebook path → its kernel
	jobs     map[string]*Job
	finished []string // ids of finished jobs, oldest first
}

// nbKernel is the kernel a notebook's runs use.
type nbKernel struct {
	mu       sync.Mutex // held for a whole job: one run at a time per notebook
	session  KernelSession
	ch       KernelChannel
	restarts int    // ch.Restarts() when last looked at
	note     string // something the next result must mention (the kernel was replaced)
}

// restartedNote reports (once) that the kernel restarted since we last looked.
func (k *nbKernel) restartedNote() string {
	if k.ch == nil {
		return ""
	}
	if n := k.ch.Restarts(); n != k.restarts {
		k.restarts = n
		return "the kernel restarted (it died or was restarted); variables from earlier runs are lost"
	}
	return ""
}

// runMarkerKey is the state-map key recording our runs in progress: cell id → owner. The state
// map is not saved to the file.
const runMarkerKey = "jupyter_collab_mcp_runs"

// NewExecutor validates options. It starts nothing; Run does.
func NewExecutor(opts ExecutorOptions) (*Executor, error) {
	if opts.Manager == nil || opts.Kernels == nil {
		return nil, errors.New("executor: manager and kernels are required")
	}
	if opts.Username == "" {
		opts.Username = DefaultUser().Username
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 5 * time.Second
	}
	if opts.KeepJobs <= 0 {
		opts.KeepJobs = 200
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	life, finish := context.WithCancel(context.Background())
	return &Executor{
		opts: opts, log: opts.Logger.With().Str("component", "executor").Logger(), instance: hex.EncodeToString(b[:]),
		life: life, finish: finish, kernels: map[string]*nbKernel{}, jobs: map[string]*Job{},
	}, nil
}

// Run cleans up after earlier instances (cells left "running" by a sidecar that died mid-run)
// whenever a notebook room syncs, until ctx ends; then it stops every job and closes kernel
// channels.
func (x *Executor) Run(ctx context.Context) error {
	defer x.Close()
	sub := x.opts.Manager.Subscribe(256)
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-x.life.Done():
			return nil
		case e, ok := <-sub.C:
			if !ok {
				return nil
			}
			if e.Kind == EventSynced {
				x.wg.Add(1)
				go func() {
					defer x.wg.Done()
					x.clearStaleRuns(e.Path)
				}()
			}
		}
	}
}

// Close stops every job (the kernels keep running what they were given) and waits for them.
func (x *Executor) Close() {
	x.finish()
	x.wg.Wait()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range x.kernels {
		if k.ch != nil {
			_ = k.ch.Close()
			k.ch = nil
		}
	}
}

// clearStaleRuns resets cells that an earlier instance of this sidecar marked running.
func (x *Executor) clearStaleRuns(path string) {
	room := x.opts.Manager.Get(path, ydoc.KindNotebook)
	if room == nil {
		return
	}
	ctx, cancel := context.WithTimeout(x.life, 30*time.Second)
	defer cancel()
	_, err := room.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		markers := runMarkers(tx)
		changed := false
		for cellID, m := range markers {
			if m["owner"] != x.opts.Username || m["instance"] == x.instance {
				continue
			}
			if i := tx.CellIndex(cellID); i >= 0 {
				if c, err := tx.Cell(i); err == nil && c.Type == ydoc.CellCode && c.ExecutionState == "running" {
					if err := tx.SetExecutionState(i, "idle"); err != nil {
						return err
					}
				}
			}
			delete(markers, cellID)
			changed = true
		}
		if changed {
			return setRunMarkers(tx, markers)
		}
		return nil
	})
	if err != nil && x.life.Err() == nil {
		x.log.Warn().Err(err).Str("room_path", path).Msg("could not clear runs left by an earlier sidecar")
	}
}

func runMarkers(tx *ydoc.Txn) map[string]map[string]any {
	out := map[string]map[string]any{}
	v, _ := tx.StateValue(runMarkerKey)
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			if mm, ok := x.(map[string]any); ok {
				out[k] = mm
			}
		}
	}
	return out
}

func setRunMarkers(tx *ydoc.Txn, markers map[string]map[string]any) error {
	if len(markers) == 0 {
		tx.DeleteState(runMarkerKey)
		return nil
	}
	v := make(map[string]any, len(markers))
	for k, m := range markers {
		v[k] = m
	}
	return tx.SetState(runMarkerKey, v)
}

// JobStatus is a job's state.
type JobStatus string

const (
	JobQueued    JobStatus = "queued"    // waiting for an earlier run on the same notebook
	JobRunning   JobStatus = "running"   //
	JobCompleted JobStatus = "completed" // every cell ran without error
	JobFailed    JobStatus = "failed"    // a cell raised, or the kernel was lost
	JobCancelled JobStatus = "cancelled" //
)

// Cell statuses.
const (
	CellPending   = "pending"
	CellRunning   = "running"
	CellOK        = "ok"
	CellError     = "error"     // the code raised
	CellAborted   = "aborted"   // the kernel aborted it, or it was lost with the kernel
	CellCancelled = "cancelled" // cancelled before or while running
	CellSkipped   = "skipped"   // not code, empty, deleted, or after a failure with stop_on_error
)

// CellRun is one cell of a job.
type CellRun struct {
	CellID         string           `json:"cell_id"`
	Index          int              `json:"index"`
	Status         string           `json:"status"`
	ExecutionCount *int             `json:"execution_count,omitempty"`
	Outputs        []map[string]any `json:"outputs,omitempty"`
	Note           string           `json:"note,omitempty"`
	Started        time.Time        `json:"-"`
	Ended          time.Time        `json:"-"`
}

// Job is one run of cells.
type Job struct {
	ID      string
	Path    string
	Created time.Time

	cancelled atomic.Bool
	done      chan struct{}

	mu       sync.Mutex
	status   JobStatus
	note     string
	cells    []*CellRun
	kernelID string
	ended    time.Time
	changed  chan struct{} // closed and replaced on every update
}

// JobView is a snapshot of a job.
type JobView struct {
	ID       string
	Path     string
	Status   JobStatus
	Note     string
	KernelID string
	Cells    []CellRun
	Created  time.Time
	Ended    time.Time
}

// Done is closed when the job has finished.
func (j *Job) Done() <-chan struct{} { return j.done }

// Changed returns a channel closed at the job's next update (for progress reports).
func (j *Job) Changed() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}

// View returns a copy of the job's state.
func (j *Job) View() JobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := JobView{ID: j.ID, Path: j.Path, Status: j.status, Note: j.note, KernelID: j.kernelID, Created: j.Created, Ended: j.ended}
	for _, c := range j.cells {
		cc := *c
		cc.Outputs = make([]map[string]any, len(c.Outputs))
		for i, o := range c.Outputs {
			cc.Outputs[i] = cloneOutput(o)
		}
		v.Cells = append(v.Cells, cc)
	}
	return v
}

func (j *Job) update(fn func()) {
	j.mu.Lock()
	fn()
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
}

// RunOptions configure a job.
type RunOptions struct {
	StopOnError bool
	KernelName  string // override the notebook's kernelspec when a kernel must be started
}

// ErrUnknownJob is returned for job ids the executor does not know (or no longer keeps).
var ErrUnknownJob = errors.New("bridge: unknown execution job")

// Start queues a job running cells (by id, in order) of a notebook and returns at once.
func (x *Executor) Start(ctx context.Context, path string, cellIDs []string, opts RunOptions) (*Job, error) {
	if x.life.Err() != nil {
		return nil, errors.New("bridge: executor stopped")
	}
	room, err := x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		return nil, err
	}
	j := &Job{ID: newJobID(), Path: room.Path(), Created: time.Now(), done: make(chan struct{}), status: JobQueued, changed: make(chan struct{})}
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		ids := d.CellIDs()
		for _, id := range cellIDs {
			idx := -1
			for i, c := range ids {
				if c == id {
					idx = i
				}
			}
			j.cells = append(j.cells, &CellRun{CellID: id, Index: idx, Status: CellPending})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.jobs[j.ID] = j
	x.mu.Unlock()
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.runJob(j, room, opts)
	}()
	return j, nil
}

func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

// Job returns a job by id.
func (x *Executor) Job(id string) (*Job, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	j, ok := x.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w %q (finished jobs are kept for a while, then forgotten)", ErrUnknownJob, id)
	}
	return j, nil
}

// Cancel stops a job: cells not started are cancelled, a running cell is interrupted.
func (x *Executor) Cancel(ctx context.Context, id string) (*Job, error) {
	j, err := x.Job(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-j.done:
		return j, nil
	default:
	}
	j.cancelled.Store(true)
	j.mu.Lock()
	kernelID, running := j.kernelID, j.status == JobRunning
	j.mu.Unlock()
	if running && kernelID != "" {
		if err := x.opts.Kernels.Interrupt(ctx, kernelID); err != nil {
			return j, fmt.Errorf("interrupt kernel: %w", err)
		}
	}
	return j, nil
}

func (x *Executor) runJob(j *Job, room *Room, opts RunOptions) {
	ctx := x.life
	defer func() {
		x.mu.Lock()
		x.finished = append(x.finished, j.ID)
		for len(x.finished) > x.opts.KeepJobs {
			delete(x.jobs, x.finished[0])
			x.finished = x.finished[1:]
		}
		x.mu.Unlock()
		close(j.done)
	}()
	k, note, err := x.acquire(ctx, room, opts.KernelName)
	if err != nil {
		j.update(func() {
			j.status, j.ended = JobFailed, time.Now()
			j.note = "no kernel: " + err.Error()
			for _, c := range j.cells {
				c.Status, c.Note = CellSkipped, "not run: no kernel"
			}
		})
		return
	}
	defer k.mu.Unlock()
	j.update(func() {
		j.status, j.note, j.kernelID = JobRunning, note, k.session.KernelID
	})
	final := JobCompleted
	stopped := ""
	for _, c := range j.cells {
		switch {
		case j.cancelled.Load():
			j.update(func() { c.Status, c.Note = CellCancelled, "cancelled before it ran" })
			final = JobCancelled
			continue
		case stopped != "":
			j.update(func() { c.Status, c.Note = CellSkipped, stopped })
			continue
		}
		x.runCell(ctx, j, room, k, c, opts.StopOnError)
		switch c.Status {
		case CellError, CellAborted:
			if final == JobCompleted {
				final = JobFailed
			}
			if j.cancelled.Load() {
				final = JobCancelled
				c.Status = CellCancelled
			} else if opts.StopOnError {
				stopped = "not run: an earlier cell failed (stop_on_error)"
			}
		case CellCancelled:
			final = JobCancelled
		}
	}
	j.update(func() { j.status, j.ended = final, time.Now() })
}

// acquire returns the notebook's kernel, locked for the caller, reusing the session a human's
// tab uses (so state is shared) and replacing a dead or culled kernel with a new one (the note
// says so). The caller unlocks k.mu.
func (x *Executor) acquire(ctx context.Context, room *Room, kernelName string) (*nbKernel, string, error) {
	path := room.Path()
	x.mu.Lock()
	k := x.kernels[path]
	if k == nil {
		k = &nbKernel{}
		x.kernels[path] = k
	}
	x.mu.Unlock()
	k.mu.Lock()
	note := k.note
	k.note = ""
	if k.ch != nil {
		alive := true
		select {
		case <-k.ch.Done():
			alive = false
		default:
			state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID)
			alive = err == nil && state != "dead"
		}
		if alive {
			return k, joinNotes(note, k.restartedNote()), nil
		}
		_ = k.ch.Close()
		k.ch = nil
		note = joinNotes(note, fmt.Sprintf("the notebook's kernel (%s) was gone; a new kernel was started, so variables from earlier runs are lost", k.session.KernelID))
	}
	// Find the kernel session of the notebook (a human's tab may have one), or start one.
	sessions, err := x.opts.Kernels.Sessions(ctx)
	if err != nil {
		k.mu.Unlock()
		return nil, "", fmt.Errorf("list kernel sessions: %w", err)
	}
	var found *KernelSession
	for i := range sessions {
		if sessions[i].Path == path && sessions[i].KernelID != "" && sessions[i].State != "dead" {
			found = &sessions[i]
			break
		}
	}
	if found == nil {
		if kernelName == "" {
			kernelName = notebookKernelName(ctx, room)
		}
		s, err := x.opts.Kernels.StartSession(ctx, path, kernelName)
		if err != nil {
			k.mu.Unlock()
			return nil, "", fmt.Errorf("start a kernel: %w", err)
		}
		found = &s
		if k.session.KernelID != "" && k.session.KernelID != s.KernelID && !strings.Contains(note, "was gone") {
			note = joinNotes(note, "a new kernel was started for this notebook; variables from earlier runs are lost")
		}
	}
	ch, err := x.opts.Kernels.Connect(ctx, found.KernelID)
	if err != nil {
		k.mu.Unlock()
		return nil, "", fmt.Errorf("connect to kernel %s: %w", found.KernelID, err)
	}
	k.session, k.ch, k.restarts = *found, ch, ch.Restarts()
	return k, note, nil
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// notebookKernelName reads the kernelspec name the notebook asks for.
func notebookKernelName(ctx context.Context, room *Room) string {
	name := ""
	_ = room.View(ctx, func(d *ydoc.Doc) error {
		nb, err := d.Notebook()
		if err != nil {
			return err
		}
		if ks, ok := nb.Metadata["kernelspec"].(map[string]any); ok {
			name, _ = ks["name"].(string)
		}
		return nil
	})
	return name
}

// cellInfo is what runCell needs to know about a cell before it runs.
func cellInfo(ctx context.Context, room *Room, id string) (ydoc.Cell, int, error) {
	var c ydoc.Cell
	idx := -1
	err := room.View(ctx, func(d *ydoc.Doc) error {
		ids := d.CellIDs()
		for i, cid := range ids {
			if cid == id {
				idx = i
			}
		}
		if idx < 0 {
			return nil
		}
		cells, err := d.Cells([]int{idx})
		if err == nil {
			c = cells[0]
		}
		return err
	})
	return c, idx, err
}

// runCell runs one cell and records the outcome in c.
func (x *Executor) runCell(ctx context.Context, j *Job, room *Room, k *nbKernel, c *CellRun, stopOnError bool) {
	cell, idx, err := cellInfo(ctx, room, c.CellID)
	switch {
	case err != nil:
		j.update(func() { c.Status, c.Note = CellSkipped, "not run: "+err.Error() })
		return
	case idx < 0:
		j.update(func() { c.Status, c.Note = CellSkipped, "not run: the cell no longer exists" })
		return
	case cell.Type != ydoc.CellCode:
		j.update(func() { c.Index, c.Status, c.Note = idx, CellSkipped, cell.Type+" cells are not executed" })
		return
	}
	// The reset JupyterLab does, in one transaction, plus our run marker.
	empty := strings.TrimSpace(cell.Source) == ""
	_, err = room.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		i := tx.CellIndex(c.CellID)
		if i < 0 {
			return errors.New("the cell was deleted")
		}
		if err := tx.ClearOutputs(i); err != nil {
			return err
		}
		if err := tx.SetExecutionCount(i, nil); err != nil {
			return err
		}
		if err := tx.DeleteCellMetadataKey(i, "execution"); err != nil {
			return err
		}
		if empty { // JupyterLab only clears an empty cell
			return tx.SetExecutionState(i, "idle")
		}
		if err := tx.SetExecutionState(i, "running"); err != nil {
			return err
		}
		markers := runMarkers(tx)
		markers[c.CellID] = map[string]any{"owner": x.opts.Username, "instance": x.instance, "since": time.Now().UTC().Format(time.RFC3339)}
		return setRunMarkers(tx, markers)
	})
	if err != nil {
		j.update(func() { c.Status, c.Note = CellSkipped, "not run: "+err.Error() })
		return
	}
	if empty {
		j.update(func() { c.Index, c.Status, c.Note = idx, CellSkipped, "empty cell (outputs cleared)" })
		return
	}
	j.update(func() { c.Index, c.Status, c.Started = idx, CellRunning, time.Now() })

	model := &outputModel{}
	cellGone := false
	write := func(ops []outputOp) {
		if len(ops) > 0 && !cellGone {
			cellGone = x.writeOutputs(ctx, room, c.CellID, ops)
		}
		outs := model.outputs
		j.update(func() { c.Outputs = cloneOutputs(outs) })
	}
	reply, started, lost := x.attempt(ctx, k, cell.Source, c.CellID, stopOnError, model, write)
	if lost == lostUnstarted && !started && ctx.Err() == nil {
		// The kernel had died just before; the server restarted it and our request did not
		// reach the new process: nothing of it ran, so send it again.
		reply, _, lost = x.attempt(ctx, k, cell.Source, c.CellID, stopOnError, model, write)
	}
	if note := k.restartedNote(); note != "" {
		j.update(func() { j.note = joinNotes(j.note, note) })
	}
	status, count := CellAborted, (*int)(nil)
	if reply != nil {
		switch reply["status"] {
		case "ok":
			status = CellOK
		case "error":
			status = CellError
		}
		if n, ok := reply["execution_count"].(float64); ok {
			v := int(n)
			count = &v
		}
	}
	// Back to idle with the count, as JupyterLab does on the reply; also when the run was lost,
	// so the cell never stays [*].
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	_, err = room.Apply(fctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		markers := runMarkers(tx)
		if _, ok := markers[c.CellID]; ok {
			delete(markers, c.CellID)
			if err := setRunMarkers(tx, markers); err != nil {
				return err
			}
		}
		i := tx.CellIndex(c.CellID)
		if i < 0 || cellGone {
			return nil
		}
		if count != nil {
			if err := tx.SetExecutionCount(i, count); err != nil {
				return err
			}
		}
		return tx.SetExecutionState(i, "idle")
	})
	cancel()
	if err != nil {
		x.log.Warn().Err(err).Str("cell", c.CellID).Msg("could not mark the cell idle")
	}
	note := lost
	if cellGone {
		note = joinNotes(note, "the cell was deleted while it ran; its outputs were not written")
	}
	j.update(func() {
		c.Status, c.ExecutionCount, c.Ended, c.Note = status, count, time.Now(), note
		c.Outputs = cloneOutputs(model.outputs)
	})
}

// attempt sends the code and follows its messages until the request completes or is lost.
// started reports whether the kernel began it (any message for it arrived); lost says why it
// did not complete.
//
// When the server restarts the kernel (it died) while the request waits, the request may still
// reach the new process (ZMQ queues it), so it is followed a little longer; only when nothing
// of it shows up is it reported lost with lostUnstarted, and the caller may send it again. A
// request the old kernel had begun is lost with its state.
func (x *Executor) attempt(ctx context.Context, k *nbKernel, code, cellID string, stopOnError bool, model *outputModel, write func([]outputOp)) (reply map[string]any, started bool, lost string) {
	running, err := k.ch.Execute(ctx, code, true, stopOnError, map[string]any{"cellId": cellID})
	if err != nil {
		return nil, false, "the kernel connection failed: " + err.Error()
	}
	var grace time.Time // after a restart: when to give up on the request reaching the new kernel
	for {
		wait := x.opts.Heartbeat
		if !grace.IsZero() {
			wait = max(time.Until(grace), time.Millisecond)
		}
		hb, cancel := context.WithTimeout(ctx, wait)
		msgs, done, nerr := running.Next(hb)
		cancel()
		if nerr != nil && len(msgs) == 0 && !done {
			if ctx.Err() != nil {
				return reply, started, "the sidecar is shutting down; the kernel may still be running this cell"
			}
			if !grace.IsZero() {
				if time.Now().Before(grace) {
					continue
				}
				running.Abandon()
				return reply, false, lostUnstarted
			}
			// Silent for a while: is the kernel still there?
			if state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID); err != nil || state == "dead" {
				running.Abandon()
				k.note = "the kernel died during a run; the next run starts a new one"
				_ = k.ch.Close()
				return reply, started, "the kernel died during the run"
			}
			continue
		}
		var ops []outputOp
		for _, m := range msgs {
			switch {
			case m.Type == MsgKernelRestarting:
				if started {
					running.Abandon()
					return reply, true, "the kernel restarted during the run (it died); its variables were lost"
				}
				if !x.waitKernelReady(ctx, k) {
					running.Abandon()
					return reply, false, "the kernel died and did not come back"
				}
				grace = time.Now().Add(3 * time.Second)
			case m.Channel == "shell" && m.Type == "execute_reply":
				started, grace = true, time.Time{}
				_ = json.Unmarshal(m.Content, &reply)
			case m.Channel == "iopub":
				started, grace = true, time.Time{}
				ops = append(ops, model.apply(m)...)
			}
		}
		write(ops)
		if nerr != nil && done { // the connection or the kernel went away for good
			return reply, started, "the kernel connection was lost during the run: " + nerr.Error()
		}
		if done {
			return reply, started, ""
		}
	}
}

// lostUnstarted says a request was lost with a restarting kernel before any of it ran.
const lostUnstarted = "the request was lost while the kernel restarted"

// waitKernelReady waits (up to 60 s) for a restarting kernel to be usable again.
func (x *Executor) waitKernelReady(ctx context.Context, k *nbKernel) bool {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID)
		if err != nil || state == "dead" {
			return false
		}
		if state == "idle" || state == "busy" {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
	return false
}

// writeOutputs applies output operations to the cell in one transaction; it reports true when
// the cell is gone (nothing more will be written).
func (x *Executor) writeOutputs(ctx context.Context, room *Room, cellID string, ops []outputOp) bool {
	gone := false
	_, err := room.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		i := tx.CellIndex(cellID)
		if i < 0 {
			gone = true
			return nil
		}
		for _, op := range ops {
			var err error
			switch op.kind {
			case opClear:
				err = tx.ClearOutputs(i)
			case opInsert:
				err = tx.InsertOutput(i, op.out)
			case opText:
				err = tx.SetStreamText(i, op.index, op.text)
			case opSwap:
				err = tx.ReplaceOutput(i, op.index, op.out)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		x.log.Warn().Err(err).Str("cell", cellID).Msg("could not write outputs")
	}
	return gone
}

func cloneOutputs(outs []map[string]any) []map[string]any {
	c := make([]map[string]any, len(outs))
	for i, o := range outs {
		c[i] = cloneOutput(o)
	}
	return c
}

// RunCode runs scratch code in a notebook's kernel without touching the notebook (no outputs
// written, no execution count). It waits until the code finished or ctx ends.
func (x *Executor) RunCode(ctx context.Context, path, code, kernelName string) (CellRun, string, error) {
	room, err := x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		return CellRun{}, "", err
	}
	k, note, err := x.acquire(ctx, room, kernelName)
	if err != nil {
		return CellRun{}, "", err
	}
	defer k.mu.Unlock()
	running, err := k.ch.Execute(ctx, code, false, false, nil)
	if err != nil {
		return CellRun{}, note, err
	}
	model := &outputModel{}
	run := CellRun{Status: CellRunning, Started: time.Now()}
	for {
		msgs, done, err := running.Next(ctx)
		for _, m := range msgs {
			switch {
			case m.Channel == "shell" && m.Type == "execute_reply":
				var reply map[string]any
				_ = json.Unmarshal(m.Content, &reply)
				switch reply["status"] {
				case "ok":
					run.Status = CellOK
				case "error":
					run.Status = CellError
				default:
					run.Status = CellAborted
				}
			case m.Channel == "iopub":
				model.apply(m)
			}
		}
		run.Outputs = cloneOutputs(model.outputs)
		if err != nil {
			if done {
				run.Status, run.Note = CellAborted, "the kernel restarted or died: "+err.Error()
				k.note = "the kernel restarted during a run; its variables were lost"
				return run, note, nil
			}
			run.Note = "still running in the kernel when the wait ended"
			return run, note, nil // ctx ended: what we have so far
		}
		if done {
			run.Ended = time.Now()
			return run, note, nil
		}
	}
}

// Interrupt interrupts the notebook's kernel (the human's runs too: it is their kernel).
func (x *Executor) Interrupt(ctx context.Context, path string) (KernelSession, error) {
	s, err := x.sessionFor(ctx, path)
	if err != nil {
		return s, err
	}
	return s, x.opts.Kernels.Interrupt(ctx, s.KernelID)
}

// Restart restarts the notebook's kernel; its state is lost.
func (x *Executor) Restart(ctx context.Context, path string) (KernelSession, error) {
	s, err := x.sessionFor(ctx, path)
	if err != nil {
		return s, err
	}
	return s, x.opts.Kernels.Restart(ctx, s.KernelID)
}

// ErrNoKernel is returned when a notebook has no kernel session.
var ErrNoKernel = errors.New("bridge: the notebook has no running kernel")

func (x *Executor) sessionFor(ctx context.Context, path string) (KernelSession, error) {
	path, err := CleanPath(path)
	if err != nil {
		return KernelSession{}, err
	}
	sessions, err := x.opts.Kernels.Sessions(ctx)
	if err != nil {
		return KernelSession{}, err
	}
	for _, s := range sessions {
		if s.Path == path && s.KernelID != "" {
			return s, nil
		}
	}
	return KernelSession{}, fmt.Errorf("%s: %w", path, ErrNoKernel)
}
