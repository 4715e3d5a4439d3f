package apikeys_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestSessionLivesNoLongerThanItsKey checks the trust rule of console sessions: a session acts as
// the key it was opened with and no longer than the key may — the database keeps only the
// token's SHA-256, never the token or the key; signing out ends a session for good; revoking the
// key ends every session opened with it at once; and a session never outlives the key's expiry.
func TestSessionLivesNoLongerThanItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct := ledgertest.Account(t, ledger, 0)
	expires := time.Now().Add(time.Hour)
	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomer, AccountID: acct, Name: "console", ExpiresAt: &expires})
	require.NoError(t, err)

	one, err := keys.OpenSession(ctx, created.Secret, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, created.ID, one.Key.ID)
	require.WithinDuration(t, expires, one.ExpiresAt, time.Second, "a session ends with its key's expiry when that comes first")
	two, err := keys.OpenSession(ctx, created.Secret, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, one.Token, two.Token)

	var stored []byte
	require.NoError(t, ledger.Pool().QueryRow(ctx, `SELECT token_hash FROM console_sessions WHERE key_id = $1 ORDER BY created_at LIMIT 1`, created.ID).Scan(&stored))
	sum := sha256.Sum256([]byte(one.Token))
	require.Equal(t, sum[:], stored, "the database keeps the token's SHA-256 only")

	key, err := keys.SessionKey(ctx, one.Token)
	require.NoError(t, err)
	require.Equal(t, acct, key.AccountID)

	require.NoError(t, keys.EndSession(ctx, one.Token))
	_, err = keys.SessionKey(ctx, one.Token)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "a signed-out session opens nothing")
	_, err = keys.SessionKey(ctx, two.Token)
	require.NoError(t, err, "the other session stands")

	_, _, err = keys.Revoke(ctx, created.ID)
	require.NoError(t, err)
	_, err = keys.SessionKey(ctx, two.Token)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "revoking the key ends its sessions")
	_, err = keys.OpenSession(ctx, created.Secret, time.Hour)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated, "a revoked key opens no session")
}

// TestSessionBadInputWritesNothing checks that a session is opened only for an active key's
// secret: an empty or unknown secret and a lifetime that is not positive are refused with no row
// written; and an ended session cannot be revived, even by the owner (console_sessions_fixed_fields).
func TestSessionBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, ledger := store(t)
	acct := ledgertest.Account(t, ledger, 0)
	created, err := keys.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeCustomerRead, AccountID: acct, Name: "console"})
	require.NoError(t, err)

	_, err = keys.OpenSession(ctx, "", time.Hour)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
	_, err = keys.OpenSession(ctx, "jb_read_unknown", time.Hour)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
	_, err = keys.OpenSession(ctx, created.Secret, 0)
	require.Error(t, err)
	var n int
	require.NoError(t, ledger.Pool().QueryRow(ctx, `SELECT count(*) FROM console_sessions WHERE key_id = $1`, created.ID).Scan(&n))
	require.Zero(t, n)

	s, err := keys.OpenSession(ctx, created.Secret, time.Hour)
	require.NoError(t, err)
	require.NoError(t, keys.EndSession(ctx, s.Token))
	require.NoError(t, keys.EndSession(ctx, s.Token), "ending it again does nothing")
	sum := sha256.Sum256([]byte(s.Token))
	_, err = ledgertest.OwnerPool(t).Exec(ctx, `UPDATE console_sessions SET ended_at = NULL WHERE token_hash = $1`, sum[:])
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "JB002", pgErr.Code)
	_, err = ledger.Pool().Exec(ctx, `UPDATE console_sessions SET ended_at = NULL WHERE token_hash = $1`, sum[:])
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42501", pgErr.Code, "the service's role writes sessions only through their functions")
	_, err = keys.SessionKey(ctx, s.Token)
	require.ErrorIs(t, err, apikeys.ErrUnauthenticated)
}
