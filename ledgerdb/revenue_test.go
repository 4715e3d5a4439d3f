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
// period and settles in the second at 1 unit of 1 credit: 0.10 of revenue, all in the second. The
// first period's report, read while the job ran, is the same once it has settled.
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
	whileRunning, err := s.Revenue(ctx, t0, t1, acct)
	require.NoError(t, err)
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
	assert.Equal(t, whileRunning, running, "a closed period's report does not change when a job it held settles")
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

// TestRevenueRefundedJobIsNeverRevenue checks that a refunded job is never revenue: its refund
// returns the paid credits its charge drew, so nothing is recognised in the period of the charge,
// while the job runs, nor in the period of the refund; and credits a refund returns to a block
// that expired meanwhile lapse in that block's expire row, written with the refund — breakage,
// not revenue. Deferred holds the running jobs' credits until then.
func TestRevenueRefundedJobIsNeverRevenue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }
	month := time.Now().Add(30 * 24 * time.Hour)

	t0 := now()
	ledgertest.GrantBlock(t, s, acct, 100, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.1"})
	paidMonth := ledgertest.GrantBlock(t, s, acct, 50, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.2", ExpiresAt: &month})
	first := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 30, "s3://in/a").Job.Key()  // 30 of the sooner expiry
	second := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/b").Job.Key() // its last 20, and 20 of the year's
	t1 := now()
	ledgertest.ExpireBlock(t, s, paidMonth.ID) // empty: expired with no row
	for _, job := range []ledgerdb.JobKey{first, second} {
		_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 1)
		require.NoError(t, err)
	}
	t2 := now()

	periods, whole := reconciledRevenue(t, s, acct, t0, t1, t2)
	charged, refunded := periods[0], periods[1]
	assert.Equal(t, revenueMoney(150, "20"), charged.Granted)
	assert.Equal(t, revenueMoney(0, "0"), charged.Recognised, "the jobs are running: nothing delivered")
	assert.Equal(t, revenueMoney(150, "20"), charged.DeferredClosing, "the 70 credits the running jobs hold are deferred")
	assert.Equal(t, revenueMoney(0, "0"), refunded.Recognised, "a refunded job is never revenue")
	assert.Equal(t, revenueMoney(50, "10"), refunded.Lapsed, "the 50 credits refunded to the expired block lapse with the refunds")
	assert.Equal(t, revenueMoney(100, "10"), refunded.DeferredClosing)
	assert.Equal(t, revenueMoney(0, "0"), whole.Recognised)
	assert.Equal(t, int64(0), whole.PromotionalSpent)
	ledgertest.RequireSound(t, s, acct)
}

// TestRevenueRecognisesALateResultAtItsRecovery checks the rule on a late success: a job charged
// in one period and refunded in the next is not revenue in either; when its late result recovers
// it in a third, what it used is recognised then — its reclaim's draw less its release, dated by
// the settlement — and its charge and refund, which returned each other, add nothing.
func TestRevenueRecognisesALateResultAtItsRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }

	t0 := now()
	ledgertest.GrantBlock(t, s, acct, 100, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.1"})
	job := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 1, 60), 0).Job.Key() // holds 60
	t1 := now()
	_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 1)
	require.NoError(t, err)
	t2 := now()
	tr, err := s.Settle(ctx, job, 1, ledgerdb.Units(25), "s3://late") // reclaims 60, releases 35
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	t3 := now()

	periods, whole := reconciledRevenue(t, s, acct, t0, t1, t2, t3)
	for i, p := range periods[:2] {
		assert.Equal(t, revenueMoney(0, "0"), p.Recognised, "period %d: running, then refunded: nothing delivered", i+1)
		assert.Equal(t, revenueMoney(100, "10"), p.DeferredClosing, "period %d", i+1)
	}
	assert.Equal(t, revenueMoney(25, "2.5"), periods[2].Recognised, "the 25 units the late result used, at 0.1")
	assert.Equal(t, revenueMoney(75, "7.5"), periods[2].DeferredClosing)
	assert.Equal(t, revenueMoney(25, "2.5"), whole.Recognised)
	ledgertest.RequireSound(t, s, acct)
}

// TestRevenueDatesADeliveryWithNoRowByItsDelivery checks how a settlement that writes no row is
// dated: a job sold by the job, and a metered job that used its whole hold, deliver without a
// release row, so their settlement is the delivery itself (the job's delivery time, fixed once
// set): charged in one period and delivered in the next, they are recognised in the next, what
// they drew at its block's cost basis. Their promotional credits follow the same rule: spent when
// delivered, not when charged.
func TestRevenueDatesADeliveryWithNoRowByItsDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }

	t0 := now()
	ledgertest.Promotional(t, s, acct, "sign-up", 5)
	ledgertest.GrantBlock(t, s, acct, 100, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.1"})
	fixed := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 20, "s3://in/a").Job.Key() // 5 promotional, 15 paid
	whole := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 2, 10), 0).Job.Key()           // 20 paid
	t1 := now()
	for _, job := range []ledgerdb.JobKey{fixed, whole} {
		tr, err := s.Settle(ctx, job, 1, nil, "s3://out") // no usage said: the whole hold, nothing released
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateDelivered, tr.Job.State)
		require.NotNil(t, tr.Job.DeliveredAt)
		require.False(t, tr.Job.DeliveredAt.Before(t1), "delivered in the second period")
		ledgertest.RequireRows(t, s, job, tr.Job.Cost, ledgerdb.KindCharge) // the charge is its only row
	}
	t2 := now()

	periods, _ := reconciledRevenue(t, s, acct, t0, t1, t2)
	charged, delivered := periods[0], periods[1]
	assert.Equal(t, revenueMoney(0, "0"), charged.Recognised)
	assert.Equal(t, int64(0), charged.PromotionalSpent, "promotional credits too are spent at delivery")
	assert.Equal(t, revenueMoney(100, "10"), charged.DeferredClosing)
	assert.Equal(t, revenueMoney(35, "3.5"), delivered.Recognised, "15 and 20 paid credits at 0.1, dated by the deliveries")
	assert.Equal(t, int64(5), delivered.PromotionalSpent)
	assert.Equal(t, revenueMoney(65, "6.5"), delivered.DeferredClosing)
	ledgertest.RequireSound(t, s, acct)
}

// TestRevenueRefusesBadInput checks the report's door in the ledger itself, as well as through
// Store.Revenue: a period that holds no time is refused naming the period, an unknown account
// naming the account, and nothing is answered.
func TestRevenueRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	at := time.Now()
	for _, c := range []struct {
		from, to time.Time
		account  any
		says     string
	}{
		{at, at, acct, "period: runs from"},
		{at, at.Add(-time.Hour), nil, "its start must be before its end"},
		{at, at.Add(time.Hour), ledgertest.ID(t, "nobody"), "unknown account"},
	} {
		_, err := s.Pool().Exec(ctx, `SELECT * FROM ledger_revenue($1, $2, $3)`, c.from, c.to, c.account)
		require.ErrorContains(t, err, c.says)
		requireSQLState(t, err, "22023")
	}
	_, err := s.Revenue(ctx, at, at, acct)
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "period", invalid.Field)
}

// TestRevenueOfMoneyFromBeforeCreditBlocks checks the report on an account whose rows began
// before credit blocks did (migrated step by step in a schema of its own): the balance the
// migration put in the opening block is granted, dated by the block; a charge made before the
// blocks drew from none, so what its refund gives back to the opening block is granted too (those
// credits join the opening balance), never negative revenue; a late result's reclaim draws anew
// and is recognised at the recovery; and a grant paying the debt an account had when blocks began
// — whose origin no row names — is recognised, read as the debt rule's case. The audit's revenue
// rule holds on both accounts.
func TestRevenueOfMoneyFromBeforeCreditBlocks(t *testing.T) {
	ctx := context.Background()
	conn := probeSchema(t)
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 12))
	for _, stmt := range []string{
		`INSERT INTO accounts (id, balance, awaiting_reclaim) VALUES ('acme', 60, 20), ('debtor', -30, 0)`,
		`INSERT INTO jobs (id, account_id, cost, state, is_charged, request_fingerprint, charged_at)
			VALUES ('acme/run', 'acme', 40, 'running', true, '\x00', now())`,
		`INSERT INTO jobs (id, account_id, cost, state, is_charged, is_refunded, request_fingerprint, charged_at, refunded_at,
			refund_reason_code, attempts_at_refund)
			VALUES ('acme/late', 'acme', 20, 'refunded', true, true, '\x00', now(), now(), 'timed_out', 3)`,
		`INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after, idempotency_key) VALUES
			('acme', NULL, 'grant', 100, 100, 'first'),
			('acme', 'acme/run', 'charge', -40, 60, NULL),
			('acme', 'acme/late', 'charge', -20, 40, NULL),
			('acme', 'acme/late', 'refund', 20, 60, NULL),
			('debtor', NULL, 'grant', 20, 20, 'first'),
			('debtor', NULL, 'adjustment', -50, -30, 'correction')`,
	} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	var t0 time.Time
	require.NoError(t, conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t0))
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 13))
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, ledgerdb.LatestMigration(t)))
	require.NoError(t, ledgerdb.InstallCode(ctx, conn))
	for _, call := range []string{
		`SELECT ledger_refund('acme/run', 'timed_out', '', 3)`,                            // its charge drew before the blocks
		`SELECT ledger_settle('acme/late', 3, NULL, 's3://out')`,                          // reclaims 20 anew
		`SELECT ledger_post('debtor', 'grant', 50, 'after', 'paid', p_cost_basis => 0.5)`, // pays the debt of 30 first
	} {
		_, err := conn.Exec(ctx, call)
		require.NoError(t, err, call)
	}
	var t1 time.Time
	require.NoError(t, conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t1))

	report := func(acct string) ledgerdb.Revenue {
		t.Helper()
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		r, err := ledgerdb.RevenueThrough(ctx, tx, t0, t1, acct)
		require.NoError(t, err)
		audit, err := ledgerdb.AuditThrough(ctx, tx, acct)
		require.NoError(t, err)
		require.Empty(t, audit.Violations, acct)
		require.Equal(t, r.DeferredClosing.Credits,
			r.DeferredOpening.Credits+r.Granted.Credits-r.Recognised.Credits-r.Lapsed.Credits+r.Adjusted.Credits, "%s: %+v", acct, r)
		return r
	}
	acme := report("acme")
	assert.Equal(t, revenueMoney(100, "0"), acme.Granted, "the opening balance of 60, and the 40 the earlier charge's refund gave back to it")
	assert.Equal(t, revenueMoney(20, "0"), acme.Recognised, "the late result's reclaim, from the opening block (no cost basis)")
	assert.Equal(t, revenueMoney(80, "0"), acme.DeferredClosing)
	debtor := report("debtor")
	assert.Equal(t, revenueMoney(50, "25"), debtor.Granted)
	assert.Equal(t, revenueMoney(30, "15"), debtor.Recognised, "the debt from before the blocks, paid at 0.5")
	assert.Equal(t, revenueMoney(0, "0"), debtor.Adjusted)
	assert.Equal(t, revenueMoney(20, "10"), debtor.DeferredClosing)
}

// TestRevenueClassesPaymentsByReturns checks the report on debt payments made by returns, in the
// shape the ledger writes them when a refund or a release gives credits back to a block while the
// account is in debt: the returning row moves them into the block, then out of it (negative) onto
// the debt (positive, no block) — a payment of exactly the row's negative block moves; its other
// positive moves on the debt are returns, such as a release giving back to its own reclaim's debt
// draw first. Those rows are written here by hand, as the owner, inside a transaction that is
// rolled back (with one refund that leaves its credits in the block, as the ledger wrote them
// before returns paid debts), and the report and the audit are read through it. The payments are
// classed like a grant's, by the debt they pay, first made, first paid: what pays the reclaim's
// debt is recognised, what pays the negative adjustment's is adjusted. A refunded job whose refund
// paid a debt is still never revenue itself, and the recovered job is recognised at its draw less
// its release. Deferred holds the running jobs' credits until they settle, and the identity holds.
func TestRevenueClassesPaymentsByReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }
	charged := func(cost int64) ledgerdb.JobKey {
		return ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), cost, "s3://in").Job.Key()
	}
	refund := func(job ledgerdb.JobKey) {
		_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 1)
		require.NoError(t, err)
	}

	t0 := now()
	paid := ledgertest.GrantBlock(t, s, acct, 200, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.1"}).ID
	reclaimed := charged(40)
	refund(reclaimed)
	recovered := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 1, 60), 0).Job.Key()
	refund(recovered)
	keeps, pays, delivered := charged(40), charged(30), charged(130) // the paid block is empty
	tr, err := s.Settle(ctx, reclaimed, 1, nil, "s3://late")         // a reclaim of 40, all on the debt
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -10, Key: "correction-down"}) // a debt of 10
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, -50)
	t1 := now()
	_, err = s.Settle(ctx, delivered, 1, nil, "s3://out") // delivered: 130 recognised
	require.NoError(t, err)

	tx, err := ledgertest.OwnerPool(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	type move struct {
		block  int64 // 0: the debt
		amount int64
	}
	// row appends a row of the job to the account as the ledger's functions do — the balance moved
	// with it, its moves written in order, each block's remaining moved with them.
	row := func(job ledgerdb.JobKey, kind ledgerdb.EntryKind, amount int64, moves ...move) {
		t.Helper()
		var id int64
		require.NoError(t, tx.QueryRow(ctx, `WITH a AS (
				UPDATE accounts SET balance = balance + $3 WHERE id = $1 RETURNING balance
			)
			INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
			SELECT $1, $2, $4, $3, a.balance FROM a RETURNING id`, acct, job.String(), amount, string(kind)).Scan(&id))
		for _, m := range moves {
			block := &m.block
			if m.block == 0 {
				block = nil
			}
			_, err := tx.Exec(ctx, `INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount) VALUES ($1, $2, $3, $4)`,
				acct, id, block, m.amount)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `UPDATE credit_blocks SET remaining = remaining + $2 WHERE id = $1`, block, m.amount)
			require.NoError(t, err)
		}
	}
	refunded := func(job ledgerdb.JobKey, cost int64, moves ...move) {
		t.Helper()
		_, err := tx.Exec(ctx, `UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
				refund_reason_code = 'timed_out', attempts_at_refund = 1 WHERE id = $1`, job.String())
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `UPDATE accounts SET awaiting_reclaim = awaiting_reclaim + $2 WHERE id = $1`, acct, cost)
		require.NoError(t, err)
		row(job, ledgerdb.KindRefund, cost, moves...)
	}
	// The refund of 40 gives its credits back to the block and leaves them there, in debt.
	refunded(keeps, 40, move{paid, 40})
	// The late result of the metered job, 10 of its 60 units used: its reclaim draws the block's
	// 40, then 20 on the debt; its release of 50 gives back to that debt draw first (a return),
	// then 30 to the block, and pays the debt with them: 30 of the reclaim's debt of 40.
	_, err = tx.Exec(ctx, `UPDATE jobs SET state = 'recovered', is_reclaimed = true, reclaimed_at = now(), updated_at = now(),
			is_settled = true, settled_at = now(), units_used = 10 WHERE id = $1`, recovered.String())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE accounts SET awaiting_reclaim = awaiting_reclaim - 60 WHERE id = $1`, acct)
	require.NoError(t, err)
	row(recovered, ledgerdb.KindReclaim, -60, move{paid, -40}, move{0, -20})
	row(recovered, ledgerdb.KindRelease, 50, move{0, 20}, move{paid, 30}, move{paid, -30}, move{0, 30})
	// The refund of 30 gives its credits back and pays the whole debt left with 20 of them: the
	// reclaim's last 10, then the adjustment's 10.
	refunded(pays, 30, move{paid, 30}, move{paid, -20}, move{0, 20})

	audit, err := ledgerdb.AuditThrough(ctx, tx, acct)
	require.NoError(t, err)
	require.Empty(t, audit.Violations, "the rows written by hand keep every rule")
	require.Equal(t, int64(10), audit.Balance)
	t2 := now().Add(time.Hour)
	report := func(from, to time.Time) ledgerdb.Revenue {
		r, err := ledgerdb.RevenueThrough(ctx, tx, from, to, acct)
		require.NoError(t, err)
		return r
	}
	before, after := report(t0, t1), report(t1, t2)
	assert.Equal(t, revenueMoney(200, "20"), before.Granted)
	assert.Equal(t, revenueMoney(0, "0"), before.Recognised, "nothing delivered is paid for yet: the reclaim drew on the debt")
	assert.Equal(t, revenueMoney(0, "0"), before.Adjusted, "the adjustment drew on the debt")
	assert.Equal(t, revenueMoney(200, "20"), before.DeferredClosing, "the running jobs hold the 200 credits, still deferred")
	assert.Equal(t, before.DeferredClosing, after.DeferredOpening)
	assert.Equal(t, revenueMoney(180, "18"), after.Recognised,
		"130 delivered, 10 used by the late result, and the 30 and 10 that paid the reclaim's debt; the refunded jobs nothing")
	assert.Equal(t, revenueMoney(-10, "-1"), after.Adjusted, "the 10 that paid the adjustment's debt")
	assert.Equal(t, revenueMoney(10, "1"), after.DeferredClosing, "what the block holds at the end")
	for _, r := range []ledgerdb.Revenue{before, after} {
		require.Equal(t, r.DeferredClosing.Credits,
			r.DeferredOpening.Credits+r.Granted.Credits-r.Recognised.Credits-r.Lapsed.Credits+r.Adjusted.Credits, "%+v", r)
	}
}

// TestRevenueClassesDebtPaidByReturns checks, through the ledger's own functions, the rule
// TestRevenueClassesPaymentsByReturns checks on rows written by hand: a refund or a release that
// gives credits back to a block while the account is in debt pays that debt at once, and the
// report classes each payment by the debt it pays, first made, first paid — the reclaim's debt
// recognised, the negative adjustment's adjusted —, while the refunded job is never revenue and
// the settled jobs are recognised at their settlement. It runs once the ledger's returns pay debts;
// until then it says so and skips.
func TestRevenueClassesDebtPaidByReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 0)
	now := func() time.Time { return ledgertest.Now(t, s) }
	charged := func(cost int64) ledgerdb.JobKey {
		return ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), cost, "s3://in").Job.Key()
	}
	grant := func(key string, amount int64, costBasis string) {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key,
			Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: costBasis}})
		require.NoError(t, err)
	}

	t0 := now()
	grant("paid-a", 120, "0.1")
	reclaimed := charged(40)
	_, err := s.Refund(ctx, reclaimed, ledgerdb.ReasonTimedOut, "timed out", 1)
	require.NoError(t, err)
	refunded, delivered := charged(30), charged(70)
	metered := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 1, 20), 0).Job.Key() // the block is empty
	_, err = s.Settle(ctx, reclaimed, 1, nil, "s3://late")                              // a reclaim of 40 on the debt
	require.NoError(t, err)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -10, Key: "correction-down"}) // a debt of 10
	require.NoError(t, err)
	t1 := now()
	tr, err := s.Refund(ctx, refunded, ledgerdb.ReasonTimedOut, "timed out", 1) // gives 30 back: pays 30 of the reclaim's debt
	require.NoError(t, err)
	var payments int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM ledger_block_moves WHERE entry_id = $1 AND block_id IS NOT NULL AND amount < 0`,
		tr.EntryID).Scan(&payments))
	if payments == 0 {
		t.Skip("a refund into a block while the account is in debt does not pay the debt in this ledger yet")
	}
	_, err = s.Settle(ctx, metered, 1, ledgerdb.Units(5), "s3://out") // releases 15: the reclaim's last 10, 5 of the adjustment's
	require.NoError(t, err)
	_, err = s.Settle(ctx, delivered, 1, nil, "s3://out")
	require.NoError(t, err)
	grant("paid-b", 50, "0.5") // pays the adjustment's last 5
	ledgertest.RequireBalance(t, s, acct, 45)
	t2 := now()

	periods, _ := reconciledRevenue(t, s, acct, t0, t1, t2)
	before, after := periods[0], periods[1]
	assert.Equal(t, revenueMoney(0, "0"), before.Recognised)
	assert.Equal(t, revenueMoney(120, "12"), before.DeferredClosing, "the running jobs hold the 120 credits, still deferred")
	assert.Equal(t, revenueMoney(50, "25"), after.Granted)
	assert.Equal(t, revenueMoney(115, "11.5"), after.Recognised,
		"30 and 10 that paid the reclaim's debt, 5 the metered job used, 70 delivered; the refunded job nothing")
	assert.Equal(t, revenueMoney(-10, "-3"), after.Adjusted, "5 at 0.1 and 5 at 0.5 paid the adjustment's debt")
	assert.Equal(t, revenueMoney(45, "22.5"), after.DeferredClosing)
	ledgertest.RequireSound(t, s, acct)
}
