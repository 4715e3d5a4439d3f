package ledgerdb_test

// The audit's checks of the debt rule with credit blocks, against the real Postgres: states the
// ledger functions no longer write, made inside owner transactions that are rolled back, each
// reported by the SQL audit.

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// grantWithoutPayingTheDebt writes, inside tx, a grant of amount credits as the ledger wrote one
// before a debt was paid by the first credits to reach the account: a block that starts and ends
// when the SQL expressions effective and expires say, the grant's row, its balance and its move
// into the block — and no payment of the account's debt. Every sum the audit checks still adds up.
func grantWithoutPayingTheDebt(t *testing.T, tx pgx.Tx, acct string, amount int64, effective, expires string) int64 {
	t.Helper()
	var block int64
	require.NoError(t, tx.QueryRow(context.Background(), `WITH b AS (
			INSERT INTO credit_blocks (account_id, category, amount, remaining, effective_at, expires_at, memo, idempotency_key)
			VALUES ($1, 'promotional', $2, $2, `+effective+`, `+expires+`, 'made by the test', 'test-'||gen_random_uuid())
			RETURNING id, idempotency_key
		), a AS (
			UPDATE accounts SET balance = balance + $2 WHERE id = $1 RETURNING balance
		), e AS (
			INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, block_id)
			SELECT $1, 'grant', $2, a.balance, b.idempotency_key, b.id FROM a, b RETURNING id, block_id
		), m AS (
			INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount) SELECT $1, e.id, e.block_id, $2 FROM e
		)
		SELECT id FROM b`, acct, amount).Scan(&block))
	return block
}

// TestAuditReportsCreditsBesideADebt checks the debt rule's invariant: while an account owes a
// debt, none of its blocks that has not ended holds credits — spendable or not started yet — since
// a debt is paid by the first credits that reach the account (else the customer is shown credits
// that the debt will claim again, and they lapse with their block while the debt stays owed). A
// block whose time has passed may hold credits beside a debt: they expire, and pay nothing. And
// the check that no block is spent before its start still reports a charge's draw from a block
// that starts later.
func TestAuditReportsCreditsBesideADebt(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	acct := blockAccount(t, s)
	owe(t, s, acct, 50)
	ledgertest.RequireSound(t, s, acct)

	for _, c := range []struct {
		name, effective, expires string
		reported                 bool
	}{
		{"a spendable block", `now() - interval '1 hour'`, `now() + interval '30 days'`, true},
		{"a block not started yet", `now() + interval '1 day'`, `now() + interval '30 days'`, true},
		{"a block that never expires", `now()`, `NULL`, true},
		{"a block past its expiry", `now() - interval '2 hours'`, `now() - interval '1 hour'`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := owner.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			block := grantWithoutPayingTheDebt(t, tx, acct, 30, c.effective, c.expires)

			report, err := ledgerdb.AuditThrough(ctx, tx, acct)
			require.NoError(t, err)
			t.Logf("audit: %v", report.Violations)
			if !c.reported {
				require.True(t, report.OK(), "credits of an ended block expire and pay nothing: %v", report.Violations)
				return
			}
			require.Len(t, report.Violations, 1, "%v", report.Violations)
			require.Contains(t, report.Violations[0], "while the account owes a debt of 50")
			require.Contains(t, report.Violations[0], "block "+fmt.Sprint(block)+" holds 30 credits")
		})
	}

	t.Run("a charge from a block not started", func(t *testing.T) {
		other := blockAccount(t, s)
		b := ledgertest.GrantBlock(t, s, other, 100, paid)
		_, tr := chargeJob(t, s, other, 40)
		tx, err := owner.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()
		_, err = tx.Exec(ctx, `UPDATE credit_blocks SET effective_at = now() + interval '1 day' WHERE id = $1`, b.ID)
		require.NoError(t, err)
		report, err := ledgerdb.AuditThrough(ctx, tx, other)
		require.NoError(t, err)
		require.Len(t, report.Violations, 1, "%v", report.Violations)
		require.Contains(t, report.Violations[0], "block "+fmt.Sprint(b.ID)+" was spent by row "+fmt.Sprint(tr.EntryID)+" (-40) outside its time")
	})
	ledgertest.RequireSound(t, s, acct)
}
