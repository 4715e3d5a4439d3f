package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// expiryInterval is the expiry pass's interval in the deployed-pass test: a pass every second,
// the shortest the configuration allows.
const expiryInterval = time.Second

// TestScheduledExpiryWithNobodyLooking runs the expiry pass exactly as production starts it: a
// `jobbill worker` process creates its own expiry schedule, whose pass reads every account's
// blocks. The money rule: what remains of an expired credit block is removed exactly once, by the
// scheduled pass, with nobody looking — not before the block's expiry, not twice, and without
// anyone reading the account through jobbill (the ledger is read directly). A promotional block of
// 300 credits pays a 40-credit job, so 260 remain; it is set to expire two seconds ahead, and the
// ledger must come to show one expire row of −260 for it, written after its expiry, the balance
// lowered by those 260 and the audit clean. A further pass that completes after that writes no
// second row.
func TestScheduledExpiryWithNobodyLooking(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a backstop: the test waits on passes, not on the clock
	defer cancel()
	d := ledgertest.DeploymentOf(t, ledgertest.DeploymentWorker)
	store := d.Store
	cfg := workertest.Config("expiry")
	tc := startDeployedWorker(ctx, t, buildJobbill(t), d, cfg, map[string]string{"expiry.interval": expiryInterval.String()})

	// A promotional block is spent first: the job's 40 credits come out of it, and it is delivered,
	// so nothing will ever return credits to the block.
	account := ledgertest.Account(t, store, 1_000)
	later := time.Now().Add(time.Hour)
	block := ledgertest.GrantBlock(t, store, account, 300, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &later})
	job := ledgertest.Charged(t, store, account, ledgertest.ID(t, "spent"), 40, "s3://in/spent").Job.Key()
	_, err := store.Deliver(ctx, job, 1)
	require.NoError(t, err)
	require.Equal(t, int64(260), ledgertest.Block(t, store, account, block.ID).Remaining, "the job drew from the promotional block")
	ledgertest.RequireBalance(t, store, account, 1_260)

	// The block expires two seconds ahead (a grant's expiry must lie ahead, so the owner moves it
	// closer): the pass must remove its 260 after that, by itself.
	ledgertest.MoveBlockExpiry(t, d.OwnerPool(t), block.ID, 2*time.Second)
	expiresAt := *ledgertest.Block(t, store, account, block.ID).ExpiresAt

	var expired []ledgertest.ExpireRow
	for {
		expired = ledgertest.ExpireRows(t, store, block.ID)
		if len(expired) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no scheduled pass expired block %d (due at %s) in time", block.ID, expiresAt.Format(time.RFC3339Nano))
		case <-time.After(200 * time.Millisecond):
		}
	}
	seen := time.Now()
	require.Len(t, expired, 1, "one expire row for the block")
	require.Equal(t, int64(-260), expired[0].Amount, "the row removes what remained")
	require.False(t, expired[0].CreatedAt.Before(expiresAt), "the row was written at %s, before the block expired at %s",
		expired[0].CreatedAt, expiresAt)
	after := ledgertest.Block(t, store, account, block.ID)
	require.Zero(t, after.Remaining)
	require.NotNil(t, after.ExpiredAt)
	ledgertest.RequireBalance(t, store, account, 1_000) // and the audit is clean

	// Another pass completes, started after the row was seen: it finds the block expired and
	// writes nothing for it.
	for passesCompletedSince(ctx, t, tc, workflows.ExpiryScheduleID, seen) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no further scheduled expiry pass completed in time")
		case <-time.After(250 * time.Millisecond):
		}
	}
	require.Equal(t, expired, ledgertest.ExpireRows(t, store, block.ID), "no second expire row")
	ledgertest.RequireBalance(t, store, account, 1_000)
}
