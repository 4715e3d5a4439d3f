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

// LedgerSteps says how a workflow runs its ledger steps (charge, refund, reclaim, deliver).
type LedgerSteps string

const (
	// LocalLedgerSteps runs each ledger step as a local activity: the worker that runs the
	// workflow task calls the ledger itself and records one marker event, with no round trips
	// through the server's task queues. The step keeps its summary in the UI timeline.
	LocalLedgerSteps LedgerSteps = "local"
	// RegularLedgerSteps runs each ledger step as a regular activity, scheduled through the
	// server (three events and two task-queue round trips per step).
	RegularLedgerSteps LedgerSteps = "regular"
)

// DefaultLedgerSteps is how [MeteredJob] and [LateResult] run their ledger steps. Local, by the
// benchmark (worker/workerbench, BENCHMARKS.md): on the dev server a metered job with regular
// ledger steps ran at 0.35-0.40x the throughput of a bare workflow and reclaimed about 100 ms
// (p50) after a result signal; with local ones at 0.79-0.93x and about 12 ms, because each step
// then costs one marker event instead of three events and two round trips through the server's
// task queue.
// Changing it changes every recorded history, so it is a versioned change (workflow.GetVersion).
const DefaultLedgerSteps = LocalLedgerSteps

// MeteredJobWithLedgerSteps is [MeteredJob] running its ledger steps as steps says. It exists
// for the benchmark that compares the two (worker/workerbench). Register it under MeteredJob's
// name ([WorkflowType], with workflow.RegisterOptions) on a task queue of its own: the two ways
// write different histories, so a job must always be run, and replayed, by the way it started.
func MeteredJobWithLedgerSteps(steps LedgerSteps) func(workflow.Context, JobInput) (JobStatus, error) {
	return func(ctx workflow.Context, in JobInput) (JobStatus, error) {
		return MeteredJob(workflow.WithValue(ctx, ledgerStepsKey{}, steps), in)
	}
}

// ledgerStepsKey keys the workflow context's LedgerSteps; unset means DefaultLedgerSteps.
type ledgerStepsKey struct{}

// ledgerStepHorizon stands for "no limit" on a local ledger step's retries. The SDK requires a
// ScheduleToCloseTimeout for local activities and, left unset, takes the StartToCloseTimeout:
// the step would then give up after 30 s, and a refund or reclaim that gives up leaves the money
// wrong.
const ledgerStepHorizon = 10 * 365 * 24 * time.Hour

// ledgerStep runs one ledger activity. Its retries are unlimited: a refund or reclaim that gave
// up would leave the money wrong, and the guards make every retry safe (money rule 8). Business
// refusals are non-retryable and come back at once.
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
	steps, _ := ctx.Value(ledgerStepsKey{}).(LedgerSteps)
	if steps == "" {
		steps = DefaultLedgerSteps
	}
	var f workflow.Future
	if steps == LocalLedgerSteps {
		f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: ledgerStepHorizon,
			StartToCloseTimeout:    ledgerStepTimeout,
			RetryPolicy:            retry,
			Summary:                summary,
		}), activity, input)
	} else {
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: ledgerStepTimeout,
			RetryPolicy:         retry,
			Summary:             summary,
		}), activity, input)
	}
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
