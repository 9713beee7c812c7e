package bridge

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A file changed outside Jupyter while the server runs: jupyter-collaboration notices within its
// poll interval (1 s) and reloads the file over the room (its content set anew by the server's
// own client, then dirty=false without a new hash); jupyter-server-documents does the same in
// place. Unsaved changes in the room are replaced by the file's. The room notices it as a save
// marker that carries no new hash right after a change to sources, text or cells written by the
// marker's own writer (the server's client), and tells the agents which of their unsaved changes
// the reload replaced: the cells the agent inserted or changed since the last save that the
// reload changed or removed, or the text.
//
// Only the latest remote content change before the marker counts, and only when the marker's
// writer made it: the server sends a reload and its marker back to back, while every save is
// marked with dirty=false alone too (jupyter-collaboration under the old hash, before the new
// one; jupyter-server-documents never sets a hash), right after whatever a peer last typed — and
// a peer missing from awareness (after a restart, before it announces itself) looks no different
// from the server. A notebook reload drops the state's hash in its own transaction (jupyter_ydoc's
// setter clears the state's other keys): that marker ends no watch.

// maxWatched bounds the cells remembered per room.
const maxWatched = 4096

// outsideWatch is what the room remembers to recognise a reload over the agent's unsaved work
// (owned by the room goroutine).
type outsideWatch struct {
	own     map[string]bool // cells the agent inserted or changed since the last save
	ownText bool            // the agent changed the text since the last save
	last    remoteChange    // the latest content change by someone else since the last save
	stateBy []uint64        // the clients of the latest remote change to the state (the marker's writer)
	hash    string          // the state's hash before the latest change
	// halfSaved: the last marker was dirty=false alone, which jupyter-collaboration follows
	// with the save's new hash in a transaction of its own.
	halfSaved bool
}

// remoteChange is a content change by someone else: what a reload would have done, if the server
// wrote it.
type remoteChange struct {
	at      time.Time       // zero: none since the last save
	clients []uint64        // who wrote it; none when it only deleted (deletions carry no client)
	sources bool            // it changed sources, the text or the cells, not only outputs or metadata
	touched map[string]bool // cells whose source it changed or which it removed
	text    bool            // it changed the text
}

// reloadWindow is how soon after the server's change a save marker without a new hash is taken
// for the end of a reload (the server sends the two back to back).
const reloadWindow = 3 * time.Second

// deleteWindow is reloadWindow for a change that only deleted: it names no writer, so the marker
// must follow it at once — well within jupyter-collaboration's save delay (1 s by default), which
// parts a save's marker from the last keystroke before it.
const deleteWindow = 500 * time.Millisecond

// watchChange records a document change for watchSaved.
func (l *roomLoop) watchChange(c ydoc.Change, now time.Time) {
	w := &l.outside
	if !l.ready && !c.Local {
		return
	}
	if !contentChanged(c) {
		if !c.Local && len(c.State) > 0 {
			w.stateBy = slices.Clone(c.Clients) // a save marker's writer
		}
		return
	}
	if c.Local {
		if w.own == nil {
			w.own = map[string]bool{}
		}
		for _, id := range c.Inserted {
			if len(w.own) < maxWatched {
				w.own[id] = true
			}
		}
		for _, cc := range c.Cells {
			if len(w.own) < maxWatched && slices.Contains(cc.Fields, "source") {
				w.own[cc.ID] = true
			}
		}
		w.ownText = w.ownText || c.Text
		return
	}
	last := remoteChange{at: now, clients: slices.Clone(c.Clients), text: c.Text,
		sources: c.Text || len(c.Inserted) > 0 || len(c.Deleted) > 0 || c.Moved}
	for _, id := range c.Deleted {
		last.mark(id)
	}
	for _, cc := range c.Cells {
		// Sources only: jupyter-server-documents itself rewrites outputs (placeholders, and
		// what a dead kernel left).
		if slices.Contains(cc.Fields, "source") {
			last.sources = true
			last.mark(cc.ID)
		}
	}
	w.last = last
}

// mark records a cell the change changed the source of or removed.
func (r *remoteChange) mark(id string) {
	if r.touched == nil {
		r.touched = map[string]bool{}
	}
	if len(r.touched) < maxWatched {
		r.touched[id] = true
	}
}

// byServer reports whether the change before a save marker is the server's reload: sources
// changed just now by the marker's writer (by, the clients of the state change), or only
// deleted at once before it.
func (r remoteChange) byServer(by []uint64, now time.Time) bool {
	if r.at.IsZero() || !r.sources {
		return false
	}
	if len(r.clients) == 0 {
		return now.Sub(r.at) <= deleteWindow
	}
	for _, id := range r.clients {
		if !slices.Contains(by, id) {
			return false
		}
	}
	return now.Sub(r.at) <= reloadWindow
}

// watchSaved runs at a save marker: a marker without a new hash right after the server itself
// changed the content is a reload of the file, and the agents hear which of their unsaved changes
// it replaced. Either way the file now holds the room's content: the watch starts over.
func (l *roomLoop) watchSaved(markerHash string, now time.Time) {
	w := &l.outside
	if markerHash == "" && w.hash != "" {
		// No save drops the hash: jupyter_ydoc's notebook setter deletes the state's other keys
		// in the reload's own transaction. Its dirty=false comes next and decides.
		w.hash = ""
		return
	}
	if w.halfSaved && markerHash != "" && markerHash != w.hash {
		// The new hash of the save whose dirty=false came just before: the same save, marked in
		// two transactions. The agent's changes since that first marker are not in the file:
		// they stay watched.
		w.hash, w.halfSaved = markerHash, false
		return
	}
	if markerHash == w.hash && w.last.byServer(w.stateBy, now) {
		var dropped []string
		for id := range w.own {
			if w.last.touched[id] {
				dropped = append(dropped, id)
			}
		}
		sort.Strings(dropped)
		if len(dropped) > 0 || (w.ownText && w.last.text) {
			l.announceReload(dropped, now)
		} else {
			l.log.Info().Msg("the server reloaded the file over the room (changed outside Jupyter); none of the agent's unsaved changes were replaced")
		}
	}
	*w = outsideWatch{hash: markerHash, halfSaved: markerHash == w.hash}
}

func (l *roomLoop) announceReload(cells []string, now time.Time) {
	msg := fmt.Sprintf("%s was changed outside Jupyter and jupyter-server reloaded it over the room: the agent's unsaved changes to the text were replaced by the file's content; re-read the document before editing again", l.r.opts.Path)
	var details []string
	if l.r.opts.Kind == ydoc.KindNotebook {
		msg = fmt.Sprintf("%s was changed outside Jupyter and jupyter-server reloaded it over the room: the agent's unsaved changes to %d cell(s) were replaced or removed by the file's content; re-read the document before editing again", l.r.opts.Path, len(cells))
		for i, id := range cells {
			if i == 20 {
				details = append(details, fmt.Sprintf("and %d more", len(cells)-i))
				break
			}
			details = append(details, "cell "+id+": changed or removed by the reload")
		}
	}
	l.log.Warn().Strs(logfield.Cell, cells).Msg("the server reloaded the file over the room (changed outside Jupyter), replacing the agent's unsaved changes")
	l.r.emit(Event{Path: l.r.opts.Path, Kind: EventNotice, Time: now, Notice: &Notice{
		Time: now, Path: l.r.opts.Path, Kind: "outside_change", Message: msg, Details: slices.Clip(details),
		Level: NoticeWarning, Topic: TopicEdit, DocKind: l.r.opts.Kind.String(), Data: map[string]any{"cells": len(cells)},
	}})
}
