package tools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A 1x1 PNG.
var tinyPNG = base64.StdEncoding.EncodeToString([]byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
	0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
	0x42, 0x60, 0x82,
})

// richNotebook has a markdown cell and a code cell whose outputs need sanitising.
func sanitiseNotebook() ydoc.Notebook {
	c := code("c1", "print('hi')")
	n := 3
	c.ExecutionCount = &n
	c.Outputs = []map[string]any{
		{"output_type": "stream", "name": "stdout", "text": "\x1b[31mred alert\x1b[0m\n"},
		{"output_type": "display_data", "metadata": map[string]any{}, "data": map[string]any{
			"text/html": "<b>bold secret</b>", "image/png": tinyPNG, "application/javascript": "alert('x')", "text/plain": "<Figure>",
		}},
	}
	return notebook(markdown("m1", "# Title\nIntro"), c, code("c2", "x = 2"))
}

func (e *env) read(uri string) ([]mcp.ResourceContents, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := e.c.ReadResource(ctxT(e.t), req)
	if err != nil {
		return nil, err
	}
	return res.Contents, nil
}

func (e *env) readText(uri string) (string, string) {
	e.t.Helper()
	cs, err := e.read(uri)
	if err != nil {
		e.t.Fatalf("read %s: %v", uri, err)
	}
	tc := cs[0].(mcp.TextResourceContents)
	return tc.Text, tc.MIMEType
}

func (e *env) readFails(uri, want string) {
	e.t.Helper()
	_, err := e.read(uri)
	if err == nil {
		e.t.Fatalf("read %s: want an error mentioning %q, got content", uri, want)
	}
	if !strings.Contains(err.Error(), want) {
		e.t.Fatalf("read %s: error %q does not mention %q", uri, err, want)
	}
}

// fileIDOf finds a document's file id in a listing resource.
func (e *env) fileIDOf(list, key, path string) string {
	e.t.Helper()
	text, _ := e.readText(list)
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		e.t.Fatalf("%s: %v", list, err)
	}
	for _, x := range asList(e.t, out[key]) {
		m := asMap(e.t, x)
		if m["path"] == path {
			id, _ := m["file_id"].(string)
			if id == "" {
				e.t.Fatalf("%s: %s has no file id: %v", list, path, m)
			}
			return id
		}
	}
	e.t.Fatalf("%s does not list %s: %s", list, path, text)
	return ""
}

func noSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "<b>bold secret</b>", "alert('x')", tinyPNG[:20]} {
		if strings.Contains(text, bad) {
			t.Errorf("%s passes %q through unsanitised", what, bad)
		}
	}
}

func TestResourcesRead(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", sanitiseNotebook()), textFile("notes.md", "# Notes\nline 2\n")})
	nb := e.fileIDOf("jupyter://notebooks", "notebooks", "a.ipynb")
	base := "jupyter://notebooks/" + nb

	md, mime := e.readText(base)
	if mime != "text/markdown" || !strings.Contains(md, "```python\nprint('hi')") || !strings.Contains(md, "red alert") || !strings.Contains(md, "# Title") {
		t.Errorf("notebook markdown (%s):\n%s", mime, md)
	}
	noSecrets(t, "the markdown resource", md)

	js, mime := e.readText(base + "/json")
	var nbj struct {
		NBFormat int              `json:"nbformat"`
		Cells    []map[string]any `json:"cells"`
	}
	if err := json.Unmarshal([]byte(js), &nbj); err != nil || mime != "application/json" || nbj.NBFormat != 4 || len(nbj.Cells) != 3 {
		t.Fatalf("nbformat resource (%s, %v): %s", mime, err, js)
	}
	if nbj.Cells[1]["id"] != "c1" || nbj.Cells[1]["execution_count"] != 3.0 {
		t.Errorf("nbformat cell 1: %v", nbj.Cells[1])
	}
	noSecrets(t, "the JSON resource", js)
	if !strings.Contains(js, "red alert") || !strings.Contains(js, "HTML") {
		t.Errorf("the JSON resource lost the text output or the HTML description: %s", js)
	}

	cells, _ := e.readText(base + "/cells")
	var cl map[string]any
	_ = json.Unmarshal([]byte(cells), &cl)
	if list := asList(t, cl["cells"]); len(list) != 3 || asMap(t, list[2])["id"] != "c2" {
		t.Errorf("cell list: %s", cells)
	}

	src, mime := e.readText(base + "/cells/m1")
	if mime != "text/markdown" || src != "# Title\nIntro" {
		t.Errorf("markdown cell: %q (%s)", src, mime)
	}
	parts, err := e.read(base + "/cells/c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0].(mcp.TextResourceContents).MIMEType != "text/x-python" || parts[0].(mcp.TextResourceContents).Text != "print('hi')" {
		t.Fatalf("code cell: %+v", parts)
	}
	outs := parts[1].(mcp.TextResourceContents).Text
	if !strings.Contains(outs, "red alert") {
		t.Errorf("code cell outputs: %s", outs)
	}
	noSecrets(t, "the cell resource", outs)

	// A handle (a prefix that names one cell) works as the id does.
	if src, _ := e.readText(base + "/cells/m"); src != "# Title\nIntro" {
		t.Errorf("the cell by handle: %q", src)
	}

	// Errors say what is wrong and what to do.
	e.readFails(base+"/cells/nope", `no cell "nope"`)
	e.readFails(base+"/cells/c", `the handle "c" is ambiguous`)
	e.readFails("jupyter://notebooks/0000-unknown", "unknown file id")
	e.readFails("jupyter://notebooks/current", "has not worked on a notebook")
	e.readFails(base+"/bogus", "not found")
	e.readFails("jupyter://bogus", "not found")

	// …/current follows what the client worked on.
	e.ok("get_notebook", map[string]any{"format": "json", "path": "a.ipynb"})
	cur, _ := e.readText("jupyter://notebooks/current")
	if cur != md {
		t.Errorf("current notebook differs from the notebook:\n%s\n---\n%s", cur, md)
	}

	doc := e.fileIDOf("jupyter://documents", "documents", "notes.md")
	text, mime := e.readText("jupyter://documents/" + doc)
	if text != "# Notes\nline 2\n" || mime != "text/markdown" {
		t.Errorf("document: %q (%s)", text, mime)
	}
	e.ok("get_document", map[string]any{"path": "notes.md"})
	if cur, _ := e.readText("jupyter://documents/current"); cur != text {
		t.Errorf("current document: %q", cur)
	}
	e.readFails("jupyter://executions/job-x", "execution is not available")
}

func TestResourceTemplatesAndGuides(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", sanitiseNotebook())})
	res, err := e.c.ListResourceTemplates(ctxT(t), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]mcp.ResourceTemplate{}
	for _, rt := range res.ResourceTemplates {
		got[rt.URITemplate.Raw()] = rt
	}
	for _, want := range []string{"jupyter://notebooks/{file_id}", "jupyter://notebooks/{file_id}/json", "jupyter://notebooks/{file_id}/cells",
		"jupyter://notebooks/{file_id}/cells/{cell_id}", "jupyter://documents/{file_id}", "jupyter://executions/{job_id}",
		"jupyter://templates/{name}", "jupyter://guides/{mode}", "jupyter://operations/{operation}"} {
		if _, ok := got[want]; !ok {
			t.Errorf("resources/templates/list lacks %s", want)
		}
	}
	g := got["jupyter://guides/{mode}"]
	if g.Annotations == nil || len(g.Annotations.Audience) != 1 || g.Annotations.Audience[0] != mcp.RoleAssistant || g.Annotations.Priority == nil || *g.Annotations.Priority != 1.0 {
		t.Errorf("guide template annotations: %+v", g.Annotations)
	}
	for _, mode := range []string{"research", "analysis", "development"} {
		text, mime := e.readText("jupyter://guides/" + mode)
		if mime != "text/markdown" || !strings.HasPrefix(text, "# ") || len(text) < 1000 {
			t.Errorf("guide %s (%s): %.200s", mode, mime, text)
		}
	}
	e.readFails("jupyter://guides/poetry", "research, analysis, development")

	list, _ := e.readText("jupyter://templates")
	for _, name := range []string{"analysis", "experiment", "report"} {
		if !strings.Contains(list, `"name":"`+name+`"`) {
			t.Errorf("template list lacks %s: %s", name, list)
		}
		text, mime := e.readText("jupyter://templates/" + name)
		var nb map[string]any
		if err := json.Unmarshal([]byte(text), &nb); err != nil || mime != "application/x-ipynb+json" || len(asList(t, nb["cells"])) == 0 {
			t.Errorf("template %s (%s, %v)", name, mime, err)
		}
	}
	e.readFails("jupyter://templates/nope", "analysis, experiment, report")

	// A notebook created from a template starts with its cells.
	var tpl map[string]any
	text, _ := e.readText("jupyter://templates/experiment")
	_ = json.Unmarshal([]byte(text), &tpl)
	out := e.ok("create_notebook_session", map[string]any{"path": "new/exp.ipynb", "create_if_missing": true, "template": "experiment"})
	if num(t, out["cell_count"]) != len(asList(t, tpl["cells"])) {
		t.Errorf("created from the template with %v cells, the template has %d", out["cell_count"], len(asList(t, tpl["cells"])))
	}
	if r := e.fail("create_notebook_session", map[string]any{"path": "x.ipynb", "template": "experiment"}); !strings.Contains(errorText(r), "create_if_missing") {
		t.Errorf("template without create_if_missing: %s", errorText(r))
	}
}

// countTokens counts with the server's own count_tokens tool.
func (e *env) countTokens(text string) int {
	e.t.Helper()
	out := e.ok("count_tokens", map[string]any{"input": text})
	return num(e.t, out["tokens"])
}

func TestResourceCapsOnHugeOutputs(t *testing.T) {
	// 12 cells of 100 kB outputs: a hundred times the budget. (60 such cells took over 10 s to
	// join under -race on a loaded machine, all of it in building and applying the 6 MB state.)
	const budget = 3000
	cells := make([]ydoc.Cell, 12)
	for i := range cells {
		c := code("c"+string(rune('a'+i%26))+strings.Repeat("x", i/26), "print('x' * 100000)")
		c.Outputs = []map[string]any{{"output_type": "stream", "name": "stdout", "text": strings.Repeat("word ", 20000)}}
		cells[i] = c
	}
	e := newEnv(t, []bridgetest.File{nbFile("huge.ipynb", notebook(cells...))}, func(o *tools.Options) { o.MaxResponseTokens = budget })
	base := "jupyter://notebooks/" + e.fileIDOf("jupyter://notebooks", "notebooks", "huge.ipynb")
	for _, uri := range []string{base, base + "/json", base + "/cells", base + "/cells/ca"} {
		cs, err := e.read(uri)
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		total := 0
		for _, c := range cs {
			total += e.countTokens(c.(mcp.TextResourceContents).Text)
		}
		if total > budget {
			t.Errorf("%s: %d tokens, over the budget of %d", uri, total, budget)
		}
	}
	js, _ := e.readText(base + "/json")
	if !strings.Contains(js, "truncated") {
		t.Errorf("the JSON resource does not say it was cut")
	}
	out := e.ok("get_notebook", map[string]any{"format": "json", "path": "huge.ipynb", "max_tokens": 1500})
	b, _ := json.Marshal(out)
	if n := e.countTokens(string(b)); n > 1500 {
		t.Errorf("get_notebook max_tokens 1500: %d tokens", n)
	}
	if _, ok := out["truncated"]; !ok {
		t.Errorf("get_notebook over max_tokens does not say it was cut")
	}
}

func (e *env) prompt(name string, args map[string]string) (*mcp.GetPromptResult, error) {
	req := mcp.GetPromptRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return e.c.GetPrompt(ctxT(e.t), req)
}

func promptText(r *mcp.GetPromptResult) string {
	var b strings.Builder
	for _, m := range r.Messages {
		switch c := m.Content.(type) {
		case mcp.TextContent:
			b.WriteString(c.Text + "\n")
		case mcp.EmbeddedResource:
			if t, ok := c.Resource.(mcp.TextResourceContents); ok {
				b.WriteString("[" + t.URI + "]\n" + t.Text + "\n")
			}
		}
	}
	return b.String()
}

func TestPromptsRender(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", sanitiseNotebook()), textFile("notes.md", "one\ntwo\n")})
	list, err := e.c.ListPrompts(ctxT(t), mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range list.Prompts {
		names[p.Name] = true
	}
	for _, want := range []string{"interleaved-thinking", "summarize_notebook", "extract_essentials", "review_changes"} {
		if !names[want] {
			t.Errorf("prompts/list lacks %s", want)
		}
	}

	r, err := e.prompt("interleaved-thinking", map[string]string{"task": "find the bug", "mode": "development", "path": "a.ipynb"})
	if err != nil {
		t.Fatal(err)
	}
	text := promptText(r)
	guide, _ := e.readText("jupyter://guides/development")
	if !strings.Contains(text, "[jupyter://guides/development]\n"+guide) || !strings.Contains(text, "find the bug") || !strings.Contains(text, "c1") || !strings.Contains(text, "# Title") {
		t.Errorf("interleaved-thinking: %s", text)
	}
	if _, err := e.prompt("interleaved-thinking", map[string]string{"task": "x", "mode": "poetry"}); err == nil || !strings.Contains(err.Error(), "research, analysis, development") {
		t.Errorf("unknown mode: %v", err)
	}
	if _, err := e.prompt("interleaved-thinking", map[string]string{"mode": "research"}); err == nil || !strings.Contains(err.Error(), "task") {
		t.Errorf("missing task: %v", err)
	}

	r, err = e.prompt("summarize_notebook", map[string]string{"path": "a.ipynb", "focus": "results", "max_summary_tokens": "120"})
	if err != nil {
		t.Fatal(err)
	}
	if text := promptText(r); !strings.Contains(text, "print('hi')") || !strings.Contains(text, "120 tokens") || !strings.Contains(text, "results") {
		t.Errorf("summarize_notebook: %s", text)
	}
	if _, err := e.prompt("summarize_notebook", map[string]string{"path": "a.ipynb", "max_summary_tokens": "lots"}); err == nil {
		t.Errorf("a bad max_summary_tokens is accepted")
	}
	if _, err := e.prompt("summarize_notebook", map[string]string{"path": "missing.ipynb"}); err == nil || !strings.Contains(err.Error(), "missing.ipynb") {
		t.Errorf("missing notebook: %v", err)
	}

	for _, kind := range []string{"facts", "code", "decisions", "questions", "all"} {
		r, err := e.prompt("extract_essentials", map[string]string{"path": "a.ipynb", "extract_type": kind})
		if err != nil || !strings.Contains(promptText(r), "print('hi')") {
			t.Errorf("extract_essentials %s: %v", kind, err)
		}
	}
	if _, err := e.prompt("extract_essentials", map[string]string{"path": "a.ipynb", "extract_type": "gossip"}); err == nil || !strings.Contains(err.Error(), "facts, code, decisions, questions, all") {
		t.Errorf("bad extract_type: %v", err)
	}

	// review_changes shows only what changed since the version.
	v := e.ok("get_notebook", map[string]any{"format": "json", "path": "a.ipynb"})["version"].(string)
	e.humanEdit("a.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "c2", "x = 3  # changed") })
	r, err = e.prompt("review_changes", map[string]string{"path": "a.ipynb", "since_version": v})
	if err != nil {
		t.Fatal(err)
	}
	if text := promptText(r); !strings.Contains(text, "x = 3  # changed") || strings.Contains(text, "print('hi')") {
		t.Errorf("review_changes: %s", text)
	}
	dv := e.ok("get_document", map[string]any{"path": "notes.md"})["version"].(string)
	e.humanEdit("notes.md", ydoc.KindText, func(tx *ydoc.Txn) error { return tx.InsertText(4, "inserted\n") })
	r, err = e.prompt("review_changes", map[string]string{"path": "notes.md", "since_version": dv})
	if err != nil {
		t.Fatal(err)
	}
	if text := promptText(r); !strings.Contains(text, "+inserted") {
		t.Errorf("review_changes on a text file: %s", text)
	}
	if _, err := e.prompt("review_changes", map[string]string{"path": "a.ipynb", "since_version": "nope"}); err == nil {
		t.Errorf("an unknown version is accepted")
	}
}

func TestCompletions(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", sanitiseNotebook())})
	nb := e.fileIDOf("jupyter://notebooks", "notebooks", "a.ipynb")
	complete := func(ref any, arg string, value string, ctxArgs map[string]string) []string {
		t.Helper()
		req := mcp.CompleteRequest{}
		req.Params.Ref = ref
		req.Params.Argument.Name, req.Params.Argument.Value = arg, value
		req.Params.Context.Arguments = ctxArgs
		res, err := e.c.Complete(ctxT(t), req)
		if err != nil {
			t.Fatalf("complete %s: %v", arg, err)
		}
		return res.Completion.Values
	}
	if got := complete(mcp.ResourceReference{Type: "ref/resource", URI: "jupyter://notebooks/{file_id}"}, "file_id", nb[:2], nil); len(got) != 1 || got[0] != nb {
		t.Errorf("file_id completion: %v", got)
	}
	if got := complete(mcp.ResourceReference{Type: "ref/resource", URI: "jupyter://notebooks/{file_id}/cells/{cell_id}"}, "cell_id", "c", map[string]string{"file_id": nb}); strings.Join(got, ",") != "c1,c2" {
		t.Errorf("cell_id completion: %v", got)
	}
	if got := complete(mcp.ResourceReference{Type: "ref/resource", URI: "jupyter://guides/{mode}"}, "mode", "r", nil); strings.Join(got, ",") != "research" {
		t.Errorf("mode completion: %v", got)
	}
	if got := complete(mcp.PromptReference{Type: "ref/prompt", Name: "extract_essentials"}, "extract_type", "", nil); len(got) != 5 {
		t.Errorf("extract_type completion: %v", got)
	}
	if got := complete(mcp.PromptReference{Type: "ref/prompt", Name: "summarize_notebook"}, "path", "a", nil); strings.Join(got, ",") != "a.ipynb" {
		t.Errorf("path completion: %v", got)
	}
}

// notifications collects the server's notifications.
type notifications struct {
	mu   sync.Mutex
	got  []mcp.JSONRPCNotification
	when []time.Time
	wake chan struct{}
}

func collectNotifications(c *client.Client) *notifications {
	n := &notifications{wake: make(chan struct{}, 1)}
	c.OnNotification(func(m mcp.JSONRPCNotification) {
		n.mu.Lock()
		n.got = append(n.got, m)
		n.when = append(n.when, time.Now())
		n.mu.Unlock()
		select {
		case n.wake <- struct{}{}:
		default:
		}
	})
	return n
}

// updated returns the URIs of resources/updated notifications received from index from on.
func (n *notifications) updated(from int) ([]string, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var uris []string
	for _, m := range n.got[from:] {
		if m.Method == mcp.MethodNotificationResourceUpdated {
			uris = append(uris, m.Params.AdditionalFields["uri"].(string))
		}
	}
	return uris, len(n.got)
}

// waitFor waits until a notification satisfying ok arrives (after index from) and returns its
// arrival time.
func (n *notifications) waitFor(t *testing.T, from int, what string, ok func(mcp.JSONRPCNotification) bool) time.Time {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		n.mu.Lock()
		for i := from; i < len(n.got); i++ {
			if ok(n.got[i]) {
				at := n.when[i]
				n.mu.Unlock()
				return at
			}
		}
		n.mu.Unlock()
		select {
		case <-n.wake:
		case <-deadline:
			t.Fatalf("no %s within %v", what, waitLimit)
		}
	}
}

func isUpdate(uri string) func(mcp.JSONRPCNotification) bool {
	return func(m mcp.JSONRPCNotification) bool {
		return m.Method == mcp.MethodNotificationResourceUpdated && m.Params.AdditionalFields["uri"] == uri
	}
}

// TestResourceSubscriptions runs the same scenario for a client of protocol 2025-11-25
// (resources/subscribe) and one of 2026-07-28 (subscriptions/listen).
func TestResourceSubscriptions(t *testing.T) {
	for _, proto := range []string{"2025-11-25", mcp.LATEST_PROTOCOL_VERSION} {
		t.Run(proto, func(t *testing.T) { testSubscriptions(t, proto) })
	}
}

func testSubscriptions(t *testing.T, proto string) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", sanitiseNotebook()), nbFile("b.ipynb", notebook(code("b1", "y = 1")))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.ts.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c, err := client.NewInProcessClient(e.ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = proto
	init.Params.ClientInfo = mcp.Implementation{Name: "subscriber", Version: "1"}
	if _, err := c.Initialize(ctxT(t), init); err != nil {
		t.Fatal(err)
	}
	n := collectNotifications(c)
	modern := proto == mcp.LATEST_PROTOCOL_VERSION
	var stopListen func()
	t.Cleanup(func() {
		if stopListen != nil {
			stopListen()
		}
	})
	// subscribe replaces the client's subscriptions by uris.
	subscribe := func(uris ...string) {
		t.Helper()
		if modern {
			if stopListen != nil {
				stopListen()
			}
			acked := len(n.got)
			stopListen, err = c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: uris, ResourcesListChanged: true}, func(err error) { t.Errorf("listen: %v", err) })
			if err != nil {
				t.Fatal(err)
			}
			n.waitFor(t, acked, "subscriptions acknowledgement", func(m mcp.JSONRPCNotification) bool {
				return m.Method == mcp.MethodNotificationSubscriptionsAcknowledged
			})
			return
		}
		for _, uri := range uris {
			req := mcp.SubscribeRequest{}
			req.Params.URI = uri
			//lint:ignore SA1019 protocol 2025-11-25 clients subscribe this way
			if err := c.Subscribe(ctxT(t), req); err != nil {
				t.Fatalf("subscribe %s: %v", uri, err)
			}
		}
	}
	unsubscribe := func(uris ...string) {
		t.Helper()
		if modern {
			stopListen()
			stopListen = nil
			return
		}
		for _, uri := range uris {
			req := mcp.UnsubscribeRequest{}
			req.Params.URI = uri
			//lint:ignore SA1019 protocol 2025-11-25 clients unsubscribe this way
			if err := c.Unsubscribe(ctxT(t), req); err != nil {
				t.Fatal(err)
			}
		}
	}

	nb := e.fileIDOf("jupyter://notebooks", "notebooks", "a.ipynb")
	base := "jupyter://notebooks/" + nb
	mine := []string{base, base + "/cells/c1", base + "/cells/c2"}
	subscribe(mine...)

	// A human edits c2: the notebook and c2 are updated, c1 is not.
	_, mark := n.updated(0)
	edited := time.Now()
	e.humanEdit("a.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "c2", "x = 20") })
	at := n.waitFor(t, mark, "update of "+base+"/cells/c2", isUpdate(base+"/cells/c2"))
	n.waitFor(t, mark, "update of "+base, isUpdate(base))
	if d := at.Sub(edited); d < 200*time.Millisecond {
		t.Errorf("notified %v after the edit: updates are debounced by 250 ms", d)
	}
	// An unrelated change (another notebook), then a change to c1 as a sentinel: the only
	// notifications in between are the sentinel's.
	_, mark = n.updated(0)
	e.ok("get_notebook", map[string]any{"format": "json", "path": "b.ipynb"})
	e.humanEdit("b.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "b1", "y = 2") })
	e.humanEdit("a.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "c1", "print('bye')") })
	n.waitFor(t, mark, "update of "+base+"/cells/c1", isUpdate(base+"/cells/c1"))
	n.waitFor(t, mark, "update of "+base, isUpdate(base))
	got, _ := n.updated(mark)
	for _, uri := range got {
		if uri != base && uri != base+"/cells/c1" {
			t.Errorf("notified %s, whose content did not change (all: %v)", uri, got)
		}
	}

	// Open rooms are listed, and list_changed was sent when one opened.
	n.waitFor(t, 0, "resources/list_changed", func(m mcp.JSONRPCNotification) bool {
		return m.Method == mcp.MethodNotificationResourcesListChanged
	})
	res, err := c.ListResources(ctxT(t), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, r := range res.Resources {
		listed = listed || r.URI == base && r.Name == "a.ipynb"
	}
	if !listed {
		t.Errorf("resources/list does not show the open notebook: %+v", res.Resources)
	}

	// After unsubscribing, nothing more about a.ipynb.
	unsubscribe(mine...)
	b1 := "jupyter://notebooks/" + e.fileIDOf("jupyter://notebooks", "notebooks", "b.ipynb") + "/cells/b1"
	subscribe(b1)
	_, mark = n.updated(0)
	e.humanEdit("a.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "c1", "print('again')") })
	e.humanEdit("b.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "b1", "y = 3") })
	n.waitFor(t, mark, "update of b1", isUpdate(b1))
	got, _ = n.updated(mark)
	for _, uri := range got {
		if strings.HasPrefix(uri, base) {
			t.Errorf("notified %s after unsubscribing", uri)
		}
	}
}

// A change made after a client subscribed is notified even when Run's goroutine had not yet
// started following room events (as right after startup): the subscription opened the stream,
// and the change waited in it. (The scheduling order is forced here: Run starts after the edit.)
func TestSubscriptionSeesChangeMadeBeforeRunStarted(t *testing.T) {
	e := newEnv(t, []bridgetest.File{nbFile("a.ipynb", sanitiseNotebook())})
	c, err := client.NewInProcessClient(e.ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "subscriber", Version: "1"}
	if _, err := c.Initialize(ctxT(t), init); err != nil {
		t.Fatal(err)
	}
	n := collectNotifications(c)
	cell := "jupyter://notebooks/" + e.fileIDOf("jupyter://notebooks", "notebooks", "a.ipynb") + "/cells/c2"
	req := mcp.SubscribeRequest{}
	req.Params.URI = cell
	//lint:ignore SA1019 protocol 2025-11-25 clients subscribe this way
	if err := c.Subscribe(ctxT(t), req); err != nil {
		t.Fatalf("subscribe %s: %v", cell, err)
	}
	_, mark := n.updated(0)
	e.humanEdit("a.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "c2", "x = 20") })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.ts.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	n.waitFor(t, mark, "update of "+cell+" (changed after the subscription, before Run started)", isUpdate(cell))
}

func setSourceByID(tx *ydoc.Txn, id, src string) error {
	i := tx.CellIndex(id)
	if i < 0 {
		return fmt.Errorf("no cell %s", id)
	}
	return tx.SetSource(i, src)
}

// A subscribed document's change is notified while the follow-up of another is stuck (its
// room cannot be joined), even when thousands of unrelated events arrive meanwhile: consuming
// room events never waits for reads or joins, and a change is never dropped.
func TestSubscriptionNotifiedDuringSlowJoinAndEventFlood(t *testing.T) {
	e := newEnv(t, []bridgetest.File{
		nbFile("a.ipynb", notebook(code("a1", "a = 1"))),
		nbFile("b.ipynb", notebook(code("b1", "b = 1"))),
		nbFile("c.ipynb", notebook(code("c1", "c = 0"))),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.ts.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := client.NewInProcessClient(e.ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "subscriber", Version: "1"}
	if _, err := c.Initialize(ctxT(t), init); err != nil {
		t.Fatal(err)
	}
	n := collectNotifications(c)
	for _, p := range []string{"a.ipynb", "b.ipynb", "c.ipynb"} {
		e.ok("get_notebook", map[string]any{"format": "json", "path": p})
	}
	uriA := "jupyter://notebooks/" + e.fileIDOf("jupyter://notebooks", "notebooks", "a.ipynb")
	uriB := "jupyter://notebooks/" + e.fileIDOf("jupyter://notebooks", "notebooks", "b.ipynb")
	for _, uri := range []string{uriA, uriB} {
		req := mcp.SubscribeRequest{}
		req.Params.URI = uri
		//lint:ignore SA1019 protocol 2025-11-25 clients subscribe this way
		if err := c.Subscribe(ctxT(t), req); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}

	// b.ipynb's room closes and cannot be joined again: keeping the subscribed document open
	// now waits (up to 30 s) on a join that does not answer.
	e.srv.BlockOpen()
	t.Cleanup(e.srv.UnblockOpen)
	e.m.CloseRoom("b.ipynb", ydoc.KindNotebook)
	waitUntil(t, "the rejoin of b.ipynb to block", func() bool { return e.srv.BlockedOpens() > 0 })

	// More events than any buffer holds, from a document nobody subscribed to…
	const flood = 6000
	seen := e.m.Subscribe(2 * flood)
	defer seen.Close()
	for i := 1; i <= flood; i++ {
		if err := e.srv.EditDoc("c.ipynb", func(tx *ydoc.Txn) error { return tx.SetSource(0, fmt.Sprintf("c = %d", i)) }); err != nil {
			t.Fatal(err)
		}
	}
	applied := 0
	for applied < flood {
		select {
		case ev := <-seen.C:
			if ev.Path == "c.ipynb" && ev.Kind == bridge.EventChanged {
				applied++
			}
		case <-time.After(waitLimit):
			t.Fatalf("the sidecar applied %d of %d edits to c.ipynb within %v", applied, flood, waitLimit)
		}
	}
	// …then a change to a.ipynb: notified, with b.ipynb's join still stuck.
	_, mark := n.updated(0)
	e.humanEdit("a.ipynb", ydoc.KindNotebook, func(tx *ydoc.Txn) error { return setSourceByID(tx, "a1", "a = 2") })
	n.waitFor(t, mark, "update of "+uriA+" while another document's join is stuck", isUpdate(uriA))
	if e.srv.BlockedOpens() == 0 {
		t.Fatal("b.ipynb's join ended before the notification: the test did not test a stuck join")
	}
	if text, _ := e.readText(uriA); !strings.Contains(text, "a = 2") {
		t.Errorf("%s after the notification: %s", uriA, text)
	}
	e.srv.UnblockOpen()
}

// waitUntil polls cond until it holds (waitLimit).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
