package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestWordsAgreeWithTheirNumbers checks what a customer reads of a job (jobs.Message) and of its
// rows (jobs.RowText) where a number is one: "1 credit", "1 GPU-second", "at 1 credit each", "was
// refunded" — never "1 credits" — and that other numbers keep their plural; and that a recovered
// job says what its money did: the refund was taken back (a reclaim), not a second charge.
func TestWordsAgreeWithTheirNumbers(t *testing.T) {
	one, all := int64(1), int64(300)
	fixed := func(state ledgerdb.State, cost int64) ledgerdb.Job {
		return ledgerdb.Job{State: state, Unit: ledgerdb.UnitJob, UnitPrice: cost, HeldUnits: 1, Cost: cost, RefundReason: ledgerdb.ReasonTimedOut}
	}
	metered := func(state ledgerdb.State, held int64, used *int64) ledgerdb.Job {
		return ledgerdb.Job{State: state, Unit: ledgerdb.UnitGPUSecond, UnitPrice: 1, HeldUnits: held, Cost: held,
			UnitsUsed: used, IsSettled: used != nil, RefundReason: ledgerdb.ReasonTimedOut}
	}
	deleted := func(j ledgerdb.Job) ledgerdb.Job {
		j.StateBeforeDelete, j.State = j.State, ledgerdb.StateDeleted
		return j
	}
	const gone = "Deleted; its ID can never be used again. "
	for _, tc := range []struct {
		job  ledgerdb.Job
		want string
	}{
		{fixed(ledgerdb.StateRunning, 1), "Running. 1 credit was charged; it is refunded if the job fails for good."},
		{fixed(ledgerdb.StateRunning, 40), "Running. 40 credits were charged; they are refunded if the job fails for good."},
		{metered(ledgerdb.StateRunning, 1, nil), "Running. 1 credit is held (1 GPU-second at 1 credit each); you are charged only " +
			"for the seconds used, and everything is refunded if the job fails for good."},
		{metered(ledgerdb.StateRunning, 300, nil), "Running. 300 credits are held (300 GPU-seconds at 1 credit each); you are charged " +
			"only for the seconds used, and everything is refunded if the job fails for good."},
		{fixed(ledgerdb.StateDelivered, 1), "Done. 1 credit was charged."},
		{metered(ledgerdb.StateDelivered, 1, &one), "Done. 1 credit charged. (1 GPU-second used at 1 credit each)"},
		{metered(ledgerdb.StateDelivered, 300, &one), "Done. 1 of 300 held credits charged; 299 returned. (1 GPU-second used at 1 credit each)"},
		{metered(ledgerdb.StateDelivered, 300, &all), "Done. 300 credits charged. (300 GPU-seconds used at 1 credit each)"},
		{fixed(ledgerdb.StateRefunded, 1), "Not delivered: the work did not finish in time. Your 1 credit was refunded."},
		{fixed(ledgerdb.StateRecovered, 40), "Done: the result arrived after the job had been refunded, so the refund of 40 credits was taken back."},
		{fixed(ledgerdb.StateRecovered, 1), "Done: the result arrived after the job had been refunded, so the refund of 1 credit was taken back."},
		{deleted(fixed(ledgerdb.StateDelivered, 1)), gone + "Your money stays as it was: 1 credit charged."},
		{deleted(fixed(ledgerdb.StateRefunded, 1)), gone + "Your 1 credit was refunded; if the job's result still arrives, the refund is " +
			"taken back and the job settled at its usage."},
		{deleted(fixed(ledgerdb.StateRecovered, 40)), gone + "Its result arrived after it had been refunded, so the refund of 40 credits was taken back."},
		{deleted(metered(ledgerdb.StateRecovered, 300, &one)), gone + "Its result arrived after it had been refunded, so the refund was " +
			"taken back: 1 of 300 held credits charged; 299 returned. (1 GPU-second used at 1 credit each)"},
	} {
		require.Equal(t, tc.want, jobs.Message(tc.job, nil))
	}

	ended := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	block := &ledgerdb.EntryBlock{ID: 7, Category: ledgerdb.CategoryPromotional, GrantedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), ExpiresAt: &ended}
	expiredOne := []ledgerdb.Entry{{Kind: ledgerdb.KindExpire, Amount: -1, Block: block, CausedBy: 5}}
	require.Equal(t, "Not delivered: the work did not finish in time. Your 40 credits were refunded; 1 of them had expired on 31 Dec 2026 "+
		"and was removed.", jobs.Message(fixed(ledgerdb.StateRefunded, 40), expiredOne))
	require.Equal(t, "Done. 1 of 300 held credits charged; 299 returned. (1 GPU-second used at 1 credit each) 1 of the credits returned "+
		"had expired on 31 Dec 2026 and was removed.", jobs.Message(metered(ledgerdb.StateDelivered, 300, &one), expiredOne))

	for _, tc := range []struct {
		job  ledgerdb.Job
		row  ledgerdb.Entry
		want string
	}{
		{fixed(ledgerdb.StateDelivered, 1), ledgerdb.Entry{Kind: ledgerdb.KindCharge, Amount: -1}, "Charged 1 credit for the job."},
		{metered(ledgerdb.StateDelivered, 1, &one), ledgerdb.Entry{Kind: ledgerdb.KindCharge, Amount: -1},
			"Charged the 1-credit hold (1 GPU-second at 1 credit each); the seconds not used are returned."},
		{fixed(ledgerdb.StateRefunded, 1), ledgerdb.Entry{Kind: ledgerdb.KindRefund, Amount: 1}, "Refunded 1 credit: the work did not finish in time."},
		{fixed(ledgerdb.StateRecovered, 1), ledgerdb.Entry{Kind: ledgerdb.KindReclaim, Amount: -1}, "The result arrived late: the refund was taken back (1 credit)."},
		{metered(ledgerdb.StateDelivered, 300, func() *int64 { n := int64(299); return &n }()), ledgerdb.Entry{Kind: ledgerdb.KindRelease, Amount: 1},
			"299 of 300 GPU-seconds used: 1 credit returned."},
		{metered(ledgerdb.StateDelivered, 1, func() *int64 { n := int64(0); return &n }()), ledgerdb.Entry{Kind: ledgerdb.KindRelease, Amount: 1},
			"0 of 1 GPU-second used: 1 credit returned."},
		{metered(ledgerdb.StateDelivered, 1, nil), ledgerdb.Entry{Kind: ledgerdb.KindRelease, Amount: 1}, "The unused part of the hold was returned: 1 credit."},
		{ledgerdb.Job{}, ledgerdb.Entry{Kind: ledgerdb.KindAdjustment, Amount: 1}, "Adjusted by an operator: +1 credit."},
		{ledgerdb.Job{}, ledgerdb.Entry{Kind: ledgerdb.KindAdjustment, Amount: -2}, "Adjusted by an operator: -2 credits."},
		{ledgerdb.Job{}, ledgerdb.Entry{Kind: ledgerdb.KindExpire, Amount: -1}, "1 credit expired."},
		{ledgerdb.Job{}, ledgerdb.Entry{Kind: ledgerdb.KindExpire, Amount: -1, Block: block},
			"1 credit expired: block 7 (promotional, granted 1 Dec 2026) ended on 31 Dec 2026."},
		{ledgerdb.Job{}, expiredOne[0], "1 of the credits returned had expired on 31 Dec 2026 and was removed (block 7, promotional, granted 1 Dec 2026)."},
	} {
		require.Equal(t, tc.want, jobs.RowText(tc.job, tc.row))
	}
}
