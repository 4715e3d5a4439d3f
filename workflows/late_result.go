package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// LateResultWorkflowType is the registered name of [LateResult].
const LateResultWorkflowType = "LateResult"

// LateResultWorkflowID is the workflow ID of the late-result fallback for a job:
// "late-result/<account>/<job ID>". It is deterministic, so that reports of the same result that
// race each other meet in one workflow, and the UI lists the fallback next to the job it belongs
// to. Its prefix differs from [JobWorkflowID]'s, so a fallback never takes a job's ID.
func LateResultWorkflowID(accountID, jobID string) string {
	return "late-result/" + accountID + "/" + jobID
}

// LateResultInput starts the fallback for a result that landed after the job's workflow closed.
type LateResultInput struct {
	// JobID is the job whose result landed.
	JobID string
	// AccountID is the job's account: job IDs belong to their account. It also sets the
	// AccountID search attribute.
	AccountID string
	// Cost is what the job's charge holds, as the ledger recorded it, for the summary only; the
	// ledger reclaims its own record.
	Cost int64
	// Result is the result that landed.
	Result ResultSignal
}

// Job names the job whose result landed.
func (in LateResultInput) Job() ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: in.AccountID, JobID: in.JobID}
}

// StaticSummary is the fallback's one-line summary in the UI's workflow list.
func (in LateResultInput) StaticSummary() string {
	return fmt.Sprintf("late result for %s (attempt %d)", in.JobID, in.Result.Attempt)
}

// LateResultOutcome says what the fallback did with a late result.
type LateResultOutcome struct {
	// JobID is the job.
	JobID string
	// Outcome is Applied when this result billed the job (reclaimed its refund — a deleted
	// job's too — or delivered a job left running), AlreadyApplied when an earlier report did,
	// NotApplied when there was nothing to bill (the job was never charged).
	Outcome ledgerdb.Outcome
	// State is the job's state after the fallback.
	State ledgerdb.State
	// MoneyState is what the user is told about their money now.
	MoneyState ledgerdb.MoneyState
	// Message says what happened, in a sentence.
	Message string
}

// LateResult is the fallback of the workflow's last step (docs/design.md, "The workflow"): a
// result that lands after the job's workflow closed is not lost. It bills the result with the
// same guarded step the job's workflow would have run: a refunded job becomes recovered; a job
// left running by a run that ended unsettled (terminated, failed) becomes delivered; a delivered
// or recovered job stays as it is; a deleted refunded job is reclaimed and settled too, and keeps
// its tombstone (deletion hides a job, never what it owes). Its own workflow makes the
// step visible in the UI beside the job. (Runs of the original version only reclaimed.)
func LateResult(ctx workflow.Context, in LateResultInput) (LateResultOutcome, error) {
	out := LateResultOutcome{JobID: in.JobID}
	var (
		res activities.LedgerResult
		err error
	)
	if workflow.GetVersion(ctx, lateResultVersionID, lateResultOriginal, lateResultSettles) == lateResultOriginal {
		res, err = ledgerStep(ctx,
			fmt.Sprintf("reclaim %d credits: the result of attempt %d landed after the workflow closed", in.Cost, in.Result.Attempt),
			a.Reclaim, activities.ReclaimInput{Job: in.Job()})
	} else {
		report := ledgerdb.ResultReport{Key: in.Job(), Attempt: in.Result.Attempt, OutputRef: in.Result.OutputRef, UnitsUsed: in.Result.UnitsUsed}
		if problem := report.Validate(); problem != nil {
			// No payload fails a run: a result the ledger would refuse is not billed.
			out.Outcome, out.Message = ledgerdb.NotApplied, "The result was refused: "+problem.Error()
			return out, nil
		}
		res, err = ledgerStep(ctx,
			fmt.Sprintf("settle the result of attempt %d: it landed after the workflow closed", in.Result.Attempt),
			a.Settle, activities.SettleInput{Job: in.Job(), Attempt: in.Result.Attempt, UnitsUsed: in.Result.UnitsUsed, OutputRef: in.Result.OutputRef})
		if refusedForGood(err) {
			message := ledgerdb.ScrubText(err.Error())
			if _, alarmErr := ledgerStep(ctx, "raise an alarm: the ledger refused the settle", a.RaiseAlarm,
				activities.AlarmInput{Job: in.Job(), Step: "settle", Message: message}); alarmErr != nil {
				workflow.GetLogger(ctx).Error("Raising an alarm failed.", "Error", alarmErr)
			}
			// The outcome's message reaches whoever reported the result: the database's words stay
			// with the alarm, for operators.
			workflow.GetLogger(ctx).Error("The ledger refused to settle a late result; an operator must look.", "Error", message)
			out.Outcome, out.Message = ledgerdb.NotApplied, "ALARM: the ledger refused to settle the result; an operator must repair "+
				"the job, and its money stays as it was until then."
			return out, nil
		}
	}
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == activities.ErrorTypeJobGone:
		out.Outcome, out.State = ledgerdb.NotApplied, ledgerdb.StateDeleted
		out.Message = "The job was deleted; its result is discarded and its money stays as it was."
		return out, nil
	case err != nil:
		return out, err
	}
	out.Outcome, out.State, out.MoneyState = res.Outcome, res.State, res.MoneyState
	// The job's own workflow closed with the search attributes it had (a closed run's cannot
	// change), so this run carries the job's new state: BillingState="recovered" finds where
	// the recovery happened, and DeadLettered says whether the job still is one.
	updates := []temporal.SearchAttributeUpdate{
		BillingStateKey.ValueSet(string(res.State)),
		DeadLetteredKey.ValueSet(res.State == ledgerdb.StateRefunded),
	}
	if in.AccountID != "" {
		updates = append(updates, AccountIDKey.ValueSet(in.AccountID))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("Upserting search attributes failed.", "Error", err)
	}
	money := fmt.Sprintf("its %d credits stay charged.", res.Cost)
	if res.Kind != "" {
		money = SettlementText(res.Charged, res.Released, res.Cost)
	}
	switch {
	case res.Outcome == ledgerdb.Applied && res.State == ledgerdb.StateDelivered:
		out.Message = "The result landed after the job's workflow ended unsettled: the job is delivered; " + money
	case res.Outcome == ledgerdb.Applied && res.Kind != "":
		out.Message = fmt.Sprintf("The result landed late: the refund of %d credits was reclaimed and the job settled: %s", res.Cost, money)
	case res.Outcome == ledgerdb.Applied:
		out.Message = fmt.Sprintf("The result landed late: the refund of %d credits was reclaimed; the job is recovered.", res.Cost)
	case res.Outcome == ledgerdb.AlreadyApplied:
		out.Message = fmt.Sprintf("The job was already %s; nothing changed.", res.State)
	default:
		out.Message = fmt.Sprintf("Nothing to bill: the job is %s.", res.State)
	}
	workflow.GetLogger(ctx).Info("Late result settled.", "JobID", in.JobID, "Outcome", res.Outcome, "State", res.State)
	return out, nil
}
