package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Engine is the real-time collaboration extension a jupyter-server runs. Both serve rooms at
// /api/collaboration/room/{format:type:fileId}; they differ in how a client finds the room, in
// the handshake and in what else they offer (docs/engines.md).
type Engine string

const (
	// EngineAuto asks the server (DetectEngine).
	EngineAuto Engine = ""
	// EngineCollaboration is jupyter-collaboration (jupyter-server-ydoc 2.x/3.x): a document
	// session API (PUT /api/collaboration/session/{path}), RAW save messages, forks.
	EngineCollaboration Engine = "collaboration"
	// EngineDocuments is jupyter-server-documents: the file id from POST /api/fileid/index, no
	// session id, no RAW messages, no forks; the server saves by itself.
	EngineDocuments Engine = "documents"
)

// ParseEngine reads the --engine flag: auto (or empty), collaboration or documents.
func ParseEngine(s string) (Engine, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return EngineAuto, nil
	case "collaboration", "jupyter-collaboration":
		return EngineCollaboration, nil
	case "documents", "jupyter-server-documents":
		return EngineDocuments, nil
	}
	return EngineAuto, fmt.Errorf("engine %q: want auto, collaboration or documents", s)
}

// Package is the engine's Python package, as users install it.
func (e Engine) Package() string {
	switch e {
	case EngineCollaboration:
		return "jupyter-collaboration"
	case EngineDocuments:
		return "jupyter-server-documents"
	}
	return "unknown"
}

func (e Engine) String() string {
	if e == EngineAuto {
		return "auto"
	}
	return string(e)
}

// NoEngineError says the server runs no collaboration engine the sidecar can join. It names
// what is missing and how to install it; it carries no server page.
type NoEngineError struct {
	// Both is set when both engines answer: they serve the same room URL and cannot run
	// together.
	Both bool
}

func (e *NoEngineError) Error() string {
	if e.Both {
		return "jupyter-server has both jupyter-collaboration and jupyter-server-documents enabled; " +
			"they serve the same room URL and do not work together: disable one " +
			"(e.g. `jupyter server extension disable jupyter_server_ydoc`) and restart jupyter-server, " +
			"or choose with --engine collaboration|documents"
	}
	return "jupyter-server has no real-time collaboration engine: neither jupyter-collaboration " +
		"(PUT /api/collaboration/session) nor jupyter-server-documents (POST /api/fileid/index) answers. " +
		`Install one into the server's environment — pip install "jupyter-collaboration>=4.4,<6" ` +
		`(or pip install "jupyter-server-documents>=0.3.3,<0.4") — and restart jupyter-server`
}

// Permanent is true: retrying cannot help until someone installs an engine.
func (e *NoEngineError) Permanent() bool { return true }

// DetectEngine asks the server which collaboration engine it runs, from the status of two
// routes only one engine registers, probed with GET (neither route has a GET handler, so an
// installed route answers 405 and has no side effect; a missing one answers 404):
// jupyter-collaboration's /api/collaboration/session/{path} and jupyter-server-documents'
// /api/fileid/index. Nothing is read from the answers' bodies.
func (c *Client) DetectEngine(ctx context.Context) (Engine, error) {
	collab, err := c.routeExists(ctx, c.endpoint("api", "collaboration", "session", "jcm-engine-probe"))
	if err != nil {
		return EngineAuto, err
	}
	docs, err := c.routeExists(ctx, c.endpoint("api", "fileid", "index"))
	if err != nil {
		return EngineAuto, err
	}
	switch {
	case collab && docs:
		return EngineAuto, &NoEngineError{Both: true}
	case collab:
		return EngineCollaboration, nil
	case docs:
		return EngineDocuments, nil
	}
	return EngineAuto, &NoEngineError{}
}

// routeExists probes a route with GET: 405 (or any answer but 404) means a handler is there.
// Transport failures and server errors are returned: they say nothing about the route.
func (c *Client) routeExists(ctx context.Context, u *url.URL) (bool, error) {
	_, err := c.do(ctx, http.MethodGet, u, nil, nil)
	var api *APIError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &api):
		switch {
		case api.Status == http.StatusNotFound:
			return false, nil
		case api.Status == http.StatusMethodNotAllowed:
			return true, nil
		case api.Status >= 500:
			return false, err
		}
		return true, nil // 401/403/400: a handler (or the auth in front of it) answered
	}
	return false, err
}

// IndexFileID returns a file's id from jupyter-server-documents' POST /api/fileid/index?path=
// (the id the file keeps across renames; indexing an unindexed file creates it).
func (c *Client) IndexFileID(ctx context.Context, path string) (string, error) {
	u := c.endpoint("api", "fileid", "index")
	u.RawQuery = url.Values{"path": {strings.Trim(path, "/")}}.Encode()
	var out struct {
		ID string `json:"id"`
	}
	if _, err := c.do(ctx, http.MethodPost, u, nil, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("POST %s: no file id in the answer", u.Path)
	}
	return out.ID, nil
}
