package execution

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// How ServerEngine follows a cell the server runs: what the document shows of it (look), and a
// follower per sent cell that reads the room's change events until the server ends the run —
// or the kernel, the cell or the sidecar's interest is gone.

// cellNow is what the document shows of the running cell.
type cellNow struct {
	exists  bool
	index   int
	state   string
	count   *int
	outputs []map[string]any
	busy    []string // other code cells the server has marked running
}

// look reads the cell and the other running cells.
func look(ctx context.Context, room *bridge.Room, id string) (cellNow, error) {
	var c cellNow
	err := room.View(ctx, func(d *ydoc.Doc) error {
		ids := d.CellIDs()
		c.index = slices.Index(ids, id)
		all := make([]int, len(ids))
		for i := range all {
			all[i] = i
		}
		cells, err := d.Cells(all)
		if err != nil {
			return err
		}
		for i, cell := range cells {
			if i == c.index {
				c.exists, c.state, c.count, c.outputs = true, cell.ExecutionState, cell.ExecutionCount, cell.Outputs
			} else if cell.Type == ydoc.CellCode && cell.ExecutionState == "running" {
				c.busy = append(c.busy, cell.ID)
			}
		}
		return nil
	})
	return c, err
}

// follower follows one queued cell in the document until the server ends its run.
type follower struct {
	x        *ServerEngine
	ctx      context.Context
	cj       *trackedJob
	cell     int // the cell's position in the job
	room     *bridge.Room
	id       string
	index    int
	kernelID string
	started  time.Time
	cancel   <-chan struct{}

	preds map[string]bool // cells queued before ours, still running
	// maybePreds are other cells whose execution state changed in events that came before the
	// one with our cell's running mark: the server marks cells running as it queues them and
	// the room delivers its changes in order, so those queued before ours show up here even when
	// the replica had not seen them yet when ours was sent. refresh keeps the ones running.
	maybePreds map[string]bool
	// ownMark: the event with the server's running mark of our cell (or a later change of its
	// state) has been seen, so every cell queued before it is known.
	ownMark     bool
	sub         *bridge.Subscription
	countBefore *int      // the cell's count when it was sent
	skipCounts  int       // counts written by an earlier run of the same cell
	sawRunning  bool      // the server marked the cell running after our request
	counted     bool      // the server wrote the count of our run
	begun       bool      // ours is the cell the kernel runs
	idleAt      time.Time // when the cell was seen idle without its count
	gone        bool      // the cell was deleted
	kernelGone  bool      // the server says the kernel is gone
	notBusy     int       // heartbeats in a row the kernel was not busy while our cell ran
	repairedAt  time.Time // when the kernel was attached to the room again after the server lost the run
	lostNote    string    // why the run ends without a result, when the sidecar knows
	abandoned   bool      // the run is lost and the server did not end it
	last        cellNow

	cancelled  bool
	interrupts int
	nextInt    time.Time
	lastCheck  time.Time
}

// noteCancelWaits is a cancelled cell's note while the server has not begun it: the kernel is
// interrupted only once it runs our cell, never a cell queued before it on the server.
const noteCancelWaits = "cancelling: the kernel will be interrupted once the cells queued before this one on the server have ended (interrupting now would stop someone else's cell)"

// maxInterrupts bounds the interrupts sent for one cancelled run (an interrupt that reaches
// the kernel between two statements of ours, or before the kernel began the cell, is lost).
const maxInterrupts = 10

func (f *follower) run(sub *bridge.Subscription) CellRun {
	x := f.x
	tick := time.NewTicker(min(x.opts.Heartbeat, time.Second))
	defer tick.Stop()
	f.sub = sub
	events := sub.C
	f.refresh()
	for {
		if res, done := f.decide(); done {
			return res
		}
		select {
		case <-f.ctx.Done():
			return f.result(CellAborted, "the sidecar stopped following the run (the server goes on running it)")
		case <-f.cancel:
			f.cancel = nil
			f.cancelled = true
			if !f.begun {
				// Said in the job, so that get_execution shows why the run goes on for now.
				f.cj.job.Update(func(s *JobState) { s.Cells[f.cell].Note = noteCancelWaits })
			}
		case <-tick.C:
			f.refresh()
			f.checkKernel()
		case e, ok := <-events:
			if !ok {
				events = nil // the room closed: keep looking on ticks (Open reopens it)
				f.reopen()
				continue
			}
			f.event(e)
		}
	}
}

// event takes a room event: what changed in our cell, and whether it is worth a look.
func (f *follower) event(e bridge.Event) {
	switch e.Kind {
	case bridge.EventChanged:
		look := false
		if slices.Contains(e.Change.Deleted, f.id) {
			look = true
		}
		// Other cells' state changes first: within one change their order against ours is not
		// known, and taking them as queued before ours only delays an interrupt.
		for _, c := range e.Change.Cells {
			if c.ID != f.id && !f.ownMark && stateChanged(c) {
				if f.maybePreds == nil {
					f.maybePreds = map[string]bool{}
				}
				f.maybePreds[c.ID] = true
				look = true
			}
		}
		for _, c := range e.Change.Cells {
			if c.ID == f.id {
				look = true
				if stateChanged(c) {
					f.ownMark = true
				}
				if slices.Contains(c.Fields, "execution_count") || slices.Contains(c.Fields, "*") {
					if f.skipCounts > 0 {
						f.skipCounts--
					} else {
						f.counted = true
					}
				}
			} else if f.preds[c.ID] {
				look = true
			}
		}
		if look || len(e.Change.Deleted) > 0 || e.Change.Moved {
			f.refresh()
		}
	case bridge.EventSynced, bridge.EventReset:
		f.refresh()
	}
}

// reopen gets the room back after the manager closed it (idle) while the run went on.
func (f *follower) reopen() {
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	if r, err := f.x.opts.Manager.Open(ctx, f.room.Path(), ydoc.KindNotebook); err == nil {
		f.room = r
	}
}

// refresh reads the cell (and the cells queued before it) from the replica.
func (f *follower) refresh() {
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	c, err := look(ctx, f.room, f.id)
	if err != nil {
		if errors.Is(err, bridge.ErrRoomClosed) {
			f.reopen()
		}
		return
	}
	f.last = c
	if !c.exists {
		f.gone = true
		return
	}
	f.index = c.index
	busy := map[string]bool{}
	for _, b := range c.busy {
		busy[b] = true
	}
	for p := range f.maybePreds {
		if busy[p] {
			f.preds[p] = true
		}
		delete(f.maybePreds, p)
	}
	for p := range f.preds {
		if !busy[p] {
			delete(f.preds, p)
		}
	}
	switch c.state {
	case "running":
		f.sawRunning, f.idleAt = true, time.Time{}
	default:
		if f.idleAt.IsZero() {
			f.idleAt = f.x.now()
		}
	}
	if !f.sawRunning {
		return // the cell still shows its previous run: the server's reset has not arrived
	}
	// Ours is the cell the kernel runs once nothing queued before it still runs — known only
	// after the event with its running mark (the replica may hold marks whose events have not
	// been taken yet: a cell queued before ours among them) — or once it has output. Without
	// the events (some were dropped) the replica's view is all there is.
	known := f.ownMark || f.sub == nil || f.sub.Dropped() > 0
	if known && len(f.preds) == 0 || len(c.outputs) > 0 {
		f.begun = true
	}
	outs := humanOutputs(c.outputs)
	f.cj.job.Update(func(s *JobState) { s.Cells[f.cell].Outputs, s.Cells[f.cell].Index = outs, c.index })
}

// checkKernel looks at the kernel when the run has been silent for a heartbeat: a kernel the
// server reports gone ends the run.
func (f *follower) checkKernel() {
	now := f.x.now()
	if now.Sub(f.lastCheck) < f.x.opts.Heartbeat {
		return
	}
	f.lastCheck = now
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	state, err := f.x.opts.Kernels.KernelState(ctx, f.kernelID)
	switch {
	case kernelGone(state, err):
		f.kernelGone = true
		return
	case err != nil:
		return
	}
	// jupyter-server-documents 0.3.3 loses a run whose kernel restarts or dies under it: its
	// worker waits forever for the old process's reply (a restart through the REST API), or its
	// kernel client stays on the dead process's ports (the restarter's callback is a coroutine
	// nobody awaits), and the cell stays [*] while every later run waits behind it. The kernel
	// then is not busy although our cell (or one queued before it) shows running: the server's
	// worker hands the kernel the next queued cell within milliseconds, so seen twice a heartbeat
	// apart with the replica in sync, the queue is stuck: attaching the session's kernel to the
	// room again (a session PATCH) makes the server drop its stuck worker (which sets the cells
	// it held idle) and connect to the live kernel.
	if state != "busy" && f.sawRunning && f.last.state == "running" && f.room.Info().Status == bridge.StatusSynced {
		f.notBusy++
	} else {
		f.notBusy = 0
	}
	switch {
	case f.notBusy >= 2 && f.repairedAt.IsZero():
		f.repairedAt = now
		f.lostNote = "the kernel restarted or died while the cell ran and the server lost the run " +
			"(jupyter-server-documents 0.3.3 does not notice); the sidecar attached the kernel to the notebook again. " +
			"The cell is not sent again: nobody can tell whether the old kernel had begun it"
		f.x.log.Warn().Str(logfield.Path, f.room.Path()).Str(logfield.Cell, f.id).Str(logfield.Kernel, f.kernelID).Str("kernel_state", state).
			Msg("the server lost a run (the kernel is not busy, the cell shows running): attaching the kernel to the room again")
		if s, err := sessionOf(ctx, f.x.opts.Kernels, f.room.Path()); err == nil {
			if err := f.x.opts.Kernels.AttachSession(ctx, s); err != nil {
				f.x.log.Warn().Err(err).Str(logfield.Path, f.room.Path()).Msg("could not attach the kernel to the room again")
			}
		}
	case !f.repairedAt.IsZero() && now.Sub(f.repairedAt) >= 2*f.x.opts.Heartbeat:
		f.abandoned = true // the server did not set the cell idle: stop following it
	}
}

// decide says whether the run is over, and how it ended; it also sends the interrupts a cancel
// asks for.
func (f *follower) decide() (CellRun, bool) {
	now := f.x.now()
	switch {
	case f.gone:
		return f.result(CellAborted, noteCellDeletedServer), true
	case f.last.state != "running" && (f.counted || (f.skipCounts == 0 && f.last.count != nil && !sameCount(f.last.count, f.countBefore))):
		// The server wrote our run's count (seen as a change, or, when a resync folded the
		// changes together, as a new value).
		status := CellOK
		for _, o := range f.last.outputs {
			if o["output_type"] == "error" {
				status = CellError
			}
		}
		run := f.result(status, "")
		run.ExecutionCount = f.last.count
		return run, true
	case f.kernelGone:
		return f.result(CellAborted, "the kernel died or was shut down while the cell ran"), true
	case !f.idleAt.IsZero() && (f.sawRunning || now.Sub(f.started) > 10*f.x.opts.EndGrace) && now.Sub(f.idleAt) >= f.x.opts.EndGrace:
		note := f.lostNote
		if note == "" {
			note = "the server ended the run without a result (the kernel restarted or was lost before it finished the cell, or the server restarted); it is not sent again: nobody can tell whether the kernel had begun it"
		}
		return f.result(CellAborted, note), true
	case f.abandoned:
		return f.result(CellAborted, f.lostNote+"; the server still shows the cell running"), true
	}
	if f.cancelled && f.begun && f.interrupts < maxInterrupts && !now.Before(f.nextInt) && f.last.state == "running" {
		f.interrupts++
		f.nextInt = now.Add(time.Second)
		ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
		if err := f.x.opts.Kernels.Interrupt(ctx, f.kernelID); err != nil {
			f.x.log.Warn().Err(err).Str(logfield.Kernel, f.kernelID).Msg("could not interrupt a cancelled run")
		}
		cancel()
	}
	return CellRun{}, false
}

// stateChanged reports a change of a cell's execution state (or of the whole cell).
func stateChanged(c ydoc.CellChange) bool {
	return slices.Contains(c.Fields, "execution_state") || slices.Contains(c.Fields, "*")
}

func sameCount(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// noteCellDeletedServer is why a run whose cell was deleted is no longer followed.
const noteCellDeletedServer = "the cell was deleted while it ran; the server may still run it, its outputs go nowhere"

func (f *follower) result(status CellStatus, note string) CellRun {
	run := CellRun{CellID: f.id, Index: f.index, Status: status, Note: note, Started: f.started, Ended: f.x.now()}
	if f.gone {
		run.Index = -1
	}
	run.Outputs = humanOutputs(f.last.outputs)
	return run
}

// humanOutputs are a cell's outputs as JupyterLab's output area shows them (and as ClientEngine
// writes them): consecutive stream outputs of the same name merged, \r and \b applied. The
// server writes each stream message as an output of its own, with the raw text.
func humanOutputs(outs []map[string]any) []map[string]any {
	if outs == nil {
		return nil
	}
	res := make([]map[string]any, 0, len(outs))
	for _, o := range outs {
		o = cloneOutput(o)
		if o["output_type"] == "stream" {
			text := streamText(o["text"])
			if n := len(res); n > 0 && res[n-1]["output_type"] == "stream" && res[n-1]["name"] == o["name"] {
				res[n-1]["text"] = res[n-1]["text"].(string) + text
				continue
			}
			o["text"] = text
		}
		res = append(res, o)
	}
	for _, o := range res {
		if o["output_type"] == "stream" {
			o["text"] = processText(o["text"].(string))
		}
	}
	return res
}

// streamText reads a stream output's text (a string, or nbformat's list of strings).
func streamText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		var b strings.Builder
		for _, s := range t {
			if s, ok := s.(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}
