package workflows_test

// The doors jobbill does not control, at the workflow: signals typed into the Temporal UI or sent
// by another program, an operator's Cancel, a run started directly by another Temporal client, a
// heal run, a ledger that refuses a step for good. No payload may fail a run, and every door keeps
// the money rules.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// TestInvalidResultSignalsAreIgnored protects the net-effect and price-list rules at the signal
// door: a result signal whose payload cannot be read, names an attempt that never ran, or carries
// no usable output is ignored — counted, and the job goes on — and the job is delivered by the
// valid result that follows, with one charge and no refund. Before, an attempt of -1 was delivered
// (with the real ledger it failed the run with the job left charged), and an unreadable payload
// blocked the run until the next signal.
func TestInvalidResultSignalsAreIgnored(t *testing.T) {
	for name, payload := range map[string]any{
		"negative attempt":       workflows.ResultSignal{Attempt: -1, OutputRef: "s3://forged"},
		"attempt zero":           workflows.ResultSignal{Attempt: 0, OutputRef: "s3://forged"},
		"attempt that never ran": workflows.ResultSignal{Attempt: 7, OutputRef: "s3://forged"},
		"no output":              workflows.ResultSignal{Attempt: 1},
		"output with NUL":        workflows.ResultSignal{Attempt: 1, OutputRef: "s3://x\x00y"},
		"bidi override":          workflows.ResultSignal{Attempt: 1, OutputRef: "s3://x\u202Egnp.exe"},
		"unreadable payload":     "not a result",
		"a number":               42,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, "bad-signal", 100, failTransiently)
			h.signalAt(500*time.Millisecond, workflows.SignalResult, payload)
			h.signalAt(2*time.Second, workflows.SignalResult, workflows.ResultSignal{Attempt: 1, OutputRef: "s3://ok"})
			status := h.run()

			assert.Equal(t, delivered, status.State)
			assert.Equal(t, "s3://ok", status.OutputRef, "the invalid result was not taken")
			assert.Equal(t, 1, status.IgnoredSignals)
			assert.Contains(t, status.LastIgnored, `"result" signal was ignored`)
			h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpSettle: 1})
			h.assertLedger(60, ledgerdb.KindCharge)
		})
	}
}

// TestUnreadableSignalDoesNotStopTheWork protects the net-effect rule: an unreadable result signal
// while the work runs must not keep the run from hearing the work's own result. Before, the SDK
// dropped the payload and blocked the receiving callback until the next signal, so the finished
// work was never billed and the run timed out.
func TestUnreadableSignalDoesNotStopTheWork(t *testing.T) {
	h := newHarness(t, "unreadable", 100, func(_ context.Context, req activities.WorkRequest, call int) (activities.WorkResult, error) {
		if call == 1 {
			return failTransiently(context.Background(), req, call)
		}
		return result(req.Attempt), nil
	})
	h.env.SetTestTimeout(10 * time.Second)
	h.signalAt(500*time.Millisecond, workflows.SignalResult, "not a result")
	status := h.run()

	assert.Equal(t, delivered, status.State)
	assert.Equal(t, 1, status.IgnoredSignals)
	h.assertLedger(60, ledgerdb.KindCharge)
}

// TestInvalidSignalsDoNotExtendTheLateResultWindow protects the dead-letter door: a refunded job
// listens for a late result for its window, and a stream of invalid signals does not keep it
// listening for ever. The job stays refunded (net 0).
func TestInvalidSignalsDoNotExtendTheLateResultWindow(t *testing.T) {
	h := newHarness(t, "window", 100, timeOut)
	for i := range 5 {
		h.signalAt(time.Duration(10+8*i)*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: -1, OutputRef: "x"})
		h.signalAt(time.Duration(14+8*i)*time.Minute, workflows.SignalRedrive, workflows.RedriveRequest{By: strings.Repeat("x", 500)})
	}
	began := h.env.Now()
	status := h.run()

	assert.Equal(t, refunded, status.State)
	assert.Equal(t, 10, status.IgnoredSignals)
	assert.Less(t, h.env.Now().Sub(began), testPolicy.LateResultWindow+5*time.Minute, "the window is a deadline")
	h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
}

// TestCancelledRunRefundsAsStoppedByAnOperator protects the net-effect rule at the UI's Cancel
// button: the work is stopped, the charge refunded with a reason that says an operator stopped it,
// and the run ends cancelled.
func TestCancelledRunRefundsAsStoppedByAnOperator(t *testing.T) {
	h := newHarness(t, "cancelled-v1", 100, func(context.Context, activities.WorkRequest, int) (activities.WorkResult, error) {
		time.Sleep(200 * time.Millisecond)
		return activities.WorkResult{}, fmt.Errorf("cancelled")
	})
	job := h.runCancelled()
	assert.Equal(t, refunded, job.State)
	assert.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
	assert.Equal(t, "stopped by an operator: cancelled", job.RefundDetail)
	h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
}

// TestHealRunRefundsAndStillTakesALateResult protects the net-effect and idempotent-doors rules for
// a job whose earlier run ended without settling it (terminated in the UI): the heal run refunds
// the charge with the reason it is given, does not run the work again, and a result that lands
// later reclaims the refund. A second heal run refunds nothing more.
func TestHealRunRefundsAndStillTakesALateResult(t *testing.T) {
	h := newHarness(t, "healed", 100, succeed)
	_, err := h.ledger.Charge(context.Background(), h.key())
	require.NoError(t, err)
	_, err = h.ledger.RecordAttempt(context.Background(), h.key(), 1)
	require.NoError(t, err)
	h.signalAt(10*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: 1, OutputRef: "s3://late"})
	h.env.ExecuteWorkflow(workflows.MeteredJob, workflows.JobInput{
		JobID: h.jobID, AccountID: account, Kind: kind, Policy: testPolicy,
		Heal: &workflows.HealRequest{Code: ledgerdb.ReasonStoppedByOperator, Reason: "stopped by an operator: terminated (bad input)", PreviousRunID: "run-1"},
	})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	var status workflows.JobStatus
	require.NoError(t, h.env.GetWorkflowResult(&status))

	assert.Equal(t, recovered, status.State)
	assert.Equal(t, 0, h.workCallCount(), "a heal run never runs the work again")
	job, _ := h.ledger.Job(h.key())
	assert.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason)
	assert.Equal(t, "stopped by an operator: terminated (bad input)", job.RefundDetail)
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	h.assertStates([]ledgerdb.State{submitting, refunded, recovered}, []bool{false, true, false})
}

// TestDirectStartWritesItsPlaceholder protects the price-list, remembered-IDs and idempotent-doors
// rules at the door of another Temporal client: a run started without the job service's placeholder
// writes it (the same guarded submission), charges it and bills the job; a run whose ID holds
// another request's placeholder charges nothing and shows that job as the ledger has it; a run for
// an unknown account is rejected.
func TestDirectStartWritesItsPlaceholder(t *testing.T) {
	run := func(t *testing.T, ledger *activitiestest.MemoryLedger, in workflows.JobInput) workflows.JobStatus {
		h := harnessOver(t, ledger, in.AccountID, in.JobID, succeed)
		h.env.ExecuteWorkflow(workflows.MeteredJob, in)
		require.True(t, h.env.IsWorkflowCompleted())
		require.NoError(t, h.env.GetWorkflowError())
		var status workflows.JobStatus
		require.NoError(t, h.env.GetWorkflowResult(&status))
		require.NoError(t, ledger.Audit(), "the reversing-pairs and sum-of-rows rules")
		return status
	}
	ledger := newLedger()
	ledger.Grant(account, 100)
	input := func(id, inputRef string) workflows.JobInput {
		return workflows.JobInput{JobID: id, AccountID: account, Kind: kind, Policy: testPolicy,
			Work: activities.WorkRequest{InputRef: inputRef}}
	}

	direct := run(t, ledger, input("direct", "s3://in/direct"))
	assert.Equal(t, delivered, direct.State)
	assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, ledger.Kinds(jobOf("direct")))
	assert.Equal(t, 1, countCalls(ledger, activitiestest.OpSubmit, jobOf("direct")))

	// Another request already holds the ID: nothing is charged for this run.
	_, err := ledger.Submit(context.Background(), ledgerdb.Submission{JobID: "taken", AccountID: account, Kind: kind, Request: []byte("s3://in/theirs")})
	require.NoError(t, err)
	conflict := run(t, ledger, input("taken", "s3://in/mine"))
	assert.Equal(t, submitting, conflict.State, "the other request's placeholder, as the ledger has it")
	assert.Contains(t, conflict.Reason, "this start was refused")
	assert.Contains(t, conflict.Reason, "different request")
	assert.Empty(t, ledger.Kinds(jobOf("taken")))

	unknown := input("nobody", "s3://in/x")
	unknown.AccountID = "no-such-account"
	assert.Equal(t, rejected, run(t, ledger, unknown).State)
	assert.Equal(t, int64(100-cost), ledger.Balance(account))
}

// TestLedgerRefusalRaisesAnAlarm protects the net-effect rule when the ledger refuses a
// compensation for good (an out-of-range balance, a violated constraint): the run neither retries
// for ever nor fails silently — it raises an alarm (a ledger record an operator and the invariant
// checker see) and ends without error, the job left for the reconcile pass to retry once repaired.
func TestLedgerRefusalRaisesAnAlarm(t *testing.T) {
	h := newHarness(t, "alarm", 100, timeOut)
	h.ledger.RefuseForGood(activitiestest.OpRefund, ledgerdb.ErrOverflow)
	status := h.run()

	assert.Equal(t, running, status.State, "the refund was not written")
	assert.Contains(t, status.Alarm, "refund refused by the ledger")
	msg, raised := h.ledger.Alarm(h.key(), "refund")
	assert.True(t, raised, "an alarm was raised")
	assert.Contains(t, msg, "amount out of range")
	assert.Equal(t, 1, countCalls(h.ledger, activitiestest.OpRefund, h.key()), "a refusal for good is not retried")
}

// countCalls counts the calls of op for the job.
func countCalls(ledger *activitiestest.MemoryLedger, op string, job ledgerdb.JobKey) int {
	n := 0
	for _, c := range ledger.Calls() {
		if c.Op == op && c.Job == job {
			n++
		}
	}
	return n
}

// TestRefusedStartShowsTheLedgersJob keeps the Temporal UI from contradicting the ledger when
// another program starts a run under the ID of a job the ledger has settled (the net-effect and
// remembered-IDs rules: the run charges nothing): a run with another input shows the job as the
// ledger answered — delivered, or deleted with its money state kept — in its search attributes and
// its status, never "rejected"; a run whose input cannot be billed, refused before it asks the
// ledger, upserts no search attribute at all.
func TestRefusedStartShowsTheLedgersJob(t *testing.T) {
	ledger := newLedger()
	ledger.Grant(account, 100)
	// start runs the job's workflow over the ledger with input, as another Temporal client would
	// start it, and answers the run's harness and its final status.
	start := func(in workflows.JobInput) (*harness, workflows.JobStatus) {
		h := harnessOver(t, ledger, account, "settled", succeed)
		h.env.ExecuteWorkflow(workflows.MeteredJob, in)
		require.True(t, h.env.IsWorkflowCompleted())
		require.NoError(t, h.env.GetWorkflowError())
		var status workflows.JobStatus
		require.NoError(t, h.env.GetWorkflowResult(&status))
		return h, status
	}
	input := func(inputRef string) workflows.JobInput {
		return workflows.JobInput{JobID: "settled", AccountID: account, Kind: kind, Policy: testPolicy,
			Work: activities.WorkRequest{InputRef: inputRef}}
	}
	_, status := start(input("s3://in/first"))
	require.Equal(t, delivered, status.State)

	again, status := start(input("s3://in/another"))
	assert.Equal(t, delivered, status.State)
	assert.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
	assert.Contains(t, status.Reason, "this start was refused")
	again.assertStates([]ledgerdb.State{submitting, delivered}, []bool{false, false})

	require.NoError(t, ledger.Delete(jobOf("settled")))
	gone, status := start(input("s3://in/another"))
	assert.Equal(t, ledgerdb.StateDeleted, status.State)
	assert.Equal(t, ledgerdb.MoneyCharged, status.MoneyState, "a tombstone keeps its money state")
	gone.assertStates([]ledgerdb.State{submitting, ledgerdb.StateDeleted}, []bool{false, false})

	withAmount := input("s3://in/another")
	withAmount.Cost = 1
	unasked, status := start(withAmount)
	assert.Equal(t, rejected, status.State, "this run charged nothing")
	unasked.assertStates(nil, nil)

	assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, ledger.Kinds(jobOf("settled")))
	assert.Equal(t, int64(100-cost), ledger.Balance(account))
	require.NoError(t, ledger.Audit(), "the reversing-pairs and sum-of-rows rules")
}
