package apiclient

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff spaces the client's retries of transient failures (408, 429, 5xx, network errors,
// answers that are not the API's) with full jitter: each wait is drawn uniformly from zero to a
// ceiling that starts at Initial and doubles with each retry up to Max, so that many clients that
// failed together do not come back together. A 429's or 503's Retry-After, in seconds or as an
// HTTP date, is a floor: the client never asks again sooner than the server asked — up to
// MaxRetryAfter, so that a wrong or hostile header cannot park a job for days. Its zero value
// takes the defaults.
type Backoff struct {
	// Initial is the first retry's ceiling; 500 ms when zero.
	Initial time.Duration
	// Max is the highest ceiling; 30 s when zero.
	Max time.Duration
	// MaxRetryAfter caps the wait a Retry-After can ask for; 5 minutes when zero.
	MaxRetryAfter time.Duration
	// Random draws a number uniformly from [0, n); math/rand/v2's Int64N when nil. Tests set it
	// to make the jitter known.
	Random func(n int64) int64
}

// The defaults of a zero [Backoff].
const (
	DefaultBackoffInitial       = 500 * time.Millisecond
	DefaultBackoffMax           = 30 * time.Second
	DefaultBackoffMaxRetryAfter = 5 * time.Minute
)

// Delay is the wait before retry number retry (0 for the first) after a failure whose answer
// asked for retryAfter (0 when it asked for nothing): a jittered wait up to the retry's ceiling,
// and at least retryAfter, capped at MaxRetryAfter.
func (b Backoff) Delay(retry int, retryAfter time.Duration) time.Duration {
	initial, ceiling := b.Initial, b.Max
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if ceiling <= 0 {
		ceiling = DefaultBackoffMax
	}
	// Double the first ceiling retry times, stopping at the highest (which also keeps the
	// shift from overflowing).
	c := min(initial, ceiling)
	for i := 0; i < retry && c < ceiling; i++ {
		c = min(2*c, ceiling)
	}
	random := b.Random
	if random == nil {
		random = rand.Int64N
	}
	jittered := time.Duration(random(int64(c) + 1))
	return max(jittered, b.honour(retryAfter))
}

// honour is the part of a Retry-After the client waits: all of it, up to MaxRetryAfter.
func (b Backoff) honour(retryAfter time.Duration) time.Duration {
	limit := b.MaxRetryAfter
	if limit <= 0 {
		limit = DefaultBackoffMaxRetryAfter
	}
	return min(max(retryAfter, 0), limit)
}

// parseRetryAfter reads a Retry-After header: a number of seconds, or an HTTP date (a wait until
// then, by the client's clock). Anything else, or a time already past, asks for no wait.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		// Capped long before time.Duration overflows; Backoff caps it far lower.
		return time.Duration(min(secs, 1<<32)) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
