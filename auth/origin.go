package auth

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// OriginOptions configure OriginGuard.
type OriginOptions struct {
	// AllowedHosts are the host names (without port) requests may be addressed to; "*.example.org"
	// matches subdomains. Empty: any host (the caller decides; see DefaultAllowedHosts).
	AllowedHosts []string
	// AllowedOrigins are browser origins ("https://lab.example.org") allowed besides the
	// endpoint's own origin. "*" allows any (never the default).
	AllowedOrigins []string
	// OnReject is told why a request was refused (host, origin), for metrics.
	OnReject func(reason string)
}

// DefaultAllowedHosts are the names a loopback listener answers to. A DNS-rebinding page
// reaches a loopback port under its own host name, which is not among them.
func DefaultAllowedHosts() []string { return []string{"localhost", "127.0.0.1", "::1"} }

// OriginGuard refuses, with 403, requests whose Host is not allowed (DNS rebinding) and browser
// requests whose Origin is neither the endpoint's own nor an allowed one (cross-site requests
// from pages the user visits). Non-browser clients send no Origin and pass.
func OriginGuard(opts OriginOptions, next http.Handler) http.Handler {
	reject := func(w http.ResponseWriter, reason, msg string) {
		if opts.OnReject != nil {
			opts.OnReject(reason)
		}
		writeJSONError(w, http.StatusForbidden, "forbidden", msg)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostOnly(r.Host)
		if len(opts.AllowedHosts) > 0 && !matchHost(opts.AllowedHosts, host) {
			reject(w, "host", "host "+quoteShort(host)+" is not allowed (see --allowed-hosts)")
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !originAllowed(opts.AllowedOrigins, origin, r.Host) {
			reject(w, "origin", "origin "+quoteShort(origin)+" is not allowed (see --allowed-origins)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func originAllowed(allowed []string, origin, requestHost string) bool {
	for _, a := range allowed {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes "null" (sandboxed frames, file:// pages)
	}
	return strings.EqualFold(u.Host, requestHost) // same origin as the endpoint
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(strings.Trim(hostport, "[]"))
}

func matchHost(allowed []string, host string) bool {
	for _, a := range allowed {
		a = strings.ToLower(strings.Trim(a, "[]"))
		if a == host {
			return true
		}
		if suffix, ok := strings.CutPrefix(a, "*."); ok && strings.HasSuffix(host, "."+suffix) {
			return true
		}
	}
	return false
}

// quoteShort quotes attacker-supplied text for a message, cut to a sane length.
func quoteShort(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "?") + "\""
}
