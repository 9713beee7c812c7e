package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// Who may call what. A request over HTTP carries the identity its bearer token maps to (auth/);
// stdio requests carry none and may do everything (the local user started the process). Tools a
// caller may not use are hidden from tools/list and refused on call; documents outside its path
// globs are refused to every tool, resource and prompt, and left out of listings.

// scopeOf derives a tool's scope: reading needs read, execution needs execute, kernel restarts
// and interrupts need admin, everything else writes.
func scopeOf(op *operation) auth.Scope {
	switch {
	case op.Name == "restart_kernel" || op.Name == "interrupt_kernel":
		return auth.ScopeAdmin
	case op.Category == "execution" && !op.ReadOnly:
		return auth.ScopeExecute
	case op.ReadOnly:
		return auth.ScopeRead
	}
	return auth.ScopeWrite
}

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

// permit refuses a call the caller's identity does not allow, and records in the audit log the
// calls that change something.
func (s *Server) permit(ctx context.Context, op *operation, args map[string]any) *toolError {
	p, _ := args["path"].(string)
	id, ok := auth.IdentityFrom(ctx)
	if ok {
		if !id.Can(op.Scope) {
			return failf("not permitted: %s needs the %q scope; token %q has %s", op.Name, op.Scope, id.Name, scopeList(id))
		}
		if p != "" {
			if clean, err := bridge.CleanPath(p); err == nil && !id.MayAccess(clean) {
				return failf("not permitted: token %q may not use %q (outside its paths)", id.Name, clean)
			}
		}
	}
	if op.Scope != auth.ScopeRead {
		who := "stdio"
		if ok {
			who = id.Name
		}
		s.log.Info().Str("audit", op.Name).Str("who", who).Str("scope", string(op.Scope)).Str("path", p).Msg("tool call")
	}
	return nil
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

// mayRead refuses a document outside the caller's paths (resources, prompts, listings).
func mayRead(ctx context.Context, p string) error {
	id, ok := auth.IdentityFrom(ctx)
	if !ok {
		return nil
	}
	if !id.Can(auth.ScopeRead) {
		return fmt.Errorf("not permitted: token %q has no read scope", id.Name)
	}
	if !id.MayAccess(p) {
		return fmt.Errorf("not permitted: token %q may not read %q (outside its paths)", id.Name, p)
	}
	return nil
}

// visible reports whether a listing may show a path to the caller.
func visible(ctx context.Context, p string) bool { return mayRead(ctx, p) == nil }
