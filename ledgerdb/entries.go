package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// entryColumns select what [scanEntry] reads from ledger_entries.
const entryColumns = `id, account_id, coalesce(split_part(job_id, '/', 2), ''), kind, amount, balance_after,
	coalesce(idempotency_key, ''), coalesce(memo, ''), created_at`

// JobEntries answers a job's ledger rows, oldest first: its charge, and its refund, reclaim and
// release when it has them (the reversing-pairs rule). An unknown job is [ErrJobNotFound].
func (s *Store) JobEntries(ctx context.Context, key JobKey) ([]Entry, error) {
	if _, err := s.Job(ctx, key); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM ledger_entries WHERE job_id = $1 ORDER BY id`, key.String())
	if err != nil {
		return nil, translateError(err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	return entries, translateError(err)
}

// MaxRecentEntries is the most rows [Store.RecentEntries] answers.
const MaxRecentEntries = 1000

// RecentEntries answers an account's last limit ledger rows written from since on, oldest first:
// what a picture of the balance over a period is drawn from (each row's BalanceAfter). An unknown
// account is [ErrUnknownAccount].
func (s *Store) RecentEntries(ctx context.Context, accountID string, since time.Time, limit int) ([]Entry, error) {
	if limit < 1 || limit > MaxRecentEntries {
		return nil, &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", limit, MaxRecentEntries)}
	}
	if _, err := s.Balance(ctx, accountID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT * FROM (
		SELECT `+entryColumns+` FROM ledger_entries
		WHERE account_id = $1 AND created_at >= $2
		ORDER BY id DESC LIMIT $3) recent ORDER BY id`, accountID, since, limit)
	if err != nil {
		return nil, translateError(err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	return entries, translateError(err)
}
