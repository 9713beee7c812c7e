package ydoc

import (
	"encoding/json"
	"fmt"
)

// Frames on a Jupyter collaboration room websocket. Every frame is binary and starts with a
// varuint message type (y-protocols), plus Jupyter's own RAW type 2 carrying JSON.

// MessageType is the outer type of a room frame.
type MessageType uint64

const (
	MsgSync           MessageType = 0
	MsgAwareness      MessageType = 1
	MsgRaw            MessageType = 2 // Jupyter-specific: varString(JSON) from the server, "save" requests to it
	MsgQueryAwareness MessageType = 3 // y-websocket; the Jupyter server ignores it
)

// SyncType is the subtype of a MsgSync frame.
type SyncType uint64

const (
	SyncStep1  SyncType = 0 // payload: state vector
	SyncStep2  SyncType = 1 // payload: update computed against the peer's state vector
	SyncUpdate SyncType = 2 // payload: update
)

func (t SyncType) String() string {
	switch t {
	case SyncStep1:
		return "step1"
	case SyncStep2:
		return "step2"
	case SyncUpdate:
		return "update"
	}
	return fmt.Sprintf("sync(%d)", uint64(t))
}

// MaxFrameSize bounds a single frame. The Jupyter server accepts up to 1 GiB; a whole-notebook
// step 2 can be tens of MB, so the cap is generous but finite.
const MaxFrameSize = 1 << 30

// Frame is one decoded room message. Payload aliases the input buffer.
type Frame struct {
	Type    MessageType
	Sync    SyncType // MsgSync only
	Payload []byte   // MsgSync: state vector or update; MsgAwareness: awareness update
	Raw     string   // MsgRaw: the JSON text, or "save" for a client save request
	SaveID  uint64   // MsgRaw "save" requests only
}

// DecodeFrame parses one room frame. Unknown outer types decode with an empty payload so the
// caller can ignore them, as the server does; malformed known types are errors.
func DecodeFrame(b []byte) (Frame, error) {
	if len(b) > MaxFrameSize {
		return Frame{}, malformed("frame of %d bytes exceeds the %d byte cap", len(b), MaxFrameSize)
	}
	d := newDecoder(b)
	t, err := d.varUint()
	if err != nil {
		return Frame{}, fmt.Errorf("frame type: %w", err)
	}
	f := Frame{Type: MessageType(t)}
	switch f.Type {
	case MsgSync:
		st, err := d.varUint()
		if err != nil {
			return Frame{}, fmt.Errorf("sync subtype: %w", err)
		}
		f.Sync = SyncType(st)
		if f.Sync > SyncUpdate {
			return Frame{}, malformed("unknown sync subtype %d", st)
		}
		if f.Payload, err = d.varBytes(); err != nil {
			return Frame{}, fmt.Errorf("sync %s payload: %w", f.Sync, err)
		}
	case MsgAwareness:
		if f.Payload, err = d.varBytes(); err != nil {
			return Frame{}, fmt.Errorf("awareness payload: %w", err)
		}
	case MsgRaw:
		n, err := d.varUint()
		if err != nil {
			return Frame{}, fmt.Errorf("raw length: %w", err)
		}
		if n > uint64(d.remaining()) {
			return Frame{}, malformed("raw string length %d exceeds the %d bytes left", n, d.remaining())
		}
		// pycrdt writes the character count, not the byte count, so a non-ASCII server message
		// can announce fewer bytes than it has. A save request is the only RAW message with a
		// trailing field; everything else is JSON that runs to the end of the frame.
		rest := d.buf[d.pos:]
		if n == 4 && string(rest[:4]) == "save" {
			d.pos += 4
			f.Raw = "save"
			if f.SaveID, err = d.varUint(); err != nil {
				return Frame{}, fmt.Errorf("save request id: %w", err)
			}
			break
		}
		f.Raw = string(rest)
	}
	return f, nil
}

// EncodeSync builds a MsgSync frame.
func EncodeSync(t SyncType, payload []byte) []byte {
	b := make([]byte, 0, len(payload)+12)
	b = appendVarUint(b, uint64(MsgSync))
	b = appendVarUint(b, uint64(t))
	return appendVarBytes(b, payload)
}

// EncodeAwarenessFrame wraps an awareness update in a MsgAwareness frame.
func EncodeAwarenessFrame(update []byte) []byte {
	b := make([]byte, 0, len(update)+8)
	b = appendVarUint(b, uint64(MsgAwareness))
	return appendVarBytes(b, update)
}

// EncodeSaveRequest builds Jupyter's RAW save request; the server answers with a RAW JSON
// message {"type":"save","responseTo":id,"status":...}.
func EncodeSaveRequest(id uint64) []byte {
	b := appendVarUint(nil, uint64(MsgRaw))
	b = appendVarString(b, "save")
	return appendVarUint(b, id)
}

// EncodeRaw builds a RAW frame carrying JSON, as the server sends them (used by fakes).
func EncodeRaw(jsonText string) []byte {
	b := appendVarUint(nil, uint64(MsgRaw))
	return appendVarString(b, jsonText)
}

// RawMessage is a RAW JSON message from the server.
type RawMessage struct {
	Type       string  `json:"type"`                 // "save" or "conflict"
	ResponseTo *uint64 `json:"responseTo,omitempty"` // save: the request id
	Status     string  `json:"status,omitempty"`     // save: success, skipped or failed
}

// ParseRaw decodes the JSON of a RAW frame.
func ParseRaw(s string) (RawMessage, error) {
	var m RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return RawMessage{}, malformed("raw message is not JSON: %v", err)
	}
	if m.Type == "" {
		return RawMessage{}, malformed("raw message without a type")
	}
	return m, nil
}
