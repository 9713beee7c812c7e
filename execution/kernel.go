package execution

import (
	"context"
	"fmt"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// nbKernel is the kernel a notebook's runs use. One holder at a time (a job, or scratch code)
// takes sem; the fields below are the holder's.
type nbKernel struct {
	sem      chan struct{}
	session  KernelSession
	ch       KernelChannel
	restarts int       // ch.Restarts() when last looked at
	note     string    // something the next result must mention (the kernel was replaced)
	lost     string    // why the kernel is known gone (set by a run that saw it die)
	lastUsed time.Time // when the last holder let go
	stale    bool      // the kernel restarted since ch connected: connect again before the next run
	reused   bool      // ensureChannel kept the channel it had (not checked with the server unless it probed)
}

// lock takes the kernel, waiting for the holder before (a job) as long as ctx allows.
func (k *nbKernel) lock(ctx context.Context) error {
	select {
	case k.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the notebook's kernel (a run holds it): %w", ctx.Err())
	}
}

func (k *nbKernel) tryLock() bool {
	select {
	case k.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (k *nbKernel) unlock(now time.Time) {
	k.lastUsed = now
	<-k.sem
}

// restartedNote reports (once) that the kernel restarted since we last looked.
func (k *nbKernel) restartedNote() string {
	if k.ch == nil {
		return ""
	}
	if n := k.ch.Restarts(); n != k.restarts {
		k.restarts, k.stale = n, true
		return "the kernel restarted (it died or was restarted); variables from earlier runs are lost"
	}
	return ""
}

// closeIdleChannels closes kernel channels nobody used for ChannelIdle: an open channel counts
// as a connection, and jupyter-server does not cull connected kernels by default.
func (x *ClientExecutor) closeIdleChannels() {
	x.mu.Lock()
	ks := make([]*nbKernel, 0, len(x.kernels))
	for _, k := range x.kernels {
		ks = append(ks, k)
	}
	x.mu.Unlock()
	for _, k := range ks {
		if !k.tryLock() {
			continue // in use
		}
		if k.ch != nil && x.now().Sub(k.lastUsed) >= x.opts.ChannelIdle {
			_ = k.ch.Close()
			k.ch = nil
			k.restarts = 0
		}
		<-k.sem // not unlock: closing is not a use
	}
}

// acquire returns the notebook's kernel, held for the caller (who unlocks it), with a live
// channel: the session a human's tab uses if there is one (so state is shared), a new kernel if
// the old one died or was culled (the note says so). A channel kept from an earlier run is
// checked with the server first (a kernel can die silently between jobs), unless the caller
// does that itself, overlapped with other work (probeLater; reused then says it must). A kernel
// that was in use moments ago (ClientOptions.CheckIdleKernel) is not checked.
func (x *ClientExecutor) acquire(ctx context.Context, room *bridge.Room, kernelName string, probeLater bool) (k *nbKernel, note string, reused bool, err error) {
	k, note, err = x.acquireProbing(ctx, room, kernelName, !probeLater)
	if err != nil {
		return nil, "", false, err
	}
	return k, note, probeLater && k.reused && x.idleLongEnough(k), nil
}

// idleLongEnough reports whether the held kernel k has been idle long enough to be checked with
// the server before use (ClientOptions.CheckIdleKernel).
func (x *ClientExecutor) idleLongEnough(k *nbKernel) bool {
	return x.now().Sub(k.lastUsed) >= x.opts.CheckIdleKernel
}

func (x *ClientExecutor) acquireProbing(ctx context.Context, room *bridge.Room, kernelName string, probe bool) (*nbKernel, string, error) {
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
	note, err := x.ensureChannel(ctx, room, k, kernelName, probe && x.idleLongEnough(k))
	if err != nil {
		k.unlock(x.now())
		return nil, "", err
	}
	return k, note, nil
}

// probeAsync asks the server, without waiting, whether the held kernel is still there: the
// answer (false only when the server says it is gone or dead; an error is no death) comes on
// the returned channel. The first cell of a job writes its reset meanwhile, and its request
// waits for the answer (replaceGone).
func (x *ClientExecutor) probeAsync(ctx context.Context, k *nbKernel) <-chan bool {
	alive := make(chan bool, 1)
	id := k.session.KernelID
	x.goTracked(func() {
		state, err := x.opts.Kernels.KernelState(ctx, id)
		gone := kernelGone(state, err)
		if err != nil && !gone {
			x.log.Debug().Err(err).Str("kernel", id).Msg("kernel state unknown; assuming it lives")
		}
		alive <- !gone
	})
	return alive
}

// replaceGone gives the held kernel, which the server says is gone, a new channel (the
// notebook's session again, or a new kernel): the note says the kernel's state was lost.
func (x *ClientExecutor) replaceGone(ctx context.Context, room *bridge.Room, k *nbKernel, kernelName string) (string, error) {
	if k.ch != nil {
		_ = k.ch.Close()
		k.ch = nil
	}
	k.lost = "it died or was shut down"
	return x.ensureChannel(ctx, room, k, kernelName, false)
}

// ensureChannel gives the held kernel a live channel. probe asks the server whether a kernel
// that looks fine is still there (a kernel can die silently between jobs); only a 404 or a
// "dead" state count as gone — a server hiccup is not a death.
func (x *ClientExecutor) ensureChannel(ctx context.Context, room *bridge.Room, k *nbKernel, kernelName string, probe bool) (string, error) {
	path := room.Path()
	note := k.note
	k.note = ""
	gone := k.lost
	k.lost = ""
	k.reused = false
	if k.ch != nil {
		select {
		case <-k.ch.Done():
			// The connection ended (after redialling by itself): the kernel died, or only
			// the connection did.
			_ = k.ch.Close()
			k.ch = nil
			if kernelGone(x.opts.Kernels.KernelState(ctx, k.session.KernelID)) {
				gone = "it died or was shut down"
			}
		default:
			restarted := k.restartedNote()
			alive := true
			if probe {
				state, err := x.opts.Kernels.KernelState(ctx, k.session.KernelID)
				alive = !kernelGone(state, err)
				if err != nil && alive {
					x.log.Debug().Err(err).Str(logfield.Kernel, k.session.KernelID).Msg("kernel state unknown; assuming it lives")
				}
			}
			if alive && !k.stale {
				k.reused = true
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
	found, err := liveSession(ctx, x.opts.Kernels, room, kernelName)
	if err != nil {
		return "", err
	}
	switch {
	case k.session.KernelID == "" || k.session.KernelID == found.KernelID:
		// first use, or the same kernel again after its connection dropped
	case gone != "":
		msg := fmt.Sprintf("the notebook's kernel (%s) was gone (%s); a new kernel was started, so variables from earlier runs are lost", k.session.KernelID, gone)
		note = joinNotes(note, msg)
		x.kernelNotice(path, bridge.NoticeWarning, "replaced", found.KernelID, msg)
	default:
		note = joinNotes(note, "the notebook now has another kernel; variables from earlier runs are lost")
		x.kernelNotice(path, bridge.NoticeNotice, "replaced", found.KernelID, "the notebook now has another kernel; variables from earlier runs are lost")
	}
	ch, err := x.opts.Kernels.Connect(ctx, found.KernelID)
	if err != nil {
		return "", fmt.Errorf("connect to kernel %s: %w", found.KernelID, err)
	}
	// Outputs sent before the server's iopub link works would be lost. A kernel busy with
	// someone else's cell answers only after it: do not wait for that.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := ch.Ready(rctx); err != nil && ctx.Err() == nil {
		x.log.Debug().Err(err).Str(logfield.Kernel, found.KernelID).Msg("kernel not ready within 5s (busy?); going on")
	}
	cancel()
	k.session, k.ch, k.restarts, k.stale = found, ch, ch.Restarts(), false
	return note, nil
}

// kernelNotice tells agents (bridge.Manager.Notify) what happened to a notebook's kernel:
// event is "restarted", "lost" or "replaced".
func (x *ClientExecutor) kernelNotice(path string, level bridge.NoticeLevel, event, kernelID, msg string) {
	kernelNotice(x.opts.Manager, path, level, event, kernelID, msg)
}

// joinNotes joins two notes ("" is no note).
func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
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
