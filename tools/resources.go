package tools

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Resources: live notebooks and text documents under jupyter://, execution results, notebook
// templates and agent guides. Every read goes through the rooms bridge keeps (a read joins the
// room when it is not live) and is side-effect free: nothing runs, nothing is written. Outputs are
// sanitised as tool results are (render.go) and every content is held to --max-response-tokens.

//go:embed guides/*.md
var guidesFS embed.FS

//go:embed templates/*.ipynb
var templatesFS embed.FS

// guideModes are the working modes jupyter://guides/{mode} knows.
var guideModes = []string{"research", "analysis", "development"}

// templateNames lists the notebook templates (jupyter://templates/{name}), sorted.
func templateNames() []string {
	entries, _ := templatesFS.ReadDir("templates")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".ipynb"))
	}
	sort.Strings(names)
	return names
}

// templateContent returns a template's nbformat JSON (nil for an unknown name: the tool's schema
// enum rejects those before).
func templateContent(name string) []byte {
	b, err := templatesFS.ReadFile("templates/" + name + ".ipynb")
	if err != nil {
		return nil
	}
	return b
}

// guideText returns the guide of a mode.
func guideText(mode string) (string, error) {
	for _, m := range guideModes {
		if m == mode {
			b, err := guidesFS.ReadFile("guides/" + mode + ".md")
			if err != nil {
				return "", fmt.Errorf("guide %s: %w", mode, err)
			}
			return string(b), nil
		}
	}
	return "", fmt.Errorf("unknown mode %q: the guides are %s", mode, strings.Join(guideModes, ", "))
}

const (
	uriNotebooks        = "jupyter://notebooks"
	uriNotebooksCurrent = "jupyter://notebooks/current"
	uriDocuments        = "jupyter://documents"
	uriDocumentsCurrent = "jupyter://documents/current"
	uriTemplates        = "jupyter://templates"
)

// resourceError is a read that cannot be served, with what to do instead: a resource that does
// not exist (JSON-RPC -32002), or, invalid set, a malformed argument (-32602).
type resourceError struct {
	msg     string
	invalid bool
}

func (e *resourceError) Error() string { return e.msg }

// badURI is a resource that does not exist.
func badURI(format string, args ...any) error {
	return &resourceError{msg: fmt.Sprintf(format, args...)}
}

// badArgument is a resource argument that cannot name anything.
func badArgument(format string, args ...any) error {
	return &resourceError{msg: fmt.Sprintf(format, args...), invalid: true}
}

// sessionKey names the MCP client session of a request ("" for none: tests calling handlers).
func sessionKey(ctx context.Context) string {
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		return cs.SessionID()
	}
	return ""
}

// currentDocs remembers, per client session, the notebook and the text document it touched last
// (jupyter://notebooks/current, jupyter://documents/current).
type currentDocs struct {
	mu   sync.Mutex
	last map[string][2]string // session → [notebook path, text path]
}

// set records a session's document; it reports whether that changed the current one.
func (c *currentDocs) set(session string, kind ydoc.Kind, p string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string][2]string{}
	}
	v := c.last[session]
	old := v
	if kind == ydoc.KindNotebook {
		v[0] = p
	} else {
		v[1] = p
	}
	c.last[session] = v
	return v != old
}

func (c *currentDocs) get(session string, kind ydoc.Kind) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.last[session]
	if kind == ydoc.KindNotebook {
		return v[0]
	}
	return v[1]
}

func (c *currentDocs) forget(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, session)
}

// noteTouched records the document a tool call worked on, for the …/current resources.
func (s *Server) noteTouched(ctx context.Context, d doc) {
	if session := sessionKey(ctx); s.current.set(session, d.Kind, d.Path) {
		s.currentMoved(session)
	}
}

// resourceRead is a resource's content, before it becomes MCP contents.
type resourceRead struct {
	mime string
	text string
	more []mcp.ResourceContents // further parts (a cell's outputs)
}

// readURI serves any jupyter:// content URI for a session. Subscriptions use it to tell whether
// content really changed.
func (s *Server) readURI(ctx context.Context, session, uri string) (resourceRead, error) {
	rest, ok := strings.CutPrefix(uri, "jupyter://")
	if !ok {
		return resourceRead{}, badURI("%q is not a jupyter:// URI", uri)
	}
	parts := strings.Split(rest, "/")
	switch parts[0] {
	case "notebooks":
		switch {
		case len(parts) == 1:
			return s.readDocList(ctx, ydoc.KindNotebook)
		case len(parts) == 2 && parts[1] == "current":
			p := s.current.get(clientOf(session), ydoc.KindNotebook)
			if p == "" {
				return resourceRead{}, badURI("this client has not worked on a notebook yet: call a notebook tool, or read jupyter://notebooks for the file ids")
			}
			return s.readNotebookURI(ctx, p, nil)
		}
		p, err := s.pathOfID(ctx, parts[1], ydoc.KindNotebook)
		if err != nil {
			return resourceRead{}, err
		}
		return s.readNotebookURI(ctx, p, parts[2:])
	case "documents":
		switch {
		case len(parts) == 1:
			return s.readDocList(ctx, ydoc.KindText)
		case len(parts) == 2 && parts[1] == "current":
			p := s.current.get(clientOf(session), ydoc.KindText)
			if p == "" {
				return resourceRead{}, badURI("this client has not worked on a text document yet: call a document tool, or read jupyter://documents for the file ids")
			}
			return s.readText(ctx, p)
		case len(parts) == 2:
			p, err := s.pathOfID(ctx, parts[1], ydoc.KindText)
			if err != nil {
				return resourceRead{}, err
			}
			return s.readText(ctx, p)
		}
	case "executions":
		if len(parts) == 2 {
			return s.readExecution(ctx, parts[1])
		}
	case "templates":
		switch len(parts) {
		case 1:
			var list []map[string]any
			for _, n := range templateNames() {
				list = append(list, map[string]any{"name": n, "uri": uriTemplates + "/" + n, "cells": templateCells(n)})
			}
			return jsonRead(map[string]any{"templates": list, "use": "create_notebook_session with create_if_missing=true and template=<name>"})
		case 2:
			b := templateContent(parts[1])
			if b == nil {
				return resourceRead{}, badURI("unknown template %q: the templates are %s", parts[1], strings.Join(templateNames(), ", "))
			}
			return resourceRead{mime: "application/x-ipynb+json", text: string(b)}, nil
		}
	case "guides":
		if len(parts) == 2 {
			g, err := guideText(parts[1])
			if err != nil {
				return resourceRead{}, badURI("%v", err)
			}
			return resourceRead{mime: "text/markdown", text: g}, nil
		}
	}
	return resourceRead{}, badURI("unknown resource %q: the jupyter:// resources are notebooks[/{file_id}[/json|/cells[/{cell_id}]]|/current], documents[/{file_id}|/current], executions/{job_id}, templates[/{name}], guides/{mode}, stats/tokens, stats/cache, operations/{tool}", uri)
}

func jsonRead(v any) (resourceRead, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return resourceRead{}, err
	}
	return resourceRead{mime: "application/json", text: string(b)}, nil
}

func templateCells(name string) int {
	var nb struct {
		Cells []json.RawMessage `json:"cells"`
	}
	_ = json.Unmarshal(templateContent(name), &nb)
	return len(nb.Cells)
}

// pathOfID resolves a file id to a path. Ids are learned from rooms and listings; an id not seen
// yet makes one listing of that kind (which learns every id) before it is declared unknown.
func (s *Server) pathOfID(ctx context.Context, id string, kind ydoc.Kind) (string, error) {
	if id == "" {
		return "", badArgument("the file id is empty")
	}
	if p, ok := s.knownPathOf(ctx, id, kind); ok {
		return p, nil
	}
	if _, err := s.readDocList(ctx, kind); err != nil {
		return "", err
	}
	if p, ok := s.knownPathOf(ctx, id, kind); ok {
		return p, nil
	}
	list := "jupyter://notebooks"
	if kind == ydoc.KindText {
		list = "jupyter://documents"
	}
	// The same answer for an id never seen and for one of a document the caller may not see.
	return "", badURI("unknown file id: read %s for the ids", list)
}

// maxListedDocs bounds the documents a listing resolves file ids for (one server call each,
// the first time).
const maxListedDocs = 200

// readDocList lists notebooks (or text documents): path, file id, and for open rooms the cell
// count and collaborators.
func (s *Server) readDocList(ctx context.Context, kind ydoc.Kind) (resourceRead, error) {
	fileType := "notebook"
	if kind == ydoc.KindText {
		fileType = "file"
	}
	files, walkCut, err := s.walk(ctx, "", fileType, "path")
	if err != nil {
		return resourceRead{}, fmt.Errorf("list %ss: %w", fileType, err)
	}
	total := len(files)
	if len(files) > maxListedDocs {
		files = files[:maxListedDocs]
	}
	prefix := uriNotebooks
	if kind == ydoc.KindText {
		prefix = uriDocuments
	}
	var list []map[string]any
	for _, f := range files {
		if kind == ydoc.KindText && extOf(f.Path) == "ipynb" {
			continue
		}
		e := map[string]any{"path": f.Path}
		if id, err := s.fileID(ctx, f.Path, kind); err == nil {
			e["file_id"], e["uri"] = id, prefix+"/"+id
		} else if ctx.Err() != nil {
			return resourceRead{}, ctx.Err()
		}
		e["open"] = false
		if room := s.liveRoom(ctx, f.Path, kind); room != nil {
			e["open"] = true
			e["collaborators"] = collabOf(room.Info()).Collaborators
			if kind == ydoc.KindNotebook {
				_ = room.View(ctx, func(d *ydoc.Doc) error {
					e["cell_count"] = d.NumCells()
					return nil
				})
			}
		}
		list = append(list, e)
	}
	key := "notebooks"
	if kind == ydoc.KindText {
		key = "documents"
	}
	out := map[string]any{key: list, "count": len(list)}
	if total > len(files) || walkCut {
		out["truncated"] = fmt.Sprintf("the first %d of %d; use list_%s with path_prefix for the rest", len(files), total, key)
	}
	return jsonRead(out)
}

// readNotebookURI serves jupyter://notebooks/{id}[/json|/cells|/cells/{cell_id}].
func (s *Server) readNotebookURI(ctx context.Context, p string, sub []string) (resourceRead, error) {
	switch {
	case len(sub) == 0:
		room, err := s.openDoc(ctx, p, ydoc.KindNotebook, "")
		if err != nil {
			return resourceRead{}, err
		}
		a := s.notebookReadDefaults()
		a.Format, a.IncludeCollab = "markdown", false
		res, err := s.readNotebook(ctx, room, a, s.opts.MaxResponseTokens)
		if err != nil {
			return resourceRead{}, err
		}
		return resourceRead{mime: "text/markdown", text: res.Text}, nil
	case len(sub) == 1 && sub[0] == "json":
		return s.readNotebookJSON(ctx, p)
	case len(sub) == 1 && sub[0] == "cells":
		return s.readCellList(ctx, p)
	case len(sub) == 2 && sub[0] == "cells":
		return s.readCell(ctx, p, sub[1])
	}
	return resourceRead{}, badURI("unknown notebook resource %q: use …/{file_id}, …/{file_id}/json, …/{file_id}/cells or …/{file_id}/cells/{cell_id}", strings.Join(sub, "/"))
}

func (s *Server) readNotebookModel(ctx context.Context, p string) (ydoc.Notebook, bridge.Version, error) {
	room, err := s.openDoc(ctx, p, ydoc.KindNotebook, "")
	if err != nil {
		return ydoc.Notebook{}, "", err
	}
	var nb ydoc.Notebook
	var version bridge.Version
	err = room.Read(ctx, func(d *ydoc.Doc, h bridge.History) error {
		var err error
		nb, err = d.Notebook()
		version = h.Version()
		return err
	})
	return nb, version, err
}

// readNotebookJSON is the notebook in nbformat with sanitised outputs, cut at a cell boundary
// to the token budget (the cut is said in metadata.jupyter_collab_mcp).
func (s *Server) readNotebookJSON(ctx context.Context, p string) (resourceRead, error) {
	nb, version, err := s.readNotebookModel(ctx, p)
	if err != nil {
		return resourceRead{}, err
	}
	budget := s.opts.MaxResponseTokens - 500
	var cells []map[string]any
	shown := 0
	for i, c := range nb.Cells {
		cell := map[string]any{"id": c.ID, "cell_type": c.Type, "metadata": orEmpty(c.Metadata), "source": c.Source}
		if c.Type == ydoc.CellCode {
			outs := []map[string]any{}
			for _, o := range c.Outputs {
				outs = append(outs, renderOutput(o, defaultOutputChars))
			}
			cell["outputs"], cell["execution_count"] = outs, c.ExecutionCount
		}
		b, _ := json.Marshal(cell)
		budget -= s.tokens.Count(string(b))
		if budget < 0 && i > 0 {
			break
		}
		cells = append(cells, cell)
		shown++
	}
	md := map[string]any{}
	for k, v := range nb.Metadata {
		md[k] = v
	}
	info := map[string]any{"path": p, "version": version, "outputs": fmt.Sprintf("sanitised: ANSI stripped, text capped at %d characters, HTML, JavaScript and binary data described", defaultOutputChars)}
	if shown < len(nb.Cells) {
		info["truncated"] = fmt.Sprintf("cells 0–%d of %d (max %d tokens); read the rest with get_notebook and cell_range {\"start\": %d}", shown-1, len(nb.Cells), s.opts.MaxResponseTokens, shown)
	}
	md["jupyter_collab_mcp"] = info
	return jsonRead(map[string]any{"nbformat": nb.NBFormat, "nbformat_minor": nb.NBFormatMinor, "metadata": md, "cells": orEmptyList(cells)})
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func orEmptyList(l []map[string]any) []map[string]any {
	if l == nil {
		return []map[string]any{}
	}
	return l
}

// readCellList is one entry per cell: id, type, first line, size, outputs in brief.
func (s *Server) readCellList(ctx context.Context, p string) (resourceRead, error) {
	nb, version, err := s.readNotebookModel(ctx, p)
	if err != nil {
		return resourceRead{}, err
	}
	cells := make([]any, 0, len(nb.Cells))
	for i, c := range nb.Cells {
		e := map[string]any{"index": i, "id": c.ID, "cell_type": c.Type, "first_line": oneLine(c.Source, 80), "lines": lineCount(c.Source), "source_hash": sourceHash(c.Source)}
		if c.ExecutionCount != nil {
			e["execution_count"] = *c.ExecutionCount
		}
		if c.ExecutionState == "running" {
			e["execution_state"] = "running"
		}
		if len(c.Outputs) > 0 {
			var outs []string
			for _, o := range c.Outputs {
				outs = append(outs, outputSummary(o))
			}
			e["outputs"] = outs
		}
		cells = append(cells, e)
	}
	res := s.fitTokens(result{Data: map[string]any{"path": p, "version": version, "cell_count": len(nb.Cells), "cells": cells}}, s.opts.MaxResponseTokens-200)
	return jsonRead(res.Data)
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// readCell is one cell's source with a mime type that fits it (markdown, the kernel language,
// plain text for raw cells) and, for code cells with outputs, a second part with the outputs.
func (s *Server) readCell(ctx context.Context, p, cellID string) (resourceRead, error) {
	nb, _, err := s.readNotebookModel(ctx, p)
	if err != nil {
		return resourceRead{}, err
	}
	ids := make([]string, len(nb.Cells))
	for i, c := range nb.Cells {
		ids[i] = c.ID
	}
	if len(matchCells(ids, cellID)) > 1 { // a handle (handles.go) that names several cells
		_, err := resolveCell(ids, cellID)
		return resourceRead{}, badURI("%v", err)
	}
	if m := matchCells(ids, cellID); len(m) == 1 && cellID != "" {
		cellID = m[0]
	}
	for i, c := range nb.Cells {
		if c.ID != cellID {
			continue
		}
		read := resourceRead{mime: "text/plain", text: c.Source}
		switch c.Type {
		case ydoc.CellMarkdown:
			read.mime = "text/markdown"
		case ydoc.CellCode:
			read.mime = languageMime(notebookLanguage(nb.Metadata))
			if len(c.Outputs) > 0 {
				v := newCellView(i, c, viewOpts{outputs: true, maxChars: defaultOutputChars})
				var b strings.Builder
				fmt.Fprintf(&b, "Outputs of cell %s (index %d", c.ID, i)
				if c.ExecutionCount != nil {
					fmt.Fprintf(&b, ", execution count %d", *c.ExecutionCount)
				}
				b.WriteString("):\n\n")
				for _, o := range v.Outputs {
					b.WriteString(markdownOutput(o) + "\n")
				}
				text, cut := s.capTokens(b.String(), s.opts.MaxResponseTokens/2)
				if cut {
					text += "\n… [outputs cut at the token budget; read them with get_notebook and max_output_chars]"
				}
				read.more = append(read.more, mcp.TextResourceContents{MIMEType: "text/markdown", Text: text})
			}
		}
		read.text, _ = s.capTokens(read.text, s.opts.MaxResponseTokens/2)
		return read, nil
	}
	return resourceRead{}, badURI("no cell %q in %s: read its …/cells resource for the ids", cellID, p)
}

// capTokens cuts text to at most budget tokens (at a line boundary when it can).
func (s *Server) capTokens(text string, budget int) (string, bool) {
	if len(text) < budget*2 || s.tokens.Count(text) <= budget {
		return text, false
	}
	lines := strings.SplitAfter(text, "\n")
	lo, hi, keep := 0, len(lines), 0
	for lo <= hi {
		mid := (lo + hi) / 2
		if s.tokens.Count(strings.Join(lines[:mid], "")) <= budget {
			keep, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if keep == 0 { // one huge line
		cut, _ := capText(text, budget*2)
		return cut, true
	}
	return strings.Join(lines[:keep], ""), true
}

// languageMime is the mime type of source code in a language.
func languageMime(lang string) string {
	switch strings.ToLower(lang) {
	case "python", "ipython", "python3":
		return "text/x-python"
	case "r":
		return "text/x-r"
	case "julia":
		return "text/x-julia"
	case "javascript", "typescript":
		return "text/javascript"
	case "":
		return "text/plain"
	}
	return "text/x-" + strings.ToLower(lang)
}

// textMime is the mime type of a text file by extension.
func textMime(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".py":
		return "text/x-python"
	case ".md", ".markdown":
		return "text/markdown"
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".csv":
		return "text/csv"
	case ".html", ".htm":
		return "text/html"
	case ".js", ".mjs":
		return "text/javascript"
	case ".r":
		return "text/x-r"
	case ".jl":
		return "text/x-julia"
	case ".sh":
		return "text/x-sh"
	case ".toml":
		return "application/toml"
	}
	return "text/plain"
}

// readText is a text document, cut to the token budget.
func (s *Server) readText(ctx context.Context, p string) (resourceRead, error) {
	room, err := s.openDoc(ctx, p, ydoc.KindText, "")
	if err != nil {
		return resourceRead{}, err
	}
	var text string
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		var err error
		text, err = d.Text()
		return err
	}); err != nil {
		return resourceRead{}, err
	}
	if cut, was := s.capTokens(text, s.opts.MaxResponseTokens); was {
		text = cut + fmt.Sprintf("\n… [cut at %d tokens; read the rest with get_document and line_range]", s.opts.MaxResponseTokens)
	}
	return resourceRead{mime: textMime(p), text: text}, nil
}

// readExecution is a job as get_execution returns it, images summarised rather than attached.
func (s *Server) readExecution(ctx context.Context, id string) (resourceRead, error) {
	if s.opts.Executor == nil {
		return resourceRead{}, badURI("execution is not available: this server runs without a kernel executor")
	}
	job, err := s.job(ctx, id)
	if err != nil {
		return resourceRead{}, badURI("%s", errUnknownJob)
	}
	res := s.renderJob(jobRun{view: job.View(), opts: textRender})
	res = s.fitTokens(res, s.opts.MaxResponseTokens)
	return jsonRead(res.Data)
}

// contents turns a read into MCP resource contents for uri.
func (r resourceRead) contents(uri string) []mcp.ResourceContents {
	out := []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: r.mime, Text: r.text}}
	for _, m := range r.more {
		if t, ok := m.(mcp.TextResourceContents); ok {
			t.URI = uri
			m = t
		}
		out = append(out, m)
	}
	return out
}

// resourceFailure makes a read error what the client shows: the tool-style message for
// argument problems, the error otherwise. A resource that does not exist (also one the caller
// may not read: its existence is not the caller's to learn) starts "resource not found: " and a
// malformed argument "invalid resource request: ", words the front (front.go) turns into the
// JSON-RPC codes MCP specifies; anything else stays an internal error.
func resourceFailure(uri string, err error) error {
	var re *resourceError
	var te *toolError
	switch {
	case errors.As(err, &re) && re.invalid:
		return fmt.Errorf("%sread %s: %s", invalidPrefix, uri, re.msg)
	case errors.As(err, &re), notPermitted(err), bridge.IsNotFound(err):
		return fmt.Errorf("%sread %s: %w", notFoundPrefix, uri, err)
	case errors.As(err, &te):
		return fmt.Errorf("read %s: %s", uri, te.Message)
	}
	return fmt.Errorf("read %s: %w", uri, err)
}

// notPermitted reports a refusal of the door (door.go: mayUse, refused).
func notPermitted(err error) bool {
	var te *toolError
	if errors.As(err, &te) && len(te.Details) > 0 && te.Details[0].Message == "not permitted" {
		return true
	}
	return strings.HasPrefix(err.Error(), "not permitted: ")
}

// registerContentResources registers the jupyter:// content resources and templates.
func (s *Server) registerContentResources() {
	read := func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		r, err := s.readURI(ctx, sessionKey(ctx), uri)
		if err != nil {
			return nil, resourceFailure(uri, err)
		}
		s.accountResource(uri, r)
		return r.contents(uri), nil
	}
	static := []struct{ uri, name, desc, mime string }{
		{uriNotebooks, "notebooks", "The notebooks under the Jupyter root: path, file id (for jupyter://notebooks/{file_id}), whether a room is open, its cell count and collaborators.", "application/json"},
		{uriNotebooksCurrent, "current notebook", "The notebook this client worked on last, as markdown (the same as jupyter://notebooks/{file_id}).", "text/markdown"},
		{uriDocuments, "text documents", "The text files under the Jupyter root: path, file id (for jupyter://documents/{file_id}), open room, collaborators.", "application/json"},
		{uriDocumentsCurrent, "current text document", "The text document this client worked on last.", "text/plain"},
		{uriTemplates, "notebook templates", "Starting structures for new notebooks: create_notebook_session with create_if_missing=true and template=<name>.", "application/json"},
	}
	for _, r := range static {
		s.mcp.AddResource(mcp.NewResource(r.uri, r.name, mcp.WithResourceDescription(r.desc), mcp.WithMIMEType(r.mime)), read)
	}
	templates := []struct{ uri, name, desc, mime string }{
		{"jupyter://notebooks/{file_id}", "notebook (markdown)", "A live notebook as markdown: code fenced by language, outputs sanitised and summarised, cut at a cell boundary to the token budget.", "text/markdown"},
		{"jupyter://notebooks/{file_id}/json", "notebook (nbformat)", "A live notebook as nbformat JSON with sanitised outputs (ANSI stripped, HTML/JavaScript/binary described).", "application/json"},
		{"jupyter://notebooks/{file_id}/cells", "notebook cells", "One entry per cell: index, id, type, first line, line count, source hash, outputs in brief.", "application/json"},
		{"jupyter://notebooks/{file_id}/cells/{cell_id}", "notebook cell", "One cell (by id or handle): its source (text/markdown, text/x-python… by cell type and kernel language) and, for code cells, its outputs.", "text/plain"},
		{"jupyter://documents/{file_id}", "text document", "A live text document (mime type by extension), cut to the token budget.", "text/plain"},
		{"jupyter://executions/{job_id}", "execution", "An execution job (from execute_notebook_cell, batch_execute_notebook_cells): status and sanitised outputs per cell.", "application/json"},
		{"jupyter://templates/{name}", "notebook template", "A notebook template in nbformat: " + strings.Join(templateNames(), ", ") + ".", "application/x-ipynb+json"},
	}
	for _, t := range templates {
		s.mcp.AddResourceTemplate(mcp.NewResourceTemplate(t.uri, t.name, mcp.WithTemplateDescription(t.desc), mcp.WithTemplateMIMEType(t.mime)), server.ResourceTemplateHandlerFunc(read))
	}
	s.mcp.AddResourceTemplate(mcp.NewResourceTemplate("jupyter://guides/{mode}", "working guide",
		mcp.WithTemplateDescription("How to work in a live shared notebook, by mode ("+strings.Join(guideModes, ", ")+"): take stock of the tools, plan with checkpoints, then read → act → observe → decide; leave the notebook clean."),
		mcp.WithTemplateMIMEType("text/markdown"),
		mcp.WithTemplateAnnotations([]mcp.Role{mcp.RoleAssistant}, 1.0, ""),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		r, err := s.readURI(ctx, sessionKey(ctx), uri)
		if err != nil {
			return nil, resourceFailure(uri, err)
		}
		return r.contents(uri), nil
	})
}

// accountResource counts a resource read in the token statistics (as a pseudo tool).
func (s *Server) accountResource(uri string, r resourceRead) {
	s.acct.do(func() {
		n := s.tokens.Count(r.text)
		for _, m := range r.more {
			if t, ok := m.(mcp.TextResourceContents); ok {
				n += s.tokens.Count(t.Text)
			}
		}
		s.stats.record("resources/read", uri, n, nil)
		s.metrics.served("resources/read", n)
	})
}
