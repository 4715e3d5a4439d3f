package doors_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// Activity names of the ledger steps, as their local-activity markers record them.
const (
	stepCharge = "Charge"
	stepRefund = "Refund"
)

// reset resets the job's workflow with `temporal workflow reset` (the flags given: --type or
// --event-id) and waits until the reset run has run its first workflow task past the reset point,
// then answers that run's history and its reset point. The run that was reset is terminated by
// the reset; the reset run replays the events before the point and runs again every step after it.
func (e *env) reset(t *testing.T, workflowID string, flags ...string) (*historypb.History, int64) {
	t.Helper()
	before, _ := e.Client.DescribeWorkflow(testContext(t), workflowID, "")
	args := append([]string{"workflow", "reset", "--workflow-id", workflowID, "--reason", "door test: an operator resets the job"}, flags...)
	e.cli.must(t, args...)
	var (
		h     *historypb.History
		point int64
	)
	require.Eventually(t, func() bool {
		d, err := e.Client.DescribeWorkflow(testContext(t), workflowID, "")
		if err != nil || d.WorkflowExecution.RunID == before.WorkflowExecution.RunID {
			return false
		}
		h = e.cli.history(t, workflowID)
		point = resetEventID(t, h)
		return lastCompletedTask(h) > point
	}, waitLimit, 200*time.Millisecond, "the reset run of %s never completed a workflow task", workflowID)
	return h, point
}

// lastCompletedTask is the ID of the history's last WorkflowTaskCompleted event; 0 when none.
func lastCompletedTask(h *historypb.History) int64 {
	var id int64
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			id = ev.GetEventId()
		}
	}
	return id
}

// requireOneChargeMarker checks that a history holds exactly one Charge step and answers it.
func requireOneChargeMarker(t *testing.T, h *historypb.History) ledgerMarker {
	t.Helper()
	charges := markersOf(ledgerMarkers(t, h), stepCharge)
	require.Len(t, charges, 1, "charge steps in the history: %+v", charges)
	return charges[0]
}

// awaitOneRefundMarker reads the latest run's history until it records one Refund step, and
// answers the history and that step; it fails with msg when none shows within the wait limit.
func (e *env) awaitOneRefundMarker(t *testing.T, workflowID, msg string) (*historypb.History, ledgerMarker) {
	t.Helper()
	var (
		h       *historypb.History
		refunds []ledgerMarker
	)
	require.Eventually(t, func() bool {
		h = e.cli.history(t, workflowID)
		refunds = markersOf(ledgerMarkers(t, h), stepRefund)
		return len(refunds) == 1
	}, waitLimit, 200*time.Millisecond, msg)
	return h, refunds[0]
}

// TestCLIResetToFirstWorkflowTask checks the reversing-pairs and idempotent-doors rules at
// `temporal workflow reset --type FirstWorkflowTask`, which runs a job's workflow again from its
// very start: the reset run runs its charge step again, and the ledger's guard answers
// already_applied — no second charge. A running job is then delivered by its result (one charge
// row, net −cost); a job whose work had already failed, refunded and waiting for a late result,
// stays refunded (charge and refund, net 0).
func TestCLIResetToFirstWorkflowTask(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)

	t.Run("running", func(t *testing.T) {
		j := e.hanging(t, "running", 40)
		h, point := e.reset(t, j.workflowID, "--type", "FirstWorkflowTask")
		charge := requireOneChargeMarker(t, h)
		require.Greater(t, charge.eventID, point, "the reset run ran its charge step again")
		require.Equal(t, ledgerdb.AlreadyApplied, charge.result.Outcome, "the ledger's guard refused a second charge")
		require.Equal(t, ledgerdb.StateRunning, charge.result.State)
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)

		e.deliverHanging(t, j, 40)
	})

	t.Run("refunded", func(t *testing.T) {
		j := e.failing(t, "refunded", 30)
		h, point := e.reset(t, j.workflowID, "--type", "FirstWorkflowTask")
		charge := requireOneChargeMarker(t, h)
		require.Greater(t, charge.eventID, point)
		require.Equal(t, ledgerdb.AlreadyApplied, charge.result.Outcome)
		require.Equal(t, ledgerdb.StateRefunded, charge.result.State, "the ledger told the reset run the job is refunded")
		status := e.cli.queryStatus(t, j.workflowID)
		require.Equal(t, ledgerdb.StateRefunded, status.State, "%+v", status)
		require.True(t, status.DeadLettered)
		ledgertest.RequireRows(t, e.Store, j.key, 30, ledgerdb.KindCharge, ledgerdb.KindRefund)
	})

	e.requireEnd(t, 200-40)
}

// TestCLIResetAfterTheCharge checks the reversing-pairs and idempotent-doors rules at a reset to a
// point after the charge: the reset run replays the charge from its recorded marker and never runs
// it again. With --type LastWorkflowTask on a running job (a signal made a workflow task after the
// charge), the job is then delivered with one charge; with --event-id — the first
// WorkflowTaskCompleted after the charge's marker, read from `temporal workflow show --output json`
// — on a job whose work failed, the reset run runs its refund step again and the guard answers
// already_applied: one charge, one refund, net 0.
func TestCLIResetAfterTheCharge(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	ctx := testContext(t)

	t.Run("LastWorkflowTask", func(t *testing.T) {
		j := e.hanging(t, "last", 40)
		// An ignored signal is the workflow task after the charge that the reset goes back to.
		require.NoError(t, e.cli.signal(ctx, j.workflowID, `{"Attempt":0,"OutputRef":"s3://not-an-attempt"}`))
		require.Eventually(t, func() bool {
			h := e.cli.history(t, j.workflowID)
			return lastCompletedTask(h) > requireOneChargeMarker(t, h).eventID
		}, waitLimit, 200*time.Millisecond, "the signal's workflow task never completed")

		h, point := e.reset(t, j.workflowID, "--type", "LastWorkflowTask")
		charge := requireOneChargeMarker(t, h)
		require.Less(t, charge.eventID, point, "the charge is replayed from before the reset point, not run again")
		require.Equal(t, ledgerdb.Applied, charge.result.Outcome)
		require.Equal(t, 1, e.cli.queryStatus(t, j.workflowID).IgnoredSignals, "the reset run replayed the ignored signal")
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)

		e.deliverHanging(t, j, 40)
	})

	t.Run("event-id", func(t *testing.T) {
		j := e.failing(t, "event", 30)

		original, refund := e.awaitOneRefundMarker(t, j.workflowID, "the refund's marker never showed in the history")
		charge := requireOneChargeMarker(t, original)
		var target int64
		for _, ev := range original.GetEvents() {
			if ev.GetEventId() > charge.eventID && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				target = ev.GetEventId()
				break
			}
		}
		require.NotZero(t, target, "no workflow task completed after the charge")
		require.Less(t, target, refund.eventID, "the reset point lies between the charge and the refund")

		h, point := e.reset(t, j.workflowID, "--event-id", strconv.FormatInt(target, 10))
		require.Equal(t, target, point, "the reset run starts to differ at the event given")
		charge = requireOneChargeMarker(t, h)
		require.Less(t, charge.eventID, point, "the charge is replayed, not run again")
		_, rerun := e.awaitOneRefundMarker(t, j.workflowID, "the reset run never ran its refund step")
		require.Greater(t, rerun.eventID, point, "the reset run ran its refund step again")
		require.Equal(t, ledgerdb.AlreadyApplied, rerun.result.Outcome, "the ledger's guard refused a second refund")
		require.Equal(t, ledgerdb.StateRefunded, rerun.result.State)
		status := e.cli.queryStatus(t, j.workflowID)
		require.Equal(t, ledgerdb.StateRefunded, status.State, "%+v", status)
		ledgertest.RequireRows(t, e.Store, j.key, 30, ledgerdb.KindCharge, ledgerdb.KindRefund)
		require.Equal(t, ledgerdb.StateRefunded, e.waitLedger(t, j.key, ledgerdb.StateRefunded).State)
	})

	e.requireEnd(t, 200-40)
}
