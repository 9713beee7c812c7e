package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/script"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// run_script: the agent sends a short Starlark script that reads notebooks through the
// functions below, loops and filters, and returns only what it keeps — one call and a few
// tokens for chores that take many reads tool by tool ("every cell whose output has an error:
// its source and the last traceback line"). The sandbox and its bounds are package script's.
//
// Every function passes the door as the equivalent tool does, with the caller's identity:
// notebooks walks the folders the caller may see (list_notebooks), cells and search read only
// documents mayUse admits (get_notebook, search_notebook). They read the live replica of a
// notebook whose room is open and otherwise its file as jupyter-server has it, without joining
// (as search_notebook does): a script that scans a folder does not join every notebook in it.
//
// The tool is read-only and in a toolset of its own, scripts, on by default: a session that
// takes only scripts (toolsets=scripts) pays for one tool definition a turn and can still do
// every read chore; the default set has it beside the tools it saves calls of.

const (
	scriptsCategory   = "scripts"
	maxScriptsRunning = 4     // scripts running at once, server-wide; more wait for a slot
	maxScriptMatches  = 5000  // matches one search() returns
	maxScriptLine     = 10000 // characters of a matching line search() returns
)

var scriptDescription = "Run a short Starlark script (Python without imports, classes, try, while, f-strings or " +
	"generator expressions) that reads notebooks, loops, filters and returns only what it keeps: one call " +
	"instead of many reads. The value of its last expression is the result (a string comes back as text); " +
	"print() lines come too. Functions:\n" +
	"notebooks(prefix=\"\") → paths of the notebooks under a folder.\n" +
	"cells(path) → list of dicts: index, id, handle, type (code|markdown|raw), source, tags, execution_count, " +
	"outputs (dicts: type stream|execute_result|display_data|error, text; errors add ename, evalue, " +
	"traceback: list of lines).\n" +
	"search(pattern, prefix=\"\", path=\"\", regex=False, case=False) → matches: path, cell (index), " +
	"handle, line, text, output (bool).\n" +
	"Read-only; steps, calls, memory and result size are bounded; an error names the script's line."

func (s *Server) registerScriptTools() {
	s.register(&operation{
		Name:        "run_script",
		Title:       "Run a read-only script over notebooks",
		Category:    scriptsCategory,
		Default:     true,
		Scope:       auth.ScopeRead,
		Description: scriptDescription,
		Input: object(
			brief("script", str(fmt.Sprintf("Starlark source, at most %d bytes.", script.DefaultLimits.Source))),
		).required("script"),
		Example: map[string]any{"script": "[(c[\"index\"], c[\"source\"], [o[\"traceback\"][-1] for o in c[\"outputs\"] if o[\"type\"] == \"error\"])\n" +
			" for c in cells(\"analysis.ipynb\") if [o for o in c[\"outputs\"] if o[\"type\"] == \"error\"]]"},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Run: handle(s.runScript, renderScript),
	})
}

type scriptArgs struct {
	Script string `json:"script"`
}

// runScript runs the script with the functions of this file, at most maxScriptsRunning at once.
func (s *Server) runScript(ctx context.Context, c *call, a scriptArgs) (script.Result, error) {
	select {
	case s.scripts <- struct{}{}:
		defer func() { <-s.scripts }()
	case <-ctx.Done():
		return script.Result{}, failf("%d scripts are running: none finished before the call's timeout; try again", maxScriptsRunning)
	}
	started := time.Now()
	res, err := script.Run(ctx, a.Script, s.scriptFuncs(), script.DefaultLimits)
	s.log.Debug().Uint64("steps", res.Steps).Int("calls", res.Calls).Dur("took", time.Since(started)).Bool("failed", err != nil).Msg("script ran")
	if err != nil {
		var se *script.Error
		if errors.As(err, &se) && se.Stack != "" {
			s.log.Error().Str("panic", se.Msg).Str("stack", se.Stack).Msg("script sandbox recovered a panic")
		}
		te := &toolError{Message: "the script failed: " + err.Error()}
		if errors.As(err, &se) && se.Line > 0 {
			te.Details = []detail{{Path: []any{"script"}, Message: fmt.Sprintf("line %d, column %d", se.Line, se.Col)}}
		}
		if len(res.Printed) > 0 {
			te.Extra = map[string]any{"printed": res.Printed}
		}
		return script.Result{}, te
	}
	if text := scriptText(res); s.tokens.Count(text) > c.budget {
		return script.Result{}, failf("the script's result is %d tokens, over max_tokens %d: return less (filter, slice, count), or raise max_tokens", s.tokens.Count(text), c.budget)
	}
	return res, nil
}

func renderScript(_ *call, _ scriptArgs, res script.Result) result {
	data := map[string]any{"result": res.Value}
	if len(res.Printed) > 0 {
		data["printed"] = res.Printed
	}
	return result{Data: data, Text: scriptText(res)}
}

// scriptText is what the model reads: the printed lines, then the result — a string as it is,
// anything else as compact JSON.
func scriptText(res script.Result) string {
	var parts []string
	if len(res.Printed) > 0 {
		parts = append(parts, strings.Join(res.Printed, "\n"))
	}
	switch v := res.Value.(type) {
	case string:
		parts = append(parts, v)
	case nil:
		if len(parts) == 0 {
			parts = append(parts, "(no result: the script's last statement is not an expression, and it printed nothing)")
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte(fmt.Sprintf("(the result does not encode: %v)", err))
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// scriptFuncs are the functions a script may call.
func (s *Server) scriptFuncs() []script.Func {
	return []script.Func{
		{Name: "notebooks", Params: []script.Param{{Name: "prefix", Default: ""}}, Call: s.scriptNotebooks},
		{Name: "cells", Params: []script.Param{{Name: "path"}}, Call: s.scriptCells},
		{Name: "search", Params: []script.Param{
			{Name: "pattern"}, {Name: "prefix", Default: ""}, {Name: "path", Default: ""},
			{Name: "regex", Kind: script.Bool, Default: false}, {Name: "case", Kind: script.Bool, Default: false},
		}, Call: s.scriptSearch},
	}
}

// scriptNotebooks is notebooks(prefix): the paths list_notebooks would list, all of them.
func (s *Server) scriptNotebooks(ctx context.Context, a map[string]any) (any, error) {
	files, _, err := s.walk(ctx, a["prefix"].(string), "notebook", "prefix")
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	return paths, nil
}

// scriptDoc reads a document a script names, through the door.
func (s *Server) scriptDoc(ctx context.Context, p string, kind ydoc.Kind) (string, ydoc.Snapshot, error) {
	clean, err := bridge.CleanPath(strings.TrimPrefix(p, "/"))
	if err != nil {
		return "", ydoc.Snapshot{}, err
	}
	if clean == "" {
		return "", ydoc.Snapshot{}, errors.New("the path names the Jupyter root, not a document")
	}
	if err := mayUse(ctx, clean); err != nil {
		return "", ydoc.Snapshot{}, err
	}
	snap, _, err := s.searchSource(ctx, searchDoc{clean, kind})
	if err != nil {
		return "", ydoc.Snapshot{}, asToolError(openError("path", err))
	}
	return clean, snap, nil
}

// scriptCells is cells(path): every cell with its outputs as text.
func (s *Server) scriptCells(ctx context.Context, a map[string]any) (any, error) {
	_, snap, err := s.scriptDoc(ctx, a["path"].(string), ydoc.KindNotebook)
	if err != nil {
		return nil, err
	}
	if snap.Kind != ydoc.KindNotebook {
		return nil, errors.New("not a notebook")
	}
	handles := notebookHandles(snap.Notebook)
	out := make([]any, len(snap.Notebook.Cells))
	for i, c := range snap.Notebook.Cells {
		var count any
		if c.ExecutionCount != nil {
			count = *c.ExecutionCount
		}
		tags := cellTags(c.Metadata)
		if tags == nil {
			tags = []string{}
		}
		outputs := make([]any, len(c.Outputs))
		for j, o := range c.Outputs {
			outputs[j] = scriptOutput(o)
		}
		out[i] = script.Object{
			{Key: "index", Value: i}, {Key: "id", Value: c.ID}, {Key: "handle", Value: handles[c.ID]},
			{Key: "type", Value: c.Type}, {Key: "source", Value: c.Source}, {Key: "tags", Value: tags},
			{Key: "execution_count", Value: count}, {Key: "outputs", Value: outputs},
		}
	}
	return out, nil
}

// notebookHandles are the cells' handles, or none when a cell has no id (a file before nbformat
// 4.5).
func notebookHandles(nb ydoc.Notebook) map[string]string {
	ids := make([]string, len(nb.Cells))
	for i, c := range nb.Cells {
		if c.ID == "" {
			return map[string]string{}
		}
		ids[i] = c.ID
	}
	return cellHandles(ids)
}

// scriptOutput is an output as a script sees it: its type and its text as a read shows it
// (ANSI stripped; images and rich data summarised), with the error's parts.
func scriptOutput(o map[string]any) script.Object {
	typ := asString(o["output_type"])
	out := script.Object{{Key: "type", Value: typ}}
	switch typ {
	case "stream":
		out = append(out, script.Member{Key: "name", Value: asString(o["name"])},
			script.Member{Key: "text", Value: stripANSI(asString(o["text"]))})
	case "error":
		ename, evalue := asString(o["ename"]), stripANSI(asString(o["evalue"]))
		var lines []string
		if tb, ok := o["traceback"].([]any); ok {
			for _, entry := range tb {
				for _, l := range strings.Split(stripANSI(asString(entry)), "\n") {
					if strings.TrimSpace(l) != "" && strings.Trim(l, "-") != "" { // IPython's rule line
						lines = append(lines, l)
					}
				}
			}
		}
		if lines == nil {
			lines = []string{}
		}
		out = append(out, script.Member{Key: "text", Value: ename + ": " + evalue},
			script.Member{Key: "ename", Value: ename}, script.Member{Key: "evalue", Value: evalue},
			script.Member{Key: "traceback", Value: lines})
	default:
		out = append(out, script.Member{Key: "text", Value: textOutput(o, 1<<20)})
	}
	return out
}

// scriptSearch is search(pattern, prefix, path, regex, case): the matching lines of sources,
// outputs and text files, as search_notebook finds them.
func (s *Server) scriptSearch(ctx context.Context, a map[string]any) (any, error) {
	pattern, prefix, p := a["pattern"].(string), a["prefix"].(string), a["path"].(string)
	if pattern == "" {
		return nil, errors.New("the pattern is empty")
	}
	expr := pattern
	if !a["regex"].(bool) {
		expr = regexp.QuoteMeta(expr)
	}
	if !a["case"].(bool) {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("the pattern is not a valid regular expression: %v", err)
	}
	var docs []searchDoc
	if p != "" {
		if prefix != "" {
			return nil, errors.New("give path or prefix, not both")
		}
		path, kind := parseSession(p)
		docs = []searchDoc{{path, kind}}
	} else {
		files, _, err := s.walkTypes(ctx, prefix, "prefix", "notebook", "file")
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			kind := ydoc.KindText
			if f.Type == "notebook" {
				kind = ydoc.KindNotebook
			} else if binaryExt[extOf(f.Path)] {
				continue
			}
			if len(docs) == maxSearchFiles {
				return nil, fmt.Errorf("more than %d documents under %q: narrow the prefix", maxSearchFiles, prefix)
			}
			docs = append(docs, searchDoc{f.Path, kind})
		}
	}
	var out []any
	for _, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		clean, snap, err := s.scriptDoc(ctx, d.path, d.kind)
		if err != nil {
			if p != "" {
				return nil, err
			}
			continue // an unreadable document does not spoil the search, as in search_notebook
		}
		add := func(cell any, handle string, lines []string, output bool) error {
			for _, i := range matchLines(lines, re) {
				if len(out) == maxScriptMatches {
					return fmt.Errorf("more than %d matches: narrow the pattern or the prefix", maxScriptMatches)
				}
				line := lines[i]
				if len(line) > maxScriptLine {
					line = line[:maxScriptLine]
				}
				out = append(out, script.Object{{Key: "path", Value: clean}, {Key: "cell", Value: cell},
					{Key: "handle", Value: handle}, {Key: "line", Value: i + 1}, {Key: "text", Value: line},
					{Key: "output", Value: output}})
			}
			return nil
		}
		if snap.Kind != ydoc.KindNotebook {
			if err := add(nil, "", strings.Split(snap.Text, "\n"), false); err != nil {
				return nil, err
			}
			continue
		}
		handles := notebookHandles(snap.Notebook)
		for i, c := range snap.Notebook.Cells {
			if err := add(i, handles[c.ID], strings.Split(c.Source, "\n"), false); err != nil {
				return nil, err
			}
			if c.Type != ydoc.CellCode || len(c.Outputs) == 0 {
				continue
			}
			var outs []string
			for _, o := range c.Outputs {
				outs = append(outs, strings.TrimRight(textOutput(o, 1<<20), "\n"))
			}
			if err := add(i, handles[c.ID], strings.Split(strings.Join(outs, "\n"), "\n"), true); err != nil {
				return nil, err
			}
		}
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}
