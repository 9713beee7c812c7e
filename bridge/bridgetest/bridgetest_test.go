package bridgetest

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

func dial(t *testing.T, s *Server, path string) (*Conn, bridge.DocSession) {
	t.Helper()
	ds, err := s.OpenDocSession(context.Background(), path, "json", "notebook")
	if err != nil {
		t.Fatalf("OpenDocSession: %v", err)
	}
	c, err := s.DialRoom(context.Background(), ds.RoomID, ds.SessionID)
	if err != nil {
		t.Fatalf("DialRoom: %v", err)
	}
	return c.(*Conn), ds
}

func read(t *testing.T, c *Conn) ydoc.Frame {
	t.Helper()
	b, err := c.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	f, err := ydoc.DecodeFrame(b)
	if err != nil {
		t.Fatalf("DecodeFrame: %v", err)
	}
	return f
}

func readAsync(c *Conn) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Read()
		done <- err
	}()
	return done
}

func TestSessionAndFiles(t *testing.T) {
	s := New()
	ds1, err := s.OpenDocSession(context.Background(), NotebookPath, "json", "notebook")
	if err != nil {
		t.Fatal(err)
	}
	ds2, _ := s.OpenDocSession(context.Background(), NotebookPath, "json", "notebook")
	if ds1 != ds2 || ds1.RoomID != "json:notebook:"+ds1.FileID {
		t.Errorf("sessions %+v and %+v: want the same fixed file id and room id", ds1, ds2)
	}
	s.Restart(RestartOptions{})
	ds3, _ := s.OpenDocSession(context.Background(), NotebookPath, "json", "notebook")
	if ds3.FileID != ds1.FileID || ds3.SessionID == ds1.SessionID {
		t.Errorf("after Restart %+v (before %+v): want the same file id and a new session id", ds3, ds1)
	}
	if s.OpenCalls() != 3 {
		t.Errorf("OpenCalls = %d, want 3", s.OpenCalls())
	}

	if _, err := s.Stat(context.Background(), "missing"); !bridge.IsNotFound(err) {
		t.Errorf("Stat missing: %v, want a 404", err)
	}
	var pe interface{ Permanent() bool }
	if _, err := s.Stat(context.Background(), "missing"); !errors.As(err, &pe) {
		t.Errorf("Stat missing: %v has no Permanent method", err)
	}
	fi, err := s.Stat(context.Background(), TextPath)
	if err != nil || fi.Type != "file" || fi.Size <= 0 {
		t.Errorf("Stat text = %+v, %v", fi, err)
	}

	s.Down()
	_, err = s.OpenDocSession(context.Background(), NotebookPath, "json", "notebook")
	if !errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &pe) {
		t.Errorf("OpenDocSession while down: %v, want a transient connection refused", err)
	}
	s.Up()
	s.RefuseTokens()
	_, err = s.OpenDocSession(context.Background(), NotebookPath, "json", "notebook")
	if !errors.As(err, &pe) || !pe.Permanent() {
		t.Errorf("OpenDocSession with a refused token: %v, want permanent", err)
	}
}

func TestConnReadCloseAndCloseCodes(t *testing.T) {
	s := New()
	c, _ := dial(t, s, NotebookPath)
	if f := read(t, c); f.Type != ydoc.MsgSync || f.Sync != ydoc.SyncStep1 {
		t.Fatalf("first frame %+v, want the server's step 1", f)
	}
	done := readAsync(c)
	s.Inject([]byte{3})
	if err := <-done; err != nil {
		t.Fatalf("Read of an injected frame: %v", err)
	}
	done = readAsync(c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
	if err := c.Write([]byte{3}, time.Now().Add(time.Second)); err == nil {
		t.Error("Write after Close succeeded")
	}

	c2, _ := dial(t, s, NotebookPath)
	s.CloseWith(4404, "gone")
	read(t, c2) // the step 1 queued before the close still arrives
	_, err := c2.Read()
	var ce interface {
		CloseCode() int
		CloseReason() string
	}
	if !errors.As(err, &ce) || ce.CloseCode() != 4404 || ce.CloseReason() != "gone" {
		t.Errorf("Read after CloseWith: %v, want close 4404 gone", err)
	}

	c3, ds := dial(t, s, "missing.ipynb")
	if _, err := c3.Read(); !errors.As(err, &ce) || ce.CloseCode() != CloseFileNotFound {
		t.Errorf("room for a missing file: %v, want close 4404", err)
	}
	c4, _ := s.DialRoom(context.Background(), ds.RoomID, "stale-session")
	if _, err := c4.Read(); !errors.As(err, &ce) || ce.CloseCode() != CloseSessionProblem {
		t.Errorf("unknown session: %v, want close 1003", err)
	}
}

func TestWritesStallAndFail(t *testing.T) {
	s := New()
	c, _ := dial(t, s, NotebookPath)
	s.StallWrites()
	if err := c.Write([]byte{3}, time.Now().Add(5*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("stalled Write: %v, want a deadline error", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Write([]byte{3}, time.Now().Add(time.Minute)) }()
	s.ResumeWrites()
	if err := <-done; err != nil {
		t.Errorf("Write released by ResumeWrites: %v", err)
	}
	broken := errors.New("broken pipe")
	s.FailWrites(broken)
	if err := c.Write([]byte{3}, time.Now().Add(time.Second)); !errors.Is(err, broken) {
		t.Errorf("Write: %v, want %v", err, broken)
	}
	if err := c.Ping(time.Now().Add(time.Second)); !errors.Is(err, broken) {
		t.Errorf("Ping: %v, want %v", err, broken)
	}
}

func TestSyncEchoAwarenessAndSave(t *testing.T) {
	s := New()
	a, _ := dial(t, s, NotebookPath)
	b, _ := dial(t, s, NotebookPath)
	read(t, a) // the server's step 1
	read(t, b)

	// A client replica catches up from the server's step 2 and edits.
	doc, err := ydoc.NewDoc(ydoc.KindNotebook, 77, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ydoc.EncodeSync(ydoc.SyncStep1, doc.StateVector().Encode()), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	f := read(t, a)
	if f.Sync != ydoc.SyncStep2 {
		t.Fatalf("answer to step 1: %+v, want step 2", f)
	}
	if _, _, err := doc.Apply(f.Payload); err != nil {
		t.Fatal(err)
	}
	if ids := doc.CellIDs(); !slices.Equal(ids, []string{"cell-a", "cell-b"}) {
		t.Fatalf("client replica after step 2: %v", ids)
	}
	update, _, err := doc.Transact(func(tx *ydoc.Txn) error {
		return tx.InsertCells(0, []ydoc.Cell{{ID: "c77", Type: ydoc.CellRaw}})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.HoldEchoes()
	if err := a.Write(ydoc.EncodeSync(ydoc.SyncUpdate, update), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.CountCell(NotebookPath, "c77") != 1 || s.Held() != 2 {
		t.Fatalf("server cells %v, %d held: want the edit applied and both echoes held", s.CellIDs(NotebookPath), s.Held())
	}
	s.ReleaseEchoes()
	for _, c := range []*Conn{a, b} {
		if f := read(t, c); f.Sync != ydoc.SyncUpdate {
			t.Errorf("broadcast: %+v, want the update", f)
		}
	}

	aw := ydoc.EncodeAwarenessFrame(ydoc.EncodeAwarenessUpdate(77, 1, []byte(`{"user":{"username":"u"}}`)))
	if err := a.Write(aw, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Conn{a, b} {
		if f := read(t, c); f.Type != ydoc.MsgAwareness {
			t.Errorf("forwarded awareness: %+v", f)
		}
	}
	if recs := s.AwarenessOf(77); len(recs) != 1 || recs[0].Clock != 1 || recs[0].Path != NotebookPath {
		t.Errorf("awareness records %+v", recs)
	}

	if err := a.Write(ydoc.EncodeSaveRequest(9), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A save writes the file and publishes dirty=false and the hash (two updates) before the reply.
	updates := 0
	for f = read(t, a); f.Type != ydoc.MsgRaw; f = read(t, a) {
		if f.Type == ydoc.MsgSync && f.Sync == ydoc.SyncUpdate {
			updates++
		}
	}
	msg, err := ydoc.ParseRaw(f.Raw)
	if err != nil || msg.Type != "save" || msg.ResponseTo == nil || *msg.ResponseTo != 9 || msg.Status != "success" {
		t.Errorf("save reply %q: %+v, %v", f.Raw, msg, err)
	}
	if updates != 2 || s.Saves(NotebookPath) != 1 {
		t.Errorf("save: %d state updates, %d saves; want 2 and 1", updates, s.Saves(NotebookPath))
	}
	fc, err := s.ReadFile(context.Background(), NotebookPath, ydoc.KindNotebook, true)
	if room, _ := s.Notebook(NotebookPath); err != nil || fc.Doc == nil || fc.Hash == "" || len(fc.Doc.Notebook.Cells) != len(room.Cells) {
		t.Errorf("ReadFile after the save: %+v, %v", fc, err)
	}
}
