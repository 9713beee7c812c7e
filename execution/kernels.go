package execution

import (
	"context"
	"fmt"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// KernelControl is what both engines need from jupyter-server's kernel sessions and kernels:
// which kernel serves which notebook, starting one, a kernel's state, interrupting and
// restarting it.
type KernelControl interface {
	// Sessions lists kernel sessions (which kernel serves which notebook).
	Sessions(ctx context.Context) ([]KernelSession, error)
	// StartSession gets or creates the kernel session of a notebook; kernelName may be empty.
	StartSession(ctx context.Context, path, kernelName string) (KernelSession, error)
	// KernelState returns a kernel's execution_state; a gone kernel is an error IsNotFound accepts.
	KernelState(ctx context.Context, kernelID string) (string, error)
	Interrupt(ctx context.Context, kernelID string) error
	Restart(ctx context.Context, kernelID string) error
}

// Kernels is what ClientEngine needs from jupyter-server: kernel sessions, kernel state and
// control, and a channel to run code. bridge/jupyterserver implements it; tests use fakes.
type Kernels interface {
	KernelControl
	// Connect opens the kernel's channels.
	Connect(ctx context.Context, kernelID string) (KernelChannel, error)
}

// KernelSession is a notebook's kernel session.
type KernelSession struct {
	ID         string
	Path       string
	KernelID   string
	KernelName string
	State      string // the kernel's execution_state (idle, busy, starting, dead, ...)
	// Type is the session's type: "notebook", or "console" for a JupyterLab console (which has
	// no document).
	Type string
}

// KernelChannel runs code in one kernel. Execute may be called concurrently.
type KernelChannel interface {
	Execute(ctx context.Context, code string, storeHistory, stopOnError bool, metadata map[string]any) (RunningCode, error)
	// KernelInfo returns once the kernel answered a kernel_info_request sent now: it is up, and
	// every request sent before on this channel has begun (the shell channel is in order).
	KernelInfo(ctx context.Context) error
	// Ready returns once the kernel answers on shell and on iopub: after a (re)start, the
	// server's iopub link to a new process can miss its first messages until then.
	Ready(ctx context.Context) error
	// Done is closed when the channel is lost.
	Done() <-chan struct{}
	// Restarts counts the kernel restarts (or deaths) seen on this channel: a change means its
	// state was lost.
	Restarts() int
	Close() error
}

// RunningCode is one request in flight: Next returns the messages received so far (waiting for
// at least one), with done once the reply and the kernel's idle status have both arrived, or
// with an error when the kernel went away first.
type RunningCode interface {
	Next(ctx context.Context) (msgs []KernelMsg, done bool, err error)
	// Abandon stops following the request (its later messages are dropped).
	Abandon()
}

// MsgKernelRestarting is the type of a message (channel "server") telling a running request
// that the server is restarting the kernel.
const MsgKernelRestarting = "kernel_restarting"

// sessionOf returns the kernel session of the notebook at path (ErrNoKernel without one).
func sessionOf(ctx context.Context, ks KernelControl, path string) (KernelSession, error) {
	path, err := bridge.CleanPath(path)
	if err != nil {
		return KernelSession{}, err
	}
	sessions, err := ks.Sessions(ctx)
	if err != nil {
		return KernelSession{}, err
	}
	for _, s := range sessions {
		if s.Path == path && s.KernelID != "" {
			return s, nil
		}
	}
	return KernelSession{}, fmt.Errorf("%s: %w", path, ErrNoKernel)
}

// interruptNotebook interrupts the kernel of the notebook at path, whatever it runs.
func interruptNotebook(ctx context.Context, ks KernelControl, path string) (KernelSession, error) {
	s, err := sessionOf(ctx, ks, path)
	if err != nil {
		return s, err
	}
	return s, ks.Interrupt(ctx, s.KernelID)
}

// restartNotebook restarts the kernel of the notebook at path; its state is lost.
func restartNotebook(ctx context.Context, ks KernelControl, path string) (KernelSession, error) {
	s, err := sessionOf(ctx, ks, path)
	if err != nil {
		return s, err
	}
	return s, ks.Restart(ctx, s.KernelID)
}

// liveSession returns the room's notebook's kernel session whose kernel is not dead (the one a
// human's tab uses, if any), or starts one with kernelName (the notebook's kernelspec when
// empty).
func liveSession(ctx context.Context, ks KernelControl, room *bridge.Room, kernelName string) (KernelSession, error) {
	path := room.Path()
	sessions, err := ks.Sessions(ctx)
	if err != nil {
		return KernelSession{}, fmt.Errorf("list kernel sessions: %w", err)
	}
	for _, s := range sessions {
		if s.Path == path && s.KernelID != "" && s.State != "dead" {
			return s, nil
		}
	}
	if kernelName == "" {
		kernelName = notebookKernelName(ctx, room)
	}
	s, err := ks.StartSession(ctx, path, kernelName)
	if err != nil {
		return KernelSession{}, fmt.Errorf("start a kernel: %w", err)
	}
	return s, nil
}

// kernelGone says whether a KernelState answer means the kernel is gone: only a 404 or a
// "dead" state count — a server hiccup is not a death.
func kernelGone(state string, err error) bool {
	return bridge.IsNotFound(err) || (err == nil && state == "dead")
}

// kernelNotice tells agents (bridge.Manager.Notify) what happened to a notebook's kernel:
// event is "restarted", "lost" or "replaced".
func kernelNotice(m *bridge.Manager, path string, level bridge.NoticeLevel, event, kernelID, msg string) {
	m.Notify(bridge.Notice{Level: level, Topic: bridge.TopicKernel, Kind: event, Path: path, DocKind: ydoc.KindNotebook.String(),
		Message: path + ": " + msg, Data: map[string]any{"event": event, "kernel_id": kernelID}})
}
