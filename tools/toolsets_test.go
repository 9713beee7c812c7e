package tools_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// Toolsets: what a session is offered by default, by configuration, per HTTP request and after
// enable_toolset; what a tool outside them answers; what an engine hides.

func toolsets(spec ...string) envOpt { return func(o *tools.Options) { o.Toolsets = spec } }

func names(m map[string]mcp.Tool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// defaultList is the default tools/list with an executor (clear_outputs comes with its tool).
var defaultList = []string{
	"batch_delete_notebook_cells", "batch_execute_notebook_cells", "batch_insert_notebook_cells",
	"batch_update_notebook_cells", "cancel_execution", "create_notebook_session", "enable_toolset",
	"execute_code", "execute_notebook_cell", "get_execution", "get_notebook", "get_online_users",
	"list_notebooks", "move_notebook_cells", "run_script",
}

func TestDefaultToolsetIsTheDailyLoop(t *testing.T) {
	e := newXEnv(t, nil, toolsets())
	got := names(listTools(t, e.env))
	want := slices.Clone(defaultList)
	if slices.Contains(got, "search_notebook") {
		want = append(want, "search_notebook")
	}
	if slices.Contains(got, "clear_outputs") {
		want = append(want, "clear_outputs")
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("default tools/list = %v, want %v", got, want)
	}
	if len(got) > 20 {
		t.Errorf("%d tools by default, want at most 20", len(got))
	}
}

func TestToolOutsideTheSessionsToolsetsSaysHowToTurnItOn(t *testing.T) {
	e := newEnv(t, nil, toolsets("default"))
	r := e.call("get_document_history", map[string]any{"path": bridgetest.NotebookPath})
	if !r.IsError {
		t.Fatalf("a tool outside the default set ran: %s", r)
	}
	msg := str(r.Body["error"])
	for _, want := range []string{`"history" toolset`, `enable_toolset {"toolset": "history"}`, "--toolsets default,history", "MCP_TOOLSETS=default,history", "X-MCP-Toolsets: default,history", "?toolsets=default,history"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if len(r.Resources) != 1 {
		t.Errorf("the refusal did not carry the schema: %s", r)
	}
}

func TestToolsetsBySetAndByToolName(t *testing.T) {
	e := newEnv(t, nil, toolsets("history", "count_tokens"))
	got := names(listTools(t, e))
	want := []string{"count_tokens", "enable_toolset", "get_document_history", "redo_edit", "restore_document_version", "undo_last_edit"}
	if !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}
	if r := e.call("get_notebook", map[string]any{"path": bridgetest.NotebookPath}); !r.IsError || !strings.Contains(str(r.Body["error"]), `"notebooks" toolset`) {
		t.Errorf("get_notebook outside the sets: %s", r)
	}
	if r := e.call("count_tokens", map[string]any{"input": "hello"}); r.IsError {
		t.Errorf("a tool named in the configuration was refused: %s", r)
	}
}

func TestAllListsEveryToolButTheDiscoveryTool(t *testing.T) {
	e := newEnv(t, nil, toolsets("all"))
	if got := listTools(t, e); got["enable_toolset"].Name != "" || len(got) != len(allTools) {
		t.Errorf("all: %v", names(got))
	}
}

// A client that refuses more than 40 tools per server (Cursor) gets at most 40 from the default
// set and from CursorToolsets, which offers every tool but the text-file ones; all offers more.
func TestCursorToolsetsFitFortyTools(t *testing.T) {
	all := listTools(t, newXEnv(t, nil, toolsets("all")).env)
	for _, spec := range []string{"default", tools.CursorToolsets} {
		got := listTools(t, newXEnv(t, nil, toolsets(spec)).env)
		t.Logf("%s: %d tools (all: %d)", spec, len(got), len(all))
		if len(got) > 40 {
			t.Errorf("%s lists %d tools, over Cursor's 40", spec, len(got))
		}
		if spec == "default" {
			continue
		}
		for name := range all {
			_, listed := got[name]
			text := slices.Contains([]string{"list_documents", "get_document", "create_document_session", "batch_update_document", "batch_insert_text", "batch_delete_text"}, name)
			if listed == text {
				t.Errorf("%s: %s listed %v", spec, name, listed)
			}
		}
	}
}

func TestUnknownToolsetIsRefusedAtStart(t *testing.T) {
	srv := bridgetest.New()
	m, err := bridge.NewManager(bridge.ManagerOptions{Jupyter: srv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	_, err = tools.New(tools.Options{Manager: m, Toolsets: []string{"default,histroy"}})
	if err == nil || !strings.Contains(err.Error(), `"histroy"`) || !strings.Contains(err.Error(), "history") {
		t.Fatalf("tools.New with a misspelt toolset: %v", err)
	}
}

// enable_toolset turns a set on for the calling session only, and tells it to list its tools
// again.
func TestEnableToolsetTurnsASetOnForTheSession(t *testing.T) {
	e := newEnv(t, nil, toolsets())
	changed := make(chan struct{}, 4)
	e.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			changed <- struct{}{}
		}
	})
	if got := listTools(t, e); got["undo_last_edit"].Name != "" {
		t.Fatal("undo_last_edit listed before its set was turned on")
	}
	r := e.call("enable_toolset", map[string]any{"toolset": "history"})
	if r.IsError {
		t.Fatalf("enable_toolset: %s", r)
	}
	var enabled []string
	for _, x := range asList(t, r.Body["enabled"]) {
		enabled = append(enabled, str(asMap(t, x)["name"]))
	}
	sort.Strings(enabled)
	if want := []string{"get_document_history", "redo_edit", "restore_document_version", "undo_last_edit"}; !slices.Equal(enabled, want) {
		t.Errorf("enabled %v, want %v", enabled, want)
	}
	select {
	case <-changed:
	case <-time.After(waitLimit):
		t.Fatal("no notifications/tools/list_changed after enable_toolset")
	}
	got := listTools(t, e)
	if got["undo_last_edit"].Name == "" || got["get_notebook"].Name == "" {
		t.Errorf("after enable_toolset: %v", names(got))
	}
	if r := e.call("get_document_history", map[string]any{"path": bridgetest.NotebookPath}); r.IsError {
		t.Errorf("a tool of the enabled set: %s", r)
	}
	// Enabling it again changes nothing and says so.
	if r := e.call("enable_toolset", map[string]any{"toolset": "history"}); r.IsError || !strings.Contains(str(r.Body["note"]), "already") {
		t.Errorf("enable_toolset again: %s", r)
	}
	// Another session of the same server is not affected.
	c2, err := client.NewInProcessClient(e.ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	if err := c2.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Initialize(ctxT(t), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	lt, err := c2.ListTools(ctxT(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Name == "undo_last_edit" {
			t.Error("another session sees the set one session turned on")
		}
	}
	// After all, the discovery tool has nothing left to offer and leaves the list.
	if r := e.call("enable_toolset", map[string]any{"toolset": "all"}); r.IsError {
		t.Fatalf("enable_toolset all: %s", r)
	}
	if got := listTools(t, e); got["enable_toolset"].Name != "" || got["fork_document"].Name == "" {
		t.Errorf("after all: %v", names(got))
	}
}

// On jupyter-server-documents (no fork API) the fork tools are hidden, and say why when called.
func TestEngineHidesWhatItCannotSupport(t *testing.T) {
	e := newEnv(t, nil, toolsets("all"))
	e.srv.SetEngine(bridge.Engine{Name: "jupyter-server-documents", NoForks: true, SavesItself: true})
	got := listTools(t, e)
	for _, n := range []string{"fork_document", "list_forks", "diff_fork", "merge_document_fork", "discard_document_fork"} {
		if got[n].Name != "" {
			t.Errorf("%s listed on an engine without forks", n)
		}
	}
	if got["get_notebook"].Name == "" {
		t.Error("get_notebook hidden")
	}
	r := e.call("list_forks", map[string]any{"path": bridgetest.NotebookPath})
	if !r.IsError || !strings.Contains(str(r.Body["error"]), "jupyter-server-documents has no fork API") {
		t.Errorf("list_forks on jsd: %s", r)
	}
	d := newEnv(t, nil, toolsets())
	d.srv.SetEngine(bridge.Engine{Name: "jupyter-server-documents", NoForks: true, SavesItself: true})
	if r := d.call("enable_toolset", map[string]any{"toolset": "forks"}); !r.IsError || !strings.Contains(str(r.Body["error"]), "no fork API") {
		t.Errorf("enable_toolset forks on jsd: %s", r)
	}
}

// Over HTTP, the X-MCP-Toolsets header and the toolsets query parameter choose a session's
// toolsets; a name that is no set or tool is refused with 400 before MCP sees the request.
func TestToolsetsPerHTTPRequest(t *testing.T) {
	e := newEnv(t, nil, toolsets())
	base := serveHTTP(t, e.ts, tools.HTTPOptions{})
	list := func(url string, headers map[string]string) []string {
		t.Helper()
		c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(headers))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Start(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctxT(t), mcp.InitializeRequest{}); err != nil {
			t.Fatalf("initialize %s %v: %v", url, headers, err)
		}
		res, err := c.ListTools(ctxT(t), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		sort.Strings(out)
		return out
	}
	if got := list(base, nil); slices.Contains(got, "fork_document") || !slices.Contains(got, "get_notebook") {
		t.Errorf("no header: %v", got)
	}
	if got := list(base, map[string]string{"X-MCP-Toolsets": "forks"}); !slices.Equal(got, []string{"diff_fork", "discard_document_fork", "enable_toolset", "fork_document", "list_forks", "merge_document_fork"}) {
		t.Errorf("header forks: %v", got)
	}
	if got := list(base+"?toolsets=default,undo_last_edit", nil); !slices.Contains(got, "undo_last_edit") || !slices.Contains(got, "get_notebook") || slices.Contains(got, "redo_edit") {
		t.Errorf("query default,undo_last_edit: %v", got)
	}
	if got := list(base, map[string]string{"X-MCP-Toolsets": "all"}); len(got) != len(allTools) {
		t.Errorf("header all: %d tools %v", len(got), got)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"?toolsets=notebooks,nope", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(str(body["message"]), `"nope"`) {
		t.Errorf("a bad toolset: %d %v", resp.StatusCode, body)
	}
}
