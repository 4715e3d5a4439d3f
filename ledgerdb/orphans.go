package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RejectOrphanReason is the reject reason of a placeholder whose workflow closed before charging
// it (see [Store.RejectOrphan]); migration 006 writes the same text.
const RejectOrphanReason = "workflow ended before charging"

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
	if olderThan < 0 {
		return nil, &InvalidInputError{Field: "olderThan", Reason: fmt.Sprintf("is %s; it must not be negative", olderThan)}
	}
	if limit <= 0 || limit > MaxPlaceholders {
		return nil, &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", limit, MaxPlaceholders)}
	}
	// ledger_job_result_of gives the row the shared result shape, so the one scanner reads it.
	rows, err := s.pool.Query(ctx, `SELECT r.* FROM jobs j
		CROSS JOIN LATERAL ledger_job_result_of('applied', NULL::bigint, NULL::bigint, j) r
		WHERE j.state = 'submitting' AND j.created_at < now() - $1::bigint * interval '1 microsecond'
		  AND (cardinality($3::text[]) = 0 OR j.account_id = ANY ($3::text[]))
		ORDER BY j.created_at, j.id LIMIT $2`, olderThan.Microseconds(), limit, accountIDs)
	if err != nil {
		return nil, fmt.Errorf("reading placeholders: %w", translateError(err))
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Job, error) {
		var r jobResult
		if err := r.scan(row); err != nil {
			return Job{}, err
		}
		return r.transition(Applied).Job, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading placeholders: %w", translateError(err))
	}
	return jobs, nil
}

// RejectOrphan rejects a placeholder whose workflow closed before charging it (submitting ->
// rejected, reason [RejectOrphanReason]); nothing is charged and no ledger row is written. Its ID
// cannot start a workflow again (the starter's reuse policy), so without this the job would stay
// submitting forever. Only a job still submitting and never charged is rejected: a charged job
// answers NotApplied and is left as it is, and a second call answers AlreadyApplied.
func (s *Store) RejectOrphan(ctx context.Context, jobID string) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	t, _, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_reject_orphan($1)`, jobID)
	return t, err
}
