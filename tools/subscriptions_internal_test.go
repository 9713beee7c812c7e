package tools

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// When room events were lost (the subscription's buffer overflowed), what changed is unknown:
// every followed document counts as changed, so a change whose event was lost is still read
// and notified.
func TestLostEventsCountAsChanges(t *testing.T) {
	nb := func(src string) ydoc.Notebook {
		return ydoc.Notebook{NBFormat: 4, NBFormatMinor: 5, Metadata: map[string]any{}, Cells: []ydoc.Cell{{ID: "x", Type: ydoc.CellCode, Source: src}}}
	}
	srv := bridgetest.New(bridgetest.File{Path: "a.ipynb", Type: "notebook", Notebook: nb("a = 1")},
		bridgetest.File{Path: "c.ipynb", Type: "notebook", Notebook: nb("c = 1")})
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop(), JoinTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	s, err := New(Options{Manager: m, Logger: zerolog.Nop(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := m.Open(ctx, "a.ipynb", ydoc.KindNotebook)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(ctx, "c.ipynb", ydoc.KindNotebook); err != nil {
		t.Fatal(err)
	}
	uri := uriNotebooks + "/" + a.Info().FileID
	r, err := s.readURI(ctx, "session", uri)
	if err != nil {
		t.Fatal(err)
	}
	s.subs.sessions["session"] = map[string][32]byte{uri: hashRead(r)}

	// Nobody reads the events yet: a buffer of one keeps the first and loses the rest, the
	// change to a.ipynb among them.
	events := m.Subscribe(1)
	all := m.Subscribe(64)
	for _, e := range []struct{ path, src string }{{"c.ipynb", "c = 2"}, {"c.ipynb", "c = 3"}, {"a.ipynb", "a = 2"}} {
		if err := srv.EditDoc(e.path, func(tx *ydoc.Txn) error { return tx.SetSource(0, e.src) }); err != nil {
			t.Fatal(err)
		}
	}
	for seen := 0; seen < 3; {
		select {
		case e := <-all.C:
			if e.Kind == bridge.EventChanged {
				seen++
			}
		case <-ctx.Done():
			t.Fatal("the edits did not reach the replicas")
		}
	}
	if events.Dropped() == 0 {
		t.Fatal("no event was lost: the test tests nothing")
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.follow(ctx, events) }()
	defer func() { cancel(); <-done }()
	// Read again after the loss: the subscriber was told.
	testutil.Eventually(t, "a.ipynb, changed while its event was lost, read again", func() bool {
		s.subs.mu.Lock()
		defer s.subs.mu.Unlock()
		return s.subs.sessions["session"][uri] != hashRead(r)
	})
}
