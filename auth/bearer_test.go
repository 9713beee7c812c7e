package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBearer(t *testing.T) {
	const good = "0123456789abcdef-good"
	h, err := Bearer(BearerOptions{Tokens: []string{good}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, header string
		want         int
		challenge    string
	}{
		{"missing", "", 401, `Bearer realm="jupyter-collab-mcp"`},
		{"wrong scheme", "Basic " + good, 401, `Bearer realm="jupyter-collab-mcp"`},
		{"wrong token", "Bearer nope-nope-nope-nope", 401, `error="invalid_token"`},
		{"prefix of token", "Bearer " + good[:10], 401, `error="invalid_token"`},
		{"good", "Bearer " + good, 418, ""},
		{"good, lower-case scheme", "bearer " + good, 418, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/mcp", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			if got := rec.Header().Get("WWW-Authenticate"); !strings.Contains(got, tc.challenge) {
				t.Errorf("WWW-Authenticate %q, want it to contain %q", got, tc.challenge)
			}
			if strings.Contains(rec.Body.String(), good) {
				t.Error("response echoes the token")
			}
		})
	}
	if _, err := Bearer(BearerOptions{}, http.NotFoundHandler()); err == nil {
		t.Error("no tokens accepted")
	}
	if _, err := Bearer(BearerOptions{Tokens: []string{"short"}}, http.NotFoundHandler()); err == nil {
		t.Error("a short token was accepted")
	}
}
