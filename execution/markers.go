package execution

import (
	"context"
	"sort"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// clearStaleRuns resets cells that another sidecar (or an earlier instance of this one) marked
// running and stopped beating for: it died mid-run. Markers still beating are looked at again
// when they would go stale.
func (x *ClientExecutor) clearStaleRuns(path string) {
	room := x.opts.Manager.Get(path, ydoc.KindNotebook)
	if room == nil {
		return
	}
	ctx, cancel := context.WithTimeout(x.life, 30*time.Second)
	defer cancel()
	foreign := false
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		m, _ := d.State()[runMarkerKey].(map[string]any)
		for _, v := range m {
			if mm, ok := v.(map[string]any); ok && mm["instance"] != x.instance {
				foreign = true
			}
		}
		return nil
	}); err != nil || !foreign {
		return
	}
	// A marker still beating may be a live run of another sidecar, or the last beat of one that
	// just died: the kernel tells them apart (a run in progress keeps it busy).
	idle := x.kernelIdle(ctx, path)
	// The edit may run again after a reset, after Apply returned (ydoc.EditFunc): it judges the
	// markers it finds and hands nothing out; when to look again is judged after it, from the
	// markers the room then holds.
	_, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
		markers := runMarkers(tx)
		stale, _ := x.judgeMarkers(markers, x.now(), idle)
		if len(stale) == 0 {
			return nil
		}
		for _, cellID := range stale {
			if i := tx.CellIndex(cellID); i >= 0 {
				if c, err := tx.Cell(i); err == nil && c.Type == ydoc.CellCode && c.ExecutionState == "running" {
					if err := tx.SetExecutionState(i, "idle"); err != nil {
						return err
					}
				}
			}
			delete(markers, cellID)
		}
		return setRunMarkers(tx, markers)
	}))
	if err != nil && x.life.Err() == nil {
		x.log.Warn().Err(err).Str(logfield.Path, path).Msg("could not clear runs left by an earlier sidecar")
		return
	}
	var next time.Time
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		now := x.now()
		stale, soon := x.judgeMarkers(markersOf(d.State()[runMarkerKey]), now, idle)
		if len(stale) > 0 && (soon.IsZero() || now.Add(markerSettle).Before(soon)) {
			soon = now.Add(markerSettle) // cleared in a replica that was reset since: look again
		}
		next = soon
		return nil
	}); err != nil {
		return
	}
	if !next.IsZero() {
		x.recheckAt(path, next)
	}
}

// judgeMarkers sorts other sidecars' run markers at now: stale ones (their run is over: no beat
// for StaleRun, or an idle kernel and old enough to judge) to clear, and for the others the
// earliest time they could go stale (zero when there are none). idle: the notebook's kernel runs
// nothing.
func (x *ClientExecutor) judgeMarkers(markers map[string]map[string]any, now time.Time, idle bool) (stale []string, next time.Time) {
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for cellID, m := range markers {
		if m["instance"] == x.instance {
			continue
		}
		if beat := markerBeat(m); !beat.IsZero() && now.Sub(beat) < x.opts.StaleRun {
			since := markerSince(m)
			if !idle || now.Sub(since) < markerSettle {
				// alive, or too young to judge (the request may not have reached the kernel)
				later(beat.Add(x.opts.StaleRun))
				if settled := since.Add(markerSettle); settled.After(now) {
					later(settled)
				} else {
					later(now.Add(markerSettle))
				}
				continue
			}
		}
		stale = append(stale, cellID)
	}
	sort.Strings(stale)
	return stale, next
}

// recheckAt looks at a notebook's run markers again at t (one pending recheck per notebook).
func (x *ClientExecutor) recheckAt(path string, t time.Time) {
	x.mu.Lock()
	if x.rechecks[path] {
		x.mu.Unlock()
		return
	}
	x.rechecks[path] = true
	x.mu.Unlock()
	x.goTracked(func() {
		timer := time.NewTimer(t.Sub(x.now()) + 100*time.Millisecond)
		defer timer.Stop()
		select {
		case <-x.life.Done():
		case <-timer.C:
		}
		x.mu.Lock()
		delete(x.rechecks, path)
		x.mu.Unlock()
		if x.life.Err() == nil {
			x.clearStaleRuns(path)
		}
	})
}

// markerSettle is how old a marker must be before an idle kernel proves its run over.
const markerSettle = 5 * time.Second

// kernelIdle reports whether the notebook's kernel runs nothing (or there is none); false when
// the server cannot say.
func (x *ClientExecutor) kernelIdle(ctx context.Context, path string) bool {
	sessions, err := x.opts.Kernels.Sessions(ctx)
	if err != nil {
		return false
	}
	for _, s := range sessions {
		if s.Path == path && s.KernelID != "" {
			state, err := x.opts.Kernels.KernelState(ctx, s.KernelID)
			if bridge.IsNotFound(err) {
				return true
			}
			return err == nil && state != "busy"
		}
	}
	return true
}

// markerSince is when a run marker was written.
func markerSince(m map[string]any) time.Time {
	if v, ok := m["since"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// markerBeat is when a run marker was last refreshed (its start, for markers without beats).
func markerBeat(m map[string]any) time.Time {
	for _, key := range []string{"beat", "since"} {
		if v, ok := m[key].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

func runMarkers(tx *ydoc.Txn) map[string]map[string]any {
	v, _ := tx.StateValue(runMarkerKey)
	return markersOf(v)
}

// markersOf reads the run markers from the document state's value.
func markersOf(v any) map[string]map[string]any {
	out := map[string]map[string]any{}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			if mm, ok := x.(map[string]any); ok {
				out[k] = mm
			}
		}
	}
	return out
}

func setRunMarkers(tx *ydoc.Txn, markers map[string]map[string]any) error {
	if len(markers) == 0 {
		tx.DeleteState(runMarkerKey)
		return nil
	}
	v := make(map[string]any, len(markers))
	for k, m := range markers {
		v[k] = m
	}
	return tx.SetState(runMarkerKey, v)
}
