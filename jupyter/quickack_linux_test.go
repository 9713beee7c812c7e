//go:build linux

package jupyter

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// nagleServer answers each byte it reads with two one-byte writes, with Nagle's algorithm on,
// as tornado (jupyter-server) writes two websocket frames: the second waits for the ACK of the
// first.
func nagleServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.(*net.TCPConn).SetNoDelay(false)
				b := make([]byte, 1)
				for {
					if _, err := io.ReadFull(c, b); err != nil {
						return
					}
					if _, err := c.Write([]byte("A")); err != nil {
						return
					}
					if _, err := c.Write([]byte("B")); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	return l.Addr().String()
}

// roundTrips returns the median time of request → both answers over n round trips.
func roundTrips(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	var times []time.Duration
	buf := make([]byte, 2)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return times[n/2]
}

// The dialer every jupyter socket uses must not wait for Linux's delayed ACK behind a Nagle
// sender (~40 ms a round trip); a plain connection shows the stall the test guards against.
func TestQuickAckAvoidsTheDelayedAckStall(t *testing.T) {
	addr := nagleServer(t)
	const n = 25
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	stalled := roundTrips(t, plain, n)
	quick, err := dialTCP(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer quick.Close()
	if _, ok := quick.(*quickAckConn); !ok {
		t.Fatalf("dialTCP returned %T, want *quickAckConn", quick)
	}
	fast := roundTrips(t, quick, n)
	t.Logf("median round trip over %d: plain %v, quick ACK %v", n, stalled, fast)
	if stalled < 20*time.Millisecond {
		// The kernel did not delay the ACK for the plain socket either (a system with
		// quickack on the route, or other delayed-ACK rules): nothing to compare against.
		t.Skipf("no delayed-ACK stall without quick ACK on this system (median %v)", stalled)
	}
	if fast > 20*time.Millisecond {
		t.Errorf("median round trip %v with quick ACK (plain: %v): the delayed-ACK stall is back", fast, stalled)
	}
}

// Every websocket the package opens (rooms, kernels) and the REST transport dial through
// dialTCP.
func TestEverySocketUsesQuickAck(t *testing.T) {
	s := newWSServer(t, nil, func(ws *websocket.Conn, r *http.Request) { _, _, _ = ws.ReadMessage() })
	c := tokenClient(t, s.URL, testToken)
	rc, err := c.DialRoom(context.Background(), "r", "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, ok := rc.ws.NetConn().(*quickAckConn); !ok {
		t.Errorf("room socket is a %T", rc.ws.NetConn())
	}
	k, err := c.ConnectKernel(context.Background(), "k", "agent")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.mu.Lock()
	ws := k.ws
	k.mu.Unlock()
	if _, ok := ws.NetConn().(*quickAckConn); !ok {
		t.Errorf("kernel socket is a %T", ws.NetConn())
	}
	var dialled net.Conn
	tr := c.http.Transport.(*http.Transport).Clone()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		dialled = conn
		return conn, err
	}
	c.http.Transport = tr
	_ = c.Status(context.Background())
	if _, ok := dialled.(*quickAckConn); !ok {
		t.Errorf("REST connection is a %T", dialled)
	}
}
