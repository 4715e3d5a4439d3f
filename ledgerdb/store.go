package ledgerdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store runs the ledger's guarded operations on a Postgres connection pool. It is safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects a pool to the database at connString (a postgres:// URL or key=value string).
// The schema must already be migrated; see [Migrate].
func Open(ctx context.Context, connString string) (*Store, error) {
	pool, err := pgxpool.New(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("opening ledger database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reaching ledger database: %w", err)
	}
	return &Store{pool: pool}, nil
}

// New wraps an open pool in a Store. The Store takes the pool over: its Close closes the pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool is the underlying connection pool, for health checks and tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// maxAttemptsOnDeadlock bounds how often a call is re-sent after Postgres aborted it as a deadlock
// or serialization victim. The transaction rolled back whole, so re-sending it is safe.
const maxAttemptsOnDeadlock = 5

// queryRow runs one statement (one transaction, one round trip) and scans its single row,
// re-sending it when Postgres picked it as a deadlock victim.
func (s *Store) queryRow(ctx context.Context, scan func(pgx.Row) error, sql string, args ...any) error {
	var err error
	for range maxAttemptsOnDeadlock {
		err = scan(s.pool.QueryRow(ctx, sql, args...))
		if !isRetryable(err) {
			break
		}
	}
	return translateError(err)
}
