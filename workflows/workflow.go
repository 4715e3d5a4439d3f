// Package workflows holds jobbill's deterministic workflow code: the metered job workflow, its
// signals, its query and its search attributes. docs/design.md ("The workflow") is the shape.
//
// The workflow never decides an amount and never trusts its own idea of the money: every step
// that moves money is a guarded ledger call through [activities.Activities], and the state the
// workflow shows (query, search attributes) is the state the ledger answered.
package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
)

// ErrorTypeInvalidJobInput is the type of the non-retryable error a run of the original version
// failed with when its input could not be billed. Runs of later versions refuse such an input
// without failing: they end rejected, nothing charged.
const ErrorTypeInvalidJobInput = "InvalidJobInput"

// a names the activities through a nil pointer, as samples-go greetings/ does: the worker
// registers the real struct; the workflow only needs the method names.
var a *activities.Activities

// MeteredJob bills one GPU job: charge → run the work under the retry policy → on success settle
// (deliver, or recover a refunded job); when retries are exhausted, refund, mark the job
// dead-lettered and listen for a late result (settle → recovered) or a redrive until the
// late-result window ends. A refused charge ends the workflow as rejected, without error.
//
// No payload can fail it: an invalid input ends the run rejected with nothing charged, and an
// invalid signal is ignored (logged, counted, shown in the run's details) while the job goes on. A
// ledger step that the database refuses for good raises an alarm instead of failing the run.
//
// Signals: [SignalResult] ([ResultSignal]) and [SignalRedrive] ([RedriveRequest]). Query:
// [QueryStatus] ([JobStatus]). Update: [UpdateChargeDecision]. The result is the final JobStatus.
func MeteredJob(ctx workflow.Context, in JobInput) (JobStatus, error) {
	version := meteredJobVersion(ctx)
	workflowID := workflow.GetInfo(ctx).WorkflowExecution.ID
	if version < versionWholeNumbers {
		in = in.readAsBefore()
	}
	if version == versionOriginal && in.JobID == "" {
		in.JobID = workflowID
	}
	j := &meteredJob{
		version:  version,
		in:       in,
		policy:   in.Policy.WithDefaults(),
		status:   JobStatus{JobID: in.JobID, AccountID: in.AccountID, Kind: in.Kind},
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
	if !j.priced() {
		// Runs from before the price list showed the caller's price; the ledger never moved it.
		j.held, j.status.Cost = in.Cost, in.Cost
	}
	if j.original() {
		if in.JobID != workflowID {
			return j.status, temporal.NewApplicationErrorWithOptions(
				fmt.Sprintf("job ID %q is not the workflow ID %q", in.JobID, workflowID),
				ErrorTypeInvalidJobInput, temporal.ApplicationErrorOptions{NonRetryable: true})
		}
	} else if problem := in.validate(workflowID, version); problem != nil {
		if version >= versionLedgerTruth {
			j.refuseUnasked(ctx, "invalid input: "+problem.Error())
		} else {
			j.refuse(ctx, "invalid input: "+problem.Error())
		}
		return j.status, nil
	}
	err = j.run(ctx)
	j.ignoreLeftoverSignals(ctx)
	return j.status, err
}

// meteredJob is one run of the workflow: its version, its input, what it knows, and its signal
// channels.
type meteredJob struct {
	version  workflow.Version
	in       JobInput
	policy   Policy
	status   JobStatus
	results  workflow.ReceiveChannel
	redrives workflow.ReceiveChannel
	// decision is set once the charge is decided; the UpdateChargeDecision handler waits for it.
	decision *ChargeDecision
	// lastAttempt is the highest attempt number the work may have reached so far: a result for a
	// later attempt names an attempt that never ran.
	lastAttempt int
	// details is what the run's current details say about the job; an ignored signal adds a line.
	details string
	// held is the credits the job's charge holds, for summaries and details: the ledger's answer
	// to the charge (the input's display price in runs from before the price list).
	held int64
	// maxUnits is what the work is told it may use: the units a metered job's charge holds; 0
	// for a kind sold by the job.
	maxUnits int64
	// resultAlarmRaised is set once the run raised its alarm for a result it could not bill.
	resultAlarmRaised bool
}

// original reports whether this run was recorded by the first released version.
func (j *meteredJob) original() bool { return j.version == versionOriginal }

// priced reports whether this run takes its prices from the price list (versionPrices on).
func (j *meteredJob) priced() bool { return j.version >= versionPrices }

// record takes the ledger's figures of the job from a ledger step's answer, for the query and
// the details.
func (j *meteredJob) record(res activities.LedgerResult) {
	if j.priced() {
		j.held, j.status.Cost, j.status.Kind = res.Cost, res.Cost, res.Kind
		if res.Unit == ledgerdb.UnitGPUSecond {
			j.maxUnits = res.HeldUnits
		}
		j.status.UnitsUsed, j.status.Charged, j.status.Released = res.UnitsUsed, res.Charged, res.Released
	}
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
	j.announce(ctx)
	if j.in.Heal != nil && !j.original() {
		return j.heal(ctx)
	}

	// 1. Charge. The ledger charges its own record of the cost; a refusal is final.
	charge, err := j.charge(ctx)
	if err != nil {
		if reason, ok := j.rejection(err); ok {
			if job, held := j.heldByAnother(err); held {
				j.refuseStart(ctx, reason, job)
				return nil
			}
			j.refuse(ctx, reason)
			return nil
		}
		return j.stepFailed(ctx, "charge", err)
	}
	j.record(charge)
	j.decideCharge(charge.State, charge.MoneyState, charge.Reason)
	// A later run of this workflow ID (a redrive after the workflow closed) continues the count.
	j.status.Attempts = max(j.status.Attempts, charge.Attempts)
	j.lastAttempt = j.status.Attempts
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
			j.held, j.policy.MaximumAttempts, j.policy.StartToClose))
	out := j.runWork(ctx)
	if out.err == nil {
		// 3. Success.
		return j.settle(ctx, out)
	}

	// 4. Retries exhausted, the work failed for good, or an operator cancelled the run: the
	// compensation of step 1.
	cause, attempts := failureCause(out.err, out.lastAttempt)
	if !j.original() && ctx.Err() != nil {
		cause = refundCause{ledgerdb.ReasonStoppedByOperator, "stopped by an operator: cancelled"}
	}
	return j.refund(ctx, cause, attempts)
}

// announce shows the job as submitted. The original version upserted the submitting state; a
// later run does only when its start did not set the search attributes (a run started directly
// by another Temporal client), because the job service's start already sets them.
func (j *meteredJob) announce(ctx workflow.Context) {
	details := fmt.Sprintf("Charging %d credits to account %s.", j.held, j.in.AccountID)
	if j.priced() {
		details = fmt.Sprintf("Charging the hold of a %s job to account %s, at the price list's price.", j.kindName(), j.in.AccountID)
	}
	if _, set := workflow.GetTypedSearchAttributes(ctx).GetKeyword(BillingStateKey); j.original() || !set {
		j.transition(ctx, ledgerdb.StateSubmitting, ledgerdb.MoneyPending, false, details)
		return
	}
	j.status.State, j.status.MoneyState = ledgerdb.StateSubmitting, ledgerdb.MoneyPending
	j.setDetails(ctx, details)
}

// charge runs the charge step. A later run charges only the request it runs (the fingerprint),
// and when the ledger has no placeholder — the run was started directly, not by the job service —
// it writes the placeholder itself, at the kind's price, with the same guarded submission, and
// charges that. A priced run whose input names no kind is a new run of a job submitted before the
// price list (a redrive): it charges the ledger's own record or nothing.
func (j *meteredJob) charge(ctx workflow.Context) (activities.LedgerResult, error) {
	summary := fmt.Sprintf("charge %d credits", j.in.Cost)
	if j.priced() {
		summary = fmt.Sprintf("charge the hold of a %s job", j.kindName())
	}
	if j.original() || (j.priced() && j.in.Kind == "") {
		return ledgerStep(ctx, summary, a.Charge, activities.ChargeInput{Job: j.in.Job()})
	}
	submit := activities.SubmitInput{JobID: j.in.JobID, AccountID: j.in.AccountID, Kind: j.in.Kind, MaxUnits: j.in.MaxUnits, InputRef: j.in.Work.InputRef}
	fingerprint := submit.Submission().Fingerprint()
	if !j.priced() {
		// The ledger recorded the jobs of that time with the fingerprint of their cost. (Their
		// placeholder can no longer be written: the ledger takes no amount from a caller.)
		fingerprint = ledgerdb.CostFingerprint(j.in.AccountID, j.in.Cost, []byte(j.in.Work.InputRef))
	}
	input := activities.ChargeInput{Job: j.in.Job(), Fingerprint: fingerprint}
	charge, err := ledgerStep(ctx, summary, a.Charge, input)
	if errorType(err) != activities.ErrorTypeJobNotFound {
		return charge, err
	}
	if _, err := ledgerStep(ctx, "write the job's placeholder: this run was started without one", a.Submit, submit); err != nil {
		return activities.LedgerResult{}, err
	}
	return ledgerStep(ctx, summary, a.Charge, input)
}

// refuse ends a run whose job cannot be charged: rejected, nothing charged.
func (j *meteredJob) refuse(ctx workflow.Context, reason string) {
	j.status.Reason = reason
	j.decideCharge(ledgerdb.StateRejected, ledgerdb.MoneyNotCharged, reason)
	j.transition(ctx, ledgerdb.StateRejected, ledgerdb.MoneyNotCharged, false,
		fmt.Sprintf("Rejected: %s. Nothing was charged.", reason))
}

// heldByAnother says whether a refused charge refused this start, not the job: the job's ID holds
// another request, or a tombstone, which the ledger keeps as it is. The refusal carries the job as
// the ledger has it. Runs before versionLedgerTruth showed such a start as the job's rejection.
func (j *meteredJob) heldByAnother(err error) (activities.LedgerResult, bool) {
	var appErr *temporal.ApplicationError
	if j.version < versionLedgerTruth || !errors.As(err, &appErr) ||
		(appErr.Type() != activities.ErrorTypeJobConflict && appErr.Type() != activities.ErrorTypeJobGone) {
		return activities.LedgerResult{}, false
	}
	var job activities.LedgerResult
	if !appErr.HasDetails() || appErr.Details(&job) != nil || job.State == "" {
		return activities.LedgerResult{}, false
	}
	return job, true
}

// refuseStart ends a run whose start the ledger refused while it keeps the job under the ID as it
// is (another request's, or a tombstone): nothing is charged for this start, and the run shows
// the job as the ledger has it — its search attributes, its status — so that the job's latest run
// in the UI never contradicts the ledger (a delivered job must not read "rejected").
func (j *meteredJob) refuseStart(ctx workflow.Context, reason string, job activities.LedgerResult) {
	j.record(job)
	j.status.Reason = fmt.Sprintf("this start was refused: %s; nothing was charged for it", reason)
	j.decideCharge(job.State, job.MoneyState, j.status.Reason)
	j.transition(ctx, job.State, job.MoneyState, job.State == ledgerdb.StateRefunded,
		fmt.Sprintf("Refused this start: %s. Nothing was charged for it; the job stays %s, as the ledger has it.", reason, job.State))
}

// refuseUnasked ends a run refused before it asked the ledger (its input cannot be billed):
// nothing is charged, and the run upserts no search attribute, since it cannot say how the job
// under its ID stands — a settled job's latest run must not read "rejected".
func (j *meteredJob) refuseUnasked(ctx workflow.Context, reason string) {
	j.status.Reason = reason
	j.status.State, j.status.MoneyState = ledgerdb.StateRejected, ledgerdb.MoneyNotCharged
	j.decideCharge(ledgerdb.StateRejected, ledgerdb.MoneyNotCharged, reason)
	j.setDetails(ctx, fmt.Sprintf("Refused this start before asking the ledger: %s. Nothing was charged by this run; "+
		"the ledger's record of the job under this ID, if any, is unchanged.", reason))
}

// refund is the compensation of the charge: the job's work will not be delivered, so its cost
// goes back, and the job waits as a dead letter for a late result or a redrive. The ledger keeps
// the cause's code, which is all its customer is told, and its words for operators.
func (j *meteredJob) refund(ctx workflow.Context, cause refundCause, attempts int) error {
	j.status.Attempts = max(j.status.Attempts, attempts)
	refund, err := ledgerStep(ctx, fmt.Sprintf("refund %d credits: %s", j.held, cause.detail),
		a.Refund, activities.RefundInput{Job: j.in.Job(), Reason: cause.reason, Detail: cause.detail, Attempts: attempts})
	if err != nil {
		return j.stepFailed(ctx, "refund", err)
	}
	j.record(refund)
	j.decideCharge(refund.State, refund.MoneyState, refund.Reason)
	if refund.State != ledgerdb.StateRefunded {
		// The ledger knows better (for instance the late-result fallback delivered meanwhile).
		j.transition(ctx, refund.State, refund.MoneyState, false,
			fmt.Sprintf("Not refunded: the job is already %s.", refund.State))
		return nil
	}
	j.status.Reason = refund.Reason
	if j.original() {
		j.status.Reason = cause.detail
	}
	j.lastAttempt = max(j.lastAttempt, refund.Attempts)
	j.transition(ctx, ledgerdb.StateRefunded, refund.MoneyState, true, j.deadLetterDetails())
	return j.awaitLateResult(ctx)
}

// heal is the run the reconcile pass starts for a job whose earlier run ended without settling
// it: the job stays charged with nobody to deliver or refund it. The work is not run again (an
// operator who terminated a job meant "stop it"): the charge is refunded with the reason the pass
// gives, and the job waits for a late result like any refunded job.
func (j *meteredJob) heal(ctx workflow.Context) error {
	cause := refundCause{j.in.Heal.Code, ledgerdb.ScrubText(j.in.Heal.Reason)}
	if cause.detail == "" {
		cause.detail = "the job's workflow ended without settling it"
	}
	return j.refund(ctx, cause, 0)
}

// stepFailed ends a run whose ledger step came back with an error no retry fixes. A deleted job
// ends quietly, its money as it was. A step the database refuses for good raises an alarm (a
// ledger row, a metric, the run's details) and ends the run without failing it: the job needs an
// operator, and the invariant checker reports it until the step is written. A run of the original
// version fails, as it did.
func (j *meteredJob) stepFailed(ctx workflow.Context, step string, err error) error {
	if errorType(err) == activities.ErrorTypeJobGone {
		j.transition(ctx, ledgerdb.StateDeleted, j.status.MoneyState, j.status.DeadLettered,
			"Deleted while the workflow ran; its money stays as it was.")
		return nil
	}
	if j.original() || !refusedForGood(err) {
		return err
	}
	message := ledgerdb.ScrubText(err.Error())
	j.status.Alarm = fmt.Sprintf("%s refused by the ledger: %s", step, message)
	j.decideCharge(j.status.State, j.status.MoneyState, j.status.Alarm)
	_, alarmErr := ledgerStep(ctx, "raise an alarm: the ledger refused the "+step, a.RaiseAlarm,
		activities.AlarmInput{Job: j.in.Job(), Step: step, Message: message})
	if alarmErr != nil {
		workflow.GetLogger(ctx).Error("Raising an alarm failed.", "Step", step, "Error", alarmErr)
	}
	workflow.GetLogger(ctx).Error("The ledger refused a step for good; an operator must look.", "Step", step, "Error", err)
	j.transition(ctx, j.status.State, j.status.MoneyState, true,
		fmt.Sprintf("ALARM: the ledger refused the %s for good (%s). The job stays %s until an operator repairs it; "+
			"the reconcile pass retries it.", step, message, j.status.State))
	return nil
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
	workCtx = workflow.WithActivityOptions(workCtx,
		p.WorkActivityOptions(fmt.Sprintf("run the work: up to %d attempts, %s each", p.MaximumAttempts, p.StartToClose)))
	req := j.in.Work
	req.JobID, req.AccountID, req.Attempt, req.PriorAttempts = j.in.JobID, j.in.AccountID, 0, j.status.Attempts
	// The work is told its hold, so that the GPU service stops where the ledger stops billing.
	req.MaxUnits = j.maxUnits
	work := workflow.ExecuteActivity(workCtx, a.RunWork, req)

	out := workOutcome{lastAttempt: int32(req.PriorAttempts) + p.MaximumAttempts}
	lastAttempt := out.lastAttempt
	j.lastAttempt = max(j.lastAttempt, int(lastAttempt))
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(work, func(f workflow.Future) {
		out.err = f.Get(ctx, &out.result)
		done = true
	})
	sel.AddReceive(j.results, func(c workflow.ReceiveChannel, _ bool) {
		if s, ok := j.receiveResult(ctx, c); ok {
			out = workOutcome{result: s.workResult(), signaled: true, lastAttempt: lastAttempt}
			done = true
		}
	})
	sel.AddReceive(j.redrives, func(c workflow.ReceiveChannel, _ bool) {
		if r, ok := j.receiveRedrive(ctx, c); ok {
			workflow.GetLogger(ctx).Info("Redrive ignored: the work is already running.", "By", r.By)
		}
	})
	for !done {
		sel.Select(ctx)
	}
	return out
}

// settle bills a result. A later run does it in one ledger step (deliver, or recover a refunded
// job); the original version reclaimed (a no-op unless refunded) and then delivered, letting the
// guards decide. The job ends delivered, or recovered if it had been refunded.
func (j *meteredJob) settle(ctx workflow.Context, out workOutcome) error {
	res := out.result
	j.status.Attempts = max(j.status.Attempts, res.Attempt)
	var (
		settled activities.LedgerResult
		err     error
	)
	if j.original() {
		reclaimSummary := fmt.Sprintf("reclaim %d credits if refunded", j.held)
		if j.status.State == ledgerdb.StateRefunded {
			reclaimSummary = fmt.Sprintf("reclaim %d credits: the result of attempt %d landed late", j.held, res.Attempt)
		}
		if _, err := ledgerStep(ctx, reclaimSummary, a.Reclaim, activities.ReclaimInput{Job: j.in.Job()}); err != nil {
			return j.stepFailed(ctx, "reclaim", err)
		}
		settled, err = ledgerStep(ctx, fmt.Sprintf("deliver the result of attempt %d", res.Attempt),
			a.Deliver, activities.DeliverInput{Job: j.in.Job(), Attempts: res.Attempt})
	} else {
		summary := fmt.Sprintf("deliver the result of attempt %d", res.Attempt)
		if j.status.State == ledgerdb.StateRefunded {
			summary = fmt.Sprintf("reclaim %d credits: the result of attempt %d landed late", j.held, res.Attempt)
		}
		input := activities.SettleInput{Job: j.in.Job(), Attempt: res.Attempt, OutputRef: res.OutputRef}
		if j.priced() {
			input.UnitsUsed = res.UnitsUsed
			summary += ", settle " + usageText(res.UnitsUsed)
		}
		settled, err = ledgerStep(ctx, summary, a.Settle, input)
	}
	if err != nil {
		return j.stepFailed(ctx, "settle", err)
	}
	j.record(settled)
	j.status.OutputRef = res.OutputRef
	how := "the work activity returned it"
	if out.signaled {
		how = "it was reported by a result signal"
	}
	money := fmt.Sprintf("%d credits charged.", j.held)
	if j.priced() {
		money = SettlementText(settled.Charged, settled.Released, j.held)
	}
	j.transition(ctx, settled.State, settled.MoneyState, false,
		fmt.Sprintf("%s: result of attempt %d (%s); %s", settled.State, res.Attempt, how, money))
	return nil
}

// kindName is the job's kind for details and summaries.
func (j *meteredJob) kindName() string {
	if j.in.Kind == "" {
		return "previously priced"
	}
	return j.in.Kind
}

// usageText says what a result reported it used, for a step's summary.
func usageText(units *int64) string {
	if units == nil {
		return "at the whole hold (no usage reported)"
	}
	return fmt.Sprintf("at %d units used", *units)
}

// SettlementText says what a settled job was charged and what its settlement returned, in the
// words a user reads: "137 of 300 held credits charged; 163 returned."
func SettlementText(charged, released, held int64) string {
	switch {
	case charged == held:
		return plural.Count(charged, "credit") + " charged."
	case released == 0:
		return fmt.Sprintf("%d of %s charged.", charged, plural.Count(held, "held credit"))
	}
	return fmt.Sprintf("%d of %s charged; %d returned.", charged, plural.Count(held, "held credit"), released)
}

// awaitLateResult keeps a refunded (dead-lettered) job listening: a result signal settles it, a
// redrive runs the work again, and when the window ends the workflow closes as refunded. In a
// later run the window is a deadline: an ignored signal does not start it again, and a
// cancellation ends the wait.
func (j *meteredJob) awaitLateResult(ctx workflow.Context) error {
	deadline := workflow.Now(ctx).Add(j.policy.LateResultWindow)
	for {
		var (
			late    *ResultSignal
			redrive *RedriveRequest
			ignored bool
		)
		wait := j.policy.LateResultWindow
		if !j.original() {
			wait = deadline.Sub(workflow.Now(ctx))
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimerWithOptions(timerCtx, wait,
			workflow.TimerOptions{Summary: fmt.Sprintf("late-result window (%s)", wait)})
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(j.results, func(c workflow.ReceiveChannel, _ bool) {
			if s, ok := j.receiveResult(ctx, c); ok {
				late = &s
			} else {
				ignored = true
			}
		})
		sel.AddReceive(j.redrives, func(c workflow.ReceiveChannel, _ bool) {
			if r, ok := j.receiveRedrive(ctx, c); ok {
				redrive = &r
			} else {
				ignored = true
			}
		})
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.Select(ctx)
		cancelTimer()

		if ignored && ctx.Err() == nil && workflow.Now(ctx).Before(deadline) {
			continue
		}
		if late == nil && redrive == nil {
			// The window ended. A result that came with the timer in the same task still counts.
			if s, ok := j.receiveResultAsync(ctx); ok {
				late = &s
			} else if !j.original() && ctx.Err() != nil {
				j.setDetails(ctx, fmt.Sprintf("Refunded %d credits: %s. Cancelled by an operator while it listened for a "+
					"late result; a result that lands now goes to the late-result fallback.", j.held, j.status.Reason))
				return ctx.Err()
			} else {
				workflow.SetCurrentDetails(ctx, fmt.Sprintf("Refunded %d credits: %s. The late-result window "+
					"(%s) ended; the job stays a dead letter.", j.held, j.status.Reason, j.policy.LateResultWindow))
				return nil
			}
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
		cause, attempts := failureCause(out.err, out.lastAttempt)
		j.status.Attempts = max(j.status.Attempts, attempts)
		j.status.Reason = fmt.Sprintf("redrive %d %s", j.status.Redrives, cause.detail)
		// No second refund: the job is still refunded, and the guard would refuse one anyway. The
		// window starts again: the operator's redrive was a new chance for a result.
		deadline = workflow.Now(ctx).Add(j.policy.LateResultWindow)
		j.transition(ctx, ledgerdb.StateRefunded, ledgerdb.MoneyRefunded, true, j.deadLetterDetails())
	}
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
	j.setDetails(ctx, details)
}

// setDetails sets what the run's current details say about the job.
func (j *meteredJob) setDetails(ctx workflow.Context, details string) {
	j.details = details
	workflow.SetCurrentDetails(ctx, details)
}

func (j *meteredJob) deadLetterDetails() string {
	return fmt.Sprintf("Refunded %d credits: %s. Dead-lettered: listening for a late result or a redrive for %s.",
		j.held, j.status.Reason, j.policy.LateResultWindow)
}

// ignoreLeftoverSignals takes the signals nobody waited for once the job is settled, so that a
// duplicate result is counted and logged rather than silently dropped. They change nothing: the
// job's money is final (the idempotent-doors rule).
func (j *meteredJob) ignoreLeftoverSignals(ctx workflow.Context) {
	logger := workflow.GetLogger(ctx)
	for {
		var raw converter.RawValue
		if !j.results.ReceiveAsync(&raw) {
			break
		}
		var s ResultSignal
		if err := j.decode(raw, &s); err != nil {
			logger.Info("Unreadable result ignored: the job is settled.", "State", j.status.State, "Error", err)
			continue
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
	return activities.WorkResult{Attempt: s.Attempt, OutputRef: s.OutputRef, FinishedAt: s.FinishedAt, UnitsUsed: s.UnitsUsed}
}

// rejection says whether a charge error is a refusal that ends the job as rejected, and why.
func (j *meteredJob) rejection(err error) (string, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return "", false
	}
	switch appErr.Type() {
	case activities.ErrorTypeUnknownKind:
		// Runs before versionContract retried this refusal for ever; one that meets it now ends.
		return fmt.Sprintf("the price list has no kind %q", j.in.Kind), true
	case activities.ErrorTypeInvalidInput:
		if j.version >= versionContract {
			// A direct start's placeholder the ledger refused (a maximum of units above the
			// kind's): the input's fault, so a rejection, not an alarm.
			return "invalid input: " + appErr.Message(), true
		}
	case activities.ErrorTypeInsufficientCredits:
		return "insufficient credits", true
	case activities.ErrorTypeJobGone:
		return "the job ID was deleted and can never be charged again", true
	case activities.ErrorTypeJobRejected:
		var res activities.LedgerResult
		if appErr.HasDetails() && appErr.Details(&res) == nil && res.Reason != "" {
			return ledgerdb.RejectReason(res.Reason).Describe(), true
		}
		return "rejected by the ledger", true
	case activities.ErrorTypeJobConflict:
		return "the job ID holds a different request; nothing was charged for this one", true
	case activities.ErrorTypeUnknownAccount:
		return "the account does not exist", true
	}
	return "", false
}
