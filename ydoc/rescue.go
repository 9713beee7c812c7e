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

// RestoreMethod says how a restore brought the lost replica back.
type RestoreMethod string

const (
	// RestoredByIDs: the lost replica's own items were applied to the rebuilt room and the
	// rebuild's copies of what they supersede deleted: a peer that merges its old copy of the
	// room (a JupyterLab tab reconnecting) brings nothing new.
	RestoredByIDs RestoreMethod = "ids"
	// RestoredByContent: the room was edited to the lost replica's content under new ids
	// (MethodReason says why not by id).
	RestoredByContent RestoreMethod = "content"
)

// RescueReport says what a replica did with the document a lost server room held (see
// Replica.ResetServerLost, AdoptLost, RescueFrom, FileWins, NoRescue).
type RescueReport struct {
	// Restored: the lost replica's changes were brought back onto the room, merged with what
	// was changed on the rebuilt room since (Stats, Conflicts) — or, with FileWins, merged
	// under the file. Otherwise Reason says why not, and only the agents' edits were re-run
	// (Replayed, of which Failed could not be).
	Restored bool   `json:"restored"`
	Changed  bool   `json:"changed"` // the rescue changed the rebuilt room (something was missing)
	Reason   string `json:"reason,omitempty"`
	// FileWins: the file held content the replica never held (changed outside the server); the
	// replica's changes since the last save were merged under it, the file winning every
	// conflict; Reason says why, NotRestored what of the replica's was dropped.
	FileWins bool `json:"file_wins,omitempty"`
	// Reconsidered says why a rescue decided as FileWins restored instead: the room was rebuilt
	// from a version the replica held (the file held typing saved since; rescue_loaded.go).
	Reconsidered string `json:"reconsidered,omitempty"`
	// Method says how the replica came back; MethodReason why not by id.
	Method       RestoreMethod `json:"method,omitempty"`
	MethodReason string        `json:"method_reason,omitempty"`
	// StaleMerge: a peer (a JupyterLab tab reconnecting with its old document) merged its old
	// copy of the lost room into the rebuilt one under ids the rebuild reused
	// (jupyter-collaboration #621); the room was brought back to the sidecar's copy.
	StaleMerge bool `json:"stale_merge,omitempty"`
	// RoomState and LostState are the state vectors of the rebuilt room at the sync and of the
	// lost replica ("client:clock …"), for logs: who loaded and who merged before the rescue.
	RoomState string `json:"room_state,omitempty"`
	LostState string `json:"lost_state,omitempty"`
	// Items counts the lost replica's items (clock units) applied by id; Superseded the
	// rebuild's copies deleted for them (cells, or runs of text).
	Items      int          `json:"items,omitempty"`
	Superseded int          `json:"superseded,omitempty"`
	Stats      RestoreStats `json:"stats"`
	Conflicts  int          `json:"conflicts,omitempty"`
	Replayed   int          `json:"replayed,omitempty"`
	Failed     int          `json:"failed,omitempty"`
	// Brought lists what the restore brought back or changed in the rebuilt room, one line
	// each (at most maxNotRestored; BroughtOmitted counts the rest).
	Brought        []string `json:"brought,omitempty"`
	BroughtOmitted int      `json:"brought_omitted,omitempty"`
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
	if r.StaleMerge && r.MethodReason == "" { // a heal (Replica.heal), not a rescue
		if !r.Restored {
			return "a peer (a browser tab that reconnected with its old copy) merged the room as it was before jupyter-server lost it, and undoing that failed: " + r.Reason
		}
		return "a peer (a browser tab that reconnected with its old copy) merged the room as it was before jupyter-server lost it, which doubled or scrambled its content; the room was brought back to what it held just before"
	}
	how := ""
	switch r.Method {
	case RestoredByIDs:
		how = " (by their original ids)"
	case RestoredByContent:
		how = " (by content)"
		if r.StaleMerge {
			how = " (by content, over the old copy a browser tab had merged into the rebuilt room)"
		}
	}
	if r.Restored && r.FileWins {
		why := r.Reason
		if why == "" {
			why = "the file changed outside Jupyter"
		}
		if r.Lossless() {
			return "jupyter-server lost the room and " + why + "; the unsaved changes that had reached the sidecar were merged onto the file" + how
		}
		return fmt.Sprintf("jupyter-server lost the room and %s; the unsaved changes that had reached the sidecar were merged onto the file%s, except %d the file changed too (the file's version was kept): %s",
			why, how, len(r.NotRestored)+r.Omitted, strings.Join(r.NotRestored, "; "))
	}
	if r.Restored {
		if r.Lossless() {
			return "jupyter-server lost the room (it restarted before saving); every change that had reached the sidecar was restored" + how
		}
		return fmt.Sprintf("jupyter-server lost the room (it restarted before saving); the changes that had reached the sidecar were restored%s except %d changed again since the restart (the later change was kept)", how, len(r.NotRestored)+r.Omitted)
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

// brought adds a line to Brought.
func (r *RescueReport) brought(line string) {
	if len(r.Brought) >= maxNotRestored {
		r.BroughtOmitted++
		return
	}
	r.Brought = append(r.Brought, line)
}

// listBrought lists what a restore changed: the room before it against doc after it.
func (r *RescueReport) listBrought(before Snapshot, doc *Doc) {
	now, err := doc.Snapshot()
	if err != nil {
		return
	}
	if before.Kind == KindText {
		if before.Text != now.Text {
			r.brought(fmt.Sprintf("the text (%d characters in the rebuilt room, %d restored)", len([]rune(before.Text)), len([]rune(now.Text))))
		}
		return
	}
	idx := cellIndex(before.Notebook)
	for _, c := range now.Notebook.Cells {
		i, ok := idx[c.ID]
		switch {
		case !ok:
			r.brought(fmt.Sprintf("cell %s (%s) brought back", c.ID, firstLine(c.Source)))
		case !sameCell(before.Notebook.Cells[i], c):
			r.brought(fmt.Sprintf("cell %s: %s restored", c.ID, strings.Join(cellDiffFields(before.Notebook.Cells[i], c), ", ")))
		}
	}
	nowIDs := cellIndex(now.Notebook)
	for _, c := range before.Notebook.Cells {
		if _, ok := nowIDs[c.ID]; !ok {
			r.brought(fmt.Sprintf("cell %s (%s) removed", c.ID, firstLine(c.Source)))
		}
	}
	if !nearJSON(before.Notebook.Metadata, now.Notebook.Metadata) {
		r.brought("notebook metadata restored")
	}
}

// cellDiffFields names the fields in which two cells differ.
func cellDiffFields(a, b Cell) []string {
	var f []string
	if a.Type != b.Type {
		f = append(f, "type")
	}
	if a.Source != b.Source {
		f = append(f, "source")
	}
	if !nearJSON(a.Metadata, b.Metadata) {
		f = append(f, "metadata")
	}
	if !equalCount(a.ExecutionCount, b.ExecutionCount) || !nearJSON(outputsJSON(a.Outputs), outputsJSON(b.Outputs)) {
		f = append(f, "outputs")
	}
	if !nearJSON(a.Attachments, b.Attachments) {
		f = append(f, "attachments")
	}
	return f
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

// foreignRoots names a root the document holds that belongs to the other kind ("" when none): a
// state of a notebook applied to a text document, or the reverse.
func (d *Doc) foreignRoots() string {
	other := []string{rootSource}
	if d.kind == KindText {
		other = []string{rootMeta, rootCells}
	}
	found := ""
	_ = d.run(func() error {
		for _, name := range other {
			if t, ok := d.yd.Share[name]; ok && (t.StartItem() != nil || len(t.GetMap()) > 0) {
				found = name
			}
		}
		return nil
	})
	return found
}
