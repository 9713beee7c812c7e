package tools_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// waitLimit bounds every wait in these tests. Things normally happen within milliseconds; the
// limit only decides how long a broken build takes to fail.
const waitLimit = 10 * time.Second

// allTools are the operations the server exposes without an executor (the execution tools
// come with one).
var allTools = []string{
	"list_notebooks", "get_notebook", "search_notebook", "create_notebook_session", "run_script",
	"batch_insert_notebook_cells", "batch_update_notebook_cells", "batch_delete_notebook_cells", "move_notebook_cells", "clear_outputs",
	"list_documents", "get_document", "create_document_session",
	"batch_update_document", "batch_insert_text", "batch_delete_text",
	"get_online_users", "get_user_presence", "set_user_presence", "broadcast_user_activity", "get_user_cursors", "update_cursor_position",
	"get_user_activity", "get_active_sessions", "join_session", "leave_session",
	"fork_document", "list_forks", "diff_fork", "merge_document_fork", "discard_document_fork",
	"get_document_history", "restore_document_version", "undo_last_edit", "redo_edit", "count_tokens",
}

var readTools = []string{"list_notebooks", "get_notebook", "search_notebook", "run_script", "list_documents", "get_document",
	"get_online_users", "get_user_presence", "get_user_cursors", "get_user_activity", "get_active_sessions",
	"list_forks", "diff_fork", "get_document_history", "count_tokens"}

// fastRoom are room timings small enough for tests (as bridge/helpers_test.go's fastOptions).
func fastRoom() bridge.RoomOptions {
	return bridge.RoomOptions{
		Logger:         zerolog.Nop(),
		MinBackoff:     5 * time.Millisecond,
		MaxBackoff:     50 * time.Millisecond,
		TickInterval:   5 * time.Millisecond,
		ResyncInterval: 50 * time.Millisecond,
	}
}

// env is an MCP client talking in-process to a tools.Server over a manager on the fake server.
type env struct {
	t   *testing.T
	srv *bridgetest.Server
	m   *bridge.Manager
	ts  *tools.Server
	c   *client.Client
	// embed is true when every result carries the schema (AlwaysEmbedSchema).
	embed bool
}

type envOpt func(*tools.Options)

func alwaysEmbed(o *tools.Options) { o.AlwaysEmbedSchema = true }

func callTimeout(d time.Duration) envOpt { return func(o *tools.Options) { o.CallTimeout = d } }

// newEnv starts everything on a fake holding files (the fake's default table when none).
func newEnv(t *testing.T, files []bridgetest.File, opts ...envOpt) *env {
	t.Helper()
	return newEnvFull(t, files, nil, mcp.ClientCapabilities{}, opts...)
}

// newEnvWith is newEnv with changed manager options.
func newEnvWith(t *testing.T, files []bridgetest.File, manager func(*bridge.ManagerOptions), opts ...envOpt) *env {
	t.Helper()
	return newEnvFull(t, files, manager, mcp.ClientCapabilities{}, opts...)
}

// newEnvCaps is newEnv with a client that announces caps at initialize.
func newEnvCaps(t *testing.T, files []bridgetest.File, caps mcp.ClientCapabilities, opts ...envOpt) *env {
	t.Helper()
	return newEnvFull(t, files, nil, caps, opts...)
}

// newEnvFull is newEnv with changed manager options and a client that announces caps. By
// default a first read always waits for the room (FirstReadWait -1): tests read a room and then
// change it as a collaborator would.
func newEnvFull(t *testing.T, files []bridgetest.File, manager func(*bridge.ManagerOptions), caps mcp.ClientCapabilities, opts ...envOpt) *env {
	t.Helper()
	srv := bridgetest.New(files...)
	mo := bridge.ManagerOptions{Jupyter: srv, Logger: zerolog.Nop(), Room: fastRoom(), JoinTimeout: waitLimit, FirstReadWait: -1}
	if manager != nil {
		manager(&mo)
	}
	m, err := bridge.NewManager(mo)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(m.Close)
	// Every toolset: these tests exercise every tool (toolsets_test.go tests the default).
	o := tools.Options{Manager: m, Logger: zerolog.Nop(), Version: "test", Toolsets: []string{"all"}}
	for _, f := range opts {
		f(&o)
	}
	ts, err := tools.New(o)
	if err != nil {
		t.Fatalf("tools.New: %v", err)
	}
	c, err := client.NewInProcessClient(ts.MCP())
	if err != nil {
		t.Fatalf("NewInProcessClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("client Start: %v", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "tools-test", Version: "1"}
	init.Params.Capabilities = caps
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return &env{t: t, srv: srv, m: m, ts: ts, c: c, embed: o.AlwaysEmbedSchema}
}

// ctxT returns a context bounded by waitLimit and cancelled when the test ends.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// result is a tool result decoded from its wire JSON.
type result struct {
	IsError    bool
	Raw        map[string]any   // the whole CallToolResult as JSON
	Content    []map[string]any // content items as JSON
	Texts      []string         // text of every text item
	Resources  []map[string]any // every embedded resource item (type "resource")
	Body       map[string]any   // the first text decoded as a JSON object (nil when it is not JSON)
	Structured any              // structuredContent as JSON
}

func (r *result) String() string {
	b, _ := json.Marshal(r.Raw)
	if len(b) > 3000 {
		b = append(b[:3000], "…"...)
	}
	return string(b)
}

// call runs a tool and decodes the result; a protocol error fails the test.
func (e *env) call(name string, args map[string]any) *result {
	e.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := e.c.CallTool(ctxT(e.t), req)
	if err != nil {
		e.t.Fatalf("CallTool %s: protocol error %v", name, err)
	}
	return decodeResult(e.t, res)
}

// callNoFatal is call for goroutines other than the test's: it returns nil on a protocol error.
func (e *env) callNoFatal(name string, args map[string]any) *result {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := e.c.CallTool(ctx, req)
	if err != nil {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil
	}
	out := &result{}
	if json.Unmarshal(b, &out.Raw) != nil {
		return nil
	}
	out.IsError, _ = out.Raw["isError"].(bool)
	return out
}

func decodeResult(t *testing.T, res *mcp.CallToolResult) *result {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("marshal result: %v", err)
	}
	out := &result{}
	if err := json.Unmarshal(b, &out.Raw); err != nil {
		t.Fatalf("unmarshal result: %v", err)
	}
	out.IsError, _ = out.Raw["isError"].(bool)
	out.Structured = out.Raw["structuredContent"]
	items, _ := out.Raw["content"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		out.Content = append(out.Content, m)
		switch m["type"] {
		case "text":
			s, _ := m["text"].(string)
			out.Texts = append(out.Texts, s)
		case "resource":
			out.Resources = append(out.Resources, m)
		}
	}
	if len(out.Texts) > 0 {
		var body map[string]any
		if json.Unmarshal([]byte(out.Texts[0]), &body) == nil {
			out.Body = body
		}
	}
	return out
}

// ok runs a tool that must succeed and returns its JSON body.
func (e *env) ok(name string, args map[string]any) map[string]any {
	e.t.Helper()
	r := e.call(name, args)
	if r.IsError {
		e.t.Fatalf("%s(%s) failed: %s", name, compact(args), r)
	}
	if r.Body == nil {
		e.t.Fatalf("%s(%s): first content is not a JSON object: %s", name, compact(args), r)
	}
	// Lean results: one JSON text plus the same object as structured content; the schema only
	// when asked for.
	want := 1
	if args["includeSchema"] == true || e.embed {
		want = 2
		checkSchemaEmbedded(e.t, name, r)
	}
	if len(r.Content) != want || r.Content[0]["type"] != "text" {
		e.t.Errorf("%s: %d content items (%s), want %d", name, len(r.Content), compact(r.Content), want)
	}
	if !reflect.DeepEqual(r.Structured, jsonRoundTrip(e.t, r.Body)) {
		e.t.Errorf("%s: structuredContent differs from the text content:\nstructured %s\ntext       %s", name, compact(r.Structured), compact(r.Body))
	}
	return r.Body
}

// fail runs a tool that must fail and returns the decoded result after checking the failure
// shape: {"success": false, "error": ..., "details"?: [...]} plus the embedded schema.
func (e *env) fail(name string, args map[string]any) *result {
	e.t.Helper()
	r := e.call(name, args)
	if !r.IsError {
		e.t.Fatalf("%s(%s) succeeded, want a failure: %s", name, compact(args), r)
	}
	checkFailureShape(e.t, name, r)
	return r
}

func checkFailureShape(t *testing.T, name string, r *result) {
	t.Helper()
	if r.Body == nil {
		t.Fatalf("%s failure: text is not JSON: %s", name, r)
	}
	if s, ok := r.Body["success"].(bool); !ok || s {
		t.Errorf("%s failure: success = %v, want false", name, r.Body["success"])
	}
	if msg, _ := r.Body["error"].(string); msg == "" {
		t.Errorf("%s failure: no error message: %s", name, r)
	}
	if d, present := r.Body["details"]; present {
		list, ok := d.([]any)
		if !ok || len(list) == 0 {
			t.Errorf("%s failure: details = %v, want a non-empty list", name, d)
		}
		for _, x := range list {
			m, _ := x.(map[string]any)
			if _, ok := m["path"].([]any); !ok {
				t.Errorf("%s failure: detail %v has no path list", name, x)
			}
			if s, _ := m["message"].(string); s == "" {
				t.Errorf("%s failure: detail %v has no message", name, x)
			}
		}
	}
	checkSchemaEmbedded(t, name, r)
}

// checkSchemaEmbedded asserts that the result embeds exactly one schema resource of tool name.
func checkSchemaEmbedded(t *testing.T, name string, r *result) {
	t.Helper()
	if len(r.Resources) != 1 {
		t.Fatalf("%s: %d embedded resources, want the schema: %s", name, len(r.Resources), r)
	}
	item := r.Resources[0]
	res, _ := item["resource"].(map[string]any)
	if uri := res["uri"]; uri != "jupyter://operations/"+name {
		t.Errorf("%s: embedded resource uri = %v, want jupyter://operations/%s", name, uri, name)
	}
	if mt := res["mimeType"]; mt != "application/json" {
		t.Errorf("%s: embedded resource mimeType = %v", name, mt)
	}
	ann, _ := item["annotations"].(map[string]any)
	if !reflect.DeepEqual(ann["audience"], []any{"assistant"}) {
		t.Errorf("%s: schema audience = %v, want [assistant]", name, ann["audience"])
	}
	if ann["priority"] != 0.5 {
		t.Errorf("%s: schema priority = %v, want 0.5", name, ann["priority"])
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(fmt.Sprint(res["text"])), &doc); err != nil {
		t.Fatalf("%s: embedded schema is not JSON: %v", name, err)
	}
	if doc["name"] != name {
		t.Errorf("%s: embedded schema names %v", name, doc["name"])
	}
	is, _ := doc["input_schema"].(map[string]any)
	if is["type"] != "object" {
		t.Errorf("%s: embedded input_schema = %v", name, is)
	}
}

// details returns the details list of a failure as (path, message) pairs.
func details(r *result) []detail {
	var out []detail
	list, _ := r.Body["details"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		p, _ := m["path"].([]any)
		msg, _ := m["message"].(string)
		out = append(out, detail{path: p, msg: msg})
	}
	return out
}

type detail struct {
	path []any
	msg  string
}

// pathIs compares a detail path with keys and indices.
func (d detail) pathIs(want ...any) bool {
	if len(d.path) != len(want) {
		return false
	}
	for i, w := range want {
		switch w := w.(type) {
		case int:
			if f, ok := d.path[i].(float64); !ok || int(f) != w {
				return false
			}
		default:
			if d.path[i] != w {
				return false
			}
		}
	}
	return true
}

// findDetail returns the detail at path, failing the test when there is none.
func findDetail(t *testing.T, r *result, path ...any) detail {
	t.Helper()
	for _, d := range details(r) {
		if d.pathIs(path...) {
			return d
		}
	}
	t.Fatalf("no detail at path %v: %s", path, r)
	return detail{}
}

func errorText(r *result) string {
	s, _ := r.Body["error"].(string)
	return s
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		b = append(b[:300], "…"...)
	}
	return string(b)
}

// --- notebook fixtures -------------------------------------------------------------------------

func code(id, src string) ydoc.Cell {
	return ydoc.Cell{ID: id, Type: ydoc.CellCode, Source: src, Outputs: []map[string]any{}}
}

func markdown(id, src string) ydoc.Cell {
	return ydoc.Cell{ID: id, Type: ydoc.CellMarkdown, Source: src}
}

func notebook(cells ...ydoc.Cell) ydoc.Notebook {
	return ydoc.Notebook{
		NBFormat: 4, NBFormatMinor: 5,
		Metadata: map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3", "language": "python"}},
		Cells:    cells,
	}
}

func nbFile(path string, nb ydoc.Notebook) bridgetest.File {
	return bridgetest.File{Path: path, Type: "notebook", Notebook: nb}
}

func textFile(path, text string) bridgetest.File {
	return bridgetest.File{Path: path, Type: "file", Text: text}
}

func dirFile(path string) bridgetest.File { return bridgetest.File{Path: path, Type: "directory"} }

// simpleCells are n code cells c0..c{n-1} with source "src i".
func simpleCells(n int) []ydoc.Cell {
	cells := make([]ydoc.Cell, n)
	for i := range cells {
		cells[i] = code(fmt.Sprintf("c%d", i), fmt.Sprintf("src %d", i))
	}
	return cells
}

// sourceHash is the hash get_notebook reports: 12 hex digits of SHA-256.
func sourceHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// --- server inspection -------------------------------------------------------------------------

// serverNotebook returns the fake server's copy of a notebook.
func (e *env) serverNotebook(path string) ydoc.Notebook {
	e.t.Helper()
	nb, err := e.srv.Notebook(path)
	if err != nil {
		e.t.Fatalf("server notebook %s: %v", path, err)
	}
	return nb
}

// snapshot is the server's copy of a notebook as canonical JSON, for before/after comparisons.
func (e *env) snapshot(path string) string {
	e.t.Helper()
	nb := e.serverNotebook(path)
	b, err := json.Marshal(nb.JSON())
	if err != nil {
		e.t.Fatalf("marshal notebook: %v", err)
	}
	return string(b)
}

func (e *env) serverText(path string) string {
	e.t.Helper()
	s, err := e.srv.Text(path)
	if err != nil {
		e.t.Fatalf("server text %s: %v", path, err)
	}
	return s
}

func (e *env) serverSources(path string) []string {
	e.t.Helper()
	var out []string
	for _, c := range e.serverNotebook(path).Cells {
		out = append(out, c.Source)
	}
	return out
}

func (e *env) serverCell(path, id string) ydoc.Cell {
	e.t.Helper()
	for _, c := range e.serverNotebook(path).Cells {
		if c.ID == id {
			return c
		}
	}
	e.t.Fatalf("server notebook %s has no cell %q (cells %v)", path, id, e.srv.CellIDs(path))
	return ydoc.Cell{}
}

func wantIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: cell ids %v, want %v", what, got, want)
	}
}

// humanEdit changes the server document as a collaborator would and waits until the sidecar's
// replica of the room has applied that change.
func (e *env) humanEdit(path string, kind ydoc.Kind, fn func(*ydoc.Txn) error) {
	e.t.Helper()
	room := e.m.Get(path, kind)
	if room == nil {
		e.t.Fatalf("humanEdit %s: the sidecar has no room open", path)
	}
	sub := room.Subscribe(1024)
	defer sub.Close()
	if err := e.srv.EditDoc(path, fn); err != nil {
		e.t.Fatalf("EditDoc %s: %v", path, err)
	}
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				e.t.Fatalf("humanEdit %s: subscription closed", path)
			}
			if ev.Kind == bridge.EventChanged && !ev.Change.Local {
				return
			}
		case <-timer.C:
			e.t.Fatalf("humanEdit %s: the sidecar did not see the change within %v", path, waitLimit)
		}
	}
}

// --- JSON helpers --------------------------------------------------------------------------------

func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", compact(v))
	}
	return m
}

func asList(t *testing.T, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("not a list: %s", compact(v))
	}
	return l
}

func num(t *testing.T, v any) int {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("not a number: %s", compact(v))
	}
	return int(f)
}

func str(v any) string { s, _ := v.(string); return s }

// cellsOf returns the cells of a get_notebook json result.
func cellsOf(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range asList(t, body["cells"]) {
		out = append(out, asMap(t, c))
	}
	return out
}

func idsOf(cells []map[string]any) []string {
	var ids []string
	for _, c := range cells {
		ids = append(ids, str(c["id"]))
	}
	return ids
}

// jsonRoundTrip normalises a value to what encoding/json produces for it.
func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not mention %q: %s", what, sub, s)
		}
	}
}

// nbVersion reads a notebook's version (and opens its room).
func (e *env) nbVersion(path string) string {
	e.t.Helper()
	return str(e.ok("get_notebook", map[string]any{"format": "json", "path": path, "include_outputs": false})["version"])
}
