package tools_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// What a client puts into every model request: each listed tool's name, description and input
// schema, counted with o200k_base. The budgets are issue 21's acceptance: the default list at most
// 4,000 tokens and 20 tools, every tool at most 9,000 tokens.

// definitionTokens counts the tools/list of a session as a client hands it to the model.
func definitionTokens(t *testing.T, tools []mcp.Tool) (int, map[string]int) {
	t.Helper()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	total := 0
	for _, tl := range tools {
		b, err := json.Marshal(map[string]any{"name": tl.Name, "description": tl.Description, "inputSchema": toolSchema(t, tl)})
		if err != nil {
			t.Fatal(err)
		}
		n, err := enc.Count(string(b))
		if err != nil {
			t.Fatal(err)
		}
		per[tl.Name] = n
		total += n
	}
	return total, per
}

func TestToolDefinitionBudgets(t *testing.T) {
	for _, c := range []struct {
		set       string
		maxTokens int
		maxTools  int
	}{
		{"default", 4000, 20},
		{"all", 9000, 0},
	} {
		e := newXEnv(t, nil, toolsets(c.set))
		res, err := e.c.ListTools(ctxT(t), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		total, per := definitionTokens(t, res.Tools)
		var rows []string
		for n, k := range per {
			rows = append(rows, fmt.Sprintf("%5d %s", k, n))
		}
		sort.Sort(sort.Reverse(sort.StringSlice(rows)))
		t.Logf("%s: %d tools, %d tokens\n%s", c.set, len(res.Tools), total, strings.Join(rows, "\n"))
		if total > c.maxTokens {
			t.Errorf("%s: tool definitions cost %d tokens per turn, over the budget of %d", c.set, total, c.maxTokens)
		}
		if c.maxTools > 0 && len(res.Tools) > c.maxTools {
			t.Errorf("%s: %d tools, over %d", c.set, len(res.Tools), c.maxTools)
		}
		if os.Getenv("JCM_DUMP_TOOLS") != "" {
			b, _ := json.MarshalIndent(res.Tools, "", "  ")
			_ = os.WriteFile("/tmp/tools-"+c.set+".json", b, 0o644)
		}
		// MCP Apps (issue 30): for a host that renders them, what the model is handed per turn
		// grows by at most 100 tokens: the tools' _meta.ui, counted as if the host passed it on
		// (the apps' own tools are for the app only: a host leaves them out of the model's list).
		withApps := newXEnvCaps(t, nil, appsClient, toolsets(c.set), withApps(tools.AppsAuto))
		appsRes, err := withApps.c.ListTools(ctxT(t), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var forModel []mcp.Tool
		for _, tl := range appsRes.Tools {
			if !slices.Equal(appVisibility(tl), []string{"app"}) {
				forModel = append(forModel, tl)
			}
		}
		appsTotal := metaTokens(t, forModel)
		appsDefs, _ := definitionTokens(t, forModel)
		t.Logf("%s with MCP Apps: %d tools for the model, %d tokens (+%d)", c.set, len(forModel), appsDefs+appsTotal, appsDefs+appsTotal-total)
		if len(forModel) != len(res.Tools) || appsDefs != total {
			t.Errorf("%s: with MCP Apps the model gets %d tools (%d tokens), without %d (%d tokens): only _meta may differ", c.set, len(forModel), appsDefs, len(res.Tools), total)
		}
		if appsTotal > 100 {
			t.Errorf("%s: MCP Apps add %d tokens to the tool definitions per turn, over 100", c.set, appsTotal)
		}
	}
}

// appVisibility is a tool's _meta.ui.visibility.
func appVisibility(tl mcp.Tool) []string {
	if tl.Meta == nil {
		return nil
	}
	ui, _ := tl.Meta.AdditionalFields["ui"].(map[string]any)
	var out []string
	switch v := ui["visibility"].(type) {
	case []string:
		out = v
	case []any:
		for _, x := range v {
			s, _ := x.(string)
			out = append(out, s)
		}
	}
	return out
}

// metaTokens counts what the tools' _meta adds to their definitions: ,"_meta":{...} each.
func metaTokens(t *testing.T, tools []mcp.Tool) int {
	t.Helper()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tl := range tools {
		if tl.Meta == nil {
			continue
		}
		b, err := json.Marshal(tl.Meta)
		if err != nil {
			t.Fatal(err)
		}
		k, err := enc.Count(`,"_meta":` + string(b))
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

// The instructions name every toolset and every tool (clients that defer schemas see only
// names), and stay short: they are sent once per session, but read on every turn.
func TestInstructionsNameEverySetAndStayShort(t *testing.T) {
	e := newXEnv(t, nil, toolsets())
	c, err := client.NewInProcessClient(e.ts.MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	res, err := c.Initialize(ctxT(t), mcp.InitializeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Instructions
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	n, _ := enc.Count(text)
	t.Logf("instructions: %d tokens\n%s", n, text)
	if n > 900 {
		t.Errorf("instructions are %d tokens, want at most 900", n)
	}
	for _, set := range tools.ToolsetNames() {
		if !strings.Contains(text, set) {
			t.Errorf("instructions do not name the %s toolset", set)
		}
	}
	lt, err := c.ListTools(ctxT(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Name != "enable_toolset" && !strings.Contains(text, tl.Name) {
			t.Errorf("instructions do not name %s", tl.Name)
		}
	}
	for _, opt := range []string{"exec", "timeout", "wait", "stop_on_error", "max_output_chars", "include_images", "expected_version", "avoid_busy_cells", "max_tokens", "fork_id", "includeSchema", "jupyter://operations/"} {
		if !strings.Contains(text, opt) {
			t.Errorf("instructions do not describe %s", opt)
		}
	}
}
