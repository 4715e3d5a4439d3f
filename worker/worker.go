// Package worker builds the Temporal worker that runs jobbill's workflows and activities, and the
// schedules of its passes — the reconcile pass that heals what the doors leave behind, the expiry
// pass that removes what remains of expired credit blocks — from one config.Config. Package app
// runs it, over the connections of package connect.
package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/workflows"
)

// New builds a worker that polls the configured task queue with the metered job workflow, the
// late-result fallback, the orphan-repair Reconcile workflow, the Expire workflow and the
// activities registered (the reconcile pass only with a job service, which it resumes
// placeholders through). Late results of the simulated runner are
// reported through st.
func New(c config.Config, tc client.Client, ledger *ledgerdb.Store, st *jobs.Service, m *metrics.Metrics) sdkworker.Worker {
	// The cache is the process's, shared by its workers, and sized before the first one starts.
	sdkworker.SetStickyWorkflowCacheSize(c.Temporal.WorkflowCacheSize)
	// The build ID keeps the version of each run the worker starts (workflows/versions.go).
	w := sdkworker.New(tc, c.Temporal.TaskQueue, sdkworker.Options{DeploymentOptions: workflows.WorkerDeploymentOptions()})
	w.RegisterWorkflow(workflows.MeteredJob)
	w.RegisterWorkflow(workflows.LateResult)
	acts := &activities.Activities{Ledger: ledger, Runner: newRunner(c.Runner, st)}
	if m != nil {
		acts.Metrics = m
	}
	if st != nil {
		// A charge that commits after its run closed is healed by its own step.
		acts.Healer = st
	}
	w.RegisterActivity(acts)
	// Orphan repair: the Reconcile workflow (run by the schedule EnsureSchedules creates)
	// heals placeholders through the job service's Resume, the same start path as a submission.
	w.RegisterWorkflow(workflows.Reconcile)
	if st != nil {
		w.RegisterActivity(&activities.Reconciler{Ledger: ledger, Healer: healer{st, ledger}})
	}
	// Expiry: the Expire workflow (run by the other schedule EnsureSchedules creates) removes what
	// remains of each credit block whose expiry has passed.
	w.RegisterWorkflow(workflows.Expire)
	expirer := &activities.Expirer{Ledger: ledger}
	if m != nil {
		expirer.Metrics = m
	}
	w.RegisterActivity(expirer)
	return w
}

// healer lets the reconcile pass heal through the job service.
type healer struct {
	st     *jobs.Service
	ledger *ledgerdb.Store
}

// Resume resumes the placeholder through the job service and answers the job as the ledger then
// has it: the reconcile pass needs the ledger's reject code, which a job's status tells its
// customer only as a code of the customer's vocabulary.
func (h healer) Resume(ctx context.Context, key ledgerdb.JobKey) (ledgerdb.State, ledgerdb.RejectReason, error) {
	status, err := h.st.Resume(ctx, key)
	if err != nil {
		return status.State, "", err
	}
	job, err := h.ledger.Job(ctx, key)
	return job.State, job.RejectReason, err
}

func (h healer) WithoutOpenWorkflow(ctx context.Context, jobs []ledgerdb.Job) ([]ledgerdb.Job, error) {
	return h.st.WithoutOpenWorkflow(ctx, jobs)
}

func (h healer) Heal(ctx context.Context, job ledgerdb.Job) (bool, error) {
	return h.st.Heal(ctx, job)
}

func (h healer) ApplyRecordedResult(ctx context.Context, u ledgerdb.UnappliedResult) error {
	return h.st.ApplyRecordedResult(ctx, u)
}

// EnsureSchedules creates the Temporal Schedules of jobbill's passes — the reconcile pass every
// reconcile.interval, the expiry pass every expiry.interval — each running its workflow on the
// configured task queue and skipping a run while the previous one is still going, or, when one
// exists, points it at this configuration: the task queue, the interval and the pass's input.
// Every worker calls it at start, so a fleet ends up with exactly one schedule of each pass, and
// a deployment that moves to a new task queue takes the schedules with it (a schedule left
// pointing at a queue nobody polls would silently switch its pass off; `jobbill audit` reports
// such a reconcile schedule). A paused schedule stays paused. A call a busy server lets time out
// is tried again, a few times, before the worker gives up: each step only makes the schedule what
// the configuration says, so trying it again is safe.
func EnsureSchedules(ctx context.Context, tc client.Client, c config.Config) error {
	for _, s := range passSchedules(c) {
		err := ensureSchedule(ctx, tc, c.Temporal.TaskQueue, s)
		for wait := time.Second; err != nil && transient(err) && wait <= 8*time.Second; wait *= 2 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(wait):
			}
			err = ensureSchedule(ctx, tc, c.Temporal.TaskQueue, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// transient reports whether a call to Temporal failed only for want of time or of a server that
// answers: the same call may succeed a moment later.
func transient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var exceeded *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &unavailable) || errors.As(err, &exceeded)
}

// passSchedule is the schedule of one of jobbill's passes.
type passSchedule struct {
	// id is the schedule's ID, fixed so that every worker finds the same one.
	id string
	// pass names the pass in errors and in the reason a stranded run is ended with.
	pass string
	// every is how often the pass runs.
	every time.Duration
	// action starts the pass's workflow; ensureSchedule sets its task queue and run timeout.
	action client.ScheduleWorkflowAction
	// note says what the pass does, for whoever finds the schedule in the UI.
	note string
}

// passSchedules are the schedules of jobbill's passes as c configures them.
func passSchedules(c config.Config) []passSchedule {
	return []passSchedule{{
		id:    workflows.ReconcileScheduleID,
		pass:  "reconcile",
		every: c.Reconcile.Interval,
		action: client.ScheduleWorkflowAction{
			ID:       workflows.ReconcileWorkflowID,
			Workflow: workflows.Reconcile,
			Args:     []any{activities.ReconcileInput{Grace: c.Reconcile.Grace, ResultGrace: c.Reconcile.ResultGrace}},
		},
		note: "jobbill's reconcile pass: applies results recorded while Temporal was unreachable, heals jobs whose workflow ended unsettled, resumes orphaned placeholders",
	}, {
		id:    workflows.ExpiryScheduleID,
		pass:  "expiry",
		every: c.Expiry.Interval,
		action: client.ScheduleWorkflowAction{
			ID:       workflows.ExpiryWorkflowID,
			Workflow: workflows.Expire,
			Args:     []any{activities.ExpiryInput{}},
		},
		note: "jobbill's expiry pass: removes what remains of each credit block whose expiry has passed, once per block",
	}}
}

// ensureSchedule creates s on queue, or updates it to s and queue and ends the runs it had
// started on another queue (see [EnsureSchedules]).
func ensureSchedule(ctx context.Context, tc client.Client, queue string, s passSchedule) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}}
	action := s.action
	action.TaskQueue = queue
	// A pass that outlives its slot is skipped over anyway; this bounds a stuck one.
	action.WorkflowRunTimeout = 15 * time.Minute
	_, err := tc.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      s.id,
		Spec:    spec,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action:  &action,
		Note:    s.note,
	})
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		if err != nil {
			return fmt.Errorf("creating the %s schedule %q: %w", s.pass, s.id, err)
		}
		return nil
	}
	err = tc.ScheduleClient().GetHandle(ctx, s.id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			schedule := in.Description.Schedule
			schedule.Spec, schedule.Action = &spec, &action
			if schedule.Policy == nil {
				schedule.Policy = &client.SchedulePolicies{}
			}
			schedule.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			return &client.ScheduleUpdate{Schedule: &schedule}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("updating the %s schedule %q: %w", s.pass, s.id, err)
	}
	return endStrandedPasses(ctx, tc, queue, s)
}

// endStrandedPasses terminates the open runs of s that were started on a task queue other than
// queue. No worker of this deployment polls such a queue, so such a run never runs; and while it
// is open the schedule's overlap policy skips every later run until the stranded one reaches its
// run timeout — the pass switched off for a quarter of an hour after a move to a new queue. A run
// on queue itself is left alone: a worker takes it over even if the one that started it died.
func endStrandedPasses(ctx context.Context, tc client.Client, queue string, s passSchedule) error {
	desc, err := tc.ScheduleClient().GetHandle(ctx, s.id).Describe(ctx)
	if err != nil {
		return fmt.Errorf("describing the %s schedule %q: %w", s.pass, s.id, err)
	}
	for _, run := range desc.Info.RunningWorkflows {
		d, err := tc.DescribeWorkflow(ctx, run.WorkflowID, run.FirstExecutionRunID)
		if err != nil {
			return fmt.Errorf("describing the %s pass %s: %w", s.pass, run.WorkflowID, err)
		}
		info := d.RawResponse.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetTaskQueue() == queue {
			continue
		}
		reason := fmt.Sprintf("the %s schedule moved to task queue %q; this pass waits on %q, which no worker polls", s.pass, queue, info.GetTaskQueue())
		if err := tc.TerminateWorkflow(ctx, run.WorkflowID, info.GetExecution().GetRunId(), reason); err != nil {
			var notFound *serviceerror.NotFound
			if !errors.As(err, &notFound) {
				return fmt.Errorf("ending the stranded %s pass %s: %w", s.pass, run.WorkflowID, err)
			}
		}
	}
	return nil
}

func newRunner(c config.Runner, reporter activities.LateResultReporter) activities.Runner {
	if c.Kind == "http" {
		// Late results of a real GPU service come back through its own call to jobbill, and
		// through the reporter when the runner itself saw the success too late.
		return &activities.HTTPRunner{
			BaseURL:      c.HTTP.URL,
			PollInterval: c.HTTP.PollInterval,
			Client:       &http.Client{Timeout: c.HTTP.RequestTimeout},
			Reporter:     reporter,
		}
	}
	return &activities.SimulatedRunner{
		Duration:    c.Simulated.Duration,
		FailureRate: c.Simulated.FailureRate,
		Seed:        c.Simulated.Seed,
		LateBy:      c.Simulated.LateBy,
		Reporter:    reporter,
		ReleaseDir:  c.Simulated.ReleaseDir,
	}
}
