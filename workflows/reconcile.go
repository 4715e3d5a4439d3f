package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
)

// ReconcileScheduleID is the ID of the Temporal Schedule that runs [Reconcile] every interval. It
// is fixed so that every worker that ensures the schedule at start finds the same one.
const ReconcileScheduleID = "jobbill-reconcile"

// ReconcileWorkflowID is the workflow ID prefix of the schedule's runs (the schedule appends the
// time). The "/" can never appear in a job ID (ledgerdb.ValidateID), so no job can take it.
const ReconcileWorkflowID = "reconcile/" + ReconcileScheduleID

// Reconcile is the reconcile pass: it applies results recorded while Temporal was unreachable,
// heals charged jobs whose workflow ended unsettled and resumes orphaned placeholders, in one
// activity pass, and answers what the pass did. A Temporal Schedule runs it every interval with overlap skipped, so passes rarely
// run at once; when they do (a manual trigger, two schedules), each heals through the same
// guards and the ledger still admits one charge per job.
func Reconcile(ctx workflow.Context, in activities.ReconcileInput) (activities.ReconcileResult, error) {
	var r *activities.Reconciler
	grace := in.Grace
	if grace <= 0 {
		grace = activities.DefaultReconcileGrace
	}
	ctx = workflow.WithActivityOptions(ctx, passActivityOptions(fmt.Sprintf("heal placeholders older than %s", grace)))
	var out activities.ReconcileResult
	err := workflow.ExecuteActivity(ctx, r.ReconcileOrphans, in).Get(ctx, &out)
	return out, err
}
