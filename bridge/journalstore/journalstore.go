// Package journalstore adapts the journal package's store to what bridge's rooms need
// (bridge.Journal): cmd wires it, and tests use it in memory.
package journalstore

import (
	"context"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/journal"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Journal is a journal.Store seen as a bridge.Journal.
type Journal struct{ S *journal.Store }

var _ bridge.Journal = Journal{}

// New wraps a store.
func New(s *journal.Store) Journal { return Journal{S: s} }

// Open implements bridge.Journal.
func (j Journal) Open(ctx context.Context, path string, kind ydoc.Kind) (bridge.DocLog, error) {
	l, err := j.S.Open(ctx, path, kind.String())
	if err != nil {
		return nil, err
	}
	return docLog{l}, nil
}

// AtRisk implements bridge.Journal.
func (j Journal) AtRisk() ([]bridge.JournalDoc, error) {
	docs, err := j.S.AtRisk()
	if err != nil {
		return nil, err
	}
	out := make([]bridge.JournalDoc, 0, len(docs))
	for _, d := range docs {
		kind := ydoc.KindNotebook
		switch d.Kind {
		case ydoc.KindNotebook.String():
		case ydoc.KindText.String():
			kind = ydoc.KindText
		default:
			continue
		}
		out = append(out, bridge.JournalDoc{Path: d.Path, Kind: kind, Bytes: d.Bytes})
	}
	return out, nil
}

// Stats implements bridge.Journal.
func (j Journal) Stats() bridge.JournalStats {
	st := j.S.Stats()
	return bridge.JournalStats{
		Durable: st.Durable, Logs: st.Logs, Bytes: st.Bytes, Records: st.Records, AppendedBytes: st.AppendedBytes,
		Syncs: st.Syncs, SyncSeconds: st.SyncSeconds, SyncBuckets: st.SyncBuckets, SyncCounts: st.SyncCounts,
		Compactions: st.Compactions, Truncated: st.Truncated, Dropped: st.Dropped, Errors: st.Errors, LastError: st.LastError,
	}
}

type docLog struct{ l *journal.Log }

var _ bridge.DocLog = docLog{}

func (d docLog) Lineage(reason string, lost bool) uint64 { return d.l.Lineage(reason, lost) }

func (d docLog) Update(update []byte, flags byte) uint64 {
	var f byte
	if flags&bridge.LogLocal != 0 {
		f |= journal.FlagLocal
	}
	if flags&bridge.LogContent != 0 {
		f |= journal.FlagContent
	}
	if flags&bridge.LogFull != 0 {
		f |= journal.FlagFull
	}
	return d.l.Update(update, f)
}

func (d docLog) Saved(covers uint64, hash string)       { d.l.Saved(covers, hash) }
func (d docLog) Base(state []byte)                      { d.l.Base(state) }
func (d docLog) Decided(lineage uint64, outcome string) { d.l.Decided(lineage, outcome) }
func (d docLog) NeedBase() bool                         { return d.l.NeedBase() }
func (d docLog) Seq() uint64                            { return d.l.Seq() }
func (d docLog) Adoptable() uint64                      { return d.l.Adoptable() }
func (d docLog) Close(keep bool)                        { d.l.Close(keep) }

func (d docLog) History(ctx context.Context, lineage uint64, latest bool) (bridge.LogHistory, error) {
	h, err := d.l.History(ctx, lineage, latest)
	local := make([]bool, len(h.Flags))
	for i, f := range h.Flags {
		local[i] = f&journal.FlagLocal != 0
	}
	return bridge.LogHistory{Lineage: h.Lineage, Base: h.Base, Updates: h.Updates, Seqs: h.Seqs, Saves: h.Saves, Local: local, SaveHashes: h.SaveHashes}, err
}

func (d docLog) Info() bridge.LogInfo {
	in := d.l.Info()
	return bridge.LogInfo{Bytes: in.Bytes, Records: in.Records, Pending: in.Pending, Lineage: in.Lineage, Seq: in.Seq,
		SyncedSeq: in.SyncedSeq, LastSynced: in.LastSynced, AtRisk: in.AtRisk, Durable: in.Durable, Dropped: in.Dropped, Err: in.Err}
}
