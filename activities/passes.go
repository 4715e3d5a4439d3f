package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// DefaultPassHeartbeat is how often a scheduled pass (reconcile, expiry) heartbeats while it
// works. The passes' heartbeat timeout is a few of these.
const DefaultPassHeartbeat = 5 * time.Second

// passProgress is what a scheduled pass has done so far, its result R, shared between the pass
// and its heartbeat.
type passProgress[R any] struct {
	mu    sync.Mutex
	out   R
	clone func(R) R
}

// newPassProgress starts from what an earlier attempt of the same pass recorded in its last
// heartbeat (it died with its worker), as carry keeps it: what that attempt did is done, and the
// retry finds nothing left of it to count. clone copies a result so that the copy shares nothing
// with the pass's own (nil: a plain copy does).
func newPassProgress[R any](ctx context.Context, carry func(earlier R) R, clone func(R) R) *passProgress[R] {
	p := &passProgress[R]{clone: clone}
	var earlier R
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &earlier) == nil {
		p.out = carry(earlier)
	}
	return p
}

// update changes the counts under the lock.
func (p *passProgress[R]) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
}

// result is a copy of the counts.
func (p *passProgress[R]) result() R {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clone == nil {
		return p.out
	}
	return p.clone(p.out)
}

// heartbeatEvery heartbeats the counts so far at once and then every interval, until the returned
// stop is called; stop records the counts once more. A pass heartbeats on a clock, not per item,
// so that its heartbeat timeout can be short whatever one item costs: a schedule skips a pass
// while one runs, and a worker killed mid-pass holds the pass's work for that timeout. The last
// record is for an attempt that fails: the SDK sends an attempt's buffered heartbeat when it
// fails, so its retry counts on from everything the attempt did, not from its last beat.
func (p *passProgress[R]) heartbeatEvery(ctx context.Context, interval time.Duration) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	activity.RecordHeartbeat(ctx, p.result())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx, p.result())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		activity.RecordHeartbeat(ctx, p.result())
	}
}

// passHeartbeat is every, or DefaultPassHeartbeat when every is zero.
func passHeartbeat(every time.Duration) time.Duration {
	if every > 0 {
		return every
	}
	return DefaultPassHeartbeat
}
