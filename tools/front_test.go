package tools_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// rpcClient speaks JSON-RPC to the Streamable HTTP endpoint by hand, as a client that implements
// MCP tasks (2025-11-25) would.
type rpcClient struct {
	t       *testing.T
	url     string
	session string
	seq     atomic.Int64
}

// serveHTTP serves the tools' HTTP endpoint on a loopback port until the test ends, and returns
// its MCP URL.
func serveHTTP(t *testing.T, ts *tools.Server, opts tools.HTTPOptions) string {
	t.Helper()
	h := ts.HTTPHandler(opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		_ = h.Shutdown(context.Background()) // ends the sessions' streams, which Close waits for
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// do sends a request and returns its JSON-RPC response (the last message of an SSE stream).
func (c *rpcClient) do(method string, params any) map[string]any {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": c.seq.Add(1), "method": method, "params": params}
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.session = sid
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, body)
	}
	var last map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil && m["id"] != nil {
					last = m
				}
			}
		}
	} else if err := json.Unmarshal(body, &last); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, body)
	}
	return last
}

func (c *rpcClient) result(method string, params any) map[string]any {
	c.t.Helper()
	r := c.do(method, params)
	res, ok := r["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("%s: no result: %v", method, r)
	}
	return res
}

// newRPCClient initializes a session; wantTasks: the server must advertise tasks.
func newRPCClient(t *testing.T, url string, wantTasks bool) *rpcClient {
	c := &rpcClient{t: t, url: url}
	init := c.result("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tasks": map[string]any{}},
		"clientInfo": map[string]any{"name": "tasks-test", "version": "1"}})
	caps, _ := init["capabilities"].(map[string]any)
	if wantTasks && caps["tasks"] == nil {
		t.Errorf("the server does not advertise tasks: %v", caps)
	}
	c.do("notifications/initialized", nil)
	return c
}

// A cell run as a task: created at once, polled to completion with the job's progress, its result
// the one get_execution gives; another is cancelled with tasks/cancel and cancel_execution sees
// the same run; a task of the other session does not exist.
func TestTasksOverHTTP(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:one\nblock:first"), code("c2", "print:two\nblock:second"), code("c3", "error:ValueError:bad value")))
	url := serveHTTP(t, e.ts, tools.HTTPOptions{})
	c := newRPCClient(t, url, true)

	// tools/list says the execution tools may run as tasks.
	list := c.result("tools/list", map[string]any{})
	for _, tl := range list["tools"].([]any) {
		tool := tl.(map[string]any)
		if tool["name"] == "execute_notebook_cell" {
			if ex, _ := tool["execution"].(map[string]any); ex["taskSupport"] != "optional" {
				t.Errorf("execute_notebook_cell execution = %v", tool["execution"])
			}
		}
	}

	created := c.result("tools/call", map[string]any{"name": "execute_notebook_cell", "arguments": map[string]any{"path": xPath, "cell_id": "c1"}, "task": map[string]any{"ttl": 60000}})
	task := created["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if !strings.HasPrefix(id, "job-") || task["status"] != "working" || task["pollInterval"] == nil || task["ttl"] != float64(60000) {
		t.Fatalf("CreateTaskResult = %v", created)
	}
	// The task is the job: get_execution sees it running.
	e.awaitGate("first")
	got := c.result("tasks/get", map[string]any{"taskId": id})
	if got["status"] != "working" || !strings.Contains(fmt.Sprint(got["statusMessage"]), "running cell c1") {
		t.Errorf("tasks/get while running = %v", got)
	}
	if b := e.ok("get_execution", map[string]any{"job_id": id}); b["status"] != "running" {
		t.Errorf("get_execution of the task's job = %v", b)
	}
	e.ks.Release("first")
	deadline := time.Now().Add(waitLimit)
	for got["status"] == "working" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got = c.result("tasks/get", map[string]any{"taskId": id})
	}
	if got["status"] != "completed" {
		t.Fatalf("tasks/get after the run = %v", got)
	}
	res := c.result("tasks/result", map[string]any{"taskId": id})
	sc, _ := res["structuredContent"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	if sc["job_id"] != id || sc["status"] != "completed" || !strings.Contains(fmt.Sprint(sc["cells"]), "one") || meta["io.modelcontextprotocol/related-task"] == nil {
		t.Errorf("tasks/result = %v", res)
	}

	// A second run, cancelled with tasks/cancel while its cell blocks.
	created = c.result("tools/call", map[string]any{"name": "batch_execute_notebook_cells", "arguments": map[string]any{"path": xPath, "cell_ids": []any{"c2", "c1"}}, "task": map[string]any{}})
	id2 := created["task"].(map[string]any)["taskId"].(string)
	e.awaitGate("second")
	cancelled := c.result("tasks/cancel", map[string]any{"taskId": id2})
	if cancelled["status"] != "cancelled" {
		t.Errorf("tasks/cancel = %v", cancelled)
	}
	res = c.result("tasks/result", map[string]any{"taskId": id2})
	sc, _ = res["structuredContent"].(map[string]any)
	if sc["status"] != "cancelled" {
		t.Errorf("tasks/result of the cancelled task = %v", res)
	}
	if b := e.ok("get_execution", map[string]any{"job_id": id2}); b["status"] != "cancelled" {
		t.Errorf("get_execution of the cancelled task's job = %v", b)
	}
	if r := c.do("tasks/cancel", map[string]any{"taskId": id2}); r["error"] == nil {
		t.Errorf("cancelling a cancelled task = %v", r)
	}
	tasks := c.result("tasks/list", map[string]any{})["tasks"].([]any)
	if len(tasks) != 2 || tasks[0].(map[string]any)["taskId"] != id2 { // before the raising run
		t.Errorf("tasks/list = %v", tasks)
	}

	// Another session sees none of them.
	other := newRPCClient(t, url, true)
	if r := other.do("tasks/get", map[string]any{"taskId": id}); r["error"] == nil {
		t.Errorf("another session read the task: %v", r)
	}
	if l := other.result("tasks/list", map[string]any{})["tasks"].([]any); len(l) != 0 {
		t.Errorf("another session lists %v", l)
	}

	// A cell that raises: the task completes, and its result has the traceback.
	created = c.result("tools/call", map[string]any{"name": "execute_notebook_cell", "arguments": map[string]any{"path": xPath, "cell_id": "c3"}, "task": map[string]any{}})
	id3 := created["task"].(map[string]any)["taskId"].(string)
	res = c.result("tasks/result", map[string]any{"taskId": id3})
	if got := c.result("tasks/get", map[string]any{"taskId": id3}); got["status"] != "completed" || !strings.Contains(fmt.Sprint(got["statusMessage"]), "1 with an error") {
		t.Errorf("tasks/get of a run whose cell raised = %v", got)
	}
	if !strings.Contains(fmt.Sprint(res["structuredContent"]), "ValueError") {
		t.Errorf("tasks/result of a run whose cell raised = %v", res)
	}

	// A made-up session id is refused as mcp-go refuses it for any request.
	for sid, want := range map[string]int{"made-up": http.StatusNotFound, "": http.StatusBadRequest} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"`+id+`"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("tasks/get with session id %q: HTTP %d, want %d", sid, resp.StatusCode, want)
		}
	}

	// A run the tool refuses to start is a completed task whose result is the tool's error (a
	// tool error is a result; "failed" is for a task without one).
	created = c.result("tools/call", map[string]any{"name": "execute_notebook_cell", "arguments": map[string]any{"path": xPath, "cell_id": "nope"}, "task": map[string]any{}})
	t3 := created["task"].(map[string]any)
	if t3["status"] != "completed" {
		t.Errorf("a refused run's task = %v", t3)
	}
	if res := c.result("tasks/result", map[string]any{"taskId": t3["taskId"]}); res["isError"] != true {
		t.Errorf("a refused run's tasks/result = %v", res)
	}
}

// Over stdio too, a task-augmented call is answered with a task (the job's id).
func TestTaskOverStdio(t *testing.T) {
	e := newXEnv(t, xNotebook(code("c1", "print:one")))
	out := stdioExchange(t, e.ts, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{}},"clientInfo":{"name":"s","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_notebook_cell","arguments":{"path":"`+xPath+`","cell_id":"c1"},"task":{"ttl":1000}}}
`, 2)
	var created map[string]any
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["id"] == float64(2) {
			created = m
		}
	}
	task, _ := created["result"].(map[string]any)["task"].(map[string]any)
	// A one-line cell may be done by the time the task is shown: working or completed.
	if id, _ := task["taskId"].(string); !strings.HasPrefix(id, "job-") || (task["status"] != "working" && task["status"] != "completed") || task["ttl"] != float64(1000) {
		t.Fatalf("stdio task creation: %v\n%s", created, out)
	}
	job := e.ok("get_execution", map[string]any{"job_id": task["taskId"], "timeout": 10})
	if job["status"] != "completed" {
		t.Errorf("the stdio task's job: %s", compact(job))
	}
}

// Resource errors carry MCP's codes: -32002 for a resource that does not exist, -32602 for a
// malformed argument; over HTTP and over stdio.
func TestResourceErrorCodes(t *testing.T) {
	e := newEnv(t, nil)
	c := newRPCClient(t, serveHTTP(t, e.ts, tools.HTTPOptions{}), false)
	for _, tc := range []struct {
		uri  string
		code float64
	}{
		{"jupyter://notebooks/no-such-file-id", -32002},
		{"jupyter://templates/no-such-template", -32002},
		{"jupyter://executions/job-none", -32002},
		{"jupyter://nothing-here", -32002},
		{"other://x", -32002},
		{"jupyter://notebooks//json", -32602},
	} {
		r := c.do("resources/read", map[string]any{"uri": tc.uri})
		errObj, _ := r["error"].(map[string]any)
		if errObj["code"] != tc.code {
			t.Errorf("resources/read %s: %v, want code %v", tc.uri, r, tc.code)
		}
	}

	// stdio: the same rewrite on mcp-go's output lines.
	out := stdioExchange(t, e.ts, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"s","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"jupyter://notebooks/no-such-file-id"}}
`, 2)
	if !strings.Contains(out, `"id":2,"error":{"code":-32002,"message":"resource not found: `) {
		t.Errorf("stdio resources/read of an unknown file id:\n%s", out)
	}
}

// stdioExchange runs ServeStdio with the lines as input, keeping stdin open until the response
// with id wantID has been written (mcp-go cancels requests still running at EOF), and returns
// everything written.
func stdioExchange(t *testing.T, ts *tools.Server, lines string, wantID int) string {
	t.Helper()
	pr, pw := io.Pipe()
	w := &syncWriter{w: &bytes.Buffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.ServeStdio(ctx, pr, w) }()
	if _, err := io.WriteString(pw, lines); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf(`"id":%d,`, wantID)
	for !strings.Contains(w.String(), marker) {
		if ctx.Err() != nil {
			t.Fatalf("no response %d over stdio:\n%s", wantID, w.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	return w.String()
}

// syncWriter is a bytes.Buffer safe for the writers of ServeStdio.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
