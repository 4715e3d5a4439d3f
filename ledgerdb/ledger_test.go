package ledgerdb_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestStateMachineEdges walks every edge of the state machine of docs/design.md and, at each state, every
// transition that must not apply. The reversing-pairs rule (one row per kind), the net-effect rule
// (net -cost when delivered, 0 when refunded), the price-list rule (amounts from the job record),
// the sum-of-rows rule and the idempotent-doors rule (a second delivery changes nothing).
func TestStateMachineEdges(t *testing.T) {
	s := ledgertest.Store(t)
	for _, edge := range []struct {
		name string
		walk func(t *testing.T, s *ledgerdb.Store)
	}{
		{"submitting: only charge applies", edgeSubmitting},
		{"submitting to running: charge once", edgeCharged},
		{"submitting to rejected: insufficient credits charges nothing", edgeRejected},
		{"running to delivered: the success path reclaims nothing", edgeDelivered},
		{"running to refunded to recovered: the seed's story", edgeRecovered},
		{"terminal to deleted: the ID is burnt and the money kept, a late result still owed", edgeDeleted},
	} {
		t.Run(edge.name, func(t *testing.T) { edge.walk(t, s) })
	}
}

// ledgerOp is one call of the ledger on a job, named for the failure message.
type ledgerOp struct {
	name string
	call func(ctx context.Context, s *ledgerdb.Store, job ledgerdb.JobKey) (ledgerdb.Transition, error)
}

func chargeOp() ledgerOp {
	return ledgerOp{"charge", func(ctx context.Context, s *ledgerdb.Store, job ledgerdb.JobKey) (ledgerdb.Transition, error) {
		return s.Charge(ctx, job)
	}}
}

func refundOp(reason ledgerdb.Reason, detail string, attempts int) ledgerOp {
	return ledgerOp{"refund", func(ctx context.Context, s *ledgerdb.Store, job ledgerdb.JobKey) (ledgerdb.Transition, error) {
		return s.Refund(ctx, job, reason, detail, attempts)
	}}
}

func reclaimOp() ledgerOp {
	return ledgerOp{"reclaim", func(ctx context.Context, s *ledgerdb.Store, job ledgerdb.JobKey) (ledgerdb.Transition, error) {
		return s.Reclaim(ctx, job)
	}}
}

func deliverOp(attempts int) ledgerOp {
	return ledgerOp{"deliver", func(ctx context.Context, s *ledgerdb.Store, job ledgerdb.JobKey) (ledgerdb.Transition, error) {
		return s.Deliver(ctx, job, attempts)
	}}
}

// requireAnswers runs each op on job and requires that it succeeds with the outcome want and, when
// state is not empty, leaves the job in state.
func requireAnswers(t *testing.T, s *ledgerdb.Store, job ledgerdb.JobKey, want ledgerdb.Outcome, state ledgerdb.State, ops ...ledgerOp) {
	t.Helper()
	for _, op := range ops {
		tr, err := op.call(context.Background(), s, job)
		require.NoError(t, err, op.name)
		require.Equal(t, want, tr.Outcome, op.name)
		if state != "" {
			require.Equal(t, state, tr.Job.State, op.name)
		}
	}
}

// edgeSubmitting: a placeholder takes only its charge, and is not deleted while active.
func edgeSubmitting(t *testing.T, s *ledgerdb.Store) {
	acct, job := submitted(t, s, 100, 40)
	requireAnswers(t, s, job, ledgerdb.NotApplied, ledgerdb.StateSubmitting,
		refundOp(ledgerdb.ReasonTimedOut, "timeout", 1), reclaimOp(), deliverOp(1))
	_, err := s.Delete(context.Background(), job)
	require.ErrorIs(t, err, ledgerdb.ErrJobActive)
	require.Empty(t, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 100)
}

// edgeCharged: a charge applies once; a running job has nothing to reclaim and is not deleted.
func edgeCharged(t *testing.T, s *ledgerdb.Store) {
	ctx := context.Background()
	acct, job := submitted(t, s, 100, 40)
	tr, err := s.Charge(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateRunning, tr.Job.State)
	require.Equal(t, int64(60), tr.BalanceAfter)
	require.NotZero(t, tr.EntryID)

	again, err := s.Charge(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Zero(t, again.EntryID)
	require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -40}, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 60)

	// Running: reclaim has nothing to take back, delete is refused.
	requireAnswers(t, s, job, ledgerdb.NotApplied, "", reclaimOp())
	_, err = s.Delete(ctx, job)
	require.ErrorIs(t, err, ledgerdb.ErrJobActive)
	ledgertest.RequireBalance(t, s, acct, 60)
}

// edgeRejected: a charge the balance does not cover rejects the job for good, charging nothing.
func edgeRejected(t *testing.T, s *ledgerdb.Store) {
	ctx := context.Background()
	acct, job := submitted(t, s, 39, 40)
	tr, err := s.Charge(ctx, job)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
	require.Equal(t, ledgerdb.StateRejected, tr.Job.State)
	require.Equal(t, ledgerdb.RejectInsufficientCredits, tr.Job.RejectReason)
	require.Equal(t, ledgerdb.MoneyNotCharged, tr.Job.MoneyState())

	// A rejection is final, even once the account could pay: the client resubmits under a new ID.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "top-up"})
	require.NoError(t, err)
	_, err = s.Charge(ctx, job)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
	requireAnswers(t, s, job, ledgerdb.NotApplied, "",
		refundOp(ledgerdb.ReasonTimedOut, "timeout", 1), reclaimOp(), deliverOp(1))
	require.Empty(t, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 139)
}

// edgeDelivered: the success path's reclaim matches nothing, the delivery applies once, and a
// delivered job is never refunded.
func edgeDelivered(t *testing.T, s *ledgerdb.Store) {
	ctx := context.Background()
	acct, job := charged(t, s, 100, 40)
	// The success path calls reclaim unconditionally and lets the guard decide (docs/design.md).
	requireAnswers(t, s, job, ledgerdb.NotApplied, "", reclaimOp())
	del, err := s.Deliver(ctx, job, 2)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, del.Outcome)
	require.Equal(t, ledgerdb.StateDelivered, del.Job.State)
	require.Equal(t, 2, del.Job.Attempts)

	requireAnswers(t, s, job, ledgerdb.AlreadyApplied, "", deliverOp(2))
	ref, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "late timeout", 3)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.NotApplied, ref.Outcome, "a delivered job is never refunded")
	require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -40}, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 60)
}

// edgeRecovered: the refund applies once and records its reason, a refunded job is reclaimed (not
// just delivered), and a recovered job answers every later call AlreadyApplied.
func edgeRecovered(t *testing.T, s *ledgerdb.Store) {
	ctx := context.Background()
	acct, job := charged(t, s, 100, 40)

	ref, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, ref.Outcome)
	require.Equal(t, ledgerdb.StateRefunded, ref.Job.State)
	require.Equal(t, ledgerdb.ReasonTimedOut, ref.Job.RefundReason)
	require.Equal(t, "timed out after 3 attempts", ref.Job.RefundDetail)
	require.Equal(t, 3, ref.Job.Attempts)
	require.Equal(t, int64(100), ref.BalanceAfter)

	dup, err := s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "a second failure signal", 4)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, dup.Outcome, "rule 2: never refunded twice")
	dlv, err := s.Deliver(ctx, job, 4)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.NotApplied, dlv.Outcome, "a refunded job must be reclaimed, not just delivered")
	ledgertest.RequireBalance(t, s, acct, 100)

	rec, err := s.Reclaim(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, rec.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, rec.Job.State)
	require.Equal(t, ledgerdb.MoneyCharged, rec.Job.MoneyState())
	require.Equal(t, int64(60), rec.BalanceAfter)

	requireAnswers(t, s, job, ledgerdb.AlreadyApplied, ledgerdb.StateRecovered,
		reclaimOp(), refundOp(ledgerdb.ReasonGPUFailed, "again", 5), deliverOp(5), chargeOp())
	require.Equal(t, map[ledgerdb.EntryKind]int64{
		ledgerdb.KindCharge: -40, ledgerdb.KindRefund: 40, ledgerdb.KindReclaim: -40,
	}, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 60)
}

// edgeDeleted deletes a job in each terminal state: the ID is burnt and the money kept, and a late
// result is still owed.
func edgeDeleted(t *testing.T, s *ledgerdb.Store) {
	for _, end := range []ledgerdb.State{ledgerdb.StateRejected, ledgerdb.StateDelivered, ledgerdb.StateRefunded, ledgerdb.StateRecovered} {
		t.Run(string(end), func(t *testing.T) { requireDeletedFrom(t, s, end) })
	}
}

// endedIn submits a job of 40 credits and takes it to the terminal state end (rejected for want
// of credits), answering its account and key.
func endedIn(t *testing.T, s *ledgerdb.Store, end ledgerdb.State) (string, ledgerdb.JobKey) {
	t.Helper()
	ctx := context.Background()
	credits := int64(100)
	if end == ledgerdb.StateRejected {
		credits = 10
	}
	acct, job := submitted(t, s, credits, 40)
	_, err := s.Charge(ctx, job)
	if end != ledgerdb.StateRejected {
		require.NoError(t, err)
	}
	switch end {
	case ledgerdb.StateDelivered:
		_, err = s.Deliver(ctx, job, 1)
	case ledgerdb.StateRefunded:
		_, err = s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "failed", 1)
	case ledgerdb.StateRecovered:
		_, err = s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "failed", 1)
		require.NoError(t, err)
		_, err = s.Reclaim(ctx, job)
	}
	if end != ledgerdb.StateRejected {
		require.NoError(t, err)
	}
	return acct, job
}

// requireDeletedFrom deletes a job that ended in end and checks the tombstone: its money state, the
// burnt ID, and what a late result's reclaim does to it.
func requireDeletedFrom(t *testing.T, s *ledgerdb.Store, end ledgerdb.State) {
	ctx := context.Background()
	acct, job := endedIn(t, s, end)
	before, err := s.Balance(ctx, acct)
	require.NoError(t, err)

	del, err := s.Delete(ctx, job)
	require.NoError(t, err, end)
	require.Equal(t, ledgerdb.Applied, del.Outcome)
	require.Equal(t, ledgerdb.StateDeleted, del.Job.State)
	require.Equal(t, end, del.Job.StateBeforeDelete)
	require.Equal(t, end.MoneyState(), del.Job.MoneyState(), "a tombstone keeps its money state")
	again, err := s.Delete(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)

	// The remembered-IDs rule: the ID can never be submitted or charged again, nor refunded again.
	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: job.JobID, AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), Request: []byte(`{"model":"x"}`)})
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	_, err = s.Charge(ctx, job)
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	_, err = s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "late", 9)
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	read, err := s.Job(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDeleted, read.State)
	ledgertest.RequireBalance(t, s, acct, before)

	// A late result's reclaim answers the tombstone as the state it was deleted from — except
	// that a refunded job's refund is still reclaimed (the net-effect rule: deletion hides a job,
	// never what it owes; TestDeletedRefundedJobTakesItsLateResult).
	rec, err := s.Reclaim(ctx, job)
	switch end {
	case ledgerdb.StateRejected:
		require.ErrorIs(t, err, ledgerdb.ErrGone)
	case ledgerdb.StateRefunded:
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, rec.Outcome)
		require.Equal(t, ledgerdb.StateDeleted, rec.Job.State)
		require.Equal(t, ledgerdb.StateRecovered, rec.Job.StateBeforeDelete)
		ledgertest.RequireBalance(t, s, acct, before-40)
	default:
		require.NoError(t, err)
		require.Equal(t, map[ledgerdb.State]ledgerdb.Outcome{
			ledgerdb.StateDelivered: ledgerdb.NotApplied, ledgerdb.StateRecovered: ledgerdb.AlreadyApplied,
		}[end], rec.Outcome, end)
		require.Zero(t, rec.EntryID)
		ledgertest.RequireBalance(t, s, acct, before)
	}
}

// TestSubmitIsIdempotent checks the placeholder's answers (the remembered-IDs and idempotent-doors
// rules): the same ID and request answer the original job, another request under the ID is a
// conflict, and nothing is charged by submitting.
func TestSubmitIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 100, 40)
	sub := ledgerdb.Submission{JobID: job.JobID, AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), Request: []byte(`{"model":"x"}`)}

	again, err := s.Submit(ctx, sub)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, job, again.Job.Key())

	for name, changed := range map[string]ledgerdb.Submission{
		"kind": {JobID: job.JobID, AccountID: acct, Kind: ledgertest.Fixed(t, s, 41), Request: sub.Request},
		// A job sold whole holds one unit: asking for two is another request. (Naming the one
		// unit it holds is the same request: see below.)
		"max units": {JobID: job.JobID, AccountID: acct, Kind: sub.Kind, MaxUnits: 2, Request: sub.Request},
		"request":   {JobID: job.JobID, AccountID: acct, Kind: sub.Kind, Request: []byte(`{"model":"y"}`)},
	} {
		_, err := s.Submit(ctx, changed)
		require.ErrorIs(t, err, ledgerdb.ErrConflict, name)
	}
	// Job IDs belong to their account: the same ID from another account is another job, not a
	// conflicting request for this one.
	elsewhere := sub
	elsewhere.AccountID = ledgertest.Account(t, s, 0)
	theirs, err := s.Submit(ctx, elsewhere)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, theirs.Outcome)
	require.Equal(t, elsewhere.Key(), theirs.Job.Key())
	named := sub
	named.MaxUnits = 1
	again, err = s.Submit(ctx, named)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, "the hold the job has, named explicitly, is the same request")
	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: ledgertest.ID(t, "nobody"), Kind: ledgertest.Fixed(t, s, 40)})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)

	// The request itself is kept, so the work can run again after Temporal forgot the workflow.
	request, err := s.JobRequest(ctx, job)
	require.NoError(t, err)
	require.Equal(t, sub.Request, request)

	// Resubmitting a charged job answers it as it stands; it is never charged again.
	_, err = s.Charge(ctx, job)
	require.NoError(t, err)
	again, err = s.Submit(ctx, sub)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, again.Job.State)
	ledgertest.RequireBalance(t, s, acct, 60)
}

// TestReclaimDebtRule checks the debt rule (docs/design.md): a reclaim is never refused for lack of
// credits (the work was delivered, the net-effect rule says the job nets -cost), so the balance may
// go below zero, and while it is below a job's cost no new job is charged. The sum-of-rows rule
// holds throughout.
func TestReclaimDebtRule(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := charged(t, s, 40, 40)
	_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 3)
	require.NoError(t, err)

	// The user spends the refunded credits on another job.
	spent := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 30)}
	_, err = s.Submit(ctx, spent)
	require.NoError(t, err)
	_, err = s.Charge(ctx, spent.Key())
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, 10)

	// The first job's result lands after all: the refund is taken back in full.
	rec, err := s.Reclaim(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, rec.Outcome)
	require.Equal(t, int64(-30), rec.BalanceAfter)
	ledgertest.RequireBalance(t, s, acct, -30)

	// While in debt, no new job can be charged.
	next := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 1)}
	_, err = s.Submit(ctx, next)
	require.NoError(t, err)
	_, err = s.Charge(ctx, next.Key())
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)

	// A grant pays the debt first.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 50, Key: "pay-debt"})
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, 20)
}

// TestGrantIsIdempotentByKey checks the idempotent-doors rule for top-ups: the same key posts once;
// the same key with another amount is a conflict; grants to unknown accounts are refused, nothing
// written.
func TestGrantIsIdempotentByKey(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	first, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 500, Key: "invoice-7", Memo: "paid invoice 7"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, first.Outcome)
	again, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 500, Key: "invoice-7"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, first.EntryID, again.EntryID)
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 501, Key: "invoice-7"})
	require.ErrorIs(t, err, ledgerdb.ErrConflict)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: 500, Key: "invoice-7"})
	require.ErrorIs(t, err, ledgerdb.ErrConflict, "a grant's key cannot be reused for an adjustment")

	adj, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -120, Key: "ticket-9", Memo: "duplicate top-up"})
	require.NoError(t, err)
	require.Equal(t, int64(380), adj.BalanceAfter)

	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: ledgertest.ID(t, "nobody"), Amount: 5, Key: "k"})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	ledgertest.RequireBalance(t, s, acct, 380)

	opened, err := s.OpenAccount(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, opened)
	ledgertest.RequireBalance(t, s, acct, 380)
}

// TestHistoryPages checks that support can page through every row of an account, in order, with
// the balance after each (the sum-of-rows rule replayed by hand).
func TestHistoryPages(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	for i := range 7 {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: int64(i + 1), Key: ledgertest.ID(t, "k")})
		require.NoError(t, err)
	}
	var all []ledgerdb.Entry
	page := ledgerdb.HistoryPage{Limit: 3}
	for {
		h, err := s.History(ctx, acct, page)
		require.NoError(t, err)
		all = append(all, h.Entries...)
		if h.NextAfterID == 0 {
			break
		}
		page.AfterID = h.NextAfterID
	}
	require.Len(t, all, 7)
	var sum int64
	for i, e := range all {
		sum += e.Amount
		require.Equal(t, int64(i+1), e.Amount)
		require.Equal(t, sum, e.BalanceAfter)
		require.Equal(t, ledgerdb.KindGrant, e.Kind)
	}
	_, err := s.History(ctx, ledgertest.ID(t, "nobody"), ledgerdb.HistoryPage{})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
}

// TestDatabaseRefusesRewrites checks the append-only rule (and the remembered-IDs rule for jobs and
// accounts, the price-list rule for a job's cost) at the database itself: UPDATE, DELETE and
// TRUNCATE of ledger rows (and of the block moves beside them) fail even for the table's owner, and so do deleting a job or an account
// and changing a job's cost. It runs the statements as the owner, the role migrations use: the
// application role is refused them earlier, by its grants (TestAppRoleCannotRewriteOrAlter), and
// would never reach the triggers.
func TestDatabaseRefusesRewrites(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	acct, job := charged(t, s, 100, 40)

	for _, stmt := range []string{
		`UPDATE ledger_entries SET amount = -1 WHERE job_id = '` + job.String() + `'`,
		`DELETE FROM ledger_entries WHERE job_id = '` + job.String() + `'`,
		`TRUNCATE ledger_entries CASCADE`, // CASCADE: the block moves and expiries refer to its rows
		`TRUNCATE jobs CASCADE`,
		`UPDATE ledger_block_moves SET amount = 1 WHERE account_id = '` + acct + `'`,
		`DELETE FROM ledger_block_moves WHERE account_id = '` + acct + `'`,
		`DELETE FROM credit_blocks WHERE account_id = '` + acct + `'`,
		`DELETE FROM jobs WHERE id = '` + job.String() + `'`,
		`DELETE FROM accounts WHERE id = '` + acct + `'`,
		`UPDATE jobs SET cost = 1 WHERE id = '` + job.String() + `'`,
		`UPDATE jobs SET is_charged = false, state = 'submitting' WHERE id = '` + job.String() + `'`,
		`UPDATE job_requests SET request = 'other input' WHERE job_id = '` + job.String() + `'`,
		`DELETE FROM job_requests WHERE job_id = '` + job.String() + `'`,
	} {
		// In a transaction rolled back whatever happens, run again after a deadlock with other
		// packages' tests (refusal).
		pgErr := refusal(ctx, t, owner, stmt)
		require.Contains(t, []string{"JB001", "JB002"}, pgErr.Code, stmt)
	}
	require.Equal(t, map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -40}, entries(t, s, job))
	ledgertest.RequireBalance(t, s, acct, 60)
}

// TestBadInputWritesNothing checks that every malformed argument gets a clear error naming it and
// that nothing reaches the ledger (the sum-of-rows rule holds, no rows appear).
func TestBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 100)
	good := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "job")}

	badIDs := map[string]string{
		"empty":        "",
		"overlong":     strings.Repeat("a", ledgerdb.MaxIDLength+1),
		"space":        "job 1",
		"slash":        "job/1",
		"leading dash": "-job",
		"unicode":      "jöb",
		"NUL":          "job\x00",
		"newline":      "job\n",
		"quote":        "job'1",
	}
	for name, id := range badIDs {
		_, err := s.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, s, 40)})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "job ID %s", name)
		require.Contains(t, err.Error(), "job ID", name)
		_, err = s.Submit(ctx, ledgerdb.Submission{JobID: good.JobID, AccountID: id, Kind: ledgertest.Fixed(t, s, 40)})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "account ID %s", name)
		_, err = s.Charge(ctx, ledgerdb.JobKey{AccountID: acct, JobID: id})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "charge %s", name)
		_, err = s.Charge(ctx, ledgerdb.JobKey{AccountID: id, JobID: good.JobID})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "charge in account %s", name)
		_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1, Key: id})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "grant key %s", name)
		_, err = s.OpenAccount(ctx, id)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "open account %s", name)
	}
	// The longest allowed IDs are fine, in both parts of a key.
	longest := strings.Repeat("b", ledgerdb.MaxIDLength)
	_, err := s.Job(ctx, ledgerdb.JobKey{AccountID: longest, JobID: longest})
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)

	for name, amount := range map[string]int64{
		"zero": 0, "negative": -40, "min int64": math.MinInt64, "max int64": math.MaxInt64, "over the cap": ledgerdb.MaxAmount + 1,
	} {
		_, _, err := s.SetPrice(ctx, ledgerdb.Price{Kind: "bad-price", Unit: ledgerdb.UnitJob, UnitPrice: amount, MaxUnits: 1})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "unit price %s", name)
		require.Contains(t, err.Error(), "unit price", name)
		_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: "bad-" + strings.ReplaceAll(name, " ", "-")})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "grant %s", name)
	}
	_, err = s.PriceHistory(ctx, "bad-price")
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no bad price was written")
	for _, amount := range []int64{0, math.MinInt64, -ledgerdb.MaxAmount - 1} {
		_, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: "bad-adjustment"})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "adjustment %d", amount)
	}
	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: good.JobID, AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), Request: make([]byte, ledgerdb.MaxRequestLength+1)})
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	require.ErrorContains(t, err, "request")
	for _, code := range []ledgerdb.Reason{"", "timed out", ledgerdb.ReasonRejected, "TIMED_OUT"} {
		_, err = s.Refund(ctx, good, code, "timed out", 1)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "refund reason %q", code)
		require.ErrorContains(t, err, "refund reason")
	}
	_, err = s.Deliver(ctx, good, -1)
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	_, err = s.History(ctx, acct, ledgerdb.HistoryPage{Limit: 1001})
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)

	// Unknown job and unknown account are their own errors, not invalid input.
	_, err = s.Charge(ctx, good)
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: good.JobID, AccountID: ledgertest.ID(t, "nobody"), Kind: ledgertest.Fixed(t, s, 40)})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	_, err = s.Balance(ctx, ledgertest.ID(t, "nobody"))
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)

	// Nothing was written: the job never existed, and the account holds only its initial grant.
	_, err = s.Job(ctx, good)
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
	h, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
	require.NoError(t, err)
	require.Len(t, h.Entries, 1)
	ledgertest.RequireBalance(t, s, acct, 100)
}
