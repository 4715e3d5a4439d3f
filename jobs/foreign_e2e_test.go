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
	"github.com/jobbill/jobbill/workflows"
)

// foreignWorkflowType is a workflow type nobody registers: another program's workflow.
const foreignWorkflowType = "SomeoneElsesWorkflow"

// terminatedUnderForeignRun is terminatedByOperator's job, whose workflow ID another program's
// workflow then holds: once visibility has the terminated run, it starts a workflow of
// foreignWorkflowType under the job's workflow ID, on a task queue nobody polls, so that it stays
// open; the test's cleanup terminates it. It answers the job's story and the foreign run.
func (e *e2eEnv) terminatedUnderForeignRun(t *testing.T) (*story, client.WorkflowRun) {
	t.Helper()
	s := e.terminatedByOperator(t)
	e.requireVisible(t, fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = 'Terminated'", s.workflowID()))
	foreign, err := e.Client.ExecuteWorkflow(testContext(t), client.StartWorkflowOptions{ID: s.workflowID(), TaskQueue: "nobody-polls-this"}, foreignWorkflowType)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.Client.TerminateWorkflow(context.Background(), s.workflowID(), foreign.GetRunID(), "test done")
	})
	return s, foreign
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
	s, foreign := e.terminatedUnderForeignRun(t)

	status := e.requireHealedOnRead(t, s)
	require.Contains(t, status.Detail, "stopped by an operator: terminated (wrong input file)")
	require.Contains(t, status.Detail, foreignWorkflowType)
	require.Contains(t, status.Detail, foreign.GetRunID())
	d, err := e.Client.DescribeWorkflow(ctx, s.workflowID(), "")
	require.NoError(t, err)
	require.Equal(t, foreign.GetRunID(), d.WorkflowExecution.RunID, "the foreign run is left alone")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.Status)

	report, err := e.Jobs.ReportResult(ctx, s.key(), activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + s.id})
	require.NoError(t, err)
	require.Equal(t, jobs.PathFallback, report.Path, "a result never goes into another program's workflow")
	require.Equal(t, ledgerdb.Applied, report.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, report.Status.State)
	e.requireMoney(t, s, 160, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
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
	s, _ := e.terminatedUnderForeignRun(t)

	job := e.requireHealedByPass(t, s)
	require.Contains(t, job.RefundDetail, foreignWorkflowType)

	_, err := e.Jobs.Redrive(ctx, s.key(), "e2e", "")
	require.ErrorIs(t, err, jobs.ErrWorkflowIDTaken)
	e.requireMoney(t, s, 200, ledgerdb.KindCharge, ledgerdb.KindRefund)
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
		_, err := e.Client.ExecuteWorkflow(testContext(t), client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"}, foreignWorkflowType)
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
