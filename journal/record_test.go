package journal

import (
	"bytes"
	"errors"
	"testing"
)

func frames(recs ...Record) []byte {
	var b []byte
	for _, r := range recs {
		b = appendFrame(b, r.Type, r.Seq, r.Data)
	}
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	recs := []Record{
		{Type: TypeHeader, Seq: 1, Data: []byte(`{"format":1}`)},
		{Type: TypeUpdate, Seq: 2, Data: []byte{FlagContent, 1, 2, 3}},
		{Type: TypeUpdate, Seq: 300, Data: bytes.Repeat([]byte{7}, 70000)},
		{Type: TypeBase, Seq: 1 << 40, Data: nil},
	}
	raw := frames(recs...)
	var got []Record
	valid, tail, err := scan(raw, func(r Record, off int) error {
		got = append(got, Record{Type: r.Type, Seq: r.Seq, Data: append([]byte(nil), r.Data...)})
		return nil
	})
	if err != nil || tail != nil || valid != len(raw) {
		t.Fatalf("scan: valid %d of %d, tail %v, err %v", valid, len(raw), tail, err)
	}
	if len(got) != len(recs) {
		t.Fatalf("got %d records", len(got))
	}
	for i := range recs {
		if got[i].Type != recs[i].Type || got[i].Seq != recs[i].Seq || !bytes.Equal(got[i].Data, recs[i].Data) {
			t.Errorf("record %d: %+v, want %+v", i, got[i], recs[i])
		}
		if frameSize(recs[i].Seq, len(recs[i].Data)) != len(frames(recs[i])) {
			t.Errorf("frameSize of record %d", i)
		}
	}
}

// Every prefix of a log (a crash during any byte of the last append) scans to the records that
// were whole, and says the tail is torn.
func TestScanTornTail(t *testing.T) {
	a := frames(Record{Type: TypeHeader, Seq: 1, Data: []byte("h")}, Record{Type: TypeUpdate, Seq: 2, Data: []byte{0, 9, 9}})
	b := frames(Record{Type: TypeUpdate, Seq: 3, Data: []byte{FlagLocal, 1, 2, 3, 4, 5}})
	raw := append(append([]byte(nil), a...), b...)
	for cut := len(a); cut < len(raw); cut++ {
		n := 0
		valid, tail, _ := scan(raw[:cut], func(Record, int) error { n++; return nil })
		if valid != len(a) || n != 2 {
			t.Fatalf("cut at %d: valid %d (want %d), %d records", cut, valid, len(a), n)
		}
		if cut > len(a) && !errors.Is(tail, errTorn) {
			t.Fatalf("cut at %d: tail %v, want torn", cut, tail)
		}
	}
}

// A flipped bit, a bad length, an unknown type, a sequence going back: the log ends before it.
func TestScanDamage(t *testing.T) {
	good := frames(Record{Type: TypeHeader, Seq: 1, Data: []byte("h")})
	cases := map[string][]byte{
		"bit flip": func() []byte {
			b := frames(Record{Type: TypeUpdate, Seq: 2, Data: []byte{0, 1, 2}})
			b[len(b)-1] ^= 1
			return b
		}(),
		"huge":       {0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 1},
		"short body": {0, 0, 0, 0, 1, 0, 0, 0, 1},
		"bad type":   frames(Record{Type: 99, Seq: 2, Data: []byte{1}}),
		"seq back":   frames(Record{Type: TypeUpdate, Seq: 1, Data: []byte{0}}),
	}
	for name, bad := range cases {
		raw := append(append([]byte(nil), good...), bad...)
		valid, tail, _ := scan(raw, nil)
		if valid != len(good) || tail == nil {
			t.Errorf("%s: valid %d (want %d), tail %v", name, valid, len(good), tail)
		}
	}
}

// FuzzScan: any bytes scan without panicking; the valid prefix is made of whole records that
// encode back to exactly those bytes.
func FuzzScan(f *testing.F) {
	f.Add(frames(Record{Type: TypeHeader, Seq: 1, Data: []byte(`{"format":1,"path":"a.ipynb","kind":"notebook"}`)},
		Record{Type: TypeLineage, Seq: 2, Data: []byte(`{"at":"2026-01-01T00:00:00Z"}`)},
		Record{Type: TypeUpdate, Seq: 3, Data: []byte{FlagContent, 1, 1, 0, 0}}))
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var again []byte
		valid, _, _ := scan(raw, func(r Record, off int) error {
			if off != len(again) {
				t.Fatalf("record at %d, expected %d", off, len(again))
			}
			again = appendFrame(again, r.Type, r.Seq, r.Data)
			return nil
		})
		if valid < 0 || valid > len(raw) || !bytes.Equal(again, raw[:valid]) {
			t.Fatalf("valid %d of %d; re-encoded %d bytes differ", valid, len(raw), len(again))
		}
		// What index accepts is a prefix of that.
		idx, v2, _ := index(raw)
		if v2 > valid || len(idx) > 0 && int(idx[len(idx)-1].off)+int(idx[len(idx)-1].size) != v2 {
			t.Fatalf("index: valid %d (scan %d), %d entries", v2, valid, len(idx))
		}
	})
}
