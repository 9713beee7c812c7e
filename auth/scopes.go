package auth

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Scope is a permission level. Levels nest: write and execute include read; admin includes
// everything.
type Scope string

const (
	ScopeRead    Scope = "read"    // read documents, awareness, history
	ScopeWrite   Scope = "write"   // edit documents, presence, forks, restores, undo
	ScopeExecute Scope = "execute" // run code in kernels
	ScopeAdmin   Scope = "admin"   // restart and interrupt kernels
)

// AllScopes are every scope, for a single MCP_TOKEN.
var AllScopes = []Scope{ScopeRead, ScopeWrite, ScopeExecute, ScopeAdmin}

// Identity is who a request comes from and what it may do.
type Identity struct {
	Name string
	// Delegated is true when the identity is a Jupyter user (--auth jupyter), whose name is
	// worth showing to collaborators.
	Delegated bool
	scopes    map[Scope]bool
	// paths are globs (path.Match syntax, plus a trailing "/**" for a whole tree) the identity's
	// documents must match; none means every path.
	paths []string
}

// NewIdentity builds an identity; unknown scopes are an error.
func NewIdentity(name string, scopes []Scope, paths []string) (Identity, error) {
	id := Identity{Name: name, scopes: map[Scope]bool{}}
	for _, s := range scopes {
		switch s {
		case ScopeRead, ScopeWrite, ScopeExecute, ScopeAdmin:
			id.scopes[s] = true
		default:
			return Identity{}, fmt.Errorf("unknown scope %q: the scopes are read, write, execute, admin", s)
		}
	}
	for _, g := range paths {
		g = strings.TrimPrefix(g, "/")
		if _, err := path.Match(strings.TrimSuffix(g, "/**"), ""); err != nil || g == "" {
			return Identity{}, fmt.Errorf("path glob %q is not valid", g)
		}
		id.paths = append(id.paths, g)
	}
	return id, nil
}

// Can reports whether the identity holds a scope (levels nest: see Scope).
func (id Identity) Can(s Scope) bool {
	if id.scopes[ScopeAdmin] || id.scopes[s] {
		return true
	}
	return s == ScopeRead && (id.scopes[ScopeWrite] || id.scopes[ScopeExecute])
}

// Scopes lists what the identity holds, for messages.
func (id Identity) Scopes() []Scope {
	var out []Scope
	for _, s := range AllScopes {
		if id.scopes[s] {
			out = append(out, s)
		}
	}
	return out
}

// MayAccess reports whether a (cleaned, root-relative) path is within the identity's globs.
func (id Identity) MayAccess(p string) bool {
	if len(id.paths) == 0 {
		return true
	}
	p = strings.TrimPrefix(p, "/")
	for _, g := range id.paths {
		if tree, ok := strings.CutSuffix(g, "/**"); ok {
			if p == tree || strings.HasPrefix(p, tree+"/") {
				return true
			}
			if ok, _ := path.Match(tree, p); ok {
				return true
			}
			continue
		}
		if ok, _ := path.Match(g, p); ok {
			return true
		}
	}
	return false
}

// MayEnter reports whether a (cleaned, root-relative) directory can hold documents within the
// identity's globs: listings descend into it and completions offer it. A directory outside every
// glob is as invisible as the documents in it.
func (id Identity) MayEnter(dir string) bool {
	if len(id.paths) == 0 {
		return true
	}
	dir = strings.Trim(dir, "/")
	if dir == "" {
		return true
	}
	segs := strings.Split(dir, "/")
	for _, g := range id.paths {
		tree, isTree := strings.CutSuffix(g, "/**")
		gsegs := strings.Split(tree, "/")
		if !isTree && len(segs) >= len(gsegs) {
			continue // the glob names files at depth len(gsegs): only directories above them hold some
		}
		ok := true
		for i, seg := range segs {
			if i >= len(gsegs) {
				break // inside the tree
			}
			if m, _ := path.Match(gsegs[i], seg); !m {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Restricted reports whether the identity is confined to some paths.
func (id Identity) Restricted() bool { return len(id.paths) > 0 }

type identityKey struct{}

// WithIdentity returns ctx carrying an identity.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity of a request; ok is false for requests without one (stdio:
// the local user who started the process, with every scope).
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// TokenEntry is one line of a tokens file: the token is stored as its SHA-256 (hex), never in
// clear.
type TokenEntry struct {
	Name        string   `json:"name"`
	TokenSHA256 string   `json:"token_sha256"`
	Scopes      []Scope  `json:"scopes"`
	Paths       []string `json:"paths,omitempty"`
}

// ParseTokens reads a tokens file: a JSON array of entries.
func ParseTokens(b []byte) ([]TokenEntry, error) {
	var entries []TokenEntry
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("tokens file: %w (want a JSON array of {name, token_sha256, scopes, paths})", err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("tokens file: no entries")
	}
	names := map[string]bool{}
	for i, e := range entries {
		if e.Name == "" || names[e.Name] {
			return nil, fmt.Errorf("tokens file: entry %d: name is empty or repeated", i)
		}
		names[e.Name] = true
		if d, err := hex.DecodeString(e.TokenSHA256); err != nil || len(d) != 32 {
			return nil, fmt.Errorf("tokens file: entry %q: token_sha256 must be 64 hex digits (sha256sum of the token)", e.Name)
		}
		if len(e.Scopes) == 0 {
			return nil, fmt.Errorf("tokens file: entry %q: no scopes", e.Name)
		}
		if _, err := NewIdentity(e.Name, e.Scopes, e.Paths); err != nil {
			return nil, fmt.Errorf("tokens file: entry %q: %w", e.Name, err)
		}
	}
	return entries, nil
}
