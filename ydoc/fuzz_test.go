package ydoc

import (
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// Fuzz targets. Seeds are real frames and updates built here; inputs are kept small so that
// every iteration is fast.

// maxFuzzInput bounds what reaches y-crdt per iteration.
const maxFuzzInput = 4 << 10

// fuzzUpdates builds a few real, small updates: notebook edits, text edits and deletions.
func fuzzUpdates(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	a := newTestDoc(t, KindNotebook)
	b := newTestDoc(t, KindNotebook)
	u, _ := transact(t, a, func(tx *Txn) error {
		return tx.LoadNotebook(Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{"f": 1.5, "n": nil}, Cells: []Cell{
			{ID: "c0", Source: "print('😀')\n", ExecutionCount: intp(1), Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "x\n"}}},
			{ID: "c1", Type: CellMarkdown, Source: "# 中文"},
		}})
	})
	out = append(out, u)
	apply(t, b, u)
	u, _ = transact(t, b, func(tx *Txn) error { return tx.SetSource(0, "print('ok')\n") })
	out = append(out, u)
	apply(t, a, u)
	u, _ = transact(t, a, func(tx *Txn) error { return tx.DeleteCells(1, 1) })
	out = append(out, u)
	u, _ = transact(t, a, func(tx *Txn) error {
		return tx.SetCellMetadata(0, map[string]any{"tags": []any{"a", 2, 3.5, nil, true}})
	})
	out = append(out, u, fullUpdate(t, a))
	txt := newTestDoc(t, KindText)
	u, _ = transact(t, txt, func(tx *Txn) error { return tx.InsertText(0, "hello 😀 world") })
	out = append(out, u)
	u, _ = transact(t, txt, func(tx *Txn) error { return tx.DeleteText(2, 5) })
	out = append(out, u, []byte{0, 0})
	return out
}

func FuzzDecodeFrame(f *testing.F) {
	for _, u := range fuzzUpdates(f) {
		f.Add(EncodeSync(SyncUpdate, u))
		f.Add(EncodeSync(SyncStep2, u))
	}
	f.Add(EncodeSync(SyncStep1, StateVector{1: 2, 300: 4}.Encode()))
	f.Add(EncodeAwarenessFrame(EncodeAwarenessUpdate(5, 1, json.RawMessage(`{"user":{"username":"u"}}`))))
	f.Add(EncodeSaveRequest(7))
	f.Add(EncodeRaw(`{"type":"save","responseTo":7,"status":"success"}`))
	f.Add(append([]byte{2, 10}, `{"type":"conflict","x":"é"}`...))
	f.Add([]byte{3})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		// Known frames re-encode to something that decodes the same.
		var again []byte
		switch fr.Type {
		case MsgSync:
			again = EncodeSync(fr.Sync, fr.Payload)
		case MsgAwareness:
			again = EncodeAwarenessFrame(fr.Payload)
		case MsgRaw:
			if fr.Raw == "save" {
				again = EncodeSaveRequest(fr.SaveID)
			} else {
				again = EncodeRaw(fr.Raw)
			}
		default:
			return
		}
		fr2, err := DecodeFrame(again)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if fr.Type != fr2.Type || fr.Sync != fr2.Sync || string(fr.Payload) != string(fr2.Payload) || fr.Raw != fr2.Raw || fr.SaveID != fr2.SaveID {
			t.Fatalf("round trip changed the frame: %+v -> %+v", fr, fr2)
		}
		if fr.Type == MsgRaw && fr.Raw != "save" {
			_, _ = ParseRaw(fr.Raw)
		}
	})
}

func FuzzParseUpdate(f *testing.F) {
	for _, u := range fuzzUpdates(f) {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		meta, err := ParseUpdate(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		for _, r := range append(meta.Structs, meta.Deletes...) {
			if r.Len == 0 || r.Clock+r.Len > maxClock || r.Clock+r.Len < r.Clock {
				t.Fatalf("bad range %+v", r)
			}
		}
	})
}

func FuzzDecodeStateVector(f *testing.F) {
	f.Add(StateVector{}.Encode())
	f.Add(StateVector{1: 2, 300: 70000, 1 << 40: maxClock}.Encode())
	d := newTestDoc(f, KindText)
	transact(f, d, func(tx *Txn) error { return tx.InsertText(0, "abc") })
	f.Add(d.StateVector().Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		sv, err := DecodeStateVector(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		again, err := DecodeStateVector(sv.Encode())
		if err != nil || !reflect.DeepEqual(again, sv) {
			t.Fatalf("round trip of %v gave %v, %v", sv, again, err)
		}
	})
}

func FuzzAwarenessApply(f *testing.F) {
	f.Add(EncodeAwarenessUpdate(5, 1, json.RawMessage(`{"user":{"username":"u","color":"#fff"}}`)))
	f.Add(EncodeAwarenessUpdate(5, 2, nil))
	f.Add(EncodeAwarenessUpdate(1, 9, json.RawMessage(`{}`)))
	f.Add(encodeAwareness([]awarenessRecord{{client: 2, clock: 1, state: json.RawMessage(`[1]`)}, {client: 3, clock: 4}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a := NewAwareness(1)
		if _, err := a.SetLocal(map[string]any{"user": map[string]any{"username": "me"}}, t0); err != nil {
			t.Fatal(err)
		}
		ch, reply, err := a.Apply(b, t0)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if !ch.Empty() || reply != nil {
				t.Fatalf("failed Apply reported %+v / % x", ch, reply)
			}
			return
		}
		if reply != nil {
			if _, err := decodeAwareness(reply); err != nil {
				t.Fatalf("reply does not decode: %v", err)
			}
		}
		for _, p := range a.Peers() {
			if p.ClientID == 1 || !json.Valid(p.State) {
				t.Fatalf("bad peer %+v", p)
			}
		}
		a.Tick(t0.Add(time.Hour))
		if len(a.Peers()) != 0 {
			t.Fatalf("peers survived expiry")
		}
	})
}

func FuzzParseRaw(f *testing.F) {
	for _, s := range []string{`{"type":"conflict"}`, `{"type":"save","responseTo":3,"status":"success"}`, `{"type":"save","responseTo":-1}`, `save`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseRaw(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if m.Type == "" {
			t.Fatalf("accepted a message without a type: %q", s)
		}
	})
}

func FuzzParseNBFormat(f *testing.F) {
	for _, name := range []string{"jupyter_ydoc--nb0.ipynb", "jupyter_ydoc--nb1.ipynb", "values_metadata.ipynb", "jupyterlab--long_outputs.ipynb"} {
		f.Add(readFixture(f, "testdata/"+name))
	}
	f.Add([]byte(`{"nbformat":4,"nbformat_minor":4,"cells":[{"cell_type":"raw","source":["a","b"],"attachments":{"x":{"text/plain":["c"]}}}],"metadata":{"a":[1.5,null]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 16<<10 {
			return
		}
		nb, err := ParseNBFormat(b)
		if err != nil {
			return
		}
		if nb.NBFormat != 4 {
			t.Fatalf("accepted nbformat %d", nb.NBFormat)
		}
		for _, c := range nb.Cells {
			if !ValidCellType(c.Type) {
				t.Fatalf("accepted cell type %q", c.Type)
			}
		}
		_ = nb.JSON()
		// Whatever parses must load into a document, or be refused without breaking it.
		d := newTestDoc(t, KindNotebook)
		_, _, err = d.Transact(func(tx *Txn) error { return tx.LoadNotebook(nb) })
		if errors.Is(err, ErrCRDTPanic) || d.Err() != nil {
			t.Fatalf("LoadNotebook broke the doc: %v", err)
		}
		if err != nil {
			return
		}
		got, err := d.Notebook()
		if err != nil {
			t.Fatal(err)
		}
		if len(nb.Cells) > 0 && len(got.Cells) != len(nb.Cells) {
			t.Fatalf("loaded %d cells, parsed %d", len(got.Cells), len(nb.Cells))
		}
	})
}

// FuzzDocApply feeds updates to a fresh replica. Only structurally valid updates reach y-crdt;
// a hang is reported as a failure by a watchdog (the library has hung on garbage before).
func FuzzDocApply(f *testing.F) {
	for _, u := range fuzzUpdates(f) {
		if len(u) <= maxFuzzInput {
			f.Add(u)
		}
	}
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 20; i++ {
		f.Add(genStructuredUpdate(rng))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		if _, err := ParseUpdate(b); err != nil {
			return // Doc.Apply rejects these before y-crdt sees them (checked below)
		}
		d := newTestDoc(t, KindNotebook)
		type result struct {
			meta UpdateMeta
			err  error
		}
		done := make(chan result, 1)
		go func() {
			meta, _, err := d.Apply(b)
			done <- result{meta, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Doc.Apply hung on a structurally valid update (% x)", b)
		}
		if r.err != nil {
			if errors.Is(r.err, ErrCRDTPanic) {
				if d.Err() == nil {
					t.Fatalf("y-crdt panicked but the doc is not marked broken")
				}
				t.Logf("y-crdt panic (recovered, doc marked broken): %v", r.err)
				return
			}
			t.Fatalf("Apply of a parsed update failed: %v", r.err)
		}
		// The replica must stay usable, and its own state must parse.
		if _, err := d.Notebook(); err != nil && !errors.Is(err, ErrDocBroken) {
			t.Fatalf("Notebook: %v", err)
		}
		full, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			if errors.Is(err, ErrDocBroken) {
				return
			}
			t.Fatalf("EncodeStateAsUpdate: %v", err)
		}
		if _, err := ParseUpdate(full); err != nil {
			t.Fatalf("the replica's own state does not parse after applying % x: %v", b, err)
		}
		_ = d.StateVector()
		_ = d.HasPending()
	})
}

// TestApplyRejectsUnparsable: Doc.Apply never hands an update ParseUpdate rejects to y-crdt.
func TestApplyRejectsUnparsable(t *testing.T) {
	for _, u := range fuzzUpdates(t) {
		for cut := 0; cut < len(u); cut += 1 + len(u)/64 {
			d := newTestDoc(t, KindNotebook)
			if _, _, err := d.Apply(u[:cut]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Apply of a truncated update: %v", err)
			}
			if d.Err() != nil {
				t.Fatalf("doc broken by a rejected update")
			}
		}
	}
}

// genStructuredUpdate builds a random update that ParseUpdate accepts: random struct kinds,
// origins, parents, client ids (including ones above 2^63) and delete sets. They are
// structurally valid but usually semantically nonsense, the worst a buggy peer can send.
func genStructuredUpdate(rng *rand.Rand) []byte {
	clients := []uint64{1, 2, 3, 1 << 31, 1<<63 + 5, 1<<64 - 1, 0}
	clocks := []uint64{0, 1, 2, 5, 1 << 40}
	pickC := func() uint64 { return clients[rng.Intn(len(clients))] }
	pickK := func() uint64 { return clocks[rng.Intn(len(clocks))] }
	u := &updateBuilder{}
	n := 1 + rng.Intn(2)
	u.uint(uint64(n))
	for i := 0; i < n; i++ {
		ns := 1 + rng.Intn(4)
		u.uint(uint64(ns)).uint(pickC()).uint(pickK())
		for j := 0; j < ns; j++ {
			ref := byte(rng.Intn(11))
			if ref == 0 || ref == 10 {
				u.raw(ref).uint(uint64(1 + rng.Intn(3)))
				continue
			}
			info := ref
			hasO, hasR := rng.Intn(2) == 0, rng.Intn(3) == 0
			sub := rng.Intn(3) == 0
			if hasO {
				info |= 0x80
			}
			if hasR {
				info |= 0x40
			}
			if sub && !hasO && !hasR {
				info |= 0x20
			}
			u.raw(info)
			if hasO {
				u.uint(pickC()).uint(pickK())
			}
			if hasR {
				u.uint(pickC()).uint(pickK())
			}
			if !hasO && !hasR {
				if rng.Intn(3) > 0 {
					u.uint(1).str([]string{"cells", "meta", "state", "source", "x"}[rng.Intn(5)])
				} else {
					u.uint(0).uint(pickC()).uint(pickK())
				}
				if sub {
					u.str([]string{"id", "source", "metadata", "outputs"}[rng.Intn(4)])
				}
			}
			switch ref {
			case 1:
				u.uint(uint64(1 + rng.Intn(3)))
			case 2:
				u.uint(1).str(`{"a":1}`)
			case 3:
				u.str("bin")
			case 4:
				u.str([]string{"a", "hé", "😀", "abc"}[rng.Intn(4)])
			case 5:
				u.str(`{"e":1}`)
			case 6:
				u.str("bold").str("true")
			case 7:
				tr := uint64(rng.Intn(7))
				u.uint(tr)
				if tr == 3 || tr == 5 {
					u.str("p")
				}
			case 8:
				u.uint(1).raw(119).str("v")
			case 9:
				u.str("guid").raw(118).uint(0)
			}
		}
	}
	nd := rng.Intn(2)
	u.uint(uint64(nd))
	for i := 0; i < nd; i++ {
		u.uint(pickC()).uint(1).uint(pickK()).uint(uint64(1 + rng.Intn(3)))
	}
	return u.b
}

// applyWithWatchdog applies b to d and fails the test if y-crdt does not return.
func applyWithWatchdog(t *testing.T, d *Doc, b []byte) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := d.Apply(b)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Doc.Apply hung on % x", b)
		return nil
	}
}

// TestApplyStructuredRandomUpdates: structurally valid nonsense never hangs y-crdt, and a
// y-crdt panic is contained (error, doc marked broken, y-crdt lock released).
func TestApplyStructuredRandomUpdates(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	panics := 0
	for i := 0; i < 3000; i++ {
		b := genStructuredUpdate(rng)
		if _, err := ParseUpdate(b); err != nil {
			t.Fatalf("generator produced an unparsable update % x: %v", b, err)
		}
		kind := KindNotebook
		if i%2 == 1 {
			kind = KindText
		}
		d := newTestDoc(t, kind)
		err := applyWithWatchdog(t, d, b)
		switch {
		case errors.Is(err, ErrCRDTPanic):
			panics++
			if !errors.Is(d.Err(), ErrDocBroken) {
				t.Fatalf("y-crdt panic did not mark the doc broken: % x", b)
			}
			continue
		case err != nil:
			t.Fatalf("Apply(% x): %v", b, err)
		}
		full := fullUpdate(t, d)
		if _, err := ParseUpdate(full); err != nil {
			t.Fatalf("own state unparsable after applying % x: %v", b, err)
		}
	}
	t.Logf("%d of 3000 structurally valid random updates made y-crdt panic (contained)", panics)
}
