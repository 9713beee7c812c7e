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
		[2]string{"jupyter-server", jupyterVersion(ctx, js)},
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

func venvPackage(name string) string {
	py, err := integration.VenvBin("python")
	if err != nil {
		return "unknown"
	}
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

// Ratio is jupyter-mcp-server ÷ jupyter-collab-mcp (0 when either is missing or zero).
func (m *Metric) Ratio() float64 {
	a, okA := m.Values[Sidecar]
	b, okB := m.Values[JupyterMCP]
	if !okA || !okB || a == 0 {
		return 0
	}
	return b / a
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
	w("# jupyter-collab-mcp vs jupyter-mcp-server\n\n")
	w("Measured by `integration/bench` (generated file; do not edit by hand). Both servers run at the same time against the same jupyter-server and are driven by the same MCP client (the official TypeScript SDK over Streamable HTTP, `integration/node/mcpclient.mjs`) with one small adapter per server (`integration/bench/adapter.go`).\n\n")
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
	w("Ratio = jupyter-mcp-server ÷ jupyter-collab-mcp. Where lower is better, a ratio above 1 means jupyter-collab-mcp is ahead; for edits/s (higher is better), below 1.\n\n")
	w("| measurement | better | %s | %s | ratio |\n|---|---|---|---|---|\n", Sidecar, JupyterMCP)
	for _, m := range res.Metrics {
		ratio := "–"
		if r := m.Ratio(); r > 0 {
			ratio = fmt.Sprintf("%.2f×", r)
		} else if m.Values[Sidecar] == 0 && m.Values[JupyterMCP] == 0 && len(m.Errors) == 0 {
			ratio = "equal"
		}
		w("| %s | %s | %s | %s | %s |\n", strings.ReplaceAll(m.Label, "|", `\|`), m.Better, m.cell(Sidecar), m.cell(JupyterMCP), ratio)
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
	w("| operation | %s | %s |\n|---|---|---|\n", Sidecar, JupyterMCP)
	w("| open / join | `create_notebook_session` | `use_notebook` |\n")
	w("| single-cell edit | `batch_update_notebook_cells` (by cell id, `exec: false`) | `overwrite_cell_source` (by index) |\n")
	w("| insert %d cells | one `batch_insert_notebook_cells` (`exec: false`) | %d × `insert_cell` (index -1); it has no batch insert |\n", c.InsertCells, c.InsertCells)
	w("| read with outputs | `get_notebook` (default text format and budgets), following `truncated.next_call` | `read_cell` for every cell (`read_notebook` returns no outputs) |\n")
	w("| read with outputs, markdown | `get_notebook` with `format: markdown` | – |\n")
	w("| read sources only | `get_notebook` with `include_outputs: false` | `read_notebook` (`detailed`, `limit: 0`) |\n")
	w("| execute | `execute_notebook_cell` | `execute_cell` |\n\n")
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
	for _, n := range res.Notes {
		w("- %s\n", n)
	}
	return b.String()
}

// Chart draws one pair of bars per measurement (each pair scaled to its larger value), with
// the values written next to them, as a PNG.
func Chart(res *Results) image.Image {
	const (
		width    = 1100
		labelW   = 430
		barMax   = 420
		rowH     = 38
		top      = 56
		barH     = 13
		leftPad  = 10
		valuePad = 6
	)
	h := top + rowH*len(res.Metrics) + 20
	img := image.NewRGBA(image.Rect(0, 0, width, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	colors := map[string]color.RGBA{Sidecar: {31, 119, 180, 255}, JupyterMCP: {255, 127, 14, 255}}
	text := func(x, y int, s string, c color.Color) {
		d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	rect := func(x0, y0, x1, y1 int, c color.Color) {
		draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
	}
	black := color.Black
	text(leftPad, 20, "jupyter-collab-mcp vs jupyter-mcp-server, same jupyter-server - "+res.Started.UTC().Format("2006-01-02"), black)
	x := leftPad
	for _, s := range []string{Sidecar, JupyterMCP} {
		rect(x, 32, x+12, 44, colors[s])
		text(x+16, 43, s, black)
		x += 16 + 7*len(s) + 24
	}
	text(x, 43, "(bars scaled per row; ratio = jupyter-mcp-server / jupyter-collab-mcp)", color.Gray{100})
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
		if r := m.Ratio(); r > 0 {
			text(leftPad, y+28, fmt.Sprintf("ratio %.2fx (%s is better)", r, m.Better), color.Gray{90})
		}
		top := 0.0
		for _, s := range []string{Sidecar, JupyterMCP} {
			top = max(top, m.Values[s])
		}
		for j, s := range []string{Sidecar, JupyterMCP} {
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
