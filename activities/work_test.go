package activities_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestRunWorkHeartbeatsTheAttempt protects the late-result and refund reasons (the net-effect rule
// via the workflow's step 4 (docs/design.md)): RunWork runs the runner with Temporal's attempt
// number, records it on the job row and heartbeats it, so a timeout can say how many attempts the
// work had.
func TestRunWorkHeartbeatsTheAttempt(t *testing.T) {
	ledger := pricedLedger()
	ledger.Grant("acme", 100)
	ledger.AddPlaceholder(acmeJob("render-4"), "fixed-40")
	_, err := ledger.Charge(context.Background(), acmeJob("render-4"))
	require.NoError(t, err)
	runner := &activities.SimulatedRunner{Duration: 5 * time.Millisecond}
	env := newEnv(t, ledger, runner)
	var mu sync.Mutex
	var beats []int
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var attempt int
		require.NoError(t, details.Get(&attempt))
		mu.Lock()
		beats = append(beats, attempt)
		mu.Unlock()
	})
	var a *activities.Activities

	val, err := env.ExecuteActivity(a.RunWork, activities.WorkRequest{JobID: "render-4", AccountID: "acme", InputRef: "s3://in/render-4"})
	require.NoError(t, err)
	var res activities.WorkResult
	require.NoError(t, val.Get(&res))
	assert.Equal(t, 1, res.Attempt)
	assert.Equal(t, "sim://render-4/attempt-1", res.OutputRef)
	assert.False(t, res.FinishedAt.IsZero())
	mu.Lock()
	assert.Contains(t, beats, 1)
	mu.Unlock()
	job, _ := ledger.Job(acmeJob("render-4"))
	assert.Equal(t, 1, job.Attempts)
	assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, ledger.Kinds(acmeJob("render-4")), "running the work moves no money")
}

// TestRunWorkFailures protects the workflow's steps 2 and 4 (docs/design.md): a failed attempt is retryable and says
// which attempt it was; a failure the runner marks permanent is not retried, so the refund comes
// without waiting for pointless attempts. Each failure carries the code its customer will be told
// (gpu_failed, or invalid_result for an answer that cannot be billed), and the runner's words only
// scrubbed of credentials (trust: they go to Temporal's history and the worker's log), with no raw
// error left in the failure's cause.
func TestRunWorkFailures(t *testing.T) {
	ledger := pricedLedger()
	var a *activities.Activities
	for _, tc := range []struct {
		name, errType string
		runErr        error
		nonRetryable  bool
		reason        ledgerdb.Reason
		message       string
	}{
		{"transient", activities.ErrorTypeWorkFailed, errors.New("GPU preempted"), false, ledgerdb.ReasonGPUFailed, "GPU preempted"},
		{"permanent", activities.ErrorTypeWorkFailedPermanently, errors.Join(errors.New("input unreadable"), activities.ErrWorkPermanent), true,
			ledgerdb.ReasonGPUFailed, "input unreadable"},
		{"invalid result", activities.ErrorTypeWorkFailed, fmt.Errorf("%w: unknown status %q", activities.ErrInvalidResult, "exploded"), false,
			ledgerdb.ReasonInvalidResult, `unknown status "exploded"`},
		{"credentials", activities.ErrorTypeWorkFailedPermanently,
			fmt.Errorf("%w: connect to postgres://svc:hunter2@10.0.3.7:5432/gpu failed; token=abc123", activities.ErrWorkPermanent), true,
			ledgerdb.ReasonGPUFailed, "connect to postgres://svc:***@10.0.3.7:5432/gpu failed; token=***"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, ledger, runnerFunc(func(context.Context, activities.WorkRequest) (activities.WorkResult, error) {
				return activities.WorkResult{}, tc.runErr
			}))
			_, err := env.ExecuteActivity(a.RunWork, activities.WorkRequest{JobID: "render-5", AccountID: "acme"})
			appErr := appError(t, err, tc.errType, tc.nonRetryable)
			var f activities.WorkFailure
			require.NoError(t, appErr.Details(&f))
			assert.Equal(t, 1, f.Attempt)
			assert.Equal(t, tc.reason, f.Reason)
			assert.Contains(t, f.Message, tc.message)
			assert.NotContains(t, err.Error(), "hunter2")
			assert.NotContains(t, err.Error(), "abc123")
			assert.Nil(t, errors.Unwrap(appErr), "the runner's raw error is not kept as the cause")
		})
	}
}
