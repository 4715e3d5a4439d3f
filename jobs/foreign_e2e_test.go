package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// foreignWorkflowType is a workflow type nobody registers: another program's workflow.
const foreignWorkflowType = "SomeoneElsesWorkflow"

// terminatedUnderForeignRun submits a job whose work hangs, terminates its workflow as an operator
// would (reason "wrong input file"), waits until visibility has the terminated run, and then
// starts another program's workflow under the job's workflow ID, on a task queue nobody polls, so
// that it stays open; the test's cleanup terminates it. It answers the job's key and the foreign
// run.
func (e *e2eEnv) terminatedUnderForeignRun(t *testing.T, acct string) (ledgerdb.JobKey, client.WorkflowRun) {
	t.Helper()
	ctx := testContext(t)
	id := ledgertest.ID(t, "foreign-held")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	_, err := workertest.Submit(ctx, t, e.Jobs, jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:hang"})
	require.NoError(t, err)
	e.waitAttempt(t, key, 1)
	workflowID := workflows.JobWorkflowID(acct, id)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, "", "wrong input file"))
	e.requireVisible(t, fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = 'Terminated'", workflowID))
	foreign, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"}, foreignWorkflowType)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.Client.TerminateWorkflow(context.Background(), workflowID, foreign.GetRunID(), "test done")
	})
	return key, foreign
}

// TestE2EForeignWorkflowCannotBlockHealing protects the net-effect rule at the door of another
// program's workflow: an operator terminated a job's workflow, and another program then started a
// workflow of its own under the job's workflow ID. The job's own workflow is gone, so nothing of
// jobbill's will deliver or refund it; the foreign run, open, keeps the ID from a heal run. A read
// of the job's status still heals it — the guarded refund written in the ledger directly, reason
// stopped_by_operator, the detail naming the foreign run — and never touches the foreign run. A
// late result then goes to the late-result fallback, not into the foreign run, and reclaims the
// refund once. Before, the heal saw "a run is open" and waited for ever: the job stayed running,
// charged, and its customer read "refunded if the job fails for good".
func TestE2EForeignWorkflowCannotBlockHealing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 200)
	key, foreign := e.terminatedUnderForeignRun(t, acct)

	status, err := e.Jobs.Status(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State, status.Message)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, status.Reason)
	require.Contains(t, status.Detail, "stopped by an operator: terminated (wrong input file)")
	require.Contains(t, status.Detail, foreignWorkflowType)
	require.Contains(t, status.Detail, foreign.GetRunID())
	require.Equal(t, "Not delivered: the job was stopped by an operator. Your 40 credits were refunded.", status.Message)
	ledgertest.RequireRows(t, e.Store, key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireBalance(t, e.Store, key.AccountID, 200)
	d, err := e.Client.DescribeWorkflow(ctx, workflows.JobWorkflowID(key.AccountID, key.JobID), "")
	require.NoError(t, err)
	require.Equal(t, foreign.GetRunID(), d.WorkflowExecution.RunID, "the foreign run is left alone")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.Status)

	report, err := e.Jobs.ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + key.JobID})
	require.NoError(t, err)
	require.Equal(t, jobs.PathFallback, report.Path, "a result never goes into another program's workflow")
	require.Equal(t, ledgerdb.Applied, report.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, report.Status.State)
	ledgertest.RequireRows(t, e.Store, key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	ledgertest.RequireBalance(t, e.Store, key.AccountID, 160)
}

// TestE2EReconcileHealsJobUnderForeignRun protects the net-effect rule without anyone reading the
// job: the reconcile pass heals a job whose terminated workflow's ID another program's open
// workflow holds, within one pass; a second pass changes nothing. A redrive of the healed dead
// letter is refused with ErrWorkflowIDTaken rather than signalled into the foreign run, and nothing
// moves.
func TestE2EReconcileHealsJobUnderForeignRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 200)
	key, _ := e.terminatedUnderForeignRun(t, acct)

	pass := reconcilePass(t, e, acct)
	require.Equal(t, 1, pass.Healed)
	job, err := e.Store.Job(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
	require.Contains(t, job.RefundDetail, foreignWorkflowType)
	require.Zero(t, reconcilePass(t, e, acct).Healed, "a healed job is refunded, not running")

	_, err = e.Jobs.Redrive(ctx, key, "e2e", "")
	require.ErrorIs(t, err, jobs.ErrWorkflowIDTaken)
	ledgertest.RequireRows(t, e.Store, key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireBalance(t, e.Store, acct, 200)
}

// TestE2ESubmissionNeverAttachesToAForeignWorkflow protects the remembered-IDs rule in a namespace
// other programs may share: when another program's workflow holds a job's workflow ID, running or
// closed, the submission answers at once that the ID can never be charged (rejected, reason
// workflow_id_taken) and charges nothing — it never sends its charge decision into a workflow that
// is not this job's. Before, it waited on the foreign workflow until its deadline and left the job
// submitting for ever.
func TestE2ESubmissionNeverAttachesToAForeignWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 200)
	for _, closed := range []bool{false, true} {
		id := ledgertest.ID(t, "foreign")
		workflowID := workflows.JobWorkflowID(acct, id)
		_, err := e.Client.ExecuteWorkflow(testContext(t), client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"}, "SomeoneElsesWorkflow")
		require.NoError(t, err)
		if closed {
			require.NoError(t, e.Client.TerminateWorkflow(testContext(t), workflowID, "", ""))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		began := time.Now()
		sub, err := e.Jobs.Submit(ctx, jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"})
		cancel()
		require.ErrorIs(t, err, ledgerdb.ErrRejected, "closed=%v", closed)
		require.Less(t, time.Since(began), 10*time.Second, "the submission waited on a foreign workflow")
		require.Equal(t, ledgerdb.StateRejected, sub.Status.State)
		require.Equal(t, ledgerdb.ReasonRejected, sub.Status.Reason)
		require.Equal(t, ledgerdb.RejectWorkflowIDTaken.Describe(), sub.Status.Detail)
		require.Contains(t, sub.Status.Message, "new ID")
		ledgertest.RequireRows(t, e.Store, ledgerdb.JobKey{AccountID: acct, JobID: id}, 40)
	}
	ledgertest.RequireBalance(t, e.Store, acct, 200)
}
