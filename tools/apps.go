package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/apps"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// MCP Apps (the io.modelcontextprotocol/ui extension, 2026-01-26): the person in the chat sees
// the notebook too. The sidecar serves three ui:// resources (package apps: an outputs view, a
// live notebook, a fork's suggested changes); the tools whose results they show carry
// _meta.ui.resourceUri (operation.App), and a host that renders apps shows the view next to the
// result. The model keeps getting the same lean text: a view reads what it shows from the live
// replica by calling, through the host, tools hidden from the model (the apps category,
// _meta.ui.visibility ["app"]) and the public merge and discard tools. Those are operations
// like any other: the caller's scope, then the door (door.go), for every document.
//
// Which sessions get the apps is Options.Apps: off (none of it: no ui:// resource, no _meta.ui,
// no app tools), auto (the default in cmd: sessions whose client announces the extension with
// the text/html;profile=mcp-app mime type at initialize), always (every session, for hosts that
// render apps without announcing them). A session without apps sees today's tool list and
// resource list, byte for byte.

// AppsMode says which sessions get the MCP Apps.
type AppsMode int

const (
	AppsOff    AppsMode = iota // no apps
	AppsAuto                   // sessions whose client announces MCP Apps
	AppsAlways                 // every session
)

// ParseAppsMode reads off, auto or always.
func ParseAppsMode(s string) (AppsMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "false", "no":
		return AppsOff, nil
	case "auto", "":
		return AppsAuto, nil
	case "always", "on", "true":
		return AppsAlways, nil
	}
	return AppsOff, fmt.Errorf("apps %q: must be auto, always or off", s)
}

// AppsExtension is the MCP Apps extension's identifier in client capabilities.
const AppsExtension = "io.modelcontextprotocol/ui"

// appCategory holds the tools only the apps call: listed (with visibility ["app"]) to sessions
// that get the apps, never to others, and in no toolset.
const appCategory = "apps"

// appsFor reports whether the caller's session gets the apps.
func (s *Server) appsFor(ctx context.Context) bool {
	switch s.opts.Apps {
	case AppsAlways:
		return true
	case AppsAuto:
		return clientRendersApps(ctx)
	}
	return false
}

// clientRendersApps reports whether the client announced MCP Apps: in the request's _meta
// (protocol 2026-07-28 and later) or else at initialize,
// capabilities.extensions["io.modelcontextprotocol/ui"] with text/html;profile=mcp-app among its
// mimeTypes (a client that leaves mimeTypes out is taken at its word too).
func clientRendersApps(ctx context.Context) bool {
	var caps mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil {
		caps = *info.ClientCapabilities
	} else if ci, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		caps = ci.GetClientCapabilities()
	} else {
		return false
	}
	ext, ok := caps.Extensions[AppsExtension]
	if !ok || ext == nil {
		return false
	}
	b, err := json.Marshal(ext)
	if err != nil {
		return false
	}
	var settings struct {
		MIMETypes []string `json:"mimeTypes"`
	}
	if json.Unmarshal(b, &settings) != nil {
		return false
	}
	if settings.MIMETypes == nil {
		return true
	}
	for _, m := range settings.MIMETypes {
		if m == apps.MIMEType {
			return true
		}
	}
	return false
}

// uiMeta is the _meta of a tool whose results an app shows.
func uiMeta(uri string) *mcp.Meta {
	return &mcp.Meta{AdditionalFields: map[string]any{"ui": map[string]any{"resourceUri": uri}}}
}

// appResourceMeta is the _meta.ui of the apps' resources (listing and content): a border, and
// no csp: the apps load nothing from outside, so the host's restrictive default fits them.
func appResourceMeta() map[string]any {
	return map[string]any{"ui": map[string]any{"prefersBorder": true}}
}

// withAppMeta returns the listing's tools with the apps' metadata for a session that gets them:
// _meta.ui.resourceUri on the tools an app shows.
func (s *Server) withAppMeta(tools []mcp.Tool) []mcp.Tool {
	out := make([]mcp.Tool, len(tools))
	for i, t := range tools {
		if op := s.opsByName[t.Name]; op != nil && op.App != "" {
			t.Meta = uiMeta(op.App)
		}
		out[i] = t
	}
	return out
}

// appResourceFilter leaves the apps' ui:// resources out of a listing for a session without apps.
func (s *Server) appResourceFilter(ctx context.Context, list []mcp.Resource) []mcp.Resource {
	if s.opts.Apps == AppsOff || s.appsFor(ctx) {
		return list
	}
	out := list[:0:0]
	for _, r := range list {
		if !strings.HasPrefix(r.URI, "ui://") {
			out = append(out, r)
		}
	}
	return out
}

// registerApps serves the apps' resources and registers the tools only they call.
func (s *Server) registerApps() error {
	for _, a := range apps.List() {
		page, err := a.HTML()
		if err != nil {
			return err
		}
		uri := a.URI
		res := mcp.NewResource(uri, a.Name, mcp.WithResourceDescription(a.Description), mcp.WithMIMEType(apps.MIMEType))
		res.Title = a.Title
		res.Meta = &mcp.Meta{AdditionalFields: appResourceMeta()}
		s.mcp.AddResource(res, func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: apps.MIMEType, Text: page, Meta: appResourceMeta()}}, nil
		})
	}
	s.register(&operation{
		Name:     "app_read_notebook",
		Title:    "Notebook for an app",
		Category: appCategory,
		Scope:    auth.ScopeRead,
		Description: "For the MCP Apps (hidden from the model): a notebook's cells with their whole outputs, its version, " +
			"who is in which cell and its JupyterLab link. With since_version it answers unchanged: true (and no cells) " +
			"while the notebook is at that version, waiting up to wait_ms for a change first.",
		Input: object(
			pathField,
			brief("cell_ids", array("Only these cells (ids or handles; those no longer there are left out).", str("A cell id or handle.")).items(1, maxBatch)),
			startIndexField,
			endIndexField,
			brief("since_version", str("The version of the previous answer.")),
			brief("wait_ms", integer("With since_version: how long to wait for an edit, a run or a collaborator moving before answering unchanged.").def(0).min(0).max(float64(maxAppWait.Milliseconds()))),
		).required("path"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "since_version": "v12", "wait_ms": 20000},
		ReadOnly: true, Idempotent: true, Forkable: true,
		Doc: docRef{Arg: "path", Ref: refNotebook, Open: true, Parts: []string{"cell_ids"}},
		Run: handle(s.appReadNotebook, renderAppNotebook),
	})
	docPath := brief("path", str("A notebook or text file path."))
	forkID := brief("fork_id", str("The fork."))
	s.register(&operation{
		Name:     "app_review_fork",
		Title:    "A fork's changes for an app",
		Category: appCategory,
		Scope:    auth.ScopeRead,
		Description: "For the MCP Apps (hidden from the model): what a fork changes, cell by cell, with both sources " +
			"whole, the line diff and the fork's outputs of the cells it ran.",
		Input:    object(docPath, forkID).required("path", "fork_id"),
		Example:  map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70"},
		ReadOnly: true, Idempotent: true,
		Doc: forkDoc,
		Run: handle(s.appReviewFork, renderAppReview),
	})
	s.register(&operation{
		Name:     "app_reject_fork_cells",
		Title:    "Reject part of a fork",
		Category: appCategory,
		Scope:    auth.ScopeWrite,
		Description: "For the MCP Apps (hidden from the model): take cells out of a fork's proposal before it is merged: " +
			"each named cell becomes in the fork what it is in the notebook (content, outputs, place; a cell the fork " +
			"added is deleted, one it deleted comes back).",
		Input: object(pathField, forkID,
			brief("cell_ids", array("The cells (full ids).", str("A cell id.")).items(1, maxBatch)),
		).required("path", "fork_id", "cell_ids"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "fork_id": "3f2a9c1b7d4e4c0e9b1a2f3d4c5b6a70", "cell_ids": []any{"a1b2c3d4"}},
		Destructive: true, Idempotent: true,
		Doc: docRef{Arg: "path", Ref: refNotebook, Parts: []string{"fork_id", "cell_ids"}},
		Run: handle(s.appRejectForkCells, renderAppRejected),
	})
	return nil
}

// The apps' bounds: the longest wait of app_read_notebook, and the outputs an answer carries
// whole (the rest are named with their size; a host relays the answer in one message).
const (
	maxAppWait        = 25 * time.Second
	maxAppOutputBytes = 8 << 20
	maxAppTotalBytes  = 32 << 20
)

type appReadArgs struct {
	CellIDs      []string `json:"cell_ids"`
	StartIndex   *int     `json:"start_index"`
	EndIndex     *int     `json:"end_index"`
	SinceVersion string   `json:"since_version"`
	WaitMS       int      `json:"wait_ms"`
	ForkID       string   `json:"fork_id"`
}

// appCell is a cell as the apps render it: the whole source and every output as stored.
type appCell struct {
	ID             string           `json:"id"`
	Index          int              `json:"index"`
	Type           string           `json:"cell_type"`
	Source         string           `json:"source"`
	ExecutionCount *int             `json:"execution_count"`
	Running        bool             `json:"running,omitempty"`
	Outputs        []map[string]any `json:"outputs,omitempty"`
}

// appPeer is a collaborator and the cell their cursor is in ("" when not known).
type appPeer struct {
	Name     string `json:"name"`
	Initials string `json:"initials,omitempty"`
	Color    string `json:"color,omitempty"`
	CellID   string `json:"cell_id,omitempty"`
	Agent    bool   `json:"agent,omitempty"`
}

// appNotebook is app_read_notebook's answer.
type appNotebook struct {
	path, fork string
	version    bridge.Version
	unchanged  bool
	count      int
	language   string
	cells      []appCell
	omitted    int // outputs left out to keep the answer in bounds
	peers      []appPeer
	lab        string
}

func (s *Server) appReadNotebook(ctx context.Context, c *call, a appReadArgs) (appNotebook, error) {
	var sub *bridge.Subscription
	if a.SinceVersion != "" && a.WaitMS > 0 {
		sub = c.Room.Subscribe(64) // before the first read: a change between the two is not missed
		defer sub.Close()
	}
	v, err := s.appView(ctx, c, a)
	if err != nil || !v.unchanged || sub == nil {
		return v, err
	}
	wait := time.NewTimer(time.Duration(a.WaitMS) * time.Millisecond)
	defer wait.Stop()
	for {
		select {
		case e, ok := <-sub.C:
			if ok && e.Kind == bridge.EventNotice {
				continue
			}
			return s.appView(ctx, c, a)
		case <-wait.C:
			return s.appView(ctx, c, a)
		case <-ctx.Done():
			return v, nil
		}
	}
}

// appView reads the notebook (or the fork) for an app: the cells asked for, unless it is still at
// since_version.
func (s *Server) appView(ctx context.Context, c *call, a appReadArgs) (appNotebook, error) {
	out := appNotebook{path: c.Path, fork: c.Fork}
	var nb ydoc.Notebook
	if err := c.Room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		out.version = h.Version()
		if a.SinceVersion != "" && string(out.version) == a.SinceVersion {
			out.unchanged = true
			return nil
		}
		var err error
		nb, err = d.Notebook()
		return err
	}); err != nil {
		return appNotebook{}, err
	}
	if c.Fork == "" {
		out.peers = s.appPeers(ctx, c.Room)
		out.lab = s.labURL(c.Path)
	}
	if out.unchanged {
		return out, nil
	}
	out.count = len(nb.Cells)
	out.language = notebookLanguage(nb.Metadata)
	want := map[string]bool{}
	ids := make([]string, len(nb.Cells))
	for i, cell := range nb.Cells {
		ids[i] = cell.ID
	}
	for _, h := range a.CellIDs {
		if m := matchCells(ids, h); len(m) == 1 {
			want[m[0]] = true
		}
	}
	first, last := 0, len(nb.Cells)-1
	if a.StartIndex != nil {
		first = *a.StartIndex
	}
	if a.EndIndex != nil {
		last = min(*a.EndIndex, last)
	}
	total := 0
	for i, cell := range nb.Cells {
		if len(a.CellIDs) > 0 && !want[cell.ID] || len(a.CellIDs) == 0 && (i < first || i > last) {
			continue
		}
		ac := appCell{ID: cell.ID, Index: i, Type: cell.Type, Source: cell.Source, ExecutionCount: cell.ExecutionCount,
			Running: cell.ExecutionState == "running"}
		for _, o := range cell.Outputs {
			size := outputBytes(o)
			if size > maxAppOutputBytes || total+size > maxAppTotalBytes {
				out.omitted++
				ac.Outputs = append(ac.Outputs, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
					"data": map[string]any{"text/plain": fmt.Sprintf("[%s output of %s, too large for this view: open the notebook in JupyterLab]", outputKind(o), humanBytes(size))}})
				continue
			}
			total += size
			ac.Outputs = append(ac.Outputs, o)
		}
		out.cells = append(out.cells, ac)
	}
	return out, nil
}

func outputBytes(o map[string]any) int {
	b, err := json.Marshal(o)
	if err != nil {
		return 0
	}
	return len(b)
}

func outputKind(o map[string]any) string {
	if t, _ := o["output_type"].(string); t != "" {
		return t
	}
	return "an"
}

// appPeers are the document's collaborators (documents the caller may not see taken out of their
// states by presenceOf) and the cell each is in.
func (s *Server) appPeers(ctx context.Context, room *bridge.Room) []appPeer {
	p := s.presenceOf(ctx, room)
	out := []appPeer{}
	seen := map[string]bool{}
	for _, v := range p.Peers {
		if v.User == nil {
			continue
		}
		ap := appPeer{Name: nonEmptyStr(v.User.DisplayName, v.User.Name, v.User.Username), Initials: v.User.Initials, Color: v.User.Color}
		if len(v.Cursors) > 0 {
			ap.CellID = v.Cursors[0].CellID
		}
		_, ap.Agent = v.State[agentField]
		key := v.User.Username + "\x00" + ap.CellID
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, ap)
	}
	for _, v := range p.Viewers {
		if v.InRoom > 0 || seen[v.User.Username+"\x00"] {
			continue
		}
		seen[v.User.Username+"\x00"] = true
		out = append(out, appPeer{Name: viewerName(v), Initials: v.User.Initials, Color: v.User.Color})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// labURL is the address JupyterLab shows a document at (no token: the person signs in as they
// do), "" when the server's address for people is not known.
func (s *Server) labURL(p string) string {
	if s.opts.LabURL == "" {
		return ""
	}
	parts := strings.Split(p, "/")
	for i, seg := range parts {
		parts[i] = url.PathEscape(seg)
	}
	return strings.TrimSuffix(s.opts.LabURL, "/") + "/lab/tree/" + strings.Join(parts, "/")
}

func renderAppNotebook(_ *call, _ appReadArgs, v appNotebook) result {
	out := map[string]any{"path": v.path, "version": v.version, "collaborators": v.peers}
	if v.fork != "" {
		out["fork_id"] = v.fork
	}
	if v.lab != "" {
		out["lab_url"] = v.lab
	}
	text := fmt.Sprintf("%s at version %s, unchanged (for the app's view)", v.path, v.version)
	if v.unchanged {
		out["unchanged"] = true
	} else {
		cells := v.cells
		if cells == nil {
			cells = []appCell{}
		}
		out["cells"], out["cell_count"], out["language"] = cells, v.count, v.language
		if v.omitted > 0 {
			out["outputs_omitted"] = v.omitted
		}
		text = fmt.Sprintf("%s at version %s: %d of %d cells (for the app's view)", v.path, v.version, len(cells), v.count)
	}
	return result{Data: out, Text: text}
}

// --- suggestions -------------------------------------------------------------------------------

type appForkArgs struct {
	ForkID  string   `json:"fork_id"`
	CellIDs []string `json:"cell_ids"`
}

// appChange is one cell a fork changes, as the suggestion app shows it.
type appChange struct {
	ID      string           `json:"id"`
	Status  string           `json:"status"` // added, removed, edited, moved
	Index   int              `json:"index"`  // in the fork (in the notebook for removed cells)
	Type    string           `json:"cell_type"`
	Before  *string          `json:"before,omitempty"` // the notebook's source
	After   *string          `json:"after,omitempty"`  // the fork's source
	Diff    string           `json:"diff,omitempty"`   // unified line diff of the sources
	Fields  []string         `json:"fields,omitempty"` // what an edit changes
	Moved   bool             `json:"moved,omitempty"`
	Outputs []map[string]any `json:"outputs,omitempty"` // the fork's outputs, when the fork ran the cell
}

// appReview is app_review_fork's answer.
type appReview struct {
	kind    ydoc.Kind
	summary string
	changes []appChange
	diff    string // text documents: the unified diff
}

// forkPair reads a document and its fork as they are now.
func (s *Server) forkPair(ctx context.Context, d doc, forkID string) (root, fork *bridge.Room, err error) {
	if fork, err = s.openDoc(ctx, d.Path, d.Kind, forkID); err != nil {
		return nil, nil, forkError(err)
	}
	if root = s.liveRoom(ctx, d.Path, d.Kind); root == nil {
		if root, err = s.openDoc(ctx, d.Path, d.Kind, ""); err != nil {
			return nil, nil, err
		}
	}
	return root, fork, nil
}

func readNotebookOf(ctx context.Context, r *bridge.Room) (nb ydoc.Notebook, err error) {
	err = r.Read(ctx, func(d *ydoc.Doc, _ bridge.History) error {
		nb, err = d.Notebook()
		return err
	})
	return nb, err
}

func (s *Server) appReviewFork(ctx context.Context, c *call, a appForkArgs) (appReview, error) {
	if c.Kind == ydoc.KindText {
		d, err := s.forkDiff(ctx, c.doc, a.ForkID, 100000)
		if err != nil {
			return appReview{}, err
		}
		m, _ := d.changes.(map[string]any)
		diff, _ := m["diff"].(string)
		return appReview{kind: ydoc.KindText, summary: d.summary, diff: diff}, nil
	}
	root, fork, err := s.forkPair(ctx, c.doc, a.ForkID)
	if err != nil {
		return appReview{}, err
	}
	from, err := readNotebookOf(ctx, root)
	if err != nil {
		return appReview{}, err
	}
	to, err := readNotebookOf(ctx, fork)
	if err != nil {
		return appReview{}, err
	}
	nd := ydoc.DiffNotebooksWith(from, to, ydoc.DiffOptions{Context: 3, MaxLines: 100000})
	before := map[string]ydoc.Cell{}
	for _, cell := range from.Cells {
		before[cell.ID] = cell
	}
	after := map[string]ydoc.Cell{}
	for _, cell := range to.Cells {
		after[cell.ID] = cell
	}
	byID := map[string]*appChange{}
	var changes []*appChange
	add := func(ch appChange) *appChange {
		p := &ch
		byID[ch.ID] = p
		changes = append(changes, p)
		return p
	}
	for _, e := range nd.Added {
		src := after[e.ID].Source
		ch := add(appChange{ID: e.ID, Status: "added", Index: e.Index, Type: e.Type, After: &src})
		ch.Outputs = after[e.ID].Outputs
	}
	for _, e := range nd.Removed {
		src := before[e.ID].Source
		add(appChange{ID: e.ID, Status: "removed", Index: e.Index, Type: e.Type, Before: &src})
	}
	for _, e := range nd.Changed {
		b, f := before[e.ID].Source, after[e.ID].Source
		ch := add(appChange{ID: e.ID, Status: "edited", Index: e.Index, Type: after[e.ID].Type, Before: &b, After: &f, Fields: e.Fields})
		if e.Source != nil {
			ch.Diff = e.Source.Unified()
		}
		if contains(e.Fields, "outputs") || contains(e.Fields, "execution_count") {
			ch.Outputs = after[e.ID].Outputs
		}
	}
	for _, m := range nd.Moved {
		if ch, ok := byID[m.ID]; ok {
			ch.Moved = true
			continue
		}
		src := after[m.ID].Source
		add(appChange{ID: m.ID, Status: "moved", Index: m.To, Type: after[m.ID].Type, Before: &src, After: &src, Moved: true})
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Index < changes[j].Index })
	out := appReview{kind: ydoc.KindNotebook, summary: nd.Summary(), changes: make([]appChange, len(changes))}
	for i, ch := range changes {
		out.changes[i] = *ch
	}
	return out, nil
}

func renderAppReview(c *call, a appForkArgs, r appReview) result {
	out := map[string]any{"path": c.Path, "fork_id": a.ForkID, "summary": r.summary}
	if r.kind == ydoc.KindText {
		out["kind"], out["diff"] = "text", r.diff
	} else {
		out["kind"], out["cells"] = "notebook", r.changes
	}
	return result{Data: out, Text: fmt.Sprintf("fork %s of %s: %s (for the app's view)", a.ForkID, c.Path, r.summary)}
}

// appRejected is what app_reject_fork_cells did.
type appRejected struct {
	rejected []string
	summary  string
}

// rejectTarget is what a rejected cell becomes in the fork: the notebook's cell (nil when the
// fork added it), after the notebook's cell before it (prev, "" for the first), and whether the
// fork moved it.
type rejectTarget struct {
	id    string
	cell  *ydoc.Cell
	prev  string
	moved bool
}

func (s *Server) appRejectForkCells(ctx context.Context, c *call, a appForkArgs) (appRejected, error) {
	root, fork, err := s.forkPair(ctx, c.doc, a.ForkID)
	if err != nil {
		return appRejected{}, err
	}
	from, err := readNotebookOf(ctx, root)
	if err != nil {
		return appRejected{}, err
	}
	to, err := readNotebookOf(ctx, fork)
	if err != nil {
		return appRejected{}, err
	}
	nd := ydoc.DiffNotebooks(from, to)
	moved := map[string]bool{}
	for _, m := range nd.Moved {
		moved[m.ID] = true
	}
	inFork := map[string]bool{}
	for _, cell := range to.Cells {
		inFork[cell.ID] = true
	}
	var targets []rejectTarget
	for _, id := range a.CellIDs {
		t := rejectTarget{id: id, moved: moved[id]}
		for i := range from.Cells {
			if from.Cells[i].ID == id {
				cell := from.Cells[i]
				t.cell = &cell
				if i > 0 {
					t.prev = from.Cells[i-1].ID
				}
				break
			}
		}
		if t.cell == nil && !inFork[id] {
			return appRejected{}, invalid([]any{"cell_ids"}, "no cell %q in the notebook or the fork", id)
		}
		targets = append(targets, t)
	}
	if _, err := fork.Edit(ctx, func(tx *ydoc.Txn, _ bool) error { return rejectCells(tx, targets) }); err != nil {
		return appRejected{}, err
	}
	d, err := s.forkDiff(ctx, c.doc, a.ForkID, 50)
	if err != nil {
		return appRejected{}, err
	}
	return appRejected{rejected: a.CellIDs, summary: d.summary}, nil
}

// rejectCells makes each target in the fork what it is in the notebook. It reads only the
// targets, so it may run again on a fresh replica (bridge replays edits after a reset) and end
// the same.
func rejectCells(tx *ydoc.Txn, targets []rejectTarget) error {
	for _, t := range targets {
		i := tx.CellIndex(t.id)
		if t.cell == nil { // the fork added it
			if i >= 0 {
				if err := tx.DeleteCells(i, 1); err != nil {
					return err
				}
			}
			continue
		}
		at := 0 // right after the notebook's cell before it, where the fork has that cell
		if p := tx.CellIndex(t.prev); p >= 0 {
			at = p + 1
		}
		if i < 0 { // the fork deleted it
			if err := tx.InsertCells(min(at, tx.NumCells()), []ydoc.Cell{*t.cell}); err != nil {
				return err
			}
			continue
		}
		if err := restoreCell(tx, i, *t.cell); err != nil {
			return err
		}
		if t.moved {
			to := at
			if at > i {
				to = at - 1 // in the list without the cell
			}
			if err := tx.MoveCells(i, 1, min(to, tx.NumCells()-1)); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreCell sets cell i's type, source, metadata, outputs and execution count to want's.
func restoreCell(tx *ydoc.Txn, i int, want ydoc.Cell) error {
	cur, err := tx.Cell(i)
	if err != nil {
		return err
	}
	if cur.Type != want.Type {
		if err := tx.SetCellType(i, want.Type); err != nil {
			return err
		}
	}
	if cur.Source != want.Source {
		if err := tx.SetSource(i, want.Source); err != nil {
			return err
		}
	}
	if !sameJSON(cur.Metadata, want.Metadata) {
		if err := tx.SetCellMetadata(i, orEmpty(want.Metadata)); err != nil {
			return err
		}
	}
	if want.Type != ydoc.CellCode {
		return nil
	}
	if cur, err = tx.Cell(i); err != nil {
		return err
	}
	if !sameJSON(cur.Outputs, want.Outputs) {
		if err := tx.ClearOutputs(i); err != nil {
			return err
		}
		for _, o := range want.Outputs {
			if err := tx.AppendOutput(i, o); err != nil {
				return err
			}
		}
	}
	if !sameJSON(cur.ExecutionCount, want.ExecutionCount) {
		return tx.SetExecutionCount(i, want.ExecutionCount)
	}
	return nil
}

// sameJSON reports whether two values encode alike (nil and empty alike).
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	empty := func(s []byte) bool { return string(s) == "null" || string(s) == "{}" || string(s) == "[]" }
	return string(x) == string(y) || empty(x) && empty(y)
}

func renderAppRejected(c *call, a appForkArgs, r appRejected) result {
	return result{Data: map[string]any{"path": c.Path, "fork_id": a.ForkID, "rejected": r.rejected, "remaining": r.summary,
		"note": "those cells are now in the fork as they are in the notebook; merge_document_fork brings the rest"}}
}
