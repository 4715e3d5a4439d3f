package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestGrantsBalanceAndLedgerPages checks top-ups (idempotent by key: the idempotent-doors rule; a
// different amount under the key is 409), the balance (the sum-of-rows rule: the sum of the rows)
// and the ledger's pages.
func TestGrantsBalanceAndLedgerPages(t *testing.T) {
	t.Parallel()
	e := newSite(t, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	path := "/v1/accounts/" + e.acct
	a := call(t, e.base, "POST", path+"/grants", admin, map[string]any{"amount": 50, "key": "invoice-1", "memo": "first"})
	require.Equal(t, 201, a.code, a.raw)
	b := call(t, e.base, "POST", path+"/grants", admin, map[string]any{"amount": 50, "key": "invoice-1", "memo": "first"})
	require.Equal(t, 200, b.code, b.raw)
	require.Equal(t, a.str("entry_id"), b.str("entry_id"))
	require.Equal(t, 409, call(t, e.base, "POST", path+"/grants", admin, map[string]any{"amount": 51, "key": "invoice-1"}).code)
	require.Equal(t, 201, call(t, e.base, "POST", path+"/grants", admin, map[string]any{"amount": 7, "key": "invoice-2"}).code)
	require.Equal(t, 404, call(t, e.base, "POST", "/v1/accounts/"+ledgertest.ID(t, "ghost")+"/grants", admin, map[string]any{"amount": 1, "key": "k"}).code)

	a = call(t, e.base, "GET", path, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "57", a.str("balance"))
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/accounts/"+ledgertest.ID(t, "ghost"), admin, nil).code)

	first := call(t, e.base, "GET", path+"/ledger?limit=1", admin, nil)
	require.Equal(t, 200, first.code, first.raw)
	require.Len(t, first.body["entries"], 1)
	require.NotEqual(t, "0", first.str("next_after"))
	second := call(t, e.base, "GET", path+"/ledger?limit=1&after="+first.str("next_after"), admin, nil)
	require.Equal(t, 200, second.code, second.raw)
	require.Len(t, second.body["entries"], 1)
	require.Equal(t, "0", second.str("next_after"))
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/accounts/"+ledgertest.ID(t, "ghost")+"/ledger", admin, nil).code)
	ledgertest.RequireSound(t, e.Store, e.acct)
}
