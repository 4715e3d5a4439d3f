package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestTopUpCommands checks `jobbill account topup-rule` and a grant pending its payment through
// the CLI, as an operator types them: a rule that could never work, or a count that is no number,
// is refused with nothing written; the rule is set, shown and removed, each idempotent; a pending
// grant holds nothing until settle-grant says it was paid, once (the idempotent-doors rule), and a
// settlement the other way is refused.
func TestTopUpCommands(t *testing.T) {
	e := newCLIEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)

	_, err := e.run(t, "account", "topup-rule", "set", acct, "--threshold", "500", "--mode", "target", "--amount", "400", "--monthly-cap", "1000")
	require.ErrorContains(t, err, "amount", "a target not above its threshold")
	_, err = e.run(t, "account", "topup-rule", "set", acct, "--threshold", "five", "--mode", "fixed", "--amount", "400", "--monthly-cap", "1000")
	require.ErrorContains(t, err, "--threshold")
	require.Contains(t, e.ok(t, "account", "topup-rule", "show", acct), "has no automatic top-up rule", "nothing was written")

	require.Contains(t, e.ok(t, "account", "topup-rule", "set", acct, "--threshold", "500", "--mode", "target", "--amount", "5000", "--monthly-cap", "20000"), "(applied)")
	require.Contains(t, e.ok(t, "account", "topup-rule", "set", acct, "--threshold", "500", "--mode", "target", "--amount", "5000", "--monthly-cap", "20000"), "(already_applied)")
	require.Contains(t, e.ok(t, "account", "topup-rule", "show", acct), "below 500, target 5000, at most 20000 a month")
	require.Contains(t, e.ok(t, "account", "topup-rule", "remove", acct), "(applied)")
	require.Contains(t, e.ok(t, "account", "topup-rule", "remove", acct), "(already_applied)")

	require.Contains(t, e.ok(t, "account", "grant", acct, "200", "--key", "card-1", "--pending"), "pending its payment")
	ledgertest.RequireBalance(t, e.Store, acct, 0)
	_, err = e.run(t, "account", "settle-grant", acct, "card-1")
	require.ErrorContains(t, err, "--paid")
	require.Contains(t, e.ok(t, "account", "settle-grant", acct, "card-1", "--paid"), "paid: applied")
	require.Contains(t, e.ok(t, "account", "settle-grant", acct, "card-1", "--paid"), "paid: already_applied")
	_, err = e.run(t, "account", "settle-grant", acct, "card-1", "--failed")
	require.Error(t, err, "a paid grant cannot be voided")
	ledgertest.RequireBalance(t, e.Store, acct, 200)
	ledgertest.RequireSound(t, e.Store, acct)
}
