package ledgerdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A result report is durable before anyone acknowledges it: it is written to the inbox
// (result_reports) first, once per job and attempt, and only then signalled to the job's workflow.
// A report whose signal could not be sent (Temporal unreachable) stays unapplied, and the reconcile
// pass applies it once Temporal answers again.

// maxOutputRefLength is the longest output reference a result may carry, in bytes.
const maxOutputRefLength = 2048

// ResultReport is a job's result as reported by its runner, a product's callback or an operator.
// It never carries an amount: the ledger bills the job's recorded price (the price-list rule); the
// only number it carries is the usage, which the settlement caps at the job's hold.
type ResultReport struct {
	// Key names the job whose result landed.
	Key JobKey
	// Attempt is the attempt that produced it, from 1.
	Attempt int
	// OutputRef points at the job's output.
	OutputRef string
	// FinishedAt is when the work finished, by the runner's clock; zero when unknown.
	FinishedAt time.Time
	// UnitsUsed is how many units of the job's kind the work used (GPU-seconds for a metered
	// kind); nil when the runner did not say, and the job is then settled at its whole hold.
	UnitsUsed *int64
}

// Validate checks a report the way every door must before anything is written: an attempt from 1,
// an output reference that is present and passes the ledger's text rule ([ValidateText]), and a
// usage, if any, that is not negative.
func (r ResultReport) Validate() error {
	if err := r.Key.Validate(); err != nil {
		return err
	}
	if err := ValidateAttempt(r.Attempt); err != nil {
		return err
	}
	if err := ValidateUnitsUsed(r.UnitsUsed); err != nil {
		return err
	}
	return ValidateOutputRef(r.OutputRef)
}

// ValidateUnitsUsed checks a reported usage: absent, or a whole number of units from 0. A usage
// above the job's hold is not an error: the settlement caps it (the hold is a spending cap).
func ValidateUnitsUsed(units *int64) error {
	if units != nil && *units < 0 {
		return &InvalidInputError{Field: "units used", Reason: fmt.Sprintf("is %d; it must not be negative", *units)}
	}
	return nil
}

// Units is a reported usage of n units, for a [ResultReport] or a settlement.
func Units(n int64) *int64 { return &n }

// ValidateAttempt checks a result's attempt number: a whole number from 1.
func ValidateAttempt(attempt int) error {
	if attempt < 1 || attempt > maxAttempts {
		return &InvalidInputError{Field: "attempt", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", attempt, maxAttempts)}
	}
	return nil
}

// ValidateOutputRef checks where a result says the job's output is.
func ValidateOutputRef(ref string) error {
	if strings.TrimSpace(ref) == "" {
		return &InvalidInputError{Field: "output reference", Reason: "must not be empty: a result says where the output is"}
	}
	return ValidateText("output reference", ref, maxOutputRefLength)
}

// RecordedResult is the inbox row of a report, as [Store.RecordResult] answers it.
type RecordedResult struct {
	// Outcome is Applied when this call wrote the row, AlreadyApplied when the same report was
	// recorded before.
	Outcome Outcome
	// JobState is the job's state when the report was recorded.
	JobState State
	// ReceivedAt is when the report was first recorded.
	ReceivedAt time.Time
	// AppliedAt is when the job's workflow or the fallback took it; nil until then.
	AppliedAt *time.Time
}

// RecordResult writes a report to the inbox, once per job and attempt, before it is signalled. The
// same report again answers AlreadyApplied; another output or usage for the same attempt is
// [ErrConflict]; a
// job never charged is [ErrNotStarted]; a deleted one [ErrGone], unless its refund can still be
// reclaimed (a deleted refunded job still takes its late result); an unknown one [ErrJobNotFound].
func (s *Store) RecordResult(ctx context.Context, r ResultReport) (RecordedResult, error) {
	if err := r.Validate(); err != nil {
		return RecordedResult{}, err
	}
	var finished *time.Time
	if !r.FinishedAt.IsZero() {
		finished = &r.FinishedAt
	}
	var (
		outcome    string
		state      *string
		receivedAt *time.Time
		rec        RecordedResult
	)
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome, &state, &receivedAt, &rec.AppliedAt) },
		`SELECT outcome, job_state, received_at, applied_at FROM ledger_record_result($1, $2, $3, $4, $5)`,
		r.Key.String(), int32(r.Attempt), r.OutputRef, finished, r.UnitsUsed)
	if err != nil {
		return RecordedResult{}, fmt.Errorf("job %s: recording the result of attempt %d: %w", r.Key, r.Attempt, err)
	}
	rec.JobState, rec.ReceivedAt = State(deref(state)), deref(receivedAt)
	switch outcome {
	case "applied", "already_applied":
		rec.Outcome = Outcome(outcome)
		return rec, nil
	case "conflict":
		return rec, fmt.Errorf("job %s: attempt %d was reported before with another output or usage: %w", r.Key, r.Attempt, ErrConflict)
	case "not_started":
		return rec, fmt.Errorf("job %s is %s: %w", r.Key, rec.JobState, ErrNotStarted)
	case "gone":
		return rec, fmt.Errorf("job %s: %w", r.Key, ErrGone)
	case "not_found":
		return rec, fmt.Errorf("job %s: %w", r.Key, ErrJobNotFound)
	}
	return rec, fmt.Errorf("job %s: unexpected answer %q recording a result", r.Key, outcome)
}

// How a recorded result reached the money: the values of [Store.MarkResultApplied]'s via.
const (
	// AppliedBySignal: the job's workflow received it as a signal.
	AppliedBySignal = "signal"
	// AppliedByFallback: the job's workflow had closed; the late-result fallback settled it.
	AppliedByFallback = "fallback"
	// AppliedSettled: the job was settled for good before the result could be applied (for
	// instance deleted); nothing is left to apply it to.
	AppliedSettled = "settled"
)

// MarkResultApplied records that a recorded result was taken (via is one of AppliedBySignal,
// AppliedByFallback, AppliedSettled), once: a second call answers AlreadyApplied.
func (s *Store) MarkResultApplied(ctx context.Context, key JobKey, attempt int, via string) (Outcome, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	if err := ValidateAttempt(attempt); err != nil {
		return "", err
	}
	switch via {
	case AppliedBySignal, AppliedByFallback, AppliedSettled:
	default:
		return "", &InvalidInputError{Field: "applied via", Reason: fmt.Sprintf("%q is not a way a result is applied", via)}
	}
	var outcome string
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome) },
		`SELECT ledger_mark_result_applied($1, $2, $3)`, key.String(), int32(attempt), via)
	if err != nil {
		return "", fmt.Errorf("job %s: marking the result of attempt %d applied: %w", key, attempt, err)
	}
	if outcome == "not_found" {
		return "", fmt.Errorf("job %s, attempt %d: no such recorded result: %w", key, attempt, ErrJobNotFound)
	}
	return Outcome(outcome), nil
}

// UnappliedResult is a recorded report that no workflow has taken yet.
type UnappliedResult struct {
	// Report is what was reported, naming the job and so its account.
	Report ResultReport
	// ReceivedAt is when it was recorded.
	ReceivedAt time.Time
}

// UnappliedResults lists recorded reports not yet taken by a workflow and recorded more than
// olderThan ago (a younger one is probably being signalled by its reporter right now), oldest
// first, at most limit of them. With accountIDs, only those accounts' jobs.
func (s *Store) UnappliedResults(ctx context.Context, olderThan time.Duration, limit int, accountIDs ...string) ([]UnappliedResult, error) {
	if olderThan < 0 {
		return nil, &InvalidInputError{Field: "olderThan", Reason: fmt.Sprintf("is %s; it must not be negative", olderThan)}
	}
	if limit <= 0 || limit > MaxPlaceholders {
		return nil, &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", limit, MaxPlaceholders)}
	}
	rows, err := s.pool.Query(ctx, `SELECT r.job_id, r.attempt, r.output_ref, r.finished_at, r.units_used, r.received_at
		FROM result_reports r JOIN jobs j ON j.id = r.job_id
		WHERE r.applied_at IS NULL AND r.received_at < now() - $1::bigint * interval '1 microsecond'
		  AND (coalesce(cardinality($3::text[]), 0) = 0 OR j.account_id = ANY ($3::text[]))
		ORDER BY r.received_at, r.job_id, r.attempt LIMIT $2`, olderThan.Microseconds(), limit, accountIDs)
	if err != nil {
		return nil, fmt.Errorf("reading unapplied results: %w", translateError(err))
	}
	results, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UnappliedResult, error) {
		var (
			u        UnappliedResult
			key      string
			attempt  int32
			finished *time.Time
		)
		if err := row.Scan(&key, &attempt, &u.Report.OutputRef, &finished, &u.Report.UnitsUsed, &u.ReceivedAt); err != nil {
			return u, err
		}
		var err error
		u.Report.Key, err = keyOf(key)
		u.Report.Attempt, u.Report.FinishedAt = int(attempt), deref(finished)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading unapplied results: %w", translateError(err))
	}
	return results, nil
}

// RecordedResultRow is a result recorded in the ledger's inbox for a job, and whether a workflow
// took it: what an operator reads to see which attempts reported and how each reached the job.
type RecordedResultRow struct {
	// Attempt is the attempt that reported it.
	Attempt int
	// OutputRef and UnitsUsed are what it reported.
	OutputRef string
	UnitsUsed *int64
	// ReceivedAt is when it was recorded.
	ReceivedAt time.Time
	// AppliedAt and AppliedVia say when and how it reached the job (signal, fallback, settled);
	// nil and "" while no workflow has taken it.
	AppliedAt  *time.Time
	AppliedVia string
}

// JobResults answers the results recorded for a job, by attempt. A job with none answers an
// empty list; the job's existence is its caller's to check.
func (s *Store) JobResults(ctx context.Context, key JobKey) ([]RecordedResultRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT attempt, output_ref, units_used, received_at, applied_at, coalesce(applied_via, '')
		FROM result_reports WHERE job_id = $1 ORDER BY attempt`, key.String())
	if err != nil {
		return nil, translateError(err)
	}
	results, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RecordedResultRow, error) {
		var r RecordedResultRow
		var attempt int32
		err := row.Scan(&attempt, &r.OutputRef, &r.UnitsUsed, &r.ReceivedAt, &r.AppliedAt, &r.AppliedVia)
		r.Attempt = int(attempt)
		return r, err
	})
	return results, translateError(err)
}
