package chaos

// The checks of a run at rest: orphans healed, terminated jobs and recorded results settled, the
// invariant checker over the run's jobs, and the credit mix's checks (creditchecks.go).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
)

// conclude checks the run at rest into report: the orphans healed, where the terminated jobs and
// the recorded results ended, what the passes did, and the invariant checker's findings over the
// run's jobs, whose text it writes to the run's log, and the credit mix's own checks
// (checkCredits).
func (r *run) conclude(ctx context.Context, report *Report) error {
	cfg := r.cfg
	report.Orphans = cfg.Orphans
	report.OrphansHealed = r.orphansHealed(ctx)
	if report.OrphansHealed < cfg.Orphans {
		r.anomaly("only %d of %d orphans healed", report.OrphansHealed, cfg.Orphans)
	}
	r.mu.Lock()
	terminated, recorded := append([]ledgerdb.JobKey(nil), r.terminated...), append([]ledgerdb.JobKey(nil), r.recorded...)
	r.mu.Unlock()
	// A terminated job must never stay charged with no run to settle it (the net-effect rule): it
	// ends refunded, or settled by its result.
	r.countFinal(ctx, "terminated", terminated, report.Terminated, ledgerdb.StateRefunded, ledgerdb.StateRecovered, ledgerdb.StateDelivered)
	// A result taken into the inbox is delivered work: the job ends billed for it.
	r.countFinal(ctx, "recorded-result", recorded, report.Recorded, ledgerdb.StateRecovered, ledgerdb.StateDelivered)
	report.Passes = r.passes.figures()
	report.Repaired, report.MostPassesOutlasted = r.faults.figures()

	check, err := invariants.Check(ctx, invariants.Options{
		Ledger: r.ledger, Temporal: r.tc, Namespace: r.namespace, TaskQueue: r.taskQueue,
		JobIDPrefix: r.prefix, StuckAfter: invariants.StuckAfterFor(cfg.Policy),
	})
	if err != nil {
		return fmt.Errorf("chaos: invariant check: %w", err)
	}
	if snap, err := r.ledger.LedgerSnapshot(ctx, ledgerdb.SnapshotScope{JobIDPrefix: r.prefix}); err == nil {
		for _, j := range snap.Jobs {
			report.States[j.Job.State]++
		}
	}
	_ = check.WriteText(r.out)
	credits, totals, err := r.checkCredits(ctx)
	if err != nil {
		return fmt.Errorf("chaos: checking the credit mix: %w", err)
	}
	report.Credits = totals

	r.mu.Lock()
	report.Injections = maps(r.injections)
	report.Anomalies = append([]string(nil), r.anomalies...)
	r.mu.Unlock()
	report.Violations = append(check.Violations, credits...)
	report.TransientErrors = r.transient.Load()
	report.Elapsed = time.Since(r.start)
	return nil
}

// orphansHealed counts the orphans that have left the submitting state.
func (r *run) orphansHealed(ctx context.Context) int {
	healed := 0
	for i := range r.cfg.Orphans {
		if job, err := r.ledger.Job(ctx, r.orphanKey(i)); err == nil && job.State != ledgerdb.StateSubmitting {
			healed++
		}
	}
	return healed
}

// countFinal counts the jobs by their final state into by, and reports as an anomaly any that did
// not end in one of the states want.
func (r *run) countFinal(ctx context.Context, what string, keys []ledgerdb.JobKey, by map[ledgerdb.State]int, want ...ledgerdb.State) {
	for _, key := range keys {
		job, err := r.ledger.Job(ctx, key)
		if err != nil {
			r.anomaly("reading %s job %s: %v", what, key, err)
			continue
		}
		by[job.State]++
		if !slices.Contains(want, job.State) {
			r.anomaly("%s job %s ended %s; it must end %v", what, key, job.State, want)
		}
	}
}
