//go:build integration

package integration

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A restore by id, checked by yjs: the update the sidecar sends to a room rebuilt under other ids
// (jupyter-server-documents' fresh load), applied by yjs to the rebuilt room, gives the lost
// replica's content; a yjs tab holding its old copy of the lost room then merges nothing new and
// ends with the same content, and so does one that merged before the restore.
func TestDiffRestoreByIDInYjs(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	p := newPeer(t)
	file := ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}}
	for i := range 6 {
		file.Cells = append(file.Cells, ydoc.Cell{ID: fmt.Sprintf("c%d", i), Type: ydoc.CellCode, Source: fmt.Sprintf("x = %d", i)})
	}
	edit := func(d *ydoc.Doc, fn func(*ydoc.Txn) error) {
		t.Helper()
		if _, _, err := d.Transact(fn); err != nil {
			t.Fatal(err)
		}
	}
	// The lost room: the file loaded, then typed into, cells inserted and deleted (never saved).
	lost := newDoc(t, ydoc.KindNotebook)
	edit(lost, func(tx *ydoc.Txn) error { return tx.LoadNotebook(file) })
	edit(lost, func(tx *ydoc.Txn) error { return tx.SetSource(1, "x = 1 # typed") })
	edit(lost, func(tx *ydoc.Txn) error {
		return tx.InsertCells(3, []ydoc.Cell{{ID: "agent", Type: ydoc.CellMarkdown, Source: "agent cell"}})
	})
	edit(lost, func(tx *ydoc.Txn) error { return tx.DeleteCells(tx.CellIndex("c5"), 1) })
	held, err := lost.Notebook()
	if err != nil {
		t.Fatal(err)
	}
	lostState, err := lost.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The rebuilt room: the file under another client.
	room := newDoc(t, ydoc.KindNotebook)
	edit(room, func(tx *ydoc.Txn) error { return tx.LoadNotebook(file) })
	roomState, err := room.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The sidecar: the lost replica adopted, the restore decided, the handshake with the room.
	sess, err := ydoc.NewSession(ydoc.KindNotebook, rand.Uint32N(1<<30)+1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.AdoptLost(lostState); err != nil {
		t.Fatal(err)
	}
	sess.RescueFrom(ydoc.Snapshot{Kind: ydoc.KindNotebook, Notebook: file})
	sess.Connect()
	if _, err := sess.Receive(ydoc.Frame{Type: ydoc.MsgSync, Sync: ydoc.SyncStep1, Payload: room.StateVector().Encode()}); err != nil {
		t.Fatal(err)
	}
	out, err := sess.Receive(ydoc.Frame{Type: ydoc.MsgSync, Sync: ydoc.SyncStep2, Payload: roomState})
	if err != nil {
		t.Fatal(err)
	}
	if out.Rescue == nil || out.Rescue.Method != ydoc.RestoredByIDs {
		t.Fatalf("rescue %+v", out.Rescue)
	}
	var restore []byte
	for _, b := range out.Frames {
		if f, err := ydoc.DecodeFrame(b); err == nil && f.Type == ydoc.MsgSync && f.Sync == ydoc.SyncUpdate {
			if restore != nil {
				t.Fatal("the restore went out as more than one update")
			}
			restore = f.Payload
		}
	}
	if restore == nil {
		t.Fatal("no restore update")
	}
	if err := p.Call(ctx, "connectScratch", nil, nil); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result map[string]struct {
			IDs     []string `json:"ids"`
			Sources []string `json:"sources"`
			New     bool     `json:"new"`
		} `json:"result"`
	}
	if err := p.Call(ctx, "transact", map[string]any{"args": map[string]any{"room": b64(roomState), "lost": b64(lostState), "restore": b64(restore)}, "code": `
		const dec = (s) => new Uint8Array(Buffer.from(s, 'base64'))
		const view = (d, isNew) => {
			const cells = d.getArray('cells').toArray()
			return { ids: cells.map(c => c.get('id')), sources: cells.map(c => c.get('source').toString()), new: isNew }
		}
		const sameSV = (a, b) => Buffer.from(Y.encodeStateVector(a)).equals(Buffer.from(Y.encodeStateVector(b)))
		// The restore applied to the rebuilt room.
		const server = new Y.Doc(); Y.applyUpdate(server, dec(args.room)); Y.applyUpdate(server, dec(args.restore))
		const restored = view(server, false)
		// A tab with its old copy merges after the restore: both ways.
		const tab = new Y.Doc(); Y.applyUpdate(tab, dec(args.lost))
		const before = Y.encodeStateVector(server)
		Y.applyUpdate(server, Y.encodeStateAsUpdate(tab, Y.encodeStateVector(server)))
		const grew = !Buffer.from(Y.encodeStateVector(server)).equals(Buffer.from(before))
		Y.applyUpdate(tab, Y.encodeStateAsUpdate(server, Y.encodeStateVector(tab)))
		// A tab that merged before the restore.
		const early = new Y.Doc(); Y.applyUpdate(early, dec(args.room))
		const tab2 = new Y.Doc(); Y.applyUpdate(tab2, dec(args.lost))
		Y.applyUpdate(early, Y.encodeStateAsUpdate(tab2, Y.encodeStateVector(early)))
		Y.applyUpdate(early, dec(args.restore))
		return { restored, server: view(server, grew), tab: view(tab, !sameSV(tab, server)), early: view(early, false) }`}, &r); err != nil {
		t.Fatal(err)
	}
	var wantIDs, wantSources []string
	for _, c := range held.Cells {
		wantIDs = append(wantIDs, c.ID)
		wantSources = append(wantSources, c.Source)
	}
	for _, name := range []string{"restored", "server", "tab", "early"} {
		v, ok := r.Result[name]
		if !ok {
			t.Fatalf("no %s in %+v", name, r.Result)
		}
		if fmt.Sprint(v.IDs) != fmt.Sprint(wantIDs) || fmt.Sprint(v.Sources) != fmt.Sprint(wantSources) {
			t.Errorf("%s in yjs: cells %v %q, want %v %q", name, v.IDs, v.Sources, wantIDs, wantSources)
		}
		if v.New {
			t.Errorf("%s: the tab's merge brought something new", name)
		}
	}
}
