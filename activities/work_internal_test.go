package activities

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// blockingRunner ignores everything but its context, like a GPU call in flight.
type blockingRunner struct{ started chan struct{} }

func (r blockingRunner) Run(ctx context.Context, _ WorkRequest) (WorkResult, error) {
	close(r.started)
	<-ctx.Done()
	return WorkResult{}, ctx.Err()
}

// TestRunWithHeartbeatsHonoursCancellation protects DESIGN.md step 3: when a result signal
// cancels the running attempt, the activity gives up at once (and cancels the runner) instead of
// holding a worker slot, and it heartbeats while it waits, since heartbeats are how Temporal's
// cancellation reaches it.
func TestRunWithHeartbeatsHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := blockingRunner{started: make(chan struct{})}
	var beats atomic.Int32
	errc := make(chan error, 1)
	go func() {
		_, err := runWithHeartbeats(ctx, r, WorkRequest{JobID: "j", Attempt: 1}, time.Millisecond, func() { beats.Add(1) })
		errc <- err
	}()
	<-r.started
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("runWithHeartbeats did not return after cancellation")
	}
	if beats.Load() < 2 {
		t.Fatalf("heartbeats = %d, want several while the runner works", beats.Load())
	}
}
