package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestE2EUnbillableResultThenPythonResult protects the net-effect and price-list rules when another
// program signals a refunded metered job's late result: one it cannot bill (units_used 12.5)
// changes no money and raises an alarm (a ledger_alarms row of the step "result"); the one that
// follows, as Python's json.dumps writes it (units_used 12.0), is reclaimed and settled at 12 units
// — charge −60, refund +60, reclaim −60, release +36, net −24. Its history is the recorded one of
// both paths (versionWholeNumbers).
func TestE2EUnbillableResultThenPythonResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	// One attempt, and a window long enough that the job still listens whatever the load.
	p := e2ePolicy()
	p.MaximumAttempts, p.LateResultWindow = 1, 10*time.Minute
	s := e.submitStoryOf(t, e.JobsWith(p), ledgertest.Metered(t, e.Store, 2, 30), 60, "sim:fail")
	require.NoError(t, s.err)
	acct, key, workflowID := s.acct, s.key(), s.workflowID()
	e.waitState(t, e.Jobs, key, ledgerdb.StateRefunded)

	// The Go client sends a json.RawMessage with its numbers as written: 12.5 and 12.0 reach the job.
	unbillable := json.RawMessage(`{"attempt": 1, "output_ref": "s3://late", "units_used": 12.5}`)
	require.NoError(t, e.Client.SignalWorkflow(ctx, workflowID, "", workflows.SignalResult, unbillable))
	require.Eventually(t, func() bool {
		alarms, err := e.Store.Alarms(context.Background(), 10, acct)
		return err == nil && len(alarms) == 1 && alarms[0].Step == ledgerdb.AlarmUnbillableResult
	}, waitLimit, 100*time.Millisecond, "no alarm was raised")
	ledgertest.RequireRows(t, e.Store, key, 60, ledgerdb.KindCharge, ledgerdb.KindRefund)

	python := json.RawMessage(`{"attempt": 1, "output_ref": "s3://late", "units_used": 12.0}`)
	require.NoError(t, e.Client.SignalWorkflow(ctx, workflowID, "", workflows.SignalResult, python))
	final := e.awaitClosed(t, workflowID)
	require.Equal(t, ledgerdb.StateRecovered, final.State, "%+v", final)
	require.Equal(t, 1, final.IgnoredSignals)
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -60}, {Kind: ledgerdb.KindRefund, Amount: 60},
		{Kind: ledgerdb.KindReclaim, Amount: -60}, {Kind: ledgerdb.KindRelease, Amount: 36}}, ledgertest.Rows(t, e.Store, key))
	ledgertest.RequireBalance(t, e.Store, acct, 200-24)
	e.recordHistory(t, "unbillable-result", workflowID)
}
