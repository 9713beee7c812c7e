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
// marker that carries no new hash right after content changes by a client that is not in the
// room (the server itself), and tells the agents which of their unsaved changes the reload
// replaced: the cells the agent inserted or changed since the last save that the reload changed
// or removed, or the text.

// maxWatched bounds the cells remembered per room.
const maxWatched = 4096

// outsideWatch is what the room remembers to recognise a reload over the agent's unsaved work
// (owned by the room goroutine).
type outsideWatch struct {
	own       map[string]bool // cells the agent inserted or changed since the last save
	ownText   bool            // the agent changed the text since the last save
	foreignAt time.Time       // the last content change by a client not in the room
	touched   map[string]bool // cells such changes changed or removed since the last save
	text      bool            // such a change changed the text
	hash      string          // the state's hash before the latest change
}

// reloadWindow is how soon after content changes by the server itself a save marker without a
// new hash is taken for the end of a reload.
const reloadWindow = 3 * time.Second

// watchChange records a document change for watchSaved.
func (l *roomLoop) watchChange(c ydoc.Change, now time.Time) {
	w := &l.outside
	if !contentChanged(c) || (!l.ready && !c.Local) {
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
	if !l.foreign(c.Clients) {
		return
	}
	w.foreignAt = now
	if w.touched == nil {
		w.touched = map[string]bool{}
	}
	for _, id := range c.Deleted {
		if len(w.touched) < maxWatched {
			w.touched[id] = true
		}
	}
	for _, cc := range c.Cells {
		// Sources only: jupyter-server-documents itself rewrites outputs (placeholders).
		if len(w.touched) < maxWatched && slices.Contains(cc.Fields, "source") {
			w.touched[cc.ID] = true
		}
	}
	w.text = w.text || c.Text
}

// foreign reports whether a remote change came (also) from a client that is not in the room: not
// a collaborator in awareness, not this replica. Deletions carry no client: a change that only
// deletes counts as foreign too.
func (l *roomLoop) foreign(clients []uint64) bool {
	if len(clients) == 0 {
		return true
	}
	users := l.aw.Users()
	own := l.sess.Doc().ClientID()
	for _, id := range clients {
		if _, ok := users[id]; !ok && id != own {
			return true
		}
	}
	return false
}

// watchSaved runs at a save marker: a marker without a new hash right after the server itself
// changed the content is a reload of the file, and the agents hear which of their unsaved changes
// it replaced. Either way the file now holds the room's content: the watch starts over.
func (l *roomLoop) watchSaved(markerHash string, now time.Time) {
	w := &l.outside
	reload := markerHash == w.hash && !w.foreignAt.IsZero() && now.Sub(w.foreignAt) <= reloadWindow
	if reload {
		var dropped []string
		for id := range w.own {
			if w.touched[id] {
				dropped = append(dropped, id)
			}
		}
		sort.Strings(dropped)
		if len(dropped) > 0 || (w.ownText && w.text) {
			l.announceReload(dropped, now)
		} else {
			l.log.Info().Msg("the server reloaded the file over the room (changed outside Jupyter); none of the agent's unsaved changes were replaced")
		}
	}
	*w = outsideWatch{hash: markerHash}
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
