package ledgerdb_test

// Helpers the ledger's tests share: a submitted or charged job, its rows by kind, a settlement's
// figures and the SQLSTATE of a refusal.

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// meteredCharged submits a job of kind to acct (holding maxUnits, 0 for the kind's maximum) and
// charges it: a running job that no workflow runs.
func meteredCharged(t *testing.T, s *ledgerdb.Store, acct, kind string, maxUnits int64) ledgerdb.Transition {
	t.Helper()
	ctx := context.Background()
	sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: kind, MaxUnits: maxUnits, Request: []byte(`{"render":"metered"}`)}
	_, err := s.Submit(ctx, sub)
	require.NoError(t, err)
	tr, err := s.Charge(ctx, sub.Key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	return tr
}

// requireSettled checks what a settlement recorded on the job: settled, at used units, with its
// money rules' figures (the net-effect rule: a settled job nets −used × unit price).
func requireSettled(t *testing.T, j ledgerdb.Job, used int64) {
	t.Helper()
	require.True(t, j.IsSettled, "job %s is not settled", j.ID)
	require.NotNil(t, j.UnitsUsed, "job %s", j.ID)
	require.Equal(t, used, *j.UnitsUsed, "units used of job %s", j.ID)
	require.NotNil(t, j.SettledAt, "job %s", j.ID)
	require.Equal(t, used*j.UnitPrice, j.Charged(), "job %s", j.ID)
	require.Equal(t, -used*j.UnitPrice, j.Net(), "job %s", j.ID)
	require.Equal(t, (j.HeldUnits-used)*j.UnitPrice, j.Released(), "job %s", j.ID)
}

func requireSQLState(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
}

// submitted opens an account with credits and writes a placeholder job costing cost on it,
// answering the account and the job's key.
func submitted(t *testing.T, s *ledgerdb.Store, credits, cost int64) (accountID string, job ledgerdb.JobKey) {
	t.Helper()
	accountID = ledgertest.Account(t, s, credits)
	job = ledgerdb.JobKey{AccountID: accountID, JobID: ledgertest.ID(t, "job")}
	tr, err := s.Submit(context.Background(), ledgerdb.Submission{JobID: job.JobID, AccountID: accountID, Kind: ledgertest.Fixed(t, s, cost), Request: []byte(`{"model":"x"}`)})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateSubmitting, tr.Job.State)
	return accountID, job
}

// charged is submitted, then charged: a running job that no workflow runs.
func charged(t *testing.T, s *ledgerdb.Store, credits, cost int64) (accountID string, job ledgerdb.JobKey) {
	t.Helper()
	accountID, job = submitted(t, s, credits, cost)
	_, err := s.Charge(context.Background(), job)
	require.NoError(t, err)
	return accountID, job
}

// entries returns the job's ledger rows by kind, straight from the table.
func entries(t *testing.T, s *ledgerdb.Store, job ledgerdb.JobKey) map[ledgerdb.EntryKind]int64 {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT kind, amount FROM ledger_entries WHERE job_id = $1`, job.String())
	require.NoError(t, err)
	defer rows.Close()
	got := map[ledgerdb.EntryKind]int64{}
	for rows.Next() {
		var kind string
		var amount int64
		require.NoError(t, rows.Scan(&kind, &amount))
		_, dup := got[ledgerdb.EntryKind(kind)]
		require.False(t, dup, "two %s rows for job %s", kind, job)
		got[ledgerdb.EntryKind(kind)] = amount
	}
	require.NoError(t, rows.Err())
	return got
}
