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
	cfg, err := PoolConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("opening ledger database: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening ledger database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reaching ledger database: %w", err)
	}
	return &Store{pool: pool}, nil
}

// PoolConfig is the configuration of a pool the Store can run on: connString's, with every
// connection taught the ledger's composite types (a job row travels as one value).
func PoolConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg.AfterConnect = registerTypes
	return cfg, nil
}

// registerTypes teaches a connection the composite types of a job row and a price row, so that
// each scans whole into a jobRow or a priceRow.
func registerTypes(ctx context.Context, conn *pgx.Conn) error {
	for _, name := range []string{"jobs", "prices"} {
		t, err := conn.LoadType(ctx, name)
		if err != nil {
			return fmt.Errorf("loading the %s row type (is the ledger migrated?): %w", name, err)
		}
		conn.TypeMap().RegisterType(t)
	}
	return nil
}

// New wraps an open pool in a Store; the pool must come from [PoolConfig]. The Store takes the
// pool over: its Close closes the pool.
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
	return translateError(ResendOnDeadlock(func() error { return scan(s.pool.QueryRow(ctx, sql, args...)) }))
}

// ResendOnDeadlock runs call, one statement in a transaction of its own, and runs it again, up to
// a few times, while Postgres aborts it as a deadlock or serialization victim: the transaction
// rolled back whole, so sending it again is safe. It answers call's last error. The webhook
// store's derive and replay calls, which can meet each other on the same jobs, use it too.
func ResendOnDeadlock(call func() error) error {
	var err error
	for range maxAttemptsOnDeadlock {
		err = call()
		if !isRetryable(err) {
			break
		}
	}
	return err
}
