package bridge

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const lo, hi = 10 * time.Millisecond, 80 * time.Millisecond
	bases := []time.Duration{10, 20, 40, 80, 80, 80} // ms: doubling, capped at hi
	for _, tc := range []struct {
		name   string
		rand   float64
		factor float64 // expected delay / base
	}{
		{"no jitter", 0.5, 1.0},
		{"lowest jitter", 0, 0.5},
		{"highest jitter", 0.999999, 1.5},
		{"some jitter", 0.25, 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackoff(lo, hi)
			b.rand = func() float64 { return tc.rand }
			for i, base := range bases {
				want := min(time.Duration(float64(base*time.Millisecond)*tc.factor), hi) // the cap is a hard cap
				if got := b.Next(); absDur(got-want) > time.Microsecond {
					t.Errorf("attempt %d: Next = %v, want %v (base %vms × %.2f)", i, got, want, int(base), tc.factor)
				}
			}
			b.Reset()
			if got, want := b.Next(), time.Duration(float64(lo)*tc.factor); absDur(got-want) > time.Microsecond {
				t.Errorf("after Reset: Next = %v, want %v", got, want)
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	const lo, hi = 5 * time.Millisecond, 50 * time.Millisecond
	b := newBackoff(lo, hi) // real randomness
	base := lo
	for i := range 200 {
		got := b.Next()
		if got < base/2 || got >= base*3/2 || got > hi {
			t.Fatalf("attempt %d: Next = %v, outside [%v, %v) or above the cap %v for base %v", i, got, base/2, base*3/2, hi, base)
		}
		base = min(base*2, hi)
		if i%20 == 19 {
			b.Reset()
			base = lo
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{
		EventChanged: "changed", EventSynced: "synced", EventDisconnected: "disconnected", EventReset: "reset",
		EventFailed: "failed", EventClosed: "closed", EventAwareness: "awareness", EventKind(0): "unknown",
	} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
