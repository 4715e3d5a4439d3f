package ledgerdb_test

// Credit blocks against the real Postgres: the order of spending, returns to the blocks a draw
// took, expiry once, the debt, and every interleaving of charge, expiry, refund, late result and
// reclaim that docs/design.md's "Credit blocks" section writes down.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestChargeSpendsPromotionalFirst checks the order of spending: promotional credits before paid
// ones, then the lower priority, then the sooner expiry (a block that never expires last), then
// the older block; a charge takes what it needs block by block, and balance stays the sum of the
// rows (the sum-of-rows rule).
func TestChargeSpendsPromotionalFirst(t *testing.T) {
	s, acct := blockStore(t)
	paidBlock := ledgertest.GrantBlock(t, s, acct, 100, paid)
	later := ledgertest.GrantBlock(t, s, acct, 30, promotional(60))
	sooner := ledgertest.GrantBlock(t, s, acct, 20, promotional(10))
	urgent := ledgertest.GrantBlock(t, s, acct, 10, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, Priority: -1})

	chargeJob(t, s, acct, 25) // urgent 10 (priority -1), then sooner 15
	got := remaining(t, s, acct)
	require.Equal(t, int64(0), got[urgent.ID], "the lowest priority is spent first, though it never expires")
	require.Equal(t, int64(5), got[sooner.ID], "then the sooner expiry")
	require.Equal(t, int64(30), got[later.ID])
	require.Equal(t, int64(100), got[paidBlock.ID], "paid credits wait for the promotional ones")

	chargeJob(t, s, acct, 40) // sooner 5, later 30, paid 5
	got = remaining(t, s, acct)
	require.Equal(t, int64(0), got[sooner.ID])
	require.Equal(t, int64(0), got[later.ID])
	require.Equal(t, int64(95), got[paidBlock.ID])
	requireBalanceSound(t, s, acct, 95)
}

// TestChargeCannotSpendCreditsOutOfTime checks that credits count in the balance from their
// grant to their expiry's removal, but pay for a job only while their block is in effect: a
// charge the spendable blocks cannot cover is rejected (insufficient credits), nothing charged,
// even when the balance would cover it (the net-effect rule: no job runs on credits that are not
// the customer's to spend).
func TestChargeCannotSpendCreditsOutOfTime(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)

	future := blockAccount(t, s)
	tomorrow := time.Now().Add(24 * time.Hour)
	ledgertest.GrantBlock(t, s, future, 50, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, EffectiveAt: &tomorrow})
	_, tr := chargeJob(t, s, future, 40)
	require.Equal(t, ledgerdb.StateRejected, tr.Job.State)
	require.Equal(t, ledgerdb.RejectInsufficientCredits, tr.Job.RejectReason)
	ledgertest.RequireBalance(t, s, future, 50)

	lapsed := blockAccount(t, s)
	b := ledgertest.GrantBlock(t, s, lapsed, 50, promotional(30))
	ledgertest.PassBlockExpiry(t, b.ID) // past its expiry, not yet removed by the pass
	_, tr = chargeJob(t, s, lapsed, 40)
	require.Equal(t, ledgerdb.StateRejected, tr.Job.State)
	ledgertest.RequireBalance(t, s, lapsed, 50)
	got, err := s.Blocks(ctx, lapsed)
	require.NoError(t, err)
	require.False(t, got[0].Spendable(time.Now()))
	ledgertest.RequireSound(t, s, future, lapsed)
}

// TestRefundIntoAnExpiredBlockExpiresAtOnce checks the rule none of the billing systems states and
// jobbill must: a refund gives back exactly what the charge took (the reversing-pairs rule), to the
// blocks it took it from; what lands in a block that expired meanwhile expires at once, in an
// expire row of its own that names the refund. Then the late result's reclaim draws again in
// today's order — from the paid block, the promotional one being gone — and the job nets its cost
// (the net-effect rule).
func TestRefundIntoAnExpiredBlockExpiresAtOnce(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	promo := ledgertest.GrantBlock(t, s, acct, 15, promotional(30))
	paidBlock := ledgertest.GrantBlock(t, s, acct, 100, paid)

	job, _ := chargeJob(t, s, acct, 40) // promo 15, paid 25
	ledgertest.PassBlockExpiry(t, promo.ID)
	expired, _, err := s.ExpireBlocks(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, filterAccount(expired, acct), "an empty block expires with no row")

	refund, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 3)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, refund.Outcome)
	rows := expiries(t, s, acct)
	require.Len(t, rows, 1)
	require.Equal(t, int64(-15), rows[0].Amount, "the 15 credits returned to the expired block expire at once")
	require.Equal(t, int64(100), refund.BalanceAfter, "the refund's answer is the balance after its expiry")
	got := remaining(t, s, acct)
	require.Equal(t, int64(0), got[promo.ID])
	require.Equal(t, int64(100), got[paidBlock.ID])

	settled, err := s.Settle(ctx, job, 3, nil, "s3://out")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRecovered, settled.Job.State)
	got = remaining(t, s, acct)
	require.Equal(t, int64(60), got[paidBlock.ID], "the reclaim draws again in today's order")
	requireBalanceSound(t, s, acct, 60)

	// The pass finds nothing more to expire: the block expired once, its return once.
	expired, _, err = s.ExpireBlocks(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, filterAccount(expired, acct))
	require.Len(t, expiries(t, s, acct), 1)
}

// TestReleaseReturnsTheUnusedPartLastDrawnFirst checks a metered settlement: the unused part of
// the hold goes back to the blocks the hold was drawn from, the last drawn first, so that what
// stays spent is what the order of spending chose (the promotional credits).
func TestReleaseReturnsTheUnusedPartLastDrawnFirst(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 3, 20) // a hold of 60
	acct := blockAccount(t, s)
	promo := ledgertest.GrantBlock(t, s, acct, 40, promotional(30))
	paidBlock := ledgertest.GrantBlock(t, s, acct, 100, paid)

	job := meteredCharged(t, s, acct, kind, 0).Job.Key() // promo 40, paid 20
	_, err := s.Settle(ctx, job, 1, ledgerdb.Units(5), "")
	require.NoError(t, err) // 15 used: 45 released
	got := remaining(t, s, acct)
	require.Equal(t, int64(100), got[paidBlock.ID], "the paid block, drawn last, gets its 20 back first")
	require.Equal(t, int64(25), got[promo.ID], "the promotional block gets the other 25")
	requireBalanceSound(t, s, acct, 125)
}

// TestReclaimDebtIsPaidByTheNextGrant checks the debt rule with blocks: a reclaim that finds no
// credits is written in full and leaves a debt (the balance goes below zero), and the next grant
// pays the debt first; its block holds only what is left.
func TestReclaimDebtIsPaidByTheNextGrant(t *testing.T) {
	s, acct := blockStore(t)
	ledgertest.GrantBlock(t, s, acct, 50, paid)
	late, _ := chargeJob(t, s, acct, 50)
	refundOf(t, s, late)
	chargeJob(t, s, acct, 50) // the refunded credits spent again
	lateResultOf(t, s, late)
	requireBalanceSound(t, s, acct, -50)

	next := ledgertest.GrantBlock(t, s, acct, 80, promotional(30))
	require.Equal(t, int64(30), next.Remaining, "the grant paid the debt of 50 first")
	requireBalanceSound(t, s, acct, 30)
}

// TestExpiryRemovesWhatRemainsOnce checks expiry: what remains of an expired block is removed by
// one expire row, exactly once however many passes run at once, and a block emptied before its
// expiry is marked expired with no row.
func TestExpiryRemovesWhatRemainsOnce(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	a := ledgertest.GrantBlock(t, s, acct, 30, promotional(5))
	b := ledgertest.GrantBlock(t, s, acct, 20, promotional(6))
	ledgertest.GrantBlock(t, s, acct, 100, paid)
	chargeJob(t, s, acct, 10) // from a
	ledgertest.PassBlockExpiry(t, a.ID)
	ledgertest.PassBlockExpiry(t, b.ID)

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				_, more, err := s.ExpireBlocks(ctx, 1)
				if err != nil {
					t.Errorf("expire: %v", err)
					return
				}
				if !more {
					return
				}
			}
		})
	}
	wg.Wait()
	rows := expiries(t, s, acct)
	require.Len(t, rows, 2, "one expiry per block")
	byBlock := map[int64]int64{}
	for _, e := range rows {
		byBlock[e.Amount]++
	}
	require.Equal(t, map[int64]int64{-20: 2}, byBlock, "20 left of each: a's 30 less the 10 charged, b's 20")
	requireBalanceSound(t, s, acct, 100)
}

// TestBlocksRandomizedSequences drives seeded random sequences of grants (paid and promotional,
// of several priorities and expiries), charges, refunds, late results (reclaims), metered
// settlements and expiries (a block's clock moved back, then the expiry pass) on one account,
// and after every step checks with the audit that no block goes negative, expires early or twice,
// or is spent outside its time; that every row's block moves add up to it; and that the balance
// is what the blocks hold less the debt (the sum-of-rows rule).
func TestBlocksRandomizedSequences(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 2, 25) // a hold of 50
	sequences := 12
	if testing.Short() {
		sequences = 3
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for seq := range sequences {
		rng := rand.New(rand.NewPCG(seed, uint64(seq)))
		acct := blockAccount(t, s)
		var blocks []int64
		var running, refunded []ledgerdb.JobKey
		// take removes a job chosen at random from jobs and answers it.
		take := func(jobs *[]ledgerdb.JobKey) ledgerdb.JobKey {
			i := rng.IntN(len(*jobs))
			key := (*jobs)[i]
			*jobs = append((*jobs)[:i], (*jobs)[i+1:]...)
			return key
		}
		// settle settles the job at a usage chosen at random, within its hold.
		settle := func(key ledgerdb.JobKey) {
			_, err := s.Settle(ctx, key, 1, ledgerdb.Units(int64(rng.IntN(26))), "")
			require.NoError(t, err)
		}
		for step := range 40 {
			var what string
			switch op := rng.IntN(10); {
			case op < 2:
				terms := paid
				if rng.IntN(2) == 0 {
					terms = promotional(1 + rng.IntN(30))
				}
				terms.Priority = int32(rng.IntN(3))
				b := ledgertest.GrantBlock(t, s, acct, int64(10+rng.IntN(90)), terms)
				blocks = append(blocks, b.ID)
				what = fmt.Sprintf("grant %s block %d", terms.Category, b.ID)
			case op < 5:
				key := submitJob(t, s, acct, kind)
				tr, err := s.Charge(ctx, key)
				if !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
					require.NoError(t, err)
				}
				if tr.Job.State == ledgerdb.StateRunning {
					running = append(running, key)
				}
				what = "charge " + string(tr.Job.State)
			case op < 6 && len(running) > 0:
				key := take(&running)
				_, err := s.Refund(ctx, key, ledgerdb.ReasonTimedOut, "", 1)
				require.NoError(t, err)
				refunded = append(refunded, key)
				what = "refund"
			case op < 7 && len(running) > 0:
				settle(take(&running))
				what = "settle"
			case op < 8 && len(refunded) > 0:
				settle(take(&refunded))
				what = "late result"
			case len(blocks) > 0:
				b := blocks[rng.IntN(len(blocks))]
				ledgertest.PassBlockExpiry(t, b)
				if rng.IntN(2) == 0 {
					_, _, err := s.ExpireBlocks(ctx, ledgerdb.MaxExpiriesPerCall)
					require.NoError(t, err)
				}
				what = fmt.Sprintf("block %d past its expiry", b)
			default:
				continue
			}
			report, err := s.Audit(ctx, acct)
			require.NoError(t, err)
			require.True(t, report.OK(), "seed %d sequence %d step %d (%s): %v", seed, seq, step, what, report.Violations)
		}
	}
}

// TestConcurrentChargesNeverOverdrawTheSpendableBlocks checks charges racing on one account whose
// balance holds more than it can spend (a block past its expiry, not yet removed): each charge
// that the spendable blocks cover is charged, every other one is rejected cleanly (insufficient
// credits, nothing charged) — never an error, never a draw from the expired block (the
// net-effect rule: no job runs on credits that are not the customer's to spend).
func TestConcurrentChargesNeverOverdrawTheSpendableBlocks(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	lapsed := ledgertest.GrantBlock(t, s, acct, 100, promotional(30))
	ledgertest.PassBlockExpiry(t, lapsed.ID)
	ledgertest.GrantBlock(t, s, acct, 100, paid)
	kind := ledgertest.Fixed(t, s, 30)

	keys := make([]ledgerdb.JobKey, 10)
	for i := range keys {
		keys[i] = ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "job")}
		_, err := s.Submit(ctx, ledgerdb.Submission{JobID: keys[i].JobID, AccountID: acct, Kind: kind, Request: []byte("x")})
		require.NoError(t, err)
	}
	states := make([]ledgerdb.State, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, key := range keys {
		wg.Go(func() {
			<-start
			tr, err := s.Charge(ctx, key)
			states[i] = tr.Job.State
			if !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
				errs[i] = err
			}
		})
	}
	close(start)
	wg.Wait()
	counts := map[ledgerdb.State]int{}
	for i := range keys {
		require.NoError(t, errs[i], "charge %d", i)
		counts[states[i]]++
	}
	require.Equal(t, map[ledgerdb.State]int{ledgerdb.StateRunning: 3, ledgerdb.StateRejected: 7}, counts)
	require.Equal(t, int64(100), remaining(t, s, acct)[lapsed.ID], "nothing drawn from the expired block")
	ledgertest.RequireSound(t, s, acct)
}

// TestReturnToABlockTheExpiryMarkedExpiresAtOnce checks a refund that races the expiry pass: the
// pass marked the block expired (it held nothing then), and the refund's transaction began before
// the block's time — its clock still reads the block as in effect. The credits it returns must
// expire at once all the same; otherwise they would sit for ever in a block the pass never visits
// again, in the balance, neither spendable nor lapsed.
func TestReturnToABlockTheExpiryMarkedExpiresAtOnce(t *testing.T) {
	ctx := context.Background()
	s, acct := blockStore(t)
	promo := ledgertest.GrantBlock(t, s, acct, 10, promotional(30))
	job, _ := chargeJob(t, s, acct, 10)
	ledgertest.ExpireBlock(t, s, promo.ID) // empty: marked expired, no row
	// The refund's transaction began before the block's time: its now() is before expires_at.
	_, err := ledgertest.OwnerPool(t).Exec(ctx, `UPDATE credit_blocks SET expires_at = now() + interval '1 hour' WHERE id = $1`, promo.ID)
	require.NoError(t, err)

	refundOf(t, s, job)
	require.Equal(t, int64(0), remaining(t, s, acct)[promo.ID], "the returned credits expired at once")
	requireBalanceSound(t, s, acct, 0)
}

// TestTransitionsThatWaitedForTheAccountReadItsBlocksAsTheyStand checks the order of spending and
// the debt rule under a race: a grant lands while a charge, then a late result, waits for the
// account's lock. Once the grant commits, the charge must spend the new promotional block before
// the paid one, and the late result's reclaim must draw from the new block rather than run up a
// debt beside it: a transition reads the blocks as they stand once it holds the account, not as
// they stood when it asked for it.
func TestTransitionsThatWaitedForTheAccountReadItsBlocksAsTheyStand(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)

	t.Run("charge", func(t *testing.T) {
		acct := blockAccount(t, s)
		paidBlock := ledgertest.GrantBlock(t, s, acct, 100, paid)
		key := submitJob(t, s, acct, ledgertest.Fixed(t, s, 30))

		_, err := grantWhileWaiting(t, s, acct, 50, func() (ledgerdb.Transition, error) { return s.Charge(ctx, key) })
		require.NoError(t, err)
		blocks := remaining(t, s, acct)
		require.Equal(t, int64(100), blocks[paidBlock.ID], "the paid block is spent after the promotional one")
		requireBalanceSound(t, s, acct, 120)
	})

	t.Run("late result", func(t *testing.T) {
		acct := blockAccount(t, s)
		ledgertest.GrantBlock(t, s, acct, 30, paid)
		kind := ledgertest.Metered(t, s, 1, 30)
		late := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "late")}
		next := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "next")}
		for _, key := range []ledgerdb.JobKey{late, next} {
			_, err := s.Submit(ctx, ledgerdb.Submission{JobID: key.JobID, AccountID: acct, Kind: kind, Request: []byte("x")})
			require.NoError(t, err)
		}
		_, err := s.Charge(ctx, late)
		require.NoError(t, err)
		refundOf(t, s, late)
		_, err = s.Charge(ctx, next) // the blocks hold nothing now
		require.NoError(t, err)

		used := int64(10)
		tr, err := grantWhileWaiting(t, s, acct, 50, func() (ledgerdb.Transition, error) { return s.Settle(ctx, late, 3, &used, "") })
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
		// 30 paid and 50 granted, 30 and 10 spent: 40 left, all of it in blocks, none of it owed.
		ledgertest.RequireBalance(t, s, acct, 40)
		var held int64
		for _, r := range remaining(t, s, acct) {
			held += r
		}
		require.Equal(t, int64(40), held, "the reclaim drew from the new block: no debt beside it")
		ledgertest.RequireSound(t, s, acct)
	})
}

// grantWhileWaiting grants the account a promotional block of amount in a transaction that holds
// the account's lock until transition, started meanwhile, waits for it; then commits the grant and
// answers what transition answered.
func grantWhileWaiting(t *testing.T, s *ledgerdb.Store, acct string, amount int64, transition func() (ledgerdb.Transition, error)) (ledgerdb.Transition, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := ledgertest.OwnerPool(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var outcome string
	require.NoError(t, tx.QueryRow(ctx,
		`SELECT outcome FROM ledger_post($1, 'grant', $2, $3, '', 'promotional', 0, NULL, now() + interval '30 days')`,
		acct, amount, ledgertest.ID(t, "grant")).Scan(&outcome))
	require.Equal(t, "applied", outcome)
	var granter int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&granter))

	type answer struct {
		tr  ledgerdb.Transition
		err error
	}
	done := make(chan answer, 1)
	go func() {
		tr, err := transition()
		done <- answer{tr, err}
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, s.Pool().QueryRow(ctx,
			`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, granter).Scan(&waiting))
		return waiting
	}, time.Minute, 5*time.Millisecond, "the transition waits for the grant's lock on the account")
	require.NoError(t, tx.Commit(ctx))
	a := <-done
	return a.tr, a.err
}
