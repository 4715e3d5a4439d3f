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
	// JobID is the client-generated ID: the same ID in the same account is the same job, forever.
	JobID string
	// AccountID is the account that will pay.
	AccountID string
	// Kind names what the job is; the price list says what it costs (the price-list rule: a caller
	// names a kind, never an amount).
	Kind string
	// MaxUnits is the most units of a metered kind the client lets the job use, below the kind's
	// own maximum; 0 for the kind's maximum. The job's charge holds this many units.
	MaxUnits int64
	// Request is the rest of the submitted request in a canonical form (for instance the JSON
	// body). With the account and the kind it makes the fingerprint that tells a retry of the
	// same request from a different request under the same ID; the ledger compares the units a
	// retry asks to hold with the job's itself.
	Request []byte
}

// Key names the submitted job.
func (s Submission) Key() JobKey { return JobKey{AccountID: s.AccountID, JobID: s.JobID} }

// Validate checks a submission before anything is written.
func (s Submission) Validate() error {
	if err := s.Key().Validate(); err != nil {
		return err
	}
	if err := ValidateKind(s.Kind); err != nil {
		return err
	}
	if s.MaxUnits < 0 || s.MaxUnits > MaxUnits {
		return &InvalidInputError{Field: "max units", Reason: fmt.Sprintf("is %d; it must be between 1 and %d, or 0 for the kind's maximum", s.MaxUnits, MaxUnits)}
	}
	if len(s.Request) > MaxRequestLength {
		return &InvalidInputError{Field: "request", Reason: fmt.Sprintf("is %d bytes; at most %d are allowed", len(s.Request), MaxRequestLength)}
	}
	return nil
}

// MaxInputRefLength is the longest input reference a job may be submitted with, in bytes.
const MaxInputRefLength = 2048

// ValidateInputRef checks where a submission says the job's input is: empty, or text that passes
// the ledger's text rule ([ValidateText]). The job service checks it before a placeholder is
// written, so the command line's door and the API's refuse the same references.
func ValidateInputRef(ref string) error {
	return ValidateText("input reference", ref, MaxInputRefLength)
}

// Fingerprint is the SHA-256 of the account, the kind and the request: what a second submission
// under the same ID must match to be answered with the original job (and a run of the job's
// workflow to charge it). The maximum of units is left out, because "the kind's maximum" and the
// same number given explicitly hold the same units: the ledger compares the held units instead.
func (s Submission) Fingerprint() []byte {
	h := sha256.New()
	var n [8]byte
	for _, field := range []string{s.AccountID, s.Kind} {
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write([]byte(field))
	}
	h.Write(s.Request)
	return h.Sum(nil)
}

// CostFingerprint is the fingerprint of a submission made with a cost, before the price list: what
// the ledger recorded for the jobs of that time, and what their workflows' runs charge with.
func CostFingerprint(accountID string, cost int64, request []byte) []byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(accountID)))
	h.Write(n[:])
	h.Write([]byte(accountID))
	binary.BigEndian.PutUint64(n[:], uint64(cost))
	h.Write(n[:])
	h.Write(request)
	return h.Sum(nil)
}

// jobRow is a row of the jobs table, its fields in the table's column order: the money functions
// answer the job as one composite value (ledger_job_result.job) and plain reads select it whole
// (SELECT j FROM jobs j), so that the table itself is the one list of the job's columns.
type jobRow struct {
	ID                 string
	AccountID          string
	Cost               int64
	State              string
	StateBeforeDelete  *string
	IsCharged          bool
	IsRefunded         bool
	IsReclaimed        bool
	Attempts           int32
	RequestFingerprint []byte
	RejectReason       *string
	RefundReason       *string
	CreatedAt          time.Time
	UpdatedAt          time.Time
	ChargedAt          *time.Time
	DeliveredAt        *time.Time
	RefundedAt         *time.Time
	ReclaimedAt        *time.Time
	DeletedAt          *time.Time
	Kind               *string
	PriceVersion       *int32
	Unit               *string
	UnitPrice          *int64
	HeldUnits          *int64
	UnitsUsed          *int64
	IsSettled          bool
	SettledAt          *time.Time
	RefundReasonCode   *string
	OutputRef          *string
	// OutcomeXID is the transaction that rejected or delivered the job, which its webhook event is
	// derived from (docs/design.md, "Webhooks"); a Job does not carry it.
	OutcomeXID *uint64
	// RejectedAt, AttemptsAtRefund and BalanceAtDelivery are what the job's rejection, refund and
	// delivery said when they happened, kept for its webhook events; a Job does not carry them.
	RejectedAt        *time.Time
	AttemptsAtRefund  *int32
	BalanceAtDelivery *int64
}

// job is the row as a Job.
func (r *jobRow) job() Job {
	if r == nil {
		return Job{}
	}
	return Job{
		ID: jobIDOfKey(r.ID), AccountID: r.AccountID, Cost: r.Cost, State: State(r.State),
		StateBeforeDelete: State(deref(r.StateBeforeDelete)),
		IsCharged:         r.IsCharged, IsRefunded: r.IsRefunded, IsReclaimed: r.IsReclaimed,
		Attempts:     int(r.Attempts),
		RejectReason: RejectReason(deref(r.RejectReason)),
		RefundReason: Reason(deref(r.RefundReasonCode)), RefundDetail: deref(r.RefundReason),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ChargedAt: r.ChargedAt, DeliveredAt: r.DeliveredAt,
		RefundedAt: r.RefundedAt, ReclaimedAt: r.ReclaimedAt, DeletedAt: r.DeletedAt,
		Kind: deref(r.Kind), PriceVersion: int(deref(r.PriceVersion)), Unit: Unit(deref(r.Unit)),
		UnitPrice: deref(r.UnitPrice), HeldUnits: deref(r.HeldUnits), UnitsUsed: r.UnitsUsed,
		IsSettled: r.IsSettled, SettledAt: r.SettledAt, OutputRef: deref(r.OutputRef),
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// answers decodes the outcome a money function answers (ledger_job_result.outcome, documented
// with the type in the baseline migration) once, into what the Go side says: the Outcome of a
// change that happened or not, or the error of a refusal. rejected is answered by
// [RejectedError], which needs the job.
var answers = map[string]struct {
	outcome Outcome
	err     error
}{
	"applied":         {Applied, nil},
	"already_applied": {AlreadyApplied, nil},
	"not_applied":     {NotApplied, nil},
	"not_found":       {NotApplied, ErrJobNotFound},
	"gone":            {NotApplied, ErrGone},
	"conflict":        {NotApplied, ErrConflict},
	"unknown_account": {NotApplied, ErrUnknownAccount},
	"unknown_kind":    {NotApplied, ErrUnknownKind},
	"units_above_max": {NotApplied, errUnitsAboveMax},
	"rejected":        {NotApplied, nil},
}

// call runs one of the schema's job functions (one round trip, one transaction) and decodes its
// answer into a Transition, or the error of a refusal, naming the job.
func (s *Store) call(ctx context.Context, key JobKey, function string, args ...any) (Transition, error) {
	var (
		code         string
		entryID      *int64
		balanceAfter *int64
		row          *jobRow
	)
	scan := func(r pgx.Row) error { return r.Scan(&code, &entryID, &balanceAfter, &row) }
	if err := s.queryRow(ctx, scan, `SELECT outcome, entry_id, balance_after, job FROM `+function, args...); err != nil {
		return Transition{}, fmt.Errorf("job %s: %w", key, err)
	}
	a, known := answers[code]
	if !known {
		return Transition{}, fmt.Errorf("job %s: the ledger answered %q, which this code does not know", key, code)
	}
	t := Transition{Outcome: a.outcome, Job: row.job(), EntryID: deref(entryID), BalanceAfter: deref(balanceAfter)}
	switch {
	case code == "rejected":
		return t, &RejectedError{Job: key, Reason: t.Job.RejectReason}
	case a.err != nil:
		return t, fmt.Errorf("job %s: %w", key, a.err)
	}
	return t, nil
}

// Submit writes the placeholder of a job (state submitting, nothing charged) at its kind's current
// price. Submitting the same ID with the same request again answers the original job, at the
// price it was submitted at, with AlreadyApplied; with a different request it fails with
// [ErrConflict]; once the ID is deleted, with [ErrGone]. A kind with no price is
// [ErrUnknownKind]; a maximum of units above the kind's, an [*InvalidInputError].
func (s *Store) Submit(ctx context.Context, sub Submission) (Transition, error) {
	if err := sub.Validate(); err != nil {
		return Transition{}, err
	}
	var maxUnits *int64
	if sub.MaxUnits > 0 {
		maxUnits = &sub.MaxUnits
	}
	t, err := s.call(ctx, sub.Key(), `ledger_submit($1, $2, $3, $4, $5, $6)`,
		sub.Key().String(), sub.AccountID, sub.Kind, maxUnits, sub.Fingerprint(), sub.Request)
	if errors.Is(err, errUnitsAboveMax) {
		price, perr := s.currentPrice(ctx, sub.Kind)
		if perr != nil {
			return t, perr
		}
		return t, &InvalidInputError{Field: "max units", Reason: fmt.Sprintf("is %d; a %s job holds at most %d %s units", sub.MaxUnits, sub.Kind, price.MaxUnits, price.Unit)}
	}
	return t, err
}

// errUnitsAboveMax is the ledger's refusal of a maximum of units above the kind's; Submit says it
// with the kind's maximum.
var errUnitsAboveMax = errors.New("max units above the kind's maximum")

// Charge takes a submitted job's recorded cost from its account (submitting -> running). When the
// account cannot pay, the job becomes rejected, nothing is charged, and the error is
// [ErrInsufficientCredits] (also on every later call); the Transition still shows the job.
func (s *Store) Charge(ctx context.Context, key JobKey) (Transition, error) {
	return s.ChargeMatching(ctx, key, nil)
}

// ChargeMatching is [Store.Charge] for a job that must have been submitted with the request of
// fingerprint ([Submission.Fingerprint]): a job submitted with another request is [ErrConflict]
// and nothing changes. A workflow started directly under a job's ID charges this way, so that it
// never bills the placeholder of another request. A nil fingerprint matches any request.
//
// A job rejected now or before is a [*RejectedError] saying why; it matches [ErrRejected], and
// [ErrInsufficientCredits] when that was the reason.
func (s *Store) ChargeMatching(ctx context.Context, key JobKey, fingerprint []byte) (Transition, error) {
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	return s.call(ctx, key, `ledger_charge($1, $2)`, key.String(), fingerprint)
}

// Refund gives a running job's recorded cost back (running -> refunded) because its work failed
// for good or timed out, or an operator stopped it; reason is the code its customer is told (one
// of the refund reason codes docs/api.md lists: any other is an [*InvalidInputError], with
// nothing written), detail the
// operator's words, attempts how many attempts the work had. The detail is kept scrubbed
// ([ScrubText]), never refused: words from outside must not block a refund. A refunded or
// recovered job answers AlreadyApplied; a job that was never charged or was delivered, NotApplied.
func (s *Store) Refund(ctx context.Context, key JobKey, reason Reason, detail string, attempts int) (Transition, error) {
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	if err := ValidateRefundReason(reason); err != nil {
		return Transition{}, err
	}
	if err := ValidateAttemptCount(attempts); err != nil {
		return Transition{}, err
	}
	return s.call(ctx, key, `ledger_refund($1, $2, $3, $4)`, key.String(), string(reason), ScrubText(detail), int32(attempts))
}

// Reclaim takes a refunded job's cost again because its result landed after all (refunded ->
// recovered), for a caller that knows no usage: a priced job is settled at its whole hold, nothing
// released ([Store.Settle] knows the usage). The original workflow's success path calls it
// unconditionally: on a job that was never refunded it answers NotApplied and writes nothing. The
// account may go below zero; see the debt rule of docs/design.md. A deleted refunded job is
// reclaimed too, and stays a tombstone; any other tombstone answers as the state it was deleted
// from would, or [ErrGone] when it was never charged.
func (s *Store) Reclaim(ctx context.Context, key JobKey) (Transition, error) {
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	return s.call(ctx, key, `ledger_reclaim($1)`, key.String())
}

// Settle bills a job's result in one transaction, whatever happened before it landed: a running
// job becomes delivered; a refunded one becomes recovered, its refund reclaimed (the debt rule
// applies). A job with a price is settled in the same transaction at unitsUsed — capped at the
// units its charge held, nil for the whole hold — and the unused part of its hold goes back in
// one release row. attempts is the attempt that produced the result; outputRef, its output, is
// kept on the job ("" when unknown). A settled job answers AlreadyApplied with the units and the
// output it was settled at; a job never charged, NotApplied; a negative usage or an output the
// ledger refuses is an [*InvalidInputError], with nothing written. Deletion hides a job, never
// what it owes: a deleted refunded job is recovered as a tombstone (State deleted,
// StateBeforeDelete recovered) and settled, its output not kept; a deleted settled job answers
// AlreadyApplied, a deleted rejected one [ErrGone].
func (s *Store) Settle(ctx context.Context, key JobKey, attempts int, unitsUsed *int64, outputRef string) (Transition, error) {
	if err := ValidateUnitsUsed(unitsUsed); err != nil {
		return Transition{}, err
	}
	if outputRef != "" {
		if err := ValidateOutputRef(outputRef); err != nil {
			return Transition{}, err
		}
	}
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	if err := ValidateAttemptCount(attempts); err != nil {
		return Transition{}, err
	}
	var output *string
	if outputRef != "" {
		output = &outputRef
	}
	return s.call(ctx, key, `ledger_settle($1, $2, $3, $4)`, key.String(), int32(attempts), unitsUsed, output)
}

// Deliver records that a running job's work succeeded (running -> delivered), for a caller that
// knows no usage: a priced job is settled at its whole hold, and no money moves ([Store.Settle]
// knows the usage). A delivered or recovered job answers AlreadyApplied; a refunded one
// NotApplied (reclaim it).
func (s *Store) Deliver(ctx context.Context, key JobKey, attempts int) (Transition, error) {
	return s.callWithAttempts(ctx, key, attempts, `ledger_deliver($1, $2)`)
}

// RecordAttempt records that the work of a running or refunded job has had attempts attempts.
// The count only grows: a smaller or equal count answers AlreadyApplied.
func (s *Store) RecordAttempt(ctx context.Context, key JobKey, attempts int) (Transition, error) {
	return s.callWithAttempts(ctx, key, attempts, `ledger_record_attempt($1, $2)`)
}

// Delete turns a settled job (rejected, delivered, refunded or recovered) into a tombstone: its ID
// can never be submitted or charged again, and deleting moves no money. It removes the job's
// content from view, never an obligation: a refunded job's late result still reclaims its refund
// ([Store.Settle]). A job that is submitting or running is refused with [ErrJobActive].
func (s *Store) Delete(ctx context.Context, key JobKey) (Transition, error) {
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	// Deleting a tombstone again answers AlreadyApplied: it is a repeat of the same request.
	t, err := s.call(ctx, key, `ledger_delete($1)`, key.String())
	if err == nil && t.Outcome == NotApplied {
		err = fmt.Errorf("job %s is %s: %w", key, t.Job.State, ErrJobActive)
	}
	return t, err
}

// Job reads a job's row. A job that was never submitted is [ErrJobNotFound]; a deleted job is
// returned as its tombstone (State deleted), without error.
func (s *Store) Job(ctx context.Context, key JobKey) (Job, error) {
	if err := key.Validate(); err != nil {
		return Job{}, err
	}
	var row *jobRow
	err := s.pool.QueryRow(ctx, `SELECT j FROM jobs j WHERE j.id = $1`, key.String()).Scan(&row)
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("job %s: %w", key, ErrJobNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("job %s: %w", key, translateError(err))
	}
	return row.job(), nil
}

// JobRequest is the request a job was submitted with ([Submission.Request]), kept so that its work
// can run again (a redrive) after Temporal has forgotten the job's workflow.
func (s *Store) JobRequest(ctx context.Context, key JobKey) ([]byte, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	var request []byte
	err := s.pool.QueryRow(ctx, `SELECT request FROM job_requests WHERE job_id = $1`, key.String()).Scan(&request)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", key, ErrJobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", key, translateError(err))
	}
	return request, nil
}

// maxAttempts is the largest attempt count the ledger keeps (it is an integer column).
const maxAttempts = 1 << 30

// ValidateAttemptCount checks how many attempts a job's work has had, as the ledger records it:
// a whole number from 0 to the largest the ledger keeps.
func ValidateAttemptCount(attempts int) error {
	if attempts < 0 || attempts > maxAttempts {
		return &InvalidInputError{Field: "attempts", Reason: fmt.Sprintf("is %d; it must be between 0 and %d", attempts, maxAttempts)}
	}
	return nil
}

// callWithAttempts validates a job ID and an attempt count, then calls fn (a ledger function
// taking both) as [Store.call] does.
func (s *Store) callWithAttempts(ctx context.Context, key JobKey, attempts int, fn string) (Transition, error) {
	if err := key.Validate(); err != nil {
		return Transition{}, err
	}
	if err := ValidateAttemptCount(attempts); err != nil {
		return Transition{}, err
	}
	return s.call(ctx, key, fn, key.String(), int32(attempts))
}
