package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig for output summaries
	_ "image/jpeg"
	_ "image/png"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Rendering cells and outputs for a model: text capped, ANSI stripped, binaries and rich HTML
// summarised in one line, so a notebook full of plots costs a few tokens per image, not 100 kB
// of base64.

// sourceHash identifies a cell's source for expected_source_hash (12 hex digits of SHA-256).
func sourceHash(src string) string { return ydoc.SourceHash(src) }

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]`)

func stripANSI(s string) string { return ansiEscape.ReplaceAllString(s, "") }

// capText cuts s to at most max characters (code points), saying how much was left out.
func capText(s string, max int) (string, bool) {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s, false
	}
	if max <= 0 {
		return fmt.Sprintf("[%d characters not shown]", n), true
	}
	r := []rune(s)
	return string(r[:max]) + fmt.Sprintf("\n… [%d more characters not shown]", len(r)-max), true
}

// textMimes are rendered as text; everything else is summarised.
var textMimes = []string{"text/plain", "text/markdown", "text/latex", "application/json"}

// renderOutput returns a model-friendly copy of an nbformat output.
func renderOutput(o map[string]any, maxChars int) map[string]any {
	out := map[string]any{"output_type": o["output_type"]}
	switch o["output_type"] {
	case "stream":
		out["name"] = o["name"]
		out["text"], _ = capText(stripANSI(asString(o["text"])), maxChars)
	case "error":
		out["ename"], out["evalue"] = o["ename"], stripANSI(asString(o["evalue"]))
		var tb []string
		if lines, ok := o["traceback"].([]any); ok {
			for _, l := range lines {
				tb = append(tb, stripANSI(asString(l)))
			}
		}
		out["traceback"], _ = capText(strings.Join(tb, "\n"), maxChars)
	case "execute_result", "display_data", "update_display_data":
		if c, ok := o["execution_count"]; ok && c != nil {
			out["execution_count"] = c
		}
		data, _ := o["data"].(map[string]any)
		rendered := map[string]any{}
		for _, mime := range sortedMimes(data) {
			v := data[mime]
			switch {
			case contains(textMimes, mime) || strings.HasSuffix(mime, "+json"):
				s := asString(v)
				if _, isString := v.(string); !isString {
					b, _ := json.Marshal(v)
					s = string(b)
				}
				rendered[mime], _ = capText(stripANSI(s), maxChars)
			default:
				rendered[mime] = summariseMime(mime, v)
			}
		}
		out["data"] = rendered
	default:
		out["summary"] = "unknown output type"
	}
	return out
}

// summariseMime describes a binary or rich output in one line.
func summariseMime(mime string, v any) string {
	s := asString(v)
	switch {
	case strings.HasPrefix(mime, "image/") && mime != "image/svg+xml":
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err == nil {
			if cfg, _, err := image.DecodeConfig(bytes.NewReader(raw)); err == nil {
				return fmt.Sprintf("[%s %dx%d, %s; not shown]", mime, cfg.Width, cfg.Height, humanBytes(len(raw)))
			}
			return fmt.Sprintf("[%s, %s; not shown]", mime, humanBytes(len(raw)))
		}
	case mime == "text/html":
		return fmt.Sprintf("[HTML, %s; not shown — the text/plain rendering is given when present]", humanBytes(len(s)))
	case strings.Contains(mime, "javascript"):
		return fmt.Sprintf("[JavaScript, %s; not run, not shown]", humanBytes(len(s)))
	}
	if s == "" {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	return fmt.Sprintf("[%s, %s; not shown]", mime, humanBytes(len(s)))
}

// outputSummary is one line per output for outlines.
func outputSummary(o map[string]any) string {
	switch o["output_type"] {
	case "stream":
		return fmt.Sprintf("%v %s", o["name"], humanBytes(len(asString(o["text"]))))
	case "error":
		return fmt.Sprintf("error %v: %s", o["ename"], oneLine(stripANSI(asString(o["evalue"])), 60))
	case "execute_result", "display_data":
		data, _ := o["data"].(map[string]any)
		var parts []string
		for _, mime := range sortedMimes(data) {
			if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
				parts = append(parts, strings.TrimSuffix(strings.TrimPrefix(summariseMime(mime, data[mime]), "["), "; not shown]"))
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, ", ")
		}
		if tp, ok := data["text/plain"]; ok {
			return "result " + oneLine(asString(tp), 60)
		}
		return fmt.Sprintf("%v (%s)", o["output_type"], strings.Join(sortedMimes(data), ", "))
	}
	return fmt.Sprint(o["output_type"])
}

func sortedMimes(data map[string]any) []string {
	mimes := make([]string, 0, len(data))
	for m := range data {
		mimes = append(mimes, m)
	}
	sort.Strings(mimes)
	return mimes
}

func asString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		var b strings.Builder
		for _, x := range t {
			if s, ok := x.(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func oneLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// cellView is a cell as tools return it.
type cellView struct {
	Index          int              `json:"index"`
	ID             string           `json:"id"`
	Type           string           `json:"cell_type"`
	Source         string           `json:"source"`
	SourceHash     string           `json:"source_hash"`
	ExecutionCount *int             `json:"execution_count,omitempty"`
	ExecutionState string           `json:"execution_state,omitempty"`
	Metadata       map[string]any   `json:"metadata,omitempty"`
	Outputs        []map[string]any `json:"outputs,omitempty"`
	OutputCount    *int             `json:"output_count,omitempty"` // when outputs are left out
}

type viewOpts struct {
	outputs  bool
	maxChars int // per output
}

func newCellView(i int, c ydoc.Cell, o viewOpts) cellView {
	v := cellView{Index: i, ID: c.ID, Type: c.Type, Source: c.Source, SourceHash: sourceHash(c.Source), ExecutionCount: c.ExecutionCount}
	if c.ExecutionState == "running" {
		v.ExecutionState = "running"
	}
	if len(c.Metadata) > 0 {
		md := make(map[string]any, len(c.Metadata))
		for k, x := range c.Metadata {
			if k != "trusted" { // the server's bookkeeping, noise for a model
				md[k] = x
			}
		}
		if len(md) > 0 {
			v.Metadata = md
		}
	}
	if c.Type == ydoc.CellCode {
		if o.outputs {
			for _, out := range c.Outputs {
				v.Outputs = append(v.Outputs, renderOutput(out, o.maxChars))
			}
		} else if n := len(c.Outputs); n > 0 {
			v.OutputCount = &n
		}
	}
	return v
}

// notebookLanguage is the kernel language for code fences.
func notebookLanguage(md map[string]any) string {
	if li, ok := md["language_info"].(map[string]any); ok {
		if n, ok := li["name"].(string); ok && n != "" {
			return n
		}
	}
	if ks, ok := md["kernelspec"].(map[string]any); ok {
		if n, ok := ks["language"].(string); ok && n != "" {
			return n
		}
	}
	return "python"
}

// markdownCell renders one cell for format=markdown.
func markdownCell(v cellView, lang string) string {
	var b strings.Builder
	count := ""
	if v.ExecutionCount != nil {
		count = fmt.Sprintf(" | [%d]", *v.ExecutionCount)
	}
	fmt.Fprintf(&b, "<!-- cell %d | %s | id=%s%s -->\n", v.Index, v.Type, v.ID, count)
	switch v.Type {
	case ydoc.CellMarkdown:
		b.WriteString(v.Source)
	case ydoc.CellRaw:
		b.WriteString("```\n" + v.Source + "\n```")
	default:
		b.WriteString("```" + lang + "\n" + v.Source + "\n```")
		for _, o := range v.Outputs {
			b.WriteString("\n" + markdownOutput(o))
		}
		if v.OutputCount != nil {
			fmt.Fprintf(&b, "\n_%d output(s) not shown_", *v.OutputCount)
		}
	}
	b.WriteString("\n\n")
	return b.String()
}

func markdownOutput(o map[string]any) string {
	switch o["output_type"] {
	case "stream":
		return "```text\n" + strings.TrimRight(asString(o["text"]), "\n") + "\n```"
	case "error":
		return fmt.Sprintf("```text\n%v: %v\n%s\n```", o["ename"], o["evalue"], strings.TrimRight(asString(o["traceback"]), "\n"))
	default:
		data, _ := o["data"].(map[string]any)
		var parts []string
		for _, mime := range sortedMimes(data) {
			s := asString(data[mime])
			if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "not shown]") || strings.HasSuffix(s, "not run, not shown]") || strings.Contains(s, "; not shown —") {
				parts = append(parts, "_"+s+"_")
				continue
			}
			switch mime {
			case "text/markdown":
				parts = append(parts, s)
			default:
				parts = append(parts, "```text\n"+strings.TrimRight(s, "\n")+"\n```")
			}
		}
		return strings.Join(parts, "\n")
	}
}

// outlineCell renders one line per cell for format=outline; handle names the cell (handles.go).
func outlineCell(i int, handle string, c ydoc.Cell) string {
	lines := strings.Count(c.Source, "\n") + 1
	if c.Source == "" {
		lines = 0
	}
	head := oneLine(c.Source, 80)
	if c.Type == ydoc.CellMarkdown {
		for _, l := range strings.Split(c.Source, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				head = strings.TrimSpace(l)
				break
			}
		}
	}
	count := ""
	if c.ExecutionCount != nil {
		count = fmt.Sprintf(" [%d]", *c.ExecutionCount)
	}
	s := fmt.Sprintf("%d %s %s%s (%d lines): %s", i, c.Type, handle, count, lines, head)
	if len(c.Outputs) > 0 {
		var outs []string
		for _, o := range c.Outputs {
			outs = append(outs, outputSummary(o))
		}
		s += " → " + strings.Join(outs, "; ")
	}
	return s + "\n"
}
