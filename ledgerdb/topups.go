package ledgerdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TopUpMode says how much an automatic top-up asks for.
type TopUpMode string

// The automatic top-up modes.
const (
	// TopUpFixed asks for the rule's amount.
	TopUpFixed TopUpMode = "fixed"
	// TopUpTarget asks for what fills the balance up to the rule's amount.
	TopUpTarget TopUpMode = "target"
)

// TopUpRule is an account's automatic top-up: a debit that takes the balance from at or above
// Threshold to below it asks the product's payment code for credits (a topup.requested webhook
// event whose idempotency key the paid grant is posted with), at most MonthlyCap credits asked for
// per calendar month (UTC).
type TopUpRule struct {
	// AccountID is the account topped up.
	AccountID string
	// Threshold is the balance below which a debit asks for a top-up.
	Threshold int64
	// Mode is fixed or target.
	Mode TopUpMode
	// Amount is the credits asked for (fixed), or the balance to fill up to (target; above
	// Threshold).
	Amount int64
	// MonthlyCap is the most credits the account's requests ask for in one calendar month.
	MonthlyCap int64
	// UpdatedAt is when the rule was last set.
	UpdatedAt time.Time
}

// Validate checks a rule: a known mode, a positive amount and cap within the ledger's range, a
// threshold within it, and a target above the threshold.
func (r TopUpRule) Validate() error {
	if err := ValidateID("account ID", r.AccountID); err != nil {
		return err
	}
	switch r.Mode {
	case TopUpFixed, TopUpTarget:
	default:
		return &InvalidInputError{Field: "mode", Reason: fmt.Sprintf("is %q; it must be %q or %q", r.Mode, TopUpFixed, TopUpTarget)}
	}
	if r.Threshold < -MaxBalance || r.Threshold > MaxBalance {
		return &InvalidInputError{Field: "threshold", Reason: fmt.Sprintf("is %d; it must be between -%d and %d", r.Threshold, MaxBalance, MaxBalance)}
	}
	if err := ValidateAmount("amount", r.Amount); err != nil {
		return err
	}
	if err := ValidateAmount("monthly_cap", r.MonthlyCap); err != nil {
		return err
	}
	if r.Mode == TopUpTarget && r.Amount <= r.Threshold {
		return &InvalidInputError{Field: "amount", Reason: fmt.Sprintf("is a target of %d, not above the threshold %d: the top-up would never fill the balance past it", r.Amount, r.Threshold)}
	}
	return nil
}

// SetTopUpRule sets an account's automatic top-up rule, replacing any. The same rule again answers
// AlreadyApplied; bad input is [*InvalidInputError] and an unknown account [ErrUnknownAccount],
// nothing written.
func (s *Store) SetTopUpRule(ctx context.Context, r TopUpRule) (Outcome, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	return s.setTopUpRule(ctx, r.AccountID, &r)
}

// RemoveTopUpRule removes an account's automatic top-up rule; AlreadyApplied when it had none.
func (s *Store) RemoveTopUpRule(ctx context.Context, accountID string) (Outcome, error) {
	if err := ValidateID("account ID", accountID); err != nil {
		return "", err
	}
	return s.setTopUpRule(ctx, accountID, nil)
}

func (s *Store) setTopUpRule(ctx context.Context, accountID string, r *TopUpRule) (Outcome, error) {
	var threshold, amount, capacity *int64
	var mode *string
	if r != nil {
		m := string(r.Mode)
		threshold, mode, amount, capacity = &r.Threshold, &m, &r.Amount, &r.MonthlyCap
	}
	var outcome string
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome) },
		`SELECT ledger_topup_set_rule($1, $2, $3, $4, $5)`, accountID, threshold, mode, amount, capacity)
	if err != nil {
		return "", fmt.Errorf("account %q: setting its top-up rule: %w", accountID, err)
	}
	if outcome == "unknown_account" {
		return "", fmt.Errorf("account %q: %w", accountID, ErrUnknownAccount)
	}
	return Outcome(outcome), nil
}

// TopUpRuleOf answers the account's automatic top-up rule; ok is false when it has none.
func (s *Store) TopUpRuleOf(ctx context.Context, accountID string) (rule TopUpRule, ok bool, err error) {
	var mode string
	err = s.pool.QueryRow(ctx, `SELECT account_id, threshold, mode, amount, monthly_cap, updated_at FROM topup_rules WHERE account_id = $1`,
		accountID).Scan(&rule.AccountID, &rule.Threshold, &mode, &rule.Amount, &rule.MonthlyCap, &rule.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return TopUpRule{}, false, nil
	}
	if err != nil {
		return TopUpRule{}, false, fmt.Errorf("account %q: reading its top-up rule: %w", accountID, translateError(err))
	}
	rule.Mode = TopUpMode(mode)
	return rule, true, nil
}

// SettlePendingGrant settles a grant posted pending its payment ([Credit.Pending]): paid makes
// its block spendable, writing the grant's row (the debt paid first, as by any grant); otherwise
// the block is voided, nothing else written. Settling it again the same way answers
// AlreadyApplied; the other way, [ErrConflict]. A grant whose expiry passed before its payment was
// confirmed is voided instead (no credits added) and answered [ErrGrantExpired], then and to every
// later confirmation; a later failed payment finds it void, AlreadyApplied. An unknown key is
// [ErrUnknownGrant]; an unknown account [ErrUnknownAccount].
func (s *Store) SettlePendingGrant(ctx context.Context, accountID, key string, paid bool) (Posting, error) {
	if err := ValidateID("account ID", accountID); err != nil {
		return Posting{}, err
	}
	if err := ValidateID("idempotency key", key); err != nil {
		return Posting{}, err
	}
	var outcome string
	var p Posting
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome, &p.EntryID, &p.BalanceAfter) },
		`SELECT outcome, coalesce(entry_id, 0), coalesce(balance_after, 0) FROM ledger_settle_pending_grant($1, $2, $3)`,
		accountID, key, paid)
	if err != nil {
		return Posting{}, fmt.Errorf("account %q, pending grant %q: %w", accountID, key, err)
	}
	switch outcome {
	case "unknown_account":
		return Posting{}, fmt.Errorf("account %q: %w", accountID, ErrUnknownAccount)
	case "not_found":
		return Posting{}, fmt.Errorf("account %q: key %q: %w", accountID, key, ErrUnknownGrant)
	case "conflict":
		return Posting{}, fmt.Errorf("account %q, key %q: the grant was settled the other way before: %w", accountID, key, ErrConflict)
	case "out_of_range":
		return Posting{}, fmt.Errorf("account %q: confirming grant %q: %w", accountID, key, ErrBalanceOutOfRange)
	case "expired":
		return Posting{}, fmt.Errorf("account %q, pending grant %q: %w", accountID, key, ErrGrantExpired)
	}
	p.Outcome = Outcome(outcome)
	return p, nil
}
