package ledgerdb_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// stormOp names one kind of call the storm delivers.
type stormOp string

const (
	stormSubmit  stormOp = "submit"
	stormCharge  stormOp = "charge"
	stormRefund  stormOp = "refund"
	stormReclaim stormOp = "reclaim"
	stormDeliver stormOp = "deliver"
	// stormGrant tops up the job's account under a key of the job's own, so that top-ups (and
	// their duplicates) interleave with the job rows in each account's balance chain.
	stormGrant stormOp = "grant"
)

// stormGrantAmount is the credits of each storm top-up.
const stormGrantAmount = 7

// stormFate is where a storm job must end; it is fixed before the storm so that the end state of
// every job is known however the goroutines interleave.
type stormFate int

const (
	stormFateDelivered stormFate = iota // charge, deliver
	stormFateRefunded                   // charge, refund (dead letter, no late result)
	stormFateRecovered                  // charge, refund, late success -> reclaim
	// stormFateContested races the timeout (refund) against the success (deliver) on the running
	// job, then runs the success path's reclaim: the job ends delivered or recovered, whichever
	// guard won, and in both cases charged exactly once.
	stormFateContested
)

// stormCall is one delivery of one call, with the outcomes it may answer. Applied is allowed only
// for the calls that make a transition; how many of them actually answer Applied is checked per
// job, not per call, because which duplicate wins is up to the scheduler.
type stormCall struct {
	job     int
	op      stormOp
	allowed []ledgerdb.Outcome
}

type stormResult struct {
	call    stormCall
	outcome ledgerdb.Outcome
	err     error
}

// TestDuplicateStorm races 64 goroutines on 1,000 jobs over 20 accounts, each call delivered
// several times at once, phase by phase (submit, charge, refund or deliver, late success), with
// duplicate grants interleaved and, for a quarter of the jobs, the timeout racing the success. It
// checks the reversing-pairs, net-effect, one-transaction-per-transition, sum-of-rows and
// idempotent-doors rules: exactly one charge, refund and reclaim row per job that needs one and
// none for the others (the reversing-pairs rule, counted straight from ledger_entries); each job's
// rows summing to what its end state says (the net-effect rule); flags, rows and balances agreeing
// after concurrent commits (the one-transaction-per-transition rule); every balance equal to the
// sum of its rows and to the expected total (the sum-of-rows rule); and exactly one Applied answer
// per job per transition however many duplicates raced for it, every other delivery answering
// AlreadyApplied or NotApplied (the idempotent-doors rule).
func TestDuplicateStorm(t *testing.T) {
	s := newDupStorm(t)
	applied := map[stormJobOp]int{}
	calls := 0
	for _, phase := range s.phases() {
		start := time.Now()
		results := s.runPhase(phase.groups)
		calls += len(results)
		t.Logf("phase %-17s %6d calls by %d goroutines in %v", phase.name, len(results), dupStormWorkers, time.Since(start).Round(time.Millisecond))
		s.tally(phase.name, results, applied)
	}
	contestedRefunded, contestedDelivered := s.requireApplied(applied)
	s.requireRows()
	t.Logf("%d calls on %d jobs over %d accounts; timeout vs success: the refund won %d times, the delivery %d",
		calls, dupStormJobs, dupStormAccounts, contestedRefunded, contestedDelivered)
}

// TestDuplicateStorm's sizes.
const (
	dupStormJobs     = 1000
	dupStormAccounts = 20
	dupStormWorkers  = 64
	// dupStormCopies is how many deliveries of a job's main call race each other in a phase.
	dupStormCopies = 4
	dupStormGrant  = 1_000_000
)

// dupStormJob is one job of TestDuplicateStorm and the fate drawn for it.
type dupStormJob struct {
	id, account string
	key         ledgerdb.JobKey
	cost        int64
	fate        stormFate
}

// storm is what the storms of many jobs share: the test and its deadline, the ledger, the seed
// that draws every choice, and the accounts.
type storm struct {
	t        *testing.T
	ctx      context.Context
	store    *ledgerdb.Store
	seed     uint64
	rng      *rand.Rand
	accounts []string
}

// newStorm draws a seed, logged so that a failing storm can be repeated (stream tells the storms'
// random streams apart), and opens n accounts of grant credits.
func newStorm(t *testing.T, stream uint64, n int, grant int64) storm {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	s := storm{t: t, ctx: ctx, store: ledgertest.Store(t), seed: uint64(time.Now().UnixNano())}
	t.Logf("storm seed %d", s.seed)
	s.rng = rand.New(rand.NewPCG(s.seed, stream))
	s.accounts = make([]string, n)
	for i := range s.accounts {
		s.accounts[i] = ledgertest.Account(t, s.store, grant)
	}
	return s
}

// requireNoProblems fails the test with the first problems the storm found, naming the seed that
// repeats them.
func (s *storm) requireNoProblems(problems []string) {
	s.t.Helper()
	require.Empty(s.t, problems, "seed %d: first problems of %d: %v", s.seed, len(problems), problems[:min(len(problems), 10)])
}

// requireBalances checks each account's balance against want, and every money rule on them.
func (s *storm) requireBalances(want map[string]int64) {
	s.t.Helper()
	for a, balance := range want {
		got, err := s.store.Balance(s.ctx, a)
		require.NoError(s.t, err)
		require.Equal(s.t, balance, got, "account %s (seed %d)", a, s.seed)
	}
	ledgertest.RequireSound(s.t, s.store, s.accounts...)
}

// dupStorm is TestDuplicateStorm's jobs over its accounts.
type dupStorm struct {
	storm
	jobs []dupStormJob
	keys []ledgerdb.JobKey
}

// stormJobOp counts the Applied answers of one op on one job.
type stormJobOp struct {
	job int
	op  stormOp
}

// newDupStorm opens the accounts and draws each job's cost and fate from a logged seed.
func newDupStorm(t *testing.T) *dupStorm {
	s := &dupStorm{storm: newStorm(t, 0x5707, dupStormAccounts, dupStormGrant)}
	prefix := ledgertest.ID(t, "storm")
	s.jobs = make([]dupStormJob, dupStormJobs)
	s.keys = make([]ledgerdb.JobKey, dupStormJobs)
	for i := range s.jobs {
		j := dupStormJob{
			id:      fmt.Sprintf("%s-%04d", prefix, i),
			account: s.accounts[i%dupStormAccounts],
			cost:    1 + s.rng.Int64N(500),
			fate:    stormFate(s.rng.IntN(4)),
		}
		j.key = ledgerdb.JobKey{AccountID: j.account, JobID: j.id}
		s.jobs[i], s.keys[i] = j, j.key
	}
	return s
}

// call makes one delivery of a call.
func (s *dupStorm) call(c stormCall) stormResult {
	j := s.jobs[c.job]
	var tr ledgerdb.Transition
	var err error
	switch c.op {
	case stormSubmit:
		tr, err = s.store.Submit(s.ctx, ledgerdb.Submission{JobID: j.id, AccountID: j.account, Kind: ledgertest.Fixed(s.t, s.store, j.cost), Request: []byte(`{"render":"storm"}`)})
	case stormCharge:
		tr, err = s.store.Charge(s.ctx, j.key)
	case stormRefund:
		tr, err = s.store.Refund(s.ctx, j.key, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	case stormReclaim:
		tr, err = s.store.Reclaim(s.ctx, j.key)
	case stormDeliver:
		tr, err = s.store.Deliver(s.ctx, j.key, 1)
	case stormGrant:
		var p ledgerdb.Posting
		p, err = s.store.Grant(s.ctx, ledgerdb.Credit{AccountID: j.account, Amount: stormGrantAmount, Key: "grant-" + j.id})
		tr.Outcome = p.Outcome
	}
	return stormResult{call: c, outcome: tr.Outcome, err: err}
}

// runPhase hands each job's group of calls out back to back, so that the copies of one call are
// picked up by different goroutines at the same moment and really race.
func (s *dupStorm) runPhase(groupOf func(i int) []stormCall) []stormResult {
	groups := make([][]stormCall, dupStormJobs)
	for i := range groups {
		groups[i] = groupOf(i)
	}
	s.rng.Shuffle(len(groups), func(i, k int) { groups[i], groups[k] = groups[k], groups[i] })
	for _, g := range groups {
		s.rng.Shuffle(len(g), func(i, k int) { g[i], g[k] = g[k], g[i] })
	}
	calls := slices.Concat(groups...)
	results := make([]stormResult, len(calls))
	parallel(dupStormWorkers, len(calls), func(i int) error {
		results[i] = s.call(calls[i])
		return nil
	})
	return results
}

// The outcomes a delivery may answer.
var (
	stormTransition = []ledgerdb.Outcome{ledgerdb.Applied, ledgerdb.AlreadyApplied}
	stormAlready    = []ledgerdb.Outcome{ledgerdb.AlreadyApplied}
	stormNotApplied = []ledgerdb.Outcome{ledgerdb.NotApplied}
	stormAnyOutcome = []ledgerdb.Outcome{ledgerdb.Applied, ledgerdb.AlreadyApplied, ledgerdb.NotApplied}
)

// repeatCall is n deliveries of one call.
func repeatCall(job int, op stormOp, n int, allowed []ledgerdb.Outcome) []stormCall {
	calls := make([]stormCall, n)
	for i := range calls {
		calls[i] = stormCall{job: job, op: op, allowed: allowed}
	}
	return calls
}

// phases are the storm's phases, each job's group of calls in each.
func (s *dupStorm) phases() []struct {
	name   string
	groups func(i int) []stormCall
} {
	return []struct {
		name   string
		groups func(i int) []stormCall
	}{
		{"submit", func(i int) []stormCall { return repeatCall(i, stormSubmit, dupStormCopies, stormTransition) }},
		{"charge", func(i int) []stormCall { return repeatCall(i, stormCharge, dupStormCopies, stormTransition) }},
		{"refund or deliver", func(i int) []stormCall {
			var grants []stormCall
			if i%10 == 0 {
				grants = repeatCall(i, stormGrant, dupStormCopies, stormTransition)
			}
			return slices.Concat(grants, s.timeoutOrSuccess(i))
		}},
		{"late success", s.lateSuccess},
	}
}

// timeoutOrSuccess is job i's third phase: its timeout, its success, or both racing.
func (s *dupStorm) timeoutOrSuccess(i int) []stormCall {
	switch s.jobs[i].fate {
	case stormFateContested:
		return slices.Concat(repeatCall(i, stormRefund, dupStormCopies, stormAnyOutcome), repeatCall(i, stormDeliver, dupStormCopies, stormAnyOutcome))
	case stormFateDelivered:
		// The success path calls reclaim unconditionally; on a running or delivered job the
		// guard matches nothing.
		return slices.Concat(repeatCall(i, stormDeliver, dupStormCopies, stormTransition),
			repeatCall(i, stormReclaim, 1, stormNotApplied), repeatCall(i, stormCharge, 1, stormAlready))
	default:
		return slices.Concat(repeatCall(i, stormRefund, dupStormCopies, stormTransition), repeatCall(i, stormCharge, 1, stormAlready),
			repeatCall(i, stormSubmit, 1, stormAlready))
	}
}

// lateSuccess is job i's last phase: a late result, or repeats of what it went through.
func (s *dupStorm) lateSuccess(i int) []stormCall {
	switch s.jobs[i].fate {
	case stormFateContested:
		return slices.Concat(repeatCall(i, stormReclaim, dupStormCopies, stormAnyOutcome), repeatCall(i, stormDeliver, 1, stormAnyOutcome))
	case stormFateRecovered:
		// A late result runs reclaim, then deliver; deliver racing the reclaim sees the job
		// refunded (NotApplied) or recovered (AlreadyApplied), and never applies.
		return slices.Concat(repeatCall(i, stormReclaim, dupStormCopies, stormTransition),
			repeatCall(i, stormDeliver, 2, []ledgerdb.Outcome{ledgerdb.NotApplied, ledgerdb.AlreadyApplied}),
			repeatCall(i, stormRefund, 1, stormAlready), repeatCall(i, stormCharge, 1, stormAlready))
	case stormFateRefunded:
		return slices.Concat(repeatCall(i, stormRefund, 2, stormAlready), repeatCall(i, stormDeliver, 1, stormNotApplied))
	default:
		return slices.Concat(repeatCall(i, stormDeliver, 2, stormAlready), repeatCall(i, stormReclaim, 2, stormNotApplied),
			repeatCall(i, stormRefund, 1, stormNotApplied))
	}
}

// tally checks every answer of a phase against the outcomes its call allows, and counts the
// Applied ones by job and op.
func (s *dupStorm) tally(phase string, results []stormResult, applied map[stormJobOp]int) {
	var problems []string
	for _, r := range results {
		j := s.jobs[r.call.job]
		switch {
		case r.err != nil:
			problems = append(problems, fmt.Sprintf("phase %s: %s %s: %v", phase, r.call.op, j.id, r.err))
		case !slices.Contains(r.call.allowed, r.outcome):
			problems = append(problems, fmt.Sprintf("phase %s: %s %s (fate %d) answered %q, want one of %v",
				phase, r.call.op, j.id, j.fate, r.outcome, r.call.allowed))
		case r.outcome == ledgerdb.Applied:
			applied[stormJobOp{r.call.job, r.call.op}]++
		}
	}
	s.requireNoProblems(problems)
	require.NoError(s.t, s.ctx.Err(), "seed %d", s.seed)
}

// stormEnds is, for each fate a job ends in, the calls beside its one submit and one charge that
// answer Applied, its state, and its rows in units of its cost.
var stormEnds = map[stormFate]struct {
	applied map[stormOp]int
	state   ledgerdb.State
	rows    map[ledgerdb.EntryKind]int64
}{
	stormFateDelivered: {map[stormOp]int{stormDeliver: 1}, ledgerdb.StateDelivered,
		map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -1}},
	stormFateRefunded: {map[stormOp]int{stormRefund: 1}, ledgerdb.StateRefunded,
		map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -1, ledgerdb.KindRefund: 1}},
	stormFateRecovered: {map[stormOp]int{stormRefund: 1, stormReclaim: 1}, ledgerdb.StateRecovered,
		map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -1, ledgerdb.KindRefund: 1, ledgerdb.KindReclaim: -1}},
}

// requireApplied checks exactly one Applied per job per transition its fate goes through, none for
// the others. A contested job's fate becomes the path that won (whichever of the timeout and the
// success won, the other lost for good); it answers how often each won.
func (s *dupStorm) requireApplied(applied map[stormJobOp]int) (contestedRefunded, contestedDelivered int) {
	var problems []string
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.fate == stormFateContested {
			refunds, delivers := applied[stormJobOp{i, stormRefund}], applied[stormJobOp{i, stormDeliver}]
			switch {
			case refunds == 1 && delivers == 0:
				j.fate = stormFateRecovered
				contestedRefunded++
			case refunds == 0 && delivers == 1:
				j.fate = stormFateDelivered
				contestedDelivered++
			default:
				problems = append(problems, fmt.Sprintf("job %s: timeout and success raced; %d refunds and %d delivers answered Applied, want exactly one in all", j.id, refunds, delivers))
				continue
			}
		}
		want := maps.Clone(stormEnds[j.fate].applied)
		want[stormSubmit], want[stormCharge] = 1, 1
		if i%10 == 0 {
			want[stormGrant] = 1
		}
		for _, op := range []stormOp{stormSubmit, stormCharge, stormRefund, stormReclaim, stormDeliver, stormGrant} {
			if got := applied[stormJobOp{i, op}]; got != want[op] {
				problems = append(problems, fmt.Sprintf("job %s (fate %d): %d %s calls answered Applied, want %d", j.id, j.fate, got, op, want[op]))
			}
		}
	}
	s.requireNoProblems(problems)
	return contestedRefunded, contestedDelivered
}

// requireRows checks the rows themselves, straight from the table, not through the package under
// test: each job's rows and state as its fate says, and every balance the grants plus those rows.
func (s *dupStorm) requireRows() {
	rows := stormRowsByJob(s.t, s.store, s.keys)
	states := stormStates(s.t, s.store, s.keys)
	wantBalance := map[string]int64{}
	for _, a := range s.accounts {
		wantBalance[a] = dupStormGrant
	}
	var problems []string
	for i, j := range s.jobs {
		if i%10 == 0 {
			wantBalance[j.account] += stormGrantAmount
		}
		end := stormEnds[j.fate]
		got := rows[j.key]
		for _, kind := range []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim} {
			amounts := got[kind]
			sign, wanted := end.rows[kind]
			wantAmount := sign * j.cost
			switch {
			case wanted && (len(amounts) != 1 || amounts[0] != wantAmount):
				problems = append(problems, fmt.Sprintf("job %s: %s rows %v, want exactly one of %d", j.id, kind, amounts, wantAmount))
			case !wanted && len(amounts) != 0:
				problems = append(problems, fmt.Sprintf("job %s: %s rows %v, want none", j.id, kind, amounts))
			}
			if wanted {
				wantBalance[j.account] += wantAmount
			}
		}
		if states[j.key.String()] != end.state {
			problems = append(problems, fmt.Sprintf("job %s: state %q, want %q", j.id, states[j.key.String()], end.state))
		}
	}
	s.requireNoProblems(problems)
	s.requireBalances(wantBalance)
}

// stormStates reads the jobs' states straight from the jobs table.
func stormStates(t *testing.T, store *ledgerdb.Store, keys []ledgerdb.JobKey) map[string]ledgerdb.State {
	t.Helper()
	states := map[string]ledgerdb.State{}
	rows, err := store.Pool().Query(t.Context(), `SELECT id, state FROM jobs WHERE id = ANY($1)`, keyStrings(keys))
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id, state string
		require.NoError(t, rows.Scan(&id, &state))
		states[id] = ledgerdb.State(state)
	}
	require.NoError(t, rows.Err())
	return states
}

// parallel calls f(0) … f(n-1) from workers goroutines, handing the indexes out in order, so that
// neighbouring calls are picked up at the same moment and race; it answers each call's error.
func parallel(workers, n int, f func(i int) error) []error {
	feed := make(chan int)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range feed {
				errs[i] = f(i)
			}
		})
	}
	for i := range n {
		feed <- i
	}
	close(feed)
	wg.Wait()
	return errs
}

// keyStrings is the keys as the ledger stores them.
func keyStrings(keys []ledgerdb.JobKey) []string {
	stored := make([]string, len(keys))
	for i, k := range keys {
		stored[i] = k.String()
	}
	return stored
}

// stormRowsByJob reads the amounts of every charge, refund and reclaim row of the given jobs
// straight from ledger_entries.
func stormRowsByJob(t *testing.T, store *ledgerdb.Store, jobs []ledgerdb.JobKey) map[ledgerdb.JobKey]map[ledgerdb.EntryKind][]int64 {
	t.Helper()
	keys := map[string]ledgerdb.JobKey{}
	for _, job := range jobs {
		keys[job.String()] = job
	}
	rows, err := store.Pool().Query(t.Context(),
		`SELECT job_id, kind, amount FROM ledger_entries WHERE job_id = ANY($1) ORDER BY id`, keyStrings(jobs))
	require.NoError(t, err)
	defer rows.Close()
	byJob := map[ledgerdb.JobKey]map[ledgerdb.EntryKind][]int64{}
	for rows.Next() {
		var stored, kind string
		var amount int64
		require.NoError(t, rows.Scan(&stored, &kind, &amount))
		job := keys[stored]
		if byJob[job] == nil {
			byJob[job] = map[ledgerdb.EntryKind][]int64{}
		}
		byJob[job][ledgerdb.EntryKind(kind)] = append(byJob[job][ledgerdb.EntryKind(kind)], amount)
	}
	require.NoError(t, rows.Err())
	return byJob
}

// TestChargeStormNeverOverdraws races charges (each delivered three times) of many jobs on an
// account that can pay for only some of them, then races reclaims of refunded jobs against
// charges of new ones, and checks the sum-of-rows and idempotent-doors rules and the debt rule of
// docs/design.md: every charge decides under the account's lock, so exactly as many jobs are
// charged as the balance covers and no charge row ever leaves the balance below zero; every other
// job is rejected with nothing charged; a reclaim is never refused and may take the balance below
// zero, after which every charge is refused; and the balance equals the sum of the rows throughout
// (the sum-of-rows rule).
func TestChargeStormNeverOverdraws(t *testing.T) {
	const (
		jobCount = 60
		cost     = 10
		covered  = 20 // jobs the initial balance pays for
		workers  = 32
		copies   = 3
		refunds  = 5  // charged jobs whose result lands late, after new charges spent the refund
		fresh    = 10 // new jobs charged while those results land
	)
	store := ledgertest.Store(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	account := ledgertest.Account(t, store, covered*cost)
	prefix := ledgertest.ID(t, "overdraw")
	ids := make([]ledgerdb.JobKey, jobCount+fresh)
	for i := range ids {
		sub := ledgerdb.Submission{JobID: fmt.Sprintf("%s-%02d", prefix, i), AccountID: account, Kind: ledgertest.Fixed(t, store, cost)}
		_, err := store.Submit(ctx, sub)
		require.NoError(t, err)
		ids[i] = sub.Key()
	}

	type answer struct {
		job     int
		op      stormOp
		outcome ledgerdb.Outcome
		err     error
	}
	race := func(calls []answer) []answer {
		rand.Shuffle(len(calls), func(i, k int) { calls[i], calls[k] = calls[k], calls[i] })
		parallel(workers, len(calls), func(i int) error {
			var tr ledgerdb.Transition
			switch c := &calls[i]; c.op {
			case stormCharge:
				tr, c.err = store.Charge(ctx, ids[c.job])
			case stormReclaim:
				tr, c.err = store.Reclaim(ctx, ids[c.job])
			}
			calls[i].outcome = tr.Outcome
			return nil
		})
		return calls
	}

	var calls []answer
	for job := range jobCount {
		for range copies {
			calls = append(calls, answer{job: job, op: stormCharge})
		}
	}
	charged := map[int]int{}
	for _, a := range race(calls) {
		switch {
		case a.err == nil && a.outcome == ledgerdb.Applied:
			charged[a.job]++
		case a.err == nil && a.outcome == ledgerdb.AlreadyApplied:
		case errors.Is(a.err, ledgerdb.ErrInsufficientCredits):
		default:
			t.Errorf("charge %s answered (%q, %v)", ids[a.job], a.outcome, a.err)
		}
	}
	require.Len(t, charged, covered, "charged jobs: %v", charged)
	for job, n := range charged {
		require.Equal(t, 1, n, "job %s was charged %d times", ids[job], n)
	}
	balance, err := store.Balance(ctx, account)
	require.NoError(t, err)
	require.Zero(t, balance)
	ledgertest.RequireSound(t, store, account)

	// Refund some charged jobs, then let their late results race charges of new jobs: the
	// charges may spend the refunds first, and the reclaims are then owed in full.
	calls = calls[:0]
	n := 0
	for job := range charged {
		if n == refunds {
			break
		}
		n++
		_, err := store.Refund(ctx, ids[job], ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
		require.NoError(t, err)
		for range copies {
			calls = append(calls, answer{job: job, op: stormReclaim})
		}
	}
	for job := jobCount; job < jobCount+fresh; job++ {
		for range copies {
			calls = append(calls, answer{job: job, op: stormCharge})
		}
	}
	reclaimed, newlyCharged := map[int]int{}, map[int]int{}
	for _, a := range race(calls) {
		switch {
		case a.err == nil && a.outcome == ledgerdb.Applied && a.op == stormReclaim:
			reclaimed[a.job]++
		case a.err == nil && a.outcome == ledgerdb.Applied:
			newlyCharged[a.job]++
		case a.err == nil && a.outcome == ledgerdb.AlreadyApplied:
		case a.op == stormCharge && errors.Is(a.err, ledgerdb.ErrInsufficientCredits):
		default:
			t.Errorf("%s %s answered (%q, %v)", a.op, ids[a.job], a.outcome, a.err)
		}
	}
	require.Len(t, reclaimed, refunds)
	require.LessOrEqual(t, len(newlyCharged), refunds, "more new jobs charged than the refunds paid for")
	for job, n := range newlyCharged {
		require.Equal(t, 1, n, "job %s was charged %d times", ids[job], n)
	}
	balance, err = store.Balance(ctx, account)
	require.NoError(t, err)
	require.Equal(t, int64(-cost*len(newlyCharged)), balance, "every reclaim is owed in full")
	t.Logf("%d of %d new jobs were charged before the late results took the refunds back; balance %d", len(newlyCharged), fresh, balance)

	requireNoOverdraft(t, store, account, prefix, balance)
}

// requireNoOverdraft checks the debt rule after a charge storm: a charge is written only when the
// balance covers it, so no charge row goes below zero; and an account in debt refuses every
// charge.
func requireNoOverdraft(t *testing.T, store *ledgerdb.Store, account, prefix string, balance int64) {
	t.Helper()
	ctx := t.Context()
	var lowest int64
	require.NoError(t, store.Pool().QueryRow(ctx,
		`SELECT coalesce(min(balance_after), 0) FROM ledger_entries WHERE account_id = $1 AND kind = 'charge'`, account).Scan(&lowest))
	require.GreaterOrEqual(t, lowest, int64(0), "a charge overdrew the account")
	if balance < 0 {
		inDebt := ledgerdb.Submission{JobID: prefix + "-in-debt", AccountID: account, Kind: ledgertest.Fixed(t, store, 1)}
		_, err := store.Submit(ctx, inDebt)
		require.NoError(t, err)
		_, err = store.Charge(ctx, inDebt.Key())
		require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits, "a negative balance refuses every charge")
	}
	ledgertest.RequireSound(t, store, account)
}

// TestMeteredSettleStorm reports the usage of hundreds of metered jobs many times at once: each
// job's result is recorded in the inbox by several concurrent reports and settled by several
// concurrent Settle calls, with different usages among them (none, zero, within the hold, the
// hold, above it), on jobs that are running, refunded (a late result), or delivered or recovered
// by the original version's Deliver or Reclaim — which settle the job at its whole hold at once.
// It checks the reversing-pairs, net-effect, one-transaction-per-transition, sum-of-rows and
// idempotent-doors rules: on a running or refunded job exactly one Settle answers Applied and every
// other AlreadyApplied, each answering the units the winner recorded — min(its usage, the hold) —
// never another call's; on a job an old step settled every Settle answers AlreadyApplied with the
// whole hold and writes nothing (the idempotent-doors rule); at most one release row per job, of
// (held − used) × unit price, none when nothing is left and none after an old step (the
// reversing-pairs rule), beside exactly the charge, refund and reclaim its path needs; each job
// netting −used × unit price (the net-effect rule); the balances equal to the grants minus every
// job's used × unit price, and to the sum of the rows (the one-transaction-per-transition and
// sum-of-rows rules). In the inbox, exactly one report per job and attempt is recorded, with the
// usage of the report that answered Applied; a repeat of it answers AlreadyApplied, a report of
// another usage ErrConflict.
func TestMeteredSettleStorm(t *testing.T) {
	m := newMeteredStorm(t)
	m.setUp()
	answers := m.race()
	m.requireWins(answers)
	m.requireAnswers(answers)
	releases, settledRefunded, oldSteps := m.requireRows()
	t.Logf("%d jobs settled once each (%d of them late, after a refund; %d by an old step before the storm); %d release rows",
		meteredStormJobs, settledRefunded, oldSteps, releases)
}

// TestMeteredSettleStorm's sizes.
const (
	meteredStormJobs     = 240
	meteredStormAccounts = 8
	meteredStormWorkers  = 32
	meteredStormCopies   = 6
	meteredStormGrant    = 1_000_000
)

// meteredBefore is what happened to a metered storm job before its result lands.
type meteredBefore int

const (
	meteredRunning meteredBefore = iota
	meteredRefunded
	// meteredDeliveredByOldStep and meteredRecoveredByOldStep were settled at their whole hold by
	// the original version's Deliver, or Refund and Reclaim, before the storm.
	meteredDeliveredByOldStep
	meteredRecoveredByOldStep
)

// meteredStormJob is one job of TestMeteredSettleStorm: its price and hold, where it stands
// before its result lands, and the usages its reports and settles carry.
type meteredStormJob struct {
	id, account string
	key         ledgerdb.JobKey
	price       ledgerdb.Price
	held        int64
	maxUnits    int64
	before      meteredBefore
	usages      []*int64
}

// byOldStep says whether the job was settled before the storm.
func (j meteredStormJob) byOldStep() bool {
	return j.before == meteredDeliveredByOldStep || j.before == meteredRecoveredByOldStep
}

// meteredCall is one report (settle false) or settle of a job's usage; meteredAnswer what it
// answered.
type meteredCall struct {
	job    int
	settle bool
	usage  *int64
}

type meteredAnswer struct {
	meteredCall
	tr  ledgerdb.Transition
	rec ledgerdb.RecordedResult
	err error
}

// meteredStorm is TestMeteredSettleStorm's jobs, and what the winning settle and report of each
// said.
type meteredStorm struct {
	storm
	jobs []meteredStormJob
	keys []ledgerdb.JobKey
	// settledAt and reportedAs are the usages of the settle and the report that answered Applied.
	settledAt, reportedAs []*int64
}

// newMeteredStorm prices three metered kinds, opens the accounts, and draws each job's kind, hold,
// past and usages from a logged seed.
func newMeteredStorm(t *testing.T) *meteredStorm {
	m := &meteredStorm{storm: newStorm(t, 0x5e771e, meteredStormAccounts, meteredStormGrant),
		settledAt: make([]*int64, meteredStormJobs), reportedAs: make([]*int64, meteredStormJobs)}
	kinds := []ledgerdb.Price{
		{Kind: ledgertest.Metered(t, m.store, 3, 20), UnitPrice: 3, MaxUnits: 20},
		{Kind: ledgertest.Metered(t, m.store, 2, 50), UnitPrice: 2, MaxUnits: 50},
		{Kind: ledgertest.Metered(t, m.store, 7, 10), UnitPrice: 7, MaxUnits: 10},
	}
	prefix := ledgertest.ID(t, "mstorm")
	m.jobs = make([]meteredStormJob, meteredStormJobs)
	m.keys = make([]ledgerdb.JobKey, meteredStormJobs)
	for i := range m.jobs {
		p := kinds[m.rng.IntN(len(kinds))]
		j := meteredStormJob{id: fmt.Sprintf("%s-%04d", prefix, i), account: m.accounts[i%meteredStormAccounts], price: p, held: p.MaxUnits, before: meteredBefore(m.rng.IntN(4))}
		j.key = ledgerdb.JobKey{AccountID: j.account, JobID: j.id}
		if m.rng.IntN(3) == 0 {
			j.maxUnits = 1 + m.rng.Int64N(p.MaxUnits)
			j.held = j.maxUnits
		}
		// Three different usages per job, from every region: none, zero, within, the hold, above.
		candidates := []*int64{nil, ledgerdb.Units(0), ledgerdb.Units(1 + m.rng.Int64N(j.held)), ledgerdb.Units(j.held), ledgerdb.Units(j.held + 1 + m.rng.Int64N(100))}
		m.rng.Shuffle(len(candidates), func(a, b int) { candidates[a], candidates[b] = candidates[b], candidates[a] })
		j.usages = candidates[:3]
		m.jobs[i], m.keys[i] = j, j.key
	}
	return m
}

// setUp submits and charges every job, concurrently, and takes it where it stands before its
// result lands.
func (m *meteredStorm) setUp() {
	for i, err := range parallel(meteredStormWorkers, meteredStormJobs, func(i int) error {
		j := m.jobs[i]
		if _, err := m.store.Submit(m.ctx, ledgerdb.Submission{JobID: j.id, AccountID: j.account, Kind: j.price.Kind, MaxUnits: j.maxUnits, Request: []byte("storm")}); err != nil {
			return err
		}
		if _, err := m.store.Charge(m.ctx, j.key); err != nil {
			return err
		}
		var err error
		switch j.before {
		case meteredRefunded:
			_, err = m.store.Refund(m.ctx, j.key, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
		case meteredDeliveredByOldStep:
			_, err = m.store.Deliver(m.ctx, j.key, 1)
		case meteredRecoveredByOldStep:
			if _, err = m.store.Refund(m.ctx, j.key, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3); err == nil {
				_, err = m.store.Reclaim(m.ctx, j.key)
			}
		}
		return err
	}) {
		require.NoError(m.t, err, "setting up %s", m.jobs[i].id)
	}
}

// race hands each job's reports and settles out back to back, so that its copies are picked up
// by different goroutines at the same moment, and answers what each call answered.
func (m *meteredStorm) race() []meteredAnswer {
	var calls []meteredCall
	for i, j := range m.jobs {
		var group []meteredCall
		for c := range meteredStormCopies {
			group = append(group, meteredCall{job: i, settle: true, usage: j.usages[c%len(j.usages)]}, meteredCall{job: i, usage: j.usages[c%len(j.usages)]})
		}
		m.rng.Shuffle(len(group), func(a, b int) { group[a], group[b] = group[b], group[a] })
		calls = append(calls, group...)
	}
	answers := make([]meteredAnswer, len(calls))
	start := time.Now()
	for i, err := range parallel(meteredStormWorkers, len(calls), func(i int) error {
		c := calls[i]
		a := meteredAnswer{meteredCall: c}
		j := m.jobs[c.job]
		if c.settle {
			a.tr, a.err = m.store.Settle(m.ctx, j.key, 2, c.usage, "")
		} else {
			a.rec, a.err = m.store.RecordResult(m.ctx, ledgerdb.ResultReport{Key: j.key, Attempt: 1, OutputRef: "s3://out/" + j.id, UnitsUsed: c.usage})
		}
		answers[i] = a
		return nil
	}) {
		require.NoError(m.t, err, "call %d", i)
	}
	m.t.Logf("%d reports and settles of %d jobs by %d goroutines in %v", len(calls), meteredStormJobs, meteredStormWorkers, time.Since(start).Round(time.Millisecond))
	require.NoError(m.t, m.ctx.Err(), "seed %d", m.seed)
	return answers
}

// used is the units job i is settled at: the whole hold after an old step, else the usage the
// winning Settle reported, capped at the hold.
func (m *meteredStorm) used(i int) int64 {
	j, usage := m.jobs[i], m.settledAt[i]
	if j.byOldStep() || usage == nil {
		return j.held
	}
	return min(*usage, j.held)
}

// sameUsage says whether two usages are the same, none included.
func sameUsage(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// requireWins notes the usage of each job's winning settle and report, and checks that exactly one
// of each answered Applied — no settle after an old step settled the job before the storm.
func (m *meteredStorm) requireWins(answers []meteredAnswer) {
	settleWins, reportWins := make([]int, meteredStormJobs), make([]int, meteredStormJobs)
	for _, a := range answers {
		if a.err == nil && a.settle && a.tr.Outcome == ledgerdb.Applied {
			settleWins[a.job]++
			m.settledAt[a.job] = a.usage
		}
		if a.err == nil && !a.settle && a.rec.Outcome == ledgerdb.Applied {
			reportWins[a.job]++
			m.reportedAs[a.job] = a.usage
		}
	}
	var problems []string
	for i, j := range m.jobs {
		wantWins := 1
		if j.byOldStep() {
			wantWins = 0 // settled before the storm
		}
		if settleWins[i] != wantWins || reportWins[i] != 1 {
			problems = append(problems, fmt.Sprintf("job %s (old step: %v): %d settles and %d reports answered Applied, want %d and 1",
				j.id, j.byOldStep(), settleWins[i], reportWins[i], wantWins))
		}
	}
	m.requireNoProblems(problems)
}

// requireAnswers checks every answer against the winners: each settle answers the units the
// winner recorded, a repeat writing nothing; a report of the recorded usage answers as a repeat,
// one of another usage ErrConflict.
func (m *meteredStorm) requireAnswers(answers []meteredAnswer) {
	var problems []string
	for _, a := range answers {
		if p := m.answerProblem(a); p != "" {
			problems = append(problems, p)
		}
	}
	m.requireNoProblems(problems)
}

// answerProblem says what is wrong with one answer, or nothing.
func (m *meteredStorm) answerProblem(a meteredAnswer) string {
	j := m.jobs[a.job]
	switch {
	case a.settle:
		used := m.used(a.job)
		switch {
		case a.err != nil:
			return fmt.Sprintf("settle %s: %v", j.id, a.err)
		case a.tr.Outcome != ledgerdb.Applied && a.tr.Outcome != ledgerdb.AlreadyApplied:
			return fmt.Sprintf("settle %s answered %q", j.id, a.tr.Outcome)
		case a.tr.Outcome == ledgerdb.AlreadyApplied && a.tr.EntryID != 0:
			return fmt.Sprintf("settle %s answered AlreadyApplied with row %d", j.id, a.tr.EntryID)
		case !a.tr.Job.IsSettled || a.tr.Job.UnitsUsed == nil || *a.tr.Job.UnitsUsed != used:
			return fmt.Sprintf("settle %s (%q) answered units %v, the winner recorded %d", j.id, a.tr.Outcome, a.tr.Job.UnitsUsed, used)
		}
	case sameUsage(a.usage, m.reportedAs[a.job]):
		if a.err != nil || (a.rec.Outcome != ledgerdb.Applied && a.rec.Outcome != ledgerdb.AlreadyApplied) {
			return fmt.Sprintf("report %s: answered (%q, %v) for the recorded usage", j.id, a.rec.Outcome, a.err)
		}
	default:
		if !errors.Is(a.err, ledgerdb.ErrConflict) {
			return fmt.Sprintf("report %s: answered (%q, %v) for another usage than the recorded one, want ErrConflict", j.id, a.rec.Outcome, a.err)
		}
	}
	return ""
}

// inbox reads the recorded usage of each job's report, requiring one report per job.
func (m *meteredStorm) inbox() map[string]*int64 {
	inbox := map[string]*int64{}
	rows, err := m.store.Pool().Query(m.ctx, `SELECT job_id, units_used FROM result_reports WHERE job_id = ANY($1)`, keyStrings(m.keys))
	require.NoError(m.t, err)
	defer rows.Close()
	for rows.Next() {
		var id string
		var units *int64
		require.NoError(m.t, rows.Scan(&id, &units))
		_, dup := inbox[id]
		require.False(m.t, dup, "job %s has two reports of attempt 1", id)
		inbox[id] = units
	}
	require.NoError(m.t, rows.Err())
	return inbox
}

// requireRows checks the inbox (one report per job, with the winner's usage) and the rows,
// straight from the tables: the charge, refund and reclaim each job's past needs and a release of
// what it did not use; then the balances. It answers how many releases, late settlements and old
// steps it saw.
func (m *meteredStorm) requireRows() (releases, settledRefunded, oldSteps int) {
	inbox := m.inbox()
	byJob := stormRowsByJob(m.t, m.store, m.keys)
	wantBalance := map[string]int64{}
	for _, a := range m.accounts {
		wantBalance[a] = meteredStormGrant
	}
	var problems []string
	for i, j := range m.jobs {
		if !sameUsage(inbox[j.key.String()], m.reportedAs[i]) {
			problems = append(problems, fmt.Sprintf("job %s: the inbox holds usage %v, the winning report said %v", j.id, inbox[j.key.String()], m.reportedAs[i]))
		}
		hold := j.held * j.price.UnitPrice
		used := m.used(i)
		want := map[ledgerdb.EntryKind][]int64{ledgerdb.KindCharge: {-hold}}
		if j.before == meteredRefunded || j.before == meteredRecoveredByOldStep {
			want[ledgerdb.KindRefund], want[ledgerdb.KindReclaim] = []int64{hold}, []int64{-hold}
		}
		switch {
		case j.before == meteredRefunded:
			settledRefunded++
		case j.byOldStep():
			oldSteps++
		}
		if released := (j.held - used) * j.price.UnitPrice; released > 0 {
			want[ledgerdb.KindRelease] = []int64{released}
			releases++
		}
		if got := byJob[j.key]; !reflect.DeepEqual(got, want) {
			problems = append(problems, fmt.Sprintf("job %s (hold %d, used %d): rows %v, want %v", j.id, hold, used, got, want))
		}
		wantBalance[j.account] -= used * j.price.UnitPrice
	}
	m.requireNoProblems(problems)
	m.requireBalances(wantBalance)
	return releases, settledRefunded, oldSteps
}
