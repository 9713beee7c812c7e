//go:build integration

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// Environment describes where and with what a run happened.
type Environment struct {
	Command  string
	CPU      string
	Cores    int
	MemTotal string
	MemAvail string
	Kernel   string
	Go       string
	Versions [][2]string // name, version
}

// Describe gathers the machine (from /proc) and the versions of everything under test.
func Describe(ctx context.Context, js *integration.JupyterServer, command string, clients map[string]*Client) Environment {
	env := Environment{Command: command, Go: runtime.Version(), Cores: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				env.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "MemTotal":
				env.MemTotal = kbToGiB(v)
			case "MemAvailable":
				env.MemAvail = kbToGiB(v)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env.Kernel = strings.TrimSpace(string(b))
	}
	commit := gitOut("rev-parse", "--short", "HEAD")
	if strings.TrimSpace(gitOut("status", "--porcelain", "--untracked-files=no")) != "" {
		commit += " + uncommitted changes"
	}
	env.Versions = append(env.Versions,
		[2]string{Sidecar, fmt.Sprintf("%s (serverInfo), commit %s", clients[Sidecar].Version, commit)},
		[2]string{JupyterMCP, fmt.Sprintf("%s (serverInfo; PyPI pin %s)", clients[JupyterMCP].Version, JupyterMCPVersion)},
		[2]string{Live, fmt.Sprintf("%s (serverInfo; PyPI pin %s, installed %s; fastmcp %s)", clients[Live].Version, LiveVersion, venvPackage("jupyter-mcp-live"), venvPackage("fastmcp"))},
		[2]string{"jupyter-server", jupyterVersion(ctx, js) + " (from .venv-bench)"},
		[2]string{"jupyter-collaboration", venvPackage("jupyter-collaboration")},
		[2]string{"MCP client", "@modelcontextprotocol/sdk " + npmVersion("@modelcontextprotocol/sdk")},
	)
	return env
}

func kbToGiB(v string) string {
	var kb float64
	fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
	return fmt.Sprintf("%.1f GiB", kb/(1<<20))
}

func gitOut(args ...string) string {
	root, err := integration.RepoRoot()
	if err != nil {
		return "unknown"
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func jupyterVersion(ctx context.Context, js *integration.JupyterServer) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, js.URL+"api", nil)
	if err != nil {
		return "unknown"
	}
	req.Header.Set("Authorization", "token "+js.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "unknown"
	}
	defer resp.Body.Close()
	var v struct {
		Version string `json:"version"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return "unknown"
	}
	return v.Version
}

// venvPackage is a package's version in .venv-bench, whose jupyter-server the bench runs.
func venvPackage(name string) string {
	venv, err := BenchVenv()
	if err != nil {
		return "unknown"
	}
	py := filepath.Join(venv, "bin", "python")
	out, err := exec.Command(py, "-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))", name).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func npmVersion(pkg string) string {
	root, err := integration.RepoRoot()
	if err != nil {
		return "unknown"
	}
	b, err := os.ReadFile(filepath.Join(root, "integration", "node", "node_modules", filepath.FromSlash(pkg), "package.json"))
	if err != nil {
		return "unknown"
	}
	var v struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &v) != nil {
		return "unknown"
	}
	return v.Version
}

// Ratio is server ÷ jupyter-collab-mcp (0 when either is missing or zero).
func (m *Metric) Ratio(server string) float64 {
	a, okA := m.Values[Sidecar]
	b, okB := m.Values[server]
	if !okA || !okB || a == 0 {
		return 0
	}
	return b / a
}

// ratioCell is the ratio column of server: server ÷ jupyter-collab-mcp.
func (m *Metric) ratioCell(server string) string {
	if r := m.Ratio(server); r > 0 {
		return fmt.Sprintf("%.2f×", r)
	}
	_, errA := m.Errors[Sidecar]
	_, errB := m.Errors[server]
	a, okA := m.Values[Sidecar]
	b, okB := m.Values[server]
	if okA && okB && a == 0 && b == 0 && !errA && !errB {
		return "equal"
	}
	return "–"
}

// others are the servers compared with the sidecar, in the run's order.
func others(res *Results) []string {
	var out []string
	for _, s := range res.Servers {
		if s != Sidecar {
			out = append(out, s)
		}
	}
	return out
}

func (m *Metric) cell(server string) string {
	if e, ok := m.Errors[server]; ok {
		return "**failed**: " + strings.Join(strings.Fields(strings.ReplaceAll(truncate(e, 300), "|", `\|`)), " ")
	}
	if why, ok := m.NA[server]; ok {
		return "n/a (" + why + ")"
	}
	v, ok := m.Values[server]
	if !ok {
		return "–"
	}
	return formatValue(v, m.Unit)
}

func formatValue(v float64, unit string) string {
	switch unit {
	case "ms", "MiB", "edits/s":
		if v >= 100 {
			return fmt.Sprintf("%.0f %s", v, unit)
		}
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
}

// Markdown renders the results page.
func Markdown(res *Results, env Environment, chart string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	rivals := others(res)
	w("# %s vs %s\n\n", Sidecar, strings.Join(rivals, " and "))
	w("Measured by `integration/bench` (generated file; do not edit by hand). The servers run at the same time against the same jupyter-server and are driven by the same MCP client (the official TypeScript SDK over Streamable HTTP, `integration/node/mcpclient.mjs`) with one small adapter per server (`integration/bench/adapter.go`, `adapter_live.go`).\n\n")
	w("- command: `%s`\n", env.Command)
	w("- date: %s (run took %s)\n", res.Started.UTC().Format("2006-01-02 15:04 MST"), res.Elapsed.Round(time.Second))
	w("- machine: %s, %d cores, %s RAM (%s available at start), Linux %s, %s; load average %s at the start, %s at the end (the machine may be shared)\n",
		env.CPU, env.Cores, env.MemTotal, env.MemAvail, env.Kernel, env.Go, res.LoadStart, loadAverage())
	for _, v := range env.Versions {
		w("- %s: %s\n", v[0], v[1])
	}
	c := res.Config
	w("- iterations: %d edits, %d sustained edits, %d × %d-cell inserts, %d reads per format, %d executions, %d joins of a %d-cell notebook\n\n",
		c.Edits, c.Sustained, c.InsertBatches, c.InsertCells, c.Reads, c.Executions, c.Joins, c.JoinCells)
	w("Each ratio = that server ÷ %s. Where lower is better, a ratio above 1 means %s is ahead; for edits/s (higher is better), below 1.\n\n", Sidecar, Sidecar)
	head, rule := "| measurement | better | "+Sidecar, "|---|---|---"
	for _, o := range rivals {
		head += " | " + o
		rule += "|---"
	}
	for _, o := range rivals {
		head += " | ratio " + o
		rule += "|---"
	}
	w("%s |\n%s|\n", head, rule)
	for _, m := range res.Metrics {
		line := fmt.Sprintf("| %s | %s | %s", strings.ReplaceAll(m.Label, "|", `\|`), m.Better, m.cell(Sidecar))
		for _, o := range rivals {
			line += " | " + m.cell(o)
		}
		for _, o := range rivals {
			line += " | " + m.ratioCell(o)
		}
		w("%s |\n", line)
	}
	if chart != "" {
		w("\n![chart](%s)\n", chart)
	}
	if f := res.Failures(); len(f) > 0 {
		w("\n## Failures\n\nRecorded as results (the run went on):\n\n")
		for _, s := range f {
			w("- %s\n", strings.ReplaceAll(truncate(s, 2000), "\n", " "))
		}
	}
	w("\n## How each operation is done\n\n")
	how := howEachOperation(c)
	w("| operation |")
	for _, sv := range res.Servers {
		w(" %s |", sv)
	}
	w("\n|---|%s\n", strings.Repeat("---|", len(res.Servers)))
	for _, op := range how {
		w("| %s |", op.op)
		for _, sv := range res.Servers {
			w(" %s |", op.by[sv])
		}
		w("\n")
	}
	w("\n")
	w("Notes:\n\n")
	w("- A tool round trip \"in the client\" is timed inside the client process, from the SDK's `callTool` to its result: what an agent host, which calls its MCP library in its own process, waits. \"As the driver sees it\" adds the benchmark's own pipe between the Go driver and that process (about a millisecond; no user pays it). Other latencies are wall time in the Go driver (for \"visible in peer\", until the independent yjs peer `integration/node/peer.mjs` holds the new state). p50/p99 are nearest-rank percentiles.\n")
	w("- Tokens are the text items of the tool results (what a client hands the model; `structuredContent` duplicates are not counted), counted exactly with o200k_base by the sidecar's `count_tokens` tool. Image items are counted separately, and estimated with Anthropic's documented approximation (width × height / 750 tokens, at most about 1,600 per image); the sidecar describes images in a line of text instead (`[image/png 640x480, 23.1 kB; not shown]`).\n")
	w("- The `structuredContent` row counts the same read's `structuredContent` (JSON, as sent): Codex hands the model only that when a result has it, so for Codex it replaces the text row.\n")
	w("- Tool definitions are what a client puts into every model request (Cursor, VS Code, Codex and the API connectors do; Claude Code defers schemas until the model searches for a tool): each tool's name, description and inputSchema from tools/list as JSON, counted with o200k_base. The sidecar's default toolset and every toolset are two connections to the same process (`?toolsets=default`, `?toolsets=all`); jupyter-mcp-server has one list, so both its rows are that list. The outputSchema row adds what clients that also send output schemas pay.\n")
	w("- The read notebook is %s; the %d-cell notebook is generated (`LargeNotebook`: about 1.5 kB of source, a stream output and a result per cell). Every timed operation works on its own fresh file, so joins are cold (the server loads the file into a new room).\n", ReadNotebookSource, c.JoinCells)
	w("- Memory is VmRSS/VmHWM of each server's own process from /proc/PID/status (the kernels belong to jupyter-server, not to either MCP server). The sidecar is a non-race build of `./cmd/jupyter-collab-mcp` with its per-token rate limit off (`MCP_RATE_LIMIT=0`; by default 50 requests/s, which the sustained-edit run exceeds; jupyter-mcp-server has no limit).\n")
	w("- jupyter-mcp-server's `use_notebook` also starts a kernel for each notebook it opens (its default without `kernel_id`), which is part of its open time; the 1-cell opens show that fixed cost. The sidecar starts a kernel only when a cell is first run (in the first, untimed execution).\n")
	w("- The first read and the first execution (kernel start) of each server are warm-ups and not timed.\n")
	w("- The sidecar stays joined to every room it opened (here all the run's notebooks, %d of them with %d cells) with its replica and version history, which is most of its RSS at the end; jupyter-mcp-server holds no document between calls.\n", c.Joins, c.JoinCells)
	w("- jupyter-mcp-server opens a new websocket to the room and syncs the whole document on every tool call (`NotebookConnection` around `NbModelClient`), which is why its per-call cost grows with the notebook; its `execute_cell` polls for completion once a second (`tools/execute_cell_tool.py`, `asyncio.sleep(min(1.0, …))`), which sets the floor of its execution latency.\n")
	if slices.Contains(res.Servers, Live) {
		for _, n := range liveNotes {
			w("- %s\n", n)
		}
	}
	for _, n := range res.Notes {
		w("- %s\n", n)
	}
	return b.String()
}

// howOp is how each server does one operation.
type howOp struct {
	op string
	by map[string]string
}

func howEachOperation(c Config) []howOp {
	return []howOp{
		{"open / join", map[string]string{Sidecar: "`create_notebook_session`", JupyterMCP: "`use_notebook`",
			Live: "a script: `setup_notebook`, then `view_notebook` to count the cells (it returns only the count)"}},
		{"single-cell edit", map[string]string{Sidecar: "`batch_update_notebook_cells` (by cell id, `exec: false`)", JupyterMCP: "`overwrite_cell_source` (by index)",
			Live: "a script: `edit_code_cell` (by position, `execute: False`)"}},
		{fmt.Sprintf("insert %d cells", c.InsertCells), map[string]string{Sidecar: "one `batch_insert_notebook_cells` (`exec: false`)",
			JupyterMCP: fmt.Sprintf("%d × `insert_cell` (index -1); it has no batch insert", c.InsertCells),
			Live: fmt.Sprintf("scripts looping over the sources, %d × `add_code_cell` (`execute: False`) in all inside the sandbox, at most %d per script (fastmcp's Code Mode limit of tool calls per `execute`); it has no batch insert",
				c.InsertCells, liveMaxToolCalls)}},
		{"read with outputs", map[string]string{Sidecar: "`get_notebook` (default text format and budgets), following `truncated.next_call`",
			JupyterMCP: "`read_cell` for every cell (`read_notebook` returns no outputs)", Live: "a script returning `view_notebook`'s answer"}},
		{"read with outputs, markdown", map[string]string{Sidecar: "`get_notebook` with `format: markdown`", JupyterMCP: "–", Live: "–"}},
		{"read sources only", map[string]string{Sidecar: "`get_notebook` with `include_outputs: false`", JupyterMCP: "`read_notebook` (`detailed`, `limit: 0`)",
			Live: "a script keeping of `view_notebook`'s answer each cell's type and source (`[[c[\"cell_type\"], c[\"source\"]] for c in v[\"result\"]]`)"}},
		{"read sources only, by script", map[string]string{Sidecar: "`run_script` keeping each cell's type and source (`[[c[\"type\"], c[\"source\"]] for c in cells(path)]`)", JupyterMCP: "– (no script tool)",
			Live: "the same script as its sources-only read"}},
		{"execute", map[string]string{Sidecar: "`execute_notebook_cell`", JupyterMCP: "`execute_cell`", Live: "a script: `execute_cell` (by position)"}},
		{"tools listed per turn", map[string]string{Sidecar: "its default toolset (`?toolsets=default`); every toolset (`?toolsets=all`)", JupyterMCP: "its one list",
			Live: "its Code Mode list: `list_tools`, `get_schema`, `execute`"}},
		{"one-time discovery", map[string]string{Sidecar: "–", JupyterMCP: "–",
			Live: "`list_tools` (names and descriptions of the " + fmt.Sprint(len(LiveTools)) + " tools its README configures) and `get_schema` for the " + fmt.Sprint(len(LiveDiscoveryTools)) + " tools the operations call"}},
	}
}

// liveNotes say how jupyter-mcp-live was measured.
var liveNotes = []string{
	"jupyter-mcp-live runs inside the jupyter-server (a server extension; MCP at `{base_url}mcp`, authenticated with the Jupyter token), which the bench runs from `.venv-bench` (the same jupyter-server and jupyter-collaboration as the integration tests' `.venv`, plus jupyter-mcp-live and jupyter-mcp-server, every package pinned in `integration/bench/constraints.txt`; jupyter-mcp-server's own server extensions are turned off, it runs as its own process as before). It is enabled with the tools its README lists (`c.MCPExtensionApp.mcp_tools`, \"Basic Configuration\"; `LiveTools` in `servers_live.go`). Its memory is the jupyter-server's, shared with the other two servers' rooms, so its memory rows are n/a.",
	"jupyter-mcp-live serves its tools in fastmcp's Code Mode: a client lists three tools (`list_tools`, `get_schema`, `execute`), and the model writes a short Python script (run in fastmcp's Monty sandbox) that calls the real tools with `call_tool` and returns what it keeps; every operation here is one `execute` call with such a script (`adapter_live.go`; the script's text is part of the request, not counted). Its per-turn cost is those three definitions; the one-time discovery rows count what a model spends once per conversation to learn the tools it then calls (fastmcp's guidance for its discovery tools: list, then ask for the schemas needed).",
}

// Chart draws one bar per server for each measurement (each row scaled to its largest value),
// with the values written next to them, as a PNG.
func Chart(res *Results) image.Image {
	const (
		width    = 1100
		labelW   = 430
		barMax   = 420
		minRowH  = 38
		top      = 56
		barH     = 13
		leftPad  = 10
		valuePad = 6
	)
	rowH := max(minRowH, 10+len(res.Servers)*(barH+3))
	h := top + rowH*len(res.Metrics) + 20
	img := image.NewRGBA(image.Rect(0, 0, width, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	colors := map[string]color.RGBA{Sidecar: {31, 119, 180, 255}, JupyterMCP: {255, 127, 14, 255}, Live: {44, 160, 44, 255}}
	text := func(x, y int, s string, c color.Color) {
		d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	rect := func(x0, y0, x1, y1 int, c color.Color) {
		draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
	}
	black := color.Black
	rivals := others(res)
	text(leftPad, 20, Sidecar+" vs "+strings.Join(rivals, " and ")+", same jupyter-server - "+res.Started.UTC().Format("2006-01-02"), black)
	x := leftPad
	for _, s := range res.Servers {
		rect(x, 32, x+12, 44, colors[s])
		text(x+16, 43, s, black)
		x += 16 + 7*len(s) + 24
	}
	text(x, 43, "(bars scaled per row; ratio = other / "+Sidecar+")", color.Gray{100})
	for i, m := range res.Metrics {
		y := top + i*rowH
		if i%2 == 0 {
			rect(0, y-2, width, y+rowH-4, color.Gray{245})
		}
		label := ascii(strings.TrimSpace(m.Label))
		if len(label) > 60 {
			label = label[:59] + "."
		}
		text(leftPad, y+13, label, black)
		var ratios []string
		for _, o := range rivals {
			if r := m.Ratio(o); r > 0 {
				ratios = append(ratios, fmt.Sprintf("%.2fx", r))
			} else {
				ratios = append(ratios, "-")
			}
		}
		if len(ratios) > 0 && m.Better != "" {
			text(leftPad, y+28, "ratios "+strings.Join(ratios, ", ")+" ("+m.Better+" is better)", color.Gray{90})
		}
		top := 0.0
		for _, s := range res.Servers {
			top = max(top, m.Values[s])
		}
		for j, s := range res.Servers {
			by := y + j*(barH+3)
			if e, ok := m.Errors[s]; ok {
				text(labelW, by+11, "FAILED: "+ascii(truncate(strings.Join(strings.Fields(e), " "), 80)), color.RGBA{200, 0, 0, 255})
				continue
			}
			if why, ok := m.NA[s]; ok {
				text(labelW, by+11, "n/a ("+why+")", color.Gray{90})
				continue
			}
			v, ok := m.Values[s]
			if !ok {
				continue
			}
			n := 0
			if top > 0 {
				n = int(v / top * barMax)
			}
			rect(labelW, by, labelW+max(n, 1), by+barH, colors[s])
			text(labelW+max(n, 1)+valuePad, by+11, ascii(formatValue(v, m.Unit)), black)
		}
	}
	return img
}

// Write stores results.md and chart.png in dir.
func Write(dir string, res *Results, env Environment) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: output dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "chart.png"))
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	if err := png.Encode(f, Chart(res)); err != nil {
		f.Close()
		return fmt.Errorf("bench: encode chart: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(Markdown(res, env, "chart.png")), 0o644); err != nil {
		return fmt.Errorf("bench: results: %w", err)
	}
	return nil
}

// ascii spells the few non-ASCII characters of the labels in ASCII (basicfont has no others).
var ascii = strings.NewReplacer("→", "->", "…", "...", "×", "x", "÷", "/", "–", "-").Replace

// loadAverage is the 1-minute load average from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}
