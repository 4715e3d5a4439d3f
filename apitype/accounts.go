package apitype

import "time"

// Account is the answer of GET /v1/accounts/{id}.
type Account struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Balance is in credits: the sum of the account's ledger rows.
	Balance int64 `json:"balance"`
}

// LedgerEntry is one ledger row as support reads it.
type LedgerEntry struct {
	// ID orders the rows; pass the last one as ?after= for the next page.
	ID int64 `json:"id"`
	// Kind is grant, charge, refund, reclaim, release, adjustment or expire.
	Kind string `json:"kind"`
	// Amount is the signed change in credits.
	Amount int64 `json:"amount"`
	// BalanceAfter is the balance right after the row.
	BalanceAfter int64 `json:"balance_after"`
	// JobID is the job of a charge, refund, reclaim or release.
	JobID string `json:"job_id,omitempty"`
	// Key is a grant's or adjustment's idempotency key.
	Key string `json:"key,omitempty"`
	// Memo is a grant's or adjustment's free text, or an expiry's words: how many credits
	// expired, from which block, granted and ended when.
	Memo string `json:"memo,omitempty"`
	// CreatedAt is when the row was written.
	CreatedAt time.Time `json:"created_at"`
}

// LedgerPage is the answer of GET /v1/accounts/{id}/ledger.
type LedgerPage struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Entries are the page's rows, oldest first.
	Entries []LedgerEntry `json:"entries"`
	// NextAfter is the ?after= of the next page; 0 when this page is the last.
	NextAfter int64 `json:"next_after"`
}

// GrantRequest is the body of POST /v1/accounts/{id}/grants (admin).
type GrantRequest struct {
	// Amount is the top-up in whole credits, above zero.
	Amount int64 `json:"amount"`
	// Key makes the grant idempotent: the same key again answers the original grant.
	Key string `json:"key"`
	// Memo is kept on the ledger row for support.
	Memo string `json:"memo"`
}

// Grant is the answer of POST /v1/accounts/{id}/grants.
type Grant struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Outcome is applied for a new grant, already_applied when the key was granted before.
	Outcome string `json:"outcome"`
	// EntryID is the grant's ledger row (new or earlier).
	EntryID int64 `json:"entry_id"`
	// BalanceAfter is the balance right after that row.
	BalanceAfter int64 `json:"balance_after"`
}

// ThresholdRequest is the body of PUT /v1/accounts/{id}/low-balance-threshold.
type ThresholdRequest struct {
	// Threshold is the balance, in credits, below which a debit sends balance.low; null removes it.
	Threshold *int64 `json:"threshold"`
}

// Threshold is the answer of PUT /v1/accounts/{id}/low-balance-threshold.
type Threshold struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Outcome is applied, or already_applied when the account had this threshold already.
	Outcome string `json:"outcome"`
	// Threshold is the account's threshold now; null when it has none.
	Threshold *int64 `json:"threshold"`
}
