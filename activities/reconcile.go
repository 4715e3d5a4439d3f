package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/jobbill/jobbill/ledgerdb"
)

// lookUpBound is how many jobs' worth of time (JobTimeout) the look-up of the running jobs'
// workflows may take: one call per job, each far quicker than a heal.
const lookUpBound = 4

// DefaultReconcileGrace is how old a placeholder must be before a reconcile pass touches it. A
// submission writes its placeholder and starts its workflow within a second or two; two minutes
// leaves a slow submitter (retrying its start against a busy server) well alone.
const DefaultReconcileGrace = 2 * time.Minute

// DefaultReconcileLimit is how many placeholders one pass heals at most; the next pass takes the rest.
const DefaultReconcileLimit = 100

// resumeTimeout bounds healing one job or applying one result: a start and the wait for its
// charge decision, or a signal. A job that takes longer is left for the next pass.
const resumeTimeout = 30 * time.Second

// DefaultResultGrace is how old a recorded, unapplied result must be before a reconcile pass
// applies it: its reporter hands it on within a second unless Temporal was unreachable.
const DefaultResultGrace = 30 * time.Second

// ReconcileInput configures one reconcile pass.
type ReconcileInput struct {
	// Grace is how old a placeholder must be to be healed; DefaultReconcileGrace when zero.
	Grace time.Duration
	// Limit is how many placeholders the pass heals at most; DefaultReconcileLimit when zero.
	Limit int
	// AccountIDs limits the pass to these accounts' jobs; every account's when empty (the
	// schedule's pass).
	AccountIDs []string
	// ResultGrace is how old a recorded result must be to be applied; DefaultResultGrace when zero.
	ResultGrace time.Duration `json:",omitempty"`
}

// ReconcileResult counts what one pass did.
type ReconcileResult struct {
	// Examined is how many placeholders older than the grace the pass found.
	Examined int
	// Started counts placeholders whose workflow now runs and whose charge is decided (charged,
	// or refused for want of credits), or that another pass or submission had already settled.
	Started int
	// RejectedOrphans counts placeholders that no workflow can ever charge (theirs closed before
	// charging them, or another program's holds their ID): rejected, nothing charged.
	RejectedOrphans int
	// StillSubmitting counts placeholders whose workflow runs but has not decided the charge yet.
	StillSubmitting int
	// RunningChecked counts charged, unsettled jobs compared with the open workflows.
	RunningChecked int `json:",omitempty"`
	// Healed counts charged jobs whose workflow had closed without settling them: refunded by a
	// heal run.
	Healed int `json:",omitempty"`
	// ResultsApplied counts recorded results handed on to their job after their reporter could
	// not reach Temporal.
	ResultsApplied int `json:",omitempty"`
	// Failed counts jobs the pass could not heal or results it could not apply; the next pass
	// tries again.
	Failed int
	// Failures says why, one line per failure.
	Failures []string
}

// Healer is what a reconcile pass heals through: the job service, whose starts, signals and heal
// runs are the very ones product code's submissions and reports use. It is an interface because
// the job service's package imports this one.
type Healer interface {
	// Resume finishes a placeholder whose workflow never started, or rejects it when no workflow
	// can ever charge it, and answers the job's state after it.
	Resume(ctx context.Context, job ledgerdb.JobKey) (ledgerdb.State, ledgerdb.RejectReason, error)
	// WithoutOpenWorkflow answers the jobs among jobs whose own workflow is not open (a job whose
	// workflow runs is settled by it and needs no healing).
	WithoutOpenWorkflow(ctx context.Context, jobs []ledgerdb.Job) ([]ledgerdb.Job, error)
	// Heal heals a running job whose workflow has closed without settling it (a heal run refunds
	// it), and says whether it had to.
	Heal(ctx context.Context, job ledgerdb.Job) (bool, error)
	// ApplyRecordedResult hands a recorded result on to its job.
	ApplyRecordedResult(ctx context.Context, u ledgerdb.UnappliedResult) error
}

// Reconciler is the reconcile pass: it heals what the doors jobbill does not control can leave
// behind. Its dependencies are fields, in the style of [Activities]; the worker registers it
// beside them.
type Reconciler struct {
	// Ledger lists the placeholders, running jobs and recorded results.
	Ledger *ledgerdb.Store
	// Healer heals them.
	Healer Healer
	// JobTimeout bounds healing one job or applying one result; resumeTimeout when zero.
	JobTimeout time.Duration
	// HeartbeatEvery is how often the pass heartbeats while it works; DefaultPassHeartbeat when
	// zero.
	HeartbeatEvery time.Duration
}

// ReconcileOrphans is one reconcile pass (the name is the registered activity's, kept from when a
// pass only resumed orphaned placeholders). It heals, in this order:
//
//  1. results recorded while Temporal was unreachable: each is handed to its job's workflow or to
//     the late-result fallback, exactly as its report would have been;
//  2. charged jobs whose workflow closed without settling them (terminated, failed, timed out):
//     each is refunded by a heal run of its own workflow;
//  3. placeholders whose workflow never started: each is started as a submission would have
//     been, or rejected (nothing charged) when no workflow can ever charge it.
//
// Results come first so that a result that did land delivers its job rather than have it refunded
// and then reclaimed. Every step goes through the ledger's guards, so the pass is safe to run twice
// or concurrently with another pass, a submission or a report (the reversing-pairs and
// idempotent-doors rules). One job's failure does not stop the pass; it is counted and left to the
// next one.
func (r *Reconciler) ReconcileOrphans(ctx context.Context, in ReconcileInput) (ReconcileResult, error) {
	if in.Grace <= 0 {
		in.Grace = DefaultReconcileGrace
	}
	if in.ResultGrace <= 0 {
		in.ResultGrace = DefaultResultGrace
	}
	if in.Limit <= 0 {
		in.Limit = DefaultReconcileLimit
	}
	if r.Healer == nil {
		return ReconcileResult{}, errors.New("reconciler: no healer configured")
	}
	jobTimeout := r.JobTimeout
	if jobTimeout <= 0 {
		jobTimeout = resumeTimeout
	}
	progress := newPassProgress(ctx, carryReconcile, cloneReconcile)
	out := &progress.out
	fail := func(id string, err error) {
		progress.update(func() {
			out.Failed++
			out.Failures = append(out.Failures, fmt.Sprintf("%s: %v", id, err))
		})
	}
	stop := progress.heartbeatEvery(ctx, passHeartbeat(r.HeartbeatEvery))
	defer stop()

	results, err := r.Ledger.UnappliedResults(ctx, in.ResultGrace, in.Limit, in.AccountIDs...)
	if err != nil {
		return progress.result(), err
	}
	for _, u := range results {
		jobCtx, cancel := context.WithTimeout(ctx, jobTimeout)
		err := r.Healer.ApplyRecordedResult(jobCtx, u)
		cancel()
		if err != nil {
			fail(fmt.Sprintf("%s (result of attempt %d)", u.Report.Key, u.Report.Attempt), err)
		} else {
			progress.update(func() { out.ResultsApplied++ })
		}
		if ctx.Err() != nil {
			return progress.result(), ctx.Err()
		}
	}

	running, err := r.Ledger.RunningJobs(ctx, 0, ledgerdb.MaxRunningJobs, in.AccountIDs...)
	if err != nil {
		return progress.result(), err
	}
	progress.update(func() { out.RunningChecked = len(running) })
	if len(running) > 0 {
		// Bounded, as every step is: the pass heartbeats on a clock, so a look-up that hangs would
		// otherwise hold it, and the schedule, until the activity's timeout.
		lookCtx, cancel := context.WithTimeout(ctx, lookUpBound*jobTimeout)
		orphaned, err := r.Healer.WithoutOpenWorkflow(lookCtx, running)
		cancel()
		if err != nil {
			return progress.result(), err
		}
		for _, job := range orphaned {
			// Each heal is bounded: one job whose heal run is slow must not hold the rest.
			jobCtx, cancel := context.WithTimeout(ctx, jobTimeout)
			healed, err := r.Healer.Heal(jobCtx, job)
			cancel()
			switch {
			case err != nil:
				fail(job.ID, err)
			case healed:
				progress.update(func() { out.Healed++ })
			}
			if ctx.Err() != nil {
				return progress.result(), ctx.Err()
			}
		}
	}

	jobs, err := r.Ledger.Placeholders(ctx, in.Grace, in.Limit, in.AccountIDs...)
	if err != nil {
		return progress.result(), err
	}
	progress.update(func() { out.Examined = len(jobs) })
	for _, job := range jobs {
		jobCtx, cancel := context.WithTimeout(ctx, jobTimeout)
		state, reject, err := r.Healer.Resume(jobCtx, job.Key())
		cancel()
		progress.update(func() {
			switch {
			case err != nil:
				out.Failed++
				out.Failures = append(out.Failures, fmt.Sprintf("%s: %v", job.ID, err))
			case state == ledgerdb.StateRejected && (reject == ledgerdb.RejectWorkflowEnded || reject == ledgerdb.RejectWorkflowIDTaken):
				out.RejectedOrphans++
			case state == ledgerdb.StateSubmitting:
				out.StillSubmitting++
			default:
				out.Started++
			}
		})
		if ctx.Err() != nil {
			// The activity was cancelled or timed out: the rest waits for the next pass.
			return progress.result(), ctx.Err()
		}
	}
	final := progress.result()
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Info("Reconcile pass done.", "ResultsApplied", final.ResultsApplied,
			"RunningChecked", final.RunningChecked, "Healed", final.Healed, "Examined", final.Examined, "Started", final.Started,
			"RejectedOrphans", final.RejectedOrphans, "StillSubmitting", final.StillSubmitting, "Failed", final.Failed)
	}
	return final, nil
}

// carryReconcile is what a retried pass keeps of the counts its dead attempt heartbeated: the
// jobs it healed and the results it applied are done, and the retry finds nothing left of them to
// count. What the attempt looked at (Examined, RunningChecked) and what failed are the retry's
// own: it looks and tries again.
func carryReconcile(earlier ReconcileResult) ReconcileResult {
	return ReconcileResult{ResultsApplied: earlier.ResultsApplied, Healed: earlier.Healed,
		Started: earlier.Started, RejectedOrphans: earlier.RejectedOrphans}
}

// cloneReconcile copies counts that share no slice with r.
func cloneReconcile(r ReconcileResult) ReconcileResult {
	r.Failures = slices.Clone(r.Failures)
	return r
}
