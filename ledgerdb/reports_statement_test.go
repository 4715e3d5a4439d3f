package ledgerdb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// The ledger's function ledger_statement (ledgerdb/code/reports_statement.sql), rule by rule, read
// as the service reads it. Each row is one line; a NULL column reads "-" here.

// statementRow is one row of ledger_statement.
type statementRow struct {
	Line, Kind, Category, JobKind string
	Rows, Credits                 int64
	Final                         bool
}

// readStatement reads ledger_statement for the account over [from, to).
func readStatement(t *testing.T, s *ledgerdb.Store, acct string, from, to time.Time) []statementRow {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `
		SELECT line, coalesce(kind, '-'), coalesce(category, '-'), coalesce(job_kind, '-'), coalesce(rows, -1), credits, final
		FROM ledger_statement($1, $2, $3)`, acct, from, to)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[statementRow])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(out), 2, "a statement has an opening and a closing")
	return out
}

// lines are a statement's rows between its opening and its closing.
func lines(st []statementRow) []statementRow { return st[1 : len(st)-1] }

// statementFixture is an account whose rows fall before a period, inside it and after it:
//
//	before from: a paid grant of 500, a promotional grant of 50, a charge of 30   (opening 520)
//	inside:      a paid grant of 100, a promotional grant of 15, charges of 45, 20 and 45 (two
//	             jobs of one kind), a refund of the 20, an adjustment of -5      (closing 540)
//	after to:    a charge of 10                                                   (balance 530)
type statementFixture struct {
	s        *ledgerdb.Store
	acct     string
	from, to time.Time
}

func newStatementFixture(t *testing.T) statementFixture {
	t.Helper()
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 500)
	ledgertest.Promotional(t, s, acct, "sign-up", 50)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 30, "s3://in/a")
	from := ledgertest.Now(t, s)
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "top-up"})
	require.NoError(t, err)
	ledgertest.Promotional(t, s, acct, "referral", 15)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 45, "s3://in/b")
	refunded := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 20, "s3://in/c")
	_, err = s.Refund(ctx, refunded.Job.Key(), ledgerdb.ReasonTimedOut, "timed out", 1)
	require.NoError(t, err)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 45, "s3://in/d")
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -5, Key: "correction"})
	require.NoError(t, err)
	to := ledgertest.Now(t, s)
	ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 10, "s3://in/e")
	return statementFixture{s: s, acct: acct, from: from, to: to}
}

// TestStatementOpensOnTheRowsBeforeFrom checks the opening rule: the statement's first row is its
// opening balance, the sum of every row of the account written before from (500 + 50 − 30), and
// a period that starts before the account's first row opens on nothing.
func TestStatementOpensOnTheRowsBeforeFrom(t *testing.T) {
	t.Parallel()
	f := newStatementFixture(t)
	st := readStatement(t, f.s, f.acct, f.from, f.to)
	require.Equal(t, statementRow{Line: "opening", Kind: "-", Category: "-", JobKind: "-", Rows: -1, Credits: 520, Final: st[0].Final}, st[0])
	var before int64
	require.NoError(t, f.s.Pool().QueryRow(context.Background(),
		`SELECT sum(amount) FROM ledger_entries WHERE account_id = $1 AND created_at < $2`, f.acct, f.from).Scan(&before))
	require.Equal(t, before, st[0].Credits, "the opening is the sum of the rows before from")

	earliest := readStatement(t, f.s, f.acct, f.from.Add(-time.Hour), f.to)
	require.Equal(t, int64(0), earliest[0].Credits, "no row before the account's first: opening 0")
}

// TestStatementLinesSumThePeriodByKind checks the lines rule: one line per kind of row written in
// [from, to) — rows before from and from to on are no line's —, each with how many rows it sums
// and their sum, in the order of ledgerdb.EntryKinds (grants, charges, refunds, ..., adjustments);
// a kind with no row in the period (reclaim, release, expire here) has no line.
func TestStatementLinesSumThePeriodByKind(t *testing.T) {
	t.Parallel()
	f := newStatementFixture(t)
	st := readStatement(t, f.s, f.acct, f.from, f.to)
	require.Equal(t, []statementRow{
		{Line: "rows", Kind: "grant", Category: "paid", JobKind: "-", Rows: 1, Credits: 100},
		{Line: "rows", Kind: "grant", Category: "promotional", JobKind: "-", Rows: 1, Credits: 15},
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-20", Rows: 1, Credits: -20},
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-45", Rows: 2, Credits: -90},
		{Line: "rows", Kind: "refund", Category: "-", JobKind: "-", Rows: 1, Credits: 20},
		{Line: "rows", Kind: "adjustment", Category: "-", JobKind: "-", Rows: 1, Credits: -5},
	}, withoutFinal(lines(st)))
}

// TestStatementSplitsGrantsByCategory checks the grants rule: a period's grants are one line per
// category of the blocks they made, paid before promotional, each naming its category; no other
// line names one.
func TestStatementSplitsGrantsByCategory(t *testing.T) {
	t.Parallel()
	f := newStatementFixture(t)
	var grants []statementRow
	for _, l := range lines(readStatement(t, f.s, f.acct, f.from.Add(-time.Hour), f.to)) {
		if l.Kind == "grant" {
			grants = append(grants, l)
		} else {
			require.Equal(t, "-", l.Category, "only a grant line names a category: %+v", l)
		}
	}
	require.Equal(t, []statementRow{
		{Line: "rows", Kind: "grant", Category: "paid", JobKind: "-", Rows: 2, Credits: 600},
		{Line: "rows", Kind: "grant", Category: "promotional", JobKind: "-", Rows: 2, Credits: 65},
	}, withoutFinal(grants))
}

// TestStatementSplitsChargesByJobKind checks the charges rule: a period's charges are one line
// per kind of the jobs they charged, by the kinds' names, each naming its job kind; no other line
// names one (the refund of a fixed-20 job is a refund line, not the job kind's).
func TestStatementSplitsChargesByJobKind(t *testing.T) {
	t.Parallel()
	f := newStatementFixture(t)
	var charges []statementRow
	for _, l := range lines(readStatement(t, f.s, f.acct, f.from.Add(-time.Hour), f.to.Add(time.Hour))) {
		if l.Kind == "charge" {
			charges = append(charges, l)
		} else {
			require.Equal(t, "-", l.JobKind, "only a charge line names a job kind: %+v", l)
		}
	}
	require.Equal(t, []statementRow{
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-10", Rows: 1, Credits: -10},
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-20", Rows: 1, Credits: -20},
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-30", Rows: 1, Credits: -30},
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-45", Rows: 2, Credits: -90},
	}, withoutFinal(charges))
}

// TestStatementClosesOnTheRowsBeforeTo checks the closing rule: the statement's last row is its
// closing balance, the sum of every row written before to (the charge after to is not in it), so
// opening + the lines' credits = closing; and a period up to a time past every row closes on the
// account's balance.
func TestStatementClosesOnTheRowsBeforeTo(t *testing.T) {
	t.Parallel()
	f := newStatementFixture(t)
	st := readStatement(t, f.s, f.acct, f.from, f.to)
	closing := st[len(st)-1]
	require.Equal(t, statementRow{Line: "closing", Kind: "-", Category: "-", JobKind: "-", Rows: -1, Credits: 540, Final: closing.Final}, closing)
	sum := st[0].Credits
	for _, l := range lines(st) {
		sum += l.Credits
	}
	require.Equal(t, closing.Credits, sum, "opening + lines = closing")

	later := readStatement(t, f.s, f.acct, f.from, time.Now().Add(time.Hour))
	balance, err := f.s.Balance(context.Background(), f.acct)
	require.NoError(t, err)
	require.Equal(t, int64(530), balance)
	require.Equal(t, balance, later[len(later)-1].Credits, "a period up to the future closes on the balance")
}

// TestStatementPeriodsChain checks that periods which meet chain: one period's closing is the
// next one's opening, at both ends of the fixture's period.
func TestStatementPeriodsChain(t *testing.T) {
	t.Parallel()
	f := newStatementFixture(t)
	before := readStatement(t, f.s, f.acct, f.from.Add(-time.Hour), f.from)
	within := readStatement(t, f.s, f.acct, f.from, f.to)
	after := readStatement(t, f.s, f.acct, f.to, f.to.Add(time.Hour))
	require.Equal(t, before[len(before)-1].Credits, within[0].Credits, "closing before from = opening at from")
	require.Equal(t, within[len(within)-1].Credits, after[0].Credits, "closing at to = opening at to")
	require.Equal(t, []statementRow{
		{Line: "rows", Kind: "charge", Category: "-", JobKind: "fixed-10", Rows: 1, Credits: -10},
	}, withoutFinal(lines(after)))
}

// TestStatementFinal checks the final rule as every row says it: a period that has not ended is
// provisional (a transaction may still date rows inside it); one that has ended is final once no
// transaction that began before its end is open (other tests' transactions may hold it
// provisional a while: it is waited for). The rule about a transaction open across the end is
// TestFinalStatementNeverChanges's.
func TestStatementFinal(t *testing.T) {
	f := newStatementFixture(t)
	for _, row := range readStatement(t, f.s, f.acct, f.from, time.Now().Add(time.Hour)) {
		require.False(t, row.Final, "a period that has not ended is provisional: %+v", row)
	}
	require.Eventually(t, func() bool {
		st := readStatement(t, f.s, f.acct, f.from, f.to)
		for _, row := range st {
			require.Equal(t, st[0].Final, row.Final, "every row says the same")
		}
		return st[0].Final
	}, time.Minute, 10*time.Millisecond, "an ended period's statement becomes final")
}

// TestStatementRefusesBadInput checks that a period that holds no time, or an unknown account, is
// refused naming it, as the service's role calling the function directly meets it; and that the
// Store answers the same as [*ledgerdb.InvalidInputError] on "period" and [ledgerdb.ErrUnknownAccount].
// A statement writes nothing: the account's balance is what it was.
func TestStatementRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newStatementFixture(t)
	refusal := func(acct string, from, to time.Time) *pgconn.PgError {
		_, err := f.s.Pool().Exec(ctx, `SELECT * FROM ledger_statement($1, $2, $3)`, acct, from, to)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "refused: %v", err)
		require.Equal(t, "22023", pgErr.Code)
		return pgErr
	}
	require.Regexp(t, `^period: runs from .* to .*; its start must be before its end$`, refusal(f.acct, f.to, f.from).Message)
	require.Regexp(t, `^period: `, refusal(f.acct, f.from, f.from).Message, "an empty period holds no time")
	nobody := ledgertest.ID(t, "nobody")
	require.Equal(t, "account "+nobody+": unknown account", refusal(nobody, f.from, f.to).Message)

	_, err := f.s.Statement(ctx, f.acct, f.from, f.from)
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "period", invalid.Field)
	_, err = f.s.Statement(ctx, nobody, f.from, f.to)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	ledgertest.RequireBalance(t, f.s, f.acct, 530)
}

// withoutFinal clears each row's final flag, which TestStatementFinal checks: the other rules hold
// whatever it says.
func withoutFinal(rows []statementRow) []statementRow {
	out := make([]statementRow, len(rows))
	for i, r := range rows {
		r.Final = false
		out[i] = r
	}
	return out
}
