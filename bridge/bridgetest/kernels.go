package bridgetest

// A scriptable in-memory fake of jupyter-server's kernel sessions and kernels, implementing
// execution.Kernels for tests of package execution. It starts no goroutines: a request advances
// through its script when its RunningCode.Next is called, so what a kernel does is decided by
// the code it is sent and by the test controls below, never by a scheduler.
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
//
// Test controls simulate a kernel that dies (KernelState "dead" or a 404, channels closing),
// a server-side restart (a execution.MsgKernelRestarting message on channel "server" to the
// requests in flight, Restarts() moving on every open channel, the requests the old process had
// not begun delivered to the new one, late, or lost), and a silent kernel (requests are
// received but nothing comes back). Counters say how many requests each kernel received and
// began, how often it was interrupted, restarted and connected to.

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
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
)

// Kernels is the fake. Create it with NewKernels. Every method is safe for concurrent use.
type Kernels struct {
	mu           sync.Mutex
	sessions     map[string]*kernelSession // notebook path → session
	kernels      map[string]*kernel        // kernel id → kernel
	gates        map[string]bool           // released gates
	nextID       int
	starts       []StartCall
	startErr     error
	connErr      error
	stateErr     error // KernelState fails with it stateN more times
	stateN       int
	stateGate    chan struct{} // non-nil: KernelState waits until it is closed
	stateWaiting int           // KernelState calls waiting at the gate
	changed      chan struct{}
}

type kernelSession struct {
	id, path, kernelID string
}

type kernel struct {
	id, name, path string
	dead, gone     bool
	silent         bool
	count          int // the execution counter
	received       int // execute requests received
	begun          int // execute requests the kernel began
	interrupts     int
	restarts       int
	connects       int
	requests       []Request
	chans          []*KernelChannel
	running        []*request // requests not finished
}

// StartCall records one StartSession call.
type StartCall struct {
	Path, KernelName string
}

// Request records one execute request a kernel received.
type Request struct {
	Code         string
	StoreHistory bool
	StopOnError  bool
	Metadata     map[string]any
}

// NewKernels returns a fake with no sessions.
func NewKernels() *Kernels {
	return &Kernels{
		sessions: map[string]*kernelSession{},
		kernels:  map[string]*kernel{},
		gates:    map[string]bool{},
		changed:  make(chan struct{}),
	}
}

var _ execution.Kernels = (*Kernels)(nil)

// ---- execution.Kernels ----

// Sessions implements execution.Kernels: the sessions in path order, with their kernel's state.
func (ks *Kernels) Sessions(ctx context.Context) ([]execution.KernelSession, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	out := make([]execution.KernelSession, 0, len(ks.sessions))
	for _, s := range ks.sessions {
		out = append(out, ks.sessionLocked(s))
	}
	slices.SortFunc(out, func(a, b execution.KernelSession) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (ks *Kernels) sessionLocked(s *kernelSession) execution.KernelSession {
	out := execution.KernelSession{ID: s.id, Path: s.path, KernelID: s.kernelID}
	if k := ks.kernels[s.kernelID]; k != nil {
		out.KernelName, out.State = k.name, k.stateLocked()
	}
	return out
}

// StartSession implements execution.Kernels: get-or-create by path, like POST /api/sessions. A
// session whose kernel is dead or gone gets a new kernel.
func (ks *Kernels) StartSession(ctx context.Context, path, kernelName string) (execution.KernelSession, error) {
	if err := ctx.Err(); err != nil {
		return execution.KernelSession{}, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	defer ks.bumpLocked()
	ks.starts = append(ks.starts, StartCall{Path: path, KernelName: kernelName})
	if ks.startErr != nil {
		return execution.KernelSession{}, ks.startErr
	}
	s := ks.sessions[path]
	if s != nil {
		if k := ks.kernels[s.kernelID]; k != nil && !k.dead {
			return ks.sessionLocked(s), nil
		}
	}
	if kernelName == "" {
		kernelName = "python3"
	}
	ks.nextID++
	k := &kernel{id: fmt.Sprintf("kernel-%d", ks.nextID), name: kernelName, path: path}
	ks.kernels[k.id] = k
	if s == nil {
		s = &kernelSession{id: fmt.Sprintf("session-%d", ks.nextID), path: path}
		ks.sessions[path] = s
	}
	s.kernelID = k.id
	return ks.sessionLocked(s), nil
}

// KernelState implements execution.Kernels: "dead" for a dead kernel, a 404 *Error for one that
// is gone, "busy" while a request runs, else "idle".
func (ks *Kernels) KernelState(ctx context.Context, id string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	ks.mu.Lock()
	if gate := ks.stateGate; gate != nil {
		ks.stateWaiting++
		ks.bumpLocked()
		ks.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
		}
		ks.mu.Lock()
		ks.stateWaiting--
		ks.bumpLocked()
		if err := ctx.Err(); err != nil {
			ks.mu.Unlock()
			return "", err
		}
	}
	defer ks.mu.Unlock()
	if ks.stateN > 0 {
		ks.stateN--
		ks.bumpLocked()
		return "", ks.stateErr
	}
	k, err := ks.kernelLocked(id)
	if err != nil {
		return "", err
	}
	return k.stateLocked(), nil
}

// Interrupt implements execution.Kernels: a request waiting (sleep, block) ends with
// KeyboardInterrupt.
func (ks *Kernels) Interrupt(ctx context.Context, id string) error {
	return ks.withKernel(ctx, id, func(k *kernel) {
		k.interrupts++
		ks.bumpLocked()
	})
}

// Restart implements execution.Kernels (POST /api/kernels/{id}/restart): see RestartKernel.
func (ks *Kernels) Restart(ctx context.Context, id string) error {
	return ks.withKernel(ctx, id, func(k *kernel) { ks.restartLocked(k, KernelRestartOptions{}) })
}

// withKernel runs fn on a kernel with the fake locked, as a REST call on it would.
func (ks *Kernels) withKernel(ctx context.Context, id string, fn func(*kernel)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, err := ks.kernelLocked(id)
	if err != nil {
		return err
	}
	fn(k)
	return nil
}

// Connect implements execution.Kernels.
func (ks *Kernels) Connect(ctx context.Context, id string) (execution.KernelChannel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.connErr != nil {
		return nil, ks.connErr
	}
	k, err := ks.kernelLocked(id)
	if err != nil {
		return nil, err
	}
	k.connects++
	c := &KernelChannel{ks: ks, k: k, done: make(chan struct{})}
	k.chans = append(k.chans, c)
	ks.bumpLocked()
	return c, nil
}

func (ks *Kernels) kernelLocked(id string) (*kernel, error) {
	k := ks.kernels[id]
	if k == nil || k.gone {
		return nil, &Error{Status: 404, Msg: "Kernel does not exist: " + id, Perm: true}
	}
	return k, nil
}

func (k *kernel) stateLocked() string {
	if k.dead {
		return "dead"
	}
	for _, r := range k.running {
		if r.started && r.gen == k.restarts {
			return "busy"
		}
	}
	return "idle"
}

// ---- test controls ----

// KillOptions say how a kernel dies.
type KillOptions struct {
	// Gone makes the kernel disappear (KernelState, Interrupt, Restart and Connect answer 404,
	// and its session is removed), as when it was culled or reaped; otherwise it stays listed
	// with state "dead".
	Gone bool
	// Quiet leaves its channels open and its requests pending: they simply never hear from it
	// again (only a liveness check finds out). Otherwise the channels close (Done) and the
	// requests in flight end with an error.
	Quiet bool
}

// Kill makes a kernel die.
func (ks *Kernels) Kill(id string, opts KillOptions) {
	ks.set(func() {
		k := ks.kernels[id]
		if k == nil {
			return
		}
		k.dead = true
		if opts.Gone {
			k.gone = true
			for p, s := range ks.sessions {
				if s.kernelID == id {
					delete(ks.sessions, p)
				}
			}
		}
		if opts.Quiet {
			return
		}
		for _, r := range k.running {
			r.finishLocked(errors.New("fake kernel: the kernel died"))
		}
		k.running = nil
		for _, c := range k.chans {
			c.closeLocked()
		}
	})
}

// KernelRestartOptions say what a server-side restart does to the requests the old process had
// not begun (those it had begun are lost with it and never hear anything again).
type KernelRestartOptions struct {
	// LosePending drops them: they are never delivered.
	LosePending bool
	// Late delays their delivery to the new process (zero: at once).
	Late time.Duration
}

// RestartKernel restarts a kernel as jupyter-server does when it died (or on POST restart):
// every request in flight gets a execution.MsgKernelRestarting message on channel "server", the
// Restarts() of every open channel moves, the execution counter starts again and a silenced
// kernel speaks again (a new process).
func (ks *Kernels) RestartKernel(id string, opts KernelRestartOptions) {
	ks.set(func() {
		if k := ks.kernels[id]; k != nil && !k.gone {
			ks.restartLocked(k, opts)
		}
	})
}

func (ks *Kernels) restartLocked(k *kernel, opts KernelRestartOptions) {
	k.restarts++
	k.count = 0
	k.dead, k.silent = false, false
	for _, c := range k.chans {
		if !c.closed {
			c.restarts++
		}
	}
	now := time.Now()
	for _, r := range k.running {
		r.queue = append(r.queue, execution.KernelMsg{Channel: "server", Type: execution.MsgKernelRestarting, Content: json.RawMessage(`{}`)})
		if r.started {
			continue // its process is gone: nothing more will come
		}
		if opts.LosePending {
			r.lost = true
		} else {
			r.deliverAt = now.Add(opts.Late)
		}
	}
	ks.bumpLocked()
}

// Silence makes a kernel silent (on) or lets it speak again: a silent kernel receives requests
// (they are counted) but begins none of them, so nothing comes back; they begin when it is
// unsilenced or restarted.
func (ks *Kernels) Silence(id string, on bool) {
	ks.set(func() {
		if k := ks.kernels[id]; k != nil {
			k.silent = on
		}
	})
}

// Release opens a gate: every request waiting at block:<gate>, now or later, goes on.
func (ks *Kernels) Release(gate string) { ks.set(func() { ks.gates[gate] = true }) }

// FailStartSession makes StartSession fail with err (nil restores it).
func (ks *Kernels) FailStartSession(err error) { ks.set(func() { ks.startErr = err }) }

// FailKernelState makes the next n KernelState calls fail with err (a transient REST error:
// the kernel itself is fine).
func (ks *Kernels) FailKernelState(err error, n int) {
	ks.set(func() { ks.stateErr, ks.stateN = err, n })
}

// HoldKernelState makes KernelState calls wait until ReleaseKernelState (a slow server).
func (ks *Kernels) HoldKernelState() { ks.set(func() { ks.stateGate = make(chan struct{}) }) }

// ReleaseKernelState lets the KernelState calls held by HoldKernelState go on, and later ones
// answer at once.
func (ks *Kernels) ReleaseKernelState() {
	ks.set(func() {
		if ks.stateGate != nil {
			close(ks.stateGate)
			ks.stateGate = nil
		}
	})
}

// KernelStateWaiting returns how many KernelState calls wait at HoldKernelState's gate.
func (ks *Kernels) KernelStateWaiting() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.stateWaiting
}

// KernelStateFailuresLeft returns how many injected KernelState failures are still to come.
func (ks *Kernels) KernelStateFailuresLeft() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.stateN
}

// FailConnect makes Connect fail with err (nil restores it).
func (ks *Kernels) FailConnect(err error) { ks.set(func() { ks.connErr = err }) }

// ---- inspection ----

// KernelFor returns the kernel id of the session for path ("" when there is none).
func (ks *Kernels) KernelFor(path string) string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if s := ks.sessions[path]; s != nil {
		return s.kernelID
	}
	return ""
}

// KernelIDs returns the id of every kernel ever started, oldest first.
func (ks *Kernels) KernelIDs() []string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ids := make([]string, 0, len(ks.kernels))
	for id := range ks.kernels {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		na, _ := strconv.Atoi(strings.TrimPrefix(a, "kernel-"))
		nb, _ := strconv.Atoi(strings.TrimPrefix(b, "kernel-"))
		return na - nb
	})
	return ids
}

// StartCalls returns every StartSession call, in order.
func (ks *Kernels) StartCalls() []StartCall {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return slices.Clone(ks.starts)
}

func (ks *Kernels) counter(id string, f func(*kernel) int) int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k := ks.kernels[id]; k != nil {
		return f(k)
	}
	return 0
}

// Received returns how many execute requests a kernel received.
func (ks *Kernels) Received(id string) int {
	return ks.counter(id, func(k *kernel) int { return k.received })
}

// Executions returns how many execute requests a kernel began (ran, at least in part).
func (ks *Kernels) Executions(id string) int {
	return ks.counter(id, func(k *kernel) int { return k.begun })
}

// Interrupts returns how many times a kernel was interrupted.
func (ks *Kernels) Interrupts(id string) int {
	return ks.counter(id, func(k *kernel) int { return k.interrupts })
}

// Restarts returns how many times a kernel was restarted.
func (ks *Kernels) Restarts(id string) int {
	return ks.counter(id, func(k *kernel) int { return k.restarts })
}

// Connects returns how many channels were opened to a kernel.
func (ks *Kernels) Connects(id string) int {
	return ks.counter(id, func(k *kernel) int { return k.connects })
}

// OpenChannels returns how many channels to a kernel are open.
func (ks *Kernels) OpenChannels(id string) int {
	return ks.counter(id, func(k *kernel) int {
		n := 0
		for _, c := range k.chans {
			if !c.closed {
				n++
			}
		}
		return n
	})
}

// ExecutionCount returns a kernel's execution counter.
func (ks *Kernels) ExecutionCount(id string) int {
	return ks.counter(id, func(k *kernel) int { return k.count })
}

// Requests returns the execute requests a kernel received, in order.
func (ks *Kernels) Requests(id string) []Request {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k := ks.kernels[id]; k != nil {
		return slices.Clone(k.requests)
	}
	return nil
}

// AtGate returns how many requests (of any kernel) are waiting at block:<gate> or hold:<gate>
// right now.
func (ks *Kernels) AtGate(gate string) int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	n := 0
	for _, k := range ks.kernels {
		for _, r := range k.running {
			if r.gate == gate {
				n++
			}
		}
	}
	return n
}

// Changed returns a channel closed at the next state change of the fake.
func (ks *Kernels) Changed() <-chan struct{} {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.changed
}

// Await waits until cond holds, re-evaluating it after every state change, or ctx ends. cond
// may use the accessors.
func (ks *Kernels) Await(ctx context.Context, cond func() bool) error {
	return await(ctx, ks.Changed, cond)
}

func (ks *Kernels) set(fn func()) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	fn()
	ks.bumpLocked()
}

func (ks *Kernels) bumpLocked() {
	close(ks.changed)
	ks.changed = make(chan struct{})
}

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

// State returns a copy of the state map (dirty, the executor's run markers, ...) of the server
// document for path, nil without a room. (It sits here, with the execution fakes, because only
// execution tests need it.)
func (s *Server) State(p string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.roomByPathLocked(p); r != nil {
		return r.doc.State()
	}
	return nil
}
