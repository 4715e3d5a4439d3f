package ledgerdb_test

// The debt rule with credit blocks, against the real Postgres: a debt is paid by the first credits
// that reach the account, whatever their way in — a grant, a positive adjustment, a refund's or a
// release's credits returned to a block that has not ended, and credits already waiting in a block
// that starts later — so that the same events in any order before an expiry end with the same
// money, and no credit that paid a debt lapses with its block afterwards (docs/design.md, "Credit
// blocks").

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestReturnedCreditsPayTheDebtWhateverTheOrder checks that a debt is paid by the credits a refund
// returns to a block that has not ended, at once: a promotional block B of 300 pays job 1; job 2,
// refunded earlier and its credits spent again, has its late result reclaimed into a debt of 300;
// job 1 is refunded. Whether the refund or the reclaim comes first, the account ends at 0 once B
// expires (the net-effect rule: job 2's 300 are owed once, and paid once — by job 1's returned
// credits, which must not lapse with B afterwards while the debt stays owed).
func TestReturnedCreditsPayTheDebtWhateverTheOrder(t *testing.T) {
	for _, refundFirst := range []bool{true, false} {
		name := map[bool]string{true: "refund, then reclaim", false: "reclaim, then refund"}[refundFirst]
		t.Run(name, func(t *testing.T) {
			s, acct := blockStore(t)
			ledgertest.GrantBlock(t, s, acct, 300, paid)
			job2, _ := chargeJob(t, s, acct, 300)
			refundOf(t, s, job2)
			chargeJob(t, s, acct, 300) // job 2's refunded credits spent again
			b := ledgertest.GrantBlock(t, s, acct, 300, promotional(30))
			job1, _ := chargeJob(t, s, acct, 300) // from B

			if refundFirst {
				refundOf(t, s, job1)
				lateResultOf(t, s, job2)
			} else {
				lateResultOf(t, s, job2)
				require.Equal(t, int64(300), debtOf(t, s, acct), "the reclaim found no credits: a debt")
				refundOf(t, s, job1)
			}
			require.Equal(t, int64(0), debtOf(t, s, acct), "job 1's returned credits paid the debt")
			require.Equal(t, int64(0), remaining(t, s, acct)[b.ID])
			ledgertest.RequireSound(t, s, acct)

			ledgertest.ExpireBlock(t, s, b.ID)
			require.Equal(t, int64(0), balanceOf(t, s, acct), "the same events in either order end with the same money")
			require.Equal(t, int64(0), debtOf(t, s, acct))
			require.Empty(t, expiries(t, s, acct), "nothing of B lapses: its credits paid the debt")
			ledgertest.RequireSound(t, s, acct)
		})
	}
}

// TestRefundRacingALateResultEndsTheSame runs the story of
// TestReturnedCreditsPayTheDebtWhateverTheOrder with job 1's refund and job 2's late result at the
// same moment, on several accounts: whichever takes the account first, the money ends the same —
// no debt, nothing left in B to lapse, and 0 once B expires (the net-effect rule).
func TestRefundRacingALateResultEndsTheSame(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	type story struct {
		acct       string
		b          ledgerdb.Block
		job1, job2 ledgerdb.JobKey
	}
	stories := make([]story, 6)
	for i := range stories {
		acct := blockAccount(t, s)
		ledgertest.GrantBlock(t, s, acct, 300, paid)
		job2, _ := chargeJob(t, s, acct, 300)
		refundOf(t, s, job2)
		chargeJob(t, s, acct, 300)
		b := ledgertest.GrantBlock(t, s, acct, 300, promotional(30))
		job1, _ := chargeJob(t, s, acct, 300)
		stories[i] = story{acct, b, job1, job2}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(stories))
	for _, st := range stories {
		wg.Go(func() {
			<-start
			_, err := s.Refund(ctx, st.job1, ledgerdb.ReasonTimedOut, "", 3)
			errs <- err
		})
		wg.Go(func() {
			<-start
			_, err := s.Settle(ctx, st.job2, 3, nil, "s3://out")
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, st := range stories {
		require.Equal(t, int64(0), debtOf(t, s, st.acct), st.acct)
		require.Equal(t, int64(0), remaining(t, s, st.acct)[st.b.ID], st.acct)
		ledgertest.RequireSound(t, s, st.acct)
		ledgertest.ExpireBlock(t, s, st.b.ID)
		ledgertest.RequireBalance(t, s, st.acct, 0)
	}
}

// TestSpendingTheBalanceShownLeavesNothingOwed checks the balance a customer is shown — what the
// blocks hold less the debt — against what they can spend and what is left after an expiry: an
// account owes 200 (an operator's correction), and a refund returns 400 to a promotional block.
// The customer spends exactly the 200 shown, then the block expires: nothing is owed (the
// net-effect rule: the refund's credits paid the debt at once, so none of them lapse in its place).
func TestSpendingTheBalanceShownLeavesNothingOwed(t *testing.T) {
	s, acct := blockStore(t)
	b := ledgertest.GrantBlock(t, s, acct, 400, promotional(30))
	job, _ := chargeJob(t, s, acct, 400)
	owe(t, s, acct, 200)
	refundOf(t, s, job)
	require.Equal(t, int64(200), remaining(t, s, acct)[b.ID], "200 of the returned credits paid the debt")
	require.Equal(t, int64(0), debtOf(t, s, acct))
	ledgertest.RequireSound(t, s, acct)

	shown := balanceOf(t, s, acct)
	require.Equal(t, int64(200), shown)
	_, tr := chargeJob(t, s, acct, shown)
	require.Equal(t, ledgerdb.StateRunning, tr.Job.State, "the balance shown can be spent")
	ledgertest.ExpireBlock(t, s, b.ID)
	require.Equal(t, int64(0), balanceOf(t, s, acct), "spending the balance shown leaves nothing owed after the expiry")
	ledgertest.RequireSound(t, s, acct)
}

// TestReleasePaysTheDebt checks a metered settlement while the account owes: the unused part of
// the hold goes back to the block the charge drew it from, and pays the debt at once, as far as it
// goes; the block's later expiry removes nothing that paid the debt.
func TestReleasePaysTheDebt(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 3, 20) // a hold of 60
	acct := blockAccount(t, s)
	b := ledgertest.GrantBlock(t, s, acct, 60, promotional(30))
	job := meteredCharged(t, s, acct, kind, 0).Job.Key()
	owe(t, s, acct, 50)
	_, err := s.Settle(ctx, job, 1, ledgerdb.Units(5), "") // 15 used, 45 released
	require.NoError(t, err)
	require.Equal(t, int64(5), debtOf(t, s, acct), "the 45 released paid 45 of the debt of 50")
	require.Equal(t, int64(0), remaining(t, s, acct)[b.ID])
	requireBalanceSound(t, s, acct, -5)

	ledgertest.ExpireBlock(t, s, b.ID)
	ledgertest.RequireBalance(t, s, acct, -5)
	require.Empty(t, expiries(t, s, acct), "nothing was left in the block to lapse")
	ledgertest.RequireSound(t, s, acct)
}

// TestCreditsReturnedToAnEndedBlockPayNoDebt checks a refund that returns credits both to a block
// whose time has passed and to one that has not, while the account owes: those in the ended block
// still expire at once and pay nothing — paying a debt with them would spend them after their
// expiry —, those in the other pay the debt at once.
func TestCreditsReturnedToAnEndedBlockPayNoDebt(t *testing.T) {
	s, acct := blockStore(t)
	promo := ledgertest.GrantBlock(t, s, acct, 15, promotional(30))
	paidBlock := ledgertest.GrantBlock(t, s, acct, 100, paid)
	job, _ := chargeJob(t, s, acct, 40) // promo 15, paid 25
	owe(t, s, acct, 200)                // the paid block's 75, and a debt of 125
	require.Equal(t, int64(125), debtOf(t, s, acct))
	ledgertest.ExpireBlock(t, s, promo.ID) // empty: marked expired, no row

	refund := refundOf(t, s, job)
	rows := expiries(t, s, acct)
	require.Len(t, rows, 1)
	require.Equal(t, int64(-15), rows[0].Amount, "the 15 returned to the ended block expire at once")
	require.Equal(t, refund.EntryID, rows[0].CausedBy)
	require.Equal(t, int64(100), debtOf(t, s, acct), "the 25 returned to the paid block paid 25 of the debt, the expired 15 nothing")
	got := remaining(t, s, acct)
	require.Equal(t, int64(0), got[paidBlock.ID])
	require.Equal(t, int64(0), got[promo.ID])
	requireBalanceSound(t, s, acct, -100)
}

// TestDrawOnTheDebtTakesBlocksNotYetStarted checks the draws that are never refused — a late
// result's reclaim and an operator's negative correction — on an account whose only credits wait
// in a block that starts tomorrow (the debt rule: the debt is owed now, as a grant that starts
// later pays it at once): they draw what the spendable blocks cannot cover from that block, and
// only what it cannot cover becomes a debt. Whether the block is granted before or after the draw,
// it then holds the same credits, and once it has started and expired unspent the account is at 0
// (the net-effect rule: nothing owed is paid twice, and nothing that paid a debt lapses).
func TestDrawOnTheDebtTakesBlocksNotYetStarted(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	for _, c := range []struct {
		name       string
		grantFirst bool
		reclaim    bool
	}{
		{"block, then reclaim", true, true},
		{"reclaim, then block", false, true},
		{"block, then correction", true, false},
		{"correction, then block", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			acct := blockAccount(t, s)
			spendable := ledgertest.GrantBlock(t, s, acct, 130, paid)
			late, _ := chargeJob(t, s, acct, 100)
			refundOf(t, s, late)
			chargeJob(t, s, acct, 100) // 30 left to spend, drawn first
			draw := func() {
				if c.reclaim {
					lateResultOf(t, s, late)
					return
				}
				owe(t, s, acct, 100)
			}
			grant := func() ledgerdb.Block {
				tomorrow := time.Now().Add(24 * time.Hour)
				later := tomorrow.Add(30 * 24 * time.Hour)
				return ledgertest.GrantBlock(t, s, acct, 300,
					ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, EffectiveAt: &tomorrow, ExpiresAt: &later})
			}
			var future ledgerdb.Block
			if c.grantFirst {
				future = grant()
				draw()
			} else {
				draw()
				future = grant()
			}
			got := remaining(t, s, acct)
			require.Equal(t, int64(0), got[spendable.ID], "the spendable block is drawn first")
			require.Equal(t, int64(230), got[future.ID], "the block not started yet pays the other 70")
			require.Equal(t, int64(0), debtOf(t, s, acct))
			requireBalanceSound(t, s, acct, 230) // a draw on the debt's behalf before the block's start is no spend out of time

			// The block starts, and expires unspent.
			_, err := ledgertest.OwnerPool(t).Exec(ctx, `UPDATE credit_blocks SET effective_at = now() - interval '2 hours' WHERE id = $1`, future.ID)
			require.NoError(t, err)
			ledgertest.ExpireBlock(t, s, future.ID)
			ledgertest.RequireBalance(t, s, acct, 0)
			require.Equal(t, int64(0), debtOf(t, s, acct))
			ledgertest.RequireSound(t, s, acct)
		})
	}
}

// TestGrantNotYetInEffectPaysTheDebtAtOnce checks the debt rule with a grant whose credits start
// later: the grant pays the account's debt first, at once — the debt is owed now — and only what is
// left waits for the block's start; the audit reads that payment as the grant's, not as a spend
// before the block's time.
func TestGrantNotYetInEffectPaysTheDebtAtOnce(t *testing.T) {
	s, acct := blockStore(t)
	owe(t, s, acct, 50)
	tomorrow := time.Now().Add(24 * time.Hour)
	b := ledgertest.GrantBlock(t, s, acct, 100, ledgerdb.BlockTerms{EffectiveAt: &tomorrow})
	require.Equal(t, int64(50), b.Remaining, "the debt of 50 paid first")
	requireBalanceSound(t, s, acct, 50)
}
