package jobs_test

// Stories (a) to (g) of `make run`, end to end (see e2e_test.go for what these tests need), each
// checked against the money rules on its ledger rows, its balance and its search attributes.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// landLate waits until every attempt of the story's job has timed out and the job is refunded,
// then reports the result of its last attempt, attempt 3, with the usage it names (nil: none).
func (e *e2eEnv) landLate(t *testing.T, st *jobs.Service, s *story, used *int64) {
	t.Helper()
	refunded := e.waitState(t, st, s.key(), ledgerdb.StateRefunded)
	require.Equal(t, ledgerdb.ReasonTimedOut, refunded.Reason, "%+v", refunded)
	res := activities.WorkResult{Attempt: 3, OutputRef: fmt.Sprintf("sim://%s/attempt-3", s.id), FinishedAt: time.Now().UTC(), UnitsUsed: used}
	report, err := st.ReportResult(testContext(t), s.key(), res)
	require.NoError(t, err)
	require.Equal(t, jobs.PathSignal, report.Path, "the refunded run still listens for its late result")
}

// TestE2EStories plays stories (a) to (g) of `make run` (internal/stories) side by side, each on
// its own account: every job is submitted first, so that the seven workflows run at the same
// time, and then each story is checked in its own subtest, against the money rules its check
// names.
func TestE2EStories(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	began := time.Now()
	defer func() { t.Logf("seven stories took %s", time.Since(began).Round(time.Millisecond)) }()
	// Metered by the GPU-second at 2 credits, at most 60 seconds: a hold of 120 credits.
	gpu := ledgertest.Metered(t, e.Store, 2, 60)

	// The late stories' work never finishes, so its attempts surely time out, and their result
	// lands once the test has seen the refund — as a GPU service's late call reports it — rather
	// than a set time after the last deadline, which a loaded machine could reach first.
	late := e.JobsWith(lateStoryPolicy())
	type storyCase struct {
		name  string
		st    *jobs.Service
		kind  string // empty: a kind sold by the job at cost
		cost  int64
		input string
		check func(t *testing.T, e *e2eEnv, s *story)
		s     *story
	}
	d := &duplicateReports{}
	cases := []*storyCase{
		{name: "a-first-try", st: e.Jobs, cost: 40, input: "sim:ok", check: storyFirstTry},
		{name: "b-late-recovered", st: late, cost: 40, input: "sim:hang", check: storyLateRecovered},
		{name: "c-dead-lettered", st: e.JobsWith(shortWindow(3)), cost: 40, input: "sim:fail", check: storyDeadLettered},
		{name: "d-result-twice", st: e.Jobs, cost: 40, input: "sim:hang", check: d.check},
		{name: "e-rejected", st: e.Jobs, cost: 10_000, input: "sim:ok", check: storyRejected},
		{name: "f-metered", st: e.Jobs, kind: gpu, cost: 120, input: "sim:ok+used:37", check: storyMetered},
		{name: "g-metered-late", st: late, kind: gpu, cost: 120, input: "sim:hang", check: storyMeteredLate},
	}
	for _, c := range cases {
		if c.kind == "" {
			c.s = e.submitStory(t, c.st, c.cost, c.input)
		} else {
			c.s = e.submitStoryOf(t, c.st, c.kind, c.cost, c.input)
		}
	}
	// (d)'s result is reported at once, twice, concurrently, as a duplicated callback would.
	d.report(t, e, cases[3].s)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(t, e, c.s)
			e.recordHistory(t, c.name, workflows.JobWorkflowID(c.s.acct, c.s.id))
		})
	}
}

// storyFirstTry is (a), success on the first try. The reversing-pairs, net-effect, price-list and
// sum-of-rows rules: exactly one charge row of −cost, the balance is the grant minus the cost, the
// audit holds; BillingState delivered in visibility.
func storyFirstTry(t *testing.T, e *e2eEnv, a *story) {
	require.NoError(t, a.err)
	require.False(t, a.sub.Duplicate)
	require.Equal(t, ledgerdb.StateRunning, a.sub.Status.State, "Submit answers once the charge is decided")
	require.Equal(t, ledgerdb.MoneyCharged, a.sub.Status.MoneyState)

	final := e.awaitClosed(t, a.workflowID())
	require.Equal(t, ledgerdb.StateDelivered, final.State)
	require.Equal(t, 1, final.Attempts)
	require.False(t, final.DeadLettered)
	status, err := e.Jobs.Status(testContext(t), a.key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDelivered, status.State)
	require.Equal(t, 1, status.Attempts)
	e.requireMoney(t, a, 200-a.cost, ledgerdb.KindCharge)
	e.requireVisible(t, jobQuery(a.id, a.acct, ledgerdb.StateDelivered, "DeadLettered = false"))
}

// storyLateRecovered is (b): every attempt times out → refunded → the late attempt's result lands
// (reported through the job service) → recovered. The reversing-pairs, net-effect, price-list and
// idempotent-doors rules: charge, refund and reclaim rows of −cost, +cost, −cost (net −cost), the
// refund never doubled.
func storyLateRecovered(t *testing.T, e *e2eEnv, b *story) {
	require.NoError(t, b.err)
	require.Equal(t, ledgerdb.StateRunning, b.sub.Status.State)
	e.landLate(t, b.st, b, nil)

	final := e.awaitClosed(t, b.workflowID())
	require.Equal(t, ledgerdb.StateRecovered, final.State, "the late result of attempt 3 recovers the job")
	require.Equal(t, 3, final.Attempts)
	require.False(t, final.DeadLettered)
	require.Equal(t, "timed out after 3 attempts", final.Reason)
	require.Equal(t, fmt.Sprintf("sim://%s/attempt-3", b.id), final.OutputRef)
	e.requireMoney(t, b, 200-b.cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	e.requireVisible(t, jobQuery(b.id, b.acct, ledgerdb.StateRecovered, "DeadLettered = false"))
}

// storyDeadLettered is (c): every attempt fails, refunded and dead-lettered for good (the
// late-result window ends with nothing). The reversing-pairs, net-effect and sum-of-rows rules:
// charge and refund rows, net 0, the balance back to the grant; DeadLettered stays true on the
// closed workflow.
func storyDeadLettered(t *testing.T, e *e2eEnv, c *story) {
	require.NoError(t, c.err)
	final := e.awaitClosed(t, c.workflowID())
	require.Equal(t, ledgerdb.StateRefunded, final.State)
	require.True(t, final.DeadLettered)
	require.Equal(t, 3, final.Attempts)
	status, err := e.Jobs.Status(testContext(t), c.key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State)
	require.Equal(t, ledgerdb.MoneyRefunded, status.MoneyState)
	require.Equal(t, ledgerdb.ReasonGPUFailed, status.Reason)
	require.Contains(t, status.Detail, "after 3 attempts")
	require.Equal(t, "Not delivered: the work failed on the GPU side. Your 40 credits were refunded.", status.Message)
	e.requireMoney(t, c, 200, ledgerdb.KindCharge, ledgerdb.KindRefund)
	e.requireVisible(t, jobQuery(c.id, c.acct, ledgerdb.StateRefunded, "DeadLettered = true AND ExecutionStatus = 'Completed'"))
}

// duplicateReports is (d)'s result, reported twice at once, and what each report answered.
type duplicateReports struct {
	result  activities.WorkResult
	reports []jobs.ResultReport
	errs    []error
}

// report reports d's result twice, concurrently, through the job service, unless its submission
// failed (which d's check then reports).
func (r *duplicateReports) report(t *testing.T, e *e2eEnv, d *story) {
	r.result = activities.WorkResult{Attempt: 1, OutputRef: "sim://" + d.id + "/callback", FinishedAt: time.Now().UTC()}
	r.reports, r.errs = make([]jobs.ResultReport, 2), make([]error, 2)
	if d.err != nil {
		return
	}
	var wg sync.WaitGroup
	for i := range r.reports {
		wg.Go(func() { r.reports[i], r.errs[i] = e.Jobs.ReportResult(testContext(t), d.key(), r.result) })
	}
	wg.Wait()
}

// check is (d): the same result reported twice, concurrently, while the work hangs, is delivered
// once. The reversing-pairs, net-effect and idempotent-doors rules: one charge row and nothing
// else, whichever door each report took (a signal, the fallback if the workflow had already closed,
// or the inbox's answer that the other report had already been taken, when the two were not quite
// simultaneous).
func (r *duplicateReports) check(t *testing.T, e *e2eEnv, d *story) {
	require.NoError(t, d.err)
	require.NoError(t, errors.Join(r.errs...))
	final := e.awaitClosed(t, d.workflowID())
	require.Equal(t, ledgerdb.StateDelivered, final.State)
	require.Equal(t, r.result.OutputRef, final.OutputRef)
	fallbacks, taken := 0, 0
	for _, rep := range r.reports {
		switch rep.Path {
		case "signal":
		case "fallback":
			fallbacks++
			require.Equal(t, ledgerdb.NotApplied, rep.Outcome, "a delivered job has no refund to reclaim")
		case jobs.PathAlreadyApplied:
			// The inbox already held this result as applied: the report sent nothing on.
			taken++
		default:
			t.Fatalf("a report answered path %q", rep.Path)
		}
	}
	require.Equal(t, 1, final.IgnoredResults+fallbacks+taken, "exactly one of the two reports changes nothing")
	e.requireMoney(t, d, 200-d.cost, ledgerdb.KindCharge)
	e.requireVisible(t, jobQuery(d.id, d.acct, ledgerdb.StateDelivered, "DeadLettered = false"))
}

// storyRejected is (e), insufficient credits: Submit answers ErrInsufficientCredits and the job
// is rejected. The net-effect and sum-of-rows rules: no ledger row, the balance untouched.
func storyRejected(t *testing.T, e *e2eEnv, s *story) {
	require.ErrorIs(t, s.err, ledgerdb.ErrInsufficientCredits)
	require.Equal(t, ledgerdb.StateRejected, s.sub.Status.State)
	require.Equal(t, ledgerdb.MoneyNotCharged, s.sub.Status.MoneyState)
	require.Equal(t, ledgerdb.ReasonInsufficientCredits, s.sub.Status.Reason)

	final := e.awaitClosed(t, s.workflowID())
	require.Equal(t, ledgerdb.StateRejected, final.State)
	e.requireMoney(t, s, 200)
	e.requireVisible(t, jobQuery(s.id, s.acct, ledgerdb.StateRejected, "DeadLettered = false"))
}

// storyMetered is (f), metered: the charge holds 60 GPU-seconds at 2 credits (120), the work
// reports 37 seconds, and the settlement — in the same ledger step as the delivery — returns the
// other 23 seconds' 46 credits. The reversing-pairs, net-effect and price-list rules: one charge of
// the hold, one release, net −37 × 2; the user reads what was held, charged and returned.
func storyMetered(t *testing.T, e *e2eEnv, f *story) {
	require.NoError(t, f.err)
	require.Equal(t, int64(120), f.sub.Status.Held)
	final := e.awaitClosed(t, f.workflowID())
	require.Equal(t, ledgerdb.StateDelivered, final.State)
	require.Equal(t, int64(74), final.Charged)
	status, err := e.Jobs.Status(testContext(t), f.key())
	require.NoError(t, err)
	require.Equal(t, int64(37), *status.UnitsUsed)
	require.Equal(t, int64(74), status.Charged)
	require.Equal(t, int64(46), status.Released)
	require.Contains(t, status.Message, "74 of 120 held credits charged; 46 returned")
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -120}, {Kind: ledgerdb.KindRelease, Amount: 46}},
		ledgertest.Rows(t, e.Store, f.key()))
	ledgertest.RequireBalance(t, e.Store, f.acct, 200-74)
}

// storyMeteredLate is (g), metered: every attempt times out → refunded → the result lands late
// with 25 seconds used → the reclaim takes back exactly the refunded hold and the settlement
// returns the unused 35 seconds. The reversing-pairs, net-effect, price-list and idempotent-doors
// rules: charge −120, refund +120, reclaim −120, release +70, net −25 × 2.
func storyMeteredLate(t *testing.T, e *e2eEnv, g *story) {
	require.NoError(t, g.err)
	used := int64(25)
	e.landLate(t, g.st, g, &used)
	final := e.awaitClosed(t, g.workflowID())
	require.Equal(t, ledgerdb.StateRecovered, final.State)
	require.Equal(t, int64(50), final.Charged)
	require.Equal(t, []ledgertest.Row{
		{Kind: ledgerdb.KindCharge, Amount: -120}, {Kind: ledgerdb.KindRefund, Amount: 120},
		{Kind: ledgerdb.KindReclaim, Amount: -120}, {Kind: ledgerdb.KindRelease, Amount: 70},
	}, ledgertest.Rows(t, e.Store, g.key()))
	ledgertest.RequireBalance(t, e.Store, g.acct, 200-50)
}
