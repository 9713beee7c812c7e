package execution

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Scratch code on jupyter-server-documents (ServerEngine.RunCode).
//
// The server runs code only as cells of a document (its execute API), so scratch code, which
// must write nothing into the notebook and leave the kernel's execution counter alone, goes
// through a kernel websocket of the sidecar's own: an execute_request with store_history false
// over the v1 protocol, the way ClientEngine runs it on jupyter-collaboration.
//
// jupyter-server-documents 0.3.3 gives every kernel websocket a kernel client sharing the kernel
// manager's session (websocket_connection.py :: KernelWebsocketConnection.connect calls
// kernel_manager.client()), so all of them have one ZMQ identity, and ipykernel's
// ROUTER_HANDOVER gives the shell, control and stdin channels to the newest: opening one cuts
// off, for good, every kernel websocket opened before it (a JupyterLab tab's completions,
// inspection, widgets and debugger stop until the tab reloads). The server's own room client has
// an identity of its own (ynotebook_room.py :: _connect_client) and is not affected; iopub
// reaches every socket. Hence:
//   - the websocket is opened only when no collaborator can hold a kernel connection to that
//     kernel: nobody in JupyterLab's global awareness (agents aside) has open a document whose
//     kernel session uses it, and no console session uses it. When the sidecar cannot tell
//     (global awareness off, or not in sync), it refuses, and says why;
//   - it lives for one run and is closed after it. A tab that opens meanwhile takes the route
//     over and loses nothing; our outputs still come on iopub, and our reply may go to the tab:
//     the run's outcome is then read from its outputs (machineConfig.RepliesElsewhere).

// ErrScratchRefused is wrapped when scratch code is not run (nothing was sent to the kernel):
// the reason says why and what to do instead.
var ErrScratchRefused = errors.New("execution: scratch code refused")

// scratchRefusalHint is what to do instead, for every refusal.
const scratchRefusalHint = "; put the code in a cell and run it with execute_notebook_cell instead (the server runs cells " +
	"through a kernel client of its own)"

// RunCode runs scratch code in the notebook's kernel without touching the notebook, through a
// kernel websocket of the sidecar's own opened for this run, when no collaborator's kernel
// connection can be cut off by it (see above); otherwise it returns ErrScratchRefused with the
// reason. It waits for a job running on the notebook to end first, and until the code finished
// or ctx ends.
func (x *ServerEngine) RunCode(ctx context.Context, path, code, kernelName string) (CellRun, string, error) {
	release, err := x.track()
	if err != nil {
		return CellRun{}, "", err
	}
	defer release()
	room, err := x.opts.Manager.Open(ctx, path, ydoc.KindNotebook)
	if err != nil {
		return CellRun{}, "", err
	}
	nb, err := x.notebook(ctx, room.Path())
	if err != nil {
		return CellRun{}, "", err
	}
	defer func() { <-nb.sem }()
	note, err := x.session(ctx, room, nb, kernelName)
	if err != nil {
		return CellRun{}, "", fmt.Errorf("no kernel: %w", err)
	}
	s := nb.session
	if why, err := x.kernelHeldByOthers(ctx, s); err != nil || why != "" {
		if err != nil {
			why = "the sidecar cannot tell whether a collaborator's JupyterLab holds a connection to the notebook's kernel (" + err.Error() + ")"
		}
		return CellRun{}, note, fmt.Errorf("%w: %s%s", ErrScratchRefused, why, scratchRefusalHint)
	}
	ch, err := x.opts.Kernels.ConnectScratch(ctx, s.KernelID)
	if err != nil {
		return CellRun{}, note, fmt.Errorf("connect to kernel %s: %w", s.KernelID, err)
	}
	defer ch.Close()
	// As ClientEngine's new channels: outputs sent before the server's iopub link works would be
	// lost; a kernel busy with someone's cell answers only after it, which is not waited for.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = ch.Ready(rctx)
	cancel()
	k := &nbKernel{sem: make(chan struct{}, 1), session: s, ch: ch, restarts: ch.Restarts()}
	run, err := x.scratch.runScratch(ctx, k, code, true)
	return run, note, err
}

// kernelHeldByOthers says, when it is so, why a kernel websocket of the sidecar's own would cut
// off someone else's on jupyter-server-documents: a collaborator's JupyterLab has open a document
// whose kernel session uses the kernel, or a console session uses it. The error says the
// sidecar cannot tell.
func (x *ServerEngine) kernelHeldByOthers(ctx context.Context, s KernelSession) (string, error) {
	sessions, err := x.opts.Kernels.Sessions(ctx)
	if err != nil {
		return "", fmt.Errorf("kernel sessions: %w", err)
	}
	paths := map[string]bool{s.Path: true}
	for _, o := range sessions {
		if o.KernelID != s.KernelID {
			continue
		}
		if o.Type == "console" {
			return fmt.Sprintf("a JupyterLab console (%s) is connected to the notebook's kernel, and on jupyter-server-documents "+
				"a kernel connection of the sidecar's own would cut off the console's", o.Path), nil
		}
		if p, err := bridge.CleanPath(o.Path); err == nil {
			paths[p] = true
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	peers, joined, err := x.opts.Manager.SyncedGlobalPeers(wctx)
	switch {
	case !joined:
		return "", errors.New("the sidecar is not in JupyterLab's global awareness, --no-global-awareness")
	case err != nil:
		return "", err
	}
	holders := map[string]bool{}
	for _, p := range peers {
		if p.User == nil || p.State[agentStateField] != nil {
			continue // agents do not keep kernel connections open
		}
		for _, d := range openDocuments(p.State) {
			if paths[d] {
				holders[displayName(p.User)] = true
			}
		}
	}
	if len(holders) == 0 {
		return "", nil
	}
	names := make([]string, 0, len(holders))
	for n := range holders {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("%s %s the notebook open in JupyterLab, whose tab keeps a connection to its kernel, and on "+
		"jupyter-server-documents a kernel connection of the sidecar's own would cut that one off (completions, widgets "+
		"and the debugger would stop in their tab until it is reloaded: the server gives every kernel websocket the same "+
		"ZMQ identity, and the kernel answers only the newest)", strings.Join(names, ", "), hasHave(len(names))), nil
}

// agentStateField is where agents (this sidecar included) publish themselves in awareness.
const agentStateField = "jupyter_collab_mcp"

// openDocuments lists the documents a global awareness state has open: "documents" (plain
// paths) and "current" ("notebook:<path>", "editor:<path>").
func openDocuments(st map[string]any) []string {
	var out []string
	add := func(p string) {
		if c, err := bridge.CleanPath(p); err == nil {
			out = append(out, c)
		}
	}
	if docs, ok := st["documents"].([]any); ok {
		for _, d := range docs {
			if p, ok := d.(string); ok {
				add(p)
			}
		}
	}
	if c, ok := st["current"].(string); ok {
		if _, p, ok := strings.Cut(c, ":"); ok {
			add(p)
		}
	}
	return out
}

func displayName(u *ydoc.AwarenessUser) string {
	for _, n := range []string{u.DisplayName, u.Name, u.Username} {
		if n != "" {
			return n
		}
	}
	return "a collaborator"
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
