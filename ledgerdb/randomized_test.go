package ledgerdb_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// The randomized run is tuned by environment variables so that a failure seen in CI can be
// replayed exactly, and a long soak can be run by hand:
//
//	JOBBILL_RANDOM_SEQUENCES  how many sequences (default 2000; 200 with -short)
//	JOBBILL_RANDOM_SEED       the run's seed (default: the clock)
//	JOBBILL_RANDOM_ONLY       run only this sequence index of the seed (replays one failure)
//	JOBBILL_RANDOM_WORKERS    how many sequences run at once (default 16)
const (
	envRandomSequences = "JOBBILL_RANDOM_SEQUENCES"
	envRandomSeed      = "JOBBILL_RANDOM_SEED"
	envRandomOnly      = "JOBBILL_RANDOM_ONLY"
	envRandomWorkers   = "JOBBILL_RANDOM_WORKERS"
)

// TestRandomizedSequences drives thousands of seeded random event sequences (submit, charge,
// timeout->refund, late success->reclaim, deliver, settle with a usage, re-drive, delete,
// resubmission with the same or another body, kind or hold, the same ID from another account
// (another job: job IDs belong to their account, and this one is left untouched), grants, and
// duplicates of any of them) against an in-test model of what each call must answer, on jobs of kinds sold by the job
// and of metered kinds (several unit prices and maxima, some jobs holding a smaller maximum of
// their own), and after every step checks the reversing-pairs, net-effect, price-list, sum-of-rows,
// remembered-IDs and idempotent-doors rules: at most one row per kind per job, exactly the ones the
// model expects — charge −hold, refund +hold, reclaim −hold, and one release of (held − used) ×
// unit price once a settlement leaves part of the hold unused (the reversing-pairs rule); each
// job's rows summing to −hold when charged and unsettled, −used × unit price once settled, else 0
// (the net-effect rule); every row moving exactly what the job's recorded price says, whatever the
// resubmission or the reported usage said (the price-list rule); the balance equal to the sum of
// the rows and to the model, via store.Audit (the sum-of-rows rule); a deleted ID never submitted
// or charged again (the remembered-IDs rule), while a deleted refunded job's late result still
// reclaims its refund (deletion hides a job, never what it owes: the net-effect rule); and every
// repeated call answering as the model says, with nothing written (the idempotent-doors rule). A
// settle reports no usage, zero, a usage within the hold, the hold, one above it (capped), or a
// negative one (refused, nothing written); it lands on running jobs, refunded ones (a late result:
// reclaim and release in one step), and settled ones (AlreadyApplied with the recorded units,
// nothing written) — among them every job the original steps delivered or recovered, which know no
// usage and settle a priced job at its whole hold in the same step, with no release row, so that no
// release ever comes after the step that ended the job's running. Low-balance accounts exercise
// insufficient credits and the debt rule: a reclaim — of the whole hold for a metered job — may
// take the balance below zero, and a negative balance refuses every new charge.
func TestRandomizedSequences(t *testing.T) {
	store := ledgertest.Store(t)
	sequences := rndEnvInt(t, envRandomSequences, 2000)
	if testing.Short() && os.Getenv(envRandomSequences) == "" {
		sequences = 200
	}
	workers := rndEnvInt(t, envRandomWorkers, 16)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envRandomSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s", envRandomSeed)
		seed = v
	}
	indexes := make([]int, sequences)
	for i := range indexes {
		indexes[i] = i
	}
	if s := os.Getenv(envRandomOnly); s != "" {
		only, err := strconv.Atoi(s)
		require.NoError(t, err, "%s", envRandomOnly)
		indexes = []int{only}
	}
	t.Logf("seed %d: %d sequences on %d goroutines (replay with %s=%d)", seed, len(indexes), workers, envRandomSeed, seed)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// IDs come from the test goroutine: ledgertest.ID may call t.Fatal, which only it may do.
	prefix := ledgertest.ID(t, "rnd")
	other := ledgertest.Account(t, store, 0)
	// The kinds the sequences' jobs are priced at: sold by the job at 10 to 101 credits, and
	// metered by the GPU-second at a few unit prices and maxima. Their versions are read once:
	// tests never change these kinds' prices.
	pricing := rndPricing{fixed: map[int64]string{}, versions: map[string]int{}, unpriced: ledgertest.OwnKind(t)}
	for cost := int64(10); cost <= 101; cost++ {
		pricing.fixed[cost] = ledgertest.Fixed(t, store, cost)
	}
	for _, pm := range [][2]int64{{1, 50}, {2, 40}, {3, 30}, {4, 20}, {7, 10}} {
		pricing.metered = append(pricing.metered, ledgerdb.Price{Kind: ledgertest.Metered(t, store, pm[0], pm[1]), Unit: ledgerdb.UnitGPUSecond,
			UnitPrice: pm[0], MaxUnits: pm[1]})
	}
	list, err := store.Prices(ctx)
	require.NoError(t, err)
	for _, p := range list {
		pricing.versions[p.Kind] = p.Version
	}

	start := time.Now()
	feed := make(chan int)
	var (
		mu       sync.Mutex
		failures []string
		coverage = map[string]int{}
		steps    int
		failed   atomic.Int32
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for index := range feed {
				seq := newRndSequence(store, prefix, other, pricing, seed, index)
				err := seq.run(ctx)
				mu.Lock()
				steps += seq.steps
				for k, v := range seq.coverage {
					coverage[k] += v
				}
				if err != nil {
					failed.Add(1)
					failures = append(failures, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	for _, index := range indexes {
		// A handful of failures tells the story; thousands only bury it.
		if failed.Load() >= 5 || ctx.Err() != nil {
			break
		}
		feed <- index
	}
	close(feed)
	wg.Wait()
	elapsed := time.Since(start)

	t.Logf("seed %d: %d sequences, %d steps in %v (%.0f steps/s)", seed, len(indexes), steps, elapsed.Round(time.Millisecond),
		float64(steps)/elapsed.Seconds())
	keys := slices.Sorted(maps.Keys(coverage))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, coverage[k])
	}
	t.Logf("coverage:%s", b.String())

	for _, f := range failures {
		t.Error(f)
	}
	if len(failures) > 0 {
		t.Fatalf("seed %d: %d sequences failed; replay one with %s=%d %s=<sequence>", seed, len(failures), envRandomSeed, seed, envRandomOnly)
	}
	require.NoError(t, ctx.Err(), "seed %d: the run did not finish", seed)
	if len(indexes) >= 1000 {
		// The run is only worth its time if the rare branches were taken; with this many
		// sequences each of them is hit hundreds of times, so zero means the generator broke.
		for _, k := range []string{
			"charge:applied", "charge:insufficient", "charge:refused-while-in-debt", "reclaim:applied",
			"reclaim:into-debt", "refund:applied", "debt-story", "deliver:applied", "delete:applied", "delete:active",
			"submit:conflict", "submit:gone", "submit:unknown-account", "submit:other-account", "charge:gone", "submit:already", "redrive:recovered",
			"grant:conflict", "ghost:not-found",
			"deliver:metered-whole", "reclaim:metered-whole", "deliver:fixed-one", "reclaim:fixed-one",
			"settle:delivered", "settle:recovered", "settle:after-old-steps", "settle:again", "settle:not-charged",
			"settle:release", "settle:nil", "settle:zero", "settle:within", "settle:exact", "settle:capped", "settle:negative",
			"settle:reclaim-into-debt", "settle:fixed-zero", "submit:unknown-kind", "submit:same-hold", "submit:other-hold", "submit:metered",
			"submit:smaller-hold", "settle:tombstone", "reclaim:tombstone",
		} {
			require.Positive(t, coverage[k], "seed %d: no step covered %s", seed, k)
		}
	}
}

func rndEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	require.NoError(t, err, "%s", name)
	require.Positive(t, v, "%s", name)
	return v
}

// rndPricing is the price list the sequences' jobs are submitted at.
type rndPricing struct {
	// fixed are the kinds sold by the job, by price.
	fixed map[int64]string
	// metered are the metered kinds.
	metered []ledgerdb.Price
	// versions are the kinds' price versions.
	versions map[string]int
	// unpriced is a kind with no price.
	unpriced string
}

// rndJob is the model of one job: what the ledger must hold for it.
type rndJob struct {
	id string
	// key names the job in the sequence's account.
	key ledgerdb.JobKey
	// twin says the other account has submitted a job under the same ID: its own job, which
	// this one never sees (job IDs belong to their account).
	twin bool
	// kind is the job's kind; metered says it is one of rndPricing.metered (at index meteredAt),
	// else it is sold by the job at cost.
	kind      string
	metered   bool
	meteredAt int
	// unitPrice and held are the job's price and the units its charge holds; cost is their
	// product, what its charge, refund and reclaim move. maxUnits is the smaller maximum its
	// submission names (0: the kind's).
	unitPrice, held, cost, maxUnits int64
	request                         []byte
	exists                          bool
	// delivered says the job went running -> delivered, which is when delivered_at is set.
	delivered bool
	// byOldStep says the original version's Deliver or Reclaim settled the job (at its whole
	// hold), rather than Settle.
	byOldStep bool
	// job holds the modelled fields only: State, StateBeforeDelete, the flags, Attempts,
	// RejectReason, RefundReason and RefundDetail.
	job ledgerdb.Job
}

func (j *rndJob) net() int64 {
	if !j.exists {
		return 0
	}
	m := j.job
	m.Cost, m.UnitPrice, m.HeldUnits = j.cost, j.unitPrice, j.held
	return m.Net()
}

// released is what the job's release row must give back: (held − used) × unit price once
// settled, 0 before.
func (j *rndJob) released() int64 {
	if !j.exists || !j.job.IsSettled {
		return 0
	}
	return (j.held - *j.job.UnitsUsed) * j.unitPrice
}

// rndSubmitVariants are the bodies a submission may carry, by variant number: the job's own,
// then ones that differ in each part of the fingerprint, the job's own body from the other
// account (another job: job IDs belong to their account), from an account that does not exist,
// the job's own hold named explicitly (the same request), another hold, and a kind with no price.
var rndSubmitVariants = [...]string{"same body", "other request", "other kind", "other account", "unknown account",
	"same hold named", "other hold", "unknown kind"}

// rndStep is one generated event. It is plain data so that a duplicate delivery can replay it.
type rndStep struct {
	op       string
	job      int    // index into the sequence's jobs; -1 for account steps and ghosts
	variant  int    // submit: one of rndSubmitVariants; redrive: 0 fails, 1 succeeds
	attempts int    // refund, deliver, redrive, settle
	key      int    // grant: which key
	amount   int64  // grant
	usage    *int64 // settle: the units the result reports (nil: none)
}

func (s rndStep) String() string {
	switch s.op {
	case "grant":
		return fmt.Sprintf("grant key-%d %d", s.key, s.amount)
	case "ghost":
		return "ghost probes"
	case "submit":
		return fmt.Sprintf("submit job %d (%s)", s.job, rndSubmitVariants[s.variant])
	case "redrive":
		return fmt.Sprintf("redrive job %d (%s)", s.job, [...]string{"fails again", "succeeds"}[s.variant])
	case "charge", "reclaim", "delete":
		return fmt.Sprintf("%s job %d", s.op, s.job)
	case "settle":
		usage := "no usage"
		if s.usage != nil {
			usage = fmt.Sprintf("usage %d", *s.usage)
		}
		return fmt.Sprintf("settle job %d (attempts %d, %s)", s.job, s.attempts, usage)
	}
	return fmt.Sprintf("%s job %d (attempts %d)", s.op, s.job, s.attempts)
}

// rndSequence is one randomized sequence on its own account, with the model of that account.
type rndSequence struct {
	store   *ledgerdb.Store
	seed    uint64
	index   int
	rng     *rand.Rand
	account string
	initial int64
	balance int64
	jobs    []*rndJob
	ghost   ledgerdb.JobKey
	// other is an existing account shared by all sequences, nobody an account that never exists:
	// submissions under them carry another fingerprint.
	other, nobody string
	grants        map[int]int64 // key -> amount of every grant posted
	history       []string
	steps         int
	coverage      map[string]int
	// debtStory says the sequence opens with debtOpener.
	debtStory bool
	// pricing is the price list.
	pricing rndPricing
}

func newRndSequence(store *ledgerdb.Store, prefix, other string, pricing rndPricing, seed uint64, index int) *rndSequence {
	// Each sequence has its own generator, so that it replays the same whatever ran beside it.
	rng := rand.New(rand.NewPCG(seed, uint64(index)))
	s := &rndSequence{
		store: store, seed: seed, index: index, rng: rng,
		account:  fmt.Sprintf("%s-s%d", prefix, index),
		grants:   map[int]int64{},
		coverage: map[string]int{},
		ghost:    ledgerdb.JobKey{AccountID: fmt.Sprintf("%s-s%d", prefix, index), JobID: fmt.Sprintf("%s-s%d-ghost", prefix, index)},
		other:    other,
		nobody:   fmt.Sprintf("%s-s%d-nobody", prefix, index),
		pricing:  pricing,
	}
	// A third of the accounts are rich; the rest can pay for about one or two jobs, or none, so
	// that rejections and debt happen.
	switch rng.IntN(3) {
	case 0:
		s.initial = 10_000
	case 1:
		s.initial = 20 + rng.Int64N(150)
	default:
		s.initial = rng.Int64N(40)
	}
	jobs := 1 + rng.IntN(3)
	// One sequence in five opens with the story of the debt rule, which random events reach
	// too rarely: job 0 is charged and times out (refund), job 1 spends the refunded credits,
	// job 0's result lands late (reclaim, possibly below zero), and job 2 then asks to be charged.
	s.debtStory = rng.IntN(5) == 0
	if s.debtStory {
		jobs = 3
	}
	for k := range jobs {
		j := &rndJob{
			id:      fmt.Sprintf("%s-s%d-j%d", prefix, index, k),
			request: fmt.Appendf(nil, `{"render":"seq-%d-job-%d"}`, index, k),
		}
		j.key = ledgerdb.JobKey{AccountID: s.account, JobID: j.id}
		if rng.IntN(2) == 0 {
			// Metered: the kind's maximum, or (one job in three) a smaller one of its own.
			j.metered, j.meteredAt = true, rng.IntN(len(pricing.metered))
			p := pricing.metered[j.meteredAt]
			j.kind, j.unitPrice, j.held = p.Kind, p.UnitPrice, p.MaxUnits
			if rng.IntN(3) == 0 {
				j.maxUnits = 2 + rng.Int64N(p.MaxUnits-2)
				j.held = j.maxUnits
			}
		} else {
			j.unitPrice, j.held = 10+rng.Int64N(91), 1
			j.kind = pricing.fixed[j.unitPrice]
		}
		j.cost = j.unitPrice * j.held
		s.jobs = append(s.jobs, j)
	}
	if s.debtStory {
		s.initial = max(s.jobs[0].cost, s.jobs[1].cost) + rng.Int64N(30)
	}
	return s
}

// debtOpener is the debt story as events; the model decides what each must answer. A metered
// job 0's late result is settled with a usage (reclaim of the whole hold, then the release);
// one sold by the job takes the original steps (reclaim, then deliver).
func (s *rndSequence) debtOpener() []rndStep {
	late := rndStep{op: "success", job: 0, attempts: 4}
	if s.jobs[0].metered {
		late = rndStep{op: "settle", job: 0, attempts: 4, usage: s.usage(s.jobs[0], false)}
	}
	return []rndStep{
		{op: "submit", job: 0}, {op: "charge", job: 0}, {op: "refund", job: 0, attempts: 3},
		{op: "submit", job: 1}, {op: "charge", job: 1}, late,
		{op: "submit", job: 2}, {op: "charge", job: 2},
	}
}

// usage draws the usage a job's result reports: none, zero, within the hold, the hold, above
// it, or (when negative may) a negative one.
func (s *rndSequence) usage(j *rndJob, negative bool) *int64 {
	r := s.rng
	if negative && r.IntN(12) == 0 {
		return ledgerdb.Units(-1 - r.Int64N(5))
	}
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return ledgerdb.Units(0)
	case 2:
		if j.held > 1 {
			return ledgerdb.Units(1 + r.Int64N(j.held-1))
		}
		return ledgerdb.Units(1)
	case 3:
		return ledgerdb.Units(j.held)
	}
	return ledgerdb.Units(j.held + 1 + r.Int64N(100))
}

func (s *rndSequence) failf(format string, args ...any) error {
	return fmt.Errorf("seed %d sequence %d step %d: %s\n  replay: %s=%d %s=%d go test -run TestRandomizedSequences ./ledgerdb/\n  account %s (initial %d), steps so far:\n    %s",
		s.seed, s.index, len(s.history), fmt.Sprintf(format, args...), envRandomSeed, s.seed, envRandomOnly, s.index,
		s.account, s.initial, strings.Join(s.history, "\n    "))
}

func (s *rndSequence) run(ctx context.Context) error {
	if _, err := s.store.OpenAccount(ctx, s.account); err != nil {
		return s.failf("opening account: %v", err)
	}
	if s.initial > 0 {
		if _, err := s.store.Grant(ctx, ledgerdb.Credit{AccountID: s.account, Amount: s.initial, Key: "initial"}); err != nil {
			return s.failf("initial grant: %v", err)
		}
	}
	s.balance = s.initial

	var opener []rndStep
	if s.debtStory {
		opener = s.debtOpener()
		s.coverage["debt-story"]++
	}
	n := len(opener) + 4 + s.rng.IntN(9)
	for i := range n {
		var step rndStep
		if i < len(opener) {
			step = opener[i]
		} else {
			step = s.next()
		}
		if err := s.do(ctx, step); err != nil {
			return err
		}
		if s.rng.IntN(8) == 0 {
			// A duplicate delivery of the same event, exactly as it was sent.
			s.coverage["duplicate"]++
			if err := s.do(ctx, step); err != nil {
				return err
			}
		}
	}
	// The remembered-IDs rule once more at the end: every deleted ID refuses every way back in, and
	// still reads as its tombstone through the API.
	for _, j := range s.jobs {
		if !j.exists || j.job.State != ledgerdb.StateDeleted {
			continue
		}
		s.history = append(s.history, "final probes of "+j.id)
		if err := s.submit(ctx, j, 0); err != nil {
			return err
		}
		if err := s.submit(ctx, j, 1); err != nil {
			return err
		}
		if err := s.charge(ctx, j); err != nil {
			return err
		}
		got, err := s.store.Job(ctx, j.key)
		if err != nil {
			return s.failf("reading tombstone %s: %v", j.id, err)
		}
		if err := s.sameJob("read", j, got); err != nil {
			return err
		}
	}
	return s.check(ctx)
}

// next picks an event: mostly the one that moves the job along its life, so that deep states
// are reached, and otherwise any event at all, however out of place.
func (s *rndSequence) next() rndStep {
	r := s.rng
	k := r.IntN(len(s.jobs))
	j := s.jobs[k]
	attempts := 1 + r.IntN(5)
	step := rndStep{job: k, attempts: attempts, variant: r.IntN(3)}
	switch x := r.IntN(100); {
	case x < 4:
		return rndStep{op: "ghost", job: -1}
	case x < 10:
		// Grants: a new key, or an existing one again with the same or another amount.
		key, amount := len(s.grants), 10+r.Int64N(60)
		if len(s.grants) > 0 && r.IntN(2) == 0 {
			key = r.IntN(len(s.grants))
			amount = s.grants[key]
			if r.IntN(2) == 0 {
				amount++
			}
		}
		return rndStep{op: "grant", job: -1, key: key, amount: amount}
	case x < 30:
		ops := []string{"submit", "charge", "refund", "success", "deliver", "reclaim", "redrive", "delete", "settle"}
		step.op = ops[r.IntN(len(ops))]
		step.variant %= 2
		switch step.op {
		case "submit":
			step.variant = r.IntN(len(rndSubmitVariants))
		case "settle":
			step.usage = s.usage(j, true)
		}
		return step
	}
	step.variant = 0
	state := j.job.State
	if !j.exists {
		state = ""
	}
	pick := func(ops ...string) string { return ops[r.IntN(len(ops))] }
	switch state {
	case "":
		step.op = "submit"
	case ledgerdb.StateSubmitting:
		step.op = pick("charge", "charge", "submit", "delete")
	case ledgerdb.StateRunning:
		step.op = pick("refund", "success", "deliver", "redrive", "delete", "settle", "settle")
	case ledgerdb.StateRefunded:
		step.op = pick("success", "reclaim", "redrive", "delete", "refund", "settle", "settle")
	case ledgerdb.StateDeleted:
		step.op = pick("submit", "charge", "delete", "settle", "reclaim")
		step.variant = r.IntN(len(rndSubmitVariants))
	default: // rejected, delivered, recovered
		step.op = pick("delete", "delete", "submit", "charge", "success", "settle", "settle")
	}
	switch step.op {
	case "redrive":
		step.variant = r.IntN(2)
	case "settle":
		step.usage = s.usage(j, true)
	}
	return step
}

// rndWant is what the model says a call must answer.
type rndWant struct {
	outcome ledgerdb.Outcome
	err     error
}

func (s *rndSequence) do(ctx context.Context, step rndStep) error {
	s.history = append(s.history, step.String())
	s.steps++
	switch step.op {
	case "ghost":
		if err := s.ghostProbes(ctx); err != nil {
			return err
		}
	case "grant":
		if err := s.grant(ctx, step); err != nil {
			return err
		}
	default:
		touched := s.jobs[step.job]
		var err error
		switch step.op {
		case "submit":
			err = s.submit(ctx, touched, step.variant)
		case "charge":
			err = s.charge(ctx, touched)
		case "refund":
			err = s.refund(ctx, touched, step.attempts)
		case "deliver":
			err = s.deliver(ctx, touched, step.attempts)
		case "reclaim":
			err = s.reclaim(ctx, touched)
		case "settle":
			// The workflow's success path since the price list: one step.
			err = s.settle(ctx, touched, step.attempts, step.usage)
		case "success":
			// The workflow's success path: reclaim unconditionally, then deliver.
			if err = s.reclaim(ctx, touched); err == nil {
				err = s.deliver(ctx, touched, step.attempts)
			}
		case "redrive":
			// An operator re-drives the job: the work runs again under the same guards, then
			// either fails again (refund) or succeeds (reclaim, deliver).
			err = s.recordAttempt(ctx, touched, touched.job.Attempts+1)
			if err == nil && step.variant == 0 {
				err = s.refund(ctx, touched, touched.job.Attempts)
			} else if err == nil {
				wasRefunded := touched.exists && touched.job.State == ledgerdb.StateRefunded
				if err = s.reclaim(ctx, touched); err == nil {
					err = s.deliver(ctx, touched, touched.job.Attempts)
				}
				if wasRefunded && touched.job.State == ledgerdb.StateRecovered {
					s.coverage["redrive:recovered"]++
				}
			}
		case "delete":
			err = s.delete(ctx, touched)
		default:
			err = fmt.Errorf("unknown step %q", step.op)
		}
		if err != nil {
			return err
		}
	}
	return s.check(ctx)
}

// answer compares a call's answer with the model's and returns a failure, or nil.
func (s *rndSequence) answer(call string, j *rndJob, want rndWant, tr ledgerdb.Transition, err error) error {
	if want.err != nil {
		if !errors.Is(err, want.err) {
			return s.failf("%s %s: answered (%q, %v), the model says error %v", call, j.id, tr.Outcome, err, want.err)
		}
	} else if err != nil || tr.Outcome != want.outcome {
		return s.failf("%s %s: answered (%q, %v), the model says %q", call, j.id, tr.Outcome, err, want.outcome)
	}
	if errors.Is(err, ledgerdb.ErrJobNotFound) {
		return nil
	}
	return s.sameJob(call+" answer", j, tr.Job)
}

// moved checks the entry and balance a call reports: a row and the new balance exactly when it
// applied a money movement.
func (s *rndSequence) moved(call string, j *rndJob, tr ledgerdb.Transition, movesMoney bool) error {
	if movesMoney != (tr.EntryID != 0) {
		return s.failf("%s %s: entry ID %d, the model says a row is written: %v", call, j.id, tr.EntryID, movesMoney)
	}
	if movesMoney && tr.BalanceAfter != s.balance {
		return s.failf("%s %s: balance after %d, the model says %d", call, j.id, tr.BalanceAfter, s.balance)
	}
	return nil
}

func (s *rndSequence) sameJob(what string, j *rndJob, got ledgerdb.Job) error {
	m := j.job
	var diffs []string
	diff := func(field string, got, want any) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s %v (model %v)", field, got, want))
		}
	}
	diff("id", got.ID, j.id)
	diff("account", got.AccountID, s.account)
	diff("cost", got.Cost, j.cost)
	diff("state", got.State, m.State)
	diff("state before delete", got.StateBeforeDelete, m.StateBeforeDelete)
	diff("charged", got.IsCharged, m.IsCharged)
	diff("refunded", got.IsRefunded, m.IsRefunded)
	diff("reclaimed", got.IsReclaimed, m.IsReclaimed)
	diff("attempts", got.Attempts, m.Attempts)
	diff("reject reason", got.RejectReason, m.RejectReason)
	diff("refund reason", got.RefundReason, m.RefundReason)
	diff("refund detail", got.RefundDetail, m.RefundDetail)
	// The price it was submitted at, whatever a resubmission said (the price-list rule), and its
	// settlement.
	diff("kind", got.Kind, j.kind)
	diff("price version", got.PriceVersion, s.pricing.versions[j.kind])
	diff("unit", got.Unit, map[bool]ledgerdb.Unit{true: ledgerdb.UnitGPUSecond, false: ledgerdb.UnitJob}[j.metered])
	diff("unit price", got.UnitPrice, j.unitPrice)
	diff("held units", got.HeldUnits, j.held)
	diff("settled", got.IsSettled, m.IsSettled)
	diff("units used", fmtUnits(got.UnitsUsed), fmtUnits(m.UnitsUsed))
	diff("settled_at set", got.SettledAt != nil, m.IsSettled)
	// Each transition stamps its time once, and a tombstone keeps them all.
	diff("charged_at set", got.ChargedAt != nil, m.IsCharged)
	diff("delivered_at set", got.DeliveredAt != nil, j.delivered)
	diff("refunded_at set", got.RefundedAt != nil, m.IsRefunded)
	diff("reclaimed_at set", got.ReclaimedAt != nil, m.IsReclaimed)
	diff("deleted_at set", got.DeletedAt != nil, m.State == ledgerdb.StateDeleted)
	if len(diffs) > 0 {
		return s.failf("%s: job %s differs from the model: %s", what, j.id, strings.Join(diffs, ", "))
	}
	return nil
}

func (s *rndSequence) submit(ctx context.Context, j *rndJob, variant int) error {
	if variant == 3 {
		return s.submitTwin(ctx, j)
	}
	canonical := ledgerdb.Submission{JobID: j.id, AccountID: s.account, Kind: j.kind, MaxUnits: j.maxUnits, Request: j.request}
	sub := canonical
	switch variant {
	case 1:
		sub.Request = append(slices.Clip(j.request), " "...)
	case 2:
		if j.metered {
			sub.Kind = s.pricing.metered[(j.meteredAt+1)%len(s.pricing.metered)].Kind
		} else {
			sub.Kind = s.pricing.fixed[j.cost+1]
		}
	case 4:
		sub.AccountID = s.nobody
	case 5:
		// The hold the job has, named explicitly: for a job holding its kind's maximum, the same
		// request as naming none.
		sub.MaxUnits = j.held
	case 6:
		sub.MaxUnits = j.held - 1
		if j.held == 1 {
			sub.MaxUnits = 2
		}
	case 7:
		sub.Kind = s.pricing.unpriced
	}
	var want rndWant
	switch {
	case variant == 4:
		// Nothing may be written for an account that does not exist, not even the placeholder;
		// the ID there is that account's, so whatever this job's state, the answer is the same.
		want.err = ledgerdb.ErrUnknownAccount
		s.coverage["submit:unknown-account"]++
	case !j.exists && variant == 7:
		// Nor for a kind with no price.
		want.err = ledgerdb.ErrUnknownKind
		s.coverage["submit:unknown-kind"]++
	case !j.exists && variant != 0 && variant != 5:
		// A first submission is the job's body, whatever it is; the model keeps one body per
		// job, so a sequence only ever opens with the canonical one.
		sub = canonical
		want.outcome = ledgerdb.Applied
	case !j.exists:
		want.outcome = ledgerdb.Applied
	case j.job.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
		s.coverage["submit:gone"]++
	case variant == 5:
		want.outcome = ledgerdb.AlreadyApplied
		s.coverage["submit:same-hold"]++
	case variant != 0:
		want.err = ledgerdb.ErrConflict
		s.coverage["submit:conflict"]++
		if variant == 6 {
			s.coverage["submit:other-hold"]++
		}
	default:
		want.outcome = ledgerdb.AlreadyApplied
		s.coverage["submit:already"]++
	}
	tr, err := s.store.Submit(ctx, sub)
	if want.outcome == ledgerdb.Applied {
		j.exists = true
		j.job = ledgerdb.Job{State: ledgerdb.StateSubmitting}
		if j.metered {
			s.coverage["submit:metered"]++
			if j.maxUnits > 0 {
				s.coverage["submit:smaller-hold"]++
			}
		}
	}
	if want.err == ledgerdb.ErrUnknownAccount || want.err == ledgerdb.ErrUnknownKind {
		if !errors.Is(err, want.err) || tr.Job.ID != "" {
			return s.failf("submit %s (%s): answered (%q, job %q, %v), the model says error %v and no job", j.id, rndSubmitVariants[variant],
				tr.Outcome, tr.Job.ID, err, want.err)
		}
		return nil
	}
	if e := s.answer("submit", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("submit", j, tr, false)
}

// submitTwin submits the job's ID, with the job's own body, from the other account. Job IDs
// belong to their account, so that is another job: written once (Applied, then AlreadyApplied)
// whatever this job's state — even deleted, or never submitted — with nothing charged, and this
// job left as it stands (check reads it back after the step).
func (s *rndSequence) submitTwin(ctx context.Context, j *rndJob) error {
	sub := ledgerdb.Submission{JobID: j.id, AccountID: s.other, Kind: j.kind, MaxUnits: j.maxUnits, Request: j.request}
	want := ledgerdb.Applied
	if j.twin {
		want = ledgerdb.AlreadyApplied
	}
	tr, err := s.store.Submit(ctx, sub)
	if err != nil || tr.Outcome != want || tr.Job.Key() != sub.Key() || tr.Job.State != ledgerdb.StateSubmitting || tr.EntryID != 0 {
		return s.failf("submit %s from the other account: answered (%q, job %q of %q, %s, entry %d, %v), the model says %q for that account's own job",
			j.id, tr.Outcome, tr.Job.ID, tr.Job.AccountID, tr.Job.State, tr.EntryID, err, want)
	}
	j.twin = true
	s.coverage["submit:other-account"]++
	return nil
}

func (s *rndSequence) charge(ctx context.Context, j *rndJob) error {
	var want rndWant
	money := false
	m := &j.job
	switch {
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
		s.coverage["charge:gone"]++
	case m.State == ledgerdb.StateRejected:
		want.err = ledgerdb.ErrInsufficientCredits
		s.coverage["charge:still-rejected"]++
	case m.IsCharged:
		want.outcome = ledgerdb.AlreadyApplied
	case s.balance >= j.cost:
		want.outcome, money = ledgerdb.Applied, true
		s.balance -= j.cost
		m.State, m.IsCharged = ledgerdb.StateRunning, true
		s.coverage["charge:applied"]++
	default:
		want.err = ledgerdb.ErrInsufficientCredits
		m.State, m.RejectReason = ledgerdb.StateRejected, ledgerdb.RejectInsufficientCredits
		s.coverage["charge:insufficient"]++
		if s.balance < 0 {
			s.coverage["charge:refused-while-in-debt"]++
		}
	}
	tr, err := s.store.Charge(ctx, j.key)
	if e := s.answer("charge", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("charge", j, tr, money)
}

func (s *rndSequence) refund(ctx context.Context, j *rndJob, attempts int) error {
	var want rndWant
	money := false
	m := &j.job
	// Every code of the vocabulary comes up, and words that carry a password.
	code := ledgerdb.RefundReasons()[attempts%len(ledgerdb.RefundReasons())]
	detail := fmt.Sprintf("failed after %d attempts: postgres://svc:pw%d@db", attempts, attempts)
	switch {
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateRunning:
		want.outcome, money = ledgerdb.Applied, true
		s.balance += j.cost
		m.State, m.IsRefunded, m.RefundReason = ledgerdb.StateRefunded, true, code
		m.RefundDetail = fmt.Sprintf("failed after %d attempts: postgres://svc:***@db", attempts)
		m.Attempts = max(m.Attempts, attempts)
		s.coverage["refund:applied"]++
	case m.State == ledgerdb.StateRefunded || m.State == ledgerdb.StateRecovered:
		want.outcome = ledgerdb.AlreadyApplied
	case m.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
	default:
		want.outcome = ledgerdb.NotApplied
	}
	tr, err := s.store.Refund(ctx, j.key, code, detail, attempts)
	if e := s.answer("refund", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("refund", j, tr, money)
}

func (s *rndSequence) reclaim(ctx context.Context, j *rndJob) error {
	var want rndWant
	money := false
	m := &j.job
	switch {
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateRefunded:
		want.outcome, money = ledgerdb.Applied, true
		s.balance -= j.cost
		m.State, m.IsReclaimed = ledgerdb.StateRecovered, true
		s.settleWhole(j, "reclaim")
		s.coverage["reclaim:applied"]++
		if s.balance < 0 {
			s.coverage["reclaim:into-debt"]++
		}
	case m.State == ledgerdb.StateRecovered:
		want.outcome = ledgerdb.AlreadyApplied
	case m.State == ledgerdb.StateDeleted && m.StateBeforeDelete == ledgerdb.StateRefunded:
		// Deletion hides a job, never what it owes: the tombstone's refund is reclaimed.
		want.outcome, money = ledgerdb.Applied, true
		s.balance -= j.cost
		m.StateBeforeDelete, m.IsReclaimed = ledgerdb.StateRecovered, true
		s.settleWhole(j, "reclaim")
		s.coverage["reclaim:tombstone"]++
	case m.State == ledgerdb.StateDeleted && m.StateBeforeDelete == ledgerdb.StateRecovered:
		want.outcome = ledgerdb.AlreadyApplied
	case m.State == ledgerdb.StateDeleted && m.StateBeforeDelete == ledgerdb.StateDelivered:
		want.outcome = ledgerdb.NotApplied
	case m.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
	default:
		want.outcome = ledgerdb.NotApplied
	}
	tr, err := s.store.Reclaim(ctx, j.key)
	if e := s.answer("reclaim", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("reclaim", j, tr, money)
}

func (s *rndSequence) deliver(ctx context.Context, j *rndJob, attempts int) error {
	var want rndWant
	m := &j.job
	switch {
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateRunning:
		want.outcome = ledgerdb.Applied
		m.State = ledgerdb.StateDelivered
		m.Attempts = max(m.Attempts, attempts)
		j.delivered = true
		s.settleWhole(j, "deliver")
		s.coverage["deliver:applied"]++
	case m.State == ledgerdb.StateDelivered || m.State == ledgerdb.StateRecovered:
		want.outcome = ledgerdb.AlreadyApplied
	case m.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
	default:
		want.outcome = ledgerdb.NotApplied
	}
	tr, err := s.store.Deliver(ctx, j.key, attempts)
	if e := s.answer("deliver", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("deliver", j, tr, false)
}

// settleWhole is what the original version's steps, which know no usage, do to the job they
// deliver (Deliver) or recover (Reclaim): they settle it at its whole hold — a job sold by the job
// at its one unit — in the same step, releasing nothing, so the job nets −hold at once.
func (s *rndSequence) settleWhole(j *rndJob, step string) {
	used := j.held
	j.job.IsSettled, j.job.UnitsUsed, j.byOldStep = true, &used, true
	if j.metered {
		s.coverage[step+":metered-whole"]++
	} else {
		s.coverage[step+":fixed-one"]++
	}
}

// settle is the one-step success path: a running job is delivered, a refunded one recovered (its
// refund reclaimed, the debt rule applies), and either is settled at the reported usage; a
// delivered or recovered job is settled already — by a settle, or at its whole hold by the
// original steps — and answers AlreadyApplied with the units it was settled at, writing nothing.
// A negative usage is refused before anything is read or written.
func (s *rndSequence) settle(ctx context.Context, j *rndJob, attempts int, usage *int64) error {
	var want rndWant
	money := false
	m := &j.job
	switch {
	case usage != nil && *usage < 0:
		want.err = ledgerdb.ErrInvalidInput
		s.coverage["settle:negative"]++
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateDeleted && m.StateBeforeDelete == ledgerdb.StateRefunded:
		// Deletion hides a job, never what it owes: the tombstone's refund is reclaimed and the
		// job settled at its usage; it stays a tombstone.
		want.outcome, money = ledgerdb.Applied, true
		s.balance -= j.cost
		m.StateBeforeDelete, m.IsReclaimed = ledgerdb.StateRecovered, true
		s.release(j, usage)
		s.coverage["settle:tombstone"]++
	case m.State == ledgerdb.StateDeleted && (m.StateBeforeDelete == ledgerdb.StateDelivered || m.StateBeforeDelete == ledgerdb.StateRecovered):
		want.outcome = ledgerdb.AlreadyApplied
	case m.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
	case m.State == ledgerdb.StateRunning:
		want.outcome = ledgerdb.Applied
		m.State, m.Attempts = ledgerdb.StateDelivered, max(m.Attempts, attempts)
		j.delivered = true
		money = s.release(j, usage)
		s.coverage["settle:delivered"]++
	case m.State == ledgerdb.StateRefunded:
		want.outcome, money = ledgerdb.Applied, true
		s.balance -= j.cost
		m.State, m.IsReclaimed = ledgerdb.StateRecovered, true
		if s.balance < 0 {
			s.coverage["settle:reclaim-into-debt"]++
		}
		s.release(j, usage)
		s.coverage["settle:recovered"]++
	case m.State == ledgerdb.StateDelivered || m.State == ledgerdb.StateRecovered:
		want.outcome = ledgerdb.AlreadyApplied
		if j.byOldStep {
			s.coverage["settle:after-old-steps"]++
		} else {
			s.coverage["settle:again"]++
		}
	default:
		want.outcome = ledgerdb.NotApplied
		s.coverage["settle:not-charged"]++
	}
	tr, err := s.store.Settle(ctx, j.key, attempts, usage, "")
	if want.err == ledgerdb.ErrInvalidInput {
		if !errors.Is(err, want.err) || tr.EntryID != 0 {
			return s.failf("settle %s with usage %d: answered (%q, entry %d, %v), the model says error %v", j.id, *usage, tr.Outcome, tr.EntryID, err, want.err)
		}
		return nil
	}
	if e := s.answer("settle", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("settle", j, tr, money)
}

// release settles a job at the reported usage, capped at its hold (none reported: the whole
// hold; a job sold by the job, always its one unit, whatever was reported), and gives back the
// unused part of the hold; it says whether that wrote a row.
func (s *rndSequence) release(j *rndJob, usage *int64) bool {
	used := j.held
	switch {
	case !j.metered:
		s.coverage["settle:fixed"]++
		if usage != nil && *usage == 0 {
			s.coverage["settle:fixed-zero"]++
		}
	case usage == nil:
		s.coverage["settle:nil"]++
	case *usage == 0:
		used = 0
		s.coverage["settle:zero"]++
	case *usage < j.held:
		used = *usage
		s.coverage["settle:within"]++
	case *usage == j.held:
		s.coverage["settle:exact"]++
	default:
		s.coverage["settle:capped"]++
	}
	j.job.IsSettled, j.job.UnitsUsed = true, &used
	released := j.released()
	s.balance += released
	if released > 0 {
		s.coverage["settle:release"]++
	}
	return released > 0
}

func fmtUnits(u *int64) string {
	if u == nil {
		return "none"
	}
	return strconv.FormatInt(*u, 10)
}

func (s *rndSequence) recordAttempt(ctx context.Context, j *rndJob, attempts int) error {
	var want rndWant
	m := &j.job
	switch {
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateRunning || m.State == ledgerdb.StateRefunded:
		want.outcome = ledgerdb.AlreadyApplied
		if m.Attempts < attempts {
			want.outcome = ledgerdb.Applied
			m.Attempts = attempts
		}
	case m.State == ledgerdb.StateDeleted:
		want.err = ledgerdb.ErrGone
	default:
		want.outcome = ledgerdb.NotApplied
	}
	tr, err := s.store.RecordAttempt(ctx, j.key, attempts)
	if e := s.answer("record attempt", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("record attempt", j, tr, false)
}

func (s *rndSequence) delete(ctx context.Context, j *rndJob) error {
	var want rndWant
	m := &j.job
	switch {
	case !j.exists:
		want.err = ledgerdb.ErrJobNotFound
	case m.State == ledgerdb.StateDeleted:
		want.outcome = ledgerdb.AlreadyApplied
	case m.State == ledgerdb.StateSubmitting || m.State == ledgerdb.StateRunning:
		want.err = ledgerdb.ErrJobActive
		s.coverage["delete:active"]++
	default:
		want.outcome = ledgerdb.Applied
		m.StateBeforeDelete, m.State = m.State, ledgerdb.StateDeleted
		s.coverage["delete:applied"]++
	}
	tr, err := s.store.Delete(ctx, j.key)
	if e := s.answer("delete", j, want, tr, err); e != nil {
		return e
	}
	return s.moved("delete", j, tr, false)
}

func (s *rndSequence) grant(ctx context.Context, step rndStep) error {
	key := fmt.Sprintf("key-%d", step.key)
	want := rndWant{outcome: ledgerdb.Applied}
	if amount, ok := s.grants[step.key]; ok {
		want.outcome = ledgerdb.AlreadyApplied
		if amount != step.amount {
			want = rndWant{err: ledgerdb.ErrConflict}
			s.coverage["grant:conflict"]++
		}
	}
	p, err := s.store.Grant(ctx, ledgerdb.Credit{AccountID: s.account, Amount: step.amount, Key: key})
	if want.outcome == ledgerdb.Applied {
		s.grants[step.key] = step.amount
		s.balance += step.amount
	}
	switch {
	case want.err != nil && !errors.Is(err, want.err):
		return s.failf("grant %s %d: answered (%q, %v), the model says error %v", key, step.amount, p.Outcome, err, want.err)
	case want.err == nil && (err != nil || p.Outcome != want.outcome):
		return s.failf("grant %s %d: answered (%q, %v), the model says %q", key, step.amount, p.Outcome, err, want.outcome)
	case want.outcome == ledgerdb.Applied && p.BalanceAfter != s.balance:
		return s.failf("grant %s %d: balance after %d, the model says %d", key, step.amount, p.BalanceAfter, s.balance)
	}
	return nil
}

// ghostProbes sends every job call for an ID that never reached the ledger: each must say so
// (404: nothing was charged) and write nothing, and none may create the ID.
func (s *rndSequence) ghostProbes(ctx context.Context) error {
	probes := map[string]func() (ledgerdb.Transition, error){
		"charge": func() (ledgerdb.Transition, error) { return s.store.Charge(ctx, s.ghost) },
		"refund": func() (ledgerdb.Transition, error) {
			return s.store.Refund(ctx, s.ghost, ledgerdb.ReasonGPUFailed, "lost", 1)
		},
		"reclaim": func() (ledgerdb.Transition, error) { return s.store.Reclaim(ctx, s.ghost) },
		"deliver": func() (ledgerdb.Transition, error) { return s.store.Deliver(ctx, s.ghost, 1) },
		"settle":  func() (ledgerdb.Transition, error) { return s.store.Settle(ctx, s.ghost, 1, ledgerdb.Units(3), "") },
		"delete":  func() (ledgerdb.Transition, error) { return s.store.Delete(ctx, s.ghost) },
		"read": func() (ledgerdb.Transition, error) {
			j, err := s.store.Job(ctx, s.ghost)
			return ledgerdb.Transition{Job: j}, err
		},
	}
	for _, name := range slices.Sorted(maps.Keys(probes)) {
		if tr, err := probes[name](); !errors.Is(err, ledgerdb.ErrJobNotFound) || tr.EntryID != 0 {
			return s.failf("%s of never-submitted %s: answered (%q, entry %d, %v), want ErrJobNotFound", name, s.ghost, tr.Outcome, tr.EntryID, err)
		}
	}
	s.coverage["ghost:not-found"]++
	return nil
}

// check compares the whole account with the model after a step: every job row and ledger row
// of the account straight from the tables (one query, to keep a step cheap), then the audit.
func (s *rndSequence) check(ctx context.Context) error {
	type jobRows struct {
		job   ledgerdb.Job
		kinds map[string][]int64
	}
	byID := map[string]*jobRows{}
	rows, err := s.store.Pool().Query(ctx, `
		SELECT j.id, j.account_id, j.cost, j.state, coalesce(j.state_before_delete, ''),
		       j.is_charged, j.is_refunded, j.is_reclaimed, j.attempts,
		       coalesce(j.reject_reason, ''), coalesce(j.refund_reason_code, ''), coalesce(j.refund_reason, ''),
		       j.charged_at, j.delivered_at, j.refunded_at, j.reclaimed_at, j.deleted_at,
		       coalesce(j.kind, ''), coalesce(j.price_version, 0), coalesce(j.unit, ''), coalesce(j.unit_price, 0),
		       coalesce(j.held_units, 0), j.units_used, j.is_settled, j.settled_at,
		       coalesce(e.kind, ''), coalesce(e.amount, 0)
		FROM jobs j LEFT JOIN ledger_entries e ON e.job_id = j.id
		WHERE j.account_id = $1 OR j.id = $2
		ORDER BY j.id, e.id`, s.account, s.ghost.String())
	if err != nil {
		return s.failf("reading the account's rows: %v", err)
	}
	for rows.Next() {
		var j ledgerdb.Job
		var stored, kind string
		var amount int64
		if err := rows.Scan(&stored, &j.AccountID, &j.Cost, &j.State, &j.StateBeforeDelete, &j.IsCharged, &j.IsRefunded,
			&j.IsReclaimed, &j.Attempts, &j.RejectReason, &j.RefundReason, &j.RefundDetail,
			&j.ChargedAt, &j.DeliveredAt, &j.RefundedAt, &j.ReclaimedAt, &j.DeletedAt,
			&j.Kind, &j.PriceVersion, &j.Unit, &j.UnitPrice, &j.HeldUnits, &j.UnitsUsed, &j.IsSettled, &j.SettledAt, &kind, &amount); err != nil {
			rows.Close()
			return s.failf("reading the account's rows: %v", err)
		}
		// The table holds the key; the model, like the API, names the job by its own ID.
		_, j.ID, _ = strings.Cut(stored, "/")
		jr := byID[stored]
		if jr == nil {
			jr = &jobRows{job: j, kinds: map[string][]int64{}}
			byID[stored] = jr
		}
		if kind != "" {
			jr.kinds[kind] = append(jr.kinds[kind], amount)
		}
	}
	if err := rows.Err(); err != nil {
		return s.failf("reading the account's rows: %v", err)
	}
	existing := 0
	for _, j := range s.jobs {
		jr := byID[j.key.String()]
		delete(byID, j.key.String())
		if !j.exists {
			if jr != nil {
				return s.failf("job %s was never accepted but has a row (state %s, rows %v)", j.id, jr.job.State, jr.kinds)
			}
			continue
		}
		existing++
		if jr == nil {
			return s.failf("job %s was accepted but has no row", j.id)
		}
		if err := s.sameJob("table", j, jr.job); err != nil {
			return err
		}
		var net int64
		for kind, flag := range map[string]bool{"charge": j.job.IsCharged, "refund": j.job.IsRefunded, "reclaim": j.job.IsReclaimed} {
			amounts := jr.kinds[kind]
			want := 0
			if flag {
				want = 1
			}
			if len(amounts) != want {
				return s.failf("job %s: %d %s rows %v, the model says %d (rule 2)", j.id, len(amounts), kind, amounts, want)
			}
			for _, a := range amounts {
				if a != j.cost && a != -j.cost {
					return s.failf("job %s: %s row of %d, the job holds %d (rule 5)", j.id, kind, a, j.cost)
				}
				net += a
			}
		}
		// One release once a settlement left part of the hold unused, of exactly that part.
		released, amounts := j.released(), jr.kinds["release"]
		switch {
		case released > 0 && (len(amounts) != 1 || amounts[0] != released):
			return s.failf("job %s (held %d × %d, used %s): release rows %v, the model says one of %d (rules 2 and 5)", j.id, j.held, j.unitPrice,
				fmtUnits(j.job.UnitsUsed), amounts, released)
		case released == 0 && len(amounts) != 0:
			return s.failf("job %s (held %d × %d, used %s): release rows %v, the model says none (rule 2)", j.id, j.held, j.unitPrice,
				fmtUnits(j.job.UnitsUsed), amounts)
		}
		net += released
		for kind := range jr.kinds {
			if !slices.Contains([]string{"charge", "refund", "reclaim", "release"}, kind) {
				return s.failf("job %s: a row of unexpected kind %s: %v", j.id, kind, jr.kinds)
			}
		}
		if net != j.net() {
			return s.failf("job %s (%s): rows sum to %d, the model says %d (rule 3)", j.id, j.job.State, net, j.net())
		}
	}
	if len(byID) > 0 {
		return s.failf("unexpected jobs on the account or under the never-submitted ID: %v", slices.Sorted(maps.Keys(byID)))
	}

	report, err := s.store.Audit(ctx, s.account)
	switch {
	case err != nil:
		return s.failf("audit: %v", err)
	case !report.OK():
		return s.failf("audit: %v", report.Violations)
	case report.Balance != s.balance || report.EntrySum != s.balance:
		return s.failf("audit: balance %d, rows sum to %d, the model says %d (rule 6)", report.Balance, report.EntrySum, s.balance)
	case report.Jobs != existing:
		return s.failf("audit: %d jobs, the model says %d", report.Jobs, existing)
	}
	return nil
}
