package bridgetest

// The fake kernels' channels and the requests they run.
//
// The code a request runs is a tiny script, one command per line (blank lines and lines that
// are not commands produce no output, like `x = 1`):
//
//	print:<text>        a stdout stream of text plus "\n" (consecutive prints merge in the room)
//	write:<text>        a stdout stream of text as is (no newline; "\r" rewrites the line)
//	stderr:<text>       a stderr stream of text plus "\n"
//	result:<text>       an execute_result with text/plain text and the request's count
//	display:<id>:<text> a display_data with text/plain text under display id
//	update:<id>:<text>  an update_display_data for display id
//	clear               clear_output; clearwait: clear_output(wait=True)
//	image:<w>x<h>       a display_data with a real w×h PNG (base64) and a text/plain line
//	error:<name>[:<v>]  an error output (ename name, evalue v or "boom") and an error reply;
//	                    the script stops there
//	sleep:<ms>          waits ms milliseconds
//	block:<gate>        waits until the test calls Release(gate)
//	hold:<gate>         the same, but deaf to interrupts (code that does not check for signals)
//
// An interrupt that arrives while a request waits (sleep, block) ends it as ipykernel does:
// a KeyboardInterrupt error output and an error reply. Every request is answered like
// ipykernel answers it: iopub status busy, execute_input, the outputs, the shell execute_reply
// (with an execution_count that moves only when store_history is set), iopub status idle.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
)

// ---- KernelChannel ----

// KernelChannel is one connection to a fake kernel, implementing execution.KernelChannel.
type KernelChannel struct {
	ks       *Kernels
	k        *kernel
	restarts int
	closed   bool
	done     chan struct{}
}

var _ execution.KernelChannel = (*KernelChannel)(nil)

// Execute implements execution.KernelChannel: the kernel receives the request (it begins it
// when the request's Next is first called, unless the kernel is silent).
func (c *KernelChannel) Execute(ctx context.Context, code string, storeHistory, stopOnError bool, metadata map[string]any) (execution.RunningCode, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ks := c.ks
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if c.closed {
		return nil, errors.New("fake kernel: channel closed")
	}
	k := c.k
	if k.gone {
		return nil, &Error{Status: 404, Msg: "Kernel does not exist: " + k.id, Perm: true}
	}
	md := map[string]any{}
	for key, v := range metadata {
		md[key] = v
	}
	k.received++
	k.requests = append(k.requests, Request{Code: code, StoreHistory: storeHistory, StopOnError: stopOnError, Metadata: md})
	r := &request{ks: ks, k: k, ch: c, code: code, steps: parseScript(code), storeHistory: storeHistory}
	if !k.dead {
		k.running = append(k.running, r)
	} else {
		r.finishLocked(errors.New("fake kernel: the kernel is dead"))
	}
	ks.bumpLocked()
	return r, nil
}

// KernelInfo implements execution.KernelChannel: it answers once the kernel is alive and speaking
// and every request sent on this channel before has begun (or was lost in a restart), as the
// in-order shell channel guarantees. Requests advance only in their Next, so the caller must
// keep following them meanwhile (the executor does).
func (c *KernelChannel) KernelInfo(ctx context.Context) error {
	ks := c.ks
	for {
		ks.mu.Lock()
		k := c.k
		var err error
		ready := !k.dead && !k.silent
		switch {
		case c.closed:
			err = errors.New("fake kernel: channel closed")
		case k.gone:
			err = &Error{Status: 404, Msg: "Kernel does not exist: " + k.id, Perm: true}
		}
		for _, r := range k.running {
			if r.ch == c && !r.started && !r.lost {
				ready = false
			}
		}
		wake := ks.changed
		ks.mu.Unlock()
		if err != nil {
			return err
		}
		if ready {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Ready implements execution.KernelChannel like KernelInfo (the fake's iopub never lags).
func (c *KernelChannel) Ready(ctx context.Context) error { return c.KernelInfo(ctx) }

// Done implements execution.KernelChannel.
func (c *KernelChannel) Done() <-chan struct{} { return c.done }

// Restarts implements execution.KernelChannel.
func (c *KernelChannel) Restarts() int {
	c.ks.mu.Lock()
	defer c.ks.mu.Unlock()
	return c.restarts
}

// Close implements execution.KernelChannel: the requests sent on it end with an error.
func (c *KernelChannel) Close() error {
	c.ks.set(func() {
		c.closeLocked()
		c.k.running = slices.DeleteFunc(c.k.running, func(r *request) bool {
			if r.ch == c {
				r.finishLocked(errors.New("fake kernel: channel closed"))
				return true
			}
			return false
		})
	})
	return nil
}

func (c *KernelChannel) closeLocked() {
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}

// ---- requests ----

type step struct {
	cmd, arg string
}

func parseScript(code string) []step {
	var out []step
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		cmd, arg, _ := strings.Cut(line, ":")
		switch cmd {
		case "print", "write", "stderr", "result", "display", "update", "clear", "clearwait", "image", "error", "sleep", "block", "hold":
			out = append(out, step{cmd, arg})
		}
	}
	return out
}

// request is one execute request in flight, implementing execution.RunningCode.
type request struct {
	ks           *Kernels
	k            *kernel
	ch           *KernelChannel
	code         string
	steps        []step
	storeHistory bool

	started    bool
	gen        int // k.restarts when it began: a later restart killed the process running it
	interrupts int // k.interrupts when it began
	count      int
	pos        int
	sleepUntil time.Time
	deliverAt  time.Time // after a restart: when the new process receives it
	lost       bool      // lost in a restart: never delivered
	gate       string    // the gate it waits at

	queue     []execution.KernelMsg
	finished  bool
	err       error
	abandoned bool
}

// Next implements execution.RunningCode.
func (r *request) Next(ctx context.Context) ([]execution.KernelMsg, bool, error) {
	for {
		r.ks.mu.Lock()
		if r.advanceLocked(time.Now()) {
			r.ks.bumpLocked()
		}
		if len(r.queue) > 0 || r.finished {
			msgs := r.queue
			r.queue = nil
			done, err := r.finished, r.err
			r.ks.mu.Unlock()
			return msgs, done, err
		}
		wake := r.ks.changed
		next := r.sleepUntil
		if !r.started && !r.deliverAt.IsZero() {
			next = r.deliverAt
		}
		r.ks.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			fire = timer.C
		}
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// Abandon implements execution.RunningCode.
func (r *request) Abandon() {
	r.ks.set(func() {
		r.abandoned = true
		r.queue = nil
		r.finishLocked(errors.New("fake kernel: abandoned"))
		r.k.running = slices.DeleteFunc(r.k.running, func(o *request) bool { return o == r })
	})
}

func (r *request) finishLocked(err error) {
	if r.finished {
		return
	}
	r.finished, r.err, r.gate = true, err, ""
}

func (r *request) push(channel, typ string, content map[string]any) {
	b, _ := json.Marshal(content)
	r.queue = append(r.queue, execution.KernelMsg{Channel: channel, Type: typ, Content: b})
}

// advanceLocked runs the request's script as far as it can go now; it reports whether the
// fake's observable state changed (a request began, reached a gate or ended).
func (r *request) advanceLocked(now time.Time) bool {
	k := r.k
	if r.finished || r.abandoned || k.dead {
		return false
	}
	changed := false
	if !r.started {
		if r.lost || k.silent || (!r.deliverAt.IsZero() && now.Before(r.deliverAt)) {
			return false
		}
		r.started, r.gen, r.interrupts = true, k.restarts, k.interrupts
		k.begun++
		if r.storeHistory {
			k.count++
		}
		r.count = k.count
		r.push("iopub", "status", map[string]any{"execution_state": "busy"})
		r.push("iopub", "execute_input", map[string]any{"code": r.code, "execution_count": r.count})
		changed = true
	}
	if r.gen != k.restarts {
		return changed // the process that ran it was restarted away
	}
	for ; r.pos < len(r.steps); r.pos++ {
		s := r.steps[r.pos]
		switch s.cmd {
		case "sleep", "block", "hold":
			if k.interrupts != r.interrupts && s.cmd != "hold" {
				r.gate = ""
				r.fail("KeyboardInterrupt", "")
				return true
			}
			if s.cmd == "sleep" {
				if r.sleepUntil.IsZero() {
					ms, _ := strconv.Atoi(s.arg)
					r.sleepUntil = now.Add(time.Duration(ms) * time.Millisecond)
				}
				if now.Before(r.sleepUntil) {
					return changed
				}
				r.sleepUntil = time.Time{}
				continue
			}
			if !r.ks.gates[s.arg] {
				if r.gate != s.arg {
					r.gate = s.arg
					changed = true
				}
				return changed
			}
			r.gate = ""
		case "print":
			r.push("iopub", "stream", map[string]any{"name": "stdout", "text": s.arg + "\n"})
		case "write":
			r.push("iopub", "stream", map[string]any{"name": "stdout", "text": s.arg})
		case "stderr":
			r.push("iopub", "stream", map[string]any{"name": "stderr", "text": s.arg + "\n"})
		case "result":
			r.push("iopub", "execute_result", map[string]any{"execution_count": r.count, "data": map[string]any{"text/plain": s.arg}, "metadata": map[string]any{}})
		case "display", "update":
			id, text, _ := strings.Cut(s.arg, ":")
			typ := "display_data"
			if s.cmd == "update" {
				typ = "update_display_data"
			}
			r.push("iopub", typ, map[string]any{"data": map[string]any{"text/plain": text}, "metadata": map[string]any{}, "transient": map[string]any{"display_id": id}})
		case "clear", "clearwait":
			r.push("iopub", "clear_output", map[string]any{"wait": s.cmd == "clearwait"})
		case "image":
			ws, hs, _ := strings.Cut(s.arg, "x")
			w, _ := strconv.Atoi(ws)
			h, _ := strconv.Atoi(hs)
			r.push("iopub", "display_data", map[string]any{
				"data":     map[string]any{"image/png": PNG(w, h), "text/plain": fmt.Sprintf("<Figure size %dx%d with 1 Axes>", w, h)},
				"metadata": map[string]any{},
			})
		case "error":
			name, value, ok := strings.Cut(s.arg, ":")
			if !ok {
				value = "boom"
			}
			r.fail(name, value)
			return true
		}
	}
	r.push("shell", "execute_reply", map[string]any{"status": "ok", "execution_count": r.count, "user_expressions": map[string]any{}, "payload": []any{}})
	r.end()
	return true
}

// fail ends the request with an error output and an error reply, as ipykernel does.
func (r *request) fail(ename, evalue string) {
	tb := []any{
		"\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
		"\x1b[0;31m" + ename + "\x1b[0m                                 Traceback (most recent call last)",
		"\x1b[0;31m" + ename + "\x1b[0m: " + evalue,
	}
	r.push("iopub", "error", map[string]any{"ename": ename, "evalue": evalue, "traceback": tb})
	r.push("shell", "execute_reply", map[string]any{"status": "error", "execution_count": r.count, "ename": ename, "evalue": evalue, "traceback": tb})
	r.end()
}

func (r *request) end() {
	r.push("iopub", "status", map[string]any{"execution_state": "idle"})
	r.finishLocked(nil)
	r.k.running = slices.DeleteFunc(r.k.running, func(o *request) bool { return o == r })
}

// PNG returns a w×h PNG image, base64-encoded as in a display_data output.
func PNG(w, h int) string {
	img := image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	for y := range max(h, 1) {
		for x := range max(w, 1) {
			img.Set(x, y, color.RGBA{R: uint8(x), G: uint8(y), B: 128, A: 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return base64.StdEncoding.EncodeToString(b.Bytes())
}
