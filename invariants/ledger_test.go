package invariants_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestLedgerRulesInRolledBackTransaction breaks the reversing-pairs, net-effect and sum-of-rows
// rules inside a transaction that it rolls back, and reads the snapshot through that transaction: a
// grant row whose balance_after does not continue the running sum, booked without moving the
// balance (the sum-of-rows rule, twice), a credit block holding credits no row moved into it (the
// sum-of-rows rule: the blocks must hold the balance), and a charged job flagged refunded without its refund row
// (the reversing-pairs rule: flags without rows; the net-effect rule: its rows sum to −cost, its
// state says 0; the revenue rule: the paid credits its charge drew stay spent, recognised as revenue
// for work that was never delivered). After the rollback the same check finds nothing.
func TestLedgerRulesInRolledBackTransaction(t *testing.T) {
	t.Parallel()
	store := ledgertest.Store(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, store, 100)
	p := prefix("rollback")
	id := p + "charged"
	ledgertest.Charged(t, store, acct, id, 40, "x")

	scope := ledgerdb.SnapshotScope{JobIDPrefix: p}
	tx := ownerTx(t, ctx)
	exec(t, ctx, tx, `INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key)
		VALUES ($1, 'grant', 7, 999, 'invariants-test')`, acct)
	exec(t, ctx, tx, `UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), refund_reason_code = 'unknown' WHERE id = $1`,
		ledgerdb.JobKey{AccountID: acct, JobID: id}.String())
	exec(t, ctx, tx, `UPDATE credit_blocks SET remaining = remaining + 5 WHERE account_id = $1 AND NOT is_opening`, acct)
	got := map[invariants.Kind][]string{}
	for _, v := range checkIn(t, ctx, tx, scope) {
		got[v.Kind] = append(got[v.Kind], v.Message)
	}
	require.Len(t, got[invariants.KindAccountBalance], 4,
		"balance ≠ sum of rows, a refunded job the account's awaiting-reclaim record does not count, blocks that do not hold the balance, and a broken balance_after chain")
	require.Contains(t, got[invariants.KindAccountBalance][0], "balance is 60 but its 3 ledger rows sum to 67")
	require.Contains(t, got[invariants.KindAccountBalance][1], "records 0 credits of refunds awaiting a possible reclaim, but its refunded jobs cost 40")
	require.Contains(t, got[invariants.KindAccountBalance][2], "its credit blocks hold 65 and its debt is 0, but its balance is 60; 1 of its blocks do not hold what their moves add up to")
	require.Len(t, got[invariants.KindJobEntries], 1)
	require.Contains(t, got[invariants.KindJobEntries][0], "has 0 refund rows but its guard flags and settlement say 1")
	require.Len(t, got[invariants.KindJobNet], 1)
	require.Contains(t, got[invariants.KindJobNet][0], "its ledger rows sum to -40, but its state and settlement say 0")
	require.Len(t, got[invariants.KindUndeliveredRevenue], 1)
	require.Contains(t, got[invariants.KindUndeliveredRevenue][0], "revenue recognised for work not delivered: the revenue report recognises 40 paid credits (0) of all time, but delivered and recovered jobs and the debts of delivered work they paid account for 0 (0)")
	require.Contains(t, got[invariants.KindUndeliveredRevenue][0], ledgerdb.JobKey{AccountID: acct, JobID: id}.String())
	require.NoError(t, tx.Rollback(ctx))

	requireRolledBack(t, ctx, store, scope)
	ledgertest.RequireSound(t, store, acct)
}

// TestDebtBesideCreditsInRolledBackTransaction checks that the checker reports an account that
// owes a debt while one of its blocks that has not ended holds credits — a debt is paid by the
// first credits that reach the account (docs/design.md, "Credit blocks"), so such credits would
// be shown to the customer, and lapse with their block, while the debt stays owed. The state is
// made as the owner inside a transaction rolled back: a grant written without paying the debt,
// every sum still adding up. A block whose time has passed may hold credits beside a debt (they
// expire and pay nothing): the same grant into such a block is not reported.
func TestDebtBesideCreditsInRolledBackTransaction(t *testing.T) {
	t.Parallel()
	store := ledgertest.Store(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, store, 0)
	_, err := store.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -50, Key: "correction"})
	require.NoError(t, err)
	scope := ledgerdb.SnapshotScope{AccountID: acct}

	for _, c := range []struct {
		name, effective, expires string
		reported                 bool
	}{
		{"a spendable block", `now() - interval '1 hour'`, `now() + interval '30 days'`, true},
		{"a block not started yet", `now() + interval '1 day'`, `NULL`, true},
		{"a block past its expiry", `now() - interval '2 hours'`, `now() - interval '1 hour'`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx := ownerTx(t, ctx)
			exec(t, ctx, tx, `WITH b AS (
					INSERT INTO credit_blocks (account_id, category, amount, remaining, effective_at, expires_at, memo, idempotency_key)
					VALUES ($1, 'promotional', 30, 30, `+c.effective+`, `+c.expires+`, 'made by the test', 'invariants-test')
					RETURNING id
				), a AS (
					UPDATE accounts SET balance = balance + 30 WHERE id = $1 RETURNING balance
				), e AS (
					INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, block_id)
					SELECT $1, 'grant', 30, a.balance, 'invariants-test', b.id FROM a, b RETURNING id, block_id
				)
				INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount) SELECT $1, e.id, e.block_id, 30 FROM e`, acct)
			violations := checkIn(t, ctx, tx, scope)
			if !c.reported {
				require.Empty(t, violations)
				return
			}
			require.Len(t, violations, 1)
			require.Equal(t, invariants.KindDebtBesideCredits, violations[0].Kind)
			require.Equal(t, acct, violations[0].AccountID)
			require.Contains(t, violations[0].Message, "owes a debt of 50 while its credit blocks that have not ended hold 30 credits")
		})
	}
	requireRolledBack(t, ctx, store, scope)
}

// TestCheckLedgerOnRows checks the reversing-pairs and net-effect rules on rows the database
// refuses to hold (its UNIQUE constraint on (job, kind) and its guards stop them first): a job
// charged twice (−2×cost), a refund with no charge (+cost), a recovered job short of its reclaim, a
// metered job settled at 12 of its 30 GPU-seconds without the release of the other 18 (its net must
// be −12 × 2, not the whole hold); and one sound job of each settled state, metered ones included,
// which must pass. And the debt rule on accounts: a debt beside credits in blocks that have not
// ended is reported, beside credits of ended blocks (which expire and pay nothing) it is not.
// And the revenue rule on an account's figures: revenue the report recognises
// beyond what delivered work accounts for is reported, the jobs it names listed; an account whose
// two figures agree passes.
func TestCheckLedgerOnRows(t *testing.T) {
	t.Parallel()
	job := func(id string, state ledgerdb.State, charged, refunded, reclaimed bool) ledgerdb.Job {
		return ledgerdb.Job{ID: id, AccountID: "acme", Cost: 40, State: state,
			IsCharged: charged, IsRefunded: refunded, IsReclaimed: reclaimed}
	}
	metered := func(id string, state ledgerdb.State, refunded bool) ledgerdb.Job {
		j := job(id, state, true, refunded, refunded)
		j.Cost, j.Kind, j.Unit, j.UnitPrice, j.HeldUnits = 60, "gpu-render", ledgerdb.UnitGPUSecond, 2, 30
		j.IsSettled, j.UnitsUsed = true, ledgerdb.Units(12)
		return j
	}
	snap := ledgerdb.LedgerSnapshot{
		Accounts: []ledgerdb.AccountTotals{
			{AccountID: "acme", Balance: 100, EntrySum: 100, Entries: 9, BlocksHeld: 100, UnendedHeld: 100,
				Revenue: ledgerdb.RevenueAudit{Recognised: ledgerdb.Money{Credits: 64, Amount: "6.4"}, Delivered: ledgerdb.Money{Credits: 64, Amount: "6.4"}}},
			{AccountID: "beta", Revenue: ledgerdb.RevenueAudit{Recognised: ledgerdb.Money{Credits: 70, Amount: "7"},
				Delivered: ledgerdb.Money{Credits: 40, Amount: "4"}, UndeliveredJobs: []string{"beta/kept-spent"}}},
			// A debt beside credits that have ended (past their expiry, not yet removed) is sound.
			{AccountID: "lapsing", Balance: -20, EntrySum: -20, Entries: 3, BlocksHeld: 30, Debt: 50},
			{AccountID: "owing", Balance: -20, EntrySum: -20, Entries: 3, BlocksHeld: 30, Debt: 50, UnendedHeld: 30},
		},
		Jobs: []ledgerdb.JobTotals{
			{Job: job("sound-delivered", ledgerdb.StateDelivered, true, false, false), Charges: 1, EntrySum: -40},
			{Job: job("sound-refunded", ledgerdb.StateRefunded, true, true, false), Charges: 1, Refunds: 1, EntrySum: 0},
			{Job: job("sound-recovered", ledgerdb.StateRecovered, true, true, true), Charges: 1, Refunds: 1, Reclaims: 1, EntrySum: -40},
			{Job: job("sound-rejected", ledgerdb.StateRejected, false, false, false)},
			{Job: job("charged-twice", ledgerdb.StateDelivered, true, false, false), Charges: 2, EntrySum: -80},
			{Job: job("refund-only", ledgerdb.StateRejected, false, false, false), Refunds: 1, EntrySum: 40},
			{Job: job("short-reclaim", ledgerdb.StateRecovered, true, true, true), Charges: 1, Refunds: 1, EntrySum: 0},
			{Job: metered("sound-metered", ledgerdb.StateDelivered, false), Charges: 1, Releases: 1, EntrySum: -60 + 36},
			{Job: metered("sound-metered-late", ledgerdb.StateRecovered, true), Charges: 1, Refunds: 1, Reclaims: 1, Releases: 1, EntrySum: -60 + 36},
			{Job: metered("no-release", ledgerdb.StateDelivered, false), Charges: 1, EntrySum: -60},
		},
	}
	type key struct {
		kind invariants.Kind
		job  string
	}
	got := map[key]string{}
	for _, v := range invariants.CheckLedger(snap) {
		got[key{v.Kind, v.JobID}] = v.Message
	}
	want := map[key]string{
		{invariants.KindJobEntries, "charged-twice"}: "has 2 charge rows; a job has at most one",
		{invariants.KindJobNet, "charged-twice"}:     "rows sum to -80, but its state and settlement say -40",
		{invariants.KindJobEntries, "refund-only"}:   "has 1 refund rows but its guard flags and settlement say 0",
		{invariants.KindJobNet, "refund-only"}:       "rows sum to 40, but its state and settlement say 0",
		{invariants.KindJobEntries, "short-reclaim"}: "has 0 reclaim rows but its guard flags and settlement say 1",
		{invariants.KindJobNet, "short-reclaim"}:     "rows sum to 0, but its state and settlement say -40",
		{invariants.KindJobEntries, "no-release"}:    "has 0 release rows but its guard flags and settlement say 1",
		{invariants.KindJobNet, "no-release"}:        "12 units used at 2): its ledger rows sum to -60, but its state and settlement say -24",
		{invariants.KindDebtBesideCredits, ""}:       "account owing: it owes a debt of 50 while its credit blocks that have not ended hold 30 credits",
		{invariants.KindUndeliveredRevenue, ""}: "account beta: revenue recognised for work not delivered: the revenue report recognises 70 paid credits (7) of all time, " +
			"but delivered and recovered jobs and the debts of delivered work they paid account for 40 (4); jobs neither delivered nor recovered whose paid credits stay spent: beta/kept-spent.",
	}
	require.Len(t, got, len(want), "%v", got)
	for k, fragment := range want {
		require.Contains(t, got[k], fragment, "%s of %s", k.kind, k.job)
	}
}
