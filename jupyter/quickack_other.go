//go:build !linux

package jupyter

import "net"

// quickAck returns c unchanged: TCP_QUICKACK is Linux's. Other systems' delayed-ACK timers
// differ (and cannot be switched per read); the connection works, at their latency.
func quickAck(c net.Conn) net.Conn { return c }
