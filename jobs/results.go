package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// How a reported result reached the job, as [ResultReport.Path] says it.
const (
	// PathSignal: the job's workflow received the result as a signal.
	PathSignal = "signal"
	// PathFallback: the job's workflow had closed; the late-result fallback billed the result.
	PathFallback = "fallback"
	// PathRecorded: the result is recorded in the ledger but could not be handed on yet (Temporal
	// unreachable); the reconcile pass applies it once Temporal answers.
	PathRecorded = "recorded"
	// PathAlreadyApplied: the same result was reported and taken before; nothing changed.
	PathAlreadyApplied = "already_applied"
)

// RecordedMessage says what became of a result reported while Temporal could not be reached. The
// report's Message adds the cause, which may name internal hosts: the HTTP API tells a customer
// this sentence alone.
const RecordedMessage = "The result is recorded and will be applied as soon as the workflow service is reachable."

// ResultConflictMessage is what a reporter is told when the attempt already reported a different
// result (another output or usage): [Service.ReportResult]'s [ledgerdb.ErrConflict]. It is not a
// submission's conflict — no new ID helps — so every door that takes a result (the HTTP API,
// `jobbill job report`, the clients) says this, in these fixed words.
const ResultConflictMessage = "This attempt already reported a different result (another output or usage). The first result stands and this one was not recorded; nothing was charged again."

// ResultReport is what [Service.ReportResult] did with a result.
type ResultReport struct {
	// Path is how the result reached the job: PathSignal, PathFallback, PathRecorded or
	// PathAlreadyApplied.
	Path string `json:"path"`
	// Outcome, for the fallback, says whether this report billed the job; empty otherwise.
	Outcome ledgerdb.Outcome `json:"outcome,omitempty"`
	// Status is the job as it stands after the report (for a signal, possibly before the workflow
	// has acted on it).
	Status Status `json:"status"`
	// Message says what happened, in a sentence.
	Message string `json:"message"`
}

// ReportResult reports that a job's result landed, possibly long after its attempt was given up.
// The result is written to the ledger's inbox first, so that once this call answers, the result
// cannot be lost. Then the job's workflow takes it as a signal: while the work is retrying, it
// delivers; once refunded, it reclaims the refund; once settled, nothing changes. When the
// workflow has closed, the late-result fallback bills it in a workflow of its own. A deleted
// refunded job takes it too (its refund reclaimed, its output not kept); another deleted job's
// result is [ledgerdb.ErrGone], nothing written. When Temporal cannot be reached, the answer is
// PathRecorded: the reconcile pass applies the result later. A result never carries an amount:
// the ledger bills the usage it reports (result.UnitsUsed; the whole hold when nil) at the job's
// recorded price, capped at the hold.
//
// Bad input is refused with nothing written: an attempt below 1 or beyond the attempts the job
// has started, an empty or unprintable output reference, a negative usage
// ([ledgerdb.ErrInvalidInput]). A job never charged is [ledgerdb.ErrNotStarted]; another output or
// usage for an attempt already reported is [ledgerdb.ErrConflict].
func (s *Service) ReportResult(ctx context.Context, key ledgerdb.JobKey, result activities.WorkResult) (ResultReport, error) {
	report := ledgerdb.ResultReport{Key: key, Attempt: result.Attempt, OutputRef: result.OutputRef,
		FinishedAt: result.FinishedAt, UnitsUsed: result.UnitsUsed}
	if err := report.Validate(); err != nil {
		return ResultReport{}, err
	}
	job, err := s.opts.Ledger.Job(ctx, key)
	if err != nil {
		return ResultReport{}, err
	}
	if started := max(job.Attempts, 1); job.IsCharged && result.Attempt > started {
		return ResultReport{}, &ledgerdb.InvalidInputError{Field: "attempt", Reason: fmt.Sprintf(
			"is %d, but the job's work has started %d attempt(s): a result must come from an attempt that ran", result.Attempt, started)}
	}
	recorded, err := s.opts.Ledger.RecordResult(ctx, report)
	if err != nil {
		return ResultReport{}, err
	}
	if recorded.AppliedAt != nil && !(job.State == ledgerdb.StateDeleted && takesResult(job)) {
		st, err := s.status(ctx, job)
		if err != nil {
			return ResultReport{}, err
		}
		return ResultReport{Path: PathAlreadyApplied, Status: st,
			Message: "This result was reported and taken before; nothing changed."}, nil
	}
	// A deleted refunded job whose result was taken and its refund not reclaimed had the result
	// discarded (as deleted jobs' results once were; the audit reports it): it is billed now.
	applied, err := s.apply(ctx, job, report)
	if err != nil {
		// The result is in the ledger: nothing is lost, and the reconcile pass hands it on. The
		// wait for Temporal may have used up the caller's deadline: the answer's words are read
		// within a second of their own, and without the words of returned credits that expired
		// when even that fails — the report must still answer recorded.
		wordsCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		st, serr := s.status(wordsCtx, job)
		cancel()
		if serr != nil {
			st = s.statusOf(job, nil)
		}
		return ResultReport{Path: PathRecorded, Status: st,
			Message: strings.TrimSuffix(RecordedMessage, ".") + " (" + err.Error() + ")."}, nil
	}
	return applied, nil
}

// ApplyRecordedResult hands on a result that was recorded but not applied (its reporter could
// not reach Temporal): the reconcile pass calls it, with the same path a report takes.
func (s *Service) ApplyRecordedResult(ctx context.Context, u ledgerdb.UnappliedResult) error {
	job, err := s.opts.Ledger.Job(ctx, u.Report.Key)
	if err != nil {
		return err
	}
	_, err = s.apply(ctx, job, u.Report)
	return err
}

// apply hands a recorded result to the job's workflow, or, when no run of it is open (it closed,
// or another program's workflow holds its ID), to the late-result fallback, and then marks it
// applied in the inbox. A repeat is harmless: a workflow takes one result, and the fallback's step
// is guarded.
func (s *Service) apply(ctx context.Context, job ledgerdb.Job, r ledgerdb.ResultReport) (ResultReport, error) {
	if !takesResult(job) {
		// A tombstone with nothing left to bill (deleted once delivered, recovered or rejected):
		// the result changes nothing. A deleted refunded job goes on below: deletion never
		// cancels what delivered work costs.
		if _, err := s.opts.Ledger.MarkResultApplied(ctx, r.Key, r.Attempt, ledgerdb.AppliedSettled); err != nil {
			return ResultReport{}, err
		}
		st, err := s.status(ctx, job)
		if err != nil {
			return ResultReport{}, err
		}
		return ResultReport{Path: PathFallback, Outcome: ledgerdb.NotApplied, Status: st,
			Message: "The job was deleted with nothing left to bill; its result is discarded and its money stays as it was."}, nil
	}
	sig := workflows.ResultSignal{Attempt: r.Attempt, OutputRef: r.OutputRef, FinishedAt: r.FinishedAt, UnitsUsed: r.UnitsUsed}
	workflowID := workflows.JobWorkflowID(job.AccountID, job.ID)
	latest, err := s.describeRun(ctx, workflowID)
	if err != nil {
		return ResultReport{}, fmt.Errorf("job %q: describing its workflow: %w", job.ID, err)
	}
	if latest.own() && latest.open() {
		// Only the job's own run takes the result, and only the run just described: another
		// program's workflow under the ID (a heal went around it) would swallow the signal.
		err := s.opts.Temporal.SignalWorkflow(ctx, workflowID, latest.runID, workflows.SignalResult, sig)
		var notFound *serviceerror.NotFound
		switch {
		case err == nil:
			if _, err := s.opts.Ledger.MarkResultApplied(ctx, r.Key, r.Attempt, ledgerdb.AppliedBySignal); err != nil {
				return ResultReport{}, err
			}
			st, err := s.status(ctx, job)
			if err != nil {
				return ResultReport{}, err
			}
			return ResultReport{Path: PathSignal, Status: st,
				Message: "The job's workflow received the result and settles it."}, nil
		case !errors.As(err, &notFound):
			return ResultReport{}, fmt.Errorf("job %q: signalling the result: %w", job.ID, err)
		}
		// The run closed since it was described: the fallback takes the result.
	}

	in := workflows.LateResultInput{JobID: job.ID, AccountID: job.AccountID, Cost: job.Cost, Result: sig}
	run, err := s.opts.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.LateResultWorkflowID(job.AccountID, job.ID),
		TaskQueue: s.opts.TaskQueue,
		// Concurrent reports join one run; a later report runs again, and the guard decides.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            in.StaticSummary(),
	}, workflows.LateResult, in)
	if err != nil {
		return ResultReport{}, fmt.Errorf("job %q: starting the late-result fallback: %w", job.ID, err)
	}
	var out workflows.LateResultOutcome
	if err := run.Get(ctx, &out); err != nil {
		return ResultReport{}, fmt.Errorf("job %q: late-result fallback: %w", job.ID, err)
	}
	if s.opts.Metrics != nil {
		s.opts.Metrics.ResultAfterClose(out.Outcome)
	}
	if _, err := s.opts.Ledger.MarkResultApplied(ctx, r.Key, r.Attempt, ledgerdb.AppliedByFallback); err != nil {
		return ResultReport{}, err
	}
	current, err := s.opts.Ledger.Job(ctx, job.Key())
	if err != nil {
		return ResultReport{}, err
	}
	st, err := s.status(ctx, current)
	if err != nil {
		return ResultReport{}, err
	}
	return ResultReport{Path: PathFallback, Outcome: out.Outcome, Status: st, Message: out.Message}, nil
}

// takesResult says whether a result can still bill the job: every job but a tombstone with
// nothing left to bill. A deleted refunded job still takes its late result, which reclaims the
// refund and settles the job (docs/design.md, "The job state machine").
func takesResult(job ledgerdb.Job) bool {
	return job.State != ledgerdb.StateDeleted || (job.IsRefunded && !job.IsReclaimed)
}

// TakesResult says whether a result reported for the job can still bill it: always, except for a
// deleted job with nothing left to bill (deleted once delivered, recovered or rejected), whose
// results are refused as gone. A deleted refunded job takes its late result: deletion removes a
// job's content from view, never what its delivered work costs.
func (st Status) TakesResult() bool {
	return st.State != ledgerdb.StateDeleted || st.MoneyState == ledgerdb.MoneyRefunded
}

// ReportLateResult lets the job service serve as the simulated runner's [activities.LateResultReporter].
func (s *Service) ReportLateResult(ctx context.Context, key ledgerdb.JobKey, result activities.WorkResult) error {
	_, err := s.ReportResult(ctx, key, result)
	return err
}
