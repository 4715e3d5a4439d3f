package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// TestMeteredJobIsSettledAtItsUsage protects the net-effect and price-list rules for a kind metered
// by the GPU-second: the charge holds the unit price × the kind's maximum (2 × 30 = 60 credits),
// the result's usage settles the job in the same ledger step that delivers it (two ledger steps on
// the success path: charge and settle), and one release row returns the unused hold — the job
// nets −(units used × unit price), whatever the runner reported beyond the hold.
func TestMeteredJobIsSettledAtItsUsage(t *testing.T) {
	for _, tc := range []struct {
		name             string
		reported         *int64
		charged, release int64
	}{
		{"within the hold", ledgerdb.Units(12), 24, 36},
		{"nothing used", ledgerdb.Units(0), 0, 60},
		{"above the hold: capped", ledgerdb.Units(1000), 60, 0},
		{"not reported: the whole hold", nil, 60, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var told int64
			h := newHarnessOf(t, metered, "metered", 100, func(_ context.Context, req activities.WorkRequest, _ int) (activities.WorkResult, error) {
				told = req.MaxUnits
				res := result(req.Attempt)
				res.UnitsUsed = tc.reported
				return res, nil
			})
			status := h.run()
			assert.Equal(t, int64(gpuMax), told, "the work is told its hold: the most it may use and be billed")
			assert.Equal(t, delivered, status.State)
			assert.Equal(t, int64(gpuPrice*gpuMax), status.Cost, "the hold, as the ledger answered the charge")
			assert.Equal(t, tc.charged, status.Charged)
			assert.Equal(t, tc.release, status.Released)
			h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpSettle: 1})
			kinds := []ledgerdb.EntryKind{ledgerdb.KindCharge}
			if tc.release > 0 {
				kinds = append(kinds, ledgerdb.KindRelease)
			}
			assert.Equal(t, kinds, h.ledger.Kinds(h.key()))
			assert.Equal(t, -tc.charged, h.ledger.Net(h.key()))
			assert.Equal(t, 100-tc.charged, h.ledger.Balance(account))
		})
	}
}

// TestMeteredLateResultReclaimsThenSettles protects the reversing-pairs, net-effect and price-list
// rules when a metered job's result lands after its refund: the reclaim takes back exactly the
// refund (the hold), and the settlement then returns the unused hold at the reported usage —
// charge, refund, reclaim, release, netting −(used × price). A negative usage in a signal is
// ignored, never billed.
func TestMeteredLateResultReclaimsThenSettles(t *testing.T) {
	h := newHarnessOf(t, metered, "metered-late", 100, timeOut)
	bad := workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late", UnitsUsed: ledgerdb.Units(-5)}
	late := workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late", UnitsUsed: ledgerdb.Units(9)}
	h.signalAt(10*time.Minute, workflows.SignalResult, bad)
	h.signalAt(11*time.Minute, workflows.SignalResult, late)
	status := h.run()

	require.Equal(t, recovered, status.State)
	assert.Equal(t, 1, status.IgnoredSignals, "the negative usage was refused")
	assert.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim, ledgerdb.KindRelease},
		h.ledger.Kinds(h.key()))
	entries := h.ledger.Entries(h.key())
	assert.Equal(t, []int64{-60, 60, -60, 42}, []int64{entries[0].Amount, entries[1].Amount, entries[2].Amount, entries[3].Amount},
		"charge, refund and reclaim move the hold; the release returns (30 − 9) × 2")
	assert.Equal(t, int64(-18), h.ledger.Net(h.key()))
	assert.Equal(t, int64(18), status.Charged)
	job, _ := h.ledger.Job(h.key())
	require.NotNil(t, job.UnitsUsed)
	assert.Equal(t, int64(9), *job.UnitsUsed)
}

// TestInputWithAnAmountIsRefused protects the price-list rule at the start door: an input that
// names a cost — another program setting its own price — ends rejected with nothing written, and
// says that prices are set by the server.
func TestInputWithAnAmountIsRefused(t *testing.T) {
	h := newHarness(t, "priced-by-caller", 100, succeed)
	h.env.ExecuteWorkflow(workflows.MeteredJob, workflows.JobInput{
		JobID: "priced-by-caller", AccountID: account, Kind: kind, Cost: 1, Policy: testPolicy,
	})
	require.True(t, h.env.IsWorkflowCompleted())
	var status workflows.JobStatus
	require.NoError(t, h.env.GetWorkflowResult(&status))
	assert.Equal(t, rejected, status.State)
	assert.Contains(t, status.Reason, "prices are set by the server")
	assert.Empty(t, h.ledger.Calls(), "nothing written")
}
