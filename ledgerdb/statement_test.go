package ledgerdb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestStatementsReconcile checks the statement's rule: opening balance + the period's rows by kind
// = closing balance; periods that meet chain (one's closing is the next one's opening); a period
// up to now closes on the balance, which is the sum of the rows (the sum-of-rows rule); and a
// period that holds no time, or an unknown account, is refused.
func TestStatementsReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 500)
	charged := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 40, "s3://in/a")
	_, err := s.Refund(ctx, charged.Job.Key(), ledgerdb.ReasonTimedOut, "timed out", 1)
	require.NoError(t, err)
	var middle time.Time
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT now()`).Scan(&middle))
	_, err = s.Settle(ctx, charged.Job.Key(), 1, nil, "")
	require.NoError(t, err)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 25, "s3://in/b")

	start, end := middle.Add(-time.Hour), middle.Add(time.Hour)
	first, err := s.Statement(ctx, acct, start, middle)
	require.NoError(t, err)
	second, err := s.Statement(ctx, acct, middle, end)
	require.NoError(t, err)
	whole, err := s.Statement(ctx, acct, start, end)
	require.NoError(t, err)
	for _, st := range []ledgerdb.Statement{first, second, whole} {
		sum := st.Opening
		for _, line := range st.Lines {
			sum += line.Amount
		}
		require.Equal(t, st.Closing, sum, "opening + lines = closing: %+v", st)
	}
	require.Equal(t, first.Closing, second.Opening, "periods that meet chain")
	require.Equal(t, int64(0), whole.Opening)
	balance, err := s.Balance(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, balance, whole.Closing)
	require.Equal(t, []ledgerdb.StatementLine{
		{Kind: ledgerdb.KindGrant, Category: ledgerdb.CategoryPaid, Rows: 1, Amount: 500},
		{Kind: ledgerdb.KindCharge, JobKind: "fixed-25", Rows: 1, Amount: -25},
		{Kind: ledgerdb.KindCharge, JobKind: "fixed-40", Rows: 1, Amount: -40},
		{Kind: ledgerdb.KindRefund, Rows: 1, Amount: 40},
		{Kind: ledgerdb.KindReclaim, Rows: 1, Amount: -40},
	}, whole.Lines)

	_, err = s.Statement(ctx, acct, end, start)
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	_, err = s.Statement(ctx, ledgertest.ID(t, "nobody"), start, end)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
}

// TestFinalStatementNeverChanges checks that a statement which says it is final says the same
// thing every time it is read, and that the next period opens on its closing: a money transaction
// that began before the period's end (so dates its rows inside the period) and commits after the
// statement was read leaves that statement provisional, never final and then different.
func TestFinalStatementNeverChanges(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 500)

	// A grant whose transaction starts just before the period's end and commits after it.
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var started time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&started))
	end := started.Add(time.Millisecond)
	require.Eventually(t, func() bool {
		var past bool
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT now() > $1`, end).Scan(&past))
		return past
	}, time.Minute, 5*time.Millisecond, "the period has ended")
	var outcome string
	require.NoError(t, tx.QueryRow(ctx, `SELECT outcome FROM ledger_post($1, 'grant', 70, 'late', '')`, acct).Scan(&outcome))
	require.Equal(t, "applied", outcome)

	issued, err := s.Statement(ctx, acct, end.Add(-time.Hour), end) // downloaded after the period ended
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	// Once no transaction that began before the period's end is open, the statement is final
	// (other tests' transactions may hold it provisional a while: wait for it).
	var final ledgerdb.Statement
	require.Eventually(t, func() bool {
		final, err = s.Statement(ctx, acct, end.Add(-time.Hour), end)
		require.NoError(t, err)
		return final.Final
	}, time.Minute, 10*time.Millisecond, "the ended period's statement becomes final")
	if issued.Final {
		require.Equal(t, issued, final, "a statement issued final changed afterwards")
	}
	require.False(t, issued.Final, "a transaction dating rows inside the period was open: the statement was not final")
	require.Equal(t, int64(570), final.Closing, "the final statement holds the row committed late")
	again, err := s.Statement(ctx, acct, end.Add(-time.Hour), end)
	require.NoError(t, err)
	require.Equal(t, final, again, "a final statement reads the same every time")
	next, err := s.Statement(ctx, acct, end, end.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, final.Closing, next.Opening, "the next period opens on the final closing")
	require.False(t, next.Final, "a period that has not ended is provisional")
}

// TestStatementSplitsGrantsAndUsage checks that a statement splits grants by their block's
// category and charges by their job's kind, lists expiries and adjustments, and still adds up:
// opening + lines = closing in each of two adjacent periods, the first's closing is the second's
// opening, and the CSV that every door hands out says the same sums.
func TestStatementSplitsGrantsAndUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 300)
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 50, Key: "sign-up", Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional}})
	require.NoError(t, err)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 30, "s3://in/a") // all promotional
	middle := ledgertest.Now(t, s)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 45, "s3://in/b") // 20 promotional, 25 paid
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -5, Key: "correction"})
	require.NoError(t, err)
	ledgertest.ExpireGrant(t, s, acct, "initial")
	end := time.Now().Add(time.Hour)

	first, err := s.Statement(ctx, acct, middle.Add(-time.Hour), middle)
	require.NoError(t, err)
	second, err := s.Statement(ctx, acct, middle, end)
	require.NoError(t, err)
	require.Equal(t, []ledgerdb.StatementLine{
		{Kind: ledgerdb.KindGrant, Category: ledgerdb.CategoryPaid, Rows: 1, Amount: 300},
		{Kind: ledgerdb.KindGrant, Category: ledgerdb.CategoryPromotional, Rows: 1, Amount: 50},
		{Kind: ledgerdb.KindCharge, JobKind: "fixed-30", Rows: 1, Amount: -30},
	}, first.Lines)
	require.Equal(t, []ledgerdb.StatementLine{
		{Kind: ledgerdb.KindCharge, JobKind: "fixed-45", Rows: 1, Amount: -45},
		{Kind: ledgerdb.KindAdjustment, Rows: 1, Amount: -5},
		{Kind: ledgerdb.KindExpire, Rows: 1, Amount: -270},
	}, second.Lines, "the paid block's 300 less 25 charged and 5 adjusted expired")
	require.Equal(t, first.Closing, second.Opening, "periods that meet chain")
	require.Equal(t, int64(0), second.Closing)
	for _, st := range []ledgerdb.Statement{first, second} {
		var csv strings.Builder
		require.NoError(t, ledgerdb.WriteStatementCSV(&csv, st))
		records, opening, lines, closing := ledgertest.StatementCSV(t, csv.String())
		require.Equal(t, []string{"status", st.Status(), "", ""}, records[0])
		require.Equal(t, st.Opening, opening)
		require.Equal(t, st.Closing, closing)
		require.Equal(t, closing, opening+lines, "opening + lines = closing in the CSV:\n%s", csv.String())
	}
	var csv strings.Builder
	require.NoError(t, ledgerdb.WriteStatementCSV(&csv, first))
	require.Contains(t, csv.String(), "\nrows,grant:promotional,1,50\nrows,charge:fixed-30,1,-30\n")
}
