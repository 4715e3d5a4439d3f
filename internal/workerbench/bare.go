package workerbench

import (
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/workflows"
)

// BareWorkflowType is the registered name of [BareJob].
const BareWorkflowType = "WorkerBenchBareJob"

// a names the activities through a nil pointer, as the metered job workflow does; the benchmark's
// worker registers the real struct.
var a *activities.Activities

// BareJob is the baseline of the throughput comparison: the metered job's work activity alone,
// with the options the metered job gives it (timeouts, heartbeat, retry policy, summary), and
// nothing else — no ledger step, no update, no search attributes. What the metered job costs on
// top of it is the billing.
func BareJob(ctx workflow.Context, req activities.WorkRequest, p workflows.Policy) (activities.WorkResult, error) {
	ctx = workflow.WithActivityOptions(ctx, p.WithDefaults().WorkActivityOptions("run the work (bare baseline)"))
	req.JobID = workflow.GetInfo(ctx).WorkflowExecution.ID
	var res activities.WorkResult
	err := workflow.ExecuteActivity(ctx, a.RunWork, req).Get(ctx, &res)
	return res, err
}
