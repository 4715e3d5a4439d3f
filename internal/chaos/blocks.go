package chaos

// The credit mix: the blocks each account is granted at the start — promotional and paid, of
// different priorities, one starting mid-run, at least one expiring mid-run — and the pending
// grants the run confirms or voids mid-run, all drawn from the seed.

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// The run's cost bases: what a customer paid per credit of a paid block.
const (
	costBasis         = "0.000001"
	costBasisExpiring = "0.000002"
)

// blockGrant is one grant the run posts to an account at its start.
type blockGrant struct {
	key    string
	amount int64
	// terms are the block's terms but for its times, which startAfter and expireAfter set from
	// the moment it is granted (0: at once, never).
	terms                   ledgerdb.BlockTerms
	startAfter, expireAfter time.Duration
	// pending posts it pending its payment, which settleAfter later is confirmed (paid) or fails.
	pending     bool
	paid        bool
	settleAfter time.Duration
}

// creditMix is the run's credit blocks, pending grants and automatic top-up as the seed drew
// them.
type creditMix struct {
	grants map[string][]blockGrant // by account
	// rule is the automatic top-up of the poor account, paid by the receiver.
	rule     ledgerdb.TopUpRule
	receiver *topUpReceiver
	// grantedAt, under mu, is when the first block was granted: every offset of the mix counts
	// from it.
	mu        sync.Mutex
	grantedAt time.Time
}

// planCredits draws the credit mix from the seed, from a stream of its own so that it changes none
// of the jobs' choices. A rich account gets a promotional block spent first and expiring in the
// first half of the submissions, a paid block of a higher cost spent next and expiring in the
// second half, a promotional block that starts mid-run, the paid block that pays for most of its
// jobs, and two pending grants: one confirmed mid-run, one whose payment fails. The poor account
// gets a small promotional block expiring mid-run and a small paid one, and the automatic top-up
// rule whose requests the run's receiver pays.
func (r *run) planCredits() *creditMix {
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed^0x5bd1e9955bd1e995, r.cfg.Seed+1))
	phase := submissionPhase(r.cfg)
	at := func(from, span float64) time.Duration {
		return time.Duration(float64(phase) * (from + span*rng.Float64()))
	}
	promo := func(priority int32) ledgerdb.BlockTerms {
		return ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, Priority: priority}
	}
	paid := func(priority int32, basis string) ledgerdb.BlockTerms {
		return ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, Priority: priority, CostBasis: basis}
	}
	m := &creditMix{grants: map[string][]blockGrant{}}
	for _, id := range r.accounts[:richAccounts] {
		m.grants[id] = []blockGrant{
			{key: "chaos-promo-expiring", amount: 600, terms: promo(0), expireAfter: at(0.25, 0.2)},
			{key: "chaos-paid-expiring", amount: 800, terms: paid(0, costBasisExpiring), expireAfter: at(0.55, 0.2)},
			{key: "chaos-promo-later", amount: 300, terms: promo(1), startAfter: at(0.4, 0.2)},
			{key: "chaos-paid", amount: int64(2 * maxCost * r.cfg.Jobs), terms: paid(1, costBasis)},
			{key: "chaos-pending-paid", amount: 500, terms: paid(2, costBasis), pending: true, paid: true, settleAfter: at(0.2, 0.6)},
			{key: "chaos-pending-failed", amount: 500, terms: paid(2, costBasis), pending: true, settleAfter: at(0.2, 0.6)},
		}
	}
	poor := r.accounts[richAccounts]
	m.grants[poor] = []blockGrant{
		{key: "chaos-promo-expiring", amount: 40, terms: promo(0), expireAfter: at(0.25, 0.2)},
		{key: "chaos-paid", amount: 60, terms: paid(1, costBasis)},
	}
	m.rule = ledgerdb.TopUpRule{AccountID: poor, Threshold: 50, Mode: ledgerdb.TopUpFixed, Amount: 60, MonthlyCap: 150}
	if rng.IntN(2) == 1 {
		m.rule.Mode, m.rule.Amount = ledgerdb.TopUpTarget, 120
	}
	r.logCredits(m)
	return m
}

// logCredits prints the credit mix in the plan's lines.
func (r *run) logCredits(m *creditMix) {
	for _, id := range r.accounts {
		for _, g := range m.grants[id] {
			var when string
			switch {
			case g.pending && g.paid:
				when = fmt.Sprintf(", pending, confirmed at +%.3fs", g.settleAfter.Seconds())
			case g.pending:
				when = fmt.Sprintf(", pending, its payment failing at +%.3fs", g.settleAfter.Seconds())
			case g.expireAfter > 0:
				when = fmt.Sprintf(", expiring at +%.3fs", g.expireAfter.Seconds())
			case g.startAfter > 0:
				when = fmt.Sprintf(", starting at +%.3fs", g.startAfter.Seconds())
			}
			fmt.Fprintf(r.out, "plan: %s %s: %d credits, %s priority %d%s\n", id, g.key, g.amount, g.terms.Category, g.terms.Priority, when)
		}
	}
	fmt.Fprintf(r.out, "plan: %s top-up rule: below %d, %s %d, at most %d a month\n",
		m.rule.AccountID, m.rule.Threshold, m.rule.Mode, m.rule.Amount, m.rule.MonthlyCap)
}

// grantCredits posts the account's planned grants, each block's times counted from now.
func (r *run) grantCredits(ctx context.Context, accountID string) error {
	m := r.credits
	m.mu.Lock()
	if m.grantedAt.IsZero() {
		m.grantedAt = time.Now()
	}
	base := m.grantedAt
	m.mu.Unlock()
	for _, g := range m.grants[accountID] {
		terms := g.terms
		if g.startAfter > 0 {
			t := base.Add(g.startAfter)
			terms.EffectiveAt = &t
		}
		if g.expireAfter > 0 {
			t := base.Add(g.expireAfter)
			terms.ExpiresAt = &t
		}
		c := ledgerdb.Credit{AccountID: accountID, Amount: g.amount, Key: g.key, Memo: "chaos run", Block: terms, Pending: g.pending}
		if _, err := r.ledger.Grant(ctx, c); err != nil {
			return fmt.Errorf("chaos: granting %s to %s: %w", g.key, accountID, err)
		}
	}
	return nil
}

// pendingSettle is one pending grant's settlement, due at its offset from the grants.
type pendingSettle struct {
	accountID, key string
	paid           bool
	at             time.Duration
}

// settlePending confirms or fails each pending grant at its planned moment, while jobs draw from
// the account's blocks: as a payment provider's answer would, twice at once (a redelivered
// callback), then the other way, which must be refused.
func (r *run) settlePending(ctx context.Context) {
	m := r.credits
	var due []pendingSettle
	for id, grants := range m.grants {
		for _, g := range grants {
			if g.pending {
				due = append(due, pendingSettle{accountID: id, key: g.key, paid: g.paid, at: g.settleAfter})
			}
		}
	}
	sort.Slice(due, func(a, b int) bool { return due[a].at < due[b].at })
	m.mu.Lock()
	base := m.grantedAt
	m.mu.Unlock()
	for _, s := range due {
		sleep(ctx, time.Until(base.Add(s.at)))
		if ctx.Err() != nil {
			return
		}
		r.settleOne(ctx, s)
	}
}

// settleOne settles one pending grant twice at once — one call applies it, the other answers
// AlreadyApplied — and then the other way, which must answer ErrConflict.
func (r *run) settleOne(ctx context.Context, s pendingSettle) {
	outcomes := make([]ledgerdb.Outcome, 2)
	errs := make([]error, 2)
	var both sync.WaitGroup
	for k := range 2 {
		both.Go(func() {
			errs[k] = r.retry(ctx, func(ctx context.Context) error {
				p, err := r.ledger.SettlePendingGrant(ctx, s.accountID, s.key, s.paid)
				outcomes[k] = p.Outcome
				return err
			})
		})
	}
	both.Wait()
	what := map[bool]string{true: "confirmed paid", false: "voided (its payment failed)"}[s.paid]
	if err := errors.Join(errs...); err != nil {
		r.anomaly("pending grant %s of %s could not be %s: %v", s.key, s.accountID, what, err)
		return
	}
	if outcomes[0] == ledgerdb.Applied && outcomes[1] == ledgerdb.Applied {
		r.anomaly("pending grant %s of %s was %s twice by two calls at once", s.key, s.accountID, what)
	}
	err := r.retry(ctx, func(ctx context.Context) error {
		_, err := r.ledger.SettlePendingGrant(ctx, s.accountID, s.key, !s.paid)
		return err
	})
	if !errors.Is(err, ledgerdb.ErrConflict) {
		r.anomaly("pending grant %s of %s, %s, settled the other way: want ErrConflict, got %v", s.key, s.accountID, what, err)
	}
	r.logf("pending_grant", "%s of %s %s: %s, %s; settling it the other way refused", s.key, s.accountID, what, outcomes[0], outcomes[1])
}
