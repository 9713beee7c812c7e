package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
)

// logSink collects notifications/message.
type logSink struct {
	mu   sync.Mutex
	msgs []map[string]any // {"level", "logger", "data"}
}

func (l *logSink) add(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationMessage) {
		return
	}
	// In process the fields arrive as Go values (mcp.LoggingLevel, ...): read them as JSON.
	var m map[string]any
	b, _ := json.Marshal(n.Params.AdditionalFields)
	_ = json.Unmarshal(b, &m)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, m)
}

// await waits for a message whose level, logger and message text match.
func (l *logSink) await(t *testing.T, level, logger, text string) map[string]any {
	t.Helper()
	var found map[string]any
	testutil.Poll(t, fmt.Sprintf("a %s message from %s containing %q", level, logger, text), func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, m := range l.msgs {
			d, _ := m["data"].(map[string]any)
			msg, _ := d["message"].(string)
			if m["level"] == level && m["logger"] == logger && strings.Contains(msg, text) {
				found = d
				return true, ""
			}
		}
		return false, fmt.Sprint(l.msgs)
	})
	return found
}

func (l *logSink) levels() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, m := range l.msgs {
		out[m["level"].(string)]++
	}
	return out
}

// legacyClient connects an in-process 2025-11-25 client whose session registers with ctx (and
// so with the identity in it).
func legacyClient(t *testing.T, e *env, ctx context.Context, sink *logSink) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(e.ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.OnNotification(sink.add)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "logging-test", Version: "1"}
	if _, err := c.Initialize(testutil.Context(t), init); err != nil {
		t.Fatal(err)
	}
	return c
}

// The agent hears, at the level it asked for, that a room was lost and came back, that a kernel
// restarted (a bridge.Notice from an engine), and nothing below its level.
func TestLogMessagesFollowRoomsAndNotices(t *testing.T) {
	e := newEnv(t, nil)
	sink := &logSink{}
	// logging/setLevel is a 2025-11-25 session's (in 2026-07-28 the level comes with each
	// request, and nothing is sent outside one).
	c := legacyClient(t, e, testutil.Context(t), sink)
	// A token that may only see other/**: it hears nothing about nb.ipynb.
	other, err := auth.NewIdentity("other", []auth.Scope{auth.ScopeRead}, []string{"other/**"})
	if err != nil {
		t.Fatal(err)
	}
	otherSink := &logSink{}
	oc := legacyClient(t, e, auth.WithIdentity(testutil.Context(t), other), otherSink)
	//lint:ignore SA1019 protocol 2025-11-25 clients set their level this way
	if err := oc.SetLevel(testutil.Context(t), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.ts.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	//lint:ignore SA1019 protocol 2025-11-25 clients set their level this way
	if err := c.SetLevel(testutil.Context(t), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	e.ok("get_notebook", map[string]any{"format": "json", "path": bridgetest.NotebookPath})

	e.srv.Down()
	lost := sink.await(t, "warning", "room", "lost the connection to "+bridgetest.NotebookPath)
	if lost["document"] != bridgetest.NotebookPath || lost["event"] != "disconnected" {
		t.Errorf("lost: %v", lost)
	}
	e.srv.Up()
	back := sink.await(t, "info", "room", bridgetest.NotebookPath+" is back in sync")
	if _, ok := back["down_seconds"].(float64); !ok {
		t.Errorf("back: %v", back)
	}

	e.m.Notify(bridge.Notice{Level: bridge.NoticeNotice, Topic: bridge.TopicKernel, Kind: "restarted", Path: bridgetest.NotebookPath, DocKind: "notebook",
		Message: "the kernel restarted", Data: map[string]any{"kernel_id": "k1"}})
	k := sink.await(t, "notice", "kernel", "the kernel restarted")
	if k["kernel_id"] != "k1" || k["document"] != bridgetest.NotebookPath || k["event"] != "restarted" || k["kind"] != "notebook" {
		t.Errorf("kernel notice: %v", k)
	}
	// "joined" is debug: below info, never sent.
	if n := sink.levels()["debug"]; n != 0 {
		t.Errorf("%d debug messages sent to a session at info", n)
	}

	// The restricted session heard none of it, but hears what concerns no document.
	e.m.Notify(bridge.Notice{Level: bridge.NoticeWarning, Topic: "presence", Message: "about no document"})
	otherSink.await(t, "warning", "presence", "about no document")
	otherSink.mu.Lock()
	for _, m := range otherSink.msgs {
		if d, _ := m["data"].(map[string]any); d["document"] != nil {
			t.Errorf("a session restricted to other/** heard about %v: %v", d["document"], m)
		}
	}
	otherSink.mu.Unlock()

	// At error, a warning is not sent.
	//lint:ignore SA1019 protocol 2025-11-25 clients set their level this way
	if err := c.SetLevel(testutil.Context(t), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelError}}); err != nil {
		t.Fatal(err)
	}
	before := sink.levels()["warning"]
	e.m.Notify(bridge.Notice{Level: bridge.NoticeWarning, Topic: bridge.TopicSave, Path: bridgetest.NotebookPath, Message: "a warning below error"})
	e.m.Notify(bridge.Notice{Level: bridge.NoticeError, Topic: bridge.TopicSave, Path: bridgetest.NotebookPath, Message: "save failed"})
	sink.await(t, "error", "save", "save failed")
	if after := sink.levels()["warning"]; after != before {
		t.Errorf("a warning reached a session at level error")
	}
}
