//go:build integration

// Package faults injects bounded, randomized faults between the real sidecar and the real
// jupyter-server (server kills, dropped websockets, kernel restarts, stalls) and checks with an
// independent Yjs peer and the file on disk that no edit was lost or applied twice.
package faults

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a loopback TCP proxy under test control. Everything the sidecar sends to
// jupyter-server (REST and websockets alike) goes through it, so the test can cut every
// connection, add latency, or stall traffic (connections stay open, nothing moves) and resume.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[*proxyConn]struct{}
	delay   time.Duration
	resume  chan struct{} // nil when flowing; closed by Resume to release stalled pumps
	closed  bool
	pumpsWG sync.WaitGroup

	Accepted atomic.Int64 // connections accepted
	Cuts     atomic.Int64 // connections closed by Cut
}

type proxyConn struct {
	down, up net.Conn
	done     chan struct{} // closed when the pair is torn down
	once     sync.Once
	halves   atomic.Int32 // directions that saw EOF
}

func (c *proxyConn) close(abort bool) {
	c.once.Do(func() {
		if abort { // RST instead of FIN: the peer sees a dropped link, not a polite close
			if tc, ok := c.down.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			if tc, ok := c.up.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
		close(c.done)
		_ = c.down.Close()
		_ = c.up.Close()
	})
}

// StartProxy listens on a free 127.0.0.1 port and forwards every connection to target
// (host:port).
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.pumpsWG.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy as an http base URL with a trailing slash.
func (p *Proxy) URL() string { return "http://" + p.Addr() + "/" }

func (p *Proxy) accept() {
	defer p.pumpsWG.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.Accepted.Add(1)
		// The upstream dial happens even while stalled: a stall accepts and then holds traffic.
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil { // the server is down: the client sees its connection dropped
			if tc, ok := down.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = down.Close()
			continue
		}
		c := &proxyConn{down: down, up: up, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close(true)
			return
		}
		p.conns[c] = struct{}{}
		p.pumpsWG.Add(2)
		p.mu.Unlock()
		go p.pump(c, down, up)
		go p.pump(c, up, down)
	}
}

// gate blocks while the proxy is stalled, then returns the current delay; false when the pair
// was torn down meanwhile.
func (p *Proxy) gate(c *proxyConn) (time.Duration, bool) {
	for {
		p.mu.Lock()
		resume, delay := p.resume, p.delay
		p.mu.Unlock()
		if resume == nil {
			return delay, true
		}
		select {
		case <-resume:
		case <-c.done:
			return 0, false
		}
	}
}

func (p *Proxy) pump(c *proxyConn, src, dst net.Conn) {
	defer p.pumpsWG.Done()
	defer func() {
		c.close(false)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			delay, ok := p.gate(c)
			if !ok {
				return
			}
			if delay > 0 {
				select {
				case <-time.After(delay):
				case <-c.done:
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// Half-close: pass the FIN on and keep the other direction, until it ends too.
			if errors.Is(err, io.EOF) && c.halves.Add(1) < 2 {
				if tc, ok := dst.(*net.TCPConn); ok && tc.CloseWrite() == nil {
					<-c.done
				}
			}
			return
		}
	}
}

// Cut drops every open connection at once (RST on both sides) and returns how many it dropped.
// New connections are accepted as usual afterwards.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	list := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		list = append(list, c)
	}
	p.mu.Unlock()
	for _, c := range list {
		c.close(true)
	}
	p.Cuts.Add(int64(len(list)))
	return len(list)
}

// Stall stops forwarding in both directions on every connection, open or new, until Resume.
// Bytes already read stay held by the proxy, so nothing is lost or reordered.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

// Resume lets stalled traffic flow again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// SetDelay adds d of latency to every chunk forwarded from now on (0 removes it).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Open is the number of connections currently forwarded.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening, drops every connection and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Resume()
	p.Cut()
	p.pumpsWG.Wait()
}
