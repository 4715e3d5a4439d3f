package ledgerdb_test

// The audit's checks of a release: each way one can break is reported by the SQL audit and by the
// invariant checker's snapshot — against the real Postgres.

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestAuditCatchesBrokenRelease breaks the release's money rules inside owner transactions that
// it rolls back, and checks that the audit (Store.Audit's replay, through the transaction) and
// the snapshot the invariant checker reads (ReadLedgerSnapshot: JobTotals.Releases and EntrySum
// against Job.WantsRows and Job.Net) both see each break: a second release row for one job
// (the reversing-pairs rule — the database refuses it outright, UNIQUE (job_id, kind)); a release
// row for a job settled at its whole hold, by Settle or by the original version's Deliver (the
// reversing-pairs rule: a row its settlement does not record; the net-effect rule: its rows no
// longer sum to −used × unit price); a running job delivered and settled at part of its hold (as a
// broken settle would) with a release of the wrong amount (the net-effect rule), with no release
// row at all (the reversing-pairs and net-effect rules), or with a release row whose balance_after
// breaks the account's chain (the sum-of-rows rule). After each rollback the account audits clean.
func TestAuditCatchesBrokenRelease(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	kind := ledgertest.Metered(t, s, 3, 20) // a hold of 60
	acct := ledgertest.Account(t, s, 1000)

	released := meteredCharged(t, s, acct, kind, 0).Job.Key()
	_, err := s.Settle(ctx, released, 1, ledgerdb.Units(5), "") // releases 45
	require.NoError(t, err)
	whole := meteredCharged(t, s, acct, kind, 0).Job.Key()
	_, err = s.Settle(ctx, whole, 1, nil, "") // releases nothing
	require.NoError(t, err)
	oldStep := meteredCharged(t, s, acct, kind, 0).Job.Key()
	delivered, err := s.Deliver(ctx, oldStep, 1) // the original step: settled at the whole hold
	require.NoError(t, err)
	requireSettled(t, delivered.Job, 20)
	// A running job (no step has settled it) that the broken steps below deliver and settle.
	running := meteredCharged(t, s, acct, kind, 0).Job.Key()
	ledgertest.RequireBalance(t, s, acct, 1000-15-60-60-60)

	// release appends a release row to the account as the functions do: the balance moves with
	// it, so that the chain and the sum-of-rows rule hold unless breakChain says otherwise.
	release := func(tx pgx.Tx, job ledgerdb.JobKey, amount int64, breakChain bool) error {
		skew := int64(0)
		if breakChain {
			skew = 1
		}
		// The credits go back to the account's opening block, as the functions' moves would take
		// them somewhere: the blocks agree with the rows unless the row itself is wrong.
		_, err := tx.Exec(ctx, `WITH a AS (
				UPDATE accounts SET balance = balance + $3 WHERE id = $1 RETURNING balance
			), e AS (
				INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
				SELECT $1, $2, 'release', $3, a.balance + $4 FROM a RETURNING id
			), b AS (
				UPDATE credit_blocks SET remaining = remaining + $3 WHERE account_id = $1 AND is_opening RETURNING id
			)
			INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount) SELECT $1, e.id, b.id, $3 FROM e, b`,
			acct, job.String(), amount, skew)
		return err
	}
	// settle delivers the running job and settles it at 10 units, writing no row: the first half
	// of what ledger_settle does.
	settle := func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE jobs SET state = 'delivered', delivered_at = now(), is_settled = true, units_used = 10,
			settled_at = now() WHERE id = $1 AND state = 'running'`, running.String())
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("job %s: %d rows delivered and settled, want 1", running, tag.RowsAffected())
		}
		return err
	}

	for _, c := range []struct {
		name    string
		job     ledgerdb.JobKey
		breakIt func(tx pgx.Tx) error
		// rules are the rules the audit must report, as they appear in its sentences.
		rules []string
		// releases and net are what the snapshot must show for the job; chain, whether the
		// account's chain breaks.
		releases int
		chain    bool
	}{
		{"a release for a job settled at its whole hold", whole,
			func(tx pgx.Tx) error { return release(tx, whole, 30, false) }, []string{"(rule 2)", "(rule 3)"}, 1, false},
		{"a release for a job the original step settled at its whole hold", oldStep,
			func(tx pgx.Tx) error { return release(tx, oldStep, 30, false) }, []string{"(rule 2)", "(rule 3)"}, 1, false},
		{"a release of the wrong amount", running,
			func(tx pgx.Tx) error {
				if err := settle(tx); err != nil {
					return err
				}
				return release(tx, running, 31, false) // (20 − 10) × 3 = 30 is due
			}, []string{"(rule 3)"}, 1, false},
		{"a settled job missing its release", running,
			settle, []string{"(rule 2)", "(rule 3)"}, 0, false},
		{"a release that breaks the chain", running,
			func(tx pgx.Tx) error {
				if err := settle(tx); err != nil {
					return err
				}
				return release(tx, running, 30, true)
			}, []string{"balance_after"}, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := owner.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			require.NoError(t, c.breakIt(tx))

			requireAuditReports(t, tx, acct, c.job, c.rules, c.chain)
			requireSnapshotShows(t, tx, acct, c.job, c.releases, c.chain, c.rules)
			require.NoError(t, tx.Rollback(ctx))
			ledgertest.RequireSound(t, s, acct)
		})
	}

	// The reversing-pairs rule, the second time: the database refuses a second release row for a
	// job outright.
	tx, err := owner.Begin(ctx)
	require.NoError(t, err)
	err = release(tx, released, 45, false)
	require.NoError(t, tx.Rollback(ctx))
	requireSQLState(t, err, "23505")
	ledgertest.RequireRowAmounts(t, s, released,
		ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -60}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 45})
	ledgertest.RequireBalance(t, s, acct, 1000-15-60-60-60)
}

// requireAuditReports checks that the audit replayed through tx reports exactly rules over acct,
// in order, each naming the job — or a row, for a break of the account's chain.
func requireAuditReports(t *testing.T, tx pgx.Tx, acct string, job ledgerdb.JobKey, rules []string, chain bool) {
	t.Helper()
	report, err := ledgerdb.AuditThrough(context.Background(), tx, acct)
	require.NoError(t, err)
	t.Logf("audit: %v", report.Violations)
	require.Len(t, report.Violations, len(rules), "%v", report.Violations)
	for i, rule := range rules {
		require.Contains(t, report.Violations[i], rule)
		require.Contains(t, report.Violations[i], map[bool]string{true: "row ", false: job.JobID}[chain])
	}
}

// requireSnapshotShows checks that the snapshot the invariant checker reads through tx shows the
// break: the job's releases, and either the account's chain broken (the job's own rows sound) or
// the job's rows not what its settlement wants (the release count too when the reversing-pairs rule
// is broken).
func requireSnapshotShows(t *testing.T, tx pgx.Tx, acct string, job ledgerdb.JobKey, releases int, chain bool, rules []string) {
	t.Helper()
	snap, err := ledgerdb.ReadLedgerSnapshot(context.Background(), tx, ledgerdb.SnapshotScope{AccountID: acct})
	require.NoError(t, err)
	var totals *ledgerdb.JobTotals
	for i := range snap.Jobs {
		if snap.Jobs[i].Job.Key() == job {
			totals = &snap.Jobs[i]
		}
	}
	require.NotNil(t, totals)
	require.Equal(t, releases, totals.Releases)
	require.Len(t, snap.Accounts, 1)
	if chain {
		require.Equal(t, 1, snap.Accounts[0].ChainBreaks)
		require.Equal(t, totals.Job.Net(), totals.EntrySum, "the job's own rows are sound")
		return
	}
	require.Zero(t, snap.Accounts[0].ChainBreaks)
	require.Equal(t, snap.Accounts[0].Balance, snap.Accounts[0].EntrySum)
	broken := totals.Releases != totals.Job.WantsRows()[ledgerdb.KindRelease] || totals.EntrySum != totals.Job.Net()
	require.True(t, broken, "the snapshot shows nothing wrong with job %s: %+v", job, totals)
	if slices.Contains(rules, "(rule 2)") {
		require.NotEqual(t, totals.Job.WantsRows()[ledgerdb.KindRelease], totals.Releases)
	}
	require.NotEqual(t, totals.Job.Net(), totals.EntrySum)
}

// TestAuditCatchesRevenueForWorkNotDelivered checks the audit's revenue rule — only delivered work
// is revenue — on a state written by hand as the owner, inside a transaction it rolls back: a
// running job "refunded" by a refund row that gives the 30 paid credits its charge drew back to a
// promotional block instead. Every numbered rule holds (one charge and one refund, the job nets
// nothing, the balance is the sum of the rows, the blocks hold the balance), but the paid credits
// stay spent for a job whose work was never delivered: the revenue report recognises them. The
// audit (Store.Audit's replay) and the snapshot the invariant checker reads both report it,
// naming the job, beside an account whose delivered and refunded jobs are sound; after the
// rollback the account audits clean, its delivered job's credits recognised.
func TestAuditCatchesRevenueForWorkNotDelivered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	acct := ledgertest.Account(t, s, 0)
	ledgertest.GrantBlock(t, s, acct, 100, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, CostBasis: "0.1"})
	delivered := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 10, "s3://in/a").Job.Key()
	_, err := s.Settle(ctx, delivered, 1, nil, "s3://out/a")
	require.NoError(t, err)
	refunded := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 20, "s3://in/b").Job.Key()
	_, err = s.Refund(ctx, refunded, ledgerdb.ReasonTimedOut, "timed out", 1)
	require.NoError(t, err)
	running := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "job"), 30, "s3://in/c").Job.Key() // 30 paid credits
	promotional := ledgertest.Promotional(t, s, acct, "sign-up", 5)
	ledgertest.RequireSound(t, s, acct)

	tx, err := owner.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), updated_at = now(),
			refund_reason_code = 'timed_out', attempts_at_refund = 1 WHERE id = $1`, running.String())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `WITH a AS (
			UPDATE accounts SET balance = balance + 30, awaiting_reclaim = awaiting_reclaim + 30 WHERE id = $1 RETURNING balance
		), e AS (
			INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after)
			SELECT $1, $2, 'refund', 30, a.balance FROM a RETURNING id
		), b AS (
			UPDATE credit_blocks SET remaining = remaining + 30 WHERE id = $3
		)
		INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount) SELECT $1, e.id, $3, 30 FROM e`,
		acct, running.String(), promotional)
	require.NoError(t, err)

	report, err := ledgerdb.AuditThrough(ctx, tx, acct)
	require.NoError(t, err)
	t.Logf("audit: %v", report.Violations)
	require.Len(t, report.Violations, 1, "only the revenue rule is broken: %v", report.Violations)
	require.Contains(t, report.Violations[0], "revenue recognised for work not delivered")
	require.Contains(t, report.Violations[0], "recognises 40 paid credits (4) of all time, but delivered and recovered jobs and the debts of delivered work they paid account for 10 (1)")
	require.Contains(t, report.Violations[0], running.String())
	require.NotContains(t, report.Violations[0], refunded.String(), "a refund that gave back what its charge drew is sound")

	snap, err := ledgerdb.ReadLedgerSnapshot(ctx, tx, ledgerdb.SnapshotScope{AccountID: acct})
	require.NoError(t, err)
	require.Len(t, snap.Accounts, 1)
	a := snap.Accounts[0]
	require.Equal(t, ledgerdb.RevenueAudit{Recognised: revenueMoney(40, "4"), Delivered: revenueMoney(10, "1"),
		UndeliveredJobs: []string{running.String()}}, a.Revenue)
	require.Equal(t, report.Violations[0], a.Revenue.Problem(), "the audit and the checker say it alike")
	require.Zero(t, a.ChainBreaks)
	require.Equal(t, a.Balance, a.EntrySum)
	require.Equal(t, a.Balance, a.BlocksHeld-a.Debt)
	require.NoError(t, tx.Rollback(ctx))

	ledgertest.RequireSound(t, s, acct)
	snap, err = s.LedgerSnapshot(ctx, ledgerdb.SnapshotScope{AccountID: acct})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.RevenueAudit{Recognised: revenueMoney(10, "1"), Delivered: revenueMoney(10, "1"), UndeliveredJobs: []string{}},
		snap.Accounts[0].Revenue, "the delivered job's 10 paid credits at 0.1; the running job's are held, the refunded job's came back")
	require.Empty(t, snap.Accounts[0].Revenue.Problem())
}
