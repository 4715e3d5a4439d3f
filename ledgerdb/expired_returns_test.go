package ledgerdb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestExpiredReturnsAreAmongTheJobsRows checks what a job's rows say when its refund returned
// credits to a block that had expired (they expire at once, in an expire row of the account that
// names the refund): the job's rows include that expiry, with the block it removed the credits
// from; the read of a page of jobs' expiries answers it for that job alone; and the account's
// ledger tells every expiry in words — the block, its category, when it was granted and when it
// ended. A read of too many jobs at once is refused.
func TestExpiredReturnsAreAmongTheJobsRows(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	x := ledgertest.RefundIntoExpiredBlock(t, s) // 15 of the 40 refunded expire
	acct, job, kept, promo, refund := x.Account, x.Job, x.Kept, x.Block, x.Refund
	later := ledgertest.Promotional(t, s, acct, "later", 12)
	ledgertest.ExpireBlock(t, s, later) // 12 expire

	blocks, err := s.Blocks(ctx, acct)
	require.NoError(t, err)
	byID := map[int64]ledgerdb.Block{}
	for _, b := range blocks {
		byID[b.ID] = b
	}
	day := func(t time.Time) string { return t.UTC().Format("2 Jan 2006") }

	rows, err := s.JobEntries(ctx, job)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindExpire},
		[]ledgerdb.EntryKind{rows[0].Kind, rows[1].Kind, rows[2].Kind})
	expiry := rows[2]
	require.Equal(t, int64(-15), expiry.Amount)
	require.Equal(t, refund.EntryID, expiry.CausedBy)
	require.Empty(t, expiry.JobID, "the expiry is the account's row")
	require.Equal(t, &ledgerdb.EntryBlock{ID: promo, Category: ledgerdb.CategoryPromotional, GrantedAt: byID[promo].CreatedAt,
		ExpiresAt: byID[promo].ExpiresAt}, expiry.Block)
	require.Equal(t, fmt.Sprintf("15 credits expired: a refund returned them to block %d (promotional, granted %s), which had ended on %s",
		promo, day(byID[promo].CreatedAt), day(*byID[promo].ExpiresAt)), expiry.Memo)

	expired, err := s.ExpiredReturns(ctx, []ledgerdb.JobKey{job, kept})
	require.NoError(t, err)
	require.Equal(t, map[ledgerdb.JobKey][]ledgerdb.Entry{job: {expiry}}, expired)

	h, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
	require.NoError(t, err)
	last := h.Entries[len(h.Entries)-1]
	require.Equal(t, ledgerdb.KindExpire, last.Kind)
	require.Zero(t, last.CausedBy)
	require.Equal(t, fmt.Sprintf("12 credits expired: block %d (promotional, granted %s) ended on %s",
		later, day(byID[later].CreatedAt), day(*byID[later].ExpiresAt)), last.Memo)

	_, err = s.ExpiredReturns(ctx, make([]ledgerdb.JobKey, ledgerdb.MaxExpiredReturnsJobs+1))
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	ledgertest.RequireSound(t, s, acct)
}
