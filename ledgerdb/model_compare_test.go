package ledgerdb_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgermodel"
)

// farFuture ends the all-time reports: every row so far lies before it.
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

func sortStrings(s []string) { slices.Sort(s) }

// compare reads everything the ledger holds of the account and fails on the first difference
// from the model.
func (r *modelRun) compare(acct string) {
	r.t.Helper()
	ctx := context.Background()
	a := r.model.Accounts[acct]
	balance, err := r.s.Balance(ctx, acct)
	if err != nil {
		r.fail("balance: %v", err)
	}
	if balance != a.Balance {
		r.fail("%s: balance %d, the model says %d (%s)", acct, balance, a.Balance, a)
	}
	r.compareBlocks(acct, a)
	entries := r.compareRows(acct, a)
	r.compareMoves(acct, a, entries)
	ids := make([]int64, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	r.compareEvents(acct, ids)
	r.compareJobs(acct, a)
	r.compareStatement(acct, a, r.opened, farFuture, ledgermodel.Snapshot{}, a.Snap())
	r.compareRevenue(acct, r.opened, farFuture, ledgermodel.Snapshot{}, a.Snap())
	report, err := r.s.Audit(ctx, acct)
	if err != nil {
		r.fail("audit: %v", err)
	}
	if !report.OK() {
		r.fail("%s: the audit found %v", acct, report.Violations)
	}
}

// compareBlocks checks each block's remaining credits, its status and whether the expiry pass
// removed it, and the debt: what the blocks hold less the balance.
func (r *modelRun) compareBlocks(acct string, a *ledgermodel.Account) {
	blocks, err := r.s.Blocks(context.Background(), acct)
	if err != nil {
		r.fail("blocks: %v", err)
	}
	if len(blocks) != len(a.Blocks) {
		r.fail("%s: %d blocks, the model has %d (%s)", acct, len(blocks), len(a.Blocks), a)
	}
	byID := map[int64]ledgerdb.Block{}
	var held int64
	for _, b := range blocks {
		byID[b.ID] = b
		held += b.Remaining
	}
	for i, mb := range a.Blocks {
		b := byID[r.blocks[acct][i]]
		if b.Remaining != mb.Remaining || string(b.Status) != mb.Status {
			r.fail("%s: block %d holds %d (%s), the model says %d (%s); %s", acct, i, b.Remaining, b.Status, mb.Remaining, mb.Status, a)
		}
		if mb.Status == ledgermodel.Active && (b.ExpiredAt != nil) != mb.Expired {
			r.fail("%s: block %d expired %v, the model says %v", acct, i, b.ExpiredAt != nil, mb.Expired)
		}
	}
	if debt := held - a.Balance; debt != a.Debt() {
		r.fail("%s: debt %d, the model says %d (%s)", acct, debt, a.Debt(), a)
	}
}

// compareRows checks every row: its kind, amount, job, block and the row that caused it, in
// order, and answers the ledger's rows.
func (r *modelRun) compareRows(acct string, a *ledgermodel.Account) []ledgerdb.Entry {
	var entries []ledgerdb.Entry
	for page := (ledgerdb.HistoryPage{Limit: 1000}); ; {
		h, err := r.s.History(context.Background(), acct, page)
		if err != nil {
			r.fail("history: %v", err)
		}
		entries = append(entries, h.Entries...)
		if h.NextAfterID == 0 {
			break
		}
		page.AfterID = h.NextAfterID
	}
	if len(entries) != len(a.Rows) {
		r.fail("%s: %d rows, the model has %d", acct, len(entries), len(a.Rows))
	}
	for i, e := range entries {
		m := a.Rows[i]
		block := int64(0)
		if e.Block != nil {
			block = e.Block.ID
		}
		wantBlock, wantCause := int64(0), int64(0)
		if m.Block != ledgermodel.Debt {
			wantBlock = r.blocks[acct][m.Block]
		}
		if m.CausedBy >= 0 {
			wantCause = entries[m.CausedBy].ID
		}
		if string(e.Kind) != m.Kind || e.Amount != m.Amount || e.JobID != m.Job || block != wantBlock || e.CausedBy != wantCause {
			r.fail("%s: row %d is %s %d job %q block %d caused by %d; the model says %s %d job %q block %d caused by %d",
				acct, i, e.Kind, e.Amount, e.JobID, block, e.CausedBy, m.Kind, m.Amount, m.Job, wantBlock, wantCause)
		}
	}
	return entries
}

// compareMoves checks where each row moved its credits: what it put into or took out of each
// block, and drew on or paid of the debt.
func (r *modelRun) compareMoves(acct string, a *ledgermodel.Account, entries []ledgerdb.Entry) {
	rows, err := r.s.Pool().Query(context.Background(), `SELECT entry_id, coalesce(block_id, 0), sum(amount)::bigint
		FROM ledger_block_moves WHERE account_id = $1 GROUP BY 1, 2 HAVING sum(amount) <> 0`, acct)
	if err != nil {
		r.fail("moves: %v", err)
	}
	got := map[[2]int64]int64{}
	for rows.Next() {
		var entry, block, amount int64
		if err := rows.Scan(&entry, &block, &amount); err != nil {
			r.fail("moves: %v", err)
		}
		got[[2]int64{entry, block}] = amount
	}
	if err := rows.Err(); err != nil {
		r.fail("moves: %v", err)
	}
	want := map[[2]int64]int64{}
	for i, row := range a.Rows {
		for _, mv := range row.Moves {
			block := int64(0)
			if mv.Block != ledgermodel.Debt {
				block = r.blocks[acct][mv.Block]
			}
			want[[2]int64{entries[i].ID, block}] += mv.Amount
		}
	}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		r.fail("%s: the rows' moves (row, block: credits; block 0 the debt) are %v, the model says %v", acct, got, want)
	}
}

// compareJobs checks every job's state, guard flags, usage and figures.
func (r *modelRun) compareJobs(acct string, a *ledgermodel.Account) {
	for id, mj := range a.Jobs {
		j, err := r.s.Job(context.Background(), ledgerdb.JobKey{AccountID: acct, JobID: id})
		if err != nil {
			r.fail("job %s: %v", id, err)
		}
		used := int64(-1)
		if j.UnitsUsed != nil {
			used = *j.UnitsUsed
		}
		wantUsed := int64(-1)
		if mj.Settled {
			wantUsed = mj.Used
		}
		wantCharged := int64(0)
		if mj.MoneyCharged() {
			wantCharged = -mj.Net()
		}
		got := fmt.Sprintf("%s before %q charged=%v refunded=%v reclaimed=%v settled=%v used %d cost %d charged %d released %d",
			j.State, j.StateBeforeDelete, j.IsCharged, j.IsRefunded, j.IsReclaimed, j.IsSettled, used, j.Cost, j.Charged(), j.Released())
		want := fmt.Sprintf("%s before %q charged=%v refunded=%v reclaimed=%v settled=%v used %d cost %d charged %d released %d",
			mj.State, mj.Before, mj.Charged, mj.Refunded, mj.Reclaimed, mj.Settled, wantUsed, mj.Hold(), wantCharged, mj.Released())
		if got != want {
			r.fail("%s: job %s is %s; the model says %s", acct, id, got, want)
		}
	}
}

// compareStatement checks the statement of [from, to) against the model's rows between the two
// snapshots: opening + lines = closing.
func (r *modelRun) compareStatement(acct string, a *ledgermodel.Account, from, to time.Time, fromSnap, toSnap ledgermodel.Snapshot) {
	st, err := r.s.Statement(context.Background(), acct, from, to)
	if err != nil {
		r.fail("statement: %v", err)
	}
	if st.Opening != fromSnap.Balance || st.Closing != toSnap.Balance {
		r.fail("%s: statement opens at %d and closes at %d, the model says %d and %d", acct, st.Opening, st.Closing, fromSnap.Balance, toSnap.Balance)
	}
	got := map[ledgermodel.StatementLine]ledgermodel.StatementLine{}
	for _, l := range st.Lines {
		key := ledgermodel.StatementLine{Kind: string(l.Kind), Category: string(l.Category), JobKind: l.JobKind}
		line := key
		line.Rows, line.Amount = l.Rows, l.Amount
		got[key] = line
	}
	if want := a.Statement(fromSnap, toSnap); fmt.Sprint(got) != fmt.Sprint(want) {
		r.fail("%s: the statement's lines are %v, the model says %v", acct, got, want)
	}
}

// compareRevenue checks the revenue report of [from, to) against the model's figures between the
// two snapshots, credits and their worth.
func (r *modelRun) compareRevenue(acct string, from, to time.Time, fromSnap, toSnap ledgermodel.Snapshot) {
	rev, err := r.s.Revenue(context.Background(), from, to, acct)
	if err != nil {
		r.fail("revenue: %v", err)
	}
	want := ledgermodel.Period(fromSnap, toSnap)
	check := func(name string, got ledgerdb.Money, want ledgermodel.Money) {
		worth, ok := new(big.Rat).SetString(got.Amount)
		if !ok || got.Credits != want.Credits || worth.Cmp(want.Worth()) != 0 {
			r.fail("%s: revenue %s is %d credits worth %s, the model says %d worth %s", acct, name, got.Credits, got.Amount,
				want.Credits, want.Worth().FloatString(12))
		}
	}
	check("deferred at the start", rev.DeferredOpening, fromSnap.Deferred)
	check("granted", rev.Granted, want.Granted)
	check("recognised", rev.Recognised, want.Recognised)
	check("lapsed", rev.Lapsed, want.Lapsed)
	check("adjusted", rev.Adjusted, want.Adjusted)
	check("deferred at the end", rev.DeferredClosing, toSnap.Deferred)
	if rev.PromotionalSpent != want.PromotionalSpent {
		r.fail("%s: promotional spent %d, the model says %d", acct, rev.PromotionalSpent, want.PromotionalSpent)
	}
}

// checkPeriods splits the reports at the step chosen for it: each period's statement and revenue
// say what the model's figures did between its two moments, and one period ends where the next
// begins.
func (r *modelRun) checkPeriods() {
	if r.cutSnaps == nil {
		return
	}
	for _, acct := range r.accounts {
		a := r.model.Accounts[acct]
		cut, end := r.cutSnaps[acct], a.Snap()
		r.compareStatement(acct, a, r.opened, r.cut, ledgermodel.Snapshot{}, cut)
		r.compareStatement(acct, a, r.cut, farFuture, cut, end)
		r.compareRevenue(acct, r.opened, r.cut, ledgermodel.Snapshot{}, cut)
		r.compareRevenue(acct, r.cut, farFuture, cut, end)
	}
}
