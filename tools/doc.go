// Package tools is the MCP surface of the sidecar (on mcp-go): the tools, resources, resource
// templates, prompts, completions and resource subscriptions over the live rooms bridge keeps,
// served over stdio or Streamable HTTP.
//
// A tool is its schema, its action and its renderer (an operation made with handle). One
// handler serves them all: it checks the caller's scope, validates the arguments against the
// schema, lets the call through the door — the one place that checks the caller's token against
// the document the call names, resolves it and joins its room — runs the action, and holds the
// rendered result to the token budget. Resources, prompts, completions and subscriptions reach
// documents through the same door (door.go), which is also the only code that calls the room
// manager's document methods.
//
// What it may import: bridge (rooms), execution (runs), ydoc (the document model, to read, and
// the edit values its edit tools decode their arguments into), auth (identities and scopes),
// logfield, mcp-go. What it must never do: reach a document around bridge or around the door,
// write to jupyter-server itself, or keep state a room should own.
package tools
