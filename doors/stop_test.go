package doors_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// hanging submits the test's job called tag, a "sim:hang" job under doorPolicy whose work never
// finishes by itself, of a kind sold at cost, and waits until its first attempt runs: the job is
// charged and running, as an operator finds it.
func (d *door) hanging(t *testing.T, tag string, cost int64) doorJob {
	t.Helper()
	j := d.job(t, tag)
	sub, err := workertest.Submit(testContext(t), t, d.Jobs, jobs.Job{ID: j.id, AccountID: d.acct, Kind: ledgertest.Fixed(t, d.Store, cost), InputRef: "sim:hang"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, sub.Status.State)
	d.waitAttempt(t, j.key, 1)
	return j
}

// failing submits the test's job called tag, a "sim:fail" job whose every attempt fails, and
// waits until the ledger has refunded it.
func (d *door) failing(t *testing.T, tag string, cost int64) doorJob {
	t.Helper()
	j := d.job(t, tag)
	_, err := workertest.Submit(testContext(t), t, d.Jobs, jobs.Job{ID: j.id, AccountID: d.acct, Kind: ledgertest.Fixed(t, d.Store, cost), InputRef: "sim:fail"})
	require.NoError(t, err)
	d.waitLedger(t, j.key, ledgerdb.StateRefunded)
	return j
}

// deliverHanging reports the result of a hanging job's first attempt through the job service's
// report door and checks that its workflow closes delivered with its one charge (the
// reversing-pairs rule).
func (e *env) deliverHanging(t *testing.T, j doorJob, cost int64) {
	t.Helper()
	_, err := e.Jobs.ReportResult(testContext(t), j.key, activities.WorkResult{Attempt: 1, OutputRef: "s3://out/" + j.id})
	require.NoError(t, err)
	final := e.awaitClosed(t, j.workflowID)
	require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
	ledgertest.RequireRows(t, e.Store, j.key, cost, ledgerdb.KindCharge)
}

// TestCLITerminateIsHealedThenRecovered checks the net-effect rule at `temporal workflow terminate`
// (the UI's Terminate button does the same): a charged job whose workflow an operator terminates
// will never be delivered by it, so it is refunded — net 0 — with a reason that says an operator
// stopped it. One job is healed by the first read of its status (Service.Status heals on read),
// another, which nobody reads, by one reconcile pass. The heal run, the latest run under the job's
// workflow ID, shows BillingState refunded. A late result reported afterwards, as jobbill's report
// door does, reclaims the refund once (the reversing-pairs and net-effect rules: charge, refund,
// reclaim, net −cost, recovered).
func TestCLITerminateIsHealedThenRecovered(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	ctx := testContext(t)
	read, pass := e.hanging(t, "read", 40), e.hanging(t, "pass", 30)

	e.cli.must(t, "workflow", "terminate", "--workflow-id", read.workflowID, "--reason", "wrong input file")
	e.cli.must(t, "workflow", "terminate", "--workflow-id", pass.workflowID, "--reason", "GPU pool drained")
	for _, key := range []ledgerdb.JobKey{read.key, pass.key} {
		job, err := e.Store.Job(ctx, key)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateRunning, job.State, "the ledger still says running: nobody has healed %s yet", key)
	}

	// The read heals: its answer never describes a job as running when no workflow runs it.
	status, err := e.Jobs.Status(ctx, read.key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State, status.Message)
	require.Equal(t, ledgerdb.MoneyRefunded, status.MoneyState)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, status.Reason)
	require.Equal(t, "Not delivered: the job was stopped by an operator. Your 40 credits were refunded.", status.Message)
	require.True(t, strings.HasPrefix(status.Detail, "stopped by an operator: terminated"), status.Detail)
	require.Contains(t, status.Detail, "wrong input file", "the operator's reason is kept, for operators")
	state, runStatus := e.latestBillingState(t, read.workflowID)
	require.Equal(t, string(ledgerdb.StateRefunded), state, "the heal run tells the truth")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, runStatus, "the heal run listens for a late result")
	ledgertest.RequireRows(t, e.Store, read.key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)

	// The other job is healed by the reconcile pass alone.
	e.waitClosedInVisibility(t, pass.workflowID)
	out := e.reconcilePass(t, e.acct)
	require.Equal(t, 1, out.Healed, "%+v", out)
	job, err := e.Store.Job(ctx, pass.key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
	require.Equal(t, "stopped by an operator: terminated (GPU pool drained)", job.RefundDetail)
	state, _ = e.latestBillingState(t, pass.workflowID)
	require.Equal(t, string(ledgerdb.StateRefunded), state)
	ledgertest.RequireRows(t, e.Store, pass.key, 30, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireBalance(t, e.Store, e.acct, 200)
	require.Zero(t, e.reconcilePass(t, e.acct).Healed, "a healed job is refunded, not running: a second pass does nothing")

	// The work was delivered after all: each result reclaims its job's refund, once.
	for _, j := range []struct {
		doorJob
		cost int64
	}{{read, 40}, {pass, 30}} {
		report, err := e.Jobs.ReportResult(ctx, j.key, activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + j.key.JobID})
		require.NoError(t, err)
		require.Contains(t, []string{jobs.PathSignal, jobs.PathFallback}, report.Path)
		require.Equal(t, ledgerdb.StateRecovered, e.waitLedger(t, j.key, ledgerdb.StateRecovered).State)
		final := e.awaitClosed(t, j.workflowID)
		require.Equal(t, ledgerdb.StateRecovered, final.State, "%+v", final)
		state, runStatus := e.latestBillingState(t, j.workflowID)
		require.Equal(t, string(ledgerdb.StateRecovered), state)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, runStatus)
		ledgertest.RequireRows(t, e.Store, j.key, j.cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	}
	e.requireEnd(t, 200-40-30)
}

// TestCLICancelRefunds checks the net-effect rule at `temporal workflow cancel` (the UI's Cancel
// button): the run's work is cancelled, its charge compensated — refunded with the reason
// "stopped by an operator: cancelled" — and the run closes as cancelled: charge, refund, net 0.
func TestCLICancelRefunds(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	j := e.hanging(t, "cancel", 40)

	e.cli.must(t, "workflow", "cancel", "--workflow-id", j.workflowID)
	job := e.waitLedger(t, j.key, ledgerdb.StateRefunded)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
	require.Equal(t, "stopped by an operator: cancelled", job.RefundDetail)
	require.Eventually(t, func() bool {
		_, s := e.latestBillingState(t, j.workflowID)
		return s == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, waitLimit, 100*time.Millisecond, "the run never closed as cancelled")
	state, _ := e.latestBillingState(t, j.workflowID)
	require.Equal(t, string(ledgerdb.StateRefunded), state, "the cancelled run closed telling the truth")
	status, err := e.Jobs.Status(testContext(t), j.key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State, "a refunded job needs no heal")
	require.Equal(t, ledgerdb.MoneyRefunded, status.MoneyState)

	ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)
	e.requireEnd(t, 200)
}
