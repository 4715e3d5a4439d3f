package chaos

// The revenue check: each run account's revenue report over the run reconciles, chains across
// two periods, and agrees with what the account's paid blocks say.

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// checkRevenue reads the account's revenue report over the run, and over its two halves, and
// checks that each reconciles — deferred_opening + granted − recognised − lapsed + adjusted =
// deferred_closing, in credits and in money — that the first half's closing is the second's
// opening, that nothing was deferred before the account was opened, and that the report agrees
// with the blocks: granted is what the paid blocks were granted, lapsed what expire rows took
// from them, and deferred at the end what they hold and what jobs still running hold of them,
// each at its block's cost basis.
func (r *run) checkRevenue(ctx context.Context, a accountCredits, t *CreditTotals) ([]string, error) {
	from, to := r.start.Add(-time.Minute), time.Now().Add(time.Minute)
	mid := from.Add(to.Sub(from) / 2)
	var reps [3]ledgerdb.Revenue
	for i, p := range [][2]time.Time{{from, to}, {from, mid}, {mid, to}} {
		rep, err := r.ledger.Revenue(ctx, p[0], p[1], a.id)
		if err != nil {
			return nil, err
		}
		reps[i] = rep
	}
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, "revenue: "+fmt.Sprintf(format, args...))
	}
	for _, rep := range reps {
		if c, m := reconciled(rep); c != rep.DeferredClosing.Credits || m.Cmp(decimal(rep.DeferredClosing.Amount)) != 0 {
			bad("from %s to %s: opening + granted − recognised − lapsed + adjusted is %d credits (%s), but closing is %d (%s)",
				rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), c, m.FloatString(10), rep.DeferredClosing.Credits, rep.DeferredClosing.Amount)
		}
	}
	whole, first, second := reps[0], reps[1], reps[2]
	if !sameMoney(first.DeferredClosing, second.DeferredOpening) {
		bad("the first half closes with %+v deferred, the second opens with %+v", first.DeferredClosing, second.DeferredOpening)
	}
	if !sameMoney(whole.DeferredOpening, ledgerdb.Money{Amount: "0"}) {
		bad("%+v deferred before the account was opened", whole.DeferredOpening)
	}
	basis := map[int64]string{}
	var held, granted, lapsed ledgerdb.Money
	for _, b := range a.blocks {
		basis[b.ID] = b.CostBasis
		if b.Category == ledgerdb.CategoryPaid && b.Status == ledgerdb.BlockActive {
			held = plus(held, b.Remaining, b.CostBasis)
			granted = plus(granted, b.Amount, b.CostBasis)
		}
	}
	// Paid credits a job still running holds stay deferred: only delivered work is revenue.
	running, err := r.ledger.Pool().Query(ctx, `SELECT m.block_id, -sum(m.amount)::bigint
		FROM jobs j JOIN ledger_entries e ON e.job_id = j.id AND e.kind = 'charge'
		JOIN ledger_block_moves m ON m.entry_id = e.id
		WHERE j.account_id = $1 AND j.state = 'running' AND m.block_id IS NOT NULL GROUP BY m.block_id`, a.id)
	if err != nil {
		return nil, err
	}
	for running.Next() {
		var block, credits int64
		if err := running.Scan(&block, &credits); err != nil {
			return nil, err
		}
		for _, b := range a.blocks {
			if b.ID == block && b.Category == ledgerdb.CategoryPaid {
				held = plus(held, credits, b.CostBasis)
			}
		}
	}
	if err := running.Err(); err != nil {
		return nil, err
	}
	for _, e := range a.order {
		if e.Kind == ledgerdb.KindExpire && e.Block != nil && e.Block.Category == ledgerdb.CategoryPaid {
			lapsed = plus(lapsed, -e.Amount, basis[e.Block.ID])
		}
	}
	for _, c := range []struct {
		what          string
		report, books ledgerdb.Money
	}{{"granted", whole.Granted, granted}, {"lapsed", whole.Lapsed, lapsed}, {"deferred at the end", whole.DeferredClosing, held}} {
		if !sameMoney(c.report, c.books) {
			bad("%s is %+v, but the paid blocks say %+v", c.what, c.report, c.books)
		}
	}
	t.Granted += whole.Granted.Credits
	t.Recognised += whole.Recognised.Credits
	t.Lapsed += whole.Lapsed.Credits
	return problems, nil
}

// reconciled is deferred_opening + granted − recognised − lapsed + adjusted, in credits and money.
func reconciled(rep ledgerdb.Revenue) (int64, *big.Rat) {
	c := rep.DeferredOpening.Credits + rep.Granted.Credits - rep.Recognised.Credits - rep.Lapsed.Credits + rep.Adjusted.Credits
	m := new(big.Rat).Set(decimal(rep.DeferredOpening.Amount))
	m.Add(m, decimal(rep.Granted.Amount))
	m.Sub(m, decimal(rep.Recognised.Amount))
	m.Sub(m, decimal(rep.Lapsed.Amount))
	m.Add(m, decimal(rep.Adjusted.Amount))
	return c, m
}

// plus adds credits at a cost basis (empty: no money) to m.
func plus(m ledgerdb.Money, credits int64, basis string) ledgerdb.Money {
	worth := new(big.Rat).Mul(big.NewRat(credits, 1), decimal(basis))
	// 18 decimals: a cost basis has at most 18, so the sum is exact.
	return ledgerdb.Money{Credits: m.Credits + credits, Amount: worth.Add(worth, decimal(m.Amount)).FloatString(18)}
}

// sameMoney reports whether two figures are the same credits and the same money.
func sameMoney(a, b ledgerdb.Money) bool {
	return a.Credits == b.Credits && decimal(a.Amount).Cmp(decimal(b.Amount)) == 0
}

// decimal reads a decimal figure; empty (a block without a cost basis) reads as zero.
func decimal(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return new(big.Rat)
	}
	return r
}
