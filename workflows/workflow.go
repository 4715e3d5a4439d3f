// Package workflows holds jobbill's deterministic workflow code: the metered job workflow, its
// signals, its query and its search attributes. DESIGN.md ("The workflow") is the shape.
//
// The workflow never decides an amount and never trusts its own idea of the money: every step
// that moves money is a guarded ledger call through [activities.Activities], and the state the
// workflow shows (query, search attributes) is the state the ledger answered.
package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// ledgerStepTimeout bounds one ledger call. Each is one short transaction; a call that takes
// longer is stuck on a connection and is better retried.
const ledgerStepTimeout = 30 * time.Second

// ErrorTypeInvalidJobInput is the type of the non-retryable error a workflow fails with when its
// input cannot be billed (for instance a job ID that is not the workflow ID).
const ErrorTypeInvalidJobInput = "InvalidJobInput"

// a names the activities through a nil pointer, as samples-go greetings/ does: the worker
// registers the real struct; the workflow only needs the method names.
var a *activities.Activities

// MeteredJob bills one GPU job: charge → run the work under the retry policy → on success
// reclaim (a no-op unless refunded) and deliver; when retries are exhausted, refund, mark the job
// dead-lettered and listen for a late result (reclaim → recovered) or a redrive until the
// late-result window ends. A refused charge ends the workflow as rejected, without error.
//
// Signals: [SignalResult] ([ResultSignal]) and [SignalRedrive] ([RedriveRequest]). Query:
// [QueryStatus] ([JobStatus]). The workflow's result is the final JobStatus.
func MeteredJob(ctx workflow.Context, in JobInput) (JobStatus, error) {
	workflowID := workflow.GetInfo(ctx).WorkflowExecution.ID
	if in.JobID == "" {
		in.JobID = workflowID
	}
	j := &meteredJob{
		in:       in,
		policy:   in.Policy.WithDefaults(),
		status:   JobStatus{JobID: in.JobID, AccountID: in.AccountID, Cost: in.Cost},
		results:  workflow.GetSignalChannel(ctx, SignalResult),
		redrives: workflow.GetSignalChannel(ctx, SignalRedrive),
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (JobStatus, error) { return j.status, nil }); err != nil {
		return j.status, err
	}
	// The update only waits; it never changes the job, so a submission retried any number of
	// times gets the same answer.
	err := workflow.SetUpdateHandler(ctx, UpdateChargeDecision, func(ctx workflow.Context) (ChargeDecision, error) {
		if err := workflow.Await(ctx, func() bool { return j.decision != nil }); err != nil {
			return ChargeDecision{}, err
		}
		return *j.decision, nil
	})
	if err != nil {
		return j.status, err
	}
	if in.JobID != workflowID {
		// The workflow ID is what makes a job ID unique in Temporal (money rule 7); a workflow
		// billing another ID would defeat it.
		return j.status, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("job ID %q is not the workflow ID %q", in.JobID, workflowID),
			ErrorTypeInvalidJobInput, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	err = j.run(ctx)
	j.ignoreLeftoverSignals(ctx)
	return j.status, err
}

// meteredJob is one run of the workflow: its input, what it knows, and its signal channels.
type meteredJob struct {
	in       JobInput
	policy   Policy
	status   JobStatus
	results  workflow.ReceiveChannel
	redrives workflow.ReceiveChannel
	// decision is set once the charge is decided; the UpdateChargeDecision handler waits for it.
	decision *ChargeDecision
}

// decideCharge records the charge's outcome for the UpdateChargeDecision handler.
func (j *meteredJob) decideCharge(state ledgerdb.State, money ledgerdb.MoneyState, reason string) {
	if j.decision == nil {
		j.decision = &ChargeDecision{State: state, MoneyState: money, Reason: reason}
	}
}

// workOutcome is how a run of the work ended: a result (from the activity or from a result
// signal), or the activity's final error.
type workOutcome struct {
	result   activities.WorkResult
	signaled bool
	err      error
	// lastAttempt is the number the run's last attempt had when the retry policy ran out: the
	// attempts before this run plus MaximumAttempts.
	lastAttempt int32
}

func (j *meteredJob) run(ctx workflow.Context) error {
	j.transition(ctx, ledgerdb.StateSubmitting, ledgerdb.MoneyNotCharged, false,
		fmt.Sprintf("Charging %d credits to account %s.", j.in.Cost, j.in.AccountID))

	// 1. Charge. The ledger charges its own record of the cost; a refusal is final.
	charge, err := ledgerStep(ctx, fmt.Sprintf("charge %d credits", j.in.Cost),
		a.Charge, activities.ChargeInput{JobID: j.in.JobID})
	if err != nil {
		if reason, ok := rejection(err); ok {
			j.status.Reason = reason
			j.decideCharge(ledgerdb.StateRejected, ledgerdb.MoneyNotCharged, reason)
			j.transition(ctx, ledgerdb.StateRejected, ledgerdb.MoneyNotCharged, false,
				fmt.Sprintf("Rejected: %s. Nothing was charged.", reason))
			return nil
		}
		return err
	}
	j.decideCharge(charge.State, charge.MoneyState, charge.Reason)
	// A later run of this workflow ID (a redrive after the workflow closed) continues the count.
	j.status.Attempts = max(j.status.Attempts, charge.Attempts)
	switch charge.State {
	case ledgerdb.StateRunning:
	case ledgerdb.StateRefunded:
		// An earlier run of this workflow ID charged and refunded the job; only a late result
		// or a redrive can change it now.
		j.status.Reason = charge.Reason
		j.transition(ctx, charge.State, charge.MoneyState, true, j.deadLetterDetails())
		return j.awaitLateResult(ctx)
	default:
		// An earlier run already settled the job: say so and change nothing.
		j.transition(ctx, charge.State, charge.MoneyState, false,
			fmt.Sprintf("Already %s before this run; nothing to do.", charge.State))
		return nil
	}

	// 2. Run the work under the retry policy; a result signal may end it early.
	j.transition(ctx, ledgerdb.StateRunning, ledgerdb.MoneyCharged, false,
		fmt.Sprintf("Charged %d credits. Running the work: up to %d attempts, %s each.",
			j.in.Cost, j.policy.MaximumAttempts, j.policy.StartToClose))
	out := j.runWork(ctx)
	if out.err == nil {
		// 3. Success.
		return j.settle(ctx, out)
	}

	// 4. Retries exhausted or the work failed for good: the compensation of step 1.
	reason, attempts := failureReason(out.err, out.lastAttempt)
	j.status.Attempts = max(j.status.Attempts, attempts)
	refund, err := ledgerStep(ctx, fmt.Sprintf("refund %d credits: %s", j.in.Cost, reason),
		a.Refund, activities.RefundInput{JobID: j.in.JobID, Reason: reason, Attempts: attempts})
	if err != nil {
		return j.endIfGone(ctx, err)
	}
	if refund.State != ledgerdb.StateRefunded {
		// The ledger knows better (for instance the starter's fallback delivered meanwhile).
		j.transition(ctx, refund.State, refund.MoneyState, false,
			fmt.Sprintf("Not refunded: the job is already %s.", refund.State))
		return nil
	}
	j.status.Reason = reason
	j.transition(ctx, ledgerdb.StateRefunded, refund.MoneyState, true, j.deadLetterDetails())
	return j.awaitLateResult(ctx)
}

// runWork runs the work activity until it succeeds, fails for good, or a result signal says the
// work already finished; in that last case it cancels the running attempt (and its retries).
func (j *meteredJob) runWork(ctx workflow.Context) workOutcome {
	p := j.policy
	// When a result signal ends the wait, the deferred cancel stops the attempt still running (or
	// waiting to retry), which would only produce the result again. After the activity finished,
	// the cancel is a no-op.
	workCtx, cancelWork := workflow.WithCancel(ctx)
	defer cancelWork()
	workCtx = workflow.WithActivityOptions(workCtx, workflow.ActivityOptions{
		StartToCloseTimeout: p.StartToClose,
		HeartbeatTimeout:    p.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        p.InitialInterval,
			BackoffCoefficient:     p.BackoffCoefficient,
			MaximumInterval:        p.MaximumInterval,
			MaximumAttempts:        p.MaximumAttempts,
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
		},
		Summary: fmt.Sprintf("run the work: up to %d attempts, %s each", p.MaximumAttempts, p.StartToClose),
	})
	req := j.in.Work
	req.JobID, req.Attempt, req.PriorAttempts = j.in.JobID, 0, j.status.Attempts
	work := workflow.ExecuteActivity(workCtx, a.RunWork, req)

	out := workOutcome{lastAttempt: int32(req.PriorAttempts) + p.MaximumAttempts}
	lastAttempt := out.lastAttempt
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(work, func(f workflow.Future) {
		out.err = f.Get(ctx, &out.result)
		done = true
	})
	sel.AddReceive(j.results, func(c workflow.ReceiveChannel, _ bool) {
		var s ResultSignal
		c.Receive(ctx, &s)
		out = workOutcome{result: s.workResult(), signaled: true, lastAttempt: lastAttempt}
		done = true
	})
	sel.AddReceive(j.redrives, func(c workflow.ReceiveChannel, _ bool) {
		var r RedriveRequest
		c.Receive(ctx, &r)
		workflow.GetLogger(ctx).Info("Redrive ignored: the work is already running.", "By", r.By)
	})
	for !done {
		sel.Select(ctx)
	}
	return out
}

// settle bills a result: reclaim (a no-op unless the job was refunded) and then deliver, as
// DESIGN.md's success path does, letting the guards decide. The job ends delivered, or recovered
// if it had been refunded.
func (j *meteredJob) settle(ctx workflow.Context, out workOutcome) error {
	res := out.result
	j.status.Attempts = max(j.status.Attempts, res.Attempt)
	reclaimSummary := fmt.Sprintf("reclaim %d credits if refunded", j.in.Cost)
	if j.status.State == ledgerdb.StateRefunded {
		reclaimSummary = fmt.Sprintf("reclaim %d credits: the result of attempt %d landed late", j.in.Cost, res.Attempt)
	}
	if _, err := ledgerStep(ctx, reclaimSummary, a.Reclaim, activities.ReclaimInput{JobID: j.in.JobID}); err != nil {
		return j.endIfGone(ctx, err)
	}
	deliver, err := ledgerStep(ctx, fmt.Sprintf("deliver the result of attempt %d", res.Attempt),
		a.Deliver, activities.DeliverInput{JobID: j.in.JobID, Attempts: res.Attempt})
	if err != nil {
		return j.endIfGone(ctx, err)
	}
	j.status.OutputRef = res.OutputRef
	how := "the work activity returned it"
	if out.signaled {
		how = "it was reported by a result signal"
	}
	j.transition(ctx, deliver.State, deliver.MoneyState, false,
		fmt.Sprintf("%s: result of attempt %d (%s); %d credits charged.", deliver.State, res.Attempt, how, j.in.Cost))
	return nil
}

// awaitLateResult keeps a refunded (dead-lettered) job listening: a result signal reclaims the
// refund, a redrive runs the work again, and when the window ends the workflow closes as refunded.
func (j *meteredJob) awaitLateResult(ctx workflow.Context) error {
	for {
		var (
			late    *ResultSignal
			redrive *RedriveRequest
		)
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimerWithOptions(timerCtx, j.policy.LateResultWindow,
			workflow.TimerOptions{Summary: fmt.Sprintf("late-result window (%s)", j.policy.LateResultWindow)})
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(j.results, func(c workflow.ReceiveChannel, _ bool) {
			late = new(ResultSignal)
			c.Receive(ctx, late)
		})
		sel.AddReceive(j.redrives, func(c workflow.ReceiveChannel, _ bool) {
			redrive = new(RedriveRequest)
			c.Receive(ctx, redrive)
		})
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.Select(ctx)
		cancelTimer()

		if late == nil && redrive == nil {
			// The window ended. A result that came with the timer in the same task still counts.
			var s ResultSignal
			if !j.results.ReceiveAsync(&s) {
				workflow.SetCurrentDetails(ctx, fmt.Sprintf("Refunded %d credits: %s. The late-result window "+
					"(%s) ended; the job stays a dead letter.", j.in.Cost, j.status.Reason, j.policy.LateResultWindow))
				return nil
			}
			late = &s
		}
		if late != nil {
			return j.settle(ctx, workOutcome{result: late.workResult(), signaled: true})
		}

		// A redrive: the same work under the same guards. On success the refund is reclaimed.
		j.status.Redrives++
		j.transition(ctx, ledgerdb.StateRefunded, ledgerdb.MoneyRefunded, true,
			fmt.Sprintf("Redrive %d (by %s): running the work again; the job stays refunded until it succeeds.",
				j.status.Redrives, redrive.By))
		out := j.runWork(ctx)
		if out.err == nil {
			return j.settle(ctx, out)
		}
		reason, attempts := failureReason(out.err, out.lastAttempt)
		j.status.Attempts = max(j.status.Attempts, attempts)
		j.status.Reason = fmt.Sprintf("redrive %d %s", j.status.Redrives, reason)
		// No second refund: the job is still refunded, and the guard would refuse one anyway.
		j.transition(ctx, ledgerdb.StateRefunded, ledgerdb.MoneyRefunded, true, j.deadLetterDetails())
	}
}

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

// endIfGone ends the workflow without error when the job was deleted under it (a refunded job
// may be deleted while it waits for a late result): its money stays as it was. Other errors fail
// the workflow.
func (j *meteredJob) endIfGone(ctx workflow.Context, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrorTypeJobGone {
		j.transition(ctx, ledgerdb.StateDeleted, j.status.MoneyState, j.status.DeadLettered,
			"Deleted while the workflow ran; its money stays as it was.")
		return nil
	}
	return err
}

// transition records a new state: the query's status, the search attributes the UI filters on,
// and the current details the UI shows.
func (j *meteredJob) transition(ctx workflow.Context, state ledgerdb.State, money ledgerdb.MoneyState, deadLettered bool, details string) {
	j.status.State, j.status.MoneyState, j.status.DeadLettered = state, money, deadLettered
	updates := []temporal.SearchAttributeUpdate{
		BillingStateKey.ValueSet(string(state)),
		DeadLetteredKey.ValueSet(deadLettered),
	}
	if j.in.AccountID != "" {
		updates = append(updates, AccountIDKey.ValueSet(j.in.AccountID))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		// Visibility is for people; the money path must not stop for it.
		workflow.GetLogger(ctx).Warn("Upserting search attributes failed.", "State", state, "Error", err)
	}
	workflow.SetCurrentDetails(ctx, details)
}

func (j *meteredJob) deadLetterDetails() string {
	return fmt.Sprintf("Refunded %d credits: %s. Dead-lettered: listening for a late result or a redrive for %s.",
		j.in.Cost, j.status.Reason, j.policy.LateResultWindow)
}

// ignoreLeftoverSignals takes the signals nobody waited for once the job is settled, so that a
// duplicate result is counted and logged rather than silently dropped. They change nothing: the
// job's money is final (money rule 8).
func (j *meteredJob) ignoreLeftoverSignals(ctx workflow.Context) {
	logger := workflow.GetLogger(ctx)
	for {
		var s ResultSignal
		if !j.results.ReceiveAsync(&s) {
			break
		}
		j.status.IgnoredResults++
		logger.Info("Result ignored: the job is settled.", "State", j.status.State, "Attempt", s.Attempt)
	}
	for {
		var r RedriveRequest
		if !j.redrives.ReceiveAsync(&r) {
			break
		}
		logger.Info("Redrive ignored: the job is settled.", "State", j.status.State, "By", r.By)
	}
}

func (s ResultSignal) workResult() activities.WorkResult {
	return activities.WorkResult{Attempt: s.Attempt, OutputRef: s.OutputRef, FinishedAt: s.FinishedAt}
}

// rejection says whether a charge error is a refusal that ends the job as rejected, and why.
func rejection(err error) (string, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return "", false
	}
	switch appErr.Type() {
	case activities.ErrorTypeInsufficientCredits:
		return "insufficient credits", true
	case activities.ErrorTypeJobGone:
		return "the job ID was deleted and can never be charged again", true
	}
	return "", false
}

// failureReason says why the work failed for good, in words for the refund's reason and summary,
// and how many attempts it had. The attempt count comes from the last heartbeat a timeout carries
// or the failure's details, and otherwise from the retry policy when it ran out.
func failureReason(err error, lastAttempt int32) (string, int) {
	attempts := 0
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
		attempts = int(lastAttempt)
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		var last int
		if timeoutErr.HasLastHeartbeatDetails() && timeoutErr.LastHeartbeatDetails(&last) == nil {
			attempts = max(attempts, last)
		}
		return "timed out" + afterAttempts(attempts), attempts
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		var f activities.WorkFailure
		if appErr.HasDetails() && appErr.Details(&f) == nil {
			attempts = max(attempts, f.Attempt)
		}
		msg := shorten(appErr.Message())
		if appErr.NonRetryable() || appErr.Type() == activities.ErrorTypeWorkFailedPermanently {
			return fmt.Sprintf("failed for good%s: %s", afterAttempts(attempts), msg), attempts
		}
		return fmt.Sprintf("failed%s: %s", afterAttempts(attempts), msg), attempts
	}
	return fmt.Sprintf("failed%s: %s", afterAttempts(attempts), shorten(err.Error())), attempts
}

func afterAttempts(n int) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return " after 1 attempt"
	}
	return fmt.Sprintf(" after %d attempts", n)
}

// shorten keeps a runner's message short enough for a refund reason (the ledger keeps at most
// ledgerdb.MaxTextLength bytes) and a one-line summary.
//
// The message comes from a GPU service and may be anything; the ledger refuses a reason that is
// not valid UTF-8, holds NUL or is longer than ledgerdb.MaxTextLength bytes, and a refused reason
// must never block a refund. So control characters become spaces and the cut is by bytes, at a
// rune boundary, well under the limit with the reason's own words around it.
func shorten(s string) string {
	const maxBytes = 240
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
