package ledgerdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Alarm records that the database refused one of a job's ledger steps for good (see [Permanent]):
// a refund or settlement that cannot be written needs a person, not a retry loop. It also records
// a result the worker could not bill ([AlarmUnbillableResult]). A job with an alarm is reported by
// the invariant checker until the step it names has been written.
type Alarm struct {
	// JobID is the job's own ID (its account is AccountID).
	JobID string
	// AccountID is the job's account.
	AccountID string
	// Step is the ledger step that was refused: charge, refund or settle; or
	// [AlarmUnbillableResult].
	Step string
	// Message is the database's refusal, scrubbed of credentials ([ScrubText]).
	Message string
	// RaisedAt is when the alarm was first raised.
	RaisedAt time.Time
}

// AlarmUnbillableResult is the step of the alarm a job's workflow raises when it is sent a result
// it cannot bill (unreadable, or naming an attempt that never ran) while the job could still take
// one: the work may have been delivered, and no retry can tell what its sender meant. It stays
// open until the job is settled.
const AlarmUnbillableResult = "result"

// RaiseAlarm records an alarm for a job's step, once per job and step (a repeat answers
// AlreadyApplied and keeps the first message).
func (s *Store) RaiseAlarm(ctx context.Context, key JobKey, step, message string) (Outcome, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	if err := ValidateID("alarm step", step); err != nil {
		return "", err
	}
	message = ScrubText(message)
	var outcome string
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&outcome) },
		`SELECT ledger_raise_alarm($1, $2, $3)`, key.String(), step, message)
	if err != nil {
		return "", fmt.Errorf("job %s: raising an alarm: %w", key, err)
	}
	if outcome == "not_found" {
		return "", fmt.Errorf("job %s: %w", key, ErrJobNotFound)
	}
	return Outcome(outcome), nil
}

// Alarms lists the alarms of the given accounts' jobs (every account's when none is given), oldest
// first, with at most limit of them.
func (s *Store) Alarms(ctx context.Context, limit int, accountIDs ...string) ([]Alarm, error) {
	if limit <= 0 || limit > MaxPlaceholders {
		return nil, &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be between 1 and %d", limit, MaxPlaceholders)}
	}
	rows, err := s.pool.Query(ctx, `SELECT split_part(a.job_id, '/', 2), j.account_id, a.step, a.message, a.raised_at
		FROM ledger_alarms a JOIN jobs j ON j.id = a.job_id
		WHERE coalesce(cardinality($2::text[]), 0) = 0 OR j.account_id = ANY ($2::text[])
		ORDER BY a.id LIMIT $1`, limit, accountIDs)
	if err != nil {
		return nil, fmt.Errorf("reading alarms: %w", translateError(err))
	}
	alarms, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Alarm])
	if err != nil {
		return nil, fmt.Errorf("reading alarms: %w", translateError(err))
	}
	return alarms, nil
}
