package jupyter

import (
	"fmt"
	"net/http"
)

// APIError is a non-2xx answer from jupyter-server. It carries method, URL path (never a
// token: tokens travel in headers), status and the server's message.
type APIError struct {
	Method  string
	Path    string
	Status  int
	Message string
}

func (e *APIError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (check JUPYTER_TOKEN)"
	}
	if e.Message == "" {
		return fmt.Sprintf("%s %s: HTTP %d%s", e.Method, e.Path, e.Status, hint)
	}
	return fmt.Sprintf("%s %s: HTTP %d: %s%s", e.Method, e.Path, e.Status, e.Message, hint)
}

// Permanent reports whether retrying cannot help: the token is refused, the resource or the
// API does not exist, or the request is invalid.
func (e *APIError) Permanent() bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusConflict, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// StatusCode returns the HTTP status.
func (e *APIError) StatusCode() int { return e.Status }

// RequestError is a transport failure (connection refused, timeout, reset).
type RequestError struct {
	Method string
	Path   string
	Err    error
}

func (e *RequestError) Error() string { return fmt.Sprintf("%s %s: %v", e.Method, e.Path, e.Err) }
func (e *RequestError) Unwrap() error { return e.Err }

// Permanent is false: transport failures are worth retrying.
func (e *RequestError) Permanent() bool { return false }
