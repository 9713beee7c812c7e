package tools_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// TestScopedTokens serves Streamable HTTP on loopback with a tokens file's entries and checks,
// through mcp-go's HTTP client, that tools are hidden and refused by scope and documents by path.
func TestScopedTokens(t *testing.T) {
	e := newEnv(t, []bridgetest.File{
		dirFile("reports"), dirFile("secret"),
		nbFile("reports/r.ipynb", notebook(code("r1", "x = 1"))),
		nbFile("secret/s.ipynb", notebook(code("s1", "key = 'hush'"))),
	})
	sum := func(tok string) string { d := sha256.Sum256([]byte(tok)); return hex.EncodeToString(d[:]) }
	entries, err := auth.ParseTokens([]byte(`[
		{"name": "reader", "token_sha256": "` + sum("reader-token-0123456789") + `", "scopes": ["read"], "paths": ["reports/**"]},
		{"name": "writer", "token_sha256": "` + sum("writer-token-0123456789") + `", "scopes": ["write"]}]`))
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

	connect := func(tok string) *client.Client {
		c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
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
	toolNames := func(c *client.Client) map[string]bool {
		res, err := c.ListTools(ctxT(t), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, tl := range res.Tools {
			names[tl.Name] = true
		}
		return names
	}
	call := func(c *client.Client, name string, args map[string]any) (bool, string) {
		res, err := c.CallTool(ctxT(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.IsError, res.Content[0].(mcp.TextContent).Text
	}

	reader := connect("reader-token-0123456789")
	names := toolNames(reader)
	if !names["get_notebook"] || names["batch_update_notebook_cells"] || names["fork_document"] {
		t.Errorf("reader sees tools %v", names)
	}
	if isErr, text := call(reader, "batch_update_notebook_cells", map[string]any{"path": "reports/r.ipynb", "updates": []any{map[string]any{"cell_id": "r1", "content": "x = 2"}}}); !isErr || !strings.Contains(text, `needs the \"write\" scope`) {
		t.Errorf("reader's edit: %v %s", isErr, text)
	}
	if isErr, text := call(reader, "get_notebook", map[string]any{"path": "reports/r.ipynb"}); isErr {
		t.Errorf("reader cannot read its own path: %s", text)
	}
	if isErr, text := call(reader, "get_notebook", map[string]any{"path": "secret/s.ipynb"}); !isErr || strings.Contains(text, "hush") || !strings.Contains(text, "outside its paths") {
		t.Errorf("reader read outside its paths: %v %s", isErr, text)
	}
	if _, text := call(reader, "list_notebooks", map[string]any{}); strings.Contains(text, "secret/") || !strings.Contains(text, "reports/r.ipynb") {
		t.Errorf("reader's listing: %s", text)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "jupyter://notebooks"
	if res, err := reader.ReadResource(ctxT(t), req); err != nil || strings.Contains(res.Contents[0].(mcp.TextResourceContents).Text, "secret/") {
		t.Errorf("reader's notebook resource lists another path: %v", err)
	}

	writer := connect("writer-token-0123456789")
	if names := toolNames(writer); !names["batch_update_notebook_cells"] || names["restart_kernel"] {
		t.Errorf("writer sees tools %v", names)
	}
	if isErr, text := call(writer, "batch_update_notebook_cells", map[string]any{"path": "secret/s.ipynb", "updates": []any{map[string]any{"cell_id": "s1", "content": "key = None"}}}); isErr {
		t.Errorf("writer's edit: %s", text)
	}
	if got := e.serverSources("secret/s.ipynb"); len(got) != 1 || got[0] != "key = None" {
		t.Errorf("the writer's edit did not land: %v", got)
	}
}
