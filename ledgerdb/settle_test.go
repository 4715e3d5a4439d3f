package ledgerdb_test

// The one-step settle: a result billed in one step, and a settle racing a refund — against the
// real Postgres, as the application role.

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestSettleBillsAResultInOneStep protects the reversing-pairs, net-effect and idempotent-doors
// rules: a result settles a running job (delivered, no row) or a refunded one (recovered, one
// reclaim row) in one transaction, and a second settle changes nothing.
func TestSettleBillsAResultInOneStep(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)

	acct, onTime := charged(t, s, 100, 40)
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

// TestSettleRacingRefundLosesNoResult protects the net-effect rule where a result lands at the
// moment a refund is written (the heal of a terminated job racing the late-result fallback):
// whichever commits first, the job ends billed for its delivered work — delivered with one charge,
// or recovered with charge, refund and reclaim — never refunded with the result lost.
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
