//go:build integration

package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // image results may be any of these
	_ "image/jpeg"
	_ "image/png"
	"maps"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// Client is one official-SDK MCP client process connected to one server.
type Client struct {
	mcp     *integration.MCPClient
	Version string // the server's serverInfo.version
	// inClient is the time the client library took for this client's tool calls, from callTool
	// to its result, timed inside the client process: what an agent host, which calls the SDK
	// in its own process, waits. The driver's pipe to the client process is not in it.
	inClient atomic.Int64 // nanoseconds
}

// InClient returns the total in-client time of the tool calls so far (see Client.inClient).
func (c *Client) InClient() time.Duration { return time.Duration(c.inClient.Load()) }

// Connect starts a client process and connects it to s over Streamable HTTP.
func Connect(ctx context.Context, s *Server) (*Client, error) {
	c, err := integration.StartMCPClient()
	if err != nil {
		return nil, err
	}
	var r struct {
		Server struct {
			Version string `json:"version"`
		} `json:"server"`
	}
	if err := c.Call(ctx, "connect", map[string]any{"transport": "http", "url": s.URL,
		"headers": map[string]string{"Authorization": "Bearer " + s.Token}}, &r); err != nil {
		_ = c.Close()
		return nil, errOf(s.Name, "connect", err)
	}
	return &Client{mcp: c, Version: r.Server.Version}, nil
}

// ConnectWith is Connect with a query added to the server's URL (the sidecar's ?toolsets=).
func ConnectWith(ctx context.Context, s *Server, query string) (*Client, error) {
	u := *s
	u.URL = s.URL + "?" + query
	return Connect(ctx, &u)
}

// ToolDefinitions returns what a client puts into every model request for this server's tools:
// each tool's name, description and input schema (and, apart, its output schema), as JSON.
func (c *Client) ToolDefinitions(ctx context.Context) (defs []string, outputSchemas []string, err error) {
	var r struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := c.mcp.Call(ctx, "listTools", map[string]any{}, &r); err != nil {
		return nil, nil, fmt.Errorf("tools/list: %w", err)
	}
	for _, t := range r.Tools {
		b, err := json.Marshal(map[string]any{"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]})
		if err != nil {
			return nil, nil, err
		}
		defs = append(defs, string(b))
		if schema, ok := t["outputSchema"]; ok {
			b, err := json.Marshal(schema)
			if err != nil {
				return nil, nil, err
			}
			outputSchemas = append(outputSchemas, string(b))
		}
	}
	return defs, outputSchemas, nil
}

// Close stops the client process.
func (c *Client) Close() error { return c.mcp.Close() }

// Reply is what a tool call gave back to the model: its text items and how many images.
type Reply struct {
	Text        string
	Images      int
	ImageTokens int // estimated, see imageTokens
	Structured  map[string]any
}

// imageTokens estimates what an image costs a model with Anthropic's documented approximation,
// width × height / 750, at most about 1,600 (larger images are scaled down to fit).
func imageTokens(b64 string) int {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return 0
	}
	return min(cfg.Width*cfg.Height/750, 1600)
}

// Tool calls a tool and turns a tool error (isError) into an error carrying its text.
func (c *Client) Tool(ctx context.Context, name string, args map[string]any) (Reply, error) {
	var r struct {
		Result integration.ToolResult `json:"result"`
		TookMs float64                `json:"tookMs"`
	}
	// The SDK's default request timeout is 60 s; a slow server must fail on our deadline instead.
	if err := c.mcp.Call(ctx, "call", map[string]any{"name": name, "arguments": args, "timeoutMs": 600000}, &r); err != nil {
		return Reply{}, fmt.Errorf("%s: %w", name, err)
	}
	c.inClient.Add(int64(r.TookMs * float64(time.Millisecond)))
	var rep Reply
	var texts []string
	for _, item := range r.Result.Content {
		switch item["type"] {
		case "text":
			s, _ := item["text"].(string)
			texts = append(texts, s)
		case "image":
			rep.Images++
			data, _ := item["data"].(string)
			rep.ImageTokens += imageTokens(data)
		}
	}
	rep.Text = strings.Join(texts, "\n")
	rep.Structured = r.Result.StructuredContent
	if r.Result.IsError {
		return rep, fmt.Errorf("%s: tool error: %s", name, truncate(rep.Text, 600))
	}
	return rep, nil
}

// Adapter maps each benchmark operation onto one server's tools, as an agent using that server
// would do it with the tools it has.
type Adapter interface {
	// Open joins the notebook (what an agent does first) and returns its cell count.
	Open(ctx context.Context, path string) (cells int, err error)
	// SetSource replaces the source of one cell (by id where the server takes ids).
	SetSource(ctx context.Context, path string, index int, id, source string) error
	// AppendCells appends code cells in order; returns the number of tool calls it took.
	AppendCells(ctx context.Context, path string, sources []string) (calls int, err error)
	// ReadAll reads every cell (with outputs, or sources only) and returns each reply and
	// how many cells the replies covered.
	ReadAll(ctx context.Context, path string, outputs bool, cells int) (replies []Reply, covered int, err error)
	// Execute runs one cell and returns what the tool answered.
	Execute(ctx context.Context, path string, index int, id string) (Reply, error)
}

// MarkdownReader is a server with a compact rendering of a whole notebook with outputs.
type MarkdownReader interface {
	ReadMarkdown(ctx context.Context, path string, cells int) (replies []Reply, covered int, err error)
}

// ScriptReader is a server whose model can send a script that reads a notebook and returns only
// what it keeps: here each cell's type and source, in order, as jupyter-mcp-live's sources-only
// read keeps them.
type ScriptReader interface {
	ReadSourcesByScript(ctx context.Context, path string) (replies []Reply, covered int, err error)
}

// SidecarAdapter drives this sidecar's tools.
type SidecarAdapter struct{ C *Client }

// ReadSourcesByScript runs run_script keeping each cell's type and source.
func (a SidecarAdapter) ReadSourcesByScript(ctx context.Context, path string) ([]Reply, int, error) {
	code := fmt.Sprintf(`[[c["type"], c["source"]] for c in cells(%q)]`, path)
	r, err := a.C.Tool(ctx, "run_script", map[string]any{"script": code})
	if err != nil {
		return nil, 0, err
	}
	var cells []json.RawMessage
	if err := json.Unmarshal([]byte(r.Text), &cells); err != nil {
		return []Reply{r}, 0, fmt.Errorf("run_script answer: %w (%s)", err, truncate(r.Text, 300))
	}
	return []Reply{r}, len(cells), nil
}

func (a SidecarAdapter) Open(ctx context.Context, path string) (int, error) {
	r, err := a.C.Tool(ctx, "create_notebook_session", map[string]any{"path": path})
	if err != nil {
		return 0, err
	}
	n, _ := r.Structured["cell_count"].(float64)
	return int(n), nil
}

func (a SidecarAdapter) SetSource(ctx context.Context, path string, _ int, id, source string) error {
	_, err := a.C.Tool(ctx, "batch_update_notebook_cells", map[string]any{"path": path, "exec": false,
		"updates": []any{map[string]any{"cell_id": id, "content": source}}})
	return err
}

func (a SidecarAdapter) AppendCells(ctx context.Context, path string, sources []string) (int, error) {
	cells := make([]any, len(sources))
	for i, s := range sources {
		cells[i] = map[string]any{"cell_type": "code", "content": s}
	}
	_, err := a.C.Tool(ctx, "batch_insert_notebook_cells", map[string]any{"path": path, "cells": cells, "exec": false})
	return 1, err
}

func (a SidecarAdapter) ReadAll(ctx context.Context, path string, outputs bool, cells int) ([]Reply, int, error) {
	// The default format (text) is what an agent reads; like markdown it says how far it got
	// through truncated.next_call.
	return a.readPaged(ctx, map[string]any{"path": path, "include_outputs": outputs}, cells, pagedByNextCall(cells))
}

// ReadMarkdown reads every cell with outputs in the compact markdown rendering (an option the
// other server has no counterpart of), following truncated.next_call.
func (a SidecarAdapter) ReadMarkdown(ctx context.Context, path string, cells int) ([]Reply, int, error) {
	return a.readPaged(ctx, map[string]any{"path": path, "format": "markdown"}, cells, pagedByNextCall(cells))
}

// pagedByNextCall counts the cells a paged read covered from its truncated.next_call: every cell
// when the call ran to the end, those before the next call's start otherwise.
func pagedByNextCall(cells int) func(Reply, map[string]any, map[string]any, int) (int, error) {
	return func(_ Reply, tr, next map[string]any, covered int) (int, error) {
		switch {
		case tr == nil:
			return cells, nil // this call ran to the end
		case next == nil:
			return covered, fmt.Errorf("get_notebook: truncated without a next call: %v", tr)
		}
		rng, _ := next["cell_range"].(map[string]any)
		start, _ := rng["start"].(float64)
		return int(start), nil
	}
}

// readPaged calls get_notebook, then again from each truncated.next_call (get_notebook cuts at
// its token budget and says how to go on), at most cells+1 times; covered says how many cells
// the replies so far cover.
func (a SidecarAdapter) readPaged(ctx context.Context, args map[string]any, cells int, covered func(r Reply, truncated, next map[string]any, sofar int) (int, error)) ([]Reply, int, error) {
	var replies []Reply
	n := 0
	for i := 0; i <= cells; i++ {
		r, err := a.C.Tool(ctx, "get_notebook", args)
		if err != nil {
			return replies, n, err
		}
		replies = append(replies, r)
		tr, _ := r.Structured["truncated"].(map[string]any)
		next, _ := tr["next_call"].(map[string]any)
		if n, err = covered(r, tr, next, n); err != nil || next == nil {
			return replies, n, err
		}
		more := maps.Clone(args)
		more["cell_range"] = next["cell_range"]
		args = more
	}
	return replies, n, fmt.Errorf("get_notebook: still truncated after %d calls", len(replies))
}

func (a SidecarAdapter) Execute(ctx context.Context, path string, _ int, id string) (Reply, error) {
	return a.C.Tool(ctx, "execute_notebook_cell", map[string]any{"path": path, "cell_id": id})
}

// JupyterMCPAdapter drives jupyter-mcp-server's tools: notebooks are addressed by a name given
// in use_notebook, cells by index; there is no batch insert and read_notebook gives no outputs
// (read_cell does, one cell per call).
type JupyterMCPAdapter struct{ C *Client }

func jmcpName(path string) string { return strings.TrimSuffix(path, ".ipynb") }

var jmcpCells = regexp.MustCompile(`Notebook has (\d+) cells`)

func (a JupyterMCPAdapter) Open(ctx context.Context, path string) (int, error) {
	r, err := a.C.Tool(ctx, "use_notebook", map[string]any{"notebook_name": jmcpName(path), "notebook_path": path})
	if err != nil {
		return 0, err
	}
	m := jmcpCells.FindStringSubmatch(r.Text)
	if m == nil {
		return 0, fmt.Errorf("use_notebook: no cell count in %q", truncate(r.Text, 300))
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n, nil
}

func (a JupyterMCPAdapter) SetSource(ctx context.Context, path string, index int, _, source string) error {
	_, err := a.C.Tool(ctx, "overwrite_cell_source", map[string]any{"notebook_name": jmcpName(path), "cell_index": index, "cell_source": source})
	return err
}

func (a JupyterMCPAdapter) AppendCells(ctx context.Context, path string, sources []string) (int, error) {
	for i, s := range sources {
		if _, err := a.C.Tool(ctx, "insert_cell", map[string]any{"notebook_name": jmcpName(path), "cell_index": -1, "cell_type": "code", "cell_source": s}); err != nil {
			return i + 1, fmt.Errorf("cell %d of %d: %w", i, len(sources), err)
		}
	}
	return len(sources), nil
}

func (a JupyterMCPAdapter) ReadAll(ctx context.Context, path string, outputs bool, cells int) ([]Reply, int, error) {
	name := jmcpName(path)
	if !outputs {
		r, err := a.C.Tool(ctx, "read_notebook", map[string]any{"notebook_name": name, "response_format": "detailed", "limit": 0})
		if err != nil {
			return nil, 0, err
		}
		return []Reply{r}, strings.Count(r.Text, "=====Cell "), nil
	}
	replies := make([]Reply, 0, cells)
	for i := 0; i < cells; i++ {
		r, err := a.C.Tool(ctx, "read_cell", map[string]any{"notebook_name": name, "cell_index": i, "include_outputs": true})
		if err != nil {
			return replies, i, fmt.Errorf("cell %d: %w", i, err)
		}
		replies = append(replies, r)
	}
	return replies, cells, nil
}

func (a JupyterMCPAdapter) Execute(ctx context.Context, path string, index int, _ string) (Reply, error) {
	return a.C.Tool(ctx, "execute_cell", map[string]any{"notebook_name": jmcpName(path), "cell_index": index})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CountTokens counts text with the sidecar's count_tokens tool (o200k_base, exact, no margin).
func CountTokens(ctx context.Context, c *Client, text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	r, err := c.Tool(ctx, "count_tokens", map[string]any{"input": text})
	if err != nil {
		return 0, err
	}
	n, ok := r.Structured["tokens"].(float64)
	if !ok {
		b, _ := json.Marshal(r.Structured)
		return 0, fmt.Errorf("count_tokens: no tokens in %s", truncate(string(b), 300))
	}
	return int(n), nil
}
