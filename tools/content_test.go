package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The agent guides (guides/*.md) and notebook templates (templates/*.ipynb) are content, not
// code: these tests keep them honest against the tools the server registers and docs/tools.md,
// the reference for what they take.

var (
	contentGuides    = []string{"guides/research.md", "guides/analysis.md", "guides/development.md"}
	contentTemplates = []string{"templates/analysis.ipynb", "templates/experiment.ipynb", "templates/report.ipynb"}

	// A backticked span that is exactly one snake_case identifier, as tool names are.
	contentCodeSpan   = regexp.MustCompile("`([^`\n]+)`")
	contentSnakeIdent = regexp.MustCompile(`^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$`)
	contentSnakeWord  = regexp.MustCompile(`[a-z][a-z0-9]*(?:_[a-z0-9]+)+`)
	// nbformat 4.5's cell id pattern.
	contentCellID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// contentReference returns the names of the registered tools, and every snake_case word
// docs/tools.md contains anywhere (argument and field names included).
func contentReference(t *testing.T) (tools, words map[string]bool) {
	t.Helper()
	tools = map[string]bool{}
	for name := range docServer(t).opsByName {
		tools[name] = true
	}
	b, err := os.ReadFile(filepath.Join("..", "docs", "tools.md"))
	if err != nil {
		t.Fatalf("read docs/tools.md: %v", err)
	}
	words = map[string]bool{}
	for _, w := range contentSnakeWord.FindAllString(string(b), -1) {
		words[w] = true
	}
	return tools, words
}

func TestContentGuides(t *testing.T) {
	tools, words := contentReference(t)
	for _, path := range contentGuides {
		t.Run(path, func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			text := string(b)
			if strings.TrimSpace(text) == "" {
				t.Fatal("empty guide")
			}
			lines := strings.Split(text, "\n")
			if !strings.HasPrefix(lines[0], "# ") || len(strings.TrimSpace(lines[0])) < 3 {
				t.Errorf("first line %q is not a top-level markdown heading", lines[0])
			}
			if strings.Count(text, "\n## ") < 3 {
				t.Error("fewer than three second-level headings")
			}
			if !strings.Contains(text, "\n## Checklist") || !strings.Contains(text, "- [ ] ") {
				t.Error("no checklist section with - [ ] items")
			}
			if strings.Count(text, "```")%2 != 0 {
				t.Error("unbalanced code fence")
			}
			if n := len(strings.Fields(text)); n < 500 || n > 900 {
				t.Errorf("%d words, want 500-900", n)
			}

			mentioned := map[string]bool{}
			for _, m := range contentCodeSpan.FindAllStringSubmatch(text, -1) {
				name := m[1]
				if !contentSnakeIdent.MatchString(name) {
					continue
				}
				switch {
				case tools[name]:
					mentioned[name] = true
				case words[name]:
					// a parameter or field docs/tools.md documents, not a tool
				default:
					t.Errorf("`%s` is neither a tool nor a name docs/tools.md documents", name)
				}
			}
			if len(mentioned) < 10 {
				t.Errorf("mentions only %d tools (%v); a guide should name the tools it relies on", len(mentioned), contentSorted(mentioned))
			}
			// Every guide covers reading, execution, coordination, forks and clean-up.
			for _, name := range []string{"get_notebook", "get_online_users", "get_user_cursors", "set_user_presence", "fork_document", "undo_last_edit", "execute_code"} {
				if !mentioned[name] {
					t.Errorf("does not mention `%s`", name)
				}
			}
			if !strings.Contains(text, "avoid_busy_cells") {
				t.Error("does not mention avoid_busy_cells")
			}
		})
	}
}

func TestContentTemplates(t *testing.T) {
	for _, path := range contentTemplates {
		t.Run(path, func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			var nb struct {
				Cells         []map[string]json.RawMessage `json:"cells"`
				Metadata      map[string]json.RawMessage   `json:"metadata"`
				NBFormat      *int                         `json:"nbformat"`
				NBFormatMinor *int                         `json:"nbformat_minor"`
			}
			if err := json.Unmarshal(b, &nb); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if nb.NBFormat == nil || *nb.NBFormat != 4 {
				t.Errorf("nbformat %v, want 4", nb.NBFormat)
			}
			if nb.NBFormatMinor == nil || *nb.NBFormatMinor < 5 {
				t.Errorf("nbformat_minor %v, want >= 5 (cell ids)", nb.NBFormatMinor)
			}
			var kernelspec struct{ Name string }
			if err := json.Unmarshal(nb.Metadata["kernelspec"], &kernelspec); err != nil || kernelspec.Name != "python3" {
				t.Errorf("metadata.kernelspec %s, want name python3", nb.Metadata["kernelspec"])
			}
			var langInfo struct{ Name string }
			if err := json.Unmarshal(nb.Metadata["language_info"], &langInfo); err != nil || langInfo.Name != "python" {
				t.Errorf("metadata.language_info %s, want name python", nb.Metadata["language_info"])
			}
			if len(nb.Cells) < 5 {
				t.Fatalf("%d cells, want a real structure", len(nb.Cells))
			}

			ids := map[string]bool{}
			types := map[string]int{}
			for i, cell := range nb.Cells {
				var id, cellType string
				if err := json.Unmarshal(cell["id"], &id); err != nil || id == "" {
					t.Errorf("cell %d: missing or empty id", i)
				} else if !contentCellID.MatchString(id) {
					t.Errorf("cell %d: id %q does not match nbformat's pattern", i, id)
				} else if ids[id] {
					t.Errorf("cell %d: duplicate id %q", i, id)
				}
				ids[id] = true
				if err := json.Unmarshal(cell["cell_type"], &cellType); err != nil {
					t.Errorf("cell %d: missing cell_type", i)
				}
				types[cellType]++
				var meta map[string]any
				if err := json.Unmarshal(cell["metadata"], &meta); err != nil || meta == nil {
					t.Errorf("cell %d: metadata %s is not an object", i, cell["metadata"])
				}
				source, ok := contentSource(cell["source"])
				if !ok {
					t.Errorf("cell %d: source %s is neither a string nor a list of strings", i, cell["source"])
				} else if strings.TrimSpace(source) == "" {
					t.Errorf("cell %d: empty source", i)
				}
				allowed := map[string]bool{"id": true, "cell_type": true, "metadata": true, "source": true}
				switch cellType {
				case "code":
					allowed["outputs"], allowed["execution_count"] = true, true
					var outputs []any
					if err := json.Unmarshal(cell["outputs"], &outputs); err != nil || outputs == nil || len(outputs) != 0 {
						t.Errorf("code cell %d (%s): outputs %s, want []", i, id, cell["outputs"])
					}
					if ec, ok := cell["execution_count"]; !ok || string(ec) != "null" {
						t.Errorf("code cell %d (%s): execution_count %s, want null", i, id, ec)
					}
					for _, imp := range contentImports(source) {
						if !contentStdlib[imp] {
							t.Errorf("code cell %d (%s): imports %q, which is not in the allowed standard-library list", i, id, imp)
						}
					}
				case "markdown", "raw":
					allowed["attachments"] = true
				default:
					t.Errorf("cell %d: cell_type %q", i, cellType)
				}
				for k := range cell {
					if !allowed[k] {
						t.Errorf("cell %d (%s): unexpected field %q for a %s cell", i, id, k, cellType)
					}
				}
			}
			if types["markdown"] == 0 || types["code"] == 0 {
				t.Errorf("cell types %v, want both markdown and code", types)
			}
			var first string
			first, _ = contentSource(nb.Cells[0]["source"])
			if !strings.HasPrefix(first, "# ") {
				t.Errorf("first cell %q does not start with a title heading", first)
			}
		})
	}
}

// contentSource joins a cell source given as a string or a list of strings.
func contentSource(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var parts []string
	if err := json.Unmarshal(raw, &parts); err == nil && parts != nil {
		return strings.Join(parts, ""), true
	}
	return "", false
}

// Modules the template code may import: standard library only (third-party ones belong in
// comments).
var contentStdlib = map[string]bool{
	"collections": true, "csv": true, "datetime": true, "json": true, "math": true, "pathlib": true,
	"platform": true, "random": true, "statistics": true, "sys": true, "time": true,
}

var contentImportLine = regexp.MustCompile(`^(?:import\s+([A-Za-z_][\w.]*)|from\s+([A-Za-z_][\w.]*)\s+import\b)`)

// contentImports lists the top-level modules imported by uncommented lines of Python source.
func contentImports(source string) []string {
	var mods []string
	for _, line := range strings.Split(source, "\n") {
		m := contentImportLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		mod := m[1] + m[2]
		mods = append(mods, strings.SplitN(mod, ".", 2)[0])
	}
	return mods
}

func contentSorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
