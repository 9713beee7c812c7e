package execution

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ClientOptions configure a ClientExecutor. Zero values get defaults.
type ClientOptions struct {
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
	// WriteWait bounds how long a run waits for the server to confirm one of its writes into
	// the cell (5s). A write still unconfirmed then is in the replica and on its way; one the
	// room could not take (it is reconnecting) is taken back and written again with what came
	// since. The run goes on meanwhile either way.
	WriteWait time.Duration
	// CheckIdleKernel: a kernel kept from an earlier job is checked with the server (GET
	// /api/kernels/{id}, which the job's first request waits for) only when it has been idle at
	// least this long (3s; negative: before every job). jupyter-server's restarter looks at its
	// kernels every 3 s (KernelRestarter.time_to_dead), so of a death more recent than that the
	// server knows nothing either: the check could not tell, and the run's own heartbeat
	// (Heartbeat) follows a kernel that died. Back-to-back runs skip that round trip.
	CheckIdleKernel time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

// ClientExecutor is the Executor that runs cells as the kernel's client, the way JupyterLab does
// with jupyter-collaboration: it sends each cell's execute_request over the notebook's kernel
// websocket and writes what comes back into the notebook's room itself.
//
// It owns, per notebook, the kernel its runs use (the session a human's tab uses when there is
// one, so state is shared; a new one when it died; one holder at a time, so jobs on a notebook
// queue while jobs on different notebooks run in parallel), the jobs it keeps for polling, and
// its run markers in the rooms' state (which let another sidecar reset a cell left [*] by one
// that died). It reaches rooms only through bridge's public API (Manager, Room) and the server
// only through Kernels.
//
// How it is driven: Run, owned by cmd, cleans up after dead sidecars whenever a notebook room
// syncs and closes idle kernel channels until its context ends, then Close stops every job.
// Start gives each job a goroutine that takes the notebook's kernel and runs the cells one by
// one; each cell is a machine (a pure state machine: kernel messages, room write outcomes and
// ticks in, actions out) carried out by drive, a small IO loop in which nothing blocks (each
// room write, REST call and kernel read waits in a goroutine of its own and comes back as an
// input). Room writes wait for the server at most WriteWait, so a room that reconnects holds up
// neither the kernel's messages nor the marker's beat: outputs accumulate in the run and reach
// the cell when the room is back, none lost, none twice.
type ClientExecutor struct {
	*jobBook // the jobs kept for polling, the goroutines Close waits for, life
	opts     ClientOptions
	log      zerolog.Logger
	instance string

	mu       sync.Mutex
	kernels  map[string]*nbKernel // notebook path → its kernel
	rechecks map[string]bool      // notebooks with a stale-run recheck scheduled
}

// runMarkerKey is the state-map key recording our runs in progress: cell id → owner. The state
// map is not saved to the file.
const runMarkerKey = "jupyter_collab_mcp_runs"

// NewClientExecutor validates options. It starts nothing; Run does.
func NewClientExecutor(opts ClientOptions) (*ClientExecutor, error) {
	if opts.Manager == nil || opts.Kernels == nil {
		return nil, errors.New("execution: manager and kernels are required")
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
	if opts.WriteWait <= 0 {
		opts.WriteWait = defaultWriteWait
	}
	if opts.CheckIdleKernel == 0 {
		opts.CheckIdleKernel = 3 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &ClientExecutor{
		jobBook: newJobBook(opts.KeepJobs, opts.Now),
		opts:    opts, log: opts.Logger.With().Str(logfield.Component, "executor").Logger(), instance: hex.EncodeToString(b[:]),
		kernels: map[string]*nbKernel{}, rechecks: map[string]bool{},
	}, nil
}

// Run cleans up after earlier instances (cells left "running" by a sidecar that died mid-run)
// whenever a notebook room syncs, and closes idle kernel channels, until ctx ends; then it stops
// every job and closes kernel channels.
func (x *ClientExecutor) Run(ctx context.Context) error {
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

// Close stops every job (the kernels keep running what they were given) and waits for them.
func (x *ClientExecutor) Close() {
	x.jobBook.close()
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

// now reads the executor's clock.
func (x *ClientExecutor) now() time.Time { return x.opts.Now() }

// Start queues a job running cells (by id, in order) of a notebook and returns at once.
func (x *ClientExecutor) Start(ctx context.Context, path string, cellIDs []string, opts RunOptions) (*Job, error) {
	open := func(ctx context.Context) (*bridge.Room, error) {
		if opts.ForkID != "" {
			return x.opts.Manager.OpenFork(ctx, path, ydoc.KindNotebook, opts.ForkID)
		}
		return x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	}
	return x.start(ctx, cellIDs, open, func(cj *trackedJob, room *bridge.Room) { x.runJob(cj, room, opts) })
}

// Interrupt interrupts the notebook's kernel (the human's runs too: it is their kernel).
func (x *ClientExecutor) Interrupt(ctx context.Context, path string) (KernelSession, error) {
	return interruptNotebook(ctx, x.opts.Kernels, path)
}

// Restart restarts the notebook's kernel; its state is lost.
func (x *ClientExecutor) Restart(ctx context.Context, path string) (KernelSession, error) {
	return restartNotebook(ctx, x.opts.Kernels, path)
}
