// Package auth decides who may call what on the MCP endpoint.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

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

// Bearer wraps next so that only requests carrying "Authorization: Bearer <token>" with one of
// the configured tokens reach it. Tokens are compared in constant time (as SHA-256 digests, so
// their lengths do not leak either). Failures get 401 with a WWW-Authenticate header.
func Bearer(opts BearerOptions, next http.Handler) (http.Handler, error) {
	if len(opts.Tokens) == 0 && len(opts.Entries) == 0 {
		return nil, errors.New("auth: at least one bearer token is required")
	}
	creds := make([]credential, 0, len(opts.Tokens)+len(opts.Entries))
	for i, t := range opts.Tokens {
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
	for _, e := range opts.Entries {
		id, err := NewIdentity(e.Name, e.Scopes, e.Paths)
		if err != nil {
			return nil, fmt.Errorf("auth: token %q: %w", e.Name, err)
		}
		var c credential
		if d, err := hex.DecodeString(e.TokenSHA256); err != nil || len(d) != 32 {
			return nil, fmt.Errorf("auth: token %q: token_sha256 must be 64 hex digits", e.Name)
		} else {
			copy(c.digest[:], d)
		}
		c.id = id
		creds = append(creds, c)
	}
	realm := opts.Realm
	if realm == "" {
		realm = "jupyter-collab-mcp"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			challenge(w, realm, "", "missing bearer token")
			return
		}
		d := sha256.Sum256([]byte(token))
		found := -1
		for i, c := range creds { // every credential is compared: the time does not say which matched
			if subtle.ConstantTimeCompare(d[:], c.digest[:]) == 1 {
				found = i
			}
		}
		if found < 0 {
			challenge(w, realm, "invalid_token", "invalid bearer token")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), creds[found].id)))
	}), nil
}

func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func challenge(w http.ResponseWriter, realm, code, msg string) {
	v := `Bearer realm="` + realm + `"`
	if code != "" {
		v += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":"unauthorized","message":"` + msg + `"}` + "\n"))
}
