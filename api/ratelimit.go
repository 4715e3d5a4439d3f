package api

import (
	"container/list"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jobbill/jobbill/config"
)

// maxRateBuckets bounds the rate limiter's memory, whatever keys or addresses clients invent: at
// about a hundred bytes a bucket, ten megabytes at most.
const maxRateBuckets = 100_000

// bucketKey names a caller's bucket: the SHA-256 of the bearer credential it presents, or of its
// remote address when it presents none. The credential is hashed rather than looked up, so the
// limit holds for an unknown key too, whatever store the keys live in, and the limiter never keeps
// a secret.
type bucketKey [sha256.Size]byte

// callerBucket is the bucket of a request.
func callerBucket(r *http.Request) bucketKey {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if token = strings.TrimSpace(token); ok && strings.EqualFold(scheme, "Bearer") && token != "" {
		return sha256.Sum256([]byte("key\x00" + token))
	}
	return addressBucket(r)
}

// addressBucket is the bucket of a request's remote address, whatever credential it presents.
func addressBucket(r *http.Request) bucketKey {
	return sha256.Sum256([]byte("address\x00" + RemoteHost(r)))
}

// Limiter is a token bucket per name at the rate of a config.RateLimit, kept as the API's own
// limiter keeps its buckets (bounded, idle ones forgotten), for a door on the API's listener that
// counts its callers its own way: the console, by session and by address. A name is hashed before
// it is kept, so it may be a secret. A nil *Limiter allows everything.
type Limiter struct{ l *limiter }

// NewLimiter is a Limiter at c's rate; nil, which allows everything, when c.PerSecond is 0.
func NewLimiter(c config.RateLimit) *Limiter {
	l := newLimiter(c, maxRateBuckets)
	if l == nil {
		return nil
	}
	return &Limiter{l: l}
}

// Take spends one token of the named bucket at now. When the bucket is empty it spends nothing
// and says how long until the next token.
func (l *Limiter) Take(name string, now time.Time) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	return l.l.take(sha256.Sum256([]byte(name)), now)
}

// Peek says whether the named bucket holds a token at now, and if not how long until it does,
// spending nothing.
func (l *Limiter) Peek(name string, now time.Time) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	return l.l.peek(sha256.Sum256([]byte(name)), now)
}

// RemoteHost is the host of a request's remote address: what a limit counts a caller by when it
// has nothing else (behind a proxy, the proxy's).
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limiter is a token bucket per caller (config.RateLimit). Its buckets are kept in order of last
// use, so that those idle long enough to have refilled — which a new bucket would equal — are
// forgotten from the back, and the oldest go first when maxBuckets are kept.
type limiter struct {
	perSecond, burst float64
	// refill is how long an empty bucket takes to fill: a bucket idle that long is full, and can be
	// forgotten without changing any answer.
	refill     time.Duration
	maxBuckets int

	mu      sync.Mutex
	buckets map[bucketKey]*list.Element // of *bucket
	byUse   *list.List                  // most recently used first
}

type bucket struct {
	key    bucketKey
	tokens float64
	last   time.Time
}

// newLimiter is the limiter of c, keeping at most maxBuckets buckets; nil, which allows
// everything, when c.PerSecond is 0.
func newLimiter(c config.RateLimit, maxBuckets int) *limiter {
	if c.PerSecond <= 0 {
		return nil
	}
	return &limiter{
		perSecond: c.PerSecond, burst: float64(c.Burst),
		refill:     time.Duration(float64(c.Burst) / c.PerSecond * float64(time.Second)),
		maxBuckets: maxBuckets,
		buckets:    map[bucketKey]*list.Element{},
		byUse:      list.New(),
	}
}

// take spends one token of key's bucket at now. When the bucket is empty it spends nothing and
// says how long until the next token.
func (l *limiter) take(key bucketKey, now time.Time) (ok bool, wait time.Duration) {
	return l.use(key, now, true)
}

// peek says whether key's bucket holds a token at now, and if not how long until it does,
// spending nothing.
func (l *limiter) peek(key bucketKey, now time.Time) (ok bool, wait time.Duration) {
	return l.use(key, now, false)
}

// use refills key's bucket to now and, when spend is set and a token is there, spends it.
func (l *limiter) use(key bucketKey, now time.Time, spend bool) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *bucket
	if e, found := l.buckets[key]; found {
		b = e.Value.(*bucket)
		b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.perSecond)
		b.last = now
		l.byUse.MoveToFront(e)
	} else {
		b = &bucket{key: key, tokens: l.burst, last: now}
		l.buckets[key] = l.byUse.PushFront(b)
	}
	l.forget(now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) / l.perSecond * float64(time.Second))
	}
	if spend {
		b.tokens--
	}
	return true, 0
}

// forget drops the buckets idle long enough to be full, and the least recently used beyond
// maxBuckets.
func (l *limiter) forget(now time.Time) {
	for oldest := l.byUse.Back(); oldest != nil; oldest = l.byUse.Back() {
		b := oldest.Value.(*bucket)
		if l.byUse.Len() <= l.maxBuckets && now.Sub(b.last) < l.refill {
			return
		}
		l.byUse.Remove(oldest)
		delete(l.buckets, b.key)
	}
}

// size is how many buckets are kept.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byUse.Len()
}
