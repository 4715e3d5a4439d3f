package ledgerdb

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Business refusals. Each is returned (possibly wrapped) with nothing written.
var (
	// ErrJobNotFound means no job was ever submitted under the ID: nothing was charged.
	ErrJobNotFound = errors.New("job not found")
	// ErrUnknownAccount means the account does not exist.
	ErrUnknownAccount = errors.New("unknown account")
	// ErrUnknownGrant means no grant was posted to the account with the idempotency key given.
	ErrUnknownGrant = errors.New("unknown grant: none was posted with this key")
	// ErrUnknownKind means the price list has no price for the job's kind: nothing was written.
	ErrUnknownKind = errors.New("unknown job kind: the price list has no price for it")
	// ErrGone means the job was deleted: its ID is burnt and can never be submitted or charged again.
	ErrGone = errors.New("job deleted: its ID can never be used again")
	// ErrConflict means the ID or idempotency key was used before with a different request.
	ErrConflict = errors.New("already used with a different request")
	// ErrInsufficientCredits means the account cannot pay the job's cost: the job is rejected and
	// nothing was charged.
	ErrInsufficientCredits = errors.New("insufficient credits: nothing was charged")
	// ErrJobActive means the job is submitting or running and cannot be deleted: its rows are
	// still the evidence for reconciliation.
	ErrJobActive = errors.New("job is still submitting or running")
	// ErrInvalidInput is wrapped by every [*InvalidInputError].
	ErrInvalidInput = errors.New("invalid input")
	// ErrAppendOnly means the database refused to rewrite ledger history (an UPDATE, DELETE or
	// TRUNCATE of ledger entries, a deleted job or account, or a changed job cost).
	ErrAppendOnly = errors.New("ledger history cannot be rewritten")
	// ErrOverflow means a balance or amount would leave the range of a 64-bit integer.
	ErrOverflow = errors.New("amount out of range")
	// ErrBalanceOutOfRange means a grant or adjustment would take the account's balance, with its
	// pending refunds or reclaims, past [MaxBalance]: refused, nothing written.
	ErrBalanceOutOfRange = errors.New("the account's balance would leave the range in which every pending refund and reclaim fits")
	// ErrNotStarted means a result was reported for a job that is not charged (still submitting,
	// its charge undecided, or rejected): there is no work of it to deliver.
	ErrNotStarted = errors.New("the job has not started (its charge is still being decided, or it was rejected), so it has no result to take")
	// ErrGrantExpired means a pending grant's payment was confirmed after its block's expiry: its
	// credits could only have lapsed, so the block was voided instead, no credits added, and every
	// later settlement of it answers the same. The payment is the payment code's to refund.
	ErrGrantExpired = errors.New("the grant's expiry passed before its payment was confirmed, so it was voided: no credits were added")
	// ErrRejected means the job was rejected before it was charged, for any reason; a
	// [*RejectedError] says which. A rejected job ID can never be charged: a new attempt needs a
	// new ID.
	ErrRejected = errors.New("the job was rejected and its ID can never be charged")
)

// RejectedError says that a job was rejected before it was charged, and why: nothing was charged,
// and the ID can never be charged. It matches [ErrRejected] with errors.Is, and
// [ErrInsufficientCredits] too when that was the reason.
type RejectedError struct {
	// Job is the rejected job.
	Job JobKey
	// Reason says why it was rejected.
	Reason RejectReason
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("job %q was rejected (%s); its ID can never be charged", e.Job.JobID, e.Reason.Describe())
}

// Unwrap lets errors.Is match ErrRejected, and ErrInsufficientCredits for that reason.
func (e *RejectedError) Unwrap() []error {
	if e.Reason == RejectInsufficientCredits {
		return []error{ErrRejected, ErrInsufficientCredits}
	}
	return []error{ErrRejected}
}

// InvalidInputError says which argument was refused and why. It wraps [ErrInvalidInput].
type InvalidInputError struct {
	// Field names the argument, as the caller knows it ("job ID", "cost").
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *InvalidInputError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Unwrap lets errors.Is(err, ErrInvalidInput) match.
func (e *InvalidInputError) Unwrap() error { return ErrInvalidInput }

// SQLSTATE codes raised by the schema's own triggers and functions (ledgerdb/code).
const (
	sqlstateAppendOnly   = "JB001" // a ledger row, job or account deleted or rewritten
	sqlstateFixedFields  = "JB002" // a job's cost, account or flags, or an API key, changed backwards
	sqlstateRefusedArg   = "JB004" // a function refused an argument; its COLUMN names the field
	sqlstateUniqueViol   = "23505"
	sqlstateForeignKey   = "23503"
	sqlstateOutOfRange   = "22003"
	sqlstateCheckViolate = "23514"
)

// translateError maps database errors to the package's domain errors, in one place, keeping the
// original error in the chain for logs. Errors it does not know pass through unchanged. A
// function's refusal of an argument (JB004: the service role may call the functions directly, so
// they check what they are given) is the [*InvalidInputError] the Go code would have answered:
// its field is the error's COLUMN, its reason the message.
func translateError(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case sqlstateRefusedArg:
		return &InvalidInputError{Field: pgErr.ColumnName, Reason: pgErr.Message}
	case sqlstateAppendOnly, sqlstateFixedFields:
		return fmt.Errorf("%w: %w", ErrAppendOnly, err)
	case sqlstateUniqueViol:
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case sqlstateForeignKey:
		return fmt.Errorf("%w: %w", ErrUnknownAccount, err)
	case sqlstateOutOfRange:
		return fmt.Errorf("%w: %w", ErrOverflow, err)
	case sqlstateCheckViolate:
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return err
}

// Permanent reports whether err is the database refusing a call for good: bad input, a value out
// of range, a violated constraint, a rewrite of history, a missing privilege. The same call meets
// the same refusal every time, so retrying it cannot help; it needs a person (an alarm), not a
// retry. Lost connections, timeouts, deadlocks and serialization failures are not permanent:
// the guarded call rolled back whole (or committed, and its repeat answers AlreadyApplied).
func Permanent(err error) bool {
	for _, refusal := range []error{ErrInvalidInput, ErrOverflow, ErrAppendOnly, ErrBalanceOutOfRange} {
		if errors.Is(err, refusal) {
			return true
		}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", // data exception
		"23", // integrity constraint violation
		"42", // syntax error or access rule violation (a missing grant)
		"JB": // the schema's own refusals
		return true
	}
	return false
}

// isRetryable reports whether err is a transient conflict between concurrent transactions that
// rolled back entirely, so the same call can simply be made again.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}
