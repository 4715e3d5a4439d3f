package ledgerdb_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// raceAnswer is one call made by a racing goroutine. afterDelete says the call started after a
// Delete had returned, so it must see the tombstone.
type raceAnswer struct {
	who         string
	call        string
	afterDelete bool
	outcome     ledgerdb.Outcome
	entryID     int64
	err         error
	// job is what a Delete that applied says the tombstone remembers.
	job ledgerdb.State
}

func (a raceAnswer) String() string {
	return fmt.Sprintf("%s %s (after delete: %v) answered (%q, entry %d, %v)", a.who, a.call, a.afterDelete, a.outcome, a.entryID, a.err)
}

// TestDeleteRacesResubmit deletes a settled job (delivered, refunded, recovered or rejected)
// hundreds of times, twice at once, while other goroutines keep resubmitting the same ID (with
// the same body and with another one) and charging it, and the job's late result lands (reclaim,
// then deliver). It checks the remembered-IDs, idempotent-doors, reversing-pairs, net-effect and
// sum-of-rows rules: the ID is never resurrected or charged again once deleted (the remembered-IDs
// rule: every submission, charge or delivery that starts after a Delete returned answers ErrGone,
// and the row stays a tombstone); a racing Delete, Submit or Charge answers as a repeat and writes
// nothing (the idempotent-doors rule); the job keeps the rows it had, one charge at most, plus one
// reclaim when it was refunded — its late result reclaims the refund whether it beat the delete or
// not, since deletion hides a job, never what it owes (the reversing-pairs rule); the tombstone
// remembers the money state that matches those rows (the net-effect rule); and every balance equals
// the sum of its rows (the sum-of-rows rule).
func TestDeleteRacesResubmit(t *testing.T) {
	const (
		rounds = 300
		// lanes is how many rounds run at once. Each round is its own job, so lanes only
		// overlap the rounds' waiting; the race itself is inside a round.
		lanes = 4
	)
	store := ledgertest.Store(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const grant = 1_000_000
	rich := ledgertest.Account(t, store, grant)
	poor := ledgertest.Account(t, store, 0)
	prefix := ledgertest.ID(t, "del")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xde1))

	fates := []ledgerdb.State{ledgerdb.StateDelivered, ledgerdb.StateRefunded, ledgerdb.StateRecovered, ledgerdb.StateRejected}
	plans := make([]deleteRacePlan, rounds)
	for round := range plans {
		p := deleteRacePlan{
			fate: fates[round%len(fates)],
			sub: ledgerdb.Submission{
				JobID:     fmt.Sprintf("%s-%03d", prefix, round),
				AccountID: rich,
				Kind:      ledgertest.Fixed(t, store, 1+int64(round%50)),
				Request:   fmt.Appendf(nil, `{"render":"round-%d"}`, round),
			},
			jitter: [2]time.Duration{time.Duration(rng.IntN(1500)) * time.Microsecond, time.Duration(rng.IntN(1500)) * time.Microsecond},
		}
		if p.fate == ledgerdb.StateRejected {
			p.sub.AccountID = poor
		}
		p.where = fmt.Sprintf("seed %d round %d, job %s (%s)", seed, round, p.sub.JobID, p.fate)
		plans[round] = p
	}

	results := make([]deleteRaceResult, rounds)
	feed := make(chan int)
	var wg sync.WaitGroup
	for range lanes {
		wg.Go(func() {
			for round := range feed {
				results[round] = raceDeleteRound(ctx, store, plans[round])
			}
		})
	}
	for round := range plans {
		feed <- round
	}
	close(feed)
	wg.Wait()
	require.NoError(t, ctx.Err(), "seed %d", seed)

	wantRich := int64(grant)
	var before, after, lateWins, tombstoneReclaims int
	var problems []string
	for round, r := range results {
		problems = append(problems, r.problems...)
		before, after = before+r.before, after+r.after
		if plans[round].fate == ledgerdb.StateRefunded {
			if r.deletedAs == ledgerdb.StateRecovered {
				lateWins++
			} else {
				tombstoneReclaims++
			}
		}
		if r.fate == ledgerdb.StateDelivered || r.fate == ledgerdb.StateRecovered {
			wantRich -= 1 + int64(round%50)
		}
	}
	require.Empty(t, problems, "seed %d: %d problems", seed, len(problems))
	// Both sides of the race must have happened, or the test proved only one of them.
	require.Positive(t, before, "seed %d: no racer call landed before a delete", seed)
	t.Logf("%d rounds: %d racer calls before a delete returned, %d after; a late result beat the delete of a refunded job %d times, and reclaimed its tombstone %d times",
		rounds, before, after, lateWins, tombstoneReclaims)

	balance, err := store.Balance(ctx, rich)
	require.NoError(t, err)
	require.Equal(t, wantRich, balance, "seed %d", seed)
	ledgertest.RequireSound(t, store, rich, poor)
}

// deleteRacePlan is one round of TestDeleteRacesResubmit: a job, the fate it is settled in before
// the race, and how long each of the two deleters waits before deleting.
type deleteRacePlan struct {
	fate   ledgerdb.State
	sub    ledgerdb.Submission
	jitter [2]time.Duration
	where  string
}

// deleteRaceResult is what a round saw: its problems (empty when sound), how many racing calls
// started before and after the delete returned, the state the tombstone remembers in the end, and
// the state the delete found.
type deleteRaceResult struct {
	problems        []string
	before, after   int
	fate, deletedAs ledgerdb.State
}

// deleteRaceRacers is how many goroutines resubmit and charge in a round (racer 0 sends another
// body), and deleteRaceMaxLoop how many times each goes round at most.
const (
	deleteRaceRacers  = 6
	deleteRaceMaxLoop = 200
)

// deleteRound is one round of TestDeleteRacesResubmit in progress: the answers of its goroutines
// (each writes only its own slot: the racers, the two deleters, the late result) and what the round
// has found so far.
type deleteRound struct {
	ctx     context.Context
	store   *ledgerdb.Store
	p       deleteRacePlan
	res     deleteRaceResult
	deleted atomic.Bool
	answers [][]raceAnswer
}

// raceDeleteRound settles one job, races its delete against resubmissions, charges and a late
// result, and checks the tombstone. It runs off the test goroutine, so it reports problems
// instead of failing the test.
func raceDeleteRound(ctx context.Context, store *ledgerdb.Store, p deleteRacePlan) deleteRaceResult {
	d := &deleteRound{ctx: ctx, store: store, p: p, res: deleteRaceResult{fate: p.fate}, answers: make([][]raceAnswer, deleteRaceRacers+3)}
	if err := settleAlong(ctx, store, p.sub, p.fate); err != nil {
		return d.fail("%v", err)
	}
	d.race()
	if ctx.Err() != nil {
		return d.fail("%v", ctx.Err())
	}
	d.judge()
	if len(d.res.problems) > 0 {
		return d.res
	}
	return d.checkTombstone()
}

// fail records a problem of the round and answers the round's result so far.
func (d *deleteRound) fail(format string, args ...any) deleteRaceResult {
	d.res.problems = append(d.res.problems, d.p.where+": "+fmt.Sprintf(format, args...))
	return d.res
}

// settleAlong submits and charges a job and takes it to fate: delivered, refunded, recovered, or
// rejected for want of credits.
func settleAlong(ctx context.Context, store *ledgerdb.Store, sub ledgerdb.Submission, fate ledgerdb.State) error {
	if _, err := store.Submit(ctx, sub); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	_, err := store.Charge(ctx, sub.Key())
	if fate == ledgerdb.StateRejected && !errors.Is(err, ledgerdb.ErrInsufficientCredits) ||
		fate != ledgerdb.StateRejected && err != nil {
		return fmt.Errorf("charge: %v", err)
	}
	switch fate {
	case ledgerdb.StateDelivered:
		if _, err := store.Deliver(ctx, sub.Key(), 1); err != nil {
			return fmt.Errorf("deliver: %w", err)
		}
	case ledgerdb.StateRefunded, ledgerdb.StateRecovered:
		if _, err := store.Refund(ctx, sub.Key(), ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3); err != nil {
			return fmt.Errorf("refund: %w", err)
		}
		if fate == ledgerdb.StateRecovered {
			if _, err := store.Reclaim(ctx, sub.Key()); err != nil {
				return fmt.Errorf("reclaim: %w", err)
			}
		}
	}
	return nil
}

// race runs two deleters (a duplicate delivery of the user's DELETE) against the racers and the
// job's late result, all released at once.
func (d *deleteRound) race() {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for n := range 2 {
		wg.Go(func() { <-start; d.deleter(n) })
	}
	wg.Go(func() { <-start; d.lateResult() })
	for r := range deleteRaceRacers {
		wg.Go(func() { <-start; d.racer(r) })
	}
	close(start)
	wg.Wait()
}

// deleter n deletes the job after its jitter.
func (d *deleteRound) deleter(n int) {
	time.Sleep(d.p.jitter[n])
	tr, err := d.store.Delete(d.ctx, d.p.sub.Key())
	if err == nil {
		d.deleted.Store(true)
	}
	d.answers[deleteRaceRacers+n] = append(d.answers[deleteRaceRacers+n], raceAnswer{who: fmt.Sprintf("deleter %d", n), call: "delete",
		outcome: tr.Outcome, entryID: tr.EntryID, err: err, job: tr.Job.StateBeforeDelete})
}

// lateResult is the job's late result landing during the race: the success path reclaims (which
// applies only to a refunded job, deleted or not), then delivers, until a reclaim started after
// the delete returned.
func (d *deleteRound) lateResult() {
	slot := deleteRaceRacers + 2
	for range deleteRaceMaxLoop {
		afterDelete := d.deleted.Load()
		tr, err := d.store.Reclaim(d.ctx, d.p.sub.Key())
		d.answers[slot] = append(d.answers[slot], raceAnswer{who: "late result", call: "reclaim",
			afterDelete: afterDelete, outcome: tr.Outcome, entryID: tr.EntryID, err: err})
		deliverAfter := d.deleted.Load()
		tr, err = d.store.Deliver(d.ctx, d.p.sub.Key(), 4)
		d.answers[slot] = append(d.answers[slot], raceAnswer{who: "late result", call: "deliver",
			afterDelete: deliverAfter, outcome: tr.Outcome, entryID: tr.EntryID, err: err})
		if afterDelete || d.ctx.Err() != nil {
			return
		}
	}
}

// racer r resubmits (racer 0 with another body) and charges the job until a whole
// resubmit-and-charge started after the delete returned.
func (d *deleteRound) racer(r int) {
	mine := d.p.sub
	if r == 0 {
		mine.Request = append(slices.Clip(mine.Request), " "...)
	}
	who := fmt.Sprintf("racer %d", r)
	for range deleteRaceMaxLoop {
		afterDelete := d.deleted.Load()
		tr, err := d.store.Submit(d.ctx, mine)
		d.answers[r] = append(d.answers[r], raceAnswer{who: who, call: "submit", afterDelete: afterDelete,
			outcome: tr.Outcome, entryID: tr.EntryID, err: err})
		chargeAfter := d.deleted.Load()
		tr, err = d.store.Charge(d.ctx, d.p.sub.Key())
		d.answers[r] = append(d.answers[r], raceAnswer{who: who, call: "charge", afterDelete: chargeAfter,
			outcome: tr.Outcome, entryID: tr.EntryID, err: err})
		if afterDelete || d.ctx.Err() != nil {
			return
		}
	}
}

// judge checks every answer of the race: only a refunded job's late result moves money, once; the
// two deletes answer Applied and AlreadyApplied; every other call answers as its side of the
// delete allows. A refunded job whose late result reclaimed it is recovered from then on.
func (d *deleteRound) judge() {
	fate := d.p.fate
	deletes := map[ledgerdb.Outcome]int{}
	reclaimed := 0
	for r, list := range d.answers {
		for _, a := range list {
			if a.call == "reclaim" && a.err == nil && a.outcome == ledgerdb.Applied {
				// Only the late result of a refunded job may move money, once, before the delete
				// or on its tombstone.
				reclaimed++
				if fate != ledgerdb.StateRefunded || a.entryID == 0 {
					d.fail("reclaim applied: %s", a)
				}
				continue
			}
			if a.entryID != 0 {
				d.fail("wrote a ledger row: %s", a)
			}
			switch {
			case a.call == "delete":
				if a.err != nil {
					d.fail("%s", a)
				}
				if a.outcome == ledgerdb.Applied {
					d.res.deletedAs = a.job
				}
				deletes[a.outcome]++
			case a.afterDelete:
				d.res.after++
				if !answeredAfterDelete(a, fate) {
					d.fail("after the delete: %s", a)
				}
			default:
				d.res.before++
				if !answeredBeforeDelete(a, r, fate) {
					d.fail("before the delete: %s", a)
				}
			}
		}
	}
	if deletes[ledgerdb.Applied] != 1 || deletes[ledgerdb.AlreadyApplied] != 1 {
		d.fail("the two deletes answered %v, want one Applied and one AlreadyApplied", deletes)
	}
	if d.res.after == 0 {
		d.fail("no racer call started after the delete returned")
	}
	if fate == ledgerdb.StateRefunded && reclaimed != 1 {
		d.fail("the late result of a refunded job reclaimed %d times, want once", reclaimed)
	}
	if reclaimed == 1 {
		d.res.fate = ledgerdb.StateRecovered
	}
}

// answeredAfterDelete says whether a call that started after the delete returned answered as a
// tombstone must: ErrGone — except a late result's reclaim, which answers a tombstone as the state
// it was deleted from (a refunded one's applied, judged apart): a rejected one is gone.
func answeredAfterDelete(a raceAnswer, fate ledgerdb.State) bool {
	if a.call == "reclaim" {
		switch fate {
		case ledgerdb.StateRefunded, ledgerdb.StateRecovered:
			return a.err == nil && a.outcome == ledgerdb.AlreadyApplied
		case ledgerdb.StateDelivered:
			return a.err == nil && a.outcome == ledgerdb.NotApplied
		}
	}
	return errors.Is(a.err, ledgerdb.ErrGone)
}

// answeredBeforeDelete says whether a call that started before the delete returned (by racer r,
// when a racer's) answered as a repeat on a job settled in fate, or ErrGone when the delete won.
func answeredBeforeDelete(a raceAnswer, r int, fate ledgerdb.State) bool {
	if errors.Is(a.err, ledgerdb.ErrGone) {
		return true
	}
	switch {
	case a.call == "reclaim":
		// Applied was judged apart.
		want := ledgerdb.NotApplied
		if fate == ledgerdb.StateRefunded || fate == ledgerdb.StateRecovered {
			want = ledgerdb.AlreadyApplied
		}
		return a.err == nil && a.outcome == want
	case a.call == "deliver":
		// A refunded job answers NotApplied, or AlreadyApplied once its reclaim won.
		return a.err == nil && (a.outcome == ledgerdb.AlreadyApplied && fate != ledgerdb.StateRejected ||
			a.outcome == ledgerdb.NotApplied && (fate == ledgerdb.StateRefunded || fate == ledgerdb.StateRejected))
	case a.call == "submit" && r == 0:
		return errors.Is(a.err, ledgerdb.ErrConflict)
	case a.call == "submit":
		return a.err == nil && a.outcome == ledgerdb.AlreadyApplied
	case fate == ledgerdb.StateRejected:
		return errors.Is(a.err, ledgerdb.ErrInsufficientCredits)
	default:
		return a.err == nil && a.outcome == ledgerdb.AlreadyApplied
	}
}

// checkTombstone checks the job after the race: the state and money the tombstone remembers, the
// burnt ID, and the rows of its fate only.
func (d *deleteRound) checkTombstone() deleteRaceResult {
	ctx, store, sub, fate, deletedAs := d.ctx, d.store, d.p.sub, d.res.fate, d.res.deletedAs
	if deletedAs != fate && !(deletedAs == ledgerdb.StateRefunded && d.p.fate == ledgerdb.StateRefunded) {
		d.fail("the applied delete says the job was %q, want %q", deletedAs, fate)
	}
	job, err := store.Job(ctx, sub.Key())
	if err != nil || job.State != ledgerdb.StateDeleted || job.StateBeforeDelete != fate {
		d.fail("read back as (%s, before delete %s, %v), want a tombstone of %s", job.State, job.StateBeforeDelete, err, fate)
	}
	if _, err := store.Submit(ctx, sub); !errors.Is(err, ledgerdb.ErrGone) {
		d.fail("submit after the race: %v, want ErrGone", err)
	}
	if _, err := store.Charge(ctx, sub.Key()); !errors.Is(err, ledgerdb.ErrGone) {
		d.fail("charge after the race: %v, want ErrGone", err)
	}
	got, err := raceRowsOfJob(ctx, store, sub.Key())
	if err != nil {
		return d.fail("reading rows: %v", err)
	}
	if want := rowsOfFate(fate, job.Cost); !reflect.DeepEqual(got, want) {
		d.fail("rows %v, want %v", got, want)
	}
	return d.res
}

// rowsOfFate is the rows a job of cost keeps in each end state: a charge unless rejected, a refund
// when refunded or recovered, a reclaim when recovered.
func rowsOfFate(fate ledgerdb.State, cost int64) map[ledgerdb.EntryKind][]int64 {
	want := map[ledgerdb.EntryKind][]int64{}
	if fate != ledgerdb.StateRejected {
		want[ledgerdb.KindCharge] = []int64{-cost}
	}
	if fate == ledgerdb.StateRefunded || fate == ledgerdb.StateRecovered {
		want[ledgerdb.KindRefund] = []int64{cost}
	}
	if fate == ledgerdb.StateRecovered {
		want[ledgerdb.KindReclaim] = []int64{-cost}
	}
	return want
}

// raceRowsOfJob reads a job's charge, refund and reclaim amounts straight from ledger_entries.
func raceRowsOfJob(ctx context.Context, store *ledgerdb.Store, job ledgerdb.JobKey) (map[ledgerdb.EntryKind][]int64, error) {
	rows, err := store.Pool().Query(ctx, `SELECT kind, amount FROM ledger_entries WHERE job_id = $1 ORDER BY id`, job.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[ledgerdb.EntryKind][]int64{}
	for rows.Next() {
		var kind string
		var amount int64
		if err := rows.Scan(&kind, &amount); err != nil {
			return nil, err
		}
		got[ledgerdb.EntryKind(kind)] = append(got[ledgerdb.EntryKind(kind)], amount)
	}
	return got, rows.Err()
}

// TestConcurrentSubmitSameID has many goroutines submit the same new ID at once, some with
// another body (another request, or another cost), then charge it at once, and checks the
// remembered-IDs, idempotent-doors, price-list and reversing-pairs rules: exactly one submission
// writes the placeholder (Applied) and fixes what the ID means (the remembered-IDs rule); every
// other one answers as a repeat (AlreadyApplied) when its body matches the winner's, or ErrConflict
// when it does not, and writes nothing (the idempotent-doors rule); the charge takes the winner's
// cost, not a loser's (the price-list rule); and exactly one concurrent Charge applies, leaving one
// charge row (the reversing-pairs rule).
func TestConcurrentSubmitSameID(t *testing.T) {
	const (
		rounds     = 40
		goroutines = 16
	)
	store := ledgertest.Store(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const grant = 1_000_000
	account := ledgertest.Account(t, store, grant)
	prefix := ledgertest.ID(t, "same")
	balance := int64(grant)
	winsByBody := [2]int{}

	for round := range rounds {
		id := fmt.Sprintf("%s-%02d", prefix, round)
		bodies := [2]ledgerdb.Submission{
			{JobID: id, AccountID: account, Kind: ledgertest.Fixed(t, store, 40), Request: []byte(`{"render":"a"}`)},
			{JobID: id, AccountID: account, Kind: ledgertest.Fixed(t, store, 40), Request: []byte(`{"render":"b"}`)},
		}
		if round%2 == 1 {
			// Same request, another kind: the kind is part of what the ID means.
			bodies[1] = ledgerdb.Submission{JobID: id, AccountID: account, Kind: ledgertest.Fixed(t, store, 41), Request: bodies[0].Request}
		}
		key := bodies[0].Key()
		where := fmt.Sprintf("round %d, job %s", round, id)

		type answer struct {
			body    int
			outcome ledgerdb.Outcome
			err     error
		}
		answers := make([]answer, goroutines)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				body := 0
				if g%4 == 0 {
					body = 1
				}
				<-start
				tr, err := store.Submit(ctx, bodies[body])
				answers[g] = answer{body: body, outcome: tr.Outcome, err: err}
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for _, a := range answers {
			if a.err == nil && a.outcome == ledgerdb.Applied {
				require.Equal(t, -1, winner, "%s: two submissions answered Applied: %+v", where, answers)
				winner = a.body
			}
		}
		require.NotEqual(t, -1, winner, "%s: no submission answered Applied: %+v", where, answers)
		winsByBody[winner]++
		applied := 0
		for g, a := range answers {
			switch {
			case a.err == nil && a.outcome == ledgerdb.Applied:
				applied++
			case a.body == winner:
				require.NoError(t, a.err, "%s: goroutine %d", where, g)
				require.Equal(t, ledgerdb.AlreadyApplied, a.outcome, "%s: goroutine %d", where, g)
			default:
				require.ErrorIs(t, a.err, ledgerdb.ErrConflict, "%s: goroutine %d", where, g)
			}
		}
		require.Equal(t, 1, applied, where)

		var fingerprint []byte
		var cost int64
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT request_fingerprint, cost FROM jobs WHERE id = $1`, key.String()).
			Scan(&fingerprint, &cost))
		require.Equal(t, bodies[winner].Fingerprint(), fingerprint, "%s: the stored request is not the winner's", where)
		require.Equal(t, map[int]int64{0: 40, 1: 40 + int64(round%2)}[winner], cost, where)

		type charged struct {
			outcome ledgerdb.Outcome
			entryID int64
			err     error
		}
		charges := make([]charged, goroutines)
		start = make(chan struct{})
		for g := range goroutines {
			wg.Go(func() {
				<-start
				tr, err := store.Charge(ctx, key)
				charges[g] = charged{outcome: tr.Outcome, entryID: tr.EntryID, err: err}
			})
		}
		close(start)
		wg.Wait()
		applied = 0
		for g, c := range charges {
			require.NoError(t, c.err, "%s: charge %d", where, g)
			if c.outcome == ledgerdb.Applied {
				applied++
				require.NotZero(t, c.entryID, "%s: charge %d", where, g)
				continue
			}
			require.Equal(t, ledgerdb.AlreadyApplied, c.outcome, "%s: charge %d", where, g)
			require.Zero(t, c.entryID, "%s: charge %d wrote a row", where, g)
		}
		require.Equal(t, 1, applied, "%s: charges answered %+v", where, charges)
		rows := stormRowsByJob(t, store, []ledgerdb.JobKey{key})[key]
		require.Equal(t, map[ledgerdb.EntryKind][]int64{ledgerdb.KindCharge: {-cost}}, rows, where)
		balance -= cost
	}
	t.Logf("%d rounds: the first body won %d times, the other %d", rounds, winsByBody[0], winsByBody[1])

	got, err := store.Balance(ctx, account)
	require.NoError(t, err)
	require.Equal(t, balance, got)
	ledgertest.RequireSound(t, store, account)
}

// meteredRaceRound is one round of the metered races: a metered job of kind, charged (and
// refunded first, if refunded), and the usages its racing settles report.
type meteredRaceRound struct {
	job, account, kind string
	refunded           bool
	usages             []*int64
	refund             bool // a refund races the settles
	where              string
}

// meteredRaceResult is what a round's racers answered.
type meteredRaceResult struct {
	setup   error
	settles []ledgerdb.Transition
	refund  ledgerdb.Transition
	errs    []error
}

// key names the round's job.
func (r meteredRaceRound) key() ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: r.account, JobID: r.job}
}

func setUpMeteredRace(ctx context.Context, store *ledgerdb.Store, r meteredRaceRound) error {
	if _, err := store.Submit(ctx, ledgerdb.Submission{JobID: r.job, AccountID: r.account, Kind: r.kind, Request: []byte("x")}); err != nil {
		return err
	}
	if _, err := store.Charge(ctx, r.key()); err != nil {
		return err
	}
	if r.refunded {
		_, err := store.Refund(ctx, r.key(), ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
		return err
	}
	return nil
}

// raceMetered runs every round, lanes of them at once: it sets the round's job up, then releases
// the round's racers together.
func raceMetered(ctx context.Context, store *ledgerdb.Store, rounds []meteredRaceRound, lanes int) []meteredRaceResult {
	results := make([]meteredRaceResult, len(rounds))
	feed := make(chan int)
	var wg sync.WaitGroup
	for range lanes {
		wg.Go(func() {
			for i := range feed {
				r := rounds[i]
				res := meteredRaceResult{settles: make([]ledgerdb.Transition, len(r.usages)), errs: make([]error, len(r.usages)+1)}
				if err := setUpMeteredRace(ctx, store, r); err != nil {
					res.setup = err
					results[i] = res
					continue
				}
				start := make(chan struct{})
				var racers sync.WaitGroup
				for k, usage := range r.usages {
					racers.Go(func() {
						<-start
						res.settles[k], res.errs[k] = store.Settle(ctx, r.key(), 2, usage, "")
					})
				}
				if r.refund {
					racers.Go(func() {
						<-start
						res.refund, res.errs[len(r.usages)] = store.Refund(ctx, r.key(), ledgerdb.ReasonStoppedByOperator, "stopped by an operator: terminated", 1)
					})
				}
				close(start)
				racers.Wait()
				results[i] = res
			}
		})
	}
	for i := range rounds {
		feed <- i
	}
	close(feed)
	wg.Wait()
	return results
}

// meteredRaceUsages draws n usages of a job holding held units whose settlements differ — none,
// zero, within, the hold, above it (capped at the hold) — so that which one won is visible.
func meteredRaceUsages(rng *rand.Rand, held int64, n int) []*int64 {
	effective := func(u *int64) int64 {
		if u == nil {
			return held
		}
		return min(*u, held)
	}
	var out []*int64
	seen := map[int64]bool{}
	for len(out) < n {
		var u *int64
		switch rng.IntN(5) {
		case 0:
		case 1:
			u = ledgerdb.Units(0)
		case 2:
			u = ledgerdb.Units(1 + rng.Int64N(held-1))
		case 3:
			u = ledgerdb.Units(held)
		default:
			u = ledgerdb.Units(held + 1 + rng.Int64N(1000))
		}
		if !seen[effective(u)] {
			seen[effective(u)] = true
			out = append(out, u)
		}
	}
	return out
}

// TestSettleRaceDifferentUsages settles each metered job twice at once with two DIFFERENT usages
// (a result reported twice, by the runner and by a callback, with different figures), on running
// jobs and on refunded ones (a late result), round after round. It checks the
// reversing-pairs, net-effect and idempotent-doors rules: exactly one settle answers Applied and
// the other AlreadyApplied, both with the units the winner recorded — min(its usage, the hold),
// never the other's and never a mix; the job has exactly one release row, of (held − used) × unit
// price (none when nothing is left), besides exactly the charge, refund and reclaim its path needs;
// it nets −used × unit price; and the account's balance is the grant minus every job's used × unit
// price, and the sum of its rows.
func TestSettleRaceDifferentUsages(t *testing.T) {
	m := newMeteredRace(t, "usage", 0x05a6e, 3, 20)
	plan, results := m.run(t, 160, func(i int) meteredRaceRound {
		return meteredRaceRound{refunded: i%2 == 1, usages: meteredRaceUsages(m.rng, m.maxUnits, 2)}
	})

	wantBalance := int64(meteredRaceGrant)
	firstWon := 0
	for i, r := range plan {
		res := results[i]
		winner, used := m.requireOneSettleApplied(t, r, res)
		if winner == 0 {
			firstWon++
		}
		for k, tr := range res.settles {
			require.NotNil(t, tr.Job.UnitsUsed, "%s: settle %d", r.where, k)
			require.Equal(t, used, *tr.Job.UnitsUsed, "%s: settle %d answered other units than the winner's", r.where, k)
		}
		wantState := ledgerdb.StateDelivered
		if r.refunded {
			wantState = ledgerdb.StateRecovered
		}
		job := m.requireRows(t, r, used, r.refunded)
		require.Equal(t, wantState, job.State, r.where)
		wantBalance -= used * m.unitPrice
	}
	t.Logf("%d rounds: the first settle won %d times, the second %d", len(plan), firstWon, len(plan)-firstWon)
	ledgertest.RequireBalance(t, m.store, m.acct, wantBalance)
}

// TestMeteredSettleRacesRefund races a metered job's result (Settle with its usage) against its
// refund (a timeout, or the heal of a terminated run) on the running job, round after round, and
// in half the rounds a second result with another usage too. It checks the reversing-pairs,
// net-effect and idempotent-doors rules and the one-step settle of docs/design.md: the result is
// never lost — exactly one settle applies, whichever commits first — and the job ends either
// delivered and settled (the refund found nothing to refund: NotApplied) or recovered and settled
// (the refund applied and the settle reclaimed it in the same step), with exactly the rows of that
// path: charge −hold, then refund +hold and reclaim −hold if the refund won, and one release of
// (held − used) × unit price when above zero; it nets −used × unit price in both cases; and the
// balance is the sum of the rows.
func TestMeteredSettleRacesRefund(t *testing.T) {
	m := newMeteredRace(t, "vsrefund", 0x4ef0d, 7, 10)
	plan, results := m.run(t, 160, func(i int) meteredRaceRound {
		return meteredRaceRound{refund: true, usages: meteredRaceUsages(m.rng, m.maxUnits, 1+i%2)}
	})

	wantBalance := int64(meteredRaceGrant)
	outcomes := map[ledgerdb.State]int{}
	for i, r := range plan {
		res := results[i]
		_, used := m.requireOneSettleApplied(t, r, res)
		job, err := m.store.Job(m.ctx, r.key())
		require.NoError(t, err)
		switch job.State {
		case ledgerdb.StateDelivered:
			require.Equal(t, ledgerdb.NotApplied, res.refund.Outcome, "%s: delivered, yet the refund applied", r.where)
			require.Zero(t, res.refund.EntryID, r.where)
		case ledgerdb.StateRecovered:
			require.Equal(t, ledgerdb.Applied, res.refund.Outcome, "%s: recovered, yet the refund did not apply", r.where)
		default:
			t.Fatalf("%s: the job ended %s", r.where, job.State)
		}
		outcomes[job.State]++
		m.requireRows(t, r, used, job.State == ledgerdb.StateRecovered)
		wantBalance -= used * m.unitPrice

		// A later report of the result changes nothing.
		again, err := m.store.Settle(m.ctx, r.key(), 3, ledgerdb.Units(0), "")
		require.NoError(t, err)
		require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome, r.where)
		requireSettled(t, again.Job, used)
	}
	t.Logf("settle racing refund: %v", outcomes)
	ledgertest.RequireBalance(t, m.store, m.acct, wantBalance)
}

// meteredRaceGrant is what the account of a metered race is granted: more than every round spends.
const meteredRaceGrant = 1_000_000

// meteredRace is what the metered races share: the test ledger, a context that bounds the race, a
// kind metered at unitPrice a unit that holds maxUnits, an account granted meteredRaceGrant, a
// job-ID prefix, and a seeded source of the usages the racers report.
type meteredRace struct {
	ctx                 context.Context
	store               *ledgerdb.Store
	kind, acct, prefix  string
	unitPrice, maxUnits int64
	seed                uint64
	rng                 *rand.Rand
}

// newMeteredRace sets a metered race up: its job IDs made from tag, its usages drawn from a
// source seeded now on stream (the seed is logged, so that a failure can be played again).
func newMeteredRace(t *testing.T, tag string, stream uint64, unitPrice, maxUnits int64) *meteredRace {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	store := ledgertest.Store(t)
	m := &meteredRace{ctx: ctx, store: store, unitPrice: unitPrice, maxUnits: maxUnits,
		kind: ledgertest.Metered(t, store, unitPrice, maxUnits), acct: ledgertest.Account(t, store, meteredRaceGrant),
		prefix: ledgertest.ID(t, tag), seed: uint64(time.Now().UnixNano())}
	t.Logf("seed %d", m.seed)
	m.rng = rand.New(rand.NewPCG(m.seed, stream))
	return m
}

// run plans rounds rounds — round says what each one's racers do — on jobs of the race's kind
// and account, races them four at a time, and answers the plan and what the racers answered. It
// fails the test when a round could not be set up or a racer failed.
func (m *meteredRace) run(t *testing.T, rounds int, round func(i int) meteredRaceRound) ([]meteredRaceRound, []meteredRaceResult) {
	t.Helper()
	plan := make([]meteredRaceRound, rounds)
	for i := range plan {
		r := round(i)
		r.job, r.account, r.kind = fmt.Sprintf("%s-%03d", m.prefix, i), m.acct, m.kind
		r.where = fmt.Sprintf("seed %d round %d, job %s (refunded first: %v, usages %s)", m.seed, i, r.job, r.refunded, fmtUsages(r.usages))
		plan[i] = r
	}
	results := raceMetered(m.ctx, m.store, plan, 4)
	require.NoError(t, m.ctx.Err(), "seed %d", m.seed)
	for i, r := range plan {
		require.NoError(t, results[i].setup, "%s: setting up", r.where)
		for k, err := range results[i].errs[:len(r.usages)] {
			require.NoError(t, err, "%s: settle %d", r.where, k)
		}
		if r.refund {
			require.NoError(t, results[i].errs[len(r.usages)], "%s: the refund", r.where)
		}
	}
	return plan, results
}

// requireOneSettleApplied fails unless exactly one of the round's settles answered Applied and
// every other AlreadyApplied, with no row; it answers the winner and the units it recorded:
// its usage, capped at the hold (the whole hold when it named none).
func (m *meteredRace) requireOneSettleApplied(t *testing.T, r meteredRaceRound, res meteredRaceResult) (int, int64) {
	t.Helper()
	winner := -1
	for k, tr := range res.settles {
		if tr.Outcome == ledgerdb.Applied {
			require.Equal(t, -1, winner, "%s: two settles answered Applied", r.where)
			winner = k
			continue
		}
		require.Equal(t, ledgerdb.AlreadyApplied, tr.Outcome, "%s: settle %d", r.where, k)
		require.Zero(t, tr.EntryID, "%s: settle %d answered AlreadyApplied with a row", r.where, k)
	}
	require.NotEqual(t, -1, winner, "%s: no settle applied: the result was lost (a racing refund answered %q)", r.where, res.refund.Outcome)
	used := m.maxUnits
	if u := r.usages[winner]; u != nil {
		used = min(*u, m.maxUnits)
	}
	return winner, used
}

// requireRows fails unless the round's job, settled at used units, has exactly the rows of its
// path — the charge of the hold; the refund and its reclaim when it was refunded; one release of
// the unused units when above zero — and its settlement's figures (the reversing-pairs and
// net-effect rules). It answers the job.
func (m *meteredRace) requireRows(t *testing.T, r meteredRaceRound, used int64, refunded bool) ledgerdb.Job {
	t.Helper()
	hold := m.unitPrice * m.maxUnits
	want := map[ledgerdb.EntryKind][]int64{ledgerdb.KindCharge: {-hold}}
	if refunded {
		want[ledgerdb.KindRefund], want[ledgerdb.KindReclaim] = []int64{hold}, []int64{-hold}
	}
	if released := (m.maxUnits - used) * m.unitPrice; released > 0 {
		want[ledgerdb.KindRelease] = []int64{released}
	}
	got, err := raceRowsOfJob(m.ctx, m.store, r.key())
	require.NoError(t, err)
	require.Equal(t, want, got, r.where)
	job, err := m.store.Job(m.ctx, r.key())
	require.NoError(t, err)
	requireSettled(t, job, used)
	return job
}

func fmtUsages(usages []*int64) string {
	parts := make([]string, len(usages))
	for i, u := range usages {
		parts[i] = "none"
		if u != nil {
			parts[i] = fmt.Sprint(*u)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}
