package invariants

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// A BillingState that disagrees with the ledger is read again this many times, this far apart,
// before it counts: the workflow upserts its attributes in the workflow task after the ledger
// step, and visibility lags behind the workflow, so a live job disagrees for a moment at every
// transition.
const (
	mismatchRechecks   = 3
	mismatchRecheckGap = 500 * time.Millisecond
)

// workflowRun is what the check needs of one MeteredJob run.
type workflowRun struct {
	id, runID    string
	status       enumspb.WorkflowExecutionStatus
	start        time.Time
	billingState string
	accountID    string
}

func (r workflowRun) open() bool {
	return r.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// statusName is the run's status as the UI shows it ("Running", "Failed").
func statusName(s enumspb.WorkflowExecutionStatus) string { return s.String() }

// temporalCheck compares the ledger snapshot with the workflows in Temporal.
type temporalCheck struct {
	opts   Options
	snap   ledgerdb.LedgerSnapshot
	report *Report
	// runs is the latest run of every MeteredJob workflow in scope, by workflow ID.
	runs map[string]workflowRun
	// jobs is the snapshot's jobs by ID.
	jobs map[string]ledgerdb.Job
}

func (c *temporalCheck) run(ctx context.Context) error {
	c.jobs = map[string]ledgerdb.Job{}
	for _, t := range c.snap.Jobs {
		c.jobs[t.Job.ID] = t.Job
	}
	if err := c.listRuns(ctx); err != nil {
		return err
	}
	c.report.Counts.Workflows = len(c.runs)
	for _, r := range c.runs {
		if r.open() {
			c.report.Counts.OpenWorkflows++
		}
	}
	for _, step := range []func(context.Context) error{
		c.checkPlaceholders, c.checkStuck, c.checkWorkflowsWithoutJob, c.checkBillingStates,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// visibilityQuery selects the MeteredJob workflows in scope. The IDs in it were validated
// (ledgerdb.ValidateID allows no quotes), and so was the task queue.
func (c *temporalCheck) visibilityQuery() string {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowType)
	if c.opts.TaskQueue != "" {
		q += fmt.Sprintf(" AND TaskQueue = '%s'", c.opts.TaskQueue)
	}
	if c.opts.AccountID != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.SearchAttributeAccountID, c.opts.AccountID)
	}
	if c.opts.JobIDPrefix != "" {
		q += fmt.Sprintf(" AND WorkflowId STARTS_WITH '%s'", c.opts.JobIDPrefix)
	}
	return q
}

// listRuns pages through visibility and keeps one run per workflow ID: the open one if any
// (a job has at most one), otherwise the latest started. Earlier runs are a redriven job's.
func (c *temporalCheck) listRuns(ctx context.Context) error {
	c.runs = map[string]workflowRun{}
	query := c.visibilityQuery()
	var next []byte
	for {
		resp, err := c.opts.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.opts.Namespace, Query: query, NextPageToken: next,
		})
		if err != nil {
			return fmt.Errorf("listing workflows (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			r := runOf(e)
			if prev, ok := c.runs[r.id]; ok && (prev.open() || (!r.open() && prev.start.After(r.start))) {
				continue
			}
			c.runs[r.id] = r
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return nil
		}
	}
}

func runOf(e *workflowpb.WorkflowExecutionInfo) workflowRun {
	r := workflowRun{
		id:     e.GetExecution().GetWorkflowId(),
		runID:  e.GetExecution().GetRunId(),
		status: e.GetStatus(),
		start:  e.GetStartTime().AsTime(),
	}
	fields := e.GetSearchAttributes().GetIndexedFields()
	r.billingState = keyword(fields, workflows.SearchAttributeBillingState)
	r.accountID = keyword(fields, workflows.SearchAttributeAccountID)
	return r
}

// keyword decodes a Keyword search attribute from a visibility record; "" when it is absent.
func keyword(fields map[string]*commonpb.Payload, name string) string {
	p, ok := fields[name]
	if !ok {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// describe reads a workflow's latest run straight from its mutable state, which (unlike
// visibility) is never behind. found is false when Temporal has no workflow under the ID.
func (c *temporalCheck) describe(ctx context.Context, id string) (r workflowRun, found bool, err error) {
	d, err := c.opts.Temporal.DescribeWorkflow(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return workflowRun{}, false, nil
	}
	if err != nil {
		return workflowRun{}, false, fmt.Errorf("describing workflow %s: %w", id, err)
	}
	r = workflowRun{id: id, runID: d.WorkflowExecution.RunID, status: d.Status, start: d.WorkflowStartTime}
	r.billingState, _ = d.TypedSearchAttributes.GetKeyword(workflows.BillingStateKey)
	r.accountID, _ = d.TypedSearchAttributes.GetKeyword(workflows.AccountIDKey)
	return r, true, nil
}

// runFor is a job's workflow run: from the listing when it is there, otherwise described (the
// listing may be scoped to a task queue, or lag behind).
func (c *temporalCheck) runFor(ctx context.Context, id string) (workflowRun, bool, error) {
	if r, ok := c.runs[id]; ok {
		return r, true, nil
	}
	return c.describe(ctx, id)
}

// checkPlaceholders reports placeholders no workflow will ever decide. A placeholder whose
// workflow is open is fine however old it is (checkStuck judges its age).
func (c *temporalCheck) checkPlaceholders(ctx context.Context) error {
	for _, t := range c.snap.Jobs {
		j := t.Job
		if j.State != ledgerdb.StateSubmitting {
			continue
		}
		age := c.snap.AsOf.Sub(j.CreatedAt)
		if age < c.opts.Grace {
			continue
		}
		r, found, err := c.runFor(ctx, j.ID)
		if err != nil {
			return err
		}
		if found && !r.open() {
			// The listing may hold an older run; the described latest run is the one that counts.
			if r, found, err = c.describe(ctx, j.ID); err != nil {
				return err
			}
		}
		switch {
		case !found:
			c.report.add(Violation{Kind: KindPlaceholderWithoutWorkflow, JobID: j.ID, AccountID: j.AccountID,
				Message: fmt.Sprintf("job %s has been a placeholder (submitting, nothing charged) for %s and no workflow was ever started for it, so nothing will charge or reject it: the starter stopped between writing the placeholder and starting the workflow. Submitting the same ID and request again starts it.",
					j.ID, roundAge(age))})
		case !r.open():
			c.report.add(Violation{Kind: KindPlaceholderWithoutWorkflow, JobID: j.ID, AccountID: j.AccountID,
				Message: fmt.Sprintf("job %s is still a placeholder (submitting, nothing charged) but its workflow closed as %s without deciding the charge; nothing will charge or reject it now.",
					j.ID, statusName(r.status))})
		}
	}
	return nil
}

// checkStuck reports jobs submitting or running for longer than StuckAfter. A placeholder with no
// open workflow is already reported by checkPlaceholders, more precisely.
func (c *temporalCheck) checkStuck(ctx context.Context) error {
	for _, t := range c.snap.Jobs {
		j := t.Job
		var since time.Time
		switch j.State {
		case ledgerdb.StateSubmitting:
			since = j.CreatedAt
		case ledgerdb.StateRunning:
			since = j.CreatedAt
			if j.ChargedAt != nil {
				since = *j.ChargedAt
			}
		default:
			continue
		}
		age := c.snap.AsOf.Sub(since)
		if age <= c.opts.StuckAfter {
			continue
		}
		r, found, err := c.describe(ctx, j.ID)
		if err != nil {
			return err
		}
		if j.State == ledgerdb.StateSubmitting && (!found || !r.open()) && age >= c.opts.Grace {
			continue
		}
		var workflow string
		switch {
		case !found:
			workflow = "it has no workflow, so nothing will deliver or refund it"
		case r.open():
			workflow = "its workflow is still open (is a worker polling its task queue?)"
		default:
			workflow = fmt.Sprintf("its workflow closed as %s, so nothing will deliver or refund it", statusName(r.status))
		}
		verb := "has been running (charged"
		if j.State == ledgerdb.StateSubmitting {
			verb = "has been submitting (not charged"
		}
		c.report.add(Violation{Kind: KindStuckJob, JobID: j.ID, AccountID: j.AccountID,
			Message: fmt.Sprintf("job %s %s %d credits) for %s, longer than the %s its timeouts allow; %s.",
				j.ID, verb, j.Cost, roundAge(age), c.opts.StuckAfter, workflow)})
	}
	return nil
}

// checkWorkflowsWithoutJob reports MeteredJob workflows under IDs the ledger never saw.
func (c *temporalCheck) checkWorkflowsWithoutJob(ctx context.Context) error {
	for id, r := range c.runs {
		if _, ok := c.jobs[id]; ok {
			continue
		}
		// Not in the snapshot: submitted after it, or outside its scope (another account's job
		// with the prefix, say). Only a job the ledger does not have at all is a violation.
		_, err := c.opts.Ledger.Job(ctx, id)
		switch {
		case err == nil:
			continue
		case errors.Is(err, ledgerdb.ErrJobNotFound), errors.Is(err, ledgerdb.ErrInvalidInput):
		default:
			return err
		}
		what := "it is still open; its charge will find no job (JobNotFound) and charge nothing"
		if !r.open() {
			what = fmt.Sprintf("it closed as %s", statusName(r.status))
			if r.status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
				what += ": its charge found no job (JobNotFound), so nothing was charged"
			}
		}
		c.report.add(Violation{Kind: KindWorkflowWithoutJob, JobID: id, AccountID: r.accountID,
			Message: fmt.Sprintf("workflow %s (run %s) was started for a job the ledger never saw, bypassing the starter's placeholder, so its ID is not reserved in the ledger; %s.",
				id, r.runID, what)})
	}
	return nil
}

// agrees says whether a workflow's BillingState matches the job's ledger state. A job deleted
// while its workflow waits for a late result still shows the state it was deleted from: the
// workflow learns of the deletion only at its next ledger step.
func agrees(billingState string, j ledgerdb.Job) bool {
	return billingState == string(j.State) ||
		(j.State == ledgerdb.StateDeleted && billingState == string(j.StateBeforeDelete))
}

// checkBillingStates reports open workflows whose BillingState disagrees with the ledger, after
// reading both again a few times (see mismatchRechecks).
func (c *temporalCheck) checkBillingStates(ctx context.Context) error {
	type suspect struct {
		run workflowRun
		job ledgerdb.Job
	}
	var suspects []suspect
	for id, r := range c.runs {
		j, ok := c.jobs[id]
		if ok && r.open() && !agrees(r.billingState, j) {
			suspects = append(suspects, suspect{run: r, job: j})
		}
	}
	for round := 0; round < mismatchRechecks && len(suspects) > 0; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(mismatchRecheckGap):
			}
		}
		var still []suspect
		for _, s := range suspects {
			r, found, err := c.describe(ctx, s.run.id)
			if err != nil {
				return err
			}
			if !found || !r.open() {
				continue
			}
			j, err := c.opts.Ledger.Job(ctx, s.run.id)
			if err != nil {
				return err
			}
			if !agrees(r.billingState, j) {
				still = append(still, suspect{run: r, job: j})
			}
		}
		suspects = still
	}
	for _, s := range suspects {
		shown := s.run.billingState
		if shown == "" {
			shown = "(unset)"
		}
		c.report.add(Violation{Kind: KindBillingStateMismatch, JobID: s.job.ID, AccountID: s.job.AccountID,
			Message: fmt.Sprintf("job %s: its open workflow (run %s) shows BillingState %s, but the ledger says %s; something moved the job's money behind its workflow's back, or the workflow is not telling the ledger's answer.",
				s.job.ID, s.run.runID, shown, describeState(s.job))})
	}
	return nil
}

// roundAge keeps ages readable: whole seconds, or milliseconds below a second.
func roundAge(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
