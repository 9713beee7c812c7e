package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Edit tools and idempotent retries. An edit tool is its schema, a builder that decodes the
// arguments into an edit value (ydoc.Edit, with the version the caller read), what the tool does
// once the server holds the edit (move the agent's cursor, run the cells), and a renderer. Every
// edit tool takes an optional request_id: the first call with an id runs; a repeat with the same
// id and the same arguments — after an `unconfirmed`, a timeout or a dropped connection — gets
// the first call's result and applies nothing again. A repeat while the first call still runs
// waits for it; a repeat whose first call left the edit unconfirmed waits for the edit (which
// the room delivers when it reconnects, or brings back in a crash rescue); a repeat whose room
// stopped before confirming runs the edit again by its replay rules (what is already there
// counts as done). Calls that changed nothing (refused, withdrawn) are forgotten: a repeat runs
// afresh. Ids are kept per caller (the token's identity; the local user over stdio) and document
// (and fork), so two agents cannot collide, within bounds: maxRequests ids, each for requestTTL
// after its call.

const (
	maxRequests    = 1000
	requestTTL     = time.Hour
	maxRequestID   = 128 // characters
	requestIDField = "request_id"
)

var requestField = field(requestIDField, str("Your id for this edit (any short string): a retry with the same request_id after an unconfirmed edit, a timeout or a dropped connection returns the first call's result and applies nothing twice."))

// editTool builds an edit from a tool's arguments, and finishes the call once the server holds
// it.
type editTool[A, R any] struct {
	build  func(ctx context.Context, c *call, a A) (bridge.Proposal, error)
	finish func(ctx context.Context, c *call, a A, ed bridge.Edited) R
	render func(c *call, a A, r R) result
	// failed phrases the tool's own failures (nil: the edits' common ones, editError).
	failed func(err error) error
}

// fail phrases an edit's failure: the tool's own words first, then the common ones.
func (t editTool[A, R]) fail(err error, c *call, ed bridge.Edited, requestID string) error {
	if t.failed != nil {
		if e := t.failed(err); e != nil {
			return e
		}
	}
	return editError(err, c, ed, requestID)
}

// handleEdit makes an edit tool's body: decode, build the edit, hand it to the room (once per
// request_id), wait for the server, finish, render.
func handleEdit[A, R any](s *Server, t editTool[A, R]) runner {
	return func(ctx context.Context, c *call) (result, error) {
		var a A
		if err := decodeArgs(c.args, &a); err != nil {
			return result{}, err
		}
		id, _ := c.args[requestIDField].(string)
		if id == "" {
			p, err := t.build(ctx, c, a)
			if err != nil {
				return result{}, err
			}
			pend, err := c.Room.Propose(ctx, p)
			if err != nil {
				return result{}, t.fail(err, c, bridge.Edited{}, "")
			}
			ed, err := pend.Wait(ctx)
			if err != nil {
				return result{}, t.fail(err, c, ed, "")
			}
			return t.render(c, a, t.finish(ctx, c, a, ed)), nil
		}
		if len(id) > maxRequestID {
			return result{}, invalid([]any{requestIDField}, "is %d characters long; keep it under %d", len(id), maxRequestID)
		}
		key := requestKey{who: requesterOf(ctx), path: c.Path, kind: c.Kind, fork: c.Fork, id: id}
		return s.requests.run(ctx, key, fingerprint(c.tool, c.args), func(e *requestEntry) (result, error) {
			if e.pending == nil || lostUnconfirmed(e.pending) {
				if e.pending == nil {
					p, err := t.build(ctx, c, a)
					if err != nil {
						return result{}, err
					}
					e.prop = p
				} else {
					// Its room stopped before the server confirmed it: run it again by its
					// replay rules, from what its first run did.
					ed, _ := e.pending.Result()
					prev := ed.Outcome
					e.prop.Since, e.prop.Replay, e.prop.Prev = "", true, &prev
				}
				pend, err := c.Room.Propose(ctx, e.prop)
				if err != nil {
					return result{}, t.fail(err, c, bridge.Edited{}, id)
				}
				e.pending = pend
			}
			ed, err := e.pending.Wait(ctx)
			if err != nil {
				return result{}, t.fail(err, c, ed, id)
			}
			return t.render(c, a, t.finish(ctx, c, a, ed)), nil
		})
	}
}

// lostUnconfirmed reports an edit whose room stopped with it unconfirmed: it may or may not have
// reached the server.
func lostUnconfirmed(p *bridge.Pending) bool {
	select {
	case <-p.Done():
	default:
		return false
	}
	_, err := p.Result()
	var u *bridge.UnconfirmedError
	return errors.As(err, &u)
}

// requesterOf names the caller for request ids: the token's identity, or "" for the local user.
func requesterOf(ctx context.Context) string {
	if id, ok := auth.IdentityFrom(ctx); ok {
		return "id:" + id.Name
	}
	return ""
}

// fingerprint is a call's tool and arguments without the request id (and presentation options),
// as canonical JSON: a repeat must carry the same.
func fingerprint(tool string, args map[string]any) string {
	rest := make(map[string]any, len(args)+1)
	rest[" tool"] = tool
	for k, v := range args {
		if k != requestIDField && k != "includeSchema" {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest) // map keys sorted
	return string(b)
}

type requestKey struct {
	who, path string
	kind      ydoc.Kind
	fork, id  string
}

// requestEntry is one request id: the call working on it, the edit and its outcome.
type requestEntry struct {
	args    string          // fingerprint of the first call's tool and arguments
	held    chan struct{}   // closed when the call working on it lets go; nil when none does
	prop    bridge.Proposal // the edit, once built
	pending *bridge.Pending // the edit handed to a room
	res     *result         // the first call's result, once it completed
	at      time.Time       // created, or completed
}

// requestStore remembers request ids (see the top of this file).
type requestStore struct {
	mu  sync.Mutex
	by  map[requestKey]*requestEntry
	now func() time.Time
}

func newRequestStore(now func() time.Time) *requestStore {
	return &requestStore{by: map[requestKey]*requestEntry{}, now: now}
}

// run answers a call with a request id: with the first call's result if it completed, after
// waiting for a call still working on it, or by working on it (work) itself.
func (st *requestStore) run(ctx context.Context, key requestKey, args string, work func(*requestEntry) (result, error)) (result, error) {
	e, done, err := st.take(ctx, key, args)
	if err != nil {
		return result{}, err
	}
	if done != nil {
		return *done, nil
	}
	res, err := work(e)
	st.release(key, e, res, err)
	return res, err
}

// take returns the entry to work on (held by the caller until release), or the result of a
// completed first call.
func (st *requestStore) take(ctx context.Context, key requestKey, args string) (*requestEntry, *result, error) {
	for {
		st.mu.Lock()
		st.evict()
		e := st.by[key]
		switch {
		case e == nil:
			e = &requestEntry{args: args, held: make(chan struct{}), at: st.now()}
			st.by[key] = e
			st.mu.Unlock()
			return e, nil, nil
		case e.args != args:
			st.mu.Unlock()
			return nil, nil, &toolError{
				Message: fmt.Sprintf("request_id %q was used for a call with other arguments; nothing was changed. Use a new request_id for a new edit, or repeat the first call exactly", key.id),
				Details: []detail{{Path: []any{requestIDField}, Message: "used for other arguments"}},
			}
		case e.res != nil:
			r := *e.res
			st.mu.Unlock()
			return nil, &r, nil
		case e.held != nil:
			held := e.held
			st.mu.Unlock()
			select {
			case <-held:
				continue
			case <-ctx.Done():
				return nil, nil, failf("the first call with request_id %q is still running (%v); retry with the same request_id to get its result", key.id, ctx.Err())
			}
		default: // an earlier call left it unconfirmed: carry on with it
			e.held = make(chan struct{})
			st.mu.Unlock()
			return e, nil, nil
		}
	}
}

// release lets go of an entry: a completed call's result is kept; an edit on its way is kept for
// a repeat to wait for; a call that changed nothing is forgotten.
func (st *requestStore) release(key requestKey, e *requestEntry, res result, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case err == nil:
		e.res, e.at = &res, st.now()
	case e.pending != nil && (!isDone(e.pending) || lostUnconfirmed(e.pending)):
		e.at = st.now()
	default:
		delete(st.by, key)
	}
	close(e.held)
	e.held = nil
}

func isDone(p *bridge.Pending) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// evict forgets ids older than requestTTL, and the oldest beyond maxRequests (never one a call
// is working on).
func (st *requestStore) evict() {
	now := st.now()
	var idle []requestKey
	for k, e := range st.by {
		if e.held != nil {
			continue
		}
		if now.Sub(e.at) > requestTTL {
			delete(st.by, k)
			continue
		}
		idle = append(idle, k)
	}
	if over := len(st.by) - (maxRequests - 1); over > 0 { // room for one more
		if over > 1 {
			sort.Slice(idle, func(i, j int) bool { return st.by[idle[i]].at.Before(st.by[idle[j]].at) })
		} else if len(idle) > 1 { // the usual case: one goes, the oldest
			oldest := 0
			for i, k := range idle {
				if st.by[k].at.Before(st.by[idle[oldest]].at) {
					oldest = i
				}
			}
			idle[0], idle[oldest] = idle[oldest], idle[0]
		}
		for _, k := range idle[:min(over, len(idle))] {
			delete(st.by, k)
		}
	}
}

// editError phrases an edit's failure for the model. requestID is the call's request id ("" for
// none): an unconfirmed edit is then safe to retry with it.
func editError(err error, c *call, ed bridge.Edited, requestID string) error {
	var (
		inv      *ydoc.InvalidError
		conflict *ydoc.ConflictError
		busy     *ydoc.BusyError
		version  *bridge.VersionError
		unconf   *bridge.UnconfirmedError
	)
	current := map[string]any{"current_version": ed.Version}
	doc := "notebook"
	if c.Kind == ydoc.KindText {
		doc = "document"
	}
	switch {
	case errors.As(err, &inv):
		return invalid(inv.Field, "%s", inv.Msg)
	case errors.As(err, &version):
		if c.Kind == ydoc.KindText {
			return &toolError{Message: fmt.Sprintf("conflict: cannot tell what changed since version %q (%v); re-read the document", version.Version, version.Err), Extra: current}
		}
		return &toolError{Message: fmt.Sprintf("conflict: cannot tell what changed since version %q (%v); re-read the notebook and retry with its version", version.Version, version.Err), Extra: current}
	case errors.As(err, &conflict) && conflict.Text:
		return &toolError{Message: fmt.Sprintf("conflict: the document changed since version %s, so positions may have moved; nothing was modified. Re-read it and retry", conflict.Version), Extra: current}
	case errors.As(err, &conflict) && conflict.Structure:
		return &toolError{Message: fmt.Sprintf("conflict: cells were inserted, deleted or moved since version %s, so the indices you gave may point at other cells; address cells by id or re-read the notebook", conflict.Version), Extra: current}
	case errors.As(err, &conflict):
		list := make([]conflictView, len(conflict.Conflicts))
		names := make([]string, len(conflict.Conflicts))
		for i, k := range conflict.Conflicts {
			list[i] = conflictView{CellID: k.CellID, Index: k.Index, Changed: k.Changed, By: k.By}
			names[i] = k.CellID
			if len(k.By) > 0 {
				names[i] += " (by " + strings.Join(k.By, ", ") + ")"
			}
		}
		return &toolError{
			Message: fmt.Sprintf("conflict: %s changed since you read them; nothing was modified. Re-read the cells and retry", strings.Join(names, ", ")),
			Extra:   map[string]any{"conflicts": list, "current_version": ed.Version},
		}
	case errors.As(err, &busy):
		w := busyWarnings(busy.Cells)
		return &toolError{
			Message: "busy: " + strings.Join(w, "; ") + "; nothing was changed (avoid_busy_cells). Wait, or edit other cells",
			Extra:   map[string]any{"busy_cells": w},
		}
	case errors.As(err, &unconf) && requestID != "":
		return failf("the edit is applied in the sidecar's replica but jupyter-server has not confirmed it yet; it will be delivered when the connection recovers. Retry with the same request_id %q to get its outcome: nothing is applied twice", requestID)
	case errors.As(err, &unconf):
		return failf("the edit is applied in the sidecar's replica but jupyter-server has not confirmed it yet; it will be delivered when the connection recovers. Re-read the %s before retrying to avoid applying it twice (an edit given a request_id can be retried with it safely)", doc)
	}
	return err
}

// conflictView is a cell someone else changed, as the model reads it.
type conflictView struct {
	CellID  string   `json:"cell_id"`
	Index   *int     `json:"index,omitempty"` // nil when the cell is gone
	Changed []string `json:"changed"`
	By      []string `json:"by,omitempty"`
}

// busyWarnings says who is typing in which touched cell.
func busyWarnings(cells []ydoc.BusyCell) []string {
	var out []string
	for _, c := range cells {
		out = append(out, fmt.Sprintf("%s is editing cell %s", strings.Join(c.Names, " and "), c.ID))
	}
	return out
}
