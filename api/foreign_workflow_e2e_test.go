package api_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestRedriveRefusedUnderForeignWorkflow protects the net-effect and idempotent-doors rules at the
// redrive door: a dead letter whose workflow ID another program's open workflow holds cannot run
// its work again (no run of its own workflow can start under the ID), so the redrive answers 409
// workflow_id_taken and changes nothing — never 202 for a redrive signalled into the foreign run
// and lost.
func TestRedriveRefusedUnderForeignWorkflow(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	ctx := context.Background()
	admin := e.key(t, apikeys.ScopeAdmin, "")
	id := ledgertest.ID(t, "held")
	key := ledgertest.Charged(t, e.Store, e.acct, id, 40, "sim:ok").Job.Key()
	_, err := e.Store.Refund(ctx, key, ledgerdb.ReasonStoppedByOperator, "stopped by an operator: terminated", 1)
	require.NoError(t, err)
	workflowID := workflows.JobWorkflowID(e.acct, id)
	foreign, err := e.Client.ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"}, "SomeoneElsesWorkflow")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.Client.TerminateWorkflow(context.Background(), workflowID, foreign.GetRunID(), "test done")
	})

	a := call(t, e.base, "POST", "/v1/jobs/"+id+"/redrive?account_id="+e.acct, admin, map[string]any{"by": "ops"})
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "workflow_id_taken", a.str("code"))
	require.Equal(t, "refunded", a.str("state"))
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund}, e.kinds(t, e.acct, id))
	ledgertest.RequireBalance(t, e.Store, e.acct, 100)
}
