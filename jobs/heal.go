package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
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
// late result like any refunded job. The reconcile pass heals every such job within one interval,
// and a read of the job's status heals it at once, so that no answer describes a job as running
// when no workflow runs it.

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
		return s.statusOf(job), nil
	}
	healed, err := s.Heal(ctx, job)
	if err != nil || !healed {
		return s.statusOf(job), nil
	}
	job, err = s.opts.Ledger.Job(ctx, job.Key())
	if err != nil {
		return Status{}, err
	}
	return s.statusOf(job), nil
}

// Heal compensates a running job whose workflow has closed without settling it, and says whether
// it had to. The job's workflow is described first: while a run of it is open, that run settles
// the job and nothing is done; and when the ledger, read after the describe, no longer has the job
// running, the run settled it as it closed. Otherwise a heal run is started under the job's
// workflow ID and this waits until it has refunded the charge. Healing twice, or racing another healer, is
// harmless: only one run can be open under the ID, and the ledger's refund guard admits one refund.
func (s *Service) Heal(ctx context.Context, job ledgerdb.Job) (bool, error) {
	workflowID := workflows.JobWorkflowID(job.AccountID, job.ID)
	desc, err := s.opts.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	var closed closedRun
	switch {
	case errors.As(err, &notFound) && s.originalRunOpen(ctx, job.ID):
		return false, nil
	case errors.As(err, &notFound):
		// Its history is gone (or it never started under this ID): nobody will settle it.
		closed = closedRun{code: ledgerdb.ReasonInterrupted, reason: "the job's workflow is gone without settling it"}
	case err != nil:
		return false, fmt.Errorf("job %q: describing its workflow: %w", job.ID, err)
	default:
		info := desc.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return false, nil
		}
		closed = s.whyClosed(ctx, workflowID, info.GetExecution().GetRunId(), info.GetStatus())
	}
	// The job was read before its workflow was described: a run that settled the job and closed
	// in between left nothing to heal. Read after the describe, the ledger tells.
	current, err := s.opts.Ledger.Job(ctx, job.Key())
	if err != nil || current.State != ledgerdb.StateRunning {
		return false, err
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

// originalRunOpen reports whether a run of the original version, whose workflow ID was the bare
// job ID, is still open for the job: such a run settles its job itself.
func (s *Service) originalRunOpen(ctx context.Context, jobID string) bool {
	desc, err := s.opts.Temporal.DescribeWorkflowExecution(ctx, jobID, "")
	return err == nil && desc.GetWorkflowExecutionInfo().GetType().GetName() == workflows.WorkflowType &&
		desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// closedRun says which run of a job's workflow closed, and why: the code the job's customer is
// told, and words for the refund's detail.
type closedRun struct {
	runID  string
	code   ledgerdb.Reason
	reason string
}

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

// HealReport counts what [Service.HealRunning] did.
type HealReport struct {
	// Checked is how many running jobs were compared with the open workflows.
	Checked int
	// Healed is how many were refunded by a heal run.
	Healed int
	// Failures says which could not be healed, and why; the next pass tries again.
	Failures []string
}

// HealRunning heals every job of jobs (running jobs, from [ledgerdb.Store.RunningJobs]) whose
// workflow has closed. One list of the open MeteredJob workflows tells which jobs to look at
// closer, so that a pass costs one visibility query, not one call per running job; visibility lags,
// so each job missing from it is confirmed with [Service.Heal]'s describe before it is healed.
func (s *Service) HealRunning(ctx context.Context, jobs []ledgerdb.Job) (HealReport, error) {
	report := HealReport{Checked: len(jobs)}
	if len(jobs) == 0 {
		return report, nil
	}
	open, err := s.openJobWorkflows(ctx)
	if err != nil {
		return report, err
	}
	for _, job := range jobs {
		if open[workflows.JobWorkflowID(job.AccountID, job.ID)] || open[job.ID] {
			continue
		}
		healed, err := s.Heal(ctx, job)
		switch {
		case err != nil:
			report.Failures = append(report.Failures, fmt.Sprintf("%s: %v", job.ID, err))
		case healed:
			report.Healed++
		}
		if ctx.Err() != nil {
			return report, ctx.Err()
		}
	}
	return report, nil
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
