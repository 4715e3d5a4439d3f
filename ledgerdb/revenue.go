package ledgerdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Revenue is what paid credits did over a period, across every account, for finance: read from
// the moves of credits into and out of paid blocks (ledger_block_moves), each valued at its
// block's cost basis. Paid credits are deferred revenue while unspent, recognised as revenue
// when a job spends them, and lapsed (breakage) when their block expires with them. It
// reconciles by construction: DeferredOpening + Granted − Recognised − Lapsed + Adjusted =
// DeferredClosing, and one period's DeferredClosing is the next one's DeferredOpening. A paid
// block granted without a cost basis counts its credits at no money. Promotional credits are
// never revenue: what jobs spent of them is PromotionalSpent.
type Revenue struct {
	// AccountID is the one account the report is of; empty: every account.
	AccountID string `json:"account_id,omitempty"`
	// From and To bound the period: moves of rows written at From or later, and before To.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// DeferredOpening is the paid credits unspent at From: every move into and out of a paid
	// block before it.
	DeferredOpening Money `json:"deferred_opening"`
	// Granted is the paid credits grants put into blocks in the period (and the balances that
	// became opening blocks when credit blocks began).
	Granted Money `json:"granted"`
	// Recognised is the paid credits spent in the period: drawn by charges and reclaims (and by a
	// grant paying the debt a reclaim left), net of what refunds and releases returned.
	Recognised Money `json:"recognised"`
	// Lapsed is the paid credits that expired in the period (breakage).
	Lapsed Money `json:"lapsed"`
	// Adjusted is what operators' adjustments moved into (positive) or out of paid blocks, and
	// (negative) the paid credits a grant paid a negative adjustment's debt with: no work was
	// delivered for those.
	Adjusted Money `json:"adjusted"`
	// DeferredClosing is the paid credits unspent at To.
	DeferredClosing Money `json:"deferred_closing"`
	// PromotionalSpent is the promotional credits jobs spent in the period, net of what came
	// back: not revenue, reported beside it.
	PromotionalSpent int64 `json:"promotional_spent"`
}

// Money is a number of credits and what they are worth at their blocks' cost basis.
type Money struct {
	// Credits is the number of credits.
	Credits int64 `json:"credits"`
	// Amount is their worth in the currency's main unit, an exact decimal ("12.5").
	Amount string `json:"amount"`
}

// Revenue reads the revenue report of the period [from, to) over every account, or over one when
// accountID is not empty. A period that holds no time is [*InvalidInputError]; an unknown account
// is [ErrUnknownAccount]. Like a statement, a report whose period has not ended may still change.
func (s *Store) Revenue(ctx context.Context, from, to time.Time, accountID string) (Revenue, error) {
	if err := ValidatePeriod(from, to); err != nil {
		return Revenue{}, err
	}
	if accountID != "" {
		if _, err := s.Balance(ctx, accountID); err != nil {
			return Revenue{}, err
		}
	}
	r := Revenue{From: from.UTC(), To: to.UTC(), AccountID: accountID}
	// Each move of a paid block is dated by its row; the moves that opened the blocks when they
	// began have no row and are dated by their block. A grant's positive move is the credits it
	// granted. A negative move of a grant or a positive adjustment paid the account's debt, and is
	// classed by where that debt came from (docs/design.md, "Statements and revenue"): debts are
	// paid first made, first paid; what paid a reclaim's debt (work delivered and not paid for)
	// is recognised, what paid a negative adjustment's is adjusted. A payment only ever pays debts
	// made before it, so its class never changes once written and periods still chain.
	// Every sum is numeric: credits times cost basis, summed, never rounded.
	var (
		amounts [6]string
		credits [6]int64
	)
	err := s.pool.QueryRow(ctx, `
		-- d: every move on an account's debt (no block), with the row that made it.
		WITH d AS (
			SELECT mv.id, mv.account_id, mv.entry_id, mv.amount, e.kind, e.job_id
			FROM ledger_block_moves mv
			LEFT JOIN ledger_entries e ON e.id = mv.entry_id
			WHERE mv.block_id IS NULL AND ($3 = '' OR mv.account_id = $3)),
		-- debts: each debt a row drew, net of what its job's release gave back to it; the debt
		-- the account had when blocks began has no row and counts as no adjustment's.
		returned AS (
			SELECT job_id, sum(amount) AS credits FROM d WHERE kind IN ('refund', 'release') GROUP BY job_id),
		debts AS (
			SELECT o.account_id, o.id, o.kind IS NOT DISTINCT FROM 'adjustment' AS by_adjustment,
			       -o.amount - coalesce(r.credits, 0) AS owed
			FROM d o LEFT JOIN returned r ON o.kind = 'reclaim' AND r.job_id = o.job_id
			WHERE o.amount < 0),
		-- owed and paid lay the debts and the payments (grants' and positive adjustments') end
		-- to end, each in the order it was made: a payment pays what of the debts it overlaps.
		owed AS (
			SELECT account_id, by_adjustment, owed,
			       sum(owed) OVER (PARTITION BY account_id ORDER BY id) AS upto
			FROM debts),
		paid AS (
			SELECT account_id, entry_id, amount,
			       sum(amount) OVER (PARTITION BY account_id ORDER BY id) AS upto
			FROM d WHERE amount > 0 AND kind IN ('grant', 'adjustment')),
		-- paid_for_adjustments: how much of each payment went to adjustments' debts.
		paid_for_adjustments AS (
			SELECT p.entry_id, sum(least(p.upto, o.upto) - greatest(p.upto - p.amount, o.upto - o.owed))::bigint AS credits
			FROM paid p JOIN owed o ON o.account_id = p.account_id AND o.by_adjustment
			     AND least(p.upto, o.upto) > greatest(p.upto - p.amount, o.upto - o.owed)
			GROUP BY p.entry_id),
		-- m: every move of a block, classed; a payment's move is cut in two, the part that
		-- paid adjustments' debts adjusted, the rest recognised.
		m AS (
			SELECT part.amount, coalesce(b.cost_basis, 0) AS cost_basis, b.category,
			       coalesce(e.created_at, b.created_at) AS at, part.what
			FROM ledger_block_moves mv
			JOIN credit_blocks b ON b.id = mv.block_id
			LEFT JOIN ledger_entries e ON e.id = mv.entry_id
			LEFT JOIN paid_for_adjustments f ON f.entry_id = mv.entry_id AND mv.amount < 0
			CROSS JOIN LATERAL (VALUES
				(mv.amount + coalesce(f.credits, 0),
				 CASE
				     WHEN e.kind IS NULL OR (e.kind = 'grant' AND mv.amount > 0) THEN 'granted'
				     WHEN e.kind IN ('charge', 'reclaim', 'refund', 'release') THEN 'recognised'
				     WHEN e.kind IN ('grant', 'adjustment') AND e.amount > 0 AND mv.amount < 0 THEN 'recognised'
				     WHEN e.kind = 'expire' THEN 'lapsed'
				     ELSE 'adjusted'
				 END),
				(-f.credits, 'adjusted')) AS part (amount, what)
			WHERE part.amount <> 0 AND coalesce(e.created_at, b.created_at) < $2 AND ($3 = '' OR mv.account_id = $3)),
		p AS (SELECT * FROM m WHERE category = 'paid'),
		i AS (SELECT * FROM p WHERE at >= $1)
		SELECT
			coalesce((SELECT sum(amount) FROM p WHERE at < $1), 0)::bigint,
			coalesce((SELECT sum(amount * cost_basis) FROM p WHERE at < $1), 0)::text,
			coalesce((SELECT sum(amount) FROM i WHERE what = 'granted'), 0)::bigint,
			coalesce((SELECT sum(amount * cost_basis) FROM i WHERE what = 'granted'), 0)::text,
			coalesce((SELECT -sum(amount) FROM i WHERE what = 'recognised'), 0)::bigint,
			coalesce((SELECT -sum(amount * cost_basis) FROM i WHERE what = 'recognised'), 0)::text,
			coalesce((SELECT -sum(amount) FROM i WHERE what = 'lapsed'), 0)::bigint,
			coalesce((SELECT -sum(amount * cost_basis) FROM i WHERE what = 'lapsed'), 0)::text,
			coalesce((SELECT sum(amount) FROM i WHERE what = 'adjusted'), 0)::bigint,
			coalesce((SELECT sum(amount * cost_basis) FROM i WHERE what = 'adjusted'), 0)::text,
			coalesce((SELECT sum(amount) FROM p), 0)::bigint,
			coalesce((SELECT sum(amount * cost_basis) FROM p), 0)::text,
			coalesce((SELECT -sum(amount) FROM m WHERE category = 'promotional' AND at >= $1 AND what = 'recognised'), 0)::bigint`,
		from, to, accountID).Scan(&credits[0], &amounts[0], &credits[1], &amounts[1], &credits[2], &amounts[2],
		&credits[3], &amounts[3], &credits[4], &amounts[4], &credits[5], &amounts[5], &r.PromotionalSpent)
	if err := translateError(err); errors.Is(err, ErrOverflow) {
		// Every account may hold up to MaxBalance: their sum can pass what a figure holds.
		return Revenue{}, fmt.Errorf("reading the revenue report: its credits add up to more than one figure holds (%d); report on one account at a time: %w",
			int64(math.MaxInt64), err)
	} else if err != nil {
		return Revenue{}, fmt.Errorf("reading the revenue report: %w", err)
	}
	for i, m := range []*Money{&r.DeferredOpening, &r.Granted, &r.Recognised, &r.Lapsed, &r.Adjusted, &r.DeferredClosing} {
		*m = Money{Credits: credits[i], Amount: trimDecimal(amounts[i])}
	}
	return r, nil
}
