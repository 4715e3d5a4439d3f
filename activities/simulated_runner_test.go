package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestSimulatedRunnerFinishesAfterTheTimeout protects the late success of the workflow's step 4 (docs/design.md): an attempt
// that overruns its deadline answers Temporal with the deadline error, and its result still
// reaches the LateResultReporter afterwards, never an amount.
func TestSimulatedRunnerFinishesAfterTheTimeout(t *testing.T) {
	reported := make(chan activities.WorkResult, 1)
	runner := &activities.SimulatedRunner{
		LateAttempt: 2,
		LateBy:      20 * time.Millisecond,
		Reporter: activities.LateResultReporterFunc(func(_ context.Context, job ledgerdb.JobKey, res activities.WorkResult) error {
			assert.Equal(t, acmeJob("render-6"), job, "the late result names the job and its account")
			reported <- res
			return nil
		}),
	}
	for attempt := 1; attempt <= 2; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := runner.Run(ctx, activities.WorkRequest{JobID: "render-6", AccountID: "acme", Attempt: attempt})
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "attempt %d must time out", attempt)
	}
	select {
	case res := <-reported:
		assert.Equal(t, 2, res.Attempt, "only the LateAttempt reports")
		assert.Equal(t, "sim://render-6/attempt-2", res.OutputRef)
	case <-time.After(5 * time.Second):
		t.Fatal("the late result was never reported")
	}
	select {
	case res := <-reported:
		t.Fatalf("a second late result was reported: %+v", res)
	case <-time.After(50 * time.Millisecond):
	}

	// Attempts after LateAttempt behave normally.
	res, err := runner.Run(context.Background(), activities.WorkRequest{JobID: "render-6", AccountID: "acme", Attempt: 3})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Attempt)
}

// TestSimulatedRunnerFailuresAreSeeded makes the demo's stories repeatable: the same seed fails
// the same attempts, and a zero failure rate never fails.
func TestSimulatedRunnerFailuresAreSeeded(t *testing.T) {
	outcomes := func(r *activities.SimulatedRunner) []bool {
		var out []bool
		for i := range 20 {
			_, err := r.Run(context.Background(), activities.WorkRequest{JobID: "j", Attempt: i + 1})
			out = append(out, err != nil)
		}
		return out
	}
	first := outcomes(&activities.SimulatedRunner{FailureRate: 0.5, Seed: 7})
	assert.Equal(t, first, outcomes(&activities.SimulatedRunner{FailureRate: 0.5, Seed: 7}))
	assert.Contains(t, first, true)
	assert.Contains(t, first, false)
	assert.NotContains(t, outcomes(&activities.SimulatedRunner{Seed: 7}), true)
}
