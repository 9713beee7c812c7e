package tools

import (
	"context"
	"encoding/json"
)

// The one tool-handler shape. A tool is its schema (an operation), its action and its renderer:
//
//	s.register(&operation{Name: "get_document_history", Input: …,
//		Doc: docRef{Arg: "path", Ref: refAny, Open: true},          // the door opens it first
//		Run: handle(s.history, renderHistory)})
//
// The generic handler (operation.go) validates the arguments against the schema, lets the call
// through the door — which resolves, checks and opens the document the tool declared — and calls
// Run with the call. handle decodes the arguments into the tool's typed struct, runs the action
// (which acts on the document and returns what happened as plain values), and the renderer turns
// that into the result the model reads; the handler then holds it to the token budget. An edit
// tool is made by handleEdit (idempotent.go) from a builder (its arguments as an edit value,
// ydoc.Edit), what it does once the server holds the edit, and its renderer.

// runner is an operation's body: what the generic handler calls once the door let the call in.
type runner func(ctx context.Context, c *call) (result, error)

// call is one tool call past the door.
type call struct {
	doc                 // the document the call names: checked, and opened when the tool asks
	tool string         // the tool's name
	args map[string]any // the validated arguments (options several tools decode alike)
	// budget is the call's max_tokens (the server's default when not given).
	budget int
}

// handle makes an operation's body from its action and its renderer. The arguments are decoded
// into A; a field the call leaves out has the schema's default (the handler put it in), so a
// default is written once, in the schema.
func handle[A, R any](act func(context.Context, *call, A) (R, error), render func(*call, A, R) result) runner {
	return func(ctx context.Context, c *call) (result, error) {
		var a A
		if err := decodeArgs(c.args, &a); err != nil {
			return result{}, err
		}
		r, err := act(ctx, c, a)
		if err != nil {
			return result{}, err
		}
		return render(c, a, r), nil
	}
}

// data is the renderer of actions whose outcome is already what the model reads.
func data[A any](_ *call, _ A, v map[string]any) result { return result{Data: v} }

// decodeArgs converts validated arguments into a typed struct.
func decodeArgs(args map[string]any, dst any) error {
	b, err := json.Marshal(args)
	if err != nil {
		return failf("arguments: %v", err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return failf("arguments: %v", err)
	}
	return nil
}
