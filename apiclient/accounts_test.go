package apiclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/api/apitest"
	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"

	"github.com/jobbill/jobbill/apitype"
)

// TestBalanceAndLedgerReadTheRealAPI checks the account reads against the API's own handler over
// the real ledger (the account routes need no Temporal): the balance is the sum of the account's
// rows (the sum-of-rows rule), and paging with NextAfter reads every row once, oldest first. Trust:
// a key of another account is refused with 403 and learns nothing; paging arguments no server could
// answer, and an empty account ID, are refused before anything is sent.
func TestBalanceAndLedgerReadTheRealAPI(t *testing.T) {
	store := ledgertest.Store(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, store, 100)
	for i, amount := range []int64{5, 7, 11, 13} {
		_, err := store.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: amount, Key: fmt.Sprintf("top-up-%d", i)})
		require.NoError(t, err)
	}
	other := ledgertest.Account(t, store, 50)
	created, err := apikeys.NewStore(store.Pool()).Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "account reads"})
	require.NoError(t, err)
	key := created.Secret

	srv, requests := serveAccounts(t, store)
	c := &apiclient.Client{BaseURL: srv.URL, Key: key}

	balance, err := c.Balance(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, apitype.Account{AccountID: acct, Balance: 136}, balance)

	var amounts []int64
	var sum, lastID int64
	opts := apiclient.LedgerOptions{Limit: 2}
	pages := 0
	for {
		page, err := c.Ledger(ctx, acct, opts)
		require.NoError(t, err)
		pages++
		require.Equal(t, acct, page.AccountID)
		require.LessOrEqual(t, len(page.Entries), 2)
		for _, e := range page.Entries {
			require.Greater(t, e.ID, lastID, "oldest first, every row once")
			lastID = e.ID
			sum += e.Amount
			require.Equal(t, sum, e.BalanceAfter, "each row's balance_after is the sum so far")
			require.Equal(t, "grant", e.Kind)
			require.False(t, e.CreatedAt.IsZero())
			amounts = append(amounts, e.Amount)
		}
		if page.NextAfter == 0 {
			break
		}
		opts.After = page.NextAfter
	}
	require.Equal(t, []int64{100, 5, 7, 11, 13}, amounts)
	require.Equal(t, balance.Balance, sum, "the sum-of-rows rule: the balance is the sum of the rows")
	require.GreaterOrEqual(t, pages, 3)

	for _, read := range []func() error{
		func() error { _, err := c.Balance(ctx, other); return err },
		func() error { _, err := c.Ledger(ctx, other, apiclient.LedgerOptions{}); return err },
	} {
		var ae *apiclient.APIError
		require.ErrorAs(t, read(), &ae)
		require.Equal(t, http.StatusForbidden, ae.StatusCode)
		require.Equal(t, "forbidden", ae.Code)
		require.NotContains(t, ae.Message, other)
	}
	_, err = c.Ledger(ctx, acct, apiclient.LedgerOptions{Limit: 5000})
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae, "the server's limit is the server's to enforce")
	require.Equal(t, "invalid_input", ae.Code)

	before := requests.Load()
	for name, bad := range map[string]func() error{
		"negative after":      func() error { _, err := c.Ledger(ctx, acct, apiclient.LedgerOptions{After: -1}); return err },
		"negative limit":      func() error { _, err := c.Ledger(ctx, acct, apiclient.LedgerOptions{Limit: -1}); return err },
		"ledger, no account":  func() error { _, err := c.Ledger(ctx, "", apiclient.LedgerOptions{}); return err },
		"balance, no account": func() error { _, err := c.Balance(ctx, ""); return err },
	} {
		require.ErrorIs(t, bad(), apiclient.ErrInvalidInput, name)
	}
	require.Equal(t, before, requests.Load(), "refused arguments send nothing")
}

// serveAccounts serves the API's own handler over the store (the account routes need no
// Temporal), counting the requests it takes; every answer is held to api/openapi.yaml.
func serveAccounts(t *testing.T, store *ledgerdb.Store) (*httptest.Server, *atomic.Int32) {
	var requests atomic.Int32
	handler := apitest.Conform(t, api.New(api.Options{Config: config.Default().API, Ledger: store}).Handler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// TestBlocksAndStatementReadTheRealAPI checks the credit reads of the Go client against the API's
// own handler over the real ledger: the blocks come in the order a charge spends them
// (promotional before paid), each with its terms, and hold the balance (the sum-of-rows rule);
// the statement adds up — opening + lines = closing — with grants split by category; a period
// that holds no time is refused before anything is sent, and another account's blocks are 403.
func TestBlocksAndStatementReadTheRealAPI(t *testing.T) {
	store := ledgertest.Store(t)
	ctx := context.Background()
	acct, other := ledgertest.Account(t, store, 0), ledgertest.Account(t, store, 5)
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	for _, c := range []ledgerdb.Credit{
		{AccountID: acct, Amount: 70, Key: "bought", Block: ledgerdb.BlockTerms{CostBasis: "0.02", ExpiresAt: &expires}},
		{AccountID: acct, Amount: 30, Key: "welcome", Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, Priority: 3}},
	} {
		_, err := store.Grant(ctx, c)
		require.NoError(t, err)
	}
	created, err := apikeys.NewStore(store.Pool()).Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomerRead, AccountID: acct, Name: "credit reads"})
	require.NoError(t, err)
	srv, requests := serveAccounts(t, store)
	c := &apiclient.Client{BaseURL: srv.URL, Key: created.Secret}

	list, err := c.Blocks(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, acct, list.AccountID)
	var granted []apitype.Block
	var held int64
	for _, b := range list.Blocks {
		held += b.Remaining
		if !b.Opening {
			granted = append(granted, b)
		}
	}
	require.Len(t, granted, 2)
	require.Equal(t, []string{"promotional", "paid"}, []string{granted[0].Category, granted[1].Category}, "promotional credits are spent first")
	require.Equal(t, int32(3), granted[0].Priority)
	require.Equal(t, "0.02", granted[1].CostBasis)
	require.True(t, expires.Equal(*granted[1].ExpiresAt))
	require.True(t, granted[1].Spendable)
	require.Equal(t, int64(100), held, "the blocks hold the balance")

	st, err := c.Statement(ctx, acct, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []apitype.StatementLine{
		{Kind: "grant", Category: "paid", Rows: 1, Amount: 70},
		{Kind: "grant", Category: "promotional", Rows: 1, Amount: 30},
	}, st.Lines)
	require.Equal(t, int64(0), st.Opening)
	require.Equal(t, int64(100), st.Closing)
	require.Equal(t, "provisional", st.Status)

	sent := requests.Load()
	_, err = c.Statement(ctx, acct, time.Now(), time.Now().Add(-time.Hour))
	require.ErrorIs(t, err, apiclient.ErrInvalidInput)
	require.Equal(t, sent, requests.Load(), "a period that holds no time is refused before anything is sent")
	_, err = c.Blocks(ctx, other)
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.StatusCode)
}
