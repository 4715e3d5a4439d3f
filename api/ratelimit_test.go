package api

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
)

func bucketOf(i int) bucketKey { return sha256.Sum256([]byte(fmt.Sprint(i))) }

// TestLimiterIsATokenBucket checks the bucket's arithmetic: a fresh key has its burst, a spent
// one waits for its next token — and is told how long — and tokens come back at the rate, never
// above the burst.
func TestLimiterIsATokenBucket(t *testing.T) {
	l := newLimiter(config.RateLimit{PerSecond: 2, Burst: 3}, 100)
	t0 := time.Unix(1_700_000_000, 0)
	for range 3 {
		ok, _ := l.take(bucketOf(1), t0)
		require.True(t, ok)
	}
	ok, wait := l.take(bucketOf(1), t0)
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, wait, "two tokens a second: the next in half a second")
	ok, _ = l.take(bucketOf(1), t0.Add(500*time.Millisecond))
	require.True(t, ok)
	ok, _ = l.take(bucketOf(2), t0)
	require.True(t, ok, "another key is not touched")

	later := t0.Add(time.Hour)
	for range 3 {
		ok, _ = l.take(bucketOf(1), later)
		require.True(t, ok)
	}
	ok, _ = l.take(bucketOf(1), later)
	require.False(t, ok, "an hour idle refills the burst, not more")
	require.Nil(t, newLimiter(config.RateLimit{}, 100), "a rate of 0 turns the limit off")
}

// TestLimiterStaysBounded checks the limiter's memory: a bucket idle long enough to have refilled
// is forgotten (forgetting it changes nothing: a new one starts full), and however many keys a
// client invents, at most maxBuckets are kept.
func TestLimiterStaysBounded(t *testing.T) {
	l := newLimiter(config.RateLimit{PerSecond: 10, Burst: 5}, 1000)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 10_000 {
		ok, _ := l.take(bucketOf(i), t0)
		require.True(t, ok)
		require.LessOrEqual(t, l.size(), 1000)
	}
	for range 4 {
		_, _ = l.take(bucketOf(-1), t0)
	}
	require.Equal(t, 1000, l.size())

	// Half a second refills a burst of 5 at 10 a second: every other bucket is as good as new.
	ok, _ := l.take(bucketOf(-2), t0.Add(500*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, 1, l.size(), "idle buckets are forgotten")
}
