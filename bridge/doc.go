// Package bridge keeps live replicas of Jupyter collaboration rooms: it joins them (a document
// session, then the room websocket), stays in sync, reconnects and resyncs with backoff, rebuilds
// a replica the server lost, confirms edits with the server, keeps restorable versions, and
// publishes every room's changes as events.
//
// Room drives one ydoc.Replica, as etcd's node drives a RawNode: one goroutine (Room.Run) owns
// the replica and the connection state; each websocket has one reader and one writer goroutine
// (link); public methods hand requests to the room goroutine and wait for the answer, the
// room's end or the caller's context (call, whenReady). Manager opens rooms by path, shares them
// between callers, closes idle ones, keeps the agent's presence in every room and in JupyterLab's
// global awareness, and manages forks.
//
// What it may import: ydoc, logfield, the standard library and zerolog. What it needs from
// jupyter-server it declares itself (Jupyter, ForkServer, EngineServer, Conn), and bridge/jupyterserver
// implements that with the jupyter package; bridge/bridgetest is an in-memory fake of it for
// tests. What it must never do: import jupyter, know of MCP or tools (its results are plain Go
// values, its errors name no tool), or block a room goroutine on the network.
package bridge
