package ledgerdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OpenAccount creates an account with a zero balance. Opening an existing account answers
// AlreadyApplied and changes nothing.
func (s *Store) OpenAccount(ctx context.Context, accountID string) (Outcome, error) {
	if err := ValidateID("account ID", accountID); err != nil {
		return "", err
	}
	var outcome string
	var balance int64
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome, &balance) },
		`SELECT outcome, balance FROM ledger_open_account($1)`, accountID)
	if err != nil {
		return "", fmt.Errorf("account %q: %w", accountID, err)
	}
	return Outcome(outcome), nil
}

// Credit is a grant (top-up) or an adjustment to post to an account, once per Key.
type Credit struct {
	// AccountID is the account to credit or debit.
	AccountID string
	// Amount is the signed change in credits: above zero for a grant; either sign, never zero,
	// for an adjustment.
	Amount int64
	// Key is the caller's idempotency key, unique per account: posting the same key again answers
	// the original row; with a different amount or kind, [ErrConflict].
	Key string
	// Memo is free text kept on the row for support (an invoice number, a ticket).
	Memo string
	// Block is the terms of the credit block a grant creates (ignored for an adjustment: a
	// positive one joins the account's opening block).
	Block BlockTerms
	// Pending posts a grant whose payment is not confirmed yet: its block holds nothing until
	// [Store.SettlePendingGrant] confirms it (writing the grant's row) or voids it.
	Pending bool
}

// Grant tops an account up by a positive amount, once per key.
func (s *Store) Grant(ctx context.Context, c Credit) (Posting, error) {
	if err := ValidateAmount("grant amount", c.Amount); err != nil {
		return Posting{}, err
	}
	if err := c.Block.Validate(); err != nil {
		return Posting{}, err
	}
	if c.Block.CostBasis != "" {
		// Sent in its plain form: exactly the number the caller wrote, as the block keeps it.
		c.Block.CostBasis, _ = parseCostBasis(c.Block.CostBasis)
	}
	return s.post(ctx, KindGrant, c)
}

// Adjust posts an operator's correction of either sign, once per key. Unlike a charge, it is not
// refused when the balance is too small: it records what the operator decided.
func (s *Store) Adjust(ctx context.Context, c Credit) (Posting, error) {
	magnitude := c.Amount
	if magnitude < 0 {
		magnitude = -magnitude
	}
	switch {
	case c.Amount == 0:
		return Posting{}, &InvalidInputError{Field: "adjustment amount", Reason: "must not be zero"}
	case magnitude < 0 || magnitude > MaxAmount: // -MinInt64 overflows back to a negative number
		return Posting{}, &InvalidInputError{Field: "adjustment amount", Reason: fmt.Sprintf("is %d; at most %d credits either way are allowed", c.Amount, MaxAmount)}
	}
	c.Block, c.Pending = BlockTerms{}, false
	return s.post(ctx, KindAdjustment, c)
}

func (s *Store) post(ctx context.Context, kind EntryKind, c Credit) (Posting, error) {
	if err := ValidateID("account ID", c.AccountID); err != nil {
		return Posting{}, err
	}
	if err := ValidateID("idempotency key", c.Key); err != nil {
		return Posting{}, err
	}
	if err := ValidateText("memo", c.Memo, MaxTextLength); err != nil {
		return Posting{}, err
	}
	var outcome string
	var p Posting
	var costBasis *string
	if c.Block.CostBasis != "" {
		costBasis = &c.Block.CostBasis
	}
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome, &p.EntryID, &p.BalanceAfter) },
		`SELECT outcome, coalesce(entry_id, 0), coalesce(balance_after, 0)
		 FROM ledger_post($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::numeric, $11)`,
		c.AccountID, string(kind), c.Amount, c.Key, c.Memo,
		string(c.Block.category()), c.Block.Priority, c.Block.EffectiveAt, c.Block.ExpiresAt, costBasis, c.Pending)
	if err != nil {
		return Posting{}, fmt.Errorf("account %q, %s %q: %w", c.AccountID, kind, c.Key, err)
	}
	switch outcome {
	case "unknown_account":
		return Posting{}, fmt.Errorf("account %q: %w", c.AccountID, ErrUnknownAccount)
	case "conflict":
		return Posting{}, fmt.Errorf("account %q, key %q: %w", c.AccountID, c.Key, ErrConflict)
	case "out_of_range":
		return Posting{}, fmt.Errorf("account %q: %s of %d with balance %d: %w", c.AccountID, kind, c.Amount, p.BalanceAfter, ErrBalanceOutOfRange)
	}
	p.Outcome = Outcome(outcome)
	return p, nil
}

// Balance is an account's balance in credits. It is negative only while the account owes a
// reclaimed job (the debt rule of docs/design.md).
func (s *Store) Balance(ctx context.Context, accountID string) (int64, error) {
	if err := ValidateID("account ID", accountID); err != nil {
		return 0, err
	}
	var balance int64
	err := s.pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, accountID).Scan(&balance)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("account %q: %w", accountID, ErrUnknownAccount)
	}
	if err != nil {
		return 0, fmt.Errorf("account %q: %w", accountID, translateError(err))
	}
	return balance, nil
}

// HistoryPage selects a page of an account's ledger rows, oldest first.
type HistoryPage struct {
	// AfterID returns rows with a larger ID only; pass the previous page's NextAfterID.
	AfterID int64
	// Limit is the most rows to return; 0 means 100, and more than 1000 is refused.
	Limit int
}

// History is a page of an account's ledger rows.
type History struct {
	// Entries are the rows, oldest first.
	Entries []Entry
	// NextAfterID is the AfterID of the next page; 0 when this page is the last.
	NextAfterID int64
}

// History pages through an account's ledger rows for support: every grant, charge, refund,
// reclaim and adjustment with the balance after it.
func (s *Store) History(ctx context.Context, accountID string, page HistoryPage) (History, error) {
	if err := ValidateID("account ID", accountID); err != nil {
		return History{}, err
	}
	limit := page.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 1000:
		return History{}, &InvalidInputError{Field: "page limit", Reason: fmt.Sprintf("is %d; it must be between 1 and 1000", limit)}
	}
	if page.AfterID < 0 {
		return History{}, &InvalidInputError{Field: "page cursor", Reason: "must not be negative"}
	}
	if _, err := s.Balance(ctx, accountID); err != nil {
		return History{}, err
	}
	// One row more than asked tells whether another page follows.
	rows, err := s.pool.Query(ctx, `
		SELECT `+entryColumns+`
		FROM `+entryFrom+`
		WHERE le.account_id = $1 AND le.id > $2
		ORDER BY le.id
		LIMIT $3`, accountID, page.AfterID, limit+1)
	if err != nil {
		return History{}, translateError(err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return History{}, translateError(err)
	}
	h := History{Entries: entries}
	if len(entries) > limit {
		h.Entries = entries[:limit]
		h.NextAfterID = h.Entries[limit-1].ID
	}
	return h, nil
}

// scanEntry reads an entry from the columns entryColumns selects.
func scanEntry(row pgx.CollectableRow) (Entry, error) {
	var e Entry
	var sc entryScan
	err := row.Scan(sc.dest(&e)...)
	sc.fill(&e)
	return e, err
}

// entryScan holds the columns of an entry that are scanned apart: its kind, and the block it
// names, which a row without one reads as NULLs.
type entryScan struct {
	kind      string
	blockID   *int64
	category  *string
	grantedAt *time.Time
	expiresAt *time.Time
}

// dest answers where entryColumns scan to.
func (sc *entryScan) dest(e *Entry) []any {
	return []any{&e.ID, &e.AccountID, &e.JobID, &sc.kind, &e.Amount, &e.BalanceAfter, &e.Key, &e.Memo, &e.CreatedAt,
		&e.CausedBy, &sc.blockID, &sc.category, &sc.grantedAt, &sc.expiresAt}
}

// fill sets what was scanned apart on e.
func (sc *entryScan) fill(e *Entry) {
	e.Kind = EntryKind(sc.kind)
	if sc.blockID != nil {
		e.Block = &EntryBlock{ID: *sc.blockID, Category: BlockCategory(*sc.category), GrantedAt: *sc.grantedAt, ExpiresAt: sc.expiresAt}
	}
}
