package activities_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// recordingExpirer is the real ledger's expiry, recording what each call answered, with one call
// (failOnce, counted from 1) failing once before it reaches the ledger, as a lost connection does.
type recordingExpirer struct {
	ledger   *ledgerdb.Store
	failOnce int

	mu       sync.Mutex
	calls    int
	failed   bool
	mores    []bool
	blocks   int
	credits  int64
	expiries []ledgerdb.Expiry
}

func (r *recordingExpirer) ExpireBlocks(ctx context.Context, limit int) ([]ledgerdb.Expiry, bool, error) {
	r.mu.Lock()
	r.calls++
	if r.calls == r.failOnce && !r.failed {
		r.failed = true
		r.mu.Unlock()
		return nil, false, errors.New("connection reset by peer")
	}
	r.mu.Unlock()
	expiries, more, err := r.ledger.ExpireBlocks(ctx, limit)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.mores = append(r.mores, more)
		r.expiries = append(r.expiries, expiries...)
		for _, x := range expiries {
			r.blocks++
			r.credits -= x.Amount
		}
	}
	return expiries, more, err
}

// dueBlocks grants acct one promotional block of each amount, to expire in an hour, then moves
// each one's expiry a minute into the past: due, and never touched by an expiry yet.
func dueBlocks(t *testing.T, store *ledgerdb.Store, acct string, amounts ...int64) []ledgerdb.Block {
	t.Helper()
	later := time.Now().Add(time.Hour)
	var blocks []ledgerdb.Block
	for _, amount := range amounts {
		b := ledgertest.GrantBlock(t, store, acct, amount, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &later})
		ledgertest.MoveBlockExpiry(t, ledgertest.OwnerPool(t), b.ID, -time.Minute)
		blocks = append(blocks, b)
	}
	return blocks
}

// requireExpiredOnce checks that each block has exactly one expire row, which removed all it held.
func requireExpiredOnce(t *testing.T, store *ledgerdb.Store, blocks []ledgerdb.Block) {
	t.Helper()
	for _, b := range blocks {
		var amounts []int64
		for _, row := range ledgertest.ExpireRows(t, store, b.ID) {
			amounts = append(amounts, row.Amount)
		}
		require.Equal(t, []int64{-b.Remaining}, amounts, "block %d's expire rows", b.ID)
	}
}

// runExpiry runs the Expire workflow, with its activity options, over ledger in a test
// environment, and answers its result, the attempts its activity made, and its error.
func runExpiry(t *testing.T, ledger activities.BlockExpirer, in activities.ExpiryInput) (activities.ExpiryResult, []int32, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.Expire)
	env.RegisterActivity(&activities.Expirer{Ledger: ledger})
	var mu sync.Mutex
	var attempts []int32
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, info.Attempt)
	})
	env.ExecuteWorkflow(workflows.Expire, in)
	require.True(t, env.IsWorkflowCompleted())
	var out activities.ExpiryResult
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&out))
	}
	mu.Lock()
	defer mu.Unlock()
	return out, attempts, err
}

// TestExpiryPassBatchesUntilNoneIsDue checks the expiry rule: what remains of an expired block is
// removed exactly once, by one expire row, whatever size of batch the pass takes them in. One
// pass in batches of two expires all five due blocks, calling the ledger until it says none is
// due, and answers what the ledger answered; the balance loses exactly what remained, and a second
// pass removes nothing more.
func TestExpiryPassBatchesUntilNoneIsDue(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 100)
	blocks := dueBlocks(t, store, account, 10, 20, 30, 40, 50)
	ledger := &recordingExpirer{ledger: store}

	out, attempts, err := runExpiry(t, ledger, activities.ExpiryInput{Batch: 2})
	require.NoError(t, err)
	require.Equal(t, []int32{1}, attempts)
	require.GreaterOrEqual(t, ledger.calls, 3, "five blocks in batches of two take three calls at least")
	for i, more := range ledger.mores {
		require.Equal(t, i < len(ledger.mores)-1, more, "the pass calls again exactly while the ledger says more are due: %v", ledger.mores)
	}
	require.Equal(t, activities.ExpiryResult{Batches: ledger.calls, BlocksExpired: ledger.blocks, CreditsExpired: ledger.credits}, out)
	require.GreaterOrEqual(t, out.BlocksExpired, 5)
	requireExpiredOnce(t, store, blocks)
	ledgertest.RequireBalance(t, store, account, 100)

	again := &recordingExpirer{ledger: store}
	_, _, err = runExpiry(t, again, activities.ExpiryInput{})
	require.NoError(t, err)
	requireExpiredOnce(t, store, blocks)
	ledgertest.RequireBalance(t, store, account, 100)
}

// TestExpiryPassRetriesAFailedBatch checks the expiry rule across a failure: a batch that fails
// (a lost connection) fails the pass's attempt, the workflow retries it, and the retry expires the
// rest; every due block still loses what remained exactly once, and the pass counts what both
// attempts expired, the first one's from its last heartbeat.
func TestExpiryPassRetriesAFailedBatch(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 100)
	blocks := dueBlocks(t, store, account, 10, 20, 30, 40, 50)
	ledger := &recordingExpirer{ledger: store, failOnce: 2}

	out, attempts, err := runExpiry(t, ledger, activities.ExpiryInput{Batch: 2})
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2}, attempts, "the failed batch failed the first attempt; the second finished the pass")
	require.True(t, ledger.failed)
	require.Equal(t, ledger.blocks, out.BlocksExpired, "the blocks both attempts expired")
	require.Equal(t, ledger.credits, out.CreditsExpired, "the credits both attempts removed")
	require.GreaterOrEqual(t, out.BlocksExpired, 5)
	requireExpiredOnce(t, store, blocks)
	ledgertest.RequireBalance(t, store, account, 100)
}

// TestExpiryPassRefusesABadBatch checks that bad input writes nothing: a batch size the ledger
// refuses fails the pass at once, without a retry (the same size is refused every time), with an
// error that names it, and a due block keeps its credits for a pass configured right.
func TestExpiryPassRefusesABadBatch(t *testing.T) {
	store := ledgertest.Store(t)
	account := ledgertest.Account(t, store, 100)
	blocks := dueBlocks(t, store, account, 25)

	for _, batch := range []int{-1, ledgerdb.MaxExpiriesPerCall + 1} {
		_, attempts, err := runExpiry(t, &recordingExpirer{ledger: store}, activities.ExpiryInput{Batch: batch})
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, "batch %d", batch)
		require.Equal(t, activities.ErrorTypeInvalidInput, appErr.Type())
		require.ErrorContains(t, err, "invalid limit")
		require.Equal(t, []int32{1}, attempts, "batch %d is not retried", batch)
	}
	ledgertest.RequireBalance(t, store, account, 125)
	b, err := store.Blocks(context.Background(), account)
	require.NoError(t, err)
	for _, got := range b {
		if got.ID == blocks[0].ID {
			require.Nil(t, got.ExpiredAt, "the refused passes expired nothing")
			require.Equal(t, int64(25), got.Remaining)
		}
	}

	_, _, err = runExpiry(t, &recordingExpirer{ledger: store}, activities.ExpiryInput{})
	require.NoError(t, err, "a pass configured right")
	requireExpiredOnce(t, store, blocks)
	ledgertest.RequireBalance(t, store, account, 100)
}
