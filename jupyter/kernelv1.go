package jupyter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// The v1 kernel websocket protocol (jupyter-server's "v1.kernel.websocket.jupyter.org"
// subprotocol; jupyter_server/services/kernels/connection/base.py :: serialize_msg_to_ws_v1,
// deserialize_msg_from_ws_v1): every message is one binary frame,
//
//	n (uint64 LE) | n offsets (uint64 LE) | channel | header | parent_header | metadata | content | buffers...
//
// where offset i is where part i starts (part 0 the channel) and the last offset is the end of
// the frame. The JSON parts are those of the ZMQ message, unchanged.
//
// jupyter-server-documents speaks only this protocol on its kernel websocket
// (websocket_connection.py :: KernelWebsocketConnection), and gives every such socket a kernel
// client with the kernel manager's own session, so all of them share one ZMQ identity: the
// kernel's shell, control and stdin ROUTER sockets (ROUTER_HANDOVER) answer only the newest
// socket, and any socket opened before it stops reaching the kernel for good (its iopub still
// works). Replies to our requests can therefore go to a socket opened after ours (an execution
// then sees its idle status but never its reply); the outputs cannot (iopub reaches every
// socket). See ConnectKernelV1 and docs/engines.md.

// KernelProtocolV1 is the websocket subprotocol of the v1 kernel protocol.
const KernelProtocolV1 = "v1.kernel.websocket.jupyter.org"

// maxV1Parts bounds the parts of a v1 frame we decode (channel, four JSON parts, buffers).
const maxV1Parts = 1 << 10

// ConnectKernelV1 opens the channels websocket of a kernel speaking the v1 protocol. The server
// must accept the subprotocol (jupyter-server 2 and jupyter-server-documents do); one that does
// not gets an error, not a legacy connection.
func (c *Client) ConnectKernelV1(ctx context.Context, kernelID, username string) (*KernelConn, error) {
	return c.connectKernel(ctx, kernelID, username, true)
}

// encodeV1 builds the v1 frame of a message with no buffers.
func encodeV1(channel string, header MessageHeader, parent, metadata, content any) ([]byte, error) {
	parts := make([][]byte, 0, 5)
	parts = append(parts, []byte(channel))
	for _, v := range []any{header, parent, metadata, content} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode v1 kernel message: %w", err)
		}
		parts = append(parts, b)
	}
	n := len(parts) + 1
	head := 8 * (1 + n)
	size := head
	for _, p := range parts {
		size += len(p)
	}
	out := make([]byte, head, size)
	binary.LittleEndian.PutUint64(out, uint64(n))
	at := uint64(head)
	for i, p := range parts {
		binary.LittleEndian.PutUint64(out[8*(1+i):], at)
		at += uint64(len(p))
	}
	binary.LittleEndian.PutUint64(out[8*n:], at)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// decodeV1 reads a v1 frame into a message (its buffers are dropped: the sidecar reads no
// binary buffers, e.g. of widgets).
func decodeV1(b []byte) (KernelMessage, error) {
	var m KernelMessage
	if len(b) < 8 {
		return m, errors.New("short v1 kernel message")
	}
	n := binary.LittleEndian.Uint64(b)
	// channel, header, parent_header, metadata, content, and the end offset at least
	if n < 6 || n > maxV1Parts || uint64(len(b)) < 8*(1+n) {
		return m, fmt.Errorf("bad v1 kernel message: %d offsets in %d bytes", n, len(b))
	}
	offsets := make([]uint64, n)
	for i := range offsets {
		offsets[i] = binary.LittleEndian.Uint64(b[8*(1+i):])
		if offsets[i] < 8*(1+n) || offsets[i] > uint64(len(b)) || (i > 0 && offsets[i] < offsets[i-1]) {
			return m, errors.New("bad v1 kernel message offsets")
		}
	}
	part := func(i int) []byte { return b[offsets[i]:offsets[i+1]] }
	m.Channel = string(part(0))
	if err := json.Unmarshal(part(1), &m.Header); err != nil {
		return m, fmt.Errorf("v1 kernel message header: %w", err)
	}
	// An empty parent header is {} (a status at start-up has none): it leaves ParentHeader empty.
	if err := json.Unmarshal(part(2), &m.ParentHeader); err != nil {
		return m, fmt.Errorf("v1 kernel message parent header: %w", err)
	}
	if err := json.Unmarshal(part(3), &m.Metadata); err != nil {
		return m, fmt.Errorf("v1 kernel message metadata: %w", err)
	}
	content := part(4)
	if !json.Valid(content) {
		return m, errors.New("v1 kernel message content is not JSON")
	}
	m.Content = json.RawMessage(append([]byte(nil), content...))
	return m, nil
}
