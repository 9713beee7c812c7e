package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// The front: JSON-RPC the sidecar answers or corrects itself, in front of mcp-go, on both
// transports (Streamable HTTP: a handler around mcp-go's; stdio: a reader and a writer around
// its streams).
//
//   - Task calls (tasks.go): tools/call with params.task on an execution tool, and tasks/get,
//     tasks/result, tasks/list, tasks/cancel, are answered here.
//   - Resource error codes: mcp-go reports every error a resource handler returns as -32603
//     (internal error). A read of a resource that does not exist (an unknown file id, job, cell
//     or template; a document the caller's token may not read) is -32002, resource not found
//     (-32602 for requests of protocol 2026-07-28, which folded it into invalid params), and a
//     malformed argument (an empty file id) -32602. Resource handlers say which by the first
//     words of their error (resourceFailure); the front rewrites the code of exactly those
//     error objects. The rewrite keeps the length, so it works on a stream and never touches
//     a JSON string: a string cannot hold the unescaped quotes of the pattern.

// The first words of resource errors, and the codes they get.
const (
	notFoundPrefix = "resource not found: "
	invalidPrefix  = "invalid resource request: "
)

var (
	internalNotFound = []byte(`"code":-32603,"message":"` + notFoundPrefix)
	internalInvalid  = []byte(`"code":-32603,"message":"` + invalidPrefix)
	codeNotFound     = []byte(`"code":-32002,"message":"` + notFoundPrefix)
	codeNotFoundNew  = []byte(`"code":-32602,"message":"` + notFoundPrefix)
	codeInvalid      = []byte(`"code":-32602,"message":"` + invalidPrefix)
)

// fixCodes rewrites the codes of resource errors in outgoing JSON-RPC (modern: the request's
// protocol is 2026-07-28 or later).
func fixCodes(b []byte, modern bool) []byte {
	if !bytes.Contains(b, []byte(`"code":-32603`)) {
		return b
	}
	nf := codeNotFound
	if modern {
		nf = codeNotFoundNew
	}
	b = bytes.ReplaceAll(b, internalNotFound, nf)
	return bytes.ReplaceAll(b, internalInvalid, codeInvalid)
}

// rpcRequest is the part of a JSON-RPC message the front looks at.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ours reports whether the front answers the request.
func (s *Server) ours(r rpcRequest) bool {
	return len(r.ID) > 0 && (isTaskMethod(r.Method) || s.isTaskCall(r.Method, r.Params))
}

// answer runs a request the front answers and returns the JSON-RPC response.
func (s *Server) answer(ctx context.Context, session string, r rpcRequest) []byte {
	res, err := s.handleTask(ctx, session, r.Method, r.Params)
	var out any
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			re = &rpcError{code: mcp.INTERNAL_ERROR, msg: err.Error()}
		}
		out = map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": r.ID, "error": map[string]any{"code": re.code, "message": re.msg}}
	} else {
		out = map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": r.ID, "result": res}
	}
	b, merr := json.Marshal(out)
	if merr != nil {
		b, _ = json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": r.ID, "error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": merr.Error()}})
	}
	return b
}

// modernVersion reports whether a protocol version is 2026-07-28 or later.
func modernVersion(v string) bool { return v >= "2026-07-28" }

// front wraps mcp-go's Streamable HTTP handler.
func (s *Server) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modern := modernVersion(r.Header.Get("Mcp-Protocol-Version"))
		if r.Method != http.MethodPost || modern {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body) // bounded by limitBody
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req rpcRequest
		// Most requests are none of the front's business: decode only those that may be.
		maybe := bytes.Contains(body, []byte(`"tasks/`)) || bytes.Contains(body, []byte(`"task"`)) || bytes.Contains(body, []byte(`"resources/read"`))
		if !maybe || json.Unmarshal(body, &req) != nil { // a batch or garbage: mcp-go's to answer
			next.ServeHTTP(w, r)
			return
		}
		if s.ours(req) {
			session := r.Header.Get("Mcp-Session-Id")
			if status := admitSession(next, r, session); status != http.StatusOK {
				http.Error(w, "unknown, missing or terminated Mcp-Session-Id: initialize first", status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(s.answer(r.Context(), session, req))
			return
		}
		if req.Method == string(mcp.MethodResourcesRead) {
			w = &codeFixer{ResponseWriter: w, modern: modern}
		}
		next.ServeHTTP(w, r)
	})
}

// activityNote is a notification no one handles: passed through mcp-go for a request the front
// answers, it makes mcp-go check the session as for any request and count it as activity for its
// idle sweeper (which would otherwise free the session of a client that only polls a task).
var activityNote = []byte(`{"jsonrpc":"2.0","method":"notifications/jupyter-collab-mcp/activity"}`)

// admitSession asks mcp-go whether the session may send requests: 200 when it may, else the status
// mcp-go gave (404 for an unknown or terminated session, 400 for a missing one).
func admitSession(next http.Handler, r *http.Request, session string) int {
	if session == "" {
		return http.StatusBadRequest
	}
	probe := r.Clone(r.Context())
	probe.Body, probe.ContentLength = io.NopCloser(bytes.NewReader(activityNote)), int64(len(activityNote))
	rec := &statusOnly{header: http.Header{}}
	next.ServeHTTP(rec, probe)
	if rec.status == 0 || rec.status == http.StatusAccepted || rec.status == http.StatusOK {
		return http.StatusOK
	}
	return rec.status
}

// statusOnly is a ResponseWriter that keeps the status and discards the rest.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return len(b), nil
}
func (s *statusOnly) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

// codeFixer rewrites resource error codes in a response as it is written.
type codeFixer struct {
	http.ResponseWriter
	modern bool
}

func (c *codeFixer) Write(b []byte) (int, error) {
	if _, err := c.ResponseWriter.Write(fixCodes(b, c.modern)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *codeFixer) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *codeFixer) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// stdioSession is the session id mcp-go gives its one stdio client.
const stdioSession = "stdio"

// frontStdio returns the streams mcp-go's stdio server should use: requests the front answers
// are taken out of in (their responses written to out), and every line written to out has its
// resource error codes fixed. The reader goroutine ends with in (EOF, or its next line once ctx
// ended or done ran: a blocked read of stdin cannot be interrupted, and the process ends with
// stdin anyway); done waits for the answers still being computed.
func (s *Server) frontStdio(ctx context.Context, in io.Reader, out io.Writer) (io.Reader, io.Writer, func()) {
	w := &lineWriter{out: out}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	go func() {
		defer pw.Close()
		br := bufio.NewReaderSize(in, 64<<10)
		for ctx.Err() == nil {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				var req rpcRequest
				if json.Unmarshal(line, &req) == nil && s.ours(req) {
					wg.Add(1)
					go func() { // a tasks/result may wait for a long run: keep reading
						defer wg.Done()
						_, _ = w.Write(append(s.answer(ctx, stdioSession, req), '\n'))
					}()
				} else if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return pr, w, func() { _ = pr.Close(); wg.Wait() }
}

// lineWriter writes whole lines, one at a time, fixing resource error codes: mcp-go and the
// front share it.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
	buf []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := fixCodes(l.buf[:i+1], false)
		if _, err := l.out.Write(line); err != nil {
			l.buf = l.buf[:0]
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
}
