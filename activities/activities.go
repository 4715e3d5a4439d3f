package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Ledger is the part of [*ledgerdb.Store] the activities use. It is an interface so that tests can
// put a fake ledger behind the activities; production code passes the Store.
type Ledger interface {
	// Submit writes a job's placeholder (state submitting), for a workflow started without one.
	Submit(ctx context.Context, sub ledgerdb.Submission) (ledgerdb.Transition, error)
	// ChargeMatching takes the job's recorded cost (submitting -> running) if the job was
	// submitted with the request of fingerprint (any request when nil).
	ChargeMatching(ctx context.Context, job ledgerdb.JobKey, fingerprint []byte) (ledgerdb.Transition, error)
	// Refund gives the recorded cost back (running -> refunded), recording the reason code its
	// customer is told and the operator's detail.
	Refund(ctx context.Context, job ledgerdb.JobKey, reason ledgerdb.Reason, detail string, attempts int) (ledgerdb.Transition, error)
	// Reclaim takes a refunded job's cost again (refunded -> recovered); a no-op otherwise.
	Reclaim(ctx context.Context, job ledgerdb.JobKey) (ledgerdb.Transition, error)
	// Deliver records that the work succeeded (running -> delivered); no money moves.
	Deliver(ctx context.Context, job ledgerdb.JobKey, attempts int) (ledgerdb.Transition, error)
	// Settle bills a result in one step: running -> delivered, or refunded -> recovered, and a
	// priced job settled at unitsUsed (nil: the whole hold), its unused hold released.
	Settle(ctx context.Context, job ledgerdb.JobKey, attempts int, unitsUsed *int64, outputRef string) (ledgerdb.Transition, error)
	// RecordAttempt records how many attempts the work has had.
	RecordAttempt(ctx context.Context, job ledgerdb.JobKey, attempts int) (ledgerdb.Transition, error)
	// RaiseAlarm records that the database refused one of the job's steps for good.
	RaiseAlarm(ctx context.Context, job ledgerdb.JobKey, step, message string) (ledgerdb.Outcome, error)
}

// Activities are jobbill's Temporal activities. Register one value with the worker; the workflow
// refers to the methods through a nil *Activities.
type Activities struct {
	// Ledger is where money moves; in production a *ledgerdb.Store.
	Ledger Ledger
	// Runner runs the GPU work; used only by RunWork.
	Runner Runner
	// Metrics records each ledger call (a *metrics.Metrics); nil records nothing.
	Metrics LedgerRecorder
	// Healer heals a job that the charge step charged after its workflow had closed (see
	// [Activities.Charge]); in production the job service. nil heals nothing: the reconcile pass
	// does, within its interval.
	Healer ChargeHealer
}

// ChargeHealer heals a charged job that no workflow runs. It is an interface because the job
// service's package imports this one.
type ChargeHealer interface {
	// Heal compensates the running job when its workflow has closed without settling it — a heal
	// run refunds it — and says whether it had to; while a run of the job is open it does nothing.
	Heal(ctx context.Context, job ledgerdb.Job) (bool, error)
}

// LedgerRecorder records a guarded ledger call: which operation, what it answered, how long it took.
type LedgerRecorder interface {
	// LedgerCall records one call of operation (charge, refund, reclaim, deliver, settle): its
	// answer or error, and how long it took.
	LedgerCall(operation string, t ledgerdb.Transition, err error, took time.Duration)
	// LedgerAlarm records an alarm raised because the database refused a job's step for good.
	LedgerAlarm(step string)
}

// call makes one guarded ledger call, times it and passes its answer through the recorder (if
// there is one), and answers it as the workflow reads it.
func (a *Activities) call(operation string, ledgerCall func() (ledgerdb.Transition, error)) (LedgerResult, error) {
	start := time.Now()
	t, err := ledgerCall()
	if a.Metrics != nil {
		a.Metrics.LedgerCall(operation, t, err, time.Since(start))
	}
	res := resultOf(t)
	if err != nil {
		return res, ledgerError(err, res)
	}
	return res, nil
}

// Application error types of the activities. They are part of the contract with the workflow and
// with retry policies, so they are constants that never change, whatever the Go errors are called.
const (
	// ErrorTypeInsufficientCredits: the account cannot pay the job; the job is rejected and nothing
	// was charged. Non-retryable.
	ErrorTypeInsufficientCredits = "InsufficientCredits"
	// ErrorTypeJobGone: the job was deleted; its ID is burnt and can never be charged. Non-retryable.
	ErrorTypeJobGone = "JobGone"
	// ErrorTypeJobNotFound: no job was ever submitted under the ID. Non-retryable.
	ErrorTypeJobNotFound = "JobNotFound"
	// ErrorTypeJobConflict: the job ID was submitted with another request than the workflow's;
	// nothing was charged. Non-retryable.
	ErrorTypeJobConflict = "JobConflict"
	// ErrorTypeJobRejected: the job was rejected before it was charged for a reason other than
	// credits (its workflow ended before charging, its workflow ID was taken, the exposure
	// limit); nothing was charged. Non-retryable. Its details are a [LedgerResult].
	ErrorTypeJobRejected = "JobRejected"
	// ErrorTypeUnknownAccount: the job's account does not exist. Non-retryable.
	ErrorTypeUnknownAccount = "UnknownAccount"
	// ErrorTypeUnknownKind: the price list has no price for the job's kind; nothing was written.
	// Non-retryable.
	ErrorTypeUnknownKind = "UnknownKind"
	// ErrorTypeInvalidInput: the ledger refused an argument (an ID, a reason). Non-retryable,
	// because the same argument is refused every time.
	ErrorTypeInvalidInput = "InvalidInput"
	// ErrorTypeLedgerRefused: the database refused the call for good (a value out of range, a
	// violated constraint, a missing privilege; see ledgerdb.Permanent). Non-retryable: the
	// workflow raises an alarm instead of retrying a call that can never succeed.
	ErrorTypeLedgerRefused = "LedgerRefused"
	// ErrorTypeWorkFailed: an attempt of the GPU work failed; retryable. Its details are a
	// [WorkFailure].
	ErrorTypeWorkFailed = "WorkFailed"
	// ErrorTypeWorkFailedPermanently: the runner said the work can never succeed (see
	// [ErrWorkPermanent]); non-retryable. Its details are a [WorkFailure].
	ErrorTypeWorkFailedPermanently = "WorkFailedPermanently"
)

// NonRetryableErrorTypes lists the error types above that no retry can fix. The activities
// already mark these errors non-retryable; retry policies list them too so the contract also holds
// for an error that crossed a process boundary without its flag.
var NonRetryableErrorTypes = []string{
	ErrorTypeInsufficientCredits,
	ErrorTypeJobGone,
	ErrorTypeJobNotFound,
	ErrorTypeJobConflict,
	ErrorTypeJobRejected,
	ErrorTypeUnknownAccount,
	ErrorTypeInvalidInput,
	ErrorTypeLedgerRefused,
	ErrorTypeWorkFailedPermanently,
}

// SubmitInput is the placeholder a workflow started without one writes for its job: the same
// guarded submission the job service makes, with the same request fingerprint.
type SubmitInput struct {
	// JobID is the client's job ID.
	JobID string
	// AccountID is the paying account.
	AccountID string
	// Kind names what the job is; the ledger prices it from the price list (the price-list rule).
	Kind string
	// MaxUnits is the client's smaller maximum of units for a metered kind; 0 for the kind's.
	MaxUnits int64 `json:",omitempty"`
	// InputRef is the job's input, the request the fingerprint covers.
	InputRef string
}

// Submission is the ledger's submission of this input.
func (in SubmitInput) Submission() ledgerdb.Submission {
	return ledgerdb.Submission{JobID: in.JobID, AccountID: in.AccountID, Kind: in.Kind, MaxUnits: in.MaxUnits, Request: []byte(in.InputRef)}
}

// ChargeInput names the job to charge. There is no amount: the ledger charges the job's recorded
// cost (the price-list rule).
type ChargeInput struct {
	// Job names the job: its account and its ID.
	Job ledgerdb.JobKey
	// Fingerprint, when set, is the fingerprint of the request the workflow runs
	// (ledgerdb.Submission.Fingerprint): a job submitted with another request is not charged.
	Fingerprint []byte `json:",omitempty"`
}

// RefundInput names the job to refund and says why. There is no amount (the price-list rule).
type RefundInput struct {
	// Job names the job: its account and its ID.
	Job ledgerdb.JobKey
	// Reason is the code the customer is told, e.g. timed_out. One outside the refund codes (none,
	// in runs recorded before the codes; anything, in a heal input another Temporal client wrote)
	// refunds as ledgerdb.ReasonUnknown: a refund must never wait for words.
	Reason ledgerdb.Reason `json:",omitempty"`
	// Detail is the operator's words, e.g. "timed out after 3 attempts": kept on the job row,
	// scrubbed of credentials, and never shown to a customer.
	Detail string
	// Attempts is how many attempts the work had.
	Attempts int
}

// ReclaimInput names the job whose refund is taken back. There is no amount (the price-list rule).
type ReclaimInput struct {
	// Job names the job: its account and its ID.
	Job ledgerdb.JobKey
}

// DeliverInput names the job whose work succeeded.
type DeliverInput struct {
	// Job names the job: its account and its ID.
	Job ledgerdb.JobKey
	// Attempts is the attempt that produced the result.
	Attempts int
}

// SettleInput names the job whose result landed, and what its work used. There is no amount: the
// ledger bills the usage at the job's recorded price, capped at its hold (the price-list rule).
type SettleInput struct {
	// Job names the job: its account and its ID.
	Job ledgerdb.JobKey
	// Attempt is the attempt that produced the result.
	Attempt int
	// UnitsUsed is the usage the result reported; nil when it said none (the whole hold).
	UnitsUsed *int64 `json:",omitempty"`
	// OutputRef is the result's output, which the ledger keeps with the settlement; "" in runs
	// recorded before it did.
	OutputRef string `json:",omitempty"`
}

// AlarmInput says which of a job's ledger steps the database refused for good, and how.
type AlarmInput struct {
	// Job names the job: its account and its ID.
	Job ledgerdb.JobKey
	// Step is the refused step: charge, refund or settle.
	Step string
	// Message is the refusal.
	Message string
}

// LedgerResult is what a ledger activity did and where the job stands afterwards. It is also the
// details of the non-retryable errors, so the workflow can show a rejected job's state and reason.
type LedgerResult struct {
	// Outcome says whether this call made the change, an earlier call did, or it did not apply.
	Outcome ledgerdb.Outcome
	// State is the job's state after the call.
	State ledgerdb.State
	// MoneyState is what the user is told about their money after the call.
	MoneyState ledgerdb.MoneyState
	// Cost is the job's recorded cost, what its charge holds: the amount its charge, refund and
	// reclaim move.
	Cost int64
	// Kind and Unit are the job's kind and what it is sold by; empty for a job submitted with a
	// cost before the price list.
	Kind string        `json:",omitempty"`
	Unit ledgerdb.Unit `json:",omitempty"`
	// HeldUnits is how many units the job's charge holds: the most its work may use and be billed.
	HeldUnits int64 `json:",omitempty"`
	// UnitsUsed is the usage the job was settled at; nil until it is settled.
	UnitsUsed *int64 `json:",omitempty"`
	// Charged is what the job costs its account as it stands (ledgerdb.Job.Charged), and
	// Released the part of the hold its settlement gave back.
	Charged  int64 `json:",omitempty"`
	Released int64 `json:",omitempty"`
	// Attempts is the attempt count on the job row.
	Attempts int
	// EntryID is the ledger row this call wrote; 0 when it wrote none.
	EntryID int64
	// BalanceAfter is the account's balance after that row; meaningful only when EntryID is not 0.
	BalanceAfter int64
	// Reason is the job's reject reason code, or its refund's detail (the operator's words,
	// scrubbed), if any: what the workflow shows in the Temporal UI, never to a customer.
	Reason string
}

// Submit writes the job's placeholder, as the job service does before it starts a workflow: a workflow
// started directly (by another Temporal client) calls it when its charge finds no job. The same
// request again answers AlreadyApplied; another request under the ID, a deleted ID or an unknown
// account is a non-retryable error.
func (a *Activities) Submit(ctx context.Context, in SubmitInput) (LedgerResult, error) {
	return a.call("submit", func() (ledgerdb.Transition, error) { return a.Ledger.Submit(ctx, in.Submission()) })
}

// Charge takes the job's recorded cost from its account. A refused charge (insufficient credits,
// a deleted ID, an unknown job, another request under the ID) is a non-retryable error; a repeat
// answers AlreadyApplied.
//
// A charge can commit after the run that asked for it has closed: an operator terminated the run
// while the charge waited for a busy ledger, and the step ran on to its end. No run will then
// deliver or refund the job, so a charge that leaves the job running is handed to the Healer,
// which heals it at once when the job's workflow has closed (and, the usual case, finds it open
// and does nothing), rather than leave the job charged until the next reconcile pass.
func (a *Activities) Charge(ctx context.Context, in ChargeInput) (LedgerResult, error) {
	var charged ledgerdb.Job
	res, err := a.call("charge", func() (ledgerdb.Transition, error) {
		t, err := a.Ledger.ChargeMatching(ctx, in.Job, in.Fingerprint)
		charged = t.Job
		return t, err
	})
	if err == nil && res.State == ledgerdb.StateRunning && a.Healer != nil {
		a.healOrphanedCharge(ctx, charged)
	}
	return res, err
}

// healTimeout bounds the heal a charge step makes of a job charged after its run closed: a start
// and the wait for its refund. A heal that takes longer is left to the reconcile pass.
const healTimeout = 30 * time.Second

// healOrphanedCharge heals job when its workflow has closed, on a context of its own: the step's
// may be cancelled by then, since its run is gone. A heal that fails is logged and left to the
// reconcile pass, and the charge's answer stands either way: it is the ledger's.
func (a *Activities) healOrphanedCharge(ctx context.Context, job ledgerdb.Job) {
	healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
	defer cancel()
	healed, err := a.Healer.Heal(healCtx, job)
	if !activity.IsActivity(ctx) {
		return
	}
	switch {
	case err != nil:
		activity.GetLogger(ctx).Warn("The job was charged after its workflow closed, and healing it failed; the reconcile pass heals it.",
			"JobID", job.ID, "AccountID", job.AccountID, "Error", err)
	case healed:
		activity.GetLogger(ctx).Info("The job was charged after its workflow closed; healed at once: a heal run refunded it.",
			"JobID", job.ID, "AccountID", job.AccountID)
	}
}

// Refund gives a running job's recorded cost back because its work failed for good or timed out,
// or an operator stopped it. A repeat answers AlreadyApplied; a job that was delivered meanwhile
// answers NotApplied.
func (a *Activities) Refund(ctx context.Context, in RefundInput) (LedgerResult, error) {
	reason := in.Reason
	if ledgerdb.ValidateRefundReason(reason) != nil {
		reason = ledgerdb.ReasonUnknown
	}
	return a.call("refund", func() (ledgerdb.Transition, error) {
		return a.Ledger.Refund(ctx, in.Job, reason, in.Detail, in.Attempts)
	})
}

// Reclaim takes a refunded job's cost again because its result landed after all. The success path
// calls it unconditionally: on a job that was never refunded it answers NotApplied.
func (a *Activities) Reclaim(ctx context.Context, in ReclaimInput) (LedgerResult, error) {
	return a.call("reclaim", func() (ledgerdb.Transition, error) { return a.Ledger.Reclaim(ctx, in.Job) })
}

// Deliver records that a running job's work succeeded; no money moves. On a recovered job it
// answers AlreadyApplied.
func (a *Activities) Deliver(ctx context.Context, in DeliverInput) (LedgerResult, error) {
	return a.call("deliver", func() (ledgerdb.Transition, error) { return a.Ledger.Deliver(ctx, in.Job, in.Attempts) })
}

// Settle bills the job's result in one step: a running job is delivered, a refunded one recovered
// (its refund reclaimed). A repeat answers AlreadyApplied.
func (a *Activities) Settle(ctx context.Context, in SettleInput) (LedgerResult, error) {
	return a.call("settle", func() (ledgerdb.Transition, error) {
		return a.Ledger.Settle(ctx, in.Job, in.Attempt, in.UnitsUsed, in.OutputRef)
	})
}

// RaiseAlarm records that the database refused one of the job's steps for good, once per job and
// step, and counts it. It is the loud end of a step no retry can write.
func (a *Activities) RaiseAlarm(ctx context.Context, in AlarmInput) error {
	outcome, err := a.Ledger.RaiseAlarm(ctx, in.Job, in.Step, in.Message)
	if err != nil {
		return err
	}
	if outcome == ledgerdb.Applied && a.Metrics != nil {
		a.Metrics.LedgerAlarm(in.Step)
	}
	return nil
}

func resultOf(t ledgerdb.Transition) LedgerResult {
	j := t.Job
	reason := j.RefundDetail
	if reason == "" {
		reason = string(j.RejectReason)
	}
	return LedgerResult{
		Outcome:      t.Outcome,
		State:        j.State,
		MoneyState:   j.MoneyState(),
		Cost:         j.Cost,
		Kind:         j.Kind,
		Unit:         j.Unit,
		HeldUnits:    j.HeldUnits,
		UnitsUsed:    j.UnitsUsed,
		Charged:      j.Charged(),
		Released:     j.Released(),
		Attempts:     j.Attempts,
		EntryID:      t.EntryID,
		BalanceAfter: t.BalanceAfter,
		Reason:       reason,
	}
}

// refusalTypes are the error types of the ledger's business refusals, the first match winning:
// insufficient credits is a kind of rejection, and says more.
var refusalTypes = []struct {
	err     error
	errType string
}{
	{ledgerdb.ErrInsufficientCredits, ErrorTypeInsufficientCredits},
	{ledgerdb.ErrRejected, ErrorTypeJobRejected},
	{ledgerdb.ErrGone, ErrorTypeJobGone},
	{ledgerdb.ErrJobNotFound, ErrorTypeJobNotFound},
	{ledgerdb.ErrConflict, ErrorTypeJobConflict},
	{ledgerdb.ErrUnknownAccount, ErrorTypeUnknownAccount},
	{ledgerdb.ErrUnknownKind, ErrorTypeUnknownKind},
	{ledgerdb.ErrInvalidInput, ErrorTypeInvalidInput},
}

// ledgerError maps the ledger's business refusals, and the database's permanent refusals
// (ledgerdb.Permanent), to non-retryable application errors with constant types, and leaves every
// other error (a lost connection, a timeout, a deadlock) retryable: a guarded call that failed
// wrote nothing, or wrote it once and will answer AlreadyApplied on the retry. The details (a job
// step's [LedgerResult]) travel with a refusal.
func ledgerError(err error, details ...any) error {
	errType := ""
	for _, r := range refusalTypes {
		if errors.Is(err, r.err) {
			errType = r.errType
			break
		}
	}
	if errType == "" && ledgerdb.Permanent(err) {
		errType = ErrorTypeLedgerRefused
	}
	if errType == "" {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), errType, temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Cause:        err,
		Details:      details,
	})
}
