package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Completions of prompt arguments and resource template variables: only what the caller may
// see (the door's filtered views).

// completer completes prompt arguments and resource template variables.
type completer struct{ s *Server }

const maxCompletions = 100

func completion(all []string, prefix string) *mcp.Completion {
	var out []string
	for _, v := range all {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	c := &mcp.Completion{Values: out, Total: len(out)}
	if len(out) > maxCompletions {
		c.Values, c.HasMore = out[:maxCompletions], true
	}
	return c
}

func (c completer) CompletePromptArgument(ctx context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	switch arg.Name {
	case "mode":
		return completion(guideModes, arg.Value), nil
	case "extract_type":
		return completion(extractTypes, arg.Value), nil
	case "path":
		fileType := "notebook"
		if prompt == "interleaved-thinking" || prompt == "review_changes" {
			fileType = ""
		}
		return c.paths(ctx, fileType, arg.Value), nil
	case "since_version":
		// versions need the path: completion requests carry earlier arguments in context
		return &mcp.Completion{Values: []string{}}, nil
	}
	return &mcp.Completion{Values: []string{}}, nil
}

// paths completes paths of open rooms and of files in the directory typed so far.
func (c completer) paths(ctx context.Context, fileType, prefix string) *mcp.Completion {
	seen := map[string]bool{}
	var all []string
	for _, r := range c.s.liveRooms(ctx) {
		if !seen[r.Path()] && (fileType == "" || (fileType == "notebook") == (extOf(r.Path()) == "ipynb")) {
			seen[r.Path()] = true
			all = append(all, r.Path())
		}
	}
	dir := ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dir = prefix[:i]
	}
	if entries, err := c.s.listDir(ctx, dir); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name, ".") || seen[e.Path] {
				continue
			}
			if e.Type == "directory" || fileType == "" || e.Type == fileType {
				name := e.Path
				if e.Type == "directory" {
					name += "/"
				}
				seen[e.Path] = true
				all = append(all, name)
			}
		}
	}
	return completion(all, prefix)
}

func (c completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	s := c.s
	switch arg.Name {
	case "file_id":
		kind := ydoc.KindNotebook
		if strings.HasPrefix(uri, uriDocuments) {
			kind = ydoc.KindText
		}
		ids := s.fileIDs(ctx, kind)
		if len(ids) == 0 {
			_, _ = s.readDocList(ctx, kind) // learn the ids
			ids = s.fileIDs(ctx, kind)
		}
		var all []string
		for id := range ids {
			all = append(all, id)
		}
		return completion(all, arg.Value), nil
	case "cell_id":
		p, ok := s.knownPathOf(ctx, cc.Arguments["file_id"], ydoc.KindNotebook)
		if !ok {
			return &mcp.Completion{Values: []string{}}, nil
		}
		room, err := s.openDoc(ctx, p, ydoc.KindNotebook, "")
		if err != nil {
			return nil, fmt.Errorf("complete cell_id: %w", promptErr(err))
		}
		var ids []string
		_ = room.View(ctx, func(d *ydoc.Doc) error {
			ids = d.CellIDs()
			return nil
		})
		return completion(ids, arg.Value), nil
	case "job_id":
		return completion(s.jobIDs(ctx), arg.Value), nil
	case "name":
		return completion(templateNames(), arg.Value), nil
	case "mode":
		return completion(guideModes, arg.Value), nil
	}
	return &mcp.Completion{Values: []string{}}, nil
}
