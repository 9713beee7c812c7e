package tools

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Without its goroutine the accountant counts on the caller's; with it, flush returns only once
// everything handed over before is counted; after the goroutine ended, inline again.
func TestAccountantCountsOffThePathAndFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAccountant()
		var n atomic.Int64
		a.do(func() { n.Add(1) })
		if n.Load() != 1 {
			t.Fatalf("without its goroutine the job must run inline: %d", n.Load())
		}
		a.flush(context.Background()) // nothing running: returns at once

		ctx, cancel := context.WithCancel(context.Background())
		done := a.start(ctx)
		gate := make(chan struct{})
		a.do(func() { <-gate; n.Add(1) }) // queued: the caller does not wait for it
		for i := 0; i < 10; i++ {
			a.do(func() { n.Add(1) })
		}
		if got := n.Load(); got != 1 {
			t.Fatalf("queued jobs ran on the caller's goroutine: %d", got)
		}
		flushed := make(chan struct{})
		go func() { a.flush(context.Background()); close(flushed) }()
		synctest.Wait() // flush is waiting, or returned
		select {
		case <-flushed:
			t.Fatal("flush returned before the queued jobs ran")
		default:
		}
		close(gate)
		select {
		case <-flushed:
		case <-time.After(5 * time.Second):
			t.Fatal("flush never returned")
		}
		if got := n.Load(); got != 12 {
			t.Fatalf("after flush: %d jobs counted, want 12", got)
		}

		cancel()
		<-done
		a.do(func() { n.Add(1) })
		if got := n.Load(); got != 13 {
			t.Fatalf("after the goroutine ended the job must run inline: %d", got)
		}
		a.flush(context.Background())
	})
}

// A full queue makes the caller count itself rather than wait.
func TestAccountantFullQueueCountsInline(t *testing.T) {
	a := &accountant{jobs: make(chan func(), 1), running: true, stopped: make(chan struct{})}
	var n atomic.Int64
	a.do(func() { n.Add(1) }) // fills the queue (no goroutine takes it)
	a.do(func() { n.Add(10) })
	if got := n.Load(); got != 10 {
		t.Fatalf("the second job should have run inline: %d", got)
	}
}
