// Package journal is the sidecar's write-ahead log. Per document it keeps an append-only log of
// framed records (length, type, CRC-32C; record.go): every Yjs update the document's replica
// applied, in order — the server's and the replica's own — grouped in lineages (a lineage is one
// replica joined to one server document; after the server lost a room, the lost lineage is kept
// until its rescue is decided), the saves the server reported with what they cover, and the
// replica's full state from time to time as a base to compact to.
//
// A Store owns a directory of logs (or, without one, keeps the same logs in memory, bounded) and
// one writer goroutine: appends only copy a record into a buffer, so rooms never wait for a
// disk; the writer writes the buffers at once, fsyncs them together on a short interval (group
// commit), compacts logs in the background and removes the logs of documents closed with
// nothing unsaved. Opening a store truncates torn tails left by a crash. The package knows
// nothing of Yjs: updates and states are opaque bytes.
package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Options configure a Store. Zero values get defaults.
type Options struct {
	// Dir holds the logs (created if missing); "" keeps them in memory.
	Dir string
	// SyncInterval is the group commit: what was written is fsynced together at most this long
	// after (100ms). Records are written to the file (the OS's cache, which survives the
	// process) at once; the fsync is for a machine that goes down. Negative: never fsync.
	SyncInterval time.Duration
	// MaxLogBytes bounds one log (64 MiB on disk, 16 MiB in memory): past it, the log is
	// compacted at its latest base even if that drops states a rescue decision could have
	// matched the file with.
	MaxLogBytes int64
	// MaxMemory bounds, in memory, the logs kept after their room closed (256 MiB): the oldest
	// go first.
	MaxMemory int64
	// MaxPending bounds the records waiting for the writer, per log (32 MiB): past it, updates
	// are dropped until the next base.
	MaxPending int64
	// BaseEvery: a new base is due once a lineage grew by this much and by as much as its last
	// base (256 KiB).
	BaseEvery int64
	// CompactMin: compaction runs once it frees at least this much (256 KiB) and half of what
	// stays.
	CompactMin int64
	Logger     zerolog.Logger
	Now        func() time.Time
}

func (o *Options) defaults() {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = 100 * time.Millisecond
	}
	if o.Dir == "" {
		def(&o.MaxLogBytes, 16<<20)
	} else {
		def(&o.MaxLogBytes, 64<<20)
	}
	def(&o.MaxMemory, 256<<20)
	def(&o.MaxPending, 32<<20)
	def(&o.BaseEvery, 256<<10)
	def(&o.CompactMin, 256<<10)
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Store is a set of per-document logs and their writer. Create it with Open; Close stops the
// writer after writing and syncing everything appended.
type Store struct {
	opts Options
	log  zerolog.Logger

	mu     sync.Mutex
	open   map[string]*Log       // logs held by a room, and closed ones the writer has not finished
	kept   map[string]*memMedium // memory only: logs closed with work at risk
	keptAt map[string]time.Time
	closed bool

	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	stats   counters
}

// Open opens (creating it) the store's directory, or a store in memory when Options.Dir is
// empty, and starts its writer.
func Open(opts Options) (*Store, error) {
	opts.defaults()
	if opts.Dir != "" {
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	s := &Store{
		opts: opts, log: opts.Logger.With().Str("component", "journal").Logger(),
		open: map[string]*Log{}, kept: map[string]*memMedium{}, keptAt: map[string]time.Time{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	s.stats.init()
	go s.run()
	return s, nil
}

// Durable reports whether the logs are on disk.
func (s *Store) Durable() bool { return s.opts.Dir != "" }

// Dir returns the store's directory ("" in memory).
func (s *Store) Dir() string { return s.opts.Dir }

func (s *Store) now() time.Time { return s.opts.Now() }

// ErrClosed is returned by Store.Open after Close.
var ErrClosed = errors.New("journal: store closed")

// key names a document's log.
func key(path, kind string) string {
	sum := sha256.Sum256([]byte(kind + ":" + path))
	return hex.EncodeToString(sum[:12])
}

// Open returns a document's log, loading what an earlier holder (a room of this process, or the
// sidecar before it restarted) left in it, a torn tail cut off. While another holder has it
// open, Open waits for it to be closed (or ctx to end).
func (s *Store) Open(ctx context.Context, path, kind string) (*Log, error) {
	name := key(path, kind)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		busy := s.open[name]
		if busy == nil {
			l, err := s.openLocked(name, path, kind)
			if err == nil {
				s.open[name] = l
			}
			s.mu.Unlock()
			return l, err
		}
		s.mu.Unlock()
		select {
		case <-busy.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("journal of %s: held by another room: %w", path, ctx.Err())
		}
	}
}

func (s *Store) openLocked(name, path, kind string) (*Log, error) {
	l := &Log{s: s, name: name, path: path, kind: kind, done: make(chan struct{})}
	if s.opts.Dir == "" {
		m := s.kept[name]
		delete(s.kept, name)
		delete(s.keptAt, name)
		if m == nil {
			m = &memMedium{}
		}
		l.med = m
	} else {
		m, err := openFile(filepath.Join(s.opts.Dir, name+".wal"))
		if err != nil {
			return nil, fmt.Errorf("journal of %s: %w", path, err)
		}
		l.med = m
	}
	if err := l.load(); err != nil {
		_ = l.med.close()
		return nil, fmt.Errorf("journal of %s: %w", path, err)
	}
	return l, nil
}

// load reads the medium into the index, cutting a torn or damaged tail off; a log for another
// document (or without a header) is set aside and a new one begun.
func (l *Log) load() error {
	raw, err := l.med.all()
	if err != nil {
		return err
	}
	idx, valid, tail := index(raw)
	if len(idx) == 0 || idx[0].typ != TypeHeader || !l.headerMatches(raw, idx[0]) {
		if len(raw) > 0 {
			l.setAside(raw)
		}
		if err := l.med.truncate(0); err != nil {
			return err
		}
		idx, valid, tail = nil, 0, nil
	}
	if tail != nil {
		l.s.stats.truncated.Add(1)
		l.s.log.Warn().Err(tail).Str("log", l.name).Str("doc", l.path).Int("kept_bytes", valid).Int("cut_bytes", len(raw)-valid).
			Msg("the journal ended in an incomplete or damaged record (a crash while appending): cut it off")
		if err := l.med.truncate(int64(valid)); err != nil {
			return err
		}
	}
	l.index = idx
	if len(idx) == 0 {
		b, _ := json.Marshal(docHeader{Format: headerFormat, Path: l.path, Kind: l.kind, Created: l.s.now()})
		l.appendLocked(TypeHeader, b, entry{}, true)
		return nil
	}
	last := idx[len(idx)-1]
	l.seq = last.seq
	sum := summarize(idx)
	if n := len(sum.lineages); n > 0 {
		cur := sum.lineages[n-1]
		l.lineage = cur.id
		for _, e := range idx[cur.first:cur.end] {
			switch {
			case e.typ == TypeBase || (e.typ == TypeUpdate && e.flags&FlagFull != 0):
				l.sinceBase, l.baseSize = 0, int64(e.size)
			case e.typ == TypeUpdate:
				l.sinceBase += int64(e.size)
			}
		}
	}
	l.adoptable = sum.oldestAtRisk()
	l.syncedSeq = last.seq
	return nil
}

func (l *Log) headerMatches(raw []byte, e entry) bool {
	rec, _, err := decodeFrame(raw[e.off:])
	if err != nil {
		return false
	}
	var h docHeader
	return json.Unmarshal(rec.Data, &h) == nil && h.Format == headerFormat && h.Path == l.path && h.Kind == l.kind
}

// setAside keeps a log that cannot be used next to it (never deleted: it may be someone's work).
func (l *Log) setAside(raw []byte) {
	if l.s.opts.Dir == "" {
		return
	}
	aside := filepath.Join(l.s.opts.Dir, fmt.Sprintf("%s.unreadable-%d", l.name, l.s.now().UnixNano()))
	if err := writeSynced(aside, raw); err != nil {
		l.s.log.Error().Err(err).Str("log", l.name).Msg("could not set an unreadable journal aside")
		return
	}
	l.s.log.Warn().Str("log", l.name).Str("doc", l.path).Str("file", aside).Msg("the journal does not belong to this document or has no header: set aside, starting a new one")
}

// index decodes a log's records into index entries. valid is where the usable log ends; tail
// says why it ends before the data does (nil when it does not).
func index(raw []byte) (idx []entry, valid int, tail error) {
	var lineage uint64
	var refused error
	valid, tail, refused = scan(raw, func(rec Record, off int) error {
		e := entry{seq: rec.Seq, typ: rec.Type, off: int64(off), size: int32(frameSize(rec.Seq, len(rec.Data))), lineage: lineage}
		switch rec.Type {
		case TypeLineage:
			var m lineageMeta
			if err := json.Unmarshal(rec.Data, &m); err != nil {
				return fmt.Errorf("%w: lineage record: %v", errCorrupt, err)
			}
			lineage, e.lineage, e.arg = rec.Seq, rec.Seq, m.Lost
		case TypeUpdate:
			if len(rec.Data) == 0 {
				return fmt.Errorf("%w: empty update record", errCorrupt)
			}
			e.flags = rec.Data[0] &^ flagGapBase
		case TypeSaved:
			var m savedMeta
			if err := json.Unmarshal(rec.Data, &m); err != nil {
				return fmt.Errorf("%w: save record: %v", errCorrupt, err)
			}
			e.arg = m.Covers
		case TypeDecided:
			var m decidedMeta
			if err := json.Unmarshal(rec.Data, &m); err != nil {
				return fmt.Errorf("%w: decision record: %v", errCorrupt, err)
			}
			e.arg = m.Lineage
		case TypeHeader:
			if off != 0 {
				return fmt.Errorf("%w: a second header", errCorrupt)
			}
		}
		idx = append(idx, e)
		return nil
	})
	if refused != nil {
		tail = refused // the log ends before the record with a bad payload
	}
	return idx, valid, tail
}

// Doc names a document whose log holds work the server may not have saved.
type Doc struct {
	Path  string
	Kind  string
	Bytes int64
}

// AtRisk lists the documents, not open now, whose logs hold work the server may not have saved
// (or a lineage waiting for a rescue decision): what a sidecar that stopped left behind.
func (s *Store) AtRisk() ([]Doc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Doc
	if s.opts.Dir == "" {
		for name, m := range s.kept {
			if d, ok := docAtRisk(m.b); ok {
				_ = name
				out = append(out, d)
			}
		}
	} else {
		entries, err := os.ReadDir(s.opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		for _, de := range entries {
			name, ok := strings.CutSuffix(de.Name(), ".wal")
			if !ok || de.IsDir() || s.open[name] != nil {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(s.opts.Dir, de.Name()))
			if err != nil {
				s.log.Warn().Err(err).Str("log", name).Msg("could not read a journal")
				continue
			}
			if d, ok := docAtRisk(raw); ok {
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Path < out[j].Path || out[i].Path == out[j].Path && out[i].Kind < out[j].Kind
	})
	return out, nil
}

func docAtRisk(raw []byte) (Doc, bool) {
	idx, _, _ := index(raw)
	if len(idx) == 0 || idx[0].typ != TypeHeader {
		return Doc{}, false
	}
	rec, _, err := decodeFrame(raw)
	if err != nil {
		return Doc{}, false
	}
	var h docHeader
	if json.Unmarshal(rec.Data, &h) != nil || h.Format != headerFormat {
		return Doc{}, false
	}
	if !summarize(idx).atRisk() {
		return Doc{}, false
	}
	return Doc{Path: h.Path, Kind: h.Kind, Bytes: int64(len(raw))}, true
}

// Close writes and syncs everything appended, finishes closed logs and stops the writer. Logs
// still open stay on disk as they are (a room that did not close is like a crash: its log is
// recovered next time). It is a no-op the second time.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
	return nil
}

func (s *Store) wakeWriter() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the writer goroutine: it writes what was appended as soon as it is told, fsyncs on the
// interval, compacts, and finishes closed logs.
func (s *Store) run() {
	defer close(s.stopped)
	interval := s.opts.SyncInterval
	if interval < 0 {
		interval = time.Second // housekeeping only
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		syncNow, stop := false, false
		select {
		case <-s.stop:
			syncNow, stop = true, true
		case <-s.wake:
		case <-tick.C:
			syncNow = true
		}
		s.mu.Lock()
		logs := make([]*Log, 0, len(s.open))
		for _, l := range s.open {
			logs = append(logs, l)
		}
		s.mu.Unlock()
		for _, l := range logs {
			s.service(l, syncNow)
		}
		if stop {
			for _, l := range logs {
				l.wmu.Lock()
				_ = l.med.close()
				l.wmu.Unlock()
			}
			return
		}
	}
}

// service writes a log's pending records, syncs and compacts it, and finishes it once closed.
func (s *Store) service(l *Log, syncNow bool) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	// closing is read before the flush: every record handed over before Close is then written by
	// this pass (read after it, a record that came between the flush and Close was closed unwritten).
	l.mu.Lock()
	closing, keep := l.closing, l.keep
	l.mu.Unlock()
	l.flushLocked()
	if (syncNow || closing) && s.opts.SyncInterval >= 0 {
		l.syncLocked()
	}
	if size := l.med.size(); l.checkSave || (size > s.opts.MaxLogBytes && size > l.checkedSize+s.opts.CompactMin) {
		l.compactLocked(false)
		l.checkedSize = l.med.size()
	}
	if !closing {
		return
	}
	l.mu.Lock()
	pending := len(l.bufEntries) > 0
	l.mu.Unlock()
	if pending && l.err != nil {
		return // retried with the next pass
	}
	if keep {
		_ = l.med.close()
	} else if err := l.med.remove(); err != nil {
		s.log.Warn().Err(err).Str("log", l.name).Msg("could not remove a journal")
	}
	s.mu.Lock()
	if s.open[l.name] == l {
		delete(s.open, l.name)
	}
	if m, ok := l.med.(*memMedium); ok && keep {
		s.kept[l.name], s.keptAt[l.name] = m, s.now()
		s.boundMemoryLocked()
	}
	s.mu.Unlock()
	close(l.done)
}

// boundMemoryLocked drops the oldest logs kept in memory past MaxMemory.
func (s *Store) boundMemoryLocked() {
	var total int64
	for _, m := range s.kept {
		total += m.size()
	}
	for total > s.opts.MaxMemory && len(s.kept) > 0 {
		oldest := ""
		for name := range s.kept {
			if oldest == "" || s.keptAt[name].Before(s.keptAt[oldest]) {
				oldest = name
			}
		}
		total -= s.kept[oldest].size()
		s.log.Warn().Str("log", oldest).Msg("dropping a journal kept in memory (over the memory bound): its unsaved work is no longer recoverable")
		delete(s.kept, oldest)
		delete(s.keptAt, oldest)
		s.stats.dropped.Add(1)
	}
}

// Stats are the store's counters since it was opened, and what its logs hold now.
type Stats struct {
	Durable       bool
	Logs          int    // logs open (held by rooms) now
	Bytes         int64  // their size
	Records       uint64 // records appended
	AppendedBytes uint64
	Syncs         uint64
	SyncSeconds   float64   // total fsync time
	SyncBuckets   []float64 // upper bounds (seconds) of SyncCounts
	SyncCounts    []uint64  // fsyncs that took at most each bound (cumulative, as Prometheus)
	Compactions   uint64
	Truncated     uint64 // torn or damaged tails cut off when opening a log
	Dropped       uint64 // records (or kept logs) dropped: the writer fell behind, or over the memory bound
	Errors        uint64 // write and sync errors
	LastError     string
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	logs := make([]*Log, 0, len(s.open))
	for _, l := range s.open {
		logs = append(logs, l)
	}
	s.mu.Unlock()
	st := s.stats.snapshot()
	st.Durable = s.opts.Dir != ""
	st.Logs = len(logs)
	for _, l := range logs {
		l.wmu.Lock()
		st.Bytes += l.med.size()
		l.wmu.Unlock()
	}
	return st
}

var syncBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

type counters struct {
	appended, appendedBytes, compactions, truncated, dropped, errors atomic.Uint64

	mu        sync.Mutex
	syncs     uint64
	syncSum   float64
	syncCount []uint64
	lastErr   string
}

func (c *counters) init() { c.syncCount = make([]uint64, len(syncBuckets)) }

func (c *counters) observeSync(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncs++
	c.syncSum += d.Seconds()
	for i, b := range syncBuckets {
		if d.Seconds() <= b {
			c.syncCount[i]++
		}
	}
}

func (s *Store) setLastError(err error) {
	s.stats.mu.Lock()
	s.stats.lastErr = err.Error()
	s.stats.mu.Unlock()
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Records: c.appended.Load(), AppendedBytes: c.appendedBytes.Load(), Syncs: c.syncs, SyncSeconds: c.syncSum,
		SyncBuckets: append([]float64(nil), syncBuckets...), SyncCounts: append([]uint64(nil), c.syncCount...),
		Compactions: c.compactions.Load(), Truncated: c.truncated.Load(), Dropped: c.dropped.Load(), Errors: c.errors.Load(), LastError: c.lastErr,
	}
}
