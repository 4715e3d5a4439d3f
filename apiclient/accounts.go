package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jobbill/jobbill/apitype"
)

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
func (c *Client) Balance(ctx context.Context, accountID string) (apitype.Account, error) {
	id, err := pathID("account ID", accountID)
	if err != nil {
		return apitype.Account{}, err
	}
	var a apitype.Account
	err = c.call(ctx, http.MethodGet, "/v1/accounts/"+id, nil, nil, &a, http.StatusOK)
	return a, err
}

// Ledger reads one page of an account's ledger (GET /v1/accounts/{id}/ledger); pass the page's
// NextAfter as opts.After for the next one, until it is 0. A negative After or Limit is refused
// with ErrInvalidInput before anything is sent.
func (c *Client) Ledger(ctx context.Context, accountID string, opts LedgerOptions) (apitype.LedgerPage, error) {
	id, err := pathID("account ID", accountID)
	if err != nil {
		return apitype.LedgerPage{}, err
	}
	q := url.Values{}
	switch {
	case opts.After < 0:
		return apitype.LedgerPage{}, fmt.Errorf("%w: After %d must be a ledger row ID (0 or more)", ErrInvalidInput, opts.After)
	case opts.After > 0:
		q.Set("after", strconv.FormatInt(opts.After, 10))
	}
	switch {
	case opts.Limit < 0:
		return apitype.LedgerPage{}, fmt.Errorf("%w: Limit %d must be 0 (the server's default) or more", ErrInvalidInput, opts.Limit)
	case opts.Limit > 0:
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var page apitype.LedgerPage
	err = c.call(ctx, http.MethodGet, "/v1/accounts/"+id+"/ledger", q, nil, &page, http.StatusOK)
	return page, err
}

// Blocks reads an account's credit blocks (GET /v1/accounts/{id}/blocks), in the order a charge
// spends them, each saying whether it can be spent now.
func (c *Client) Blocks(ctx context.Context, accountID string) (apitype.BlockList, error) {
	id, err := pathID("account ID", accountID)
	if err != nil {
		return apitype.BlockList{}, err
	}
	var blocks apitype.BlockList
	err = c.call(ctx, http.MethodGet, "/v1/accounts/"+id+"/blocks", nil, nil, &blocks, http.StatusOK)
	return blocks, err
}

// Statement reads an account's statement of the period [from, to) as JSON
// (GET /v1/accounts/{id}/statement): its opening balance, its lines by kind, its closing balance.
// A period that holds no time is refused with ErrInvalidInput before anything is sent.
func (c *Client) Statement(ctx context.Context, accountID string, from, to time.Time) (apitype.Statement, error) {
	id, err := pathID("account ID", accountID)
	if err != nil {
		return apitype.Statement{}, err
	}
	if !from.Before(to) {
		return apitype.Statement{}, fmt.Errorf("%w: the period from %s to %s holds no time; its start must be before its end",
			ErrInvalidInput, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	q := url.Values{"from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)}}
	var st apitype.Statement
	err = c.call(ctx, http.MethodGet, "/v1/accounts/"+id+"/statement", q, nil, &st, http.StatusOK)
	return st, err
}
