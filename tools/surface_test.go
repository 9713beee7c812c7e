package tools_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// The MCP surface: tools/list, annotations, schemas, the lean result shape, and the operation
// resources.

func TestNewRequiresManager(t *testing.T) {
	if _, err := tools.New(tools.Options{}); err == nil {
		t.Fatal("tools.New without a manager succeeded")
	}
}

func listTools(t *testing.T, e *env) map[string]mcp.Tool {
	t.Helper()
	res, err := e.c.ListTools(ctxT(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	out := map[string]mcp.Tool{}
	for _, tool := range res.Tools {
		if _, dup := out[tool.Name]; dup {
			t.Errorf("tool %s listed twice", tool.Name)
		}
		out[tool.Name] = tool
	}
	return out
}

// toolSchema returns a listed tool's input schema as JSON.
func toolSchema(t *testing.T, tool mcp.Tool) map[string]any {
	t.Helper()
	raw := tool.RawInputSchema
	if len(raw) == 0 {
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: schema: %v", tool.Name, err)
	}
	return s
}

func TestToolsListHasEveryTool(t *testing.T) {
	e := newEnv(t, nil)
	got := listTools(t, e)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	want := slices.Clone(allTools)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools/list = %v, want %v", names, want)
	}
	for _, n := range allTools {
		if got[n].Description == "" {
			t.Errorf("%s has no description", n)
		}
	}
}

func TestToolAnnotationsAreExplicit(t *testing.T) {
	e := newEnv(t, nil)
	// Read the wire form: a hint left out (nil) would make clients assume mcp-go's defaults
	// (destructive, open world).
	res, err := e.c.ListTools(ctxT(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	var wire struct {
		Tools []struct {
			Name        string         `json:"name"`
			Annotations map[string]any `json:"annotations"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if len(wire.Tools) != len(allTools) {
		t.Fatalf("%d tools on the wire, want %d", len(wire.Tools), len(allTools))
	}
	for _, tool := range wire.Tools {
		for _, h := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
			if _, ok := tool.Annotations[h].(bool); !ok {
				t.Errorf("%s: annotation %s = %v, want an explicit boolean", tool.Name, h, tool.Annotations[h])
			}
		}
		a := tool.Annotations
		if a["openWorldHint"] != false {
			t.Errorf("%s: openWorldHint = %v, want false", tool.Name, a["openWorldHint"])
		}
		if slices.Contains(readTools, tool.Name) {
			if a["readOnlyHint"] != true || a["destructiveHint"] != false || a["idempotentHint"] != true {
				t.Errorf("%s: read tool annotations %v, want readOnly, not destructive, idempotent", tool.Name, a)
			}
		} else if a["readOnlyHint"] != false {
			t.Errorf("%s: readOnlyHint = %v, want false for a tool that writes", tool.Name, a["readOnlyHint"])
		}
		if str(a["title"]) == "" {
			t.Errorf("%s: no title annotation", tool.Name)
		}
	}
	got := listTools(t, e)
	for name, want := range map[string]bool{
		"batch_delete_notebook_cells": true, "batch_delete_text": true, "batch_update_document": true,
		"batch_update_notebook_cells": true, "batch_insert_notebook_cells": false, "batch_insert_text": false,
		"create_notebook_session": false, "create_document_session": false, "move_notebook_cells": false,
	} {
		d := got[name].Annotations.DestructiveHint
		if d == nil || *d != want {
			t.Errorf("%s: destructiveHint = %v, want %v", name, d, want)
		}
	}
}

// The full input schema (jupyter://operations/{name}, embedded in failures) is closed at every
// level and accepts includeSchema; tools/list carries its listing form: the same fields, types,
// enums and defaults, without bounds, closure and the options every tool of a kind takes, and
// with descriptions only on the fields that need them.
func TestInputSchemas(t *testing.T) {
	e := newEnv(t, nil)
	for name, tool := range listTools(t, e) {
		text, _ := e.readText("jupyter://operations/" + name)
		var doc map[string]any
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := asMap(t, doc["input_schema"])
		if s["type"] != "object" {
			t.Errorf("%s: schema type %v", name, s["type"])
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", name, s["additionalProperties"])
		}
		props, _ := s["properties"].(map[string]any)
		inc, _ := props["includeSchema"].(map[string]any)
		if inc["type"] != "boolean" {
			t.Errorf("%s: includeSchema property = %v, want a boolean", name, props["includeSchema"])
		}
		// Every nested object without free-form keys is closed too.
		var walk func(path string, s map[string]any)
		walk = func(path string, s map[string]any) {
			if s["type"] == "object" {
				if _, ok := s["additionalProperties"].(bool); !ok {
					t.Errorf("%s %s: additionalProperties not set", name, path)
				}
				p, _ := s["properties"].(map[string]any)
				for k, v := range p {
					walk(path+"."+k, v.(map[string]any))
				}
			}
			if it, ok := s["items"].(map[string]any); ok {
				walk(path+"[]", it)
			}
		}
		walk(name, s)
		if _, hasPath := props["path"]; hasPath {
			if req, _ := s["required"].([]any); name != "list_notebooks" && name != "list_documents" && name != "count_tokens" && name != "search_notebook" && !slices.Contains(req, any("path")) {
				t.Errorf("%s: path is not required (required %v)", name, req)
			}
		}

		// The listing: a projection of the full schema.
		listed := toolSchema(t, tool)
		var project func(path string, full, l map[string]any)
		project = func(path string, full, l map[string]any) {
			for _, k := range []string{"additionalProperties", "minimum", "maximum", "minItems", "maxItems"} {
				if _, ok := l[k]; ok {
					t.Errorf("%s %s: the listing carries %s", name, path, k)
				}
			}
			for _, k := range []string{"type", "enum", "default", "required"} {
				if lr, ok := l[k].([]any); ok && len(lr) == 0 && full[k] == nil { // mcp-go's decoding
					continue
				}
				if !reflect.DeepEqual(l[k], full[k]) {
					t.Errorf("%s %s: listed %s %v, full %v", name, path, k, l[k], full[k])
				}
			}
			if d, ok := l["description"]; ok && d != full["description"] {
				t.Errorf("%s %s: listed description %v, full %v", name, path, d, full["description"])
			}
			lp, _ := l["properties"].(map[string]any)
			fp, _ := full["properties"].(map[string]any)
			for k, v := range lp {
				if fp[k] == nil {
					t.Errorf("%s %s: listed field %s is not in the full schema", name, path, k)
					continue
				}
				project(path+"."+k, asMap(t, fp[k]), asMap(t, v))
			}
			if li, ok := l["items"].(map[string]any); ok {
				project(path+"[]", asMap(t, full["items"]), li)
			}
		}
		project(name, s, listed)
		lp, _ := listed["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, k := range []string{"includeSchema", "max_tokens", "fork_id"} {
			if _, ok := lp[k]; ok && !slices.Contains(req, any(k)) { // the fork tools require fork_id
				t.Errorf("%s: the listing carries %s (described once, in the instructions)", name, k)
			}
		}
		for k := range props {
			if _, ok := lp[k]; !ok && (slices.Contains(req, any(k)) || k != "includeSchema" && k != "max_tokens" && k != "fork_id") {
				t.Errorf("%s: %s is left out of the listing", name, k)
			}
		}
	}
}

func TestSuccessIsLeanWithoutSchema(t *testing.T) {
	e := newEnv(t, nil)
	r := e.call("get_notebook", map[string]any{"format": "json", "path": "nb.ipynb"})
	if r.IsError {
		t.Fatalf("get_notebook failed: %s", r)
	}
	if len(r.Content) != 1 || r.Content[0]["type"] != "text" {
		t.Fatalf("content = %s, want exactly one text item", compact(r.Content))
	}
	if r.Body == nil {
		t.Fatalf("text is not JSON: %s", r.Texts[0])
	}
	if !reflect.DeepEqual(r.Structured, jsonRoundTrip(t, r.Body)) {
		t.Errorf("structuredContent differs from the text:\nstructured %s\ntext       %s", compact(r.Structured), compact(r.Body))
	}
}

func TestIncludeSchemaEmbedsSchema(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"get_notebook", map[string]any{"format": "json", "path": "nb.ipynb", "includeSchema": true}},
		{"list_documents", map[string]any{"includeSchema": true}},
		{"batch_insert_text", map[string]any{"path": "notes.txt", "operations": []any{map[string]any{"text": "x", "position": 0}}, "includeSchema": true}},
	} {
		r := e.call(tc.tool, tc.args)
		if r.IsError {
			t.Fatalf("%s failed: %s", tc.tool, r)
		}
		if len(r.Content) != 2 || r.Content[0]["type"] != "text" {
			t.Errorf("%s: content %s, want text then the schema", tc.tool, compact(r.Content))
		}
		checkSchemaEmbedded(t, tc.tool, r)
		if !reflect.DeepEqual(r.Structured, jsonRoundTrip(t, r.Body)) {
			t.Errorf("%s: structuredContent differs from the text", tc.tool)
		}
	}
	// includeSchema false is the default behaviour.
	r := e.call("get_notebook", map[string]any{"format": "json", "path": "nb.ipynb", "includeSchema": false})
	if r.IsError || len(r.Resources) != 0 || len(r.Content) != 1 {
		t.Errorf("includeSchema false: %s", r)
	}
}

func TestAlwaysEmbedSchemaOption(t *testing.T) {
	e := newEnv(t, nil, alwaysEmbed)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"get_notebook", map[string]any{"format": "json", "path": "nb.ipynb"}},
		{"list_notebooks", map[string]any{}},
		{"get_document", map[string]any{"path": "notes.txt", "includeSchema": false}},
	} {
		r := e.call(tc.tool, tc.args)
		if r.IsError {
			t.Fatalf("%s failed: %s", tc.tool, r)
		}
		checkSchemaEmbedded(t, tc.tool, r)
	}
}

func TestFailureShapeAndSchema(t *testing.T) {
	e := newEnv(t, nil)
	r := e.fail("get_notebook", map[string]any{"path": "nb.ipynb", "format": "html"})
	if !reflect.DeepEqual(r.Structured, jsonRoundTrip(t, r.Body)) {
		t.Errorf("failure structuredContent differs from the text: %s", r)
	}
	// A failure from the tool itself (not validation) has the same shape.
	r = e.fail("get_notebook", map[string]any{"format": "json", "path": "missing.ipynb"})
	mustContain(t, "missing notebook error", errorText(r), "missing.ipynb")
}

func TestValidation(t *testing.T) {
	e := newEnv(t, nil)
	okCells := []any{map[string]any{"content": "x"}}
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		path []any
		says []string
	}{
		{"unknown field", "get_notebook", map[string]any{"format": "json", "path": "nb.ipynb", "formt": "json"},
			[]any{"formt"}, []string{"unknown field", "format", "include_outputs", "cell_range", "includeSchema"}},
		{"unknown nested field", "batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb", "cells": []any{map[string]any{"source": "x"}}},
			[]any{"cells", 0, "source"}, []string{"unknown field", "content", "cell_type", "metadata"}},
		{"wrong type string", "get_notebook", map[string]any{"format": "json", "path": 42},
			[]any{"path"}, []string{"string", "42"}},
		{"wrong type boolean", "get_notebook", map[string]any{"format": "json", "path": "nb.ipynb", "include_outputs": "yes"},
			[]any{"include_outputs"}, []string{"true or false"}},
		{"wrong type array", "batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb", "cells": map[string]any{"content": "x"}},
			[]any{"cells"}, []string{"array"}},
		{"wrong type integer", "list_notebooks", map[string]any{"max_results": "ten"},
			[]any{"max_results"}, []string{"integer"}},
		{"fractional integer", "list_notebooks", map[string]any{"max_results": 2.5},
			[]any{"max_results"}, []string{"integer"}},
		{"enum", "get_notebook", map[string]any{"path": "nb.ipynb", "format": "html"},
			[]any{"format"}, []string{"json", "markdown", "outline", "html"}},
		{"nested enum", "batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb", "cells": []any{map[string]any{"cell_type": "python"}}},
			[]any{"cells", 0, "cell_type"}, []string{"code", "markdown", "raw", "python"}},
		{"metadata_mode enum", "batch_update_notebook_cells", map[string]any{"path": "nb.ipynb", "updates": []any{map[string]any{"cell_id": "cell-a", "metadata": map[string]any{}, "metadata_mode": "patch"}}},
			[]any{"updates", 0, "metadata_mode"}, []string{"merge", "replace"}},
		{"below minimum", "get_notebook", map[string]any{"format": "json", "path": "nb.ipynb", "max_content_length": 10},
			[]any{"max_content_length"}, []string{"at least 1000"}},
		{"above maximum", "list_documents", map[string]any{"max_results": 5000},
			[]any{"max_results"}, []string{"at most 1000"}},
		{"negative index", "batch_delete_notebook_cells", map[string]any{"path": "nb.ipynb", "start_index": -1},
			[]any{"start_index"}, []string{"at least 0"}},
		{"position below -1", "batch_insert_text", map[string]any{"path": "notes.txt", "operations": []any{map[string]any{"text": "x", "position": -2}}},
			[]any{"operations", 0, "position"}, []string{"at least -1"}},
		{"missing path", "get_notebook", map[string]any{"format": "json"},
			[]any{"path"}, []string{"required"}},
		{"missing cells", "batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb"},
			[]any{"cells"}, []string{"required"}},
		{"missing nested required", "batch_delete_text", map[string]any{"path": "notes.txt", "operations": []any{map[string]any{"position": 0}}},
			[]any{"operations", 0, "length"}, []string{"required"}},
		{"empty array", "batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb", "cells": []any{}},
			[]any{"cells"}, []string{"at least 1"}},
		{"cell_range wrong type", "get_notebook", map[string]any{"format": "json", "path": "nb.ipynb", "cell_range": []any{0, 1}},
			[]any{"cell_range"}, []string{"object"}},
		{"includeSchema wrong type", "list_notebooks", map[string]any{"includeSchema": "yes"},
			[]any{"includeSchema"}, []string{"true or false"}},
		{"wrong nested type", "batch_insert_notebook_cells", map[string]any{"path": "nb.ipynb", "cells": okCells, "positions": []any{"0"}},
			[]any{"positions", 0}, []string{"integer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.srv.OpenCalls()
			r := e.fail(tc.tool, tc.args)
			d := findDetail(t, r, tc.path...)
			mustContain(t, "detail message", d.msg, tc.says...)
			mustContain(t, "error", errorText(r), "invalid arguments")
			if e.srv.OpenCalls() != before {
				t.Errorf("an invalid call reached the server")
			}
		})
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	e := newEnv(t, nil)
	r := e.fail("get_notebook", map[string]any{"format": "html", "bogus": 1, "max_content_length": 1})
	for _, p := range [][]any{{"path"}, {"format"}, {"bogus"}, {"max_content_length"}} {
		findDetail(t, r, p...)
	}
	mustContain(t, "error", errorText(r), "and 3 more")
}

// A required field sent as JSON null is not given.
func TestRequiredFieldNullIsRejected(t *testing.T) {
	e := newEnv(t, nil)
	e.nbVersion("nb.ipynb")
	before := e.snapshot("nb.ipynb")
	for _, tc := range []struct {
		tool, field string
		args        map[string]any
	}{
		{"batch_insert_notebook_cells", "cells", map[string]any{"path": "nb.ipynb", "cells": nil}},
		{"batch_insert_text", "operations", map[string]any{"path": "notes.txt", "operations": nil}},
	} {
		r := e.call(tc.tool, tc.args)
		if !r.IsError {
			t.Errorf("BUG: %s with %s:null succeeds (%s): schema.validate checks only that a required key is present, then skips its null value as \"not given\" (schema.go validate, object case), so a required field can be nulled out and the call does nothing yet reports success", tc.tool, tc.field, r.Texts[0])
		}
		checkFailureShape(t, tc.tool, r)
		findDetail(t, r, tc.field)
	}
	if e.snapshot("nb.ipynb") != before {
		t.Error("the notebook changed")
	}
}

func TestBadPathsRefusedBeforeServer(t *testing.T) {
	e := newEnv(t, nil)
	bad := []string{"../x.ipynb", "/etc/passwd", "a/%2e%2e/b.ipynb", "a/%2E%2e/b.txt", "data/../../x.ipynb", "a\\..\\b.ipynb"}
	calls := map[string]func(p string) map[string]any{
		"get_notebook":            func(p string) map[string]any { return map[string]any{"path": p} },
		"create_notebook_session": func(p string) map[string]any { return map[string]any{"path": p, "create_if_missing": true} },
		"batch_insert_notebook_cells": func(p string) map[string]any {
			return map[string]any{"path": p, "cells": []any{map[string]any{"content": "x"}}}
		},
		"batch_update_notebook_cells": func(p string) map[string]any {
			return map[string]any{"path": p, "updates": []any{map[string]any{"cell_id": "cell-a", "content": "x"}}}
		},
		"batch_delete_notebook_cells": func(p string) map[string]any { return map[string]any{"path": p, "cell_ids": []any{"cell-a"}} },
		"move_notebook_cells": func(p string) map[string]any {
			return map[string]any{"path": p, "cell_ids": []any{"cell-a"}, "to_index": 0}
		},
		"get_document":            func(p string) map[string]any { return map[string]any{"path": p} },
		"create_document_session": func(p string) map[string]any { return map[string]any{"path": p, "create_if_missing": true} },
		"batch_insert_text": func(p string) map[string]any {
			return map[string]any{"path": p, "operations": []any{map[string]any{"text": "x", "position": 0}}}
		},
		"batch_delete_text": func(p string) map[string]any {
			return map[string]any{"path": p, "operations": []any{map[string]any{"position": 0, "length": 1}}}
		},
		"batch_update_document": func(p string) map[string]any {
			return map[string]any{"path": p, "operations": []any{map[string]any{"content": "x"}}}
		},
	}
	for tool, args := range calls {
		for _, p := range bad {
			r := e.fail(tool, args(p))
			d := findDetail(t, r, "path")
			if d.msg == "" {
				t.Errorf("%s(%q): empty path detail", tool, p)
			}
		}
	}
	if n := e.srv.OpenCalls(); n != 0 {
		t.Errorf("%d document sessions were requested for refused paths", n)
	}
	if n := e.srv.DialCalls(); n != 0 {
		t.Errorf("%d rooms were dialled for refused paths", n)
	}
	if rooms := e.m.Rooms(); len(rooms) != 0 {
		t.Errorf("rooms opened for refused paths: %d", len(rooms))
	}
	// Nothing was created either.
	for _, p := range []string{"x.ipynb", "etc/passwd", "b.ipynb"} {
		if _, err := e.srv.Stat(ctxT(t), p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	// A bad prefix for a listing is refused too.
	r := e.fail("list_notebooks", map[string]any{"path_prefix": "../"})
	findDetail(t, r, "path_prefix")
}

// list_documents has no path_prefix argument: a refused path_filter must be reported on
// path_filter.
func TestListDocumentsBadFilterNamesItsField(t *testing.T) {
	e := newEnv(t, nil)
	r := e.fail("list_documents", map[string]any{"path_filter": "a/%2e%2e/"})
	if len(details(r)) == 0 {
		t.Fatalf("no details: %s", r)
	}
	if !details(r)[0].pathIs("path_filter") {
		t.Error("BUG: list_documents reports a refused path_filter under path [\"path_prefix\"], a field list_documents does not have (walk() hard-codes path_prefix in its invalid() calls, notebooks.go walk)")
	}
}

func TestOperationResources(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	lr, err := e.c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatalf("ListResources: %v", err)
	}
	found := false
	for _, r := range lr.Resources {
		if r.URI == "jupyter://operations" {
			found = true
		}
	}
	if !found {
		t.Errorf("resources/list lacks jupyter://operations: %+v", lr.Resources)
	}
	lt, err := e.c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatalf("ListResourceTemplates: %v", err)
	}
	found = false
	for _, tpl := range lt.ResourceTemplates {
		if tpl.URITemplate != nil && tpl.URITemplate.Raw() == "jupyter://operations/{operation}" {
			found = true
		}
	}
	if !found {
		b, _ := json.Marshal(lt)
		t.Errorf("resources/templates/list lacks jupyter://operations/{operation}: %s", b)
	}

	read := func(uri string) (map[string]any, error) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := e.c.ReadResource(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(res.Contents) != 1 {
			t.Fatalf("%s: %d contents", uri, len(res.Contents))
		}
		tc, ok := res.Contents[0].(mcp.TextResourceContents)
		if !ok {
			t.Fatalf("%s: contents %T", uri, res.Contents[0])
		}
		if tc.MIMEType != "application/json" {
			t.Errorf("%s: mime %q", uri, tc.MIMEType)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(tc.Text), &m); err != nil {
			t.Fatalf("%s: not JSON: %v", uri, err)
		}
		return m, nil
	}

	cat, err := read("jupyter://operations")
	if err != nil {
		t.Fatalf("read catalog: %v", err)
	}
	var names []string
	for _, op := range asList(t, cat["operations"]) {
		m := asMap(t, op)
		names = append(names, str(m["name"]))
		if m["uri"] != "jupyter://operations/"+str(m["name"]) {
			t.Errorf("catalog entry %v has uri %v", m["name"], m["uri"])
		}
		if !slices.Contains([]string{"notebooks", "scripts", "documents", "execution", "presence", "forks", "history", "kernels", "admin", "toolsets"}, str(m["category"])) {
			t.Errorf("catalog entry %v has category %v", m["name"], m["category"])
		}
		if str(m["description"]) == "" || str(m["title"]) == "" {
			t.Errorf("catalog entry %v lacks title or description", m["name"])
		}
	}
	sort.Strings(names)
	want := append(slices.Clone(allTools), "enable_toolset") // listed only while a toolset is off
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Errorf("catalog lists %v, want %v", names, want)
	}

	doc, err := read("jupyter://operations/get_notebook")
	if err != nil {
		t.Fatalf("read get_notebook: %v", err)
	}
	for _, k := range []string{"name", "title", "description", "category", "input_schema", "example"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("operation doc lacks %q: %s", k, compact(doc))
		}
	}
	if doc["name"] != "get_notebook" || doc["category"] != "notebooks" {
		t.Errorf("operation doc = %s", compact(doc))
	}
	is := asMap(t, doc["input_schema"])
	props := asMap(t, is["properties"])
	for _, k := range []string{"path", "format", "include_outputs", "include_collaboration_state", "max_content_length", "cell_range", "includeSchema"} {
		if _, ok := props[k]; !ok {
			t.Errorf("get_notebook schema lacks %q", k)
		}
	}
	// The example is itself a valid call.
	ex := asMap(t, doc["example"])
	if r := e.call("get_notebook", map[string]any{"path": "nb.ipynb", "format": ex["format"], "cell_range": ex["cell_range"]}); r.IsError {
		t.Errorf("the example's arguments do not validate: %s", r)
	}

	// tools/list carries its listing form (TestInputSchemas).

	_, err = read("jupyter://operations/delete_everything")
	if err == nil {
		t.Fatal("reading an unknown operation succeeded")
	}
	for _, n := range allTools {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("unknown-operation error does not name %s: %v", n, err)
		}
	}
}

func TestExamplesValidate(t *testing.T) {
	// Every operation's example must pass its own schema: check that validation does not
	// reject any of them (they may fail later for lack of the files they name).
	e := newEnv(t, nil)
	for _, name := range allTools {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = "jupyter://operations/" + name
		res, err := e.c.ReadResource(ctxT(t), req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var doc map[string]any
		_ = json.Unmarshal([]byte(res.Contents[0].(mcp.TextResourceContents).Text), &doc)
		ex := asMap(t, doc["example"])
		for _, k := range []string{"path", "document_path"} {
			if p, ok := ex[k]; ok {
				ex[k] = "__missing__/" + str(p) // never touch real files
			}
		}
		delete(ex, "create_if_missing")
		delete(ex, "template")                                                                 // applies only with create_if_missing
		if name == "list_notebooks" || name == "list_documents" || name == "search_notebook" { // walk real folders
			continue
		}
		r := e.call(name, ex)
		if r.IsError && strings.Contains(errorText(r), "invalid arguments") {
			t.Errorf("%s: example rejected by its schema: %s", name, errorText(r))
		}
	}
}

var _ = bridge.ErrBadPath
