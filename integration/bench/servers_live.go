//go:build integration

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// jupyter-mcp-live is a jupyter-server extension: its MCP server is served by jupyter-server
// itself ({base_url}mcp, authenticated with the Jupyter token), so it needs no process of its
// own but the bench's jupyter-server must have it installed. That jupyter-server runs from
// .venv-bench, which holds the same jupyter-server and jupyter-collaboration as .venv plus both
// peers (requirements.txt), with jupyter-mcp-server's own server extensions turned off: it runs
// as a standalone process, as before, and its extensions would change the server the three share.

// Live is jupyter-mcp-live's name in the results.
const Live = "jupyter-mcp-live"

// LiveVersion is the exact jupyter-mcp-live release requirements.txt installs.
const LiveVersion = "0.6.2"

// LiveTools are the tools jupyter-mcp-live's README configures (c.MCPExtensionApp.mcp_tools,
// "Basic Configuration"). In its Code Mode (fastmcp's CodeMode transform) a client lists only
// three tools (list_tools, get_schema, execute); these are called from the scripts it sends
// to execute.
var LiveTools = []string{
	"list_notebook_sessions", "list_notebook_kernels", "execute_cell", "setup_notebook", "switch_notebook_kernel",
	"shutdown_notebook", "interrupt_notebook_kernel", "restart_notebook_kernel", "add_code_cell", "edit_code_cell",
	"add_markdown_cell", "edit_markdown_cell", "delete_cell", "view_notebook", "read_cell", "view_cell_image",
}

// BenchJupyterOptions are the options of the bench's jupyter-server: the jupyter-server of
// .venv-bench, with jupyter-mcp-live's tools configured and jupyter-mcp-server's extensions off.
func BenchJupyterOptions(root, state string) (integration.ServerOptions, error) {
	venv, err := BenchVenv()
	if err != nil {
		return integration.ServerOptions{}, err
	}
	bin := filepath.Join(venv, "bin", "jupyter-server")
	if _, err := os.Stat(bin); err != nil {
		return integration.ServerOptions{}, fmt.Errorf("bench: %s missing (run `make bench-deps`): %w", bin, err)
	}
	tools := make([]string, len(LiveTools))
	for i, t := range LiveTools {
		tools[i] = "jupyter_mcp_live.execution_tools:" + t
	}
	cfg := map[string]any{
		"MCPExtensionApp": map[string]any{"mcp_tools": tools},
		"ServerApp": map[string]any{"jpserver_extensions": map[string]bool{
			"jupyter_mcp_server": false, "jupyter_server_nbmodel": false,
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return integration.ServerOptions{}, err
	}
	file := filepath.Join(state, "bench_jupyter_server_config.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return integration.ServerOptions{}, fmt.Errorf("bench: jupyter-server config: %w", err)
	}
	return integration.ServerOptions{Root: root, StateDir: state, Bin: bin, Engine: integration.EngineJC5,
		ExtraArgs: []string{"--config=" + file}}, nil
}

// LiveServer is jupyter-mcp-live's endpoint on the bench's jupyter-server (no process of its
// own: PID is 0, Stop does nothing, it has exited when the jupyter-server has).
func LiveServer(js *integration.JupyterServer) *Server {
	return &Server{Name: Live, URL: js.URL + "mcp", Token: js.Token, host: js, log: &capBuffer{}}
}
