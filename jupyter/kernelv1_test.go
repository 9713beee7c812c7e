package jupyter

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A frame made by jupyter-server's own serialize_msg_to_ws_v1 (jupyter-server 2.21.1, the
// .venv-jsd environment): an iopub stream message with one buffer.
const pythonV1Frame = "07000000000000004000000000000000450000000000000068000000000000007700000000000000790000000000000096000000000000009900000000000000" +
	"696f7075627b226d73675f6964223a226d31222c226d73675f74797065223a2273747265616d227d7b226d73675f6964223a227031227d7b7d7b226e616d65223a227374646f7574222c2274657874223a226869227d425546"

func TestDecodeV1ReadsJupyterServersFrames(t *testing.T) {
	b, _ := hex.DecodeString(pythonV1Frame)
	m, err := decodeV1(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "iopub" || m.Header.MsgID != "m1" || m.Header.MsgType != "stream" || m.ParentHeader.MsgID != "p1" ||
		string(m.Content) != `{"name":"stdout","text":"hi"}` {
		t.Errorf("decoded %+v content %s", m, m.Content)
	}
}

func TestEncodeV1RoundTrips(t *testing.T) {
	h := MessageHeader{MsgID: "id-1", MsgType: "execute_request", Session: "s"}
	b, err := encodeV1("shell", h, map[string]any{}, map[string]any{"cellId": "c"}, map[string]any{"code": "1+1"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeV1(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "shell" || m.Header != h || m.Metadata["cellId"] != "c" || string(m.Content) != `{"code":"1+1"}` {
		t.Errorf("round trip: %+v %s", m, m.Content)
	}
	// The layout jupyter-server reads: 6 offsets (channel, four JSON parts, end), 8 bytes each.
	if n := b[0]; n != 6 || len(b) < 56 {
		t.Errorf("offset count %d, frame %d bytes", n, len(b))
	}
}

func TestDecodeV1RefusesBadFrames(t *testing.T) {
	good, _ := hex.DecodeString(pythonV1Frame)
	le := func(vs ...uint64) []byte {
		out := make([]byte, 8*len(vs))
		for i, v := range vs {
			for j := range 8 {
				out[8*i+j] = byte(v >> (8 * j))
			}
		}
		return out
	}
	for name, in := range map[string][]byte{
		"short":              {1, 2, 3},
		"too few offsets":    le(2, 24, 24),
		"count past the end": le(1000),
		"offset past end":    append(le(6, 56, 57, 58, 59, 60, 999), "abcdef"...),
		"offsets reversed":   append(le(6, 56, 60, 58, 59, 60, 62), "abcdef"...),
		"offset in the head": append(le(6, 8, 57, 58, 59, 60, 62), "abcdef"...),
		"header not JSON":    append(le(6, 56, 57, 58, 59, 60, 61), "abcdef"...),
		"truncated":          good[:len(good)-10],
	} {
		if _, err := decodeV1(in); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeV1(f *testing.F) {
	good, _ := hex.DecodeString(pythonV1Frame)
	f.Add(good)
	f.Add([]byte{6, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeV1(b)
		if err == nil && len(m.Content) > len(b) {
			t.Fatal("content longer than the frame")
		}
	})
}

// v1Kernel answers execute_request on the v1 protocol the way jupyter-server-documents does.
// withholdReply sends no shell reply (it went to another client's socket).
type v1Kernel struct {
	withholdReply bool
	subprotocol   string // what the server selects; KernelProtocolV1 when empty
}

func (k *v1Kernel) serve(ws *websocket.Conn, _ *http.Request) {
	defer ws.Close()
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		req, err := decodeV1(data)
		if typ != websocket.BinaryMessage || err != nil || req.Channel != "shell" {
			continue
		}
		send := func(channel, msgType, content string, parent MessageHeader) {
			b, _ := encodeV1(channel, MessageHeader{MsgID: newUUID(), MsgType: msgType}, parent, map[string]any{}, json.RawMessage(content))
			_ = ws.WriteMessage(websocket.BinaryMessage, b)
		}
		// someone else's run (the server's own client runs cells): ignored by ours
		other := MessageHeader{MsgID: "not-ours", MsgType: "execute_request"}
		send("iopub", "stream", `{"name":"stdout","text":"not ours"}`, other)
		send("shell", "execute_reply", `{"status":"ok"}`, other)
		send("iopub", "status", `{"execution_state":"busy"}`, req.Header)
		switch req.Header.MsgType {
		case "execute_request":
			send("iopub", "error", `{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":[]}`, req.Header)
			if !k.withholdReply {
				send("shell", "execute_reply", `{"status":"error"}`, req.Header)
			}
			send("iopub", "status", `{"execution_state":"idle"}`, req.Header)
		case "kernel_info_request":
			send("shell", "kernel_info_reply", `{"status":"ok"}`, req.Header)
			send("iopub", "status", `{"execution_state":"idle"}`, req.Header)
		}
	}
}

func newV1Server(t *testing.T, k *v1Kernel) *wsServer {
	t.Helper()
	proto := k.subprotocol
	if proto == "" {
		proto = KernelProtocolV1
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }, Subprotocols: []string{proto}}
	return newWSServerWith(t, up, k.serve)
}

func TestKernelV1Execute(t *testing.T) {
	for _, withhold := range []bool{false, true} {
		s := newV1Server(t, &v1Kernel{withholdReply: withhold})
		c := tokenClient(t, s.URL, testToken)
		k, err := c.ConnectKernelV1(context.Background(), "k", "agent")
		if err != nil {
			t.Fatal(err)
		}
		if r := s.requests()[0]; r.Header.Get("Sec-Websocket-Protocol") != KernelProtocolV1 {
			t.Errorf("offered subprotocols %q", r.Header.Get("Sec-Websocket-Protocol"))
		}
		if err := k.KernelInfo(context.Background()); err != nil {
			t.Fatalf("KernelInfo: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		e, err := k.Execute(ctx, ExecuteRequest{Code: "1/0"})
		if err != nil {
			t.Fatal(err)
		}
		// Another client's messages are dropped; ours come in order. Without the reply the
		// execution stays open (the caller decides how long to wait for it).
		want := []string{"iopub:status", "iopub:error", "shell:execute_reply", "iopub:status"}
		if withhold {
			want = []string{"iopub:status", "iopub:error", "iopub:status"}
		}
		var got []string
		done := false
		for len(got) < len(want) || (!withhold && !done) {
			msgs, d, err := e.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				got = append(got, m.Channel+":"+m.Header.MsgType)
			}
			done = d
		}
		cancel()
		if strings.Join(got, " ") != strings.Join(want, " ") || done == withhold {
			t.Errorf("withhold=%v: messages %v, done %v", withhold, got, done)
		}
		_ = k.Close()
	}
}

func TestKernelV1RefusedWithoutTheSubprotocol(t *testing.T) {
	s := newV1Server(t, &v1Kernel{subprotocol: "something-else"})
	_, err := tokenClient(t, s.URL, testToken).ConnectKernelV1(context.Background(), "k", "agent")
	if err == nil || !strings.Contains(err.Error(), KernelProtocolV1) {
		t.Fatalf("err = %v, want a refusal naming the protocol", err)
	}
}
