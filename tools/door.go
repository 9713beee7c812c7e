package tools

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The door. Every tool, resource, template, completion, prompt, listing and notification that
// names, reads, changes, opens, closes or reveals a document reaches it through this file, and
// every document passes one check here: mayUse.
//
// Tools declare the argument that names their document (operation.Doc, a docRef). The generic
// handler (operation.go) resolves it to a clean path — a path, a session id, a job id — asks
// mayUse, and joins the room (or the fork the call works in) when the operation says so, all
// before the action runs; an operation whose schema has a document-naming argument it does not
// declare is refused at registration. Resources, prompts and completions resolve their URIs and
// arguments to paths and come through the same methods. Room-wide answers (who is online, recent
// activity, sessions, listings, resources/list, completions, statistics) are built from the
// door's filtered views — liveRooms, peersOf, listDir, fileIDs, jobIDs — so they hold only the
// documents the caller may see. No other file of this package calls the room manager's document
// methods (door_test.go checks).
//
// A refusal says only that the caller may not: it never depends on whether the document
// exists, and names no document the caller did not name itself.

// refKind says how an argument names a document.
type refKind int

const (
	refNotebook refKind = iota + 1 // a notebook path
	refText                        // a text file path
	refAny                         // "notebook:<path>", "editor:<path>", or a path (.ipynb: a notebook)
	refJob                         // an execution job id: the job's notebook
)

// docRef declares, on an operation, the argument that names the document it works on.
type docRef struct {
	Arg      string
	Ref      refKind
	Optional bool // may be omitted: the call then answers for the documents the caller may see
	Open     bool // join the room (the fork's, for forkable operations given fork_id) before the action
	// FromFile: with Open, a notebook whose room is not readable at once may be handed to the
	// action as its file holds it (doc.File), while the room is joined (bridge.OpenForRead).
	FromFile bool
	// Parts are arguments that name something inside that document: forks, versions.
	Parts []string
	// Cells are the arguments that name cells of a notebook, by id or handle (handles.go):
	// "cell_id" (a string or a list of them), "updates[].cell_id" (a field of each item of a list),
	// "expected_source_hashes{}" (an object's keys). The door replaces each handle by the id of the
	// cell it names, or refuses the call when it names none or several.
	Cells []string
}

// docArgs are argument names that name a document, or something inside one. An operation with
// one of them in its schema must declare it in its docRef (checkDoc).
var docArgs = map[string]bool{
	"path": true, "document_path": true, "session_id": true, "file_id": true, "job_id": true, "fork_id": true,
	"cell_id": true, "cell_ids": true, "after_cell_id": true, "before_cell_id": true,
	"suggestion_for_cell": true, "version_id": true,
}

// checkDoc refuses an operation that names a document without declaring it, or declares what it
// does not take.
func (op *operation) checkDoc() error {
	declared := map[string]bool{}
	if op.Doc.Arg != "" {
		if op.Doc.Ref == 0 {
			return fmt.Errorf("tool %s: document argument %q has no kind", op.Name, op.Doc.Arg)
		}
		declared[op.Doc.Arg] = true
	}
	if (len(op.Doc.Parts) > 0 || len(op.Doc.Cells) > 0) && op.Doc.Arg == "" {
		return fmt.Errorf("tool %s: parts %v %v of no document", op.Name, op.Doc.Parts, op.Doc.Cells)
	}
	for _, p := range op.Doc.Parts {
		declared[p] = true
	}
	for _, p := range op.Doc.Cells {
		declared[strings.TrimSuffix(strings.SplitN(p, "[", 2)[0], "{}")] = true
	}
	if op.Forkable {
		if op.Doc.Arg == "" {
			return fmt.Errorf("tool %s: forkable without a document", op.Name)
		}
		declared["fork_id"] = true
	}
	for _, p := range op.Input.Properties {
		if docArgs[p.Name] && !declared[p.Name] {
			return fmt.Errorf("tool %s: argument %q names a document (or a part of one) but the tool does not declare it in Doc", op.Name, p.Name)
		}
	}
	for name := range declared {
		if op.Input.prop(name) == nil {
			return fmt.Errorf("tool %s: declares document argument %q, which it does not take", op.Name, name)
		}
	}
	if op.Doc.Arg != "" && !op.Doc.Optional && !contains(op.Input.Required, op.Doc.Arg) {
		return fmt.Errorf("tool %s: document argument %q is neither required nor declared optional", op.Name, op.Doc.Arg)
	}
	return nil
}

// doc is the document a call works on, as the door let it in.
type doc struct {
	Path string // clean, relative to the Jupyter root; "" when an optional argument was omitted
	Kind ydoc.Kind
	Fork string       // the fork the call works in ("" for the document itself)
	Room *bridge.Room // the live room, for operations that open it
	// File is the notebook as its file holds it, instead of Room, for operations that take it
	// (docRef.FromFile) while the room is joined.
	File *bridge.FileRead
}

// Named reports whether the call names a document.
func (d doc) Named() bool { return d.Path != "" }

// mayUse is the one permission check: may the caller (ctx) use the document at clean path p?
// Calls without an identity (stdio: the local user who started the process) may use every
// document.
func mayUse(ctx context.Context, p string) error {
	id, ok := auth.IdentityFrom(ctx)
	if !ok {
		return nil
	}
	if !id.Can(auth.ScopeRead) {
		return fmt.Errorf("not permitted: token %q has no read scope", id.Name)
	}
	if !id.MayAccess(p) {
		return fmt.Errorf("not permitted: token %q may not use this document (outside its paths)", id.Name)
	}
	return nil
}

// allowed reports whether an answer may show the caller the document at clean path p.
func allowed(ctx context.Context, p string) bool { return mayUse(ctx, p) == nil }

// mayEnter reports whether a listing may descend into (and show) a directory.
func mayEnter(ctx context.Context, dir string) bool {
	id, ok := auth.IdentityFrom(ctx)
	return !ok || id.MayEnter(dir)
}

// refused is the door's refusal of a document argument.
func refused(arg string, err error) *toolError {
	return &toolError{Message: err.Error(), Details: []detail{{Path: []any{arg}, Message: "not permitted"}}}
}

// errUnknownJob is the answer for a job id that is unknown or names a job the caller may not see.
const errUnknownJob = "unknown execution job (finished jobs are kept for a while, then forgotten)"

// admit resolves, checks and (when the operation asks) opens the document a call names.
func (s *Server) admit(ctx context.Context, op *operation, args map[string]any) (doc, error) {
	ref := op.Doc
	if ref.Arg == "" {
		return doc{}, nil
	}
	v, _ := args[ref.Arg].(string)
	if v == "" {
		if ref.Optional {
			return doc{}, nil
		}
		return doc{}, invalid([]any{ref.Arg}, "is required")
	}
	var d doc
	if ref.Ref == refJob {
		p, ok := s.jobPath(ctx, v)
		if !ok {
			return doc{}, invalid([]any{ref.Arg}, errUnknownJob)
		}
		d = doc{Path: p, Kind: ydoc.KindNotebook}
	} else {
		p, kind := v, ydoc.KindNotebook
		switch ref.Ref {
		case refText:
			kind = ydoc.KindText
		case refAny:
			p, kind = parseSession(v)
		}
		clean, err := bridge.CleanPath(p)
		if err != nil {
			return doc{}, invalid([]any{ref.Arg}, "%v", err)
		}
		if clean == "" {
			return doc{}, invalid([]any{ref.Arg}, "names the Jupyter root, not a document")
		}
		if err := mayUse(ctx, clean); err != nil {
			return doc{}, refused(ref.Arg, err)
		}
		d = doc{Path: clean, Kind: kind}
	}
	if op.Forkable {
		d.Fork, _ = args["fork_id"].(string)
	}
	if ref.Open && ref.FromFile && d.Fork == "" && d.Kind == ydoc.KindNotebook && len(ref.Cells) == 0 {
		room, file, err := s.opts.Manager.OpenForRead(ctx, d.Path)
		if err != nil {
			return doc{}, openError(ref.Arg, err)
		}
		if room != nil {
			s.uses.add(docKey{room.Path(), d.Kind}, sessionKey(ctx))
		}
		d.Room, d.File = room, file
		return d, nil
	}
	if ref.Open {
		room, err := s.openDoc(ctx, d.Path, d.Kind, d.Fork)
		if err != nil {
			return doc{}, openError(ref.Arg, err)
		}
		d.Room = room
	}
	if err := s.resolveCells(ctx, ref.Cells, d, args); err != nil {
		return doc{}, err
	}
	return d, nil
}

// resolveCells replaces, in the arguments, every handle that names a cell by the cell's id
// (handles.go), against the cells the notebook (or the fork the call works in) has now.
func (s *Server) resolveCells(ctx context.Context, paths []string, d doc, args map[string]any) error {
	if len(paths) == 0 || d.Kind != ydoc.KindNotebook {
		return nil
	}
	type ref struct {
		path []any
		set  func(string)
		v    string
	}
	var refs []ref
	add := func(path []any, v any, set func(string)) {
		if s, ok := v.(string); ok {
			refs = append(refs, ref{path, set, s})
		}
	}
	for _, p := range paths {
		switch {
		case strings.HasSuffix(p, "{}"): // an object's keys
			name := strings.TrimSuffix(p, "{}")
			m, _ := args[name].(map[string]any)
			for k, v := range m {
				k, v := k, v
				refs = append(refs, ref{[]any{name, k}, func(id string) {
					if id != k {
						delete(m, k)
						m[id] = v
					}
				}, k})
			}
		case strings.Contains(p, "[]."): // a field of each item of a list
			name, field, _ := strings.Cut(p, "[].")
			list, _ := args[name].([]any)
			for i, it := range list {
				if m, ok := it.(map[string]any); ok {
					add([]any{name, i, field}, m[field], func(id string) { m[field] = id })
				}
			}
		default: // a string, or a list of them
			switch v := args[p].(type) {
			case string:
				add([]any{p}, v, func(id string) { args[p] = id })
			case []any:
				for i, x := range v {
					i := i
					add([]any{p, i}, x, func(id string) { v[i] = id })
				}
			}
		}
	}
	if len(refs) == 0 {
		return nil
	}
	room := d.Room
	if room == nil {
		var err error
		if room, err = s.openDoc(ctx, d.Path, d.Kind, d.Fork); err != nil {
			return openError("path", err)
		}
	}
	var ids []string
	if err := room.View(ctx, func(doc *ydoc.Doc) error {
		ids = doc.CellIDs()
		return nil
	}); err != nil {
		return err
	}
	var details []detail
	for _, r := range refs {
		id, err := resolveCell(ids, r.v)
		if err != nil {
			details = append(details, detail{Path: r.path, Message: err.Error()})
			continue
		}
		r.set(id)
	}
	if len(details) == 0 {
		return nil
	}
	sort.Slice(details, func(i, j int) bool { return pathString(details[i].Path) < pathString(details[j].Path) })
	msg := "invalid arguments: " + details[0].String()
	if len(details) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(details)-1)
	}
	return &toolError{Message: msg, Details: details}
}

// openError phrases a failure to join a document for the model.
func openError(arg string, err error) error {
	var gone *bridge.ForkGoneError
	switch {
	case errors.As(err, &gone):
		return &toolError{Message: gone.Error(), Details: []detail{{Path: []any{"fork_id"}, Message: "no such fork"}}}
	case errors.Is(err, bridge.ErrBadPath):
		return invalid([]any{arg}, "%v", err)
	}
	return err
}

// openDoc joins a document's room, or the room of one of its forks, for the caller.
func (s *Server) openDoc(ctx context.Context, p string, kind ydoc.Kind, fork string) (*bridge.Room, error) {
	clean, err := bridge.CleanPath(p)
	if err != nil {
		return nil, err
	}
	if err := mayUse(ctx, clean); err != nil {
		return nil, &toolError{Message: err.Error()}
	}
	var room *bridge.Room
	if fork != "" {
		room, err = s.opts.Manager.OpenFork(ctx, clean, kind, fork)
	} else {
		room, err = s.opts.Manager.Open(ctx, clean, kind)
	}
	if err != nil {
		return nil, err
	}
	if fork == "" {
		s.uses.add(docKey{room.Path(), kind}, sessionKey(ctx))
	}
	return room, nil
}

// createDoc writes a new document the caller may use and joins its room.
func (s *Server) createDoc(ctx context.Context, d doc, content []byte) (*bridge.Room, error) {
	if err := mayUse(ctx, d.Path); err != nil {
		return nil, &toolError{Message: err.Error()}
	}
	room, err := s.opts.Manager.Create(ctx, d.Path, d.Kind, content)
	if err != nil {
		return nil, err
	}
	s.uses.add(docKey{room.Path(), d.Kind}, sessionKey(ctx))
	return room, nil
}

// liveRoom returns the open room of a document the caller may see, or nil.
func (s *Server) liveRoom(ctx context.Context, p string, kind ydoc.Kind) *bridge.Room {
	r := s.opts.Manager.Get(p, kind)
	if r == nil || !allowed(ctx, r.Path()) {
		return nil
	}
	return r
}

// liveRooms returns the open document rooms the caller may see, ordered by path.
func (s *Server) liveRooms(ctx context.Context) []*bridge.Room {
	all := s.opts.Manager.Rooms()
	out := all[:0:0]
	for _, r := range all {
		if allowed(ctx, r.Path()) {
			out = append(out, r)
		}
	}
	return out
}

// listDir returns the entries of a directory the caller may see: documents it may use and
// directories that can hold some.
func (s *Server) listDir(ctx context.Context, dir string) ([]bridge.FileInfo, error) {
	clean, err := bridge.CleanPath(dir)
	if err != nil {
		return nil, err
	}
	if !mayEnter(ctx, clean) {
		return nil, nil
	}
	entries, err := s.opts.Manager.List(ctx, clean)
	if err != nil {
		return nil, err
	}
	out := entries[:0:0]
	for _, e := range entries {
		if e.Type == "directory" && mayEnter(ctx, e.Path) || e.Type != "directory" && allowed(ctx, e.Path) {
			out = append(out, e)
		}
	}
	return out, nil
}

// fileContent reads a document the caller may use from its file, as jupyter-server has it on
// disk (not a live room).
func (s *Server) fileContent(ctx context.Context, p string, kind ydoc.Kind) (ydoc.Snapshot, error) {
	if err := mayUse(ctx, p); err != nil {
		return ydoc.Snapshot{}, &toolError{Message: err.Error()}
	}
	return s.opts.Manager.ReadFile(ctx, p, kind)
}

// fileID returns the file id of a document the caller may use.
func (s *Server) fileID(ctx context.Context, p string, kind ydoc.Kind) (string, error) {
	if err := mayUse(ctx, p); err != nil {
		return "", err
	}
	return s.opts.Manager.FileID(ctx, p, kind)
}

// fileIDs returns the file ids (id → path) of the documents of a kind the caller may see.
func (s *Server) fileIDs(ctx context.Context, kind ydoc.Kind) map[string]string {
	out := s.opts.Manager.FileIDs(kind)
	for id, p := range out {
		if !allowed(ctx, p) {
			delete(out, id)
		}
	}
	return out
}

// knownPathOf resolves a file id the sidecar has seen to a document the caller may use (ok false
// for an unknown id and for one the caller may not see alike).
func (s *Server) knownPathOf(ctx context.Context, id string, kind ydoc.Kind) (string, bool) {
	p, k, ok := s.opts.Manager.PathOf(id)
	if !ok || k != kind || !allowed(ctx, p) {
		return "", false
	}
	return p, true
}

// jobPath returns the notebook of an execution job the caller may see.
func (s *Server) jobPath(ctx context.Context, id string) (string, bool) {
	if s.opts.Executor == nil {
		return "", false
	}
	j, err := s.opts.Executor.Job(id)
	if err != nil || !allowed(ctx, j.Path) {
		return "", false
	}
	return j.Path, true
}

// job returns an execution job the caller may see (the door admitted its id).
func (s *Server) job(ctx context.Context, id string) (*execution.Job, error) {
	if _, ok := s.jobPath(ctx, id); !ok {
		return nil, invalid([]any{"job_id"}, errUnknownJob)
	}
	return s.opts.Executor.Job(id)
}

// jobIDs returns the ids of the jobs the caller may see, newest first.
func (s *Server) jobIDs(ctx context.Context) []string {
	if s.opts.Executor == nil {
		return nil
	}
	var out []string
	for _, id := range s.opts.Executor.JobIDs() {
		if _, ok := s.jobPath(ctx, id); ok {
			out = append(out, id)
		}
	}
	return out
}

// forksOf lists the forks of an admitted document.
func (s *Server) forksOf(ctx context.Context, d doc) ([]bridge.Fork, error) {
	if err := mayUse(ctx, d.Path); err != nil {
		return nil, &toolError{Message: err.Error()}
	}
	return s.opts.Manager.Forks(ctx, d.Path, d.Kind)
}

// forkDoc forks an admitted document and joins the fork.
func (s *Server) forkDoc(ctx context.Context, d doc, info bridge.ForkInfo) (*bridge.Room, error) {
	if err := mayUse(ctx, d.Path); err != nil {
		return nil, &toolError{Message: err.Error()}
	}
	return s.opts.Manager.CreateFork(ctx, d.Path, d.Kind, info)
}

// closeFork merges (or discards) a fork of an admitted document.
func (s *Server) closeForkOf(ctx context.Context, d doc, fork string, merge bool) error {
	if err := mayUse(ctx, d.Path); err != nil {
		return &toolError{Message: err.Error()}
	}
	return s.opts.Manager.CloseFork(ctx, d.Path, d.Kind, fork, merge)
}

// peersOf returns a room's collaborators, with what their awareness says about documents the
// caller may not see taken out.
func (s *Server) peersOf(ctx context.Context, room *bridge.Room) ([]bridge.PeerView, error) {
	if !allowed(ctx, room.Path()) {
		return nil, nil
	}
	peers, err := room.Peers(ctx)
	for i := range peers {
		hideDocuments(ctx, peers[i].State)
	}
	return peers, err
}

// globalPeers returns the collaborators in JupyterLab's global awareness (who is online, and in
// front of which document), documents the caller may not see taken out.
func (s *Server) globalPeers(ctx context.Context) []bridge.PeerView {
	peers, err := s.opts.Manager.GlobalPeers(ctx)
	if err != nil {
		s.log.Debug().Err(err).Msg("global awareness unavailable")
	}
	for i := range peers {
		hideDocuments(ctx, peers[i].State)
	}
	return peers
}

// hideDocuments removes from an awareness state what names documents the caller may not see:
// JupyterLab's "current" and "documents", and an agent's activity document.
func hideDocuments(ctx context.Context, st map[string]any) {
	visible := func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return false
		}
		p, _ := parseSession(s)
		clean, err := bridge.CleanPath(p)
		return err == nil && allowed(ctx, clean)
	}
	if c, ok := st["current"]; ok && c != nil && !visible(c) {
		delete(st, "current")
	}
	if docs, ok := st["documents"].([]any); ok {
		kept := docs[:0:0]
		for _, d := range docs {
			if visible(d) {
				kept = append(kept, d)
			}
		}
		st["documents"] = kept
	}
	if a, ok := st[agentField].(map[string]any); ok {
		if act, ok := a["activity"].(map[string]any); ok {
			if d, ok := act["document"]; ok && d != "" && !visible(d) {
				delete(act, "document")
			}
		}
	}
}

// agentField is where agents publish their structured presence in awareness.
const agentField = "jupyter_collab_mcp"

// --- room use, per MCP session ---------------------------------------------------------------

// roomUses counts, per document, the MCP sessions that work in its room: leave_session closes a
// room only when no other session still uses it.
type roomUses struct {
	mu sync.Mutex
	by map[docKey]map[string]bool
}

func (u *roomUses) add(k docKey, session string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[docKey]map[string]bool{}
	}
	if u.by[k] == nil {
		u.by[k] = map[string]bool{}
	}
	u.by[k][session] = true
}

// drop ends a session's use of a document; it returns whether the session was using it and the
// sessions still using it.
func (u *roomUses) drop(k docKey, session string) (bool, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	was := u.by[k][session]
	delete(u.by[k], session)
	var others []string
	for s := range u.by[k] {
		others = append(others, s)
	}
	if len(others) == 0 {
		delete(u.by, k)
	}
	sort.Strings(others)
	return was, others
}

// forget ends every use of a session (it ended).
func (u *roomUses) forget(session string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, m := range u.by {
		delete(m, session)
		if len(m) == 0 {
			delete(u.by, k)
		}
	}
}

// leaveDoc ends the caller's use of a document's room and closes the room when no other MCP
// session uses it (nor subscriptions hold it). It reports whether the room was open, whether
// the caller was using it, and whether it stays open.
func (s *Server) leaveDoc(ctx context.Context, d doc) (open, was, stays bool, err error) {
	if err := mayUse(ctx, d.Path); err != nil {
		return false, false, false, &toolError{Message: err.Error()}
	}
	room := s.opts.Manager.Get(d.Path, d.Kind)
	if room == nil {
		return false, false, false, nil
	}
	key := docKey{room.Path(), d.Kind}
	was, others := s.uses.drop(key, sessionKey(ctx))
	if len(others) > 0 || s.pinned(key) {
		return true, was, true, nil
	}
	room.Close()
	return true, was, false, nil
}
