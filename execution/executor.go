package execution

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ExecutorOptions configure an Executor. Zero values get defaults.
type ExecutorOptions struct {
	Manager *bridge.Manager
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
		opts.Username = bridge.DefaultUser().Username
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
			if e.Kind == bridge.EventSynced {
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
		return nil, errors.New("execution: executor stopped")
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

// ErrUnknownJob is returned for job ids the executor does not know (or no longer keeps).
var ErrUnknownJob = errors.New("execution: unknown execution job")

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
	var room *bridge.Room
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
var ErrNoKernel = errors.New("execution: the notebook has no running kernel")

func (x *Executor) sessionFor(ctx context.Context, path string) (KernelSession, error) {
	path, err := bridge.CleanPath(path)
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
