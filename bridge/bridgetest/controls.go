package bridgetest

// The fake server's test controls: restart it, take it down, refuse or close connections,
// hold echoes and opens, stall or fail writes, and change what it is (engine, files).

import (
	"context"
	"fmt"
	"strings"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ---- test controls ----

// Restart simulates the server process restarting: every connection is dropped with an
// abnormal close; unless opts say otherwise the session id changes and every room is rebuilt
// from the file table as SetRoomLoad says (with LoadStore, from the store the rooms were kept
// in, unless opts.DropStore). Held echoes are lost.
func (s *Server) Restart(opts RestartOptions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropAllLocked(&CloseError{Code: CloseAbnormal, Reason: "server restarted"})
	if s.load == LoadStore {
		for _, r := range s.rooms {
			if r.path == r.id { // a transient room: not stored
				continue
			}
			if state, err := r.doc.EncodeStateAsUpdate(nil); err == nil {
				s.store[r.path] = state
			}
		}
	}
	if opts.DropStore {
		s.store = map[string][]byte{}
	}
	if !opts.KeepDoc {
		s.rooms = map[string]*room{}
	}
	if !opts.KeepSession {
		s.newSessionLocked()
	}
	s.bumpLocked()
}

// SaveFile writes a room's current document to the file table, as the server's save does: a
// room rebuilt later (Restart) starts from it.
func (s *Server) SaveFile(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.roomByPathLocked(p)
	f, ok := s.files[p]
	if r == nil || !ok {
		return fmt.Errorf("fake jupyter: no room or file for %s", p)
	}
	var err error
	if r.kind == ydoc.KindText {
		f.Text, err = r.doc.Text()
	} else {
		f.Notebook, err = r.doc.Notebook()
	}
	if err != nil {
		return err
	}
	s.files[p] = f
	return nil
}

// SetRoomLoad sets how rooms are built from their files from now on (LoadFresh by default).
func (s *Server) SetRoomLoad(l RoomLoad) { s.set(func() { s.load = l }) }

// RoomState returns the encoded state of the room of path, as a peer that syncs with it from
// nothing would receive it (nil when no room is open for it).
func (s *Server) RoomState(p string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.roomByPathLocked(p)
	if r == nil {
		return nil
	}
	b, err := r.doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return nil
	}
	return b
}

// SetEngine sets what document sessions say about the server's engine (bridge.DocSession.Engine)
// and what Engine answers.
func (s *Server) SetEngine(e bridge.EngineInfo) { s.set(func() { s.engine = e }) }

var _ bridge.EngineServer = (*Server)(nil)

// EngineInfo implements bridge.EngineServer: the engine SetEngine set (jupyter-collaboration until
// then).
func (s *Server) EngineInfo(context.Context) (bridge.EngineInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.engine
	if e.Name == "" {
		e.Name = "jupyter-collaboration"
	}
	return e, nil
}

// StepTwoFirst switches to jupyter-server-documents' handshake: no step 1 on connect; a client's
// step 1 is answered with the step 2 and then the server's own step 1.
func (s *Server) StepTwoFirst(on bool) { s.set(func() { s.stepTwoFirst = on }) }

// LoadAsLoader makes the rooms built from now on written by client 0, as jupyter-collaboration's
// loader writes a room it loads from its file: a client's read then waits while the document
// lacks what its file holds (bridge/outputs.go), and EditDoc writes as the loader, as a
// progressive load goes on.
func (s *Server) LoadAsLoader(on bool) { s.set(func() { s.loader = on }) }

// WriteFile replaces a file's content outside the server (an editor, git, a script): rooms are
// not told (the real server would notice within its poll interval; a stopped one never).
func (s *Server) WriteFile(f File) {
	s.set(func() {
		if f.Type == "notebook" {
			f.Notebook = copyNotebook(f.Notebook)
		}
		s.files[f.Path] = f
	})
}

// RemoveFile deletes a file outside the server (rooms are not told).
func (s *Server) RemoveFile(p string) { s.set(func() { delete(s.files, p) }) }

// File returns a copy of a file as it is on "disk".
func (s *Server) File(p string) (File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[p]
	if ok && f.Type == "notebook" {
		f.Notebook = copyNotebook(f.Notebook)
	}
	return f, ok
}

// Saves returns how many times the document at path was saved to its file.
func (s *Server) Saves(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves[p]
}

// CloseWith closes every live connection with a websocket close code and reason.
func (s *Server) CloseWith(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropAllLocked(&CloseError{Code: code, Reason: reason})
	s.bumpLocked()
}

// RejectConnections closes every live and every new connection with code and reason, as a
// server does for a document it cannot load; AcceptConnections undoes it.
func (s *Server) RejectConnections(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject = &CloseError{Code: code, Reason: reason}
	s.dropAllLocked(s.reject)
	s.bumpLocked()
}

// AcceptConnections undoes RejectConnections.
func (s *Server) AcceptConnections() { s.set(func() { s.reject = nil }) }

// RefuseTokens makes OpenDocSession and DialRoom fail with a permanent 403.
func (s *Server) RefuseTokens() { s.set(func() { s.refuse = true }) }

// AcceptTokens undoes RefuseTokens.
func (s *Server) AcceptTokens() { s.set(func() { s.refuse = false }) }

// Down makes the server unreachable: live connections drop with an abnormal close and
// OpenDocSession, DialRoom, Stat and List fail with ErrConnRefused until Up. Rooms and the
// session id are kept (a network outage, not a restart).
func (s *Server) Down() {
	s.set(func() {
		s.down = true
		s.dropAllLocked(&CloseError{Code: CloseAbnormal, Reason: "connection lost"})
	})
}

// Up makes the server reachable again.
func (s *Server) Up() { s.set(func() { s.down = false }) }

// BlockOpen makes OpenDocSession block (until UnblockOpen or its context ends), as a server
// that accepts TCP but never answers would.
func (s *Server) BlockOpen() { s.set(func() { shut(&s.openGate) }) }

// UnblockOpen releases OpenDocSession calls blocked by BlockOpen.
func (s *Server) UnblockOpen() { s.set(func() { open(&s.openGate) }) }

// shut closes a gate: a nil channel is an open one; waiters block on a shut one until open.
func shut(gate *chan struct{}) {
	if *gate == nil {
		*gate = make(chan struct{})
	}
}

// open opens a gate, releasing whoever waits at it.
func open(gate *chan struct{}) {
	if *gate != nil {
		close(*gate)
		*gate = nil
	}
}

// BlockedOpens returns how many OpenDocSession calls are blocked by BlockOpen right now.
func (s *Server) BlockedOpens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openBlocked
}

// EditAfterNextStepOne changes the server document of path as a peer would, right after the server
// answered the next sync step 1 of that room: a collaborator's update that reached the server
// before the step 1 but was read after it (a server reads its sockets in the order its event loop
// polls them). Its broadcast is subject to HoldEchoes.
func (s *Server) EditAfterNextStepOne(p string, fn func(*ydoc.Txn) error) {
	s.set(func() { s.afterStepOne = append(s.afterStepOne, lateEdit{path: p, fn: fn}) })
}

// HoldEchoes holds back update broadcasts (the echo of a client's own edit and peers' edits)
// until ReleaseEchoes. Updates are still applied to the server document.
func (s *Server) HoldEchoes() { s.set(func() { s.holding = true }) }

// ReleaseEchoes stops holding and delivers the held updates to connections still open.
func (s *Server) ReleaseEchoes() {
	s.set(func() {
		s.holding = false
		for _, h := range s.held {
			h.to.pushLocked(h.frame)
		}
		s.held = nil
	})
}

// Held returns how many update frames are being held back.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// EchoAwarenessToSender sets whether a client's awareness frames come back to it (true by
// default, as pycrdt-websocket does it as a keep-alive).
func (s *Server) EchoAwarenessToSender(on bool) { s.set(func() { s.echoToSender = on }) }

// QuietSaves makes saves write the file without publishing dirty=false and the hash, as
// jupyter-collaboration does when a change cancels a save during its (shielded) write.
func (s *Server) QuietSaves(on bool) { s.set(func() { s.quietSaves = on }) }

// HoldSaves makes save requests wait (nothing written, no answer) until ReleaseSaves, as a save
// that takes that long.
func (s *Server) HoldSaves() { s.set(func() { s.holdSaves = true }) }

// ReleaseSaves carries out and answers the held save requests, and stops holding.
func (s *Server) ReleaseSaves() {
	s.set(func() {
		s.holdSaves = false
		for _, h := range s.heldSaves {
			if !h.c.isClosed() {
				s.answerSaveLocked(h.c, h.r, h.id)
			}
		}
		s.heldSaves = nil
	})
}

// HeldSaves returns how many save requests are held.
func (s *Server) HeldSaves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heldSaves)
}

// SetSaveStatus sets the status save requests are answered with (success, skipped, failed).
func (s *Server) SetSaveStatus(status string) { s.set(func() { s.saveStatus = status }) }

// FailWrites makes every Write and Ping on every conn fail with err (nil restores them).
func (s *Server) FailWrites(err error) { s.set(func() { s.writeErr = err }) }

// StallWrites makes Write and Ping block until ResumeWrites, their deadline, or the conn
// closes, like a socket whose peer stopped reading.
func (s *Server) StallWrites() { s.set(func() { shut(&s.stall) }) }

// ResumeWrites releases stalled writes.
func (s *Server) ResumeWrites() { s.set(func() { open(&s.stall) }) }

// OnCloseNormal installs a hook called at the start of every Conn.CloseNormal, without locks
// held; it may block to hold the closing client at that point.
func (s *Server) OnCloseNormal(fn func(*Conn)) { s.set(func() { s.onCloseNorm = fn }) }

// Inject sends a raw frame to every live connection, as if the server had sent it.
func (s *Server) Inject(frame []byte) {
	s.set(func() {
		for _, r := range s.rooms {
			for _, c := range r.conns {
				c.pushLocked(append([]byte(nil), frame...))
			}
		}
	})
}

// MergeAsPeer applies update to the server document of room roomID as a peer's sync would (a
// JupyterLab tab that reconnects with its old copy of the document), building the room from its
// file first when nobody joined it since a restart, and broadcasts it to the room's clients.
func (s *Server) MergeAsPeer(roomID string, update []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	if r == nil {
		parts := strings.SplitN(roomID, ":", 3)
		if len(parts) != 3 {
			return fmt.Errorf("fake jupyter: bad room id %q", roomID)
		}
		var err error
		if r, err = s.newRoomLocked(roomID, parts[1], parts[2]); err != nil {
			return err
		}
		s.rooms[roomID] = r
	}
	if _, _, err := r.doc.Apply(update); err != nil {
		return err
	}
	s.broadcastUpdateLocked(r, append([]byte(nil), update...))
	s.bumpLocked()
	return nil
}
