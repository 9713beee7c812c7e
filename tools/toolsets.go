package tools

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
)

// Toolsets: which tools a session is offered. Most clients put every listed tool's definition into
// every model request, so the default list is the daily loop of an agent in a notebook (read,
// search, edit, run, see who is there) and the rest comes in sets a session turns on: by the
// server's configuration (--toolsets, MCP_TOOLSETS), per HTTP request (the X-MCP-Toolsets header
// or the toolsets URL query parameter), or inside the session with enable_toolset (for clients
// that follow notifications/tools/list_changed). Every tool is always registered: a tool outside
// the session's sets is left out of tools/list and, called by name, answered with the set that
// holds it and how to turn it on. An engine that cannot support a tool hides it the same way,
// saying why (engineLimits).
//
// A tool's set is its operation's Category, and whether it is in the default set its Default;
// register refuses a category that is no set.

// toolset is a named group of tools.
type toolset struct {
	Name string
	// About says what the set is for, in a few words (instructions, enable_toolset, README).
	About string
}

// toolsets are the sets, in the order the instructions and the README show them.
var toolsets = []toolset{
	{"notebooks", "read, search and edit notebooks"},
	{"scripts", "read many notebooks in one call: a short script loops, filters and returns only what it keeps"},
	{"execution", "run cells and scratch code, follow and cancel runs"},
	{"presence", "collaborators' presence, cursors and recent activity; the agent's status and cursor"},
	{"documents", "text files: list, read, edit"},
	{"forks", "forks and suggestions: propose changes beside a document, diff, merge"},
	{"history", "a document's versions, restore; undo and redo the agent's edits"},
	{"kernels", "interrupt or restart a notebook's kernel"},
	{"admin", "the rooms the sidecar holds, joining and leaving them; token counts"},
}

// discoveryCategory is the category of enable_toolset: offered whenever a set is still off.
const discoveryCategory = "toolsets"

// CursorToolsets is the selection for clients that refuse more than 40 tools per server
// (Cursor): every set but documents (such a client edits text files itself). all lists more.
const CursorToolsets = "notebooks,scripts,execution,presence,forks,history,kernels,admin"

// ToolsetHeader is the HTTP request header that chooses a session's toolsets (as --toolsets).
const ToolsetHeader = "X-MCP-Toolsets"

// ToolsetQuery is the URL query parameter that chooses them (for clients that take only a URL).
const ToolsetQuery = "toolsets"

func isToolset(name string) bool {
	return slices.ContainsFunc(toolsets, func(t toolset) bool { return t.Name == name })
}

// ToolsetNames lists the sets, then the words default and all (for help texts and errors).
func ToolsetNames() []string {
	out := make([]string, 0, len(toolsets)+2)
	for _, t := range toolsets {
		out = append(out, t.Name)
	}
	return append(out, "default", "all")
}

// selection is what a session is offered: whole sets, single tools, the default tools, or all.
type selection struct {
	all   bool
	def   bool
	sets  map[string]bool
	tools map[string]bool
}

// has reports whether the selection offers a tool.
func (sel selection) has(op *operation) bool {
	return sel.all || op.Category == discoveryCategory || sel.sets[op.Category] || sel.tools[op.Name] || sel.def && op.Default
}

// union adds sets turned on later.
func (sel selection) union(sets map[string]bool) selection {
	if len(sets) == 0 {
		return sel
	}
	out := selection{all: sel.all, def: sel.def, tools: sel.tools, sets: map[string]bool{}}
	for k := range sel.sets {
		out.sets[k] = true
	}
	for k := range sets {
		if k == "all" {
			out.all = true
		}
		out.sets[k] = true
	}
	return out
}

// parseSelection reads a toolset spec: comma-separated set names, tool names, default and all.
// tools names the registered tools; nil accepts set names and the two words only.
func parseSelection(spec []string, tools map[string]*operation) (selection, error) {
	sel := selection{sets: map[string]bool{}, tools: map[string]bool{}}
	named := false
	for _, item := range spec {
		for _, w := range strings.Split(item, ",") {
			w = strings.ToLower(strings.TrimSpace(w))
			switch {
			case w == "":
				continue
			case w == "all":
				sel.all = true
			case w == "default":
				sel.def = true
			case isToolset(w):
				sel.sets[w] = true
			case tools != nil && tools[w] != nil:
				sel.tools[w] = true
			default:
				return selection{}, fmt.Errorf("unknown toolset or tool %q (toolsets: %s; or a tool's name)", w, strings.Join(ToolsetNames(), ", "))
			}
			named = true
		}
	}
	if !named {
		sel.def = true
	}
	return sel, nil
}

// CheckToolsets validates a toolset spec (set names, default, all, tool names) before the server
// is built, so a typo in --toolsets fails at start.
func (s *Server) CheckToolsets(spec string) error {
	_, err := parseSelection([]string{spec}, s.opsByName)
	return err
}

// --- per request and per session -------------------------------------------------------------

type requestToolsetsKey struct{}

// withRequestToolsets carries the toolsets an HTTP request chose (header or URL query).
func withRequestToolsets(ctx context.Context, sel selection) context.Context {
	return context.WithValue(ctx, requestToolsetsKey{}, sel)
}

// requestToolsets reads the toolsets an HTTP request names: the X-MCP-Toolsets header and the
// toolsets query parameter, together; ok is false when it names none.
func (s *Server) requestToolsets(r *http.Request) (sel selection, ok bool, err error) {
	var spec []string
	spec = append(spec, r.Header.Values(ToolsetHeader)...)
	spec = append(spec, r.URL.Query()[ToolsetQuery]...)
	if len(spec) == 0 {
		return selection{}, false, nil
	}
	sel, err = parseSelection(spec, s.opsByName)
	return sel, err == nil, err
}

// checkToolsetRequest answers 400 for an HTTP request whose toolsets name no set or tool, before
// MCP sees it, and carries a valid choice in the request's context.
func (s *Server) checkToolsetRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, ok, err := s.requestToolsets(r)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, "{\"error\":\"bad_toolsets\",\"message\":%q}\n", err.Error())
			return
		}
		if ok { // for what the front answers itself (task calls run tools through the door too)
			r = r.WithContext(withRequestToolsets(r.Context(), sel))
		}
		next.ServeHTTP(w, r)
	})
}

// sessionToolsets remembers the sets each MCP session turned on with enable_toolset.
type sessionToolsets struct {
	mu sync.Mutex
	on map[string]map[string]bool // session → sets
}

func (t *sessionToolsets) enable(session, set string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on == nil {
		t.on = map[string]map[string]bool{}
	}
	if t.on[session] == nil {
		t.on[session] = map[string]bool{}
	}
	t.on[session][set] = true
}

func (t *sessionToolsets) of(session string) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(t.on[session]))
	for k := range t.on[session] {
		out[k] = true
	}
	return out
}

func (t *sessionToolsets) forget(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.on, session)
}

// selectionOf is what the caller's session is offered: the request's choice (HTTP) or the
// server's, plus the sets the session turned on.
func (s *Server) selectionOf(ctx context.Context) selection {
	sel := s.toolsets
	if r, ok := ctx.Value(requestToolsetsKey{}).(selection); ok {
		sel = r
	}
	return sel.union(s.sessionSets.of(sessionKey(ctx)))
}

// engineLimits names the tools the server's collaboration engine cannot support, with the
// reason: they are left out of tools/list and refused with it.
func (s *Server) engineLimits(ctx context.Context) map[string]string {
	e, err := s.opts.Manager.Engine(ctx)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	if e.NoForks {
		name := e.Name
		if name == "" {
			name = "this server's collaboration engine"
		}
		for _, op := range s.ops {
			if op.Category == "forks" {
				out[op.Name] = name + " has no fork API (forks need jupyter-collaboration)"
			}
		}
	}
	return out
}

// offered refuses a call to a tool outside the caller's toolsets, saying which set holds it and
// how to turn it on, or one the engine cannot support, saying why.
func (s *Server) offered(ctx context.Context, op *operation) *toolError {
	if op.Category == appCategory {
		if s.appsFor(ctx) {
			return nil
		}
		return failf("%s serves the MCP Apps' views, which this session does not get (its client did not announce "+
			"the %s extension at initialize; the server's --apps option can offer them to every session)", op.Name, AppsExtension)
	}
	if why, ok := s.engineLimits(ctx)[op.Name]; ok {
		return failf("%s is not available here: %s", op.Name, why)
	}
	if s.selectionOf(ctx).has(op) {
		return nil
	}
	return failf("%s is in the %q toolset, which this session has not turned on. Turn it on with "+
		"enable_toolset {\"toolset\": %q} (clients that follow tools/list_changed), or configure it: "+
		"--toolsets default,%s or MCP_TOOLSETS=default,%s at start; over HTTP the header %s: default,%s "+
		"or ?%s=default,%s on the URL", op.Name, op.Category, op.Category, op.Category, op.Category,
		ToolsetHeader, op.Category, ToolsetQuery, op.Category)
}

// listFilter leaves out of tools/list what the caller's session is not offered; for a session
// that gets the MCP Apps, it lists the apps' own tools and marks the tools an app shows (apps.go).
func (s *Server) listFilter(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	sel := s.selectionOf(ctx)
	limits := s.engineLimits(ctx)
	withApps := s.appsFor(ctx)
	offPending := false // some set the engine supports is still off: offer enable_toolset
	for _, op := range s.ops {
		if op.Category != discoveryCategory && op.Category != appCategory && limits[op.Name] == "" && !sel.has(op) {
			offPending = true
			break
		}
	}
	out := tools[:0:0]
	for _, t := range tools {
		op := s.opsByName[t.Name]
		switch {
		case op == nil:
		case limits[op.Name] != "":
		case op.Category == appCategory:
			if withApps {
				out = append(out, t)
			}
		case op.Category == discoveryCategory:
			if offPending {
				out = append(out, t)
			}
		case sel.has(op):
			out = append(out, t)
		}
	}
	if withApps {
		out = s.withAppMeta(out)
	}
	return out
}

// --- enable_toolset --------------------------------------------------------------------------

func (s *Server) registerToolsetTools() {
	names := make([]string, 0, len(toolsets)+1)
	for _, t := range toolsets {
		names = append(names, t.Name)
	}
	names = append(names, "all")
	s.register(&operation{
		Name:     "enable_toolset",
		Title:    "Turn on a toolset",
		Category: discoveryCategory,
		Scope:    auth.ScopeRead,
		Description: "Turn on more tools for this session (the server instructions say what each set holds); your " +
			"tool list then refreshes.",
		Input:    object(brief("toolset", str("The set to turn on.").enum(names...))).required("toolset"),
		Example:  map[string]any{"toolset": "history"},
		ReadOnly: true, Idempotent: true,
		Run: handle(s.enableToolset, renderEnabled),
	})
}

type enableArgs struct {
	Toolset string `json:"toolset"`
}

// toolsetEnabled is what enable_toolset turned on.
type toolsetEnabled struct {
	set         string
	tools       []*operation // now offered
	unavailable map[string]string
}

func (s *Server) enableToolset(ctx context.Context, _ *call, a enableArgs) (toolsetEnabled, error) {
	limits := s.engineLimits(ctx)
	before := s.selectionOf(ctx)
	out := toolsetEnabled{set: a.Toolset, unavailable: map[string]string{}}
	for _, op := range s.ops {
		if op.Category == discoveryCategory || op.Category == appCategory || (a.Toolset != "all" && op.Category != a.Toolset) {
			continue
		}
		if why := limits[op.Name]; why != "" {
			out.unavailable[op.Name] = why
			continue
		}
		if !before.has(op) {
			out.tools = append(out.tools, op)
		}
	}
	if len(out.unavailable) > 0 && len(out.tools) == 0 && !hasAvailable(s.ops, a.Toolset, limits) {
		var why string
		for _, w := range out.unavailable {
			why = w
			break
		}
		return toolsetEnabled{}, failf("the %s toolset is not available here: %s", a.Toolset, why)
	}
	s.sessionSets.enable(sessionKey(ctx), a.Toolset)
	if len(out.tools) > 0 {
		// The client re-lists the tools (mcp-go sends nothing when the session cannot take it).
		_ = s.mcp.SendNotificationToClient(ctx, mcp.MethodNotificationToolsListChanged, nil)
	}
	return out, nil
}

func hasAvailable(ops []*operation, set string, limits map[string]string) bool {
	for _, op := range ops {
		if (set == "all" || op.Category == set) && op.Category != discoveryCategory && op.Category != appCategory && limits[op.Name] == "" {
			return true
		}
	}
	return false
}

func renderEnabled(_ *call, _ enableArgs, e toolsetEnabled) result {
	tools := make([]map[string]string, 0, len(e.tools))
	for _, op := range e.tools {
		tools = append(tools, map[string]string{"name": op.Name, "description": firstSentence(op.Description)})
	}
	out := map[string]any{"toolset": e.set, "enabled": tools}
	if len(e.tools) == 0 {
		out["note"] = "these tools were already on for this session"
	} else {
		out["note"] = "tools/list_changed was sent; if your tool list does not show these tools, your client does not " +
			"follow it: configure the toolset instead (--toolsets / MCP_TOOLSETS, or the " + ToolsetHeader + " header over HTTP)"
	}
	if len(e.unavailable) > 0 {
		names := make([]string, 0, len(e.unavailable))
		for n := range e.unavailable {
			names = append(names, n)
		}
		sort.Strings(names)
		out["unavailable"] = names
		out["unavailable_because"] = e.unavailable[names[0]]
	}
	return result{Data: out}
}
