package main

// The credit commands, black-box (see cliEnv).

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestGrantWithBlockTerms checks `jobbill account grant` with a credit block's terms: the terms
// make the block `account blocks` lists, promotional first (the order of spending); each bad term
// fails naming it and writes nothing — a cost basis that is a fraction, hex, finer than the 18
// decimals the ledger keeps or of 10^20 or more among them; the same key with other terms is a
// conflict, with the same terms already_applied (the idempotent-doors rule), a cost basis written
// with an exponent too.
func TestGrantWithBlockTerms(t *testing.T) {
	e := newCLIEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)
	expires := time.Now().Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339)
	before := rows(t, e, acct)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--category", "gift"}, "invalid category"},
		{[]string{"--priority", "1.5"}, `"--priority"`},
		{[]string{"--expires-at", "next year"}, `--expires-at "next year"`},
		{[]string{"--effective-at", "2027-02-30T00:00:00Z"}, "--effective-at"},
		{[]string{"--expires-at", "2020-01-01T00:00:00Z"}, "invalid expires_at"},
		{[]string{"--cost-basis", "-1"}, "invalid cost_basis"},
		{[]string{"--cost-basis", "1/3"}, "invalid cost_basis"},
		{[]string{"--cost-basis", "0x10/1"}, "invalid cost_basis"},
		{[]string{"--cost-basis", "3.3333333333333335e-07"}, "invalid cost_basis"},
		{[]string{"--cost-basis", "1e20"}, "invalid cost_basis"},
		{[]string{"--category", "promotional", "--cost-basis", "0.01"}, "invalid cost_basis"},
	} {
		out, err := e.run(t, append([]string{"account", "grant", acct, "50", "--key", "bad"}, tc.args...)...)
		require.Error(t, err, "grant %v:\n%s", tc.args, out)
		require.Contains(t, err.Error(), tc.says)
	}
	require.Equal(t, before, rows(t, e, acct), "a refused grant writes nothing")

	paid := []string{"account", "grant", acct, "100", "--key", "invoice-3", "--cost-basis", "0.01", "--expires-at", expires, "--priority", "2"}
	require.Contains(t, e.ok(t, paid...), ": applied")
	require.Contains(t, e.ok(t, paid...), ": already_applied")
	require.Contains(t, e.ok(t, "account", "grant", acct, "20", "--key", "welcome", "--category", "promotional"), ": applied")
	tiny := []string{"account", "grant", acct, "10", "--key", "invoice-4", "--cost-basis", "1e-11"}
	require.Contains(t, e.ok(t, tiny...), ": applied")
	require.Contains(t, e.ok(t, tiny...), ": already_applied", "1e-11 is kept as written, not as 0")
	before = rows(t, e, acct)
	_, err := e.run(t, "account", "grant", acct, "100", "--key", "invoice-3", "--cost-basis", "0.02", "--expires-at", expires, "--priority", "2")
	require.ErrorIs(t, err, ledgerdb.ErrConflict, "the same key with another cost basis")
	require.Equal(t, before, rows(t, e, acct), "a conflicting grant writes nothing")

	out := e.ok(t, "account", "blocks", acct)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, `^BLOCK\s+CATEGORY\s+PRIORITY`, lines[0])
	require.Regexp(t, `^\d+\s+promotional\s+0\s+20\s+20\s+\S+\s+never\s+-\s+active\s+true\s+$`, lines[1], out)
	require.Regexp(t, `^\d+\s+paid\s+0\s+0\s+0\s+\S+\s+never\s+-\s+active, opening\s+false\s+`, lines[2], out)
	require.Regexp(t, `^\d+\s+paid\s+0\s+10\s+10\s+\S+\s+never\s+0\.00000000001\s+active\s+true\s*$`, lines[3], out)
	require.Regexp(t, `^\d+\s+paid\s+2\s+100\s+100\s+\S+\s+`+expires+`\s+0.01\s+active\s+true\s*$`, lines[4], out)
	_, err = e.run(t, "account", "blocks", ledgertest.ID(t, "ghost"))
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
}

// rows are the account's ledger rows.
func rows(t *testing.T, e *cliEnv, account string) []ledgerdb.Entry {
	t.Helper()
	h, err := e.Store.History(context.Background(), account, ledgerdb.HistoryPage{Limit: 1000})
	require.NoError(t, err)
	return h.Entries
}

// TestStatementAndRevenueCommands checks `jobbill account statement` and `jobbill revenue`: the
// statement of two adjacent periods adds up (opening + lines = closing) and chains (the first's
// closing is the second's opening), grants split by category, in text and as the CSV every door
// hands out; the revenue report recognises what a delivered job drew on paid credits at their cost
// basis, never what it drew on promotional ones, and reconciles: deferred at the start + granted −
// recognised − lapsed + adjusted = deferred at the end. A period that holds no time or does not
// parse fails naming it.
func TestStatementAndRevenueCommands(t *testing.T) {
	e := newCLIEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)
	now := func() time.Time { return ledgertest.Now(t, e.Store) }
	start := now()
	e.ok(t, "account", "grant", acct, "200", "--key", "invoice-1", "--cost-basis", "0.05")
	e.ok(t, "account", "grant", acct, "10", "--key", "welcome", "--category", "promotional")
	middle := now()
	job := ledgertest.Charged(t, e.Store, acct, ledgertest.ID(t, "job"), 30, "s3://in/cli").Job.Key() // 10 promotional, 20 paid
	_, err := e.Store.Settle(context.Background(), job, 1, nil, "s3://out/cli")                       // delivered: revenue
	require.NoError(t, err)
	end := now().Add(time.Hour)
	at := func(t time.Time) string { return t.Format(time.RFC3339Nano) }

	first := e.ok(t, "account", "statement", acct, "--from", at(start), "--to", at(middle))
	require.Regexp(t, `opening balance\s+0\n`, first)
	require.Regexp(t, `grant:paid\s+1 rows\s+\+200\n`, first)
	require.Regexp(t, `grant:promotional\s+1 rows\s+\+10\n`, first)
	require.Regexp(t, `closing balance\s+210\n`, first)
	second := e.ok(t, "account", "statement", acct, "--from", at(middle), "--to", at(end), "--csv")
	_, opening, lines, closing := ledgertest.StatementCSV(t, second)
	require.Equal(t, int64(210), opening, "the second period opens on the first's closing")
	require.Equal(t, closing, opening+lines, second)
	require.Equal(t, int64(180), closing)

	var r ledgerdb.Revenue
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "revenue", "--from", at(start), "--to", at(end), "--account", acct, "--json")), &r))
	require.Equal(t, ledgerdb.Money{Credits: 200, Amount: "10"}, r.Granted)
	require.Equal(t, ledgerdb.Money{Credits: 20, Amount: "1"}, r.Recognised, "20 paid credits at 0.05")
	require.Equal(t, ledgerdb.Money{Credits: 180, Amount: "9"}, r.DeferredClosing)
	require.Equal(t, int64(10), r.PromotionalSpent)
	require.Equal(t, r.DeferredClosing.Credits, r.DeferredOpening.Credits+r.Granted.Credits-r.Recognised.Credits-r.Lapsed.Credits+r.Adjusted.Credits)
	text := e.ok(t, "revenue", "--from", at(start), "--to", at(end), "--account", acct)
	require.Regexp(t, `− recognised\s+20\s+1\s`, text)
	require.Regexp(t, `promotional spent \(not revenue\)\s+10\s`, text)
	// Every account's report: other tests' accounts in the shared database hold up to the maximum
	// balance each, so it may instead say that its credits pass what a figure holds.
	if out, err := e.run(t, "revenue", "--from", "2020-01-01", "--to", at(end)); err != nil {
		require.ErrorContains(t, err, "report on one account at a time")
	} else {
		require.Contains(t, out, "= deferred at end", "every account's report")
	}

	for _, args := range [][]string{
		{"account", "statement", acct, "--from", at(middle), "--to", at(start)},
		{"revenue", "--from", at(middle), "--to", at(middle)},
	} {
		_, err := e.run(t, args...)
		require.ErrorContains(t, err, "its start must be before its end", "%v", args)
	}
	_, err = e.run(t, "revenue", "--from", "last week", "--to", at(end))
	require.ErrorContains(t, err, `invalid --from: is "last week"`)
	_, err = e.run(t, "account", "statement", acct, "--from", "2020-01-01")
	require.ErrorContains(t, err, `required flag(s) "to" not set`)
}
