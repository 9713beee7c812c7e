package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
)

// MCP tasks (the 2025-11-25 shape, which VS Code implements) over execution jobs: a client that
// declares task support may call execute_notebook_cell or batch_execute_notebook_cells with
// params.task and gets a task at once; tasks/get, tasks/result, tasks/list and tasks/cancel
// follow it. A task is a job: its id is the job_id, so get_execution and cancel_execution see
// the same run, whatever Executor runs it.
//
// mcp-go v1.2.1 has a task store of its own (WithTaskCapabilities, AddTaskTool,
// Execution.TaskSupport), but it runs a task in the context of the request that created it,
// which on Streamable HTTP ends with the response: every task is cancelled at once (measured:
// status "cancelled", "context canceled", 0.5 s after creation). Its ids are its own UUIDs, and
// nothing updates a task's status message or poll interval. So the sidecar answers the task
// calls itself in front of mcp-go (front.go) and uses mcp-go only to advertise the capability.
// The 2026-07-28 revision moved tasks into the io.modelcontextprotocol/tasks extension
// (resultType "task", tasks/update, no tasks/list or tasks/result, requests that carry their
// protocol version and capabilities in _meta); mcp-go advertises extensions (WithExtensions)
// but dispatches none of their methods, and this layer does not speak it yet.

const (
	taskPollMs     = 1000               // the poll interval suggested to clients
	taskDefaultTTL = int64(3600 * 1000) // kept an hour after creation unless the client asks otherwise
	taskMaxTTL     = int64(24 * 3600 * 1000)
)

// taskRecord is what the sidecar remembers of a task beyond its job.
type taskRecord struct {
	id        string // the job id, or a failure id when the tool refused to start
	session   string
	tool      string
	created   time.Time
	ttl       int64
	cancelled bool                // tasks/cancel was called: the task is cancelled from then on
	refusal   *mcp.CallToolResult // the tool's error result when no job was started
}

// taskTable holds the tasks created through tools/call.
type taskTable struct {
	mu    sync.Mutex
	tasks map[string]*taskRecord
	seq   int
}

func newTaskTable() *taskTable { return &taskTable{tasks: map[string]*taskRecord{}} }

// rpcError is a JSON-RPC error the task layer answers with.
type rpcError struct {
	code int
	msg  string
}

func (e *rpcError) Error() string { return e.msg }

func invalidParams(format string, args ...any) *rpcError {
	return &rpcError{code: mcp.INVALID_PARAMS, msg: fmt.Sprintf(format, args...)}
}

// offerTasks marks the execution tools as able to run as tasks (execution.taskSupport
// "optional" in tools/list).
func (s *Server) offerTasks() {
	for _, op := range s.ops {
		if !op.Task {
			continue
		}
		st := s.mcp.GetTool(op.Name)
		if st == nil {
			continue
		}
		tool := st.Tool
		tool.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		s.mcp.AddTool(tool, st.Handler)
	}
}

// isTaskCall reports whether a tools/call asks for a task on a tool that runs as one.
func (s *Server) isTaskCall(method string, params json.RawMessage) bool {
	if method != string(mcp.MethodToolsCall) {
		return false
	}
	var p struct {
		Name string          `json:"name"`
		Task json.RawMessage `json:"task"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Task) == 0 || string(p.Task) == "null" {
		return false
	}
	op := s.opsByName[p.Name]
	return op != nil && op.Task
}

// isTaskMethod reports whether the method is one of the task calls.
func isTaskMethod(method string) bool {
	switch mcp.MCPMethod(method) {
	case mcp.MethodTasksGet, mcp.MethodTasksList, mcp.MethodTasksResult, mcp.MethodTasksCancel:
		return true
	}
	return false
}

// handleTask answers a task call (tools/call with a task, or tasks/*) for a session. ctx
// carries the caller's identity, as for any call.
func (s *Server) handleTask(ctx context.Context, session, method string, params json.RawMessage) (any, error) {
	if s.opts.Executor == nil {
		return nil, &rpcError{code: mcp.METHOD_NOT_FOUND, msg: "tasks: this server runs without a kernel executor"}
	}
	switch mcp.MCPMethod(method) {
	case mcp.MethodToolsCall:
		return s.createTask(ctx, session, params)
	case mcp.MethodTasksList:
		return s.listTasks(ctx, session), nil
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.TaskID == "" {
		return nil, invalidParams("taskId is required")
	}
	rec, err := s.taskOf(ctx, session, p.TaskID)
	if err != nil {
		return nil, err
	}
	switch mcp.MCPMethod(method) {
	case mcp.MethodTasksGet:
		return s.taskView(ctx, rec), nil
	case mcp.MethodTasksCancel:
		return s.cancelTask(ctx, rec)
	default: // tasks/result
		return s.taskResult(ctx, rec)
	}
}

// createTask starts the run as the tool would with wait: false and answers with the task.
func (s *Server) createTask(ctx context.Context, session string, params json.RawMessage) (any, error) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
		Task      struct {
			TTL *int64 `json:"ttl"`
		} `json:"task"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams("tools/call: %v", err)
	}
	args := map[string]any{}
	for k, v := range p.Arguments {
		args[k] = v
	}
	args["wait"] = false // the task is the wait
	res, err := s.callTool(ctx, p.Name, args)
	if err != nil {
		return nil, err
	}
	ttl := taskDefaultTTL
	if p.Task.TTL != nil && *p.Task.TTL > 0 {
		ttl = min(*p.Task.TTL, taskMaxTTL)
	}
	s.pruneTasks(ctx, session)
	rec := &taskRecord{session: session, tool: p.Name, created: time.Now().UTC(), ttl: ttl}
	jobID, _ := structured(res)["job_id"].(string)
	s.tasks.mu.Lock()
	if res.IsError || jobID == "" {
		s.tasks.seq++
		rec.id, rec.refusal = fmt.Sprintf("refused-%d-%d", time.Now().UnixNano(), s.tasks.seq), res
	} else {
		rec.id = jobID
	}
	s.tasks.tasks[rec.id] = rec
	s.tasks.mu.Unlock()
	return map[string]any{"task": s.taskView(ctx, rec)}, nil
}

// callTool runs a tool's handler as mcp-go would (the permission check, audit log and metrics
// are in it), recovering a panic.
func (s *Server) callTool(ctx context.Context, name string, args map[string]any) (res *mcp.CallToolResult, err error) {
	st := s.mcp.GetTool(name)
	if st == nil {
		return nil, invalidParams("tool %q not found", name)
	}
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, &rpcError{code: mcp.INTERNAL_ERROR, msg: fmt.Sprintf("%s panicked: %v", name, p)}
		}
	}()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err = st.Handler(ctx, req)
	if err == nil && res == nil {
		err = fmt.Errorf("%s returned no result", name)
	}
	return res, err
}

// structured returns a result's structured content as a map (nil when it has none).
func structured(res *mcp.CallToolResult) map[string]any {
	if res == nil {
		return nil
	}
	if m, ok := res.StructuredContent.(map[string]any); ok {
		return m
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// taskOf finds a session's task; another session's tasks do not exist for it.
func (s *Server) taskOf(ctx context.Context, session, id string) (*taskRecord, error) {
	s.tasks.mu.Lock()
	rec := s.tasks.tasks[id]
	s.tasks.mu.Unlock()
	if rec == nil || rec.session != session || s.taskExpired(ctx, rec) {
		return nil, invalidParams("no task %q", id)
	}
	return rec, nil
}

// taskExpired forgets a task whose ttl has run out after it ended, or whose job the executor
// no longer keeps (or the caller may no longer see: the door decides, as for get_execution).
func (s *Server) taskExpired(ctx context.Context, rec *taskRecord) bool {
	gone := false
	if rec.refusal == nil {
		job, err := s.job(ctx, rec.id)
		if err != nil {
			gone = true
		} else {
			v := job.View()
			gone = isTerminal(v.Status) && time.Since(rec.created) > time.Duration(rec.ttl)*time.Millisecond
		}
	} else {
		gone = time.Since(rec.created) > time.Duration(rec.ttl)*time.Millisecond
	}
	if gone {
		s.tasks.mu.Lock()
		delete(s.tasks.tasks, rec.id)
		s.tasks.mu.Unlock()
	}
	return gone
}

// pruneTasks forgets a session's tasks whose job the executor no longer keeps or whose ttl ran
// out, so tasks nobody polls do not pile up (a session's tasks go with it: dropSessionTasks).
func (s *Server) pruneTasks(ctx context.Context, session string) {
	s.tasks.mu.Lock()
	var recs []*taskRecord
	for _, r := range s.tasks.tasks {
		if r.session == session {
			recs = append(recs, r)
		}
	}
	s.tasks.mu.Unlock()
	for _, r := range recs {
		s.taskExpired(ctx, r) // forgets it when it is
	}
}

// dropSessionTasks forgets the tasks of a session that ended.
func (s *Server) dropSessionTasks(session string) {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	for id, r := range s.tasks.tasks {
		if r.session == session {
			delete(s.tasks.tasks, id)
		}
	}
}

func isTerminal(st execution.JobStatus) bool {
	return st == execution.JobCompleted || st == execution.JobFailed || st == execution.JobCancelled
}

// taskView is the task as the protocol shows it.
func (s *Server) taskView(ctx context.Context, rec *taskRecord) mcp.Task {
	ttl, poll := rec.ttl, int64(taskPollMs)
	t := mcp.Task{TaskId: rec.id, CreatedAt: rec.created.Format(time.RFC3339), LastUpdatedAt: rec.created.Format(time.RFC3339), TTL: &ttl, PollInterval: &poll}
	if rec.refusal != nil {
		// A tool error is the call's result, not a failure of the task (SEP-1686; the TypeScript
		// SDK does not even read the result of a failed task).
		t.Status, t.StatusMessage = mcp.TaskStatusCompleted, "the tool refused to start the run: tasks/result has its error"
		return t
	}
	job, err := s.job(ctx, rec.id)
	if err != nil {
		t.Status, t.StatusMessage = mcp.TaskStatusFailed, errUnknownJob
		return t
	}
	v := job.View()
	done, errs := 0, 0
	running := ""
	for _, c := range v.Cells {
		switch c.Status {
		case execution.CellPending:
		case execution.CellRunning:
			running = c.CellID
		default:
			done++
			if c.Status == execution.CellError {
				errs++
			}
		}
	}
	if !v.Ended.IsZero() {
		t.LastUpdatedAt = v.Ended.UTC().Format(time.RFC3339)
	}
	switch {
	case v.Status == execution.JobCancelled || s.cancelRequested(rec):
		t.Status = mcp.TaskStatusCancelled
		t.StatusMessage = fmt.Sprintf("cancelled: %d of %d cells ran", done, len(v.Cells))
		if !isTerminal(v.Status) {
			t.StatusMessage = "cancelled: the running cell is being interrupted, cells not started will not run"
		}
	case v.Status == execution.JobQueued:
		t.Status, t.StatusMessage = mcp.TaskStatusWorking, "queued behind an earlier run on the notebook"
	case v.Status == execution.JobRunning:
		t.Status = mcp.TaskStatusWorking
		t.StatusMessage = fmt.Sprintf("%d of %d cells done", done, len(v.Cells))
		if running != "" {
			t.StatusMessage += ", running cell " + running
		}
	case v.Status == execution.JobCompleted:
		t.Status, t.StatusMessage = mcp.TaskStatusCompleted, fmt.Sprintf("%d cells ran without error", done)
	default:
		// The job failed: a cell raised or the kernel was lost. The run still has a result (the
		// outputs, the traceback), so the task completed; "failed" is for a task that has none.
		t.Status, t.StatusMessage = mcp.TaskStatusCompleted, fmt.Sprintf("%d of %d cells ran, %d with an error: tasks/result has the outputs", done, len(v.Cells), errs)
		if v.Note != "" {
			t.StatusMessage += "; " + v.Note
		}
	}
	return t
}

// cancelRequested reports whether tasks/cancel was called for the task.
func (s *Server) cancelRequested(rec *taskRecord) bool {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	return rec.cancelled
}

// listTasks lists a session's tasks, newest first.
func (s *Server) listTasks(ctx context.Context, session string) any {
	s.tasks.mu.Lock()
	var recs []*taskRecord
	for _, r := range s.tasks.tasks {
		if r.session == session {
			recs = append(recs, r)
		}
	}
	s.tasks.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].created.After(recs[j].created) })
	list := []mcp.Task{}
	for _, r := range recs {
		if !s.taskExpired(ctx, r) {
			list = append(list, s.taskView(ctx, r))
		}
	}
	return map[string]any{"tasks": list}
}

// cancelTask cancels the job (as cancel_execution does); the task is cancelled from now on.
func (s *Server) cancelTask(ctx context.Context, rec *taskRecord) (any, error) {
	t := s.taskView(ctx, rec)
	switch t.Status {
	case mcp.TaskStatusCompleted, mcp.TaskStatusFailed, mcp.TaskStatusCancelled:
		return nil, invalidParams("task %s is already %s", rec.id, t.Status)
	}
	if _, err := s.callTool(ctx, "cancel_execution", map[string]any{"job_id": rec.id}); err != nil {
		return nil, err
	}
	s.tasks.mu.Lock()
	rec.cancelled = true
	s.tasks.mu.Unlock()
	return s.taskView(ctx, rec), nil
}

// taskResult waits for the run to end and answers what get_execution answers then.
func (s *Server) taskResult(ctx context.Context, rec *taskRecord) (any, error) {
	related := map[string]any{mcp.RelatedTaskMetaKey: map[string]any{"taskId": rec.id}}
	if rec.refusal != nil {
		return withMeta(rec.refusal, related), nil
	}
	job, err := s.job(ctx, rec.id)
	if err != nil {
		return nil, invalidParams("no task %q: %s", rec.id, errUnknownJob)
	}
	select {
	case <-job.Done():
	case <-ctx.Done():
		return nil, &rpcError{code: mcp.REQUEST_INTERRUPTED, msg: "tasks/result: " + ctx.Err().Error()}
	}
	res, err := s.callTool(ctx, "get_execution", map[string]any{"job_id": rec.id})
	if err != nil {
		return nil, err
	}
	return withMeta(res, related), nil
}

// withMeta returns a tool result as JSON with _meta fields added.
func withMeta(res *mcp.CallToolResult, meta map[string]any) map[string]any {
	b, _ := json.Marshal(res)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{}
	}
	mm, _ := m["_meta"].(map[string]any)
	if mm == nil {
		mm = map[string]any{}
	}
	for k, v := range meta {
		mm[k] = v
	}
	m["_meta"] = mm
	return m
}
