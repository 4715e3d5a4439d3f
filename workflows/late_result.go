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

// LateResultWorkflowID is the workflow ID of the late-result fallback for a job. It is
// deterministic, so that reports of the same result that race each other meet in one workflow,
// and the UI lists the fallback next to the job it belongs to. The "/" can never appear in a job
// ID (ledgerdb.ValidateID), so no client's job can take a fallback's ID, nor a fallback a job's.
func LateResultWorkflowID(jobID string) string { return "late-result/" + jobID }

// LateResultInput starts the fallback for a result that landed after the job's workflow closed.
type LateResultInput struct {
	// JobID is the job whose result landed.
	JobID string
	// AccountID is the job's account, for the AccountID search attribute.
	AccountID string
	// Cost is the job's price, for the summary only; the ledger reclaims its own record.
	Cost int64
	// Result is the result that landed.
	Result ResultSignal
}

// StaticSummary is the fallback's one-line summary in the UI's workflow list.
func (in LateResultInput) StaticSummary() string {
	return fmt.Sprintf("late result for %s (attempt %d)", in.JobID, in.Result.Attempt)
}

// LateResultOutcome says what the fallback did with a late result.
type LateResultOutcome struct {
	// JobID is the job.
	JobID string
	// Outcome is Applied when this result reclaimed the refund, AlreadyApplied when an earlier
	// report did, NotApplied when there was nothing to reclaim (the job was never refunded).
	Outcome ledgerdb.Outcome
	// State is the job's state after the fallback.
	State ledgerdb.State
	// MoneyState is what the user is told about their money now.
	MoneyState ledgerdb.MoneyState
	// Message says what happened, in a sentence.
	Message string
}

// LateResult is the fallback of DESIGN.md's workflow step 5: a result that lands after the job's
// workflow closed (its late-result window ended) is not lost. It runs the same guarded reclaim the
// job's workflow would have run: a refunded job becomes recovered; a delivered or recovered job
// stays as it is; a deleted job keeps its tombstone. Its own workflow makes the step visible in
// the UI beside the job.
func LateResult(ctx workflow.Context, in LateResultInput) (LateResultOutcome, error) {
	out := LateResultOutcome{JobID: in.JobID}
	res, err := ledgerStep(ctx,
		fmt.Sprintf("reclaim %d credits: the result of attempt %d landed after the workflow closed", in.Cost, in.Result.Attempt),
		a.Reclaim, activities.ReclaimInput{JobID: in.JobID})
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
	switch res.Outcome {
	case ledgerdb.Applied:
		out.Message = fmt.Sprintf("The result landed late: the refund of %d credits was reclaimed; the job is recovered.", in.Cost)
	case ledgerdb.AlreadyApplied:
		out.Message = "The refund was already reclaimed by an earlier report; nothing changed."
	default:
		out.Message = fmt.Sprintf("Nothing to reclaim: the job is %s and was never refunded.", res.State)
	}
	workflow.GetLogger(ctx).Info("Late result settled.", "JobID", in.JobID, "Outcome", res.Outcome, "State", res.State)
	return out, nil
}
