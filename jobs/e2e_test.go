package jobs_test

// End-to-end tests: the job service, an in-process worker, the real Temporal dev server and the real
// Postgres test database, playing the stories and checking the money rules (docs/design.md)
// on the ledger rows, the balance, and the search attributes in visibility.
//
// They need Postgres and Temporal: the ones the test URLs name (make test names those of make db
// and make temporal), or, with none set, those the tests start for the checkout
// (docs/development.md, "Services and settings"). With JOBBILL_RECORD_HISTORIES=1 they also write each story's workflow history to
// workflows/testdata/histories for the replay test:
//
//	JOBBILL_RECORD_HISTORIES=1 go test -count=1 -run E2E ./jobs/

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// e2ePolicy makes the stories take seconds (workertest.QuickPolicy).
func e2ePolicy() workflows.Policy { return workertest.QuickPolicy() }

// lateStoryPolicy is for the stories whose every attempt times out before their result lands:
// attempts of 2 s (workertest.TimeoutPolicy, for work that never finishes), and a late-result
// window far longer than the test takes to report the result, which closes the run.
func lateStoryPolicy() workflows.Policy {
	p := workertest.TimeoutPolicy()
	p.LateResultWindow = 10 * time.Minute
	return p
}

// shortWindow is e2ePolicy with the given number of attempts and a late-result window so short
// that a refunded job's workflow closes within the test.
func shortWindow(attempts int32) workflows.Policy {
	p := e2ePolicy()
	p.MaximumAttempts = attempts
	p.LateResultWindow = time.Second
	return p
}

// simulatedDuration is how long a simulated attempt works: a sliver of QuickPolicy's timeouts.
const simulatedDuration = time.Second

// waitLimit bounds every wait of a story for its workflow, its ledger state or visibility.
const waitLimit = 60 * time.Second

// e2eEnv is the process's worker and the clients the tests share; its Jobs is the worker's
// own (the simulated runner reports late results through it), with e2ePolicy.
type e2eEnv struct{ *workertest.Env }

// newEnv returns the process's end-to-end environment, starting it on first use: a worker on a
// task queue unique to this test process, over the tests' Temporal (JOBBILL_TEMPORAL_ADDRESS, or
// the checkout's own dev server) and the migrated test database.
func newEnv(t *testing.T) *e2eEnv {
	t.Helper()
	return &e2eEnv{workertest.Shared(t, "e2e", func(cfg *config.Config) {
		cfg.Policy = e2ePolicy()
		cfg.Runner.Simulated.Duration = simulatedDuration
	})}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// awaitClosed waits until the job's workflow (its latest run) closes and returns its result.
func (e *e2eEnv) awaitClosed(t *testing.T, workflowID string) workflows.JobStatus {
	t.Helper()
	ctx := testContext(t)
	var status workflows.JobStatus
	require.NoError(t, e.Client.GetWorkflow(ctx, workflowID, "").Get(ctx, &status),
		"workflow %s did not complete", workflowID)
	return status
}

// waitState polls the ledger until the job reaches state.
func (e *e2eEnv) waitState(t *testing.T, st *jobs.Service, key ledgerdb.JobKey, state ledgerdb.State) jobs.Status {
	t.Helper()
	status, err := st.Wait(testContext(t), key, state)
	require.NoError(t, err)
	return status
}

// refundedAndClosed submits a "sim:fail" job on a fresh account granted 200 credits, under a
// one-second late-result window, and waits until its workflow has closed refunded with a charge
// and a refund row (the reversing-pairs and net-effect rules). It answers the job service the job
// was submitted through, the account and the job's ID: its story.
func (e *e2eEnv) refundedAndClosed(t *testing.T, cost int64) *story {
	t.Helper()
	s := e.submitStory(t, e.JobsWith(shortWindow(1)), cost, "sim:fail")
	require.NoError(t, s.err)
	require.Equal(t, ledgerdb.StateRefunded, e.awaitClosed(t, s.workflowID()).State)
	ledgertest.RequireRows(t, e.Store, s.key(), cost, ledgerdb.KindCharge, ledgerdb.KindRefund)
	return s
}

// requireVisible polls visibility until a workflow matches the query (visibility lags the
// workflow a little), and fails when none does within the wait limit.
func (e *e2eEnv) requireVisible(t *testing.T, query string) {
	t.Helper()
	ctx := testContext(t)
	var lastErr error
	for {
		resp, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: e.Config.Temporal.Namespace,
			Query:     query,
		})
		if err == nil && len(resp.GetExecutions()) > 0 {
			return
		}
		lastErr = err
		select {
		case <-ctx.Done():
			t.Fatalf("no workflow in visibility matches %q (last error: %v)", query, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// jobQuery is the visibility query for a job's workflow with the given billing state.
func jobQuery(jobID, accountID string, state ledgerdb.State, more string) string {
	q := fmt.Sprintf("WorkflowId = '%s' AND BillingState = '%s' AND AccountID = '%s'",
		workflows.JobWorkflowID(accountID, jobID), state, accountID)
	if more != "" {
		q += " AND " + more
	}
	return q
}

// story is one job of a test on an account of its own: its account, ID, kind and cost, the job
// service it was submitted through, and what its submission answered.
type story struct {
	acct, id string
	kind     string
	cost     int64
	st       *jobs.Service
	sub      jobs.Submission
	err      error
}

// key names the story's job.
func (s *story) key() ledgerdb.JobKey { return ledgerdb.JobKey{AccountID: s.acct, JobID: s.id} }

// workflowID is the story's job's workflow ID.
func (s *story) workflowID() string { return workflows.JobWorkflowID(s.acct, s.id) }

// job is the story's job, submitted again with input.
func (s *story) job(input string) jobs.Job {
	return jobs.Job{ID: s.id, AccountID: s.acct, Kind: s.kind, InputRef: input}
}

// submitStory opens an account with 200 credits and submits a job to it, of a kind sold by the
// job at cost credits.
func (e *e2eEnv) submitStory(t *testing.T, st *jobs.Service, cost int64, input string) *story {
	t.Helper()
	return e.submitStoryOf(t, st, ledgertest.Fixed(t, e.Store, cost), cost, input)
}

// submitStoryOf is submitStory for a job of kind, whose charge holds cost credits.
func (e *e2eEnv) submitStoryOf(t *testing.T, st *jobs.Service, kind string, cost int64, input string) *story {
	t.Helper()
	return e.submitStoryTo(t, st, ledgertest.Account(t, e.Store, 200), kind, cost, input)
}

// submitStoryTo is submitStoryOf on the account acct.
func (e *e2eEnv) submitStoryTo(t *testing.T, st *jobs.Service, acct, kind string, cost int64, input string) *story {
	t.Helper()
	s := &story{acct: acct, id: ledgertest.ID(t, "job"), kind: kind, cost: cost, st: st}
	s.sub, s.err = workertest.Submit(testContext(t), t, st, s.job(input))
	return s
}

// submitted is submitStory through e.Jobs, failing the test unless the job was accepted.
func (e *e2eEnv) submitted(t *testing.T, cost int64, input string) *story {
	t.Helper()
	s := e.submitStory(t, e.Jobs, cost, input)
	require.NoError(t, s.err)
	return s
}

// requireMoney fails unless the story's job has exactly one ledger row of each of kinds, each
// moving its cost (the reversing-pairs rule), and its account holds balance (the sum-of-rows
// rule).
func (e *e2eEnv) requireMoney(t *testing.T, s *story, balance int64, kinds ...ledgerdb.EntryKind) {
	t.Helper()
	ledgertest.RequireRows(t, e.Store, s.key(), s.cost, kinds...)
	ledgertest.RequireBalance(t, e.Store, s.acct, balance)
}

// recordEnv turns the history recorder on.
const recordEnv = "JOBBILL_RECORD_HISTORIES"

// historiesDir is where the replay test (workflows/replay_test.go) finds the histories.
var historiesDir = filepath.Join("..", "workflows", "testdata", "histories")

// recordedVersion names the workflow version whose histories the recorder writes: each file is
// <recordedVersion>-<name>.json. Bump it with the workflows' latest version.
const recordedVersion = "v6"

// recordHistory writes the closed workflow's history to
// workflows/testdata/histories/<recordedVersion>-<name>.json when JOBBILL_RECORD_HISTORIES=1, in
// the JSON of `temporal workflow show --output json` (no payload shorthand), which the SDK's
// replayer reads. It never overwrites a file: a released version's histories are never recorded
// again (see workflows/versions.go), so that the replay test keeps checking that the code still
// replays the runs that version left in flight.
func (e *e2eEnv) recordHistory(t *testing.T, name, workflowID string) {
	t.Helper()
	if os.Getenv(recordEnv) != "1" {
		return
	}
	iter := e.Client.GetWorkflowHistory(testContext(t), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	history := &historypb.History{}
	for iter.HasNext() {
		event, err := iter.Next()
		require.NoError(t, err)
		history.Events = append(history.Events, event)
	}
	require.NotEmpty(t, history.Events)
	last := history.Events[len(history.Events)-1].GetEventType()
	require.Contains(t, []enumspb.EventType{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
	}, last, "workflow %s must be closed before its history is recorded", workflowID)
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(history)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(historiesDir, 0o755))
	path := filepath.Join(historiesDir, recordedVersion+"-"+name+".json")
	if _, err := os.Stat(path); err == nil {
		t.Logf("%s exists; a recorded history is never replaced", path)
		return
	}
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	t.Logf("recorded the history of %s (%d events) to %s", workflowID, len(history.Events), path)
}

// TestE2ESubmitIsIdempotent checks the doors of submission. The remembered-IDs and idempotent-doors
// rules: the same ID submitted twice, concurrently or later, is one job charged once; a different
// request under the ID is a conflict; a deleted ID is gone for good and is never charged again.
func TestE2ESubmitIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const cost = 40
	acct := ledgertest.Account(t, e.Store, 200)
	id := ledgertest.ID(t, "job")
	job := jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, cost), InputRef: "sim:ok"}
	key := job.Key()

	// Two submissions of a fresh ID race each other, as a client's retry would.
	subs := make([]jobs.Submission, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Go(func() { subs[i], errs[i] = workertest.Submit(testContext(t), t, e.Jobs, job) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NotEqual(t, subs[0].Duplicate, subs[1].Duplicate, "exactly one of two racing submissions is the duplicate")
	for _, s := range subs {
		require.Equal(t, ledgerdb.MoneyCharged, s.Status.MoneyState)
	}

	again, err := workertest.Submit(testContext(t), t, e.Jobs, job)
	require.NoError(t, err)
	require.True(t, again.Duplicate)

	other := job
	other.InputRef = "sim:fail"
	_, err = e.Jobs.Submit(testContext(t), other)
	require.ErrorIs(t, err, ledgerdb.ErrConflict)

	final := e.awaitClosed(t, workflows.JobWorkflowID(acct, id))
	require.Equal(t, ledgerdb.StateDelivered, final.State)
	// After the workflow closed: still the same job, still charged once.
	late, err := e.Jobs.Submit(testContext(t), job)
	require.NoError(t, err)
	require.True(t, late.Duplicate)
	require.Equal(t, ledgerdb.StateDelivered, late.Status.State)
	ledgertest.RequireRows(t, e.Store, key, cost, ledgerdb.KindCharge)
	ledgertest.RequireBalance(t, e.Store, acct, 200-cost)

	deleted, err := e.Jobs.Delete(testContext(t), key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDeleted, deleted.State)
	require.Equal(t, ledgerdb.MoneyCharged, deleted.MoneyState, "a tombstone keeps the money as it was")
	_, err = e.Jobs.Submit(testContext(t), job)
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	status, err := e.Jobs.Status(testContext(t), key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDeleted, status.State)
	ledgertest.RequireRows(t, e.Store, key, cost, ledgerdb.KindCharge)
	ledgertest.RequireBalance(t, e.Store, acct, 200-cost)

	_, err = e.Jobs.Status(testContext(t), ledgerdb.JobKey{AccountID: acct, JobID: ledgertest.ID(t, "never")})
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, "an ID that never reached us is not found: nothing charged")
}

// TestE2ELateResultAfterClose reports a result after the job's workflow closed as refunded.
// The reversing-pairs, net-effect, price-list and idempotent-doors rules: the job service's
// fallback workflow reclaims the refund once (one reclaim row of −cost, net −cost); a second report
// of the same result is recognised by the ledger's inbox and changes nothing.
func TestE2ELateResultAfterClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const cost = 40
	s := e.refundedAndClosed(t, cost)
	st, acct, id, key := s.st, s.acct, s.id, s.key()
	e.recordHistory(t, "refunded-then-closed", s.workflowID())

	res := activities.WorkResult{Attempt: 1, OutputRef: "sim://" + id + "/late", FinishedAt: time.Now().UTC()}
	report, err := st.ReportResult(testContext(t), key, res)
	require.NoError(t, err)
	require.Equal(t, "fallback", report.Path)
	require.Equal(t, ledgerdb.Applied, report.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, report.Status.State)
	require.Equal(t, ledgerdb.MoneyCharged, report.Status.MoneyState)
	e.requireMoney(t, s, 200-cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	e.recordHistory(t, "late-result-fallback", workflows.LateResultWorkflowID(acct, id))

	// The same report again is recognised by the ledger's inbox: nothing changes.
	again, err := st.ReportResult(testContext(t), key, res)
	require.NoError(t, err)
	require.Equal(t, jobs.PathAlreadyApplied, again.Path)
	require.Equal(t, ledgerdb.StateRecovered, again.Status.State)
	e.requireMoney(t, s, 200-cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	e.requireVisible(t, fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = 'Completed'", workflows.LateResultWorkflowID(acct, id)))
}

// TestE2ERedriveOpenDeadLetter re-drives a dead letter whose workflow still listens: the redrive
// runs the work again and it succeeds. The reversing-pairs, net-effect and idempotent-doors rules:
// charge, refund, reclaim — the refund is reclaimed once, never a second charge; BillingState
// recovered and DeadLettered false.
func TestE2ERedriveOpenDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const cost = 40
	// Three attempts fail; the fourth, the redrive's, succeeds. The window only has to outlast
	// the test's redrive, which closes the run: it is far longer than the test takes.
	p := e2ePolicy()
	p.LateResultWindow = 10 * time.Minute
	s := e.submitStory(t, e.JobsWith(p), cost, "sim:ok-on-attempt:4")
	require.NoError(t, s.err)
	st, acct, id, key := s.st, s.acct, s.id, s.key()
	e.waitState(t, st, key, ledgerdb.StateRefunded)
	e.requireVisible(t, jobQuery(id, acct, ledgerdb.StateRefunded, "DeadLettered = true AND ExecutionStatus = 'Running'"))

	status, err := st.Redrive(testContext(t), key, "e2e", "GPU pool fixed")
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, status.State, "Redrive answers the job as it was when asked")

	final := e.awaitClosed(t, s.workflowID())
	require.Equal(t, 1, final.Redrives)
	require.Equal(t, ledgerdb.StateRecovered, final.State,
		"the redrive's first attempt must be the job's attempt 4 (sim:ok-on-attempt:4), not attempt 1 again")
	require.Equal(t, 4, final.Attempts)
	require.False(t, final.DeadLettered)
	e.requireMoney(t, s, 200-cost, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	e.requireVisible(t, jobQuery(id, acct, ledgerdb.StateRecovered, "DeadLettered = false"))
	e.recordHistory(t, "redrive-open", s.workflowID())
}

// TestE2ERedriveAfterClose re-drives a dead letter whose workflow closed when its late-result
// window ended: the job service starts a new run of the job's ID, which finds the job refunded in the
// ledger and runs the job's own work again. The work (sim:fail) fails again. The
// reversing-pairs, price-list, remembered-IDs and idempotent-doors rules: the new run charges
// nothing, refunds nothing a second time and reclaims nothing — the rows stay charge and refund,
// the balance stays the grant.
func TestE2ERedriveAfterClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const cost = 40
	s := e.refundedAndClosed(t, cost)
	acct, id, key := s.acct, s.id, s.key()

	_, err := s.st.Redrive(testContext(t), key, "e2e", "after the window")
	require.NoError(t, err)
	final := e.awaitClosed(t, s.workflowID())
	require.Equal(t, 1, final.Redrives)
	require.Equal(t, ledgerdb.StateRefunded, final.State,
		"the redrive must run the job's own input (sim:fail), which fails again")
	e.requireMoney(t, s, 200, ledgerdb.KindCharge, ledgerdb.KindRefund)
	e.requireVisible(t, jobQuery(id, acct, ledgerdb.StateRefunded, "DeadLettered = true AND ExecutionStatus = 'Completed'"))
	e.recordHistory(t, "redrive-after-close", s.workflowID())
}
