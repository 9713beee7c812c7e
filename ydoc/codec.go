package ydoc

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// The lib0 encoding (used by Yjs, y-protocols and pycrdt) as plain functions over byte slices:
// a bounds-checked decoder that never panics and never trusts a length prefix beyond the input,
// and append-style encoders.

// ErrMalformed is wrapped by every decoding error caused by bad input.
var ErrMalformed = errors.New("ydoc: malformed input")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// decoder reads lib0-encoded values from a byte slice.
type decoder struct {
	buf []byte
	pos int
}

func newDecoder(b []byte) *decoder { return &decoder{buf: b} }

func (d *decoder) remaining() int { return len(d.buf) - d.pos }

func (d *decoder) done() bool { return d.pos >= len(d.buf) }

func (d *decoder) byte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, malformed("unexpected end of input at byte %d", d.pos)
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

// varUint reads an unsigned LEB128 integer of at most 53 significant bits (a JS safe integer),
// as lib0 writes them.
func (d *decoder) varUint() (uint64, error) {
	var n uint64
	var shift uint
	for {
		b, err := d.byte()
		if err != nil {
			return 0, err
		}
		if shift > 63 || (shift == 63 && b&0x7f > 1) {
			return 0, malformed("varuint overflows 64 bits at byte %d", d.pos)
		}
		n |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return n, nil
		}
		shift += 7
	}
}

// varInt reads lib0's signed varint: the first byte holds a sign bit (0x40) and 6 value bits.
func (d *decoder) varInt() (int64, error) {
	b, err := d.byte()
	if err != nil {
		return 0, err
	}
	n := uint64(b & 0x3f)
	negative := b&0x40 != 0
	shift := uint(6)
	for b >= 0x80 {
		if b, err = d.byte(); err != nil {
			return 0, err
		}
		chunk := uint64(b & 0x7f)
		if shift >= 64 || chunk<<shift>>shift != chunk {
			return 0, malformed("varint overflows 64 bits at byte %d", d.pos)
		}
		n |= chunk << shift
		shift += 7
	}
	if n > math.MaxInt64 {
		return 0, malformed("varint overflows int64")
	}
	if negative {
		return -int64(n), nil
	}
	return int64(n), nil
}

// length reads a varuint that announces a number of bytes or elements, each taking at least
// minUnit bytes of the remaining input; larger claims are rejected before anything is allocated.
func (d *decoder) length(minUnit int) (int, error) {
	n, err := d.varUint()
	if err != nil {
		return 0, err
	}
	if minUnit < 1 {
		minUnit = 1
	}
	if n > uint64(d.remaining()/minUnit) {
		return 0, malformed("length %d exceeds the %d bytes left", n, d.remaining())
	}
	return int(n), nil
}

func (d *decoder) varBytes() ([]byte, error) {
	n, err := d.length(1)
	if err != nil {
		return nil, err
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// varString reads a length-prefixed UTF-8 string (lib0 writes the UTF-8 byte length).
func (d *decoder) varString() (string, error) {
	b, err := d.varBytes()
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *decoder) fixed(n int) ([]byte, error) {
	if n < 0 || n > d.remaining() {
		return nil, malformed("need %d bytes, %d left", n, d.remaining())
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func appendVarUint(b []byte, n uint64) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

func appendVarBytes(b, p []byte) []byte {
	b = appendVarUint(b, uint64(len(p)))
	return append(b, p...)
}

func appendVarString(b []byte, s string) []byte {
	b = appendVarUint(b, uint64(len(s)))
	return append(b, s...)
}

// utf16Len is the length of s in UTF-16 code units, the unit of every Yjs text position.
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		i += size
	}
	return n
}
