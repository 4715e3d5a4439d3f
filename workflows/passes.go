package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
)

// passTimeout bounds one scheduled pass's activity (reconcile, expiry): a pass cut short leaves
// the rest to the schedule's next run. A reconcile pass's DefaultReconcileLimit placeholders at
// up to 30 s each would be 50 minutes, but a healthy pass heals each in about a second; an
// expiry pass's batches take milliseconds each.
const passTimeout = 10 * time.Minute

// passActivityOptions are the activity options of a scheduled pass, its activity summarised as
// summary in the UI.
func passActivityOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: passTimeout,
		// A pass heartbeats on a clock, whatever one item costs, so that a worker killed mid-pass
		// is noticed soon: the schedule skips every pass while this one is open, and nothing
		// heals or expires with nobody looking until its retry runs elsewhere. Four beats' worth
		// leaves a busy machine room to miss a few.
		HeartbeatTimeout: 4 * activities.DefaultPassHeartbeat,
		// A pass is idempotent, so retrying it is safe; a few tries, then the next run takes over.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
		Summary:     summary,
	}
}
