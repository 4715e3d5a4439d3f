package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// ptr answers a pointer to v.
func ptr[T any](v T) *T { return &v }

// TestRowTextTellsEachRow checks what a customer reads of each of a job's ledger rows: every row
// in the API's fixed words — the amount it moved and the reason code's text, never the operator's
// detail, which may name internal hosts — for a job sold by the job and for a metered one whose
// late result reclaimed its refund and settled at its usage (the price-list rule: a reclaim moves
// exactly the hold, and the release returns the unused part); and a block's expiry, by its block.
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
			"Charged the 300-credit hold (300 GPU-seconds at 1 credit each); the seconds not used are returned."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindRefund, Amount: 300}, "Refunded 300 credits: the work did not finish in time."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindReclaim, Amount: -300}, "The result arrived late: the refund was taken back (300 credits)."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindRelease, Amount: 163}, "137 of 300 GPU-seconds used: 163 credits returned."},
		{metered, ledgerdb.Entry{Kind: ledgerdb.KindExpire, Amount: -12, Block: &ledgerdb.EntryBlock{ID: 7, Category: ledgerdb.CategoryPromotional,
			GrantedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), ExpiresAt: ptr(time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC))}},
			"12 credits expired: block 7 (promotional, granted 1 Dec 2026) ended on 31 Dec 2026."},
	} {
		got := jobs.RowText(tc.job, tc.row)
		require.Equal(t, tc.want, got)
		require.NotContains(t, got, "gpu-7.internal", "a customer never reads the operator's detail")
	}
}

// TestWordsTellCreditsThatExpiredOnReturn checks what a customer reads when a job's refund
// returned credits to a block that had expired, read from real ledger rows: the job's sentence
// says how many of the refunded credits had expired, on which day, and were removed; the job's
// rows say it of the expiry row, naming the block; a metered job whose release returned its unused
// credits to an expired block says so after its settlement; and a job whose returned credits all
// stayed the customer's reads as before.
func TestWordsTellCreditsThatExpiredOnReturn(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	x := ledgertest.RefundIntoExpiredBlock(t, s) // 15 of the 40 refunded expire
	acct, key, kept, promo := x.Account, x.Job, x.Kept, x.Block

	block := ledgertest.Block(t, s, acct, promo)
	ended, granted := block.ExpiresAt.UTC().Format("2 Jan 2006"), block.CreatedAt.UTC().Format("2 Jan 2006")

	job, err := s.Job(ctx, key)
	require.NoError(t, err)
	expired, err := s.ExpiredReturns(ctx, []ledgerdb.JobKey{key, kept})
	require.NoError(t, err)
	require.Equal(t, "Not delivered: the work did not finish in time. Your 40 credits were refunded; 15 of them had expired on "+
		ended+" and were removed.", jobs.Message(job, expired[key]))

	rows, err := s.JobEntries(ctx, key)
	require.NoError(t, err)
	var texts []string
	for _, e := range rows {
		texts = append(texts, jobs.RowText(job, e))
	}
	require.Equal(t, []string{
		"Charged 40 credits for the job.",
		"Refunded 40 credits: the work did not finish in time.",
		fmt.Sprintf("15 of the credits returned had expired on %s and were removed (block %d, promotional, granted %s).", ended, promo, granted),
	}, texts)

	keptJob, err := s.Job(ctx, kept)
	require.NoError(t, err)
	require.Empty(t, expired[kept])
	require.Equal(t, "Not delivered: the work failed on the GPU side. Your 10 credits were refunded.", jobs.Message(keptJob, expired[kept]))

	// A metered job's release: the unused seconds' credits go back to the block they came from,
	// which has expired meanwhile.
	promo = ledgertest.Promotional(t, s, acct, "promo-2", 30)
	sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "metered"), AccountID: acct, Kind: ledgertest.Metered(t, s, 1, 30), Request: []byte(`{}`)}
	_, err = s.Submit(ctx, sub)
	require.NoError(t, err)
	_, err = s.Charge(ctx, sub.Key()) // the 30-credit hold, from the new promotional block
	require.NoError(t, err)
	ledgertest.ExpireBlock(t, s, promo)
	_, err = s.Settle(ctx, sub.Key(), 1, ledgerdb.Units(10), "s3://out/1")
	require.NoError(t, err)
	metered, err := s.Job(ctx, sub.Key())
	require.NoError(t, err)
	expired, err = s.ExpiredReturns(ctx, []ledgerdb.JobKey{sub.Key()})
	require.NoError(t, err)
	require.Equal(t, "Done. 10 of 30 held credits charged; 20 returned. (10 GPU-seconds used at 1 credit each) "+
		"20 of the credits returned had expired on "+ledgertest.Block(t, s, acct, promo).ExpiresAt.UTC().Format("2 Jan 2006")+" and were removed.",
		jobs.Message(metered, expired[sub.Key()]))
	ledgertest.RequireSound(t, s, acct)
}
