package ledgerdb_test

// Metered usage settled: the hold a metered job's charge takes, the settlement that records its
// usage and releases the rest, after every older step, and the input it refuses — against the real
// Postgres, as the application role.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestMeteredSettlement checks the settlement of a metered job's result (the reversing-pairs,
// net-effect, price-list, sum-of-rows and idempotent-doors rules): its charge holds unit price ×
// held units; a settle records units used = min(reported, held) (nil: the whole hold) and writes
// one release row of (held − used) × unit price when that is above zero, whose balance_after
// continues the account's chain; the job then nets −used × unit price; a second settle, whatever
// usage it reports, answers AlreadyApplied with the recorded units and writes nothing. The same
// holds for a late result after a refund: the refund is reclaimed in full and the unused part
// released.
func TestMeteredSettlement(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	const unitPrice, maxUnits = 3, 20
	kind := ledgertest.Metered(t, s, unitPrice, maxUnits)
	for _, c := range []struct {
		name  string
		usage *int64
		used  int64
	}{
		{"within the hold", ledgerdb.Units(7), 7},
		{"equal to the hold", ledgerdb.Units(maxUnits), maxUnits},
		{"above the hold: capped", ledgerdb.Units(maxUnits + 1), maxUnits},
		{"far above the hold: capped", ledgerdb.Units(math.MaxInt64), maxUnits},
		{"zero: the whole hold returned", ledgerdb.Units(0), 0},
		{"not reported: the whole hold billed", nil, maxUnits},
	} {
		for _, late := range []bool{false, true} {
			name := c.name
			if late {
				name += ", late result after a refund"
			}
			t.Run(name, func(t *testing.T) {
				const credits = 100
				hold := int64(unitPrice * maxUnits)
				released := (maxUnits - c.used) * unitPrice
				acct := ledgertest.Account(t, s, credits)
				charged := meteredCharged(t, s, acct, kind, 0)
				job := charged.Job.Key()
				require.Equal(t, ledgerdb.UnitGPUSecond, charged.Job.Unit)
				require.Equal(t, int64(maxUnits), charged.Job.HeldUnits)
				require.Equal(t, hold, charged.Job.Cost)
				require.Equal(t, credits-hold, charged.BalanceAfter, "the charge holds unit price × max units")
				require.Equal(t, hold, charged.Job.Charged())
				require.Zero(t, charged.Job.Released())
				want := []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -hold}}
				wantState := ledgerdb.StateDelivered
				if late {
					refunded, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
					require.NoError(t, err)
					require.Equal(t, int64(credits), refunded.BalanceAfter)
					want = append(want, ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: hold}, ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -hold})
					wantState = ledgerdb.StateRecovered
				}
				if released > 0 {
					want = append(want, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: released})
				}

				tr, err := s.Settle(ctx, job, 2, c.usage, "")
				require.NoError(t, err)
				require.Equal(t, ledgerdb.Applied, tr.Outcome)
				require.Equal(t, wantState, tr.Job.State)
				requireSettled(t, tr.Job, c.used)
				balance := credits - c.used*unitPrice
				if released > 0 || late {
					require.NotZero(t, tr.EntryID, "the settle wrote a row")
					require.Equal(t, balance, tr.BalanceAfter)
				} else {
					require.Zero(t, tr.EntryID, "nothing to release, nothing written")
				}
				ledgertest.RequireRowAmounts(t, s, job, want...)

				// The release row continues the account's chain: its balance_after is the row
				// before it plus what it gives back.
				h, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
				require.NoError(t, err)
				last := h.Entries[len(h.Entries)-1]
				if released > 0 {
					require.Equal(t, ledgerdb.KindRelease, last.Kind)
					require.Equal(t, tr.EntryID, last.ID)
					require.Equal(t, h.Entries[len(h.Entries)-2].BalanceAfter+released, last.BalanceAfter)
				}
				require.Equal(t, balance, last.BalanceAfter)

				// A second settle, with any usage, answers the recorded units and writes nothing.
				for _, usage := range []*int64{nil, ledgerdb.Units(0), ledgerdb.Units(1), ledgerdb.Units(c.used), ledgerdb.Units(maxUnits * 2)} {
					again, err := s.Settle(ctx, job, 3, usage, "")
					require.NoError(t, err)
					require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
					require.Zero(t, again.EntryID)
					requireSettled(t, again.Job, c.used)
					require.Equal(t, tr.Job.Attempts, again.Job.Attempts, "an answered repeat changes nothing")
				}
				// Nor does any other step move money on the settled job.
				for _, op := range []func() (ledgerdb.Transition, error){
					func() (ledgerdb.Transition, error) {
						return s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "late timeout", 4)
					},
					func() (ledgerdb.Transition, error) { return s.Reclaim(ctx, job) },
					func() (ledgerdb.Transition, error) { return s.Deliver(ctx, job, 4) },
					func() (ledgerdb.Transition, error) { return s.Charge(ctx, job) },
				} {
					tr, err := op()
					require.NoError(t, err)
					require.Zero(t, tr.EntryID)
				}
				ledgertest.RequireRowAmounts(t, s, job, want...)
				ledgertest.RequireBalance(t, s, acct, balance)

				// A tombstone keeps the settlement and its money: a late result's settle answers
				// it as settled, writing nothing.
				del, err := s.Delete(ctx, job)
				require.NoError(t, err)
				requireSettled(t, del.Job, c.used)
				again, err := s.Settle(ctx, job, 3, ledgerdb.Units(0), "")
				require.NoError(t, err)
				require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
				require.Zero(t, again.EntryID)
				requireSettled(t, again.Job, c.used)
				ledgertest.RequireRowAmounts(t, s, job, want...)
				ledgertest.RequireBalance(t, s, acct, balance)
			})
		}
	}
}

// TestMeteredSmallerHold checks the price-list rule for a client's own maximum: a job submitted
// with MaxUnits below its kind's holds only those units (its cost is unit price × MaxUnits), usage
// is capped at them, and the same ID resubmitted answers the job only when it asks for the same
// hold — the fingerprint leaves MaxUnits out, so "the kind's maximum" and the same number named
// explicitly are the same request, and another number is a conflict. A fixed-price kind holds one
// unit, so naming MaxUnits 1 for it is the same request too.
func TestMeteredSmallerHold(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 4, 25)
	acct := ledgertest.Account(t, s, 1000)

	small := ledgerdb.Submission{JobID: ledgertest.ID(t, "small"), AccountID: acct, Kind: kind, MaxUnits: 10, Request: []byte("x")}
	tr, err := s.Submit(ctx, small)
	require.NoError(t, err)
	require.Equal(t, int64(10), tr.Job.HeldUnits)
	require.Equal(t, int64(40), tr.Job.Cost)
	again, err := s.Submit(ctx, small)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	for _, other := range []int64{0, 9, 11, 25} {
		sub := small
		sub.MaxUnits = other
		_, err := s.Submit(ctx, sub)
		require.ErrorIs(t, err, ledgerdb.ErrConflict, "max units %d", other)
	}
	charged, err := s.Charge(ctx, small.Key())
	require.NoError(t, err)
	require.Equal(t, int64(960), charged.BalanceAfter)
	settled, err := s.Settle(ctx, small.Key(), 1, ledgerdb.Units(24), "")
	require.NoError(t, err)
	requireSettled(t, settled.Job, 10)
	require.Zero(t, settled.EntryID, "capped at the client's maximum: nothing to release")
	ledgertest.RequireRowAmounts(t, s, small.Key(), ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -40})

	whole := ledgerdb.Submission{JobID: ledgertest.ID(t, "whole"), AccountID: acct, Kind: kind, Request: []byte("y")}
	tr, err = s.Submit(ctx, whole)
	require.NoError(t, err)
	require.Equal(t, int64(25), tr.Job.HeldUnits)
	named := whole
	named.MaxUnits = 25
	again, err = s.Submit(ctx, named)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, "the kind's maximum named explicitly is the same hold")
	named.MaxUnits = 24
	_, err = s.Submit(ctx, named)
	require.ErrorIs(t, err, ledgerdb.ErrConflict)

	fixed := ledgerdb.Submission{JobID: ledgertest.ID(t, "fixed"), AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), Request: []byte("z")}
	_, err = s.Submit(ctx, fixed)
	require.NoError(t, err)
	fixed.MaxUnits = 1
	again, err = s.Submit(ctx, fixed)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, "a job sold whole holds one unit, named or not")
	ledgertest.RequireBalance(t, s, acct, 960)
}

// TestMeteredSettlesAfterTheOldSteps checks the reversing-pairs, net-effect and idempotent-doors
// rules for a priced job billed by the steps of the original version, which know no usage — Deliver
// alone, or Reclaim alone: each settles the job at its whole hold in its own transaction (a job
// sold whole at its one unit), writing no release row, so the job nets −hold at once and no release
// can come later (the bounded balances of docs/design.md). A later Settle, whatever usage it
// reports, answers AlreadyApplied with the held units and writes nothing; so does the old step
// again. The Reclaim answers its reclaim row.
func TestMeteredSettlesAfterTheOldSteps(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	const unitPrice, maxUnits, hold = 2, 30, 60
	kind := ledgertest.Metered(t, s, unitPrice, maxUnits)
	acct := ledgertest.Account(t, s, 300)
	usages := []*int64{nil, ledgerdb.Units(0), ledgerdb.Units(1), ledgerdb.Units(12), ledgerdb.Units(maxUnits), ledgerdb.Units(maxUnits * 3)}

	// settleWritesNothing settles job again with every usage: AlreadyApplied, the units it was
	// settled at, no row, nothing changed.
	settleWritesNothing := func(job ledgerdb.JobKey, settled ledgerdb.Job, used int64) {
		t.Helper()
		for _, usage := range usages {
			again, err := s.Settle(ctx, job, 5, usage, "")
			require.NoError(t, err)
			require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, "usage %s", fmtUnits(usage))
			require.Zero(t, again.EntryID, "usage %s", fmtUnits(usage))
			requireSettled(t, again.Job, used)
			require.Equal(t, settled.State, again.Job.State)
			require.Equal(t, settled.Attempts, again.Job.Attempts, "an answered repeat changes nothing")
			require.Equal(t, settled.SettledAt, again.Job.SettledAt, "settled once")
		}
	}

	delivered := meteredCharged(t, s, acct, kind, 0).Job.Key()
	ledgertest.RequireBalance(t, s, acct, 300-hold)
	tr, err := s.Deliver(ctx, delivered, 1)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateDelivered, tr.Job.State)
	requireSettled(t, tr.Job, maxUnits)
	require.Equal(t, int64(-hold), tr.Job.Net(), "delivered by the old step: the whole hold, at once")
	require.Zero(t, tr.EntryID, "settled at the whole hold: nothing released")
	again, err := s.Deliver(ctx, delivered, 2)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	requireSettled(t, again.Job, maxUnits)
	settleWritesNothing(delivered, tr.Job, maxUnits)
	ledgertest.RequireRowAmounts(t, s, delivered, ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -hold})
	ledgertest.RequireBalance(t, s, acct, 300-hold)

	// A client's own smaller hold is the whole hold too.
	small := meteredCharged(t, s, acct, kind, 10).Job.Key()
	tr, err = s.Deliver(ctx, small, 1)
	require.NoError(t, err)
	requireSettled(t, tr.Job, 10)
	settleWritesNothing(small, tr.Job, 10)
	ledgertest.RequireRowAmounts(t, s, small, ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -20})
	ledgertest.RequireBalance(t, s, acct, 300-hold-20)

	recovered := meteredCharged(t, s, acct, kind, 0).Job.Key()
	_, err = s.Refund(ctx, recovered, ledgerdb.ReasonTimedOut, "timed out", 3)
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, 300-hold-20)
	tr, err = s.Reclaim(ctx, recovered)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	requireSettled(t, tr.Job, maxUnits)
	require.NotZero(t, tr.EntryID, "the reclaim row")
	require.Equal(t, int64(300-2*hold-20), tr.BalanceAfter)
	again, err = s.Reclaim(ctx, recovered)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	require.Zero(t, again.EntryID)
	requireSettled(t, again.Job, maxUnits)
	settleWritesNothing(recovered, tr.Job, maxUnits)
	ledgertest.RequireRowAmounts(t, s, recovered, ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -hold},
		ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: hold}, ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -hold})
	ledgertest.RequireBalance(t, s, acct, 300-2*hold-20)

	// A job sold whole: settled at its one unit by either old step.
	fixed := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "fixed"), 40, "x").Job.Key()
	tr, err = s.Deliver(ctx, fixed, 1)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	requireSettled(t, tr.Job, 1)
	require.Zero(t, tr.EntryID)
	settleWritesNothing(fixed, tr.Job, 1)
	ledgertest.RequireRows(t, s, fixed, 40, ledgerdb.KindCharge)

	fixedLate := ledgertest.Charged(t, s, acct, ledgertest.ID(t, "fixed-late"), 40, "y").Job.Key()
	_, err = s.Refund(ctx, fixedLate, ledgerdb.ReasonTimedOut, "timed out", 3)
	require.NoError(t, err)
	tr, err = s.Reclaim(ctx, fixedLate)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	requireSettled(t, tr.Job, 1)
	require.NotZero(t, tr.EntryID, "the reclaim row")
	settleWritesNothing(fixedLate, tr.Job, 1)
	ledgertest.RequireRows(t, s, fixedLate, 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	ledgertest.RequireBalance(t, s, acct, 300-2*hold-20-80)
}

// TestReclaimSettlesAtTheWholeHold checks the reversing-pairs, net-effect and sum-of-rows rules for
// Store.Reclaim, the original version's late-result step, on a refunded metered job: it answers
// Applied with the reclaim row's entry and the balance after it (the row continues the account's
// chain), and the job settled at its whole hold in the same transaction — no release row, the job
// netting −hold — also when the refunded credits were spent meanwhile and the reclaim takes the
// balance below zero (the debt rule), and for a job holding a smaller maximum of the client's own.
func TestReclaimSettlesAtTheWholeHold(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	const unitPrice, maxUnits = 5, 20 // a hold of 100
	kind := ledgertest.Metered(t, s, unitPrice, maxUnits)
	for _, c := range []struct {
		name     string
		maxUnits int64
		spend    int64 // credits spent on another job while the job stood refunded
	}{
		{"the kind's maximum", 0, 0},
		{"a smaller hold of the client's own", 8, 0},
		{"into debt", 0, 90},
	} {
		t.Run(c.name, func(t *testing.T) {
			acct := ledgertest.Account(t, s, 100)
			charged := meteredCharged(t, s, acct, kind, c.maxUnits)
			job, held := charged.Job.Key(), charged.Job.HeldUnits
			hold := held * unitPrice
			_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
			require.NoError(t, err)
			if c.spend > 0 {
				ledgertest.Charged(t, s, acct, ledgertest.ID(t, "spent"), c.spend, "z")
			}
			balance := 100 - c.spend - hold

			tr, err := s.Reclaim(ctx, job)
			require.NoError(t, err)
			require.Equal(t, ledgerdb.Applied, tr.Outcome)
			require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
			requireSettled(t, tr.Job, held)
			require.Equal(t, -hold, tr.Job.Net())
			require.Equal(t, balance, tr.BalanceAfter)
			h, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
			require.NoError(t, err)
			last := h.Entries[len(h.Entries)-1]
			require.Equal(t, tr.EntryID, last.ID, "the answer names the reclaim row, the last one written")
			require.Equal(t, ledgerdb.KindReclaim, last.Kind)
			require.Equal(t, -hold, last.Amount, "the reclaim is the whole hold")
			require.Equal(t, balance, last.BalanceAfter)
			require.Equal(t, h.Entries[len(h.Entries)-2].BalanceAfter-hold, last.BalanceAfter, "the chain continues")
			ledgertest.RequireRowAmounts(t, s, job, ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -hold},
				ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: hold}, ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -hold})
			ledgertest.RequireBalance(t, s, acct, balance)
		})
	}
}

// TestUnpricedJobIsNeverSettled checks the reversing-pairs and net-effect rules for a job submitted
// with a cost before the price list (no kind, no price): it has no units to settle, so Deliver,
// Reclaim and Settle leave it unsettled — no units used, no release row — and it nets −cost once
// delivered or recovered; a Settle after an old step answers AlreadyApplied and writes nothing.
// Such a job can no longer be submitted, so the test writes one as the schema's owner inside a
// transaction it rolls back.
func TestUnpricedJobIsNeverSettled(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 200)
	tx, err := ledgertest.OwnerPool(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()

	type answer struct {
		outcome   string
		entry     *int64
		settled   bool
		unitsUsed *int64
	}
	call := func(fn string, args ...any) answer {
		t.Helper()
		var a answer
		require.NoError(t, tx.QueryRow(ctx, `SELECT outcome, entry_id, (job).is_settled, (job).units_used FROM `+fn, args...).
			Scan(&a.outcome, &a.entry, &a.settled, &a.unitsUsed), fn)
		require.False(t, a.settled, "%s settled a job without a price", fn)
		require.Nil(t, a.unitsUsed, fn)
		return a
	}
	unpriced := func() string {
		t.Helper()
		job := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "unpriced")}.String()
		_, err := tx.Exec(ctx, `INSERT INTO jobs (id, account_id, cost, request_fingerprint) VALUES ($1, $2, 30, '\x00')`, job, acct)
		require.NoError(t, err)
		require.Equal(t, "applied", call(`ledger_charge($1, NULL)`, job).outcome)
		return job
	}
	rows := func(job string) []string {
		t.Helper()
		r, err := tx.Query(ctx, `SELECT kind || ' ' || amount FROM ledger_entries WHERE job_id = $1 ORDER BY id`, job)
		require.NoError(t, err)
		got, err := pgx.CollectRows(r, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}

	delivered := unpriced()
	a := call(`ledger_deliver($1, 1)`, delivered)
	require.Equal(t, "applied", a.outcome)
	require.Nil(t, a.entry)
	for _, usage := range []*int64{nil, ledgerdb.Units(0), ledgerdb.Units(5)} {
		a = call(`ledger_settle($1, 1, $2)`, delivered, usage)
		require.Equal(t, "already_applied", a.outcome)
		require.Nil(t, a.entry)
	}
	require.Equal(t, []string{"charge -30"}, rows(delivered))

	recovered := unpriced()
	require.Equal(t, "applied", call(`ledger_refund($1, 'timed_out', 'timed out', 3)`, recovered).outcome)
	a = call(`ledger_reclaim($1)`, recovered)
	require.Equal(t, "applied", a.outcome)
	require.NotNil(t, a.entry, "the reclaim row")
	a = call(`ledger_settle($1, 3, 0)`, recovered)
	require.Equal(t, "already_applied", a.outcome)
	require.Nil(t, a.entry)
	require.Equal(t, []string{"charge -30", "refund 30", "reclaim -30"}, rows(recovered))

	// The one-step settle of an unpriced job: delivered or recovered, and never settled.
	settled := unpriced()
	a = call(`ledger_settle($1, 1, 0)`, settled)
	require.Equal(t, "applied", a.outcome)
	require.Nil(t, a.entry)
	late := unpriced()
	require.Equal(t, "applied", call(`ledger_refund($1, 'timed_out', 'timed out', 3)`, late).outcome)
	a = call(`ledger_settle($1, 3, 0)`, late)
	require.Equal(t, "applied", a.outcome)
	require.NotNil(t, a.entry, "the reclaim row")
	require.Equal(t, []string{"charge -30", "refund 30", "reclaim -30"}, rows(late))

	report, err := ledgerdb.AuditThrough(ctx, tx, acct)
	require.NoError(t, err)
	require.Empty(t, report.Violations)
	require.Equal(t, int64(200-4*30), report.Balance)
	require.NoError(t, tx.Rollback(ctx))
	ledgertest.RequireBalance(t, s, acct, 200)
}

// TestMeteredDebtRule checks the debt rule of docs/design.md for a metered job: a late result
// reclaims the refund in full — the whole hold, not the usage — even when the refunded credits
// were spent meanwhile, so the balance goes below zero; the release then gives back the unused
// part in a row of its own; the job nets −used × unit price (the net-effect rule); while the
// balance is below a job's cost no new job is charged; and a grant pays the debt first. The
// sum-of-rows rule holds throughout.
func TestMeteredDebtRule(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 5, 20) // a hold of 100
	acct := ledgertest.Account(t, s, 100)
	late := meteredCharged(t, s, acct, kind, 0).Job.Key()
	_, err := s.Refund(ctx, late, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	require.NoError(t, err)

	// The user spends the refunded credits on another job.
	spent := ledgertest.ID(t, "spent")
	ledgertest.Charged(t, s, acct, spent, 90, "y")
	ledgertest.RequireBalance(t, s, acct, 10)

	// The late result: the reclaim takes the whole hold back (10 − 100 = −90), the release gives
	// back (20 − 16) × 5 = 20: −70.
	tr, err := s.Settle(ctx, late, 4, ledgerdb.Units(16), "")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, tr.Job.State)
	requireSettled(t, tr.Job, 16)
	require.Equal(t, int64(-70), tr.BalanceAfter)
	h, err := s.History(ctx, acct, ledgerdb.HistoryPage{})
	require.NoError(t, err)
	n := len(h.Entries)
	require.Equal(t, ledgerdb.KindReclaim, h.Entries[n-2].Kind)
	require.Equal(t, int64(-100), h.Entries[n-2].Amount, "the reclaim is the whole hold, never shrunk")
	require.Equal(t, int64(-90), h.Entries[n-2].BalanceAfter, "the reclaim is written in full below zero")
	require.Equal(t, ledgerdb.KindRelease, h.Entries[n-1].Kind)
	require.Equal(t, int64(20), h.Entries[n-1].Amount)
	require.Equal(t, int64(-70), h.Entries[n-1].BalanceAfter)
	ledgertest.RequireBalance(t, s, acct, -70)

	// In debt, no new job is charged, metered or not.
	for _, k := range []string{ledgertest.Fixed(t, s, 1), ledgertest.Metered(t, s, 1, 1)} {
		next := ledgerdb.Submission{JobID: ledgertest.ID(t, "next"), AccountID: acct, Kind: k}
		_, err = s.Submit(ctx, next)
		require.NoError(t, err)
		_, err = s.Charge(ctx, next.Key())
		require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits, k)
	}
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "pay-debt"})
	require.NoError(t, err)
	ledgertest.RequireBalance(t, s, acct, 30)
}

// TestMeteredBadInputWritesNothing checks that every malformed submission, settlement and result
// report of a metered job gets a clear error and that nothing reaches the ledger (the price-list
// and sum-of-rows rules): a kind with no price (ErrUnknownKind, no job row), a maximum of units
// above the kind's (an error naming the kind's maximum, no job row), a negative or oversized
// maximum, and a negative usage on Settle and on RecordResult (no row; the job unchanged) — also
// when the SQL functions are called directly, past the Go validation.
func TestMeteredBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 3, 20)
	acct := ledgertest.Account(t, s, 1000)

	noJob := func(key ledgerdb.JobKey) {
		t.Helper()
		_, err := s.Job(ctx, key)
		require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, "job %s was written", key)
	}
	key := ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "job")}
	id := key.JobID
	_, err := s.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: ledgertest.OwnKind(t)})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind)
	noJob(key)

	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: kind, MaxUnits: 21})
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "max units", invalid.Field)
	require.Contains(t, err.Error(), "at most 20", "the error names the kind's maximum")
	noJob(key)
	_, err = s.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, s, 40), MaxUnits: 2})
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)
	require.Contains(t, err.Error(), "at most 1")
	noJob(key)
	for _, units := range []int64{-1, math.MinInt64, ledgerdb.MaxUnits + 1, math.MaxInt64} {
		_, err = s.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: kind, MaxUnits: units})
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "max units %d", units)
		noJob(key)
	}
	// Past the Go validation, the function itself refuses a hold of no units.
	for _, units := range []int64{0, -5, 21} {
		var outcome string
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT outcome FROM ledger_submit($1, $2, $3, $4, $5, $6)`,
			key.String(), acct, kind, units, []byte{1}, []byte("x")).Scan(&outcome))
		require.Equal(t, "units_above_max", outcome, "max units %d", units)
		noJob(key)
	}

	running := meteredCharged(t, s, acct, kind, 0).Job.Key()
	refunded := meteredCharged(t, s, acct, kind, 0).Job.Key()
	_, err = s.Refund(ctx, refunded, ledgerdb.ReasonTimedOut, "timed out", 3)
	require.NoError(t, err)
	before := map[ledgerdb.JobKey]ledgerdb.Job{}
	for _, job := range []ledgerdb.JobKey{running, refunded} {
		before[job], err = s.Job(ctx, job)
		require.NoError(t, err)
		for _, units := range []int64{-1, math.MinInt64} {
			_, err := s.Settle(ctx, job, 1, ledgerdb.Units(units), "")
			require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "settle with usage %d", units)
			require.Contains(t, err.Error(), "units used")
			_, err = s.RecordResult(ctx, ledgerdb.ResultReport{Key: job, Attempt: 1, OutputRef: "s3://out", UnitsUsed: ledgerdb.Units(units)})
			require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "result with usage %d", units)
		}
		// The functions refuse it too: the settle raises invalid_parameter_value, the inbox's
		// CHECK a violation, and each rolls back whole.
		_, err = s.Pool().Exec(ctx, `SELECT ledger_settle($1, 1, -1)`, job.String())
		requireSQLState(t, err, "22023")
		_, err = s.Pool().Exec(ctx, `SELECT ledger_record_result($1, 1, 's3://out', NULL, -1)`, job.String())
		requireSQLState(t, err, "23514")
	}
	_, err = s.Settle(ctx, ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "never")}, 1, ledgerdb.Units(-1), "")
	require.ErrorIs(t, err, ledgerdb.ErrInvalidInput)

	for _, job := range []ledgerdb.JobKey{running, refunded} {
		after, err := s.Job(ctx, job)
		require.NoError(t, err)
		require.Equal(t, before[job], after, "job %s changed", job)
		var reports int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM result_reports WHERE job_id = $1`, job.String()).Scan(&reports))
		require.Zero(t, reports)
	}
	ledgertest.RequireRows(t, s, running, 60, ledgerdb.KindCharge)
	ledgertest.RequireRows(t, s, refunded, 60, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireBalance(t, s, acct, 1000-60)
}

// TestRecordResultCarriesUsage checks the idempotent-doors rule at the report door for a metered
// job: a report carries the units its work used; the same report again answers AlreadyApplied; a
// report of the same attempt with another usage, or with a usage where the first had none, is a
// conflict and changes nothing; the inbox hands the recorded usage on (UnappliedResults).
func TestRecordResultCarriesUsage(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct := ledgertest.Account(t, s, 1000)
	job := meteredCharged(t, s, acct, ledgertest.Metered(t, s, 3, 20), 0).Job.Key()

	report := ledgerdb.ResultReport{Key: job, Attempt: 1, OutputRef: "s3://out/1", UnitsUsed: ledgerdb.Units(13)}
	rec, err := s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, rec.Outcome)
	rec, err = s.RecordResult(ctx, report)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, rec.Outcome)
	for name, usage := range map[string]*int64{"another usage": ledgerdb.Units(14), "zero": ledgerdb.Units(0), "none": nil} {
		other := report
		other.UnitsUsed = usage
		_, err := s.RecordResult(ctx, other)
		require.ErrorIs(t, err, ledgerdb.ErrConflict, name)
	}

	unmetered := ledgerdb.ResultReport{Key: job, Attempt: 2, OutputRef: "s3://out/2"}
	_, err = s.RecordResult(ctx, unmetered)
	require.NoError(t, err)
	withUsage := unmetered
	withUsage.UnitsUsed = ledgerdb.Units(5)
	_, err = s.RecordResult(ctx, withUsage)
	require.ErrorIs(t, err, ledgerdb.ErrConflict, "a usage where the first report had none")

	pending, err := s.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	byAttempt := map[int]*int64{}
	for _, p := range pending {
		byAttempt[p.Report.Attempt] = p.Report.UnitsUsed
	}
	require.NotNil(t, byAttempt[1])
	require.Equal(t, int64(13), *byAttempt[1])
	require.Nil(t, byAttempt[2])
	ledgertest.RequireBalance(t, s, acct, 940)
}

// TestReleaseKeepsTheBalanceBound checks the bounded balances of docs/design.md ("Job transitions
// never raise the upper exposure") for the release: every account keeps its balance plus the
// holds of its running jobs at most ledgerdb.MaxBalance, so that a refund, a reclaim — and a
// release, which is never refused either — always fits. A release may only come in the step
// that ends the job's running (Settle, with the delivery or the reclaim), whose hold the bound
// counted; the original version's Deliver and Reclaim settle a priced job at its whole hold at
// once. On each path — delivered or recovered by the old steps, settled by Settle while running
// or after a refund — grants fill the account to the bound (the last ones refused), then Settle
// reports zero units: the balance never passes MaxBalance, and after an old step the Settle
// answers AlreadyApplied and writes nothing.
//
// A regression test: it failed while Deliver and Reclaim left a metered job unsettled — the job,
// no longer running, left the bound while its hold stood, the grants filled the account to
// MaxBalance, and the later Settle released 10^6 credits past it.
func TestReleaseKeepsTheBalanceBound(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	kind := ledgertest.Metered(t, s, 1000, 1000) // a hold of 10^6
	const hold = 1_000_000
	for _, c := range []struct {
		name string
		// before takes the job where it stands before the grants.
		before func(job ledgerdb.JobKey) error
		// outcome is what the Settle answers; rows the job's rows at the end.
		outcome ledgerdb.Outcome
		rows    []ledgerdb.EntryKind
	}{
		{"delivered by the original step", func(job ledgerdb.JobKey) error {
			_, err := s.Deliver(ctx, job, 1)
			return err
		}, ledgerdb.AlreadyApplied, []ledgerdb.EntryKind{ledgerdb.KindCharge}},
		{"recovered by the original step", func(job ledgerdb.JobKey) error {
			if _, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 1); err != nil {
				return err
			}
			_, err := s.Reclaim(ctx, job)
			return err
		}, ledgerdb.AlreadyApplied, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim}},
		{"running, settled in one step", func(ledgerdb.JobKey) error { return nil },
			ledgerdb.Applied, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRelease}},
		{"refunded, its late result settled in one step", func(job ledgerdb.JobKey) error {
			_, err := s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "timed out", 1)
			return err
		}, ledgerdb.Applied, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim, ledgerdb.KindRelease}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			acct := ledgertest.Account(t, s, hold)
			job := meteredCharged(t, s, acct, kind, 0).Job.Key()
			require.NoError(t, c.before(job))

			// Grants up to the bound, MaxAmount at a time; the ledger may refuse the last ones.
			var wg sync.WaitGroup
			for i := range ledgerdb.MaxBalance / ledgerdb.MaxAmount {
				wg.Go(func() {
					_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: ledgerdb.MaxAmount, Key: fmt.Sprintf("fill-%d", i)})
					if err != nil && !errors.Is(err, ledgerdb.ErrBalanceOutOfRange) {
						t.Errorf("grant %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			// Then exactly to the bound: the balance plus the hold of the job if it still runs.
			j, err := s.Job(ctx, job)
			require.NoError(t, err)
			exposure, err := s.Balance(ctx, acct)
			require.NoError(t, err)
			if j.State == ledgerdb.StateRunning {
				exposure += j.Cost
			}
			if room := ledgerdb.MaxBalance - exposure; room > 0 {
				_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: room, Key: "top-up"})
				require.NoError(t, err)
			}
			_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 1, Key: "one-past"})
			require.ErrorIs(t, err, ledgerdb.ErrBalanceOutOfRange, "the account is on the bound")

			before, err := s.Balance(ctx, acct)
			require.NoError(t, err)
			tr, err := s.Settle(ctx, job, 1, ledgerdb.Units(0), "")
			require.NoError(t, err)
			require.Equal(t, c.outcome, tr.Outcome)
			balance, err := s.Balance(ctx, acct)
			require.NoError(t, err)
			require.LessOrEqual(t, balance, ledgerdb.MaxBalance, "the release took the balance %d past the bound", balance-ledgerdb.MaxBalance)
			if c.outcome == ledgerdb.AlreadyApplied {
				requireSettled(t, tr.Job, 1000)
				require.Zero(t, tr.EntryID)
				require.Equal(t, before, balance, "nothing written")
			} else {
				requireSettled(t, tr.Job, 0)
				require.Equal(t, ledgerdb.MaxBalance, balance, "the whole hold released, exactly onto the bound")
			}
			var kinds []ledgerdb.EntryKind
			for _, r := range ledgertest.Rows(t, s, job) {
				kinds = append(kinds, r.Kind)
			}
			require.Equal(t, c.rows, kinds)
			ledgertest.RequireSound(t, s, acct)
		})
	}
}
