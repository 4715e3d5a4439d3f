package ledgerdb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestDeadLettersListsRefundedJobsOnly checks the operator's queue of dead letters: a refunded job
// (its charge given back, awaiting a late result or a redrive) is listed, newest refund first; a
// job whose refund was reclaimed is not, nor a charged one; accounts filter the list; and a limit
// out of range is refused.
func TestDeadLettersListsRefundedJobsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 500)
	first := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/a").Job.Key()
	second := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/b").Job.Key()
	reclaimed := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/c").Job.Key()
	running := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/d").Job.Key()
	for _, key := range []ledgerdb.JobKey{first, second, reclaimed} {
		_, err := s.Refund(ctx, key, ledgerdb.ReasonGPUFailed, "failed for good", 1)
		require.NoError(t, err)
	}
	_, err := s.Reclaim(ctx, reclaimed)
	require.NoError(t, err)

	dead, err := s.DeadLetters(ctx, 0, ledgerdb.MaxDeadLetters, acct)
	require.NoError(t, err)
	var ids []string
	for _, j := range dead {
		ids = append(ids, j.ID)
		require.Equal(t, ledgerdb.StateRefunded, j.State)
	}
	require.Equal(t, []string{second.JobID, first.JobID}, ids, "newest refund first; no reclaimed or running job")
	require.NotContains(t, ids, running.JobID)

	other, err := s.DeadLetters(ctx, 0, 10, ledgertest.Account(t, s, 0))
	require.NoError(t, err)
	require.Empty(t, other)
	_, err = s.DeadLetters(ctx, 0, ledgerdb.MaxDeadLetters+1)
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
}
