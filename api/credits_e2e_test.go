package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestGrantBlockTermsAtTheDoor checks a grant's block terms as raw HTTP brings them, from any
// language: the terms make the block (a priority written 1.0 or 1e0 is the integer 1, as every
// integer at every door); each bad term — an unknown category, a fractional or quoted priority, a
// time that is not RFC 3339, an expiry in the past or before the start, a cost basis that is no
// non-negative decimal or is set on promotional credits — is 400 naming the field, and writes
// nothing: no row, no block. The same key with the same terms answers the first grant; with
// other terms it is 409 conflict, nothing written (the idempotent-doors rule).
func TestGrantBlockTermsAtTheDoor(t *testing.T) {
	t.Parallel()
	e := newSite(t, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	grants := "/v1/accounts/" + e.acct + "/grants"
	expires := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

	rowsBefore, blocksBefore := e.rows(t, e.acct), e.blocks(t, e.acct)
	for _, tc := range []struct{ body, field string }{
		{`{"amount": 10, "key": "bad", "category": "gift"}`, "category"},
		{`{"amount": 10, "key": "bad", "priority": 1.5}`, "priority"},
		{`{"amount": 10, "key": "bad", "priority": "1"}`, "priority"},
		{`{"amount": 10, "key": "bad", "priority": 1e10}`, "priority"},
		{`{"amount": 10, "key": "bad", "effective_at": "tomorrow"}`, "effective_at"},
		{`{"amount": 10, "key": "bad", "expires_at": "2027-13-01T00:00:00Z"}`, "expires_at"},
		{`{"amount": 10, "key": "bad", "expires_at": "` + past + `"}`, "expires_at"},
		{fmt.Sprintf(`{"amount": 10, "key": "bad", "effective_at": %q, "expires_at": %q}`,
			expires.Add(time.Hour).Format(time.RFC3339), expires.Format(time.RFC3339)), "expires_at"},
		{`{"amount": 10, "key": "bad", "cost_basis": "-0.01"}`, "cost_basis"},
		{`{"amount": 10, "key": "bad", "cost_basis": "a penny"}`, "cost_basis"},
		{`{"amount": 10, "key": "bad", "cost_basis": 0.01}`, "cost_basis"},
		{`{"amount": 10, "key": "bad", "category": "promotional", "cost_basis": "0.01"}`, "cost_basis"},
	} {
		a := call(t, e.base, "POST", grants, admin, tc.body)
		requireInvalid(t, a, tc.field, tc.body)
		require.Contains(t, a.str("message"), "Nothing was written", tc.body)
	}
	require.Equal(t, rowsBefore, e.rows(t, e.acct), "a refused grant writes no row")
	require.Equal(t, blocksBefore, e.blocks(t, e.acct), "a refused grant makes no block")

	paid := fmt.Sprintf(`{"amount": 100, "key": "invoice-9", "category": "paid", "priority": 1.0, "expires_at": %q, "cost_basis": "0.0125"}`,
		expires.Format(time.RFC3339))
	a := call(t, e.base, "POST", grants, admin, paid)
	require.Equal(t, 201, a.code, a.raw)
	again := call(t, e.base, "POST", grants, admin, paid)
	require.Equal(t, 200, again.code, again.raw)
	require.Equal(t, a.str("entry_id"), again.str("entry_id"), "the same key and terms answer the first grant")
	a = call(t, e.base, "POST", grants, admin, `{"amount": 20, "key": "welcome", "category": "promotional", "priority": 1e0}`)
	require.Equal(t, 201, a.code, a.raw)

	rowsBefore, blocksBefore = e.rows(t, e.acct), e.blocks(t, e.acct)
	for _, other := range []string{
		fmt.Sprintf(`{"amount": 100, "key": "invoice-9", "category": "paid", "priority": 2, "expires_at": %q, "cost_basis": "0.0125"}`, expires.Format(time.RFC3339)),
		fmt.Sprintf(`{"amount": 100, "key": "invoice-9", "category": "paid", "priority": 1, "expires_at": %q, "cost_basis": "0.02"}`, expires.Format(time.RFC3339)),
		`{"amount": 100, "key": "invoice-9", "category": "paid", "priority": 1, "cost_basis": "0.0125"}`,
		`{"amount": 20, "key": "welcome"}`,
	} {
		a := call(t, e.base, "POST", grants, admin, other)
		require.Equal(t, 409, a.code, "%s: %s", other, a.raw)
		require.Equal(t, "conflict", a.str("code"))
		require.Contains(t, a.str("message"), "other block terms")
	}
	require.Equal(t, rowsBefore, e.rows(t, e.acct), "a conflicting grant writes no row")
	require.Equal(t, blocksBefore, e.blocks(t, e.acct), "a conflicting grant makes no block")

	got := e.blocks(t, e.acct)
	var granted []ledgerdb.Block
	for _, b := range got {
		if !b.Opening {
			granted = append(granted, b)
		}
	}
	require.Len(t, granted, 2)
	require.Equal(t, ledgerdb.CategoryPromotional, granted[0].Category, "promotional credits are spent first")
	require.Equal(t, int32(1), granted[0].Priority, "1e0 is the integer 1")
	require.Equal(t, ledgerdb.CategoryPaid, granted[1].Category)
	require.Equal(t, int32(1), granted[1].Priority, "1.0 is the integer 1")
	require.Equal(t, "0.0125", granted[1].CostBasis)
	require.True(t, expires.Equal(*granted[1].ExpiresAt))
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestCostBasisAtTheDoor checks a grant's cost basis as programs write decimals into the JSON
// string it is sent as: Python's str(1/3000000) is "3.3333333333333335e-07", JavaScript's
// String(1/3000000) "3.3333333333333335e-7", both with more decimals (23) than the ledger keeps
// (18), so they are refused rather than stored rounded — a block must keep the price that was paid,
// and a retry must find it; a fraction ("1/3"), hex, NaN, Infinity, a negative or a value of 10^20
// or more is refused too, each 400 naming cost_basis, never a 500 or words about the balance, and
// nothing is written. What it keeps exactly is stored as written ("1e-11" is 0.00000000001, not 0)
// and the retry with the same written form answers the first grant, 200 (the idempotent-doors
// rule) — also once the block's expiry has passed.
func TestCostBasisAtTheDoor(t *testing.T) {
	t.Parallel()
	e := newSite(t, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	grants := "/v1/accounts/" + e.acct + "/grants"

	rowsBefore, blocksBefore := e.rows(t, e.acct), e.blocks(t, e.acct)
	for _, written := range []string{"1/3", "0x10/1", "3.3333333333333335e-07", "3.3333333333333335e-7", "1e-19", "NaN",
		"Infinity", "1e20", "100000000000000000000", "-0.01", "1e999999999"} {
		a := call(t, e.base, "POST", grants, admin, `{"amount": 10, "key": "bad", "cost_basis": "`+written+`"}`)
		requireInvalid(t, a, "cost_basis", written)
		require.Contains(t, a.str("message"), "Nothing was written", written)
		require.NotContains(t, a.str("message"), "balance", written)
	}
	require.Equal(t, rowsBefore, e.rows(t, e.acct), "a refused cost basis writes no row")
	require.Equal(t, blocksBefore, e.blocks(t, e.acct), "a refused cost basis makes no block")

	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i, tc := range []struct{ written, stored string }{
		{"1e-11", "0.00000000001"},
		{"3.33333333333e-07", "0.000000333333333333"},
		{"0.010", "0.01"},
	} {
		key := fmt.Sprintf("invoice-%d", i)
		body := fmt.Sprintf(`{"amount": 10, "key": %q, "cost_basis": %q, "expires_at": %q}`, key, tc.written, expires)
		first := call(t, e.base, "POST", grants, admin, body)
		require.Equal(t, 201, first.code, "%s: %s", tc.written, first.raw)
		again := call(t, e.base, "POST", grants, admin, body)
		require.Equal(t, 200, again.code, "%s: %s", tc.written, again.raw)
		require.Equal(t, first.str("entry_id"), again.str("entry_id"), tc.written)
		for _, b := range e.blocks(t, e.acct) {
			if b.Key == key {
				require.Equal(t, tc.stored, b.CostBasis, tc.written)
			}
		}
	}

	// The block's clock moves on past its expiry: the same grant again is still the same grant.
	var expired time.Time
	require.NoError(t, ledgertest.OwnerPool(t).QueryRow(context.Background(), `UPDATE credit_blocks SET effective_at = now() - interval '2 hours',
		expires_at = now() - interval '1 hour' WHERE account_id = $1 AND idempotency_key = 'invoice-0' RETURNING expires_at`, e.acct).Scan(&expired))
	retry := call(t, e.base, "POST", grants, admin, fmt.Sprintf(`{"amount": 10, "key": "invoice-0", "cost_basis": "1e-11", "expires_at": %q}`,
		expired.UTC().Format(time.RFC3339Nano)))
	require.Equal(t, 200, retry.code, retry.raw)
	require.Equal(t, "already_applied", retry.str("outcome"))
	ledgertest.RequireBalance(t, e.Store, e.acct, 30)
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// blocks are the account's credit blocks as the ledger has them.
func (e *env) blocks(t *testing.T, account string) []ledgerdb.Block {
	t.Helper()
	b, err := e.Store.Blocks(context.Background(), account)
	require.NoError(t, err)
	return b
}

// TestBlocksStatementAndRevenueAtTheDoor checks the reads of credits at the HTTP door: an
// account's blocks in the order a charge spends them (promotional first), each saying what it
// holds and whether it can be spent, summing to the balance (the sum-of-rows rule); its statement
// in JSON and CSV, where opening + lines = closing in each of two adjacent periods and the first's
// closing is the second's opening, grants split by category and charges by job kind; and the
// revenue report, where the job's draw on paid credits is recognised at their cost basis and what
// it drew on promotional ones is not revenue. A customer reads its own account only; the revenue
// report is admin only; a bad period is 400 and an unknown account 404.
func TestBlocksStatementAndRevenueAtTheDoor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct, other := ledgertest.Account(t, e.Store, 0), ledgertest.Account(t, e.Store, 0)
	admin, reader := e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeCustomerRead, acct)
	customer, stranger := e.key(t, apikeys.ScopeCustomer, acct), e.key(t, apikeys.ScopeCustomer, other)
	base := e.serve(t, nil)
	now := func() time.Time { return ledgertest.Now(t, e.Store) }
	start := now()
	require.Equal(t, 201, call(t, base, "POST", "/v1/accounts/"+acct+"/grants", admin,
		`{"amount": 100, "key": "invoice-1", "cost_basis": "0.01"}`).code)
	require.Equal(t, 201, call(t, base, "POST", "/v1/accounts/"+acct+"/grants", admin,
		`{"amount": 20, "key": "welcome", "category": "promotional"}`).code)
	middle := now()
	kind := e.fixed(t, 30)
	id := ledgertest.ID(t, "job")
	requireCharged(t, submit(t, base, customer, job(id, acct, kind, "sim:ok")))
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	end := now().Add(time.Hour)

	// The blocks, promotional first: the job's 30 took all 20 of it, then 10 paid credits.
	a := call(t, base, "GET", "/v1/accounts/"+acct+"/blocks", reader, nil)
	require.Equal(t, 200, a.code, a.raw)
	list, _ := a.body["blocks"].([]any)
	var remaining float64
	var shown []string
	for _, item := range list {
		b := item.(map[string]any)
		remaining += b["remaining"].(float64)
		if b["opening"] == true {
			continue
		}
		shown = append(shown, fmt.Sprintf("%v %v/%v %v spendable=%v", b["category"], b["remaining"], b["amount"], b["cost_basis"], b["spendable"]))
	}
	require.Equal(t, []string{"promotional 0/20 <nil> spendable=false", "paid 90/100 0.01 spendable=true"}, shown, a.raw)
	require.Equal(t, float64(e.balance(t, acct)), remaining, "the blocks hold the balance")
	require.Equal(t, 403, call(t, base, "GET", "/v1/accounts/"+acct+"/blocks", stranger, nil).code)
	require.Equal(t, 404, call(t, base, "GET", "/v1/accounts/"+ledgertest.ID(t, "ghost")+"/blocks", admin, nil).code)

	// The statement of two adjacent periods, in JSON.
	period := func(from, to time.Time) string {
		return "from=" + url.QueryEscape(from.Format(time.RFC3339Nano)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339Nano))
	}
	statement := "/v1/accounts/" + acct + "/statement?"
	first := call(t, base, "GET", statement+period(start, middle), reader, nil)
	require.Equal(t, 200, first.code, first.raw)
	second := call(t, base, "GET", statement+period(middle, end), reader, nil)
	require.Equal(t, 200, second.code, second.raw)
	for _, st := range []answer{first, second} {
		sum, _ := strconv.ParseInt(st.str("opening"), 10, 64)
		for _, line := range st.body["lines"].([]any) {
			sum += int64(line.(map[string]any)["amount"].(float64))
		}
		require.Equal(t, st.str("closing"), strconv.FormatInt(sum, 10), "opening + lines = closing: %s", st.raw)
	}
	require.Equal(t, first.str("closing"), second.str("opening"), "periods that meet chain")
	require.Equal(t, "0", first.str("opening"))
	require.Equal(t, strconv.FormatInt(e.balance(t, acct), 10), second.str("closing"))
	require.JSONEq(t, `[{"kind":"grant","category":"paid","rows":1,"amount":100},{"kind":"grant","category":"promotional","rows":1,"amount":20}]`,
		jsonOf(t, first.body["lines"]))
	require.JSONEq(t, fmt.Sprintf(`[{"kind":"charge","job_kind":%q,"rows":1,"amount":-30}]`, kind), jsonOf(t, second.body["lines"]))
	require.Equal(t, "provisional", second.str("status"), "a period that has not ended")

	// The same statement as CSV.
	r := send(t, base, "GET", statement+period(middle, end)+"&format=csv", reader, nil)
	body := r.body
	require.Equal(t, 200, r.code, body)
	require.Equal(t, "text/csv; charset=utf-8", r.header.Get("Content-Type"))
	require.Contains(t, r.header.Get("Content-Disposition"), "attachment")
	require.Contains(t, r.header.Get("Content-Disposition"), "-provisional.csv")
	records, opening, lines, closing := ledgertest.StatementCSV(t, body)
	require.Equal(t, []string{"rows", "charge:" + kind, "1", "-30"}, records[2], body)
	require.Equal(t, second.str("opening"), strconv.FormatInt(opening, 10))
	require.Equal(t, second.str("closing"), strconv.FormatInt(closing, 10))
	require.Equal(t, closing, opening+lines, "opening + lines = closing in the CSV:\n%s", body)

	// Bad periods and formats are 400, naming what is wrong.
	for path, says := range map[string]string{
		statement + period(middle, start):                     "its start must be before its end",
		statement + period(middle, middle):                    "its start must be before its end",
		statement + "from=yesterday&to=2030-01-01":            `"from"`,
		statement + "from=2020-01-01":                         `"to" is needed`,
		statement + period(start, end) + "&format=xml":        `"format"`,
		"/v1/revenue?from=2030-01-01&to=2020-01-01":           "its start must be before its end",
		"/v1/revenue?from=2020-01-01&to=2030-02-30":           `"to"`,
		"/v1/revenue?" + period(start, end) + "&account_id=-": "account_id",
	} {
		a := call(t, base, "GET", path, admin, nil)
		require.Equal(t, 400, a.code, "%s: %s", path, a.raw)
		require.Contains(t, a.str("message"), says, path)
	}

	// The revenue report: 10 paid credits at 0.01 recognised; the promotional 20 are not revenue.
	revenue := "/v1/revenue?" + period(start, end) + "&account_id=" + acct
	a = call(t, base, "GET", revenue, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "0", a.str("deferred_opening", "credits"))
	require.Equal(t, "100", a.str("granted", "credits"))
	require.Equal(t, "1", a.str("granted", "amount"))
	require.Equal(t, "10", a.str("recognised", "credits"))
	require.Equal(t, "0.1", a.str("recognised", "amount"))
	require.Equal(t, "90", a.str("deferred_closing", "credits"))
	require.Equal(t, "0.9", a.str("deferred_closing", "amount"))
	require.Equal(t, "20", a.str("promotional_spent"))
	split := call(t, base, "GET", "/v1/revenue?"+period(start, middle)+"&account_id="+acct, admin, nil)
	require.Equal(t, 200, split.code, split.raw)
	later := call(t, base, "GET", "/v1/revenue?"+period(middle, end)+"&account_id="+acct, admin, nil)
	require.Equal(t, 200, later.code, later.raw)
	require.Equal(t, split.str("deferred_closing", "amount"), later.str("deferred_opening", "amount"), "periods that meet chain")
	require.Equal(t, 403, call(t, base, "GET", revenue, customer, nil).code, "the revenue report is the operators'")
	require.Equal(t, 404, call(t, base, "GET", "/v1/revenue?"+period(start, end)+"&account_id="+ledgertest.ID(t, "ghost"), admin, nil).code)
	ledgertest.RequireSound(t, e.Store, acct)
}

// jsonOf is v as JSON text.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
