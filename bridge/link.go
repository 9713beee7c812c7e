package bridge

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// link owns one connection's two goroutines: a reader that decodes frames for the room loop and
// a writer that sends what the loop hands it and pings. The loop never touches the conn while
// the writer runs.
type link struct {
	conn   Conn
	in     chan inbound  // reader → loop
	out    chan []byte   // loop → writer (unbuffered: the loop keeps its own outbox)
	errc   chan error    // first error of reader or writer
	stop   chan struct{} // closed to stop both goroutines
	wdone  chan struct{} // closed when the writer exited
	wg     sync.WaitGroup
	closed bool
	recv   atomic.Int64 // unix nanos of the last frame read, by now
	// The sync step 1s the loop sent and the step 2s it got back (fresh.go); the loop's own.
	stepOnes, stepTwos uint64
	now                func() time.Time // the room's clock; write deadlines are the conn's business, in wall time
}

// lastReceived is when the last frame arrived (zero if none did).
func (k *link) lastReceived() time.Time {
	if n := k.recv.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// inbound is a decoded frame, or a frame that failed to decode.
type inbound struct {
	frame ydoc.Frame
	err   error
}

type linkTimings struct {
	writeTimeout time.Duration
	pingInterval time.Duration
	now          func() time.Time // the room's clock (RoomOptions.Now), for lastReceived
}

func startLink(conn Conn, t linkTimings, log zerolog.Logger) *link {
	k := &link{
		conn:  conn,
		in:    make(chan inbound, 64),
		out:   make(chan []byte),
		errc:  make(chan error, 2),
		stop:  make(chan struct{}),
		wdone: make(chan struct{}),
		now:   t.now,
	}
	if k.now == nil {
		k.now = time.Now
	}
	k.wg.Add(2)
	go k.read()
	go k.write(t, log)
	return k
}

func (k *link) read() {
	defer k.wg.Done()
	for {
		b, err := k.conn.Read()
		if err != nil {
			k.errc <- err
			return
		}
		k.recv.Store(k.now().UnixNano())
		f, derr := ydoc.DecodeFrame(b)
		select {
		case k.in <- inbound{frame: f, err: derr}:
		case <-k.stop:
			return
		}
	}
}

func (k *link) write(t linkTimings, log zerolog.Logger) {
	defer k.wg.Done()
	defer close(k.wdone)
	ping := time.NewTicker(t.pingInterval)
	defer ping.Stop()
	for {
		select {
		case b := <-k.out:
			if err := k.conn.Write(b, time.Now().Add(t.writeTimeout)); err != nil {
				k.errc <- err
				return
			}
		case <-ping.C:
			if err := k.conn.Ping(time.Now().Add(t.writeTimeout)); err != nil {
				log.Debug().Err(err).Msg("ping failed")
				k.errc <- err
				return
			}
		case <-k.stop:
			return
		}
	}
}

// close tears the connection down at once and waits for both goroutines.
func (k *link) close() {
	if k.closed {
		return
	}
	k.closed = true
	close(k.stop)
	_ = k.conn.Close()
	k.wg.Wait()
}

// closeGracefully stops the writer, sends the last frames itself (a null awareness state, edits
// not yet written), sends a normal close and waits for the reader.
func (k *link) closeGracefully(last [][]byte, timeout time.Duration) {
	if k.closed {
		return
	}
	k.closed = true
	close(k.stop)
	select {
	case <-k.wdone: // the writer is gone: this goroutine may write now
	case <-time.After(timeout):
		// The writer is stuck in a write to a dead peer: no point saying goodbye.
		_ = k.conn.Close()
		k.wg.Wait()
		return
	}
	deadline := time.Now().Add(timeout)
	for _, b := range last {
		if k.conn.Write(b, deadline) != nil {
			break
		}
	}
	_ = k.conn.CloseNormal(deadline)
	_ = k.conn.Close()
	k.wg.Wait()
}
