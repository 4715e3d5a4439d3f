package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxPlaceholders bounds one [Store.Placeholders] read, so that one reconcile pass stays short.
const MaxPlaceholders = 1000

// Placeholders lists jobs still submitting (placeholder written, nothing charged) that were
// created more than olderThan ago, oldest first, at most limit of them. A placeholder younger than
// olderThan is left out: its submission may still be starting its workflow, and a reconciler that
// raced it would only join the same workflow — harmless, but noise. The age is measured on the
// database's clock, the same clock that stamped created_at, so a skewed caller cannot shift it.
// With accountIDs, only those accounts' placeholders are listed (an operator healing one
// customer, or a test that must not touch other tests' jobs); without, every account's.
func (s *Store) Placeholders(ctx context.Context, olderThan time.Duration, limit int, accountIDs ...string) ([]Job, error) {
	return s.olderJobs(ctx, "placeholders", `SELECT j FROM jobs j
		WHERE j.state = 'submitting' AND j.created_at < now() - $1::bigint * interval '1 microsecond'
		  AND (coalesce(cardinality($3::text[]), 0) = 0 OR j.account_id = ANY ($3::text[]))
		ORDER BY j.created_at, j.id LIMIT $2`, olderThan, limit, MaxPlaceholders, accountIDs)
}

// RejectOrphan rejects a placeholder whose workflow can never charge it (submitting -> rejected);
// nothing is charged and no ledger row is written. reason is [RejectWorkflowEnded] when its workflow
// closed before charging it (the ID cannot start a workflow again, by the job service's reuse policy,
// so without this the job would stay submitting forever) or [RejectWorkflowIDTaken] when its
// workflow ID is held by a workflow that is not its metered job. Only a job still submitting and
// never charged is rejected: a charged job answers NotApplied and is left as it is, and a rejected
// one answers AlreadyApplied.
func (s *Store) RejectOrphan(ctx context.Context, key JobKey, reason RejectReason) (Transition, error) {
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	if reason != RejectWorkflowEnded && reason != RejectWorkflowIDTaken {
		return Transition{}, &InvalidInputError{Field: "reject reason", Reason: fmt.Sprintf("%q is not a reason to reject an orphan", reason)}
	}
	return s.call(ctx, key, `ledger_reject_orphan($1, $2)`, key.String(), string(reason))
}

// RunningJobs lists jobs that are charged and unsettled (state running) and were charged more than
// olderThan ago, oldest charge first, at most limit of them: the jobs whose workflow must still be
// running. The reconcile pass compares them with the workflows Temporal runs, and heals those whose
// workflow closed without settling them. With accountIDs, only those accounts' jobs.
func (s *Store) RunningJobs(ctx context.Context, olderThan time.Duration, limit int, accountIDs ...string) ([]Job, error) {
	return s.olderJobs(ctx, "running jobs", `SELECT j FROM jobs j
		WHERE j.state = 'running' AND j.charged_at < now() - $1::bigint * interval '1 microsecond'
		  AND (coalesce(cardinality($3::text[]), 0) = 0 OR j.account_id = ANY ($3::text[]))
		ORDER BY j.charged_at, j.id LIMIT $2`, olderThan, limit, MaxRunningJobs, accountIDs)
}

// olderJobs reads the jobs query selects, whose parameters are an age in microseconds ($1), a
// limit ($2) and the accounts to keep ($3, empty for all), after checking the age and the limit
// (at most maxLimit). what names the jobs in errors.
func (s *Store) olderJobs(ctx context.Context, what, query string, olderThan time.Duration, limit, maxLimit int, accountIDs []string) ([]Job, error) {
	if olderThan < 0 {
		return nil, &InvalidInputError{Field: "olderThan", Reason: fmt.Sprintf("is %s; it must not be negative", olderThan)}
	}
	if limit <= 0 || limit > maxLimit {
		return nil, &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", limit, maxLimit)}
	}
	rows, err := s.pool.Query(ctx, query, olderThan.Microseconds(), limit, accountIDs)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, translateError(err))
	}
	jobs, err := pgx.CollectRows(rows, scanJob)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, translateError(err))
	}
	return jobs, nil
}

// MaxRunningJobs bounds one [Store.RunningJobs] read.
const MaxRunningJobs = 100_000

// scanJob reads a job from a row whose one column is a jobs row.
func scanJob(row pgx.CollectableRow) (Job, error) {
	var r *jobRow
	err := row.Scan(&r)
	return r.job(), err
}

// maxDeadLetters bounds one [Store.DeadLetters] read.
const maxDeadLetters = 1000

// DeadLetters lists the dead letters — refunded jobs, whose work failed for good and which wait
// for a late result or a redrive — that were refunded more than olderThan ago, most recently
// refunded first, at most limit of them (up to 1000): an operator's queue across accounts (the console's dead
// letters page). With accountIDs, only those accounts' jobs.
func (s *Store) DeadLetters(ctx context.Context, olderThan time.Duration, limit int, accountIDs ...string) ([]Job, error) {
	return s.olderJobs(ctx, "dead letters", `SELECT j FROM jobs j
		WHERE j.state = 'refunded' AND j.refunded_at < now() - $1::bigint * interval '1 microsecond'
		  AND (coalesce(cardinality($3::text[]), 0) = 0 OR j.account_id = ANY ($3::text[]))
		ORDER BY j.refunded_at DESC, j.id LIMIT $2`, olderThan, limit, maxDeadLetters, accountIDs)
}
