//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// End to end: the official MCP TypeScript SDK client drives the real binary (stdio and
// Streamable HTTP) attached to the real jupyter-server, while the independent Yjs peer plays a
// human editing the same notebook; the peer and the file on disk must agree with every edit.

func TestMCPEndToEnd(t *testing.T) {
	bin, err := BuildSidecar()
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			ctx := ctxT(t, 3*time.Minute)
			name := uniqueName(t, ".ipynb")
			if err := shared.WriteFile(name, fixture(t, "jupyterlab--example.ipynb")); err != nil {
				t.Fatal(err)
			}
			c, err := StartMCPClient()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			var sidecarLog func() string
			switch transport {
			case "stdio":
				err = c.Call(ctx, "connect", map[string]any{"transport": "stdio", "command": bin,
					"env": map[string]string{"JUPYTER_URL": shared.URL, "JUPYTER_TOKEN": shared.Token, "LOG_LEVEL": "debug"}}, nil)
				sidecarLog = func() string { return "" }
			default:
				sp, err := StartHTTPSidecar(ctx, shared)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sp.Stop)
				sidecarLog = sp.Log.String
				err = c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer " + sp.Token}}, nil)
				if err == nil {
					t.Cleanup(func() {
						if strings.Contains(sp.Log.String(), shared.Token) || strings.Contains(sp.Log.String(), sp.Token) {
							t.Error("a token appears in the sidecar's log")
						}
					})
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			runScenario(t, ctx, c, name, sidecarLog)
		})
	}
}

func runScenario(t *testing.T, ctx context.Context, c *MCPClient, name string, sidecarLog func() string) {
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := c.CallTool(ctx, tool, args)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, tail(sidecarLog(), 3000))
		}
		if res.IsError {
			t.Fatalf("%s failed: %s", tool, res.Text())
		}
		if len(res.Embedded()) != 0 {
			t.Errorf("%s: a successful call embedded the schema without includeSchema", tool)
		}
		if res.JSON() == nil { // a text rendering (get_notebook's default): structuredContent carries it
			if res.StructuredContent["content"] != res.Text() {
				t.Errorf("%s: structuredContent does not carry the text", tool)
			}
			return res.StructuredContent
		}
		if !jsonEq(res.StructuredContent, res.JSON()) {
			t.Errorf("%s: structuredContent differs from the text content", tool)
		}
		return res.JSON()
	}
	calls := 0 // the loop's calls: read, edit, run, see outputs and who is there
	loop := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		calls++
		return call(tool, args)
	}

	var tools struct {
		Tools []struct {
			Name        string         `json:"name"`
			Annotations map[string]any `json:"annotations"`
		} `json:"tools"`
	}
	if err := c.Call(ctx, "listTools", nil, &tools); err != nil {
		t.Fatal(err)
	}
	// The default toolset: the daily loop, and the discovery tool for the rest.
	var listed []string
	for _, tl := range tools.Tools {
		listed = append(listed, tl.Name)
	}
	for _, want := range []string{"get_notebook", "batch_insert_notebook_cells", "batch_update_notebook_cells", "execute_notebook_cell", "get_online_users", "enable_toolset"} {
		if !slices.Contains(listed, want) {
			t.Errorf("the default tools/list lacks %s: %v", want, listed)
		}
	}
	if len(tools.Tools) > 20 || slices.Contains(listed, "create_document_session") {
		t.Errorf("default tools/list: %d tools %v", len(tools.Tools), listed)
	}
	for _, tl := range tools.Tools {
		for _, hint := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
			if _, ok := tl.Annotations[hint]; !ok {
				t.Errorf("tool %s: annotation %s not set", tl.Name, hint)
			}
		}
	}

	// The loop, with the default toolset and get_notebook's default (text) format: find the
	// notebook, read it (cells by handle), insert cells by handle (the code runs, its output
	// comes back), see the human's edits and who is there in a read, edit with guards.
	list := loop("list_notebooks", map[string]any{"path_prefix": name})
	if nbs, _ := list["notebooks"].([]any); len(nbs) != 1 {
		t.Fatalf("list_notebooks(%s) = %v", name, list)
	}
	nb := loop("get_notebook", map[string]any{"path": name})
	for nb["from_file"] != nil && strings.Contains(nb["content"].(string), "read again to edit") {
		// The room was still loading and this notebook's cells have no ids in the file: as the
		// read says, an agent reads again to get the handles it edits by. (Not counted as a call
		// of the loop: it depends on how fast the server loads the room, not on the tools.)
		nb = call("get_notebook", map[string]any{"path": name})
	}
	cells := textCells(t, nb)
	if len(cells) == 0 {
		t.Fatalf("get_notebook gave no cells: %v", nb)
	}
	firstHandle := cells[0].handle

	// A human is in the notebook too.
	p := newPeer(t)
	if err := p.Connect(ctx, shared, name, "notebook"); err != nil {
		t.Fatal(err)
	}
	peerHas := peerIDs(mustSnapshot(t, ctx, p))
	if len(peerHas) != len(cells) {
		t.Fatalf("peer has %d cells, get_notebook %d", len(peerHas), len(cells))
	}
	for i, c := range cells {
		if !strings.HasPrefix(peerHas[i], c.handle) || len(c.handle) >= len(peerHas[i]) {
			t.Fatalf("cell %d: handle %q for the peer's id %q", i, c.handle, peerHas[i])
		}
	}

	ins := loop("batch_insert_notebook_cells", map[string]any{"path": name, "after_cell_id": firstHandle, "cells": []any{
		map[string]any{"id": "agent-md", "cell_type": "markdown", "content": "## Added by the agent\n\nfirst line\nsecond line\n"},
		map[string]any{"id": "agent-code", "content": "answer = 42\nprint(answer)\n", "metadata": map[string]any{"tags": []any{"agent"}}},
	}})
	if v := ins["version"]; v == nb["version"] || v == "" {
		t.Errorf("insert version %v, before %v", v, nb["version"])
	}
	// The inserted code cell ran (exec defaults to true) and its output came back.
	if run, _ := ins["execution"].(map[string]any); !strings.Contains(fmt.Sprint(run["cells"]), "42") || run["status"] != "completed" {
		t.Errorf("the inserted code cell's run: %v", ins["execution"])
	}
	snap, err := p.WaitFor(ctx, `nb.cells[1].id === "agent-md" && nb.cells[2].id === "agent-code"`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Cells[2].Types["source"] != "Text" || snap.Cells[2].Metadata["tags"] == nil {
		t.Errorf("peer sees %+v", snap.Cells[2])
	}

	// The human types in the markdown cell while the agent edits the code cell.
	if err := p.Transact(ctx, `cells.get(1).get('source').insert(0, 'HUMAN: ')`, nil); err != nil {
		t.Fatal(err)
	}
	loop("batch_update_notebook_cells", map[string]any{"path": name, "updates": []any{
		map[string]any{"cell_id": "agent-code", "content": "answer = 42\nprint(answer * 2)\n"},
	}})
	// And edits the same cell as the agent: both survive (minimal diff on the agent's side).
	if err := p.Transact(ctx, `cells.get(1).get('source').insert(cells.get(1).get('source').length, 'human tail\n')`, nil); err != nil {
		t.Fatal(err)
	}
	// Read the cell once the sidecar has the human's text (it travels through the server): the
	// read says who is there, and gives the source hash asked for.
	var read map[string]any
	var md textCell
	calls++ // one read; the repeats only wait for the human's edit to arrive
	for deadline := time.Now().Add(10 * time.Second); ; {
		read = call("get_notebook", map[string]any{"path": name, "cell_range": map[string]any{"start": 1, "end": 1}, "hashes": true})
		md = textCells(t, read)[0]
		if strings.HasSuffix(md.source, "human tail\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar never saw the human's edit: %q", md.source)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if head := strings.SplitN(read["content"].(string), "\n", 2)[0]; !strings.Contains(head, "· with Independent Peer") {
		t.Errorf("the read does not say the human is there: %q", head)
	}
	if md.handle != "agent-m" || md.hash == "" {
		t.Errorf("cell 1 read as %+v", md)
	}
	loop("batch_update_notebook_cells", map[string]any{"path": name, "updates": []any{map[string]any{
		"cell_id": md.handle, "content": strings.Replace(md.source, "first line", "first line (edited by the agent)", 1),
		"expected_source_hash": md.hash,
	}}})
	snap, err = p.WaitFor(ctx, `nb.cells[1].source.includes("(edited by the agent)") && nb.cells[2].source.includes("answer * 2")`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if s := snap.Cells[1].Source; !strings.HasPrefix(s, "HUMAN: ## Added") || !strings.HasSuffix(s, "human tail\n") {
		t.Errorf("the human's text did not survive the agent's edit: %q", s)
	}

	// A stale expected_version fails as a conflict naming the cell, and changes nothing.
	if err := p.Transact(ctx, `cells.get(2).get('source').insert(0, '# human was here\n')`, nil); err != nil {
		t.Fatal(err)
	}
	sidecarSees(t, call, name, func(cells []textCell) bool {
		return strings.HasPrefix(cells[2].source, "# human was here")
	})
	res, err := c.CallTool(ctx, "batch_update_notebook_cells", map[string]any{"path": name, "expected_version": read["version"],
		"updates": []any{map[string]any{"cell_id": "agent-code", "content": "overwritten"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text(), "conflict") || !strings.Contains(res.Text(), "agent-code") {
		t.Errorf("stale expected_version: %s", res.Text())
	}
	if len(res.Embedded()) != 1 {
		t.Errorf("a failed call did not embed the schema: %v", res.Content)
	}

	loop("move_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"agent-c"}, "to_index": 0})
	loop("batch_delete_notebook_cells", map[string]any{"path": name, "cell_ids": []any{"agent-md"}})
	// As many calls as the loop took with every tool listed and the JSON format: the default
	// toolset and format need no extra call (the handles and hashes come with the reads).
	if calls != 8 {
		t.Errorf("the loop took %d calls, want 8", calls)
	}
	final, err := p.WaitFor(ctx, `nb.cells[0].id === "agent-code" && !nb.cells.some(c => c.id === "agent-md")`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if final.Cells[0].Metadata["tags"] == nil {
		t.Errorf("move lost the cell's metadata: %+v", final.Cells[0])
	}
	// nbformat 4.0 files keep no cell ids on disk (jupyter_ydoc drops them below 4.5): compare
	// sources and order.
	disk := waitDisk(t, shared, name, "the agent's and the human's edits", func(d ydoc.Notebook) bool {
		return slices.Equal(sources(d), peerSources(final))
	})
	if len(disk.Cells) != len(cells)+1 {
		t.Errorf("disk has %d cells, want %d", len(disk.Cells), len(cells)+1)
	}

	// Schemas on demand.
	res, err = c.CallTool(ctx, "get_notebook", map[string]any{"path": name, "format": "outline", "includeSchema": true})
	if err != nil || res.IsError {
		t.Fatalf("outline: %v %s", err, res.Text())
	}
	if emb := res.Embedded(); len(emb) != 1 || emb[0]["resource"].(map[string]any)["uri"] != "jupyter://operations/get_notebook" {
		t.Errorf("includeSchema did not embed the schema: %v", res.Content)
	} else if ann := emb[0]["annotations"].(map[string]any); ann["priority"] != 0.5 || fmt.Sprint(ann["audience"]) != "[assistant]" {
		t.Errorf("embedded schema annotations %v", ann)
	}
	res, err = c.CallTool(ctx, "batch_insert_notebook_cells", map[string]any{"path": name, "cells": []any{map[string]any{"cell_type": "python"}}})
	if err != nil {
		t.Fatal(err)
	}
	var fail struct {
		Success *bool `json:"success"`
		Details []struct {
			Path    []any  `json:"path"`
			Message string `json:"message"`
		} `json:"details"`
	}
	_ = json.Unmarshal([]byte(res.Text()), &fail)
	if !res.IsError || fail.Success == nil || *fail.Success || len(fail.Details) != 1 ||
		fmt.Sprint(fail.Details[0].Path) != "[cells 0 cell_type]" || !strings.Contains(fail.Details[0].Message, "code, markdown, raw") {
		t.Errorf("validation failure: %s", res.Text())
	}

	var resources struct {
		Resources []map[string]any `json:"resources"`
	}
	var templates struct {
		Templates []map[string]any `json:"templates"`
	}
	if err := c.Call(ctx, "listResources", nil, &resources); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "listTemplates", nil, &templates); err != nil {
		t.Fatal(err)
	}
	if !hasField(resources.Resources, "uri", "jupyter://operations") || !hasField(templates.Templates, "uriTemplate", "jupyter://operations/{operation}") {
		t.Errorf("resources %v templates %v", resources.Resources, templates.Templates)
	}
	var read2 struct {
		Contents []map[string]any `json:"contents"`
		RPCError *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"rpcError"`
	}
	if err := c.Call(ctx, "readResource", map[string]any{"uri": "jupyter://operations/batch_update_notebook_cells"}, &read2); err != nil || read2.RPCError != nil {
		t.Fatalf("read schema: %v %v", err, read2.RPCError)
	}
	if !strings.Contains(read2.Contents[0]["text"].(string), `"input_schema"`) {
		t.Errorf("schema resource %v", read2.Contents)
	}
	read2.RPCError = nil
	if err := c.Call(ctx, "readResource", map[string]any{"uri": "jupyter://operations/no_such_tool"}, &read2); err != nil {
		t.Fatal(err)
	}
	if read2.RPCError == nil || !strings.Contains(read2.RPCError.Message, "get_notebook") || read2.RPCError.Code != -32002 {
		t.Errorf("unknown operation: %+v (want code -32002, resource not found)", read2.RPCError)
	}
	read2.RPCError = nil
	if err := c.Call(ctx, "readResource", map[string]any{"uri": "jupyter://notebooks/no-such-file-id/cells"}, &read2); err != nil {
		t.Fatal(err)
	}
	if read2.RPCError == nil || read2.RPCError.Code != -32002 {
		t.Errorf("unknown file id: %+v (want code -32002, resource not found)", read2.RPCError)
	}

	checkLiveResources(t, ctx, c, p, name)

	// Text documents are a toolset of their own: turned on inside the session, the SDK lists the
	// tools again on the server's notifications/tools/list_changed.
	var mark struct {
		Notifications []map[string]any `json:"notifications"`
	}
	if err := c.Call(ctx, "notifications", nil, &mark); err != nil {
		t.Fatal(err)
	}
	if r := call("enable_toolset", map[string]any{"toolset": "documents"}); len(r["enabled"].([]any)) != 6 {
		t.Errorf("enable_toolset documents: %v", r)
	}
	var changed struct {
		Notification struct {
			Tools []string `json:"tools"`
		} `json:"notification"`
	}
	if err := c.Call(ctx, "waitNotification", map[string]any{"method": "notifications/tools/list_changed", "after": len(mark.Notifications), "timeoutMs": 10000}, &changed); err != nil {
		t.Fatalf("tools/list_changed: %v", err)
	}
	if got := changed.Notification.Tools; !slices.Contains(got, "create_document_session") || !slices.Contains(got, "get_notebook") {
		t.Errorf("the tools listed again after enable_toolset: %v", got)
	}

	// Text documents.
	doc := strings.TrimSuffix(name, ".ipynb") + ".md"
	created := call("create_document_session", map[string]any{"path": doc, "create_if_missing": true})
	if created["created"] != true {
		t.Errorf("create_document_session %v", created)
	}
	call("batch_insert_text", map[string]any{"path": doc, "operations": []any{map[string]any{"text": "héllo 🎉 wörld\n", "position": -1}}})
	call("batch_update_document", map[string]any{"path": doc, "operations": []any{
		map[string]any{"position": 0, "length": 5, "content": "HÉLLO"},
		map[string]any{"position": 8, "length": 5, "content": "WÖRLD"},
	}})
	call("batch_delete_text", map[string]any{"path": doc, "operations": []any{map[string]any{"position": 6, "length": 2}}})
	got := call("get_document", map[string]any{"path": doc})
	if got["content"] != "HÉLLO WÖRLD\n" {
		t.Errorf("document %q", got["content"])
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := shared.ReadFile(doc)
		if string(b) == "HÉLLO WÖRLD\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file on disk %q", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sidecarSees polls get_notebook until the sidecar's replica satisfies cond.
func sidecarSees(t *testing.T, call func(string, map[string]any) map[string]any, name string, cond func([]textCell) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		nb := call("get_notebook", map[string]any{"path": name, "include_outputs": false, "hashes": true})
		if cond(textCells(t, nb)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar never saw the expected state: %v", nb["content"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// textCell is a cell as get_notebook's text format shows it (tools/readformat.go).
type textCell struct {
	index                int
	handle, hash, source string
}

var (
	textHeader = regexp.MustCompile(`^@(\d+) (\S+)(?: md| raw)?(?: \[(?:\d+|\*)\])?(?: tags=\S+)?(?: #([0-9a-f]{12}))?$`)
	// a sources-only read's header (no index), after a blank line; read with hashes: true here,
	// so that it cannot be taken for a line of source
	sourcesHeader = regexp.MustCompile(`^(\S+)(?: md| raw)?(?: tags=\S+)? #([0-9a-f]{12})$`)
)

// textCells parses a text-format read (structuredContent's content): the cells' header lines,
// and their sources up to the first output ("→") or the next cell. A sources-only read must have
// been made with hashes: true (its cells have no index: -1).
func textCells(t *testing.T, read map[string]any) []textCell {
	t.Helper()
	text, _ := read["content"].(string)
	if read["format"] != "text" || text == "" {
		t.Fatalf("not a text read: %v", read)
	}
	var out []textCell
	inSource := false
	// Every source is shown ending with a newline.
	prev := ""
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n")[1:] { // the first line is the header
		blank := prev == ""
		prev = line
		if m := textHeader.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			out = append(out, textCell{index: i, handle: m[2], hash: m[3]})
			inSource = true
			continue
		}
		if m := sourcesHeader.FindStringSubmatch(line); m != nil && blank {
			if n := len(out); n > 0 { // the blank line before the header is not the source's
				out[n-1].source = strings.TrimSuffix(out[n-1].source, "\n")
			}
			out = append(out, textCell{index: -1, handle: m[1], hash: m[2]})
			inSource = true
			continue
		}
		if strings.HasPrefix(line, "→") {
			inSource = false
		}
		if inSource && len(out) > 0 {
			out[len(out)-1].source += line + "\n"
		}
	}
	return out
}

func mustSnapshot(t *testing.T, ctx context.Context, p *Peer) PeerSnapshot {
	t.Helper()
	s, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hasField(list []map[string]any, key, want string) bool {
	for _, m := range list {
		if m[key] == want {
			return true
		}
	}
	return false
}

// The HTTP endpoint refuses missing and wrong bearer tokens and foreign Host headers, before any
// MCP processing.
func TestMCPHTTPAuth(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	sp, err := StartHTTPSidecar(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	initBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	for _, tc := range []struct {
		name, auth, host string
		want             int
	}{
		{"no token", "", "", 401},
		{"wrong token", "Bearer " + strings.Repeat("x", 48), "", 401},
		{"basic auth", "Basic " + sp.Token, "", 401},
		{"rebinding host", "Bearer " + sp.Token, "attacker.example:80", 403},
		{"good", "Bearer " + sp.Token, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, "POST", sp.URL, bytes.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// The SDK client with a wrong token fails to connect.
	c, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	err = c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer wrong-wrong-wrong-wrong"}}, nil)
	if err == nil {
		t.Error("the SDK client connected with a wrong token")
	}
}

// --always-embed-schema (ALWAYS_EMBED_SCHEMA) embeds the schema in successful results too.
func TestMCPAlwaysEmbedSchema(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	name := uniqueName(t, ".ipynb")
	if err := shared.WriteFile(name, fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	sp, err := StartHTTPSidecar(ctx, shared, "ALWAYS_EMBED_SCHEMA=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	c, err := StartMCPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": sp.URL, "headers": map[string]string{"Authorization": "Bearer " + sp.Token}}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "get_notebook", map[string]any{"path": name})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, res.Text())
	}
	if len(res.Embedded()) != 1 {
		t.Errorf("ALWAYS_EMBED_SCHEMA=true: %d embedded resources in a successful result", len(res.Embedded()))
	}
}

// checkLiveResources reads the notebook as resources, subscribes to two of its cells and the
// notebook, and checks that a human's edit to one cell notifies that cell and the notebook only;
// then that prompts render with the guide and a fresh outline.
func checkLiveResources(t *testing.T, ctx context.Context, c *MCPClient, p *Peer, name string) {
	t.Helper()
	read := func(uri string) string {
		t.Helper()
		var r struct {
			Contents []map[string]any `json:"contents"`
			RPCError *struct {
				Message string `json:"message"`
			} `json:"rpcError"`
		}
		if err := c.Call(ctx, "readResource", map[string]any{"uri": uri}, &r); err != nil || r.RPCError != nil {
			t.Fatalf("read %s: %v %v", uri, err, r.RPCError)
		}
		return r.Contents[0]["text"].(string)
	}
	var list struct {
		Notebooks []struct {
			Path   string `json:"path"`
			FileID string `json:"file_id"`
		} `json:"notebooks"`
	}
	if err := json.Unmarshal([]byte(read("jupyter://notebooks")), &list); err != nil {
		t.Fatal(err)
	}
	base := ""
	for _, nb := range list.Notebooks {
		if nb.Path == name {
			base = "jupyter://notebooks/" + nb.FileID
		}
	}
	if base == "" {
		t.Fatalf("jupyter://notebooks does not list %s", name)
	}
	snap := mustSnapshot(t, ctx, p)
	ids := peerIDs(snap)
	if md := read(base); !strings.Contains(md, snap.Cells[0].Source) {
		t.Errorf("the markdown resource lacks cell 0's source %q:\n%s", snap.Cells[0].Source, md)
	}
	if src := read(base + "/cells/" + ids[1]); src != snap.Cells[1].Source {
		t.Errorf("cell resource %q, the peer has %q", src, snap.Cells[1].Source)
	}

	watched := []string{base, base + "/cells/" + ids[0], base + "/cells/" + ids[1]}
	for _, uri := range watched {
		if err := c.Call(ctx, "subscribe", map[string]any{"uri": uri}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var before struct {
		Notifications []map[string]any `json:"notifications"`
	}
	if err := c.Call(ctx, "notifications", nil, &before); err != nil {
		t.Fatal(err)
	}
	mark := len(before.Notifications)
	// The human edits cell 1; cell 0 stays as it is.
	if err := p.Transact(ctx, `cells.get(1).get('source').insert(0, '# seen by subscribers\n')`, nil); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{watched[2], watched[0]} {
		if err := c.Call(ctx, "waitNotification", map[string]any{"uri": uri, "after": mark, "timeoutMs": 15000}, nil); err != nil {
			t.Fatalf("subscription: %v", err)
		}
	}
	var after struct {
		Notifications []map[string]any `json:"notifications"`
	}
	if err := c.Call(ctx, "notifications", nil, &after); err != nil {
		t.Fatal(err)
	}
	for _, n := range after.Notifications[mark:] {
		if n["uri"] == watched[1] {
			t.Errorf("notified %s, a cell nobody changed", watched[1])
		}
	}
	for _, uri := range watched {
		if err := c.Call(ctx, "unsubscribe", map[string]any{"uri": uri}, nil); err != nil {
			t.Fatal(err)
		}
	}

	var prompt struct {
		Prompt struct {
			Messages []struct {
				Content map[string]any `json:"content"`
			} `json:"messages"`
		} `json:"prompt"`
		RPCError *struct {
			Message string `json:"message"`
		} `json:"rpcError"`
	}
	if err := c.Call(ctx, "getPrompt", map[string]any{"name": "interleaved-thinking", "arguments": map[string]any{"task": "tidy the notebook", "mode": "analysis", "path": name}}, &prompt); err != nil || prompt.RPCError != nil {
		t.Fatalf("interleaved-thinking: %v %v", err, prompt.RPCError)
	}
	var all strings.Builder
	for _, m := range prompt.Prompt.Messages {
		b, _ := json.Marshal(m.Content)
		all.Write(b)
	}
	if s := all.String(); !strings.Contains(s, "jupyter://guides/analysis") || !strings.Contains(s, " "+ids[1][:4]) || !strings.Contains(s, "tidy the notebook") { // the outline names cells by handle
		t.Errorf("interleaved-thinking prompt: %.2000s", s)
	}
}
