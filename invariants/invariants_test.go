package invariants_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestCleanJobsPass runs real jobs through the worker to every end a job can reach — delivered,
// rejected, refunded (workflow closed), recovered through the late-result fallback after its
// workflow closed (so its closed run still says refunded), deleted, and refunded with its
// workflow still open — and checks that the checker finds nothing: the reversing-pairs, net-effect
// and sum-of-rows rules hold, and the workflows agree with the ledger. ledgerdb's own Audit agrees
// on each account.
func TestCleanJobsPass(t *testing.T) {
	t.Parallel()
	s := newStory(t, "clean", 1_000)
	ctx, acct, p := s.ctx, s.acct, s.p
	st := s.jobService()
	poor := ledgertest.Account(t, s.Store, 5)
	const cost = 40

	submit := func(st *jobs.Service, name, account, input string, want error) ledgerdb.JobKey {
		return s.submit(t, st, jobs.Job{ID: p + name, AccountID: account, Kind: ledgertest.Fixed(t, s.Store, cost), InputRef: input}, want)
	}
	delivered := submit(st, "delivered", acct, "sim:ok", nil)
	submit(st, "rejected", poor, "sim:ok", ledgerdb.ErrInsufficientCredits)
	refunded := submit(st, "refunded", acct, "sim:fail", nil)
	recovered := submit(st, "recovered", acct, "sim:fail", nil)
	deleted := submit(st, "deleted", acct, "sim:ok", nil)
	// Listening far longer than the test takes to check it; its late result closes it.
	open := submit(s.listeningJobService(), "open", acct, "sim:fail", nil)

	for _, key := range []ledgerdb.JobKey{delivered, deleted} {
		_, err := st.Wait(ctx, key, ledgerdb.StateDelivered)
		require.NoError(t, err)
	}
	_, err := st.Delete(ctx, deleted)
	require.NoError(t, err)
	for _, key := range []ledgerdb.JobKey{refunded, recovered} {
		_, err := st.Wait(ctx, key, ledgerdb.StateRefunded)
		require.NoError(t, err)
		require.NoError(t, s.Client.GetWorkflow(ctx, workflows.JobWorkflowID(acct, key.JobID), "").Get(ctx, nil), "the refunded workflow %s closes after its window", key)
	}
	rep := s.lateResult(t, st, recovered)
	require.Equal(t, "fallback", rep.Path)
	require.Equal(t, ledgerdb.StateRecovered, rep.Status.State)
	_, err = st.Wait(ctx, open, ledgerdb.StateRefunded)
	require.NoError(t, err)
	s.waitBillingState(t, workflows.JobWorkflowID(acct, open.JobID), ledgerdb.StateRefunded)

	report := s.check(t)
	requireOK(t, report)
	require.Equal(t, 6, report.Counts.Jobs)
	require.Equal(t, map[ledgerdb.State]int{
		ledgerdb.StateDelivered: 1, ledgerdb.StateRejected: 1, ledgerdb.StateRefunded: 2,
		ledgerdb.StateRecovered: 1, ledgerdb.StateDeleted: 1,
	}, report.Counts.JobsByState)
	require.Equal(t, 2, report.Counts.Accounts)
	require.GreaterOrEqual(t, report.Counts.Workflows, 6)
	require.Equal(t, 1, report.Counts.OpenWorkflows, "the refunded job with the long window is still listening")
	ledgertest.RequireSound(t, s.Store, acct, poor)

	// The same check scoped to one account sees only that account's jobs.
	byAccount := s.env.check(t, "", func(o *invariants.Options) { o.AccountID = poor })
	requireOK(t, byAccount)
	require.Equal(t, 1, byAccount.Counts.Jobs)
	require.Equal(t, 1, byAccount.Counts.Accounts)
	// An account that does not exist is an error, not a pass that checked nothing.
	_, err = invariants.Check(ctx, invariants.Options{Ledger: s.Store, Temporal: s.Client, AccountID: "no-such-" + p[:len(p)-1]})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)

	// Leave nothing open behind: the late result recovers the last job.
	s.lateResult(t, st, open)
	s.awaitClosed(t, open.JobID)
	requireOK(t, s.check(t))
}

// TestPlaceholderWithoutWorkflow is a job service that stopped between writing the placeholder and
// starting the workflow (the placeholder-first rule, which protects the remembered-IDs rule): the
// job stays submitting with nothing to decide its charge. The checker reports it unless it is
// younger than the grace; submitting the same ID again starts the workflow and heals it. The
// account has no credits, so the healed job ends rejected and charges nothing.
func TestPlaceholderWithoutWorkflow(t *testing.T) {
	t.Parallel()
	s := newStory(t, "placeholder", 0)
	id := s.p + "orphan"
	job := jobs.Job{ID: id, AccountID: s.acct, Kind: ledgertest.Fixed(t, s.Store, 25), InputRef: "sim:ok"}
	_, err := s.Store.Submit(s.ctx, ledgerdb.Submission{JobID: id, AccountID: s.acct, Kind: job.Kind, Request: []byte(job.InputRef)})
	require.NoError(t, err)

	v := requireOnly(t, s.check(t), invariants.KindPlaceholderWithoutWorkflow, id)
	require.Equal(t, s.acct, v.AccountID)
	require.Contains(t, v.Message, "no workflow was ever started")

	// A placeholder younger than the grace is a submission in flight, not an orphan.
	requireOK(t, s.check(t, withGrace(time.Hour)))

	// The text and JSON reports say the same.
	report := s.check(t)
	var js bytes.Buffer
	require.NoError(t, report.WriteJSON(&js))
	var decoded struct {
		OK     bool `json:"ok"`
		Counts struct {
			Violations int            `json:"violations"`
			ByKind     map[string]int `json:"violations_by_kind"`
		} `json:"counts"`
		Violations []invariants.Violation `json:"violations"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &decoded), js.String())
	require.False(t, decoded.OK)
	require.Equal(t, 1, decoded.Counts.Violations)
	require.Equal(t, map[string]int{string(invariants.KindPlaceholderWithoutWorkflow): 1}, decoded.Counts.ByKind)
	require.Equal(t, report.Violations, decoded.Violations)

	// Heal: the same submission again starts the workflow, which rejects the unpaid job.
	s.submit(t, s.jobService(), job, ledgerdb.ErrInsufficientCredits)
	s.awaitClosed(t, id)
	requireOK(t, s.check(t))
	ledgertest.RequireSound(t, s.Store, s.acct)
}

// TestWorkflowWithoutJob starts a MeteredJob workflow directly, bypassing the job service, under the
// workflow ID of a job the ledger never saw, on a task queue no worker polls: its first step would
// write the job's placeholder, but nothing runs it, and Temporal holds a job the ledger has never
// heard of (the remembered-IDs rule). The checker reports the open workflow once it is older than
// the grace; the test terminates it afterwards (a closed one charged nothing: no money moves for a
// job the ledger does not know, so it is not reported).
func TestWorkflowWithoutJob(t *testing.T) {
	t.Parallel()
	s := newStory(t, "nojob", 100)
	id := s.p + "ghost"
	in := workflows.JobInput{JobID: id, AccountID: s.acct, Kind: ledgertest.Fixed(t, s.Store, 10), Work: activities.WorkRequest{InputRef: "sim:ok"}, Policy: testPolicy()}
	s.start(t, client.StartWorkflowOptions{
		ID: workflows.JobWorkflowID(s.acct, id), TaskQueue: s.unpolled(),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.BillingStateKey.ValueSet(string(ledgerdb.StateSubmitting)),
			workflows.AccountIDKey.ValueSet(s.acct),
		),
	}, workflows.MeteredJob, in)

	requireOK(t, s.check(t, func(o *invariants.Options) { o.TaskQueue, o.Grace = s.unpolled(), time.Hour }))
	report := s.awaitReport(t, s.unpolled(), func(r invariants.Report) bool { return len(r.Violations) == 1 },
		"the check never reported the open workflow")
	v := requireOnly(t, report, invariants.KindWorkflowWithoutJob, id)
	require.Equal(t, s.acct, v.AccountID)
	require.Contains(t, v.Message, "no worker has run it")
	ledgertest.RequireBalance(t, s.Store, s.acct, 100)
}

// TestUnsettledJobIsReportedThenHealed charges a job through the ledger alone, with no workflow
// to run, deliver or refund it — what a job whose run an operator terminated looks like: charged
// and running, with nothing to settle it (the net-effect rule). Within the grace the checker leaves
// it to the reconcile pass; beyond it, it reports the job. Healing it (as the pass and a status
// read do) refunds it with a heal run, and the check passes again.
func TestUnsettledJobIsReportedThenHealed(t *testing.T) {
	t.Parallel()
	s := newStory(t, "unsettled", 100)
	id, charged := s.charged(t, "charged")

	requireOK(t, s.check(t, withGrace(time.Hour)))
	v := requireOnly(t, s.check(t), invariants.KindUnsettledJob, id)
	require.Contains(t, v.Message, "charged 30 credits and running, but it has no workflow")

	s.heal(t, charged.Job)
	job, err := s.Store.Job(s.ctx, charged.Job.Key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
	require.Equal(t, ledgerdb.ReasonInterrupted, job.RefundReason)
	require.Equal(t, "the job's workflow is gone without settling it", job.RefundDetail)
	requireOK(t, s.check(t))
	ledgertest.RequireSound(t, s.Store, s.acct)
}

// TestChargeAfterItsRunClosedIsReportedAtOnce charges a job after its workflow's run was
// terminated — what a charge held up by a busy ledger does when an operator stops the run
// meanwhile: charged and running, and no run that could ever settle it (the net-effect rule). The
// run closed before the charge, so no healing that is merely late can explain it: the checker
// reports it at once, within any grace, and says that the charge came after the run closed. Healing
// it refunds it, and the check passes again. Before, the checker kept silent for its grace.
func TestChargeAfterItsRunClosedIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	s := newStory(t, "late-charge", 100)
	ctx := s.ctx
	id := s.p + "charged"
	workflowID := s.startUnpolled(t, id)
	require.NoError(t, s.Client.TerminateWorkflow(ctx, workflowID, "", "invariants test: stopped before its charge"))
	closed, err := s.Client.DescribeWorkflow(ctx, workflowID, "")
	require.NoError(t, err)
	closedAt := closed.RawResponse.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
	// The charge commits after the close, on the database's clock.
	for {
		var now time.Time
		require.NoError(t, s.Store.Pool().QueryRow(ctx, `SELECT now()`).Scan(&now))
		if now.After(closedAt) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, charged := s.charged(t, "charged")

	v := requireOnly(t, s.check(t, withGrace(time.Hour)), invariants.KindUnsettledJob, id)
	require.Contains(t, v.Message, "charged 30 credits and running, but its workflow closed as Terminated")
	require.Contains(t, v.Message, "before the charge committed")

	s.heal(t, charged.Job)
	requireOK(t, s.check(t, withGrace(time.Hour)))
	ledgertest.RequireSound(t, s.Store, s.acct)
}

// TestStuckJob starts a charged job's workflow on a task queue no worker polls: the workflow is
// open, but nothing runs it. Within its timeouts that is normal; beyond StuckAfter the checker
// reports it (the reversing-pairs, net-effect and sum-of-rows rules still hold, which is why only
// the age catches it). The test then terminates the workflow and heals the job.
func TestStuckJob(t *testing.T) {
	t.Parallel()
	s := newStory(t, "stuck", 100)
	id, charged := s.charged(t, "charged")
	workflowID := s.startUnpolled(t, id)
	stuckAfter := func(o *invariants.Options) { o.StuckAfter = 10 * time.Millisecond }

	// Within the default timeouts (well over an hour), a running job is not stuck.
	requireOK(t, s.check(t))

	time.Sleep(50 * time.Millisecond)
	v := requireOnly(t, s.check(t, stuckAfter), invariants.KindStuckJob, id)
	require.Contains(t, v.Message, "has been running (charged 30 credits)")
	require.Contains(t, v.Message, "its workflow is still open")

	require.NoError(t, s.Client.TerminateWorkflow(s.ctx, workflowID, "", "invariants test: stuck job released"))
	s.heal(t, charged.Job)
	requireOK(t, s.check(t, stuckAfter))
	ledgertest.RequireSound(t, s.Store, s.acct)
}

// TestBillingStateMismatch reclaims a refunded job through the ledger behind the back of its
// workflow, which is still open and listening for a late result: the workflow says refunded, the
// ledger recovered. The checker reports the open workflow's disagreement (the workflow's state
// must be the ledger's answer); the reversing-pairs, net-effect and sum-of-rows rules hold, since
// the reclaim itself was guarded. A late result then settles the workflow as recovered and the
// check passes again.
func TestBillingStateMismatch(t *testing.T) {
	t.Parallel()
	s := newStory(t, "mismatch", 100)
	id := s.p + "behind-its-back"
	// Listening far longer than the test takes; its late result closes it.
	st := s.listeningJobService()
	key := s.submit(t, st, jobs.Job{ID: id, AccountID: s.acct, Kind: ledgertest.Fixed(t, s.Store, 20), InputRef: "sim:fail"}, nil)
	_, err := st.Wait(s.ctx, key, ledgerdb.StateRefunded)
	require.NoError(t, err)
	s.waitBillingState(t, workflows.JobWorkflowID(s.acct, id), ledgerdb.StateRefunded)
	requireOK(t, s.check(t))

	_, err = s.Store.Reclaim(s.ctx, key)
	require.NoError(t, err)
	v := requireOnly(t, s.check(t), invariants.KindBillingStateMismatch, id)
	require.Contains(t, v.Message, "BillingState refunded, but the ledger says recovered")
	ledgertest.RequireSound(t, s.Store, s.acct)

	require.Equal(t, "signal", s.lateResult(t, st, key).Path)
	s.awaitClosed(t, id)
	requireOK(t, s.check(t))
}

// TestDiscardedResultOfDeletedJob is the outcome deletion must never have (the net-effect rule:
// deletion hides a job, never what it owes): a refunded job deleted by its customer, whose late
// result was taken and discarded while its refund could still be reclaimed — as the job service did
// before a tombstone took its late result, and as a worker of that time still could. The customer
// keeps the refund for delivered work. The checker reports it once older than the grace; reporting
// the same result again bills it (the refund reclaimed, the job settled) and the check passes
// again.
func TestDiscardedResultOfDeletedJob(t *testing.T) {
	t.Parallel()
	s := newStory(t, "discarded", 100)
	ctx := s.ctx
	id, charged := s.charged(t, "deleted")
	key := charged.Job.Key()
	_, err := s.Store.Refund(ctx, key, ledgerdb.ReasonTimedOut, "timed out after 1 attempt", 1)
	require.NoError(t, err)
	_, err = s.Store.Delete(ctx, key)
	require.NoError(t, err)
	result := ledgerdb.ResultReport{Key: key, Attempt: 1, OutputRef: "s3://late/" + id}
	_, err = s.Store.RecordResult(ctx, result)
	require.NoError(t, err)
	// The discard: the result marked taken, the refund left standing.
	_, err = s.Store.MarkResultApplied(ctx, key, 1, ledgerdb.AppliedSettled)
	require.NoError(t, err)

	requireOK(t, s.check(t, withGrace(time.Hour)))
	v := requireOnly(t, s.check(t), invariants.KindDiscardedResult, id)
	require.Equal(t, 3, v.Rule)
	require.Contains(t, v.Message, "deleted while refunded")
	require.Contains(t, v.Message, "refund of 30 credits was never reclaimed")

	rep, err := s.jobService().ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: result.OutputRef})
	require.NoError(t, err)
	require.Equal(t, jobs.PathFallback, rep.Path, rep.Message)
	require.Equal(t, ledgerdb.Applied, rep.Outcome)
	require.Equal(t, ledgerdb.MoneyCharged, rep.Status.MoneyState)
	requireOK(t, s.check(t))
	ledgertest.RequireSound(t, s.Store, s.acct)
}

// TestForeignWorkflowHoldsJobID is another program's workflow under a job's workflow ID (the
// net-effect rule and the doors of docs/design.md): the job is charged and running, its own
// workflow gone, and a workflow of a type nobody registers holds the ID, open. The checker reports
// the job as unsettled — the foreign run never settles it — naming the foreign run, and the foreign
// run itself. Healing goes around it (the refund written in the ledger); the foreign run is still
// reported until it closes, and then the check passes.
func TestForeignWorkflowHoldsJobID(t *testing.T) {
	t.Parallel()
	s := newStory(t, "foreign", 100)
	id, charged := s.charged(t, "held")
	workflowID := workflows.JobWorkflowID(s.acct, id)
	foreign := s.start(t, client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"}, "SomeoneElsesWorkflow")
	queue := s.Config.Temporal.TaskQueue

	report := s.awaitReport(t, queue, func(r invariants.Report) bool { return len(r.Violations) == 2 },
		"the check never reported the job and the foreign run")
	unsettled := report.Of(invariants.KindUnsettledJob)
	require.Len(t, unsettled, 1)
	require.Contains(t, unsettled[0].Message, "SomeoneElsesWorkflow")
	require.Contains(t, unsettled[0].Message, foreign.GetRunID())
	held := report.Of(invariants.KindForeignWorkflow)
	require.Len(t, held, 1)
	require.Equal(t, id, held[0].JobID)
	require.Contains(t, held[0].Message, "SomeoneElsesWorkflow")
	require.Contains(t, held[0].Message, foreign.GetRunID())

	s.heal(t, charged.Job)
	v := requireOnly(t, s.check(t), invariants.KindForeignWorkflow, id)
	require.Contains(t, v.Message, "refunded")

	require.NoError(t, s.Client.TerminateWorkflow(s.ctx, workflowID, foreign.GetRunID(), "invariants test: foreign run closed"))
	s.awaitReport(t, queue, invariants.Report.OK, "the closed foreign run is still reported")
	ledgertest.RequireSound(t, s.Store, s.acct)
}
