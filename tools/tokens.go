package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Token economy: counts with a real tokenizer compiled into the binary (o200k_base by default,
// cl100k_base selectable), a response budget every content tool honours, and accounting of what
// was served and saved.

// DefaultMaxResponseTokens keeps responses under the 25,000 tokens some clients reject.
const DefaultMaxResponseTokens = 20000

// tokenCounter counts tokens with one encoding. Codecs are read-only once loaded: safe for
// concurrent use.
type tokenCounter struct {
	name  string
	codec tokenizer.Codec
}

var (
	codecsMu sync.Mutex
	codecs   = map[string]tokenizer.Codec{} // loaded encodings (the vocabulary is parsed once)
)

// newTokenCounter loads an encoding: o200k_base or cl100k_base.
func newTokenCounter(name string) (*tokenCounter, error) {
	if name == "" {
		name = string(tokenizer.O200kBase)
	}
	if name != string(tokenizer.O200kBase) && name != string(tokenizer.Cl100kBase) {
		return nil, fmt.Errorf("tokenizer %q: must be o200k_base or cl100k_base", name)
	}
	codecsMu.Lock()
	defer codecsMu.Unlock()
	c, ok := codecs[name]
	if !ok {
		var err error
		if c, err = tokenizer.Get(tokenizer.Encoding(name)); err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", name, err)
		}
		codecs[name] = c
	}
	return &tokenCounter{name: name, codec: c}, nil
}

// Count returns the number of tokens of s.
func (t *tokenCounter) Count(s string) int {
	if s == "" {
		return 0
	}
	n, err := t.codec.Count(s)
	if err != nil {
		return (len(s) + 3) / 4 // cannot happen for valid strings; a byte estimate if it does
	}
	return n
}

// modelInfo is what count_tokens knows of a model family: its encoding, context window, and a
// margin for tokenizers that are not public (counts are then estimates with o200k_base).
type modelInfo struct {
	prefix   string
	encoding string
	context  int
	margin   float64 // multiply the count by 1+margin
}

// models are matched by longest prefix of the lowercased model name.
var models = []modelInfo{
	{"gpt-5", "o200k_base", 400000, 0},
	{"gpt-4.1", "o200k_base", 1047576, 0},
	{"gpt-4o", "o200k_base", 128000, 0},
	{"chatgpt-4o", "o200k_base", 128000, 0},
	{"o1", "o200k_base", 200000, 0},
	{"o3", "o200k_base", 200000, 0},
	{"o4", "o200k_base", 200000, 0},
	{"gpt-4-turbo", "cl100k_base", 128000, 0},
	{"gpt-4", "cl100k_base", 8192, 0},
	{"gpt-3.5", "cl100k_base", 16385, 0},
	{"claude", "o200k_base", 200000, 0.2},
	{"gemini", "o200k_base", 1048576, 0.15},
	{"llama", "o200k_base", 128000, 0.1},
	{"mistral", "o200k_base", 128000, 0.15},
	{"qwen", "o200k_base", 131072, 0.1},
	{"deepseek", "o200k_base", 128000, 0.1},
}

// lookupModel finds a model family; unknown models get the default encoding, a 200k context and
// a 20% margin.
func lookupModel(name string) (modelInfo, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	best := -1
	for i, m := range models {
		if strings.HasPrefix(n, m.prefix) && (best < 0 || len(m.prefix) > len(models[best].prefix)) {
			best = i
		}
	}
	if best < 0 {
		return modelInfo{prefix: name, encoding: "o200k_base", context: 200000, margin: 0.2}, false
	}
	return models[best], true
}

func (s *Server) registerTokenTools() {
	s.register(&operation{
		Name:     "count_tokens",
		Title:    "Count tokens",
		Category: "admin",
		Scope:    auth.ScopeRead,
		Description: "Count the tokens of a text, a notebook or some of its cells (sources and outputs apart), and their share " +
			"of a model's context window.",
		Input: object(
			brief("input", str("Text to count (instead of path).")),
			brief("path", str("A notebook or text file to count (instead of input).")),
			brief("cell_range", object(
				brief("start", integer("First cell index (0-based).").min(0)),
				brief("end", integer("Last cell index, inclusive.").min(0)),
			).desc("Only these cells of a notebook.")),
			field("model", str("Model name, for its encoding and context window (e.g. gpt-4o, claude-sonnet-4, gemini-2.5-pro); default: the server's tokenizer.")),
		),
		Example:  map[string]any{"path": "analysis/report.ipynb", "model": "claude-sonnet-4"},
		ReadOnly: true, Idempotent: true,
		Doc: docRef{Arg: "path", Ref: refAny, Optional: true, Open: true},
		Run: handle(s.countTokens, data[countArgs]),
	})
}

type countArgs struct {
	Input     *string    `json:"input"`
	CellRange *cellRange `json:"cell_range"`
	Model     string     `json:"model"`
}

// countTokens counts; its outcome is already what the model reads (data renders it).
func (s *Server) countTokens(ctx context.Context, c *call, args countArgs) (map[string]any, error) {
	if (args.Input == nil) == !c.Named() {
		return nil, invalid([]any{"input"}, "give either input or path")
	}
	counter := s.tokens
	info := modelInfo{encoding: counter.name, context: 200000}
	known := true
	if args.Model != "" {
		info, known = lookupModel(args.Model)
		c, err := newTokenCounter(info.encoding)
		if err != nil {
			return nil, err
		}
		counter = c
	}
	adjust := func(n int) int { return int(float64(n)*(1+info.margin) + 0.5) }
	out := map[string]any{"encoding": counter.name}
	total := 0
	if args.Input != nil {
		total = adjust(counter.Count(*args.Input))
	} else {
		kind, room := c.Kind, c.Room
		out["path"] = room.Path()
		if kind == ydoc.KindText {
			var text string
			if err := room.View(ctx, func(d *ydoc.Doc) (err error) { text, err = d.Text(); return }); err != nil {
				return nil, err
			}
			total = adjust(counter.Count(text))
			out["lines"] = strings.Count(text, "\n") + 1
		} else {
			var nb ydoc.Notebook
			if err := room.View(ctx, func(d *ydoc.Doc) (err error) { nb, err = d.Notebook(); return }); err != nil {
				return nil, err
			}
			first, last, err := resolveRange(args.CellRange, len(nb.Cells))
			if err != nil {
				return nil, err
			}
			type cellCount struct {
				Index   int    `json:"index"`
				ID      string `json:"id"`
				Type    string `json:"cell_type"`
				Source  int    `json:"source"`
				Outputs int    `json:"outputs,omitempty"`
			}
			var cells []cellCount
			src, outs := 0, 0
			for i := first; i <= last; i++ {
				c := nb.Cells[i]
				cc := cellCount{Index: i, ID: c.ID, Type: c.Type, Source: adjust(counter.Count(c.Source))}
				for _, o := range c.Outputs {
					cc.Outputs += adjust(counter.Count(outputText(o)))
				}
				src += cc.Source
				outs += cc.Outputs
				cells = append(cells, cc)
			}
			total = src + outs
			sort.SliceStable(cells, func(i, j int) bool { return cells[i].Source+cells[i].Outputs > cells[j].Source+cells[j].Outputs })
			top := cells
			if len(top) > 20 {
				top = top[:20]
			}
			out["sources"], out["outputs"], out["cells_counted"] = src, outs, len(cells)
			out["largest_cells"] = top
			out["note"] = "outputs are counted raw (as stored); reads show them capped and summarised, so a read costs less"
		}
	}
	out["tokens"] = total
	out["model"] = map[string]any{"name": nonEmptyStr(args.Model, "default"), "context_window": info.context, "known": known}
	out["percent_of_context"] = float64(int(float64(total)*10000/float64(info.context))) / 100
	if info.margin > 0 {
		out["estimate"] = fmt.Sprintf("%s is not this model's tokenizer: the count includes a %d%% safety margin", counter.name, int(info.margin*100))
	}
	return out, nil
}

// outputText is what an output weighs as text: its text, or its data rendered as JSON.
func outputText(o map[string]any) string {
	switch o["output_type"] {
	case "stream":
		return asString(o["text"])
	case "error":
		return asString(o["ename"]) + ": " + asString(o["evalue"]) + "\n" + asString(o["traceback"])
	}
	var b strings.Builder
	if data, ok := o["data"].(map[string]any); ok {
		for _, m := range sortedMimes(data) {
			b.WriteString(asString(data[m]))
		}
	}
	return b.String()
}
