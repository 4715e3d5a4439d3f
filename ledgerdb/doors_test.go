package ledgerdb_test

// The ledger's side of the doors: bounded balances, the one-step settle, the charge that checks
// the request it bills, the result inbox, alarms and honest reject reasons — against the real
// Postgres, as the application role.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// fill grants an account MaxAmount at a time until its balance is total, in parallel batches of
// keys so that reaching the bound takes a second, not minutes.
func fill(t *testing.T, s *ledgerdb.Store, accountID string, total int64) {
	t.Helper()
	grants := total / ledgerdb.MaxAmount
	var wg sync.WaitGroup
	errs := make(chan error, grants+1)
	for i := range grants {
		wg.Go(func() {
			_, err := s.Grant(context.Background(), ledgerdb.Credit{AccountID: accountID, Amount: ledgerdb.MaxAmount, Key: fmt.Sprintf("fill-%d", i)})
			errs <- err
		})
	}
	wg.Wait()
	if rest := total % ledgerdb.MaxAmount; rest > 0 {
		_, err := s.Grant(context.Background(), ledgerdb.Credit{AccountID: accountID, Amount: rest, Key: "fill-rest"})
		errs <- err
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestBalanceBoundsKeepEveryRefundAndReclaimInRange protects money rules 3 and 6 at the int64
// limit: a refund and a reclaim are never refused, so the balance must always leave them room. A
// grant that would take the balance plus the pending refunds (the running jobs' costs) past
// MaxBalance is refused with nothing written, a grant that lands exactly on the bound passes, and
// the refund of a running job at the bound still fits. Before, balances were unbounded and a
// refund near the int64 limit failed with SQLSTATE 22003, retried for ever.
func TestBalanceBoundsKeepEveryRefundAndReclaimInRange(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 0, 40)
	fill(t, s, acct, ledgerdb.MaxBalance)
	ledgertest.RequireBalance(t, s, acct, ledgerdb.MaxBalance)

	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1, Key: "one-past"})
	require.ErrorIs(t, err, ledgerdb.ErrBalanceOutOfRange)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1, Key: "one-past-adjusted"})
	require.ErrorIs(t, err, ledgerdb.ErrBalanceOutOfRange)
	ledgertest.RequireBalance(t, s, acct, ledgerdb.MaxBalance)

	// A charge moves the credits into a pending refund: the upper exposure stays on the bound, so
	// no grant may refill the balance, and the refund lands exactly on it.
	_, err = s.Charge(ctx, job)
	require.NoError(t, err)
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 40, Key: "refill"})
	require.ErrorIs(t, err, ledgerdb.ErrBalanceOutOfRange, "the running job's refund must still fit")
	refund, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 1)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.MaxBalance, refund.BalanceAfter)
	reclaim, err := s.Reclaim(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.MaxBalance-40, reclaim.BalanceAfter)
	ledgertest.RequireBalance(t, s, acct, ledgerdb.MaxBalance-40)
}

// TestNegativeAdjustmentBoundLeavesRoomForReclaims protects the debt rule at the other end: the
// balance minus the pending reclaims (the refunded jobs' costs) may not go below -MaxBalance, so
// an adjustment that would take it there is refused, and the reclaim of a refunded job at the
// bound still fits.
func TestNegativeAdjustmentBoundLeavesRoomForReclaims(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 40, 40)
	_, err := s.Charge(ctx, job)
	require.NoError(t, err)
	_, err = s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "failed for good", 1)
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, 40)

	// Down to -MaxBalance + 40 in MaxAmount steps: with the 40 awaiting a reclaim, exactly the bound.
	for i, left := 0, ledgerdb.MaxBalance; left > 0; i++ {
		step := min(left, ledgerdb.MaxAmount)
		_, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -step, Key: fmt.Sprintf("down-%d", i)})
		require.NoError(t, err)
		left -= step
	}
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -1, Key: "one-past"})
	require.ErrorIs(t, err, ledgerdb.ErrBalanceOutOfRange)
	reclaim, err := s.Reclaim(ctx, job)
	require.NoError(t, err)
	require.Equal(t, -ledgerdb.MaxBalance, reclaim.BalanceAfter)
	ledgertest.RequireBalance(t, s, acct, -ledgerdb.MaxBalance)
}

// TestSchemaMaxBalanceIsTheGoOne keeps the bound in one place in effect: the schema's
// ledger_max_balance() and ledgerdb.MaxBalance are the same number.
func TestSchemaMaxBalanceIsTheGoOne(t *testing.T) {
	var schema int64
	require.NoError(t, ledgertest.OwnerPool(t).QueryRow(context.Background(), `SELECT ledger_max_balance()`).Scan(&schema))
	require.Equal(t, ledgerdb.MaxBalance, schema)
}

// TestSettleBillsAResultInOneStep protects rules 2, 3 and 8: a result settles a running job
// (delivered, no row) or a refunded one (recovered, one reclaim row) in one transaction, and a
// second settle changes nothing.
func TestSettleBillsAResultInOneStep(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)

	acct, onTime := submitted(t, s, 100, 40)
	_, err := s.Charge(ctx, onTime)
	require.NoError(t, err)
	tr, err := s.Settle(ctx, onTime, 2, nil, "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateDelivered, tr.Job.State)
	require.Equal(t, 2, tr.Job.Attempts)
	require.Zero(t, tr.EntryID, "a delivery moves no money")
	again, err := s.Settle(ctx, onTime, 2, nil, "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -40}, entries(t, s, onTime))

	lateSub := ledgerdb.Submission{JobID: ledgertest.ID(t, "late"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 30), Request: []byte("x")}
	_, err = s.Submit(ctx, lateSub)
	require.NoError(t, err)
	late := lateSub.Key()
	_, err = s.Charge(ctx, late)
	require.NoError(t, err)
	_, err = s.Refund(ctx, late, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	require.NoError(t, err)
	tr, err = s.Settle(ctx, late, 3, nil, "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	require.NotZero(t, tr.EntryID)
	again, err = s.Settle(ctx, late, 3, nil, "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -30, ledgerdb.KindRefund: 30, ledgerdb.KindReclaim: -30}, entries(t, s, late))
	ledgertest.RequireBalance(t, s, acct, 100-40-30)

	_, never := submitted(t, s, 100, 10)
	tr, err = s.Settle(ctx, never, 1, nil, "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.NotApplied, tr.Outcome, "a job never charged has nothing to bill")
	require.Empty(t, entries(t, s, never))
}

// TestSettleRacingRefundLosesNoResult protects rule 3 where a result lands at the moment a refund
// is written (the heal of a terminated job racing the late-result fallback): whichever commits
// first, the job ends billed for its delivered work — delivered with one charge, or recovered with
// charge, refund and reclaim — never refunded with the result lost.
func TestSettleRacingRefundLosesNoResult(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 10_000)
	outcomes := map[ledgerdb.State]int{}
	for i := range 60 {
		sub := ledgerdb.Submission{JobID: ledgertest.ID(t, fmt.Sprintf("race-%d", i)), AccountID: acct, Kind: ledgertest.Fixed(t, s, 10), Request: []byte("x")}
		_, err := s.Submit(ctx, sub)
		require.NoError(t, err)
		job := sub.Key()
		_, err = s.Charge(ctx, job)
		require.NoError(t, err)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_, err := s.Refund(ctx, job, ledgerdb.ReasonStoppedByOperator, "stopped by an operator: terminated", 1)
			require.NoError(t, err)
		})
		wg.Go(func() {
			<-start
			_, err := s.Settle(ctx, job, 1, nil, "")
			require.NoError(t, err)
		})
		close(start)
		wg.Wait()
		// A settle that lost the race to the refund finds the job refunded; the next settle (the
		// fallback's retry, a second report) recovers it.
		tr, err := s.Settle(ctx, job, 1, nil, "")
		require.NoError(t, err)
		outcomes[tr.Job.State]++
		rows := entries(t, s, job)
		switch tr.Job.State {
		case ledgerdb.StateDelivered:
			require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -10}, rows)
		case ledgerdb.StateRecovered:
			require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -10, ledgerdb.KindRefund: 10, ledgerdb.KindReclaim: -10}, rows)
		default:
			t.Fatalf("job %s ended %s: the result was lost", job, tr.Job.State)
		}
	}
	t.Logf("settle racing refund: %v", outcomes)
	ledgertest.RequireBalance(t, s, acct, 10_000-60*10)
}

// TestChargeChecksTheRequestItBills protects rules 5 and 7 for a workflow started directly under
// a job's ID: a charge that names another request's fingerprint charges nothing, and the job stays
// a placeholder; the matching fingerprint charges it once.
func TestChargeChecksTheRequestItBills(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 100)
	sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), Request: []byte("s3://in/theirs")}
	_, err := s.Submit(ctx, sub)
	require.NoError(t, err)

	other := sub
	other.Request = []byte("s3://in/mine")
	tr, err := s.ChargeMatching(ctx, sub.Key(), other.Fingerprint())
	require.ErrorIs(t, err, ledgerdb.ErrConflict)
	require.Equal(t, ledgerdb.StateSubmitting, tr.Job.State)
	require.Empty(t, entries(t, s, sub.Key()))

	tr, err = s.ChargeMatching(ctx, sub.Key(), sub.Fingerprint())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	ledgertest.RequireBalance(t, s, acct, 60)
}

// TestRejectReasonsAreHonest protects the submission rules: a job rejected for want of credits
// answers ErrInsufficientCredits; one rejected because its workflow ended before charging it (or
// another program's workflow holds its ID) answers ErrRejected with its reason — not insufficient
// credits, which a top-up would seem to fix — and every rejected ID stays rejected after a top-up.
func TestRejectReasonsAreHonest(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, poor := submitted(t, s, 10, 40)
	_, err := s.Charge(ctx, poor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)

	for _, reason := range []ledgerdb.RejectReason{ledgerdb.RejectWorkflowEnded, ledgerdb.RejectWorkflowIDTaken} {
		sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "orphan"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 5), Request: []byte("x")}
		_, err := s.Submit(ctx, sub)
		require.NoError(t, err)
		job := sub.Key()
		tr, err := s.RejectOrphan(ctx, job, reason)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
		require.Equal(t, reason, tr.Job.RejectReason)
		_, err = s.Charge(ctx, job)
		require.ErrorIs(t, err, ledgerdb.ErrRejected)
		require.NotErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
		again, err := s.RejectOrphan(ctx, job, reason)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	}
	_, err = s.RejectOrphan(ctx, poor, ledgerdb.RejectInsufficientCredits)
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "only an orphan's reasons reject a placeholder")

	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1000, Key: "top-up"})
	require.NoError(t, err)
	_, err = s.Charge(ctx, poor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits, "a rejected ID stays rejected after a top-up")
	ledgertest.RequireBalance(t, s, acct, 1010)
}

// TestResultInboxRecordsOnce protects rule 8 at the report door: a result is recorded once per
// job and attempt before anyone acts on it; the same report again answers AlreadyApplied; another
// output for the same attempt is a conflict; a job never charged, deleted or unknown is refused;
// bad input writes nothing. Marking it applied happens once.
func TestResultInboxRecordsOnce(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 100, 40)
	report := ledgerdb.ResultReport{Key: job, Attempt: 1, OutputRef: "s3://out/1", FinishedAt: time.Now().UTC()}

	_, err := s.RecordResult(ctx, report)
	require.ErrorIs(t, err, ledgerdb.ErrNotStarted, "a placeholder has no work to deliver")
	_, err = s.Charge(ctx, job)
	require.NoError(t, err)

	rec, err := s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, rec.Outcome)
	require.Equal(t, ledgerdb.StateRunning, rec.JobState)
	require.Nil(t, rec.AppliedAt)
	again, err := s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	other := report
	other.OutputRef = "s3://out/forged"
	_, err = s.RecordResult(ctx, other)
	require.ErrorIs(t, err, ledgerdb.ErrConflict)

	pending, err := s.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, report.OutputRef, pending[0].Report.OutputRef)
	require.Equal(t, job, pending[0].Report.Key, "the pending result names its job and so its account")
	outcome, err := s.MarkResultApplied(ctx, job, 1, ledgerdb.AppliedBySignal)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	outcome, err = s.MarkResultApplied(ctx, job, 1, ledgerdb.AppliedByFallback)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, outcome)
	pending, err = s.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Empty(t, pending)
	rec, err = s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.NotNil(t, rec.AppliedAt, "a repeat learns the result was taken")

	for name, bad := range map[string]ledgerdb.ResultReport{
		"attempt 0":        {Key: job, Attempt: 0, OutputRef: "s3://x"},
		"negative attempt": {Key: job, Attempt: -1, OutputRef: "s3://x"},
		"no output":        {Key: job, Attempt: 2},
		"NUL in output":    {Key: job, Attempt: 2, OutputRef: "s3://x\x00"},
		"bidi override":    {Key: job, Attempt: 2, OutputRef: "s3://x\u202e"},
		"invalid job ID":   {Key: ledgerdb.JobKey{AccountID: acct, JobID: "no/slashes"}, Attempt: 2, OutputRef: "s3://x"},
		"no account":       {Key: ledgerdb.JobKey{JobID: job.JobID}, Attempt: 2, OutputRef: "s3://x"},
		"oversized output": {Key: job, Attempt: 2, OutputRef: string(make([]byte, ledgerdb.MaxOutputRefLength+1))},
	} {
		_, err := s.RecordResult(ctx, bad)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, name)
	}
	_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "never")}, Attempt: 1, OutputRef: "s3://x"})
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
	var rows int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM result_reports WHERE job_id = $1`, job.String()).Scan(&rows))
	require.Equal(t, 1, rows, "bad input and repeats wrote nothing")
	ledgertest.RequireBalance(t, s, acct, 60)
}

// TestAlarmsAreRecordedOnce: an alarm is raised once per job and step, keeps its first message,
// and lists with its account.
func TestAlarmsAreRecordedOnce(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 100, 40)
	outcome, err := s.RaiseAlarm(ctx, job, "refund", "amount out of range\x00 and more")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	outcome, err = s.RaiseAlarm(ctx, job, "refund", "again")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, outcome)
	_, err = s.RaiseAlarm(ctx, ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "never")}, "refund", "x")
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
	alarms, err := s.Alarms(ctx, 10, acct)
	require.NoError(t, err)
	require.Len(t, alarms, 1)
	require.Equal(t, "refund", alarms[0].Step)
	require.Equal(t, job.JobID, alarms[0].JobID, "an alarm names the client's job ID")
	require.Equal(t, acct, alarms[0].AccountID)
	require.Equal(t, "amount out of range  and more", alarms[0].Message, "control characters are clipped")
}

// TestRejectOrphanRacesAnInFlightCharge protects money rules 2, 3 and 8 where a submission learns
// that its workflow closed while the workflow's charge is still in flight: the job service then
// rejects the placeholder (workflow_ended_before_charging), concurrently with the charge, on
// separate connections. The two meet at the job's row lock, and the guards decide: a charge that
// got there first (here it holds the job's row, waiting for the busy account's) commits and the
// rejection answers NotApplied, the job charged once and running — for the job service to heal —
// never rejected with a charge; a rejection that got there first commits and the charge behind it
// charges nothing.
func TestRejectOrphanRacesAnInFlightCharge(t *testing.T) {
	type answer struct {
		tr  ledgerdb.Transition
		err error
	}
	async := func(f func() (ledgerdb.Transition, error)) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			tr, err := f()
			ch <- answer{tr, err}
		}()
		return ch
	}
	const limit = 60 * time.Second

	t.Run("the charge first", func(t *testing.T) {
		ctx := context.Background()
		s := ledgertest.Store(t)
		acct, job := submitted(t, s, 1000, 300)
		busy := ledgertest.HoldAccount(t, acct)
		charge := async(func() (ledgerdb.Transition, error) { return s.Charge(ctx, job) })
		charging := busy.AwaitWaiter(limit)
		reject := async(func() (ledgerdb.Transition, error) { return s.RejectOrphan(ctx, job, ledgerdb.RejectWorkflowEnded) })
		// The rejection waits for the job's row, which the charge holds.
		ledgertest.AwaitWaiter(t, charging, limit)
		busy.Release()

		charged, rejected := <-charge, <-reject
		require.NoError(t, charged.err)
		require.Equal(t, ledgerdb.Applied, charged.tr.Outcome)
		require.NoError(t, rejected.err)
		require.Equal(t, ledgerdb.NotApplied, rejected.tr.Outcome, "a charged job is never rejected")
		require.Equal(t, ledgerdb.StateRunning, rejected.tr.Job.State)
		require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -300}, entries(t, s, job))
		ledgertest.RequireBalance(t, s, acct, 700)
		ledgertest.RequireSound(t, s, acct)
	})

	t.Run("the rejection first", func(t *testing.T) {
		ctx := context.Background()
		s := ledgertest.Store(t)
		acct, job := submitted(t, s, 1000, 300)
		busy := ledgertest.HoldJob(t, job)
		reject := async(func() (ledgerdb.Transition, error) { return s.RejectOrphan(ctx, job, ledgerdb.RejectWorkflowEnded) })
		rejecting := busy.AwaitWaiter(limit)
		charge := async(func() (ledgerdb.Transition, error) { return s.Charge(ctx, job) })
		// The charge queues behind the rejection for the job's row.
		ledgertest.AwaitWaiter(t, rejecting, limit)
		busy.Release()

		rejected, charged := <-reject, <-charge
		require.NoError(t, rejected.err)
		require.Equal(t, ledgerdb.Applied, rejected.tr.Outcome)
		require.ErrorIs(t, charged.err, ledgerdb.ErrRejected, "the charge behind a rejection charges nothing")
		require.Empty(t, entries(t, s, job))
		ledgertest.RequireBalance(t, s, acct, 1000)
		ledgertest.RequireSound(t, s, acct)
	})
}
