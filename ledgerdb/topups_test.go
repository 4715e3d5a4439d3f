package ledgerdb_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestTopUpRuleRefusesBadInput checks the rule's door: a rule that could never work (an unknown
// mode, a zero amount or cap, a target not above its threshold) or an unknown account is refused
// with nothing written; the same rule again, or removing none, changes nothing (the
// idempotent-doors rule), and only the changes that applied are in the rule's history.
func TestTopUpRuleRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	for _, r := range []ledgerdb.TopUpRule{
		{AccountID: acct, Mode: "sometimes", Threshold: 10, Amount: 100, MonthlyCap: 1000},
		{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 10, Amount: 0, MonthlyCap: 1000},
		{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 10, Amount: 100, MonthlyCap: 0},
		{AccountID: acct, Mode: ledgerdb.TopUpTarget, Threshold: 100, Amount: 100, MonthlyCap: 1000},
	} {
		_, err := s.SetTopUpRule(ctx, r)
		var invalid *ledgerdb.InvalidInputError
		require.ErrorAs(t, err, &invalid, "%+v", r)
	}
	_, ok, err := s.TopUpRuleOf(ctx, acct)
	require.NoError(t, err)
	require.False(t, ok, "nothing written")
	_, err = s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: ledgertest.ID(t, "nobody"), Mode: ledgerdb.TopUpFixed, Amount: 1, MonthlyCap: 1})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)

	rule := ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpTarget, Threshold: 50, Amount: 500, MonthlyCap: 2000}
	out, err := s.SetTopUpRule(ctx, rule)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, out)
	out, err = s.SetTopUpRule(ctx, rule)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, out)
	got, ok, err := s.TopUpRuleOf(ctx, acct)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, rule.Amount, got.Amount)
	out, err = s.RemoveTopUpRule(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, out)
	out, err = s.RemoveTopUpRule(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, out)

	// The rule's history, which the audit judges requests by, holds the two changes that applied:
	// the rule set, then removed. It is append-only, for the owner too.
	rows, err := s.Pool().Query(ctx, `SELECT coalesce(mode, 'removed') FROM topup_rule_changes WHERE account_id = $1 ORDER BY id`, acct)
	require.NoError(t, err)
	changes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"target", "removed"}, changes)
	_, err = ledgertest.OwnerPool(t).Exec(ctx, `DELETE FROM topup_rule_changes WHERE account_id = $1`, acct)
	requireSQLState(t, err, "JB001")
}

// TestTopUpAmountOfADebit checks what a debit asks for under the account's rule: only a debit that
// takes the balance from at or above the threshold to below it asks; a fixed rule asks for its
// amount, a target rule for what fills the balance up to it; and a month never asks for more than
// its cap (the rest of it, then nothing).
func TestTopUpAmountOfADebit(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	ledgertest.GrantBlock(t, s, acct, 100, paid)
	_, err := s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpTarget, Threshold: 50, Amount: 300, MonthlyCap: 400})
	require.NoError(t, err)
	_, first := chargeJob(t, s, acct, 40)  // 100 -> 60: above the threshold still
	_, second := chargeJob(t, s, acct, 20) // 60 -> 40: crosses it
	_, third := chargeJob(t, s, acct, 10)  // 40 -> 30: below already

	asked := func(entryID, before int64) *int64 {
		t.Helper()
		var amount *int64
		// As the owner: the derive pass calls it, never the application role.
		require.NoError(t, ledgertest.OwnerPool(t).QueryRow(ctx, `SELECT ledger_topup_amount(e, $2) FROM ledger_entries e WHERE e.id = $1`,
			entryID, before).Scan(&amount))
		return amount
	}
	require.Nil(t, asked(first.EntryID, 0), "a debit that stays above the threshold asks nothing")
	require.Equal(t, int64(260), *asked(second.EntryID, 0), "the target: fill 40 up to 300")
	require.Nil(t, asked(third.EntryID, 0), "a debit below the threshold already asks nothing again")
	require.Equal(t, int64(100), *asked(second.EntryID, 300), "at most the rest of the month's cap")
	require.Nil(t, asked(second.EntryID, 400), "nothing once the cap is spent")

	_, err = s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 50, Amount: 150, MonthlyCap: 400})
	require.NoError(t, err)
	require.Equal(t, int64(150), *asked(second.EntryID, 0), "a fixed rule asks for its amount")
}

// TestPendingGrantHoldsNothingUntilPaid checks a grant posted pending its payment: its block holds
// no credits and no row is written (the sum-of-rows rule: nothing the customer cannot spend), a
// charge cannot use it; confirming it writes the grant's row once, and a second confirmation
// changes nothing (the idempotent-doors rule); a failed payment voids its block, and confirming a
// voided grant is a conflict.
func TestPendingGrantHoldsNothingUntilPaid(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	key := ledgertest.ID(t, "topup")
	credit := ledgerdb.Credit{AccountID: acct, Amount: 200, Key: key, Memo: "card top-up", Pending: true, Block: paid}
	p, err := s.Grant(ctx, credit)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, p.Outcome)
	p, err = s.Grant(ctx, credit)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, p.Outcome, "the same pending grant again")
	ledgertest.RequireBalance(t, s, acct, 0)
	_, tr := chargeJob(t, s, acct, 10)
	require.Equal(t, ledgerdb.StateRejected, tr.Job.State, "a pending block pays for nothing")

	confirmed, err := s.SettlePendingGrant(ctx, acct, key, true)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, confirmed.Outcome)
	require.Equal(t, int64(200), confirmed.BalanceAfter)
	again, err := s.SettlePendingGrant(ctx, acct, key, true)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Equal(t, confirmed.EntryID, again.EntryID)
	_, err = s.SettlePendingGrant(ctx, acct, key, false)
	require.ErrorIs(t, err, ledgerdb.ErrConflict, "a paid grant cannot be voided")
	ledgertest.RequireBalance(t, s, acct, 200)

	failed := ledgertest.ID(t, "topup")
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 300, Key: failed, Pending: true, Block: paid})
	require.NoError(t, err)
	voided, err := s.SettlePendingGrant(ctx, acct, failed, false)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, voided.Outcome)
	_, err = s.SettlePendingGrant(ctx, acct, failed, true)
	require.ErrorIs(t, err, ledgerdb.ErrConflict, "a voided grant cannot be paid")
	_, err = s.SettlePendingGrant(ctx, acct, ledgertest.ID(t, "never"), true)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownGrant)
	ledgertest.RequireBalance(t, s, acct, 200)
	blocks, err := s.Blocks(ctx, acct)
	require.NoError(t, err)
	statuses := map[ledgerdb.BlockStatus]int{}
	for _, b := range blocks {
		statuses[b.Status]++
	}
	require.Equal(t, map[ledgerdb.BlockStatus]int{ledgerdb.BlockActive: 2, ledgerdb.BlockVoid: 1}, statuses, "the opening block, the paid one and the void one")
	ledgertest.RequireSound(t, s, acct)
}

// TestMigrationCarriesStandingTopUpRules checks that the rule history the audit judges top-up
// requests by begins with the rules standing when it was added, each from when it was made: a
// request of such a rule's account for a debit made since is sound. A rule removed before then
// left nothing to carry, and a request made under it reads as made under no rule.
func TestMigrationCarriesStandingTopUpRules(t *testing.T) {
	ctx := context.Background()
	conn := probeSchema(t)
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, 16))
	for _, stmt := range []string{
		`INSERT INTO accounts (id, balance) VALUES ('acme', 40), ('gone', 40)`,
		`INSERT INTO topup_rules (account_id, threshold, mode, amount, monthly_cap, created_at)
			VALUES ('acme', 50, 'fixed', 500, 1000, now() - interval '1 day')`,
		`INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key) VALUES
			('acme', 'adjustment', 100, 100, 'opening'), ('acme', 'adjustment', -60, 40, 'usage'),
			('gone', 'adjustment', 100, 100, 'opening'), ('gone', 'adjustment', -60, 40, 'usage')`,
		`INSERT INTO webhook_events (id, account_id, entry_id, type, payload, created_at)
			SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), account_id, id, 'topup.requested',
			       jsonb_build_object('account_id', account_id, 'amount', 500, 'idempotency_key', 'topup-' || id), created_at
			FROM ledger_entries WHERE amount < 0`,
	} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, ledgerdb.MigrateTo(ctx, conn, ledgerdb.LatestMigration(t)))
	require.NoError(t, ledgerdb.InstallCode(ctx, conn))

	var carried bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT c.changed_at = r.created_at AND c.mode = 'fixed' AND c.monthly_cap = 1000
		FROM topup_rule_changes c JOIN topup_rules r USING (account_id) WHERE c.account_id = 'acme'`).Scan(&carried))
	require.True(t, carried, "the standing rule, from when it was made")
	problems := func(acct string) []string {
		rows, err := conn.Query(ctx, `SELECT problem FROM ledger_topup_audit($1)`, acct)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.Empty(t, problems("acme"), "a request under the standing rule, within its cap")
	gone := problems("gone")
	require.Len(t, gone, 1)
	require.Contains(t, gone[0], "when the account had no top-up rule")
}
