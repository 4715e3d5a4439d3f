// Package starter is what product code imports to bill GPU jobs: submit a job under a
// client-generated ID, read its status and the state of the user's money, report a result that
// landed, delete a settled job, and re-drive a dead letter. It writes the ledger's placeholder
// first and then starts the job's workflow, so a job the ledger has never heard of is never run,
// and a job ID the ledger remembers is never charged twice.
package starter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// Options configures a [Starter].
type Options struct {
	// Temporal is the client the starter starts and signals workflows with; the caller owns it.
	Temporal client.Client
	// Ledger is the ledger the starter writes placeholders to and reads jobs from.
	Ledger *ledgerdb.Store
	// TaskQueue is where the workflows run; workflows.TaskQueue when empty.
	TaskQueue string
	// Namespace is the Temporal namespace, for UI links; "default" when empty.
	Namespace string
	// UIURL is the Temporal Web UI's base URL, for links; no links when empty.
	UIURL string
	// Policy is each job's retry policy and late-result window; zero fields take the workflow's defaults.
	Policy workflows.Policy
	// Metrics counts results that reach the late-result fallback (a *metrics.Metrics); nil counts nothing.
	Metrics ResultRecorder
}

// ResultRecorder records what the late-result fallback did with a result.
type ResultRecorder interface {
	// ResultAfterClose records that a result reached the fallback and what the reclaim answered.
	ResultAfterClose(outcome ledgerdb.Outcome)
}

// Starter submits and follows metered jobs. It is safe for concurrent use.
type Starter struct {
	opts Options
}

// New returns a Starter.
func New(opts Options) *Starter {
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.TaskQueue
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	return &Starter{opts: opts}
}

// Job is a client's request to run a paid job.
type Job struct {
	// ID is the client-generated job ID. The same ID is the same job, forever: a retry of a
	// submission must reuse it.
	ID string
	// AccountID is the paying account.
	AccountID string
	// Cost is the job's price in credits.
	Cost int64
	// InputRef points at the job's input. For the simulated runner it may name a scenario ("sim:late:3").
	InputRef string
}

// request is the part of a submission that the fingerprint covers beyond account and cost.
func (j Job) request() []byte { return []byte(j.InputRef) }

// Submission is the answer of [Starter.Submit].
type Submission struct {
	// Status is the job as it stands once its charge is decided.
	Status Status `json:"status"`
	// Duplicate is true when the ID had been submitted before with the same request: the
	// answer is the original job, and nothing new was charged.
	Duplicate bool `json:"duplicate"`
}

// Submit bills a job: it writes the ledger's placeholder, starts the job's workflow and waits,
// in one round trip (Update-With-Start), until the charge is decided. A job that cannot be paid
// for is answered with its status rejected and [ledgerdb.ErrInsufficientCredits]. Submitting the
// same ID and request again answers the original job without charging it again; a different
// request under the ID is [ledgerdb.ErrConflict]; a deleted ID is [ledgerdb.ErrGone].
func (s *Starter) Submit(ctx context.Context, job Job) (Submission, error) {
	placeholder, err := s.opts.Ledger.Submit(ctx, ledgerdb.Submission{
		JobID: job.ID, AccountID: job.AccountID, Cost: job.Cost, Request: job.request(),
	})
	if err != nil {
		return Submission{}, err
	}
	sub := Submission{Duplicate: placeholder.Outcome == ledgerdb.AlreadyApplied}
	if placeholder.Job.State != ledgerdb.StateSubmitting {
		// Decided long ago; the workflow may even have closed. The ledger has the answer.
		sub.Status = s.statusOf(placeholder.Job)
		return sub, chargeError(sub.Status)
	}

	decision, err := s.startAndAwaitCharge(ctx, job)
	if err != nil && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return Submission{}, fmt.Errorf("job %q: starting its workflow: %w", job.ID, err)
	}
	// Whatever the workflow answered, the ledger is the record; read the job as it now stands.
	current, readErr := s.opts.Ledger.Job(ctx, job.ID)
	if readErr != nil {
		return Submission{}, readErr
	}
	sub.Status = s.statusOf(current)
	if err == nil && decision.Reason != "" && sub.Status.Reason == "" {
		sub.Status.Reason = decision.Reason
	}
	return sub, chargeError(sub.Status)
}

// startAndAwaitCharge starts the job's workflow, or joins the one already running under its ID,
// and waits for the charge decision. The ID policies make a second charge impossible on the
// Temporal side too: a running workflow is joined (USE_EXISTING), never duplicated, and a closed
// one is never started again (REJECT_DUPLICATE) — the ledger's guard stands behind both.
func (s *Starter) startAndAwaitCharge(ctx context.Context, job Job) (workflows.ChargeDecision, error) {
	in := workflows.JobInput{
		JobID:     job.ID,
		AccountID: job.AccountID,
		Cost:      job.Cost,
		Work:      activities.WorkRequest{InputRef: job.InputRef},
		Policy:    s.opts.Policy,
	}
	start := s.opts.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       job.ID,
		TaskQueue:                s.opts.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            in.StaticSummary(),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.BillingStateKey.ValueSet(string(ledgerdb.StateSubmitting)),
			workflows.AccountIDKey.ValueSet(job.AccountID),
			workflows.DeadLetteredKey.ValueSet(false),
		),
	}, workflows.MeteredJob, in)
	handle, err := s.opts.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			// One update ID per job: a retried submission is the same update, answered once.
			UpdateID:     "charge-decision:" + job.ID,
			UpdateName:   workflows.UpdateChargeDecision,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.ChargeDecision{}, err
	}
	var decision workflows.ChargeDecision
	err = handle.Get(ctx, &decision)
	return decision, err
}

// Resume finishes a submission that wrote its placeholder but never started its workflow (the
// submitter crashed, or Temporal was unreachable, between the two steps): it reads the job and
// its kept request from the ledger and does the very Update-With-Start that Submit does, so the
// job runs as if its submission had gone through. A job no longer submitting is answered as it
// stands. A workflow still running under the ID is joined, never duplicated; and if two
// reconcilers race, the ledger's charge guard (NOT is_charged) lets one charge through at most.
//
// A placeholder whose workflow closed before charging it (terminated, failed or timed out) cannot
// be started again: the reuse policy refuses a closed ID, which is what keeps a closed job from
// ever being charged twice. Restarting it would also run work an operator may have stopped on
// purpose. Resume rejects such a job in the ledger instead (reason "workflow ended before
// charging", nothing charged), so its user is told where their money stands.
func (s *Starter) Resume(ctx context.Context, jobID string) (Status, error) {
	job, err := s.opts.Ledger.Job(ctx, jobID)
	if err != nil {
		return Status{}, err
	}
	if job.State != ledgerdb.StateSubmitting {
		return s.statusOf(job), nil
	}
	request, err := s.opts.Ledger.JobRequest(ctx, jobID)
	if err != nil {
		return Status{}, err
	}
	if len(request) == 0 {
		// Running the work on no input would charge for work that never saw the job's input.
		return s.statusOf(job), fmt.Errorf("job %q: its input is not known to the ledger; it cannot be resumed", jobID)
	}
	_, err = s.startAndAwaitCharge(ctx, Job{ID: jobID, AccountID: job.AccountID, Cost: job.Cost, InputRef: string(request)})
	if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		// Under USE_EXISTING a running workflow is joined, so this is a closed one. The guard in
		// ledger_reject_orphan rejects the job only if it is still uncharged: a charge that
		// committed just before the workflow closed is left standing.
		if _, err = s.opts.Ledger.RejectOrphan(ctx, jobID); err != nil {
			return Status{}, err
		}
	} else if err != nil {
		return Status{}, fmt.Errorf("job %q: resuming its workflow: %w", jobID, err)
	}
	current, err := s.opts.Ledger.Job(ctx, jobID)
	if err != nil {
		return Status{}, err
	}
	return s.statusOf(current), nil
}

// chargeError is the error a submission answers for a job whose charge was refused.
func chargeError(st Status) error {
	if st.State == ledgerdb.StateRejected {
		return fmt.Errorf("job %q: %w", st.JobID, ledgerdb.ErrInsufficientCredits)
	}
	return nil
}

// Status reads a job as the user should see it. A job ID that never reached the ledger is
// [ledgerdb.ErrJobNotFound] — nothing was charged; a deleted job answers its tombstone (State
// deleted) with its money state kept.
func (s *Starter) Status(ctx context.Context, jobID string) (Status, error) {
	job, err := s.opts.Ledger.Job(ctx, jobID)
	if err != nil {
		return Status{}, err
	}
	return s.statusOf(job), nil
}

// Delete turns a settled job into a tombstone: its ID can never be submitted or charged again,
// and its money stays as it was. A job still submitting or running is refused with
// [ledgerdb.ErrJobActive].
func (s *Starter) Delete(ctx context.Context, jobID string) (Status, error) {
	t, err := s.opts.Ledger.Delete(ctx, jobID)
	if err != nil {
		return Status{}, err
	}
	return s.statusOf(t.Job), nil
}

// ErrNotDeadLettered means a redrive was asked for a job that is not refunded.
var ErrNotDeadLettered = errors.New("only a refunded (dead-lettered) job can be re-driven")

// Redrive runs a dead-lettered job's work again under the same guards: if it succeeds, the
// refund is reclaimed and the job is recovered. by names who asked, for the timeline.
func (s *Starter) Redrive(ctx context.Context, jobID, by, note string) (Status, error) {
	job, err := s.opts.Ledger.Job(ctx, jobID)
	if err != nil {
		return Status{}, err
	}
	if job.State != ledgerdb.StateRefunded {
		return s.statusOf(job), fmt.Errorf("job %q is %s: %w", jobID, job.State, ErrNotDeadLettered)
	}
	req := workflows.RedriveRequest{By: by, Note: note}
	err = s.opts.Temporal.SignalWorkflow(ctx, jobID, "", workflows.SignalRedrive, req)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		// The late-result window ended and the workflow closed. A new run of the same ID finds
		// the job refunded in the ledger (its charge step answers "already charged") and goes
		// straight to listening, where this redrive waits for it. This is the one start that
		// reuses a closed job's ID, and the ledger's guard still refuses a second charge.
		// The input comes from the ledger, which keeps the submitted request for as long as it
		// keeps the job; the closed workflow's history may already be gone.
		request, readErr := s.opts.Ledger.JobRequest(ctx, jobID)
		if readErr != nil {
			return Status{}, readErr
		}
		if len(request) == 0 {
			// A job from before the ledger kept requests: running it on no input would charge
			// again (on success) for work that never saw the job's input.
			return s.statusOf(job), fmt.Errorf("job %q: its input is not known to the ledger and its workflow is gone; it cannot be re-driven", jobID)
		}
		in := workflows.JobInput{
			JobID: jobID, AccountID: job.AccountID, Cost: job.Cost, Policy: s.opts.Policy,
			Work: activities.WorkRequest{InputRef: string(request)},
		}
		_, err = s.opts.Temporal.SignalWithStartWorkflow(ctx, jobID, workflows.SignalRedrive, req, client.StartWorkflowOptions{
			ID:                       jobID,
			TaskQueue:                s.opts.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            in.StaticSummary() + " (redrive)",
		}, workflows.MeteredJob, in)
	}
	if err != nil {
		return Status{}, fmt.Errorf("job %q: redrive: %w", jobID, err)
	}
	return s.statusOf(job), nil
}

// ResultReport is what [Starter.ReportResult] did with a result.
type ResultReport struct {
	// Path is "signal" when the job's workflow took the result, "fallback" when the workflow had
	// closed and the late-result fallback settled it.
	Path string `json:"path"`
	// Outcome, for the fallback, says whether this report reclaimed the refund; empty for a signal.
	Outcome ledgerdb.Outcome `json:"outcome,omitempty"`
	// Status is the job as it stands after the report (for a signal, possibly before the workflow
	// has acted on it).
	Status Status `json:"status"`
	// Message says what happened, in a sentence.
	Message string `json:"message"`
}

// ReportResult reports that a job's result landed, possibly long after its attempt was given up.
// The job's workflow takes it as a signal: while the work is retrying, it delivers; once
// refunded, it reclaims the refund; once settled, nothing changes. When the workflow has closed,
// a guarded reclaim runs in a fallback workflow of its own and its answer is returned. A result
// never carries an amount: the ledger reclaims the job's recorded cost.
func (s *Starter) ReportResult(ctx context.Context, jobID string, result activities.WorkResult) (ResultReport, error) {
	job, err := s.opts.Ledger.Job(ctx, jobID)
	if err != nil {
		return ResultReport{}, err
	}
	sig := workflows.ResultSignal{Attempt: result.Attempt, OutputRef: result.OutputRef, FinishedAt: result.FinishedAt}
	err = s.opts.Temporal.SignalWorkflow(ctx, jobID, "", workflows.SignalResult, sig)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return ResultReport{Path: "signal", Status: s.statusOf(job),
			Message: "The job's workflow received the result and settles it."}, nil
	case !errors.As(err, &notFound):
		return ResultReport{}, fmt.Errorf("job %q: signalling the result: %w", jobID, err)
	}

	in := workflows.LateResultInput{JobID: jobID, AccountID: job.AccountID, Cost: job.Cost, Result: sig}
	run, err := s.opts.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.LateResultWorkflowID(jobID),
		TaskQueue: s.opts.TaskQueue,
		// Concurrent reports join one run; a later report runs again, and the guard decides.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            in.StaticSummary(),
	}, workflows.LateResult, in)
	if err != nil {
		return ResultReport{}, fmt.Errorf("job %q: starting the late-result fallback: %w", jobID, err)
	}
	var out workflows.LateResultOutcome
	if err := run.Get(ctx, &out); err != nil {
		return ResultReport{}, fmt.Errorf("job %q: late-result fallback: %w", jobID, err)
	}
	if s.opts.Metrics != nil {
		s.opts.Metrics.ResultAfterClose(out.Outcome)
	}
	current, err := s.opts.Ledger.Job(ctx, jobID)
	if err != nil {
		return ResultReport{}, err
	}
	return ResultReport{Path: "fallback", Outcome: out.Outcome, Status: s.statusOf(current), Message: out.Message}, nil
}

// ReportLateResult lets the starter serve as the simulated runner's [activities.LateResultReporter].
func (s *Starter) ReportLateResult(ctx context.Context, jobID string, result activities.WorkResult) error {
	_, err := s.ReportResult(ctx, jobID, result)
	return err
}

// WorkflowURL is the job's page in the Temporal Web UI; empty without a UI URL.
func (s *Starter) WorkflowURL(workflowID string) string {
	if s.opts.UIURL == "" {
		return ""
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", s.opts.UIURL, url.PathEscape(s.opts.Namespace), url.PathEscape(workflowID))
}

// pollEvery is how often Wait reads the ledger.
const pollEvery = 200 * time.Millisecond

// Wait polls the ledger until the job reaches one of the states, or ctx ends.
func (s *Starter) Wait(ctx context.Context, jobID string, states ...ledgerdb.State) (Status, error) {
	ticker := time.NewTicker(pollEvery)
	defer ticker.Stop()
	for {
		st, err := s.Status(ctx, jobID)
		if err != nil {
			return st, err
		}
		for _, want := range states {
			if st.State == want {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("job %q still %s: %w", jobID, st.State, ctx.Err())
		case <-ticker.C:
		}
	}
}
