package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestPassSchedulesFollowTheConfiguration protects the healing door itself: the reconcile
// pass is what refunds jobs an operator terminated and applies results recorded while Temporal
// was down, so its schedule must start passes where a worker polls. A worker started with a new
// task queue, interval or grace repoints the existing schedule (before, it was created once and
// never updated, and a schedule left on a dead queue silently switched healing off), and the
// audit reports a schedule whose queue nobody polls; a pass the schedule started on the old queue,
// which no worker will ever run, is ended, or the schedule would skip every later pass until it
// timed out. The expiry pass's schedule, ensured by the same code, follows the configuration and is
// audited the same way: an expired credit block must lose what remains of it with nobody looking,
// which a schedule on a dead queue would never do. It runs in the tests' namespace, never the one a
// deployment uses, and not in parallel: the namespace has one schedule of each pass.
func TestPassSchedulesFollowTheConfiguration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The worker registers the pass over its ledger: the package's test deployment, whose pass
	// must not heal the jobs of tests on the shared database.
	store := ledgertest.DeploymentOf(t, ledgertest.DeploymentWorker).Store
	cfg := workertest.Config("schedule")
	tc, err := connect.Dial(ctx, cfg, zap.NewNop(), nil)
	require.NoError(t, err, "the tests' Temporal at %s", cfg.Temporal.Address)
	defer tc.Close()
	handle := tc.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID)
	expiry := tc.ScheduleClient().GetHandle(ctx, workflows.ExpiryScheduleID)
	describeOf := func(handle client.ScheduleHandle) (*client.ScheduleWorkflowAction, time.Duration) {
		t.Helper()
		desc, err := handle.Describe(ctx)
		require.NoError(t, err)
		action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
		require.True(t, ok, "the schedule starts a workflow")
		require.Len(t, action.Args, 1)
		require.Len(t, desc.Schedule.Spec.Intervals, 1)
		return action, desc.Schedule.Spec.Intervals[0].Every
	}
	describe := func() (*client.ScheduleWorkflowAction, activities.ReconcileInput, time.Duration) {
		t.Helper()
		action, every := describeOf(handle)
		var in activities.ReconcileInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(action.Args[0].(*commonpb.Payload), &in))
		return action, in, every
	}

	stale := cfg
	stale.Temporal.TaskQueue = cfg.Temporal.TaskQueue + "-nobody-polls"
	require.NoError(t, worker.EnsureSchedules(ctx, tc, stale))
	action, _, _ := describe()
	require.Equal(t, stale.Temporal.TaskQueue, action.TaskQueue)
	action, _ = describeOf(expiry)
	require.Equal(t, stale.Temporal.TaskQueue, action.TaskQueue)
	report, err := invariants.Check(ctx, invariants.Options{Ledger: store, Temporal: tc, Namespace: cfg.Temporal.Namespace,
		AccountID: ledgertest.Account(t, store, 0), Schedule: true})
	require.NoError(t, err)
	require.Len(t, report.Of(invariants.KindReconcileSchedule), 1, "a schedule on a queue nobody polls is reported")
	require.Len(t, report.Of(invariants.KindExpirySchedule), 1, "an expiry schedule on a queue nobody polls is reported")

	// A pass started on that queue never runs, and while it is open the schedule skips every
	// later pass (overlap policy skip) until its run timeout: healing off for a quarter of an hour.
	strand := func(handle client.ScheduleHandle) client.ScheduleWorkflowExecution {
		t.Helper()
		require.NoError(t, handle.Trigger(ctx, client.ScheduleTriggerOptions{}))
		var stranded client.ScheduleWorkflowExecution
		require.Eventually(t, func() bool {
			desc, err := handle.Describe(ctx)
			require.NoError(t, err)
			for _, run := range desc.Info.RunningWorkflows {
				stranded = run
				return true
			}
			return false
		}, 20*time.Second, 100*time.Millisecond, "the triggered pass starts")
		return stranded
	}
	stranded, strandedExpiry := strand(handle), strand(expiry)

	// A worker with this test's queue, intervals and grace starts: it takes the schedules over.
	cfg.Reconcile.Interval, cfg.Reconcile.Grace = 3*time.Minute, 45*time.Second
	cfg.Expiry.Interval = 4 * time.Minute
	w := worker.New(cfg, tc, store, connect.NewJobs(cfg, tc, store, nil), nil)
	require.NoError(t, w.Start())
	defer w.Stop()
	require.NoError(t, worker.EnsureSchedules(ctx, tc, cfg))
	action, every := describeOf(expiry)
	require.Equal(t, cfg.Temporal.TaskQueue, action.TaskQueue, "the expiry schedule moved with the worker")
	require.Equal(t, 4*time.Minute, every)
	run, err := tc.DescribeWorkflow(ctx, strandedExpiry.WorkflowID, strandedExpiry.FirstExecutionRunID)
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, run.RawResponse.GetWorkflowExecutionInfo().GetStatus(),
		"the expiry pass stranded on the old queue is ended, so the schedule's next pass is not skipped")
	action, in, every := describe()
	require.Equal(t, cfg.Temporal.TaskQueue, action.TaskQueue)
	run, err = tc.DescribeWorkflow(ctx, stranded.WorkflowID, stranded.FirstExecutionRunID)
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, run.RawResponse.GetWorkflowExecutionInfo().GetStatus(),
		"the pass stranded on the old queue is ended, so the schedule's next pass is not skipped")
	require.Equal(t, 3*time.Minute, every)
	require.Equal(t, 45*time.Second, in.Grace)
	require.Eventually(t, func() bool {
		report, err := invariants.Check(ctx, invariants.Options{Ledger: store, Temporal: tc, Namespace: cfg.Temporal.Namespace,
			AccountID: ledgertest.Account(t, store, 0), Schedule: true})
		return err == nil && report.OK()
	}, 20*time.Second, 250*time.Millisecond, "the audit still reports the schedule once a worker polls its queue")
}
