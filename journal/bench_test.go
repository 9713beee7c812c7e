package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// BenchmarkAppend: what a room goroutine pays to log one keystroke-sized update (a copy into the
// log's buffer; the writer does the rest).
func BenchmarkAppend(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := s.Open(context.Background(), "bench.ipynb", "notebook")
	if err != nil {
		b.Fatal(err)
	}
	l.Lineage("bench", false)
	update := make([]byte, 60)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l.Update(update, FlagContent)
	}
}

// BenchmarkGroupCommit: ten documents each taking an update every 2 ms (a busy sidecar) for
// b.N rounds; reported: the fsyncs' mean and worst latency on this disk, and how many updates
// each fsync made durable.
func BenchmarkGroupCommit(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var logs []*Log
	for i := range 10 {
		l, err := s.Open(context.Background(), fmt.Sprintf("doc-%d.ipynb", i), "notebook")
		if err != nil {
			b.Fatal(err)
		}
		l.Lineage("bench", false)
		logs = append(logs, l)
	}
	update := make([]byte, 60)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		for _, l := range logs {
			l.Update(update, FlagContent)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	_ = s.Close()
	st := s.Stats()
	if st.Syncs == 0 {
		b.Fatal("no fsync")
	}
	worst := 0.0
	for i, n := range st.SyncCounts {
		if n < st.Syncs {
			worst = st.SyncBuckets[min(i+1, len(st.SyncBuckets)-1)]
		}
	}
	b.ReportMetric(1000*st.SyncSeconds/float64(st.Syncs), "fsync-mean-ms")
	b.ReportMetric(1000*worst, "fsync-worst-bucket-ms")
	b.ReportMetric(float64(st.Records)/float64(st.Syncs), "records/fsync")
	b.ReportMetric(st.SyncSeconds/elapsed.Seconds()*100, "writer-fsync-%")
}
