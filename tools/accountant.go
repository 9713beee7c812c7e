package tools

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// accountant counts the tokens of what the server returned off the request path: tokenizing a
// large read costs milliseconds (about 0.7 ms per 1,000 o200k tokens), which the caller would
// otherwise wait for before its answer leaves. A call hands its counting over and returns; the
// accountant's goroutine, owned by Server.Run, counts and records. Readers of the statistics
// (jupyter://stats/tokens, the /metrics scrape) flush first, so they see every call that
// returned before they asked. Without the goroutine (Run not called, or ended) or with its
// queue full, the caller counts itself, as before.
type accountant struct {
	mu      sync.Mutex
	running bool
	jobs    chan func()
	stopped chan struct{} // closed when the goroutine has ended (a fresh one per run)
}

func newAccountant() *accountant {
	return &accountant{jobs: make(chan func(), 256)}
}

// do runs fn on the accountant's goroutine, or here and now when there is none or its queue is
// full.
func (a *accountant) do(fn func()) {
	a.mu.Lock()
	if a.running {
		select {
		case a.jobs <- fn:
			a.mu.Unlock()
			return
		default:
		}
	}
	a.mu.Unlock()
	fn()
}

// start marks the accountant running and starts its goroutine, which counts until ctx ends,
// then counts what is queued and exits; the returned channel is closed then. Calls made after
// start returns are counted off their path.
func (a *accountant) start(ctx context.Context) <-chan struct{} {
	stopped := make(chan struct{})
	a.mu.Lock()
	a.running, a.stopped = true, stopped
	a.mu.Unlock()
	go func() {
		defer func() {
			a.mu.Lock()
			a.running = false // do counts inline from now on: nothing more is queued
			a.mu.Unlock()
			for {
				select {
				case fn := <-a.jobs:
					fn()
				default:
					close(stopped)
					return
				}
			}
		}()
		for {
			select {
			case fn := <-a.jobs:
				fn()
			case <-ctx.Done():
				return
			}
		}
	}()
	return stopped
}

// flush returns once everything queued before it is counted (or ctx ends first).
func (a *accountant) flush(ctx context.Context) {
	a.mu.Lock()
	running, stopped := a.running, a.stopped
	a.mu.Unlock()
	if !running {
		return
	}
	done := make(chan struct{})
	select {
	case a.jobs <- func() { close(done) }:
	case <-stopped:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-stopped: // ended meanwhile: its drain counted what was queued
	case <-ctx.Done():
	}
}

// flushingCollector is a Prometheus collector that flushes the accountant before its series
// are gathered, so a scrape sees the tokens of every call answered before it.
type flushingCollector struct {
	flush func(context.Context)
	prometheus.Collector
}

func (c flushingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.flush(ctx)
	c.Collector.Collect(ch)
}
