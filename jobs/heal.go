package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// Healing. A job is charged by its workflow and settled by it, and nothing else ever settles a
// running job. So when a job's workflow closes while the job is still running — an operator
// pressed Terminate or Cancel in the Temporal UI, the run failed or timed out, it reached the
// history limit, or its charge committed after it had closed — the job would stay charged for
// work nobody delivers. Healing starts a new run of the job's own workflow, a heal run, that
// refunds the charge as its compensation (the reason says what happened) and then listens for a
// late result like any refunded job. When another program's workflow holds the job's workflow ID,
// no heal run can start under it, and healing must not wait for a run that is not the job's: the
// same guarded refund is written in the ledger directly, and a late result reaches the job through
// the late-result fallback. The reconcile pass heals every such job within one interval, and a
// read of the job's status heals it at once, so that no answer describes a job as running when no
// workflow runs it.

// Status reads a job as the user should see it. A job ID that never reached the ledger is
// [ledgerdb.ErrJobNotFound] — nothing was charged; a deleted job answers its tombstone (State
// deleted) with its money state kept. A running job whose workflow has closed is healed first.
func (s *Service) Status(ctx context.Context, key ledgerdb.JobKey) (Status, error) {
	job, err := s.opts.Ledger.Job(ctx, key)
	if err != nil {
		return Status{}, err
	}
	return s.current(ctx, job)
}

// current is the status of job, healed first when it is running with no workflow to settle it.
// When Temporal cannot be asked, the ledger's answer stands.
func (s *Service) current(ctx context.Context, job ledgerdb.Job) (Status, error) {
	if job.State != ledgerdb.StateRunning {
		return s.status(ctx, job)
	}
	healed, err := s.Heal(ctx, job)
	if err != nil || !healed {
		return s.status(ctx, job)
	}
	job, err = s.opts.Ledger.Job(ctx, job.Key())
	if err != nil {
		return Status{}, err
	}
	return s.status(ctx, job)
}

// Heal compensates a running job whose workflow has closed without settling it, and says whether
// it had to. The job's workflow is described first: while a run of it is open, that run settles
// the job and nothing is done; and when the ledger, read after the describe, no longer has the job
// running, the run settled it as it closed. Otherwise a heal run is started under the job's
// workflow ID and this waits until it has refunded the charge. Healing twice, or racing another
// healer, is harmless: only one run can be open under the ID, and the ledger's refund guard admits
// one refund.
//
// A run of another workflow type under the ID (another program's, in a namespace it shares) is
// not a run of the job: it never settles it. Healing goes around it: while it is open, no heal run
// can start, so the refund is written in the ledger directly — the same guarded step a heal run
// takes, its detail naming the foreign run — and the job waits for a late result through the
// late-result fallback; once it has closed, a heal run starts as usual. Either way the reason is
// the job's own last run's, read from visibility.
func (s *Service) Heal(ctx context.Context, job ledgerdb.Job) (bool, error) {
	workflowID := workflows.JobWorkflowID(job.AccountID, job.ID)
	run, err := s.describeRun(ctx, workflowID)
	if err != nil {
		return false, fmt.Errorf("job %q: describing its workflow: %w", job.ID, err)
	}
	var closed closedRun
	switch {
	case !run.found && s.originalRunOpen(ctx, job.ID):
		return false, nil
	case !run.found:
		// Its history is gone (or it never started under this ID): nobody will settle it.
		closed = goneRun
	case run.foreign():
		closed = s.whyOwnRunClosed(ctx, workflowID)
		closed.reason = ledgerdb.ScrubText(fmt.Sprintf("%s; another program's workflow (%s, run %s) holds the job's workflow ID",
			closed.reason, run.typ, run.runID))
	case run.open():
		return false, nil
	default:
		closed = s.whyClosed(ctx, workflowID, run.runID, run.status)
	}
	// The job was read before its workflow was described: a run that settled the job and closed
	// in between left nothing to heal. Read after the describe, the ledger tells.
	current, err := s.opts.Ledger.Job(ctx, job.Key())
	if err != nil || current.State != ledgerdb.StateRunning {
		return false, err
	}
	if run.foreign() && run.open() {
		// No run of the job's own workflow can start under the ID: the heal run's compensation,
		// the guarded refund, is written directly. A late result reaches the refunded job through
		// the late-result fallback (apply never signals a foreign run).
		refund, err := s.opts.Ledger.Refund(ctx, job.Key(), closed.code, closed.reason+"; refunded in the ledger", current.Attempts)
		if err != nil {
			return false, fmt.Errorf("job %q: refunding it around another program's workflow: %w", job.ID, err)
		}
		return refund.Outcome == ledgerdb.Applied, nil
	}
	in, err := s.inputOf(ctx, job)
	if err != nil {
		return false, err
	}
	in.Heal = &workflows.HealRequest{Code: closed.code, Reason: closed.reason, PreviousRunID: closed.runID}
	start := s.opts.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:        workflowID,
		TaskQueue: s.opts.TaskQueue,
		// A run open under the ID (another healer's, a redrive's) settles the job: join none.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            in.StaticSummary(job.Cost) + " (heal)",
		TypedSearchAttributes:    jobSearchAttributes(job.AccountID, ledgerdb.StateRunning),
	}, workflows.MeteredJob, in)
	handle, err := s.opts.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions:          chargeDecisionUpdate(workflowID, "heal:"+closed.runID),
	})
	if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("job %q: starting its heal run: %w", job.ID, err)
	}
	var decision workflows.ChargeDecision
	if err := handle.Get(ctx, &decision); err != nil {
		return false, fmt.Errorf("job %q: waiting for its heal run: %w", job.ID, err)
	}
	return true, nil
}

// latestRun is the latest run under a job's workflow ID, as Temporal describes it (never behind,
// unlike visibility).
type latestRun struct {
	// found is false when Temporal has no workflow under the ID.
	found  bool
	runID  string
	typ    string
	status enumspb.WorkflowExecutionStatus
}

// open reports whether the run is still open.
func (r latestRun) open() bool { return r.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING }

// own reports whether the run is one of the job's own workflow.
func (r latestRun) own() bool { return r.found && r.typ == workflows.WorkflowType }

// foreign reports whether the run is of another workflow type: another program's workflow under
// the job's ID, which never settles the job.
func (r latestRun) foreign() bool { return r.found && r.typ != workflows.WorkflowType }

// signalRunID is the run a signal for the job goes to: the described run when it is the job's
// own, so that a foreign run started meanwhile never receives it; any run otherwise (a signal to
// none finds nothing).
func (r latestRun) signalRunID() string {
	if r.own() {
		return r.runID
	}
	return ""
}

// describeRun describes the latest run under a job's workflow ID; a workflow ID Temporal does not
// know answers found false, without error.
func (s *Service) describeRun(ctx context.Context, workflowID string) (latestRun, error) {
	desc, err := s.opts.Temporal.DescribeWorkflow(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return latestRun{}, nil
	case err != nil:
		return latestRun{}, err
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	return latestRun{found: true, runID: info.GetExecution().GetRunId(), typ: info.GetType().GetName(), status: info.GetStatus()}, nil
}

// whyOwnRunClosed says why the job's own workflow ended when another program's workflow has since
// taken its ID: the latest run of the job's workflow type under the ID, found in visibility,
// read as whyClosed reads it. A job whose runs visibility no longer has reads as interrupted.
func (s *Service) whyOwnRunClosed(ctx context.Context, workflowID string) closedRun {
	resp, err := s.opts.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.opts.Namespace,
		PageSize:  100,
		// The workflow ID is made of validated IDs, which hold no quotes.
		Query: fmt.Sprintf("WorkflowId = '%s' AND WorkflowType = '%s'", workflowID, workflows.WorkflowType),
	})
	if err != nil {
		return goneRun
	}
	var last *workflowpb.WorkflowExecutionInfo
	for _, e := range resp.GetExecutions() {
		if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
			(last == nil || e.GetStartTime().AsTime().After(last.GetStartTime().AsTime())) {
			last = e
		}
	}
	if last == nil {
		return goneRun
	}
	return s.whyClosed(ctx, workflowID, last.GetExecution().GetRunId(), last.GetStatus())
}

// originalRunOpen reports whether a run of the original version, whose workflow ID was the bare
// job ID, is still open for the job: such a run settles its job itself.
func (s *Service) originalRunOpen(ctx context.Context, jobID string) bool {
	desc, err := s.opts.Temporal.DescribeWorkflow(ctx, jobID, "")
	return err == nil && desc.RawResponse.GetWorkflowExecutionInfo().GetType().GetName() == workflows.WorkflowType &&
		desc.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// closedRun says which run of a job's workflow closed, and why: the code the job's customer is
// told, and words for the refund's detail.
type closedRun struct {
	runID  string
	code   ledgerdb.Reason
	reason string
}

// goneRun is why a job is healed whose own workflow Temporal no longer has (its history is past
// retention, or it never started under the ID): nobody will settle it.
var goneRun = closedRun{code: ledgerdb.ReasonInterrupted, reason: "the job's workflow is gone without settling it"}

// whyClosed reads how a closed run ended, from its close event when it can: an operator's
// Terminate carries a reason, a failure its message. Those words are the operator's detail,
// scrubbed; the code says only who stopped the job: an operator (terminated, cancelled) or
// nobody (the run failed, timed out or ended).
func (s *Service) whyClosed(ctx context.Context, workflowID, runID string, status enumspb.WorkflowExecutionStatus) closedRun {
	closed := closedRun{runID: runID, code: ledgerdb.ReasonInterrupted}
	var detail string
	iter := s.opts.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if iter.HasNext() {
		if event, err := iter.Next(); err == nil {
			if t := event.GetWorkflowExecutionTerminatedEventAttributes(); t != nil {
				detail = t.GetReason()
			} else if f := event.GetWorkflowExecutionFailedEventAttributes(); f != nil {
				detail = f.GetFailure().GetMessage()
			}
		}
	}
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		closed.code, closed.reason = ledgerdb.ReasonStoppedByOperator, "stopped by an operator: terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		closed.code, closed.reason = ledgerdb.ReasonStoppedByOperator, "stopped by an operator: cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		closed.reason = "the job's workflow failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		closed.reason = "the job's workflow timed out"
	default:
		closed.reason = "the job's workflow ended without settling it"
	}
	if detail = strings.TrimSpace(detail); detail != "" {
		closed.reason += " (" + detail + ")"
	}
	closed.reason = ledgerdb.ScrubText(closed.reason)
	return closed
}

// WithoutOpenWorkflow answers the jobs among jobs (running jobs, from [ledgerdb.Store.RunningJobs])
// whose MeteredJob run is not open: the ones that may need healing. One list of the namespace's
// open runs tells them apart, so that a reconcile pass costs one visibility query, not one call
// per running job; visibility lags, so [Service.Heal] confirms each with a describe before it
// heals it.
func (s *Service) WithoutOpenWorkflow(ctx context.Context, jobs []ledgerdb.Job) ([]ledgerdb.Job, error) {
	open, err := s.openJobWorkflows(ctx)
	if err != nil {
		return nil, err
	}
	var closed []ledgerdb.Job
	for _, job := range jobs {
		if !open[workflows.JobWorkflowID(job.AccountID, job.ID)] && !open[job.ID] {
			closed = append(closed, job)
		}
	}
	return closed, nil
}

// openJobWorkflows lists the workflow IDs of the namespace's open MeteredJob runs.
func (s *Service) openJobWorkflows(ctx context.Context) (map[string]bool, error) {
	open := map[string]bool{}
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.opts.Namespace,
		PageSize:  1000,
		Query:     fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.WorkflowType),
	}
	for {
		resp, err := s.opts.Temporal.ListWorkflow(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("listing open job workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			open[e.GetExecution().GetWorkflowId()] = true
		}
		if len(resp.GetNextPageToken()) == 0 {
			return open, nil
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}
