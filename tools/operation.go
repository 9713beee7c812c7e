package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
)

// operation is one tool: its documentation, input schema, annotations, the document it works on
// and its body. The same value produces the MCP tool, its jupyter://operations/{name} schema
// resource, the argument validation and the door's check.
type operation struct {
	Name        string
	Title       string
	Category    string // the toolset that holds the tool (toolsets.go)
	Description string
	// Default tools are in the default set: the daily loop of an agent in a notebook (toolsets.go).
	Default bool
	// Scope is what a caller needs to call the tool (scope.go): read (reads), write (edits,
	// presence, forks, restores), execute (runs code), admin (kernel restarts and interrupts).
	Scope auth.Scope
	// Task tools may run as MCP tasks (tasks.go).
	Task        bool
	Input       *schema
	Example     map[string]any
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	// Forkable tools take fork_id and then work in that fork of their document.
	Forkable bool
	// Budgeted tools take max_tokens, and their results are held to it.
	Budgeted bool
	// Retryable tools (edits) take request_id: a repeat with the same id gets the first call's
	// result and applies nothing twice (idempotent.go).
	Retryable bool
	// Doc declares the argument that names the document the tool works on: the door resolves,
	// checks and opens it before Run (door.go).
	Doc docRef
	// Run is the tool's body, usually made by handle (handler.go) from an action and a renderer.
	Run runner
	// App is the ui:// resource of the MCP App that shows the tool's results to the person in
	// the chat (apps.go), for sessions that get the apps.
	App string
}

// result is what a tool returns on success.
type result struct {
	Data  any    // a JSON object: the structured content, and the text unless Text is set
	Text  string // when set, the text content (e.g. a markdown rendering) instead of JSON(Data)
	Extra []mcp.Content
	Saved map[string]int // tokens this result saved, by kind (stats.go)
}

// toolError is a failure the model should see and can act on.
type toolError struct {
	Message string
	Details []detail
	Extra   map[string]any // e.g. "conflicts"
}

func (e *toolError) Error() string { return e.Message }

func failf(format string, args ...any) *toolError {
	return &toolError{Message: fmt.Sprintf(format, args...)}
}

// invalid reports one argument problem.
func invalid(path []any, format string, args ...any) *toolError {
	d := detail{Path: path, Message: fmt.Sprintf(format, args...)}
	return &toolError{Message: "invalid arguments: " + d.String(), Details: []detail{d}}
}

// includeSchemaField is accepted by every tool.
var includeSchemaField = unlisted("includeSchema", boolean("Embed this tool's input schema in the result (it is always embedded when a call fails).").def(false))

// register adds a tool. A tool that names a document without declaring it, or declares no
// scope, is a programming error: register panics, so a new tool cannot forget the door or its
// permission.
func (s *Server) register(op *operation) {
	if op.Scope == "" || (op.ReadOnly && op.Scope != auth.ScopeRead) {
		panic(fmt.Sprintf("tool %s: scope %q (every tool declares one; read-only tools need read)", op.Name, op.Scope)) // a programming error
	}
	if !isToolset(op.Category) && op.Category != discoveryCategory && op.Category != appCategory {
		panic(fmt.Sprintf("tool %s: category %q is no toolset (toolsets.go)", op.Name, op.Category)) // a programming error
	}
	if op.Forkable {
		op.Input.Properties = append(op.Input.Properties, forkField)
	}
	if op.Budgeted {
		op.Input.Properties = append(op.Input.Properties, maxTokensField)
	}
	if op.Retryable {
		op.Input.Properties = append(op.Input.Properties, requestField)
	}
	op.Input.Properties = append(op.Input.Properties, includeSchemaField)
	if err := op.checkDoc(); err != nil {
		panic(err.Error()) // a programming error
	}
	s.ops = append(s.ops, op)
	s.opsByName[op.Name] = op
	raw, err := json.Marshal(op.Input.Listing())
	if err != nil {
		panic(fmt.Sprintf("tool %s: schema does not marshal: %v", op.Name, err)) // a programming error
	}
	tool := mcp.NewToolWithRawSchema(op.Name, op.Description, raw)
	// mcp-go defaults destructive and open-world to true: set every hint explicitly.
	tool.Annotations = mcp.ToolAnnotation{
		Title:           op.Title,
		ReadOnlyHint:    mcp.ToBoolPtr(op.ReadOnly),
		DestructiveHint: mcp.ToBoolPtr(op.Destructive),
		IdempotentHint:  mcp.ToBoolPtr(op.Idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(false), // only the Jupyter server the sidecar is attached to
	}
	if op.Category == appCategory { // called by the apps through the host, never by the model
		tool.Meta = &mcp.Meta{AdditionalFields: map[string]any{"ui": map[string]any{"visibility": []string{"app"}}}}
	}
	s.mcp.AddTool(tool, s.handler(op))
}

// handler is every tool's one path: scope → argument validation → the door (the document the
// call names is resolved, checked and opened) → the tool's body → the token budget → the result
// and its accounting.
func (s *Server) handler(op *operation) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started, outcome := time.Now(), "ok"
		defer func() { s.metrics.observeCall(op.Name, outcome, time.Since(started)) }()
		ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		defer cancel()
		args := req.GetArguments()
		if args == nil {
			args = map[string]any{}
		}
		if m := req.Params.Meta; m != nil && m.ProgressToken != nil {
			ctx = context.WithValue(ctx, progressKey{}, m.ProgressToken)
		}
		if err := s.permit(ctx, op); err != nil {
			outcome = "denied"
			return s.failure(op, err), nil
		}
		if err := s.offered(ctx, op); err != nil {
			outcome = "denied"
			return s.failure(op, err), nil
		}
		includeSchema, _ := args["includeSchema"].(bool)
		var details []detail
		op.Input.validate(args, nil, &details)
		if len(details) > 0 {
			msg := "invalid arguments: " + details[0].String()
			if len(details) > 1 {
				msg += fmt.Sprintf(" (and %d more)", len(details)-1)
			}
			outcome = "invalid"
			return s.failure(op, &toolError{Message: msg, Details: details}), nil
		}
		args = op.Input.withDefaults(args).(map[string]any) // the schema's defaults are the tool's
		d, err := s.admit(ctx, op, args)
		if err != nil {
			var te *toolError
			if errors.As(err, &te) && len(te.Details) > 0 && te.Details[0].Message == "not permitted" {
				outcome = "denied"
			} else {
				outcome = "error"
			}
			return s.failure(op, asToolError(err)), nil
		}
		s.audit(ctx, op, d)
		res, err := op.Run(ctx, &call{doc: d, tool: op.Name, args: args, budget: s.maxTokensOf(args)})
		var notices []noticeView
		if op.Category != appCategory { // told to the model: an app's call must not take them
			notices = s.takeNotices(ctx) // work lost in a server crash, told once (notices.go)
		}
		if err != nil {
			s.log.Debug().Str(logfield.Tool, op.Name).Err(err).Msg("tool call failed")
			outcome = "error"
			te := asToolError(err)
			if len(notices) > 0 {
				te.Extra = maps.Clone(te.Extra)
				if te.Extra == nil {
					te.Extra = map[string]any{}
				}
				te.Extra["notices"] = notices
			}
			out := s.failure(op, te)
			if op.Category != appCategory { // the token statistics count what the model reads
				s.account(op, d, out, nil)
			}
			return out, nil
		}
		if op.Budgeted {
			res = s.fitTokens(res, s.maxTokensOf(args))
		}
		res = addNotices(res, notices)
		embed := includeSchema || s.opts.AlwaysEmbedSchema
		out := s.success(op, res, embed)
		if op.Category == appCategory { // for an app's view: not what the model reads
			return out, nil
		}
		saved := res.Saved
		if !embed {
			if saved == nil {
				saved = map[string]int{}
			}
			saved[savedLean] += s.schemaTokens(op)
		}
		s.account(op, d, out, saved)
		if d.Named() && d.Fork == "" { // a fork is not the document the human sees
			s.noteTouched(ctx, d)
		}
		return out, nil
	}
}

func (s *Server) success(op *operation, res result, embed bool) *mcp.CallToolResult {
	text := res.Text
	if text == "" {
		b, err := json.Marshal(res.Data)
		if err != nil {
			return s.failure(op, failf("encode result: %v", err))
		}
		text = string(b)
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, StructuredContent: res.Data}
	out.Content = append(out.Content, res.Extra...)
	if embed {
		out.Content = append(out.Content, s.schemaContent(op))
	}
	return out
}

// account records the tokens a model reads from a result.
// It counts on the accountant's goroutine: the result is not changed after it is returned, and
// saved belongs to the call.
func (s *Server) account(op *operation, d doc, out *mcp.CallToolResult, saved map[string]int) {
	s.acct.do(func() {
		n := 0
		for _, c := range out.Content {
			switch v := c.(type) {
			case mcp.TextContent:
				n += s.tokens.Count(v.Text)
			case mcp.EmbeddedResource:
				if r, ok := v.Resource.(mcp.TextResourceContents); ok {
					n += s.tokens.Count(r.Text)
				}
			}
		}
		s.stats.record(op.Name, d.Path, n, saved)
		s.metrics.served(op.Name, n)
	})
}

// failure is {"success": false, "error": ..., "details": [...]} with isError set and the tool's
// schema embedded, so the model can correct the call without another round trip.
func (s *Server) failure(op *operation, e *toolError) *mcp.CallToolResult {
	body := map[string]any{"success": false, "error": e.Message}
	if len(e.Details) > 0 {
		body["details"] = e.Details
	}
	for k, v := range e.Extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{mcp.NewTextContent(string(b)), s.schemaContent(op)},
		StructuredContent: body,
	}
}

func (s *Server) schemaContent(op *operation) mcp.Content {
	b, _ := json.Marshal(s.operationDoc(op))
	priority := 0.5
	return mcp.EmbeddedResource{
		Type:      "resource",
		Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Audience: []mcp.Role{mcp.RoleAssistant}, Priority: &priority}},
		Resource:  mcp.TextResourceContents{URI: operationURI(op.Name), MIMEType: "application/json", Text: string(b)},
	}
}

func operationURI(name string) string { return "jupyter://operations/" + name }

// operationDoc is the schema resource of one operation.
func (s *Server) operationDoc(op *operation) map[string]any {
	return map[string]any{
		"name":         op.Name,
		"title":        op.Title,
		"category":     op.Category,
		"description":  op.Description,
		"input_schema": op.Input.JSON(),
		"example":      op.Example,
		"annotations": map[string]bool{
			"readOnlyHint": op.ReadOnly, "destructiveHint": op.Destructive,
			"idempotentHint": op.Idempotent, "openWorldHint": false,
		},
	}
}

func (s *Server) operationNames() []string {
	names := make([]string, len(s.ops))
	for i, op := range s.ops {
		names[i] = op.Name
	}
	sort.Strings(names)
	return names
}

// registerOperationResources serves the catalog and the per-operation schemas.
func (s *Server) registerOperationResources() {
	s.mcp.AddResource(mcp.NewResource("jupyter://operations", "operations",
		mcp.WithResourceDescription("Catalog of every operation (tool) with its category and schema URI."),
		mcp.WithMIMEType("application/json"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		list := make([]map[string]string, 0, len(s.ops))
		for _, op := range s.ops {
			if op.Category == appCategory {
				continue // the apps' own tools: not for the model
			}
			list = append(list, map[string]string{"name": op.Name, "title": op.Title, "category": op.Category,
				"description": firstSentence(op.Description), "uri": operationURI(op.Name)})
		}
		b, _ := json.Marshal(map[string]any{"operations": list})
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}, nil
	})
	s.mcp.AddResourceTemplate(mcp.NewResourceTemplate("jupyter://operations/{operation}", "operation schema",
		mcp.WithTemplateDescription("One operation: name, title, description, category, input schema and an example call."),
		mcp.WithTemplateMIMEType("application/json"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		name := strings.TrimPrefix(req.Params.URI, "jupyter://operations/")
		op, ok := s.opsByName[name]
		if !ok {
			return nil, fmt.Errorf("%sunknown operation %q; valid operations: %s", notFoundPrefix, name, strings.Join(s.operationNames(), ", "))
		}
		b, _ := json.Marshal(s.operationDoc(op))
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}, nil
	})
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}

// asToolError turns an error from bridge or the server into what the model should read.
func asToolError(err error) *toolError {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	var w *bridge.WithdrawnError
	var u *bridge.UnconfirmedError
	switch {
	case errors.As(err, &w):
		return failf("nothing was changed: the room could not reach jupyter-server in time (%v); try again", w.Err)
	case errors.As(err, &u):
		return failf("the edit is applied in the sidecar's replica but jupyter-server has not confirmed it yet; it will be delivered when the connection recovers. Re-read before retrying to avoid applying it twice")
	case errors.Is(err, bridge.ErrBadPath):
		return &toolError{Message: err.Error(), Details: []detail{{Path: []any{"path"}, Message: err.Error()}}}
	case errors.Is(err, context.DeadlineExceeded):
		return failf("timed out: %v", err)
	}
	return failf("%v", err)
}
