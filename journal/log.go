package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Flags of an update record.
const (
	// FlagLocal: the replica's own change (an agent's edit, a rescue), not one it received.
	FlagLocal byte = 1 << 0
	// FlagContent: the update changed the document's content (cells, text, metadata), not only
	// the room's state map (dirty, hash): such an update after the last save is work at risk.
	FlagContent byte = 1 << 1
	// FlagFull: the update is a whole state (the step 2 that synced a fresh replica): it counts
	// as a base when deciding whether a new base is due.
	FlagFull byte = 1 << 2
)

// flagGapBase marks, in the index only, a base written after records were dropped.
const flagGapBase byte = 1 << 7

// docHeader is TypeHeader's payload.
type docHeader struct {
	Format  int       `json:"format"`
	Path    string    `json:"path"`
	Kind    string    `json:"kind"`
	Created time.Time `json:"created"`
}

const headerFormat = 1

// lineageMeta is TypeLineage's payload. Lost: the lineage before it, which the server lost (or
// which a sidecar that stopped held), waits for a rescue decision (0: none does).
type lineageMeta struct {
	Reason string    `json:"reason,omitempty"`
	Lost   uint64    `json:"lost,omitempty"`
	At     time.Time `json:"at"`
}

// savedMeta is TypeSaved's payload: the save holds every record of the lineage up to Covers.
type savedMeta struct {
	Covers uint64    `json:"covers"`
	Hash   string    `json:"hash,omitempty"`
	At     time.Time `json:"at"`
}

// decidedMeta is TypeDecided's payload.
type decidedMeta struct {
	Lineage uint64    `json:"lineage"`
	Outcome string    `json:"outcome"`
	At      time.Time `json:"at"`
}

// entry indexes one record of a log.
type entry struct {
	seq     uint64
	lineage uint64 // the lineage the record belongs to (its own seq for a TypeLineage)
	off     int64  // offset in the medium (in the pending buffer until written)
	size    int32
	typ     Type
	flags   byte
	arg     uint64 // TypeSaved: covers; TypeDecided: the lineage decided; TypeLineage: the lineage lost
}

// Log is one document's write-ahead log, opened with Store.Open and owned by one holder at a
// time (a room). Appends (Lineage, Update, Saved, Base, Decided) copy the record into a buffer
// and return at once: they never touch the disk, so a room goroutine can call them. The store's
// writer goroutine writes the buffer, fsyncs it on its interval, and compacts the log. History
// reads what a lineage holds and may wait for the writer: call it off the room goroutine.
type Log struct {
	s    *Store
	name string
	path string
	kind string

	// mu guards the appender's side.
	mu         sync.Mutex
	seq        uint64
	lineage    uint64
	buf        []byte  // frames not written yet
	bufEntries []entry // their index entries (offsets into buf)
	sinceBase  int64   // bytes appended to the lineage since its last base (or full update)
	baseSize   int64   // the size of that base
	gap        bool    // records were dropped (the writer fell behind): a base must come next
	adoptable  uint64  // an at-risk lineage found when the log was opened (0: none)
	closing    bool
	keep       bool
	dropped    uint64
	lastSynced time.Time // when the writer last made the log durable (zero: never)
	syncedSeq  uint64    // records up to this seq are durable (or, in memory, written)

	// wmu guards the writer's side: the medium and the index.
	wmu         sync.Mutex
	med         medium
	index       []entry
	unsynced    bool  // written since the last fsync
	checkSave   bool  // a save, base, lineage or decision was written since the last compaction check
	checkedSize int64 // the log's size after the last compaction check
	err         error // the last write error (nil once a write succeeds again)
	done        chan struct{}
}

// Info is what a log holds, for monitoring.
type Info struct {
	Bytes      int64     // the log's size
	Records    int       // records in it (written ones)
	Pending    int       // records not written yet
	Lineage    uint64    // the current lineage
	Seq        uint64    // the last record appended
	SyncedSeq  uint64    // records up to this one survive a crash (in memory: written)
	LastSynced time.Time // when the log was last made durable
	AtRisk     bool      // it holds changes no save has covered, or a lineage waiting for a rescue
	Durable    bool      // on disk (false: in memory)
	Dropped    uint64    // records dropped because the writer fell behind
	Err        string    // the last write error
}

// Lineage starts a new lineage (a replica that begins empty, joined to a new server document)
// and returns its id. lost says the previous lineage was lost by the server and waits for a
// rescue decision (Decided); otherwise it is no longer needed.
func (l *Log) Lineage(reason string, lost bool) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var prev uint64
	if lost {
		prev = l.lineage
	}
	b, _ := json.Marshal(lineageMeta{Reason: reason, Lost: prev, At: l.s.now()})
	seq := l.appendLocked(TypeLineage, b, entry{arg: prev}, true)
	l.lineage = seq
	l.sinceBase, l.baseSize = 0, 0
	return seq
}

// Update logs a Yjs update the replica applied (flags: FlagLocal, FlagContent, FlagFull) and
// returns its seq (0 when it was dropped).
func (l *Log) Update(update []byte, flags byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lineage == 0 || l.gap {
		l.dropped++
		return 0
	}
	payload := make([]byte, 0, 1+len(update))
	payload = append(append(payload, flags&^flagGapBase), update...)
	seq := l.appendLocked(TypeUpdate, payload, entry{flags: flags &^ flagGapBase}, false)
	if seq == 0 {
		return 0
	}
	if flags&FlagFull != 0 {
		l.sinceBase, l.baseSize = 0, int64(len(update))
	} else {
		l.sinceBase += int64(len(update))
	}
	return seq
}

// Saved logs that the server reported a save holding every record of the current lineage up to
// covers.
func (l *Log) Saved(covers uint64, hash string) {
	b, _ := json.Marshal(savedMeta{Covers: covers, Hash: hash, At: l.s.now()})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lineage == 0 {
		return
	}
	l.appendLocked(TypeSaved, b, entry{arg: covers}, true)
}

// Base logs the replica's full state (a Yjs update) at this point of the current lineage.
func (l *Log) Base(state []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lineage == 0 {
		return
	}
	e := entry{}
	if l.gap {
		e.flags = flagGapBase
	}
	if seq := l.appendLocked(TypeBase, state, e, true); seq == 0 {
		return
	}
	l.gap = false
	l.sinceBase, l.baseSize = 0, int64(len(state))
}

// Decided logs what became of a lineage waiting for a rescue decision: it is no longer needed.
func (l *Log) Decided(lineage uint64, outcome string) {
	b, _ := json.Marshal(decidedMeta{Lineage: lineage, Outcome: outcome, At: l.s.now()})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.adoptable == lineage {
		l.adoptable = 0
	}
	l.appendLocked(TypeDecided, b, entry{arg: lineage}, true)
}

// NeedBase reports whether a new base is due: the lineage grew by as much as its last base
// (at least the store's BaseEvery) since it, or records were dropped.
func (l *Log) NeedBase() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lineage != 0 && (l.gap || l.sinceBase >= max(l.s.opts.BaseEvery, l.baseSize))
}

// Seq returns the last record's seq.
func (l *Log) Seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Adoptable returns the lineage, held before the log was opened, whose work the server may not
// have saved (the oldest such), or 0. Decided on it clears it.
func (l *Log) Adoptable() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.adoptable
}

// appendLocked frames a record into the buffer. Meta records (lineages, saves, bases,
// decisions) are never dropped; updates are when the buffer is over the store's bound (the
// writer cannot keep up): then nothing of the lineage is whole until the next base.
func (l *Log) appendLocked(t Type, payload []byte, e entry, meta bool) uint64 {
	if l.closing {
		return 0
	}
	size := frameSize(l.seq+1, len(payload))
	if size-frameHeader > MaxRecord || (!meta && int64(len(l.buf)+size) > l.s.opts.MaxPending) {
		l.dropped++
		l.s.stats.dropped.Add(1)
		if t == TypeUpdate {
			l.gap = true
		}
		return 0
	}
	l.seq++
	e.seq, e.typ, e.off, e.size = l.seq, t, int64(len(l.buf)), int32(size)
	e.lineage = l.lineage
	if t == TypeLineage {
		e.lineage = l.seq
	}
	l.buf = appendFrame(l.buf, t, l.seq, payload)
	l.bufEntries = append(l.bufEntries, e)
	l.s.stats.appended.Add(1)
	l.s.stats.appendedBytes.Add(uint64(size))
	l.s.wakeWriter()
	return l.seq
}

// History is what a lineage holds: a base state (nil when the lineage is whole from its start)
// and the updates applied after it, in order.
type History struct {
	Lineage uint64
	Base    []byte
	Updates [][]byte
	// Saves are the seqs covered by the saves the server reported in this lineage, in order,
	// and Seqs the seq of each update (parallel to Updates).
	Saves []uint64
	Seqs  []uint64
	// Flags are each update's flags (FlagLocal, FlagContent, FlagFull), parallel to Updates.
	Flags []byte
	// SaveHashes are the file hashes the server published with those saves ("" unknown).
	SaveHashes []string
}

// ErrNoLineage is returned by History for a lineage the log does not hold (any more).
var ErrNoLineage = errors.New("journal: no such lineage in the log")

// ErrIncomplete is returned by History when records of the lineage were dropped.
var ErrIncomplete = errors.New("journal: the lineage is incomplete (records were dropped while the disk did not keep up)")

// History returns what a lineage holds, from its first retained base (every state the replica
// held since then can be rebuilt from it), or from its latest base when latest is set (its last
// state, cheaper). It writes what is pending first, so it may wait for the writer: never call it
// on a room goroutine.
func (l *Log) History(ctx context.Context, lineage uint64, latest bool) (History, error) {
	if err := ctx.Err(); err != nil {
		return History{}, err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.flushLocked()
	var span []entry
	for _, e := range l.index {
		if e.lineage == lineage {
			span = append(span, e)
		}
	}
	if len(span) == 0 || span[0].typ != TypeLineage {
		return History{}, fmt.Errorf("%w: %d", ErrNoLineage, lineage)
	}
	start, end := span[0].off, span[len(span)-1].off+int64(span[len(span)-1].size)
	raw, err := l.med.readAt(start, int(end-start))
	if err != nil {
		return History{}, err
	}
	h := History{Lineage: lineage}
	from, sawUpdate := 0, false
	for i, e := range span {
		switch {
		case e.typ == TypeUpdate:
			sawUpdate = true
		case e.typ != TypeBase:
		case latest, e.flags&flagGapBase != 0:
			from = i // nothing before a base written after a gap is whole
		case from == 0 && !sawUpdate:
			from = i // the lineage was compacted to this base
		}
	}
	for i, e := range span[from:] {
		rec, _, err := decodeFrame(raw[e.off-start:])
		if err != nil {
			return History{}, fmt.Errorf("read lineage %d: %w", lineage, err)
		}
		switch {
		case e.typ == TypeBase && i == 0:
			h.Base = rec.Data
		case e.typ == TypeUpdate && len(rec.Data) > 0:
			h.Updates = append(h.Updates, rec.Data[1:])
			h.Seqs = append(h.Seqs, e.seq)
			h.Flags = append(h.Flags, rec.Data[0])
		case e.typ == TypeSaved:
			var m savedMeta
			_ = json.Unmarshal(rec.Data, &m)
			h.Saves, h.SaveHashes = append(h.Saves, e.arg), append(h.SaveHashes, m.Hash)
		}
	}
	l.mu.Lock()
	incomplete := l.gap && lineage == l.lineage
	l.mu.Unlock()
	if incomplete {
		return h, ErrIncomplete
	}
	return h, nil
}

// Info describes the log.
func (l *Log) Info() Info {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	size, records, err := l.med.size(), len(l.index), l.err
	durable := l.med.durable()
	l.mu.Lock()
	defer l.mu.Unlock()
	risk := summarize(append(l.index[:len(l.index):len(l.index)], l.bufEntries...)).atRisk()
	in := Info{Bytes: size, Records: records, Pending: len(l.bufEntries), Lineage: l.lineage, Seq: l.seq,
		SyncedSeq: l.syncedSeq, LastSynced: l.lastSynced, AtRisk: risk, Durable: durable, Dropped: l.dropped}
	if err != nil {
		in.Err = err.Error()
	}
	return in
}

// Close hands the log back. keep: it holds work the server may not have saved (or a lineage
// waiting for a rescue decision), so it stays for the next holder or the next start; otherwise
// it is removed. What was appended is still written. It returns at once; the writer finishes.
func (l *Log) Close(keep bool) {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return
	}
	l.closing, l.keep = true, keep
	l.mu.Unlock()
	l.s.wakeWriter()
}

// Done is closed once the writer has finished with a closed log.
func (l *Log) Done() <-chan struct{} { return l.done }

// flushLocked writes what is pending (wmu held).
func (l *Log) flushLocked() {
	l.mu.Lock()
	buf, entries := l.buf, l.bufEntries
	l.buf, l.bufEntries = nil, nil
	l.mu.Unlock()
	if len(entries) == 0 {
		return
	}
	base := l.med.size()
	if err := l.med.append(buf); err != nil {
		l.failLocked(err, base)
		l.mu.Lock() // written again with the next flush (before anything newer)
		l.buf = append(buf, l.buf...)
		l.bufEntries = append(entries, l.bufEntries...)
		l.mu.Unlock()
		return
	}
	l.err = nil
	gapBase := false
	for _, e := range entries {
		e.off += base
		l.index = append(l.index, e)
		gapBase = gapBase || e.flags&flagGapBase != 0
		if e.typ == TypeSaved || e.typ == TypeDecided || e.typ == TypeLineage || e.typ == TypeBase {
			l.checkSave = true
		}
	}
	l.unsynced = true
	if !l.med.durable() {
		l.markSynced(entries[len(entries)-1].seq)
	}
	if gapBase {
		l.compactLocked(true)
	}
}

// failLocked records a write error and cuts a partly written frame off.
func (l *Log) failLocked(err error, size int64) {
	if l.err == nil {
		l.s.log.Error().Err(err).Str("log", l.name).Msg("could not write the journal; retrying")
	}
	l.err = err
	l.s.stats.errors.Add(1)
	l.s.setLastError(err)
	if l.med.size() != size {
		_ = l.med.truncate(size)
	}
}

func (l *Log) markSynced(seq uint64) {
	l.mu.Lock()
	l.syncedSeq, l.lastSynced = max(l.syncedSeq, seq), l.s.now()
	l.mu.Unlock()
}

// syncLocked makes what was written durable.
func (l *Log) syncLocked() {
	if !l.unsynced || l.err != nil {
		return
	}
	var last uint64
	if n := len(l.index); n > 0 {
		last = l.index[n-1].seq
	}
	start := time.Now()
	if err := l.med.sync(); err != nil {
		l.failLocked(err, l.med.size())
		return
	}
	l.s.stats.observeSync(time.Since(start))
	l.unsynced = false
	l.markSynced(last)
}
