package jupyter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
)

// Websockets to jupyter-server: every one the package opens (rooms, kernel channels) is dialled
// here, so each gets the same authorization, error mapping and socket treatment.
//
// The socket treatment is about delayed ACKs. jupyter-server (tornado) never sets TCP_NODELAY
// on its websockets, so when it writes two frames back to back (a kernel's status and its
// reply, a room's update and the next), Nagle's algorithm holds the second until the first is
// acknowledged — and Linux delays that acknowledgement by up to 40 ms when it expects to
// piggyback it on data of ours. Every socket therefore acknowledges at once what it reads (see
// quickAck: TCP_QUICKACK on Linux, nothing elsewhere). Our own Nagle is off: Go sets TCP_NODELAY
// on every TCP connection.

// IdleTimeout is how long a websocket to jupyter-server may be silent (no frame, ping or pong)
// before it is taken for dead: the read deadline of room and kernel sockets. Our pings make a
// live socket answer well within it. jupyter-server itself closes neither kind for silence:
// tornado's websocket_ping_interval is unset by default (rooms get no server pings), and the
// kernel handler's own keepalive (jupyter_server/base/websocket.py: a ping every ws_ping_interval,
// 30 s, closing after ws_ping_timeout, max(3 × interval, 30 s) = 90 s, without a pong) is
// answered by our reader. Proxies in front of it (nginx's proxy_read_timeout defaults to 60 s)
// are kept open by the same pings. For a room, 40 s also stays under the 45 s after which a
// room rebuilds its replica, so a silent failure does not pass for a short one.
const IdleTimeout = 40 * time.Second

// DefaultPingInterval is how often kernel sockets are pinged unless Options.PingInterval says
// otherwise. Room sockets are pinged by their owner (bridge), by default as often.
const DefaultPingInterval = 15 * time.Second

// CheckPingInterval refuses a ping interval that would let a quiet, healthy socket hit its read
// deadline: the pong must come back within IdleTimeout, with room for one late answer.
func CheckPingInterval(d time.Duration) error {
	if d <= 0 {
		return errors.New("jupyter: the websocket ping interval must be positive")
	}
	if d > IdleTimeout/2 {
		return fmt.Errorf("jupyter: websocket ping interval %v: must be at most %v (half the %v after which a silent socket is taken for dead)", d, IdleTimeout/2, IdleTimeout)
	}
	return nil
}

// keepAlive arms the read deadline of ws and extends it on every ping and pong (frames extend
// it where they are read). The ping handler answers like gorilla's default one.
func keepAlive(ws *websocket.Conn, idle time.Duration) {
	extend := func() error { return ws.SetReadDeadline(time.Now().Add(idle)) }
	_ = extend()
	ws.SetPongHandler(func(string) error { return extend() })
	ws.SetPingHandler(func(data string) error {
		if err := extend(); err != nil {
			return err
		}
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		var ne net.Error
		if errors.As(err, &ne) {
			return nil // the reader meets the broken socket itself
		}
		return err
	})
}

// dialWebsocket opens a websocket to u (an http(s) endpoint URL; the scheme becomes ws(s)) with
// the token or XSRF header and the cookie jar, and sets the read limit and the keepalive read
// deadline (see keepAlive). Errors carry the path and the server's message, never the token or
// an HTML page. subprotocols are offered in the handshake (Sec-WebSocket-Protocol).
func (c *Client) dialWebsocket(ctx context.Context, u *url.URL, bufferSize int, subprotocols ...string) (*websocket.Conn, error) {
	target := *u
	if target.Scheme == "https" {
		target.Scheme = "wss"
	} else {
		target.Scheme = "ws"
	}
	h := http.Header{}
	c.authorize(h)
	d := websocket.Dialer{
		NetDialContext:   dialTCP,
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: c.timeout,
		Jar:              c.jar,
		ReadBufferSize:   bufferSize,
		WriteBufferSize:  bufferSize,
		Subprotocols:     subprotocols,
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ws, resp, err := d.DialContext(ctx, target.String(), h)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return nil, &APIError{Method: "GET", Path: u.Path, Status: resp.StatusCode, Message: serverMessage(body, c.token)}
		}
		return nil, &RequestError{Method: "GET", Path: u.Path, Err: scrubURLError(err)}
	}
	ws.SetReadLimit(MaxRoomFrame)
	keepAlive(ws, c.idle)
	return ws, nil
}

// dialTCP dials a TCP connection whose reads acknowledge at once what they received.
func dialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return quickAck(conn), nil
}
