package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func openStore(t *testing.T, dir string, mutate func(*Options)) *Store {
	t.Helper()
	opts := Options{Dir: dir, SyncInterval: 5 * time.Millisecond, Logger: zerolog.Nop()}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openLog(t *testing.T, s *Store, path string) *Log {
	t.Helper()
	l, err := s.Open(ctxT(t), path, "notebook")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func upd(i int) []byte { return []byte(fmt.Sprintf("update-%04d", i)) }

func history(t *testing.T, l *Log, lineage uint64, latest bool) History {
	t.Helper()
	h, err := l.History(ctxT(t), lineage, latest)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sameUpdates(t *testing.T, what string, got [][]byte, want ...[]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d updates %q, want %d %q", what, len(got), got, len(want), want)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: update %d is %q, want %q", what, i, got[i], want[i])
		}
	}
}

// What is appended comes back, in order, after the store is closed and opened again; a log with
// a content update after its last save is at risk and its lineage adoptable.
func TestLogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	l := openLog(t, s, "a.ipynb")
	lin := l.Lineage("joined", false)
	l.Update(upd(0), FlagFull)
	l.Update(upd(1), FlagContent|FlagLocal)
	l.Saved(l.Seq(), "h1")
	l.Update(upd(2), FlagContent)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, dir, nil)
	risk, err := s2.AtRisk()
	if err != nil || len(risk) != 1 || risk[0].Path != "a.ipynb" || risk[0].Kind != "notebook" {
		t.Fatalf("at risk: %+v, %v", risk, err)
	}
	l2 := openLog(t, s2, "a.ipynb")
	if got := l2.Adoptable(); got != lin {
		t.Fatalf("adoptable lineage %d, want %d", got, lin)
	}
	h := history(t, l2, lin, false)
	sameUpdates(t, "history", h.Updates, upd(0), upd(1), upd(2))
	if len(h.Saves) != 1 || h.Base != nil {
		t.Errorf("saves %v, base %q", h.Saves, h.Base)
	}
	// A new lineage naming the old one lost keeps it pending until decided.
	l2.Lineage("sidecar restarted", true)
	l2.Decided(lin, "restored")
	if l2.Adoptable() != 0 {
		t.Error("still adoptable after the decision")
	}
	if info := l2.Info(); info.AtRisk {
		t.Errorf("at risk after the decision: %+v", info)
	}
}

// Nothing unsaved: the log is removed when closed. Work at risk: kept.
func TestLogRemovedWhenClosedSaved(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	l := openLog(t, s, "saved.ipynb")
	l.Lineage("joined", false)
	l.Update(upd(0), FlagContent)
	l.Saved(l.Seq(), "")
	l.Close(false)
	<-l.Done()
	k := openLog(t, s, "kept.ipynb")
	k.Lineage("joined", false)
	k.Update(upd(0), FlagContent)
	k.Close(true)
	<-k.Done()
	files, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(files) != 1 || filepath.Base(files[0]) != key("kept.ipynb", "notebook")+".wal" {
		t.Fatalf("files left: %v", files)
	}
}

// A crash while appending leaves a torn record at the end: every possible tear is cut off when
// the log is opened again, the records before it are all there, and appending goes on.
func TestLogCrashTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	l := openLog(t, s, "torn.ipynb")
	lin := l.Lineage("joined", false)
	for i := range 5 {
		l.Update(upd(i), FlagContent)
	}
	l.Close(true)
	<-l.Done()
	file := filepath.Join(dir, key("torn.ipynb", "notebook")+".wal")
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	last := frameSize(7, 1+len(upd(4))) // header 1, lineage 2, updates 3..7
	for cut := len(whole) - last + 1; cut < len(whole); cut++ {
		if err := os.WriteFile(file, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		s2 := openStore(t, dir, nil)
		l2 := openLog(t, s2, "torn.ipynb")
		sameUpdates(t, fmt.Sprintf("cut at %d", cut), history(t, l2, lin, false).Updates, upd(0), upd(1), upd(2), upd(3))
		l2.Update(upd(9), FlagContent)
		l2.Close(true)
		<-l2.Done()
		_ = s2.Close()
		if s2.Stats().Truncated != 1 {
			t.Fatalf("cut at %d: truncated %d", cut, s2.Stats().Truncated)
		}
		s3 := openStore(t, dir, nil)
		l3 := openLog(t, s3, "torn.ipynb")
		sameUpdates(t, "after appending", history(t, l3, lin, false).Updates, upd(0), upd(1), upd(2), upd(3), upd(9))
		l3.Close(true)
		<-l3.Done()
		_ = s3.Close()
	}
}

// A log for another document (a hash collision, a file copied by hand) is set aside, not used.
func TestLogForAnotherDocumentSetAside(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	l := openLog(t, s, "one.ipynb")
	l.Lineage("joined", false)
	l.Update(upd(0), FlagContent)
	l.Close(true)
	<-l.Done()
	_ = s.Close()
	if err := os.Rename(filepath.Join(dir, key("one.ipynb", "notebook")+".wal"), filepath.Join(dir, key("two.ipynb", "notebook")+".wal")); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, nil)
	l2 := openLog(t, s2, "two.ipynb")
	if info := l2.Info(); info.Lineage != 0 || info.AtRisk {
		t.Errorf("a foreign log was used: %+v", info)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "*.unreadable-*"))
	if len(aside) != 1 {
		t.Errorf("set aside: %v", aside)
	}
}

// Compaction keeps the current lineage from the latest base at or before the second-to-last
// save, drops decided lineages, keeps lost ones waiting for a decision; History then starts at
// that base.
func TestLogCompaction(t *testing.T) {
	s := openStore(t, t.TempDir(), func(o *Options) { o.CompactMin = 1 })
	l := openLog(t, s, "c.ipynb")
	old := l.Lineage("joined", false)
	l.Update(upd(0), FlagFull)
	l.Update(upd(1), FlagContent)
	lost := l.Lineage("server lost the room", true) // old waits for a decision, with unsaved work
	l.Update(upd(2), FlagFull)
	l.Update(upd(3), FlagContent)
	l.Saved(l.Seq(), "")
	l.Base([]byte("base-A"))
	l.Update(upd(4), FlagContent)
	l.Saved(l.Seq(), "")
	l.Update(upd(5), FlagContent)
	l.Base([]byte("base-B")) // after the second-to-last save: not a cut
	l.Update(upd(6), FlagContent)
	l.Saved(l.Seq(), "")
	waitFor(t, "a compaction", func() bool { return s.Stats().Compactions >= 1 })
	h := history(t, l, lost, false)
	if string(h.Base) != "base-A" {
		t.Fatalf("base %q, want base-A", h.Base)
	}
	sameUpdates(t, "current lineage", h.Updates, upd(4), upd(5), upd(6))
	sameUpdates(t, "latest", history(t, l, lost, true).Updates, upd(6))
	sameUpdates(t, "the lost lineage, kept whole", history(t, l, old, false).Updates, upd(0), upd(1))
	l.Decided(old, "restored")
	l.Saved(l.Seq(), "")
	waitFor(t, "the decided lineage dropped", func() bool {
		_, err := l.History(ctxT(t), old, false)
		return errors.Is(err, ErrNoLineage)
	})
}

// Bases are due once the lineage grew by as much as the last base (at least BaseEvery).
func TestLogNeedBase(t *testing.T) {
	s := openStore(t, "", func(o *Options) { o.BaseEvery = 100 })
	l := openLog(t, s, "b.ipynb")
	l.Lineage("joined", false)
	l.Update(bytes.Repeat([]byte{1}, 300), FlagFull)
	l.Update(bytes.Repeat([]byte{2}, 200), FlagContent)
	if l.NeedBase() {
		t.Fatal("a base due after 200 bytes on a 300-byte state")
	}
	l.Update(bytes.Repeat([]byte{2}, 100), FlagContent)
	if !l.NeedBase() {
		t.Fatal("no base due after 300 bytes")
	}
	l.Base(bytes.Repeat([]byte{3}, 50))
	if l.NeedBase() {
		t.Fatal("a base due right after one")
	}
}

// A writer that cannot keep up: updates past MaxPending are dropped, the lineage's history says
// it is incomplete until a base, and is whole from that base on.
func TestLogGapUntilBase(t *testing.T) {
	s := openStore(t, "", func(o *Options) { o.MaxPending = 200 })
	l := openLog(t, s, "g.ipynb")
	lin := l.Lineage("joined", false)
	l.wmu.Lock() // the writer is stuck
	for i := range 20 {
		l.Update(upd(i), FlagContent)
	}
	l.wmu.Unlock()
	if _, err := l.History(ctxT(t), lin, false); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("history after a gap: %v", err)
	}
	if !l.NeedBase() {
		t.Fatal("no base due after a gap")
	}
	l.Base([]byte("whole"))
	l.Update(upd(99), FlagContent)
	h := history(t, l, lin, false)
	if string(h.Base) != "whole" {
		t.Fatalf("base %q", h.Base)
	}
	sameUpdates(t, "after the base", h.Updates, upd(99))
	if l.Info().Dropped == 0 {
		t.Error("no drops counted")
	}
}

// In memory, a log closed with work at risk is kept for the next room of the document and
// listed as at risk; one closed saved is gone.
func TestMemoryStoreKeepsAtRisk(t *testing.T) {
	s := openStore(t, "", nil)
	l := openLog(t, s, "m.ipynb")
	lin := l.Lineage("joined", false)
	l.Update(upd(0), FlagContent)
	l.Close(true)
	<-l.Done()
	risk, _ := s.AtRisk()
	if len(risk) != 1 || risk[0].Path != "m.ipynb" {
		t.Fatalf("at risk %+v", risk)
	}
	l2 := openLog(t, s, "m.ipynb")
	if l2.Adoptable() != lin {
		t.Fatalf("adoptable %d", l2.Adoptable())
	}
	sameUpdates(t, "kept", history(t, l2, lin, false).Updates, upd(0))
	l2.Close(false)
	<-l2.Done()
	if risk, _ := s.AtRisk(); len(risk) != 0 {
		t.Errorf("at risk after a saved close: %+v", risk)
	}
}

// Open waits while another room holds the document's log.
func TestOpenWaitsForHolder(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	l := openLog(t, s, "w.ipynb")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Open(ctx, "w.ipynb", "notebook"); err == nil {
		t.Fatal("opened a log another room holds")
	}
	got := make(chan error, 1)
	go func() {
		l2, err := s.Open(ctxT(t), "w.ipynb", "notebook")
		if err == nil {
			l2.Close(false)
		}
		got <- err
	}()
	l.Close(true)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// Records are fsynced on the interval, and the fsyncs are counted.
func TestSyncCounted(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	l := openLog(t, s, "s.ipynb")
	l.Lineage("joined", false)
	seq := l.Update(upd(0), FlagContent)
	waitFor(t, "the update synced", func() bool { return l.Info().SyncedSeq >= seq })
	st := s.Stats()
	if st.Syncs == 0 || st.SyncCounts[len(st.SyncCounts)-1] == 0 || !st.Durable || st.Records < 3 {
		t.Errorf("stats %+v", st)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// FuzzOpen: whatever a log file holds, opening it neither panics nor loses the ability to append
// and read back.
func FuzzOpen(f *testing.F) {
	f.Add(frames(Record{Type: TypeHeader, Seq: 1, Data: []byte(`{"format":1,"path":"f.ipynb","kind":"notebook"}`)},
		Record{Type: TypeLineage, Seq: 2, Data: []byte(`{}`)}, Record{Type: TypeUpdate, Seq: 3, Data: []byte{2, 1}}))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, key("f.ipynb", "notebook")+".wal"), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), SyncInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, _ = s.AtRisk()
		l, err := s.Open(context.Background(), "f.ipynb", "notebook")
		if err != nil {
			t.Fatal(err)
		}
		lin := l.Lineage("fuzz", true)
		l.Update([]byte("after"), FlagContent)
		h, err := l.History(context.Background(), lin, false)
		if err != nil || len(h.Updates) != 1 || string(h.Updates[0]) != "after" {
			t.Fatalf("history %+v, %v", h, err)
		}
	})
}
