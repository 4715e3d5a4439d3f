package ledgerdb_test

import (
	"context"
	"errors"
	"fmt"
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
// checks money rules 2, 3, 4, 6 and 8: exactly one charge, refund and reclaim row per job that
// needs one and none for the others (rule 2, counted straight from ledger_entries); each job's
// rows summing to what its end state says (rule 3); flags, rows and balances agreeing after
// concurrent commits (rule 4); every balance equal to the sum of its rows and to the expected
// total (rule 6); and exactly one Applied answer per job per transition however many duplicates
// raced for it, every other delivery answering AlreadyApplied or NotApplied (rule 8).
func TestDuplicateStorm(t *testing.T) {
	const (
		jobCount     = 1000
		accountCount = 20
		workers      = 64
		// copies is how many deliveries of a job's main call race each other in a phase.
		copies = 4
	)
	store := ledgertest.Store(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	seed := uint64(time.Now().UnixNano())
	t.Logf("storm seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5707))

	accounts := make([]string, accountCount)
	const grant = 1_000_000
	for i := range accounts {
		accounts[i] = ledgertest.Account(t, store, grant)
	}
	prefix := ledgertest.ID(t, "storm")
	type stormJob struct {
		id, account string
		key         ledgerdb.JobKey
		cost        int64
		fate        stormFate
	}
	jobs := make([]stormJob, jobCount)
	keys := make([]ledgerdb.JobKey, jobCount)
	for i := range jobs {
		jobs[i] = stormJob{
			id:      fmt.Sprintf("%s-%04d", prefix, i),
			account: accounts[i%accountCount],
			cost:    1 + rng.Int64N(500),
			fate:    stormFate(rng.IntN(4)),
		}
		jobs[i].key = ledgerdb.JobKey{AccountID: jobs[i].account, JobID: jobs[i].id}
		keys[i] = jobs[i].key
	}

	call := func(c stormCall) stormResult {
		j := jobs[c.job]
		var tr ledgerdb.Transition
		var err error
		switch c.op {
		case stormSubmit:
			tr, err = store.Submit(ctx, ledgerdb.Submission{JobID: j.id, AccountID: j.account, Kind: ledgertest.Fixed(t, store, j.cost), Request: []byte(`{"render":"storm"}`)})
		case stormCharge:
			tr, err = store.Charge(ctx, j.key)
		case stormRefund:
			tr, err = store.Refund(ctx, j.key, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
		case stormReclaim:
			tr, err = store.Reclaim(ctx, j.key)
		case stormDeliver:
			tr, err = store.Deliver(ctx, j.key, 1)
		case stormGrant:
			var p ledgerdb.Posting
			p, err = store.Grant(ctx, ledgerdb.Credit{AccountID: j.account, Amount: stormGrantAmount, Key: "grant-" + j.id})
			tr.Outcome = p.Outcome
		}
		return stormResult{call: c, outcome: tr.Outcome, err: err}
	}

	// runPhase hands each job's group of calls out back to back, so that the copies of one call
	// are picked up by different goroutines at the same moment and really race.
	runPhase := func(groups [][]stormCall) []stormResult {
		rng.Shuffle(len(groups), func(i, k int) { groups[i], groups[k] = groups[k], groups[i] })
		for _, g := range groups {
			rng.Shuffle(len(g), func(i, k int) { g[i], g[k] = g[k], g[i] })
		}
		feed := make(chan stormCall)
		results := make([][]stormResult, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for c := range feed {
					results[w] = append(results[w], call(c))
				}
			})
		}
		for _, g := range groups {
			for _, c := range g {
				feed <- c
			}
		}
		close(feed)
		wg.Wait()
		return slices.Concat(results...)
	}

	transition := []ledgerdb.Outcome{ledgerdb.Applied, ledgerdb.AlreadyApplied}
	already := []ledgerdb.Outcome{ledgerdb.AlreadyApplied}
	notApplied := []ledgerdb.Outcome{ledgerdb.NotApplied}
	repeat := func(job int, op stormOp, n int, allowed []ledgerdb.Outcome) []stormCall {
		calls := make([]stormCall, n)
		for i := range calls {
			calls[i] = stormCall{job: job, op: op, allowed: allowed}
		}
		return calls
	}

	anyOutcome := []ledgerdb.Outcome{ledgerdb.Applied, ledgerdb.AlreadyApplied, ledgerdb.NotApplied}
	timeoutOrSuccess := func(i int) []stormCall {
		switch jobs[i].fate {
		case stormFateContested:
			return slices.Concat(repeat(i, stormRefund, copies, anyOutcome), repeat(i, stormDeliver, copies, anyOutcome))
		case stormFateDelivered:
			// The success path calls reclaim unconditionally; on a running or delivered job the
			// guard matches nothing.
			return slices.Concat(repeat(i, stormDeliver, copies, transition),
				repeat(i, stormReclaim, 1, notApplied), repeat(i, stormCharge, 1, already))
		default:
			return slices.Concat(repeat(i, stormRefund, copies, transition), repeat(i, stormCharge, 1, already),
				repeat(i, stormSubmit, 1, already))
		}
	}
	lateSuccess := func(i int) []stormCall {
		switch jobs[i].fate {
		case stormFateContested:
			return slices.Concat(repeat(i, stormReclaim, copies, anyOutcome), repeat(i, stormDeliver, 1, anyOutcome))
		case stormFateRecovered:
			// A late result runs reclaim, then deliver; deliver racing the reclaim sees the job
			// refunded (NotApplied) or recovered (AlreadyApplied), and never applies.
			return slices.Concat(repeat(i, stormReclaim, copies, transition),
				repeat(i, stormDeliver, 2, []ledgerdb.Outcome{ledgerdb.NotApplied, ledgerdb.AlreadyApplied}),
				repeat(i, stormRefund, 1, already), repeat(i, stormCharge, 1, already))
		case stormFateRefunded:
			return slices.Concat(repeat(i, stormRefund, 2, already), repeat(i, stormDeliver, 1, notApplied))
		default:
			return slices.Concat(repeat(i, stormDeliver, 2, already), repeat(i, stormReclaim, 2, notApplied),
				repeat(i, stormRefund, 1, notApplied))
		}
	}
	phases := []struct {
		name   string
		groups func(i int) []stormCall
	}{
		{"submit", func(i int) []stormCall { return repeat(i, stormSubmit, copies, transition) }},
		{"charge", func(i int) []stormCall { return repeat(i, stormCharge, copies, transition) }},
		{"refund or deliver", func(i int) []stormCall {
			var grants []stormCall
			if i%10 == 0 {
				grants = repeat(i, stormGrant, copies, transition)
			}
			return slices.Concat(grants, timeoutOrSuccess(i))
		}},
		{"late success", lateSuccess},
	}
	type jobOp struct {
		job int
		op  stormOp
	}
	appliedCount := map[jobOp]int{}
	var problems []string
	calls := 0
	for _, phase := range phases {
		groups := make([][]stormCall, jobCount)
		for i := range groups {
			groups[i] = phase.groups(i)
		}
		start := time.Now()
		results := runPhase(groups)
		calls += len(results)
		t.Logf("phase %-17s %6d calls by %d goroutines in %v", phase.name, len(results), workers, time.Since(start).Round(time.Millisecond))
		for _, r := range results {
			j := jobs[r.call.job]
			switch {
			case r.err != nil:
				problems = append(problems, fmt.Sprintf("phase %s: %s %s: %v", phase.name, r.call.op, j.id, r.err))
			case !slices.Contains(r.call.allowed, r.outcome):
				problems = append(problems, fmt.Sprintf("phase %s: %s %s (fate %d) answered %q, want one of %v",
					phase.name, r.call.op, j.id, j.fate, r.outcome, r.call.allowed))
			case r.outcome == ledgerdb.Applied:
				appliedCount[jobOp{r.call.job, r.call.op}]++
			}
		}
		require.Empty(t, problems, "seed %d: first problems of %d: %v", seed, len(problems), problems[:min(len(problems), 10)])
		require.NoError(t, ctx.Err(), "seed %d", seed)
	}

	// Exactly one Applied per job per transition its fate goes through, none for the others.
	var contestedRefunded, contestedDelivered int
	for i, j := range jobs {
		want := map[stormOp]int{stormSubmit: 1, stormCharge: 1}
		if j.fate == stormFateContested {
			// Whichever of the timeout and the success won, the other lost for good.
			refunds, delivers := appliedCount[jobOp{i, stormRefund}], appliedCount[jobOp{i, stormDeliver}]
			switch {
			case refunds == 1 && delivers == 0:
				jobs[i].fate = stormFateRecovered
				contestedRefunded++
			case refunds == 0 && delivers == 1:
				jobs[i].fate = stormFateDelivered
				contestedDelivered++
			default:
				problems = append(problems, fmt.Sprintf("job %s: timeout and success raced; %d refunds and %d delivers answered Applied, want exactly one in all", j.id, refunds, delivers))
				continue
			}
			j = jobs[i]
		}
		switch j.fate {
		case stormFateDelivered:
			want[stormDeliver] = 1
		case stormFateRefunded:
			want[stormRefund] = 1
		case stormFateRecovered:
			want[stormRefund], want[stormReclaim] = 1, 1
		}
		if i%10 == 0 {
			want[stormGrant] = 1
		}
		for _, op := range []stormOp{stormSubmit, stormCharge, stormRefund, stormReclaim, stormDeliver, stormGrant} {
			if got := appliedCount[jobOp{i, op}]; got != want[op] {
				problems = append(problems, fmt.Sprintf("job %s (fate %d): %d %s calls answered Applied, want %d", j.id, j.fate, got, op, want[op]))
			}
		}
	}
	require.Empty(t, problems, "seed %d: first problems of %d: %v", seed, len(problems), problems[:min(len(problems), 10)])

	// The rows themselves, straight from the table, not through the package under test.
	rows := stormRowsByJob(t, store, keys)
	states := map[string]ledgerdb.State{}
	stateRows, err := store.Pool().Query(ctx, `SELECT id, state FROM jobs WHERE id = ANY($1)`, keyStrings(keys))
	require.NoError(t, err)
	for stateRows.Next() {
		var id, state string
		require.NoError(t, stateRows.Scan(&id, &state))
		states[id] = ledgerdb.State(state)
	}
	require.NoError(t, stateRows.Err())

	wantBalance := map[string]int64{}
	for _, a := range accounts {
		wantBalance[a] = grant
	}
	for i, j := range jobs {
		if i%10 == 0 {
			wantBalance[j.account] += stormGrantAmount
		}
		want := map[ledgerdb.EntryKind]int64{ledgerdb.KindCharge: -j.cost}
		wantState := ledgerdb.StateDelivered
		switch j.fate {
		case stormFateRefunded:
			want[ledgerdb.KindRefund] = j.cost
			wantState = ledgerdb.StateRefunded
		case stormFateRecovered:
			want[ledgerdb.KindRefund], want[ledgerdb.KindReclaim] = j.cost, -j.cost
			wantState = ledgerdb.StateRecovered
		}
		got := rows[j.key]
		for _, kind := range []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim} {
			amounts := got[kind]
			wantAmount, wanted := want[kind]
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
		if states[j.key.String()] != wantState {
			problems = append(problems, fmt.Sprintf("job %s: state %q, want %q", j.id, states[j.key.String()], wantState))
		}
	}
	require.Empty(t, problems, "seed %d: first problems of %d: %v", seed, len(problems), problems[:min(len(problems), 10)])

	for _, a := range accounts {
		balance, err := store.Balance(ctx, a)
		require.NoError(t, err)
		require.Equal(t, wantBalance[a], balance, "account %s (seed %d)", a, seed)
	}
	ledgertest.RequireSound(t, store, accounts...)
	t.Logf("%d calls on %d jobs over %d accounts; timeout vs success: the refund won %d times, the delivery %d",
		calls, jobCount, accountCount, contestedRefunded, contestedDelivered)
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
// charges of new ones, and checks money rules 6 and 8 and the debt rule of docs/design.md: every charge
// decides under the account's lock, so exactly as many jobs are charged as the balance covers and
// no charge row ever leaves the balance below zero; every other job is rejected with nothing
// charged; a reclaim is never refused and may take the balance below zero, after which every
// charge is refused; and the balance equals the sum of the rows throughout (rule 6).
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
		feed := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range feed {
					var tr ledgerdb.Transition
					switch c := &calls[i]; c.op {
					case stormCharge:
						tr, c.err = store.Charge(ctx, ids[c.job])
					case stormReclaim:
						tr, c.err = store.Reclaim(ctx, ids[c.job])
					}
					calls[i].outcome = tr.Outcome
				}
			})
		}
		for i := range calls {
			feed <- i
		}
		close(feed)
		wg.Wait()
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

	// A charge is written only when the balance covers it: no charge row goes below zero.
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
// It checks money rules 2, 3, 4, 6 and 8: on a running or refunded job exactly one Settle answers
// Applied and every other AlreadyApplied, each answering the units the winner recorded — min(its
// usage, the hold) — never another call's; on a job an old step settled every Settle answers
// AlreadyApplied with the whole hold and writes nothing (rule 8); at most one release row per
// job, of (held − used) × unit price, none when nothing is left and none after an old step
// (rule 2), beside exactly the charge, refund and reclaim its path needs; each job netting −used
// × unit price (rule 3); the balances equal to the grants minus every job's used × unit price,
// and to the sum of the rows (rules 4 and 6). In the inbox, exactly one report per job and
// attempt is recorded, with the usage of the report that answered Applied; a repeat of it answers
// AlreadyApplied, a report of another usage ErrConflict.
func TestMeteredSettleStorm(t *testing.T) {
	const (
		jobCount     = 240
		accountCount = 8
		workers      = 32
		copies       = 6
	)
	store := ledgertest.Store(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("storm seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5e771e))

	kinds := []ledgerdb.Price{
		{Kind: ledgertest.Metered(t, store, 3, 20), UnitPrice: 3, MaxUnits: 20},
		{Kind: ledgertest.Metered(t, store, 2, 50), UnitPrice: 2, MaxUnits: 50},
		{Kind: ledgertest.Metered(t, store, 7, 10), UnitPrice: 7, MaxUnits: 10},
	}
	const grant = 1_000_000
	accounts := make([]string, accountCount)
	for i := range accounts {
		accounts[i] = ledgertest.Account(t, store, grant)
	}
	prefix := ledgertest.ID(t, "mstorm")

	// before is what happened to a job before its result lands.
	type before int
	const (
		running before = iota
		refunded
		// deliveredByOldStep and recoveredByOldStep were settled at their whole hold by the
		// original version's Deliver, or Refund and Reclaim, before the storm.
		deliveredByOldStep
		recoveredByOldStep
	)
	type stormJob struct {
		id, account string
		key         ledgerdb.JobKey
		price       ledgerdb.Price
		held        int64
		maxUnits    int64
		before      before
		usages      []*int64 // the usages its reports and settles carry
	}
	jobs := make([]stormJob, jobCount)
	keys := make([]ledgerdb.JobKey, jobCount)
	for i := range jobs {
		p := kinds[rng.IntN(len(kinds))]
		j := stormJob{id: fmt.Sprintf("%s-%04d", prefix, i), account: accounts[i%accountCount], price: p, held: p.MaxUnits, before: before(rng.IntN(4))}
		j.key = ledgerdb.JobKey{AccountID: j.account, JobID: j.id}
		if rng.IntN(3) == 0 {
			j.maxUnits = 1 + rng.Int64N(p.MaxUnits)
			j.held = j.maxUnits
		}
		// Three different usages per job, from every region: none, zero, within, the hold, above.
		candidates := []*int64{nil, ledgerdb.Units(0), ledgerdb.Units(1 + rng.Int64N(j.held)), ledgerdb.Units(j.held), ledgerdb.Units(j.held + 1 + rng.Int64N(100))}
		rng.Shuffle(len(candidates), func(a, b int) { candidates[a], candidates[b] = candidates[b], candidates[a] })
		j.usages = candidates[:3]
		jobs[i], keys[i] = j, j.key
	}

	// Set-up, concurrently: submit and charge every job, and take it where it stands before its
	// result lands.
	parallel := func(n int, f func(i int) error) []error {
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
	for i, err := range parallel(jobCount, func(i int) error {
		j := jobs[i]
		if _, err := store.Submit(ctx, ledgerdb.Submission{JobID: j.id, AccountID: j.account, Kind: j.price.Kind, MaxUnits: j.maxUnits, Request: []byte("storm")}); err != nil {
			return err
		}
		if _, err := store.Charge(ctx, j.key); err != nil {
			return err
		}
		var err error
		switch j.before {
		case refunded:
			_, err = store.Refund(ctx, j.key, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
		case deliveredByOldStep:
			_, err = store.Deliver(ctx, j.key, 1)
		case recoveredByOldStep:
			if _, err = store.Refund(ctx, j.key, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3); err == nil {
				_, err = store.Reclaim(ctx, j.key)
			}
		}
		return err
	}) {
		require.NoError(t, err, "setting up %s", jobs[i].id)
	}

	// The storm: each job's reports and settles handed out back to back, so that its copies are
	// picked up by different goroutines at the same moment.
	type call struct {
		job    int
		settle bool
		usage  *int64
	}
	type answer struct {
		call
		tr  ledgerdb.Transition
		rec ledgerdb.RecordedResult
		err error
	}
	var calls []call
	for i, j := range jobs {
		var group []call
		for c := range copies {
			group = append(group, call{job: i, settle: true, usage: j.usages[c%len(j.usages)]}, call{job: i, usage: j.usages[c%len(j.usages)]})
		}
		rng.Shuffle(len(group), func(a, b int) { group[a], group[b] = group[b], group[a] })
		calls = append(calls, group...)
	}
	answers := make([]answer, len(calls))
	start := time.Now()
	for i, err := range parallel(len(calls), func(i int) error {
		c := calls[i]
		a := answer{call: c}
		j := jobs[c.job]
		if c.settle {
			a.tr, a.err = store.Settle(ctx, j.key, 2, c.usage, "")
		} else {
			a.rec, a.err = store.RecordResult(ctx, ledgerdb.ResultReport{Key: j.key, Attempt: 1, OutputRef: "s3://out/" + j.id, UnitsUsed: c.usage})
		}
		answers[i] = a
		return nil
	}) {
		require.NoError(t, err, "call %d", i)
	}
	t.Logf("%d reports and settles of %d jobs by %d goroutines in %v", len(calls), jobCount, workers, time.Since(start).Round(time.Millisecond))
	require.NoError(t, ctx.Err(), "seed %d", seed)

	sameUsage := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	var problems []string
	settledAt := make([]*int64, jobCount)
	byOldStep := func(j stormJob) bool { return j.before == deliveredByOldStep || j.before == recoveredByOldStep }
	// used is the units job i is settled at: the whole hold after an old step, else the usage the
	// winning Settle reported, capped at the hold.
	used := func(i int) int64 {
		j, usage := jobs[i], settledAt[i]
		if byOldStep(j) || usage == nil {
			return j.held
		}
		return min(*usage, j.held)
	}
	reportedAs := make([]*int64, jobCount)
	settleWins, reportWins := make([]int, jobCount), make([]int, jobCount)
	for _, a := range answers {
		if a.err == nil && a.settle && a.tr.Outcome == ledgerdb.Applied {
			settleWins[a.job]++
			settledAt[a.job] = a.usage
		}
		if a.err == nil && !a.settle && a.rec.Outcome == ledgerdb.Applied {
			reportWins[a.job]++
			reportedAs[a.job] = a.usage
		}
	}
	for i, j := range jobs {
		wantWins := 1
		if byOldStep(j) {
			wantWins = 0 // settled before the storm
		}
		if settleWins[i] != wantWins || reportWins[i] != 1 {
			problems = append(problems, fmt.Sprintf("job %s (old step: %v): %d settles and %d reports answered Applied, want %d and 1",
				j.id, byOldStep(j), settleWins[i], reportWins[i], wantWins))
		}
	}
	require.Empty(t, problems, "seed %d: first problems of %d: %v", seed, len(problems), problems[:min(len(problems), 10)])

	for _, a := range answers {
		j := jobs[a.job]
		switch {
		case a.settle:
			used := used(a.job)
			switch {
			case a.err != nil:
				problems = append(problems, fmt.Sprintf("settle %s: %v", j.id, a.err))
			case a.tr.Outcome != ledgerdb.Applied && a.tr.Outcome != ledgerdb.AlreadyApplied:
				problems = append(problems, fmt.Sprintf("settle %s answered %q", j.id, a.tr.Outcome))
			case a.tr.Outcome == ledgerdb.AlreadyApplied && a.tr.EntryID != 0:
				problems = append(problems, fmt.Sprintf("settle %s answered AlreadyApplied with row %d", j.id, a.tr.EntryID))
			case !a.tr.Job.IsSettled || a.tr.Job.UnitsUsed == nil || *a.tr.Job.UnitsUsed != used:
				problems = append(problems, fmt.Sprintf("settle %s (%q) answered units %v, the winner recorded %d", j.id, a.tr.Outcome, a.tr.Job.UnitsUsed, used))
			}
		case sameUsage(a.usage, reportedAs[a.job]):
			if a.err != nil || (a.rec.Outcome != ledgerdb.Applied && a.rec.Outcome != ledgerdb.AlreadyApplied) {
				problems = append(problems, fmt.Sprintf("report %s: answered (%q, %v) for the recorded usage", j.id, a.rec.Outcome, a.err))
			}
		default:
			if !errors.Is(a.err, ledgerdb.ErrConflict) {
				problems = append(problems, fmt.Sprintf("report %s: answered (%q, %v) for another usage than the recorded one, want ErrConflict", j.id, a.rec.Outcome, a.err))
			}
		}
	}
	require.Empty(t, problems, "seed %d: first problems of %d: %v", seed, len(problems), problems[:min(len(problems), 10)])

	// The inbox holds one report per job, with the winner's usage.
	inbox := map[string]*int64{}
	rows, err := store.Pool().Query(ctx, `SELECT job_id, units_used FROM result_reports WHERE job_id = ANY($1)`, keyStrings(keys))
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var units *int64
		require.NoError(t, rows.Scan(&id, &units))
		_, dup := inbox[id]
		require.False(t, dup, "job %s has two reports of attempt 1", id)
		inbox[id] = units
	}
	require.NoError(t, rows.Err())

	// The rows, straight from the table.
	byJob := stormRowsByJob(t, store, keys)
	wantBalance := map[string]int64{}
	for _, a := range accounts {
		wantBalance[a] = grant
	}
	var releases, settledRefunded, oldSteps int
	for i, j := range jobs {
		if !sameUsage(inbox[j.key.String()], reportedAs[i]) {
			problems = append(problems, fmt.Sprintf("job %s: the inbox holds usage %v, the winning report said %v", j.id, inbox[j.key.String()], reportedAs[i]))
		}
		hold := j.held * j.price.UnitPrice
		used := used(i)
		want := map[ledgerdb.EntryKind][]int64{ledgerdb.KindCharge: {-hold}}
		if j.before == refunded || j.before == recoveredByOldStep {
			want[ledgerdb.KindRefund], want[ledgerdb.KindReclaim] = []int64{hold}, []int64{-hold}
		}
		switch {
		case j.before == refunded:
			settledRefunded++
		case byOldStep(j):
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
	require.Empty(t, problems, "seed %d: first problems of %d: %v", seed, len(problems), problems[:min(len(problems), 10)])
	for _, a := range accounts {
		balance, err := store.Balance(ctx, a)
		require.NoError(t, err)
		require.Equal(t, wantBalance[a], balance, "account %s (seed %d)", a, seed)
	}
	ledgertest.RequireSound(t, store, accounts...)
	t.Logf("%d jobs settled once each (%d of them late, after a refund; %d by an old step before the storm); %d release rows",
		jobCount, settledRefunded, oldSteps, releases)
}
