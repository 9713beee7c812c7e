package bridgetest

// A scriptable in-memory fake of jupyter-server's kernel sessions and kernels, implementing
// execution.Kernels for tests of package execution. It starts no goroutines: a request advances
// through its script when its RunningCode.Next is called, so what a kernel does is decided by
// the code it is sent and by the test controls below, never by a scheduler.
//
// The code a request runs is a tiny script (requests.go says which).
//
// Test controls simulate a kernel that dies (KernelState "dead" or a 404, channels closing),
// a server-side restart (a execution.MsgKernelRestarting message on channel "server" to the
// requests in flight, Restarts() moving on every open channel, the requests the old process had
// not begun delivered to the new one, late, or lost), and a silent kernel (requests are
// received but nothing comes back). Counters say how many requests each kernel received and
// began, how often it was interrupted, restarted and connected to.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	stateCalls   int           // KernelState calls made
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
// is gone, "busy" while a request runs (or waits in a silent kernel), else "idle".
func (ks *Kernels) KernelState(ctx context.Context, id string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	ks.mu.Lock()
	ks.stateCalls++
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
		// A silent kernel holding a request stands for one busy with someone else's cell.
		if (r.started || k.silent) && r.gen == k.restarts {
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
	// Unsignalled tells nobody: no MsgKernelRestarting, Restarts() does not move (a connection
	// made just before the restart, its iopub not yet joined, hears nothing of it).
	Unsignalled bool
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
		if !c.closed && !opts.Unsignalled {
			c.restarts++
		}
	}
	now := time.Now()
	for _, r := range k.running {
		if !opts.Unsignalled {
			r.queue = append(r.queue, execution.KernelMsg{Channel: "server", Type: execution.MsgKernelRestarting, Content: json.RawMessage(`{}`)})
		}
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

// KernelStateCalls returns how many times KernelState was called.
func (ks *Kernels) KernelStateCalls() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.stateCalls
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
