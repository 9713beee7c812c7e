package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// NodeProc drives a Node script over JSON lines on stdin/stdout: requests {"id", "op", ...},
// replies {"id", "ok", "error", ...}, and unsolicited {"event", ...} lines. The peer, the MCP
// client and the browser driver (integration/e2e) all speak it.
type NodeProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	wmu     sync.Mutex // one request line at a time on stdin
	seq     atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan json.RawMessage
	events  chan PeerEvent
	done    chan struct{}
	stderr  *lockedBuffer
}

// PeerEvent is an unsolicited line from the peer ({"event": ...}).
type PeerEvent struct {
	Event  string `json:"event"`
	Tail   string `json:"tail"`
	Code   int    `json:"code"`
	Reason string `json:"reason"`
	Text   string `json:"text"`
}

// Peer drives the independent Yjs peer (integration/node/peer.mjs: yjs + y-protocols).
type Peer struct{ *NodeProc }

// StartPeer starts a peer process. node and integration/node/node_modules must exist (the
// Makefile installs them).
func StartPeer() (*Peer, error) {
	p, err := startNode("peer.mjs")
	if err != nil {
		return nil, err
	}
	return &Peer{p}, nil
}

func startNode(name string) (*NodeProc, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "integration", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "yjs")); err != nil {
		return nil, fmt.Errorf("integration Node dependencies missing (run `make deps`): %w", err)
	}
	return StartNodeScript(filepath.Join(dir, name))
}

// StartNodeScript runs `node script` in the script's directory.
func StartNodeScript(script string) (*NodeProc, error) {
	cmd := exec.Command("node", script)
	cmd.Dir = filepath.Dir(script)
	cmd.SysProcAttr = ChildProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &NodeProc{
		cmd:     cmd,
		stdin:   stdin,
		pending: map[int64]chan json.RawMessage{},
		events:  make(chan PeerEvent, 4096),
		done:    make(chan struct{}),
		stderr:  &lockedBuffer{},
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(script), err)
	}
	go p.readLoop(stdout)
	return p, nil
}

func (p *NodeProc) readLoop(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var head struct {
			ID    *int64 `json:"id"`
			Event string `json:"event"`
		}
		if json.Unmarshal(line, &head) != nil {
			continue
		}
		if head.Event != "" {
			var ev PeerEvent
			_ = json.Unmarshal(line, &ev)
			select {
			case p.events <- ev:
			default: // a test that does not read events must not block the peer
			}
			continue
		}
		if head.ID == nil {
			continue
		}
		p.mu.Lock()
		c := p.pending[*head.ID]
		delete(p.pending, *head.ID)
		p.mu.Unlock()
		if c != nil {
			c <- line
		}
	}
}

// Events returns the script's unsolicited events.
func (p *NodeProc) Events() <-chan PeerEvent { return p.events }

// Call sends a request and decodes the reply into out (may be nil). Safe for concurrent use.
func (p *NodeProc) Call(ctx context.Context, op string, args map[string]any, out any) error {
	id := p.seq.Add(1)
	req := map[string]any{"id": id, "op": op}
	for k, v := range args {
		req[k] = v
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c := make(chan json.RawMessage, 1)
	p.mu.Lock()
	p.pending[id] = c
	p.mu.Unlock()
	p.wmu.Lock()
	_, err = p.stdin.Write(append(b, '\n'))
	p.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%s %s: %w (stderr: %s)", p.name(), op, err, p.stderr.String())
	}
	select {
	case line := <-c:
		var res struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(line, &res); err != nil {
			return fmt.Errorf("%s %s: bad reply: %w", p.name(), op, err)
		}
		if !res.OK {
			return fmt.Errorf("%s %s: %s", p.name(), op, res.Error)
		}
		if out != nil {
			return json.Unmarshal(line, out)
		}
		return nil
	case <-p.done:
		return fmt.Errorf("%s %s: the script exited (stderr: %s)", p.name(), op, p.stderr.String())
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return fmt.Errorf("%s %s: %w", p.name(), op, ctx.Err())
	}
}

// name is the script's name, for messages.
func (p *NodeProc) name() string { return filepath.Base(p.cmd.Args[len(p.cmd.Args)-1]) }

// Stderr returns what the script wrote to stderr (the last MiB).
func (p *NodeProc) Stderr() string { return p.stderr.String() }

// Done is closed when the script's stdout ends (it exited).
func (p *NodeProc) Done() <-chan struct{} { return p.done }

// Kill ends the script at once.
func (p *NodeProc) Kill() { _ = p.cmd.Process.Kill() }

// Close stops the script: stdin closed, then its exit awaited.
func (p *NodeProc) Close() error {
	_ = p.stdin.Close()
	select {
	case <-p.done:
	default:
	}
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// PeerCell is a cell as the peer sees it, with the Yjs type of each field.
type PeerCell struct {
	ID             string           `json:"id"`
	CellType       string           `json:"cell_type"`
	Source         string           `json:"source"`
	Metadata       map[string]any   `json:"metadata"`
	ExecutionCount *float64         `json:"execution_count"`
	ExecutionState string           `json:"execution_state"`
	Outputs        []map[string]any `json:"outputs"`
	Types          map[string]any   `json:"_types"`
	// Invalid is the Yjs type of an entry of the cells array that is not a Y.Map (not a cell at
	// all: the server cannot read such a notebook); empty for a real cell.
	Invalid string `json:"invalid"`
}

// PeerSnapshot is the document as the peer sees it.
type PeerSnapshot struct {
	Kind         string         `json:"kind"`
	Text         string         `json:"text"`
	NBFormat     float64        `json:"nbformat"`
	Metadata     map[string]any `json:"metadata"`
	MetadataType string         `json:"metadataType"`
	Cells        []PeerCell     `json:"cells"`
	State        map[string]any `json:"state"`
}

// Connect joins a document room (kind "notebook" or "file").
func (p *Peer) Connect(ctx context.Context, s *JupyterServer, path, kind string) error {
	return p.Call(ctx, "connect", map[string]any{"url": s.URL, "token": s.Token, "path": path, "kind": kind, "engine": string(s.Engine)}, nil)
}

// Reconnect opens the room again with the document the peer holds, under the URL and session
// id of its last Connect, as JupyterLab's tab does by itself after its socket closed (a server
// restart): the sync merges this old copy into whatever the server has now. A server that
// refuses the old session closes with 1003; the error then contains "closed 1003".
func (p *Peer) Reconnect(ctx context.Context, timeout time.Duration) error {
	return p.Call(ctx, "reconnect", map[string]any{"timeoutMs": timeout.Milliseconds()}, nil)
}

// Snapshot returns the peer's current view.
func (p *Peer) Snapshot(ctx context.Context) (PeerSnapshot, error) {
	var r struct {
		Snapshot PeerSnapshot `json:"snapshot"`
	}
	err := p.Call(ctx, "snapshot", nil, &r)
	return r.Snapshot, err
}

// WaitFor waits until a JS expression over the snapshot (named nb) is true.
func (p *Peer) WaitFor(ctx context.Context, expr string, timeoutMs int) (PeerSnapshot, error) {
	var r struct {
		Snapshot PeerSnapshot `json:"snapshot"`
	}
	err := p.Call(ctx, "waitFor", map[string]any{"expr": expr, "timeoutMs": timeoutMs}, &r)
	return r.Snapshot, err
}

// Transact runs JS inside one peer transaction (Y, doc, cells, meta, state, source, args in scope).
func (p *Peer) Transact(ctx context.Context, code string, args map[string]any) error {
	return p.Call(ctx, "transact", map[string]any{"code": code, "args": args}, nil)
}
