package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// entryFrom is what entries are read from: the rows (le), each with the credit block it names (b).
const entryFrom = `ledger_entries le LEFT JOIN credit_blocks b ON b.id = le.block_id`

// entryBlockColumns are the last columns [scanEntry] reads: what an expiry was caused by and the
// block the row names.
const entryBlockColumns = `coalesce(le.caused_by, 0), b.id, b.category, b.created_at, b.expires_at`

// entryColumns select what [scanEntry] reads from entryFrom.
const entryColumns = `le.id, le.account_id, coalesce(split_part(le.job_id, '/', 2), ''), le.kind, le.amount, le.balance_after,
	coalesce(le.idempotency_key, ''), coalesce(le.memo, ''), le.created_at, ` + entryBlockColumns

// JobEntries answers a job's ledger rows, oldest first: its charge, and its refund, reclaim and
// release when it has them (the reversing-pairs rule), and the expiries its refund or release
// caused — credits returned to a block that had already expired, removed at once (rows of the
// account, CausedBy naming the job's row). An unknown job is [ErrJobNotFound].
func (s *Store) JobEntries(ctx context.Context, key JobKey) ([]Entry, error) {
	if _, err := s.Job(ctx, key); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM `+entryFrom+`
		WHERE le.job_id = $1
		   OR (le.kind = 'expire' AND le.caused_by IN (SELECT c.id FROM ledger_entries c WHERE c.job_id = $1))
		ORDER BY le.id`, key.String())
	if err != nil {
		return nil, translateError(err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	return entries, translateError(err)
}

// maxExpiredReturnsJobs bounds one [Store.ExpiredReturns] read: a page of jobs.
const maxExpiredReturnsJobs = 1000

// ExpiredReturns answers, for each of the jobs that has any, the expiries its refund or release
// caused (oldest first): credits returned to a block that had already expired, which expired at
// once. What a job's sentence says of them ([JobEntries] has them among the job's rows); one read
// for a page of up to 1000 jobs.
func (s *Store) ExpiredReturns(ctx context.Context, keys []JobKey) (map[JobKey][]Entry, error) {
	if len(keys) > maxExpiredReturnsJobs {
		return nil, &InvalidInputError{Field: "jobs", Reason: fmt.Sprintf("are %d; at most %d at once", len(keys), maxExpiredReturnsJobs)}
	}
	byID := make(map[string]JobKey, len(keys))
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		byID[k.String()] = k
		ids = append(ids, k.String())
	}
	out := map[JobKey][]Entry{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT c.job_id, `+entryColumns+`
		FROM ledger_entries c
		JOIN ledger_entries le ON le.kind = 'expire' AND le.caused_by = c.id
		LEFT JOIN credit_blocks b ON b.id = le.block_id
		WHERE c.job_id = ANY ($1) AND c.kind IN ('refund', 'release')
		ORDER BY le.id`, ids)
	if err != nil {
		return nil, translateError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var job string
		var e Entry
		var sc entryScan
		if err := rows.Scan(append([]any{&job}, sc.dest(&e)...)...); err != nil {
			return nil, translateError(err)
		}
		sc.fill(&e)
		out[byID[job]] = append(out[byID[job]], e)
	}
	return out, translateError(rows.Err())
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
		SELECT `+entryColumns+` FROM `+entryFrom+`
		WHERE le.account_id = $1 AND le.created_at >= $2
		ORDER BY le.id DESC LIMIT $3) recent ORDER BY 1`, accountID, since, limit)
	if err != nil {
		return nil, translateError(err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	return entries, translateError(err)
}
