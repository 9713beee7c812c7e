package tools_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The door, tested from outside: a token limited to allowed/** calls every tool, reads every
// resource and template, asks every completion and prompt — all enumerated from the server, so
// a new one is covered without touching this test — naming a notebook and a text file under
// secret/ that another, unrestricted session has open and is working in (a run, a cursor, an
// announced activity, a collaborator in the room). Nothing about them may come back (no path,
// file id, room id, job id, cell id, collaborator, content), and nothing about them may change.

const (
	secretNB    = "secret/s.ipynb"
	secretText  = "secret/s.txt"
	secretCell  = "secret-cell-1"
	secretWords = "hush-hush"
	secretHuman = "sally-secret"
	allowedNB   = "allowed/a.ipynb"
)

// doorEnv is the tools over a fake server with an executor, served over HTTP with a full token
// and a token limited to allowed/**.
type doorEnv struct {
	*xenv
	url           string
	full, limited *client.Client
	markers       []string // what must never reach the limited token
	secretJob     string   // a run of the secret notebook, still going
	secretVersion string
	nbFileID      string
	textFileID    string
}

func newDoorEnv(t *testing.T) *doorEnv {
	t.Helper()
	cell := code(secretCell, "print:"+secretWords)
	e := newXEnv(t, []bridgetest.File{
		dirFile("allowed"), dirFile("secret"),
		nbFile(allowedNB, notebook(code("a1", "print:fine"), markdown("a2", "# Allowed"))),
		textFile("allowed/a.txt", "allowed text\n"),
		nbFile(secretNB, notebook(cell, code("secret-cell-2", "block:secret-gate"), markdown("secret-cell-3", "# "+secretWords))),
		textFile(secretText, secretWords+" text\n"),
	}, withApps(tools.AppsAlways)) // the MCP Apps' own tools and resources pass the door too
	sum := func(tok string) string { d := sha256.Sum256([]byte(tok)); return hex.EncodeToString(d[:]) }
	entries, err := auth.ParseTokens([]byte(`[
		{"name": "full", "token_sha256": "` + sum("full-token-0123456789") + `", "scopes": ["admin"]},
		{"name": "limited", "token_sha256": "` + sum("limited-token-0123456789") + `", "scopes": ["admin"], "paths": ["allowed/**"]}]`))
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
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = e.ts.Run(ctx) }() // subscriptions, resources/list entries
	t.Cleanup(func() { cancel(); <-runDone })
	d := &doorEnv{xenv: e, url: url}
	d.full = d.connect("full-token-0123456789")
	d.limited = d.connect("limited-token-0123456789")

	// The unrestricted session works in the secret documents.
	d.callOK(d.full, "create_notebook_session", map[string]any{"path": secretNB})
	d.callOK(d.full, "create_document_session", map[string]any{"path": secretText})
	d.callOK(d.full, "get_notebook", map[string]any{"format": "json", "path": allowedNB})
	d.callOK(d.full, "execute_notebook_cell", map[string]any{"path": secretNB, "cell_id": secretCell})
	run := d.callOK(d.full, "execute_notebook_cell", map[string]any{"path": secretNB, "cell_id": "secret-cell-2", "wait": false})
	d.secretJob = str(run["job_id"])
	d.callOK(d.full, "update_cursor_position", map[string]any{"document_path": secretNB, "cell_id": secretCell, "position": map[string]any{"line": 1, "column": 2}})
	d.callOK(d.full, "set_user_presence", map[string]any{"activity_type": "editing", "description": "tidying", "document_path": secretNB})
	d.callOK(d.full, "batch_insert_text", map[string]any{"path": secretText, "operations": []any{map[string]any{"position": -1, "text": "more " + secretWords + "\n"}}})
	hist := d.callOK(d.full, "get_document_history", map[string]any{"path": secretNB})
	d.secretVersion = str(asMap(t, asList(t, hist["versions"])[0])["version_id"])
	// A collaborator works in the secret notebook, and only there.
	peer := awPeer(t, e.env, secretNB, ydoc.KindNotebook, ydoc.AwarenessUser{Username: secretHuman, Name: secretHuman, DisplayName: secretHuman})
	if err := peer.SetCursors(ctxT(t), []bridge.CursorSpec{{CellID: secretCell, Anchor: 1, Head: 1}}); err != nil {
		t.Fatal(err)
	}
	awAwaitPeer(t, e.m.Get(secretNB, ydoc.KindNotebook), secretHuman)

	nbRoom, textRoom := e.m.Get(secretNB, ydoc.KindNotebook), e.m.Get(secretText, ydoc.KindText)
	d.nbFileID, d.textFileID = nbRoom.Info().FileID, textRoom.Info().FileID
	d.markers = []string{"secret", secretCell, "secret-cell-2", "secret-cell-3", secretWords, secretHuman, d.secretJob, d.secretVersion,
		d.nbFileID, d.textFileID, nbRoom.Info().RoomID, textRoom.Info().RoomID}
	return d
}

func (d *doorEnv) connect(tok string) *client.Client {
	t := d.t
	c, err := client.NewStreamableHttpClient(d.url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}),
		//lint:ignore SA1019 protocol 2025-11-25 clients take notifications on a GET stream
		transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	if _, err := c.Initialize(ctxT(t), init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func (d *doorEnv) call(c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	d.t.Helper()
	res, err := c.CallTool(ctxT(d.t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		d.t.Fatalf("%s: protocol error %v", name, err)
	}
	return res
}

func (d *doorEnv) callOK(c *client.Client, name string, args map[string]any) map[string]any {
	d.t.Helper()
	r := decodeResult(d.t, d.call(c, name, args))
	if r.IsError || r.Body == nil {
		d.t.Fatalf("%s(%s): %s", name, compact(args), r)
	}
	return r.Body
}

// leak returns the first secret marker in what came back, or "".
func (d *doorEnv) leak(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	for _, m := range d.markers {
		if m != "" && strings.Contains(s, m) {
			return m
		}
	}
	return ""
}

// awAwaitPeer waits until a room sees a collaborator.
func awAwaitPeer(t *testing.T, room *bridge.Room, username string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		peers, err := room.Peers(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.User != nil && p.User.Username == username && len(p.Cursors) > 0 {
				return
			}
		}
		time.Sleep(2 * time.Millisecond) // polling interval; the deadline bounds the wait
	}
	t.Fatalf("%s did not appear in %s", username, room.Path())
}

// secretState is everything about the secret documents that must not change.
type secretState struct {
	notebook, text  string
	nbOpen, txtOpen bool
	nbStatus        bridge.Status
	kernel          [3]int // interrupts, restarts, executions
	job             string // the running job's status
	secretDir       []string
}

func (d *doorEnv) state() secretState {
	t := d.t
	var st secretState
	st.notebook, st.text = d.snapshot(secretNB), d.serverText(secretText)
	if r := d.m.Get(secretNB, ydoc.KindNotebook); r != nil {
		st.nbOpen, st.nbStatus = true, r.Info().Status
	}
	st.txtOpen = d.m.Get(secretText, ydoc.KindText) != nil
	k := d.ks.KernelFor(secretNB)
	st.kernel = [3]int{d.ks.Interrupts(k), d.ks.Restarts(k), d.ks.Executions(k)}
	j, err := d.x.Job(d.secretJob)
	if err != nil {
		t.Fatalf("secret job: %v", err)
	}
	st.job = string(j.View().Status)
	entries, err := d.srv.List(ctxT(t), "secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		st.secretDir = append(st.secretDir, e.Path)
	}
	sort.Strings(st.secretDir)
	return st
}

// argsFor are the calls a tool gets: every argument that can name a document names a secret
// one (the notebook, then the text file), and once with only what is required (a room-wide
// answer, for tools whose document is optional).
func (d *doorEnv) argsFor(tool mcp.Tool, example map[string]any) []map[string]any {
	var wire struct {
		Schema map[string]any `json:"inputSchema"`
	}
	b, _ := json.Marshal(tool)
	_ = json.Unmarshal(b, &wire)
	schema := wire.Schema
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 && tool.Name != "set_user_presence" {
		d.t.Fatalf("%s: no properties in the listed schema %s", tool.Name, b)
	}
	var required []string
	for _, r := range asListOr(schema["required"]) {
		required = append(required, fmt.Sprint(r))
	}
	secretFor := func(name string, kind ydoc.Kind, def any) (any, bool) {
		p, session, file := secretNB, "notebook:"+secretNB, d.nbFileID
		if kind == ydoc.KindText {
			p, session, file = secretText, "editor:"+secretText, d.textFileID
		}
		switch name {
		case "path", "document_path":
			return p, true
		case "session_id":
			return session, true
		case "file_id":
			return file, true
		case "job_id":
			return d.secretJob, true
		case "fork_id":
			return "fork-of-secret", true
		case "cell_id", "after_cell_id", "before_cell_id", "suggestion_for_cell":
			return secretCell, true
		case "cell_ids":
			return []any{secretCell}, true
		case "version_id":
			return d.secretVersion, true
		}
		// Any other string argument whose example is a path names a document too.
		if s, ok := def.(string); ok && (strings.Contains(s, "/") || regexp.MustCompile(`\.(ipynb|md|py|txt)$`).MatchString(s)) {
			return p, true
		}
		return nil, false
	}
	var out []map[string]any
	for _, kind := range []ydoc.Kind{ydoc.KindNotebook, ydoc.KindText} {
		args := map[string]any{}
		named := false
		for name, ps := range props {
			v, ok := secretFor(name, kind, example[name])
			switch {
			case ok:
				args[name], named = v, true
			case slices.Contains(required, name):
				if ex, has := example[name]; has {
					args[name] = ex
				} else {
					args[name] = synth(asMapOr(ps))
				}
			}
		}
		if named {
			out = append(out, args)
		}
	}
	bare := map[string]any{}
	for _, name := range required {
		if v, ok := example[name]; ok {
			bare[name] = v
		} else {
			bare[name] = synth(asMapOr(props[name]))
		}
	}
	return append(out, bare)
}

// namesDocument reports whether a call names a secret document in an argument that names a
// document (not in a filter).
func namesDocument(args map[string]any) bool {
	for _, name := range []string{"path", "document_path", "session_id", "job_id", "file_id"} {
		if v, ok := args[name].(string); ok && strings.Contains(v, "secret") || name == "job_id" && args[name] != nil {
			return true
		}
	}
	return false
}

// synth makes a value a schema accepts.
func synth(s map[string]any) any {
	if e := asListOr(s["enum"]); len(e) > 0 {
		return e[0]
	}
	switch s["type"] {
	case "string":
		return "x"
	case "integer", "number":
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "array":
		return []any{synth(asMapOr(s["items"]))}
	case "object":
		o := map[string]any{}
		props := asMapOr(s["properties"])
		for _, r := range asListOr(s["required"]) {
			o[fmt.Sprint(r)] = synth(asMapOr(props[fmt.Sprint(r)]))
		}
		return o
	}
	return nil
}

func asMapOr(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asListOr(v any) []any         { l, _ := v.([]any); return l }

func TestDoorEveryToolRefusesDocumentsOutsideTheTokensPaths(t *testing.T) {
	d := newDoorEnv(t)
	before := d.state()
	list, err := d.full.ListTools(ctxT(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) < 40 {
		t.Fatalf("only %d tools listed", len(list.Tools))
	}
	for _, tool := range list.Tools {
		var op struct {
			Example map[string]any `json:"example"`
		}
		text := d.readText(d.full, "jupyter://operations/"+tool.Name)
		if err := json.Unmarshal([]byte(text), &op); err != nil {
			t.Fatalf("%s: operation resource: %v", tool.Name, err)
		}
		for _, args := range d.argsFor(tool, op.Example) {
			res, err := d.limited.CallTool(ctxT(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool.Name, Arguments: args}})
			if err != nil {
				t.Errorf("%s(%s): protocol error %v", tool.Name, compact(args), err)
				continue
			}
			if m := d.leak(res); m != "" {
				t.Errorf("%s(%s) answered about %q: %s", tool.Name, compact(args), m, compact(res))
			}
			// An argument that names a document must be refused (a filter, such as a listing's
			// path prefix, may answer: with nothing).
			if namesDocument(args) && !res.IsError {
				t.Errorf("%s(%s): a call naming a secret document was not refused: %s", tool.Name, compact(args), compact(res))
			}
		}
	}
	if after := d.state(); !jsonEqualT(before, after) {
		t.Errorf("the secret documents changed:\nbefore %+v\nafter  %+v", before, after)
	}
	// The unrestricted session still works in them.
	d.callOK(d.full, "get_notebook", map[string]any{"format": "json", "path": secretNB})
	d.ks.Release("secret-gate")
}

func TestDoorEveryResourceTemplateCompletionAndPrompt(t *testing.T) {
	d := newDoorEnv(t)
	before := d.state()
	ctx := ctxT(t)
	// resources/list: the per-room entries of secret documents are left out.
	full, err := d.full.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d.leak(full) == "" {
		t.Fatalf("the unrestricted resources/list shows no secret room: the test sees nothing to hide: %s", compact(full))
	}
	limited, err := d.limited.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m := d.leak(limited); m != "" {
		t.Errorf("resources/list shows %q: %s", m, compact(limited))
	}
	// Every listed resource, read by the limited token.
	for _, r := range full.Resources {
		if strings.HasPrefix(r.URI, "ui://") {
			// An MCP App's HTML is the same static page for everyone (its bundle happens to hold
			// the word "secret", of OAuth client secrets): it shows no document.
			a, err := d.readAs(d.limited, r.URI)
			if b, err2 := d.readAs(d.full, r.URI); err != nil || err2 != nil || compact(a) != compact(b) {
				t.Errorf("%s reads differently for the limited token (%v, %v)", r.URI, err, err2)
			}
			continue
		}
		if res, err := d.readAs(d.limited, r.URI); err == nil {
			if m := d.leak(res); m != "" {
				t.Errorf("%s shows %q", r.URI, m)
			}
		} else if m := d.leak(err.Error()); m != "" && !strings.Contains(r.URI, m) {
			t.Errorf("%s: the refusal shows %q: %v", r.URI, m, err)
		}
	}
	// Every template, filled with the secret documents' ids.
	templates, err := d.full.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`\{([a-z_]+)\}`)
	for _, tpl := range templates.ResourceTemplates {
		for _, file := range []string{d.nbFileID, d.textFileID} {
			values := map[string]string{"file_id": file, "cell_id": secretCell, "job_id": d.secretJob, "name": "analysis", "mode": "research", "operation": "get_notebook"}
			uri := vars.ReplaceAllStringFunc(tpl.URITemplate.Raw(), func(v string) string { return values[strings.Trim(v, "{}")] })
			res, err := d.readAs(d.limited, uri)
			if err == nil {
				if m := d.leak(res); m != "" {
					t.Errorf("%s shows %q", uri, m)
				}
				continue
			}
			if m := d.leak(strings.ReplaceAll(err.Error(), uri, "")); m != "" {
				t.Errorf("%s: the refusal shows %q: %v", uri, m, err)
			}
		}
		// Completions of every variable of every template.
		for _, v := range vars.FindAllStringSubmatch(tpl.URITemplate.Raw(), -1) {
			for _, file := range []string{d.nbFileID, d.textFileID} {
				req := mcp.CompleteRequest{}
				req.Params.Ref = mcp.ResourceReference{Type: "ref/resource", URI: tpl.URITemplate.Raw()}
				req.Params.Argument.Name = v[1]
				req.Params.Context.Arguments = map[string]string{"file_id": file}
				res, err := d.limited.Complete(ctx, req)
				if err == nil {
					if m := d.leak(res); m != "" {
						t.Errorf("completing %s of %s shows %q: %v", v[1], tpl.URITemplate.Raw(), m, res.Completion.Values)
					}
				} else if m := d.leak(err.Error()); m != "" {
					t.Errorf("completing %s of %s: the refusal shows %q", v[1], tpl.URITemplate.Raw(), m)
				}
			}
		}
	}
	// Every prompt, naming the secret documents, and the completions of its arguments.
	prompts, err := d.full.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts.Prompts {
		for _, target := range []string{secretNB, secretText} {
			args := map[string]string{}
			for _, a := range p.Arguments {
				args[a.Name] = map[string]string{"path": target, "mode": "research", "extract_type": "all", "since_version": d.secretVersion, "task": "summarise"}[a.Name]
				req := mcp.CompleteRequest{}
				req.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: p.Name}
				req.Params.Argument.Name, req.Params.Argument.Value = a.Name, ""
				if res, err := d.limited.Complete(ctx, req); err == nil {
					if m := d.leak(res); m != "" {
						t.Errorf("completing %s of prompt %s shows %q: %v", a.Name, p.Name, m, res.Completion.Values)
					}
				}
			}
			req := mcp.GetPromptRequest{}
			req.Params.Name, req.Params.Arguments = p.Name, args
			res, err := d.limited.GetPrompt(ctx, req)
			if err == nil {
				if m := d.leak(res); m != "" && slices.ContainsFunc(p.Arguments, func(a mcp.PromptArgument) bool { return a.Name == "path" }) {
					t.Errorf("prompt %s(%s) shows %q", p.Name, target, m)
				}
				continue
			}
			if m := d.leak(strings.ReplaceAll(err.Error(), target, "")); m != "" {
				t.Errorf("prompt %s(%s): the refusal shows %q: %v", p.Name, target, m, err)
			}
		}
	}
	if after := d.state(); !jsonEqualT(before, after) {
		t.Errorf("the secret documents changed:\nbefore %+v\nafter  %+v", before, after)
	}
	d.ks.Release("secret-gate")
}

// A room stays open while another MCP session uses it: leave_session ends only the caller's use.
func TestDoorLeaveSessionIsPerClient(t *testing.T) {
	d := newDoorEnv(t)
	body := d.callOK(d.limited, "leave_session", map[string]any{"session_id": "notebook:" + allowedNB})
	if body["left"] != false || !strings.Contains(str(body["note"]), "was not using") {
		t.Errorf("leave by a client that never used the room: %s", compact(body))
	}
	d.callOK(d.limited, "join_session", map[string]any{"session_id": "notebook:" + allowedNB})
	body = d.callOK(d.limited, "leave_session", map[string]any{"session_id": "notebook:" + allowedNB})
	if body["left"] != true || !strings.Contains(str(body["note"]), "stays open") {
		t.Errorf("leave while another client uses the room: %s", compact(body))
	}
	if d.m.Get(allowedNB, ydoc.KindNotebook) == nil {
		t.Fatal("the room closed under the other client")
	}
	body = d.callOK(d.full, "leave_session", map[string]any{"session_id": "notebook:" + allowedNB})
	if body["left"] != true || body["note"] != nil {
		t.Errorf("the last client's leave: %s", compact(body))
	}
	if d.m.Get(allowedNB, ydoc.KindNotebook) != nil {
		t.Error("the room stayed open after its last client left")
	}
	d.ks.Release("secret-gate")
}

// Subscriptions are read again as their subscriber: a change to a secret document does not
// notify a limited subscriber of the listing, nor reach it.
func TestDoorSubscriptionsAreReadAsTheSubscriber(t *testing.T) {
	d := newDoorEnv(t)
	var got []string
	notified := make(chan string, 16)
	d.limited.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationResourceUpdated {
			notified <- fmt.Sprint(n.Params.AdditionalFields["uri"])
		}
	})
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = "jupyter://notebooks"
	//lint:ignore SA1019 protocol 2025-11-25 clients subscribe this way
	if err := d.limited.Subscribe(ctxT(t), sub); err != nil {
		t.Fatal(err)
	}
	// A secret change that changes the full listing (a new cell: the cell count), then an
	// allowed one: the limited subscriber hears of the second only.
	d.callOK(d.full, "batch_insert_notebook_cells", map[string]any{"path": secretNB, "cells": []any{map[string]any{"content": "x = 1"}}, "exec": false})
	time.Sleep(1500 * time.Millisecond) // longer than the debounce (subscribeMaxDelay): a notification would have come
	select {
	case uri := <-notified:
		got = append(got, uri)
	default:
	}
	if len(got) > 0 {
		t.Errorf("a change to a secret document notified the limited subscriber of %v", got)
	}
	d.callOK(d.full, "batch_insert_notebook_cells", map[string]any{"path": allowedNB, "cells": []any{map[string]any{"content": "y = 1"}}, "exec": false})
	select {
	case <-notified:
	case <-time.After(waitLimit):
		t.Error("a change to an allowed document did not notify the limited subscriber")
	}
	d.ks.Release("secret-gate")
}

func (d *doorEnv) readAs(c *client.Client, uri string) (*mcp.ReadResourceResult, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	return c.ReadResource(ctxT(d.t), req)
}

func (d *doorEnv) readText(c *client.Client, uri string) string {
	d.t.Helper()
	res, err := d.readAs(c, uri)
	if err != nil {
		d.t.Fatalf("read %s: %v", uri, err)
	}
	return res.Contents[0].(mcp.TextResourceContents).Text
}

func jsonEqualT(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestDoorIsTheOnlyWayToDocuments checks the package's source: the room manager's document
// methods and the executor's job lookups are called in door.go only, so a new tool cannot reach
// a document around the check.
func TestDoorIsTheOnlyWayToDocuments(t *testing.T) {
	guarded := map[string]bool{
		"Open": true, "OpenFork": true, "Create": true, "CreateFork": true, "CloseFork": true, "Forks": true,
		"Get": true, "GetFork": true, "Rooms": true, "List": true, "Stat": true, "FileID": true, "FileIDs": true,
		"PathOf": true, "GlobalPeers": true, "CloseRoom": true, "Job": true, "JobIDs": true,
	}
	// Bookkeeping that shows a caller nothing of a document: subscriptions follow room events and
	// keep subscribed documents joined (what they read for a subscriber goes through the door, as
	// that subscriber), metrics and readiness count rooms.
	allowedUses := map[string]map[string]bool{
		"door.go":          nil, // every guarded method
		"subscriptions.go": {"Get": true, "Rooms": true, "Open": true, "PathOf": true, "Job": true},
		"health.go":        {"Rooms": true},
		"metrics.go":       {"Rooms": true},
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !guarded[sel.Sel.Name] {
				return true
			}
			inner, ok := sel.X.(*ast.SelectorExpr)
			if !ok || (inner.Sel.Name != "Manager" && inner.Sel.Name != "Executor") {
				return true
			}
			uses, listed := allowedUses[f]
			if listed && (uses == nil || uses[sel.Sel.Name]) {
				return true
			}
			t.Errorf("%s: %s.%s reaches documents around the door (door.go)", fset.Position(sel.Pos()), inner.Sel.Name, sel.Sel.Name)
			return true
		})
	}
}
