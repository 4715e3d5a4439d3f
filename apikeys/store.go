package apikeys

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Store creates, lists, revokes and authenticates API keys in the ledger's database. It works as
// the application role (jobbill_app), which may read the keys and change them only through
// ledger_create_api_key and ledger_revoke_api_key. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore is a Store on the ledger's pool (ledgerdb.Store.Pool). It does not own the pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// columns selects a key's public columns from k — never its secret's hash — and its status by
// the database's clock, the one that decides expiry.
func columns(k string) string {
	return fmt.Sprintf(`%[1]s.id, %[1]s.scope, %[1]s.account_id, %[1]s.name, %[1]s.created_at, %[1]s.expires_at, %[1]s.revoked_at,
		CASE WHEN %[1]s.revoked_at IS NOT NULL THEN 'revoked' WHEN %[1]s.expires_at <= now() THEN 'expired' ELSE 'active' END`, k)
}

// keyRow scans what columns selects. Every field may be NULL: a function that found no key
// answers a NULL key.
type keyRow struct {
	id, scope, account, name, status *string
	created, expires, revoked        *time.Time
}

func (r *keyRow) targets() []any {
	return []any{&r.id, &r.scope, &r.account, &r.name, &r.created, &r.expires, &r.revoked, &r.status}
}

func (r *keyRow) key() Key {
	k := Key{ID: *r.id, Scope: Scope(*r.scope), Name: *r.name, CreatedAt: r.created.UTC(), Status: Status(*r.status)}
	if r.account != nil {
		k.AccountID = *r.account
	}
	if r.expires != nil {
		t := r.expires.UTC()
		k.ExpiresAt = &t
	}
	if r.revoked != nil {
		t := r.revoked.UTC()
		k.RevokedAt = &t
	}
	return k
}

// Create makes a key as spec says and answers it with its secret, which is shown this once and
// kept nowhere. Bad input is refused before anything is written ([*ledgerdb.InvalidInputError]);
// an account that does not exist is [ledgerdb.ErrUnknownAccount], nothing written.
func (s *Store) Create(ctx context.Context, spec Spec) (Created, error) {
	if err := spec.Validate(time.Now()); err != nil {
		return Created{}, err
	}
	var account *string
	if spec.AccountID != "" {
		account = &spec.AccountID
	}
	secret := newSecret(spec.Scope)
	var outcome string
	var row keyRow
	err := s.pool.QueryRow(ctx, `SELECT r.outcome, `+columns("(r.key)")+`
		FROM ledger_create_api_key($1, $2, $3, $4, $5, $6) r`,
		newID(), hash(secret), string(spec.Scope), account, spec.Name, spec.ExpiresAt).
		Scan(append([]any{&outcome}, row.targets()...)...)
	if err != nil {
		return Created{}, refusal(err)
	}
	if outcome == "unknown_account" {
		return Created{}, fmt.Errorf("account %q: %w", spec.AccountID, ledgerdb.ErrUnknownAccount)
	}
	return Created{Key: row.key(), Secret: secret}, nil
}

// refusal maps the database's refusal of a key to bad input: its CHECK constraints, which
// Spec.Validate checks first, and the function's check of the expiry by the database's clock,
// which may be a little ahead of the caller's.
func refusal(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		return &ledgerdb.InvalidInputError{Field: "API key", Reason: pgErr.Message}
	}
	return err
}

// List answers the keys of one account, or every key when accountID is empty, oldest first:
// active, expired and revoked alike, never a secret.
func (s *Store) List(ctx context.Context, accountID string) ([]Key, error) {
	if accountID != "" {
		if err := ledgerdb.ValidateID("account_id", accountID); err != nil {
			return nil, err
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+columns("k")+` FROM api_keys k
		WHERE $1 = '' OR k.account_id = $1 ORDER BY k.created_at, k.id`, accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := []Key{}
	for rows.Next() {
		var row keyRow
		if err := rows.Scan(row.targets()...); err != nil {
			return nil, err
		}
		keys = append(keys, row.key())
	}
	return keys, rows.Err()
}

// Get answers the key with the ID, never its secret; an ID no key has is [ErrKeyNotFound].
func (s *Store) Get(ctx context.Context, id string) (Key, error) {
	if err := ValidateKeyID(id); err != nil {
		return Key{}, err
	}
	var row keyRow
	err := s.pool.QueryRow(ctx, `SELECT `+columns("k")+` FROM api_keys k WHERE k.id = $1`, id).Scan(row.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, fmt.Errorf("key %s: %w", id, ErrKeyNotFound)
	}
	if err != nil {
		return Key{}, err
	}
	return row.key(), nil
}

// Revoke revokes the key with the ID: from this call's commit on its secret authenticates
// nothing, on every API process. Revoking it again writes nothing and answers
// ledgerdb.AlreadyApplied with the first revocation's time; an ID no key has is
// [ErrKeyNotFound].
func (s *Store) Revoke(ctx context.Context, id string) (Key, ledgerdb.Outcome, error) {
	if err := ValidateKeyID(id); err != nil {
		return Key{}, "", err
	}
	var outcome string
	var row keyRow
	err := s.pool.QueryRow(ctx, `SELECT r.outcome, `+columns("(r.key)")+` FROM ledger_revoke_api_key($1) r`, id).
		Scan(append([]any{&outcome}, row.targets()...)...)
	switch {
	case err != nil:
		return Key{}, "", err
	case outcome == "not_found":
		return Key{}, "", fmt.Errorf("key %s: %w", id, ErrKeyNotFound)
	}
	return row.key(), ledgerdb.Outcome(outcome), nil
}

// Authenticate answers the active key whose secret this is: looked up by the secret's hash, so
// no comparison of secrets happens at all. An unknown, expired or revoked key is
// [ErrUnauthenticated], alike; any other error means the database could not answer.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, error) {
	if secret == "" {
		return Key{}, ErrUnauthenticated
	}
	var row keyRow
	err := s.pool.QueryRow(ctx, `SELECT `+columns("k")+` FROM api_keys k
		WHERE k.secret_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`,
		hash(secret)).Scan(row.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrUnauthenticated
	}
	if err != nil {
		return Key{}, err
	}
	return row.key(), nil
}

// Authenticator finds the key a bearer secret belongs to: one of the bootstrap admin keys of the
// configuration (api.keys), else an active key of the Store.
//
// Bootstrap keys exist so that a fresh deployment has a way in — an admin key to create the
// others with — and are admin keys only: they are named in logs by their position in the
// configuration ("api.keys[0]"), and removed by changing it and restarting.
type Authenticator struct {
	store *Store
	// bootstrap are the SHA-256 of each bootstrap secret: comparing fixed-length digests keeps the
	// comparison's time independent of the secrets' lengths too.
	bootstrap [][sha256.Size]byte
}

// NewAuthenticator authenticates against the bootstrap admin secrets, then store. A nil store
// authenticates the bootstrap keys alone.
func NewAuthenticator(store *Store, bootstrapSecrets []string) *Authenticator {
	a := &Authenticator{store: store}
	for _, secret := range bootstrapSecrets {
		a.bootstrap = append(a.bootstrap, sha256.Sum256([]byte(secret)))
	}
	return a
}

// BootstrapKeyID is the ID by which logs name the i-th bootstrap key of the configuration.
func BootstrapKeyID(i int) string { return fmt.Sprintf("api.keys[%d]", i) }

// Authenticate answers the key whose secret this is, as [Store.Authenticate] does. Every
// bootstrap key is compared, with no early exit, so the time taken does not tell which one (or
// how many) came close.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (Key, error) {
	if secret == "" {
		return Key{}, ErrUnauthenticated
	}
	digest := sha256.Sum256([]byte(secret))
	match := -1
	for i := range a.bootstrap {
		eq := subtle.ConstantTimeCompare(digest[:], a.bootstrap[i][:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match >= 0 {
		return Key{ID: BootstrapKeyID(match), Scope: ScopeAdmin, Name: "bootstrap admin key of the configuration", Status: StatusActive}, nil
	}
	if a.store == nil {
		return Key{}, ErrUnauthenticated
	}
	return a.store.Authenticate(ctx, secret)
}
