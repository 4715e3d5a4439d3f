package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// TestRunsOfLedgerTruthBillAsTheyDid protects every money rule of the runs in flight across the
// deployment that stopped writing a Version marker: a run started on the code before it recorded
// versionLedgerTruth with GetVersion, and a worker of this code that takes it over (the test
// environment's OnGetVersion answers what such a history holds) bills it as it did — story (b):
// every attempt times out, the charge is refunded (net 0), the late result recovers it (net
// −cost), one row each, and the UI's states in order. The replay test holds the same runs to their
// recorded commands (testdata/histories/v5-*).
func TestRunsOfLedgerTruthBillAsTheyDid(t *testing.T) {
	h := newHarness(t, "v5-in-flight", 100, timeOut)
	h.env.OnGetVersion(workflows.MeteredJobVersionID, workflow.DefaultVersion, workflows.LatestMeteredJobVersion).
		Return(workflows.VersionLedgerTruth)
	h.signalAt(10*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late"})
	status := h.run()

	assert.Equal(t, recovered, status.State)
	assert.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	h.assertStates([]ledgerdb.State{submitting, running, refunded, recovered}, []bool{false, false, true, false})
}
