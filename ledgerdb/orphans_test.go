package ledgerdb_test

// Orphans rejected: the rejection of a placeholder against a charge in flight — against the real
// Postgres, as the application role.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestRejectOrphanRacesAnInFlightCharge protects the reversing-pairs, net-effect and
// idempotent-doors rules where a submission learns that its workflow closed while the workflow's
// charge is still in flight: the job service then rejects the placeholder
// (workflow_ended_before_charging), concurrently with the charge, on separate connections. The two
// meet at the job's row lock, and the guards decide: a charge that got there first (here it holds
// the job's row, waiting for the busy account's) commits and the rejection answers NotApplied, the
// job charged once and running — for the job service to heal — never rejected with a charge; a
// rejection that got there first commits and the charge behind it charges nothing.
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
