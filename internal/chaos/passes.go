package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// HealPasses bounds the repair of every fault the run leaves for the reconcile pass: once a fault
// can be repaired (a placeholder older than the pass's grace, a recorded result older than its
// result grace, a charged job whose workflow has closed), at most HealPasses-1 scheduled passes
// that started after that may complete and leave it as it was. The first such pass should repair
// it; one more covers visibility's lag (a run just closed may still be listed open) and a job the
// pass could not finish in time.
const HealPasses = 2

// PassTotals is what the workers' scheduled reconcile passes did: how many completed, how many
// ended otherwise (failed or timed out), and the sums of their results.
type PassTotals struct {
	Completed, Ended                                 int
	ResultsApplied, Healed, Started, OrphansRejected int
}

// passWatcher follows the reconcile schedule the workers created on the run's dev server: which
// of its passes completed, when the schedule started each, and what each did. It reads Temporal
// only, and logs every pass that repaired something.
type passWatcher struct {
	tc  client.Client
	log func(kind, format string, args ...any)

	mu        sync.Mutex
	completed []time.Time     // when the schedule started each completed pass
	known     map[string]bool // the runs already counted, completed or not
	totals    PassTotals
}

// refresh lists the schedule's passes and records those that have ended since the last call. It
// lists them from visibility (every run the schedule started), not from the schedule's recent
// actions: those keep only the last ten, which a loaded machine's slow calls can let slip by.
func (w *passWatcher) refresh(ctx context.Context) error {
	query := fmt.Sprintf("TemporalScheduledById = '%s'", workflows.ReconcileScheduleID)
	var token []byte
	for {
		page, err := w.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return err
		}
		for _, info := range page.GetExecutions() {
			if err := w.record(ctx, info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), info.GetStartTime().AsTime()); err != nil {
				return err
			}
		}
		if token = page.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// record counts the pass (workflowID, runID), started at startedAt, once it has ended.
func (w *passWatcher) record(ctx context.Context, workflowID, runID string, startedAt time.Time) error {
	w.mu.Lock()
	known := w.known[runID]
	w.mu.Unlock()
	if known {
		return nil
	}
	d, err := w.tc.DescribeWorkflow(ctx, workflowID, runID)
	if err != nil {
		return err
	}
	status := d.RawResponse.GetWorkflowExecutionInfo().GetStatus()
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	var res activities.ReconcileResult
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		if err := w.tc.GetWorkflow(ctx, workflowID, runID).Get(ctx, &res); err != nil {
			return err
		}
	}
	w.mu.Lock()
	if w.known == nil {
		w.known = map[string]bool{}
	}
	w.known[runID] = true
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		w.completed = append(w.completed, startedAt)
		w.totals.Completed++
		w.totals.ResultsApplied += res.ResultsApplied
		w.totals.Healed += res.Healed
		w.totals.Started += res.Started
		w.totals.OrphansRejected += res.RejectedOrphans
	} else {
		w.totals.Ended++
	}
	w.mu.Unlock()
	switch {
	case status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		w.log("reconcile", "scheduled pass started at %s ended %s", startedAt.Format("15:04:05.000"), status)
	case res.ResultsApplied+res.Healed+res.Examined+res.Failed > 0:
		w.log("reconcile", "scheduled pass started at %s: results applied %d, running checked %d, healed %d, placeholders examined %d, started %d, rejected orphans %d, still submitting %d, failed %d",
			startedAt.Format("15:04:05.000"), res.ResultsApplied, res.RunningChecked, res.Healed, res.Examined, res.Started,
			res.RejectedOrphans, res.StillSubmitting, res.Failed)
	}
	return nil
}

// since counts the completed passes that the schedule started after t.
func (w *passWatcher) since(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, started := range w.completed {
		if started.After(t) {
			n++
		}
	}
	return n
}

func (w *passWatcher) figures() PassTotals {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.totals
}

// A fault is something the run left for the scheduled pass to repair.
type fault struct {
	key      string
	what     string
	due      time.Time                               // when a pass can first repair it
	repaired func(ctx context.Context) (bool, error) // reads the ledger, never through jobbill
	flagged  bool                                    // reported as an anomaly already
}

// faults are the faults not yet seen repaired, each added once by its key.
type faults struct {
	mu        sync.Mutex
	pending   map[string]*fault
	added     map[string]bool
	repaired  int
	outlasted int // the most completed passes a fault was seen to outlast
}

// add tracks a fault under key unless one was tracked under it before.
func (f *faults) add(key, what string, due time.Time, repaired func(ctx context.Context) (bool, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.added[key] {
		return
	}
	if f.pending == nil {
		f.pending, f.added = map[string]*fault{}, map[string]bool{}
	}
	f.added[key] = true
	f.pending[key] = &fault{key: key, what: what, due: due, repaired: repaired}
}

func (f *faults) left() []*fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	left := make([]*fault, 0, len(f.pending))
	for _, x := range f.pending {
		left = append(left, x)
	}
	return left
}

func (f *faults) figures() (repaired, outlasted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repaired, f.outlasted
}

// check reads every pending fault and reports, as an anomaly, one that HealPasses completed passes
// started after it was due have left as it was. The passes are counted before the fault is read:
// a pass that completed before the read had its chance to repair what the read finds.
func (r *run) check(ctx context.Context) {
	for _, f := range r.faults.left() {
		passes := r.passes.since(f.due)
		ok, err := f.repaired(ctx)
		if err != nil {
			continue // Postgres restarting: the next round reads it again
		}
		r.faults.mu.Lock()
		if ok {
			delete(r.faults.pending, f.key)
			r.faults.repaired++
			r.faults.mu.Unlock()
			continue
		}
		r.faults.outlasted = max(r.faults.outlasted, passes)
		flag := passes >= HealPasses && !f.flagged
		f.flagged = f.flagged || flag
		r.faults.mu.Unlock()
		if flag {
			r.anomaly("%s: %d scheduled passes that started after it could be repaired left it as it was", f.what, passes)
		}
	}
}

// watch refreshes the scheduled passes and checks the pending faults every second until ctx ends.
// The schedule's description is a query of its scheduler workflow, cheap enough at this pace.
func (r *run) watch(ctx context.Context) {
	for ctx.Err() == nil {
		// A refresh that fails (the dev server restarting) leaves the count short, which can only
		// make the bound more lenient; the faults are read all the same.
		round, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = r.passes.refresh(round)
		r.check(round)
		cancel()
		sleep(ctx, time.Second)
	}
}

// leaves is a fault's repair: the job is no longer in state.
func (r *run) leaves(key ledgerdb.JobKey, state ledgerdb.State) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		job, err := r.ledger.Job(ctx, key)
		return err == nil && job.State != state, err
	}
}

// resultApplied is a recorded result's repair: no result of the job is left unapplied in the
// ledger's inbox.
func (r *run) resultApplied(key ledgerdb.JobKey) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		pending, err := r.ledger.UnappliedResults(ctx, 0, ledgerdb.MaxPlaceholders, key.AccountID)
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(pending, func(u ledgerdb.UnappliedResult) bool { return u.Report.Key == key }), nil
	}
}

// settle waits, once the last injection is over, until the run is at rest: no job of the run
// submitting or running, no result of its accounts unapplied, no job workflow of the run open,
// every block whose expiry passed removed, every top-up request paid, and every fault repaired. A job the ledger has running whose workflow has closed (Temporal's
// describe says so) is a fault too, repairable from when it is seen; a placeholder from its grace
// on; a recorded result from its result grace on. The wait is bounded by QuiesceTimeout; the
// repairs, by HealPasses each.
func (r *run) settle(ctx context.Context) {
	deadline := time.Now().Add(r.cfg.QuiesceTimeout)
	for {
		busy, err := r.busy(ctx)
		if err == nil && len(busy) == 0 && len(r.faults.left()) == 0 {
			r.logf("quiescent", "every job settled, every recorded result applied, every workflow closed, every expired block removed, every top-up asked for paid")
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			for _, f := range r.faults.left() {
				busy = append(busy, f.what+" (not repaired)")
			}
			if err != nil {
				busy = append(busy, err.Error())
			}
			r.anomaly("not quiescent after %s: %s", r.cfg.QuiesceTimeout, strings.Join(busy, "; "))
			return
		}
		sleep(ctx, time.Second)
	}
}

// busy lists what keeps the run from rest: its jobs submitting or running, its accounts' unapplied
// results, its open job workflows and what keeps its credit mix busy (creditsBusy). It adds every placeholder, and every running job whose
// workflow has closed, to the faults.
func (r *run) busy(ctx context.Context) ([]string, error) {
	var busy []string
	placeholders, err := r.ledger.Placeholders(ctx, 0, ledgerdb.MaxPlaceholders, r.accounts...)
	if err != nil {
		return nil, err
	}
	for _, job := range placeholders {
		busy = append(busy, job.Key().String()+" submitting")
		r.faults.add("job:"+job.Key().String(), "placeholder "+job.Key().String(), job.CreatedAt.Add(r.cfg.PassGrace), r.leaves(job.Key(), ledgerdb.StateSubmitting))
	}
	running, err := r.ledger.RunningJobs(ctx, 0, ledgerdb.MaxRunningJobs, r.accounts...)
	if err != nil {
		return nil, err
	}
	open, err := r.openWorkflows(ctx)
	if err != nil {
		return nil, err
	}
	for _, job := range running {
		workflowID := workflows.JobWorkflowID(job.AccountID, job.ID)
		busy = append(busy, job.Key().String()+" running")
		if open[workflowID] {
			continue
		}
		// Visibility lags: a job missing from the list is confirmed by describing its workflow.
		d, err := r.tc.DescribeWorkflow(ctx, workflowID, "")
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
		case err != nil:
			return nil, err
		case d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			continue
		}
		// Re-read after the describe: a run that settled the job as it closed left no fault.
		if now, err := r.ledger.Job(ctx, job.Key()); err != nil || now.State != ledgerdb.StateRunning {
			continue
		}
		r.faults.add("job:"+job.Key().String(), "job "+job.Key().String()+" left running by its closed workflow", time.Now(), r.leaves(job.Key(), ledgerdb.StateRunning))
	}
	unapplied, err := r.ledger.UnappliedResults(ctx, 0, ledgerdb.MaxPlaceholders, r.accounts...)
	if err != nil {
		return nil, err
	}
	for _, u := range unapplied {
		busy = append(busy, fmt.Sprintf("%s's result of attempt %d unapplied", u.Report.Key, u.Report.Attempt))
		r.faults.add("result:"+u.Report.Key.String(), "result recorded for "+u.Report.Key.String(), u.ReceivedAt.Add(r.cfg.PassResultGrace), r.resultApplied(u.Report.Key))
	}
	if len(open) > 0 {
		busy = append(busy, fmt.Sprintf("%d job workflows open", len(open)))
	}
	credits, err := r.creditsBusy(ctx)
	if err != nil {
		return nil, err
	}
	return append(busy, credits...), nil
}

// openWorkflows lists the run's open job workflows, by workflow ID.
func (r *run) openWorkflows(ctx context.Context) (map[string]bool, error) {
	open := map[string]bool{}
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: r.namespace,
		PageSize:  1000,
		Query: fmt.Sprintf("TaskQueue = '%s' AND WorkflowType = '%s' AND ExecutionStatus = 'Running'",
			r.taskQueue, workflows.WorkflowType),
	}
	for {
		resp, err := r.tc.ListWorkflow(ctx, req)
		if err != nil {
			return nil, err
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

// ownDatabase refuses a ledger that holds jobs of another deployment which the reconcile pass would
// act on: the run's workers create the reconcile schedule, whose pass reads every account of the
// database, and would heal or resume jobs whose workflows live on another Temporal server. Jobs
// of earlier chaos runs are fair game: their dev servers are gone, and healing them is what a
// deployment does.
func ownDatabase(ctx context.Context, ledger *ledgerdb.Store) error {
	placeholders, err := ledger.Placeholders(ctx, 0, ledgerdb.MaxPlaceholders)
	if err != nil {
		return fmt.Errorf("chaos: reading the ledger: %w", err)
	}
	running, err := ledger.RunningJobs(ctx, 0, ledgerdb.MaxRunningJobs)
	if err != nil {
		return fmt.Errorf("chaos: reading the ledger: %w", err)
	}
	unapplied, err := ledger.UnappliedResults(ctx, 0, ledgerdb.MaxPlaceholders)
	if err != nil {
		return fmt.Errorf("chaos: reading the ledger: %w", err)
	}
	keys := make([]ledgerdb.JobKey, 0, len(placeholders)+len(running)+len(unapplied))
	for _, j := range append(placeholders, running...) {
		keys = append(keys, j.Key())
	}
	for _, u := range unapplied {
		keys = append(keys, u.Report.Key)
	}
	for _, key := range keys {
		if !strings.HasPrefix(key.JobID, "chaos-") {
			return fmt.Errorf("chaos: the ledger holds a job of another deployment that the reconcile pass would act on (%s, submitting, running or with a result unapplied): "+
				"the run's workers heal every account of their database, so give the run a database of its own", key)
		}
	}
	return nil
}
