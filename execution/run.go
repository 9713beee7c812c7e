package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

func (x *Executor) runJob(j *Job, room *bridge.Room, opts RunOptions) {
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
func (x *Executor) acquire(ctx context.Context, room *bridge.Room, kernelName string) (*nbKernel, string, error) {
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
func (x *Executor) ensureChannel(ctx context.Context, room *bridge.Room, k *nbKernel, kernelName string, probe bool) (string, error) {
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
			if state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID); bridge.IsNotFound(err) || (err == nil && state == "dead") {
				gone = "it died or was shut down"
			}
		default:
			restarted := k.restartedNote()
			alive := true
			if probe {
				state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID)
				alive = !(bridge.IsNotFound(err) || (err == nil && state == "dead"))
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
func notebookKernelName(ctx context.Context, room *bridge.Room) string {
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
func cellInfo(ctx context.Context, room *bridge.Room, id string) (ydoc.Cell, int, error) {
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
func (x *Executor) runCell(ctx context.Context, j *Job, room *bridge.Room, k *nbKernel, c *CellRun, stopOnError bool) {
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
	_, err = room.Apply(ctx, func(tx *ydoc.Txn, _ bridge.History, _ bool) error {
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
		_, _ = room.Apply(bctx, func(tx *ydoc.Txn, _ bridge.History, _ bool) error {
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
	_, err = room.Apply(fctx, func(tx *ydoc.Txn, _ bridge.History, _ bool) error {
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
			if bridge.IsNotFound(err) || (err == nil && state == "dead") {
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
func (x *Executor) writeOutputs(ctx context.Context, room *bridge.Room, cellID string, ops []outputOp, inRoom int, all []map[string]any) bool {
	gone := false
	_, err := room.Apply(ctx, func(tx *ydoc.Txn, _ bridge.History, _ bool) error {
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
