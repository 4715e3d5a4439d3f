package ledgerdb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestFixedPriceIgnoresReportedUsage protects the net-effect and price-list rules for a kind sold
// by the job: its price is the whole price whatever usage a result reports. A runner (or a
// reporter) that says the job used 0 units must not turn the price into a release: the job settles
// at its one unit, with no release row, and nets −price — before and after a refund.
func TestFixedPriceIgnoresReportedUsage(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Fixed(t, s, 40)
	acct := ledgertest.Account(t, s, 100)
	for _, refundFirst := range []bool{false, true} {
		id := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "fixed")}
		_, err := s.Submit(ctx, ledgerdb.Submission{JobID: id.JobID, AccountID: acct, Kind: kind, Request: []byte("x")})
		require.NoError(t, err)
		_, err = s.Charge(ctx, id)
		require.NoError(t, err)
		want := []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -40}}
		if refundFirst {
			_, err = s.Refund(ctx, id, ledgerdb.ReasonTimedOut, "timed out", 1)
			require.NoError(t, err)
			want = append(want, ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: 40}, ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -40})
		}
		tr, err := s.Settle(ctx, id, 1, ledgerdb.Units(0), "")
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
		require.Equal(t, int64(40), tr.Job.Charged(), "refund first: %v", refundFirst)
		require.Equal(t, int64(1), *tr.Job.UnitsUsed)
		require.Equal(t, want, ledgertest.Rows(t, s, id))
	}
	ledgertest.RequireBalance(t, s, acct, 100-80)
}

// TestFixedPriceReleasesNothing checks the net-effect rule for a kind sold by the job (unit "job"):
// it is sold whole at a fixed price, so its result nets −price whatever usage the runner reports —
// "its charge holds one unit and nothing is released" (ledgerdb.UnitJob): it is settled at its one
// unit, and a report of zero units does not make the job free.
func TestFixedPriceReleasesNothing(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 100)
	for _, usage := range []*int64{nil, ledgerdb.Units(1), ledgerdb.Units(5), ledgerdb.Units(0)} {
		for _, late := range []bool{false, true} {
			job := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "fixed"), 10, "x").Job.Key()
			kinds := []ledgerdb.EntryKind{ledgerdb.KindCharge}
			if late {
				_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 3)
				require.NoError(t, err)
				kinds = append(kinds, ledgerdb.KindRefund, ledgerdb.KindReclaim)
			}
			tr, err := s.Settle(ctx, job, 1, usage, "")
			require.NoError(t, err)
			require.Equal(t, ledgerdb.Applied, tr.Outcome)
			what := "no usage"
			if usage != nil {
				what = fmt.Sprintf("usage %d", *usage)
			}
			require.Equal(t, int64(-10), tr.Job.Net(), "a job sold whole, settled with %s (late: %v), nets its price", what, late)
			requireSettled(t, tr.Job, 1)
			ledgertest.RequireRows(t, s, job, 10, kinds...)
		}
	}
	ledgertest.RequireBalance(t, s, acct, 100-8*10)
}
