//go:build integration

package faults

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The proxy itself: forwards, cuts, stalls without losing bytes, delays.
func TestProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := StartProxy(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, msg string, within time.Duration) (string, error) {
		_ = c.SetDeadline(time.Now().Add(within))
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		return strings.TrimSuffix(line, "\n"), err
	}

	c, r := dial()
	if got, err := roundTrip(c, r, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("forwarding: %q %v", got, err)
	}

	// Stall: nothing comes back while stalled, everything after Resume, in order.
	p.Stall()
	if got, err := roundTrip(c, r, "held", 400*time.Millisecond); err == nil {
		t.Fatalf("a stalled proxy forwarded %q", got)
	}
	c2, r2 := dial() // a new connection during a stall is accepted but held too
	_ = c2.SetDeadline(time.Now().Add(400 * time.Millisecond))
	if _, err := c2.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.ReadString('\n'); err == nil {
		t.Fatal("a connection opened during a stall was forwarded")
	}
	p.Resume()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("after resume: %q %v", line, err)
	}
	_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := r2.ReadString('\n'); err != nil || line != "new\n" {
		t.Fatalf("new connection after resume: %q %v", line, err)
	}

	// Delay: a round trip crosses the proxy twice.
	p.SetDelay(100 * time.Millisecond)
	begin := time.Now()
	if got, err := roundTrip(c, r, "slow", 5*time.Second); err != nil || got != "slow" {
		t.Fatalf("with delay: %q %v", got, err)
	}
	if el := time.Since(begin); el < 200*time.Millisecond {
		t.Errorf("round trip with 100 ms delay each way took %v", el)
	}
	p.SetDelay(0)

	// Cut: both open connections are dropped; new ones work.
	if n := p.Cut(); n != 2 {
		t.Errorf("cut %d connections, want 2", n)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("a cut connection still reads")
	}
	c3, r3 := dial()
	if got, err := roundTrip(c3, r3, "again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("after a cut: %q %v", got, err)
	}
	for _, x := range []net.Conn{c, c2, c3} {
		_ = x.Close()
	}
}
