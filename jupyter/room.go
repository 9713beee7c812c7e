package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
)

// Collaboration room websocket: binary Yjs frames on /api/collaboration/room/{roomId}.

// MaxRoomFrame is the read limit on room sockets. The server accepts 1 GiB messages; a
// whole-notebook sync step 2 can be tens of MB, and a small limit kills big notebooks (1009).
const MaxRoomFrame = 1 << 30

// CloseError is a websocket close received from the server.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("websocket closed with code %d", e.Code)
	}
	return fmt.Sprintf("websocket closed with code %d: %s", e.Code, e.Reason)
}

// CloseCode returns the close code (1003 session problems, 4404 file not found, ...).
func (e *CloseError) CloseCode() int { return e.Code }

// CloseReason returns the close reason (JSON for 1003).
func (e *CloseError) CloseReason() string { return e.Reason }

// RoomConn is one room websocket. Read must be called from one goroutine and Write from one
// other; Ping and Close may be called from anywhere (gorilla's concurrency rules).
type RoomConn struct {
	ws   *websocket.Conn
	idle time.Duration
}

// DialRoom opens the websocket of a collaboration room with the token in a header.
func (c *Client) DialRoom(ctx context.Context, roomID, sessionID string) (*RoomConn, error) {
	u := c.endpoint("api", "collaboration", "room")
	u.Path += "/" + roomID
	u.RawPath = "" // room ids (format:type:uuid, or a fork's hex) need no escaping
	if sessionID != "" {
		u.RawQuery = url.Values{"sessionId": {sessionID}}.Encode()
	}
	ws, err := c.dialWebsocket(ctx, u, 64<<10)
	if err != nil {
		return nil, err
	}
	return &RoomConn{ws: ws, idle: c.idle}, nil
}

// Read returns the next binary frame; a socket silent for IdleTimeout (the caller pings it more
// often than that) fails with a timeout. Text frames (never sent by the server) are skipped.
func (r *RoomConn) Read() ([]byte, error) {
	for {
		typ, data, err := r.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return nil, &CloseError{Code: ce.Code, Reason: ce.Text}
			}
			return nil, err
		}
		_ = r.ws.SetReadDeadline(time.Now().Add(r.idle))
		if typ == websocket.BinaryMessage {
			return data, nil
		}
	}
}

// Write sends one binary frame.
func (r *RoomConn) Write(data []byte, deadline time.Time) error {
	if err := r.ws.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return r.ws.WriteMessage(websocket.BinaryMessage, data)
}

// Ping sends a websocket ping; the pong extends the read deadline.
func (r *RoomConn) Ping(deadline time.Time) error {
	return r.ws.WriteControl(websocket.PingMessage, nil, deadline)
}

// CloseNormal sends a normal close frame, then closes the connection.
func (r *RoomConn) CloseNormal(deadline time.Time) error {
	err := r.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), deadline)
	if cerr := r.ws.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close closes the connection at once, unblocking Read.
func (r *RoomConn) Close() error { return r.ws.Close() }
