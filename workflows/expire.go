package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
)

// ExpiryScheduleID is the ID of the Temporal Schedule that runs [Expire] every interval. It is
// fixed so that every worker that ensures the schedule at start finds the same one.
const ExpiryScheduleID = "jobbill-expire"

// ExpiryWorkflowID is the workflow ID prefix of the schedule's runs (the schedule appends the
// time). The "/" can never appear in a job ID (ledgerdb.ValidateID), so no job can take it.
const ExpiryWorkflowID = "expire/" + ExpiryScheduleID

// Expire is the expiry pass: it removes what remains of every credit block whose expiry has
// passed, one expire row per block, in one activity that calls the ledger in batches until no
// block is due, and answers how many blocks it expired and how many credits that removed. A
// Temporal Schedule runs it every interval with overlap skipped; two passes that meet anyway (a
// manual trigger) expire each block once between them, since the ledger holds a block to one
// expire row.
func Expire(ctx workflow.Context, in activities.ExpiryInput) (activities.ExpiryResult, error) {
	var e *activities.Expirer
	ctx = workflow.WithActivityOptions(ctx, passActivityOptions("expire the credit blocks whose time has come"))
	var out activities.ExpiryResult
	err := workflow.ExecuteActivity(ctx, e.ExpireBlocks, in).Get(ctx, &out)
	return out, err
}
