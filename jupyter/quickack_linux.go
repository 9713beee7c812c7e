//go:build linux

package jupyter

import (
	"net"
	"syscall"
)

// quickAckConn is a TCP connection that acknowledges at once what each read returned.
//
// Linux delays an ACK by up to 40 ms when it expects to piggyback it on data of ours, which a
// sender with Nagle's algorithm on (tornado, so jupyter-server) then waits for before it sends
// its next small segment. Setting TCP_QUICKACK sends an ACK the kernel is holding back at once
// and leaves "ping-pong" mode; it is not sticky (the kernel re-enters that mode when we send), so
// it is set again after every read that returned data. After the read rather than before it:
// the ACK then leaves as soon as the reader wakes up, not when it next asks for more (which
// gorilla does only once it has parsed what it buffered). Measured against the real server,
// both placements remove the stall; after measured no worse.
type quickAckConn struct {
	net.Conn
	raw syscall.RawConn
}

// quickAck wraps a TCP connection; any other connection is returned as it is.
func quickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &quickAckConn{Conn: c, raw: raw}
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		// A failure (the socket closed meanwhile) is for the next read to report.
		_ = c.raw.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		})
	}
	return n, err
}
