package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Session is a console session just opened: a key pasted once became a token that a browser
// keeps in a cookie instead of the key. The database keeps only the token's SHA-256, and honours
// it only while the key it was opened with is active: revoking the key ends its sessions.
type Session struct {
	// Token is what the browser sends back (the cookie's value): 256 random bits, base64url. It
	// is shown this once and kept nowhere.
	Token string
	// Key is the key the session acts as.
	Key Key
	// ExpiresAt is when the session stops authenticating: its lifetime, or the key's expiry
	// when that comes first.
	ExpiresAt time.Time
}

// tokenBytes is the size of a session token's random part.
const tokenBytes = 32

// newToken is a fresh session token.
func newToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program rather than return less
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is what the database keeps of a session token.
func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// OpenSession opens a session of lifetime for the active key whose secret this is
// (ledger_console_open_session). A secret that is no active key's — unknown, expired, revoked, or
// one of the configuration's bootstrap keys, which have no row to end a session with — is
// [ErrUnauthenticated], nothing written.
func (s *Store) OpenSession(ctx context.Context, secret string, lifetime time.Duration) (Session, error) {
	if secret == "" {
		return Session{}, ErrUnauthenticated
	}
	if lifetime <= 0 {
		return Session{}, fmt.Errorf("a console session's lifetime must be positive, not %s", lifetime)
	}
	token := newToken()
	var outcome string
	var expires *time.Time
	var row keyRow
	err := s.pool.QueryRow(ctx, `SELECT r.outcome, r.expires_at, `+columns("(r.key)")+`
		FROM ledger_console_open_session($1, $2, $3) r`, tokenHash(token), hash(secret), lifetime).
		Scan(append([]any{&outcome, &expires}, row.targets()...)...)
	switch {
	case err != nil:
		return Session{}, err
	case outcome == "unauthenticated":
		return Session{}, ErrUnauthenticated
	}
	return Session{Token: token, Key: row.key(), ExpiresAt: expires.UTC()}, nil
}

// SessionKey answers the key an open session acts as: a token no session has, or whose session
// ended or expired, or whose key expired or was revoked, is [ErrUnauthenticated], alike. It reads
// the database every time, as [Store.Authenticate] does, so a revocation ends the session from the
// next request on.
func (s *Store) SessionKey(ctx context.Context, token string) (Key, error) {
	if token == "" {
		return Key{}, ErrUnauthenticated
	}
	var row keyRow
	err := s.pool.QueryRow(ctx, `SELECT `+columns("k")+`
		FROM console_sessions c JOIN api_keys k ON k.id = c.key_id
		WHERE c.token_hash = $1 AND c.ended_at IS NULL AND c.expires_at > now()
		  AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`,
		tokenHash(token)).Scan(row.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrUnauthenticated
	}
	if err != nil {
		return Key{}, err
	}
	return row.key(), nil
}

// EndSession signs a session out (ledger_console_end_session): from this call's commit on its
// token authenticates nothing. Ending it again, or a token no session has, does nothing.
func (s *Store) EndSession(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	var outcome string
	return s.pool.QueryRow(ctx, `SELECT ledger_console_end_session($1)`, tokenHash(token)).Scan(&outcome)
}
