package ledgerdb

import (
	"context"

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

	checks := []struct {
		query  string
		format string
	}{
		{`SELECT b.id, b.remaining, coalesce(sum(m.amount), 0)::bigint FROM credit_blocks b
			LEFT JOIN ledger_block_moves m ON m.block_id = b.id
			WHERE b.account_id = $1 GROUP BY b.id HAVING b.remaining <> coalesce(sum(m.amount), 0) OR b.remaining < 0`,
			"block %d holds %d but its moves add up to %d"},
		{`SELECT e.id, e.amount, coalesce(sum(m.amount), 0)::bigint FROM ledger_entries e
			LEFT JOIN ledger_block_moves m ON m.entry_id = e.id
			WHERE e.account_id = $1
			  AND e.created_at >= (SELECT min(created_at) FROM credit_blocks WHERE account_id = $1 AND is_opening)
			GROUP BY e.id HAVING e.amount <> coalesce(sum(m.amount), 0)`,
			"row %d moved %d credits but its block moves add up to %d"},
		// Through the account's rows, whose moves are found by their row: the moves table has no
		// index by account but the debt's, and scanning it whole for every account made an
		// audit's cost grow with the whole ledger.
		{`SELECT m.block_id, e.id, m.amount FROM ledger_entries e
			JOIN ledger_block_moves m ON m.entry_id = e.id JOIN credit_blocks b ON b.id = m.block_id
			WHERE e.account_id = $1 AND m.amount < 0 AND e.kind <> 'expire'
			  -- A grant pays the debt from its own block at once, whatever the block's start.
			  AND NOT (e.kind = 'grant' AND e.block_id = m.block_id)
			  AND ((e.created_at < b.effective_at
			        -- The debt is owed now: a draw the debt would otherwise take (a reclaim, a
			        -- negative adjustment) takes from a block not started yet, and so may a
			        -- payment of the debt (a row that moves credits onto it). A charge never.
			        AND e.kind NOT IN ('reclaim', 'adjustment')
			        AND NOT EXISTS (SELECT 1 FROM ledger_block_moves d
			                        WHERE d.entry_id = e.id AND d.block_id IS NULL AND d.amount > 0))
			       OR e.created_at >= b.expires_at)`,
			"block %d was spent by row %d (%d) outside its time: before its start or after its expiry"},
		{`SELECT b.id, e.id, e.amount FROM ledger_entries e JOIN credit_blocks b ON b.id = e.block_id
			WHERE e.account_id = $1 AND e.kind = 'expire' AND (b.expires_at IS NULL OR e.created_at < b.expires_at)
			  -- A return's credits expire at once in a block the pass has expired, even when the
			  -- return's transaction began before the block's time.
			  AND NOT (e.caused_by IS NOT NULL AND b.expired_at IS NOT NULL)`,
			"block %d expired by row %d (%d) before its time"},
		{`SELECT b.id, b.remaining, 0::bigint FROM credit_blocks b
			WHERE b.account_id = $1 AND b.expired_at IS NOT NULL AND b.remaining <> 0`,
			"block %d expired but holds %d (%d)"},
		// A block ends when it is void, marked expired or past its expiry: its credits then
		// expire and pay nothing. Until then, any it holds would have paid the debt.
		{`SELECT b.id, b.remaining, d.debt FROM credit_blocks b,
			(SELECT coalesce(-sum(amount), 0)::bigint AS debt FROM ledger_block_moves
			 WHERE account_id = $1 AND block_id IS NULL) d
			WHERE b.account_id = $1 AND d.debt > 0 AND b.remaining > 0 AND b.status <> 'void'
			  AND b.expired_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > now())
			ORDER BY b.id`,
			"block %d holds %d credits while the account owes a debt of %d: a debt is paid by the first credits that reach the account"},
	}
	for _, c := range checks {
		rows, err := tx.Query(ctx, c.query, r.AccountID)
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([3]int64, error) {
			var v [3]int64
			err := row.Scan(&v[0], &v[1], &v[2])
			return v, err
		})
		if err != nil {
			return err
		}
		for _, v := range found {
			r.violation(c.format, v[0], v[1], v[2])
		}
	}
	return nil
}
