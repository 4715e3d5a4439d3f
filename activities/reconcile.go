package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/jobbill/jobbill/ledgerdb"
)

// DefaultReconcileGrace is how old a placeholder must be before a reconcile pass touches it. A
// submission writes its placeholder and starts its workflow within a second or two; two minutes
// leaves a slow submitter (retrying its start against a busy server) well alone.
const DefaultReconcileGrace = 2 * time.Minute

// DefaultReconcileLimit is how many placeholders one pass heals at most; the next pass takes the rest.
const DefaultReconcileLimit = 100

// resumeTimeout bounds healing one placeholder: the start and the wait for its charge decision.
// A job that takes longer is left for the next pass, which joins its workflow.
const resumeTimeout = 30 * time.Second

// ReconcileInput configures one reconcile pass.
type ReconcileInput struct {
	// Grace is how old a placeholder must be to be healed; DefaultReconcileGrace when zero.
	Grace time.Duration
	// Limit is how many placeholders the pass heals at most; DefaultReconcileLimit when zero.
	Limit int
	// AccountIDs limits the pass to these accounts' placeholders; every account's when empty
	// (the schedule's pass).
	AccountIDs []string
}

// ReconcileResult counts what one pass did.
type ReconcileResult struct {
	// Examined is how many placeholders older than the grace the pass found.
	Examined int
	// Started counts placeholders whose workflow now runs and whose charge is decided (charged,
	// or refused for want of credits), or that another pass or submission had already settled.
	Started int
	// RejectedOrphans counts placeholders whose workflow had closed before charging them: they
	// are rejected in the ledger, nothing charged.
	RejectedOrphans int
	// StillSubmitting counts placeholders whose workflow runs but has not decided the charge yet.
	StillSubmitting int
	// Failed counts placeholders the pass could not heal; the next pass tries again.
	Failed int
	// Failures says why, one line per failed job.
	Failures []string
}

// Reconciler heals orphaned placeholders (issue 5, item 3): jobs whose submitter wrote the
// placeholder and then never started the workflow. Its dependencies are fields, in the style of
// [Activities]; the worker registers it beside them.
type Reconciler struct {
	// Ledger lists the placeholders.
	Ledger *ledgerdb.Store
	// Resume heals one placeholder and answers the job's state after it: the starter's Resume,
	// which starts the workflow exactly as a submission does, or rejects the job when its
	// workflow closed before charging it. It is a function rather than the starter itself
	// because the starter imports this package.
	Resume func(ctx context.Context, jobID string) (ledgerdb.Job, error)
}

// ReconcileOrphans is one reconcile pass: every placeholder older than the grace is resumed. It is
// safe to run twice or concurrently with another pass or a submission of the same job: a running
// workflow is joined, a closed ID is never started again, and the ledger's charge guard admits at
// most one charge per job (money rules 2 and 8). One job's failure does not stop the pass; it is
// counted and left to the next one.
func (r *Reconciler) ReconcileOrphans(ctx context.Context, in ReconcileInput) (ReconcileResult, error) {
	if in.Grace <= 0 {
		in.Grace = DefaultReconcileGrace
	}
	if in.Limit <= 0 {
		in.Limit = DefaultReconcileLimit
	}
	if r.Resume == nil {
		return ReconcileResult{}, errors.New("reconciler: no Resume function configured")
	}
	jobs, err := r.Ledger.Placeholders(ctx, in.Grace, in.Limit, in.AccountIDs...)
	if err != nil {
		return ReconcileResult{}, err
	}
	out := ReconcileResult{Examined: len(jobs)}
	for _, job := range jobs {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, job.ID)
		}
		jobCtx, cancel := context.WithTimeout(ctx, resumeTimeout)
		after, err := r.Resume(jobCtx, job.ID)
		cancel()
		switch {
		case err != nil:
			out.Failed++
			out.Failures = append(out.Failures, fmt.Sprintf("%s: %v", job.ID, err))
		case after.State == ledgerdb.StateRejected && after.RejectReason == ledgerdb.RejectOrphanReason:
			out.RejectedOrphans++
		case after.State == ledgerdb.StateSubmitting:
			out.StillSubmitting++
		default:
			out.Started++
		}
		if ctx.Err() != nil {
			// The activity was cancelled or timed out: the rest waits for the next pass.
			return out, ctx.Err()
		}
	}
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Info("Reconcile pass done.", "Examined", out.Examined, "Started", out.Started,
			"RejectedOrphans", out.RejectedOrphans, "StillSubmitting", out.StillSubmitting, "Failed", out.Failed)
	}
	return out, nil
}
