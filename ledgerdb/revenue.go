package ledgerdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Revenue is what paid credits did over a period, across every account, for finance: read from
// the moves of credits into and out of credit blocks, each valued at its block's cost basis, by
// the ledger's function ledger_revenue (ledgerdb/code/reports_revenue.sql, which states every
// rule). Only delivered work is revenue: paid credits are deferred while a block holds them and
// while a running job holds them (its charge's draws, not yet returned); they are recognised when
// the job is settled — delivered, or recovered by a late result —, dated by its settlement, at the
// net of its draws less its returns; a refunded job is never revenue; credits lapse (breakage)
// when their block expires with them. It reconciles by construction: DeferredOpening + Granted −
// Recognised − Lapsed + Adjusted = DeferredClosing, and one period's DeferredClosing is the next
// one's DeferredOpening. A paid block granted without a cost basis counts its credits at no money.
// Promotional credits are never revenue: what delivered work spent of them is PromotionalSpent.
type Revenue struct {
	// AccountID is the one account the report is of; empty: every account.
	AccountID string `json:"account_id,omitempty"`
	// From and To bound the period: what happened at From or later, and before To.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// DeferredOpening is the paid credits unspent at From: what paid blocks held then, and what
	// jobs running then held of them.
	DeferredOpening Money `json:"deferred_opening"`
	// Granted is the paid credits grants put into blocks in the period (and the balances that
	// became opening blocks when credit blocks began, with what a refund or a release of a charge
	// made before then gave back to them).
	Granted Money `json:"granted"`
	// Recognised is the paid credits of the jobs settled in the period — delivered, or recovered
	// by a late result —, each job's draws (charge, reclaim) net of its returns (refund, release);
	// and the paid credits that paid, in the period, a debt a reclaim left (work delivered and not
	// paid for).
	Recognised Money `json:"recognised"`
	// Lapsed is the paid credits that expired in the period (breakage).
	Lapsed Money `json:"lapsed"`
	// Adjusted is what operators' adjustments moved into (positive) or out of paid blocks, and
	// (negative) the paid credits that paid a negative adjustment's debt: no work was delivered
	// for those.
	Adjusted Money `json:"adjusted"`
	// DeferredClosing is the paid credits unspent at To.
	DeferredClosing Money `json:"deferred_closing"`
	// PromotionalSpent is the promotional credits of the jobs settled in the period, net of what
	// came back, and those that paid a reclaim's debt: not revenue, reported beside it.
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
// A job still running at to changes nothing when it settles later: its credits stay deferred at to,
// and are recognised in the period of its settlement.
func (s *Store) Revenue(ctx context.Context, from, to time.Time, accountID string) (Revenue, error) {
	if err := ValidatePeriod(from, to); err != nil {
		return Revenue{}, err
	}
	if accountID != "" {
		if _, err := s.Balance(ctx, accountID); err != nil {
			return Revenue{}, err
		}
	}
	r, err := readRevenue(ctx, s.pool, from, to, accountID)
	if errors.Is(err, ErrOverflow) {
		// Every account may hold up to MaxBalance: their sum can pass what a figure holds.
		return Revenue{}, fmt.Errorf("reading the revenue report: its credits add up to more than one figure holds (%d); report on one account at a time: %w",
			int64(math.MaxInt64), err)
	} else if err != nil {
		return Revenue{}, fmt.Errorf("reading the revenue report: %w", err)
	}
	return r, nil
}

// revenueRow is a row of ledger_revenue, scanned by its columns' names.
type revenueRow struct {
	DeferredOpeningCredits int64  `db:"deferred_opening_credits"`
	DeferredOpeningAmount  string `db:"deferred_opening_amount"`
	GrantedCredits         int64  `db:"granted_credits"`
	GrantedAmount          string `db:"granted_amount"`
	RecognisedCredits      int64  `db:"recognised_credits"`
	RecognisedAmount       string `db:"recognised_amount"`
	LapsedCredits          int64  `db:"lapsed_credits"`
	LapsedAmount           string `db:"lapsed_amount"`
	AdjustedCredits        int64  `db:"adjusted_credits"`
	AdjustedAmount         string `db:"adjusted_amount"`
	DeferredClosingCredits int64  `db:"deferred_closing_credits"`
	DeferredClosingAmount  string `db:"deferred_closing_amount"`
	PromotionalSpent       int64  `db:"promotional_spent"`
}

// readRevenue reads the report through q: every account's when accountID is empty.
func readRevenue(ctx context.Context, q Querier, from, to time.Time, accountID string) (Revenue, error) {
	rows, err := q.Query(ctx, `SELECT * FROM ledger_revenue($1, $2, $3)`, from, to, nullIfEmpty(accountID))
	if err != nil {
		return Revenue{}, translateError(err)
	}
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[revenueRow])
	if err != nil {
		return Revenue{}, translateError(err)
	}
	return Revenue{
		AccountID: accountID, From: from.UTC(), To: to.UTC(),
		DeferredOpening:  money(row.DeferredOpeningCredits, row.DeferredOpeningAmount),
		Granted:          money(row.GrantedCredits, row.GrantedAmount),
		Recognised:       money(row.RecognisedCredits, row.RecognisedAmount),
		Lapsed:           money(row.LapsedCredits, row.LapsedAmount),
		Adjusted:         money(row.AdjustedCredits, row.AdjustedAmount),
		DeferredClosing:  money(row.DeferredClosingCredits, row.DeferredClosingAmount),
		PromotionalSpent: row.PromotionalSpent,
	}, nil
}

// money is a figure of the report: credits, and their amount as a trimmed decimal.
func money(credits int64, amount string) Money {
	return Money{Credits: credits, Amount: trimDecimal(amount)}
}

// nullIfEmpty is s, or NULL when it is empty: ledger_revenue reads every account from NULL.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// RevenueAudit is the audit's revenue rule on one account, as ledger_revenue_audit reads it:
// revenue is recognised for delivered work only. What the revenue report recognises of all time
// must be what delivered and recovered jobs netted from paid blocks, plus the paid credits that
// paid debts of delivered work (a reclaim's, or the debt an account had when credit blocks
// began); a job that is neither delivered nor recovered — refunded, or never charged — has
// nothing recognised, and a running job's credits are still deferred.
type RevenueAudit struct {
	// Recognised is the paid credits the revenue report recognises of all time.
	Recognised Money
	// Delivered is what delivered work accounts for: what Recognised must be.
	Delivered Money
	// UndeliveredJobs are the jobs neither delivered, recovered nor running whose paid credits the
	// report recognises all the same, by ID.
	UndeliveredJobs []string
}

// revenueAuditRow is a row of ledger_revenue_audit, scanned by its columns' names.
type revenueAuditRow struct {
	RecognisedCredits int64    `db:"recognised_credits"`
	RecognisedAmount  string   `db:"recognised_amount"`
	DeliveredCredits  int64    `db:"delivered_credits"`
	DeliveredAmount   string   `db:"delivered_amount"`
	UndeliveredJobs   []string `db:"undelivered_jobs"`
}

// readRevenueAudit reads the account's revenue rule through q.
func readRevenueAudit(ctx context.Context, q Querier, accountID string) (RevenueAudit, error) {
	rows, err := q.Query(ctx, `SELECT * FROM ledger_revenue_audit($1)`, accountID)
	if err != nil {
		return RevenueAudit{}, err
	}
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[revenueAuditRow])
	if err != nil {
		return RevenueAudit{}, err
	}
	return RevenueAudit{Recognised: money(row.RecognisedCredits, row.RecognisedAmount),
		Delivered: money(row.DeliveredCredits, row.DeliveredAmount), UndeliveredJobs: row.UndeliveredJobs}, nil
}

// Problem says in a sentence how the account breaks the rule; empty when it holds.
func (a RevenueAudit) Problem() string {
	if a.Recognised == a.Delivered && len(a.UndeliveredJobs) == 0 {
		return ""
	}
	msg := fmt.Sprintf("revenue recognised for work not delivered: the revenue report recognises %d paid credits (%s) of all time, but delivered and recovered jobs and the debts of delivered work they paid account for %d (%s)",
		a.Recognised.Credits, a.Recognised.Amount, a.Delivered.Credits, a.Delivered.Amount)
	if len(a.UndeliveredJobs) > 0 {
		msg += fmt.Sprintf("; jobs neither delivered nor recovered whose paid credits stay spent: %s", strings.Join(a.UndeliveredJobs, ", "))
	}
	return msg
}
