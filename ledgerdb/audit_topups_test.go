package ledgerdb_test

// The audit's check of automatic top-ups: a request no spend earned is reported by the SQL audit
// and by the invariant checker's snapshot — against the real Postgres.

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestAuditCatchesTopUpsNoSpendAskedFor fabricates topup.requested events, as the owner inside
// transactions it rolls back, that the top-up rule never allows, and checks that the audit
// (Store.Audit's replay, through the transaction) and the invariant checker (CheckLedger on the
// snapshot read through it) both report each: a request by a positive row (a refund: nothing was
// spent), by an expiry a refund caused (credits returned to an expired block, removed at once:
// nothing was spent), by a charge written before the account's rule existed, and two requests of
// one month asking past the cap they were asked within. A request the rule allows is reported by
// neither, and after each rollback the account audits clean.
func TestAuditCatchesTopUpsNoSpendAskedFor(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	owner := ledgertest.OwnerPool(t)
	acct := blockAccount(t, s)
	ledgertest.GrantBlock(t, s, acct, 200, paid)
	_, before := chargeJob(t, s, acct, 10) // 190, before any rule
	_, err := s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 50, Amount: 300, MonthlyCap: 500})
	require.NoError(t, err)
	promo := ledgertest.Promotional(t, s, acct, "promo", 40) // 230
	refunded, _ := chargeJob(t, s, acct, 100)                // 130: the promotional 40 first
	_, spent := chargeJob(t, s, acct, 20)                    // 110
	_, spentAgain := chargeJob(t, s, acct, 70)               // 40
	ledgertest.ExpireBlock(t, s, promo)                      // it holds nothing: no row
	refund, err := s.Refund(ctx, refunded, ledgerdb.ReasonTimedOut, "", 1)
	require.NoError(t, err) // 140, then 100: the 40 returned to the expired block expire at once
	var caused int64
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT id FROM ledger_entries WHERE account_id = $1 AND kind = 'expire' AND caused_by IS NOT NULL`,
		acct).Scan(&caused))
	ledgertest.RequireSound(t, s, acct)

	// request writes the topup.requested event of a row as the derivation writes it.
	request := func(tx pgx.Tx, entryID, amount, monthlyCap int64) {
		t.Helper()
		_, err := tx.Exec(ctx, `INSERT INTO webhook_events (id, account_id, entry_id, type, payload, created_at)
			SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.account_id, e.id, 'topup.requested',
			       jsonb_build_object('account_id', e.account_id, 'amount', $2::bigint, 'monthly_cap', $3::bigint,
			                          'idempotency_key', 'topup-' || e.id, 'mode', 'fixed', 'threshold', 50),
			       e.created_at
			FROM ledger_entries e WHERE e.id = $1`, entryID, amount, monthlyCap)
		require.NoError(t, err)
	}
	for _, c := range []struct {
		name     string
		requests [][3]int64 // row, amount, monthly cap
		// want is what the one violation says; empty when the requests are sound.
		want string
	}{
		{"a request by a refund", [][3]int64{{refund.EntryID, 300, 500}}, "is a credit, not a spend"},
		{"a request by the expiry a refund caused", [][3]int64{{caused, 300, 500}}, "nothing was spent"},
		{"a request by a charge made before the rule", [][3]int64{{before.EntryID, 300, 500}}, "when the account had no top-up rule"},
		{"requests of a month past its cap", [][3]int64{{spent.EntryID, 300, 500}, {spentAgain.EntryID, 300, 500}},
			"ask for 600 credits with this one, past the month's cap of 500"},
		{"a request the rule allows", [][3]int64{{spentAgain.EntryID, 300, 500}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := owner.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			for _, r := range c.requests {
				request(tx, r[0], r[1], r[2])
			}

			report, err := ledgerdb.AuditThrough(ctx, tx, acct)
			require.NoError(t, err)
			t.Logf("audit: %v", report.Violations)
			snap, err := ledgerdb.ReadLedgerSnapshot(ctx, tx, ledgerdb.SnapshotScope{AccountID: acct})
			require.NoError(t, err)
			var checked []string
			for _, v := range invariants.CheckLedger(snap) {
				require.Equal(t, invariants.KindTopUpRequest, v.Kind, v.Message)
				checked = append(checked, v.Message)
			}
			t.Logf("invariants: %v", checked)
			if c.want == "" {
				require.Empty(t, report.Violations)
				require.Empty(t, checked)
				return
			}
			require.Len(t, report.Violations, 1)
			require.Contains(t, report.Violations[0], c.want)
			require.Contains(t, report.Violations[0], "top-up request msg_")
			require.Len(t, checked, 1)
			require.Contains(t, checked[0], c.want)
			require.True(t, strings.HasPrefix(checked[0], "account "+acct), checked[0])
			require.NoError(t, tx.Rollback(ctx))
			ledgertest.RequireSound(t, s, acct)
		})
	}
}
