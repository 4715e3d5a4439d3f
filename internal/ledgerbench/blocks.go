package ledgerbench

// The credit blocks' check after the last round: where each row's credits went.

import (
	"context"
	"fmt"
	"slices"
)

// move is one credit-block move as the replay sees it: block 0 is the account's debt.
type move struct {
	block, amount int64
}

// verifyBlocks replays the credit-block moves of a side's accounts of a lifecycle in the order
// they were written (an account's rows are written one transaction at a time, under its row's
// lock, so the moves' IDs are that order), and checks each row's moves against what the ledger
// functions would have written (blocks_moves.sql): a grant puts its amount into its block; a
// charge or a reclaim draws its amount from the account's blocks in the order of spending, each
// block all it holds until the amount is covered (a reclaim draws the rest on the debt); a refund
// gives a charge's credits back to the blocks it drew them from, a release the unused part of the
// reclaim's, the last drawn first (the debt first of all). Every block must end holding its
// remaining. ledgerdb's Audit checks the sums (each block's remaining is its moves', each row's
// moves add up to its amount, the blocks less the debt are the balance); this checks where the
// credits went, which the sums cannot tell: that the raw statements draw and give back exactly as
// the functions do. The benchmark's blocks are all in effect and far from their expiry, so the
// replay takes every block as spendable. It answers how many blocks there are, how many charges
// and reclaims drew from more than one, and what the blocks hold in all.
func (b *bench) verifyBlocks(ctx context.Context, side string, lc *lifecycle, ids []string) (blocks, crossings int, held int64, err error) {
	fail := func(format string, args ...any) (int, int, int64, error) {
		return 0, 0, 0, fmt.Errorf("ledgerbench: BLOCK CHECK FAILED on the %s accounts of side %s: %s", lc.label(), side, fmt.Sprintf(format, args...))
	}
	// Each account's blocks in the order of spending, as ledger_block_draw orders them.
	rows, err := b.pool.Query(ctx, `
		SELECT account_id, id, remaining FROM credit_blocks WHERE account_id = ANY($1)
		ORDER BY account_id, category = 'paid', priority, expires_at NULLS LAST, created_at, id`, ids)
	if err != nil {
		return fail("%v", err)
	}
	order := map[string][]int64{}
	remaining, want := map[int64]int64{}, map[int64]int64{}
	for rows.Next() {
		var account string
		var id, left int64
		if err := rows.Scan(&account, &id, &left); err != nil {
			rows.Close()
			return fail("%v", err)
		}
		order[account] = append(order[account], id)
		want[id] = left
		held += left
	}
	if err := rows.Err(); err != nil {
		return fail("%v", err)
	}

	// draw is what ledger_block_draw would move for amount credits of the account, as the blocks
	// stand in the replay.
	draw := func(account string, amount int64, intoDebt bool) []move {
		var ms []move
		for _, id := range order[account] {
			if amount == 0 {
				break
			}
			if take := min(remaining[id], amount); take > 0 {
				ms = append(ms, move{id, -take})
				amount -= take
			}
		}
		if amount > 0 && intoDebt {
			ms = append(ms, move{0, -amount})
		}
		return ms
	}
	// giveBack is what block_return (blocks_moves.sql) would move for amount credits given back
	// to the source's draw: the last drawn first, the debt (drawn last) first of all.
	giveBack := func(source []move, amount int64) []move {
		var ms []move
		for _, m := range slices.Backward(source) {
			if amount == 0 {
				break
			}
			give := min(-m.amount, amount)
			ms = append(ms, move{m.block, give})
			amount -= give
		}
		return ms
	}

	moves, err := b.pool.Query(ctx, `
		SELECT e.account_id, e.id, e.kind, coalesce(e.job_id, ''), coalesce(m.block_id, 0), m.amount
		FROM ledger_entries e JOIN ledger_block_moves m ON m.entry_id = e.id
		WHERE e.account_id = ANY($1) ORDER BY e.account_id, m.id`, ids)
	if err != nil {
		return fail("%v", err)
	}
	type entry struct {
		account, kind, job string
		id                 int64
		moves              []move
	}
	var entries []entry
	for moves.Next() {
		var e entry
		var m move
		if err := moves.Scan(&e.account, &e.id, &e.kind, &e.job, &m.block, &m.amount); err != nil {
			moves.Close()
			return fail("%v", err)
		}
		if n := len(entries); n > 0 && entries[n-1].id == e.id {
			entries[n-1].moves = append(entries[n-1].moves, m)
			continue
		}
		e.moves = []move{m}
		entries = append(entries, e)
	}
	if err := moves.Err(); err != nil {
		return fail("%v", err)
	}

	lastDraw := map[string][]move{}
	for _, e := range entries {
		var amount int64
		for _, m := range e.moves {
			amount += m.amount
		}
		var expect []move
		switch e.kind {
		case "grant":
			expect = e.moves
		case "charge", "reclaim":
			expect = draw(e.account, -amount, e.kind == "reclaim")
			lastDraw[e.job] = e.moves
			if len(e.moves) > 1 {
				crossings++
			}
		case "refund", "release":
			expect = giveBack(lastDraw[e.job], amount)
		default:
			return fail("row %d is a %s, which the benchmark never writes", e.id, e.kind)
		}
		if !slices.Equal(e.moves, expect) {
			return fail("%s row %d (job %q) moved %v (block, credits; block 0 is the debt), the ledger functions would have moved %v",
				e.kind, e.id, e.job, e.moves, expect)
		}
		for _, m := range e.moves {
			if m.block != 0 {
				remaining[m.block] += m.amount
			}
		}
	}
	for id, left := range want {
		if remaining[id] != left {
			return fail("block %d holds %d, its moves leave it %d", id, left, remaining[id])
		}
	}
	return len(want), crossings, held, nil
}
