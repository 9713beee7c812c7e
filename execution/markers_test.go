package execution

import (
	"slices"
	"testing"
	"time"
)

// judgeMarkers: other sidecars' markers that stopped beating are stale; a beating one is stale
// only when the kernel is idle and it is old enough to judge; for the live ones it says when
// to look again (the earliest time one could go stale). Our own markers are never judged.
func TestJudgeMarkers(t *testing.T) {
	x := &ClientExecutor{instance: "me"}
	x.opts.StaleRun = time.Minute
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return stamp(now.Add(d)) }
	markers := map[string]map[string]any{
		"mine":   {"instance": "me", "since": at(-time.Hour)},
		"dead":   {"instance": "other", "since": at(-time.Hour), "beat": at(-2 * time.Minute)},
		"nobeat": {"instance": "other", "since": at(-time.Hour)},
		"live":   {"instance": "other", "since": at(-time.Hour), "beat": at(-10 * time.Second)},
		"young":  {"instance": "other", "since": at(-2 * time.Second), "beat": at(-2 * time.Second)},
	}
	stale, next := x.judgeMarkers(markers, now, false)
	if !slices.Equal(stale, []string{"dead", "nobeat"}) {
		t.Errorf("busy kernel: stale %v, want dead and nobeat", stale)
	}
	// young settles at since+markerSettle (3 s from now), before live goes stale (50 s).
	if want := now.Add(markerSettle - 2*time.Second); !next.Equal(want) {
		t.Errorf("busy kernel: next %v, want %v", next, want)
	}
	stale, next = x.judgeMarkers(markers, now, true)
	if !slices.Equal(stale, []string{"dead", "live", "nobeat"}) {
		t.Errorf("idle kernel: stale %v, want dead, live and nobeat (young is too young to judge)", stale)
	}
	if want := now.Add(markerSettle - 2*time.Second); !next.Equal(want) {
		t.Errorf("idle kernel: next %v, want %v", next, want)
	}
	delete(markers, "young")
	if _, next = x.judgeMarkers(markers, now, true); !next.IsZero() {
		t.Errorf("nothing live: next %v, want none", next)
	}
}
