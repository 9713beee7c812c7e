package auth

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateLimitOptions configure RateLimit.
type RateLimitOptions struct {
	// PerSecond is the sustained request rate per caller; Burst the requests allowed at once.
	PerSecond float64
	Burst     int
	// OnLimited is told when a request was refused, for metrics.
	OnLimited func()
	now       func() time.Time // tests
}

// RateLimit refuses requests beyond a token bucket per caller (the identity's name, or the
// remote address for requests without one) with 429 and Retry-After.
func RateLimit(opts RateLimitOptions, next http.Handler) http.Handler {
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.Burst < 1 {
		opts.Burst = 1
	}
	l := &rateLimiter{opts: opts, buckets: map[string]*bucket{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wait, ok := l.take(callerKey(r)); !ok {
			if opts.OnLimited != nil {
				opts.OnLimited()
			}
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeJSONError(w, http.StatusTooManyRequests, "rate_limited",
				"too many requests for this token: retry after "+strconv.Itoa(int(math.Ceil(wait.Seconds())))+"s")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type bucket struct {
	tokens float64
	last   time.Time
}

type rateLimiter struct {
	opts    RateLimitOptions
	mu      sync.Mutex
	buckets map[string]*bucket
}

// maxBuckets bounds the table; full buckets are forgotten first (they are the same as new ones).
const maxBuckets = 10000

func (l *rateLimiter) take(key string) (time.Duration, bool) {
	now := l.opts.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: float64(l.opts.Burst), last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(float64(l.opts.Burst), b.tokens+now.Sub(b.last).Seconds()*l.opts.PerSecond)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / l.opts.PerSecond * float64(time.Second)), false
}

func (l *rateLimiter) sweep(now time.Time) {
	full := time.Duration(float64(l.opts.Burst) / l.opts.PerSecond * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.last) >= full {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets { // still full of active callers: forget some (they get a fresh burst)
		if len(l.buckets) < maxBuckets {
			break
		}
		delete(l.buckets, k)
	}
}

// callerKey names who a request comes from: its identity, or its remote address without one.
func callerKey(r *http.Request) string {
	if id, ok := IdentityFrom(r.Context()); ok {
		return "id:" + id.Name
	}
	return "addr:" + remoteHost(r)
}

func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// SessionConcurrency bounds the requests one MCP session (Mcp-Session-Id) has in flight; more
// get 429 with Retry-After. GET streams (server-to-client notifications) are not counted: a
// client keeps one open for as long as it lives.
func SessionConcurrency(limit int, onLimited func(), next http.Handler) http.Handler {
	var mu sync.Mutex
	inflight := map[string]int{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Header.Get("Mcp-Session-Id")
		if key == "" { // initialize: no session yet; bound by caller instead
			key = callerKey(r)
		}
		mu.Lock()
		if inflight[key] >= limit {
			mu.Unlock()
			if onLimited != nil {
				onLimited()
			}
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusTooManyRequests, "too_many_concurrent_requests",
				"this MCP session already has "+strconv.Itoa(limit)+" requests in flight; wait for one to finish")
			return
		}
		inflight[key]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			if inflight[key]--; inflight[key] <= 0 {
				delete(inflight, key)
			}
			mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}
