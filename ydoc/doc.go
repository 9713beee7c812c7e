// Package ydoc is the Yjs side of the sidecar, written as pure code: the y-websocket wire
// protocol (a lib0 codec, sync, awareness and Jupyter's RAW frames, and a bounds-checked parser
// for every update before the CRDT library sees it), the document models jupyter_ydoc defines
// (Doc: a notebook's cells, outputs and metadata, or a text file, with Txn for edits, Change for
// what changed, undo, restore and diffs), the edits agents make as values (Edit: InsertCells,
// UpdateCells, DeleteCells, MoveCells, ClearOutputs, EditText, Restore, Undo — each with its
// guards, its rules for running again after a reset, and its Outcome; edit.go), and Replica,
// the room's replica: its document and the Yjs sync protocol that keeps it in step.
//
// Replica is a state machine in the style of etcd's raft RawNode: inputs are method calls
// (Connect for a fresh transport, Receive for a server frame, Propose for an edit value, Tick for
// logical time, Reset to rebuild the document), outputs are the Output each returns (frames to
// send, document changes, edit outcomes) for the caller to carry out. bridge.Room's goroutine is
// that caller; tests drive a Replica directly, against another Replica or a scripted peer.
//
// What it owns: the only import of github.com/skyterra/y-crdt in the module (tests included:
// they drive ydoc as shipped), every workaround that library needs, and the y-crdt lock —
// y-crdt is not goroutine-safe even across documents, so every call into it, from every room,
// holds one lock (crdtlock.go; the one global of the module).
//
// What it may import: the standard library, y-crdt and zerolog. What it must never do: start a
// goroutine, read the clock (time arrives as arguments), touch a socket, or know of rooms, MCP or
// tools.
package ydoc
