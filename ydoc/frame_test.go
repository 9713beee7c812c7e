package ydoc

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSyncFrameRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, 70000)
	tests := []struct {
		name    string
		st      SyncType
		payload []byte
	}{
		{"step1 empty sv", SyncStep1, []byte{0x00}},
		{"step1 sv", SyncStep1, StateVector{1: 5, 300: 70000}.Encode()},
		{"step2", SyncStep2, []byte{0x00, 0x00}},
		{"update", SyncUpdate, []byte{1, 2, 3, 4}},
		{"empty payload", SyncUpdate, nil},
		{"large payload", SyncUpdate, big},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeSync(tc.st, tc.payload)
			if b[0] != byte(MsgSync) || b[1] != byte(tc.st) {
				t.Fatalf("header % x, want 00 %02x", b[:2], byte(tc.st))
			}
			f, err := DecodeFrame(b)
			if err != nil {
				t.Fatalf("DecodeFrame: %v", err)
			}
			if f.Type != MsgSync || f.Sync != tc.st || !bytes.Equal(f.Payload, tc.payload) {
				t.Fatalf("got type %d sync %v payload %d bytes, want sync %v payload %d bytes", f.Type, f.Sync, len(f.Payload), tc.st, len(tc.payload))
			}
			// Every truncation is an error.
			for cut := 0; cut < len(b); cut += 1 + len(b)/200 {
				var err error
				noPanic(t, "DecodeFrame", func() { _, err = DecodeFrame(b[:cut]) })
				requireMalformed(t, err, "truncated sync frame")
			}
		})
	}
}

func TestAwarenessFrameRoundTrip(t *testing.T) {
	upd := EncodeAwarenessUpdate(42, 7, []byte(`{"user":{"username":"bob"}}`))
	b := EncodeAwarenessFrame(upd)
	f, err := DecodeFrame(b)
	if err != nil {
		t.Fatalf("DecodeFrame: %v", err)
	}
	if f.Type != MsgAwareness || !bytes.Equal(f.Payload, upd) {
		t.Fatalf("got type %d payload % x, want awareness % x", f.Type, f.Payload, upd)
	}
	for cut := 0; cut < len(b); cut++ {
		_, err := DecodeFrame(b[:cut])
		requireMalformed(t, err, "truncated awareness frame")
	}
}

func TestSaveRequestRoundTrip(t *testing.T) {
	for _, id := range []uint64{0, 1, 127, 128, 1 << 40} {
		b := EncodeSaveRequest(id)
		want := append([]byte{0x02, 0x04, 's', 'a', 'v', 'e'}, appendVarUint(nil, id)...)
		if !bytes.Equal(b, want) {
			t.Errorf("EncodeSaveRequest(%d) = % x, want % x", id, b, want)
		}
		f, err := DecodeFrame(b)
		if err != nil {
			t.Fatalf("DecodeFrame(save %d): %v", id, err)
		}
		if f.Type != MsgRaw || f.Raw != "save" || f.SaveID != id {
			t.Errorf("save %d decoded as %+v", id, f)
		}
	}
	// A save request without its id is malformed.
	_, err := DecodeFrame([]byte{0x02, 0x04, 's', 'a', 'v', 'e'})
	requireMalformed(t, err, "save without id")
}

func TestRawFrameRoundTrip(t *testing.T) {
	msgs := []string{
		`{"type":"conflict"}`,
		`{"type":"save","responseTo":3,"status":"success"}`,
		`{}`,
		"",
	}
	for _, m := range msgs {
		b := EncodeRaw(m)
		f, err := DecodeFrame(b)
		if err != nil {
			t.Fatalf("DecodeFrame(raw %q): %v", m, err)
		}
		if f.Type != MsgRaw || f.Raw != m {
			t.Errorf("raw %q decoded as type %d raw %q", m, f.Type, f.Raw)
		}
	}
}

// pycrdt writes the character count, not the byte count, before a RAW string.
func TestRawFrameCharacterCountLength(t *testing.T) {
	msgs := []string{
		`{"type":"save","status":"échec","note":"日本語"}`,
		`{"type":"conflict","who":"😀"}`,
		`{"type":"save","responseTo":1,"status":"success","x":"` + strings.Repeat("é", 200) + `"}`,
	}
	for _, m := range msgs {
		chars := utf8.RuneCountInString(m)
		if chars >= len(m) {
			t.Fatalf("test message %q is ASCII", m)
		}
		b := appendVarUint([]byte{byte(MsgRaw)}, uint64(chars))
		b = append(b, m...)
		f, err := DecodeFrame(b)
		if err != nil {
			t.Fatalf("DecodeFrame(pycrdt raw %q): %v", m, err)
		}
		if f.Raw != m {
			t.Fatalf("raw decoded as %q, want %q", f.Raw, m)
		}
		msg, err := ParseRaw(f.Raw)
		if err != nil {
			t.Fatalf("ParseRaw(%q): %v", f.Raw, err)
		}
		if msg.Type == "" {
			t.Fatalf("ParseRaw(%q): empty type", f.Raw)
		}
	}
}

func TestRawFrameLengthBeyondInput(t *testing.T) {
	b := append([]byte{0x02, 0x10}, `{"a":1}`...)
	_, err := DecodeFrame(b)
	requireMalformed(t, err, "raw length beyond input")
	_, err = DecodeFrame([]byte{0x02})
	requireMalformed(t, err, "raw without length")
}

func TestDecodeFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"truncated type", []byte{0x80}},
		{"sync without subtype", []byte{0x00}},
		{"unknown sync subtype", []byte{0x00, 0x03, 0x00}},
		{"sync payload length beyond input", []byte{0x00, 0x02, 0x05, 1, 2}},
		{"awareness without payload", []byte{0x01}},
		{"awareness payload beyond input", []byte{0x01, 0x09, 0x00}},
		{"overflowing sync length", append([]byte{0x00, 0x01}, bytes.Repeat([]byte{0xff}, 11)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "DecodeFrame", func() { _, err = DecodeFrame(tc.in) })
			requireMalformed(t, err, "DecodeFrame")
		})
	}
}

func TestDecodeFrameUnknownOuterTypes(t *testing.T) {
	for _, typ := range []uint64{3, 4, 125, 1000} {
		b := appendVarUint(nil, typ)
		b = append(b, 0xde, 0xad)
		f, err := DecodeFrame(b)
		if err != nil {
			t.Errorf("type %d: %v", typ, err)
			continue
		}
		if f.Type != MessageType(typ) || f.Payload != nil || f.Raw != "" {
			t.Errorf("type %d decoded as %+v, want an empty frame of that type", typ, f)
		}
	}
}

func TestSyncTypeString(t *testing.T) {
	for st, want := range map[SyncType]string{SyncStep1: "step1", SyncStep2: "step2", SyncUpdate: "update", 7: "sync(7)"} {
		if got := st.String(); got != want {
			t.Errorf("SyncType(%d).String() = %q, want %q", uint64(st), got, want)
		}
	}
}

func TestParseRaw(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	tests := []struct {
		in   string
		want RawMessage
	}{
		{`{"type":"conflict"}`, RawMessage{Type: "conflict"}},
		{`{"type":"save","responseTo":12,"status":"success"}`, RawMessage{Type: "save", ResponseTo: u(12), Status: "success"}},
		{`{"type":"save","responseTo":0,"status":"skipped"}`, RawMessage{Type: "save", ResponseTo: u(0), Status: "skipped"}},
		{`{"type": "save", "responseTo": 5, "status": "failed", "extra": [1]}`, RawMessage{Type: "save", ResponseTo: u(5), Status: "failed"}},
	}
	for _, tc := range tests {
		got, err := ParseRaw(tc.in)
		if err != nil {
			t.Errorf("ParseRaw(%s): %v", tc.in, err)
			continue
		}
		if got.Type != tc.want.Type || got.Status != tc.want.Status || (got.ResponseTo == nil) != (tc.want.ResponseTo == nil) ||
			(got.ResponseTo != nil && *got.ResponseTo != *tc.want.ResponseTo) {
			t.Errorf("ParseRaw(%s) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{``, `save`, `{"type":""}`, `{}`, `[1]`, `{"type":1}`, `{"type":"save","responseTo":-1}`, `{"type":"conflict"`} {
		_, err := ParseRaw(bad)
		requireMalformed(t, err, "ParseRaw("+bad+")")
	}
}
