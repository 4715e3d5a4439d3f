package ledgerdb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestRevenueReconciles checks the revenue rules on real rows: paid credits are deferred while
// unspent, recognised at their block's cost basis when a charge spends them (net of what a
// refund returns), lapsed when their block expires with them; promotional credits spent are
// reported apart and are never revenue; and the report reconciles period to period — deferred
// at the end of one period is deferred at the start of the next, and deferred at the start +
// paid granted − recognised − lapsed + adjusted = deferred at the end.
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
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 300, "s3://in/b") // 100 promotional, 200 of paid-hour
	t2 := now()
	ledgertest.ExpireGrant(t, s, acct, "paid-hour")
	t3 := now()

	report := func(from, to time.Time) ledgerdb.Revenue {
		r, err := s.Revenue(ctx, from, to, acct)
		require.NoError(t, err)
		return r
	}
	money := func(credits int64, amount string) ledgerdb.Money {
		return ledgerdb.Money{Credits: credits, Amount: amount}
	}
	p1, p2, p3, whole := report(t0, t1), report(t1, t2), report(t2, t3), report(t0, t3)

	require.Equal(t, money(0, "0"), p1.DeferredOpening)
	require.Equal(t, money(1500, "20"), p1.Granted, "1000 at 0.01 and 500 at 0.02; the promotional block is not revenue")
	require.Equal(t, money(50, "1"), p1.Recognised, "the charge drew 50 paid credits at 0.02")
	require.Equal(t, int64(100), p1.PromotionalSpent)
	require.Equal(t, money(1450, "19"), p1.DeferredClosing)

	require.Equal(t, money(150, "3"), p2.Recognised, "200 drawn, 50 refunded, all at 0.02")
	require.Equal(t, int64(0), p2.PromotionalSpent, "100 refunded, 100 drawn again")
	require.Equal(t, money(1300, "16"), p2.DeferredClosing)

	require.Equal(t, money(300, "6"), p3.Lapsed, "what remained of the paid block when it expired is breakage")
	require.Equal(t, money(0, "0"), p3.Recognised)
	require.Equal(t, money(1000, "10"), p3.DeferredClosing)

	require.Equal(t, money(1500, "20"), whole.Granted)
	require.Equal(t, money(200, "4"), whole.Recognised)
	require.Equal(t, money(300, "6"), whole.Lapsed)
	require.Equal(t, int64(100), whole.PromotionalSpent)
	require.Equal(t, p3.DeferredClosing, whole.DeferredClosing)

	require.Equal(t, p1.DeferredClosing, p2.DeferredOpening, "periods that meet chain")
	require.Equal(t, p2.DeferredClosing, p3.DeferredOpening, "periods that meet chain")
	for _, r := range []ledgerdb.Revenue{p1, p2, p3, whole} {
		require.Equal(t, r.DeferredClosing.Credits,
			r.DeferredOpening.Credits+r.Granted.Credits-r.Recognised.Credits-r.Lapsed.Credits+r.Adjusted.Credits,
			"deferred at the start + granted − recognised − lapsed + adjusted = deferred at the end: %+v", r)
	}
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
