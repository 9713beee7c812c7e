package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// JupyterUser is what jupyter-server says about a token: GET /api/me with permissions.
type JupyterUser struct {
	Username    string
	Permissions map[string][]string // resource → granted actions
}

// JupyterLookup asks jupyter-server who a token belongs to. It returns ErrInvalidToken when the
// server refuses the token (401/403) and another error when it cannot be asked.
type JupyterLookup func(ctx context.Context, token string) (JupyterUser, error)

// JupyterPermissionsQuery is the permissions query to send with GET /api/me: the actions that
// map onto our scopes (see ScopesFromJupyter).
var JupyterPermissionsQuery = map[string][]string{
	"contents": {"read", "write"},
	"kernels":  {"execute", "write"},
}

// ScopesFromJupyter derives scopes from Jupyter's authorizer: contents:read → read,
// contents:write → write, kernels:execute → execute, kernels:write (restart, interrupt, which
// jupyter-server authorizes as kernels:write) → admin.
func ScopesFromJupyter(perms map[string][]string) []Scope {
	has := func(res, action string) bool {
		for _, a := range perms[res] {
			if a == action {
				return true
			}
		}
		return false
	}
	var out []Scope
	if has("contents", "read") {
		out = append(out, ScopeRead)
	}
	if has("contents", "write") {
		out = append(out, ScopeWrite)
	}
	if has("kernels", "execute") {
		out = append(out, ScopeExecute)
	}
	if has("kernels", "write") && has("kernels", "execute") && has("contents", "write") {
		out = append(out, ScopeAdmin)
	}
	return out
}

// JupyterAuthenticator validates MCP bearer tokens as Jupyter tokens, so a person or agent has
// the same identity and permissions here as in Jupyter. Answers are cached briefly (by the
// token's SHA-256, never the token) so a burst of requests costs one lookup.
type JupyterAuthenticator struct {
	lookup JupyterLookup
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedUser
}

type cachedUser struct {
	id      Identity
	invalid bool
	expires time.Time
}

// maxCachedTokens bounds the cache; a flood of random tokens evicts, it does not grow memory.
const maxCachedTokens = 4096

// NewJupyterAuthenticator caches answers for ttl (default 30 s).
func NewJupyterAuthenticator(lookup JupyterLookup, ttl time.Duration) *JupyterAuthenticator {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &JupyterAuthenticator{lookup: lookup, ttl: ttl, now: time.Now, cache: map[[32]byte]cachedUser{}}
}

// Authenticate implements Authenticator.
func (a *JupyterAuthenticator) Authenticate(ctx context.Context, token string) (Identity, error) {
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		if c.invalid {
			return Identity{}, ErrInvalidToken
		}
		return c.id, nil
	}
	user, err := a.lookup(ctx, token)
	switch {
	case errors.Is(err, ErrInvalidToken):
		a.store(key, cachedUser{invalid: true, expires: now.Add(a.ttl)})
		return Identity{}, ErrInvalidToken
	case err != nil:
		return Identity{}, err // not cached: the next request asks again
	}
	scopes := ScopesFromJupyter(user.Permissions)
	if len(scopes) == 0 {
		// A valid Jupyter user without contents:read may do nothing here; refuse at the door.
		a.store(key, cachedUser{invalid: true, expires: now.Add(a.ttl)})
		return Identity{}, ErrInvalidToken
	}
	id, err := NewIdentity("jupyter:"+user.Username, scopes, nil)
	if err != nil {
		return Identity{}, err
	}
	id.Delegated = true
	a.store(key, cachedUser{id: id, expires: now.Add(a.ttl)})
	return id, nil
}

func (a *JupyterAuthenticator) store(key [32]byte, c cachedUser) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCachedTokens {
		now := a.now()
		for k, v := range a.cache {
			if now.After(v.expires) {
				delete(a.cache, k)
			}
		}
		for k := range a.cache { // still full: drop arbitrary entries (they are only a cache)
			if len(a.cache) < maxCachedTokens {
				break
			}
			delete(a.cache, k)
		}
	}
	a.cache[key] = c
}
