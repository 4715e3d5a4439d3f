package main

// Black-box tests of `jobbill key`, run as an operator types it, against the test database.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestKeyCommandsRoundTrip checks `jobbill key create/list/revoke` end to end, and the trust rule
// behind them: the secret printed by create authenticates as a key of its scope and account; it
// is printed once and never listed; revoke makes it fail at once (as the running API would see
// it) and stays idempotent; an unknown ID is an error.
func TestKeyCommandsRoundTrip(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	keys := apikeys.NewStore(e.Store.Pool())
	acct := ledgertest.Account(t, e.Store, 0)

	out := e.ok(t, "key", "create", "--scope", "customer", "--account", acct, "--name", "acme web app", "--expires", "720h")
	require.Contains(t, out, "customer key for account "+acct+`, "acme web app", expires `)
	require.Contains(t, out, "shown this once")
	secret := regexp.MustCompile(`jb_cust_[0-9A-Za-z]{43}`).FindString(out)
	id := regexp.MustCompile(`key_[0-9A-Za-z]{22}`).FindString(out)
	require.NotEmpty(t, secret, out)
	require.NotEmpty(t, id, out)
	got, err := keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, id, got.ID)
	require.Equal(t, apikeys.ScopeCustomer, got.Scope)
	require.Equal(t, acct, got.AccountID)

	out = e.ok(t, "key", "list", "--account", acct)
	require.Regexp(t, id+`\s+customer\s+`+acct+`\s+active\s+`, out)
	require.NotContains(t, out, secret, "a list never shows a secret")
	var listed []apikeys.Key
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "key", "list", "--account", acct, "--json")), &listed))
	require.Len(t, listed, 1)
	require.NotNil(t, listed[0].ExpiresAt)

	var runner apikeys.Created
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "key", "create", "--scope", "runner", "--name", ledgertest.ID(t, "gpu"), "--json")), &runner))
	require.Regexp(t, `^jb_run_`, runner.Secret)
	require.Empty(t, runner.AccountID)
	require.Nil(t, runner.ExpiresAt)

	out = e.ok(t, "key", "revoke", id)
	require.Contains(t, out, "key "+id+" revoked at ")
	require.Contains(t, out, "(applied)")
	_, err = keys.Authenticate(ctx, secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "revoked at once")
	out = e.ok(t, "key", "revoke", id)
	require.Contains(t, out, "was already revoked")
	require.Contains(t, out, "nothing was written (already_applied)")
	require.Regexp(t, id+`\s+customer\s+`+acct+`\s+revoked\s+`, e.ok(t, "key", "list", "--account", acct))

	_, err = e.run(t, "key", "revoke", "key_0000000000000000000000")
	require.ErrorContains(t, err, "no API key has ID key_0000000000000000000000")
	_, err = e.run(t, "key", "revoke", "acme")
	require.ErrorContains(t, err, "is not a key's ID")
}

// TestKeyCreateBadInputWritesNothing checks that `jobbill key create` refuses a key that cannot
// be with an error naming the flag, and writes nothing: an unknown scope, an account missing for
// a customer key or given for a runner or admin key, an account that does not exist, an expiry
// that is no duration or time, not above zero or in the past, a missing name or scope, a name the
// ledger's one text rule refuses (a bidirectional override, a zero-width space).
func TestKeyCreateBadInputWritesNothing(t *testing.T) {
	e := newCLIEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)
	name := ledgertest.ID(t, "refused")
	ghost := ledgertest.ID(t, "ghost")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--scope", "owner", "--account", acct}, `--scope is "owner"; it must be one of customer, customer_read, runner or admin`},
		{[]string{"--scope", "customer"}, "--account is required for customer keys"},
		{[]string{"--scope", "customer_read"}, "--account is required for customer_read keys"},
		{[]string{"--scope", "runner", "--account", acct}, "--account must be left out for runner keys"},
		{[]string{"--scope", "admin", "--account", acct}, "--account must be left out for admin keys"},
		{[]string{"--scope", "customer", "--account", ghost}, "no such account; open it with `jobbill account open " + ghost + "`"},
		{[]string{"--scope", "customer", "--account", acct, "--expires", "30d"}, `--expires is "30d"; give a duration such as "720h"`},
		{[]string{"--scope", "customer", "--account", acct, "--expires", "-1h"}, "--expires is -1h; a duration must be above zero"},
		{[]string{"--scope", "customer", "--account", acct, "--expires", "2020-01-01T00:00:00Z"}, "--expires is 2020-01-01T00:00:00Z; it must be in the future"},
		{[]string{"--scope", "customer", "--account", acct, "--name", ""}, "--name is required"},
		{[]string{"--scope", "customer", "--account", acct, "--name", "acme \u202eppa bew"}, "--name must not contain the invisible or control character U+202E"},
		{[]string{"--scope", "customer", "--account", acct, "--name", "acme\u200bweb"}, "--name must not contain the invisible or control character U+200B"},
		{[]string{"--account", acct}, `required flag(s) "scope" not set`},
	} {
		args := append([]string{"key", "create", "--name", name}, tc.args...)
		out, err := e.run(t, args...)
		require.Error(t, err, "%v:\n%s", tc.args, out)
		require.ErrorContains(t, err, tc.says, "%v", tc.args)
		require.NotContains(t, out, "jb_", "%v: no secret was printed", tc.args)
	}
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE name = $1 OR account_id = $2`, name, acct).Scan(&n))
	require.Zero(t, n, "no refused key was written")
}

// TestKeyListPrintsStoredNamesSafely checks `jobbill key list` on a key whose name was stored
// before key names came under the ledger's text rule (written here through the ledger's own
// function, as the rule's absence let it be): the table never prints a bidirectional override or
// a zero-width character raw — they would make the operator read another name, or shift the
// columns — but the rest of the name, so the key can still be told apart and revoked.
func TestKeyListPrintsStoredNamesSafely(t *testing.T) {
	e := newCLIEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)
	var random [12]byte
	_, _ = rand.Read(random[:])
	id := "key_" + hex.EncodeToString(random[:])
	hash := sha256.Sum256(random[:])
	var outcome string
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT outcome FROM ledger_create_api_key($1, $2, 'customer', $3, $4, NULL)`,
		id, hash[:], acct, "acme \u202eppa bew\u200b").Scan(&outcome))
	require.Equal(t, "applied", outcome)

	out := e.ok(t, "key", "list", "--account", acct)
	require.NotContains(t, out, "\u202e")
	require.NotContains(t, out, "\u200b")
	require.Regexp(t, id+`\s+customer\s+`+acct+`\s+active\s+.*acme\s+ppa bew`, out)
}
