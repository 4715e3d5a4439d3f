package ledgerdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// replayBlocks checks the account's credit blocks against its rows, in the audit's snapshot:
//
//   - each block holds what its moves add up to, never less than nothing;
//   - each row written since the blocks began moved its whole amount across blocks (and the
//     debt), no more and no less;
//   - the balance is what the blocks hold less the debt, and the debt is never negative;
//   - no block was spent before its start or after its expiry (only an expiry takes from it
//     then, and its own grant, paying the debt first; before its start, also a draw the debt
//     would otherwise take — a reclaim, a negative adjustment — and a payment of the debt), none
//     expired before its time (but for credits a return brought back to a block the pass had
//     expired), and one that expired holds nothing;
//   - while the account has a debt, none of its blocks that has not ended (spendable or not
//     started yet) holds credits: a debt is paid by the first credits that reach the account.
func (r *AuditReport) replayBlocks(ctx context.Context, tx pgx.Tx) error {
	var held, debt int64
	err := tx.QueryRow(ctx, `SELECT
			coalesce((SELECT sum(remaining) FROM credit_blocks WHERE account_id = $1), 0)::bigint,
			coalesce((SELECT -sum(amount) FROM ledger_block_moves WHERE account_id = $1 AND block_id IS NULL), 0)::bigint`,
		r.AccountID).Scan(&held, &debt)
	if err != nil {
		return err
	}
	if debt < 0 {
		r.violation("the debt is %d: more was paid back than was ever owed", debt)
	}
	if held-debt != r.Balance {
		r.violation("the blocks hold %d and the debt is %d, but the balance is %d", held, debt, r.Balance)
	}

	// ledger_audit_blocks (ledgerdb/code/audit_blocks.sql) finds what breaks each rule, in one
	// statement; the words are the audit's own.
	rows, err := tx.Query(ctx, `SELECT rule, a, b, c FROM ledger_audit_blocks($1)`, r.AccountID)
	if err != nil {
		return err
	}
	var rule string
	var v [3]int64
	_, err = pgx.ForEachRow(rows, []any{&rule, &v[0], &v[1], &v[2]}, func() error {
		format, ok := blockFindings[rule]
		if !ok {
			return fmt.Errorf("ledger_audit_blocks: unknown rule %q", rule)
		}
		r.violation(format, v[0], v[1], v[2])
		return nil
	})
	return err
}

// blockFindings words each rule of ledger_audit_blocks, given its finding's three numbers.
var blockFindings = map[string]string{
	"block_moves":     "block %d holds %d but its moves add up to %d",
	"row_moves":       "row %d moved %d credits but its block moves add up to %d",
	"spent_outside":   "block %d was spent by row %d (%d) outside its time: before its start or after its expiry",
	"expired_early":   "block %d expired by row %d (%d) before its time",
	"expired_holds":   "block %d expired but holds %d (%d)",
	"held_while_debt": "block %d holds %d credits while the account owes a debt of %d: a debt is paid by the first credits that reach the account",
}
