package apikeys_test

// Tests of API keys against the real test Postgres (ledgertest), as the application role the API
// connects as; the owner's pool only where a test shows that even the owner is refused.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// store is an apikeys.Store on the shared test ledger, and the ledger itself.
func store(t *testing.T) (*apikeys.Store, *ledgerdb.Store) {
	t.Helper()
	ledger := ledgertest.Store(t)
	return apikeys.NewStore(ledger.Pool()), ledger
}

// TestKeyLifecycle checks the trust rule that a key opens exactly what it was created for, until
// it is revoked, without a restart: a customer key's secret has the documented shape and
// authenticates as that key, scoped to its account; the database keeps only the secret's
// SHA-256; lists show the key and never a secret; a revoke takes effect on the very next
// authentication, also through a second pool (another API process); revoking again writes
// nothing and keeps the first revocation's time; an unknown ID is ErrKeyNotFound.
func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct := ledgertest.Account(t, ledger, 0)

	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "acme's web app"})
	require.NoError(t, err)
	require.Regexp(t, `^jb_cust_[0-9A-Za-z]{43}$`, created.Secret)
	require.Regexp(t, `^key_[0-9A-Za-z]{22}$`, created.ID)
	require.Equal(t, apikeys.ScopeCustomer, created.Scope)
	require.Equal(t, acct, created.AccountID)
	require.Equal(t, apikeys.StatusActive, created.Status)
	require.Nil(t, created.ExpiresAt)
	require.Nil(t, created.RevokedAt)

	got, err := keys.Authenticate(ctx, created.Secret)
	require.NoError(t, err)
	require.Equal(t, created.Key, got)

	var stored []byte
	var row string
	require.NoError(t, ledger.Pool().QueryRow(ctx, `SELECT secret_hash, k::text FROM api_keys k WHERE id = $1`, created.ID).Scan(&stored, &row))
	sum := sha256.Sum256([]byte(created.Secret))
	require.Equal(t, sum[:], stored, "the database keeps the secret's SHA-256")
	require.NotContains(t, row, created.Secret[len("jb_cust_"):], "and not the secret")

	listed, err := keys.List(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, []apikeys.Key{created.Key}, listed)
	all, err := keys.List(ctx, "")
	require.NoError(t, err)
	require.Contains(t, all, created.Key)
	data, err := json.Marshal(all)
	require.NoError(t, err)
	require.NotContains(t, string(data), created.Secret, "a list never shows a secret")

	revoked, outcome, err := keys.Revoke(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, outcome)
	require.Equal(t, apikeys.StatusRevoked, revoked.Status)
	require.NotNil(t, revoked.RevokedAt)
	_, err = keys.Authenticate(ctx, created.Secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "a revoke takes effect at once")
	other := ledgertest.OwnerPool(t) // another pool, as another API process has
	_, err = apikeys.NewStore(other).Authenticate(ctx, created.Secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "on every process")

	again, outcome, err := keys.Revoke(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, outcome)
	require.Equal(t, revoked.RevokedAt, again.RevokedAt, "the first revocation stands")
	listed, err = keys.List(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, []apikeys.Key{revoked}, listed)

	_, _, err = keys.Revoke(ctx, "key_0000000000000000000000")
	require.ErrorIs(t, err, apikeys.ErrKeyNotFound)
	_, _, err = keys.Revoke(ctx, "acme's key")
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	_, err = keys.Authenticate(ctx, "")
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
	_, err = keys.Authenticate(ctx, created.Secret+"x")
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
}

// TestEveryScopeMakesItsKey checks that each scope's key carries its scope into authentication
// and into its secret's prefix, that only the customer scopes belong to an account, and that
// secrets never repeat.
func TestEveryScopeMakesItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct := ledgertest.Account(t, ledger, 0)
	seen := map[string]bool{}
	for _, tc := range []struct {
		scope   apikeys.Scope
		account string
		prefix  string
	}{
		{apikeys.ScopeCustomer, acct, "jb_cust_"},
		{apikeys.ScopeCustomerRead, acct, "jb_read_"},
		{apikeys.ScopeRunner, "", "jb_run_"},
		{apikeys.ScopeAdmin, "", "jb_admin_"},
	} {
		created, err := keys.Create(ctx, apikeys.Spec{Scope: tc.scope, AccountID: tc.account, Name: ledgertest.ID(t, string(tc.scope))})
		require.NoError(t, err, tc.scope)
		require.True(t, strings.HasPrefix(created.Secret, tc.prefix), created.Secret)
		require.False(t, seen[created.Secret])
		seen[created.Secret] = true
		got, err := keys.Authenticate(ctx, created.Secret)
		require.NoError(t, err)
		require.Equal(t, tc.scope, got.Scope)
		require.Equal(t, tc.account, got.AccountID)
		require.Equal(t, tc.scope.OfAccount(), tc.account != "")
	}
}

// TestExpiredKeyFailsAuthentication checks that a key stops authenticating when its expiry
// passes, by the database's clock and without a restart, and is then listed as expired.
func TestExpiredKeyFailsAuthentication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, _ := store(t)
	// Far enough ahead that the key surely authenticates before it expires, however slowly a
	// loaded machine creates and first checks it.
	expires := time.Now().Add(5 * time.Second)
	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeRunner, Name: ledgertest.ID(t, "gpu"), ExpiresAt: &expires})
	require.NoError(t, err)
	require.WithinDuration(t, expires, *created.ExpiresAt, time.Millisecond)
	_, err = keys.Authenticate(ctx, created.Secret)
	require.NoError(t, err, "not expired yet")

	require.Eventually(t, func() bool {
		_, err := keys.Authenticate(ctx, created.Secret)
		return err != nil
	}, 30*time.Second, 100*time.Millisecond)
	_, err = keys.Authenticate(ctx, created.Secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
	all, err := keys.List(ctx, "")
	require.NoError(t, err)
	var listed *apikeys.Key
	for i := range all {
		if all[i].ID == created.ID {
			listed = &all[i]
		}
	}
	require.NotNil(t, listed)
	require.Equal(t, apikeys.StatusExpired, listed.Status)
}

// TestBadSpecWritesNothing checks that a key that cannot be is refused with an error naming what
// is wrong, and that nothing is written: an unknown scope, a customer key without an account, a
// runner or admin key with one, a malformed or unknown account, a missing or overlong name, a name
// the ledger's one text rule refuses (a control, bidirectional or zero-width character: a name
// must read as what it is in every list and log), an expiry in the past.
func TestBadSpecWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct := ledgertest.Account(t, ledger, 0)
	past := time.Now().Add(-time.Minute)
	ghost := ledgertest.ID(t, "never-opened")
	for _, tc := range []struct {
		name string
		spec apikeys.Spec
		says string
	}{
		{"unknown scope", apikeys.Spec{Scope: "owner", AccountID: acct}, `scope: is "owner"`},
		{"customer without account", apikeys.Spec{Scope: apikeys.ScopeCustomer}, "account_id: is required for customer keys"},
		{"read key without account", apikeys.Spec{Scope: apikeys.ScopeCustomerRead}, "account_id: is required"},
		{"runner with account", apikeys.Spec{Scope: apikeys.ScopeRunner, AccountID: acct}, "account_id: must be left out for runner keys"},
		{"admin with account", apikeys.Spec{Scope: apikeys.ScopeAdmin, AccountID: acct}, "account_id: must be left out for admin keys"},
		{"malformed account", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: "a/b"}, "account_id"},
		{"unknown account", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: ghost}, "unknown account"},
		{"blank name", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: " "}, "name: is required"},
		{"overlong name", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: strings.Repeat("n", 201)}, "name: is 201 characters"},
		{"control in name", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "a\nb"}, "name: must not contain the invisible or control character U+000A"},
		{"bidi override in name", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "ops: \u202eecila"}, "name: must not contain the invisible or control character U+202E"},
		{"zero-width space in name", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "acme\u200bweb app"}, "name: must not contain the invisible or control character U+200B"},
		{"expired already", apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, ExpiresAt: &past}, "expires_at"},
	} {
		if tc.spec.Name == "" {
			tc.spec.Name = ledgertest.ID(t, "bad")
		}
		_, err := keys.Create(ctx, tc.spec)
		require.Error(t, err, tc.name)
		require.ErrorContains(t, err, tc.says, tc.name)
		var n int
		require.NoError(t, ledger.Pool().QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE name = $1 OR account_id = $2`, tc.spec.Name, acct).Scan(&n))
		require.Zero(t, n, "%s: nothing was written", tc.name)
	}
	_, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: ghost, Name: "x"})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	_, err = keys.List(ctx, "a/b")
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
}

// TestAppRoleCannotWriteAPIKeys checks least privilege for keys: the application role, which the
// API connects as, is refused (42501) every direct write of api_keys — forging an admin key,
// un-revoking, widening a scope, moving a key to another account, deleting, truncating — and the
// trigger function behind them. Its only doors are ledger_create_api_key and
// ledger_revoke_api_key; the revoked key stays revoked.
func TestAppRoleCannotWriteAPIKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct, other := ledgertest.Account(t, ledger, 0), ledgertest.Account(t, ledger, 0)
	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomerRead, AccountID: acct, Name: "read-only"})
	require.NoError(t, err)
	_, _, err = keys.Revoke(ctx, created.ID)
	require.NoError(t, err)

	q := func(v string) string { return "'" + v + "'" }
	for _, stmt := range []string{
		`INSERT INTO api_keys (id, secret_hash, scope, name) VALUES ('key_forgedforgedforged01', sha256('guess'), 'admin', 'forged')`,
		`UPDATE api_keys SET revoked_at = NULL WHERE id = ` + q(created.ID),
		`UPDATE api_keys SET scope = 'customer' WHERE id = ` + q(created.ID),
		`UPDATE api_keys SET account_id = ` + q(other) + ` WHERE id = ` + q(created.ID),
		`UPDATE api_keys SET expires_at = NULL`,
		`DELETE FROM api_keys WHERE id = ` + q(created.ID),
		`TRUNCATE api_keys`,
		`SELECT api_keys_refuse_rewrite()`,
	} {
		// Each statement runs in a transaction rolled back whatever happens, so that a regression
		// of the grants cannot damage the shared test database.
		tx, err := ledger.Pool().Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, stmt)
		require.NoError(t, tx.Rollback(ctx))
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}
	_, err = keys.Authenticate(ctx, created.Secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
	listed, err := keys.List(ctx, acct)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, apikeys.StatusRevoked, listed[0].Status)
	require.Equal(t, apikeys.ScopeCustomerRead, listed[0].Scope)
}

// TestRevokedKeyStaysRevoked checks that a revocation is final at the database itself, for the
// table's owner too (the application role is refused earlier, by its grants): clearing or moving
// revoked_at, changing a key's scope, account, secret or expiry, deleting a key and truncating the
// table are all refused (JB001, JB002), so a secret an operator took away never works again.
func TestRevokedKeyStaysRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	owner := ledgertest.OwnerPool(t)
	acct := ledgertest.Account(t, ledger, 0)
	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "leaked"})
	require.NoError(t, err)
	live, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "live"})
	require.NoError(t, err)
	_, _, err = keys.Revoke(ctx, created.ID)
	require.NoError(t, err)

	q := func(v string) string { return "'" + v + "'" }
	for _, stmt := range []string{
		`UPDATE api_keys SET revoked_at = NULL WHERE id = ` + q(created.ID),
		`UPDATE api_keys SET revoked_at = now() + interval '1 day' WHERE id = ` + q(created.ID),
		`UPDATE api_keys SET scope = 'admin', account_id = NULL WHERE id = ` + q(live.ID),
		`UPDATE api_keys SET secret_hash = sha256('chosen') WHERE id = ` + q(live.ID),
		`UPDATE api_keys SET expires_at = now() + interval '1 year' WHERE id = ` + q(live.ID),
		`UPDATE api_keys SET name = 'renamed' WHERE id = ` + q(live.ID),
		`DELETE FROM api_keys WHERE id = ` + q(created.ID),
		`TRUNCATE api_keys`,
	} {
		tx, err := owner.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, stmt)
		require.NoError(t, tx.Rollback(ctx))
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Contains(t, []string{"JB001", "JB002"}, pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}
	_, err = keys.Authenticate(ctx, created.Secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "the revoked key stays revoked")
	got, err := keys.Authenticate(ctx, live.Secret)
	require.NoError(t, err)
	require.Equal(t, apikeys.ScopeCustomer, got.Scope, "the live key is what it was created as")
}

// TestAuthenticatorBootstrapKeys checks the configuration's bootstrap keys: each authenticates as
// an admin key named by its position (never its secret), keys of the store authenticate through
// the same door, and anything else is ErrUnauthenticated — also with no store at all.
func TestAuthenticatorBootstrapKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct := ledgertest.Account(t, ledger, 0)
	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "app"})
	require.NoError(t, err)

	auth := apikeys.NewAuthenticator(keys, []string{"bootstrap-secret-0001", "bootstrap-secret-0002"})
	got, err := auth.Authenticate(ctx, "bootstrap-secret-0002")
	require.NoError(t, err)
	require.Equal(t, "api.keys[1]", got.ID)
	require.Equal(t, apikeys.ScopeAdmin, got.Scope)
	got, err = auth.Authenticate(ctx, created.Secret)
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	for _, secret := range []string{"", "bootstrap-secret-000", "bootstrap-secret-00021", "jb_admin_guess"} {
		_, err = auth.Authenticate(ctx, secret)
		require.ErrorIs(t, err, apikeys.ErrUnauthenticated, secret)
	}

	alone := apikeys.NewAuthenticator(nil, []string{"bootstrap-secret-0001"})
	_, err = alone.Authenticate(ctx, "bootstrap-secret-0001")
	require.NoError(t, err)
	_, err = alone.Authenticate(ctx, created.Secret)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
}
