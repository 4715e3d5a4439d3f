package ledgerdb_test

// The result inbox: a reported result is recorded once — against the real Postgres, as the
// application role.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestResultInboxRecordsOnce protects the idempotent-doors rule at the report door: a result is
// recorded once per job and attempt before anyone acts on it; the same report again answers
// AlreadyApplied; another output for the same attempt is a conflict; a job never charged, deleted
// or unknown is refused; bad input writes nothing. Marking it applied happens once.
func TestResultInboxRecordsOnce(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := submitted(t, s, 100, 40)
	report := ledgerdb.ResultReport{Key: job, Attempt: 1, OutputRef: "s3://out/1", FinishedAt: time.Now().UTC()}

	_, err := s.RecordResult(ctx, report)
	require.ErrorIs(t, err, ledgerdb.ErrNotStarted, "a placeholder has no work to deliver")
	_, err = s.Charge(ctx, job)
	require.NoError(t, err)

	rec, err := s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, rec.Outcome)
	require.Equal(t, ledgerdb.StateRunning, rec.JobState)
	require.Nil(t, rec.AppliedAt)
	again, err := s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	other := report
	other.OutputRef = "s3://out/forged"
	_, err = s.RecordResult(ctx, other)
	require.ErrorIs(t, err, ledgerdb.ErrConflict)

	pending, err := s.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, report.OutputRef, pending[0].Report.OutputRef)
	require.Equal(t, job, pending[0].Report.Key, "the pending result names its job and so its account")
	outcome, err := s.MarkResultApplied(ctx, job, 1, ledgerdb.AppliedBySignal)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	outcome, err = s.MarkResultApplied(ctx, job, 1, ledgerdb.AppliedByFallback)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, outcome)
	pending, err = s.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Empty(t, pending)
	rec, err = s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.NotNil(t, rec.AppliedAt, "a repeat learns the result was taken")

	for name, bad := range map[string]ledgerdb.ResultReport{
		"attempt 0":        {Key: job, Attempt: 0, OutputRef: "s3://x"},
		"negative attempt": {Key: job, Attempt: -1, OutputRef: "s3://x"},
		"no output":        {Key: job, Attempt: 2},
		"NUL in output":    {Key: job, Attempt: 2, OutputRef: "s3://x\x00"},
		"bidi override":    {Key: job, Attempt: 2, OutputRef: "s3://x\u202e"},
		"invalid job ID":   {Key: ledgerdb.JobKey{AccountID: acct, JobID: "no/slashes"}, Attempt: 2, OutputRef: "s3://x"},
		"no account":       {Key: ledgerdb.JobKey{JobID: job.JobID}, Attempt: 2, OutputRef: "s3://x"},
		"oversized output": {Key: job, Attempt: 2, OutputRef: string(make([]byte, ledgerdb.MaxOutputRefLength+1))},
	} {
		_, err := s.RecordResult(ctx, bad)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, name)
	}
	_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "never")}, Attempt: 1, OutputRef: "s3://x"})
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound)
	var rows int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM result_reports WHERE job_id = $1`, job.String()).Scan(&rows))
	require.Equal(t, 1, rows, "bad input and repeats wrote nothing")
	ledgertest.RequireBalance(t, s, acct, 60)
}
