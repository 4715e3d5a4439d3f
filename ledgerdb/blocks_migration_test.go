package ledgerdb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// probeSchema opens a connection whose schema is a new one of its own, dropped at the end, so
// that a migration test can migrate it step by step, writing rows as an older version held them,
// without touching the shared schema. The schema is the connection's own setting: the migrator
// resets the session's after each step.
func probeSchema(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	ledgertest.Store(t) // the role and the database the probe schema lives beside
	schema := pgx.Identifier{strings.ToLower(ledgertest.ID(t, "probe"))}.Sanitize()
	owner := ledgertest.OwnerPool(t)
	_, err := owner.Exec(ctx, `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = owner.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) })
	cfg, err := pgx.ParseConfig(ledgertest.MigrateDatabaseURL())
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var current string
	require.NoError(t, conn.QueryRow(ctx, `SELECT quote_ident(current_schema())`).Scan(&current))
	require.Equal(t, schema, current, "the probe must never migrate the shared schema")
	return conn
}

// TestMigrationOpensABlockForEveryAccount checks that accounts that exist when blocks begin keep
// working: each one's balance becomes one paid, non-expiring opening block (a negative balance a
// debt), the audit is clean after the migration, and the money of jobs charged before it still
// moves right — a refund of an earlier charge returns to the opening block, a late result's
// reclaim draws again, and a grant pays the earlier debt first (the sum-of-rows and debt rules).
func TestMigrationOpensABlockForEveryAccount(t *testing.T) {
	ctx := context.Background()
	conn := probeSchema(t)
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 12))

	// Rows as the schema before blocks held them: acme granted 100, a running job charged 40 and
	// a refunded one charged and refunded 20 (balance 60); debtor granted 20 and corrected by -50
	// (balance -30).
	for _, stmt := range []string{
		`INSERT INTO accounts (id, balance, awaiting_reclaim) VALUES ('acme', 60, 20), ('debtor', -30, 0)`,
		`INSERT INTO jobs (id, account_id, cost, state, is_charged, request_fingerprint, charged_at)
			VALUES ('acme/run', 'acme', 40, 'running', true, '\x00', now())`,
		`INSERT INTO jobs (id, account_id, cost, state, is_charged, is_refunded, request_fingerprint, charged_at, refunded_at,
			refund_reason_code, attempts_at_refund)
			VALUES ('acme/late', 'acme', 20, 'refunded', true, true, '\x00', now(), now(), 'timed_out', 3)`,
		`INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after, idempotency_key) VALUES
			('acme', NULL, 'grant', 100, 100, 'first'),
			('acme', 'acme/run', 'charge', -40, 60, NULL),
			('acme', 'acme/late', 'charge', -20, 40, NULL),
			('acme', 'acme/late', 'refund', 20, 60, NULL),
			('debtor', NULL, 'grant', 20, 20, 'first'),
			('debtor', NULL, 'adjustment', -50, -30, 'correction')`,
	} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 13))
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, ledgerdb.LatestMigration(t)))
	require.NoError(t, ledgerdb.InstallCode(ctx, conn))

	audit := func(acct string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		report, err := ledgerdb.AuditThrough(ctx, tx, acct)
		require.NoError(t, err)
		require.True(t, report.OK(), "%s: %v", acct, report.Violations)
	}
	opening := func(acct string) (remaining, debt int64) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, `SELECT b.remaining,
			coalesce((SELECT -sum(amount) FROM ledger_block_moves WHERE account_id = $1 AND block_id IS NULL), 0)
			FROM credit_blocks b WHERE b.account_id = $1 AND b.is_opening AND b.category = 'paid' AND b.expires_at IS NULL`,
			acct).Scan(&remaining, &debt))
		return remaining, debt
	}
	audit("acme")
	audit("debtor")
	remaining, debt := opening("acme")
	require.Equal(t, [2]int64{60, 0}, [2]int64{remaining, debt})
	remaining, debt = opening("debtor")
	require.Equal(t, [2]int64{0, 30}, [2]int64{remaining, debt})

	call := func(sql string) {
		t.Helper()
		_, err := conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	call(`SELECT ledger_refund('acme/run', 'timed_out', '', 3)`) // its charge drew before the blocks
	remaining, _ = opening("acme")
	require.Equal(t, int64(100), remaining, "the refund of an earlier charge returns to the opening block")
	call(`SELECT ledger_settle('acme/late', 3, NULL, 's3://out')`) // the late result: reclaim 20
	remaining, _ = opening("acme")
	require.Equal(t, int64(80), remaining, "the reclaim draws again")
	call(`SELECT ledger_post('debtor', 'grant', 50, 'after', 'paid by card')`)
	remaining, debt = opening("debtor")
	require.Equal(t, [2]int64{0, 0}, [2]int64{remaining, debt}, "the grant paid the debt of 30 first")
	audit("acme")
	audit("debtor")
}

// TestReturnToTheOpeningBlockPaysTheDebt checks the debt rule for credits that go back to
// the opening block, the charge that drew them predating the blocks: an account that owed 20 when
// blocks began (granted 50, a job charged 40 still running, corrected by −30) has the job refunded;
// the 40 go back to the opening block and pay the debt of 20 at once, so that the opening block
// holds the other 20 and nothing is owed beside them.
func TestReturnToTheOpeningBlockPaysTheDebt(t *testing.T) {
	ctx := context.Background()
	conn := probeSchema(t)
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 12))
	for _, stmt := range []string{
		`INSERT INTO accounts (id, balance, awaiting_reclaim) VALUES ('owing', -20, 0)`,
		`INSERT INTO jobs (id, account_id, cost, state, is_charged, request_fingerprint, charged_at)
			VALUES ('owing/run', 'owing', 40, 'running', true, '\x00', now())`,
		`INSERT INTO ledger_entries (account_id, job_id, kind, amount, balance_after, idempotency_key) VALUES
			('owing', NULL, 'grant', 50, 50, 'first'),
			('owing', 'owing/run', 'charge', -40, 10, NULL),
			('owing', NULL, 'adjustment', -30, -20, 'correction')`,
	} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, ledgerdb.LatestMigration(t)))
	require.NoError(t, ledgerdb.InstallCode(ctx, conn))

	opening := func() (remaining, debt int64) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, `SELECT b.remaining,
			coalesce((SELECT -sum(amount) FROM ledger_block_moves WHERE account_id = 'owing' AND block_id IS NULL), 0)
			FROM credit_blocks b WHERE b.account_id = 'owing' AND b.is_opening`).Scan(&remaining, &debt))
		return remaining, debt
	}
	remaining, debt := opening()
	require.Equal(t, [2]int64{0, 20}, [2]int64{remaining, debt}, "the debt the account had when blocks began")

	_, err := conn.Exec(ctx, `SELECT ledger_refund('owing/run', 'timed_out', '', 3)`)
	require.NoError(t, err)
	remaining, debt = opening()
	require.Equal(t, [2]int64{20, 0}, [2]int64{remaining, debt}, "the 40 returned paid the debt of 20 first")
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	report, err := ledgerdb.AuditThrough(ctx, tx, "owing")
	require.NoError(t, err)
	require.True(t, report.OK(), "%v", report.Violations)
}
