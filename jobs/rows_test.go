package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestRowTextTellsEachRow checks what a customer reads of each of a job's ledger rows: every row
// in the API's fixed words — the amount it moved and the reason code's text, never the operator's
// detail, which may name internal hosts — for a job sold by the job and for a metered one whose
// late result reclaimed its refund and settled at its usage (the price-list rule: a reclaim moves
// exactly the hold, and the release returns the unused part).
func TestRowTextTellsEachRow(t *testing.T) {
	fixed := ledgerdb.Job{Unit: ledgerdb.UnitJob, UnitPrice: 40, HeldUnits: 1, Cost: 40,
		RefundReason: ledgerdb.ReasonGPUFailed, RefundDetail: "failed on gpu-7.internal: CUDA error"}
	used := int64(137)
	metered := ledgerdb.Job{Unit: ledgerdb.UnitGPUSecond, UnitPrice: 1, HeldUnits: 300, Cost: 300, UnitsUsed: &used,
		IsSettled: true, RefundReason: ledgerdb.ReasonTimedOut}
	for _, tc := range []struct {
		job  ledgerdb.Job
		row  ledgerdb.Entry
		want string
	}{
		{fixed, ledgerdb.Entry{Kind: ledgerdb.KindCharge, Amount: -40}, "Charged 40 credits for the job."},
		{fixed, ledgerdb.Entry{Kind: ledgerdb.KindRefund, Amount: 40}, "Refunded 40 credits: the work failed on the GPU side."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindCharge, Amount: -300},
			"Charged the 300-credit hold (300 GPU-seconds at 1 credits each); the seconds not used are returned."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindRefund, Amount: 300}, "Refunded 300 credits: the work did not finish in time."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindReclaim, Amount: -300}, "The result arrived late: the refund was taken back (300 credits)."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindRelease, Amount: 163}, "137 of 300 GPU-seconds used: 163 credits returned."},
	} {
		got := jobs.RowText(tc.job, tc.row)
		require.Equal(t, tc.want, got)
		require.NotContains(t, got, "gpu-7.internal", "a customer never reads the operator's detail")
	}
}
