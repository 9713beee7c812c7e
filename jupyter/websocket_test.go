package jupyter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// wsServer serves websockets with fn; every upgraded request is recorded.
type wsServer struct {
	*httptest.Server
	mu     sync.Mutex
	conns  []*http.Request
	open   []*websocket.Conn
	closed bool
	wg     sync.WaitGroup // handlers running
}

func newWSServer(t *testing.T, refuse func(r *http.Request) (int, string), fn func(ws *websocket.Conn, r *http.Request)) *wsServer {
	t.Helper()
	return newWSServerUpgrading(t, upgrader, refuse, fn)
}

// newWSServerWith is newWSServer with an upgrader of the test's (e.g. one that selects a
// subprotocol).
func newWSServerWith(t *testing.T, up websocket.Upgrader, fn func(ws *websocket.Conn, r *http.Request)) *wsServer {
	t.Helper()
	return newWSServerUpgrading(t, up, nil, fn)
}

func newWSServerUpgrading(t *testing.T, upgrader websocket.Upgrader, refuse func(r *http.Request) (int, string), fn func(ws *websocket.Conn, r *http.Request)) *wsServer {
	t.Helper()
	s := &wsServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.wg.Add(1)
		s.conns = append(s.conns, r.Clone(context.Background()))
		s.mu.Unlock()
		defer s.wg.Done()
		if refuse != nil {
			if status, body := refuse(r); status != 0 {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, body)
				return
			}
		}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.open = append(s.open, ws)
		s.mu.Unlock()
		fn(ws, r)
	}))
	t.Cleanup(func() {
		s.mu.Lock()
		s.closed = true
		for _, ws := range s.open {
			ws.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.Close()
	})
	return s
}

func (s *wsServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.conns...)
}

func TestDialRoom(t *testing.T) {
	s := newWSServer(t, nil, func(ws *websocket.Conn, r *http.Request) {
		defer ws.Close()
		_ = ws.WriteMessage(websocket.TextMessage, []byte("ignored"))
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2})
		typ, data, err := ws.ReadMessage()
		if err != nil || typ != websocket.BinaryMessage {
			return
		}
		_ = ws.WriteMessage(websocket.BinaryMessage, append([]byte("echo:"), data...))
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4404, "file not found"), time.Now().Add(time.Second))
		_, _, _ = ws.ReadMessage()
	})
	c := tokenClient(t, s.URL+"/user/alice/", testToken)
	rc, err := c.DialRoom(context.Background(), "json:notebook:1234-abcd", "sess 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r := s.requests()[0]
	if r.URL.Path != "/user/alice/api/collaboration/room/json:notebook:1234-abcd" || r.URL.Query().Get("sessionId") != "sess 1" {
		t.Errorf("dialled %s", r.URL)
	}
	if r.Header.Get("Authorization") != "token "+testToken || strings.Contains(r.URL.String(), testToken) {
		t.Errorf("Authorization %q, URL %s", r.Header.Get("Authorization"), r.URL)
	}
	got, err := rc.Read()
	if err != nil || string(got) != "\x00\x01\x02" {
		t.Fatalf("Read = %q, %v (the text frame must be skipped)", got, err)
	}
	if err := rc.Write([]byte("hi"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err = rc.Read(); err != nil || string(got) != "echo:hi" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	_, err = rc.Read()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.CloseCode() != 4404 || ce.CloseReason() != "file not found" {
		t.Fatalf("err = %v, want close 4404", err)
	}
}

// A refused handshake is an *APIError with the status and no HTML; a server that is gone is a
// retryable *RequestError.
func TestDialErrors(t *testing.T) {
	s := newWSServer(t, func(r *http.Request) (int, string) {
		if strings.Contains(r.URL.Path, "missing") {
			return 404, "<html><title>404: Not Found</title><body>token " + testToken + "</body></html>"
		}
		return 403, "<html><title>403: Forbidden</title></html>"
	}, func(ws *websocket.Conn, r *http.Request) { ws.Close() })
	c := tokenClient(t, s.URL, testToken)
	for _, tc := range []struct {
		room   string
		status int
		want   string
	}{
		{"missing", 404, "GET /api/collaboration/room/missing: HTTP 404"},
		{"forbidden", 403, "GET /api/collaboration/room/forbidden: HTTP 403 (check JUPYTER_TOKEN)"},
	} {
		_, err := c.DialRoom(context.Background(), tc.room, "")
		var api *APIError
		if !errors.As(err, &api) || api.Status != tc.status || !api.Permanent() {
			t.Errorf("%s: err = %v (%T)", tc.room, err, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%s: message\n got %q\nwant %q", tc.room, err, tc.want)
		}
	}
	_, err := c.ConnectKernel(context.Background(), "k-missing", "me")
	var api *APIError
	if !errors.As(err, &api) || api.Status != 404 || strings.Contains(err.Error(), "<") || strings.Contains(err.Error(), testToken) {
		t.Errorf("kernel: err = %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c = tokenClient(t, "http://"+addr+"/", testToken)
	_, err = c.DialRoom(context.Background(), "r", "")
	var re *RequestError
	if !errors.As(err, &re) || re.Permanent() || strings.Contains(err.Error(), "ws://") {
		t.Errorf("refused connection: err = %v (%T)", err, err)
	}
}

// Without a token, a websocket dial carries the XSRF cookie the client made (jupyter-server's
// token-less mode checks it on websockets too).
func TestDialWithoutTokenSendsTheXSRFCookie(t *testing.T) {
	s := newWSServer(t, func(r *http.Request) (int, string) {
		if c, err := r.Cookie("_xsrf"); err != nil || c.Value == "" || r.Header.Get("Authorization") != "" {
			return 403, "<html><title>403: Forbidden</title></html>"
		}
		return 0, ""
	}, func(ws *websocket.Conn, r *http.Request) { ws.Close() })
	c := tokenClient(t, s.URL+"/base/", "")
	rc, err := c.DialRoom(context.Background(), "r", "")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
}

// A room socket that stays silent past its read deadline fails Read with a timeout; a ping from
// the server or a pong to ours extends it.
func TestRoomReadDeadline(t *testing.T) {
	const idle = 300 * time.Millisecond
	pings := make(chan struct{})
	s := newWSServer(t, nil, func(ws *websocket.Conn, r *http.Request) {
		defer ws.Close()
		if r.URL.Query().Get("sessionId") == "pinged" {
			// keep the client alive with pings for 3 × idle, then go quiet
			for i := 0; i < 6; i++ {
				if ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)) != nil {
					return
				}
				time.Sleep(idle / 2)
			}
			close(pings)
		}
		_, _, _ = ws.ReadMessage() // until the client goes
	})
	c := tokenClient(t, s.URL, testToken)
	c.idle = idle
	for _, session := range []string{"silent", "pinged"} {
		rc, err := c.DialRoom(context.Background(), "r", session)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = rc.Read()
		took := time.Since(start)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s: Read err = %v, want a timeout", session, err)
		}
		if session == "pinged" {
			select {
			case <-pings:
			default:
				t.Errorf("pinged: timed out after %v while the server was still pinging", took)
			}
		}
		rc.Close()
	}
}

// kernelMsg is what the fake kernel reads and writes.
type kernelMsg struct {
	Channel      string          `json:"channel"`
	Header       MessageHeader   `json:"header"`
	ParentHeader MessageHeader   `json:"parent_header"`
	Content      json.RawMessage `json:"content"`
	Metadata     map[string]any  `json:"metadata"`
}

// fakeKernel answers execute_request and kernel_info_request on the legacy JSON protocol,
// like jupyter-server does for a kernel: iopub status busy, the result, status idle, and the
// shell reply. binary sends the result as a legacy binary message (with a buffer).
type fakeKernel struct {
	binary   bool
	noPong   bool // swallow the client's pings (a half-dead connection)
	mu       sync.Mutex
	sessions []string // session_id of each connection
	pings    int
}

func (k *fakeKernel) serve(ws *websocket.Conn, r *http.Request) {
	defer ws.Close()
	k.mu.Lock()
	k.sessions = append(k.sessions, r.URL.Query().Get("session_id"))
	k.mu.Unlock()
	ws.SetPingHandler(func(data string) error {
		k.mu.Lock()
		k.pings++
		k.mu.Unlock()
		if k.noPong {
			return nil
		}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var req kernelMsg
		if typ != websocket.TextMessage || json.Unmarshal(data, &req) != nil || req.Channel != "shell" {
			continue
		}
		parent := req.Header
		send := func(channel, msgType, content string, binary bool) {
			m := kernelMsg{Channel: channel, Header: MessageHeader{MsgID: newUUID(), MsgType: msgType},
				ParentHeader: parent, Content: json.RawMessage(content), Metadata: map[string]any{}}
			b, _ := json.Marshal(m)
			if !binary {
				_ = ws.WriteMessage(websocket.TextMessage, b)
				return
			}
			// legacy binary: count, offsets, then the JSON and one buffer
			buf := []byte("BUFFER")
			frame := make([]byte, 12)
			binary32 := func(i int, v int) { binaryPut(frame[4*i:], uint32(v)) }
			binary32(0, 2)
			binary32(1, 12)
			binary32(2, 12+len(b))
			frame = append(append(frame, b...), buf...)
			_ = ws.WriteMessage(websocket.BinaryMessage, frame)
		}
		// someone else's request first: must be ignored by the client
		other := parent
		parent = MessageHeader{MsgID: "not-ours", MsgType: "execute_request"}
		send("iopub", "stream", `{"name":"stdout","text":"not ours"}`, false)
		parent = other
		send("iopub", "status", `{"execution_state":"busy"}`, false)
		switch parent.MsgType {
		case "execute_request":
			var c struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(req.Content, &c)
			if c.Code == "die" {
				send("iopub", "status", `{"execution_state":"dead"}`, false)
				continue
			}
			send("iopub", "execute_result", `{"data":{"text/plain":"2"},"execution_count":1}`, k.binary)
			// the reply before the idle status, as often happens: completion needs both
			send("shell", "execute_reply", `{"status":"ok","execution_count":1}`, false)
			send("iopub", "status", `{"execution_state":"idle"}`, false)
		case "kernel_info_request":
			send("shell", "kernel_info_reply", `{"status":"ok"}`, false)
			send("iopub", "status", `{"execution_state":"idle"}`, false)
		}
	}
}

func binaryPut(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }

func (k *fakeKernel) counts() (sessions []string, pings int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.sessions...), k.pings
}

func runToEnd(t *testing.T, k *KernelConn, code string) ([]KernelMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := k.Execute(ctx, ExecuteRequest{Code: code, StoreHistory: true})
	if err != nil {
		return nil, err
	}
	var all []KernelMessage
	for {
		msgs, done, err := e.Next(ctx)
		all = append(all, msgs...)
		if done || err != nil {
			return all, err
		}
	}
}

func TestKernelExecute(t *testing.T) {
	for _, binary := range []bool{false, true} {
		fk := &fakeKernel{binary: binary}
		s := newWSServer(t, nil, fk.serve)
		c := tokenClient(t, s.URL+"/base/", testToken)
		k, err := c.ConnectKernel(context.Background(), "k 1", "agent")
		if err != nil {
			t.Fatal(err)
		}
		r := s.requests()[0]
		if r.URL.EscapedPath() != "/base/api/kernels/k%201/channels" || r.URL.Query().Get("session_id") == "" || r.Header.Get("Authorization") != "token "+testToken {
			t.Errorf("dialled %s (auth %q)", r.URL, r.Header.Get("Authorization"))
		}
		if err := k.KernelInfo(context.Background()); err != nil {
			t.Fatalf("KernelInfo: %v", err)
		}
		msgs, err := runToEnd(t, k, "1 + 1")
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, m := range msgs {
			types = append(types, m.Channel+":"+m.Header.MsgType)
		}
		if got := strings.Join(types, " "); got != "iopub:status iopub:execute_result shell:execute_reply iopub:status" {
			t.Errorf("binary=%v: messages %s", binary, got)
		}
		if !strings.Contains(string(msgs[1].Content), `"text/plain":"2"`) {
			t.Errorf("binary=%v: result %s", binary, msgs[1].Content)
		}
		if err := k.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestKernelDeathFailsTheExecution(t *testing.T) {
	fk := &fakeKernel{}
	s := newWSServer(t, nil, fk.serve)
	k, err := tokenClient(t, s.URL, testToken).ConnectKernel(context.Background(), "k", "agent")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := runToEnd(t, k, "die"); !errors.Is(err, ErrKernelGone) {
		t.Fatalf("err = %v, want ErrKernelGone", err)
	}
	if k.Restarts() != 1 {
		t.Errorf("Restarts = %d", k.Restarts())
	}
}

// The kernel websocket is pinged every PingInterval; one whose pings go unanswered is taken for
// dropped after the read deadline and dialled again with the same session id (so the server
// replays what it buffered), and executions go on over the new one.
func TestKernelPingAndReadDeadline(t *testing.T) {
	const idle = 400 * time.Millisecond
	for _, tc := range []struct {
		name       string
		noPong     bool
		wantRedial bool
	}{{"answered", false, false}, {"unanswered", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fakeKernel{noPong: tc.noPong}
			s := newWSServer(t, nil, fk.serve)
			c := tokenClient(t, s.URL, testToken)
			c.idle, c.ping = idle, idle/4
			k, err := c.ConnectKernel(context.Background(), "k", "agent")
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			// Quiet for 2.5 × idle: the pings must keep an answered socket alive.
			deadline := time.Now().Add(idle * 5 / 2)
			for time.Now().Before(deadline) {
				if tc.wantRedial && k.Redials() > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			sessions, pings := fk.counts()
			if pings < 3 {
				t.Errorf("the server saw %d pings in %v at an interval of %v", pings, idle*5/2, idle/4)
			}
			if got := k.Redials() > 0; got != tc.wantRedial {
				t.Fatalf("redials = %d, sessions %v", k.Redials(), sessions)
			}
			if tc.wantRedial {
				if len(sessions) < 2 || sessions[0] != sessions[1] {
					t.Errorf("redialled with session ids %v, want the same one", sessions)
				}
			}
			if _, err := runToEnd(t, k, "1 + 1"); err != nil {
				t.Errorf("execute after the quiet period: %v", err)
			}
			if k.Err() != nil {
				t.Errorf("Err = %v", k.Err())
			}
		})
	}
}

// Close ends both goroutines (the reader and the pinger) and fails what is pending.
func TestKernelCloseStopsEverything(t *testing.T) {
	block := make(chan struct{})
	s := newWSServer(t, nil, func(ws *websocket.Conn, r *http.Request) {
		defer ws.Close()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			<-block // never answers
		}
	})
	defer close(block)
	c := tokenClient(t, s.URL, testToken)
	c.ping = 10 * time.Millisecond
	k, err := c.ConnectKernel(context.Background(), "k", "agent")
	if err != nil {
		t.Fatal(err)
	}
	e, err := k.Execute(context.Background(), ExecuteRequest{Code: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-k.pinged:
	default:
		t.Error("the pinger still runs after Close")
	}
	select {
	case <-e.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the pending execution was not failed by Close")
	}
	if _, _, err := e.Next(context.Background()); !errors.Is(err, ErrKernelGone) {
		t.Errorf("execution err = %v", err)
	}
}

func TestLegacyBinaryJSON(t *testing.T) {
	frame := func(words []uint32, rest string) []byte {
		b := make([]byte, 4*len(words))
		for i, w := range words {
			binary.BigEndian.PutUint32(b[4*i:], w)
		}
		return append(b, rest...)
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		want    string
		wantErr bool
	}{
		{"one part", frame([]uint32{1, 8}, `{"a":1}`), `{"a":1}`, false},
		{"json and buffer", frame([]uint32{2, 12, 19}, `{"a":1}BUF`), `{"a":1}`, false},
		{"short", []byte{0, 0}, "", true},
		{"zero count", frame([]uint32{0}, "x"), "", true},
		{"count past the end", frame([]uint32{1000}, ""), "", true},
		{"offset past the end", frame([]uint32{1, 99}, "x"), "", true},
		{"offsets reversed", frame([]uint32{2, 14, 12}, "abcdef"), "", true},
	} {
		got, err := legacyBinaryJSON(tc.in)
		if (err != nil) != tc.wantErr || string(got) != tc.want {
			t.Errorf("%s: %q, %v", tc.name, got, err)
		}
	}
}

func FuzzLegacyBinaryJSON(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 8, '{', '}'})
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 12, 0, 0, 0, 14, '{', '}', 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := legacyBinaryJSON(b)
		if err == nil && len(out) > len(b) {
			t.Fatalf("output longer than input")
		}
	})
}
