package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestScopesNest(t *testing.T) {
	for _, tc := range []struct {
		have []Scope
		can  string // of read, write, execute, admin
	}{
		{[]Scope{ScopeRead}, "r"},
		{[]Scope{ScopeWrite}, "rw"},
		{[]Scope{ScopeExecute}, "rx"},
		{[]Scope{ScopeWrite, ScopeExecute}, "rwx"},
		{[]Scope{ScopeAdmin}, "rwxa"},
	} {
		id, err := NewIdentity("t", tc.have, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, s := range []struct {
			s Scope
			c string
		}{{ScopeRead, "r"}, {ScopeWrite, "w"}, {ScopeExecute, "x"}, {ScopeAdmin, "a"}} {
			if id.Can(s.s) {
				got += s.c
			}
		}
		if got != tc.can {
			t.Errorf("%v can %q, want %q", tc.have, got, tc.can)
		}
	}
	if _, err := NewIdentity("t", []Scope{"root"}, nil); err == nil {
		t.Error("an unknown scope is accepted")
	}
}

func TestPathGlobs(t *testing.T) {
	id, err := NewIdentity("t", []Scope{ScopeRead}, []string{"reports/**", "analysis/*.ipynb", "/top.md"})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"reports/a.ipynb": true, "reports/deep/b.md": true, "reports": true,
		"analysis/x.ipynb": true, "analysis/sub/x.ipynb": false, "analysis/x.py": false,
		"top.md": true, "reportsX/a.ipynb": false, "other.ipynb": false, "": false,
	} {
		if got := id.MayAccess(p); got != want {
			t.Errorf("MayAccess(%q) = %v, want %v", p, got, want)
		}
	}
	for dir, want := range map[string]bool{
		"": true, "reports": true, "reports/deep": true, "analysis": true, "analysis/sub": false,
		"other": false, "reportsX": false, "top.md": false,
	} {
		if got := id.MayEnter(dir); got != want {
			t.Errorf("MayEnter(%q) = %v, want %v", dir, got, want)
		}
	}
	if _, err := NewIdentity("t", []Scope{ScopeRead}, []string{"bad[glob"}); err == nil {
		t.Error("a malformed glob is accepted")
	}
	open, _ := NewIdentity("t", []Scope{ScopeRead}, nil)
	if !open.MayAccess("anything/at/all.ipynb") || open.Restricted() {
		t.Error("an identity without paths is confined")
	}
}

func digest(tok string) string {
	d := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(d[:])
}

func TestParseTokens(t *testing.T) {
	good := `[{"name":"r","token_sha256":"` + digest("reader-token-0123456789") + `","scopes":["read"],"paths":["a/**"]}]`
	if es, err := ParseTokens([]byte(good)); err != nil || len(es) != 1 || es[0].Name != "r" {
		t.Fatalf("ParseTokens: %v %v", es, err)
	}
	for name, bad := range map[string]string{
		"not json":      `{`,
		"empty":         `[]`,
		"no name":       `[{"token_sha256":"` + digest("x") + `","scopes":["read"]}]`,
		"short digest":  `[{"name":"a","token_sha256":"abcd","scopes":["read"]}]`,
		"no scopes":     `[{"name":"a","token_sha256":"` + digest("x") + `"}]`,
		"bad scope":     `[{"name":"a","token_sha256":"` + digest("x") + `","scopes":["sudo"]}]`,
		"unknown field": `[{"name":"a","token":"plain","token_sha256":"` + digest("x") + `","scopes":["read"]}]`,
		"repeated name": `[{"name":"a","token_sha256":"` + digest("x") + `","scopes":["read"]},{"name":"a","token_sha256":"` + digest("y") + `","scopes":["read"]}]`,
	} {
		if _, err := ParseTokens([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBearerIdentity(t *testing.T) {
	es, err := ParseTokens([]byte(`[{"name":"reader","token_sha256":"` + digest("reader-token-0123456789") + `","scopes":["read"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	var seen Identity
	var called bool
	h, err := Bearer(BearerOptions{Tokens: []string{"full-token-0123456789"}, Entries: es}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, called = IdentityFrom(r.Context())
	}))
	if err != nil {
		t.Fatal(err)
	}
	// Each token is checked on its own request, in a fixed order, with what it must and must not
	// be allowed: the identity the handler saw is reset before every request.
	for _, c := range []struct {
		token, name string
		may, mayNot []Scope
	}{
		{"reader-token-0123456789", "reader", []Scope{ScopeRead}, []Scope{ScopeWrite, ScopeExecute, ScopeAdmin}},
		{"full-token-0123456789", "token", AllScopes, nil},
	} {
		seen, called = Identity{}, false
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+c.token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !called || seen.Name != c.name {
			t.Errorf("token for %s: status %d, handler reached %v, identity %q", c.name, rec.Code, called, seen.Name)
			continue
		}
		for _, s := range c.may {
			if !seen.Can(s) {
				t.Errorf("token for %s: lacks scope %s", c.name, s)
			}
		}
		for _, s := range c.mayNot {
			if seen.Can(s) {
				t.Errorf("token for %s: holds scope %s it was not given", c.name, s)
			}
		}
	}
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Set("Authorization", "Bearer reader-token-012345678X")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("wrong token: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}
