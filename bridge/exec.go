package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
	// StaleRun is how long a run marker may go without a heartbeat before another sidecar
	// takes the run for dead and resets its cell (60s; markers beat every third of it).
	StaleRun time.Duration
	// ChannelIdle closes a notebook's kernel channel unused for this long, so the server's
	// culler can still stop the kernel (10m).
	ChannelIdle time.Duration
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
	closed   bool                 // Close began: nothing new starts
	kernels  map[string]*nbKernel // notebook path → its kernel
	jobs     map[string]*Job
	finished []string        // ids of finished jobs, oldest first
	rechecks map[string]bool // notebooks with a stale-run recheck scheduled
}

// nbKernel is the kernel a notebook's runs use. One holder at a time (a job, or scratch code)
// takes sem; the fields below are the holder's.
type nbKernel struct {
	sem      chan struct{}
	session  KernelSession
	ch       KernelChannel
	restarts int       // ch.Restarts() when last looked at
	note     string    // something the next result must mention (the kernel was replaced)
	lost     string    // why the kernel is known gone (set by a run that saw it die)
	lastUsed time.Time // when the last holder let go
	stale    bool      // the kernel restarted since ch connected: connect again before the next run
}

// lock takes the kernel, waiting for the holder before (a job) as long as ctx allows.
func (k *nbKernel) lock(ctx context.Context) error {
	select {
	case k.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the notebook's kernel (a run holds it): %w", ctx.Err())
	}
}

func (k *nbKernel) tryLock() bool {
	select {
	case k.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (k *nbKernel) unlock() {
	k.lastUsed = time.Now()
	<-k.sem
}

// restartedNote reports (once) that the kernel restarted since we last looked.
func (k *nbKernel) restartedNote() string {
	if k.ch == nil {
		return ""
	}
	if n := k.ch.Restarts(); n != k.restarts {
		k.restarts, k.stale = n, true
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
	if opts.StaleRun <= 0 {
		opts.StaleRun = 60 * time.Second
	}
	if opts.ChannelIdle <= 0 {
		opts.ChannelIdle = 10 * time.Minute
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	life, finish := context.WithCancel(context.Background())
	return &Executor{
		opts: opts, log: opts.Logger.With().Str("component", "executor").Logger(), instance: hex.EncodeToString(b[:]),
		life: life, finish: finish, kernels: map[string]*nbKernel{}, jobs: map[string]*Job{}, rechecks: map[string]bool{},
	}, nil
}

// Run cleans up after earlier instances (cells left "running" by a sidecar that died mid-run)
// whenever a notebook room syncs, and closes idle kernel channels, until ctx ends; then it stops
// every job and closes kernel channels.
func (x *Executor) Run(ctx context.Context) error {
	defer x.Close()
	sub := x.opts.Manager.Subscribe(256)
	defer sub.Close()
	idle := time.NewTicker(min(x.opts.ChannelIdle/4, 30*time.Second))
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-x.life.Done():
			return nil
		case <-idle.C:
			x.closeIdleChannels()
		case e, ok := <-sub.C:
			if !ok {
				return nil
			}
			if e.Kind == EventSynced {
				x.goTracked(func() { x.clearStaleRuns(e.Path) })
			}
		}
	}
}

// track registers work Close must wait for; it fails once Close began.
func (x *Executor) track() (func(), error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, errors.New("bridge: executor stopped")
	}
	x.wg.Add(1)
	return x.wg.Done, nil
}

// goTracked runs fn in a goroutine Close waits for (nothing, once Close began).
func (x *Executor) goTracked(fn func()) {
	done, err := x.track()
	if err != nil {
		return
	}
	go func() {
		defer done()
		fn()
	}()
}

// Close stops every job (the kernels keep running what they were given) and waits for them.
func (x *Executor) Close() {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.finish()
	x.wg.Wait()
	// Every holder of a kernel was tracked and has finished: the channels are ours.
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range x.kernels {
		if k.ch != nil {
			_ = k.ch.Close()
			k.ch = nil
		}
	}
}

// closeIdleChannels closes kernel channels nobody used for ChannelIdle: an open channel counts
// as a connection, and jupyter-server does not cull connected kernels by default.
func (x *Executor) closeIdleChannels() {
	x.mu.Lock()
	ks := make([]*nbKernel, 0, len(x.kernels))
	for _, k := range x.kernels {
		ks = append(ks, k)
	}
	x.mu.Unlock()
	for _, k := range ks {
		if !k.tryLock() {
			continue // in use
		}
		if k.ch != nil && time.Since(k.lastUsed) >= x.opts.ChannelIdle {
			_ = k.ch.Close()
			k.ch = nil
			k.restarts = 0
		}
		<-k.sem // not unlock: closing is not a use
	}
}

// clearStaleRuns resets cells that another sidecar (or an earlier instance of this one) marked
// running and stopped beating for: it died mid-run. Markers still beating are looked at again
// when they would go stale.
func (x *Executor) clearStaleRuns(path string) {
	room := x.opts.Manager.Get(path, ydoc.KindNotebook)
	if room == nil {
		return
	}
	ctx, cancel := context.WithTimeout(x.life, 30*time.Second)
	defer cancel()
	foreign := false
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		m, _ := d.State()[runMarkerKey].(map[string]any)
		for _, v := range m {
			if mm, ok := v.(map[string]any); ok && mm["instance"] != x.instance {
				foreign = true
			}
		}
		return nil
	}); err != nil || !foreign {
		return
	}
	// A marker still beating may be a live run of another sidecar, or the last beat of one that
	// just died: the kernel tells them apart (a run in progress keeps it busy).
	idle := x.kernelIdle(ctx, path)
	var next time.Time
	_, err := room.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		now := time.Now()
		next = time.Time{}
		later := func(t time.Time) {
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
		markers := runMarkers(tx)
		changed := false
		for cellID, m := range markers {
			if m["instance"] == x.instance {
				continue
			}
			if beat := markerBeat(m); !beat.IsZero() && now.Sub(beat) < x.opts.StaleRun {
				since := markerSince(m)
				if !idle || now.Sub(since) < markerSettle {
					// alive, or too young to judge (the request may not have reached the kernel)
					later(beat.Add(x.opts.StaleRun))
					if settled := since.Add(markerSettle); settled.After(now) {
						later(settled)
					} else {
						later(now.Add(markerSettle))
					}
					continue
				}
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
		return
	}
	if !next.IsZero() {
		x.recheckAt(path, next)
	}
}

// recheckAt looks at a notebook's run markers again at t (one pending recheck per notebook).
func (x *Executor) recheckAt(path string, t time.Time) {
	x.mu.Lock()
	if x.rechecks[path] {
		x.mu.Unlock()
		return
	}
	x.rechecks[path] = true
	x.mu.Unlock()
	x.goTracked(func() {
		timer := time.NewTimer(time.Until(t) + 100*time.Millisecond)
		defer timer.Stop()
		select {
		case <-x.life.Done():
		case <-timer.C:
		}
		x.mu.Lock()
		delete(x.rechecks, path)
		x.mu.Unlock()
		if x.life.Err() == nil {
			x.clearStaleRuns(path)
		}
	})
}

// markerSettle is how old a marker must be before an idle kernel proves its run over.
const markerSettle = 5 * time.Second

// kernelIdle reports whether the notebook's kernel runs nothing (or there is none); false when
// the server cannot say.
func (x *Executor) kernelIdle(ctx context.Context, path string) bool {
	sessions, err := x.opts.Kernels.Sessions(ctx)
	if err != nil {
		return false
	}
	for _, s := range sessions {
		if s.Path == path && s.KernelID != "" {
			state, err := x.opts.Kernels.KernelState(ctx, s.KernelID)
			if IsNotFound(err) {
				return true
			}
			return err == nil && state != "busy"
		}
	}
	return true
}

// markerSince is when a run marker was written.
func markerSince(m map[string]any) time.Time {
	if v, ok := m["since"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// markerBeat is when a run marker was last refreshed (its start, for markers without beats).
func markerBeat(m map[string]any) time.Time {
	for _, key := range []string{"beat", "since"} {
		if v, ok := m[key].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
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

	cancelled   atomic.Bool
	begun       atomic.Bool // the kernel began the running cell's request
	interrupted atomic.Bool // an interrupt was sent for the cancel (once)
	done        chan struct{}

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

// JobSummary is a job's progress, cheap to take (no outputs copied).
type JobSummary struct {
	Total, Done int
	Running     int    // index of the cell running, -1 for none
	RunningID   string //
	LastOutput  string // the running cell's last text output, at most its last 500 bytes
}

// Summary returns the job's progress.
func (j *Job) Summary() JobSummary {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := JobSummary{Total: len(j.cells), Running: -1}
	for i, c := range j.cells {
		switch c.Status {
		case CellPending:
		case CellRunning:
			s.Running, s.RunningID = i, c.CellID
			for k := len(c.Outputs) - 1; k >= 0; k-- {
				if t, ok := c.Outputs[k]["text"].(string); ok && strings.TrimSpace(t) != "" {
					if len(t) > 500 {
						t = t[len(t)-500:]
					}
					s.LastOutput = t
					break
				}
			}
		default:
			s.Done++
		}
	}
	return s
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
	// ForkID runs the cells of a fork of the notebook (outputs go into the fork), in the
	// notebook's kernel.
	ForkID string
}

// ErrUnknownJob is returned for job ids the executor does not know (or no longer keeps).
var ErrUnknownJob = errors.New("bridge: unknown execution job")

// Start queues a job running cells (by id, in order) of a notebook and returns at once.
func (x *Executor) Start(ctx context.Context, path string, cellIDs []string, opts RunOptions) (*Job, error) {
	release, err := x.track()
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			release()
		}
	}()
	var room *Room
	if opts.ForkID != "" {
		room, err = x.opts.Manager.OpenFork(ctx, path, ydoc.KindNotebook, opts.ForkID)
	} else {
		room, err = x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	}
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
	started = true
	go func() {
		defer release()
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

// JobIDs returns the ids of the jobs the executor knows (running and recently finished), newest
// first.
func (x *Executor) JobIDs() []string {
	x.mu.Lock()
	jobs := make([]*Job, 0, len(x.jobs))
	for _, j := range x.jobs {
		jobs = append(jobs, j)
	}
	x.mu.Unlock()
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Created.After(jobs[b].Created) })
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
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
	// Interrupt only while the kernel runs our request: before it begins, the kernel may be
	// running someone else's cell (the run interrupts as soon as ours begins).
	if j.begun.Load() {
		if err := x.interruptFor(ctx, j); err != nil {
			return j, err
		}
	}
	return j, nil
}

// interruptFor interrupts the kernel running a cancelled job's cell (once per job).
func (x *Executor) interruptFor(ctx context.Context, j *Job) error {
	j.mu.Lock()
	kernelID := j.kernelID
	j.mu.Unlock()
	if kernelID == "" || !j.interrupted.CompareAndSwap(false, true) {
		return nil
	}
	if err := x.opts.Kernels.Interrupt(ctx, kernelID); err != nil {
		j.interrupted.Store(false)
		return fmt.Errorf("interrupt kernel: %w", err)
	}
	return nil
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
	defer k.unlock()
	j.update(func() {
		j.status, j.note, j.kernelID = JobRunning, note, k.session.KernelID
	})
	final := JobCompleted
	stopped := ""
	ran, notRun := 0, 0
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
		// The kernel may have died with the previous cell: get it back (or a new one) before
		// touching this cell, so a cell that cannot run keeps its outputs.
		if note, err := x.ensureChannel(ctx, room, k, opts.KernelName, false); err != nil {
			stopped = "not run: no kernel: " + err.Error()
			j.update(func() { c.Status, c.Note = CellSkipped, stopped })
			final = JobFailed
			continue
		} else if note != "" {
			j.update(func() { j.note, j.kernelID = joinNotes(j.note, note), k.session.KernelID })
		}
		x.runCell(ctx, j, room, k, c, opts.StopOnError)
		if !c.Started.IsZero() {
			ran++
		} else if c.Status == CellSkipped && strings.HasPrefix(c.Note, "not run:") {
			notRun++
		}
		switch c.Status {
		case CellError, CellAborted:
			if final == JobCompleted {
				final = JobFailed
			}
			if j.cancelled.Load() {
				final = JobCancelled
				j.update(func() { c.Status = CellCancelled })
			} else if opts.StopOnError {
				stopped = "not run: an earlier cell failed (stop_on_error)"
			}
		case CellCancelled:
			final = JobCancelled
		case CellOK:
			if j.cancelled.Load() { // the interrupt came too late (or the code ignored it)
				final = JobCancelled
				j.update(func() { c.Note = joinNotes(c.Note, "it finished before the cancel took effect") })
			}
		}
	}
	j.update(func() {
		j.status, j.ended = final, time.Now()
		if ran == 0 && final == JobCompleted {
			if notRun > 0 {
				j.status = JobFailed
				j.note = joinNotes(j.note, "no cell ran")
			} else {
				j.note = joinNotes(j.note, "nothing to run (no code cell with code)")
			}
		}
	})
}

// acquire returns the notebook's kernel, held for the caller (who unlocks it), with a live
// channel: the session a human's tab uses if there is one (so state is shared), a new kernel if
// the old one died or was culled (the note says so).
func (x *Executor) acquire(ctx context.Context, room *Room, kernelName string) (*nbKernel, string, error) {
	path := room.Path()
	x.mu.Lock()
	k := x.kernels[path]
	if k == nil {
		k = &nbKernel{sem: make(chan struct{}, 1)}
		x.kernels[path] = k
	}
	x.mu.Unlock()
	if err := k.lock(ctx); err != nil {
		return nil, "", err
	}
	note, err := x.ensureChannel(ctx, room, k, kernelName, true)
	if err != nil {
		k.unlock()
		return nil, "", err
	}
	return k, note, nil
}

// ensureChannel gives the held kernel a live channel. probe asks the server whether a kernel
// that looks fine is still there (a kernel can die silently between jobs); only a 404 or a
// "dead" state count as gone — a server hiccup is not a death.
func (x *Executor) ensureChannel(ctx context.Context, room *Room, k *nbKernel, kernelName string, probe bool) (string, error) {
	path := room.Path()
	note := k.note
	k.note = ""
	gone := k.lost
	k.lost = ""
	if k.ch != nil {
		select {
		case <-k.ch.Done():
			// The connection ended (after redialling by itself): the kernel died, or only
			// the connection did.
			_ = k.ch.Close()
			k.ch = nil
			if state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID); IsNotFound(err) || (err == nil && state == "dead") {
				gone = "it died or was shut down"
			}
		default:
			restarted := k.restartedNote()
			alive := true
			if probe {
				state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID)
				alive = !(IsNotFound(err) || (err == nil && state == "dead"))
				if err != nil && alive {
					x.log.Debug().Err(err).Str("kernel", k.session.KernelID).Msg("kernel state unknown; assuming it lives")
				}
			}
			if alive && !k.stale {
				return note, nil
			}
			// Gone; or restarted, and then the server's iopub link to the new process may miss
			// its first messages (ZMQ's slow joiner) until a new connection makes the server
			// nudge it: connect again either way.
			note = joinNotes(note, restarted)
			_ = k.ch.Close()
			k.ch = nil
			if !alive {
				gone = "it died or was shut down"
			}
		}
	}
	// Find the kernel session of the notebook (a human's tab may have one), or start one.
	sessions, err := x.opts.Kernels.Sessions(ctx)
	if err != nil {
		return "", fmt.Errorf("list kernel sessions: %w", err)
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
			return "", fmt.Errorf("start a kernel: %w", err)
		}
		found = &s
	}
	switch {
	case k.session.KernelID == "" || k.session.KernelID == found.KernelID:
		// first use, or the same kernel again after its connection dropped
	case gone != "":
		note = joinNotes(note, fmt.Sprintf("the notebook's kernel (%s) was gone (%s); a new kernel was started, so variables from earlier runs are lost", k.session.KernelID, gone))
	default:
		note = joinNotes(note, "the notebook now has another kernel; variables from earlier runs are lost")
	}
	ch, err := x.opts.Kernels.Connect(ctx, found.KernelID)
	if err != nil {
		return "", fmt.Errorf("connect to kernel %s: %w", found.KernelID, err)
	}
	// Outputs sent before the server's iopub link works would be lost. A kernel busy with
	// someone else's cell answers only after it: do not wait for that.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := ch.Ready(rctx); err != nil && ctx.Err() == nil {
		x.log.Debug().Err(err).Str("kernel", found.KernelID).Msg("kernel not ready within 5s (busy?); going on")
	}
	cancel()
	k.session, k.ch, k.restarts, k.stale = *found, ch, ch.Restarts(), false
	return note, nil
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
		now := time.Now().UTC().Format(time.RFC3339Nano)
		markers[c.CellID] = map[string]any{"owner": x.opts.Username, "instance": x.instance, "since": now, "beat": now}
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
	inRoom := 0 // outputs the room holds by our account
	write := func(ops []outputOp) {
		if len(ops) == 0 {
			return
		}
		if !cellGone {
			cellGone = x.writeOutputs(ctx, room, c.CellID, ops, inRoom, model.outputs)
			inRoom = len(model.outputs)
		}
		j.update(func() { c.Outputs = applyOps(c.Outputs, ops) })
	}
	beat := func() {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _ = room.Apply(bctx, func(tx *ydoc.Txn, _ History, _ bool) error {
			markers := runMarkers(tx)
			if m, ok := markers[c.CellID]; ok && m["instance"] == x.instance {
				m["beat"] = time.Now().UTC().Format(time.RFC3339Nano)
				return setRunMarkers(tx, markers)
			}
			return nil
		})
	}
	reply, _, lost := x.attempt(ctx, j, k, cell.Source, c.CellID, stopOnError, model, write, beat)
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
// started reports whether the kernel began it (any of its messages arrived); lost says why it
// did not complete. A request is never sent twice: after a kernel restart nobody can tell
// whether code the old process received had partly run (its last outputs die with it).
//
// When the kernel restarts before our request began, the request may still reach the new
// process (ZMQ queues it): a kernel_info_request sent behind it on the same (in-order) shell
// channel says when the new kernel has taken everything sent before; if ours has not begun by
// then, it is lost.
func (x *Executor) attempt(ctx context.Context, j *Job, k *nbKernel, code, cellID string, stopOnError bool, model *outputModel, write func([]outputOp), beat func()) (reply map[string]any, started bool, lost string) {
	running, err := k.ch.Execute(ctx, code, true, stopOnError, map[string]any{"cellId": cellID})
	if err != nil {
		return nil, false, "not sent: the kernel connection failed: " + err.Error()
	}
	completed := false
	defer func() {
		j.begun.Store(false)
		if !completed {
			running.Abandon()
		}
	}()
	var (
		info       chan error // the kernel_info_request after a restart, while ours had not begun
		stopInfo   context.CancelFunc
		lostAt     time.Time // the new kernel answered: our request is lost unless it begins by then
		idleAt     time.Time // the kernel went idle for our request, with no reply yet
		replyAt    time.Time // the reply came, the idle status not yet
		idleLooks  int       // heartbeats in a row that found the kernel idle
		lastMsg    = time.Now()
		lastBeat   = time.Now()
		beatEvery  = x.opts.StaleRun / 3
		replyGrace = 3 * time.Second
	)
	defer func() {
		if stopInfo != nil {
			stopInfo()
		}
	}()
	for {
		wait := x.opts.Heartbeat
		if info != nil || !lostAt.IsZero() {
			wait = min(wait, 100*time.Millisecond)
		}
		if !idleAt.IsZero() {
			wait = min(wait, max(time.Until(idleAt.Add(replyGrace)), time.Millisecond))
		}
		if !replyAt.IsZero() {
			wait = min(wait, max(time.Until(replyAt.Add(replyGrace)), time.Millisecond))
		}
		hb, cancel := context.WithTimeout(ctx, wait)
		msgs, done, nerr := running.Next(hb)
		cancel()
		if ctx.Err() != nil {
			return reply, started, "the sidecar is shutting down; the kernel may still be running this cell"
		}
		var ops []outputOp
		for _, m := range msgs {
			lastMsg = time.Now()
			switch {
			case m.Type == MsgKernelRestarting:
				if started {
					return reply, true, "the kernel restarted during the run (it died or was restarted); its variables were lost"
				}
				if info == nil && lostAt.IsZero() {
					ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
					stopInfo, info = cancel, make(chan error, 1)
					ch := k.ch
					go func() { info <- ch.KernelInfo(ictx) }() // ends with ictx at the latest
				}
			case m.Channel == "shell" && m.Type == "execute_reply":
				started, replyAt = true, time.Now()
				_ = json.Unmarshal(m.Content, &reply)
			case m.Channel == "iopub":
				started = true
				if m.Type == "status" && executionState(m.Content) == "idle" {
					idleAt = time.Now()
				}
				ops = append(ops, model.apply(m)...)
			}
		}
		if started && !j.begun.Load() {
			j.begun.Store(true)
		}
		write(ops)
		if started && j.cancelled.Load() {
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := x.interruptFor(ictx, j); err != nil {
				x.log.Warn().Err(err).Str("job", j.ID).Msg("could not interrupt a cancelled run")
			}
			cancel()
		}
		if done {
			if nerr != nil { // the connection or the kernel went away for good
				k.lost = "its connection was lost during a run"
				return reply, started, "the kernel connection was lost during the run: " + nerr.Error()
			}
			completed = true
			return reply, started, ""
		}
		if !idleAt.IsZero() && reply == nil && time.Since(idleAt) >= replyGrace {
			return nil, true, "the kernel went idle without replying (it was restarted or interrupted)"
		}
		if !replyAt.IsZero() && idleAt.IsZero() && time.Since(replyAt) >= replyGrace {
			// Right after a restart the server's iopub link may not be up yet: the reply is
			// there, the idle status (and maybe late outputs) never come. A failed reply still
			// says why; the cell shows it.
			write(model.errorFromReply(reply))
			return reply, true, ""
		}
		if info != nil {
			select {
			case ierr := <-info:
				info = nil
				switch {
				case started:
				case ierr != nil:
					return nil, false, "the kernel restarted and did not answer afterwards: " + ierr.Error()
				default:
					// iopub and shell are separate streams: give our request's first messages a
					// moment to arrive before calling it lost.
					lostAt = time.Now().Add(time.Second)
				}
			default:
			}
		}
		if !lostAt.IsZero() && !started && time.Now().After(lostAt) {
			return nil, false, "the kernel restarted before this cell began, and the cell did not run in the new kernel " +
				"(it may have partly run in the old one before it died); it was not sent again"
		}
		if started && time.Since(lastBeat) >= beatEvery {
			beat()
			lastBeat = time.Now()
		}
		// Silent for a while: is the kernel still there? Only a 404 or "dead" says no. A kernel
		// idle at two looks while our begun request never ended has lost it (a restart whose
		// signal did not reach us).
		if info == nil && lostAt.IsZero() && time.Since(lastMsg) >= x.opts.Heartbeat {
			lastMsg = time.Now()
			state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID)
			if IsNotFound(err) || (err == nil && state == "dead") {
				k.lost = "it died during a run"
				_ = k.ch.Close()
				return reply, started, "the kernel died during the run"
			}
			if err != nil {
				x.log.Debug().Err(err).Str("kernel", k.session.KernelID).Msg("kernel state unknown during a run; waiting on")
			}
			if started && err == nil && state == "idle" {
				idleLooks++
				if idleLooks >= 2 {
					return reply, true, "the kernel is idle but this cell never finished (the kernel was probably restarted)"
				}
			} else {
				idleLooks = 0
			}
		}
	}
}

func executionState(content json.RawMessage) string {
	var st struct {
		ExecutionState string `json:"execution_state"`
	}
	_ = json.Unmarshal(content, &st)
	return st.ExecutionState
}

// writeOutputs applies output operations to the cell in one transaction; it reports true when
// the cell is gone (nothing more will be written). inRoom is how many outputs the room should
// hold before the operations; when it holds something else (a human cleared the outputs, or ran
// the cell too), the cell's outputs are rewritten from the model instead, so the room shows
// what the run produced and nothing is dropped.
func (x *Executor) writeOutputs(ctx context.Context, room *Room, cellID string, ops []outputOp, inRoom int, all []map[string]any) bool {
	gone := false
	_, err := room.Apply(ctx, func(tx *ydoc.Txn, _ History, _ bool) error {
		i := tx.CellIndex(cellID)
		if i < 0 {
			gone = true
			return nil
		}
		if opsFit(tx, i, ops, inRoom) {
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
		}
		if err := tx.ClearOutputs(i); err != nil {
			return err
		}
		for _, o := range all {
			if err := tx.InsertOutput(i, cloneOutput(o)); err != nil {
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

// opsFit checks, before changing anything, that the cell's outputs are what the operations
// expect: the count, and a stream of the right kind where text is rewritten.
func opsFit(tx *ydoc.Txn, i int, ops []outputOp, inRoom int) bool {
	n, err := tx.NumOutputs(i)
	if err != nil || n != inRoom {
		return false
	}
	for _, op := range ops {
		switch op.kind {
		case opClear:
			n = 0
		case opInsert:
			n++
		case opText, opSwap:
			if op.index >= n {
				return false
			}
			if op.kind == opText && op.index < inRoom {
				if typ, _, err := tx.OutputKind(i, op.index); err != nil || typ != "stream" {
					return false
				}
			}
		}
	}
	return true
}

// applyOps folds output operations into a job's copy of the outputs.
func applyOps(outs []map[string]any, ops []outputOp) []map[string]any {
	for _, op := range ops {
		switch op.kind {
		case opClear:
			outs = nil
		case opInsert:
			outs = append(outs, cloneOutput(op.out))
		case opText:
			if op.index < len(outs) {
				outs[op.index]["text"] = op.text
			}
		case opSwap:
			if op.index < len(outs) {
				outs[op.index] = cloneOutput(op.out)
			}
		}
	}
	return outs
}

func cloneOutputs(outs []map[string]any) []map[string]any {
	c := make([]map[string]any, len(outs))
	for i, o := range outs {
		c[i] = cloneOutput(o)
	}
	return c
}

// RunCode runs scratch code in a notebook's kernel without touching the notebook (no outputs
// written, no execution count). It waits until the code finished or ctx ends; code still
// running then goes on in the kernel, its output no longer collected.
func (x *Executor) RunCode(ctx context.Context, path, code, kernelName string) (CellRun, string, error) {
	release, err := x.track()
	if err != nil {
		return CellRun{}, "", err
	}
	defer release()
	room, err := x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		return CellRun{}, "", err
	}
	k, note, err := x.acquire(ctx, room, kernelName)
	if err != nil {
		return CellRun{}, "", err
	}
	defer k.unlock()
	running, err := k.ch.Execute(ctx, code, false, false, nil)
	if err != nil {
		return CellRun{}, note, err
	}
	model := &outputModel{}
	run := CellRun{Status: CellRunning, Started: time.Now()}
	started := false
	var replyAt time.Time
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !replyAt.IsZero() { // the idle status may never come (see attempt)
			wctx, cancel = context.WithDeadline(ctx, replyAt.Add(3*time.Second))
		}
		msgs, done, err := running.Next(wctx)
		cancel()
		if err != nil && !done && ctx.Err() == nil && len(msgs) == 0 {
			running.Abandon()
			run.Outputs, run.Ended = model.outputs, time.Now()
			return run, note, nil
		}
		for _, m := range msgs {
			switch {
			case m.Type == MsgKernelRestarting:
				running.Abandon()
				run.Outputs, run.Status, run.Ended = model.outputs, CellAborted, time.Now()
				if started {
					run.Note = "the kernel restarted while the code ran; its variables were lost"
				} else {
					run.Note = "the kernel restarted before the code began; it was not run (it may still run in the new kernel, unwatched)"
				}
				return run, joinNotes(note, k.restartedNote()), nil
			case m.Channel == "shell" && m.Type == "execute_reply":
				started, replyAt = true, time.Now()
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
				started = true
				model.apply(m)
			}
		}
		run.Outputs = model.outputs
		if err != nil {
			if done {
				run.Status, run.Note = CellAborted, "the kernel restarted or died: "+err.Error()
				k.lost = "its connection was lost during a run"
				return run, note, nil
			}
			running.Abandon()
			run.Note = "still running in the kernel when the wait ended (its output is no longer collected)"
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
