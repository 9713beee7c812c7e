//go:build integration

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Local updates chained into one (ydoc.ChainLocalUpdates, what a paced room sends) mean to yjs
// exactly what the updates one by one mean: applied to the same base, the two documents are
// equal — state vectors, cells, sources, outputs — and equal to the replica that made them.
func TestDiffChainedUpdatesInYjs(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	file := ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}}
	for i := range 5 {
		file.Cells = append(file.Cells, ydoc.Cell{ID: fmt.Sprintf("c%d", i), Type: ydoc.CellCode, Source: fmt.Sprintf("x = %d\n", i)})
	}
	base := newDoc(t, ydoc.KindNotebook)
	if _, _, err := base.Transact(func(tx *ydoc.Txn) error { return tx.LoadNotebook(file) }); err != nil {
		t.Fatal(err)
	}
	baseState, err := base.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	local := newDoc(t, ydoc.KindNotebook)
	if _, _, err := local.Apply(baseState); err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	var parts []string
	for _, fn := range []func(*ydoc.Txn) error{
		func(tx *ydoc.Txn) error { return tx.SetSource(0, "x = 0\nprint(x)\n") },   // typed at the end
		func(tx *ydoc.Txn) error { return tx.SetSource(1, "") },                    // deleted only
		func(tx *ydoc.Txn) error { return tx.SetSource(2, "y = 2 # rewritten\n") }, // deleted and typed
		func(tx *ydoc.Txn) error {
			return tx.InsertCells(3, []ydoc.Cell{{ID: "agent", Type: ydoc.CellMarkdown, Source: "# new"}})
		},
		func(tx *ydoc.Txn) error { return tx.DeleteCells(tx.CellIndex("c4"), 1) },                     // a cell deleted
		func(tx *ydoc.Txn) error { return tx.SetSource(tx.CellIndex("agent"), "# new, then edited") }, // the new cell edited
	} {
		update, _, err := local.Transact(fn)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, ydoc.EncodeSync(ydoc.SyncUpdate, update))
		parts = append(parts, b64(update))
	}
	chained := ydoc.ChainLocalUpdates(frames)
	if len(chained) != 1 {
		t.Fatalf("%d frames after chaining six local updates, want 1", len(chained))
	}
	f, err := ydoc.DecodeFrame(chained[0])
	if err != nil {
		t.Fatal(err)
	}
	want, err := local.Notebook()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Call(ctx, "connectScratch", nil, nil); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result struct {
			SameState bool     `json:"sameState"`
			Same      bool     `json:"same"`
			IDs       []string `json:"ids"`
			Sources   []string `json:"sources"`
		} `json:"result"`
	}
	if err := p.Call(ctx, "transact", map[string]any{"args": map[string]any{"base": b64(baseState), "parts": parts, "chained": b64(f.Payload)}, "code": `
		const dec = (s) => new Uint8Array(Buffer.from(s, 'base64'))
		const one = new Y.Doc(); Y.applyUpdate(one, dec(args.base)); Y.applyUpdate(one, dec(args.chained))
		const many = new Y.Doc(); Y.applyUpdate(many, dec(args.base)); for (const u of args.parts) Y.applyUpdate(many, dec(u))
		const got = one.getArray('cells').toArray()
		return {
			sameState: Buffer.from(Y.encodeStateVector(one)).equals(Buffer.from(Y.encodeStateVector(many))),
			same: JSON.stringify(one.getArray('cells').toJSON()) === JSON.stringify(many.getArray('cells').toJSON()) &&
				JSON.stringify(one.getMap('meta').toJSON()) === JSON.stringify(many.getMap('meta').toJSON()),
			ids: got.map(c => c.get('id')), sources: got.map(c => c.get('source').toString()),
		}`}, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Result.SameState || !r.Result.Same {
		t.Errorf("yjs: the chained update gives another document than the parts (same state vector %v, same content %v)", r.Result.SameState, r.Result.Same)
	}
	var wantIDs, wantSources []string
	for _, c := range want.Cells {
		wantIDs = append(wantIDs, c.ID)
		wantSources = append(wantSources, c.Source)
	}
	if fmt.Sprint(r.Result.IDs) != fmt.Sprint(wantIDs) || fmt.Sprintf("%q", r.Result.Sources) != fmt.Sprintf("%q", wantSources) {
		t.Errorf("yjs after the chained update: %v %q, want the replica's %v %q", r.Result.IDs, r.Result.Sources, wantIDs, wantSources)
	}
}
