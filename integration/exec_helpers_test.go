//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/jupyterserver"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
)

// agent is the MCP server (with execution) wired to a sidecar, driven in-process.
type agent struct {
	t        testing.TB
	sc       *sidecar
	executor execution.Executor
	client   *client.Client
}

func newAgent(t testing.TB, s *JupyterServer) *agent {
	t.Helper()
	return newAgentWith(t, s, nil, nil)
}

// newScratchAgent is newAgent in JupyterLab's global awareness, as cmd runs it by default: on
// jupyter-server-documents scratch code (execute_code) runs only when the sidecar can see there
// that no tab holds the kernel (execution/scratch_server.go).
func newScratchAgent(t testing.TB, s *JupyterServer) *agent {
	t.Helper()
	return newAgentWith(t, s, func(o *bridge.ManagerOptions) { o.GlobalAwareness = true }, nil)
}

// newAgentWith is newAgent with changed manager and tool options.
func newAgentWith(t testing.TB, s *JupyterServer, manager func(*bridge.ManagerOptions), server func(*tools.Options)) *agent {
	t.Helper()
	sc := newSidecar(t, s, manager)
	// As cmd wires it: the sidecar is the kernel's client on jupyter-collaboration; the server
	// runs the cells on jupyter-server-documents.
	kernels := jupyterserver.Kernels{C: sc.client, Username: "jupyter-collab-mcp"}
	var x interface {
		execution.Executor
		Run(context.Context) error
	}
	var err error
	if s.Engine.Documents() {
		x, err = execution.NewServerEngine(execution.ServerOptions{Manager: sc.manager, Kernels: kernels, Logger: testLogger(t)})
	} else {
		x, err = execution.NewClientEngine(execution.ClientOptions{Manager: sc.manager, Kernels: kernels, Logger: testLogger(t), Username: "jupyter-collab-mcp"})
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Every toolset: these tests exercise the tools of every set (the default set is the MCP
	// end-to-end test's).
	topts := tools.Options{Manager: sc.manager, Executor: x, Logger: testLogger(t), Toolsets: []string{"all"}}
	if server != nil {
		server(&topts)
	}
	srv, err := tools.New(topts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(srv.MCP())
	if err != nil {
		t.Fatal(err)
	}
	cctx := ctxT(t, time.Minute)
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(cctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &agent{t: t, sc: sc, executor: x, client: c}
}

// call runs a tool and returns the decoded JSON and the raw result.
func (a *agent) call(ctx context.Context, name string, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	a.t.Helper()
	res, err := a.client.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if tc, ok := res.Content[0].(mcp.TextContent); ok {
		_ = json.Unmarshal([]byte(tc.Text), &out)
	}
	return out, res
}

// ok is call that fails the test on a tool error.
func (a *agent) ok(ctx context.Context, name string, args map[string]any) map[string]any {
	a.t.Helper()
	out, res := a.call(ctx, name, args)
	if res.IsError {
		b, _ := json.Marshal(out)
		a.t.Fatalf("%s failed: %s", name, b)
	}
	return out
}

func cellResults(out map[string]any) []map[string]any {
	var cells []map[string]any
	for _, c := range out["cells"].([]any) {
		cells = append(cells, c.(map[string]any))
	}
	return cells
}
