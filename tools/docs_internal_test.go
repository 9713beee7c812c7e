package tools

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/apps"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/gendoc"
)

// docs/tools.md's reference sections, and the README's table of toolsets, are generated from
// the operations: the toolsets and the
// default set from toolsets and operation.Default, each tool's description, scope, annotations,
// arguments (with their defaults, bounds and descriptions, from the full schema) and example.
// `make docs` (go test -run TestGeneratedDocs -update ./tools/) rewrites them; without -update
// the test fails when the page differs from the code.

var updateDocs = flag.Bool("update", false, "rewrite the generated sections of docs/tools.md and README.md")

// anyExecutor is an executor that is never called: with one, New registers the execution tools.
type anyExecutor struct{ execution.Executor }

// docServer is a server with every tool, as a jupyter-server with a kernel gives it.
func docServer(t *testing.T) *Server {
	t.Helper()
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: bridgetest.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	s, err := New(Options{Manager: m, Executor: anyExecutor{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGeneratedDocs(t *testing.T) {
	s := docServer(t)
	gendoc.Check(t, "../docs/tools.md", map[string]string{
		"toolsets":  s.toolsetsDoc(""),
		"reference": s.referenceDoc(),
	}, *updateDocs)
	gendoc.Check(t, "../README.md", map[string]string{"toolsets": s.toolsetsDoc("docs/tools.md")}, *updateDocs)
	withApps := docServerWith(t, AppsAuto)
	gendoc.Check(t, "../docs/apps.md", map[string]string{"apps": withApps.appsDoc()}, *updateDocs)
}

// docServerWith is docServer with the MCP Apps in a mode.
func docServerWith(t *testing.T, mode AppsMode) *Server {
	t.Helper()
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: bridgetest.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	s, err := New(Options{Manager: m, Executor: anyExecutor{}, Apps: mode})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// appsDoc is the table of the apps (resource, what it shows, the tools whose results it shows)
// and the reference of the tools only the apps call.
func (s *Server) appsDoc() string {
	var b strings.Builder
	b.WriteString("| app | resource | shows | beside the results of |\n|---|---|---|---|\n")
	for _, a := range apps.List() {
		var names []string
		for _, op := range s.ops {
			if op.App == a.URI {
				names = append(names, "[`"+op.Name+"`](tools.md#"+op.Name+")")
			}
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", a.Title, a.URI, cell(a.Description), strings.Join(names, ", "))
	}
	b.WriteString("\nThe tools the apps call through the host, listed only to sessions that get the apps, with " +
		"`_meta.ui.visibility: [\"app\"]` (a host keeps them from the model):\n")
	for _, op := range s.ops {
		if op.Category == appCategory {
			b.WriteString(strings.Replace(operationDoc(op), "\n#### ", "\n### ", 1))
		}
	}
	return b.String()
}

// toolsetsDoc is the table of toolsets and what the common selections list; each set links to
// its reference at link (a page; "" for the page itself).
func (s *Server) toolsetsDoc(link string) string {
	var b strings.Builder
	b.WriteString("| toolset | tools (**bold**: in the default set) | for |\n|---|---|---|\n")
	count := func(keep func(op *operation) bool) int {
		n := 0
		for _, op := range s.ops {
			if op.Category != discoveryCategory && keep(op) {
				n++
			}
		}
		return n
	}
	for _, set := range toolsets {
		var names []string
		for _, op := range s.ops {
			if op.Category != set.Name {
				continue
			}
			n := "`" + op.Name + "`"
			if op.Default {
				n = "**" + n + "**"
			}
			names = append(names, n)
		}
		fmt.Fprintf(&b, "| [`%s`](%s#the-%s-toolset) | %s | %s |\n", set.Name, link, set.Name, strings.Join(names, ", "), set.About)
	}
	cursor, err := parseSelection([]string{CursorToolsets}, s.opsByName)
	if err != nil {
		panic(err)
	}
	def, _ := parseSelection(nil, s.opsByName)
	fmt.Fprintf(&b, "\n`default` offers %d tools and `all` %d (%d without a kernel to run code); `enable_toolset` is "+
		"listed too while a set is off. A client that refuses more than 40 tools per server (Cursor) takes "+
		"`default`, or `%s`: every set but `documents`, %d tools with `enable_toolset`.\n",
		count(def.has), len(s.ops)-1, count(func(op *operation) bool { return op.Category != "execution" && op.Category != "kernels" }),
		CursorToolsets, count(cursor.has)+1)
	return b.String()
}

// referenceDoc is every tool by toolset: what it does, who may call it, its arguments and an
// example.
func (s *Server) referenceDoc() string {
	var b strings.Builder
	sets := append([]toolset{}, toolsets...)
	sets = append(sets, toolset{discoveryCategory, "turn on more tools in a session; listed while a set is off"})
	for _, set := range sets {
		heading := "The " + set.Name + " toolset"
		if set.Name == discoveryCategory {
			heading = "Turning toolsets on"
		}
		fmt.Fprintf(&b, "\n### %s\n\n%s.\n", heading, upperFirst(set.About))
		for _, op := range s.ops {
			if op.Category == set.Name {
				b.WriteString(operationDoc(op))
			}
		}
	}
	return strings.TrimPrefix(b.String(), "\n")
}

// operationDoc is one tool's entry.
func operationDoc(op *operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n#### `%s`\n\n**%s.** %s\n\n", op.Name, op.Title, op.Description)
	facts := []string{"scope `" + string(op.Scope) + "`"}
	if op.Default {
		facts = append(facts, "in the default set")
	}
	var hints []string
	for _, h := range []struct {
		on   bool
		name string
	}{{op.ReadOnly, "read-only"}, {op.Destructive, "destructive"}, {op.Idempotent, "idempotent"}} {
		if h.on {
			hints = append(hints, h.name)
		}
	}
	if len(hints) > 0 {
		facts = append(facts, strings.Join(hints, ", "))
	}
	for _, f := range []struct {
		on   bool
		text string
	}{
		{op.Forkable, "`fork_id` works in a fork"},
		{op.Budgeted, "`max_tokens` caps the result"},
		{op.Retryable, "`request_id` makes a retry safe"},
		{op.Task, "runs as an MCP task"},
		{op.App != "", "its results show in an [MCP App](apps.md) (`" + op.App + "`)"},
	} {
		if f.on {
			facts = append(facts, f.text)
		}
	}
	b.WriteString(strings.Join(facts, " · ") + "\n")
	var rows []string
	argumentRows(op.Input, "", op.Input.Required, &rows)
	if len(rows) > 0 {
		b.WriteString("\n| argument | type | default | meaning |\n|---|---|---|---|\n")
		for _, r := range rows {
			b.WriteString(r + "\n")
		}
	}
	if op.Example != nil {
		ex, err := json.Marshal(op.Example)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "\nExample: `%s`\n", ex)
	}
	return b.String()
}

// common are the options register adds (or every tool takes): the facts line names them.
var common = map[string]bool{"includeSchema": true, "fork_id": true, "max_tokens": true, requestIDField: true}

// argumentRows flattens a schema's properties into table rows: nested objects as a.b, items of
// arrays of objects as a[].b.
func argumentRows(s *schema, prefix string, required []string, rows *[]string) {
	for _, p := range s.Properties {
		if prefix == "" && common[p.Name] {
			continue
		}
		name := prefix + p.Name
		label := "`" + name + "`"
		if contains(required, p.Name) {
			label += " (required)"
		}
		def := ""
		if p.Schema.Default != nil {
			d, _ := json.Marshal(p.Schema.Default)
			def = "`" + string(d) + "`"
		}
		*rows = append(*rows, fmt.Sprintf("| %s | %s | %s | %s |", label, typeOf(p.Schema), def, cell(p.Schema.Description)))
		switch {
		case p.Schema.Type == "object" && len(p.Schema.Properties) > 0:
			argumentRows(p.Schema, name+".", p.Schema.Required, rows)
		case p.Schema.Type == "array" && p.Schema.Items != nil && p.Schema.Items.Type == "object":
			argumentRows(p.Schema.Items, name+"[].", p.Schema.Items.Required, rows)
		}
	}
}

// typeOf says a value's type with its allowed values or bounds.
func typeOf(s *schema) string {
	t := s.Type
	if t == "" {
		t = "any"
	}
	switch {
	case len(s.Enum) > 0:
		t += ": " + strings.Join(s.Enum, ", ")
	case s.Min != nil && s.Max != nil:
		t += " " + number(*s.Min) + "–" + number(*s.Max)
	case s.Min != nil:
		t += " ≥ " + number(*s.Min)
	case s.Type == "array" && s.Items != nil:
		t = "array of " + typeOf(s.Items)
	case s.Type == "object" && s.Open:
		t = "object (any keys)"
	}
	if s.Type == "array" && (s.MinItems > 0 || s.MaxItems > 0) {
		t += fmt.Sprintf(", %d–%d items", s.MinItems, s.MaxItems)
	}
	return t
}

func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// cell makes text safe inside a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
