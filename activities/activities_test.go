package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
)

// The production ledger must satisfy the activities' interface.
var _ activities.Ledger = (*ledgerdb.Store)(nil)

// acmeJob names the job id of the account acme, which every job of these tests belongs to.
func acmeJob(id string) ledgerdb.JobKey { return ledgerdb.JobKey{AccountID: "acme", JobID: id} }

// runnerFunc adapts a function to activities.Runner.
type runnerFunc func(ctx context.Context, req activities.WorkRequest) (activities.WorkResult, error)

// pricedLedger is an in-memory ledger whose price list sells "fixed-5" and "fixed-40" by the job,
// at 5 and 40 credits.
func pricedLedger() *activitiestest.MemoryLedger {
	ledger := activitiestest.NewMemoryLedger()
	for _, price := range []int64{5, 40} {
		ledger.SetPrice(ledgerdb.Price{Kind: fmt.Sprintf("fixed-%d", price), Unit: ledgerdb.UnitJob, UnitPrice: price, MaxUnits: 1})
	}
	return ledger
}

func (f runnerFunc) Run(ctx context.Context, req activities.WorkRequest) (activities.WorkResult, error) {
	return f(ctx, req)
}

// newEnv returns an activity test environment with the activities registered over ledger.
func newEnv(t *testing.T, ledger activities.Ledger, runner activities.Runner) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(activitiestest.Logger(t))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Ledger: ledger, Runner: runner})
	return env
}

// appError asserts err is an application error of errType with the given retryability.
func appError(t *testing.T, err error, errType string, nonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, errType, appErr.Type())
	assert.Equal(t, nonRetryable, appErr.NonRetryable(), "NonRetryable")
	return appErr
}

// TestChargeRefusalsAreNonRetryable protects the workflow's step 1 (docs/design.md) and the
// net-effect and remembered-IDs rules: a charge the ledger refuses (insufficient credits, a burnt
// ID, an ID never submitted) is a non-retryable error with a constant type, so no retry can turn it
// into a charge, and nothing is written.
func TestChargeRefusalsAreNonRetryable(t *testing.T) {
	ledger := pricedLedger()
	ledger.Grant("acme", 10)
	ledger.AddPlaceholder(acmeJob("too-dear"), "fixed-40")
	ledger.AddPlaceholder(acmeJob("burnt"), "fixed-5")
	_, err := ledger.Charge(context.Background(), acmeJob("burnt"))
	require.NoError(t, err)
	_, err = ledger.Deliver(context.Background(), acmeJob("burnt"), 1)
	require.NoError(t, err)
	require.NoError(t, ledger.Delete(acmeJob("burnt")))
	var a *activities.Activities

	for _, tc := range []struct {
		jobID, errType string
		state          ledgerdb.State
		money          ledgerdb.MoneyState
	}{
		{"too-dear", activities.ErrorTypeInsufficientCredits, ledgerdb.StateRejected, ledgerdb.MoneyNotCharged},
		// A tombstone keeps the money state it had: this one was delivered, so it stays charged.
		{"burnt", activities.ErrorTypeJobGone, ledgerdb.StateDeleted, ledgerdb.MoneyCharged},
		{"never-submitted", activities.ErrorTypeJobNotFound, "", ledgerdb.MoneyNotCharged},
	} {
		t.Run(tc.errType, func(t *testing.T) {
			env := newEnv(t, ledger, nil)
			_, err := env.ExecuteActivity(a.Charge, activities.ChargeInput{Job: acmeJob(tc.jobID)})
			appErr := appError(t, err, tc.errType, true)
			var res activities.LedgerResult
			require.NoError(t, appErr.Details(&res), "the refusal carries the job's state")
			assert.Equal(t, tc.state, res.State)
			assert.Equal(t, tc.money, res.MoneyState)
		})
	}
	assert.Empty(t, ledger.Entries(acmeJob("too-dear")), "a refused charge writes nothing")
	assert.Equal(t, int64(10-5), ledger.Balance("acme"))
	require.NoError(t, ledger.Audit())
}

// TestLedgerFailuresStayRetryable protects the idempotent-doors rule: an error that is not a
// business refusal (a dropped connection, here after the commit) stays retryable, and the retry is
// safe because the guard answers AlreadyApplied without a second row.
func TestLedgerFailuresStayRetryable(t *testing.T) {
	ledger := pricedLedger()
	ledger.Grant("acme", 100)
	ledger.AddPlaceholder(acmeJob("render-1"), "fixed-40")
	ledger.LoseAnswers(activitiestest.OpCharge, 1)
	env := newEnv(t, ledger, nil)
	var a *activities.Activities

	_, err := env.ExecuteActivity(a.Charge, activities.ChargeInput{Job: acmeJob("render-1")})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.False(t, appErr.NonRetryable(), "a lost answer must be retried")

	val, err := env.ExecuteActivity(a.Charge, activities.ChargeInput{Job: acmeJob("render-1")})
	require.NoError(t, err)
	var res activities.LedgerResult
	require.NoError(t, val.Get(&res))
	assert.Equal(t, ledgerdb.AlreadyApplied, res.Outcome)
	assert.Equal(t, ledgerdb.StateRunning, res.State)
	assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, ledger.Kinds(acmeJob("render-1")))
	assert.Equal(t, int64(60), ledger.Balance("acme"))
}

// TestPermanentLedgerRefusalsAreNotRetried protects the net-effect rule on a compensation step:
// when the database refuses a refund for good — a balance out of range (SQLSTATE 22003), a violated
// constraint (23514), a missing privilege (42501) — retrying it can never succeed, so the error is
// non-retryable (type LedgerRefused) and the workflow raises an alarm instead. Before, an overflow
// stayed retryable and the refund was retried for ever. A lost connection or a deadlock stays
// retryable.
func TestPermanentLedgerRefusalsAreNotRetried(t *testing.T) {
	for name, tc := range map[string]struct {
		err          error
		errType      string
		nonRetryable bool
	}{
		"overflow":             {fmt.Errorf("job x: %w", ledgerdb.ErrOverflow), activities.ErrorTypeLedgerRefused, true},
		"balance out of range": {ledgerdb.ErrBalanceOutOfRange, activities.ErrorTypeLedgerRefused, true},
		"check violation":      {&pgconn.PgError{Code: "23514", Message: "violates check constraint"}, activities.ErrorTypeLedgerRefused, true},
		"missing privilege":    {&pgconn.PgError{Code: "42501", Message: "permission denied"}, activities.ErrorTypeLedgerRefused, true},
		"lost connection":      {errors.New("connection reset by peer"), "", false},
		"deadlock":             {&pgconn.PgError{Code: "40P01", Message: "deadlock detected"}, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			ledger := pricedLedger()
			ledger.Grant("acme", 100)
			ledger.AddPlaceholder(acmeJob("render-1"), "fixed-40")
			_, err := ledger.Charge(context.Background(), acmeJob("render-1"))
			require.NoError(t, err)
			ledger.RefuseForGood(activitiestest.OpRefund, tc.err)
			env := newEnv(t, ledger, nil)
			var a *activities.Activities
			_, err = env.ExecuteActivity(a.Refund, activities.RefundInput{Job: acmeJob("render-1"), Reason: ledgerdb.ReasonTimedOut, Detail: "timed out", Attempts: 3})
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			if tc.errType != "" {
				assert.Equal(t, tc.errType, appErr.Type())
			}
			assert.Equal(t, tc.nonRetryable, appErr.NonRetryable())
		})
	}
}

// TestLedgerActivitiesMoveTheRecordedCost protects the reversing-pairs, net-effect and price-list
// rules: charge, refund and reclaim take no amount, each moves the job's recorded cost once,
// repeats write nothing, and a recovered job nets −cost.
func TestLedgerActivitiesMoveTheRecordedCost(t *testing.T) {
	ledger := pricedLedger()
	ledger.Grant("acme", 100)
	ledger.AddPlaceholder(acmeJob("render-2"), "fixed-40")
	env := newEnv(t, ledger, nil)
	var a *activities.Activities

	run := func(fn, input any) activities.LedgerResult {
		t.Helper()
		val, err := env.ExecuteActivity(fn, input)
		require.NoError(t, err)
		var res activities.LedgerResult
		require.NoError(t, val.Get(&res))
		return res
	}

	charge := run(a.Charge, activities.ChargeInput{Job: acmeJob("render-2")})
	assert.Equal(t, activities.LedgerResult{Outcome: ledgerdb.Applied, State: ledgerdb.StateRunning,
		MoneyState: ledgerdb.MoneyCharged, Cost: 40, Kind: "fixed-40", Unit: ledgerdb.UnitJob, HeldUnits: 1, Charged: 40,
		EntryID: charge.EntryID, BalanceAfter: 60}, charge)

	refund := run(a.Refund, activities.RefundInput{Job: acmeJob("render-2"), Reason: ledgerdb.ReasonTimedOut, Detail: "timed out after 3 attempts", Attempts: 3})
	assert.Equal(t, ledgerdb.Applied, refund.Outcome)
	assert.Equal(t, ledgerdb.StateRefunded, refund.State)
	assert.Equal(t, "timed out after 3 attempts", refund.Reason)
	assert.Equal(t, int64(100), refund.BalanceAfter)
	assert.Equal(t, ledgerdb.AlreadyApplied, run(a.Refund, activities.RefundInput{Job: acmeJob("render-2"), Reason: ledgerdb.ReasonGPUFailed, Detail: "again", Attempts: 3}).Outcome)

	reclaim := run(a.Reclaim, activities.ReclaimInput{Job: acmeJob("render-2")})
	assert.Equal(t, ledgerdb.Applied, reclaim.Outcome)
	assert.Equal(t, ledgerdb.StateRecovered, reclaim.State)
	assert.Equal(t, ledgerdb.MoneyCharged, reclaim.MoneyState)
	assert.Equal(t, ledgerdb.AlreadyApplied, run(a.Reclaim, activities.ReclaimInput{Job: acmeJob("render-2")}).Outcome)
	assert.Equal(t, ledgerdb.AlreadyApplied, run(a.Deliver, activities.DeliverInput{Job: acmeJob("render-2"), Attempts: 3}).Outcome)

	assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim}, ledger.Kinds(acmeJob("render-2")))
	assert.Equal(t, int64(-40), ledger.Net(acmeJob("render-2")))
	require.NoError(t, ledger.Audit())
}

// TestReclaimOnTheSuccessPathIsANoOp protects the success path (docs/design.md): reclaim is called
// unconditionally and, on a job that was never refunded, answers NotApplied and writes nothing.
func TestReclaimOnTheSuccessPathIsANoOp(t *testing.T) {
	ledger := pricedLedger()
	ledger.Grant("acme", 100)
	ledger.AddPlaceholder(acmeJob("render-3"), "fixed-40")
	env := newEnv(t, ledger, nil)
	var a *activities.Activities

	_, err := env.ExecuteActivity(a.Charge, activities.ChargeInput{Job: acmeJob("render-3")})
	require.NoError(t, err)
	val, err := env.ExecuteActivity(a.Reclaim, activities.ReclaimInput{Job: acmeJob("render-3")})
	require.NoError(t, err)
	var res activities.LedgerResult
	require.NoError(t, val.Get(&res))
	assert.Equal(t, ledgerdb.NotApplied, res.Outcome)
	assert.Equal(t, ledgerdb.StateRunning, res.State)
	assert.Equal(t, int64(-40), ledger.Net(acmeJob("render-3")))
}

// TestRefundNeverWaitsForAReasonCode checks that a refund whose input names no code of the
// vocabulary — none, in runs recorded before the codes, or anything a foreign client's heal input
// carried — still gives the cost back (the net-effect rule: a failed job nets 0), told as unknown,
// with its words scrubbed.
func TestRefundNeverWaitsForAReasonCode(t *testing.T) {
	for _, code := range []ledgerdb.Reason{"", "lost in space"} {
		ledger := pricedLedger()
		ledger.Grant("acme", 100)
		ledger.AddPlaceholder(acmeJob("render-6"), "fixed-40")
		_, err := ledger.Charge(context.Background(), acmeJob("render-6"))
		require.NoError(t, err)
		env := newEnv(t, ledger, nil)
		var a *activities.Activities
		val, err := env.ExecuteActivity(a.Refund, activities.RefundInput{Job: acmeJob("render-6"), Reason: code, Detail: "token=abc123", Attempts: 1})
		require.NoError(t, err, "code %q", code)
		var res activities.LedgerResult
		require.NoError(t, val.Get(&res))
		assert.Equal(t, ledgerdb.Applied, res.Outcome)
		job, _ := ledger.Job(acmeJob("render-6"))
		assert.Equal(t, ledgerdb.ReasonUnknown, job.RefundReason)
		assert.Equal(t, "token=***", job.RefundDetail)
		assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund}, ledger.Kinds(acmeJob("render-6")))
	}
}
