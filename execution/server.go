package execution

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ServerKernels is what ServerExecutor needs from a jupyter-server whose collaboration engine runs
// cells itself (jupyter-server-documents): kernel sessions and control, and the server's execute
// API. bridge/jupyterserver implements it; tests use fakes.
type ServerKernels interface {
	// KernelControl's StartSession, when it creates a session, also attaches its kernel to the
	// notebook's room on the server.
	KernelControl
	// ExecuteCells asks the server to run cells of a notebook room in a kernel, each only if
	// its source on the server is still the given one. It returns once they are queued; the
	// server writes outputs, execution_state and execution_count into the cells. Errors:
	// ErrSourceChanged, ErrPredecessorTimeout, ErrRoomWithoutKernel, or the server's refusal.
	ExecuteCells(ctx context.Context, kernelID, roomID string, cells []CellSource, requestID string) error
	// AttachSession makes the server attach the session's kernel to its notebook's room again
	// (a room the server freed and loaded again has no kernel).
	AttachSession(ctx context.Context, s KernelSession) error
	// ConnectScratch opens a kernel channel of the sidecar's own, for scratch code (on
	// jupyter-server-documents a v1 kernel websocket; see scratch_server.go for what opening
	// one does to the others).
	ConnectScratch(ctx context.Context, kernelID string) (KernelChannel, error)
}

// CellSource is a cell to run on the server and the source it must have when it runs.
type CellSource struct {
	CellID string
	Source string
}

// Errors of ServerKernels.ExecuteCells. Nothing was queued when they are returned.
var (
	// ErrSourceChanged: the cell's source on the server is not the one sent (someone edited it,
	// or the edit has not reached the replica yet).
	ErrSourceChanged = errors.New("execution: the cell's source on the server is not the one sent")
	// ErrPredecessorTimeout: the server waited in vain for the request this one was to follow.
	ErrPredecessorTimeout = errors.New("execution: the server timed out waiting for the previous request")
	// ErrRoomWithoutKernel: the notebook's room on the server has no kernel attached.
	ErrRoomWithoutKernel = errors.New("execution: the notebook's room on the server has no kernel attached")
)

// ServerOptions configure a ServerExecutor. Zero values get defaults.
type ServerOptions struct {
	Manager *bridge.Manager
	Kernels ServerKernels
	Logger  zerolog.Logger
	// Heartbeat is how often a run with no news looks at its cell and its kernel (5s).
	Heartbeat time.Duration
	// EndGrace is how long a cell the server set idle may go without its execution_count
	// before the run counts as ended without a result (3s). The server writes the count right
	// after the idle state, in the next transaction.
	EndGrace time.Duration
	// SendRetries bounds the attempts at a cell whose source the server holds differently
	// (409; the replica may lag behind an edit) (3).
	SendRetries int
	// KeepJobs bounds the finished jobs kept for polling (200).
	KeepJobs int
	// Now is the clock (time.Now).
	Now func() time.Time
}

// ServerExecutor is the Executor for collaboration engines that run cells on the server
// (jupyter-server-documents' POST /api/kernels/{id}/execute): the server runs each cell in the
// kernel attached to the notebook's room and writes its outputs, execution_state and
// execution_count into the document, so every collaborator — the sidecar included — sees one set
// of outputs, written once, by the server. The sidecar writes nothing into a cell it runs.
//
// It owns, per notebook, the kernel session its runs use (the one a human's tab uses when there
// is one; one started when there is none; attached to the room again when the server freed the
// room) and the order of its jobs (one at a time per notebook; notebooks in parallel), and the
// jobs it keeps for polling, recorded exactly as ClientExecutor records them (Job, CellRun).
//
// How it is driven: Start gives each job a goroutine that takes the notebook, finds its kernel
// session and sends its cells one by one — the source's hash with each, so the server refuses a
// cell edited since (409) — and follows each in the document through the room's change events:
// the server marks the cell running when it queues it, writes its outputs as they come, then
// idle and the count. The job reports what the document shows: the outputs as a human sees them
// (consecutive streams merged, \r and \b applied), the count, and error when an error output
// came. Cancel interrupts the kernel only once the cell is the one running (the cells queued
// before it on the server have ended, or it has output), never while it still waits behind
// someone else's. Run waits until its context ends; Close stops following every job (the server
// goes on running what it was given).
type ServerExecutor struct {
	*jobBook // the jobs kept for polling, the goroutines Close waits for, life
	opts     ServerOptions
	log      zerolog.Logger
	// scratch drives scratch code (RunCode; scratch_server.go) on a channel ServerExecutor opens:
	// only its run machinery is used, never its jobs or its Run.
	scratch *ClientExecutor

	mu        sync.Mutex
	notebooks map[string]*nbServer
}

// nbServer is a notebook's place in the executor: one job at a time holds sem; session is the
// holder's.
type nbServer struct {
	sem     chan struct{}
	session KernelSession // the kernel session the last job used
	// lastCount is the highest execution count seen from session's kernel. The server does not
	// say when it restarted a kernel, but a restarted kernel counts from 1 again: a run whose
	// count is not above it ran in a new process.
	lastCount int
}

var _ Executor = (*ServerExecutor)(nil)

// NewServerExecutor validates options. It starts nothing.
func NewServerExecutor(opts ServerOptions) (*ServerExecutor, error) {
	if opts.Manager == nil || opts.Kernels == nil {
		return nil, errors.New("execution: manager and kernels are required")
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 5 * time.Second
	}
	if opts.EndGrace <= 0 {
		opts.EndGrace = 3 * time.Second
	}
	if opts.SendRetries <= 0 {
		opts.SendRetries = 3
	}
	if opts.KeepJobs <= 0 {
		opts.KeepJobs = 200
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	scratch, err := NewClientExecutor(ClientOptions{Manager: opts.Manager, Kernels: scratchKernels{opts.Kernels},
		Logger: opts.Logger, Heartbeat: opts.Heartbeat, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	return &ServerExecutor{jobBook: newJobBook(opts.KeepJobs, opts.Now), opts: opts,
		log:       opts.Logger.With().Str(logfield.Component, "executor").Str("executor", "server").Logger(),
		notebooks: map[string]*nbServer{}, scratch: scratch}, nil
}

// scratchKernels is the Kernels of ServerExecutor's scratch driver: the server's kernel control,
// and its scratch channels.
type scratchKernels struct{ ServerKernels }

func (k scratchKernels) Connect(ctx context.Context, id string) (KernelChannel, error) {
	return k.ConnectScratch(ctx, id)
}

// Run waits until ctx ends, then stops following every job.
func (x *ServerExecutor) Run(ctx context.Context) error {
	defer x.Close()
	select {
	case <-ctx.Done():
	case <-x.life.Done():
	}
	return nil
}

// Close stops following every job (the server goes on running what it was given) and waits.
func (x *ServerExecutor) Close() {
	x.jobBook.close() // scratch runs are tracked here: none is left
	x.scratch.Close()
}

func (x *ServerExecutor) now() time.Time { return x.opts.Now() }

// Start queues a job running cells (by id, in order) of a notebook and returns at once.
func (x *ServerExecutor) Start(ctx context.Context, path string, cellIDs []string, opts RunOptions) (*Job, error) {
	if opts.ForkID != "" {
		return nil, fmt.Errorf("%w: the server runs cells of its own documents only, and has no forks", bridge.ErrNoForks)
	}
	open := func(ctx context.Context) (*bridge.Room, error) {
		return x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	}
	return x.start(ctx, cellIDs, open, func(cj *trackedJob, room *bridge.Room) { x.runJob(cj, room, opts) })
}

// Interrupt interrupts the notebook's kernel, whatever it runs.
func (x *ServerExecutor) Interrupt(ctx context.Context, path string) (KernelSession, error) {
	return interruptNotebook(ctx, x.opts.Kernels, path)
}

// Restart restarts the notebook's kernel; its state is lost. Then it attaches the kernel to the
// notebook's room again: jupyter-server-documents 0.3.3 does not notice a restart through the
// REST API, and its room's runs would wait forever on the old process (measured; see
// docs/engines.md).
func (x *ServerExecutor) Restart(ctx context.Context, path string) (KernelSession, error) {
	s, err := restartNotebook(ctx, x.opts.Kernels, path)
	if err != nil {
		return s, err
	}
	if err := x.opts.Kernels.AttachSession(ctx, s); err != nil {
		return s, fmt.Errorf("the kernel restarted, but attaching it to the notebook's room again failed (runs may hang until it is): %w", err)
	}
	return s, nil
}

// notebook returns the notebook's place, held for the caller (who releases it).
func (x *ServerExecutor) notebook(ctx context.Context, path string) (*nbServer, error) {
	x.mu.Lock()
	nb := x.notebooks[path]
	if nb == nil {
		nb = &nbServer{sem: make(chan struct{}, 1)}
		x.notebooks[path] = nb
	}
	x.mu.Unlock()
	select {
	case nb.sem <- struct{}{}:
		return nb, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the notebook (a run holds it): %w", ctx.Err())
	}
}

// runJob runs a job's cells in order and finishes the job.
func (x *ServerExecutor) runJob(cj *trackedJob, room *bridge.Room, opts RunOptions) {
	j := cj.job
	ctx := x.life
	var nb *nbServer
	finish := x.finisher(j, func() {
		if nb != nil {
			<-nb.sem
			nb = nil
		}
	})
	defer finish(func(s *JobState) { s.Status, s.Ended = JobFailed, x.now() }) // only if it did not finish (a panic)
	notRun := func(note string) {
		finish(func(s *JobState) {
			s.Status, s.Ended, s.Note = JobFailed, x.now(), note
			for i := range s.Cells {
				s.Cells[i].Status, s.Cells[i].Note = CellSkipped, "not run: "+note
			}
		})
	}
	var err error
	if nb, err = x.notebook(ctx, room.Path()); err != nil {
		notRun(err.Error())
		return
	}
	note, err := x.session(ctx, room, nb, opts.KernelName)
	if err != nil {
		notRun("no kernel: " + err.Error())
		return
	}
	j.Update(func(s *JobState) { s.Status, s.Note, s.KernelID = JobRunning, note, nb.session.KernelID })
	status, jobNote := runCells(ctx, cj, opts.StopOnError, func(i int, _ *tally) (CellRun, *CellRun) {
		run := x.runCell(ctx, cj, i, room, nb)
		if c := run.ExecutionCount; c != nil {
			if *c <= nb.lastCount {
				const note = "the kernel restarted (it died or was restarted); variables from earlier runs are lost"
				j.Update(func(s *JobState) { s.Note = joinNotes(s.Note, note) })
				x.kernelNotice(room.Path(), bridge.NoticeNotice, "restarted", nb.session.KernelID, note)
			}
			nb.lastCount = *c
		}
		if run.Status == CellAborted && strings.Contains(run.Note, "kernel") {
			// The run was lost because the kernel process ended (the server restarted it, or it
			// died): say so on the job, not only on the cell. The next count is no guide: the
			// new process may already have run the lost cell itself (jupyter-server-documents
			// 0.3.3 can hand it the queued cell when the kernel is attached again), so the
			// count our next run gets can be above the last one we saw.
			j.Update(func(s *JobState) { s.Note = joinNotes(s.Note, noteKernelLostInRun) })
			x.kernelNotice(room.Path(), bridge.NoticeWarning, "lost", nb.session.KernelID, "the kernel was lost during a run: "+run.Note)
			nb.lastCount = 0
		}
		return run, nil
	})
	kernelID := nb.session.KernelID
	finish(func(s *JobState) {
		s.Status, s.Ended, s.Note, s.KernelID = status, x.now(), joinNotes(s.Note, jobNote), kernelID
	})
}

// noteKernelLostInRun is the job's note when a cell's run was lost with its kernel process.
const noteKernelLostInRun = "the kernel restarted or died during this job; variables from earlier runs are lost"

// session finds the notebook's kernel session (the one a human's tab uses, if any) or starts
// one, and says what the caller must know (the kernel changed since the notebook's last job).
func (x *ServerExecutor) session(ctx context.Context, room *bridge.Room, nb *nbServer, kernelName string) (string, error) {
	path := room.Path()
	found, err := liveSession(ctx, x.opts.Kernels, room, kernelName)
	if err != nil {
		return "", err
	}
	note := ""
	if old := nb.session.KernelID; old != "" && old != found.KernelID {
		note = "the notebook now has another kernel; variables from earlier runs are lost"
		level := bridge.NoticeNotice
		if _, err := x.opts.Kernels.KernelState(ctx, old); bridge.IsNotFound(err) {
			note = fmt.Sprintf("the notebook's kernel (%s) was gone; a new kernel was started, so variables from earlier runs are lost", old)
			level = bridge.NoticeWarning
		}
		x.kernelNotice(path, level, "replaced", found.KernelID, note)
	}
	if nb.session.KernelID != found.KernelID {
		nb.lastCount = 0
	}
	nb.session = found
	return note, nil
}

// kernelNotice tells agents (bridge.Manager.Notify) what happened to a notebook's kernel, as
// ClientExecutor does: event is "restarted", "lost" or "replaced".
func (x *ServerExecutor) kernelNotice(path string, level bridge.NoticeLevel, event, kernelID, msg string) {
	kernelNotice(x.opts.Manager, path, level, event, kernelID, msg)
}

// runCell runs the i-th cell of a job on the server and follows it in the document.
func (x *ServerExecutor) runCell(ctx context.Context, cj *trackedJob, i int, room *bridge.Room, nb *nbServer) CellRun {
	id := cj.cellIDs[i]
	skipped := func(idx int, note string) CellRun {
		return CellRun{CellID: id, Index: idx, Status: CellSkipped, Note: note}
	}
	cell, idx, skip := codeCell(ctx, room, id)
	switch {
	case skip != nil:
		return *skip
	case strings.TrimSpace(cell.Source) == "":
		// As JupyterLab does: an empty cell is only cleared, nothing is sent.
		// A write of the run, not an agent's edit (not undoable); it reads only id, so running it
		// again after a reset is harmless.
		if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
			i := tx.CellIndex(id)
			if i < 0 {
				return errCellGone
			}
			if err := tx.ClearOutputs(i); err != nil {
				return err
			}
			return tx.SetExecutionCount(i, nil)
		})); err != nil {
			return skipped(idx, "not run: "+err.Error())
		}
		return skipped(idx, "empty cell (outputs cleared)")
	}
	// Subscribe before sending: every change the server makes after queueing the cell is seen.
	sub := room.Subscribe(4096)
	defer sub.Close()
	before, err := look(ctx, room, id)
	if err != nil {
		return skipped(idx, "not run: "+err.Error())
	}
	sent, why := x.send(ctx, room, nb, id, cell.Source)
	if why != "" {
		return skipped(idx, why)
	}
	cj.job.Update(func(s *JobState) {
		c := &s.Cells[i]
		c.Index, c.Status, c.Started = idx, CellRunning, sent
		s.KernelID = nb.session.KernelID
	})
	f := &follower{x: x, ctx: ctx, cj: cj, cell: i, room: room, id: id, kernelID: nb.session.KernelID, started: sent,
		preds: map[string]bool{}, cancel: cj.cancelC, index: idx}
	for _, b := range before.busy {
		f.preds[b] = true
	}
	f.countBefore = before.count
	if before.state == "running" {
		// The cell was already queued or running (a human ran it): the first count the server
		// writes belongs to that run.
		f.skipCounts = 1
	}
	return f.run(sub)
}

// send asks the server to run the cell with the source the replica holds. A 409 (the server
// holds another source: the replica may lag behind an edit) is tried again with the source the
// replica holds by then; a room without a kernel gets its session attached again, once. It
// returns when the server queued the cell, or why it did not.
func (x *ServerExecutor) send(ctx context.Context, room *bridge.Room, nb *nbServer, id, source string) (time.Time, string) {
	attached := false
	for attempt := 1; ; attempt++ {
		at := x.now()
		err := x.opts.Kernels.ExecuteCells(ctx, nb.session.KernelID, room.Info().RoomID, []CellSource{{CellID: id, Source: source}}, newRequestID())
		switch {
		case err == nil:
			return at, ""
		case errors.Is(err, ErrRoomWithoutKernel) && !attached:
			attached = true
			x.log.Info().Str(logfield.Path, room.Path()).Str(logfield.Kernel, nb.session.KernelID).Msg("the notebook's room on the server has no kernel (the room was freed and loaded again?): attaching the session's kernel")
			if aerr := x.opts.Kernels.AttachSession(ctx, nb.session); aerr != nil {
				if !bridge.IsNotFound(aerr) {
					return time.Time{}, "not run: the notebook's room on the server has no kernel, and attaching it failed: " + aerr.Error()
				}
				// The session is gone: start one (which attaches its kernel).
				if _, serr := x.session(ctx, room, nb, ""); serr != nil {
					return time.Time{}, "not run: no kernel: " + serr.Error()
				}
			}
		case errors.Is(err, ErrSourceChanged) && attempt < x.opts.SendRetries:
			x.waitChange(ctx, room, id, source)
			cell, idx, cerr := cellInfo(ctx, room, id)
			switch {
			case cerr != nil:
				return time.Time{}, "not run: " + cerr.Error()
			case idx < 0:
				return time.Time{}, "not run: the cell no longer exists"
			}
			source = cell.Source
		case errors.Is(err, ErrSourceChanged):
			return time.Time{}, "not run: the server holds another source for this cell than the sidecar's replica (someone is editing it); read it and run it again"
		case errors.Is(err, ErrPredecessorTimeout):
			return time.Time{}, "not run: the server timed out waiting for the request this one was to follow; run it again"
		case errors.Is(err, ErrRoomWithoutKernel):
			return time.Time{}, "not run: the notebook's room on the server has no kernel attached, even after attaching the session's kernel again"
		default:
			return time.Time{}, "not run: the server did not take it: " + err.Error()
		}
	}
}

// waitChange waits (at most a second) for the cell's source in the replica to differ from src.
func (x *ServerExecutor) waitChange(ctx context.Context, room *bridge.Room, id, src string) {
	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, _, err := cellInfo(ctx, room, id); err != nil || c.Source != src {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
