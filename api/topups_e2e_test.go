package api_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestTopUpRuleAtTheDoor checks the automatic top-up rule as raw HTTP brings it, from any
// language: an admin sets it (amounts written 5000.0 or 5e3 are the integers, as at every door),
// the account's customer reads it, and a rule that could never work — an unknown mode, a zero
// amount or cap, a target not above its threshold, a fractional amount — is 400 naming the field,
// nothing written; removing it answers what the removal did, applied and then already_applied (the
// idempotent-doors rule), and no rule, so that every answer is one its schema allows; removing
// the rule of an account that does not exist is 404.
func TestTopUpRuleAtTheDoor(t *testing.T) {
	t.Parallel()
	e := newSite(t, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	customer := e.key(t, apikeys.ScopeCustomer, e.acct)
	rule := "/v1/accounts/" + e.acct + "/topup-rule"

	require.Equal(t, 404, call(t, e.base, "GET", rule, customer, nil).code, "no rule yet")
	for _, tc := range []struct{ body, field string }{
		{`{"threshold": 500, "mode": "sometimes", "amount": 5000, "monthly_cap": 20000}`, "mode"},
		{`{"threshold": 500, "mode": "fixed", "amount": 0, "monthly_cap": 20000}`, "amount"},
		{`{"threshold": 500, "mode": "fixed", "amount": 5000, "monthly_cap": 0}`, "monthly_cap"},
		{`{"threshold": 500, "mode": "target", "amount": 500, "monthly_cap": 20000}`, "amount"},
		{`{"threshold": 500, "mode": "fixed", "amount": 50.5, "monthly_cap": 20000}`, "amount"},
	} {
		a := call(t, e.base, "PUT", rule, admin, tc.body)
		require.Equal(t, 400, a.code, "%s: %s", tc.body, a.raw)
		require.Contains(t, a.str("message"), `"`+tc.field+`"`, "the refusal names the field: %s", tc.body)
	}
	require.Equal(t, 404, call(t, e.base, "GET", rule, customer, nil).code, "a refused rule is not written")

	set := call(t, e.base, "PUT", rule, admin, `{"threshold": 500.0, "mode": "target", "amount": 5e3, "monthly_cap": 20000}`)
	require.Equal(t, 200, set.code, set.raw)
	require.Equal(t, "applied", set.str("outcome"))
	again := call(t, e.base, "PUT", rule, admin, `{"threshold": 500, "mode": "target", "amount": 5000, "monthly_cap": 20000}`)
	require.Equal(t, "already_applied", again.str("outcome"))
	got := call(t, e.base, "GET", rule, customer, nil)
	require.Equal(t, 200, got.code, got.raw)
	require.JSONEq(t, `{"account_id": "`+e.acct+`", "threshold": 500, "mode": "target", "amount": 5000, "monthly_cap": 20000}`, got.raw)
	require.Equal(t, 403, call(t, e.base, "PUT", rule, customer, `{"threshold": 1, "mode": "fixed", "amount": 1, "monthly_cap": 1}`).code,
		"a customer cannot set its own rule")

	// Removing answers what it did and no rule: the rule is gone, and a rule of mode "" and amount
	// 0 is one its own schema refuses.
	removed := call(t, e.base, "DELETE", rule, admin, nil)
	require.Equal(t, 200, removed.code, removed.raw)
	require.JSONEq(t, `{"account_id": "`+e.acct+`", "outcome": "applied"}`, removed.raw)
	removed = call(t, e.base, "DELETE", rule, admin, nil)
	require.Equal(t, 200, removed.code, removed.raw)
	require.JSONEq(t, `{"account_id": "`+e.acct+`", "outcome": "already_applied"}`, removed.raw)
	require.Equal(t, 404, call(t, e.base, "GET", rule, customer, nil).code)
	ghost := call(t, e.base, "DELETE", "/v1/accounts/"+ledgertest.ID(t, "ghost")+"/topup-rule", admin, nil)
	require.Equal(t, 404, ghost.code, ghost.raw)
	require.Equal(t, "unknown_account", ghost.str("code"))
}

// TestPendingGrantAtTheDoor checks a grant posted before its payment is confirmed: it answers
// pending with no row and the balance unchanged (nothing the customer cannot spend); settling it
// paid writes the grant's row once (a repeat answers it again), settling it the other way is 409,
// and a failed payment voids another, nothing written; a settlement without "paid" is 400 and an
// unknown key 404 (the idempotent-doors rule).
func TestPendingGrantAtTheDoor(t *testing.T) {
	t.Parallel()
	e := newSite(t, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	grants := "/v1/accounts/" + e.acct + "/grants"

	posted := call(t, e.base, "POST", grants, admin, `{"amount": 200, "key": "topup-1", "memo": "card", "pending": true}`)
	require.Equal(t, 201, posted.code, posted.raw)
	require.Equal(t, "true", posted.str("pending"))
	require.Equal(t, "0", posted.str("entry_id"))
	rowsBefore := e.rows(t, e.acct)
	ledgertest.RequireBalance(t, e.Store, e.acct, 0)

	require.Equal(t, 400, call(t, e.base, "POST", grants+"/topup-1/settle", admin, `{}`).code)
	require.Equal(t, 404, call(t, e.base, "POST", grants+"/no-such-key/settle", admin, `{"paid": true}`).code)
	paid := call(t, e.base, "POST", grants+"/topup-1/settle", admin, `{"paid": true}`)
	require.Equal(t, 200, paid.code, paid.raw)
	require.Equal(t, "applied", paid.str("outcome"))
	require.Equal(t, "200", paid.str("balance_after"))
	repeat := call(t, e.base, "POST", grants+"/topup-1/settle", admin, `{"paid": true}`)
	require.Equal(t, "already_applied", repeat.str("outcome"))
	require.Equal(t, paid.str("entry_id"), repeat.str("entry_id"))
	require.Equal(t, 409, call(t, e.base, "POST", grants+"/topup-1/settle", admin, `{"paid": false}`).code)
	require.Len(t, e.rows(t, e.acct), len(rowsBefore)+1, "one grant row, once")

	require.Equal(t, 201, call(t, e.base, "POST", grants, admin, `{"amount": 300, "key": "topup-2", "pending": true}`).code)
	require.Equal(t, "applied", call(t, e.base, "POST", grants+"/topup-2/settle", admin, `{"paid": false}`).str("outcome"))
	require.Equal(t, 409, call(t, e.base, "POST", grants+"/topup-2/settle", admin, `{"paid": true}`).code)
	ledgertest.RequireBalance(t, e.Store, e.acct, 200)
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestCustomerReplayBuysNothingForOldSpending checks the replay door a customer's own key opens
// (POST /v1/accounts/{id}/webhooks/{endpoint}/replay, which derives the events no pass wrote):
// debits that crossed the threshold before the account's top-up rule existed ask for nothing when
// the customer replays everything since long ago — a replay never buys credits for old spending.
func TestCustomerReplayBuysNothingForOldSpending(t *testing.T) {
	t.Parallel()
	e := newSite(t, 1000)
	ctx := context.Background()
	admin := e.key(t, apikeys.ScopeAdmin, "")
	customer := e.key(t, apikeys.ScopeCustomer, e.acct)
	for i := range 3 { // 1000 -> 400 each time: crosses 500, then granted back
		ledgertest.Charged(t, e.Store, e.acct, ledgertest.ID(t, "job"), 600, "s3://in/"+strconv.Itoa(i))
		_, err := e.Store.Grant(ctx, ledgerdb.Credit{AccountID: e.acct, Amount: 600, Key: "back-" + strconv.Itoa(i)})
		require.NoError(t, err)
	}

	rule := call(t, e.base, "PUT", "/v1/accounts/"+e.acct+"/topup-rule", admin, `{"threshold": 500, "mode": "fixed", "amount": 500, "monthly_cap": 1500}`)
	require.Equal(t, 200, rule.code, rule.raw)
	hooks := "/v1/accounts/" + e.acct + "/webhooks"
	created := call(t, e.base, "POST", hooks, customer, map[string]any{"url": "https://hooks.example.com/" + e.acct})
	require.Equal(t, 201, created.code, created.raw)
	replayed := call(t, e.base, "POST", hooks+"/"+created.str("id")+"/replay", customer, map[string]any{"since": "2000-01-01T00:00:00Z"})
	require.Equal(t, 202, replayed.code, replayed.raw)

	evs, err := webhooks.NewStore(e.Store.Pool()).Events(ctx, e.acct, 0, 1000)
	require.NoError(t, err)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Type)
	}
	require.Contains(t, kinds, "job.charged", "the history was replayed")
	require.NotContains(t, kinds, "topup.requested", "no top-up for spending from before the rule")
}

// TestPendingGrantPaidAfterItsExpiryAtTheDoor checks a payment confirmed only after the pending
// grant's expiry: the grant is voided (its credits could only have lapsed) and the answer says so
// — 409 grant_expired, naming the expiry and the void, never "nothing was written" — and says the
// same to every retry of the confirmation, not that it was settled the other way; a failed payment
// reported after it finds the grant void, as it asks: 200 already_applied. No row, no credits.
func TestPendingGrantPaidAfterItsExpiryAtTheDoor(t *testing.T) {
	t.Parallel()
	e := newSite(t, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	grants := "/v1/accounts/" + e.acct + "/grants"
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	require.Equal(t, 201, call(t, e.base, "POST", grants, admin, `{"amount": 200, "key": "topup-late", "pending": true, "expires_at": "`+expires+`"}`).code)
	_, err := ledgertest.OwnerPool(t).Exec(context.Background(), `UPDATE credit_blocks SET effective_at = now() - interval '2 hours',
		expires_at = now() - interval '1 hour' WHERE account_id = $1 AND idempotency_key = 'topup-late'`, e.acct)
	require.NoError(t, err)
	rowsBefore := e.rows(t, e.acct)

	for range 2 {
		late := call(t, e.base, "POST", grants+"/topup-late/settle", admin, `{"paid": true}`)
		require.Equal(t, 409, late.code, late.raw)
		require.Equal(t, "grant_expired", late.str("code"))
		require.Contains(t, late.str("message"), "expiry passed before its payment was confirmed")
		require.Contains(t, late.str("message"), "voided")
		require.NotContains(t, late.str("message"), "Nothing was written")
		require.NotContains(t, late.str("message"), "other way")
	}
	failed := call(t, e.base, "POST", grants+"/topup-late/settle", admin, `{"paid": false}`)
	require.Equal(t, 200, failed.code, failed.raw)
	require.Equal(t, "already_applied", failed.str("outcome"))
	require.Equal(t, rowsBefore, e.rows(t, e.acct), "no row")
	ledgertest.RequireBalance(t, e.Store, e.acct, 0)
	ledgertest.RequireSound(t, e.Store, e.acct)
}
