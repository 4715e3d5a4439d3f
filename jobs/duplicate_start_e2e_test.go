package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// TestE2EDuplicateStartLeavesTheUIWithTheLedger protects the UI's truth at the door of a direct
// start: another program (or the temporal CLI) starts a MeteredJob with another input under the
// workflow ID of a job the ledger has settled. The run charges nothing (the remembered-IDs rule)
// and must not make the job's latest run in the Temporal UI contradict the ledger: it shows the job
// as the ledger has it — delivered, then deleted once the job is — and a start whose input the
// ledger was never asked about (it carries an amount) shows no billing state at all. Before, each
// such run upserted BillingState rejected over the job's, and the UI said rejected, not charged, of
// a job the ledger had delivered.
func TestE2EDuplicateStartLeavesTheUIWithTheLedger(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s := e.submitted(t, 40, "sim:ok")
	workflowID := s.workflowID()
	require.Equal(t, ledgerdb.StateDelivered, e.awaitClosed(t, workflowID).State)

	// startDirectly starts a run under the job's workflow ID as another Temporal client would,
	// waits for it, and answers what the run said and what the UI shows of it.
	startDirectly := func(in workflows.JobInput) (workflows.JobStatus, string, bool) {
		t.Helper()
		run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: e.Config.Temporal.TaskQueue},
			workflows.MeteredJob, in)
		require.NoError(t, err)
		var status workflows.JobStatus
		require.NoError(t, run.Get(ctx, &status))
		d, err := e.Client.DescribeWorkflow(ctx, workflowID, run.GetRunID())
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.Status)
		shown, set := d.TypedSearchAttributes.GetKeyword(workflows.BillingStateKey)
		return status, shown, set
	}
	other := workflows.JobInput{JobID: s.id, AccountID: s.acct, Kind: s.kind, Work: activities.WorkRequest{InputRef: "sim:fail"}}

	status, shown, _ := startDirectly(other)
	require.Equal(t, string(ledgerdb.StateDelivered), shown, "the UI shows the job as the ledger has it")
	require.Equal(t, ledgerdb.StateDelivered, status.State)
	require.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
	require.Contains(t, status.Reason, "this start was refused")
	e.recordHistory(t, "duplicate-start", workflowID)

	withAmount := other
	withAmount.Cost = 1
	_, shown, set := startDirectly(withAmount)
	require.False(t, set, "a run that never asked the ledger shows no billing state, not %q", shown)

	_, err := e.Jobs.Delete(ctx, s.key())
	require.NoError(t, err)
	status, shown, _ = startDirectly(other)
	require.Equal(t, string(ledgerdb.StateDeleted), shown)
	require.Equal(t, ledgerdb.MoneyCharged, status.MoneyState, "a tombstone keeps its money state")

	e.requireMoney(t, s, 160, ledgerdb.KindCharge)
}
