package execution

import (
	"encoding/json"
	"time"
)

// machine is one run — a notebook cell, or scratch code — as a pure state machine, in the style
// of ydoc.Replica and etcd raft's RawNode: it starts no goroutines, reads no clock and touches
// neither the kernel nor the room. Inputs are method calls that carry the time (start, sent,
// messages, ended, wrote, kernelState, kernelInfo, interrupted, cancel, stop, tick); outputs are
// actions (take) the driver carries out, and the time it wants to be woken at (wake). drive is
// its IO loop; machine_test.go drives it by hand.
//
// A cell's run has two sides that never wait for each other:
//
//   - the kernel side follows the request: the reset is written (the request goes as soon as
//     the reset is in the replica and on its way to the server, ahead of everything the run
//     writes after it; its confirmation is not waited for), the request sent once (never
//     twice: after a restart nobody can tell whether the old process had partly run it), its
//     messages folded into outputs, the kernel's liveness looked at when it is silent, a
//     restart before our request began (signalled, or guessed from an idle kernel while ours
//     never began) followed into the new kernel until a kernel_info_request sent behind it is
//     answered, a reply without idle (or idle without reply) given a grace,
//     a cancel turned into an interrupt once our request has begun;
//   - the room side mirrors the outputs into the cell: one write in flight at a time, operations
//     accumulating meanwhile (bounded: past MaxPending they become one rewrite of the whole
//     outputs), a write the room could not take within its bounded wait (disconnected) taken
//     back and retried with whatever accumulated, the run marker refreshed on its own clock so
//     that a stuck output write never lets it go stale; when the kernel side is over, one final
//     write brings the cell to its end state (outputs, count, idle, marker removed), sent right
//     behind an output write that is in the replica already rather than after its confirmation.
//
// The run is done when both sides are.
type machine struct {
	cfg   machineConfig
	model outputModel
	out   []action
	phase phase

	// the kernel side
	startedAt     time.Time // the cell started: reset in the room, request on its way (zero: never)
	requestOpen   bool      // a request is being followed (abandon it when giving up)
	completed     bool      // it ended normally: reply and idle both arrived
	begun         bool      // a message of ours arrived: the kernel began the request
	reply         map[string]any
	replyAt       time.Time // the reply came, the idle status not yet
	idleAt        time.Time // the kernel went idle for our request, with no reply yet
	lastMsg       time.Time
	probing       bool      // a kernel_info_request follows a restart that came before we began
	guessed       bool      // the probe follows a restart guessed from an idle kernel, not one we were told of
	lostAt        time.Time // the new kernel answered it: ours is lost unless it begins by then
	checking      bool      // a liveness check is in flight
	checkSentAt   time.Time
	idleLooks     int // liveness checks in a row that found the kernel idle while ours had begun
	cancelled     bool
	interruptSent bool // an interrupt was sent (or is in flight) for the cancel
	retryIntAt    time.Time
	stopping      bool
	lost          string     // why the request did not complete, for the result
	status        CellStatus // set when the outcome is decided other than by the reply
	sendErr       error      // scratch code: the request could not be sent at all

	// the room side
	roomCount int        // outputs the cell holds by our account (after our last write)
	pending   []outputOp // operations not yet handed to a write
	rewrite   bool       // the next write replaces the cell's outputs with the model's
	fresh     bool       // something new to write since a write failed
	writing   *writeOutputs
	onItsWay  bool // the write in flight is in the replica: it can no longer be taken back or fail to fit
	beating   bool
	nextBeat  time.Time
	final     *finishCell // the final write, once decided
	finalOut  bool        // it is in flight
	gone      bool        // the cell was deleted while it ran
	roomNote  string      // why the room does not show the end of the run
}

// machineConfig is what a run is.
type machineConfig struct {
	Scratch     bool   // scratch code: no room, no marker, no history, no count
	CellID      string // the cell (not for scratch code)
	Code        string
	Empty       bool // a blank code cell: only the reset (JupyterLab clears its outputs), nothing sent
	StopOnError bool
	Heartbeat   time.Duration // a run silent this long gets its kernel looked at (5s)
	BeatEvery   time.Duration // the run marker's refresh period (20s)
	ReplyGrace  time.Duration // how long a reply waits for its idle status, and idle for its reply (3s)
	LostGrace   time.Duration // after a restart, how long ours may still begin once the new kernel answered (1s)
	MaxPending  int           // output operations kept for the room before one rewrite replaces them (256)
	// RepliesElsewhere: the kernel channel may hand our shell replies to another client
	// (jupyter-server-documents' kernel websockets share one ZMQ identity, and the kernel
	// answers the newest). The kernel's idle status for our request then says it finished:
	// with no reply by ReplyGrace after it, the outcome is read from the outputs (an error
	// output or none), which all came on iopub.
	RepliesElsewhere bool
}

type phase int

const (
	phaseNew     phase = iota
	phaseReset         // the reset is being written
	phaseSend          // the request is being sent
	phaseRunning       // following the request
	phaseFlush         // the kernel side is over; the room is being brought to the end state
	phaseDone
)

// action is something the driver must do for a machine.
type action interface{ isAction() }

// Room writes. Each is one transaction; its outcome comes back through wrote, by kind (at most
// one write of each kind is in flight).
type (
	// resetCell is the reset JupyterLab does, plus our run marker (since and beat at): outputs
	// and count cleared, execution_state running (idle for an empty cell).
	resetCell struct {
		at    time.Time
		empty bool
	}
	// writeOutputs applies ops to a cell holding base outputs (the write fails with
	// errOutputsMoved, changing nothing, when it holds something else), or, with all set,
	// replaces the cell's outputs with all.
	writeOutputs struct {
		ops   []outputOp
		base  int
		all   []map[string]any
		after int // outputs the cell holds once it is applied
	}
	// beatMarker refreshes our run marker's beat.
	beatMarker struct{ at time.Time }
	// finishCell ends the run in the room: our marker removed and, unless the cell is gone,
	// the last operations (or all the outputs when they do not fit), the count and idle.
	finishCell struct {
		ops   []outputOp
		base  int
		all   []map[string]any // nil when nothing is to be written
		count *int
		gone  bool
	}
)

// Kernel actions.
type (
	// sendRequest sends the execute_request (the code is the run's).
	sendRequest struct {
		storeHistory, stopOnError bool
		metadata                  map[string]any
	}
	abandonRequest  struct{} // stop following the request
	checkKernel     struct{} // ask the server for the kernel's state; answer with kernelState
	askKernelInfo   struct{} // send a kernel_info_request behind ours; answer with kernelInfo
	interruptKernel struct{} // interrupt the kernel; answer with interrupted
	// kernelLost says the kernel is known gone (the next run needs another), closing the
	// channel when it is still open.
	kernelLost struct {
		reason       string
		closeChannel bool
	}
)

// Job record updates.
type (
	cellStarted  struct{ at time.Time }   // the cell is running
	cellOutputs  struct{ ops []outputOp } // the run's outputs changed
	cellFinished struct{ run CellRun }    // the run is over; this is its result
)

// writeKind says which write an outcome answers.
type writeKind int

// writeOutcome is what became of a room write.
type writeOutcome int

func (resetCell) isAction()       {}
func (writeOutputs) isAction()    {}
func (beatMarker) isAction()      {}
func (finishCell) isAction()      {}
func (sendRequest) isAction()     {}
func (abandonRequest) isAction()  {}
func (checkKernel) isAction()     {}
func (askKernelInfo) isAction()   {}
func (interruptKernel) isAction() {}
func (kernelLost) isAction()      {}
func (cellStarted) isAction()     {}
func (cellOutputs) isAction()     {}
func (cellFinished) isAction()    {}

const (
	kindReset writeKind = iota + 1
	kindOutputs
	kindBeat
	kindFinal
)

const (
	// written: applied — confirmed by the server, or in the replica on its way to it (the
	// bounded wait ran out first: the room delivers it, or re-runs it after a reset).
	written writeOutcome = iota + 1
	// notApplied: taken back unapplied, nothing changed (the room was not connected within the
	// bounded wait).
	notApplied
	cellGone     // the cell no longer exists
	outputsMoved // the cell's outputs are not what the operations expect; nothing changed
	writeFailed  // anything else (the room closed or failed)
)

// Notes a run's result carries.
const (
	noteShuttingDown = "the sidecar is shutting down; the kernel may still be running this cell"
	noteWaitEnded    = "still running in the kernel when the wait ended (its output is no longer collected)"
	noteCellDeleted  = "the cell was deleted while it ran; its outputs were not written"
)

func newMachine(cfg machineConfig) *machine {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Heartbeat, 5*time.Second)
	def(&cfg.BeatEvery, 20*time.Second)
	def(&cfg.ReplyGrace, 3*time.Second)
	def(&cfg.LostGrace, time.Second)
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 256
	}
	return &machine{cfg: cfg}
}

// take returns the actions queued since the last call, in order.
func (m *machine) take() []action {
	out := m.out
	m.out = nil
	return out
}

// done reports whether the run is over (its cellFinished action has been queued).
func (m *machine) done() bool { return m.phase == phaseDone }

func (m *machine) emit(a action) { m.out = append(m.out, a) }

// start begins the run: a cell's reset is written first; scratch code is sent at once.
func (m *machine) start(now time.Time) {
	if m.phase != phaseNew {
		return
	}
	if m.cfg.Scratch {
		m.phase = phaseSend
		m.startedAt = now
		m.emit(sendRequest{})
		return
	}
	m.phase = phaseReset
	m.emit(resetCell{at: now, empty: m.cfg.Empty})
}

// applied says a room write (the reset, or the outputs in flight) is in the replica and on its
// way to the server, before the server confirmed it (wrote comes later). The room sends in
// order, so whatever is written after it reaches the server after it, and it can no longer be
// taken back or fail to fit. After the reset the request may go at once, one server round trip
// early (runs that end without a request — an empty cell, a cancel or a stop meanwhile — wait
// for the confirmation: their result is the reset); after outputs the final write may follow.
func (m *machine) applied(now time.Time, kind writeKind) {
	switch kind {
	case kindReset:
		if m.phase != phaseReset || m.cfg.Empty || m.cancelled || m.stopping {
			return
		}
		m.wroteReset(now, written, nil)
	case kindOutputs:
		if m.writing != nil {
			m.onItsWay = true
			m.advance(now)
		}
	}
}

// sent is the outcome of sendRequest.
func (m *machine) sent(now time.Time, err error) {
	if m.phase != phaseSend {
		return
	}
	if err != nil {
		m.sendErr = err
		m.endKernel(now, "not sent: the kernel connection failed: "+err.Error())
		return
	}
	m.requestOpen = true
	m.phase = phaseRunning
	m.lastMsg = now
	if m.stopping { // stop came while it was being sent: it runs, we cannot follow it
		m.stopNow(now)
		return
	}
	m.advance(now)
}

// messages folds the request's kernel messages in.
func (m *machine) messages(now time.Time, msgs []KernelMsg) {
	if m.phase != phaseRunning {
		return
	}
	for _, msg := range msgs {
		m.lastMsg = now
		switch {
		case msg.Type == MsgKernelRestarting:
			m.guessed = false // a probe already out now follows a restart we were told of
			switch {
			case m.cfg.Scratch:
				m.status = CellAborted
				if m.begun {
					m.endKernel(now, "the kernel restarted while the code ran; its variables were lost")
				} else {
					m.endKernel(now, "the kernel restarted before the code began; it was not run (it may still run in the new kernel, unwatched)")
				}
				return
			case m.begun:
				m.endKernel(now, "the kernel restarted during the run (it died or was restarted); its variables were lost")
				return
			case !m.probing && m.lostAt.IsZero():
				// Ours had not begun: ZMQ may still deliver it to the new process. A
				// kernel_info_request sent behind it on the (in-order) shell channel says when the
				// new kernel has taken everything sent before.
				m.probing = true
				m.emit(askKernelInfo{})
			}
		case msg.Channel == "shell" && msg.Type == "execute_reply":
			m.begun, m.replyAt = true, now
			_ = json.Unmarshal(msg.Content, &m.reply)
		case msg.Channel == "iopub":
			m.begun = true
			if msg.Type == "status" && executionState(msg.Content) == "idle" {
				m.idleAt = now
			}
			m.addOps(m.model.apply(msg))
		}
	}
	m.advance(now)
}

// ended says the request is over: err nil when its reply and idle status both arrived, else
// why it will hear nothing more (the connection or the kernel went away).
func (m *machine) ended(now time.Time, err error) {
	if m.phase != phaseRunning {
		return
	}
	m.requestOpen = false
	if err != nil {
		m.emit(kernelLost{reason: "its connection was lost during a run"})
		if m.cfg.Scratch {
			m.status = CellAborted
			m.endKernel(now, "the kernel restarted or died: "+err.Error())
			return
		}
		m.endKernel(now, "the kernel connection was lost during the run: "+err.Error())
		return
	}
	m.completed = true
	m.endKernel(now, "")
}

// kernelState is the answer to checkKernel: gone when the server says the kernel is gone
// (404) or dead; err when it could not say (that is no death).
func (m *machine) kernelState(now time.Time, state string, gone bool, err error) {
	m.checking = false
	if m.phase != phaseRunning {
		return
	}
	switch {
	case gone:
		m.emit(kernelLost{reason: "it died during a run", closeChannel: true})
		m.endKernel(now, "the kernel died during the run")
		return
	case err == nil && m.begun && state == "idle" && !m.lastMsg.After(m.checkSentAt):
		// Idle at two looks while our begun request never ended: it was lost (a restart whose
		// signal did not reach us). A message since the look was asked makes it stale.
		m.idleLooks++
		if m.idleLooks >= 2 {
			m.endKernel(now, "the kernel is idle but this cell never finished (the kernel was probably restarted)")
			return
		}
	case err == nil && !m.begun && state == "idle" && !m.lastMsg.After(m.checkSentAt) && !m.probing && m.lostAt.IsZero():
		// Ours never began, the kernel is idle, nothing came for a heartbeat: a restart whose
		// signal did not reach us (a connection made just before it, its iopub not yet joined)
		// may have taken it with the old process. Follow it as a restart: the kernel_info_request
		// sent behind ours on the in-order shell channel is answered after ours, if ours is there.
		m.probing, m.guessed = true, true
		m.emit(askKernelInfo{})
	default:
		m.idleLooks = 0
	}
	m.advance(now)
}

// kernelInfo is the answer to askKernelInfo.
func (m *machine) kernelInfo(now time.Time, err error) {
	m.probing = false
	guessed := m.guessed
	m.guessed = false
	if m.phase != phaseRunning || m.begun {
		return
	}
	if err != nil {
		if guessed {
			// Nobody said the kernel restarted: a kernel running ours with its messages lost
			// answers only after it. Wait on, looking at the kernel again.
			m.lastMsg = now
			m.advance(now)
			return
		}
		m.endKernel(now, "the kernel restarted and did not answer afterwards: "+err.Error())
		return
	}
	// iopub and shell are separate streams: give our request's first messages a moment to
	// arrive before calling it lost.
	m.lostAt = now.Add(m.cfg.LostGrace)
	m.advance(now)
}

// interrupted is the answer to interruptKernel; a failed interrupt is tried again later.
func (m *machine) interrupted(now time.Time, err error) {
	if err != nil {
		m.interruptSent = false
		m.retryIntAt = now.Add(m.cfg.Heartbeat)
	}
	m.advance(now)
}

// cancel asks the run to stop: before the request is sent it is not sent; once the kernel runs
// it, it is interrupted (never before: the kernel may be running someone else's cell).
func (m *machine) cancel(now time.Time) {
	if m.cancelled {
		return
	}
	m.cancelled = true
	m.advance(now)
}

// stop says the driver stops following the run (the sidecar shuts down; for scratch code, the
// caller's wait ended): the kernel side ends now, the room gets one last write.
func (m *machine) stop(now time.Time) {
	if m.stopping {
		return
	}
	m.stopping = true
	if m.phase == phaseRunning {
		m.stopNow(now)
	}
	// phaseReset, phaseSend: decided when their outcome comes; phaseFlush: no more retries.
}

func (m *machine) stopNow(now time.Time) {
	if m.cfg.Scratch {
		if m.reply == nil {
			m.status = CellRunning
		}
		m.endKernel(now, noteWaitEnded)
		return
	}
	m.endKernel(now, noteShuttingDown)
}

// tick lets time pass.
func (m *machine) tick(now time.Time) { m.advance(now) }

// wrote is the outcome of a room write.
func (m *machine) wrote(now time.Time, kind writeKind, outcome writeOutcome, err error) {
	switch kind {
	case kindReset:
		m.wroteReset(now, outcome, err)
	case kindOutputs:
		w := m.writing
		m.writing, m.onItsWay = nil, false
		if w == nil {
			return
		}
		switch outcome {
		case written:
			m.roomCount = w.after
		case notApplied: // back in front of what accumulated meanwhile
			m.pending = append(append([]outputOp(nil), w.ops...), m.pending...)
			m.rewrite = m.rewrite || w.all != nil
			m.fresh = !m.stopping
			m.boundPending()
		case outputsMoved: // a human cleared them, or ran the cell too: write what the run produced
			m.pending, m.rewrite, m.fresh = nil, true, true
		case cellGone:
			m.gone, m.pending = true, nil
		default: // tried again, as a rewrite, when something new comes (or at the end)
			m.pending, m.rewrite, m.fresh = nil, true, false
		}
	case kindBeat:
		m.beating = false
		if outcome == notApplied && !m.stopping {
			break // overdue: again at once
		}
		m.nextBeat = now.Add(m.cfg.BeatEvery)
	case kindFinal:
		m.finalOut = false
		switch outcome {
		case notApplied:
			if !m.stopping {
				break // again, until the room takes it
			}
			m.roomNote = "the notebook was not reachable to write the end of the run"
			m.finish(now)
			return
		case cellGone:
			m.gone = true
			m.finish(now)
			return
		case written:
			m.finish(now)
			return
		default:
			m.roomNote = "the end of the run could not be written to the notebook"
			if err != nil {
				m.roomNote += ": " + err.Error()
			}
			m.finish(now)
			return
		}
	}
	m.advance(now)
}

func (m *machine) wroteReset(now time.Time, outcome writeOutcome, err error) {
	if m.phase != phaseReset {
		return
	}
	switch outcome {
	case written:
		switch {
		case m.cfg.Empty:
			m.status, m.lost = CellSkipped, "empty cell (outputs cleared)"
			m.finish(now)
		case m.cancelled:
			m.status = CellCancelled
			m.endKernel(now, "cancelled before it ran")
		case m.stopping:
			m.status = CellSkipped
			m.endKernel(now, "not run: the sidecar is shutting down")
		default:
			m.phase = phaseSend
			m.startedAt = now
			m.nextBeat = now.Add(m.cfg.BeatEvery) // the reset wrote the first beat
			m.emit(cellStarted{at: now})
			m.emit(sendRequest{storeHistory: true, stopOnError: m.cfg.StopOnError, metadata: map[string]any{"cellId": m.cfg.CellID}})
		}
	case notApplied: // the room is not connected: nothing changed, the cell waits for it
		switch {
		case m.cancelled:
			m.status, m.lost = CellCancelled, "cancelled before it ran"
			m.finish(now)
		case m.stopping:
			m.status, m.lost = CellSkipped, "not run: the sidecar is shutting down"
			m.finish(now)
		default:
			m.emit(resetCell{at: now, empty: m.cfg.Empty})
		}
	case cellGone:
		m.status, m.lost = CellSkipped, "not run: the cell was deleted"
		m.finish(now)
	default:
		msg := "the room refused the reset"
		if err != nil {
			msg = err.Error()
		}
		m.status, m.lost = CellSkipped, "not run: "+msg
		m.finish(now)
	}
}

// addOps takes new output operations: for the job's copy at once, for the room in turn.
func (m *machine) addOps(ops []outputOp) {
	if len(ops) == 0 || m.cfg.Scratch {
		return
	}
	m.emit(cellOutputs{ops: ops})
	if m.gone {
		return
	}
	m.pending = append(m.pending, ops...)
	m.fresh = true
	m.boundPending()
}

// boundPending replaces a long backlog (a room away for a while, a progress bar rewriting a
// line) with one rewrite of the whole outputs.
// A rewrite pending makes every operation redundant.
func (m *machine) boundPending() {
	if m.rewrite || len(m.pending) > m.cfg.MaxPending {
		m.pending, m.rewrite = nil, true
	}
}

// endKernel ends the kernel side; lost says why the request did not complete ("" when it did).
func (m *machine) endKernel(now time.Time, lost string) {
	if m.requestOpen && !m.completed {
		m.emit(abandonRequest{})
	}
	m.requestOpen = false
	m.lost = lost
	if m.cfg.Scratch {
		m.finish(now)
		return
	}
	m.phase = phaseFlush
	m.advance(now)
}

// advance does what time and the state call for: the kernel side's deadlines and liveness
// checks, the marker's beat, the next room write.
func (m *machine) advance(now time.Time) {
	if m.phase == phaseRunning {
		switch {
		case !m.idleAt.IsZero() && m.reply == nil && !now.Before(m.idleAt.Add(m.cfg.ReplyGrace)):
			if m.cfg.RepliesElsewhere {
				m.status = CellOK
				if m.model.hasError() {
					m.status = CellError
				}
				m.endKernel(now, "")
				return
			}
			m.endKernel(now, "the kernel went idle without replying (it was restarted or interrupted)")
			return
		case !m.replyAt.IsZero() && m.idleAt.IsZero() && !now.Before(m.replyAt.Add(m.cfg.ReplyGrace)):
			// Right after a restart the server's iopub link may not be up yet: the reply is
			// there, the idle status (and maybe late outputs) never come. A failed reply still
			// says why; the cell shows it.
			m.addOps(m.model.errorFromReply(m.reply))
			m.endKernel(now, "")
			return
		case !m.lostAt.IsZero() && !m.begun && !now.Before(m.lostAt):
			m.endKernel(now, "the kernel restarted before this cell began, and the cell did not run in the new kernel "+
				"(it may have partly run in the old one before it died); it was not sent again")
			return
		}
		if m.cancelled && m.begun && !m.interruptSent && !now.Before(m.retryIntAt) {
			m.interruptSent = true
			m.emit(interruptKernel{})
		}
		// Silent for a while: is the kernel still there? Not while a restart is being followed.
		if !m.probing && m.lostAt.IsZero() && !m.checking && !now.Before(m.lastMsg.Add(m.cfg.Heartbeat)) {
			m.checking, m.checkSentAt, m.lastMsg = true, now, now
			m.emit(checkKernel{})
		}
	}
	if m.cfg.Scratch || (m.phase != phaseRunning && m.phase != phaseSend && m.phase != phaseFlush) {
		return
	}
	if !m.beating && m.final == nil && !m.nextBeat.IsZero() && !now.Before(m.nextBeat) {
		m.beating = true
		m.emit(beatMarker{at: now})
	}
	m.pump()
}

// pump hands the room its next write: outputs while the kernel side runs, then the final one.
// The final write does not wait for the confirmation of an output write that is in the replica
// already: it goes right behind it, built on the outputs that write leaves.
func (m *machine) pump() {
	if m.finalOut || (m.writing != nil && !(m.phase == phaseFlush && m.onItsWay)) {
		return
	}
	if m.phase == phaseFlush {
		if m.final == nil {
			base := m.roomCount
			if m.writing != nil {
				base = m.writing.after
			}
			f := finishCell{ops: m.pending, base: base, count: m.count(), gone: m.gone}
			if !m.gone && (len(m.pending) > 0 || m.rewrite) {
				f.all = cloneOutputs(m.model.outputs)
				if m.rewrite {
					f.ops = nil
				}
			}
			m.final, m.pending = &f, nil
		}
		m.finalOut = true
		m.emit(*m.final)
		return
	}
	if m.phase != phaseRunning || m.gone || !(len(m.pending) > 0 || (m.rewrite && m.fresh)) {
		return
	}
	w := writeOutputs{base: m.roomCount}
	if m.rewrite {
		w.all = cloneOutputs(m.model.outputs)
		w.after = len(w.all)
	} else {
		w.ops = m.pending
		w.after = countAfter(w.base, w.ops)
	}
	m.pending, m.rewrite = nil, false
	m.writing = &w
	m.emit(w)
}

// countAfter is how many outputs a cell holding base holds after ops.
func countAfter(base int, ops []outputOp) int {
	for _, op := range ops {
		base = op.resize(base)
	}
	return base
}

// count is the execution count the reply gave (not for scratch code).
func (m *machine) count() *int {
	if m.cfg.Scratch || m.reply == nil {
		return nil
	}
	if n, ok := m.reply["execution_count"].(float64); ok {
		v := int(n)
		return &v
	}
	return nil
}

// finish ends the run and queues its result.
func (m *machine) finish(now time.Time) {
	m.phase = phaseDone
	m.emit(cellFinished{run: m.result(now)})
}

func (m *machine) result(now time.Time) CellRun {
	status := m.status
	if status == "" {
		status = CellAborted
		switch m.reply["status"] {
		case "ok":
			status = CellOK
		case "error":
			status = CellError
		}
	}
	note := m.lost
	if m.gone {
		note = joinNotes(note, noteCellDeleted)
	}
	note = joinNotes(note, m.roomNote)
	run := CellRun{CellID: m.cfg.CellID, Index: -1, Status: status, ExecutionCount: m.count(), Note: note, Started: m.startedAt}
	if !m.startedAt.IsZero() {
		run.Outputs = cloneOutputs(m.model.outputs)
		run.Ended = now
	}
	return run
}

// wake is when the machine next needs tick (zero: only an input can move it).
func (m *machine) wake() time.Time {
	var t time.Time
	at := func(c time.Time) {
		if !c.IsZero() && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	if m.phase == phaseRunning {
		if !m.idleAt.IsZero() && m.reply == nil {
			at(m.idleAt.Add(m.cfg.ReplyGrace))
		}
		if !m.replyAt.IsZero() && m.idleAt.IsZero() {
			at(m.replyAt.Add(m.cfg.ReplyGrace))
		}
		if !m.lostAt.IsZero() && !m.begun {
			at(m.lostAt)
		}
		if m.cancelled && m.begun && !m.interruptSent {
			at(m.retryIntAt)
		}
		if !m.probing && m.lostAt.IsZero() && !m.checking {
			at(m.lastMsg.Add(m.cfg.Heartbeat))
		}
	}
	if !m.cfg.Scratch && (m.phase == phaseRunning || m.phase == phaseSend || m.phase == phaseFlush) && !m.beating && m.final == nil {
		at(m.nextBeat)
	}
	return t
}

func executionState(content json.RawMessage) string {
	var st struct {
		ExecutionState string `json:"execution_state"`
	}
	_ = json.Unmarshal(content, &st)
	return st.ExecutionState
}
