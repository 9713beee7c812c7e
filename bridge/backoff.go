package bridge

import (
	"math/rand/v2"
	"time"
)

// backoff is an exponential delay with ±50% jitter, never above max. Reset it only once a connection has
// proven healthy (synced), so a server that accepts and then drops cannot make us spin.
type backoff struct {
	min, max time.Duration
	next     time.Duration
	rand     func() float64 // in [0,1); injectable for tests
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, next: min, rand: rand.Float64}
}

// Next returns the delay before the next attempt and doubles the base.
func (b *backoff) Next() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	jitter := 0.5 + b.rand() // 0.5 .. 1.5
	return min(time.Duration(float64(d)*jitter), b.max)
}

// Reset returns to the minimum delay.
func (b *backoff) Reset() { b.next = b.min }
