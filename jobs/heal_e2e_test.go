package jobs_test

// Healing end to end, against the real dev server and test database: a job whose workflow an
// operator terminated is healed on its first read, a placeholder whose workflow closed before
// charging is rejected for that reason, and a read that races the job's own settling starts no
// heal. Each test here failed before the change that made its door keep the money rules.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestE2ETerminatedJobIsHealedOnRead protects the net-effect rule at the UI's Terminate button: the
// job's work will never be delivered, so the first read of its status heals it — a heal run of its
// own workflow refunds the charge with a reason that says an operator stopped it — and no answer
// describes it as running. A result that lands afterwards still reclaims the refund once. Before,
// the job stayed running, charged, for ever.
func TestE2ETerminatedJobIsHealedOnRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	const cost = 40
	acct := ledgertest.Account(t, e.Store, 200)
	id := ledgertest.ID(t, "term")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	sub, err := workertest.Submit(ctx, t, e.Jobs, jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, cost), InputRef: "sim:hang"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, sub.Status.State)
	e.waitAttempt(t, key, 1)
	workflowID := workflows.JobWorkflowID(acct, id)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, "", "wrong input file"))

	status, err := e.Jobs.Status(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State, status.Message)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, status.Reason)
	require.Equal(t, "stopped by an operator: terminated (wrong input file)", status.Detail)
	require.Equal(t, "Not delivered: the job was stopped by an operator. Your 40 credits were refunded.", status.Message)
	ledgertest.RequireRows(t, e.Store, key, cost, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireBalance(t, e.Store, acct, 200)
	d, err := e.Client.DescribeWorkflow(ctx, workflowID, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.Status, "the heal run listens for a late result")
	state, _ := d.TypedSearchAttributes.GetKeyword(workflows.BillingStateKey)
	require.Equal(t, string(ledgerdb.StateRefunded), state, "the job's latest run tells the truth")

	report, err := e.Jobs.ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + id})
	require.NoError(t, err)
	require.Equal(t, jobs.PathSignal, report.Path)
	final := e.awaitClosed(t, workflowID)
	require.Equal(t, ledgerdb.StateRecovered, final.State)
	ledgertest.RequireRows(t, e.Store, key, cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	ledgertest.RequireBalance(t, e.Store, acct, 200-cost)
	e.recordHistory(t, "healed", workflowID)
}

// waitAttempt waits until the ledger has recorded that the job's work started attempt n: only then
// can a result of that attempt exist.
func (e *e2eEnv) waitAttempt(t *testing.T, key ledgerdb.JobKey, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		job, err := e.Store.Job(context.Background(), key)
		return err == nil && job.Attempts >= n
	}, waitLimit, 50*time.Millisecond, "job %s never started attempt %d", key, n)
}

// TestE2EOrphanRejectionIsHonest protects the submission rules: a placeholder whose workflow was
// terminated before it charged is rejected for that reason (the detail operators read), and its
// user is told that it could not be started — not that the account lacked credits, which a
// top-up would seem to fix — and that the ID can never be charged. A resubmission answers the same, after a top-up too.
func TestE2EOrphanRejectionIsHonest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 200)
	id := ledgertest.ID(t, "orphan")
	job := jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"}
	key := job.Key()
	_, err := e.Store.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), Request: []byte(job.InputRef)})
	require.NoError(t, err)
	workflowID := workflows.JobWorkflowID(acct, id)
	_, err = e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"},
		workflows.MeteredJob, workflows.JobInput{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40)})
	require.NoError(t, err)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, "", "operator"))

	status, err := e.Jobs.Resume(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRejected, status.State)
	require.Equal(t, ledgerdb.ReasonRejected, status.Reason)
	require.Equal(t, ledgerdb.RejectWorkflowEnded.Describe(), status.Detail, "operators read why")
	require.NotContains(t, strings.ToLower(status.Message), "credits", status.Message)
	require.Contains(t, status.Message, "can never be charged")

	_, err = e.Store.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "top-up"})
	require.NoError(t, err)
	_, err = e.Jobs.Submit(ctx, job)
	require.ErrorIs(t, err, ledgerdb.ErrRejected)
	require.NotErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
	ledgertest.RequireRows(t, e.Store, key, 40)
	ledgertest.RequireBalance(t, e.Store, acct, 300)
}

// TestE2EHealLeavesAJobItsRunSettled protects the heal from a race: a status read that found the
// job running, while its workflow delivered it and closed, must not start a heal run — the run
// settled the job, and the ledger read after the describe says so. Before, a needless heal run
// became the job's latest run (it refunded nothing: the guard saw the job delivered).
func TestE2EHealLeavesAJobItsRunSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 200)
	id := ledgertest.ID(t, "settled")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	sub, err := workertest.Submit(ctx, t, e.Jobs, jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"})
	require.NoError(t, err)
	stale, err := e.Store.Job(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, stale.State, "%+v", sub)
	workflowID := workflows.JobWorkflowID(acct, id)
	require.Equal(t, ledgerdb.StateDelivered, e.awaitClosed(t, workflowID).State)

	healed, err := e.Jobs.Heal(ctx, stale)
	require.NoError(t, err)
	require.False(t, healed, "a job its run settled needs no heal")
	runs, err := e.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: e.Config.Temporal.Namespace, Query: fmt.Sprintf("WorkflowId = '%s'", workflowID)})
	require.NoError(t, err)
	require.EqualValues(t, 1, runs.GetCount(), "no heal run was started")
	ledgertest.RequireRows(t, e.Store, key, 40, ledgerdb.KindCharge)
}
