// Package auth decides who may call what on the MCP endpoint.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// BearerOptions configure bearer-token authentication.
type BearerOptions struct {
	// Tokens accepted; at least one.
	Tokens []string
	// Realm reported in WWW-Authenticate.
	Realm string
}

// Bearer wraps next so that only requests carrying "Authorization: Bearer <token>" with one of
// the configured tokens reach it. Tokens are compared in constant time (as SHA-256 digests, so
// their lengths do not leak either). Failures get 401 with a WWW-Authenticate header.
func Bearer(opts BearerOptions, next http.Handler) (http.Handler, error) {
	if len(opts.Tokens) == 0 {
		return nil, errors.New("auth: at least one bearer token is required")
	}
	digests := make([][32]byte, 0, len(opts.Tokens))
	for _, t := range opts.Tokens {
		if len(t) < 16 {
			return nil, errors.New("auth: bearer tokens must be at least 16 characters")
		}
		digests = append(digests, sha256.Sum256([]byte(t)))
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
		match := 0
		for _, want := range digests {
			match |= subtle.ConstantTimeCompare(d[:], want[:])
		}
		if match != 1 {
			challenge(w, realm, "invalid_token", "invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
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
