// Package auth decides who may call what on the MCP endpoint: bearer tokens (static or
// delegated to jupyter-server), scopes and path globs, Origin/Host checks, rate and
// concurrency limits, and the OAuth protected-resource metadata clients use to discover them.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Authenticator turns a bearer token into an identity.
type Authenticator interface {
	// Authenticate returns ErrInvalidToken for tokens it does not accept; any other error means
	// it could not decide (the upstream that validates tokens is down, say).
	Authenticate(ctx context.Context, token string) (Identity, error)
}

// ErrInvalidToken is returned for tokens that are not accepted.
var ErrInvalidToken = errors.New("invalid bearer token")

// BearerOptions configure bearer-token authentication.
type BearerOptions struct {
	// Tokens accepted with every scope (a single MCP_TOKEN).
	Tokens []string
	// Entries are tokens with their own scopes and paths (a tokens file). Tokens and Entries
	// together: at least one.
	Entries []TokenEntry
	// Realm reported in WWW-Authenticate.
	Realm string
}

type credential struct {
	digest [32]byte
	id     Identity
}

// StaticTokens authenticates against a fixed set of tokens.
type StaticTokens struct{ creds []credential }

// NewStaticTokens checks and digests the configured tokens.
func NewStaticTokens(tokens []string, entries []TokenEntry) (*StaticTokens, error) {
	if len(tokens) == 0 && len(entries) == 0 {
		return nil, errors.New("auth: at least one bearer token is required")
	}
	creds := make([]credential, 0, len(tokens)+len(entries))
	for i, t := range tokens {
		if len(t) < 16 {
			return nil, errors.New("auth: bearer tokens must be at least 16 characters")
		}
		name := "token"
		if i > 0 {
			name = fmt.Sprintf("token-%d", i+1)
		}
		id, _ := NewIdentity(name, AllScopes, nil)
		creds = append(creds, credential{sha256.Sum256([]byte(t)), id})
	}
	for _, e := range entries {
		id, err := NewIdentity(e.Name, e.Scopes, e.Paths)
		if err != nil {
			return nil, fmt.Errorf("auth: token %q: %w", e.Name, err)
		}
		var c credential
		d, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(d) != 32 {
			return nil, fmt.Errorf("auth: token %q: token_sha256 must be 64 hex digits", e.Name)
		}
		copy(c.digest[:], d)
		c.id = id
		creds = append(creds, c)
	}
	return &StaticTokens{creds: creds}, nil
}

// Authenticate compares the token's digest with every credential in constant time (as SHA-256
// digests, so lengths do not leak either; every credential is compared, so the time does not
// say which matched).
func (s *StaticTokens) Authenticate(_ context.Context, token string) (Identity, error) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i, c := range s.creds {
		if subtle.ConstantTimeCompare(d[:], c.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrInvalidToken
	}
	return s.creds[found].id, nil
}

// Bearer wraps next so that only requests carrying one of the configured tokens reach it.
func Bearer(opts BearerOptions, next http.Handler) (http.Handler, error) {
	tokens, err := NewStaticTokens(opts.Tokens, opts.Entries)
	if err != nil {
		return nil, err
	}
	return Middleware(MiddlewareOptions{Authenticator: tokens, Realm: opts.Realm}, next), nil
}

// MiddlewareOptions configure Middleware.
type MiddlewareOptions struct {
	Authenticator Authenticator
	// Realm reported in WWW-Authenticate (default jupyter-collab-mcp).
	Realm string
	// ResourceMetadata returns the URL of the protected-resource metadata (RFC 9728) for a
	// request, advertised in WWW-Authenticate; nil leaves it out.
	ResourceMetadata func(r *http.Request) string
	// OnReject is told why a request was refused (missing, invalid, unavailable), for metrics.
	OnReject func(reason string)
}

// Middleware requires "Authorization: Bearer <token>" and puts the caller's identity in the
// request context. Failures get 401 with a WWW-Authenticate challenge; an authenticator that
// cannot decide gets 503, so a Jupyter outage is not reported as a bad token.
func Middleware(opts MiddlewareOptions, next http.Handler) http.Handler {
	realm := opts.Realm
	if realm == "" {
		realm = "jupyter-collab-mcp"
	}
	reject := func(reason string) {
		if opts.OnReject != nil {
			opts.OnReject(reason)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		meta := ""
		if opts.ResourceMetadata != nil {
			meta = opts.ResourceMetadata(r)
		}
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			reject("missing")
			challenge(w, realm, meta, "", "missing bearer token")
			return
		}
		id, err := opts.Authenticator.Authenticate(r.Context(), token)
		switch {
		case errors.Is(err, ErrInvalidToken):
			reject("invalid")
			challenge(w, realm, meta, "invalid_token", "invalid bearer token")
			return
		case err != nil:
			reject("unavailable")
			w.Header().Set("Retry-After", "5")
			writeJSONError(w, http.StatusServiceUnavailable, "unavailable", "cannot validate the token now: "+err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}

func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func challenge(w http.ResponseWriter, realm, metadata, code, msg string) {
	v := `Bearer realm="` + realm + `"`
	if metadata != "" {
		v += `, resource_metadata="` + metadata + `"`
	}
	if code != "" {
		v += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", v)
	writeJSONError(w, http.StatusUnauthorized, "unauthorized", msg)
}

// writeJSONError writes {"error": code, "message": msg}. Messages are ours, never a token.
func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}
