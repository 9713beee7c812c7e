package execution

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Deterministic tests of the run state machine: no kernel, no room, no goroutine, no clock. A
// harness plays the driver: it feeds simulated kernel messages, room write outcomes and the
// time, and looks at the actions that come out. A fake cell applies the room writes the way the
// transactions in roomwrite.go do, so the tests can check what a notebook ends up holding.

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// mh drives one machine.
type mh struct {
	t    *testing.T
	m    *machine
	now  time.Time
	acts []action // taken and not yet looked at
	cell fakeCell
}

func newMH(t *testing.T, cfg machineConfig) *mh {
	t.Helper()
	if cfg.CellID == "" && !cfg.Scratch {
		cfg.CellID = "c1"
	}
	if cfg.Code == "" && !cfg.Empty {
		cfg.Code = "print('hi')"
	}
	return &mh{t: t, m: newMachine(cfg), now: epoch}
}

// testConfig is the timing every test uses (the defaults, spelled out).
func testConfig() machineConfig {
	return machineConfig{Heartbeat: 5 * time.Second, BeatEvery: 20 * time.Second, ReplyGrace: 3 * time.Second, LostGrace: time.Second, MaxPending: 256}
}

// collect moves the machine's new actions into h.acts.
func (h *mh) collect() { h.acts = append(h.acts, h.m.take()...) }

// after lets d pass and ticks.
func (h *mh) after(d time.Duration) {
	h.now = h.now.Add(d)
	h.m.tick(h.now)
	h.collect()
}

// msgs delivers kernel messages.
func (h *mh) msgs(ms ...KernelMsg) {
	h.m.messages(h.now, ms)
	h.collect()
}

// wrote answers a room write.
func (h *mh) wrote(kind writeKind, o writeOutcome) {
	h.m.wrote(h.now, kind, o, nil)
	h.collect()
}

// grab removes and returns the first queued action of type T, failing when there is none.
func grab[T action](h *mh) T {
	h.t.Helper()
	for i, a := range h.acts {
		if v, ok := a.(T); ok {
			h.acts = append(h.acts[:i:i], h.acts[i+1:]...)
			return v
		}
	}
	var zero T
	h.t.Fatalf("no %T among the actions %s", zero, describe(h.acts))
	return zero
}

// none fails when an action of type T is queued.
func none[T action](h *mh, why string) {
	h.t.Helper()
	for _, a := range h.acts {
		if _, ok := a.(T); ok {
			h.t.Fatalf("%T queued %s: %s", a, why, describe(h.acts))
		}
	}
}

func describe(acts []action) string {
	var parts []string
	for _, a := range acts {
		parts = append(parts, fmt.Sprintf("%T%+v", a, a))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// running starts a cell run and brings it to "sent": reset written, request sent.
func (h *mh) running() {
	h.t.Helper()
	h.m.start(h.now)
	h.collect()
	r := grab[resetCell](h)
	if !r.at.Equal(h.now) || r.empty {
		h.t.Fatalf("reset %+v", r)
	}
	h.cell.running = true
	h.wrote(kindReset, written)
	grab[cellStarted](h)
	s := grab[sendRequest](h)
	if !s.storeHistory || s.metadata["cellId"] != h.m.cfg.CellID {
		h.t.Fatalf("request %+v, want store_history and the cell id", s)
	}
	h.m.sent(h.now, nil)
	h.collect()
}

// roomWrite applies the queued output write to the fake cell and answers it.
func (h *mh) roomWrite() writeOutputs {
	h.t.Helper()
	w := grab[writeOutputs](h)
	h.wrote(kindOutputs, h.cell.apply(w))
	return w
}

// finishRoom applies the final write and returns the run's result.
func (h *mh) finishRoom() CellRun {
	h.t.Helper()
	f := grab[finishCell](h)
	h.cell.finish(f)
	h.wrote(kindFinal, written)
	return h.result()
}

func (h *mh) result() CellRun {
	h.t.Helper()
	r := grab[cellFinished](h).run
	if !h.m.done() {
		h.t.Fatal("cellFinished queued but the machine is not done")
	}
	return r
}

// fakeCell is a notebook cell as the room writes leave it.
type fakeCell struct {
	outputs []map[string]any
	count   *int
	running bool
	writes  int
}

func (c *fakeCell) apply(w writeOutputs) writeOutcome {
	c.writes++
	if w.all != nil {
		c.outputs = cloneOutputs(w.all)
		return written
	}
	if len(c.outputs) != w.base {
		return outputsMoved
	}
	c.outputs = applyOps(c.outputs, w.ops)
	return written
}

func (c *fakeCell) finish(f finishCell) {
	c.writes++
	if f.gone {
		return
	}
	switch {
	case f.all != nil && (f.ops == nil || len(c.outputs) != f.base):
		c.outputs = cloneOutputs(f.all)
	case len(f.ops) > 0:
		c.outputs = applyOps(c.outputs, f.ops)
	}
	c.count, c.running = f.count, false
}

// Kernel messages.

func iopub(typ string, content map[string]any) KernelMsg { return msg(typ, content) }
func status(state string) KernelMsg {
	return iopub("status", map[string]any{"execution_state": state})
}
func stream(text string) KernelMsg {
	return iopub("stream", map[string]any{"name": "stdout", "text": text})
}
func reply(content map[string]any) KernelMsg {
	b, _ := json.Marshal(content)
	return KernelMsg{Channel: "shell", Type: "execute_reply", Content: b}
}
func replyOK(count int) KernelMsg {
	return reply(map[string]any{"status": "ok", "execution_count": count})
}

var restarting = KernelMsg{Channel: "server", Type: MsgKernelRestarting}

func texts(outs []map[string]any) string {
	var b strings.Builder
	for _, o := range outs {
		switch o["output_type"] {
		case "stream":
			b.WriteString(fmt.Sprint(o["text"]))
		case "error":
			fmt.Fprintf(&b, "<%v: %v>", o["ename"], o["evalue"])
		default:
			fmt.Fprintf(&b, "<%v>", o["output_type"])
		}
	}
	return b.String()
}

func mustNote(t *testing.T, note string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(note, s) {
			t.Errorf("note %q does not say %q", note, s)
		}
	}
}

// ---- the ordinary run ----

func TestMachineRunsACellLikeJupyterLab(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), iopub("execute_input", map[string]any{"code": "x"}), stream("a\n"))
	w := h.roomWrite()
	if len(w.ops) != 1 || w.ops[0].kind != opInsert || w.base != 0 {
		t.Fatalf("first write %+v, want one insert on an empty cell", w)
	}
	// The job's copy gets every change at once.
	if o := grab[cellOutputs](h); len(o.ops) != 1 {
		t.Errorf("job outputs %+v", o)
	}
	h.msgs(stream("b\n"))
	if w := h.roomWrite(); len(w.ops) != 1 || w.ops[0].kind != opText || w.base != 1 {
		t.Fatalf("second write %+v, want the merged stream's text on one output", w)
	}
	h.msgs(iopub("execute_result", map[string]any{"execution_count": 1, "data": map[string]any{"text/plain": "42"}}), replyOK(1), status("idle"))
	h.roomWrite()
	none[finishCell](h, "before the request ended")
	h.m.ended(h.now, nil)
	h.collect()
	none[abandonRequest](h, "for a request that completed")
	run := h.finishRoom()
	if run.Status != CellOK || run.ExecutionCount == nil || *run.ExecutionCount != 1 || run.Note != "" || !run.Started.Equal(epoch) {
		t.Errorf("result %+v", run)
	}
	if texts(run.Outputs) != "a\nb\n<execute_result>" || texts(h.cell.outputs) != texts(run.Outputs) {
		t.Errorf("outputs: result %s, cell %s", texts(run.Outputs), texts(h.cell.outputs))
	}
	if h.cell.count == nil || *h.cell.count != 1 || h.cell.running {
		t.Errorf("cell after the run: count %v running %v", h.cell.count, h.cell.running)
	}
}

func TestMachineEmptyCellIsOnlyReset(t *testing.T) {
	h := newMH(t, machineConfig{Empty: true})
	h.m.start(h.now)
	h.collect()
	if r := grab[resetCell](h); !r.empty {
		t.Fatalf("reset %+v, want the empty-cell reset", r)
	}
	h.wrote(kindReset, written)
	none[sendRequest](h, "for an empty cell")
	if run := h.result(); run.Status != CellSkipped || run.Note != "empty cell (outputs cleared)" {
		t.Errorf("result %+v", run)
	}
}

func TestMachineCellDeletedBeforeTheReset(t *testing.T) {
	h := newMH(t, testConfig())
	h.m.start(h.now)
	h.collect()
	grab[resetCell](h)
	h.wrote(kindReset, cellGone)
	none[sendRequest](h, "for a deleted cell")
	none[finishCell](h, "for a cell that was never reset")
	if run := h.result(); run.Status != CellSkipped || run.Note != "not run: the cell was deleted" {
		t.Errorf("result %+v", run)
	}
}

// ---- a room that is away: bounded waits, nothing lost, nothing doubled ----

// The room is not connected for a while: each output write comes back untaken after its
// bounded wait; the kernel's messages keep flowing into the run (and the job's copy), the marker
// keeps being asked to beat, and once the room takes writes again the cell ends up with every
// output exactly once.
func TestMachineOutputsWaitForTheRoomNothingLostNothingDoubled(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), stream("1\n"))
	first := grab[writeOutputs](h)
	var jobOps int
	for i := 2; i <= 40; i++ {
		h.msgs(stream(fmt.Sprintf("%d\n", i)), iopub("display_data", map[string]any{"data": map[string]any{"text/plain": fmt.Sprint(i)}}))
		none[writeOutputs](h, "while one is in flight")
		jobOps += len(grab[cellOutputs](h).ops)
		if i%10 == 0 { // the bounded wait ran out: taken back, tried again with everything since
			h.wrote(kindOutputs, notApplied)
			first = grab[writeOutputs](h)
			if first.all == nil && (len(first.ops) == 0 || first.ops[0].kind != opInsert || first.base != 0) {
				t.Fatalf("retry %+v does not start with what was taken back", first)
			}
		}
		h.after(time.Second) // the kernel is looked at when silent, the marker beats
		h.service()
	}
	if jobOps == 0 {
		t.Fatal("the job's copy got no outputs while the room was away")
	}
	// The room is back: the write in flight lands, then the rest.
	h.wrote(kindOutputs, h.cell.apply(first))
	h.msgs(replyOK(3), status("idle"))
	for len(h.acts) > 0 {
		if _, ok := h.acts[0].(writeOutputs); !ok {
			h.acts = h.acts[1:]
			continue
		}
		h.roomWrite()
	}
	h.m.ended(h.now, nil)
	h.collect()
	run := h.finishRoom()
	want := texts(run.Outputs)
	if got := texts(h.cell.outputs); got != want || !reflect.DeepEqual(h.cell.outputs, run.Outputs) {
		t.Errorf("the cell holds %s\nthe run produced %s", got, want)
	}
	if n := strings.Count(want, "\n"); n != 40 {
		t.Errorf("run outputs %s: want 40 lines", want)
	}
}

// A long backlog becomes one rewrite of the whole outputs instead of growing without bound.
func TestMachineLongBacklogBecomesOneRewrite(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPending = 8
	h := newMH(t, cfg)
	h.running()
	h.msgs(stream("x\n"))
	w := grab[writeOutputs](h)
	for i := range 20 {
		h.msgs(iopub("display_data", map[string]any{"data": map[string]any{"text/plain": fmt.Sprint(i)}}))
	}
	if len(h.m.pending) != 0 || !h.m.rewrite {
		t.Fatalf("pending %d ops, rewrite %v: want none pending and a rewrite", len(h.m.pending), h.m.rewrite)
	}
	h.wrote(kindOutputs, h.cell.apply(w))
	rw := grab[writeOutputs](h)
	if rw.all == nil || len(rw.all) != 21 || rw.ops != nil {
		t.Fatalf("after the backlog: %+v, want a rewrite of 21 outputs", rw)
	}
	h.wrote(kindOutputs, h.cell.apply(rw))
	if len(h.cell.outputs) != 21 {
		t.Errorf("cell holds %d outputs", len(h.cell.outputs))
	}
}

// A human cleared the outputs (or ran the cell) while ours ran: the operations no longer fit,
// and the run writes what it produced instead.
func TestMachineOutputsMovedUnderTheRunAreRewritten(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(stream("a\n"), iopub("display_data", map[string]any{"data": map[string]any{"text/plain": "d"}}))
	h.roomWrite()
	h.cell.outputs = nil // someone cleared them
	h.msgs(stream("b\n"))
	w := grab[writeOutputs](h)
	h.wrote(kindOutputs, h.cell.apply(w))
	rw := grab[writeOutputs](h)
	if rw.all == nil || texts(rw.all) != "a\n<display_data>b\n" {
		t.Fatalf("after the ops did not fit: %+v", rw)
	}
	h.wrote(kindOutputs, h.cell.apply(rw))
	if texts(h.cell.outputs) != "a\n<display_data>b\n" {
		t.Errorf("cell %s", texts(h.cell.outputs))
	}
}

// An output write that fails for good (the room closed) is not retried in a loop; the next
// output (or the final write) rewrites the whole outputs.
func TestMachineFailedWriteIsRetriedWithTheNextOutput(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(stream("a\n"))
	grab[writeOutputs](h)
	h.wrote(kindOutputs, writeFailed)
	none[writeOutputs](h, "right after a failure")
	h.after(10 * time.Second)
	none[writeOutputs](h, "with nothing new to write")
	h.msgs(stream("b\n"))
	if w := grab[writeOutputs](h); w.all == nil || texts(w.all) != "a\nb\n" {
		t.Fatalf("next write %+v, want a rewrite of both", w)
	}
}

// The run marker beats on its own clock: an output write stuck in flight does not stop it.
func TestMachineMarkerBeatsWhileAWriteIsStuck(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), stream("a\n"))
	grab[writeOutputs](h) // never answered: the room holds it
	var beats []time.Time
	for range 70 {
		h.after(time.Second)
		beats = append(beats, h.service()...)
	}
	want := []time.Time{epoch.Add(20 * time.Second), epoch.Add(40 * time.Second), epoch.Add(60 * time.Second)}
	if !reflect.DeepEqual(beats, want) {
		t.Errorf("beats at %v, want %v", beats, want)
	}
}

// service answers the liveness checks (the kernel is busy) and the marker's beats (written)
// queued now, and returns when each beat was asked for.
func (h *mh) service() (beats []time.Time) {
	for {
		if _, ok := firstOf[checkKernel](h); ok {
			h.m.kernelState(h.now, "busy", false, nil)
			h.collect()
			continue
		}
		if b, ok := firstOf[beatMarker](h); ok {
			beats = append(beats, b.at)
			h.wrote(kindBeat, written)
			continue
		}
		return beats
	}
}

// A beat the room could not take (it is away) is asked for again at once: the marker is
// overdue.
func TestMachineBeatRetriedWhenTheRoomIsAway(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"))
	h.after(20 * time.Second)
	grab[checkKernel](h)
	h.m.kernelState(h.now, "busy", false, nil)
	h.collect()
	grab[beatMarker](h)
	h.now = h.now.Add(5 * time.Second)
	h.wrote(kindBeat, notApplied)
	if b := grab[beatMarker](h); !b.at.Equal(h.now) {
		t.Errorf("retried beat at %v, want now", b.at)
	}
	h.wrote(kindBeat, written)
	none[beatMarker](h, "right after one was written")
	if w := h.m.wake(); w.After(h.now.Add(20*time.Second)) || w.Before(h.now) {
		t.Errorf("wake %v", w)
	}
}

// firstOf removes the first queued action of type T, if any.
func firstOf[T action](h *mh) (T, bool) {
	for i, a := range h.acts {
		if v, ok := a.(T); ok {
			h.acts = append(h.acts[:i:i], h.acts[i+1:]...)
			return v, true
		}
	}
	var zero T
	return zero, false
}

// The reset waits for the room (a cell whose room is away is not sent to the kernel), and goes
// out as soon as the room takes it.
func TestMachineResetWaitsForTheRoom(t *testing.T) {
	h := newMH(t, testConfig())
	h.m.start(h.now)
	h.collect()
	for range 3 {
		grab[resetCell](h)
		h.now = h.now.Add(5 * time.Second)
		h.wrote(kindReset, notApplied)
		none[sendRequest](h, "before the reset was applied")
	}
	r := grab[resetCell](h)
	if !r.at.Equal(h.now) {
		t.Errorf("retried reset at %v, want now (%v): its marker would start stale", r.at, h.now)
	}
	h.wrote(kindReset, written)
	grab[sendRequest](h)
}

// Cancelled while the room is away before the reset: nothing is sent, nothing to undo.
func TestMachineCancelBeforeTheReset(t *testing.T) {
	h := newMH(t, testConfig())
	h.m.start(h.now)
	h.collect()
	grab[resetCell](h)
	h.m.cancel(h.now)
	h.wrote(kindReset, notApplied)
	none[sendRequest](h, "for a cancelled cell")
	none[finishCell](h, "for a cell never reset")
	if run := h.result(); run.Status != CellCancelled || run.Note != "cancelled before it ran" {
		t.Errorf("result %+v", run)
	}
}

// Deleted while it ran: later outputs are not written, the marker still goes.
func TestMachineCellDeletedWhileItRuns(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(stream("a\n"))
	grab[writeOutputs](h)
	h.wrote(kindOutputs, cellGone)
	h.msgs(stream("b\n"), replyOK(1), status("idle"))
	none[writeOutputs](h, "for a deleted cell")
	h.m.ended(h.now, nil)
	h.collect()
	f := grab[finishCell](h)
	if !f.gone || f.all != nil {
		t.Errorf("final write %+v, want only the marker removed", f)
	}
	h.wrote(kindFinal, written)
	run := h.result()
	if run.Status != CellOK || texts(run.Outputs) != "a\nb\n" {
		t.Errorf("result %+v", run)
	}
	mustNote(t, run.Note, "deleted while it ran")
}

// ---- the kernel side ----

// Someone presses Restart before our request began (the server sends no "restarting" status,
// only the old kernel's shutdown_reply, which the kernel connection turns into
// MsgKernelRestarting): ours may still reach the new process. A kernel_info_request sent behind
// it says when; it began in time here.
func TestMachineRestartBeforeBeginDeliveredLate(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(restarting)
	grab[askKernelInfo](h)
	h.after(10 * time.Second) // a restart takes a while: no liveness check meanwhile, no loss
	none[checkKernel](h, "while the restart is followed")
	h.m.kernelInfo(h.now, nil)
	h.collect()
	h.after(500 * time.Millisecond)
	h.msgs(status("busy"), stream("late\n"), replyOK(1), status("idle"))
	h.roomWrite()
	h.m.ended(h.now, nil)
	h.collect()
	none[sendRequest](h, "again")
	if run := h.finishRoom(); run.Status != CellOK || run.Note != "" || texts(run.Outputs) != "late\n" {
		t.Errorf("result %+v", run)
	}
}

// The same, but ours never begins in the new kernel: lost, reported, never sent again.
func TestMachineRestartBeforeBeginNeverDelivered(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(restarting)
	grab[askKernelInfo](h)
	h.m.kernelInfo(h.now, nil)
	h.collect()
	h.after(999 * time.Millisecond)
	none[finishCell](h, "within the grace")
	h.after(time.Millisecond)
	grab[abandonRequest](h)
	none[sendRequest](h, "again")
	run := h.finishRoom()
	if run.Status != CellAborted || run.ExecutionCount != nil {
		t.Errorf("result %+v", run)
	}
	mustNote(t, run.Note, "did not run in the new kernel", "not sent again")
	if h.cell.running {
		t.Error("the cell was left running")
	}
}

// The new kernel does not answer the kernel_info_request.
func TestMachineRestartBeforeBeginNoAnswer(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(restarting)
	grab[askKernelInfo](h)
	h.m.kernelInfo(h.now, errors.New("context deadline exceeded"))
	h.collect()
	mustNote(t, h.finishRoom().Note, "restarted and did not answer")
}

// A restart once ours began: its process is gone with what it did; the cell ends at once.
func TestMachineRestartDuringTheRunAborts(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), stream("half\n"))
	h.roomWrite()
	h.msgs(restarting)
	grab[abandonRequest](h)
	none[askKernelInfo](h, "for a request that had begun")
	run := h.finishRoom()
	if run.Status != CellAborted || run.ExecutionCount != nil || texts(h.cell.outputs) != "half\n" {
		t.Errorf("result %+v, cell %s", run, texts(h.cell.outputs))
	}
	mustNote(t, run.Note, "restarted during the run")
}

// A restart whose signal never reaches us: ours had begun, then silence. The liveness checks
// find the kernel idle twice in a row: the cell ends.
func TestMachineRestartNobodyToldUs(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"))
	h.after(5 * time.Second)
	grab[checkKernel](h)
	h.m.kernelState(h.now, "idle", false, nil)
	h.collect()
	none[finishCell](h, "after one idle look")
	h.after(5 * time.Second)
	grab[checkKernel](h)
	h.m.kernelState(h.now, "idle", false, nil)
	h.collect()
	grab[abandonRequest](h)
	mustNote(t, h.finishRoom().Note, "idle but this cell never finished")
}

// idleLookBeforeBegin starts a run whose request never begins: after a silent heartbeat the
// liveness check finds the kernel idle, and the run asks for a kernel_info behind ours.
func idleLookBeforeBegin(t *testing.T) *mh {
	t.Helper()
	h := newMH(t, testConfig())
	h.running()
	h.after(5 * time.Second)
	grab[checkKernel](h)
	h.m.kernelState(h.now, "idle", false, nil)
	h.collect()
	grab[askKernelInfo](h)
	return h
}

// A restart whose signal never reaches us before ours began (found by the fault injection: our
// connection was made 300 ms before the restart): silence, and the kernel idle at the liveness
// check. It is followed as a restart: the kernel_info_request behind ours is answered and ours
// never begins: lost, reported, never sent again — not left running.
func TestMachineRestartBeforeBeginNobodyToldUs(t *testing.T) {
	h := idleLookBeforeBegin(t)
	h.after(10 * time.Second)
	none[checkKernel](h, "while the probe is out")
	h.m.kernelInfo(h.now, nil)
	h.collect()
	h.after(time.Second)
	grab[abandonRequest](h)
	none[sendRequest](h, "again")
	run := h.finishRoom()
	if run.Status != CellAborted || run.ExecutionCount != nil {
		t.Errorf("result %+v", run)
	}
	mustNote(t, run.Note, "did not run in the new kernel", "not sent again")
}

// The same look on a request that is only slow to show (the kernel idle at the look, ours
// begins once asked behind): it runs to its end as usual.
func TestMachineIdleLookBeforeBeginThenItRuns(t *testing.T) {
	h := idleLookBeforeBegin(t)
	h.msgs(status("busy"), stream("late\n"), replyOK(1), status("idle"))
	h.roomWrite()
	h.m.ended(h.now, nil)
	h.collect()
	h.m.kernelInfo(h.now, nil)
	h.collect()
	if run := h.finishRoom(); run.Status != CellOK || run.Note != "" || texts(run.Outputs) != "late\n" {
		t.Errorf("result %+v", run)
	}
}

// A guessed restart whose kernel_info_request is not answered (a kernel running ours with every
// message of it lost answers only after ours): the run waits on and looks at the kernel again.
func TestMachineGuessedRestartUnansweredWaitsOn(t *testing.T) {
	h := idleLookBeforeBegin(t)
	h.m.kernelInfo(h.now, errors.New("context deadline exceeded"))
	h.collect()
	none[finishCell](h, "on a guessed restart's unanswered probe")
	h.after(5 * time.Second)
	grab[checkKernel](h)
	h.m.kernelState(h.now, "busy", false, nil)
	h.collect()
	h.msgs(stream("done\n"), replyOK(1), status("idle"))
	h.roomWrite()
	h.m.ended(h.now, nil)
	h.collect()
	if run := h.finishRoom(); run.Status != CellOK || run.Note != "" || texts(run.Outputs) != "done\n" {
		t.Errorf("result %+v", run)
	}
}

// An idle look made stale by a message that came while it was asked does not count.
func TestMachineStaleIdleLookDoesNotCount(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"))
	for range 3 {
		h.after(5 * time.Second)
		grab[checkKernel](h)
		h.now = h.now.Add(10 * time.Millisecond)
		h.msgs(stream("tick\n")) // the kernel spoke meanwhile
		h.roomWrite()
		h.m.kernelState(h.now, "idle", false, nil)
		h.collect()
		none[finishCell](h, "on idle looks older than the kernel's last message")
	}
}

// A silent kernel that the server says is gone (404) or dead: the run ends, the channel is
// closed, the next run gets another kernel.
func TestMachineKernelDiesSilently(t *testing.T) {
	for _, state := range []string{"dead", "404"} {
		t.Run(state, func(t *testing.T) {
			h := newMH(t, testConfig())
			h.running()
			h.after(5 * time.Second)
			grab[checkKernel](h)
			h.m.kernelState(h.now, state, true, nil)
			h.collect()
			if l := grab[kernelLost](h); !l.closeChannel || l.reason != "it died during a run" {
				t.Errorf("kernelLost %+v", l)
			}
			mustNote(t, h.finishRoom().Note, "the kernel died during the run")
		})
	}
}

// A failed state request (a 503) says nothing about the kernel: the run goes on.
func TestMachineTransientStateErrorIsNoDeath(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.after(5 * time.Second)
	grab[checkKernel](h)
	h.m.kernelState(h.now, "", false, errors.New("HTTP 503"))
	h.collect()
	none[kernelLost](h, "on a transient error")
	none[finishCell](h, "on a transient error")
	h.after(5 * time.Second)
	grab[checkKernel](h) // and it looks again later
}

// The kernel goes idle for our request and the reply never comes (it was lost).
func TestMachineIdleWithoutReply(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), stream("x\n"), status("idle"))
	h.roomWrite()
	h.after(2999 * time.Millisecond)
	none[finishCell](h, "within the grace")
	h.after(time.Millisecond)
	run := h.finishRoom()
	if run.Status != CellAborted {
		t.Errorf("result %+v", run)
	}
	mustNote(t, run.Note, "went idle without replying")
}

// The reply comes, its idle status never does (right after a restart, iopub may not be up): the
// cell ends after the grace with what it has.
func TestMachineReplyWithoutIdle(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(replyOK(4))
	h.after(3 * time.Second)
	grab[abandonRequest](h)
	run := h.finishRoom()
	if run.Status != CellOK || run.ExecutionCount == nil || *run.ExecutionCount != 4 || run.Note != "" {
		t.Errorf("result %+v", run)
	}
}

// A failed reply whose iopub error never arrives: the cell shows the reply's error.
func TestMachineFailedReplyWithoutIopubError(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(reply(map[string]any{"status": "error", "execution_count": 2, "ename": "NameError", "evalue": "name 'x' is not defined", "traceback": []any{"tb"}}))
	h.after(3 * time.Second)
	run := h.finishRoom()
	if run.Status != CellError || texts(run.Outputs) != "<NameError: name 'x' is not defined>" || texts(h.cell.outputs) != texts(run.Outputs) {
		t.Errorf("result %+v, cell %s", run, texts(h.cell.outputs))
	}
}

// The connection ends before the request completed.
func TestMachineConnectionLost(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.m.ended(h.now, errors.New("jupyter: kernel connection lost"))
	h.collect()
	if l := grab[kernelLost](h); l.closeChannel {
		t.Errorf("kernelLost %+v: the channel is already gone", l)
	}
	mustNote(t, h.finishRoom().Note, "connection was lost during the run")
}

// The request could not be sent: nothing ran, the cell goes back to idle.
func TestMachineNotSent(t *testing.T) {
	h := newMH(t, testConfig())
	h.m.start(h.now)
	h.collect()
	grab[resetCell](h)
	h.wrote(kindReset, written)
	grab[sendRequest](h)
	h.m.sent(h.now, errors.New("closed"))
	h.collect()
	none[abandonRequest](h, "for a request never sent")
	run := h.finishRoom()
	if run.Status != CellAborted {
		t.Errorf("result %+v", run)
	}
	mustNote(t, run.Note, "not sent")
}

// ---- cancel and interrupt ----

// A cancel before our request began interrupts nothing (the kernel may be running a human's
// cell); once ours begins, it is interrupted, once; a failed interrupt is tried again.
func TestMachineCancelInterruptsOnlyOurs(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.m.cancel(h.now)
	h.collect()
	none[interruptKernel](h, "before our request began")
	h.msgs(status("busy"))
	grab[interruptKernel](h)
	h.msgs(stream("x\n"))
	none[interruptKernel](h, "twice")
	h.m.interrupted(h.now, errors.New("HTTP 500"))
	h.collect()
	none[interruptKernel](h, "right after it failed")
	h.after(5 * time.Second)
	grab[interruptKernel](h)
	h.m.interrupted(h.now, nil)
	h.collect()
	h.msgs(iopub("error", map[string]any{"ename": "KeyboardInterrupt", "evalue": "", "traceback": []any{}}),
		reply(map[string]any{"status": "error", "execution_count": 1}), status("idle"))
	h.m.ended(h.now, nil)
	h.collect()
	for {
		if _, ok := firstOf[writeOutputs](h); !ok {
			break
		}
		h.m.wrote(h.now, kindOutputs, written, nil)
		h.collect()
	}
	if run := h.finishRoom(); run.Status != CellError {
		t.Errorf("result %+v (the job turns an error after a cancel into cancelled)", run)
	}
}

// ---- writes on their way ----

// The request goes as soon as the reset is in the replica, on its way to the server (the room
// sends in order: everything the run writes later reaches the server after it), one server
// round trip before the reset's confirmation; the confirmation changes nothing.
func TestMachineRequestGoesOnceTheResetIsOnItsWay(t *testing.T) {
	h := newMH(t, testConfig())
	h.m.start(h.now)
	h.collect()
	grab[resetCell](h)
	none[sendRequest](h, "before the reset is in the replica")
	h.m.applied(h.now, kindReset)
	h.collect()
	grab[cellStarted](h)
	grab[sendRequest](h)
	h.m.sent(h.now, nil)
	h.collect()
	h.msgs(status("busy"), stream("a\n"))
	h.wrote(kindReset, written) // the confirmation, after the first output
	none[sendRequest](h, "again when the reset was confirmed")
	none[resetCell](h, "again when the reset was confirmed")
	h.roomWrite()
	h.msgs(replyOK(1), status("idle"))
	h.m.ended(h.now, nil)
	h.collect()
	if run := h.finishRoom(); run.Status != CellOK || texts(h.cell.outputs) != "a\n" {
		t.Errorf("result %+v, cell %s", run, texts(h.cell.outputs))
	}
}

// Runs that end without a request wait for the reset's confirmation: their result is the reset.
func TestMachineRunsWithoutARequestWaitForTheResetsConfirmation(t *testing.T) {
	for name, setup := range map[string]func(h *mh){
		"empty cell": func(h *mh) {},
		"cancelled":  func(h *mh) { h.m.cancel(h.now) },
		"stopped":    func(h *mh) { h.m.stop(h.now) },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Empty = name == "empty cell"
			h := newMH(t, cfg)
			h.m.start(h.now)
			h.collect()
			grab[resetCell](h)
			setup(h)
			h.m.applied(h.now, kindReset)
			h.collect()
			none[sendRequest](h, "for a run that sends none")
			none[cellFinished](h, "before the reset was confirmed")
			h.wrote(kindReset, written)
			none[sendRequest](h, "for a run that sends none")
			h.acts = append(h.acts, h.m.take()...)
			for _, a := range h.acts {
				if f, ok := a.(finishCell); ok {
					h.cell.finish(f)
					h.m.wrote(h.now, kindFinal, written, nil)
					h.collect()
				}
			}
			if run := h.result(); run.Status == CellOK || !run.Started.IsZero() {
				t.Errorf("result %+v, want a run that never started", run)
			}
		})
	}
}

// The final write follows an output write that is in the replica already without waiting for
// its confirmation, built on the outputs that write leaves.
func TestMachineFinalWriteFollowsAnOutputWriteOnItsWay(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), iopub("execute_result", map[string]any{"execution_count": 1, "data": map[string]any{"text/plain": "2"}}))
	w := grab[writeOutputs](h)
	h.m.applied(h.now, kindOutputs)
	h.collect()
	h.msgs(stream("late\n"), replyOK(1), status("idle"))
	h.m.ended(h.now, nil)
	h.collect()
	none[writeOutputs](h, "once the kernel side is over")
	f := grab[finishCell](h)
	if f.base != w.after || len(f.ops) != 1 || f.count == nil || *f.count != 1 {
		t.Fatalf("final write %+v, want the late output on top of the %d the write in flight leaves", f, w.after)
	}
	// The room applies them in order; the confirmations come after.
	if o := h.cell.apply(w); o != written {
		t.Fatalf("output write: %v", o)
	}
	h.cell.finish(f)
	h.wrote(kindOutputs, written)
	none[finishCell](h, "again when the output write was confirmed")
	h.wrote(kindFinal, written)
	run := h.result()
	if run.Status != CellOK || texts(h.cell.outputs) != "<execute_result>late\n" || texts(run.Outputs) != texts(h.cell.outputs) || h.cell.running {
		t.Errorf("result %+v, cell %s running %v", run, texts(h.cell.outputs), h.cell.running)
	}
}

// An output write not known to be in the replica may yet be taken back (the room is away): the
// final write waits for its outcome and then carries what it did not write.
func TestMachineFinalWriteWaitsForAnOutputWriteNotOnItsWay(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(stream("a\n"))
	grab[writeOutputs](h)
	h.msgs(stream("b\n"), replyOK(1), status("idle"))
	h.m.ended(h.now, nil)
	h.collect()
	none[finishCell](h, "while an output write that may be taken back is in flight")
	h.wrote(kindOutputs, notApplied)
	f := grab[finishCell](h)
	h.cell.finish(f)
	h.wrote(kindFinal, written)
	if run := h.result(); texts(h.cell.outputs) != "a\nb\n" || texts(run.Outputs) != "a\nb\n" {
		t.Errorf("cell %s, run %s", texts(h.cell.outputs), texts(run.Outputs))
	}
}

// ---- stopping ----

// The sidecar shuts down mid-run: the request is let go, the cell gets one last write.
func TestMachineStopMidRun(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(status("busy"), stream("a\n"))
	h.roomWrite()
	h.m.stop(h.now)
	h.collect()
	grab[abandonRequest](h)
	run := h.finishRoom()
	if run.Status != CellAborted || texts(h.cell.outputs) != "a\n" || h.cell.running {
		t.Errorf("result %+v, cell %s running %v", run, texts(h.cell.outputs), h.cell.running)
	}
	mustNote(t, run.Note, "shutting down")
}

// Shutting down while the room is away: the last write gets one try, then the run ends anyway.
func TestMachineStopWhileTheRoomIsAway(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(stream("a\n"))
	grab[writeOutputs](h)
	h.m.stop(h.now)
	h.collect()
	grab[abandonRequest](h)
	none[finishCell](h, "while an output write is in flight")
	h.wrote(kindOutputs, notApplied)
	f := grab[finishCell](h)
	if texts(f.all) != "a\n" {
		t.Errorf("final write %+v, want it to carry the outputs taken back", f)
	}
	h.wrote(kindFinal, notApplied)
	none[finishCell](h, "again while stopping")
	mustNote(t, h.result().Note, "not reachable")
}

// The final write the room could not take is written again until it can (not stopping).
func TestMachineFinalWriteWaitsForTheRoom(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	h.msgs(replyOK(1), status("idle"))
	h.m.ended(h.now, nil)
	h.collect()
	for range 3 {
		grab[finishCell](h)
		h.now = h.now.Add(10 * time.Second)
		h.wrote(kindFinal, notApplied)
		none[cellFinished](h, "before the room took the final write")
	}
	if run := h.finishRoom(); run.Status != CellOK {
		t.Errorf("result %+v", run)
	}
}

// ---- scratch code ----

func TestMachineScratch(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		h := newMH(t, machineConfig{Scratch: true, Code: "1+1"})
		h.m.start(h.now)
		h.collect()
		if s := grab[sendRequest](h); s.storeHistory || s.stopOnError || s.metadata != nil {
			t.Fatalf("scratch request %+v: no history, no stop_on_error, no cell", s)
		}
		h.m.sent(h.now, nil)
		h.msgs(status("busy"), iopub("execute_result", map[string]any{"data": map[string]any{"text/plain": "2"}}), replyOK(0), status("idle"))
		none[writeOutputs](h, "for scratch code")
		none[cellOutputs](h, "for scratch code")
		h.m.ended(h.now, nil)
		h.collect()
		none[finishCell](h, "for scratch code")
		run := h.result()
		if run.Status != CellOK || run.ExecutionCount != nil || texts(run.Outputs) != "<execute_result>" {
			t.Errorf("result %+v", run)
		}
	})
	t.Run("the wait ends", func(t *testing.T) {
		h := newMH(t, machineConfig{Scratch: true, Code: "sleep"})
		h.m.start(h.now)
		h.m.sent(h.now, nil)
		h.msgs(status("busy"), stream("so far\n"))
		h.m.stop(h.now)
		h.collect()
		grab[abandonRequest](h)
		run := h.result()
		if run.Status != CellRunning || texts(run.Outputs) != "so far\n" || run.Note != noteWaitEnded {
			t.Errorf("result %+v", run)
		}
	})
	t.Run("restart", func(t *testing.T) {
		h := newMH(t, machineConfig{Scratch: true, Code: "x"})
		h.m.start(h.now)
		h.m.sent(h.now, nil)
		h.msgs(restarting)
		none[askKernelInfo](h, "for scratch code")
		run := h.result()
		if run.Status != CellAborted {
			t.Errorf("result %+v", run)
		}
		mustNote(t, run.Note, "before the code began")
	})
	t.Run("connection lost", func(t *testing.T) {
		h := newMH(t, machineConfig{Scratch: true, Code: "x"})
		h.m.start(h.now)
		h.m.sent(h.now, nil)
		h.m.ended(h.now, errors.New("gone"))
		h.collect()
		run := h.result()
		if run.Status != CellAborted {
			t.Errorf("result %+v", run)
		}
		mustNote(t, run.Note, "restarted or died")
	})
	// On jupyter-server-documents the reply can go to a kernel websocket opened after ours; the
	// idle status says the kernel finished, the outputs say how.
	t.Run("reply elsewhere", func(t *testing.T) {
		for _, tc := range []struct {
			elsewhere bool
			outs      []KernelMsg
			want      CellStatus
		}{
			{true, []KernelMsg{stream("hi\n")}, CellOK},
			{true, []KernelMsg{iopub("error", map[string]any{"ename": "ZeroDivisionError", "evalue": "x", "traceback": []any{}})}, CellError},
			{false, []KernelMsg{stream("hi\n")}, CellAborted}, // elsewhere, idle without a reply is a restart or an interrupt
		} {
			h := newMH(t, machineConfig{Scratch: true, Code: "x", RepliesElsewhere: tc.elsewhere, ReplyGrace: 3 * time.Second})
			h.m.start(h.now)
			h.m.sent(h.now, nil)
			h.msgs(append(append([]KernelMsg{status("busy")}, tc.outs...), status("idle"))...)
			none[cellFinished](h, "before the reply's grace")
			h.after(3 * time.Second)
			grab[abandonRequest](h)
			run := h.result()
			if run.Status != tc.want || (tc.elsewhere && run.Note != "") {
				t.Errorf("elsewhere=%v: result %+v, want %s", tc.elsewhere, run, tc.want)
			}
		}
	})
	t.Run("not sent", func(t *testing.T) {
		h := newMH(t, machineConfig{Scratch: true, Code: "x"})
		h.m.start(h.now)
		h.m.sent(h.now, errors.New("closed"))
		h.collect()
		h.result()
		if h.m.sendErr == nil {
			t.Error("sendErr not kept for the caller")
		}
	})
}

// wake says when the machine needs time to pass: the earliest of its deadlines.
func TestMachineWake(t *testing.T) {
	h := newMH(t, testConfig())
	h.running()
	if w := h.m.wake(); !w.Equal(epoch.Add(5 * time.Second)) {
		t.Errorf("wake %v, want the heartbeat at +5s", w)
	}
	h.now = h.now.Add(time.Second)
	h.msgs(replyOK(1))
	if w := h.m.wake(); !w.Equal(epoch.Add(4 * time.Second)) {
		t.Errorf("wake %v, want the reply's grace at +4s", w)
	}
}
