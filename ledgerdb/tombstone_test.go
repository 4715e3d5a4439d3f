package ledgerdb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// awaitingReclaim reads the account's record of refunds a late result may still reclaim.
func awaitingReclaim(t *testing.T, s *ledgerdb.Store, accountID string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.Pool().QueryRow(context.Background(),
		`SELECT awaiting_reclaim FROM accounts WHERE id = $1`, accountID).Scan(&n))
	return n
}

// refundedMetered opens an account with 1000 credits and submits, charges and refunds (timed
// out) a job metered by the GPU-second at 1 credit, holding 300: the job a customer could delete
// while its GPU is still finishing.
func refundedMetered(t *testing.T, s *ledgerdb.Store) (string, ledgerdb.JobKey) {
	t.Helper()
	ctx := context.Background()
	acct := ledgertest.Account(t, s, 1000)
	key := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "tomb")}
	_, err := s.Submit(ctx, ledgerdb.Submission{JobID: key.JobID, AccountID: acct, Kind: ledgertest.Metered(t, s, 1, 300), Request: []byte("render")})
	require.NoError(t, err)
	_, err = s.Charge(ctx, key)
	require.NoError(t, err)
	_, err = s.Refund(ctx, key, ledgerdb.ReasonTimedOut, "timed out after 1 attempt", 1)
	require.NoError(t, err)
	return acct, key
}

// TestDeletedRefundedJobTakesItsLateResult protects the net-effect rule against deletion: deleting
// a job removes its content from view, never an obligation. A job refunded (timed out) while its
// GPU was still finishing, then deleted by its customer, still takes the late result of 90
// GPU-seconds: the refund is reclaimed and the job settled at 90 (charge −300, refund +300, reclaim
// −300, release +210: net −90), its output is not kept, and the tombstone tells where the money
// stands (deleted, charged, the figures). Until then the tombstone's cost stays awaiting a reclaim
// (the lower exposure bound counts it); a repeat of the settle writes nothing. Before, the result
// was refused as "gone" and the customer kept the refund for delivered work.
func TestDeletedRefundedJobTakesItsLateResult(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, key := refundedMetered(t, s)

	del, err := s.Delete(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDeleted, del.Job.State)
	require.Equal(t, ledgerdb.MoneyRefunded, del.Job.MoneyState())
	require.Equal(t, int64(300), awaitingReclaim(t, s, acct), "a deleted refunded job can still be reclaimed: its cost stays awaiting")

	rec, err := s.RecordResult(ctx, ledgerdb.ResultReport{Key: key, Attempt: 1, OutputRef: "s3://out/late", UnitsUsed: ledgerdb.Units(90)})
	require.NoError(t, err, "the inbox takes the late result of a deleted refunded job")
	require.Equal(t, ledgerdb.Applied, rec.Outcome)

	settled, err := s.Settle(ctx, key, 1, ledgerdb.Units(90), "s3://out/late")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, settled.Outcome)
	job := settled.Job
	require.Equal(t, ledgerdb.StateDeleted, job.State, "a tombstone stays a tombstone")
	require.Equal(t, ledgerdb.StateRecovered, job.StateBeforeDelete)
	require.Equal(t, ledgerdb.MoneyCharged, job.MoneyState())
	require.True(t, job.IsReclaimed)
	require.Equal(t, int64(90), *job.UnitsUsed)
	require.Equal(t, int64(90), job.Charged())
	require.Equal(t, int64(210), job.Released())
	require.Empty(t, job.OutputRef, "a deleted job's output is not kept")
	ledgertest.RequireRowAmounts(t, s, key,
		ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: 300},
		ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 210})
	ledgertest.RequireBalance(t, s, acct, 1000-90)
	require.Zero(t, awaitingReclaim(t, s, acct))

	// A retry of the same step (its answer lost) and the usage-blind reclaim write nothing more.
	again, err := s.Settle(ctx, key, 1, ledgerdb.Units(90), "s3://out/late")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, again.Job.StateBeforeDelete)
	reclaim, err := s.Reclaim(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, reclaim.Outcome)
	// The same report again is a repeat; another attempt's result has nothing left to bill: the
	// tombstone refuses it, nothing written.
	repeat, err := s.RecordResult(ctx, ledgerdb.ResultReport{Key: key, Attempt: 1, OutputRef: "s3://out/late", UnitsUsed: ledgerdb.Units(90)})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, repeat.Outcome)
	_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: key, Attempt: 2, OutputRef: "s3://out/other"})
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	// Nor does the tombstone come back to life, or take a new charge.
	_, err = s.Charge(ctx, key)
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	read, err := s.Job(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDeleted, read.State)
	ledgertest.RequireRowAmounts(t, s, key,
		ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: 300},
		ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 210})
	ledgertest.RequireBalance(t, s, acct, 1000-90)
}

// TestDeletedSettledJobTakesNoResult keeps the remembered-IDs rule's other side: a tombstone with
// nothing left to reclaim — deleted delivered, recovered or rejected — takes no result (ErrGone,
// nothing recorded), and a bad report is refused before anything is written, tombstone or not.
func TestDeletedSettledJobTakesNoResult(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	for _, end := range []ledgerdb.State{ledgerdb.StateDelivered, ledgerdb.StateRecovered, ledgerdb.StateRejected} {
		credits := int64(100)
		if end == ledgerdb.StateRejected {
			credits = 10
		}
		acct, key := submitted(t, s, credits, 40)
		_, err := s.Charge(ctx, key)
		switch end {
		case ledgerdb.StateDelivered:
			require.NoError(t, err)
			_, err = s.Settle(ctx, key, 1, nil, "s3://out")
		case ledgerdb.StateRecovered:
			require.NoError(t, err)
			_, err = s.Refund(ctx, key, ledgerdb.ReasonGPUFailed, "failed", 1)
			require.NoError(t, err)
			_, err = s.Settle(ctx, key, 1, nil, "s3://out")
		}
		if end != ledgerdb.StateRejected {
			require.NoError(t, err, end)
		}
		_, err = s.Delete(ctx, key)
		require.NoError(t, err)
		balance, err := s.Balance(ctx, acct)
		require.NoError(t, err)

		_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: key, Attempt: 1, OutputRef: "s3://out/again"})
		require.ErrorIs(t, err, ledgerdb.ErrGone, end)
		var recorded int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM result_reports WHERE job_id = $1 AND output_ref = 's3://out/again'`, key.String()).Scan(&recorded))
		require.Zero(t, recorded, end)
		ledgertest.RequireBalance(t, s, acct, balance)
	}

	_, key := refundedMetered(t, s)
	_, err := s.Delete(ctx, key)
	require.NoError(t, err)
	_, err = s.Settle(ctx, key, 1, ledgerdb.Units(-1), "s3://out")
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: key, Attempt: 0, OutputRef: "s3://out"})
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	ledgertest.RequireRows(t, s, key, 300, ledgerdb.KindCharge, ledgerdb.KindRefund)
}
