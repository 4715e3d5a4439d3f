package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
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
