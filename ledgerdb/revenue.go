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
	// Adjusted is what operators' adjustments moved into (positive) or out of paid blocks.
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
	// granted; its negative one paid the account's debt — credits a reclaim had already spent.
	// Every sum is numeric: credits times cost basis, summed, never rounded.
	var (
		amounts [6]string
		credits [6]int64
	)
	err := s.pool.QueryRow(ctx, `
		WITH m AS (
			SELECT mv.amount, coalesce(b.cost_basis, 0) AS cost_basis, b.category,
			       coalesce(e.created_at, b.created_at) AS at,
			       CASE
			           WHEN e.kind IS NULL OR (e.kind = 'grant' AND mv.amount > 0) THEN 'granted'
			           WHEN e.kind IN ('charge', 'reclaim', 'refund', 'release', 'grant') THEN 'recognised'
			           WHEN e.kind = 'expire' THEN 'lapsed'
			           ELSE 'adjusted'
			       END AS what
			FROM ledger_block_moves mv
			JOIN credit_blocks b ON b.id = mv.block_id
			LEFT JOIN ledger_entries e ON e.id = mv.entry_id
			WHERE coalesce(e.created_at, b.created_at) < $2 AND ($3 = '' OR mv.account_id = $3)),
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
