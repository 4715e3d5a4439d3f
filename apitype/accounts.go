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
	// Category is the credit block's, paid or promotional; paid when left out. Promotional
	// credits are spent first and are never revenue.
	Category string `json:"category,omitempty"`
	// Priority orders blocks of one category: a lower priority is spent first; 0 when left out.
	Priority int32 `json:"priority,omitempty"`
	// EffectiveAt is when the credits become spendable, an RFC 3339 time; at once when left out.
	// It is text so that a malformed time is refused naming the field.
	EffectiveAt string `json:"effective_at,omitempty"`
	// ExpiresAt is when what remains of the block expires, an RFC 3339 time after EffectiveAt and
	// in the future; never when left out.
	ExpiresAt string `json:"expires_at,omitempty"`
	// CostBasis is what the customer paid per credit, a decimal in the currency's main unit
	// ("0.01"); paid blocks only.
	CostBasis string `json:"cost_basis,omitempty"`
	// Pending posts the grant before its payment is confirmed: its block holds nothing until
	// POST /v1/accounts/{id}/grants/{key}/settle says the payment was made (or failed).
	Pending bool `json:"pending,omitempty"`
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
	// Pending says the grant waits for its payment: no row yet (EntryID is 0), no credits.
	Pending bool `json:"pending,omitempty"`
}

// SettleGrantRequest is the body of POST /v1/accounts/{id}/grants/{key}/settle.
type SettleGrantRequest struct {
	// Paid says the grant's payment was made (its credits become spendable) or failed (its block
	// is void).
	Paid *bool `json:"paid"`
}

// TopUpRule is an account's automatic top-up rule: the body of PUT
// /v1/accounts/{id}/topup-rule and the answer of GET.
type TopUpRule struct {
	// AccountID names the account (in answers).
	AccountID string `json:"account_id,omitempty"`
	// Threshold is the balance below which a debit asks for a top-up (a topup.requested event).
	Threshold int64 `json:"threshold"`
	// Mode is fixed (ask for Amount) or target (ask for what fills the balance up to Amount).
	Mode string `json:"mode"`
	// Amount is the credits asked for, or the target balance.
	Amount int64 `json:"amount"`
	// MonthlyCap is the most credits the requests of one calendar month (UTC) ask for.
	MonthlyCap int64 `json:"monthly_cap"`
	// Outcome, in the answer of PUT, is applied or already_applied.
	Outcome string `json:"outcome,omitempty"`
}

// TopUpRuleRemoved is the answer of DELETE /v1/accounts/{id}/topup-rule: what the removal did,
// and no rule, for there is none left.
type TopUpRuleRemoved struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Outcome is applied when this request removed the rule, already_applied when the account
	// had none.
	Outcome string `json:"outcome"`
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

// Block is one credit block of an account, as GET /v1/accounts/{id}/blocks answers it.
type Block struct {
	// ID names the block.
	ID int64 `json:"id"`
	// Category is paid or promotional.
	Category string `json:"category"`
	// Priority orders blocks of one category: lower is spent first.
	Priority int32 `json:"priority"`
	// Amount is what its grant put in (0 for the opening block).
	Amount int64 `json:"amount"`
	// Remaining is the credits it holds now.
	Remaining int64 `json:"remaining"`
	// EffectiveAt is when its credits became, or become, spendable.
	EffectiveAt time.Time `json:"effective_at"`
	// ExpiresAt is when it expires; left out when it never does.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// CostBasis is what the customer paid per credit, a decimal; left out when unknown.
	CostBasis string `json:"cost_basis,omitempty"`
	// Memo is its grant's memo.
	Memo string `json:"memo,omitempty"`
	// Status is active, pending (waits for its payment) or void (its payment failed).
	Status string `json:"status"`
	// Opening marks the block that held the account's credits when credit blocks began.
	Opening bool `json:"opening"`
	// ExpiredAt is when the expiry removed what remained of it, or when a pending block was voided
	// because its payment was confirmed after its expiry; left out before.
	ExpiredAt *time.Time `json:"expired_at,omitempty"`
	// Spendable says whether its credits can pay for a job now: active, in effect, not expired,
	// holding credits.
	Spendable bool `json:"spendable"`
	// CreatedAt is when it was granted.
	CreatedAt time.Time `json:"created_at"`
}

// BlockList is the answer of GET /v1/accounts/{id}/blocks: the account's credit blocks in the
// order a charge spends them.
type BlockList struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Blocks are in the order of spending: promotional before paid, then lower priority, then
	// sooner expiry (none last), then older.
	Blocks []Block `json:"blocks"`
}

// Statement is the answer of GET /v1/accounts/{id}/statement: what the account's money did over
// a period. Opening plus every line's amount is Closing.
type Statement struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// From and To bound the period: rows written at From or later, and before To.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Status is final when the statement can no longer change, provisional while it may.
	Status string `json:"status"`
	// Opening is the balance at From.
	Opening int64 `json:"opening"`
	// Lines are the period's rows summed by kind: grants by category, charges by job kind.
	Lines []StatementLine `json:"lines"`
	// Closing is the balance at To.
	Closing int64 `json:"closing"`
}

// StatementLine is the rows of one kind in a statement's period.
type StatementLine struct {
	// Kind is grant, charge, refund, reclaim, release, adjustment or expire.
	Kind string `json:"kind"`
	// Category is a grant line's block category (paid or promotional).
	Category string `json:"category,omitempty"`
	// JobKind is a charge line's job kind ("render-4k").
	JobKind string `json:"job_kind,omitempty"`
	// Rows is how many rows the line sums.
	Rows int64 `json:"rows"`
	// Amount is their sum in credits (negative for what was taken).
	Amount int64 `json:"amount"`
}

// Revenue is the answer of GET /v1/revenue (admin): what paid credits did over a period, valued
// at their blocks' cost basis. DeferredOpening + Granted − Recognised − Lapsed + Adjusted =
// DeferredClosing.
type Revenue struct {
	// AccountID is the one account reported on; left out for every account.
	AccountID string `json:"account_id,omitempty"`
	// From and To bound the period.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// DeferredOpening is the paid credits unspent at From: held by blocks, or by jobs running then.
	DeferredOpening Money `json:"deferred_opening"`
	// Granted is the paid credits granted in the period.
	Granted Money `json:"granted"`
	// Recognised is the paid credits of the jobs settled (delivered, or recovered) in the period,
	// net of what came back, and those that paid a reclaim's debt: revenue, for delivered work only.
	Recognised Money `json:"recognised"`
	// Lapsed is the paid credits expired in the period: breakage.
	Lapsed Money `json:"lapsed"`
	// Adjusted is what operators' adjustments moved into (positive) or out of paid blocks, and
	// the paid credits that paid a negative adjustment's debt (negative).
	Adjusted Money `json:"adjusted"`
	// DeferredClosing is the paid credits unspent at To.
	DeferredClosing Money `json:"deferred_closing"`
	// PromotionalSpent is the promotional credits of the jobs settled in the period: never revenue.
	PromotionalSpent int64 `json:"promotional_spent"`
}

// Money is a number of credits and their worth at cost basis.
type Money struct {
	// Credits is the number of credits.
	Credits int64 `json:"credits"`
	// Amount is their worth in the currency's main unit, an exact decimal string ("12.5").
	Amount string `json:"amount"`
}
