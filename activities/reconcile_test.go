package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// stuckHealer heals every job at once but stuck, whose heal hangs until its context ends — a heal
// run that a loaded or failing Temporal never completes. Every job it is handed has no open
// workflow.
type stuckHealer struct {
	stuck  ledgerdb.JobKey
	healed []ledgerdb.JobKey
}

func (h *stuckHealer) Resume(context.Context, ledgerdb.JobKey) (ledgerdb.State, ledgerdb.RejectReason, error) {
	return ledgerdb.StateRunning, "", nil
}

func (h *stuckHealer) WithoutOpenWorkflow(_ context.Context, jobs []ledgerdb.Job) ([]ledgerdb.Job, error) {
	return jobs, nil
}

func (h *stuckHealer) Heal(ctx context.Context, job ledgerdb.Job) (bool, error) {
	if job.Key() == h.stuck {
		<-ctx.Done()
		return false, ctx.Err()
	}
	h.healed = append(h.healed, job.Key())
	return true, nil
}

func (h *stuckHealer) ApplyRecordedResult(context.Context, ledgerdb.UnappliedResult) error {
	return nil
}

// TestReconcilePassOutlivesAStuckHeal protects healing with nobody looking: a charged job whose
// workflow closed is refunded by the reconcile pass (the customer does not pay for work nobody
// delivers). One job whose heal never completes must not hold the others: each heal is bounded,
// the stuck one is counted as failed for the next pass, and the pass still heals the rest and
// finishes. Before, the pass handed every running job to one call without a bound per job, and a
// stuck heal held the whole pass until its activity timed out.
func TestReconcilePassOutlivesAStuckHeal(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 1_000)
	stuck := ledgertest.Charged(t, store, account, ledgertest.ID(t, "stuck"), 40, "s3://in").Job.Key()
	other := ledgertest.Charged(t, store, account, ledgertest.ID(t, "other"), 40, "s3://in").Job.Key()
	healer := &stuckHealer{stuck: stuck}
	r := &activities.Reconciler{Ledger: store, Healer: healer, JobTimeout: 200 * time.Millisecond}

	// The pass's own deadline stands for its activity's timeout: far beyond one job's bound.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := r.ReconcileOrphans(ctx, activities.ReconcileInput{AccountIDs: []string{account}})
	require.NoError(t, err, "the pass finishes although one heal is stuck")
	require.Equal(t, 2, out.RunningChecked)
	require.Equal(t, 1, out.Healed)
	require.Equal(t, []ledgerdb.JobKey{other}, healer.healed)
	require.Equal(t, 1, out.Failed, "the stuck heal is left to the next pass: %v", out.Failures)
	require.Contains(t, out.Failures[0], stuck.JobID)
}

// slowHealer's heal of its one job waits until release is closed; its other steps find nothing.
type slowHealer struct {
	release chan struct{}
}

func (h *slowHealer) Resume(context.Context, ledgerdb.JobKey) (ledgerdb.State, ledgerdb.RejectReason, error) {
	return ledgerdb.StateRunning, "", nil
}

func (h *slowHealer) WithoutOpenWorkflow(_ context.Context, jobs []ledgerdb.Job) ([]ledgerdb.Job, error) {
	return jobs, nil
}

func (h *slowHealer) Heal(ctx context.Context, _ ledgerdb.Job) (bool, error) {
	select {
	case <-h.release:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (h *slowHealer) ApplyRecordedResult(context.Context, ledgerdb.UnappliedResult) error {
	return nil
}

// TestReconcilePassHeartbeatsWhileOneJobIsSlow protects healing with nobody looking: a charged job
// whose workflow closed is refunded by the reconcile pass. The pass must heartbeat while one job
// is slow, not only between jobs, so that its heartbeat timeout can be short: the schedule skips
// a pass while one is open, and a worker killed mid-pass stops every heal for that timeout.
// Before, the pass heartbeated once per job under a two-minute timeout, and a killed worker
// stopped every heal for two minutes. The pass runs in the schedule's own workflow, with its
// activity options: the worker sends the first heartbeat at once and the rest batched, every
// 16 s (0.8 of the 20 s timeout), so three heartbeats during the one slow heal take half a minute
// — and only a pass that heartbeats on a clock outlives the timeout to send the third.
func TestReconcilePassHeartbeatsWhileOneJobIsSlow(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 1_000)
	ledgertest.Charged(t, store, account, ledgertest.ID(t, "slow"), 40, "s3://in")
	healer := &slowHealer{release: make(chan struct{})}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(3 * time.Minute) // the environment's idle bound; the test's own is below
	env.RegisterWorkflow(workflows.Reconcile)
	pass := &activities.Reconciler{Ledger: store, Healer: healer, JobTimeout: 5 * time.Minute}
	env.RegisterActivity(pass)
	beats := make(chan struct{}, 100)
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, _ converter.EncodedValues) {
		if info.Attempt == 1 {
			beats <- struct{}{}
		}
	})
	go func() {
		for range 3 {
			<-beats
		}
		close(healer.release)
	}()
	done := make(chan activities.ReconcileResult, 1)
	go func() {
		var out activities.ReconcileResult
		env.ExecuteWorkflow(workflows.Reconcile, activities.ReconcileInput{AccountIDs: []string{account}})
		err := env.GetWorkflowError()
		if err == nil {
			err = env.GetWorkflowResult(&out)
		}
		assert.NoError(t, err)
		done <- out
	}()
	select {
	case out := <-done:
		require.Equal(t, 1, out.Healed, "the slow heal finished in the pass's first attempt: %v", out.Failures)
	case <-time.After(2 * time.Minute):
		t.Fatal("the pass's first attempt did not heartbeat while its one heal was slow")
	}
}

// TestReconcilePassCountsWhatAnEarlierAttemptDid protects the pass's report of what it healed
// (which operators and the chaos run read): a pass whose first attempt died with its worker after
// healing some jobs is retried, and the retry finds those jobs healed. Its result counts what the
// earlier attempt's last heartbeat recorded, not only what the retry did.
func TestReconcilePassCountsWhatAnEarlierAttemptDid(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 1_000)
	ledgertest.Charged(t, store, account, ledgertest.ID(t, "left"), 40, "s3://in")
	healer := &stuckHealer{}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	pass := &activities.Reconciler{Ledger: store, Healer: healer}
	env.RegisterActivity(pass)
	env.SetHeartbeatDetails(activities.ReconcileResult{ResultsApplied: 2, Healed: 3, Started: 1, RejectedOrphans: 1})
	val, err := env.ExecuteActivity(pass.ReconcileOrphans, activities.ReconcileInput{AccountIDs: []string{account}})
	require.NoError(t, err)
	var out activities.ReconcileResult
	require.NoError(t, val.Get(&out))
	require.Equal(t, 2, out.ResultsApplied, "results the earlier attempt applied")
	require.Equal(t, 4, out.Healed, "three healed by the earlier attempt, one by this one")
	require.Equal(t, 1, out.Started)
	require.Equal(t, 1, out.RejectedOrphans)
	require.Equal(t, 1, out.RunningChecked, "what this attempt looked at is its own")
}

// hungHealer's look-up of open workflows never answers until its context ends — a Temporal that
// accepts the call and never replies — and it heals nothing.
type hungHealer struct{ slowHealer }

func (h *hungHealer) WithoutOpenWorkflow(ctx context.Context, _ []ledgerdb.Job) ([]ledgerdb.Job, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestReconcilePassGivesUpAHungLookUp protects healing with nobody looking: the pass heartbeats on
// a clock, so a step that hangs would hold it — and the schedule, which skips every pass while one
// is open — until its activity's ten-minute timeout, though its worker is alive. Every step is
// bounded: the look-up of the running jobs' workflows gives up within its bound and the pass
// fails, for its retry or the next pass to heal.
func TestReconcilePassGivesUpAHungLookUp(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 1_000)
	ledgertest.Charged(t, store, account, ledgertest.ID(t, "running"), 40, "s3://in")
	r := &activities.Reconciler{Ledger: store, Healer: &hungHealer{}, JobTimeout: 100 * time.Millisecond}

	// The pass's own deadline stands for its activity's timeout: far beyond the step's bound.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := r.ReconcileOrphans(ctx, activities.ReconcileInput{AccountIDs: []string{account}})
	require.ErrorIs(t, err, context.DeadlineExceeded, "the hung look-up was given up")
	require.NoError(t, ctx.Err(), "before the pass's own deadline")
}
