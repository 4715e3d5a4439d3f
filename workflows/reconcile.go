package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
)

// ReconcileScheduleID is the ID of the Temporal Schedule that runs [Reconcile] every interval. It
// is fixed so that every worker that ensures the schedule at start finds the same one.
const ReconcileScheduleID = "jobbill-reconcile"

// ReconcileWorkflowID is the workflow ID prefix of the schedule's runs (the schedule appends the
// time). The "/" can never appear in a job ID (ledgerdb.ValidateID), so no job can take it.
const ReconcileWorkflowID = "reconcile/" + ReconcileScheduleID

// reconcilePassTimeout bounds one pass: DefaultReconcileLimit placeholders at up to 30 s each
// would be 50 minutes, but a healthy pass heals each in about a second; a pass cut short leaves
// the rest to the next run, which finds them still submitting.
const reconcilePassTimeout = 10 * time.Minute

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
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: reconcilePassTimeout,
		// The pass heartbeats on a clock, whatever one job costs, so that a worker killed mid-pass
		// is noticed soon: the schedule skips every pass while this one is open, and nothing
		// heals with nobody looking until its retry runs elsewhere. Four beats' worth leaves a
		// busy machine room to miss a few.
		HeartbeatTimeout: 4 * activities.DefaultPassHeartbeat,
		// A pass is idempotent, so retrying it is safe; a few tries, then the next run takes over.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
		Summary:     fmt.Sprintf("heal placeholders older than %s", grace),
	})
	var out activities.ReconcileResult
	err := workflow.ExecuteActivity(ctx, r.ReconcileOrphans, in).Get(ctx, &out)
	return out, err
}
