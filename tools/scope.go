package tools

import (
	"context"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
)

// Who may call what. A request over HTTP carries the identity its bearer token maps to (auth/);
// stdio requests carry none and may do everything (the local user started the process). Tools a
// caller may not use are hidden from tools/list and refused on call; documents outside its path
// globs are the door's business (door.go): refused to every tool, resource, prompt and
// completion, and left out of every listing and room-wide answer.

// toolFilter hides the tools the caller may not use.
func (s *Server) toolFilter(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	id, ok := auth.IdentityFrom(ctx)
	if !ok {
		return tools
	}
	out := tools[:0:0]
	for _, t := range tools {
		if op := s.opsByName[t.Name]; op != nil && id.Can(op.Scope) {
			out = append(out, t)
		}
	}
	return out
}

// permit refuses a call whose caller lacks the tool's scope. (Documents are the door's: door.go.)
func (s *Server) permit(ctx context.Context, op *operation) *toolError {
	if id, ok := auth.IdentityFrom(ctx); ok && !id.Can(op.Scope) {
		return failf("not permitted: %s needs the %q scope; token %q has %s", op.Name, op.Scope, id.Name, scopeList(id))
	}
	return nil
}

// audit records in the log the calls that change something: who, what, and the document.
func (s *Server) audit(ctx context.Context, op *operation, d doc) {
	if op.Scope == auth.ScopeRead {
		return
	}
	who := "stdio"
	if id, ok := auth.IdentityFrom(ctx); ok {
		who = id.Name
	}
	s.log.Info().Str(logfield.Audit, op.Name).Str(logfield.Who, who).Str(logfield.Scope, string(op.Scope)).Str(logfield.Path, d.Path).Msg("tool call")
}

func scopeList(id auth.Identity) string {
	var names []string
	for _, sc := range id.Scopes() {
		names = append(names, string(sc))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
