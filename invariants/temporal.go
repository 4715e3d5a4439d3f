package invariants

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
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

// workflowRun is what the check needs of one run under a job's workflow ID: a MeteredJob's, or,
// described, whatever holds the ID.
type workflowRun struct {
	id, runID string
	typ       string
	status    enumspb.WorkflowExecutionStatus
	start     time.Time
	// closed is when the run closed; zero while it is open.
	closed       time.Time
	billingState string
	accountID    string
}

func (r workflowRun) open() bool {
	return r.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// foreign reports whether the run is of another workflow type than the job's own: another
// program's workflow under the job's ID, which never settles the job.
func (r workflowRun) foreign() bool { return r.typ != workflows.WorkflowType }

// ownOpen reports whether the run is an open run of the job's own workflow: one that will settle
// the job.
func (r workflowRun) ownOpen() bool { return r.open() && !r.foreign() }

// statusName is the run's status as the UI shows it ("Running", "Failed").
func statusName(s enumspb.WorkflowExecutionStatus) string { return s.String() }

// temporalCheck compares the ledger snapshot with the workflows in Temporal.
type temporalCheck struct {
	opts   Options
	snap   ledgerdb.LedgerSnapshot
	report *Report
	// runs is the latest run of every MeteredJob workflow in scope, by workflow ID.
	runs map[string]workflowRun
	// jobs is the snapshot's jobs by key.
	jobs map[ledgerdb.JobKey]ledgerdb.Job
}

func (c *temporalCheck) run(ctx context.Context) error {
	c.jobs = map[ledgerdb.JobKey]ledgerdb.Job{}
	for _, t := range c.snap.Jobs {
		c.jobs[t.Job.Key()] = t.Job
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
		c.checkPlaceholders, c.checkStuck, c.checkUnsettled, c.checkUnappliedResults, c.checkDiscardedResults,
		c.checkWorkflowsWithoutJob, c.checkForeignRuns, c.checkBillingStates, c.checkSchedule,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// visibilityQuery selects the MeteredJob workflows in scope. The IDs in it were validated
// (ledgerdb.ValidateID allows no quotes), and so was the task queue. A job-ID prefix without an
// account cannot be a workflow-ID prefix (the account comes first in it); listRuns applies it.
func (c *temporalCheck) visibilityQuery() string {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowType)
	if c.opts.TaskQueue != "" {
		q += fmt.Sprintf(" AND TaskQueue = '%s'", c.opts.TaskQueue)
	}
	if c.opts.AccountID != "" {
		q += fmt.Sprintf(" AND WorkflowId STARTS_WITH '%s'", workflows.JobWorkflowID(c.opts.AccountID, c.opts.JobIDPrefix))
	}
	return q
}

// workflowIDOf is the workflow ID of a job's MeteredJob.
func workflowIDOf(j ledgerdb.Job) string { return workflows.JobWorkflowID(j.AccountID, j.ID) }

// jobKeyOf is the job a MeteredJob's run belongs to: the account and job ID its workflow ID names
// (a run of the original version used the bare job ID, its account in the AccountID search
// attribute).
func jobKeyOf(r workflowRun) ledgerdb.JobKey {
	if accountID, jobID, ok := workflows.ParseJobWorkflowID(r.id); ok {
		return ledgerdb.JobKey{AccountID: accountID, JobID: jobID}
	}
	return ledgerdb.JobKey{AccountID: r.accountID, JobID: r.id}
}

// listRuns pages through visibility and keeps one run per workflow ID: the open one if any
// (a job has at most one), otherwise the latest started. Earlier runs are a redriven job's.
func (c *temporalCheck) listRuns(ctx context.Context) error {
	c.runs = map[string]workflowRun{}
	return c.eachRun(ctx, c.visibilityQuery(), func(r workflowRun) error {
		if !strings.HasPrefix(jobKeyOf(r).JobID, c.opts.JobIDPrefix) {
			return nil
		}
		if prev, ok := c.runs[r.id]; ok && (prev.open() || (!r.open() && prev.start.After(r.start))) {
			return nil
		}
		c.runs[r.id] = r
		return nil
	})
}

// eachRun pages through the runs visibility answers for query and hands each to visit, stopping at
// visit's first error.
func (c *temporalCheck) eachRun(ctx context.Context, query string, visit func(workflowRun) error) error {
	var next []byte
	for {
		resp, err := c.opts.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.opts.Namespace, Query: query, NextPageToken: next,
		})
		if err != nil {
			return fmt.Errorf("listing workflows (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if err := visit(runOf(e)); err != nil {
				return err
			}
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
		typ:    e.GetType().GetName(),
		status: e.GetStatus(),
		start:  e.GetStartTime().AsTime(),
	}
	if e.GetCloseTime() != nil {
		r.closed = e.GetCloseTime().AsTime()
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
	r = workflowRun{id: id, runID: d.WorkflowExecution.RunID, typ: d.WorkflowType.Name, status: d.Status, start: d.WorkflowStartTime}
	if d.WorkflowCloseTime != nil {
		r.closed = *d.WorkflowCloseTime
	}
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

// latestRun is the latest run of a job's workflow: the listed one when it is open, described
// otherwise (the listing may hold an older run, or lag behind).
func (c *temporalCheck) latestRun(ctx context.Context, id string) (workflowRun, bool, error) {
	r, found, err := c.runFor(ctx, id)
	if err != nil || (found && r.open()) {
		return r, found, err
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
		r, found, err := c.latestRun(ctx, workflowIDOf(j))
		if err != nil {
			return err
		}
		switch {
		case !found:
			c.report.add(Violation{Kind: KindPlaceholderWithoutWorkflow, JobID: j.ID, AccountID: j.AccountID,
				Message: fmt.Sprintf("job %s has been a placeholder (submitting, nothing charged) for %s and no workflow was ever started for it, so nothing will charge or reject it: the job service stopped between writing the placeholder and starting the workflow. Submitting the same ID and request again starts it.",
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
		r, found, err := c.describe(ctx, workflowIDOf(j))
		if err != nil {
			return err
		}
		if (!found || !r.ownOpen()) && (j.State == ledgerdb.StateRunning || age >= c.opts.Grace) {
			// checkPlaceholders and checkUnsettled report these, more precisely.
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

// checkUnsettled reports charged jobs that no workflow runs: their run closed without delivering
// or refunding them. The reconcile pass heals them within an interval, so one older than the
// grace means healing is not running. A job charged after its run had closed is reported at once,
// whatever its age: its charge committed when no run could settle it any more (a charge held up
// by a busy ledger while an operator terminated the run), so the step that committed it should
// have healed it, and no healing that is merely late explains it.
func (c *temporalCheck) checkUnsettled(ctx context.Context) error {
	for _, t := range c.snap.Jobs {
		j := t.Job
		if j.State != ledgerdb.StateRunning || j.ChargedAt == nil {
			continue
		}
		young := c.snap.AsOf.Sub(*j.ChargedAt) < c.opts.Grace
		r, found, err := c.latestRun(ctx, workflowIDOf(j))
		if err != nil {
			return err
		}
		chargedAfterClose := found && !r.open() && !r.closed.IsZero() && j.ChargedAt.After(r.closed)
		if (found && r.ownOpen()) || (young && !chargedAfterClose) {
			continue
		}
		if legacy, legacyFound, err := c.describe(ctx, j.ID); err != nil {
			return err
		} else if legacyFound && legacy.ownOpen() {
			continue // a run of the original version, under the bare job ID
		}
		how, healer := "it has no workflow", "the reconcile pass should have refunded it (is its schedule running?)"
		switch {
		case found && r.foreign():
			how = fmt.Sprintf("its own workflow is gone and another program's workflow (%s, run %s, %s) holds its workflow ID",
				r.typ, r.runID, statusName(r.status))
		case chargedAfterClose:
			how = fmt.Sprintf("its workflow closed as %s at %s, %s before the charge committed",
				statusName(r.status), r.closed.UTC().Format(time.RFC3339), roundAge(j.ChargedAt.Sub(r.closed)))
			healer = "the charge step should have healed it at once (could its worker reach Temporal?), and the reconcile pass will"
		case found:
			how = fmt.Sprintf("its workflow closed as %s", statusName(r.status))
		}
		c.report.add(Violation{Kind: KindUnsettledJob, Rule: 3, JobID: j.ID, AccountID: j.AccountID,
			Message: fmt.Sprintf("job %s is charged %d credits and running, but %s, so nothing will deliver or refund it; %s.",
				j.ID, j.Cost, how, healer)})
	}
	return nil
}

// checkUnappliedResults reports results recorded longer than the grace ago that no workflow took.
func (c *temporalCheck) checkUnappliedResults(context.Context) error {
	for _, t := range c.snap.Jobs {
		if t.UnappliedResults == 0 || t.OldestUnappliedResult == nil || c.snap.AsOf.Sub(*t.OldestUnappliedResult) < c.opts.Grace {
			continue
		}
		c.report.add(Violation{Kind: KindUnappliedResult, JobID: t.Job.ID, AccountID: t.Job.AccountID,
			Message: fmt.Sprintf("job %s has %d recorded result(s) that no workflow has taken, the oldest for %s; the reconcile pass should have applied them (is Temporal reachable, and its schedule running?).",
				t.Job.ID, t.UnappliedResults, roundAge(c.snap.AsOf.Sub(*t.OldestUnappliedResult)))})
	}
	return nil
}

// checkDiscardedResults reports deleted refunded jobs whose refund still awaits a reclaim although
// a result reported for them was taken longer than the grace ago: the result was discarded — as
// the job service did before a tombstone took its late result — and the customer keeps the refund
// for delivered work. A live taking settles the job within moments, which the grace allows for.
func (c *temporalCheck) checkDiscardedResults(context.Context) error {
	for _, t := range c.snap.Jobs {
		j := t.Job
		if j.State != ledgerdb.StateDeleted || !j.IsRefunded || j.IsReclaimed || t.LastAppliedResult == nil ||
			c.snap.AsOf.Sub(*t.LastAppliedResult) < c.opts.Grace {
			continue
		}
		c.report.add(Violation{Kind: KindDiscardedResult, Rule: 3, JobID: j.ID, AccountID: j.AccountID,
			Message: fmt.Sprintf("job %s was deleted while refunded, and a result reported for it was taken %s ago but not billed: the refund of %d credits was never reclaimed, so the customer keeps it for delivered work. Report the same result again (jobbill job report, or POST /v1/jobs/{id}/result with a runner key) to bill it.",
				j.ID, roundAge(c.snap.AsOf.Sub(*t.LastAppliedResult)), j.Cost)})
	}
	return nil
}

// checkWorkflowsWithoutJob reports open MeteredJob workflows whose job the ledger has never seen.
// A run started without a placeholder writes its own in its first step, so an open one older than
// the grace has not (no worker polls its task queue?). A closed one charged nothing: every money
// movement names a job the ledger knows.
func (c *temporalCheck) checkWorkflowsWithoutJob(ctx context.Context) error {
	for id, r := range c.runs {
		key := jobKeyOf(r)
		if _, ok := c.jobs[key]; ok || !r.open() || c.snap.AsOf.Sub(r.start) < c.opts.Grace {
			continue
		}
		// Not in the snapshot: submitted after it, or outside its scope (another account's job
		// with the prefix, say). Only a job the ledger does not have at all is a violation.
		_, err := c.opts.Ledger.Job(ctx, key)
		switch {
		case err == nil:
			continue
		case errors.Is(err, ledgerdb.ErrJobNotFound), errors.Is(err, ledgerdb.ErrInvalidInput):
		default:
			return err
		}
		c.report.add(Violation{Kind: KindWorkflowWithoutJob, JobID: key.JobID, AccountID: key.AccountID,
			Message: fmt.Sprintf("workflow %s (run %s) has been open for %s for a job the ledger never saw: its first step writes the job's placeholder, so no worker has run it (is one polling its task queue?).",
				id, r.runID, roundAge(c.snap.AsOf.Sub(r.start)))})
	}
	return nil
}

// checkForeignRuns reports open workflows of another type than the job's own (another program's,
// in a namespace it shares) under the workflow ID of a job the ledger has: they never settle the
// job, they keep its own workflow from running (a redrive is refused), and a result or a heal has
// to go around them. One visibility query finds them all; it is not scoped to the task queue,
// since another program's workflow runs on a queue of its own.
func (c *temporalCheck) checkForeignRuns(ctx context.Context) error {
	prefix := "job/"
	if c.opts.AccountID != "" {
		prefix = workflows.JobWorkflowID(c.opts.AccountID, c.opts.JobIDPrefix)
	}
	query := fmt.Sprintf("WorkflowId STARTS_WITH '%s' AND WorkflowType != '%s' AND ExecutionStatus = 'Running'", prefix, workflows.WorkflowType)
	return c.eachRun(ctx, query, func(r workflowRun) error {
		accountID, jobID, ok := workflows.ParseJobWorkflowID(r.id)
		if !ok || !strings.HasPrefix(jobID, c.opts.JobIDPrefix) {
			return nil
		}
		// Visibility lags: the run may have closed since, or the ID been taken back.
		if now, found, err := c.describe(ctx, r.id); err != nil {
			return err
		} else if !found || !now.open() || !now.foreign() {
			return nil
		}
		key := ledgerdb.JobKey{AccountID: accountID, JobID: jobID}
		j, ok := c.jobs[key]
		if !ok {
			// Outside the snapshot (submitted after it, or out of scope): only a job the
			// ledger has is jobbill's business.
			var err error
			if j, err = c.opts.Ledger.Job(ctx, key); errors.Is(err, ledgerdb.ErrJobNotFound) || errors.Is(err, ledgerdb.ErrInvalidInput) {
				return nil
			} else if err != nil {
				return err
			}
		}
		c.report.add(Violation{Kind: KindForeignWorkflow, JobID: j.ID, AccountID: j.AccountID,
			Message: fmt.Sprintf("another program's workflow (%s, run %s, open for %s) holds the workflow ID %s of job %s, which is %s: it never settles the job, no run of the job's own workflow can start under the ID (a redrive is refused), and a heal or a late result goes around it. Find the program that starts workflows under jobbill's job IDs in this namespace.",
				r.typ, r.runID, roundAge(c.snap.AsOf.Sub(r.start)), r.id, j.ID, describeState(j))})
		return nil
	})
}

// passSchedules are the schedules of the passes that keep the money right with nobody looking,
// and what stops when one is off.
var passSchedules = []struct {
	id, pass string
	kind     Kind
	off      string
}{
	{workflows.ReconcileScheduleID, "reconcile", KindReconcileSchedule,
		"nothing heals jobs left charged, results recorded while Temporal was down, or orphaned placeholders"},
	{workflows.ExpiryScheduleID, "expiry", KindExpirySchedule,
		"nothing removes what remains of expired credit blocks, which stay in the balances"},
}

// checkSchedule reports a pass's schedule that is missing or that starts its passes on a task
// queue no worker polls: the pass would then be off, silently.
func (c *temporalCheck) checkSchedule(ctx context.Context) error {
	if !c.opts.Schedule {
		return nil
	}
	for _, s := range passSchedules {
		desc, err := c.opts.Temporal.ScheduleClient().GetHandle(ctx, s.id).Describe(ctx)
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			c.report.add(Violation{Kind: s.kind, Message: fmt.Sprintf(
				"the %s schedule %s does not exist in namespace %s: %s. Starting a worker creates it.",
				s.pass, s.id, c.opts.Namespace, s.off)})
			continue
		case err != nil:
			return fmt.Errorf("describing the %s schedule: %w", s.pass, err)
		}
		action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
		if !ok {
			c.report.add(Violation{Kind: s.kind, Message: fmt.Sprintf(
				"the %s schedule %s does not start a workflow.", s.pass, s.id)})
			continue
		}
		tq, err := c.opts.Temporal.DescribeTaskQueue(ctx, action.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return fmt.Errorf("describing task queue %s: %w", action.TaskQueue, err)
		}
		if len(tq.GetPollers()) == 0 {
			c.report.add(Violation{Kind: s.kind, Message: fmt.Sprintf(
				"the %s schedule %s starts its passes on task queue %s, which no worker polls: %s. Starting a worker with the right temporal.task_queue points the schedule at it.",
				s.pass, s.id, action.TaskQueue, s.off)})
		}
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
	for _, r := range c.runs {
		j, ok := c.jobs[jobKeyOf(r)]
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
			if !found || !r.ownOpen() {
				continue
			}
			j, err := c.opts.Ledger.Job(ctx, s.job.Key())
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
