package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The crash rescue. When jupyter-server loses a room (it restarted: a new session id, or it
// closed our session with 1003), it rebuilds the room from the file, without whatever it had not
// saved. The replica still holds all of it (ydoc.Replica.ResetServerLost); after the sidecar
// itself restarted, its journal does (journal.go, Replica.AdoptLost). What becomes of it is
// decided by the file's content, read before joining the rebuilt room, against the versions the
// replica held (ydoc.History, fed by the session and by the journal's replay):
//
//   - the replica held exactly this content, or the server did (its states replayed from the
//     journal in the order it broadcast them: serverOrder): the file is a save of the server
//     (reported or not, whole) — the room is restored to the replica, by the original item ids
//     where the rebuild allows it (RescueFrom);
//   - it never held it: the file was changed outside Jupyter — the file wins, and the replica's
//     changes since the last save are merged under it three-way (FileWins), every agent told
//     what was dropped (a Notice);
//   - the file could not be read: only the agents' own edits are re-run (NoRescue), and the lost
//     replica stays in the journal.
//
// The same on every engine: no file hash is needed (jupyter-server-documents publishes none, and
// jupyter-collaboration none for a save a keystroke cancelled mid-write).

// FileReader reads a document's file as jupyter-server has it, with the hash the server
// publishes in a room's state after saving it (the contents API's hash of the file). A Jupyter
// may implement it; without it a lost room's replica is not brought back (the agents' edits are
// still re-run).
type FileReader interface {
	ReadFile(ctx context.Context, path string, kind ydoc.Kind, content bool) (FileContent, error)
}

// FileContent is a file's hash and, when asked for, its content.
type FileContent struct {
	Hash string
	Doc  *ydoc.Snapshot // nil unless content was asked for
}

// Notice is something the agents must be told about a document, once: unsaved work a server
// crash lost and that could not be restored, an edit confirmed earlier that could not be
// re-applied after the room was rebuilt.
type Notice struct {
	Seq     uint64             `json:"-"`
	Time    time.Time          `json:"time"`
	Path    string             `json:"path"`
	Kind    string             `json:"kind"` // rescued, not_restored, file_wins, rescue_kept, outside_change, reapply_failed; withdrawn, unconfirmed; restarted, lost, replaced
	Message string             `json:"message"`
	Details []string           `json:"details,omitempty"`
	Rescue  *ydoc.RescueReport `json:"-"`
	// For MCP logging (notices.go): how much it matters and what it is about (LevelOf and
	// TopicOf fill them in for the kinds above), the document's kind, small structured facts
	// (ids, counts: never content), and whether it is for the log only, not for the board of
	// notices that ride on tool results.
	Level   NoticeLevel    `json:"-"`
	Topic   string         `json:"-"`
	DocKind string         `json:"-"`
	Data    map[string]any `json:"-"`
	LogOnly bool           `json:"-"`
}

// noticeBoard keeps a manager's recent notices (bounded in number and age).
type noticeBoard struct {
	mu   sync.Mutex
	seq  uint64
	list []Notice
}

const (
	maxNotices   = 64
	noticeMaxAge = time.Hour
)

func (b *noticeBoard) add(n Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	n.Seq = b.seq
	b.list = append(b.list, n)
	if len(b.list) > maxNotices {
		b.list = b.list[len(b.list)-maxNotices:]
	}
}

// since returns the notices after seq (not older than noticeMaxAge) and the latest seq.
func (b *noticeBoard) since(seq uint64, now time.Time) ([]Notice, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Notice
	for _, n := range b.list {
		if n.Seq > seq && now.Sub(n.Time) < noticeMaxAge {
			out = append(out, n)
		}
	}
	return out, b.seq
}

// fileReader is the server's FileReader for a document room (nil for forks, awareness-only rooms
// and servers without one).
func (l *roomLoop) fileReader() FileReader {
	if l.r.opts.Fork != "" || l.r.opts.Transient != "" {
		return nil
	}
	fr, _ := l.r.opts.Jupyter.(FileReader)
	return fr
}

// decideRescue tells the session, right after ResetServerLost (or with an adopted replica),
// what to do with the lost replica: by the file's content, read before joining (see above).
func (l *roomLoop) decideRescue(file *FileContent, ferr error) {
	l.adoptPending = false
	h := l.replica.History()
	decision := ""
	switch {
	case l.fileReader() == nil:
		decision = "no file reader"
		l.replica.NoRescue("the server does not give the file's content, so it cannot be compared with the replica")
	case ferr != nil:
		decision = "file unreadable"
		l.replica.NoRescue("the file could not be read: " + ferr.Error())
	case file == nil || file.Doc == nil:
		decision = "file not read"
		l.replica.NoRescue("the file was not read")
	case h == nil:
		decision = "no history"
		l.replica.NoRescue("the replica's history is not kept, so the file cannot be compared with it")
	case h.Held(*file.Doc):
		decision = "restore"
		l.replica.RescueFrom(*file.Doc)
	case l.serverHeld:
		decision = "restore (a state the server held)"
		l.replica.RescueFrom(*file.Doc)
	default:
		decision = "file wins"
		l.replica.FileWins(h.LastSaved(), *file.Doc, "the file holds content the replica never held: it was changed outside Jupyter (or while the sidecar was away), so the file's content wins, merged with the replica's changes since the last save")
	}
	got := ""
	if file != nil {
		got = file.Hash
	}
	versions := 0
	if h != nil {
		versions = h.Versions()
	}
	l.log.Info().Str("decision", decision).Bool("file_read", file != nil && ferr == nil).Str(logfield.FileHash, short(got)).
		Int("versions_held", versions).Msg("the server lost the room: deciding by the file's content how to bring back the replica")
}

// strayWatchFor is how long after a rescue (or the last stray keystroke moved) typing into the
// cells it replaced is followed: peers receive the rescue within a round trip; a few seconds
// cover a loaded machine.
const strayWatchFor = 10 * time.Second

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// workAtRisk reports whether the replica holds changes the server has not saved (or edits it has
// not confirmed): a server that died takes them with it.
func (l *roomLoop) workAtRisk() bool {
	return !l.guard.unsavedSince.IsZero() || l.replica.Unsaved() > 0 || l.replica.Pending() > 0
}

// onRescue reports what the session did with a lost replica.
func (l *roomLoop) onRescue(rep *ydoc.RescueReport, now time.Time) {
	outcome := "restored"
	if !rep.Restored {
		outcome = "not restored: " + rep.Reason
	}
	l.walDecided(outcome)
	l.r.mu.Lock()
	l.r.info.LastRescue, l.r.info.LastRescueAt = rep, now
	l.r.mu.Unlock()
	ev := l.log.Info()
	kind := "rescued"
	switch {
	case rep.FileWins:
		// The file was changed outside: every agent hears it, whatever was dropped.
		ev = l.log.Warn()
		kind = "file_wins"
	case !rep.Restored || !rep.Lossless():
		ev = l.log.Warn()
		kind = "not_restored"
	}
	ev.Bool("restored", rep.Restored).Str(logfield.Reason, rep.Reason).Int("inserted", rep.Stats.Inserted).
		Int("deleted", rep.Stats.Deleted).Int("moved", rep.Stats.Moved).Int("changed", rep.Stats.Changed).
		Int("conflicts", rep.Conflicts).Int("replayed", rep.Replayed).Int("failed", rep.Failed).
		Strs("not_restored", rep.NotRestored).Str("reconsidered", rep.Reconsidered).
		Str("method", string(rep.Method)).Str("method_reason", rep.MethodReason).Bool("stale_merge", rep.StaleMerge).
		Int("items", rep.Items).Int("superseded", rep.Superseded).Strs("brought", rep.Brought).
		Str("room_state", rep.RoomState).Str("lost_state", rep.LostState).Msg(rep.Summary())
	if rep.Restored && !rep.Changed && rep.Lossless() && !rep.FileWins {
		return // nothing was missing: nothing to tell
	}
	details := append([]string(nil), rep.NotRestored...)
	if rep.Omitted > 0 {
		details = append(details, fmt.Sprintf("and %d more", rep.Omitted))
	}
	l.r.emit(Event{Path: l.r.opts.Path, Kind: EventNotice, Time: now, Notice: &Notice{
		Time: now, Path: l.r.opts.Path, Kind: kind, Message: rep.Summary(), Details: details, Rescue: rep,
	}})
}

// reapplyFailed reports an edit whose caller was answered long ago (it was confirmed) and that
// could not be applied again on a rebuilt room.
func (l *roomLoop) reapplyFailed(d ydoc.EditResult, now time.Time) {
	l.log.Warn().Uint64("edit", d.ID).Err(d.Err).Msg("an edit confirmed earlier could not be re-applied after the room was rebuilt")
	l.r.emit(Event{Path: l.r.opts.Path, Kind: EventNotice, Time: now, Notice: &Notice{
		Time: now, Path: l.r.opts.Path, Kind: "reapply_failed",
		Message: "an edit confirmed earlier could not be applied again after jupyter-server rebuilt the room: " + d.Err.Error(),
	}})
}
