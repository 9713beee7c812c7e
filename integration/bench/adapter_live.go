//go:build integration

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// LiveAdapter drives jupyter-mcp-live in its Code Mode, as a model does: every operation is one
// call of its execute tool with a short Python script (run in fastmcp's Monty sandbox) that calls
// the notebook tools with call_tool and returns what it keeps. Notebooks are addressed by path,
// cells by position; the script's return value comes back as JSON text.
type LiveAdapter struct{ C *Client }

// LiveDiscoveryTools are the tools whose schemas the bench's operations need: what a model asks
// get_schema for before its first script.
var LiveDiscoveryTools = []string{"setup_notebook", "view_notebook", "edit_code_cell", "add_code_cell", "execute_cell"}

// pyLit renders a string or a list of strings as a Python literal (JSON's string syntax is
// Python's, for the escapes json.Marshal writes).
func pyLit(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// script runs one Code Mode script.
func (a LiveAdapter) script(ctx context.Context, code string) (Reply, error) {
	return a.C.Tool(ctx, "execute", map[string]any{"code": code})
}

func (a LiveAdapter) Open(ctx context.Context, path string) (int, error) {
	// setup_notebook first, as its description asks ("CALL THIS FIRST"); it says nothing of the
	// notebook's size, so the script counts the cells and returns only that.
	r, err := a.script(ctx, fmt.Sprintf(`p = %s
await call_tool("setup_notebook", {"notebook_path": p})
v = await call_tool("view_notebook", {"notebook_path": p})
return len(v["result"])`, pyLit(path)))
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(r.Text))
	if err != nil {
		return 0, fmt.Errorf("setup script: no cell count in %q", truncate(r.Text, 300))
	}
	return n, nil
}

func (a LiveAdapter) SetSource(ctx context.Context, path string, index int, _, source string) error {
	_, err := a.script(ctx, fmt.Sprintf(`return await call_tool("edit_code_cell", {"notebook_path": %s, "position_index": %d, "source": %s, "execute": False})`,
		pyLit(path), index, pyLit(source)))
	return err
}

// liveMaxToolCalls is how many call_tool() calls one Code Mode script may make: fastmcp's CodeMode
// default (code_mode.py :: CodeMode, max_tool_calls=50), which jupyter-mcp-live keeps.
const liveMaxToolCalls = 50

// AppendCells is a script calling add_code_cell once per cell (there is no batch insert), as few
// scripts as the sandbox's tool-call limit allows: 100 cells take two MCP tool calls, with 100
// tool calls inside the sandbox.
func (a LiveAdapter) AppendCells(ctx context.Context, path string, sources []string) (int, error) {
	calls := 0
	for start := 0; start < len(sources); start += liveMaxToolCalls {
		chunk := sources[start:min(start+liveMaxToolCalls, len(sources))]
		calls++
		r, err := a.script(ctx, fmt.Sprintf(`p = %s
for s in %s:
    await call_tool("add_code_cell", {"notebook_path": p, "source": s, "execute": False})
return %d`, pyLit(path), pyLit(chunk), len(chunk)))
		if err != nil {
			return calls, fmt.Errorf("cells %d–%d: %w", start, start+len(chunk)-1, err)
		}
		if strings.TrimSpace(r.Text) != strconv.Itoa(len(chunk)) {
			return calls, fmt.Errorf("insert script answered %q", truncate(r.Text, 300))
		}
	}
	return calls, nil
}

// ReadAll returns view_notebook's answer (every cell with its outputs) or, for sources only,
// what a script keeps of it: each cell's type and source, in order (the position is the index).
func (a LiveAdapter) ReadAll(ctx context.Context, path string, outputs bool, _ int) ([]Reply, int, error) {
	code := fmt.Sprintf(`return await call_tool("view_notebook", {"notebook_path": %s})`, pyLit(path))
	if !outputs {
		code = fmt.Sprintf(`v = await call_tool("view_notebook", {"notebook_path": %s})
return [[c["cell_type"], c["source"]] for c in v["result"]]`, pyLit(path))
	}
	r, err := a.script(ctx, code)
	if err != nil {
		return nil, 0, err
	}
	var cells []json.RawMessage
	if outputs {
		var v struct {
			Result []json.RawMessage `json:"result"`
		}
		err = json.Unmarshal([]byte(r.Text), &v)
		cells = v.Result
	} else {
		err = json.Unmarshal([]byte(r.Text), &cells)
	}
	if err != nil {
		return []Reply{r}, 0, fmt.Errorf("read script answer: %w (%s)", err, truncate(r.Text, 300))
	}
	return []Reply{r}, len(cells), nil
}

// ReadSourcesByScript is its sources-only read: a script keeping each cell's type and source.
func (a LiveAdapter) ReadSourcesByScript(ctx context.Context, path string) ([]Reply, int, error) {
	return a.ReadAll(ctx, path, false, 0)
}

func (a LiveAdapter) Execute(ctx context.Context, path string, index int, _ string) (Reply, error) {
	return a.script(ctx, fmt.Sprintf(`return await call_tool("execute_cell", {"notebook_path": %s, "position_index": %d})`, pyLit(path), index))
}

// Discoverer is a server that lists only a few tools per turn (Code Mode) and whose other tools a
// model learns once per conversation, by calling its discovery tools.
type Discoverer interface {
	// Discover makes the calls a model makes to learn the tools the bench's operations use, and
	// returns their answers.
	Discover(ctx context.Context) ([]Reply, error)
}

// Discover lists the catalogue (list_tools, brief: names and descriptions) and asks get_schema
// for the parameters of the tools the operations call: two calls, as fastmcp's Code Mode
// guidance has it (discovery tools ListTools and GetSchemas, the ones jupyter-mcp-live sets up).
func (a LiveAdapter) Discover(ctx context.Context) ([]Reply, error) {
	list, err := a.C.Tool(ctx, "list_tools", map[string]any{})
	if err != nil {
		return nil, err
	}
	schemas, err := a.C.Tool(ctx, "get_schema", map[string]any{"tools": LiveDiscoveryTools})
	if err != nil {
		return []Reply{list}, err
	}
	for _, name := range LiveDiscoveryTools {
		if !strings.Contains(schemas.Text, name) {
			return []Reply{list, schemas}, fmt.Errorf("get_schema: no schema for %s in %q", name, truncate(schemas.Text, 300))
		}
	}
	return []Reply{list, schemas}, nil
}
