package bridgetest

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// ---- Conn ----

// Conn is one in-memory room websocket, implementing bridge.Conn.
type Conn struct {
	srv  *Server
	room *room // nil when the server closed it at once (4404, 1003)

	mu          sync.Mutex
	queue       [][]byte
	wake        chan struct{} // closed and replaced when queue or state changes
	done        chan struct{} // closed when either side closed the conn
	closedLocal bool          // the client called Close or CloseNormal
	remoteErr   error         // the server closed it
	normal      bool          // the client sent a normal close
	received    [][]byte      // frames the client wrote
	pings       int
}

func newConn(s *Server) *Conn {
	return &Conn{srv: s, wake: make(chan struct{}), done: make(chan struct{})}
}

var _ bridge.Conn = (*Conn)(nil)

// pushLocked queues a frame for the client (server lock held).
func (c *Conn) pushLocked(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closedLocal || c.remoteErr != nil {
		return
	}
	c.queue = append(c.queue, frame)
	c.wakeLocked()
}

func (c *Conn) wakeLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// closeRemoteLocked closes the conn from the server side (server lock held): Read returns the
// frames already queued, then err.
func (c *Conn) closeRemoteLocked(err error) {
	c.srv.detachLocked(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closedLocal || c.remoteErr != nil {
		return
	}
	c.remoteErr = err
	close(c.done)
	c.wakeLocked()
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedLocal || c.remoteErr != nil
}

// Read implements bridge.Conn: it blocks until a frame arrives or the conn is closed.
func (c *Conn) Read() ([]byte, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closedLocal:
			c.mu.Unlock()
			return nil, net.ErrClosed
		case len(c.queue) > 0:
			f := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return f, nil
		case c.remoteErr != nil:
			err := c.remoteErr
			c.mu.Unlock()
			return nil, err
		}
		wake := c.wake
		c.mu.Unlock()
		<-wake
	}
}

// Write implements bridge.Conn: the server handles the frame before Write returns.
func (c *Conn) Write(data []byte, deadline time.Time) error {
	if err := c.writable(deadline); err != nil {
		return err
	}
	c.srv.handle(c, data)
	return nil
}

// Ping implements bridge.Conn.
func (c *Conn) Ping(deadline time.Time) error {
	if err := c.writable(deadline); err != nil {
		return err
	}
	c.mu.Lock()
	c.pings++
	c.mu.Unlock()
	return nil
}

// writable applies FailWrites and StallWrites.
func (c *Conn) writable(deadline time.Time) error {
	for {
		if err := c.closedErr(); err != nil {
			return err
		}
		c.srv.mu.Lock()
		werr, stall := c.srv.writeErr, c.srv.stall
		c.srv.mu.Unlock()
		if werr != nil {
			return werr
		}
		if stall == nil {
			return nil
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-stall:
			t.Stop()
		case <-c.done:
			t.Stop()
		case <-t.C:
			return os.ErrDeadlineExceeded
		}
	}
}

func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closedLocal {
		return net.ErrClosed
	}
	return c.remoteErr
}

// CloseNormal implements bridge.Conn: it records a normal close and closes the conn.
func (c *Conn) CloseNormal(deadline time.Time) error {
	c.srv.mu.Lock()
	hook := c.srv.onCloseNorm
	c.srv.mu.Unlock()
	if hook != nil {
		hook(c)
	}
	if err := c.closedErr(); err != nil {
		return err
	}
	c.mu.Lock()
	c.normal = true
	c.mu.Unlock()
	return c.Close()
}

// Close implements bridge.Conn: it unblocks Read and stalled writes.
func (c *Conn) Close() error {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	c.srv.detachLocked(c)
	c.mu.Lock()
	if !c.closedLocal {
		c.closedLocal = true
		if c.remoteErr == nil {
			close(c.done)
		}
		c.wakeLocked()
	}
	c.mu.Unlock()
	c.srv.bumpLocked()
	return nil
}

// Done is closed when either side closed the conn.
func (c *Conn) Done() <-chan struct{} { return c.done }

// ClosedNormally reports whether the client sent a normal close.
func (c *Conn) ClosedNormally() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.normal
}

// ClosedByClient reports whether the client closed the conn (normally or not).
func (c *Conn) ClosedByClient() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedLocal
}

// Received returns the frames the client wrote, decoded; frames that do not decode are left out.
func (c *Conn) Received() []ydoc.Frame {
	c.mu.Lock()
	raw := slices.Clone(c.received)
	c.mu.Unlock()
	out := make([]ydoc.Frame, 0, len(raw))
	for _, b := range raw {
		if f, err := ydoc.DecodeFrame(b); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// CountReceived returns how many frames of a type (and, for MsgSync, subtype) the client wrote.
func (c *Conn) CountReceived(t ydoc.MessageType, sync ydoc.SyncType) int {
	n := 0
	for _, f := range c.Received() {
		if f.Type == t && (t != ydoc.MsgSync || f.Sync == sync) {
			n++
		}
	}
	return n
}

// Pings returns how many pings the client sent.
func (c *Conn) Pings() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pings
}

// ---- awareness wire format (y-protocols) ----

var errShort = errors.New("fake jupyter: truncated awareness update")

func decodeAwareness(b []byte) ([]AwarenessRecord, error) {
	n, b, err := varUint(b)
	if err != nil {
		return nil, err
	}
	var out []AwarenessRecord
	for i := uint64(0); i < n; i++ {
		var r AwarenessRecord
		if r.ClientID, b, err = varUint(b); err != nil {
			return nil, err
		}
		if r.Clock, b, err = varUint(b); err != nil {
			return nil, err
		}
		var l uint64
		if l, b, err = varUint(b); err != nil {
			return nil, err
		}
		if l > uint64(len(b)) {
			return nil, errShort
		}
		if st := b[:l]; strings.TrimSpace(string(st)) != "null" {
			if !json.Valid(st) {
				return nil, errors.New("fake jupyter: awareness state is not JSON")
			}
			r.State = append(json.RawMessage(nil), st...)
		}
		b = b[l:]
		out = append(out, r)
	}
	return out, nil
}

func varUint(b []byte) (uint64, []byte, error) {
	var n uint64
	for i, shift := 0, uint(0); i < len(b) && shift < 64; i, shift = i+1, shift+7 {
		n |= uint64(b[i]&0x7f) << shift
		if b[i] < 0x80 {
			return n, b[i+1:], nil
		}
	}
	return 0, nil, errShort
}
