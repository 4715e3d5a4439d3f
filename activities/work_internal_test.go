package activities

import (
	"context"
	"errors"
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

// TestRunWithHeartbeatsHonoursCancellation protects the workflow's step 3 (docs/design.md): when a result signal
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

// TestParseScenario checks the input references that pick a simulated story, and that a
// malformed one falls back to the runner's own settings rather than to a surprise.
func TestParseScenario(t *testing.T) {
	for ref, want := range map[string]Scenario{
		"sim:ok":              {Kind: ScenarioSucceed},
		"sim:fail":            {Kind: ScenarioFail},
		"sim:hang":            {Kind: ScenarioHang},
		"sim:late:3":          {Kind: ScenarioLate, Attempt: 3},
		"sim:ok-on-attempt:2": {Kind: ScenarioSucceedOnAttempt, Attempt: 2},
	} {
		got, ok := ParseScenario(ref)
		if !ok || got != want {
			t.Errorf("ParseScenario(%q) = %+v, %v; want %+v", ref, got, ok, want)
		}
		if got.String() != ref {
			t.Errorf("%+v.String() = %q; want %q", got, got.String(), ref)
		}
	}
	for _, ref := range []string{"", "s3://bucket/input", "sim:", "sim:late", "sim:late:0", "sim:late:x", "sim:ok:1", "sim:explode"} {
		if got, ok := ParseScenario(ref); ok {
			t.Errorf("ParseScenario(%q) = %+v; want no scenario", ref, got)
		}
	}
}

// TestSimulatedScenarios runs the runner's scenarios on real clocks, briefly.
func TestSimulatedScenarios(t *testing.T) {
	r := &SimulatedRunner{Duration: time.Millisecond}
	ctx := context.Background()
	if _, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:fail"}); err == nil {
		t.Error("sim:fail succeeded")
	}
	if _, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:ok-on-attempt:2"}); err == nil {
		t.Error("sim:ok-on-attempt:2 succeeded on attempt 1")
	}
	res, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 2, InputRef: "sim:ok-on-attempt:2"})
	if err != nil || res.Attempt != 2 {
		t.Errorf("sim:ok-on-attempt:2 on attempt 2 = %+v, %v", res, err)
	}
	hangCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := r.Run(hangCtx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:hang"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sim:hang ended with %v; want the deadline", err)
	}
}
