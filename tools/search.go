package tools

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// search_notebook: find text in cells' sources and outputs, in one notebook or in every notebook
// and text file under a path prefix, without reading them whole. Documents with an open room are
// searched in the live replica (what collaborators see now, unsaved typing included); the others
// in their file as jupyter-server has it, without joining them. Every document passes the door:
// a walk lists only what the caller may see, and each file is read through it.
//
// Results read like grep -n with context, grouped by document and cell:
//
//	"df_raw" in sources and outputs: 3 matches in 2 of 14 documents
//	analysis.ipynb (live)
//	@3 a1f3
//	1-import pandas as pd
//	2:df_raw = pd.read_csv(path)
//	@7 c2d4 out
//	1:KeyError: 'df_raw'
//	notes/todo.md (file)
//	14:check df_raw's columns
//
// "@index handle" names the cell as reads do (handles.go); "out" marks a match in the cell's
// outputs, whose lines are numbered as the read shows them (readformat.go). A notebook file
// without cell ids (nbformat before 4.5) gives the index only.

const (
	maxSearchFiles   = 500  // documents one search reads
	maxPatternLength = 1000 // characters
	maxShownLine     = 300  // characters of a matching line shown
)

func (s *Server) registerSearchTools() {
	s.register(&operation{
		Name:     "search_notebook",
		Title:    "Search notebooks",
		Category: "notebooks",
		Default:  true,
		Scope:    auth.ScopeRead,
		Description: "Find text or a regex in cells' sources and outputs, in one notebook or in every notebook and text " +
			"file under a folder: cell handles, line numbers and the matching lines with a little context. Use it " +
			"to locate a name or an error instead of reading whole notebooks.",
		Input: object(
			brief("pattern", str("The text to find (or a regular expression, with regex: true).")),
			brief("regex", boolean("pattern is a regular expression (RE2 syntax).").def(false)),
			brief("case_sensitive", boolean("Match case (by default case is ignored).").def(false)),
			brief("in", str("Where to look in notebooks: sources, outputs or both.").enum("both", "sources", "outputs").def("both")),
			brief("path", str("One notebook or text file; omitted: every one under path_prefix.")),
			brief("path_prefix", str("A folder or path prefix to search under (default: the whole root).").def("")),
			brief("context", integer("Lines of context around each match.").def(1).min(0).max(10)),
			brief("max_matches", integer("Most matches shown (all are counted).").def(50).min(1).max(1000)),
		).required("pattern"),
		Example:  map[string]any{"pattern": "df_raw", "path_prefix": "analysis/"},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Doc: docRef{Arg: "path", Ref: refAny, Optional: true},
		Run: handle(s.search, renderSearch),
	})
}

type searchArgs struct {
	Pattern       string `json:"pattern"`
	Regex         bool   `json:"regex"`
	CaseSensitive bool   `json:"case_sensitive"`
	In            string `json:"in"`
	PathPrefix    string `json:"path_prefix"`
	Context       int    `json:"context"`
	MaxMatches    int    `json:"max_matches"`
}

// searchFound is what a search found: the rendered blocks (one per document), how many matches
// there were in all and shown, and what was searched.
type searchFound struct {
	blocks   []string
	matches  int
	shown    int
	docs     int // documents with a match
	searched int
	filesCut bool // more documents than maxSearchFiles, or the walk stopped
	budget   bool // blocks left out for the token budget
	skipped  []string
}

// searchDoc is one document to search.
type searchDoc struct {
	path string
	kind ydoc.Kind
}

func (s *Server) search(ctx context.Context, c *call, a searchArgs) (searchFound, error) {
	if utf8.RuneCountInString(a.Pattern) > maxPatternLength {
		return searchFound{}, invalid([]any{"pattern"}, "is longer than %d characters", maxPatternLength)
	}
	if a.Pattern == "" {
		return searchFound{}, invalid([]any{"pattern"}, "is empty")
	}
	expr := a.Pattern
	if !a.Regex {
		expr = regexp.QuoteMeta(expr)
	}
	if !a.CaseSensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return searchFound{}, invalid([]any{"pattern"}, "is not a valid regular expression: %v", err)
	}
	var docs []searchDoc
	var found searchFound
	if c.Path != "" {
		if a.PathPrefix != "" {
			return searchFound{}, invalid([]any{"path_prefix"}, "give path or path_prefix, not both")
		}
		docs = []searchDoc{{c.Path, c.Kind}}
	} else {
		files, walkCut, err := s.walkTypes(ctx, a.PathPrefix, "path_prefix", "notebook", "file")
		if err != nil {
			return searchFound{}, err
		}
		found.filesCut = walkCut
		for _, f := range files {
			kind := ydoc.KindText
			if f.Type == "notebook" {
				kind = ydoc.KindNotebook
			} else if binaryExt[extOf(f.Path)] {
				continue
			}
			if len(docs) == maxSearchFiles {
				found.filesCut = true
				break
			}
			docs = append(docs, searchDoc{f.Path, kind})
		}
	}
	budget := c.budget - 300 // the envelope and the summary line
	used := 0
	for _, d := range docs {
		if err := ctx.Err(); err != nil {
			return searchFound{}, err
		}
		snap, live, err := s.searchSource(ctx, d)
		if err != nil {
			if c.Path != "" {
				return searchFound{}, openError("path", err)
			}
			found.skipped = append(found.skipped, d.path)
			continue
		}
		found.searched++
		block, n, shown := searchIn(d.path, live, snap, re, a, a.MaxMatches-found.shown)
		if n == 0 {
			continue
		}
		found.docs++
		found.matches += n
		if block == "" {
			continue
		}
		if t := s.tokens.Count(block); used+t > budget && len(found.blocks) > 0 {
			found.budget = true
			continue
		} else {
			used += t
		}
		found.shown += shown
		found.blocks = append(found.blocks, block)
	}
	return found, nil
}

// searchSource is a document's content: the live replica when its room is open, else its file.
func (s *Server) searchSource(ctx context.Context, d searchDoc) (ydoc.Snapshot, bool, error) {
	if room := s.liveRoom(ctx, d.path, d.kind); room != nil {
		var snap ydoc.Snapshot
		err := room.View(ctx, func(doc *ydoc.Doc) error {
			var err error
			snap, err = doc.Snapshot()
			return err
		})
		return snap, true, err
	}
	snap, err := s.fileContent(ctx, d.path, d.kind)
	return snap, false, err
}

// searchIn searches one document and renders its block (at most room matches shown); it returns
// the block, how many matches the document holds and how many the block shows.
func searchIn(p string, live bool, snap ydoc.Snapshot, re *regexp.Regexp, a searchArgs, room int) (string, int, int) {
	var b strings.Builder
	total, shown := 0, 0
	where := "file"
	if live {
		where = "live"
	}
	fmt.Fprintf(&b, "%s (%s)\n", p, where)
	emit := func(head string, lines []string) {
		hits := matchLines(lines, re)
		total += len(hits)
		if len(hits) == 0 || room-shown <= 0 {
			return
		}
		if len(hits) > room-shown {
			hits = hits[:room-shown]
		}
		shown += len(hits)
		if head != "" {
			b.WriteString(head + "\n")
		}
		writeHits(&b, lines, hits, a.Context)
	}
	if snap.Kind != ydoc.KindNotebook {
		emit("", strings.Split(snap.Text, "\n"))
	} else {
		ids := make([]string, len(snap.Notebook.Cells))
		withIDs := true
		for i, c := range snap.Notebook.Cells {
			ids[i] = c.ID
			withIDs = withIDs && c.ID != ""
		}
		var handles map[string]string
		if withIDs {
			handles = cellHandles(ids)
		}
		for i, c := range snap.Notebook.Cells {
			head := fmt.Sprintf("@%d", i)
			if withIDs {
				head += " " + handles[c.ID]
			}
			if a.In != "outputs" {
				emit(head, strings.Split(c.Source, "\n"))
			}
			if a.In != "sources" && c.Type == ydoc.CellCode && len(c.Outputs) > 0 {
				var outs []string
				for _, o := range c.Outputs {
					outs = append(outs, strings.TrimRight(textOutput(o, 1<<20), "\n"))
				}
				emit(head+" out", strings.Split(strings.Join(outs, "\n"), "\n"))
			}
		}
	}
	if shown == 0 {
		return "", total, 0
	}
	return b.String(), total, shown
}

// matchLines returns the indexes of the lines re matches.
func matchLines(lines []string, re *regexp.Regexp) []int {
	var out []int
	for i, l := range lines {
		if re.MatchString(l) {
			out = append(out, i)
		}
	}
	return out
}

// writeHits writes the matching lines ("12:text") with context lines ("11-text") around them,
// "…" between groups that do not touch.
func writeHits(b *strings.Builder, lines []string, hits []int, context int) {
	hit := map[int]bool{}
	for _, h := range hits {
		hit[h] = true
	}
	last := -1
	for _, h := range hits {
		from, to := max(h-context, last+1), min(h+context, len(lines)-1)
		if last >= 0 && from > last+1 {
			b.WriteString("…\n")
		}
		for i := from; i <= to; i++ {
			sep := "-"
			if hit[i] {
				sep = ":"
			}
			line := lines[i]
			if utf8.RuneCountInString(line) > maxShownLine {
				line = string([]rune(line)[:maxShownLine]) + "…"
			}
			fmt.Fprintf(b, "%d%s%s\n", i+1, sep, line)
		}
		last = max(last, to)
	}
}

func renderSearch(_ *call, a searchArgs, f searchFound) result {
	where := map[string]string{"both": "sources and outputs", "sources": "sources", "outputs": "outputs"}[a.In]
	kind := ""
	if a.Regex {
		kind = " (regex)"
	}
	head := fmt.Sprintf("%q%s in %s: %d match%s in %d of %d documents searched", a.Pattern, kind, where, f.matches, plural(f.matches, "es"), f.docs, f.searched)
	var notes []string
	if f.matches > f.shown {
		why := "max_matches"
		if f.budget {
			why = "the token budget"
		}
		notes = append(notes, fmt.Sprintf("%d shown (%s): narrow the pattern or the path to see the rest", f.shown, why))
	}
	if f.filesCut {
		notes = append(notes, fmt.Sprintf("the search stopped at %d documents: narrow path_prefix", maxSearchFiles))
	}
	if len(f.skipped) > 0 {
		notes = append(notes, fmt.Sprintf("%d documents could not be read: %s", len(f.skipped), strings.Join(f.skipped[:min(len(f.skipped), 5)], ", ")))
	}
	text := head + "\n" + strings.Join(f.blocks, "")
	if len(notes) > 0 {
		text += "[" + strings.Join(notes, "; ") + "]\n"
	}
	out := map[string]any{"matches": f.matches, "shown": f.shown, "documents": f.docs, "searched": f.searched, "content": text}
	if len(notes) > 0 {
		out["truncated"] = true
	}
	return result{Data: out, Text: text}
}

func plural(n int, suffix string) string {
	if n == 1 {
		return ""
	}
	return suffix
}
