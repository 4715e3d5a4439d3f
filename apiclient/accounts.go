package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Account is an account's balance.
type Account struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Balance is in credits: the sum of the account's ledger rows.
	Balance int64 `json:"balance"`
}

// LedgerEntry is one row of an account's ledger.
type LedgerEntry struct {
	// ID orders the rows; a page's NextAfter is the last one's.
	ID int64 `json:"id"`
	// Kind is grant, charge, refund, reclaim, release or adjustment.
	Kind string `json:"kind"`
	// Amount is the signed change in credits.
	Amount int64 `json:"amount"`
	// BalanceAfter is the balance right after the row.
	BalanceAfter int64 `json:"balance_after"`
	// JobID is the job of a charge, refund, reclaim or release.
	JobID string `json:"job_id,omitempty"`
	// Key is a grant's or adjustment's idempotency key.
	Key string `json:"key,omitempty"`
	// Memo is a grant's or adjustment's free text.
	Memo string `json:"memo,omitempty"`
	// CreatedAt is when the row was written.
	CreatedAt time.Time `json:"created_at"`
}

// LedgerPage is one page of an account's ledger, oldest row first.
type LedgerPage struct {
	// AccountID names the account.
	AccountID string `json:"account_id"`
	// Entries are the page's rows.
	Entries []LedgerEntry `json:"entries"`
	// NextAfter is the After of the next page; 0 when this page is the last.
	NextAfter int64 `json:"next_after"`
}

// LedgerOptions pages an account's ledger. The zero value is the first page, of the server's
// default size.
type LedgerOptions struct {
	// After is the previous page's NextAfter: the rows after that row ID; from the first when 0.
	After int64
	// Limit is the most rows on one page (the server takes 1 to 1000); its default when 0.
	Limit int
}

// Balance reads an account's balance (GET /v1/accounts/{id}). An account outside the key's
// scope is an *APIError with code forbidden.
func (c *Client) Balance(ctx context.Context, accountID string) (Account, error) {
	id, err := pathID("account ID", accountID)
	if err != nil {
		return Account{}, err
	}
	var a Account
	err = c.call(ctx, http.MethodGet, "/v1/accounts/"+id, nil, nil, &a, http.StatusOK)
	return a, err
}

// Ledger reads one page of an account's ledger (GET /v1/accounts/{id}/ledger); pass the page's
// NextAfter as opts.After for the next one, until it is 0. A negative After or Limit is refused
// with ErrInvalidInput before anything is sent.
func (c *Client) Ledger(ctx context.Context, accountID string, opts LedgerOptions) (LedgerPage, error) {
	id, err := pathID("account ID", accountID)
	if err != nil {
		return LedgerPage{}, err
	}
	q := url.Values{}
	switch {
	case opts.After < 0:
		return LedgerPage{}, fmt.Errorf("%w: After %d must be a ledger row ID (0 or more)", ErrInvalidInput, opts.After)
	case opts.After > 0:
		q.Set("after", strconv.FormatInt(opts.After, 10))
	}
	switch {
	case opts.Limit < 0:
		return LedgerPage{}, fmt.Errorf("%w: Limit %d must be 0 (the server's default) or more", ErrInvalidInput, opts.Limit)
	case opts.Limit > 0:
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var page LedgerPage
	err = c.call(ctx, http.MethodGet, "/v1/accounts/"+id+"/ledger", q, nil, &page, http.StatusOK)
	return page, err
}
