package ledgerdb_test

// Bounded balances: the grants and adjustments a balance refuses so that every refund and reclaim
// still fits, and the bound the schema and the Go code share — against the real Postgres, as the
// application role.

import (
	"context"
	"fmt"
	"sync"
	"testing"

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

// TestBalanceBoundsKeepEveryRefundAndReclaimInRange protects the net-effect and sum-of-rows rules
// at the int64 limit: a refund and a reclaim are never refused, so the balance must always leave
// them room. A grant that would take the balance plus the pending refunds (the running jobs' costs)
// past MaxBalance is refused with nothing written, a grant that lands exactly on the bound passes,
// and the refund of a running job at the bound still fits. Before, balances were unbounded and a
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
	acct, job := charged(t, s, 40, 40)
	_, err := s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "failed for good", 1)
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
