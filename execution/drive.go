package execution

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The IO side of runs: a job's loop over its cells, and drive, the loop that carries out one
// run's machine. Everything that waits (a room write, a REST call, the kernel's next messages)
// waits in a goroutine of its own and comes back to the loop as an input; the loop itself never
// blocks on anything but its inputs, so a room that reconnects holds up neither the kernel's
// messages nor the run marker's beat.

// runJob runs a job's cells in order, on the notebook's kernel, and finishes the job.
func (x *ClientEngine) runJob(cj *trackedJob, room *bridge.Room, opts RunOptions) {
	j := cj.job
	ctx := x.life
	var k *nbKernel
	// The kernel is let go and the job counted as finished before its waiters learn it is.
	finish := x.finisher(j, func() {
		if k != nil {
			k.unlock(x.now())
			k = nil
		}
	})
	defer finish(func(s *JobState) { s.Status, s.Ended = JobFailed, x.now() }) // only if it did not finish (a panic)
	k, note, reused, err := x.acquire(ctx, room, opts.KernelName, true)
	if err != nil {
		finish(func(s *JobState) {
			s.Status, s.Ended = JobFailed, x.now()
			s.Note = "no kernel: " + err.Error()
			for i := range s.Cells {
				s.Cells[i].Status, s.Cells[i].Note = CellSkipped, "not run: no kernel"
			}
		})
		return
	}
	j.Update(func(s *JobState) { s.Status, s.Note, s.KernelID = JobRunning, note, k.session.KernelID })
	// A channel kept from an earlier job (idle for ClientOptions.CheckIdleKernel) is checked
	// with the server while the first cell's reset is written; that cell's request waits for the
	// answer (kernelCheck).
	var check *kernelCheck
	if reused {
		check = &kernelCheck{alive: x.probeAsync(ctx, k)}
	}
	status, jobNote := runCells(ctx, cj, opts.StopOnError, func(i int, t *tally) (CellRun, *CellRun) {
		// The kernel may have died with the previous cell: get it back (or a new one) before
		// touching this cell, so a cell that cannot run keeps its outputs.
		if note, err := x.ensureChannel(ctx, room, k, opts.KernelName, false); err != nil {
			return CellRun{}, t.noKernel(err)
		} else if note != "" {
			j.Update(func(s *JobState) { s.Note, s.KernelID = joinNotes(s.Note, note), k.session.KernelID })
		}
		run := x.runCell(ctx, cj, i, room, k, opts, check)
		if check != nil && check.taken {
			check = nil
		}
		return run, nil
	})
	finish(func(s *JobState) { s.Status, s.Ended, s.Note = status, x.now(), joinNotes(s.Note, jobNote) })
}

// runCells runs a job's cells in order and says how the job ends. A cell the tally says is not
// run (the job was cancelled, the sidecar is closing, an earlier cell stopped the job) is marked
// so; run runs the others, and returns what became of the cell, or the skip that replaces it
// (noKernel) when it could not run at all.
func runCells(ctx context.Context, cj *trackedJob, stopOnError bool, run func(i int, t *tally) (CellRun, *CellRun)) (JobStatus, string) {
	var t tally
	for i := range cj.cellIDs {
		set := func(fn func(*CellRun)) { cj.job.Update(func(s *JobState) { fn(&s.Cells[i]) }) }
		skip := t.before(cj.cancelled(), ctx.Err() != nil)
		if skip == nil {
			var res CellRun
			if res, skip = run(i, &t); skip == nil {
				res = t.after(res, cj.cancelled(), stopOnError)
				set(func(c *CellRun) { *c = res })
				continue
			}
		}
		set(func(c *CellRun) { c.Status, c.Note = skip.Status, skip.Note })
	}
	return t.end()
}

// tally decides, cell after cell, what a job's outcome is: pure bookkeeping over the cells'
// results.
type tally struct {
	final   JobStatus // "" until something decides otherwise: completed
	stopped string    // why the rest is not run
	ran     int       // cells that went to the kernel
	notRun  int       // cells that could not be run
}

// before says whether the next cell is not run at all (and how it ends), or nil to run it.
func (t *tally) before(cancelled, closing bool) *CellRun {
	switch {
	case cancelled:
		t.final = JobCancelled
		return &CellRun{Status: CellCancelled, Note: "cancelled before it ran"}
	case closing:
		if t.final == "" {
			t.final = JobFailed
		}
		t.stopped = "not run: the sidecar is shutting down"
		return &CellRun{Status: CellSkipped, Note: t.stopped}
	case t.stopped != "":
		return &CellRun{Status: CellSkipped, Note: t.stopped}
	}
	return nil
}

// noKernel records a cell that could not run because the kernel could not be had.
func (t *tally) noKernel(err error) *CellRun {
	t.stopped = "not run: no kernel: " + err.Error()
	t.final = JobFailed
	return &CellRun{Status: CellSkipped, Note: t.stopped}
}

// after records a cell's run and returns it as the job reports it.
func (t *tally) after(run CellRun, cancelled, stopOnError bool) CellRun {
	if !run.Started.IsZero() {
		t.ran++
	} else if run.Status == CellSkipped && strings.HasPrefix(run.Note, "not run:") {
		t.notRun++
	}
	switch run.Status {
	case CellError, CellAborted:
		if t.final == "" {
			t.final = JobFailed
		}
		if cancelled {
			t.final, run.Status = JobCancelled, CellCancelled
		} else if stopOnError {
			t.stopped = "not run: an earlier cell failed (stop_on_error)"
		}
	case CellCancelled:
		t.final = JobCancelled
	case CellOK:
		if cancelled { // the interrupt came too late (or the code ignored it)
			t.final = JobCancelled
			run.Note = joinNotes(run.Note, "it finished before the cancel took effect")
		}
	}
	return run
}

// end returns the job's status and what its note must add.
func (t *tally) end() (JobStatus, string) {
	if t.final != "" {
		return t.final, ""
	}
	switch {
	case t.ran > 0:
		return JobCompleted, ""
	case t.notRun > 0:
		return JobFailed, "no cell ran"
	}
	return JobCompleted, "nothing to run (no code cell with code)"
}

// kernelCheck is the server's answer on whether a kept channel's kernel is still there, asked
// when a job starts; the first request of the job waits for it.
type kernelCheck struct {
	alive <-chan bool
	taken bool // a request waited for it (set by the driver, read after drive returned)
}

// runCell runs the i-th cell of a job and returns what became of it.
func (x *ClientEngine) runCell(ctx context.Context, cj *trackedJob, i int, room *bridge.Room, k *nbKernel, opts RunOptions, check *kernelCheck) CellRun {
	id := cj.cellIDs[i]
	cell, idx, skip := codeCell(ctx, room, id)
	if skip != nil {
		return *skip
	}
	m := newMachine(machineConfig{
		CellID: id, Code: cell.Source, Empty: strings.TrimSpace(cell.Source) == "", StopOnError: opts.StopOnError,
		Heartbeat: x.opts.Heartbeat, BeatEvery: x.opts.StaleRun / 3,
	})
	run := x.drive(ctx, m, &runIO{room: room, k: k, job: cj.job, cell: i, index: idx, cancel: cj.cancelC, check: check, kernelName: opts.KernelName})
	run.Index = idx
	if note := k.restartedNote(); note != "" {
		cj.job.Update(func(s *JobState) { s.Note = joinNotes(s.Note, note) })
		x.kernelNotice(room.Path(), bridge.NoticeNotice, "restarted", k.session.KernelID, note)
	}
	return run
}

// codeCell reads the code cell id and its index before a run; a cell that cannot run (gone,
// not code, unreadable) comes back as its skipped run instead.
func codeCell(ctx context.Context, room *bridge.Room, id string) (ydoc.Cell, int, *CellRun) {
	skipped := func(idx int, note string) (ydoc.Cell, int, *CellRun) {
		return ydoc.Cell{}, idx, &CellRun{CellID: id, Index: idx, Status: CellSkipped, Note: note}
	}
	cell, idx, err := cellInfo(ctx, room, id)
	switch {
	case err != nil:
		return skipped(-1, "not run: "+err.Error())
	case idx < 0:
		return skipped(-1, "not run: the cell no longer exists")
	case cell.Type != ydoc.CellCode:
		return skipped(idx, cell.Type+" cells are not executed")
	}
	return cell, idx, nil
}

// cellInfo is what runCell needs to know about a cell before it runs.
func cellInfo(ctx context.Context, room *bridge.Room, id string) (ydoc.Cell, int, error) {
	var c ydoc.Cell
	idx := -1
	err := room.View(ctx, func(d *ydoc.Doc) error {
		if idx = d.CellIndex(id); idx < 0 {
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

// RunCode runs scratch code in a notebook's kernel without touching the notebook (no outputs
// written, no execution count). It waits until the code finished or ctx ends; code still
// running then goes on in the kernel, its output no longer collected. The note says what the
// caller must know about the kernel (it was replaced, it restarted).
func (x *ClientEngine) RunCode(ctx context.Context, path, code, kernelName string) (CellRun, string, error) {
	release, err := x.track()
	if err != nil {
		return CellRun{}, "", err
	}
	defer release()
	room, err := x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		return CellRun{}, "", err
	}
	k, note, _, err := x.acquire(ctx, room, kernelName, false)
	if err != nil {
		return CellRun{}, "", err
	}
	defer func() { k.unlock(x.now()) }()
	run, err := x.runScratch(ctx, k, code, false)
	if err != nil {
		return CellRun{}, note, err
	}
	restarted := k.restartedNote()
	if restarted != "" {
		x.kernelNotice(path, bridge.NoticeNotice, "restarted", k.session.KernelID, restarted)
	}
	return run, joinNotes(note, restarted), nil
}

// runScratch runs scratch code on a held kernel's channel (no room, no history, no count);
// repliesElsewhere as in machineConfig. The error is only that the request could not be sent.
func (x *ClientEngine) runScratch(ctx context.Context, k *nbKernel, code string, repliesElsewhere bool) (CellRun, error) {
	m := newMachine(machineConfig{Scratch: true, Code: code, Heartbeat: x.opts.Heartbeat, RepliesElsewhere: repliesElsewhere})
	run := x.drive(ctx, m, &runIO{k: k})
	if m.sendErr != nil {
		return CellRun{}, m.sendErr
	}
	run.Index = 0
	return run, nil
}

// runIO is what the driver of one run works with.
type runIO struct {
	room    *bridge.Room // nil for scratch code
	k       *nbKernel    // held by the caller for the run's length
	job     *Job         // the job whose cell runs (nil for scratch code)
	cell    int          // the cell's position in the job
	index   int          // its index in the notebook
	cancel  <-chan struct{}
	running RunningCode // the request, once sent

	check      *kernelCheck // the kept kernel's check the request waits for (nil: none)
	kernelName string       // for a kernel started in place of one found gone
}

// drive is the IO loop of one run: it starts the machine, carries out its actions, feeds it
// what comes back and the time, until the run is done. When ctx ends the machine is told to
// stop (its last room write still gets its bounded wait). Every goroutine it starts has ended
// when it returns.
func (x *ClientEngine) drive(ctx context.Context, m *machine, io *runIO) CellRun {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	inputs := make(chan func(now time.Time))
	d := &driver{x: x, m: m, io: io, ctx: rctx, wg: &wg, inputs: inputs}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	cancelled, stopped := io.cancel, ctx.Done()
	m.start(x.now())
	for {
		for _, a := range m.take() {
			if f, ok := a.(cellFinished); ok {
				return f.run
			}
			d.perform(a)
		}
		var fire <-chan time.Time
		if w := m.wake(); !w.IsZero() {
			timer.Reset(max(w.Sub(x.now()), 0))
			fire = timer.C
		}
		select {
		case in := <-inputs:
			in(x.now())
		case <-fire:
			m.tick(x.now())
		case <-cancelled:
			cancelled = nil
			m.cancel(x.now())
		case <-stopped:
			stopped = nil
			m.stop(x.now())
		}
	}
}

// driver carries out one machine's actions.
type driver struct {
	x      *ClientEngine
	m      *machine
	io     *runIO
	ctx    context.Context // ends when drive returns
	wg     *sync.WaitGroup
	inputs chan func(time.Time)
}

// post hands an input to the loop; false when the run is over (nobody listens).
func (d *driver) post(in func(time.Time)) bool {
	select {
	case d.inputs <- in:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// spawn runs fn in a goroutine drive waits for.
func (d *driver) spawn(fn func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn()
	}()
}

func (d *driver) perform(a action) {
	x, m, io := d.x, d.m, d.io
	cellID := m.cfg.CellID
	switch a := a.(type) {
	case resetCell:
		marker := map[string]any{"owner": x.opts.Username, "instance": x.instance, "since": stamp(a.at), "beat": stamp(a.at)}
		d.write(kindReset, x.opts.WriteWait, resetTx(cellID, marker, a.empty), nil)
	case writeOutputs:
		d.write(kindOutputs, x.opts.WriteWait, outputsTx(cellID, a), nil)
	case beatMarker:
		d.write(kindBeat, x.opts.WriteWait, beatTx(cellID, x.instance, a.at), nil)
	case finishCell:
		gone := &atomic.Bool{}
		d.write(kindFinal, finalWriteWait, finalTx(cellID, a, gone), gone)
	case sendRequest:
		code := m.cfg.Code
		d.spawn(func() {
			if err := d.awaitKernelCheck(); err != nil {
				d.post(func(now time.Time) { m.sent(now, err) })
				return
			}
			running, err := io.k.ch.Execute(d.ctx, code, a.storeHistory, a.stopOnError, a.metadata)
			if !d.post(func(now time.Time) {
				if err == nil {
					io.running = running
					d.follow(running)
				}
				m.sent(now, err)
			}) && err == nil {
				running.Abandon()
			}
		})
	case abandonRequest:
		if io.running != nil {
			io.running.Abandon()
		}
	case checkKernel:
		id := io.k.session.KernelID
		d.spawn(func() {
			cctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
			state, err := x.opts.Kernels.KernelState(cctx, id)
			cancel()
			gone := kernelGone(state, err)
			if err != nil && !gone {
				x.log.Debug().Err(err).Str(logfield.Kernel, id).Msg("kernel state unknown during a run; waiting on")
			}
			d.post(func(now time.Time) { m.kernelState(now, state, gone, err) })
		})
	case askKernelInfo:
		ch := io.k.ch
		d.spawn(func() {
			ictx, cancel := context.WithTimeout(d.ctx, 60*time.Second)
			err := ch.KernelInfo(ictx)
			cancel()
			d.post(func(now time.Time) { m.kernelInfo(now, err) })
		})
	case interruptKernel:
		id := io.k.session.KernelID
		d.spawn(func() {
			ictx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
			err := x.opts.Kernels.Interrupt(ictx, id)
			cancel()
			if err != nil {
				x.log.Warn().Err(err).Str(logfield.Kernel, id).Msg("could not interrupt a cancelled run")
			}
			d.post(func(now time.Time) { m.interrupted(now, err) })
		})
	case kernelLost:
		io.k.lost = a.reason
		x.kernelNotice(io.k.session.Path, bridge.NoticeWarning, "lost", io.k.session.KernelID, "the kernel was lost during a run: "+a.reason)
		if a.closeChannel && io.k.ch != nil {
			_ = io.k.ch.Close()
		}
	case cellStarted:
		d.updateCell(func(c *CellRun) { c.Index, c.Status, c.Started = io.index, CellRunning, a.at })
	case cellOutputs:
		d.updateCell(func(c *CellRun) { c.Outputs = applyOps(c.Outputs, a.ops) })
	}
}

// awaitKernelCheck waits for the server's answer on the kept kernel (if the job asked) and, when
// it is gone, gives the run a new one (the job's note says its state was lost). It runs in the
// request's goroutine, before anything touches the kernel: the loop uses io.k only once the
// request was sent.
func (d *driver) awaitKernelCheck() error {
	c := d.io.check
	if c == nil {
		return nil
	}
	c.taken = true
	var alive bool
	select {
	case alive = <-c.alive:
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
	if alive {
		return nil
	}
	note, err := d.x.replaceGone(d.ctx, d.io.room, d.io.k, d.io.kernelName)
	if err != nil {
		return fmt.Errorf("the kernel was gone and none could be started in its place: %w", err)
	}
	if d.io.job != nil {
		id := d.io.k.session.KernelID
		d.io.job.Update(func(s *JobState) { s.Note, s.KernelID = joinNotes(s.Note, note), id })
	}
	return nil
}

func (d *driver) updateCell(fn func(*CellRun)) {
	if d.io.job != nil {
		d.io.job.Update(func(s *JobState) { fn(&s.Cells[d.io.cell]) })
	}
}

// write runs a room transaction with a bounded wait and hands its outcome to the machine; the
// reset and output writes also tell it when they are in the replica, on their way to the
// server (applied), which comes one server round trip before the outcome.
func (d *driver) write(kind writeKind, wait time.Duration, fn func(*ydoc.Txn) error, gone *atomic.Bool) {
	room, m, log := d.io.room, d.m, d.x.log
	var onItsWay chan struct{}
	var notice func()
	if kind == kindReset || kind == kindOutputs {
		onItsWay = make(chan struct{}, 1)
		notice = func() { onItsWay <- struct{}{} } // once, on the room goroutine: never blocks
	}
	type result struct {
		outcome writeOutcome
		err     error
	}
	done := make(chan result, 1)
	d.spawn(func() {
		outcome, err := applyBounded(d.ctx, room, wait, fn, gone, notice)
		if outcome == writeFailed {
			log.Warn().Err(err).Str(logfield.Cell, m.cfg.CellID).Int("write", int(kind)).Msg("could not write a run into its cell")
		}
		done <- result{outcome, err}
	})
	d.spawn(func() {
		var r result
		select {
		case <-onItsWay:
			if !d.post(func(now time.Time) { m.applied(now, kind) }) {
				return
			}
			r = <-done
		case r = <-done:
		}
		d.post(func(now time.Time) { m.wrote(now, kind, r.outcome, r.err) })
	})
}

// follow reads the request's messages as they come and hands them to the loop.
func (d *driver) follow(running RunningCode) {
	m := d.m
	d.spawn(func() {
		for {
			msgs, done, err := running.Next(d.ctx)
			if d.ctx.Err() != nil {
				return
			}
			if err != nil {
				done = true // nothing more will come
			}
			if !d.post(func(now time.Time) {
				m.messages(now, msgs)
				if done {
					m.ended(now, err)
				}
			}) || done {
				return
			}
		}
	})
}
