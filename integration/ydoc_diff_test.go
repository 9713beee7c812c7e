//go:build integration

package integration

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Differential tests: every workaround ydoc owns for y-crdt (see ../shared/reference/y-crdt.md)
// is checked against the real yjs from npm, not against our own code.

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func unb64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newDoc(t testing.TB, kind ydoc.Kind) *ydoc.Doc {
	t.Helper()
	d, err := ydoc.NewDoc(kind, rand.Uint32N(1<<30)+1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Workaround 1: floats and JSON null are written as yjs writes them (y-crdt's setters refuse
// them and Go nil would be undefined).
func TestDiffValuesDecodeInYjs(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	d := newDoc(t, ydoc.KindNotebook)
	values := map[string]any{
		"null":    nil,
		"float":   1.25,
		"neg":     -0.5,
		"int":     7,
		"big":     int64(1) << 40,
		"bool":    false,
		"string":  "héllo 🎉",
		"object":  map[string]any{"a": 1.5, "b": nil, "c": []any{1, "s", nil}, "d": map[string]any{"deep": true}},
		"array":   []any{0.1, 2, nil},
		"integer": 3.0,
	}
	if _, _, err := d.Transact(func(tx *ydoc.Txn) error {
		for k, v := range values {
			if err := tx.SetState(k, v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	update, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		State map[string]struct {
			Value       any    `json:"value"`
			Type        string `json:"type"`
			IsNull      bool   `json:"isNull"`
			IsUndefined bool   `json:"isUndefined"`
		} `json:"state"`
	}
	if err := p.Call(ctx, "decode", map[string]any{"update": b64(update), "maps": []string{"state"}}, &got); err != nil {
		t.Fatal(err)
	}
	st := got.State
	if !st["null"].IsNull || st["null"].IsUndefined {
		t.Errorf("nil decoded in yjs as %+v, want null", st["null"])
	}
	for k, v := range values {
		if k == "null" {
			continue
		}
		if !jsonEq(st[k].Value, v) {
			t.Errorf("%s: yjs decoded %#v, want %#v", k, st[k].Value, v)
		}
	}
	obj := st["object"].Value.(map[string]any)
	if b, present := obj["b"]; !present || b != nil {
		t.Errorf("null inside an object decoded as %#v (present %v)", b, present)
	}
}

// And the other way: values yjs writes (floats, null, nested JSON) read back in Go.
func TestDiffYjsValuesReadInGo(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	var built struct {
		Update string `json:"update"`
	}
	if err := p.Call(ctx, "build", map[string]any{"code": `
		const meta = doc.getMap('meta')
		meta.set('nbformat', 4); meta.set('nbformat_minor', 5)
		const md = new Y.Map(); meta.set('metadata', md)
		md.set('ratio', 0.1); md.set('nothing', null); md.set('nested', {a: [1, 2.5, null], b: {c: 'd'}})
		const cells = doc.getArray('cells')
		const c = new Y.Map(); cells.insert(0, [c])
		c.set('id', 'c1'); c.set('cell_type', 'code'); c.set('source', new Y.Text('x = 1\n'))
		c.set('metadata', new Y.Map()); c.set('execution_count', 12); c.set('outputs', new Y.Array())
		const o = new Y.Map(); c.get('outputs').insert(0, [o])
		o.set('output_type', 'stream'); o.set('name', 'stdout'); o.set('text', new Y.Text('hi\n'))
		const r = new Y.Map(); c.get('outputs').insert(1, [r])
		r.set('output_type', 'execute_result'); r.set('execution_count', 12); r.set('metadata', {}); r.set('data', {'text/plain': '3.14'})
	`}, &built); err != nil {
		t.Fatal(err)
	}
	d := newDoc(t, ydoc.KindNotebook)
	if _, _, err := d.Apply(unb64(t, built.Update)); err != nil {
		t.Fatal(err)
	}
	nb, err := d.Notebook()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ratio": 0.1, "nothing": nil, "nested": map[string]any{"a": []any{1, 2.5, nil}, "b": map[string]any{"c": "d"}}}
	if !jsonEq(nb.Metadata, want) {
		t.Errorf("metadata %#v, want %#v", nb.Metadata, want)
	}
	if _, present := nb.Metadata["nothing"]; !present {
		t.Error("a null metadata value disappeared")
	}
	c := nb.Cells[0]
	if c.ExecutionCount == nil || *c.ExecutionCount != 12 || c.Source != "x = 1\n" || len(c.Outputs) != 2 || c.Outputs[0]["text"] != "hi\n" {
		t.Errorf("cell %+v", c)
	}
}

// Workaround 2: a delete that arrives before its insert is lost by y-crdt; the replica reports
// pending structs (the session then sends a step 1) and the server's full state heals it.
func TestDiffOutOfOrderDeleteHealsWithFullState(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	var r struct {
		Result struct {
			Insert string `json:"insert"`
			Delete string `json:"delete"`
			Full   string `json:"full"`
			Text   string `json:"text"`
		} `json:"result"`
	}
	// Use the peer's room-less doc via transact on a scratch doc built in JS.
	if err := p.Call(ctx, "connectScratch", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Call(ctx, "transact", map[string]any{"code": `
		const d = new Y.Doc(); const t = d.getText('source');
		t.insert(0, 'hello wonderful world');
		const base = Y.encodeStateAsUpdate(d);
		const sv1 = Y.encodeStateVector(d);
		t.insert(5, ' big');
		const ins = Y.encodeStateAsUpdate(d, sv1);
		const sv2 = Y.encodeStateVector(d);
		t.delete(0, 9);
		const del = Y.encodeStateAsUpdate(d, sv2);
		const enc = (u) => Buffer.from(u).toString('base64');
		return { insert: enc(Y.mergeUpdates([base, ins])), delete: enc(del), full: enc(Y.encodeStateAsUpdate(d)), text: t.toString() };`}, &r); err != nil {
		t.Fatal(err)
	}
	d := newDoc(t, ydoc.KindText)
	if _, _, err := d.Apply(unb64(t, r.Result.Delete)); err != nil {
		t.Fatal(err)
	}
	if !d.HasPending() {
		t.Fatal("a delete of unknown items left nothing pending: the session would not resync")
	}
	if _, _, err := d.Apply(unb64(t, r.Result.Insert)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Apply(unb64(t, r.Result.Full)); err != nil {
		t.Fatal(err)
	}
	got, _ := d.Text()
	if got != r.Result.Text {
		t.Fatalf("after the full state: %q, yjs has %q", got, r.Result.Text)
	}
}

// Workaround 3: change tracking without ObserveDeep names the same cells yjs's observeDeep does.
func TestDiffChangeTrackingMatchesObserveDeep(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	p := newPeer(t)
	one := 1
	nb := ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Cells: []ydoc.Cell{
		{ID: "c0", Type: "markdown", Source: "# title"},
		{ID: "c1", Type: "code", Source: "x = 1\nprint(x)", ExecutionCount: &one, Outputs: []map[string]any{{"output_type": "stream", "name": "stdout", "text": "1\n"}}},
		{ID: "c2", Type: "code", Source: "y = 2"},
		{ID: "c3", Type: "raw", Source: "raw"},
	}}
	edits := []struct {
		name string
		fn   func(tx *ydoc.Txn) error
	}{
		{"source", func(tx *ydoc.Txn) error { return tx.SetSource(1, "changed = True\n") }},
		{"two sources", func(tx *ydoc.Txn) error {
			if err := tx.SetSource(0, "# a"); err != nil {
				return err
			}
			return tx.SetSource(2, "# c")
		}},
		{"metadata", func(tx *ydoc.Txn) error { return tx.SetCellMetadata(1, map[string]any{"tags": []any{"x"}, "f": 0.5}) }},
		{"outputs", func(tx *ydoc.Txn) error {
			return tx.AppendOutput(1, map[string]any{"output_type": "stream", "name": "stdout", "text": "more\n"})
		}},
		{"insert", func(tx *ydoc.Txn) error {
			return tx.InsertCells(1, []ydoc.Cell{{ID: "new-cell", Type: "code", Source: "1"}})
		}},
		{"delete", func(tx *ydoc.Txn) error { return tx.DeleteCells(0, 1) }},
		{"move", func(tx *ydoc.Txn) error { return tx.MoveCells(0, 1, 2) }},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			src := newDoc(t, ydoc.KindNotebook)
			base, _, err := src.Transact(func(tx *ydoc.Txn) error { return tx.LoadNotebook(nb) })
			if err != nil {
				t.Fatal(err)
			}
			dst := newDoc(t, ydoc.KindNotebook)
			if _, _, err := dst.Apply(base); err != nil {
				t.Fatal(err)
			}
			before := dst.CellIDs()
			update, local, err := src.Transact(e.fn)
			if err != nil {
				t.Fatal(err)
			}
			_, remote, err := dst.Apply(update)
			if err != nil {
				t.Fatal(err)
			}
			var ref struct {
				Changed   []string `json:"changed"`
				Structure bool     `json:"structure"`
				IDs       []string `json:"ids"`
			}
			if err := p.Call(ctx, "observe", map[string]any{"updates": []string{b64(base), b64(update)}}, &ref); err != nil {
				t.Fatal(err)
			}
			for _, c := range []ydoc.Change{local, remote} {
				var changed []string
				for _, cc := range c.Cells {
					changed = append(changed, cc.ID)
				}
				slices.Sort(changed)
				structure := len(c.Inserted)+len(c.Deleted) > 0 || c.Moved
				if ref.Structure != structure {
					t.Errorf("local=%v: structure change %v, yjs says %v (change %+v)", c.Local, structure, ref.Structure, c)
				}
				if !ref.Structure && !slices.Equal(changed, ref.Changed) {
					t.Errorf("local=%v: changed cells %v, yjs observeDeep says %v", c.Local, changed, ref.Changed)
				}
			}
			if got := dst.CellIDs(); !slices.Equal(got, ref.IDs) {
				t.Errorf("cell order %v, yjs %v (before %v)", got, ref.IDs, before)
			}
		})
	}
}

// Workaround 6: our own awareness encoding, checked against y-protocols both ways.
func TestDiffAwareness(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	a := ydoc.NewAwareness(4242)
	user := ydoc.AwarenessUser{Username: "agent", Name: "Agent", DisplayName: "Agent Smith", Initials: "AS", Color: "#123456"}
	update, err := a.SetLocal(map[string]any{"user": user, "autosave": true, "cursors": []any{}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var dec struct {
		States map[string]map[string]any `json:"states"`
		Clocks map[string]float64        `json:"clocks"`
	}
	if err := p.Call(ctx, "awarenessDecode", map[string]any{"update": b64(update)}, &dec); err != nil {
		t.Fatal(err)
	}
	st := dec.States["4242"]
	if st == nil || st["autosave"] != true || st["user"].(map[string]any)["display_name"] != "Agent Smith" {
		t.Fatalf("y-protocols decoded %v", dec.States)
	}
	if dec.Clocks["4242"] != 1 {
		t.Errorf("clock %v, want 1", dec.Clocks["4242"])
	}
	var enc struct {
		Update string `json:"update"`
	}
	if err := p.Call(ctx, "awarenessEncode", map[string]any{"clientID": 777, "state": map[string]any{"user": map[string]any{"username": "human", "display_name": "Ada"}, "cursors": []any{}}}, &enc); err != nil {
		t.Fatal(err)
	}
	ch, _, err := a.Apply(unb64(t, enc.Update), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	peers := a.Peers()
	if len(ch.Added) != 1 || len(peers) != 1 || peers[0].ClientID != 777 || peers[0].User == nil || peers[0].User.DisplayName != "Ada" {
		t.Fatalf("decoded y-protocols awareness: change %+v peers %+v", ch, peers)
	}
	var state map[string]any
	_ = json.Unmarshal(peers[0].State, &state)
	if _, ok := state["cursors"]; !ok {
		t.Errorf("state lost fields: %s", peers[0].State)
	}
}

// Workaround 7: our linear text builder agrees with yjs on texts with surrogate pairs, deletions
// and many items.
func TestDiffTextContent(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	var built struct {
		Update string `json:"update"`
	}
	if err := p.Call(ctx, "build", map[string]any{"code": `
		const t = doc.getText('source')
		for (let i = 0; i < 3000; i++) t.insert(Math.floor(t.length * ((i * 7919) % 1000) / 1000), ['a', 'é', '漢', '😀', '\n'][i % 5])
		for (let i = 0; i < 500; i++) { const at = (i * 104729) % Math.max(1, t.length - 2); const s = t.toString(); const c = s.charCodeAt(at); if (c < 0xd800 || c > 0xdfff) t.delete(at, 1) }
	`}, &built); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Source string `json:"source"`
	}
	if err := p.Call(ctx, "decode", map[string]any{"update": built.Update, "texts": []string{"source"}}, &want); err != nil {
		t.Fatal(err)
	}
	d := newDoc(t, ydoc.KindText)
	if _, _, err := d.Apply(unb64(t, built.Update)); err != nil {
		t.Fatal(err)
	}
	got, _ := d.Text()
	if got != want.Source {
		t.Fatalf("text differs from yjs (len %d vs %d)", len(got), len(want.Source))
	}
}

// Cursor positions: ydoc makes the same RelativePosition JSON as yjs for every index of a cell's
// source and of a text file (after edits from two clients and deletions, so the text spans several
// items and tombstones), and each side resolves the other's positions to the same place.
func TestDiffRelativePositions(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	for _, kind := range []ydoc.Kind{ydoc.KindNotebook, ydoc.KindText} {
		a, b := newDoc(t, kind), newDoc(t, kind)
		edit := func(d *ydoc.Doc, f func(tx *ydoc.Txn) error) {
			t.Helper()
			u, _, err := d.Transact(f)
			if err != nil {
				t.Fatal(err)
			}
			other := a
			if d == a {
				other = b
			}
			if _, _, err := other.Apply(u); err != nil {
				t.Fatal(err)
			}
		}
		cellID := ""
		var final string
		if kind == ydoc.KindNotebook {
			cellID = "c"
			edit(a, func(tx *ydoc.Txn) error {
				return tx.InsertCells(0, []ydoc.Cell{{ID: "first", Source: "x"}, {ID: "c", Source: "hello world"}})
			})
			edit(b, func(tx *ydoc.Txn) error { return tx.SetSource(1, "hello 🌍 wide world") })
			edit(a, func(tx *ydoc.Txn) error { return tx.SetSource(1, "well, hello 🌍 world!") })
			final = "well, hello 🌍 world!"
		} else {
			edit(a, func(tx *ydoc.Txn) error { return tx.InsertText(0, "hello world") })
			edit(b, func(tx *ydoc.Txn) error { return tx.InsertText(6, "🌍 wide ") })
			edit(a, func(tx *ydoc.Txn) error {
				if err := tx.DeleteText(9, 5); err != nil {
					return err
				}
				return tx.InsertText(0, "well, ")
			})
			final = "well, hello 🌍 world"
		}
		update, err := a.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range final {
			n++
			if r >= 0x10000 {
				n++
			}
		}
		var makes []map[string]any
		var ours []ydoc.RelPos
		for i := 0; i <= n; i++ {
			m := map[string]any{"index": i, "cellId": nil}
			if cellID != "" {
				m["cellId"] = cellID
			}
			makes = append(makes, m)
			rp, err := a.RelativePosition(cellID, i)
			if err != nil {
				t.Fatal(err)
			}
			ours = append(ours, rp)
		}
		var got struct {
			Made     []json.RawMessage `json:"made"`
			Resolved []*struct {
				CellID *string `json:"cellId"`
				Index  int     `json:"index"`
			} `json:"resolved"`
		}
		if err := p.Call(ctx, "relpos", map[string]any{"update": b64(update), "kind": kind.String(), "make": makes, "resolve": ours}, &got); err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= n; i++ {
			// yjs's relativePositionToJSON leaves out null fields; JupyterLab's cursors (the
			// RelativePosition object itself, stringified) carry them as null, as ours do.
			mine, _ := json.Marshal(ours[i])
			if !jsonEq(withoutNulls(t, mine), withoutNulls(t, got.Made[i])) {
				t.Errorf("%v index %d: ydoc made %s, yjs %s", kind, i, mine, got.Made[i])
			}
			if r := got.Resolved[i]; r == nil || r.Index != i || (cellID != "" && (r.CellID == nil || *r.CellID != cellID)) {
				t.Errorf("%v index %d: yjs resolves ydoc's position to %+v", kind, i, r)
			}
			var theirs ydoc.RelPos
			if err := json.Unmarshal(got.Made[i], &theirs); err != nil {
				t.Fatal(err)
			}
			if cell, idx, ok := b.ResolvePosition(theirs); !ok || cell != cellID || idx != i {
				t.Errorf("%v index %d: ydoc resolves yjs's position %s to %q %d %v", kind, i, got.Made[i], cell, idx, ok)
			}
		}
	}
}

func withoutNulls(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	return m
}
