package tools_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/apps"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

func withApps(m tools.AppsMode) envOpt { return func(o *tools.Options) { o.Apps = m } }

func labURL(u string) envOpt { return func(o *tools.Options) { o.LabURL = u } }

// appsClient is what a host that renders MCP Apps announces at initialize.
var appsClient = mcp.ClientCapabilities{Extensions: map[string]any{
	tools.AppsExtension: map[string]any{"mimeTypes": []any{apps.MIMEType}},
}}

// The tools whose results an app shows, and which.
var appOf = map[string]string{
	"get_notebook":                 apps.Outputs.URI,
	"execute_notebook_cell":        apps.Outputs.URI,
	"batch_execute_notebook_cells": apps.Outputs.URI,
	"get_execution":                apps.Outputs.URI,
	"create_notebook_session":      apps.Notebook.URI,
	"diff_fork":                    apps.Suggestion.URI,
}

var appTools = []string{"app_read_notebook", "app_review_fork", "app_reject_fork_cells"}

func listJSON(t *testing.T, e *env) ([]map[string]any, []map[string]any) {
	t.Helper()
	tl, err := e.c.ListTools(ctxT(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := e.c.ListResources(ctxT(t), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var toolsOut, resOut []map[string]any
	b, _ := json.Marshal(tl.Tools)
	_ = json.Unmarshal(b, &toolsOut)
	b, _ = json.Marshal(rl.Resources)
	_ = json.Unmarshal(b, &resOut)
	return toolsOut, resOut
}

func metaUI(m map[string]any) map[string]any {
	meta, _ := m["_meta"].(map[string]any)
	ui, _ := meta["ui"].(map[string]any)
	return ui
}

// With Apps off, and for a client that does not announce them, the sidecar lists what it listed
// before: the same tools, byte for byte, and no ui:// resource; the apps' tools are refused.
func TestAppsInvisibleWithoutApps(t *testing.T) {
	files := xNotebook(code("c1", "print:hi"))
	off := newXEnv(t, files)
	offTools, offRes := listJSON(t, off.env)
	for _, c := range []struct {
		name string
		e    *xenv
	}{
		{"auto, client without apps", newXEnv(t, files, withApps(tools.AppsAuto))},
		{"auto, client announcing another mime type", newXEnvCaps(t, files, mcp.ClientCapabilities{Extensions: map[string]any{
			tools.AppsExtension: map[string]any{"mimeTypes": []any{"text/uri-list"}}}}, withApps(tools.AppsAuto))},
		{"off, client with apps", newXEnvCaps(t, files, appsClient)},
	} {
		gotTools, gotRes := listJSON(t, c.e.env)
		if compact(gotTools) != compact(offTools) {
			t.Errorf("%s: tools/list differs from the list without apps", c.name)
		}
		if compact(gotRes) != compact(offRes) {
			t.Errorf("%s: resources/list differs from the list without apps: %s", c.name, compact(gotRes))
		}
		// Refused (auto), or unknown (off: the tool does not exist).
		if r := c.e.callNoFatal("app_read_notebook", map[string]any{"path": xPath}); r != nil && !r.IsError {
			t.Errorf("%s: app_read_notebook answered: %v", c.name, r.Raw)
		}
	}
	for _, tl := range offTools {
		if tl["_meta"] != nil {
			t.Errorf("apps off: %s has _meta %v", tl["name"], tl["_meta"])
		}
	}
	for _, r := range offRes {
		if strings.HasPrefix(str(r["uri"]), "ui://") {
			t.Errorf("apps off: resource %s listed", r["uri"])
		}
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = apps.Outputs.URI
	if _, err := off.c.ReadResource(ctxT(t), req); err == nil {
		t.Errorf("apps off: %s can be read", apps.Outputs.URI)
	}
}

// For a host that renders apps: the three ui:// resources, listed and read with the apps' mime
// type and _meta.ui; the tools an app shows point at it; the apps' own tools are listed for the
// app only; every resourceUri names a listed resource.
func TestAppsListedForAHostThatRendersThem(t *testing.T) {
	for _, mode := range []tools.AppsMode{tools.AppsAuto, tools.AppsAlways} {
		caps := appsClient
		if mode == tools.AppsAlways {
			caps = mcp.ClientCapabilities{} // always: also for a host that does not say so
		}
		e := newXEnvCaps(t, xNotebook(code("c1", "print:hi")), caps, withApps(mode))
		toolList, resList := listJSON(t, e.env)
		listed := map[string]map[string]any{}
		for _, r := range resList {
			if uri := str(r["uri"]); strings.HasPrefix(uri, "ui://") {
				listed[uri] = r
			}
		}
		for _, a := range apps.List() {
			r := listed[a.URI]
			if r == nil {
				t.Errorf("mode %d: %s not listed", mode, a.URI)
				continue
			}
			if r["mimeType"] != apps.MIMEType || metaUI(r)["prefersBorder"] != true || r["name"] == "" {
				t.Errorf("mode %d: %s listed as %s", mode, a.URI, compact(r))
			}
			req := mcp.ReadResourceRequest{}
			req.Params.URI = a.URI
			res, err := e.c.ReadResource(ctxT(t), req)
			if err != nil {
				t.Fatalf("read %s: %v", a.URI, err)
			}
			if len(res.Contents) != 1 {
				t.Fatalf("read %s: %d contents", a.URI, len(res.Contents))
			}
			c, ok := res.Contents[0].(mcp.TextResourceContents)
			if !ok || c.URI != a.URI || c.MIMEType != apps.MIMEType || !strings.HasPrefix(c.Text, "<!doctype html>") ||
				!strings.Contains(c.Text, `data-app="`+a.Name+`"`) {
				t.Errorf("read %s: %T %s %s %.80s", a.URI, res.Contents[0], c.URI, c.MIMEType, c.Text)
			}
			if ui, _ := c.Meta["ui"].(map[string]any); ui["prefersBorder"] != true {
				t.Errorf("read %s: _meta %v", a.URI, c.Meta)
			}
		}
		seen := map[string]bool{}
		for _, tl := range toolList {
			name := str(tl["name"])
			seen[name] = true
			ui := metaUI(tl)
			switch {
			case slices.Contains(appTools, name):
				if !slices.Equal(asStrings(ui["visibility"]), []string{"app"}) {
					t.Errorf("mode %d: %s is not for the app only: %v", mode, name, tl["_meta"])
				}
			case appOf[name] != "":
				if ui["resourceUri"] != appOf[name] || listed[str(ui["resourceUri"])] == nil {
					t.Errorf("mode %d: %s points at %v, want %s", mode, name, ui["resourceUri"], appOf[name])
				}
			default:
				if tl["_meta"] != nil {
					t.Errorf("mode %d: %s has _meta %v", mode, name, tl["_meta"])
				}
			}
		}
		for _, name := range append(appTools, "get_notebook", "execute_notebook_cell", "create_notebook_session", "diff_fork") {
			if !seen[name] {
				t.Errorf("mode %d: %s not listed", mode, name)
			}
		}
	}
}

func asStrings(v any) []string {
	var out []string
	for _, x := range asListOr(v) {
		out = append(out, str(x))
	}
	return out
}

// app_read_notebook gives the app the outputs whole, as stored (an image at full size, the HTML
// of a table), never the text the model got; the collaborators and the JupyterLab link.
func TestAppReadNotebookGivesTheOutputsWhole(t *testing.T) {
	png := strings.Repeat("iVBORw0KGgo", 40000) // ~440 kB: a model's result would downscale or describe it
	html := `<table class="dataframe"><tr><td>1</td></tr></table><script>alert(1)</script>`
	plot := code("c1", "plot()")
	plot.Outputs = []map[string]any{
		{"output_type": "display_data", "data": map[string]any{"image/png": png, "text/plain": "<Figure>"}, "metadata": map[string]any{}},
		{"output_type": "execute_result", "data": map[string]any{"text/html": html, "text/plain": "df"}, "metadata": map[string]any{}, "execution_count": 3},
	}
	three := 3
	plot.ExecutionCount = &three
	e := newEnvCaps(t, []bridgetest.File{nbFile("a/n b.ipynb", notebook(markdown("m1", "# Title"), plot, code("c2", "x = 1")))},
		appsClient, withApps(tools.AppsAuto), labURL("http://lab.example:8888/base/"))
	r := e.call("app_read_notebook", map[string]any{"path": "a/n b.ipynb", "cell_ids": []any{"c1"}})
	if r.IsError {
		t.Fatal(r)
	}
	body := asMap(t, r.Structured)
	if body["lab_url"] != "http://lab.example:8888/base/lab/tree/a/n%20b.ipynb" {
		t.Errorf("lab_url %v", body["lab_url"])
	}
	cells := asList(t, body["cells"])
	if len(cells) != 1 || num(t, body["cell_count"]) != 3 {
		t.Fatalf("cells %s", compact(body))
	}
	c := asMap(t, cells[0])
	outs := asList(t, c["outputs"])
	if c["id"] != "c1" || num(t, c["execution_count"]) != 3 || len(outs) != 2 {
		t.Fatalf("cell %s", compact(c)[:300])
	}
	if got := str(asMap(t, asMap(t, outs[0])["data"])["image/png"]); got != png {
		t.Errorf("the image came back changed (%d bytes, want %d)", len(got), len(png))
	}
	if got := str(asMap(t, asMap(t, outs[1])["data"])["text/html"]); got != html {
		t.Errorf("the HTML came back changed: %q (the app sanitises it, not the server)", got)
	}
	if len(strings.Join(r.Texts, "")) > 200 {
		t.Errorf("the text part is for a model that never sees it: keep it short, got %d bytes", len(strings.Join(r.Texts, "")))
	}
	// A range, and the version.
	r = e.call("app_read_notebook", map[string]any{"path": "a/n b.ipynb", "start_index": 1, "end_index": 2})
	body = asMap(t, r.Structured)
	if got := idsOf(mapsOf(t, body["cells"])); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("range: %v", got)
	}
	if str(body["version"]) == "" {
		t.Errorf("no version: %s", compact(body)[:200])
	}
	// What an app reads is not what the model reads: the token statistics do not count it.
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "jupyter://stats/tokens"
	stats, err := e.c.ReadResource(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if text := stats.Contents[0].(mcp.TextResourceContents).Text; strings.Contains(text, "app_read_notebook") {
		t.Errorf("the token statistics count the app's reads: %s", text)
	}
}

func mapsOf(t *testing.T, v any) []map[string]any {
	var out []map[string]any
	for _, x := range asList(t, v) {
		out = append(out, asMap(t, x))
	}
	return out
}

// With since_version it answers unchanged (no cells) at once, or after wait_ms, or as soon as
// someone edits the notebook: a live view sees a human's edit without polling.
func TestAppReadNotebookFollowsTheRoom(t *testing.T) {
	e := newEnvCaps(t, []bridgetest.File{nbFile("n.ipynb", notebook(code("c1", "a = 1")))}, appsClient, withApps(tools.AppsAuto))
	first := asMap(t, e.call("app_read_notebook", map[string]any{"path": "n.ipynb"}).Structured)
	v := str(first["version"])
	same := asMap(t, e.call("app_read_notebook", map[string]any{"path": "n.ipynb", "since_version": v}).Structured)
	if same["unchanged"] != true || same["cells"] != nil || same["version"] != v {
		t.Errorf("unchanged answer: %s", compact(same))
	}
	start := time.Now()
	same = asMap(t, e.call("app_read_notebook", map[string]any{"path": "n.ipynb", "since_version": v, "wait_ms": 150}).Structured)
	if same["unchanged"] != true || time.Since(start) < 150*time.Millisecond {
		t.Errorf("waited %v for %s", time.Since(start), compact(same))
	}
	var wg sync.WaitGroup
	var got *result
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = e.callNoFatal("app_read_notebook", map[string]any{"path": "n.ipynb", "since_version": v, "wait_ms": 20000})
	}()
	time.Sleep(50 * time.Millisecond) // let the call start waiting (it answers the edit either way)
	start = time.Now()
	e.humanEdit("n.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return tx.SetSource(0, "a = 2 # human") })
	wg.Wait()
	if got == nil || got.IsError {
		t.Fatalf("long poll: %v", got)
	}
	body := asMap(t, got.Raw["structuredContent"])
	if body["unchanged"] == true || time.Since(start) > 5*time.Second {
		t.Fatalf("the edit did not end the wait (%v): %s", time.Since(start), compact(body))
	}
	if src := str(asMap(t, asList(t, body["cells"])[0])["source"]); src != "a = 2 # human" {
		t.Errorf("source %q", src)
	}
}

// The apps' tools are refused to a session that does not get the apps, saying why.
func TestAppToolsRefusedWithoutApps(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("n.ipynb", notebook(code("c1", "a = 1")))}, withApps(tools.AppsAuto))
	r := e.call("app_read_notebook", map[string]any{"path": "n.ipynb"})
	if !r.IsError || !strings.Contains(errorText(r), tools.AppsExtension) || strings.Contains(r.String(), "a = 1") {
		t.Errorf("refusal: %s", r)
	}
}

// The apps' tools take the caller's token as every tool does: its scope (rejecting part of a
// fork is a write) and its paths (the door).
func TestAppToolsTakeTheTokensScopeAndPaths(t *testing.T) {
	e := newEnv(t, []bridgetest.File{
		dirFile("reports"), dirFile("secret"),
		nbFile("reports/r.ipynb", notebook(code("r1", "x = 1"))),
		nbFile("secret/s.ipynb", notebook(code("s1", "key = 'hush'"))),
	}, withApps(tools.AppsAlways))
	sum := func(tok string) string { d := sha256.Sum256([]byte(tok)); return hex.EncodeToString(d[:]) }
	entries, err := auth.ParseTokens([]byte(`[{"name": "reader", "token_sha256": "` + sum("reader-token-0123456789") + `", "scopes": ["read"], "paths": ["reports/**"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	url := serveHTTP(t, e.ts, tools.HTTPOptions{Protect: func(h http.Handler) http.Handler {
		p, err := auth.Bearer(auth.BearerOptions{Entries: entries}, h)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer reader-token-0123456789"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.Capabilities = appsClient
	if _, err := c.Initialize(ctxT(t), init); err != nil {
		t.Fatal(err)
	}
	call := func(name string, args map[string]any) (bool, string) {
		res, err := c.CallTool(ctxT(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := json.Marshal(res)
		return res.IsError, string(b)
	}
	if isErr, text := call("app_read_notebook", map[string]any{"path": "reports/r.ipynb"}); isErr || !strings.Contains(text, "x = 1") {
		t.Errorf("reader's own notebook: %s", text)
	}
	if isErr, text := call("app_read_notebook", map[string]any{"path": "secret/s.ipynb"}); !isErr || strings.Contains(text, "hush") || !strings.Contains(text, "outside its paths") {
		t.Errorf("reader read outside its paths: %s", text)
	}
	if isErr, text := call("app_review_fork", map[string]any{"path": "secret/s.ipynb", "fork_id": "f"}); !isErr || !strings.Contains(text, "outside its paths") {
		t.Errorf("reader reviewed a fork outside its paths: %s", text)
	}
	if isErr, text := call("app_reject_fork_cells", map[string]any{"path": "reports/r.ipynb", "fork_id": "f", "cell_ids": []any{"r1"}}); !isErr || !strings.Contains(text, `needs the \"write\" scope`) {
		t.Errorf("reader changed a fork: %s", text)
	}
}
