package jupyter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"
)

// Kernels: the sessions and kernels REST APIs, and the kernel channels websocket: the legacy
// JSON protocol, which jupyter-server speaks when no subprotocol is offered, or the v1 binary
// protocol (kernelv1.go), the only one jupyter-server-documents speaks.

// KernelModel is a kernel as the REST API describes it.
type KernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
	LastActivity   string `json:"last_activity"`
}

// SessionModel is a kernel session (GET /api/sessions).
type SessionModel struct {
	ID     string       `json:"id"`
	Path   string       `json:"path"`
	Name   string       `json:"name"`
	Type   string       `json:"type"`
	Kernel *KernelModel `json:"kernel"`
}

// Sessions lists kernel sessions.
func (c *Client) Sessions(ctx context.Context) ([]SessionModel, error) {
	var out []SessionModel
	_, err := c.do(ctx, http.MethodGet, c.endpoint("api", "sessions"), nil, &out)
	return out, err
}

// StartSession gets or creates the kernel session of a notebook path (POST /api/sessions is
// get-or-create by path). kernelName may be empty for the server's default.
func (c *Client) StartSession(ctx context.Context, path, name, kernelName string) (SessionModel, error) {
	body := map[string]any{"path": path, "name": name, "type": "notebook"}
	if kernelName != "" {
		body["kernel"] = map[string]string{"name": kernelName}
	}
	var out SessionModel
	_, err := c.do(ctx, http.MethodPost, c.endpoint("api", "sessions"), body, &out)
	return out, err
}

// UpdateSessionKernel sets a session's kernel (PATCH /api/sessions/{id} with the kernel id).
// With the kernel it already has, it changes nothing on jupyter-server but makes
// jupyter-server-documents attach that kernel to the notebook's room again
// (session_manager.py :: YDocSessionManager.update_session disconnects and connects the room).
func (c *Client) UpdateSessionKernel(ctx context.Context, sessionID, kernelID string) (SessionModel, error) {
	var out SessionModel
	_, err := c.do(ctx, http.MethodPatch, c.endpoint("api", "sessions", sessionID), map[string]any{"kernel": map[string]string{"id": kernelID}}, &out)
	return out, err
}

// DeleteSession ends a kernel session (and shuts its kernel down).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, c.endpoint("api", "sessions", id), nil, nil)
	return err
}

// Kernel describes a running kernel; a 404 means it is gone (dead and reaped, or culled).
func (c *Client) Kernel(ctx context.Context, id string) (KernelModel, error) {
	var out KernelModel
	_, err := c.do(ctx, http.MethodGet, c.endpoint("api", "kernels", id), nil, &out)
	return out, err
}

// InterruptKernel sends an interrupt (KeyboardInterrupt in Python kernels).
func (c *Client) InterruptKernel(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodPost, c.endpoint("api", "kernels", id, "interrupt"), map[string]any{}, nil)
	return err
}

// RestartKernel restarts a kernel (its state is lost).
func (c *Client) RestartKernel(ctx context.Context, id string) (KernelModel, error) {
	var out KernelModel
	_, err := c.do(ctx, http.MethodPost, c.endpoint("api", "kernels", id, "restart"), map[string]any{}, &out)
	return out, err
}

// KernelSpecs returns the default kernel name and the installed kernel names.
func (c *Client) KernelSpecs(ctx context.Context) (string, []string, error) {
	var out struct {
		Default string                     `json:"default"`
		Specs   map[string]json.RawMessage `json:"kernelspecs"`
	}
	if _, err := c.do(ctx, http.MethodGet, c.endpoint("api", "kernelspecs"), nil, &out); err != nil {
		return "", nil, err
	}
	names := make([]string, 0, len(out.Specs))
	for n := range out.Specs {
		names = append(names, n)
	}
	return out.Default, names, nil
}

// KernelMessage is one Jupyter message on a kernel channel.
type KernelMessage struct {
	Channel      string          `json:"channel"`
	Header       MessageHeader   `json:"header"`
	ParentHeader MessageHeader   `json:"parent_header"`
	Metadata     map[string]any  `json:"metadata"`
	Content      json.RawMessage `json:"content"`
}

// MessageHeader is a Jupyter message header.
type MessageHeader struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Username string `json:"username,omitempty"`
	Session  string `json:"session,omitempty"`
	Date     string `json:"date,omitempty"`
	Version  string `json:"version,omitempty"`
}

// KernelRestarting is the type of a synthetic message (channel "server") an execution receives
// when the server reports that the kernel is restarting.
const KernelRestarting = "kernel_restarting"

// ErrKernelGone is wrapped when the kernel connection ends (the kernel died, restarted, or the
// server went away) before an execution finished.
var ErrKernelGone = errors.New("jupyter: kernel connection lost")

// KernelConn is one websocket to a kernel's channels, shared by executions. A reader goroutine
// routes each message to the execution whose request it answers; messages for other clients'
// requests (a human running cells in the same kernel) are dropped. A dropped websocket is
// redialled with the same session id, so jupyter-server replays what it buffered meanwhile
// (it buffers only when no other client is connected to the kernel) and requests in flight go on.
// A pinger goroutine pings the websocket (Options.PingInterval); a socket silent for IdleTimeout
// is taken for dropped and redialled. Both goroutines end with the connection (Done).
type KernelConn struct {
	session string
	user    string
	log     zerolog.Logger
	dial    func(ctx context.Context) (*websocket.Conn, error)
	pinged  chan struct{} // closed when the pinger has returned
	idle    time.Duration // read deadline after each frame

	writeMu sync.Mutex // held while writing; guards ws changes too
	mu      sync.Mutex
	ws      *websocket.Conn
	pending map[string]*Execution // msg_id → execution
	status  string                // last kernel status seen (busy, idle, restarting, dead, ...)
	restart int                   // how many times the kernel restarted or died
	// lastRestart is when a restart was last signalled (the server's "restarting" status, or
	// the old kernel's shutdown_reply on a restart through the REST API): a second sign within
	// a second is the same restart.
	lastRestart time.Time
	redials     int
	err         error // set when the connection ended
	closing     chan struct{}
	closeOnce   sync.Once
	done        chan struct{}

	// v1: the connection speaks the v1 kernel websocket protocol (binary frames both ways;
	// kernelv1.go), not the legacy JSON one.
	v1 bool
}

// ConnectKernel opens the channels websocket of a kernel (the legacy JSON protocol).
func (c *Client) ConnectKernel(ctx context.Context, kernelID, username string) (*KernelConn, error) {
	return c.connectKernel(ctx, kernelID, username, false)
}

func (c *Client) connectKernel(ctx context.Context, kernelID, username string, v1 bool) (*KernelConn, error) {
	session := newUUID()
	u := c.endpoint("api", "kernels", kernelID, "channels")
	u.RawQuery = url.Values{"session_id": {session}}.Encode()
	var protocols []string
	if v1 {
		protocols = []string{KernelProtocolV1}
	}
	dial := func(ctx context.Context) (*websocket.Conn, error) {
		ws, err := c.dialWebsocket(ctx, u, 0, protocols...)
		if err == nil && v1 && ws.Subprotocol() != KernelProtocolV1 {
			_ = ws.Close()
			return nil, &APIError{Method: "GET", Path: u.Path, Status: http.StatusNotImplemented,
				Message: "the server did not accept the v1 kernel websocket protocol (" + KernelProtocolV1 + ")"}
		}
		return ws, err
	}
	ws, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	k := &KernelConn{ws: ws, session: session, user: username, log: c.log, dial: dial, pending: map[string]*Execution{},
		closing: make(chan struct{}), done: make(chan struct{}), pinged: make(chan struct{}), idle: c.idle, v1: v1}
	go k.read()
	go k.keepPinging(c.ping)
	return k, nil
}

// keepPinging pings the current websocket every interval until the connection ends. A failed
// ping closes that websocket, which the reader then redials.
func (k *KernelConn) keepPinging(interval time.Duration) {
	defer close(k.pinged)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-k.done:
			return
		case <-t.C:
		}
		k.mu.Lock()
		ws := k.ws
		k.mu.Unlock()
		if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(kernelWriteTimeout)); err != nil {
			k.log.Debug().Err(err).Msg("kernel websocket ping failed")
			_ = ws.Close()
		}
	}
}

// kernelWriteTimeout bounds one write (a request, a ping) to the kernel websocket.
const kernelWriteTimeout = 10 * time.Second

// Done is closed when the connection has ended (its reader has returned; its pinger returns
// right after, and Close waits for both); Err then says why.
func (k *KernelConn) Done() <-chan struct{} { return k.done }

// Err returns why the connection ended (nil while it is up).
func (k *KernelConn) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Restarts counts the restarts (and deaths) of the kernel the server reported on this
// connection: a change means the kernel's state was lost.
func (k *KernelConn) Restarts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restart
}

// Redials counts how often the websocket was dialled again after dropping.
func (k *KernelConn) Redials() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.redials
}

// Close ends the connection; pending executions fail with ErrKernelGone.
func (k *KernelConn) Close() error {
	var err error
	k.closeOnce.Do(func() {
		close(k.closing)
		k.mu.Lock()
		ws := k.ws
		k.mu.Unlock()
		err = ws.Close()
	})
	<-k.done
	<-k.pinged
	return err
}

func (k *KernelConn) read() {
	defer close(k.done)
	k.mu.Lock()
	ws := k.ws
	k.mu.Unlock()
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			_ = ws.Close()
			if ws = k.redial(err); ws == nil {
				return
			}
			continue
		}
		_ = ws.SetReadDeadline(time.Now().Add(k.idle))
		var m KernelMessage
		switch {
		case k.v1 && typ == websocket.BinaryMessage:
			if m, err = decodeV1(data); err != nil {
				k.log.Debug().Err(err).Msg("dropping an undecodable v1 kernel message")
				continue
			}
		default:
			if typ == websocket.BinaryMessage {
				if data, err = legacyBinaryJSON(data); err != nil {
					k.log.Debug().Err(err).Msg("dropping a kernel message with buffers")
					continue
				}
			}
			if err := json.Unmarshal(data, &m); err != nil {
				k.log.Debug().Err(err).Msg("dropping an undecodable kernel message")
				continue
			}
		}
		k.route(m)
	}
}

// redial dials the kernel again after the websocket dropped (a proxy timeout, a server hiccup),
// a few times over about 5 s. It returns nil, having failed every pending execution, when the
// connection was closed, the kernel is gone, or every attempt failed.
func (k *KernelConn) redial(cause error) *websocket.Conn {
	wait := 100 * time.Millisecond
	for attempt := 0; attempt < 6; attempt++ {
		select {
		case <-k.closing:
			k.fail(fmt.Errorf("%w: closed", ErrKernelGone))
			return nil
		case <-time.After(wait):
		}
		wait *= 2
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ws, err := k.dial(ctx)
		cancel()
		if err == nil {
			k.writeMu.Lock()
			k.mu.Lock()
			k.ws = ws
			k.redials++
			k.mu.Unlock()
			k.writeMu.Unlock()
			select {
			case <-k.closing: // Close ran while we dialled: it closed the old socket only
				_ = ws.Close()
				k.fail(fmt.Errorf("%w: closed", ErrKernelGone))
				return nil
			default:
			}
			k.log.Info().Err(cause).Msg("kernel websocket dropped; reconnected")
			return ws
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 {
			k.fail(fmt.Errorf("%w: %v (reconnect: %v)", ErrKernelGone, cause, err))
			return nil // 404: the kernel is gone; 401/403: no retry will help
		}
	}
	k.fail(fmt.Errorf("%w: %v", ErrKernelGone, cause))
	return nil
}

// legacyBinaryJSON extracts the JSON part of a legacy binary kernel message: a big-endian
// uint32 count of offsets, the offsets, then the JSON message and its buffers.
func legacyBinaryJSON(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("short binary kernel message")
	}
	n := binary.BigEndian.Uint32(b)
	if n == 0 || uint64(len(b)) < 4+4*uint64(n) {
		return nil, errors.New("bad binary kernel message header")
	}
	start := binary.BigEndian.Uint32(b[4:])
	end := uint32(len(b))
	if n > 1 {
		end = binary.BigEndian.Uint32(b[8:])
	}
	if start > end || end > uint32(len(b)) {
		return nil, errors.New("bad binary kernel message offsets")
	}
	return b[start:end], nil
}

func (k *KernelConn) route(m KernelMessage) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m.Channel == "iopub" && m.Header.MsgType == "shutdown_reply" {
		// A restart through the REST API (JupyterLab's "Restart Kernel"): the server sends no
		// "restarting" status, only the old kernel's shutdown_reply, and the requests it was
		// running never get a reply.
		var c struct {
			Restart bool `json:"restart"`
		}
		if json.Unmarshal(m.Content, &c) == nil && c.Restart {
			k.restarted()
		}
		return
	}
	if m.Header.MsgType == "status" {
		var st struct {
			ExecutionState string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &st)
		k.status = st.ExecutionState
		switch st.ExecutionState {
		case "restarting":
			// The server restarts the kernel process (it died). A request it had not read yet
			// may still reach the new process (ZMQ queues it), so executions stay pending; they
			// are told, and decide.
			k.restarted()
			return
		case "dead":
			k.restart++
			for id, e := range k.pending {
				e.finish(fmt.Errorf("%w: the kernel is dead", ErrKernelGone))
				delete(k.pending, id)
			}
			return
		}
	}
	e := k.pending[m.ParentHeader.MsgID]
	if e == nil {
		return // someone else's request
	}
	e.push(m)
	if e.complete() {
		delete(k.pending, m.ParentHeader.MsgID)
		e.finish(nil)
	}
}

// restarted tells every pending execution that the kernel restarts (once per restart).
func (k *KernelConn) restarted() {
	if time.Since(k.lastRestart) < time.Second {
		return
	}
	k.lastRestart = time.Now()
	k.restart++
	for _, e := range k.pending {
		e.push(KernelMessage{Channel: "server", Header: MessageHeader{MsgType: KernelRestarting}})
	}
}

func (k *KernelConn) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.err = err
	for id, e := range k.pending {
		e.finish(err)
		delete(k.pending, id)
	}
}

// ExecuteRequest is what to run.
type ExecuteRequest struct {
	Code         string
	StoreHistory bool           // false for scratch code: the execution counter does not move
	StopOnError  bool           // abort queued requests after an error
	Metadata     map[string]any // e.g. {"cellId": ...}, as JupyterLab sends
}

// Execute sends an execute_request on the shell channel. stdin is never allowed: input() fails
// at once in the kernel instead of hanging.
func (k *KernelConn) Execute(ctx context.Context, req ExecuteRequest) (*Execution, error) {
	return k.request(ctx, "execute_request", map[string]any{
		"code": req.Code, "silent": false, "store_history": req.StoreHistory, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": req.StopOnError,
	}, req.Metadata, true)
}

// KernelInfo asks the kernel for its info and waits for the reply: the kernel is up and has
// handled every request sent on this connection before (the shell channel is in order).
func (k *KernelConn) KernelInfo(ctx context.Context) error {
	e, err := k.request(ctx, "kernel_info_request", map[string]any{}, nil, false)
	if err != nil {
		return err
	}
	select {
	case <-e.done:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.err
	case <-ctx.Done():
		e.Abandon()
		return ctx.Err()
	}
}

// Ready returns once the kernel answers a kernel_info_request on shell and its status for it on
// iopub: the server's iopub link to the kernel works. Right after a (re)start that link can miss
// the first messages (ZMQ's slow joiner), so the request is repeated, as the server's own nudge
// does, until both arrive or ctx ends.
func (k *KernelConn) Ready(ctx context.Context) error {
	for {
		e, err := k.request(ctx, "kernel_info_request", map[string]any{}, nil, true)
		if err != nil {
			return err
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-e.done:
			t.Stop()
			e.mu.Lock()
			err := e.err
			e.mu.Unlock()
			return err
		case <-t.C:
			e.Abandon()
		case <-ctx.Done():
			t.Stop()
			e.Abandon()
			return ctx.Err()
		}
	}
}

// request sends a shell request; the execution completes on the reply, and also on the
// kernel's idle status for it when needIdle (so no output is missed).
func (k *KernelConn) request(ctx context.Context, msgType string, content, metadata map[string]any, needIdle bool) (*Execution, error) {
	id := newUUID()
	e := &Execution{MsgID: id, conn: k, signal: make(chan struct{}, 1), done: make(chan struct{}), idle: !needIdle}
	header := MessageHeader{MsgID: id, MsgType: msgType, Username: k.user, Session: k.session,
		Date: time.Now().UTC().Format(time.RFC3339Nano), Version: "5.3"}
	frameType := websocket.TextMessage
	var b []byte
	var err error
	if k.v1 {
		frameType = websocket.BinaryMessage
		b, err = encodeV1("shell", header, map[string]any{}, orEmpty(metadata), content)
	} else {
		b, err = json.Marshal(map[string]any{
			"channel":       "shell",
			"header":        header,
			"parent_header": map[string]any{},
			"metadata":      orEmpty(metadata),
			"content":       content,
			"buffers":       []any{},
		})
	}
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.err != nil {
		k.mu.Unlock()
		return nil, k.err
	}
	k.pending[id] = e
	k.mu.Unlock()
	k.writeMu.Lock()
	k.mu.Lock()
	ws := k.ws
	k.mu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > kernelWriteTimeout {
		deadline = time.Now().Add(kernelWriteTimeout)
	}
	_ = ws.SetWriteDeadline(deadline)
	err = ws.WriteMessage(frameType, b)
	k.writeMu.Unlock()
	if err != nil {
		k.mu.Lock()
		delete(k.pending, id)
		k.mu.Unlock()
		return nil, fmt.Errorf("%w: send %s: %v", ErrKernelGone, msgType, err)
	}
	return e, nil
}

// Execution is one request's stream of messages: iopub outputs and status, and the shell reply.
// It completes when both the reply and the kernel's idle status for the request have arrived,
// so no output is missed.
type Execution struct {
	MsgID string
	conn  *KernelConn

	mu     sync.Mutex
	queue  []KernelMessage
	signal chan struct{} // non-blocking: something was queued
	reply  bool
	idle   bool
	done   chan struct{}
	err    error
}

func (e *Execution) push(m KernelMessage) {
	e.mu.Lock()
	e.queue = append(e.queue, m)
	switch {
	case m.Channel == "shell" && (m.Header.MsgType == "execute_reply" || m.Header.MsgType == "kernel_info_reply"):
		e.reply = true
	case m.Channel == "iopub" && m.Header.MsgType == "status":
		var st struct {
			ExecutionState string `json:"execution_state"`
		}
		if json.Unmarshal(m.Content, &st) == nil && st.ExecutionState == "idle" {
			e.idle = true
		}
	}
	e.mu.Unlock()
	select {
	case e.signal <- struct{}{}:
	default:
	}
}

func (e *Execution) complete() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reply && e.idle
}

func (e *Execution) finish(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	select {
	case <-e.done:
	default:
		close(e.done)
	}
}

// Next returns the messages queued so far, waiting until there is at least one, the execution
// completed, or ctx ends. done reports that nothing more will come (err says whether the
// connection was lost first).
func (e *Execution) Next(ctx context.Context) (msgs []KernelMessage, done bool, err error) {
	for {
		e.mu.Lock()
		msgs, e.queue = e.queue, nil
		finished := false
		select {
		case <-e.done:
			finished = true
		default:
		}
		err = e.err
		e.mu.Unlock()
		if len(msgs) > 0 || finished {
			if finished {
				// a message may have been queued after we took the queue: take it too
				e.mu.Lock()
				msgs = append(msgs, e.queue...)
				e.queue = nil
				e.mu.Unlock()
			}
			return msgs, finished, err
		}
		select {
		case <-e.signal:
		case <-e.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// Done is closed when the execution completed or was lost.
func (e *Execution) Done() <-chan struct{} { return e.done }

// Abandon stops following the request: later messages for it are dropped.
func (e *Execution) Abandon() {
	e.conn.mu.Lock()
	delete(e.conn.pending, e.MsgID)
	e.conn.mu.Unlock()
	e.finish(fmt.Errorf("%w: abandoned", ErrKernelGone))
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// newUUID returns a random (version 4) UUID, as Jupyter's clients use for session and message ids.
func newUUID() string { return uuid.NewString() }
