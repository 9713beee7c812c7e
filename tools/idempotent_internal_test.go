package tools

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The request id store on its own: who it tells apart, how a repeat waits, what it forgets.

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// counted runs a request, counting how often its work runs.
func counted(t *testing.T, st *requestStore, key requestKey, args string, runs *int) result {
	t.Helper()
	res, err := st.run(context.Background(), key, args, func(*requestEntry) (result, error) {
		*runs++
		return result{Data: map[string]any{"run": *runs, "key": key.id}}, nil
	})
	if err != nil {
		t.Fatalf("run %v: %v", key, err)
	}
	return res
}

func TestRequestStoreKeysAndRepeats(t *testing.T) {
	st := newRequestStore((&fakeClock{now: time.Unix(0, 0)}).Now)
	runs := 0
	ann := requestKey{who: "id:ann", path: "a.ipynb", id: "r"}
	bob := ann
	bob.who = "id:bob"
	other := ann
	other.path = "b.ipynb"
	counted(t, st, ann, "x", &runs)
	counted(t, st, ann, "x", &runs)
	counted(t, st, bob, "x", &runs)
	counted(t, st, other, "x", &runs)
	if runs != 3 {
		t.Errorf("work ran %d times, want once per caller and document", runs)
	}
	if _, err := st.run(context.Background(), ann, "y", nil); err == nil {
		t.Error("other arguments under the same id were not refused")
	}
}

// A repeat while the first call works waits for it and gets its result; the work runs once.
func TestRequestStoreRepeatWaits(t *testing.T) {
	st := newRequestStore(time.Now)
	key := requestKey{id: "w"}
	release := make(chan struct{})
	started := make(chan struct{})
	var mu sync.Mutex
	runs := 0
	work := func(*requestEntry) (result, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		close(started)
		<-release
		return result{Data: "first"}, nil
	}
	res := make(chan result, 2)
	go func() { r, _ := st.run(context.Background(), key, "a", work); res <- r }()
	<-started
	go func() { r, _ := st.run(context.Background(), key, "a", work); res <- r }()
	close(release)
	for range 2 {
		if r := <-res; r.Data != "first" {
			t.Errorf("result %v", r.Data)
		}
	}
	if runs != 1 {
		t.Errorf("work ran %d times", runs)
	}
	// A repeat that gives up while the first still works says so.
	hold := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_, _ = st.run(context.Background(), requestKey{id: "slow"}, "a", func(*requestEntry) (result, error) { close(held); <-hold; return result{}, nil })
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.run(ctx, requestKey{id: "slow"}, "a", nil); err == nil {
		t.Error("a repeat that gave up returned no error")
	}
	close(hold)
}

// Ids are kept requestTTL after their call, at most maxRequests of them, the oldest going first;
// one a call is working on stays.
func TestRequestStoreBounds(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	st := newRequestStore(clock.Now)
	runs := 0
	key := func(i int) requestKey { return requestKey{id: fmt.Sprint(i)} }
	hold, held := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = st.run(context.Background(), requestKey{id: "held"}, "a", func(*requestEntry) (result, error) { close(held); <-hold; return result{}, nil })
	}()
	<-held
	for i := range maxRequests + 50 {
		clock.advance(time.Millisecond)
		counted(t, st, key(i), "a", &runs)
	}
	st.mu.Lock()
	n := len(st.by)
	_, heldKept := st.by[requestKey{id: "held"}]
	st.mu.Unlock()
	if n > maxRequests || !heldKept {
		t.Fatalf("%d ids kept (max %d), the held one kept: %v", n, maxRequests, heldKept)
	}
	runs = 0
	counted(t, st, key(maxRequests+49), "a", &runs) // the newest: remembered
	counted(t, st, key(0), "a", &runs)              // the oldest: forgotten, runs again
	if runs != 1 {
		t.Errorf("after the count bound: %d runs, want the oldest only", runs)
	}
	clock.advance(requestTTL + time.Second)
	runs = 0
	counted(t, st, key(maxRequests+49), "a", &runs)
	if runs != 1 {
		t.Error("an id older than requestTTL was remembered")
	}
	close(hold)
	<-done
}
