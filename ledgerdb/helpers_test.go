package ledgerdb_test

// Helpers the ledger's tests share: a submitted or charged job, its rows by kind, a settlement's
// figures and the SQLSTATE of a refusal; and for the credit blocks, an account that holds only the
// blocks its test grants, the money each block holds, its debt and its expiries.

import (
	"context"
	"errors"
	"testing"
	"time"

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

// blockAccount opens an account with no credits, for tests that grant their own blocks.
func blockAccount(t *testing.T, s *ledgerdb.Store) string {
	t.Helper()
	acct := ledgertest.ID(t, "acct")
	_, err := s.OpenAccount(context.Background(), acct)
	require.NoError(t, err)
	return acct
}

// promotional and paid are block terms: a promotional block expiring in days, a paid one of
// priority 0 that never expires.
func promotional(days int) ledgerdb.BlockTerms {
	at := time.Now().Add(time.Duration(days) * 24 * time.Hour)
	return ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &at}
}

var paid = ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.01"}

// remaining answers what each block holds now, by ID.
func remaining(t *testing.T, s *ledgerdb.Store, acct string) map[int64]int64 {
	t.Helper()
	blocks, err := s.Blocks(context.Background(), acct)
	require.NoError(t, err)
	out := map[int64]int64{}
	for _, b := range blocks {
		out[b.ID] = b.Remaining
	}
	return out
}

// blockStore is the test ledger and a fresh account on it with no credits, for tests that grant
// their own blocks.
func blockStore(t *testing.T) (*ledgerdb.Store, string) {
	t.Helper()
	s := ledgertest.Store(t)
	return s, blockAccount(t, s)
}

// submitJob writes the placeholder of a job of kind on the account, not charged yet, and answers
// its key.
func submitJob(t *testing.T, s *ledgerdb.Store, acct, kind string) ledgerdb.JobKey {
	t.Helper()
	key := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "job")}
	_, err := s.Submit(context.Background(), ledgerdb.Submission{JobID: key.JobID, AccountID: acct, Kind: kind, Request: []byte("x")})
	require.NoError(t, err)
	return key
}

// chargeJob submits and charges a job of a fixed cost.
func chargeJob(t *testing.T, s *ledgerdb.Store, acct string, cost int64) (ledgerdb.JobKey, ledgerdb.Transition) {
	t.Helper()
	key := submitJob(t, s, acct, ledgertest.Fixed(t, s, cost))
	tr, err := s.Charge(context.Background(), key)
	if !errors.Is(err, ledgerdb.ErrRejected) {
		require.NoError(t, err)
	}
	return key, tr
}

// owe writes an operator's correction of −amount on the account, which its blocks pay as far as
// they hold and which leaves the rest owed: a debt.
func owe(t *testing.T, s *ledgerdb.Store, acct string, amount int64) {
	t.Helper()
	_, err := s.Adjust(context.Background(), ledgerdb.Credit{AccountID: acct, Amount: -amount, Key: ledgertest.ID(t, "correction")})
	require.NoError(t, err)
}

// requireBalanceSound fails unless the account's balance is want and its audit finds every money
// rule kept (the sum-of-rows rule among them: the balance is what the blocks hold less the debt).
func requireBalanceSound(t *testing.T, s *ledgerdb.Store, acct string, want int64) {
	t.Helper()
	ledgertest.RequireBalance(t, s, acct, want)
	ledgertest.RequireSound(t, s, acct)
}

// expiries answers the account's expire rows.
func expiries(t *testing.T, s *ledgerdb.Store, acct string) []ledgerdb.Entry {
	t.Helper()
	h, err := s.History(context.Background(), acct, ledgerdb.HistoryPage{Limit: 1000})
	require.NoError(t, err)
	var out []ledgerdb.Entry
	for _, e := range h.Entries {
		if e.Kind == ledgerdb.KindExpire {
			out = append(out, e)
		}
	}
	return out
}

// filterAccount keeps the expiries of one account.
func filterAccount(in []ledgerdb.Expiry, acct string) []ledgerdb.Expiry {
	var out []ledgerdb.Expiry
	for _, e := range in {
		if e.AccountID == acct {
			out = append(out, e)
		}
	}
	return out
}

// debtOf answers the account's debt: what its rows drew beyond its blocks and nothing has paid
// back yet (the moves with no block).
func debtOf(t *testing.T, s *ledgerdb.Store, acct string) int64 {
	t.Helper()
	var debt int64
	require.NoError(t, s.Pool().QueryRow(context.Background(),
		`SELECT coalesce(-sum(amount), 0)::bigint FROM ledger_block_moves WHERE account_id = $1 AND block_id IS NULL`,
		acct).Scan(&debt))
	return debt
}

// balanceOf answers the account's balance.
func balanceOf(t *testing.T, s *ledgerdb.Store, acct string) int64 {
	t.Helper()
	b, err := s.Balance(context.Background(), acct)
	require.NoError(t, err)
	return b
}

// refundOf refunds a running job (its work timed out).
func refundOf(t *testing.T, s *ledgerdb.Store, job ledgerdb.JobKey) ledgerdb.Transition {
	t.Helper()
	tr, err := s.Refund(context.Background(), job, ledgerdb.ReasonTimedOut, "", 3)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	return tr
}

// lateResultOf bills a refunded job's late result: its refund reclaimed, never refused (the debt
// rule).
func lateResultOf(t *testing.T, s *ledgerdb.Store, job ledgerdb.JobKey) {
	t.Helper()
	tr, err := s.Settle(context.Background(), job, 3, nil, "s3://out")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
}

// accountRows are the account's ledger rows.
func accountRows(t *testing.T, s *ledgerdb.Store, acct string) []ledgerdb.Entry {
	t.Helper()
	h, err := s.History(context.Background(), acct, ledgerdb.HistoryPage{Limit: 1000})
	require.NoError(t, err)
	return h.Entries
}

// settledAtFive opens an account granted 1000 credits and settles on it, at 5 units used, a job of
// the metered kind charged its hold: a job whose price and settlement are fixed. It answers the
// account and the job.
func settledAtFive(t *testing.T, s *ledgerdb.Store, kind string) (string, ledgerdb.JobKey) {
	t.Helper()
	acct := ledgertest.Account(t, s, 1000)
	job := meteredCharged(t, s, acct, kind, 0).Job.Key()
	_, err := s.Settle(context.Background(), job, 1, ledgerdb.Units(5), "")
	require.NoError(t, err)
	return acct, job
}

// requireSettledAtFive fails unless settledAtFive's job is still settled at 5 units, its rows still
// the charge of its hold and the release of the rest, and its account holds what the 5 units left
// (the price-list and net-effect rules): nothing that was refused changed it.
func requireSettledAtFive(t *testing.T, s *ledgerdb.Store, acct string, job ledgerdb.JobKey, hold, released int64) {
	t.Helper()
	read, err := s.Job(context.Background(), job)
	require.NoError(t, err)
	requireSettled(t, read, 5)
	ledgertest.RequireRowAmounts(t, s, job, ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -hold}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: released})
	ledgertest.RequireBalance(t, s, acct, 1000-(hold-released))
}
