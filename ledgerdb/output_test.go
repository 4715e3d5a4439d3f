package ledgerdb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestSettlementKeepsItsOutputOnce checks that a job keeps the output its result was settled
// with — delivered on time, or recovered after a refund — and that nothing changes it afterwards:
// a second settlement of another output answers AlreadyApplied with the first (the reversing-pairs
// rule: one settlement), and even the schema's owner cannot rewrite it (jobs_refuse_rewrite). A bad
// output is refused with nothing written.
func TestSettlementKeepsItsOutputOnce(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 1, 300)
	acct := ledgertest.Account(t, s, 1000)
	for _, refundFirst := range []bool{false, true} {
		key := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "out")}
		_, err := s.Submit(ctx, ledgerdb.Submission{JobID: key.JobID, AccountID: acct, Kind: kind, Request: []byte("x")})
		require.NoError(t, err)
		_, err = s.Charge(ctx, key)
		require.NoError(t, err)
		if refundFirst {
			_, err = s.Refund(ctx, key, ledgerdb.ReasonTimedOut, "timed out", 1)
			require.NoError(t, err)
		}

		_, err = s.Settle(ctx, key, 1, ledgerdb.Units(10), "s3://out\u202e")
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "an output with a bidirectional override")
		job, err := s.Job(ctx, key)
		require.NoError(t, err)
		require.False(t, job.IsSettled, "refused: nothing written")

		tr, err := s.Settle(ctx, key, 1, ledgerdb.Units(10), "s3://first/"+key.JobID)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
		require.Equal(t, "s3://first/"+key.JobID, tr.Job.OutputRef, "refund first: %v", refundFirst)

		again, err := s.Settle(ctx, key, 2, ledgerdb.Units(99), "s3://second/"+key.JobID)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
		require.Equal(t, "s3://first/"+key.JobID, again.Job.OutputRef)
		require.Equal(t, int64(10), *again.Job.UnitsUsed)

		_, err = ledgertest.OwnerPool(t).Exec(ctx, `UPDATE jobs SET output_ref = 's3://rewritten' WHERE id = $1`, key.String())
		require.Error(t, err, "the owner rewrote a settled job's output")
		job, err = s.Job(ctx, key)
		require.NoError(t, err)
		require.Equal(t, "s3://first/"+key.JobID, job.OutputRef)
	}
	ledgertest.RequireSound(t, s, acct)
}
