package ledgerdb_test

// The ledger held to the reference model of the money rules (package ledgermodel): the real
// Postgres functions and the model take the same long random sequences of operations, on several
// accounts at once, and after every step the test compares what the rules say with what the
// ledger holds — balances, each block's remaining and status, the debt, every row's kind,
// amount, job, block and moves, every job's money, the statement, the revenue report, and the
// audit. The books can balance and still be wrong; a model of the rules cannot be fooled by
// that.
//
// Tuned by environment variables, so that a failure replays and a long soak runs by hand:
//
//	JOBBILL_MODEL_SEED       the seed (default: the clock; every failure prints it)
//	JOBBILL_MODEL_SEQUENCES  how many sequences (default 3)
//	JOBBILL_MODEL_STEPS      steps per sequence (default 120)
//	JOBBILL_MODEL_ACCOUNTS   accounts per sequence, interleaved (default 3)

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgermodel"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestLedgerHeldToTheModel checks every money rule of docs/design.md as a rule, not as arithmetic:
// after each random step (grants paid, promotional, pending, starting later and expiring; charges
// of jobs sold by the job and by the GPU-second; refunds; settlements with usages; late results;
// deletes; adjustments; a block's start or expiry passing between any two steps; the expiry pass;
// top-up rules; and repeats of earlier steps, which must change nothing: the idempotent-doors
// rule), the ledger must hold exactly what the model says.
func TestLedgerHeldToTheModel(t *testing.T) {
	s := ledgertest.Store(t)
	seed := uint64(rndEnvInt(t, "JOBBILL_MODEL_SEED", int(time.Now().UnixNano()&(1<<62-1))))
	sequences, steps := 3, 120
	sequences = rndEnvInt(t, "JOBBILL_MODEL_SEQUENCES", sequences)
	steps = rndEnvInt(t, "JOBBILL_MODEL_STEPS", steps)
	accounts := rndEnvInt(t, "JOBBILL_MODEL_ACCOUNTS", 3)
	kinds := modelKinds(t, s)
	total := 0
	for seq := range sequences {
		r := newModelRun(t, s, kinds, seed, seq, accounts)
		for step := range steps {
			r.step(step)
			total++
		}
		r.checkPeriods()
	}
	t.Logf("seed %d: %d steps held to the model", seed, total)
}

// modelKind is a price the sequences submit jobs at.
type modelKind struct {
	name               string
	metered            bool
	unitPrice, maxUnit int64
}

func modelKinds(t *testing.T, s *ledgerdb.Store) []modelKind {
	return []modelKind{
		{name: ledgertest.Fixed(t, s, 20), unitPrice: 20, maxUnit: 1},
		{name: ledgertest.Fixed(t, s, 35), unitPrice: 35, maxUnit: 1},
		{name: ledgertest.Metered(t, s, 2, 25), metered: true, unitPrice: 2, maxUnit: 25},
		{name: ledgertest.Metered(t, s, 3, 10), metered: true, unitPrice: 3, maxUnit: 10},
	}
}

// modelRun is one sequence: its accounts in the ledger and in the model.
type modelRun struct {
	t        *testing.T
	s        *ledgerdb.Store
	kinds    []modelKind
	rng      *rand.Rand
	seed     uint64
	seq      int
	model    *ledgermodel.Model
	accounts []string
	// blocks maps each account's model block number to the ledger's block ID.
	blocks map[string][]int64
	// jobKinds is each job's kind, by account and job.
	jobKinds map[string]map[string]modelKind
	// opened and cut are the database's clock when the accounts opened and at a step chosen to
	// split the reports in two periods; snaps are the model's figures at those moments.
	opened, cut time.Time
	cutSnaps    map[string]ledgermodel.Snapshot
	cutStep     int
	done        []modelStep // the steps so far, to repeat one
	log         []string    // every step, "step account: what"
	failing     string      // the account of the step under way
}

// modelStep is a step done, to do again.
type modelStep struct {
	acct, what string
	op         func()
}

func newModelRun(t *testing.T, s *ledgerdb.Store, kinds []modelKind, seed uint64, seq, accounts int) *modelRun {
	r := &modelRun{t: t, s: s, kinds: kinds, rng: rand.New(rand.NewPCG(seed, uint64(seq))), seed: seed, seq: seq,
		model: ledgermodel.New(), blocks: map[string][]int64{}, jobKinds: map[string]map[string]modelKind{}}
	r.opened = ledgertest.Now(t, s)
	for range accounts {
		acct := blockAccount(t, s)
		r.accounts = append(r.accounts, acct)
		r.model.Open(acct)
		r.jobKinds[acct] = map[string]modelKind{}
		r.blocks[acct] = []int64{r.blockByKey(acct, "")}
		r.listen(acct)
	}
	r.cutStep = 10 + r.rng.IntN(40)
	return r
}

func (r *modelRun) fail(format string, args ...any) {
	r.t.Helper()
	var tail []string
	for _, l := range r.log {
		if strings.Contains(l, " "+r.failing+":") || strings.Contains(l, "expiry pass") {
			tail = append(tail, l)
		}
	}
	if len(tail) > 25 {
		tail = tail[len(tail)-25:]
	}
	r.t.Fatalf("seed %d sequence %d (replay with JOBBILL_MODEL_SEED=%d): %s\nthe last steps of the step's account:\n  %s",
		r.seed, r.seq, r.seed, fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

// step runs one random operation on one account, in the ledger and the model, then compares.
func (r *modelRun) step(n int) {
	if n == r.cutStep {
		r.cut = ledgertest.Now(r.t, r.s)
		r.cutSnaps = map[string]ledgermodel.Snapshot{}
		for _, acct := range r.accounts {
			r.cutSnaps[acct] = r.model.Accounts[acct].Snap()
		}
	}
	acct := r.accounts[r.rng.IntN(len(r.accounts))]
	a := r.model.Accounts[acct]
	var op func()
	var what string
	switch x := r.rng.IntN(100); {
	case x < 14:
		what, op = r.grant(acct, a)
	case x < 18:
		what, op = r.settlePending(acct, a)
	case x < 22:
		what, op = r.adjust(acct, a)
	case x < 44:
		what, op = r.submitAndCharge(acct, a)
	case x < 54:
		what, op = r.refund(acct, a)
	case x < 66:
		what, op = r.settle(acct, a, ledgermodel.Running)
	case x < 74:
		what, op = r.settle(acct, a, ledgermodel.Refunded)
	case x < 78:
		what, op = r.remove(acct, a)
	case x < 84:
		what, op = r.passExpiry(acct, a)
	case x < 87:
		what, op = r.startBlock(acct, a)
	case x < 92:
		what, op = "expiry pass", r.expiryPass
	case x < 94:
		what, op = r.topUpRule(acct, a)
	case len(r.done) > 0:
		// A repeat of an earlier step, delivered again: the idempotent-doors rule says it leaves
		// the ledger as it is, and the model does nothing for it either.
		i := r.rng.IntN(len(r.done))
		acct, what, op = r.done[i].acct, "again: "+r.done[i].what, r.done[i].op
	}
	if op == nil {
		return
	}
	r.log = append(r.log, fmt.Sprintf("%d %s: %s", n, acct, what))
	r.failing = acct
	op()
	r.done = append(r.done, modelStep{acct: acct, what: what, op: op})
	// A step moves its own account's money only; the expiry pass moves every account's.
	for _, other := range r.accounts {
		if other == acct || strings.Contains(what, "expiry pass") || strings.Contains(what, "past its expiry") {
			r.compare(other)
		}
	}
}

// grant posts a grant of random terms: paid with or without a cost basis, or promotional; of a
// priority; expiring or not; starting later; pending its payment.
func (r *modelRun) grant(acct string, a *ledgermodel.Account) (string, func()) {
	amount := int64(10 + r.rng.IntN(120))
	terms := ledgermodel.Terms{Category: ledgermodel.Paid, Priority: int32(r.rng.IntN(3)),
		StartsLater: r.rng.IntN(8) == 0, Pending: r.rng.IntN(8) == 0}
	real := ledgerdb.BlockTerms{Category: ledgerdb.CategoryPaid, Priority: terms.Priority}
	switch r.rng.IntN(4) {
	case 0:
		terms.Category, real.Category = ledgermodel.Promotional, ledgerdb.CategoryPromotional
	case 1:
		real.CostBasis = []string{"0.01", "0.0125", "0.000001"}[r.rng.IntN(3)]
		terms.CostBasis, _ = new(big.Rat).SetString(real.CostBasis)
	}
	now := ledgertest.Now(r.t, r.s)
	if terms.StartsLater {
		at := now.Add(30 * 24 * time.Hour)
		real.EffectiveAt = &at
	}
	if r.rng.IntN(2) == 0 || terms.Category == ledgermodel.Promotional {
		at := now.Add(time.Duration(40+r.rng.IntN(60)) * 24 * time.Hour).Truncate(time.Microsecond)
		real.ExpiresAt, terms.ExpiresAt = &at, &at
	}
	key := ledgertest.ID(r.t, "grant")
	what := fmt.Sprintf("grant %s %d %+v", key, amount, terms)
	return what, func() { r.doGrant(acct, key, amount, terms, real) }
}

// doGrant posts a grant in the ledger and the model.
func (r *modelRun) doGrant(acct, key string, amount int64, terms ledgermodel.Terms, real ledgerdb.BlockTerms) {
	a := r.model.Accounts[acct]
	if p, ok := a.Keys[key]; ok && (a.Blocks[p.Block].TimePassed || terms.StartsLater && a.Blocks[p.Block].Started) {
		// The test moved the block's clock: its terms are no longer the grant's, so a repeat
		// would be another grant under the same key (a conflict), not this one again.
		return
	}
	_, err := r.s.Grant(context.Background(), ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key, Block: real, Pending: terms.Pending})
	before := len(a.Blocks)
	r.outcome(fmt.Sprintf("grant %s", key), a.Grant(key, amount, terms), err)
	if len(a.Blocks) > before {
		r.blocks[acct] = append(r.blocks[acct], r.blockByKey(acct, key))
	}
}

// blockByKey answers the ledger's ID of the account's block with the key ("" the opening block).
func (r *modelRun) blockByKey(acct, key string) int64 {
	blocks, err := r.s.Blocks(context.Background(), acct)
	if err != nil {
		r.fail("reading the blocks: %v", err)
	}
	for _, b := range blocks {
		if b.Key == key && (key != "" || b.Opening) {
			return b.ID
		}
	}
	r.fail("no block of key %q", key)
	return 0
}

func (r *modelRun) settlePending(acct string, a *ledgermodel.Account) (string, func()) {
	var keys []string
	for i, b := range a.Blocks {
		if b.Key != "" && (b.Status == ledgermodel.Pending || r.rng.IntN(6) == 0) {
			keys = append(keys, a.Blocks[i].Key)
		}
	}
	if len(keys) == 0 {
		return "", nil
	}
	key, paid := keys[r.rng.IntN(len(keys))], r.rng.IntN(5) > 0
	what := fmt.Sprintf("settle pending grant %s paid=%v", key, paid)
	return what, func() {
		_, err := r.s.SettlePendingGrant(context.Background(), acct, key, paid)
		r.outcome(what, a.SettlePending(key, paid), err)
	}
}

func (r *modelRun) adjust(acct string, a *ledgermodel.Account) (string, func()) {
	amount := int64(r.rng.IntN(80) - 50)
	if amount == 0 {
		amount = 1
	}
	key := ledgertest.ID(r.t, "adjust")
	what := fmt.Sprintf("adjust %s %+d", key, amount)
	return what, func() { r.doAdjust(acct, key, amount) }
}

// doAdjust posts an adjustment in the ledger and the model.
func (r *modelRun) doAdjust(acct, key string, amount int64) {
	_, err := r.s.Adjust(context.Background(), ledgerdb.Credit{AccountID: acct, Amount: amount, Key: key, Memo: "model"})
	r.outcome(fmt.Sprintf("adjust %s %+d", key, amount), r.model.Accounts[acct].Adjust(key, amount), err)
}

func (r *modelRun) submitAndCharge(acct string, a *ledgermodel.Account) (string, func()) {
	k := r.kinds[r.rng.IntN(len(r.kinds))]
	held := k.maxUnit
	if k.metered && r.rng.IntN(3) == 0 {
		held = 1 + int64(r.rng.IntN(int(k.maxUnit)))
	}
	id := ledgertest.ID(r.t, "job")
	what := fmt.Sprintf("submit and charge %s (%s, %d units)", id, k.name, held)
	return what, func() { r.doCharge(acct, id, k, held) }
}

// doCharge submits a job and charges it, in the ledger and the model.
func (r *modelRun) doCharge(acct, id string, k modelKind, held int64) {
	ctx := context.Background()
	a := r.model.Accounts[acct]
	r.jobKinds[acct][id] = k
	sub := ledgerdb.Submission{JobID: id, AccountID: acct, Kind: k.name, Request: []byte("model")}
	if k.metered {
		sub.MaxUnits = held
	}
	_, err := r.s.Submit(ctx, sub)
	if r.outcome("submit "+id, a.Submit(id, k.name, k.metered, k.unitPrice, held), err) == ledgermodel.Gone {
		return
	}
	_, err = r.s.Charge(ctx, ledgerdb.JobKey{AccountID: acct, JobID: id})
	r.outcome("charge "+id, a.Charge(id), err)
}

// pick answers a random job of the account in one of the states (a deleted job by the state it
// was deleted from).
func (r *modelRun) pick(a *ledgermodel.Account, states ...string) string {
	var ids []string
	for id, j := range a.Jobs {
		for _, st := range states {
			if j.State == st || j.State == ledgermodel.Deleted && j.Before == st {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return ""
	}
	sortStrings(ids)
	return ids[r.rng.IntN(len(ids))]
}

func (r *modelRun) refund(acct string, a *ledgermodel.Account) (string, func()) {
	id := r.pick(a, ledgermodel.Running)
	if id == "" {
		return "", nil
	}
	return "refund " + id, func() { r.doRefund(acct, id) }
}

// doRefund refunds a job in the ledger and the model.
func (r *modelRun) doRefund(acct, id string) {
	_, err := r.s.Refund(context.Background(), ledgerdb.JobKey{AccountID: acct, JobID: id}, ledgerdb.ReasonTimedOut, "", 1)
	r.outcome("refund "+id, r.model.Accounts[acct].Refund(id), err)
}

// settle reports a result for a job in the state: none, zero, within the hold, the hold, above
// it (capped), or negative (refused, nothing written).
func (r *modelRun) settle(acct string, a *ledgermodel.Account, state string) (string, func()) {
	id := r.pick(a, state)
	if id == "" {
		return "", nil
	}
	j := a.Jobs[id]
	var units *int64
	if j.Metered {
		switch x := r.rng.IntN(10); {
		case x == 0:
		case x == 1:
			units = ledgerdb.Units(-1)
		case x == 2:
			units = ledgerdb.Units(j.HeldUnits + 3)
		default:
			units = ledgerdb.Units(int64(r.rng.IntN(int(j.HeldUnits) + 1)))
		}
	}
	what := fmt.Sprintf("result for %s (%s) units %v", id, state, deref(units))
	return what, func() { r.doSettle(acct, id, units) }
}

// doSettle reports a job's result in the ledger and the model.
func (r *modelRun) doSettle(acct, id string, units *int64) {
	_, err := r.s.Settle(context.Background(), ledgerdb.JobKey{AccountID: acct, JobID: id}, 1, units, "")
	r.outcome(fmt.Sprintf("result for %s units %s", id, deref(units)), r.model.Accounts[acct].Settle(id, units), err)
}

func deref(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func (r *modelRun) remove(acct string, a *ledgermodel.Account) (string, func()) {
	id := r.pick(a, ledgermodel.Rejected, ledgermodel.Delivered, ledgermodel.Refunded, ledgermodel.Recovered, ledgermodel.Running)
	if id == "" {
		return "", nil
	}
	return "delete " + id, func() {
		_, err := r.s.Delete(context.Background(), ledgerdb.JobKey{AccountID: acct, JobID: id})
		r.outcome("delete "+id, a.Delete(id), err)
	}
}

// passExpiry makes a started block's expiry pass, and the expiry pass run (between any two
// steps, as time would).
func (r *modelRun) passExpiry(acct string, a *ledgermodel.Account) (string, func()) {
	var live []int
	for i, b := range a.Blocks {
		if b.Started && !b.TimePassed && !b.Opening && b.Status != ledgermodel.Void {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return "", nil
	}
	b := live[r.rng.IntN(len(live))]
	what := fmt.Sprintf("block %d past its expiry", b)
	return what, func() { r.doPassExpiry(acct, b) }
}

// doPassExpiry makes block b's expiry pass in the ledger, tells the model when it passed, and
// runs the expiry pass at once: the pass is the database's, and other packages' tests run it on
// the same database at any moment, so a block of ours left due between two steps could be
// expired by them behind the model's back.
func (r *modelRun) doPassExpiry(acct string, b int) {
	ledgertest.PassBlockExpiry(r.t, r.blocks[acct][b])
	var at time.Time
	if err := r.s.Pool().QueryRow(context.Background(), `SELECT expires_at FROM credit_blocks WHERE id = $1`,
		r.blocks[acct][b]).Scan(&at); err != nil {
		r.fail("reading block %d's expiry: %v", b, err)
	}
	r.model.Accounts[acct].PassExpiry(b, at)
	r.expiryPass()
}

// startBlock makes a block granted to start later start now.
func (r *modelRun) startBlock(acct string, a *ledgermodel.Account) (string, func()) {
	for i, b := range a.Blocks {
		if !b.Started {
			what := fmt.Sprintf("block %d starts", i)
			return what, func() {
				_, err := ledgertest.OwnerPool(r.t).Exec(context.Background(),
					`UPDATE credit_blocks SET effective_at = least(effective_at, now()) WHERE id = $1`, r.blocks[acct][i])
				if err != nil {
					r.fail("starting block %d: %v", i, err)
				}
				a.StartBlock(i)
			}
		}
	}
	return "", nil
}

// expiryPass runs the expiry pass until nothing is due, as the scheduled pass does: every due
// block of the database, in the model every account's.
func (r *modelRun) expiryPass() {
	for more := true; more; {
		var err error
		if _, more, err = r.s.ExpireBlocks(context.Background(), ledgerdb.MaxExpiriesPerCall); err != nil {
			r.fail("expiry pass: %v", err)
		}
	}
	for _, acct := range r.accounts {
		r.model.Accounts[acct].ExpiryPass()
	}
}

func (r *modelRun) topUpRule(acct string, a *ledgermodel.Account) (string, func()) {
	if r.rng.IntN(4) == 0 {
		return "remove the top-up rule", func() {
			if _, err := r.s.RemoveTopUpRule(context.Background(), acct); err != nil {
				r.fail("removing the rule: %v", err)
			}
			a.SetTopUp(nil)
		}
	}
	rule := ledgermodel.TopUpRule{Threshold: int64(20 + r.rng.IntN(60)), Mode: ledgermodel.Fixed, Amount: int64(50 + r.rng.IntN(100)),
		MonthlyCap: int64(100 + r.rng.IntN(300))}
	if r.rng.IntN(2) == 0 {
		rule.Mode, rule.Amount = ledgermodel.Target, rule.Threshold+int64(50+r.rng.IntN(100))
	}
	what := fmt.Sprintf("top-up rule %+v", rule)
	return what, func() {
		_, err := r.s.SetTopUpRule(context.Background(), ledgerdb.TopUpRule{AccountID: acct, Threshold: rule.Threshold,
			Mode: ledgerdb.TopUpMode(rule.Mode), Amount: rule.Amount, MonthlyCap: rule.MonthlyCap})
		if err != nil {
			r.fail("%s: %v", what, err)
		}
		a.SetTopUp(&rule)
	}
}

// outcome compares a call's answer with the model's: applied or already applied is no error;
// every refusal is the error the ledger documents for it.
func (r *modelRun) outcome(what string, want ledgermodel.Outcome, err error) ledgermodel.Outcome {
	r.t.Helper()
	var ok bool
	switch want {
	case ledgermodel.Applied, ledgermodel.AlreadyApplied, ledgermodel.NotApplied:
		ok = err == nil
	case ledgermodel.Insufficient:
		ok = errors.Is(err, ledgerdb.ErrInsufficientCredits) || errors.Is(err, ledgerdb.ErrRejected)
	case ledgermodel.Gone:
		ok = errors.Is(err, ledgerdb.ErrGone)
	case ledgermodel.Conflict:
		ok = errors.Is(err, ledgerdb.ErrConflict)
	case ledgermodel.Refused:
		ok = errors.Is(err, ledgerdb.ErrInvalidInput) || errors.Is(err, ledgerdb.ErrJobActive)
	case ledgermodel.Expired:
		ok = errors.Is(err, ledgerdb.ErrGrantExpired)
	case ledgermodel.NotFound:
		ok = err != nil
	}
	if !ok {
		r.fail("%s: the ledger answered %v, the model %s", what, err, want)
	}
	return want
}
