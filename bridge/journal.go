package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The write-ahead log of the rooms' replicas. Every Yjs update a document's replica applies —
// the server's (sync step 2 and update payloads) and its own (edits, rescues) — is appended, in
// order, to the document's log, with a new lineage whenever the replica is rebuilt (a new server
// document), a record of each save the server reports (what it covers), and now and then the
// replica's full state as a base to compact to. Appends only copy into a buffer; the journal's
// own goroutine writes, fsyncs and compacts. What reached the sidecar is then in the log whatever
// dies: jupyter-server (the log, like the replica, holds what the server had not saved), the
// sidecar (its next start finds the log at risk and rescues it as after a server loss), or both.
// The log is also the history a rescue decision compares the file with (rescue.go).

// Journal keeps the rooms' logs: package journal implements it (bridge/journalstore adapts it).
type Journal interface {
	// Open returns a document's log, waiting while another room holds it.
	Open(ctx context.Context, path string, kind ydoc.Kind) (DocLog, error)
	// AtRisk lists the documents, not open now, whose logs hold work the server may not have
	// saved (what a sidecar that stopped left behind).
	AtRisk() ([]JournalDoc, error)
	// Stats counts what the journal did.
	Stats() JournalStats
}

// DocLog is one document's log, held by one room at a time. Appends never block; History may
// wait for the journal's writer and is never called on a room goroutine.
type DocLog interface {
	// Lineage starts a new lineage (an empty replica joined to a new server document) and
	// returns its id; lost: the lineage before it was lost by the server and waits for Decided.
	Lineage(reason string, lost bool) uint64
	// Update logs an update the replica applied (LogLocal, LogContent, LogFull) and returns its
	// seq (0 when it was dropped).
	Update(update []byte, flags byte) uint64
	// Saved logs a save the server reported, holding the lineage's records up to covers.
	Saved(covers uint64, hash string)
	// Base logs the replica's full state.
	Base(state []byte)
	// Decided logs what became of a lost lineage.
	Decided(lineage uint64, outcome string)
	// NeedBase reports whether a new base is due.
	NeedBase() bool
	// Seq returns the last record's seq.
	Seq() uint64
	// Adoptable returns a lineage, held before the log was opened, whose work the server may not
	// have saved (0: none).
	Adoptable() uint64
	// History returns what a lineage holds: from its first base (latest false) or its latest.
	History(ctx context.Context, lineage uint64, latest bool) (LogHistory, error)
	// Info describes the log.
	Info() LogInfo
	// Close hands the log back; keep: it holds work at risk (else it is removed).
	Close(keep bool)
}

// Flags of DocLog.Update.
const (
	LogLocal   byte = 1 << 0 // the replica's own change
	LogContent byte = 1 << 1 // it changed the document's content
	LogFull    byte = 1 << 2 // a whole state (the first sync of a fresh replica)
)

// LogHistory is what a lineage holds: a base state (nil: the lineage is whole from its start),
// the updates applied after it and their seqs, and the seqs the server's saves covered.
type LogHistory struct {
	Lineage uint64
	Base    []byte
	Updates [][]byte
	Seqs    []uint64
	Saves   []uint64
	// Local says which updates were the replica's own (parallel to Updates).
	Local []bool
	// SaveHashes are the file hashes the server published with those saves ("" unknown).
	SaveHashes []string
}

// LogInfo describes a document's log.
type LogInfo struct {
	Bytes      int64     `json:"bytes"`
	Records    int       `json:"records"`
	Pending    int       `json:"pending"` // not written yet
	Lineage    uint64    `json:"lineage"`
	Seq        uint64    `json:"seq"`
	SyncedSeq  uint64    `json:"synced_seq"` // records up to this one survive a crash of the machine (in memory: written)
	LastSynced time.Time `json:"last_synced"`
	AtRisk     bool      `json:"at_risk"` // changes no save covered, or a lost lineage waiting for its rescue
	Durable    bool      `json:"durable"` // on disk
	Dropped    uint64    `json:"dropped,omitempty"`
	Err        string    `json:"error,omitempty"`
}

// JournalDoc names a document whose log holds work at risk.
type JournalDoc struct {
	Path  string
	Kind  ydoc.Kind
	Bytes int64
}

// JournalStats count what the journal did since it opened.
type JournalStats struct {
	Durable       bool
	Logs          int
	Bytes         int64
	Records       uint64
	AppendedBytes uint64
	Syncs         uint64
	SyncSeconds   float64
	SyncBuckets   []float64
	SyncCounts    []uint64 // cumulative per bucket
	Compactions   uint64
	Truncated     uint64
	Dropped       uint64
	Errors        uint64
	LastError     string
}

// walState is a room's side of its log, owned by the room goroutine.
type walState struct {
	log          DocLog
	lineage      uint64 // the current lineage
	fresh        bool   // nothing logged in the lineage yet
	lost         uint64 // a lineage the server lost, waiting for its rescue decision (0: none)
	adopted      uint64 // a lineage held before the room opened (a sidecar restart), adopted as lost
	inflightFrom uint64 // the first local update logged since no edit was in flight (0: none)
	lastCovers   uint64 // what the last save marker covered
}

// walLog opens the room's log (document rooms only), adopts what an earlier holder left at
// risk, and starts the room's lineage. Without a journal, or when it cannot be opened, the room
// runs without a log.
func (l *roomLoop) openWAL(ctx context.Context) {
	j := l.r.opts.Journal
	if j == nil || l.r.opts.Fork != "" || l.r.opts.Transient != "" {
		return
	}
	dl, err := j.Open(ctx, l.r.opts.Path, l.r.opts.Kind)
	if err != nil {
		l.log.Warn().Err(err).Msg("the document's journal could not be opened; going on without it")
		return
	}
	l.wal.log = dl
	if lin := dl.Adoptable(); lin != 0 {
		// Replayed and adopted at the first connection, once the engine is known (adoptReplayed).
		l.wal.adopted, l.adoptPending = lin, true
		l.log.Info().Uint64(logfield.Lineage, lin).Msg("the journal holds work the server may not have saved: it is rescued at the first sync")
	}
	l.wal.lineage, l.wal.fresh = dl.Lineage("joined", l.wal.adopted != 0), true
	l.r.setLog(dl)
}

// logRemote logs an update the server sent, after the session applied it.
func (l *roomLoop) logRemote(f ydoc.Frame, out ydoc.Output) {
	if l.wal.log == nil || (f.Sync != ydoc.SyncStep2 && f.Sync != ydoc.SyncUpdate) || isEmptyUpdate(f.Payload) {
		return
	}
	var flags byte
	if l.wal.fresh && f.Sync == ydoc.SyncStep2 {
		flags |= LogFull
	}
	if l.ready {
		for _, c := range out.Changes {
			if !c.Local && contentChanged(c) {
				flags |= LogContent
			}
		}
	}
	l.wal.log.Update(f.Payload, flags)
	l.wal.fresh = false
}

// logLocal logs the replica's own updates in a session output (its sync update frames) and
// returns the seq logged before them.
func (l *roomLoop) logLocal(out ydoc.Output) uint64 {
	if l.wal.log == nil {
		return 0
	}
	before := l.wal.log.Seq()
	content := false
	for _, c := range out.Changes {
		content = content || (c.Local && contentChanged(c))
	}
	for _, fr := range out.Frames {
		f, err := ydoc.DecodeFrame(fr)
		if err != nil || f.Type != ydoc.MsgSync || f.Sync != ydoc.SyncUpdate {
			continue
		}
		flags := LogLocal
		if content {
			flags |= LogContent
		}
		if seq := l.wal.log.Update(f.Payload, flags); seq != 0 && l.wal.inflightFrom == 0 {
			l.wal.inflightFrom = seq
		}
		l.wal.fresh = false
	}
	return before
}

// logSaved logs a save marker: it covers what was logged before the output that carried it,
// except our updates still in flight (the server may not have had them) — and on a server whose
// markers lag behind its saves (Engine.SavesItself), only what the previous marker covered.
func (l *roomLoop) logSaved(before uint64) {
	if l.wal.log == nil {
		return
	}
	covers := before
	if l.wal.inflightFrom != 0 && l.wal.inflightFrom <= covers {
		covers = l.wal.inflightFrom - 1
	}
	if l.ds.Engine.SavesItself {
		covers, l.wal.lastCovers = l.wal.lastCovers, covers
	} else {
		l.wal.lastCovers = covers
	}
	h, _ := l.sess.Doc().State()["hash"].(string)
	l.wal.log.Saved(covers, h)
}

// afterOutput keeps the in-flight mark, writes a base when one is due and publishes whether
// work is at risk.
func (l *roomLoop) afterOutput() {
	l.publishRisk()
	if l.wal.log == nil {
		return
	}
	if l.sess.InFlight() == 0 {
		l.wal.inflightFrom = 0
	}
	if !l.wal.fresh && l.wal.log.NeedBase() && l.sess.Doc().Err() == nil {
		state, err := l.sess.Doc().EncodeStateAsUpdate(nil)
		if err != nil {
			l.log.Warn().Err(err).Msg("could not encode the replica for the journal")
			return
		}
		l.wal.log.Base(state)
	}
}

// walReset starts a new lineage for a rebuilt replica: after a server loss the old one waits
// for its rescue decision.
func (l *roomLoop) walReset(reason string, lost bool) {
	if l.wal.log == nil {
		return
	}
	old := l.wal.lineage
	if lost && l.wal.lost == 0 {
		l.wal.lost = old
	}
	l.wal.lineage, l.wal.fresh = l.wal.log.Lineage(reason, lost), true
	l.wal.inflightFrom, l.wal.lastCovers = 0, 0
}

// walDecided logs what became of the lost (or adopted) lineage.
func (l *roomLoop) walDecided(outcome string) {
	if l.wal.log == nil {
		return
	}
	for _, lin := range []uint64{l.wal.lost, l.wal.adopted} {
		if lin != 0 {
			l.wal.log.Decided(lin, outcome)
		}
	}
	l.wal.lost, l.wal.adopted = 0, 0
}

// walPending reports a lost lineage whose rescue is not decided yet.
func (l *roomLoop) walPending() bool { return l.wal.lost != 0 || l.wal.adopted != 0 }

// closeWAL hands the log back when the room stops: kept while it holds work at risk (unsaved
// changes, a rescue not decided), removed otherwise.
func (l *roomLoop) closeWAL() {
	if l.wal.log == nil {
		return
	}
	keep := l.workAtRisk() || l.walPending()
	l.wal.log.Close(keep)
	if keep {
		l.log.Info().Bool("rescue_pending", l.walPending()).Msg("the room closed with work the server may not have saved: its journal is kept")
	}
}

func isEmptyUpdate(b []byte) bool { return len(b) == 2 && b[0] == 0 && b[1] == 0 }

// replayed is a lineage of the journal replayed into a history of the versions it held, with its
// last state: what a replica held before the sidecar restarted.
type replayed struct {
	hist    *ydoc.History
	state   []byte
	updates int
	err     error
}

// replayJournal replays a lineage of the log, from its first base, into a ydoc.History (every
// version it went through, and its last state). It runs on the dial's helper goroutine.
func replayJournal(ctx context.Context, wal DocLog, lineage uint64, kind ydoc.Kind, opts ydoc.MatchOptions, log zerolog.Logger) *replayed {
	h, err := wal.History(ctx, lineage, false)
	if err != nil {
		return &replayed{err: err}
	}
	hist, err := ydoc.NewHistory(kind, opts, log)
	if err != nil {
		return &replayed{err: err}
	}
	if h.Base != nil {
		if err := hist.Apply(h.Base); err != nil {
			return &replayed{err: fmt.Errorf("replay the journal's base: %w", err)}
		}
	}
	for i, u := range h.Updates {
		if err := ctx.Err(); err != nil {
			return &replayed{err: err}
		}
		if err := hist.Apply(u); err != nil {
			return &replayed{err: fmt.Errorf("replay the journal's update %d: %w", h.Seqs[i], err)}
		}
	}
	state, err := hist.State()
	if err != nil {
		return &replayed{err: err}
	}
	return &replayed{hist: hist, state: state, updates: len(h.Updates)}
}

// heldByServer reports whether the server itself went through exactly this content, as the log
// shows it: the lineage's base, then only the updates the server sent — its own, its peers', and
// its echoes of the replica's own — in the order it broadcast them. Those are the states the
// server held, and a save of the server is one of them; the replica, which applies its own edits
// before it hears of others', never held some of them (an agent and a human changing the document
// at once: ydoc.History's known limit). It runs on the dial's helper goroutine, after a loss.
func heldByServer(ctx context.Context, wal DocLog, lineage uint64, file ydoc.Snapshot, opts ydoc.MatchOptions, log zerolog.Logger) (bool, error) {
	h, err := wal.History(ctx, lineage, false)
	if err != nil {
		return false, err
	}
	hist, err := ydoc.NewHistory(file.Kind, opts, log)
	if err != nil {
		return false, err
	}
	if h.Base != nil {
		if err := hist.Apply(h.Base); err != nil {
			return false, err
		}
		if hist.Held(file) {
			return true, nil
		}
	}
	for i, u := range h.Updates {
		if i < len(h.Local) && h.Local[i] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if err := hist.Apply(u); err != nil {
			return false, err
		}
		if hist.Held(file) {
			return true, nil
		}
	}
	return false, nil
}

// adoptReplayed installs the replayed journal as the replica the server lost (the next sync
// rescues it, decided like after a server loss) and its history as the replica's. A journal
// that cannot be read back is given up, and the agents are told.
func (l *roomLoop) adoptReplayed() {
	r := l.replay
	l.replay = nil
	if !l.adoptPending {
		return
	}
	err := r.err
	if err == nil {
		err = l.sess.AdoptLost(r.state)
	}
	if err == nil {
		err = l.sess.KeepHistory(r.hist)
	}
	lineage := l.wal.adopted
	if err != nil {
		l.adoptPending, l.wal.adopted = false, 0
		l.log.Error().Err(err).Uint64(logfield.Lineage, lineage).Msg("the journal holds work the server may not have saved, but it cannot be read back")
		l.wal.log.Decided(lineage, "unreadable: "+err.Error())
		now := l.r.opts.Now()
		l.r.emit(Event{Path: l.r.opts.Path, Kind: EventNotice, Time: now, Notice: &Notice{
			Time: now, Path: l.r.opts.Path, Kind: "not_restored",
			Message: fmt.Sprintf("the sidecar restarted with changes to %s the server may not have saved, but its journal could not be read back (%v): they are not restored", l.r.opts.Path, err),
		}})
		return
	}
	l.log.Info().Uint64(logfield.Lineage, lineage).Int("updates", r.updates).Int("versions", r.hist.Versions()).
		Msg("adopted the journal's replica as the one the server lost: the file read before joining decides its rescue")
}

// keepHistory makes the session keep the history of the replica's versions (rescue.go), once the
// engine is known (outputs are left out of comparisons where the room holds placeholders).
func (l *roomLoop) keepHistory(e Engine) {
	if l.sess.History() != nil || l.r.opts.Fork != "" || l.r.opts.Transient != "" {
		return
	}
	h, err := ydoc.NewHistory(l.r.opts.Kind, ydoc.MatchOptions{IgnoreOutputs: e.OutputPlaceholders}, l.log)
	if err == nil {
		err = l.sess.KeepHistory(h)
	}
	if err != nil {
		l.log.Warn().Err(err).Msg("the replica's history is not kept: a rescue cannot be decided by content")
	}
}

// lostKept tells the agents that a room failed for good while a lost replica waited for its
// rescue: the replica stays in the journal (the log is kept), for the room's next start.
func (l *roomLoop) lostKept(cause error) {
	where := "in the sidecar's memory (no --state-dir), until the sidecar stops"
	if info := l.r.logInfo(); info != nil && info.Durable {
		where = "in the sidecar's journal on disk"
	}
	now := l.r.opts.Now()
	l.log.Warn().Err(cause).Msg("the room failed while a lost replica waited for its rescue: it is kept in the journal")
	l.r.emit(Event{Path: l.r.opts.Path, Kind: EventNotice, Time: now, Notice: &Notice{
		Time: now, Path: l.r.opts.Path, Kind: "rescue_kept",
		Message: fmt.Sprintf("the server lost %s with changes it had not saved, and the room then failed (%v): those changes are kept %s and are brought back when the document is opened again", l.r.opts.Path, cause, where),
	}})
}

// setLog publishes the log for LogInfo.
func (r *Room) setLog(dl DocLog) {
	r.mu.Lock()
	r.wal = dl
	r.mu.Unlock()
}

// LogInfo describes the room's write-ahead log (nil: the room keeps none). It may wait briefly
// for the journal's writer.
func (r *Room) LogInfo() *LogInfo {
	r.mu.Lock()
	dl := r.wal
	r.mu.Unlock()
	if dl == nil {
		return nil
	}
	info := dl.Info()
	return &info
}

func (r *Room) logInfo() *LogInfo { return r.LogInfo() }

// AtRisk reports whether the room holds work the server may not have saved: unsaved changes,
// unconfirmed edits, or a lost replica waiting for its rescue. Such a room is never closed as
// idle.
func (r *Room) AtRisk() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.atRisk
}

// publishRisk records whether work is at risk (for AtRisk).
func (l *roomLoop) publishRisk() {
	risk := l.workAtRisk() || l.walPending() || l.adoptPending
	if risk == l.riskShown {
		return
	}
	l.riskShown = risk
	l.r.mu.Lock()
	l.r.atRisk = risk
	l.r.mu.Unlock()
}
