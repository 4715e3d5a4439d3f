package jobs_test

// The reconcile pass end to end, on the shared in-process worker, against the real dev server
// and test database: placeholders written straight to the ledger, as a submitter that crashed
// before starting the workflow leaves them; charged jobs whose workflow an operator terminated;
// results recorded while Temporal was unreachable.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// reconcileGrace is the tests' grace: short, so that a placeholder ages past it in a test.
const reconcileGrace = time.Second

// placeholderRequest is the request of a placeholder writePlaceholder writes: work that succeeds.
const placeholderRequest = "sim:ok"

// writePlaceholder writes a job's placeholder and nothing else, as a crashed submitter would, and
// answers the job's key.
func writePlaceholder(t *testing.T, env *e2eEnv, accountID string, cost int64) ledgerdb.JobKey {
	t.Helper()
	sub := ledgerdb.Submission{
		JobID: ledgertest.ID(t, "job"), AccountID: accountID, Kind: ledgertest.Fixed(t, env.Store, cost), Request: []byte(placeholderRequest),
	}
	_, err := env.Store.Submit(context.Background(), sub)
	require.NoError(t, err)
	return sub.Key()
}

// placeholderOn opens an account granted credits and writes a placeholder of 40 credits on it, as
// a crashed submitter leaves it; it answers the environment, the account and the job's key.
func placeholderOn(t *testing.T, credits int64) (*e2eEnv, string, ledgerdb.JobKey) {
	t.Helper()
	env := newEnv(t)
	account := ledgertest.Account(t, env.Store, credits)
	return env, account, writePlaceholder(t, env, account, 40)
}

// closeBeforeCharging starts the placeholder's workflow, of a job of 40 credits, on a queue no
// worker polls, so that it never reaches its charge, and terminates it as an operator would: the
// job's ID can never be started again.
func (e *e2eEnv) closeBeforeCharging(t *testing.T, key ledgerdb.JobKey) {
	t.Helper()
	ctx := testContext(t)
	workflowID := workflows.JobWorkflowID(key.AccountID, key.JobID)
	_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"},
		workflows.MeteredJob, workflows.JobInput{JobID: key.JobID, AccountID: key.AccountID, Kind: ledgertest.Fixed(t, e.Store, 40)})
	require.NoError(t, err)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, "", "test: closed before charging"))
}

// reconcilePass runs one Reconcile workflow over the account's placeholders, with the tests'
// grace, and returns its counts.
func reconcilePass(t *testing.T, env *e2eEnv, accountID string) activities.ReconcileResult {
	t.Helper()
	return reconcilePassWithin(t, env, accountID, reconcileGrace)
}

// reconcilePassWithin is reconcilePass with the given grace.
func reconcilePassWithin(t *testing.T, env *e2eEnv, accountID string, grace time.Duration) activities.ReconcileResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        fmt.Sprintf("reconcile-test/%s/%d", accountID, time.Now().UnixNano()),
		TaskQueue: env.Config.Temporal.TaskQueue,
	}, workflows.Reconcile, activities.ReconcileInput{Grace: grace, AccountIDs: []string{accountID}})
	require.NoError(t, err)
	var out activities.ReconcileResult
	require.NoError(t, run.Get(ctx, &out))
	require.Zero(t, out.Failed, "failures: %v", out.Failures)
	return out
}

// chargeRows counts the job's charge rows in the ledger.
func chargeRows(t *testing.T, env *e2eEnv, key ledgerdb.JobKey) int {
	t.Helper()
	var n int
	require.NoError(t, env.Store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM ledger_entries WHERE job_id = $1 AND kind = 'charge'`, key.String()).Scan(&n))
	return n
}

// TestReconcileHealsOrphanedPlaceholderOnce checks the reversing-pairs rule, the net-effect rule
// and the idempotent-doors rule (one charge per job; the net matches the state; every door
// idempotent): a placeholder younger than the grace is left alone; once older, its workflow never
// having started, it is started by one pass and charged exactly once; a second pass and two
// concurrent passes change nothing. A placeholder is younger than a grace of an hour, and older
// than the tests' second once the test has slept it, however slowly a loaded machine runs the
// passes.
func TestReconcileHealsOrphanedPlaceholderOnce(t *testing.T) {
	t.Parallel()
	env, account, orphan := placeholderOn(t, 1000)
	ctx := context.Background()

	// Within its grace: untouched, no workflow.
	within := reconcilePassWithin(t, env, account, time.Hour)
	require.Equal(t, 0, within.Examined, "a placeholder younger than the grace is not examined")
	job, err := env.Store.Job(ctx, orphan)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateSubmitting, job.State)
	_, err = env.Client.DescribeWorkflow(ctx, workflows.JobWorkflowID(account, orphan.JobID), "")
	require.Error(t, err, "a placeholder within its grace must not get a workflow")

	time.Sleep(reconcileGrace)
	first := reconcilePass(t, env, account)
	require.Equal(t, 1, first.Examined, "the placeholder older than the grace is examined")
	require.Equal(t, 1, first.Started)
	st, err := env.Jobs.Wait(ctx, orphan, ledgerdb.StateDelivered)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.MoneyCharged, st.MoneyState)
	require.Equal(t, 1, chargeRows(t, env, orphan))

	// Another placeholder ages past the grace; a second pass heals it and leaves the first alone,
	// and two concurrent passes after that change nothing.
	fresh := writePlaceholder(t, env, account, 30)
	time.Sleep(reconcileGrace)
	second := reconcilePass(t, env, account)
	require.Equal(t, 1, second.Examined, "the healed job is no longer a placeholder")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			out := reconcilePass(t, env, account)
			require.Equal(t, 0, out.Examined)
		})
	}
	wg.Wait()
	_, err = env.Jobs.Wait(ctx, fresh, ledgerdb.StateDelivered)
	require.NoError(t, err)
	require.Equal(t, 1, chargeRows(t, env, orphan))
	require.Equal(t, 1, chargeRows(t, env, fresh))
	ledgertest.RequireBalance(t, env.Store, account, 1000-40-30)
}

// TestReconcileConcurrentResumeChargesOnce checks the reversing-pairs and idempotent-doors rules:
// two reconcilers resuming the same orphan at the same moment start one workflow and write one
// charge row.
func TestReconcileConcurrentResumeChargesOnce(t *testing.T) {
	t.Parallel()
	env, account, orphan := placeholderOn(t, 100)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := env.Jobs.Resume(ctx, orphan)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	_, err := env.Jobs.Wait(ctx, orphan, ledgerdb.StateDelivered)
	require.NoError(t, err)
	require.Equal(t, 1, chargeRows(t, env, orphan))
	ledgertest.RequireSound(t, env.Store, account)
}

// TestReconcileRejectsPlaceholderWhoseWorkflowClosedBeforeCharging checks the net-effect and
// remembered-IDs rules: a placeholder whose workflow was terminated before its charge can never be
// started again under its ID, so the pass rejects it (reason workflow_ended_before_charging),
// nothing charged, net 0; a second pass changes nothing.
func TestReconcileRejectsPlaceholderWhoseWorkflowClosedBeforeCharging(t *testing.T) {
	t.Parallel()
	env, account, orphan := placeholderOn(t, 100)
	ctx := context.Background()
	env.closeBeforeCharging(t, orphan)
	time.Sleep(reconcileGrace)

	out := reconcilePass(t, env, account)
	require.Equal(t, 1, out.RejectedOrphans)
	job, err := env.Store.Job(ctx, orphan)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRejected, job.State)
	require.Equal(t, ledgerdb.RejectWorkflowEnded, job.RejectReason)
	require.False(t, job.IsCharged)
	require.Equal(t, 0, chargeRows(t, env, orphan))

	again := reconcilePass(t, env, account)
	require.Equal(t, 0, again.Examined)
	ledgertest.RequireBalance(t, env.Store, account, 100)
}

// TestE2EReconcileHealsTerminatedJob protects the net-effect rule without anyone reading the job:
// the reconcile pass finds the charged job whose workflow an operator terminated and refunds it
// within one pass; a second pass changes nothing.
func TestE2EReconcileHealsTerminatedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s := e.submitted(t, 40, "sim:hang")
	require.NoError(t, e.Client.TerminateWorkflow(ctx, s.workflowID(), "", "GPU pool drained"))

	job := e.requireHealedByPass(t, s)
	require.Equal(t, "stopped by an operator: terminated (GPU pool drained)", job.RefundDetail)
	e.requireMoney(t, s, 200, ledgerdb.KindCharge, ledgerdb.KindRefund)
}

// requireHealedByPass checks that one reconcile pass heals the story's job, whose workflow an
// operator stopped — refunded, stopped by an operator — and that a second pass finds nothing more
// to heal (the net-effect and idempotent-doors rules). It answers the job as the first pass left it.
func (e *e2eEnv) requireHealedByPass(t *testing.T, s *story) ledgerdb.Job {
	t.Helper()
	require.Equal(t, 1, reconcilePass(t, e, s.acct).Healed)
	job, err := e.Store.Job(testContext(t), s.key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
	require.Zero(t, reconcilePass(t, e, s.acct).Healed, "a healed job is refunded, not running")
	return job
}
