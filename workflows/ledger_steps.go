package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
)

// ledgerStepTimeout bounds one ledger call. Each is one short transaction; a call that takes
// longer is stuck on a connection and is better retried.
const ledgerStepTimeout = 30 * time.Second

// ledgerStepHorizon stands for "no limit" on a local ledger step's retries. The SDK requires a
// ScheduleToCloseTimeout for local activities and, left unset, takes the StartToCloseTimeout:
// the step would then give up after 30 s, and a refund or reclaim that gives up leaves the money
// wrong.
const ledgerStepHorizon = 10 * 365 * 24 * time.Hour

// ledgerStep runs one ledger activity, as a local activity: the worker that runs the workflow
// task calls the ledger itself and records one marker event, where a regular activity costs
// three events and two round trips through the server's task queue. The step keeps its summary
// in the UI timeline. BENCHMARKS.md records the measurement behind the choice; changing it
// changes every recorded history, so it would be a versioned change (workflow.GetVersion).
//
// Its retries are unlimited: a refund or reclaim that gave
// up would leave the money wrong, and the guards make every retry safe (the idempotent-doors rule).
// Business refusals are non-retryable and come back at once.
//
// It runs activity, a method of a nil *activities.Activities (a.Charge): for a local
// activity the SDK resolves a method value by its name in the worker's registry and calls the
// registered instance's method, so the worker must register its Activities either way.
//
// A local step that keeps failing is still safe: while its retry backoff is within the workflow
// task timeout the worker retries it in place and heartbeats the workflow task; beyond that the
// SDK records the failed attempt in a marker and waits on a server timer ("LocalActivity
// Backoff") before the next attempt, so the workflow task never outlives its timeout. A worker
// that dies mid-step runs the step again on replay; the ledger's guards answer AlreadyApplied.
func ledgerStep(ctx workflow.Context, summary string, activity, input any) (activities.LedgerResult, error) {
	// A ledger step runs to its end even when the workflow is being cancelled: the refund of a
	// job whose work was cancelled is the compensation of its charge (the saga pattern), and a
	// cancelled context would fail it at once and leave the job charged for nothing.
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	retry := &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
	}
	f := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: ledgerStepHorizon,
		StartToCloseTimeout:    ledgerStepTimeout,
		RetryPolicy:            retry,
		Summary:                summary,
	}), activity, input)
	var res activities.LedgerResult
	err := f.Get(ctx, &res)
	return res, err
}

// errorType is the type of err's application error, or "" when it has none.
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// refusedForGood reports whether a ledger step's error is a refusal the same call meets every
// time: bad input or the database's permanent refusal. Such a step raises an alarm.
func refusedForGood(err error) bool {
	switch errorType(err) {
	case activities.ErrorTypeInvalidInput, activities.ErrorTypeLedgerRefused:
		return true
	}
	return false
}
