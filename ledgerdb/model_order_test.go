package ledgerdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgermodel"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestSameEventsInAnyOrderEndWithTheSameMoney checks that order does not matter where the rules
// say it does not: a debt is paid by the first credits that reach the account, whatever their
// way in, so the same refunds, settlements, late results (reclaims that may run into debt),
// grants and negative adjustments, applied in different orders before an expiry, end — once
// every block has expired — with the same balance and the same debt. Each order runs on an
// account of its own, set up the same way (blocks, all expiring, drawn by running and refunded
// jobs), and is held to the model after every step too.
func TestSameEventsInAnyOrderEndWithTheSameMoney(t *testing.T) {
	s := ledgertest.Store(t)
	seed := uint64(rndEnvInt(t, "JOBBILL_MODEL_SEED", int(time.Now().UnixNano()&(1<<62-1))))
	scenarios := 6
	if testing.Short() {
		scenarios = 2
	}
	kinds := modelKinds(t, s)
	for sc := range scenarios {
		const orders = 3
		r := newModelRun(t, s, kinds, seed, 1000+sc, orders)
		plan := rand.New(rand.NewPCG(seed, uint64(sc)))
		events := orderScenario(r, plan)
		var finals []string
		for o, acct := range r.accounts {
			order := make([]int, len(events))
			for i := range order {
				order[i] = i
			}
			switch o {
			case 1:
				slices.Reverse(order)
			case 2:
				plan.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			for _, i := range order {
				r.log = append(r.log, fmt.Sprintf("%d %s: %s", i, acct, events[i].what))
				r.failing = acct
				events[i].op(acct)
				r.compare(acct)
			}
			a := r.model.Accounts[acct]
			for b := range a.Blocks {
				if !a.Blocks[b].Opening && !a.Blocks[b].TimePassed {
					r.doPassExpiry(acct, b)
				}
			}
			r.expiryPass()
			r.compare(acct)
			finals = append(finals, r.ledgerMoney(acct))
		}
		for o := range finals {
			if finals[o] != finals[0] {
				r.fail("the same events in another order end with %s, where the first order ends with %s", finals[o], finals[0])
			}
		}
	}
	t.Logf("seed %d: %d scenarios, each in three orders, end with the same money", seed, scenarios)
}

// orderEvent is one event of a scenario, applied to any of its accounts.
type orderEvent struct {
	what string
	op   func(acct string)
}

// orderScenario sets up every account of the run the same way — one to three blocks that all
// expire, jobs charged from them, some refunded, the rest spent — and answers the events to apply in different
// orders: each running job refunded or settled, each refunded job's late result, a grant, and a
// negative adjustment.
func orderScenario(r *modelRun, plan *rand.Rand) []orderEvent {
	expires := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Microsecond)
	type block struct {
		amount int64
		terms  ledgermodel.Terms
		real   ledgerdb.BlockTerms
	}
	var blocks []block
	for i := range 1 + plan.IntN(3) {
		at := expires.Add(time.Duration(i) * time.Hour)
		b := block{amount: int64(40 + plan.IntN(100)),
			terms: ledgermodel.Terms{Category: ledgermodel.Promotional, ExpiresAt: &at},
			real:  ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &at}}
		if plan.IntN(2) == 0 {
			b.terms.Category, b.real.Category = ledgermodel.Paid, ledgerdb.CategoryPaid
		}
		blocks = append(blocks, b)
	}
	type job struct {
		id       string
		k        modelKind
		refunded bool
		units    *int64
	}
	var jobs []job
	for range 2 + plan.IntN(4) {
		k := r.kinds[plan.IntN(len(r.kinds))]
		j := job{id: fmt.Sprintf("job-%d", plan.Uint64()), k: k, refunded: plan.IntN(3) == 0}
		if k.metered {
			j.units = ledgerdb.Units(int64(plan.IntN(int(k.maxUnit) + 1)))
		}
		jobs = append(jobs, j)
	}
	for o, acct := range r.accounts {
		for i, b := range blocks {
			r.doGrant(acct, fmt.Sprintf("setup-%d-%d", o, i), b.amount, b.terms, b.real)
		}
		for _, j := range jobs {
			r.doCharge(acct, j.id, j.k, j.k.maxUnit)
			if j.refunded {
				r.doRefund(acct, j.id)
			}
		}
		// What the jobs left spendable is spent too, so that a late result runs into debt
		// unless credits come back first.
		if left := r.model.Accounts[acct].Spendable(); left > 0 {
			r.doAdjust(acct, fmt.Sprintf("spend-%d", o), -left)
		}
		r.compare(acct)
	}
	var events []orderEvent
	for _, j := range jobs {
		switch {
		case j.refunded:
			events = append(events, orderEvent{"late result for " + j.id, func(acct string) { r.doSettle(acct, j.id, j.units) }})
		case plan.IntN(2) == 0:
			events = append(events, orderEvent{"refund " + j.id, func(acct string) { r.doRefund(acct, j.id) }})
		default:
			events = append(events, orderEvent{"result for " + j.id, func(acct string) { r.doSettle(acct, j.id, j.units) }})
		}
	}
	grant := int64(10 + plan.IntN(80))
	at := expires.Add(5 * time.Hour)
	terms := ledgermodel.Terms{Category: ledgermodel.Paid, ExpiresAt: &at}
	events = append(events, orderEvent{fmt.Sprintf("grant %d", grant), func(acct string) {
		r.doGrant(acct, "later-"+acct, grant, terms, ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, ExpiresAt: &at})
	}})
	adjust := -int64(5 + plan.IntN(60))
	events = append(events, orderEvent{fmt.Sprintf("adjust %d", adjust), func(acct string) { r.doAdjust(acct, "adjust-"+acct, adjust) }})
	return events
}

// ledgerMoney tells the account's balance and debt as the ledger holds them.
func (r *modelRun) ledgerMoney(acct string) string {
	ctx := context.Background()
	balance, err := r.s.Balance(ctx, acct)
	if err != nil {
		r.fail("balance: %v", err)
	}
	blocks, err := r.s.Blocks(ctx, acct)
	if err != nil {
		r.fail("blocks: %v", err)
	}
	held := int64(0)
	for _, b := range blocks {
		held += b.Remaining
	}
	return fmt.Sprintf("balance %d debt %d", balance, held-balance)
}
