//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// sdkTask is an MCP task as the TypeScript SDK returns it.
type sdkTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	PollInterval  int    `json:"pollInterval"`
}

// The official TypeScript client's task support against the binary over Streamable HTTP, with a
// real kernel: a cell run started as a task is polled to completion and its result read; another
// is cancelled while it runs, and get_execution sees that same run cancelled.
func TestExecTasksWithTypeScriptClient(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sp, err := StartHTTPSidecar(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	c, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var conn struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer " + sp.Token}}, &conn); err != nil {
		t.Fatal(err)
	}
	if conn.Capabilities["tasks"] == nil {
		t.Fatalf("the server does not advertise tasks: %v", conn.Capabilities)
	}
	if _, err := c.CallTool(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "exec": false, "start_position": 0, "cells": []any{
		map[string]any{"id": "short", "content": "import time\ntime.sleep(1)\nprint('short done', flush=True)"},
		map[string]any{"id": "long", "content": "import time\nprint('long started', flush=True)\ntime.sleep(120)\nprint('never')"},
	}}); err != nil {
		t.Fatal(err)
	}

	start := func(cell string) sdkTask {
		t.Helper()
		var r struct {
			Task sdkTask `json:"task"`
		}
		if err := c.Call(ctx, "callTask", map[string]any{"name": "execute_notebook_cell", "arguments": map[string]any{"path": name, "cell_id": cell}}, &r); err != nil {
			t.Fatal(err)
		}
		if r.Task.TaskID == "" || r.Task.Status != "working" || r.Task.PollInterval <= 0 {
			t.Fatalf("created task %+v", r.Task)
		}
		return r.Task
	}
	get := func(id string) sdkTask {
		t.Helper()
		var r struct {
			Task sdkTask `json:"task"`
		}
		if err := c.Call(ctx, "getTask", map[string]any{"taskId": id}, &r); err != nil {
			t.Fatal(err)
		}
		return r.Task
	}
	poll := func(id string, until func(sdkTask) bool, within time.Duration) sdkTask {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			tk := get(id)
			if until(tk) {
				return tk
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s: not there within %v; last %+v", id, within, tk)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Polled to completion.
	short := start("short")
	working := poll(short.TaskID, func(tk sdkTask) bool {
		return tk.Status != "working" || strings.Contains(tk.StatusMessage, "running cell short")
	}, 60*time.Second)
	if working.Status == "working" {
		t.Logf("while running: %q", working.StatusMessage)
	}
	done := poll(short.TaskID, func(tk sdkTask) bool { return tk.Status != "working" }, 60*time.Second)
	if done.Status != "completed" {
		t.Fatalf("the short run ended %+v", done)
	}
	var res struct {
		Result ToolResult `json:"result"`
	}
	if err := c.Call(ctx, "taskResult", map[string]any{"taskId": short.TaskID}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Result.IsError || !strings.Contains(res.Result.Text(), "short done") || res.Result.StructuredContent["job_id"] != short.TaskID {
		t.Fatalf("tasks/result: %s", res.Result.Text())
	}

	// Cancelled while it runs: the task, and get_execution for the same job.
	long := start("long")
	poll(long.TaskID, func(tk sdkTask) bool { return strings.Contains(tk.StatusMessage, "running cell long") }, 60*time.Second)
	ex, err := c.CallTool(ctx, "get_execution", map[string]any{"job_id": long.TaskID})
	for err == nil && !strings.Contains(ex.Text(), "long started") {
		time.Sleep(200 * time.Millisecond)
		ex, err = c.CallTool(ctx, "get_execution", map[string]any{"job_id": long.TaskID})
	}
	if err != nil {
		t.Fatal(err)
	}
	var cancelled struct {
		Task sdkTask `json:"task"`
	}
	if err := c.Call(ctx, "cancelTask", map[string]any{"taskId": long.TaskID}, &cancelled); err != nil {
		t.Fatal(err)
	}
	if cancelled.Task.Status != "cancelled" {
		t.Errorf("tasks/cancel answered %+v", cancelled.Task)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.Call(cctx, "taskResult", map[string]any{"taskId": long.TaskID}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Result.StructuredContent["status"] != "cancelled" || strings.Contains(res.Result.Text(), `"text":"never`) {
		t.Errorf("the cancelled run's result: %s", res.Result.Text())
	}
	ex, err = c.CallTool(ctx, "get_execution", map[string]any{"job_id": long.TaskID})
	if err != nil || ex.StructuredContent["status"] != "cancelled" {
		t.Errorf("get_execution of the cancelled task's job: %v %s", err, ex.Text())
	}
}
