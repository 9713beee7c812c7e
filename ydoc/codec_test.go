package ydoc

import (
	"bytes"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// appendVarIntLib0 is an independent implementation of lib0's encoding.writeVarInt, used to
// check the decoder: the first byte carries continuation (0x80), sign (0x40) and 6 value bits.
func appendVarIntLib0(b []byte, n int64) []byte {
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-n)
	}
	first := byte(u & 0x3f)
	if neg {
		first |= 0x40
	}
	u >>= 6
	if u > 0 {
		first |= 0x80
	}
	b = append(b, first)
	for u > 0 {
		c := byte(u & 0x7f)
		u >>= 7
		if u > 0 {
			c |= 0x80
		}
		b = append(b, c)
	}
	return b
}

func TestVarUintRoundTrip(t *testing.T) {
	tests := []struct {
		n    uint64
		size int
	}{
		{0, 1}, {1, 1}, {127, 1}, {128, 2}, {300, 2}, {16383, 2}, {16384, 3},
		{1<<21 - 1, 3}, {1 << 21, 4}, {math.MaxUint32, 5}, {1<<53 - 1, 8}, {1 << 53, 8},
		{1<<63 - 1, 9}, {1 << 63, 10}, {math.MaxUint64, 10},
	}
	for _, tc := range tests {
		b := appendVarUint(nil, tc.n)
		if len(b) != tc.size {
			t.Errorf("appendVarUint(%d): %d bytes (% x), want %d", tc.n, len(b), b, tc.size)
		}
		// Trailing garbage must not be consumed.
		d := newDecoder(append(b, 0xff))
		got, err := d.varUint()
		if err != nil {
			t.Errorf("varUint(% x): %v", b, err)
			continue
		}
		if got != tc.n {
			t.Errorf("varUint(% x) = %d, want %d", b, got, tc.n)
		}
		if d.pos != len(b) {
			t.Errorf("varUint(% x) consumed %d bytes, want %d", b, d.pos, len(b))
		}
	}
}

func TestVarUintKnownBytes(t *testing.T) {
	tests := []struct {
		in   []byte
		want uint64
	}{
		{[]byte{0x00}, 0},
		{[]byte{0x7f}, 127},
		{[]byte{0x80, 0x01}, 128},
		{[]byte{0xac, 0x02}, 300},
		// Redundant continuation groups are tolerated (lib0 reads them too).
		{[]byte{0x81, 0x80, 0x00}, 1},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, math.MaxUint64},
	}
	for _, tc := range tests {
		got, err := newDecoder(tc.in).varUint()
		if err != nil || got != tc.want {
			t.Errorf("varUint(% x) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestVarUintMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"truncated one byte", []byte{0x80}},
		{"truncated long", []byte{0xff, 0xff, 0xff}},
		{"10th byte too large", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}},
		{"11 bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}},
		{"endless continuation", bytes.Repeat([]byte{0xff}, 64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "varUint", func() { _, err = newDecoder(tc.in).varUint() })
			requireMalformed(t, err, "varUint")
		})
	}
}

func TestVarIntRoundTrip(t *testing.T) {
	values := []int64{
		0, 1, -1, 63, -63, 64, -64, 127, 128, -128, 8191, 8192, math.MaxInt32, math.MinInt32,
		math.MaxInt32 + 1, 1 << 53, -(1 << 53), 1 << 62, math.MaxInt64, -math.MaxInt64,
	}
	for _, n := range values {
		b := appendVarIntLib0(nil, n)
		d := newDecoder(append(b, 0x7f))
		got, err := d.varInt()
		if err != nil {
			t.Errorf("varInt(% x) [%d]: %v", b, n, err)
			continue
		}
		if got != n {
			t.Errorf("varInt(% x) = %d, want %d", b, got, n)
		}
		if d.pos != len(b) {
			t.Errorf("varInt(% x) consumed %d bytes, want %d", b, d.pos, len(b))
		}
	}
}

func TestVarIntKnownBytes(t *testing.T) {
	tests := []struct {
		in   []byte
		want int64
	}{
		{[]byte{0x00}, 0},
		{[]byte{0x01}, 1},
		{[]byte{0x41}, -1},
		{[]byte{0x3f}, 63},
		{[]byte{0x80, 0x01}, 64},
		{[]byte{0xc0, 0x01}, -64},
	}
	for _, tc := range tests {
		got, err := newDecoder(tc.in).varInt()
		if err != nil || got != tc.want {
			t.Errorf("varInt(% x) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestVarIntMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"truncated after first byte", []byte{0x80}},
		{"truncated after continuation", []byte{0x80, 0x80}},
		{"2^63 does not fit int64", append(bytes.Repeat([]byte{0x80}, 9), 0x02)},
		{"more than 64 bits", append(bytes.Repeat([]byte{0xbf}, 1), append(bytes.Repeat([]byte{0xff}, 9), 0x01)...)},
		{"endless continuation", bytes.Repeat([]byte{0xff}, 40)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "varInt", func() { _, err = newDecoder(tc.in).varInt() })
			requireMalformed(t, err, "varInt")
		})
	}
}

// TestVarIntSilentWrap: a 10-byte varint whose last group has bits above bit 63 must be
// rejected, not silently truncated.
func TestVarIntSilentWrap(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		// first byte + 8 continuation bytes put the 10th group at shift 62; 0x04<<62 is 2^64.
		{"2^64 wraps to 0", append(bytes.Repeat([]byte{0x80}, 9), 0x04)},
		{"2^64+2^62 wraps to 2^62", append(bytes.Repeat([]byte{0x80}, 9), 0x05)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newDecoder(tc.in).varInt()
			if err == nil {
				t.Errorf("BUG: varInt(% x) silently drops bits above 64 and returns %d instead of an ErrMalformed overflow error", tc.in, got)
			}
			requireMalformed(t, err, "varInt overflow")
		})
	}
}

func TestVarBytesAndString(t *testing.T) {
	payloads := []string{"", "a", "save", "héllo wörld", "😀 emoji", "中文", strings.Repeat("x", 200), strings.Repeat("é", 100), "\x00\xff"}
	for _, p := range payloads {
		b := appendVarBytes(nil, []byte(p))
		if s := appendVarString(nil, p); !bytes.Equal(s, b) {
			t.Errorf("appendVarString(%q) = % x, appendVarBytes = % x", p, s, b)
		}
		d := newDecoder(b)
		got, err := d.varBytes()
		if err != nil || string(got) != p || !d.done() {
			t.Errorf("varBytes(%q): got %q, %v, done=%v", p, got, err, d.done())
		}
		d = newDecoder(b)
		s, err := d.varString()
		if err != nil || s != p || !d.done() {
			t.Errorf("varString(%q): got %q, %v", p, s, err)
		}
		// Every truncation of a non-empty encoding fails.
		for cut := 0; cut < len(b); cut++ {
			if len(p) == 0 {
				break
			}
			var err error
			noPanic(t, "varBytes", func() { _, err = newDecoder(b[:cut]).varBytes() })
			requireMalformed(t, err, "truncated varBytes")
		}
	}
}

func TestVarBytesLengthBeyondInput(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"one byte short", []byte{0x03, 'a', 'b'}},
		{"huge length", append(appendVarUint(nil, math.MaxUint64), 'a')},
		{"2^53 length", appendVarUint(nil, 1<<53)},
		{"length without data", []byte{0x01}},
		{"overflowing length", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			noPanic(t, "varBytes", func() { _, err = newDecoder(tc.in).varBytes() })
			requireMalformed(t, err, "varBytes")
			noPanic(t, "varString", func() { _, err = newDecoder(tc.in).varString() })
			requireMalformed(t, err, "varString")
		})
	}
}

func TestDecoderLengthMinUnit(t *testing.T) {
	tests := []struct {
		in      []byte
		minUnit int
		ok      bool
	}{
		{[]byte{0x02, 1, 2, 3, 4}, 2, true},
		{[]byte{0x03, 1, 2, 3, 4}, 2, false}, // 3 elements × 2 bytes > 4 bytes left
		{[]byte{0x04, 1, 2, 3, 4}, 1, true},
		{[]byte{0x05, 1, 2, 3, 4}, 1, false},
		{[]byte{0x04, 1, 2, 3, 4}, 0, true}, // minUnit < 1 counts as 1
		{[]byte{0x00}, 3, true},
	}
	for _, tc := range tests {
		n, err := newDecoder(tc.in).length(tc.minUnit)
		if tc.ok && err != nil {
			t.Errorf("length(% x, %d): %v", tc.in, tc.minUnit, err)
		}
		if !tc.ok {
			requireMalformed(t, err, "length")
		}
		if tc.ok && n != int(tc.in[0]) {
			t.Errorf("length(% x, %d) = %d", tc.in, tc.minUnit, n)
		}
	}
}

func TestDecoderFixedAndByte(t *testing.T) {
	d := newDecoder([]byte{1, 2, 3})
	if b, err := d.fixed(2); err != nil || !bytes.Equal(b, []byte{1, 2}) {
		t.Fatalf("fixed(2) = % x, %v", b, err)
	}
	requireMalformed(t, func() error { _, err := d.fixed(2); return err }(), "fixed beyond end")
	requireMalformed(t, func() error { _, err := d.fixed(-1); return err }(), "fixed(-1)")
	if b, err := d.byte(); err != nil || b != 3 {
		t.Fatalf("byte() = %d, %v", b, err)
	}
	requireMalformed(t, func() error { _, err := d.byte(); return err }(), "byte at end")
	if !d.done() || d.remaining() != 0 {
		t.Fatalf("decoder not done: remaining %d", d.remaining())
	}
}

func TestUTF16Len(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 0}, {"abc", 3}, {"é", 1}, {"中文", 2}, {"😀", 2}, {"a😀b", 4},
		{"👨‍👩‍👧", 8}, {"🇫🇷", 4}, {"\U0010FFFF", 2}, {"\uFFFF", 1}, {"\xff", 1}, {"\xf0\x9f", 2},
	}
	for _, tc := range tests {
		if got := utf16Len(tc.s); got != tc.want {
			t.Errorf("utf16Len(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TestCodecRandomInputNeverPanics feeds random bytes to every primitive.
func TestCodecRandomInputNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.Intn(16))
		rng.Read(b)
		noPanic(t, "codec primitives", func() {
			d := newDecoder(b)
			for !d.done() {
				var err error
				switch rng.Intn(5) {
				case 0:
					_, err = d.varUint()
				case 1:
					_, err = d.varInt()
				case 2:
					_, err = d.varBytes()
				case 3:
					_, err = d.varString()
				case 4:
					_, err = d.length(rng.Intn(4))
				}
				if err != nil {
					requireMalformed(t, err, "random codec input")
					break
				}
			}
		})
	}
}
