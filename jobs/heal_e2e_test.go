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

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
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
	s := e.terminatedByOperator(t)

	status := e.requireHealedOnRead(t, s)
	require.Equal(t, "stopped by an operator: terminated (wrong input file)", status.Detail)
	d, err := e.Client.DescribeWorkflow(ctx, s.workflowID(), "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.Status, "the heal run listens for a late result")
	state, _ := d.TypedSearchAttributes.GetKeyword(workflows.BillingStateKey)
	require.Equal(t, string(ledgerdb.StateRefunded), state, "the job's latest run tells the truth")

	report, err := e.Jobs.ReportResult(ctx, s.key(), activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + s.id})
	require.NoError(t, err)
	require.Equal(t, jobs.PathSignal, report.Path)
	final := e.awaitClosed(t, s.workflowID())
	require.Equal(t, ledgerdb.StateRecovered, final.State)
	e.requireMoney(t, s, 200-s.cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	e.recordHistory(t, "healed", s.workflowID())
}

// terminatedByOperator submits a job of 40 credits whose work hangs, on an account of 200, waits
// until its first attempt runs, and terminates its workflow as an operator would, with the reason
// "wrong input file".
func (e *e2eEnv) terminatedByOperator(t *testing.T) *story {
	t.Helper()
	s := e.submitted(t, 40, "sim:hang")
	require.Equal(t, ledgerdb.StateRunning, s.sub.Status.State)
	e.waitAttempt(t, s.key(), 1)
	require.NoError(t, e.Client.TerminateWorkflow(testContext(t), s.workflowID(), "", "wrong input file"))
	return s
}

// requireHealedOnRead checks that the first read of the terminated job's status heals it: it
// answers the job refunded, stopped by an operator, its charge and refund rows in the ledger and
// its account back at 200 (the reversing-pairs and net-effect rules). It answers the status.
func (e *e2eEnv) requireHealedOnRead(t *testing.T, s *story) jobs.Status {
	t.Helper()
	status, err := e.Jobs.Status(testContext(t), s.key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State, status.Message)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, status.Reason)
	require.Equal(t, "Not delivered: the job was stopped by an operator. Your 40 credits were refunded.", status.Message)
	e.requireMoney(t, s, 200, ledgerdb.KindCharge, ledgerdb.KindRefund)
	return status
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
	e, acct, key := placeholderOn(t, 200)
	ctx := testContext(t)
	e.closeBeforeCharging(t, key)

	status, err := e.Jobs.Resume(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRejected, status.State)
	require.Equal(t, ledgerdb.ReasonRejected, status.Reason)
	require.Equal(t, ledgerdb.RejectWorkflowEnded.Describe(), status.Detail, "operators read why")
	require.NotContains(t, strings.ToLower(status.Message), "credits", status.Message)
	require.Contains(t, status.Message, "can never be charged")

	_, err = e.Store.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "top-up"})
	require.NoError(t, err)
	_, err = e.Jobs.Submit(ctx, jobs.Job{ID: key.JobID, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: placeholderRequest})
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
	s := e.submitted(t, 40, "sim:ok")
	stale, err := e.Store.Job(ctx, s.key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, stale.State, "%+v", s.sub)
	require.Equal(t, ledgerdb.StateDelivered, e.awaitClosed(t, s.workflowID()).State)

	healed, err := e.Jobs.Heal(ctx, stale)
	require.NoError(t, err)
	require.False(t, healed, "a job its run settled needs no heal")
	runs, err := e.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: e.Config.Temporal.Namespace, Query: fmt.Sprintf("WorkflowId = '%s'", s.workflowID())})
	require.NoError(t, err)
	require.EqualValues(t, 1, runs.GetCount(), "no heal run was started")
	ledgertest.RequireRows(t, e.Store, s.key(), 40, ledgerdb.KindCharge)
}
