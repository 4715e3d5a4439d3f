package main

// Black-box tests of `jobbill webhook`, run as an operator types it, against the test database.

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestWebhookCommandsRoundTrip checks `jobbill webhook` end to end, and the rules behind it: the
// signing secret is printed once, at creation, and never listed; an internal URL is refused by the
// configuration's default policy with nothing written (SSRF); a threshold is set and removed; a
// replay needs an event of the account; a deletion is idempotent; `failed` lists nothing while no
// delivery was given up.
func TestWebhookCommandsRoundTrip(t *testing.T) {
	e := newCLIEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	store := webhooks.NewStore(e.Store.Pool())

	out, err := e.run(t, "webhook", "create", acct, "https://169.254.169.254/latest/meta-data/")
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "internal")
	eps, err := store.Endpoints(context.Background(), acct)
	require.NoError(t, err)
	require.Empty(t, eps, "nothing was written")

	out = e.ok(t, "webhook", "create", acct, "https://hooks.example.com/jobbill", "--description", "billing")
	require.Contains(t, out, "shown this once")
	secret := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`).FindString(out)
	id := regexp.MustCompile(`we_[0-9a-f]{32}`).FindString(out)
	require.NotEmpty(t, secret, out)
	require.NotEmpty(t, id, out)
	out = e.ok(t, "webhook", "list", acct)
	require.Regexp(t, id+`\s+enabled\s+`, out)
	require.NotContains(t, out, secret, "a list never shows a secret")

	require.Contains(t, e.ok(t, "webhook", "threshold", acct, "50"), "(applied)")
	_, err = e.run(t, "webhook", "threshold", acct, "fifty")
	require.Error(t, err)
	require.Contains(t, e.ok(t, "webhook", "threshold", acct, "none"), "(applied)")

	_, err = e.run(t, "webhook", "replay", acct, id, "--event", "msg_"+"0123456789abcdef0123456789abcdef")
	require.ErrorContains(t, err, "no event")
	_, err = e.run(t, "webhook", "replay", acct, id)
	require.Error(t, err, "--event or --since is required")
	// The account's one event is its opening grant's credit.granted.
	require.Contains(t, e.ok(t, "webhook", "replay", acct, id, "--since", "2020-01-01T00:00:00Z"), "1 delivery queued", "the words agree with their number")

	require.Contains(t, e.ok(t, "webhook", "attempts", acct, id), "OUTCOME")
	require.Contains(t, e.ok(t, "webhook", "failed", "--account", acct), "no delivery was given up")
	require.Contains(t, e.ok(t, "webhook", "delete", acct, id), "("+string(ledgerdb.Applied)+")")
	require.Contains(t, e.ok(t, "webhook", "delete", acct, id), "("+string(ledgerdb.AlreadyApplied)+")")
	_, err = e.run(t, "webhook", "delete", acct, "we_"+"0123456789abcdef0123456789abcdef")
	require.ErrorContains(t, err, "no such endpoint")
}
