package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Type is a record's kind.
type Type uint8

// The record types. Payloads are opaque to the framing; their meaning is the log's (log.go).
const (
	// TypeHeader opens every log: which document it is for (JSON docHeader).
	TypeHeader Type = 1
	// TypeLineage starts a new server document: the records after it, up to the next lineage,
	// are updates of one replica that began empty (JSON lineageMeta). Its seq is the lineage id.
	TypeLineage Type = 2
	// TypeUpdate is one Yjs update (v1) the replica applied: a flags byte, then the update.
	TypeUpdate Type = 3
	// TypeSaved says the server reported a save covering every record of the lineage up to a seq
	// (JSON savedMeta).
	TypeSaved Type = 4
	// TypeBase is the replica's full state (a Yjs update) at this point of its lineage: the
	// records of the lineage before it may be compacted away.
	TypeBase Type = 5
	// TypeDecided says what became of a lineage the server lost (JSON decidedMeta): once decided,
	// it is no longer needed.
	TypeDecided Type = 6
)

func (t Type) String() string {
	switch t {
	case TypeHeader:
		return "header"
	case TypeLineage:
		return "lineage"
	case TypeUpdate:
		return "update"
	case TypeSaved:
		return "saved"
	case TypeBase:
		return "base"
	case TypeDecided:
		return "decided"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

func (t Type) valid() bool { return t >= TypeHeader && t <= TypeDecided }

// A frame on disk (and in memory) is:
//
//	crc32c  uint32 LE   over the body
//	length  uint32 LE   of the body
//	body:   type byte, seq uvarint, payload
//
// A frame whose length runs past the end of the data, or whose checksum does not match, is a
// torn write (the process died while appending) or damage: the log ends before it.
const (
	frameHeader = 8
	// MaxRecord bounds one record's body. A Yjs update larger than this (a notebook of hundreds
	// of megabytes) is not logged.
	MaxRecord = 256 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Record is one decoded record. Data aliases the buffer it was decoded from.
type Record struct {
	Type Type
	Seq  uint64
	Data []byte
}

// appendFrame appends a record's frame to b.
func appendFrame(b []byte, t Type, seq uint64, payload []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeader)...)
	b = append(b, byte(t))
	b = binary.AppendUvarint(b, seq)
	b = append(b, payload...)
	body := b[start+frameHeader:]
	binary.LittleEndian.PutUint32(b[start:], crc32.Checksum(body, crcTable))
	binary.LittleEndian.PutUint32(b[start+4:], uint32(len(body)))
	return b
}

// frameSize is the size of a record's frame.
func frameSize(seq uint64, payload int) int {
	var tmp [binary.MaxVarintLen64]byte
	return frameHeader + 1 + binary.PutUvarint(tmp[:], seq) + payload
}

// Errors of decodeFrame.
var (
	errTorn    = errors.New("journal: incomplete record")
	errCorrupt = errors.New("journal: damaged record")
)

// decodeFrame decodes the frame at the start of b and returns it with its size. An incomplete
// frame is errTorn, a damaged one errCorrupt; it never panics and allocates nothing.
func decodeFrame(b []byte) (Record, int, error) {
	if len(b) < frameHeader {
		return Record{}, 0, errTorn
	}
	sum := binary.LittleEndian.Uint32(b)
	n := binary.LittleEndian.Uint32(b[4:])
	if n < 2 || n > MaxRecord {
		return Record{}, 0, fmt.Errorf("%w: body length %d", errCorrupt, n)
	}
	if uint64(len(b)-frameHeader) < uint64(n) {
		return Record{}, 0, errTorn
	}
	body := b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(body, crcTable) != sum {
		return Record{}, 0, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	t := Type(body[0])
	if !t.valid() {
		return Record{}, 0, fmt.Errorf("%w: unknown type %d", errCorrupt, body[0])
	}
	seq, k := binary.Uvarint(body[1:])
	if k <= 0 {
		return Record{}, 0, fmt.Errorf("%w: bad sequence number", errCorrupt)
	}
	return Record{Type: t, Seq: seq, Data: body[1+k:]}, frameHeader + int(n), nil
}

// scan decodes the records of b in order, calling fn with each and its offset, and returns how
// many bytes of b hold whole, valid records: the log ends there (a torn or damaged tail is cut
// off by the caller). A record whose seq does not increase ends the log too. fn may stop the
// scan with an error, returned as is.
func scan(b []byte, fn func(rec Record, off int) error) (valid int, tail error, err error) {
	var last uint64
	for off := 0; off < len(b); {
		rec, n, derr := decodeFrame(b[off:])
		if derr != nil {
			return off, derr, nil
		}
		if off > 0 && rec.Seq <= last {
			return off, fmt.Errorf("%w: sequence %d after %d", errCorrupt, rec.Seq, last), nil
		}
		last = rec.Seq
		if fn != nil {
			if err := fn(rec, off); err != nil {
				return off, nil, err
			}
		}
		off += n
	}
	return len(b), nil, nil
}
