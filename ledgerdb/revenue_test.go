package ledgerdb_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestRevenueReconciles checks the revenue rules on real rows: paid credits are deferred while
// unspent — in a block, or held by a running job —, recognised at their block's cost basis when
// the job that drew them is delivered (a job sold by the job: dated by its delivery), never when
// the job is refunded (its refund returns them), lapsed when their block expires with them;
// promotional credits delivered work spent are reported apart and are never revenue; and the
// report reconciles period to period — deferred at the end of one period is deferred at the start
// of the next, and deferred at the start + paid granted − recognised − lapsed + adjusted =
// deferred at the end.
func TestRevenueReconciles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }
	grant := func(key string, amount int64, terms ledgerdb.BlockTerms) {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key, Block: terms})
		require.NoError(t, err)
	}
	hour := time.Now().Add(time.Hour)

	t0 := now()
	grant("paid-year", 1000, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.01"})
	grant("sign-up", 100, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional})
	grant("paid-hour", 500, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.02", ExpiresAt: &hour})
	first := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 150, "s3://in/a") // 100 promotional, 50 of paid-hour
	t1 := now()
	_, err := s.Refund(ctx, first.Job.Key(), ledgerdb.ReasonTimedOut, "timed out", 1) // gives them back
	require.NoError(t, err)
	second := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 300, "s3://in/b") // 100 promotional, 200 of paid-hour
	_, err = s.Settle(ctx, second.Job.Key(), 1, nil, "s3://out/b")                      // delivered: no row, dated by its delivery
	require.NoError(t, err)
	t2 := now()
	ledgertest.ExpireGrant(t, s, acct, "paid-hour")
	t3 := now()

	periods, whole := reconciledRevenue(t, s, acct, t0, t1, t2, t3)
	p1, p2, p3 := periods[0], periods[1], periods[2]

	require.Equal(t, revenueMoney(0, "0"), p1.DeferredOpening)
	require.Equal(t, revenueMoney(1500, "20"), p1.Granted, "1000 at 0.01 and 500 at 0.02; the promotional block is not revenue")
	require.Equal(t, revenueMoney(0, "0"), p1.Recognised, "the running job delivered nothing yet")
	require.Equal(t, int64(0), p1.PromotionalSpent)
	require.Equal(t, revenueMoney(1500, "20"), p1.DeferredClosing, "the 50 paid credits the running job holds are deferred")

	require.Equal(t, revenueMoney(200, "4"), p2.Recognised, "the delivered job's 200 paid credits at 0.02; the refunded job's are never revenue")
	require.Equal(t, int64(100), p2.PromotionalSpent, "the delivered job's; the refunded job's came back")
	require.Equal(t, revenueMoney(1300, "16"), p2.DeferredClosing)

	require.Equal(t, revenueMoney(300, "6"), p3.Lapsed, "what remained of the paid block when it expired is breakage")
	require.Equal(t, revenueMoney(0, "0"), p3.Recognised)
	require.Equal(t, revenueMoney(1000, "10"), p3.DeferredClosing)

	require.Equal(t, revenueMoney(1500, "20"), whole.Granted)
	require.Equal(t, revenueMoney(200, "4"), whole.Recognised)
	require.Equal(t, revenueMoney(300, "6"), whole.Lapsed)
	require.Equal(t, int64(100), whole.PromotionalSpent)

	ledgertest.RequireSound(t, s, acct)

	_, err = s.Revenue(ctx, t3, t0, "")
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid, "a period that holds no time")
	require.Equal(t, "period", invalid.Field)
	_, err = s.Revenue(ctx, t0, t3, ledgertest.ID(t, "nobody"))
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	all, err := s.Revenue(ctx, t0, t3, "")
	if errors.Is(err, ledgerdb.ErrOverflow) {
		// Other tests' accounts in the shared database hold up to MaxBalance each: the sum of
		// every account's credits may pass what one figure holds, and the report says so.
		require.ErrorContains(t, err, "report on one account at a time")
		return
	}
	require.NoError(t, err)
	require.GreaterOrEqual(t, all.Granted.Credits, whole.Granted.Credits, "every account's report holds this one's")
}

// TestRevenueRecognisesARunningJobAtItsSettlement checks that only delivered work is revenue: the
// paid credits a running job holds stay deferred while it runs — its charge recognises nothing —
// and are recognised when the job is settled, dated by the settlement, at the net of what the job
// drew less what its release gave back (the units it used), at the block's cost basis. The release
// is never a negative revenue. Here the job holds 60 paid credits at 0.10 (6.00) over the first
// period and settles in the second at 1 unit of 1 credit: 0.10 of revenue, all in the second.
func TestRevenueRecognisesARunningJobAtItsSettlement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }

	t0 := now()
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "paid",
		Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.1"}})
	require.NoError(t, err)
	job := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 1, 60), 0).Job.Key() // holds 60 paid credits
	t1 := now()
	tr, err := s.Settle(ctx, job, 1, ledgerdb.Units(1), "s3://out") // uses 1, releases 59
	require.NoError(t, err)
	requireSettled(t, tr.Job, 1)
	t2 := now()

	periods, whole := reconciledRevenue(t, s, acct, t0, t1, t2)
	running, settled := periods[0], periods[1]
	assert.Equal(t, revenueMoney(100, "10"), running.Granted)
	assert.Equal(t, revenueMoney(0, "0"), running.Recognised, "nothing is delivered while the job runs")
	assert.Equal(t, revenueMoney(100, "10"), running.DeferredClosing, "the 60 credits the running job holds are still deferred")
	assert.Equal(t, revenueMoney(1, "0.1"), settled.Recognised, "the settlement recognises what the job used, never a negative release")
	assert.Equal(t, revenueMoney(99, "9.9"), settled.DeferredClosing)
	assert.Equal(t, revenueMoney(1, "0.1"), whole.Recognised)
	ledgertest.RequireSound(t, s, acct)
}

// TestRevenueClassesDebtPaymentsByOrigin checks how the revenue report reads the payment of a
// debt, which the next grant (or positive adjustment) makes before anything else: credits that pay
// a debt a reclaim left are recognised — the work was delivered and not paid for —, credits that
// pay a debt a negative adjustment left are adjusted — no work was delivered for them, so an
// operator's correction can never turn into revenue. Debts are paid in the order they were made
// (first made, first paid), a payment may cover several debts and a debt may take several
// payments; a reclaim's own release gives back to that reclaim's debt, never to an older one.
// Across the periods, per account, deferred at the start + granted − recognised − lapsed +
// adjusted = deferred at the end, and each period's end is the next one's start.
func TestRevenueClassesDebtPaymentsByOrigin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }
	grant := func(key string, amount int64, costBasis string) {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key,
			Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: costBasis}})
		require.NoError(t, err)
	}
	adjust := func(key string, amount int64) {
		_, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key})
		require.NoError(t, err)
	}
	refund := func(key ledgerdb.JobKey) {
		_, err := s.Refund(ctx, key, ledgerdb.ReasonTimedOut, "timed out", 1)
		require.NoError(t, err)
	}
	lateResult := func(key ledgerdb.JobKey, units *int64) {
		tr, err := s.Settle(ctx, key, 1, units, "")
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	}

	t0 := now()
	grant("paid-a", 200, "0.01")
	first := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/a").Job.Key()
	third := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 20, "s3://in/c").Job.Key()
	metered := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 2, 10), 0).Job.Key() // holds 20
	refund(first)
	refund(third)
	refund(metered)
	emptied := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 200, "s3://in/b").Job.Key() // the paid block emptied
	_, err := s.Settle(ctx, emptied, 1, nil, "s3://out/b")                                         // and delivered
	require.NoError(t, err)
	lateResult(first, nil)                 // debt 1: a reclaim of 40
	lateResult(metered, ledgerdb.Units(3)) // debt 2: a reclaim of 20, its release gives 14 back to it: 6
	adjust("correction-down", -30)         // debt 3: an adjustment of 30
	ledgertest.RequireBalance(t, s, acct, -76)
	t1 := now()
	grant("paid-b", 25, "0.1") // pays 25 of debt 1
	adjust("goodwill", 5)      // pays 5 more of debt 1, from the opening block (no cost basis)
	t2 := now()
	grant("paid-c", 30, "0.2") // pays the last 10 of debt 1, debt 2's 6 and 14 of debt 3
	lateResult(third, nil)     // debt 4: a reclaim of 20
	grant("paid-d", 50, "0.5") // pays the last 16 of debt 3 and debt 4's 20; 14 left
	ledgertest.RequireBalance(t, s, acct, 14)
	t3 := now()

	periods, whole := reconciledRevenue(t, s, acct, t0, t1, t2, t3)
	p1, p2, p3 := periods[0], periods[1], periods[2]
	// Every figure is checked, each failure reported: which of them are off says which rule broke.

	assert.Equal(t, revenueMoney(200, "2"), p1.Granted)
	assert.Equal(t, revenueMoney(200, "2"), p1.Recognised, "the delivered job that emptied the paid block; no debt is paid yet")
	assert.Equal(t, revenueMoney(0, "0"), p1.Adjusted, "the adjustment drew on the debt, not on a paid block")
	assert.Equal(t, revenueMoney(0, "0"), p1.DeferredClosing)

	assert.Equal(t, revenueMoney(25, "2.5"), p2.Granted)
	assert.Equal(t, revenueMoney(30, "2.5"), p2.Recognised, "25 at 0.1 and 5 at no money paid the first reclaim's debt")
	assert.Equal(t, revenueMoney(5, "0"), p2.Adjusted, "the goodwill adjustment put 5 in the opening block")
	assert.Equal(t, revenueMoney(0, "0"), p2.DeferredClosing)

	assert.Equal(t, revenueMoney(80, "31"), p3.Granted, "30 at 0.2 and 50 at 0.5")
	assert.Equal(t, revenueMoney(36, "13.2"), p3.Recognised, "10 and 6 at 0.2 paid the first two reclaims' debts, 20 at 0.5 the last one's")
	assert.Equal(t, revenueMoney(-30, "-10.8"), p3.Adjusted, "14 at 0.2 and 16 at 0.5 paid the adjustment's debt: no work was delivered for them")
	assert.Equal(t, revenueMoney(14, "7"), p3.DeferredClosing)

	assert.Equal(t, revenueMoney(305, "35.5"), whole.Granted)
	assert.Equal(t, revenueMoney(266, "17.7"), whole.Recognised)
	assert.Equal(t, revenueMoney(-25, "-10.8"), whole.Adjusted)
	assert.Equal(t, revenueMoney(0, "0"), whole.Lapsed)

	ledgertest.RequireSound(t, s, acct)
}

// TestRevenuePromotionalPaymentOfAnAdjustmentIsNotSpent checks the same rule on promotional
// credits: promotional credits that pay a debt a negative adjustment left were spent by no job, so
// they are not in promotional_spent; what a job then draws from the block is, once delivered.
func TestRevenuePromotionalPaymentOfAnAdjustmentIsNotSpent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	t0 := ledgertest.Now(t, s)
	_, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -10, Key: "correction-down"})
	require.NoError(t, err)
	ledgertest.Promotional(t, s, acct, "sign-up", 30)                                        // pays the debt of 10 first
	job := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 5, "s3://in/a").Job.Key() // 5 of the promotional 20
	_, err = s.Settle(ctx, job, 1, nil, "s3://out/a")
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, 15)
	r, err := s.Revenue(ctx, t0, ledgertest.Now(t, s), acct)
	require.NoError(t, err)
	require.Equal(t, int64(5), r.PromotionalSpent, "only what the job spent")
	require.Equal(t, ledgerdb.Money{Credits: 0, Amount: "0"}, r.Adjusted, "promotional credits are not in the paid figures")
	ledgertest.RequireSound(t, s, acct)
}

// revenueMoney is a report's figure: credits worth amount.
func revenueMoney(credits int64, amount string) ledgerdb.Money {
	return ledgerdb.Money{Credits: credits, Amount: amount}
}

// reconciledRevenue reads acct's revenue reports of the periods between consecutive bounds and of
// the whole from the first bound to the last, and checks that they reconcile, in credits and in
// amounts: deferred at the start + granted − recognised − lapsed + adjusted = deferred at the end
// in each; each period starts where the one before it ended, and the whole starts and ends where
// they do.
func reconciledRevenue(t *testing.T, s *ledgerdb.Store, acct string, bounds ...time.Time) (periods []ledgerdb.Revenue, whole ledgerdb.Revenue) {
	t.Helper()
	report := func(from, to time.Time) ledgerdb.Revenue {
		r, err := s.Revenue(context.Background(), from, to, acct)
		require.NoError(t, err)
		return r
	}
	for i := 1; i < len(bounds); i++ {
		periods = append(periods, report(bounds[i-1], bounds[i]))
	}
	whole = report(bounds[0], bounds[len(bounds)-1])
	amount := func(m ledgerdb.Money) *big.Rat {
		r, ok := new(big.Rat).SetString(m.Amount)
		require.True(t, ok, "an amount that is not a decimal: %q", m.Amount)
		return r
	}
	for _, r := range append([]ledgerdb.Revenue{whole}, periods...) {
		require.Equal(t, r.DeferredClosing.Credits,
			r.DeferredOpening.Credits+r.Granted.Credits-r.Recognised.Credits-r.Lapsed.Credits+r.Adjusted.Credits,
			"deferred at the start + granted − recognised − lapsed + adjusted = deferred at the end, in credits: %+v", r)
		end := new(big.Rat).Add(amount(r.DeferredOpening), amount(r.Granted))
		end.Sub(end, amount(r.Recognised)).Sub(end, amount(r.Lapsed)).Add(end, amount(r.Adjusted))
		require.Zero(t, end.Cmp(amount(r.DeferredClosing)),
			"deferred at the start + granted − recognised − lapsed + adjusted = deferred at the end, in amounts: %+v", r)
	}
	for i := 1; i < len(periods); i++ {
		require.Equal(t, periods[i-1].DeferredClosing, periods[i].DeferredOpening, "periods that meet chain")
	}
	require.Equal(t, periods[0].DeferredOpening, whole.DeferredOpening, "the whole starts where its first period does")
	require.Equal(t, periods[len(periods)-1].DeferredClosing, whole.DeferredClosing, "the whole ends where its last period does")
	return periods, whole
}
