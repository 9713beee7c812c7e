package ydoc

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// Snapshot is a document's content at one moment: a notebook, or a text file's text.
type Snapshot struct {
	Kind     Kind
	Notebook Notebook // KindNotebook
	Text     string   // KindText
}

// Snapshot returns a copy of the document's content.
func (d *Doc) Snapshot() (Snapshot, error) {
	if d.kind == KindText {
		t, err := d.Text()
		return Snapshot{Kind: KindText, Text: t}, err
	}
	nb, err := d.Notebook()
	return Snapshot{Kind: KindNotebook, Notebook: nb}, err
}

// RescueReport says what a session did with the replica a lost server room held (see
// Session.ResetServerLost, RescueFrom, NoRescue).
type RescueReport struct {
	// Restored: the room was brought back to the lost replica, merged with what was changed on
	// the rebuilt room since (Stats, Conflicts). Otherwise Reason says why not, and only the
	// agents' edits were re-run (Replayed, of which Failed could not be).
	Restored  bool         `json:"restored"`
	Changed   bool         `json:"changed"` // the rescue changed the rebuilt room (something was missing)
	Reason    string       `json:"reason,omitempty"`
	Stats     RestoreStats `json:"stats"`
	Conflicts int          `json:"conflicts,omitempty"`
	Replayed  int          `json:"replayed,omitempty"`
	Failed    int          `json:"failed,omitempty"`
	// NotRestored lists what the lost replica held that the room does not hold now (at most
	// maxNotRestored lines; Omitted counts the rest).
	NotRestored []string `json:"not_restored,omitempty"`
	Omitted     int      `json:"omitted,omitempty"`
}

const maxNotRestored = 50

func (r *RescueReport) add(line string) {
	if len(r.NotRestored) >= maxNotRestored {
		r.Omitted++
		return
	}
	r.NotRestored = append(r.NotRestored, line)
}

// Lossless reports whether everything the lost replica held is in the room.
func (r *RescueReport) Lossless() bool { return len(r.NotRestored) == 0 && r.Omitted == 0 }

// Summary is one sentence for logs and agents.
func (r *RescueReport) Summary() string {
	if r.Restored {
		if r.Lossless() {
			return "jupyter-server lost the room (it restarted before saving); every change that had reached the sidecar was restored"
		}
		return fmt.Sprintf("jupyter-server lost the room (it restarted before saving); the changes that had reached the sidecar were restored except %d changed again since the restart (the later change was kept)", len(r.NotRestored)+r.Omitted)
	}
	why := r.Reason
	if why == "" {
		why = "the file could not be checked"
	}
	if r.Lossless() {
		return "jupyter-server lost the room; nothing was lost (" + why + ")"
	}
	return fmt.Sprintf("jupyter-server lost the room and the unsaved changes were not restored because %s; the agents' own edits were re-applied (%d, %d failed); not restored: %s",
		why, r.Replayed, r.Failed, strings.Join(r.NotRestored, "; "))
}

// compare lists what lost holds that doc does not (after a partial rescue).
func (r *RescueReport) compare(lost Snapshot, doc *Doc) {
	now, err := doc.Snapshot()
	if err != nil {
		r.add("the room could not be read to compare: " + err.Error())
		return
	}
	if lost.Kind == KindText {
		if lost.Text != now.Text {
			b, n := []rune(lost.Text), []rune(now.Text)
			r.add(fmt.Sprintf("the text differs from the sidecar's copy (%d characters then, %d now)", len(b), len(n)))
		}
		return
	}
	idx := cellIndex(now.Notebook)
	for _, c := range lost.Notebook.Cells {
		i, ok := idx[c.ID]
		switch {
		case !ok:
			r.add(fmt.Sprintf("cell %s (%s) is gone", c.ID, firstLine(c.Source)))
		case now.Notebook.Cells[i].Source != c.Source:
			r.add(fmt.Sprintf("cell %s: source differs", c.ID))
		case !sameCell(now.Notebook.Cells[i], c):
			r.add(fmt.Sprintf("cell %s: type, metadata or outputs differ", c.ID))
		}
	}
	lostIDs := cellIndex(lost.Notebook)
	for _, c := range now.Notebook.Cells {
		if _, ok := lostIDs[c.ID]; !ok {
			r.add(fmt.Sprintf("cell %s (%s) is back or new", c.ID, firstLine(c.Source)))
		}
	}
	if !nearJSON(lost.Notebook.Metadata, now.Notebook.Metadata) {
		r.add("notebook metadata differs")
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	if s == "" {
		return "empty"
	}
	return fmt.Sprintf("%q", s)
}

// lostReplica is the replica a lost server room held, kept until the next sync decides what
// becomes of it: its CRDT state (a Doc that is read, never written) and its content.
type lostReplica struct {
	doc  *Doc
	snap Snapshot
}

// scratchClientID is the client id of documents that are only ever read (a lost replica adopted
// from its state, a history replayed from a log): they never create an item, so their id never
// reaches a peer.
const scratchClientID = 0xffffffff

// newScratchDoc creates an empty read-only document (see scratchClientID).
func newScratchDoc(kind Kind, log zerolog.Logger) (*Doc, error) {
	return NewDoc(kind, scratchClientID, log)
}
