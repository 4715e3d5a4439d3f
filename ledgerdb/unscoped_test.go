package ledgerdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestUnscopedReadsSeeEveryAccount protects healing with nobody looking: the scheduled reconcile
// pass reads the placeholders, the running jobs, the unapplied results and the alarms of every
// account, so it calls these reads with no account list — a nil slice, which pgx sends as SQL
// NULL, not as an empty array. Each read without accounts must see the job this test leaves in
// each condition; before, `cardinality(NULL) = 0` was NULL and every unscoped read answered
// nothing, so no charged job whose workflow an operator terminated was ever refunded and no
// result recorded while Temporal was down was ever billed unless someone read that one job.
func TestUnscopedReadsSeeEveryAccount(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)

	_, placeholder := submitted(t, s, 100, 40)
	_, running := charged(t, s, 100, 40)
	_, err := s.RecordResult(ctx, ledgerdb.ResultReport{Key: running, Attempt: 1, OutputRef: "s3://out/1", FinishedAt: time.Now().UTC()})
	require.NoError(t, err)
	_, err = s.RaiseAlarm(ctx, running, "settle", "an alarm of this test")
	require.NoError(t, err)

	for _, accounts := range [][]string{nil, {}} {
		jobs, err := s.RunningJobs(ctx, 0, ledgerdb.MaxRunningJobs, accounts...)
		require.NoError(t, err)
		require.Contains(t, jobKeys(jobs), running, "an unscoped read of running jobs (accounts %#v) sees every account's", accounts)

		// The other reads list the oldest first and at most MaxPlaceholders, so this test's rows may
		// lie past the first page of a long-lived test database: the read must not be empty, and
		// every row it answers must be of its condition.
		placeholders, err := s.Placeholders(ctx, 0, ledgerdb.MaxPlaceholders, accounts...)
		require.NoError(t, err)
		require.NotEmpty(t, placeholders, "an unscoped read of placeholders (accounts %#v) sees %s", accounts, placeholder)
		for _, j := range placeholders {
			require.Equal(t, ledgerdb.StateSubmitting, j.State)
		}
		results, err := s.UnappliedResults(ctx, 0, ledgerdb.MaxPlaceholders, accounts...)
		require.NoError(t, err)
		require.NotEmpty(t, results, "an unscoped read of unapplied results (accounts %#v)", accounts)
		alarms, err := s.Alarms(ctx, ledgerdb.MaxPlaceholders, accounts...)
		require.NoError(t, err)
		require.NotEmpty(t, alarms, "an unscoped read of alarms (accounts %#v)", accounts)
	}
}

// jobKeys is the keys of jobs, in order.
func jobKeys(jobs []ledgerdb.Job) []ledgerdb.JobKey {
	keys := make([]ledgerdb.JobKey, len(jobs))
	for i, j := range jobs {
		keys[i] = j.Key()
	}
	return keys
}
