package auth

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ProtectedResourceMetadataPath is where RFC 9728 metadata lives for the /mcp resource
// (the well-known prefix followed by the resource's path).
const ProtectedResourceMetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the RFC 9728 protected-resource metadata document.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// PublicBase returns the endpoint's public base URL: publicURL when configured (behind a
// proxy), otherwise the scheme and Host of the request (the Host has passed OriginGuard).
func PublicBase(publicURL string, r *http.Request) string {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// MetadataURL is the metadata URL advertised in WWW-Authenticate for the resource at
// <base>/mcp.
func MetadataURL(publicURL string, r *http.Request) string {
	base := PublicBase(publicURL, r)
	// RFC 9728 §3.1: the well-known segment goes between the host and the resource's path.
	scheme, rest, _ := strings.Cut(base, "://")
	host, path, _ := strings.Cut(rest, "/")
	if path != "" {
		path = "/" + path
	}
	return scheme + "://" + host + ProtectedResourceMetadataPath + path + "/mcp"
}

// MetadataHandler serves the metadata. Tokens are issued out of band (MCP_TOKEN, a tokens file,
// or Jupyter), so no authorization server is listed unless one is configured.
func MetadataHandler(publicURL string, authorizationServers []string, docs string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")
			return
		}
		md := ResourceMetadata{
			Resource:               PublicBase(publicURL, r) + "/mcp",
			AuthorizationServers:   authorizationServers,
			ScopesSupported:        []string{string(ScopeRead), string(ScopeWrite), string(ScopeExecute), string(ScopeAdmin)},
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "jupyter-collab-mcp",
			ResourceDocumentation:  docs,
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		_ = json.NewEncoder(w).Encode(md)
	})
}
