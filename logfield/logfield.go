// Package logfield names the fields of the sidecar's structured logs, once, so that a log query
// for a document, a room or a tool finds every line about it whatever package wrote it. It holds
// constants only and imports nothing. bridge, tools, execution and cmd use it; jupyter, ydoc and
// auth, whose only imports are the standard library and their one protocol library, write the
// same names as literals.
package logfield

// Field names. A document is always "path" (root-relative), never "room_path" or "doc".
const (
	Path      = "path"       // a document path, relative to the Jupyter root
	Kind      = "kind"       // notebook or text
	Fork      = "fork_id"    // a fork room of the document
	RoomID    = "room_id"    // the collaboration room (format:type:file id)
	FileID    = "file_id"    // the server's stable id of a file
	SessionID = "session_id" // a document session or an MCP session
	Tool      = "tool"       // an MCP tool name
	URI       = "uri"        // an MCP resource URI
	Kernel    = "kernel"     // a kernel id
	Job       = "job"        // an execution job id
	Cell      = "cell"       // a cell id
	Transport = "transport"  // stdio or http
	Addr      = "addr"       // a listening address
	Scheme    = "scheme"     // http or https
	Component = "component"  // which part of the process logs (for shared loggers)
	Audit     = "audit"      // the tool of an audited (changing) call
	Who       = "who"        // the caller of an audited call (token name, jupyter:<user>, stdio)
	Scope     = "scope"      // the scope an audited call needed
	RetryIn   = "retry_in"   // the delay before a reconnect
	Reason    = "reason"     // why something happens (a replica rebuilt)
	Sync      = "sync"       // a Yjs sync message type
	Jupyter   = "jupyter"    // the jupyter-server base URL (never with a token)
	User      = "jupyter_user"
	Engine    = "engine"    // the server's collaboration engine
	FileHash  = "file_hash" // the hash of a document's file, as the contents API gives it
	Outcome   = "outcome"   // how a request to the server ended (saves: success, skipped, failed, …)
	Dir       = "dir"       // a directory of the sidecar's own (the state directory)
	Lineage   = "lineage"   // a lineage of a document's write-ahead log (one replica of one server document)
)
