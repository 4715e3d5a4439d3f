package jobs_test

// A workflow that closes while its charge is still in flight, end to end: the charge is held up
// the way a busy ledger holds it up — the account's row locked from a connection of the test's own,
// as an operator's psql session would — and the job's workflow is terminated meanwhile. The tests
// wait on what Postgres and Temporal report (the charge waiting for the row, the run closed), never
// on a clock.

import (
	"context"
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

// ledgerSettles polls the ledger alone — a read that heals nothing, unlike a status read — until
// the job is neither submitting nor running, and answers it. It fails the test when the job is
// still undecided or charged with nothing to settle it at the wait limit.
func (e *e2eEnv) ledgerSettles(t *testing.T, key ledgerdb.JobKey) ledgerdb.Job {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		job, err := e.Store.Job(context.Background(), key)
		require.NoError(t, err)
		if job.State != ledgerdb.StateSubmitting && job.State != ledgerdb.StateRunning {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is still %s (%s) %s after its workflow closed: nothing settled it", key, job.State, job.MoneyState(), waitLimit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyCost and busyCredits are the cost of a busyStory's job and the credits its account starts with.
const busyCost, busyCredits = 300, 1000

// busyStory opens an account of busyCredits and names a job on it of a kind sold at busyCost,
// not yet submitted, and holds the account's row from a connection of the test's own, as an
// operator's psql session would: the job's charge will wait for it.
func (e *e2eEnv) busyStory(t *testing.T) (*story, *ledgertest.BusyRow) {
	t.Helper()
	acct := ledgertest.Account(t, e.Store, busyCredits)
	s := &story{acct: acct, id: ledgertest.ID(t, "job"), kind: ledgertest.Fixed(t, e.Store, busyCost), cost: busyCost, st: e.Jobs}
	return s, ledgertest.HoldAccount(t, acct)
}

// requireClosedFairly checks how a busyStory's job whose workflow was terminated before its charge
// was decided ends: refunded by a heal run (charged once, refunded once, the reason saying an
// operator stopped it) when the charge committed, or rejected with nothing charged when it did not
// — never running with no workflow, never rejected with a charge (the reversing-pairs and
// net-effect rules). The account is back at the credits it started with.
func (e *e2eEnv) requireClosedFairly(t *testing.T, job ledgerdb.Job) {
	t.Helper()
	switch job.State {
	case ledgerdb.StateRefunded:
		require.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
		ledgertest.RequireRows(t, e.Store, job.Key(), busyCost, ledgerdb.KindCharge, ledgerdb.KindRefund)
	case ledgerdb.StateRejected:
		require.Equal(t, ledgerdb.RejectWorkflowEnded, job.RejectReason)
		ledgertest.RequireRows(t, e.Store, job.Key(), busyCost)
	default:
		t.Fatalf("job %s ended %s (%s); want refunded or rejected", job.Key(), job.State, job.MoneyState())
	}
	ledgertest.RequireBalance(t, e.Store, job.AccountID, busyCredits)
	ledgertest.RequireSound(t, e.Store, job.AccountID)
}

// TestE2EWorkflowClosedUnderASubmission protects the submission rule that no answer is more certain
// than the ledger: an operator terminates a job's workflow while its charge waits for the busy
// account, so Temporal aborts the submission's charge-decision update. The submission handles that
// as "the workflow ended": it rejects the placeholder through the ledger's guard — which waits for
// the charge in flight — and when the charge won, heals the job at once. It answers the job as the
// ledger then has it, refunded or rejected, and never an error that leaves the caller to guess, or
// a submitting job whose charge is still to come. Before, the submission failed with the abort (the
// API answered "you were not charged"), and the charge then committed 300 credits to a job no
// workflow ran.
func TestE2EWorkflowClosedUnderASubmission(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s, busy := e.busyStory(t)
	job := s.job("sim:hang")

	type answer struct {
		sub jobs.Submission
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		sub, err := e.Jobs.Submit(ctx, job)
		answered <- answer{sub, err}
	}()
	charging := busy.AwaitWaiter(waitLimit)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, s.workflowID(), "", "stopped mid-charge"))

	// The row is released once the submission has learnt that the workflow closed: it answered,
	// or it waits behind the charge for the ledger's decision.
	got := ledgertest.ReleaseWhenHeard(t, busy, charging, answered, waitLimit)
	require.NoError(t, got.err, "a closed workflow is an answer, not an error")
	t.Logf("the submission answered %s (%s): %s", got.sub.Status.State, got.sub.Status.MoneyState, got.sub.Status.Message)
	ended, err := e.Store.Job(ctx, s.key())
	require.NoError(t, err)
	require.Contains(t, []ledgerdb.State{ledgerdb.StateRefunded, ledgerdb.StateRejected}, ended.State,
		"decided when the submission answered, healed included")
	require.Equal(t, ended.State, got.sub.Status.State, "the answer is the ledger's")
	require.Equal(t, ended.MoneyState(), got.sub.Status.MoneyState)
	e.requireClosedFairly(t, ended)
}

// TestE2EChargeAfterItsRunClosedIsHealedAtOnce protects the net-effect rule when nobody waits for
// the charge: a run started straight through Temporal (as any client may) is terminated while its
// charge waits for the busy account, and the charge commits after the run closed. The step that
// commits it sees that its run is gone and heals the job at once: a heal run refunds it, stopped by
// an operator — with no status read and no reconcile pass. Before, the job stayed running and
// charged until the next reconcile pass, and the audit stayed silent for its grace.
//
// The run is given the longest workflow task timeout, so that the worker keeps the charge in flight
// however slow the machine is between the terminate and the release.
func TestE2EChargeAfterItsRunClosedIsHealedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s, busy := e.busyStory(t)
	workflowID := s.workflowID()

	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: e.Config.Temporal.TaskQueue, WorkflowTaskTimeout: 2 * time.Minute,
	}, workflows.MeteredJob, workflows.JobInput{JobID: s.id, AccountID: s.acct, Kind: s.kind,
		Work: activities.WorkRequest{InputRef: "sim:hang"}, Policy: e2ePolicy()})
	require.NoError(t, err)
	busy.AwaitWaiter(waitLimit)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, run.GetRunID(), "stopped mid-charge"))
	desc, err := e.Client.DescribeWorkflow(ctx, workflowID, run.GetRunID())
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	busy.Release()

	job := e.ledgerSettles(t, s.key())
	require.Equal(t, ledgerdb.StateRefunded, job.State, "the charge committed after its run closed: refunded, not %s", job.State)
	e.requireClosedFairly(t, job)
}
