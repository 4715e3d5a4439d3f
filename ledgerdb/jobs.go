package ledgerdb

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Submission is a client's request to run a paid job.
type Submission struct {
	// JobID is the client-generated ID: the same ID is the same job, forever.
	JobID string
	// AccountID is the account that will pay.
	AccountID string
	// Cost is the job's price in credits.
	Cost int64
	// Request is the rest of the submitted request in a canonical form (for instance the JSON
	// body). With the account and the cost it makes the fingerprint that tells a retry of the
	// same request from a different request under the same ID.
	Request []byte
}

// Fingerprint is the SHA-256 of the account, the cost and the request: what a second submission
// under the same ID must match to be answered with the original job.
func (s Submission) Fingerprint() []byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s.AccountID)))
	h.Write(n[:])
	h.Write([]byte(s.AccountID))
	binary.BigEndian.PutUint64(n[:], uint64(s.Cost))
	h.Write(n[:])
	h.Write(s.Request)
	return h.Sum(nil)
}

// jobResultColumns is the shape of the schema's ledger_job_result type.
const jobResultColumns = `outcome, entry_id, balance_after, id, account_id, cost, state, state_before_delete,
	is_charged, is_refunded, is_reclaimed, attempts, reject_reason, refund_reason,
	created_at, updated_at, charged_at, delivered_at, refunded_at, reclaimed_at, deleted_at`

// jobResult is one row of ledger_job_result before it becomes a Transition.
type jobResult struct {
	outcome      string
	entryID      *int64
	balanceAfter *int64
	job          Job
	// Nullable columns of the job (all NULL when the job does not exist).
	id, accountID, state, stateBeforeDelete, rejectReason, refundReason *string
	cost                                                                *int64
	isCharged, isRefunded, isReclaimed                                  *bool
	attempts                                                            *int32
	createdAt, updatedAt                                                *time.Time
}

func (r *jobResult) scan(row pgx.Row) error {
	j := &r.job
	return row.Scan(&r.outcome, &r.entryID, &r.balanceAfter, &r.id, &r.accountID, &r.cost, &r.state,
		&r.stateBeforeDelete, &r.isCharged, &r.isRefunded, &r.isReclaimed, &r.attempts,
		&r.rejectReason, &r.refundReason, &r.createdAt, &r.updatedAt, &j.ChargedAt, &j.DeliveredAt,
		&j.RefundedAt, &j.ReclaimedAt, &j.DeletedAt)
}

func (r *jobResult) transition(outcome Outcome) Transition {
	j := r.job
	j.ID, j.AccountID = deref(r.id), deref(r.accountID)
	j.State, j.StateBeforeDelete = State(deref(r.state)), State(deref(r.stateBeforeDelete))
	j.RejectReason, j.RefundReason = RejectReason(deref(r.rejectReason)), deref(r.refundReason)
	j.Cost = deref(r.cost)
	j.IsCharged, j.IsRefunded, j.IsReclaimed = deref(r.isCharged), deref(r.isRefunded), deref(r.isReclaimed)
	j.Attempts = int(deref(r.attempts))
	j.CreatedAt, j.UpdatedAt = deref(r.createdAt), deref(r.updatedAt)
	return Transition{Outcome: outcome, Job: j, EntryID: deref(r.entryID), BalanceAfter: deref(r.balanceAfter)}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// callJobFunction calls one of the schema's job functions and maps its outcome: the outcomes every
// operation shares become a Transition or an error here; the rest are returned for the caller.
func (s *Store) callJobFunction(ctx context.Context, jobID, sql string, args ...any) (Transition, string, error) {
	var r jobResult
	if err := s.queryRow(ctx, r.scan, sql, args...); err != nil {
		return Transition{}, "", fmt.Errorf("job %q: %w", jobID, err)
	}
	switch r.outcome {
	case "applied":
		return r.transition(Applied), r.outcome, nil
	case "already_applied":
		return r.transition(AlreadyApplied), r.outcome, nil
	case "not_applied":
		return r.transition(NotApplied), r.outcome, nil
	case "not_found":
		return Transition{}, r.outcome, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	case "gone":
		return r.transition(NotApplied), r.outcome, fmt.Errorf("job %q: %w", jobID, ErrGone)
	}
	return r.transition(NotApplied), r.outcome, nil
}

// Submit writes the placeholder of a job (state submitting, nothing charged). Submitting the same
// ID with the same request again answers the original job with AlreadyApplied; with a different
// request it fails with [ErrConflict]; once the ID is deleted, with [ErrGone].
func (s *Store) Submit(ctx context.Context, sub Submission) (Transition, error) {
	if err := ValidateID("job ID", sub.JobID); err != nil {
		return Transition{}, err
	}
	if err := ValidateID("account ID", sub.AccountID); err != nil {
		return Transition{}, err
	}
	if err := ValidateAmount("cost", sub.Cost); err != nil {
		return Transition{}, err
	}
	if len(sub.Request) > MaxRequestLength {
		return Transition{}, &InvalidInputError{Field: "request", Reason: fmt.Sprintf("is %d bytes; at most %d are allowed", len(sub.Request), MaxRequestLength)}
	}
	t, outcome, err := s.callJobFunction(ctx, sub.JobID,
		`SELECT `+jobResultColumns+` FROM ledger_submit($1, $2, $3, $4, $5)`,
		sub.JobID, sub.AccountID, sub.Cost, sub.Fingerprint(), sub.Request)
	switch {
	case err != nil:
		return t, err
	case outcome == "conflict":
		return t, fmt.Errorf("job %q: %w", sub.JobID, ErrConflict)
	case outcome == "unknown_account":
		return t, fmt.Errorf("job %q: account %q: %w", sub.JobID, sub.AccountID, ErrUnknownAccount)
	}
	return t, nil
}

// Charge takes a submitted job's recorded cost from its account (submitting -> running). When the
// account cannot pay, the job becomes rejected, nothing is charged, and the error is
// [ErrInsufficientCredits] (also on every later call); the Transition still shows the job.
func (s *Store) Charge(ctx context.Context, jobID string) (Transition, error) {
	return s.ChargeMatching(ctx, jobID, nil)
}

// ChargeMatching is [Store.Charge] for a job that must have been submitted with the request of
// fingerprint ([Submission.Fingerprint]): a job submitted with another request is [ErrConflict]
// and nothing changes. A workflow started directly under a job's ID charges this way, so that it
// never bills the placeholder of another request. A nil fingerprint matches any request.
//
// A job rejected now or before is [ErrInsufficientCredits] when that was the reason, and
// [ErrRejected] for any other reason (its Job.RejectReason says which).
func (s *Store) ChargeMatching(ctx context.Context, jobID string, fingerprint []byte) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	t, outcome, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_charge($1, $2)`, jobID, fingerprint)
	switch {
	case err != nil:
	case outcome == "conflict":
		err = fmt.Errorf("job %q: %w", jobID, ErrConflict)
	case outcome == "rejected":
		err = RejectionError(t.Job)
	}
	return t, err
}

// RejectionError is the error of a rejected job: [ErrInsufficientCredits] when the account could
// not pay, [ErrRejected] for every other reason. Both say that nothing was charged.
func RejectionError(job Job) error {
	if job.RejectReason == RejectInsufficientCredits {
		return fmt.Errorf("job %q (%s): %w", job.ID, job.RejectReason, ErrInsufficientCredits)
	}
	return fmt.Errorf("job %q (%s): %w", job.ID, job.RejectReason, ErrRejected)
}

// Refund gives a running job's recorded cost back (running -> refunded) because its work failed
// for good or timed out; reason says why, attempts how many attempts the work had. A refunded or
// recovered job answers AlreadyApplied; a job that was never charged or was delivered, NotApplied.
func (s *Store) Refund(ctx context.Context, jobID, reason string, attempts int) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	if err := validateText("refund reason", reason); err != nil {
		return Transition{}, err
	}
	if err := validateAttempts(attempts); err != nil {
		return Transition{}, err
	}
	t, _, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_refund($1, $2, $3)`,
		jobID, reason, int32(attempts))
	return t, err
}

// Reclaim takes a refunded job's cost again because its result landed after all (refunded ->
// recovered). The success path calls it unconditionally: on a job that was never refunded it
// answers NotApplied and writes nothing. The account may go below zero; see the README's debt rule.
func (s *Store) Reclaim(ctx context.Context, jobID string) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	t, _, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_reclaim($1)`, jobID)
	return t, err
}

// Settle bills a job's result in one transaction, whatever happened before it landed: a running
// job becomes delivered (no money moves); a refunded one becomes recovered, its refund reclaimed
// (the debt rule applies). attempts is the attempt that produced the result. A delivered or
// recovered job answers AlreadyApplied; a job never charged, NotApplied.
func (s *Store) Settle(ctx context.Context, jobID string, attempts int) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	if err := validateAttempts(attempts); err != nil {
		return Transition{}, err
	}
	t, _, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_settle($1, $2)`,
		jobID, int32(attempts))
	return t, err
}

// Deliver records that a running job's work succeeded (running -> delivered); no money moves.
// A delivered or recovered job answers AlreadyApplied; a refunded one NotApplied (reclaim it).
func (s *Store) Deliver(ctx context.Context, jobID string, attempts int) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	if err := validateAttempts(attempts); err != nil {
		return Transition{}, err
	}
	t, _, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_deliver($1, $2)`,
		jobID, int32(attempts))
	return t, err
}

// RecordAttempt records that the work of a running or refunded job has had attempts attempts.
// The count only grows: a smaller or equal count answers AlreadyApplied.
func (s *Store) RecordAttempt(ctx context.Context, jobID string, attempts int) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	if err := validateAttempts(attempts); err != nil {
		return Transition{}, err
	}
	t, _, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_record_attempt($1, $2)`,
		jobID, int32(attempts))
	return t, err
}

// Delete turns a settled job (rejected, delivered, refunded or recovered) into a tombstone: its ID
// can never be submitted or charged again, and its money stays as it was. A job that is
// submitting or running is refused with [ErrJobActive].
func (s *Store) Delete(ctx context.Context, jobID string) (Transition, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Transition{}, err
	}
	// Deleting a tombstone again answers AlreadyApplied: it is a repeat of the same request.
	t, outcome, err := s.callJobFunction(ctx, jobID, `SELECT `+jobResultColumns+` FROM ledger_delete($1)`, jobID)
	if err == nil && outcome == "not_applied" {
		err = fmt.Errorf("job %q is %s: %w", jobID, t.Job.State, ErrJobActive)
	}
	return t, err
}

// Job reads a job's row. A job that was never submitted is [ErrJobNotFound]; a deleted job is
// returned as its tombstone (State deleted), without error.
func (s *Store) Job(ctx context.Context, jobID string) (Job, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return Job{}, err
	}
	// ledger_job_unmatched with no "done" states is a plain read in the shared result shape.
	t, _, err := s.callJobFunction(ctx, jobID,
		`SELECT `+jobResultColumns+` FROM ledger_job_unmatched($1, ARRAY[]::text[])`, jobID)
	if errors.Is(err, ErrGone) {
		return t.Job, nil
	}
	return t.Job, err
}

// JobRequest is the request a job was submitted with ([Submission.Request]), kept so that its work
// can run again (a redrive) after Temporal has forgotten the job's workflow.
func (s *Store) JobRequest(ctx context.Context, jobID string) ([]byte, error) {
	if err := ValidateID("job ID", jobID); err != nil {
		return nil, err
	}
	var request []byte
	err := s.pool.QueryRow(ctx, `SELECT coalesce(request, ''::bytea) FROM jobs WHERE id = $1`, jobID).Scan(&request)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", jobID, translateError(err))
	}
	return request, nil
}

// maxAttempts is the largest attempt count the ledger keeps (it is an integer column).
const maxAttempts = 1 << 30

func validateAttempts(attempts int) error {
	if attempts < 0 || attempts > maxAttempts {
		return &InvalidInputError{Field: "attempts", Reason: fmt.Sprintf("is %d; it must be between 0 and %d", attempts, maxAttempts)}
	}
	return nil
}
