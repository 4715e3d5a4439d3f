package invariants_test

// The checker against the real Postgres test database and the real Temporal dev server: real jobs
// through an in-process worker pass it; then each violation kind is provoked the way production
// could provoke it, without leaving the shared database or namespace broken for other tests (each
// test checks only its own job-ID prefix, and heals what it broke before it ends).
//
// They need Postgres and Temporal: the ones the test URLs name, or, with none set, those the tests
// start for the checkout (docs/development.md, "Services and settings").

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// simulatedDuration is how long a simulated attempt works: short, so a job settles in about a
// second, and long enough that a result signal sent after the refund is not a race.
const simulatedDuration = 300 * time.Millisecond

// testPolicy fails a job for good after one attempt and closes its workflow a second after the
// refund, so every story here settles within a few seconds; its attempt's timeouts are
// workertest.QuickPolicy's, far beyond the work, so a job that should be delivered is.
func testPolicy() workflows.Policy {
	p := workertest.QuickPolicy()
	p.MaximumAttempts = 1
	p.LateResultWindow = time.Second
	return p
}

// env is the process's worker on a task queue of its own: no other test process's worker takes
// these tasks, and the checker, scoped to it, sees no other process's workflows.
type env struct{ *workertest.Env }

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{workertest.Shared(t, "invariants", func(cfg *config.Config) {
		cfg.Runner.Simulated.Duration = simulatedDuration
	})}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// prefix is a job-ID prefix unique to one test run, which scopes the test's check to its own jobs.
func prefix(tag string) string { return fmt.Sprintf("inv-%s-%s-", tag, randomHex(4)) }

// jobService is a job service on the worker's task queue whose jobs get testPolicy.
func (e *env) jobService() *jobs.Service { return e.JobsWith(testPolicy()) }

// listeningJobService is a job service whose refunded jobs listen for a late result far longer
// than a test takes to check them: their workflows stay open until the test reports the result.
func (e *env) listeningJobService() *jobs.Service {
	p := testPolicy()
	p.LateResultWindow = 10 * time.Minute
	return e.JobsWith(p)
}

// check runs the checker over the test's own jobs and workflows.
func (e *env) check(t *testing.T, jobPrefix string, edit ...func(*invariants.Options)) invariants.Report {
	t.Helper()
	opts := invariants.Options{
		Ledger: e.Store, Temporal: e.Client, Namespace: e.Config.Temporal.Namespace,
		TaskQueue: e.Config.Temporal.TaskQueue, JobIDPrefix: jobPrefix,
	}
	for _, f := range edit {
		f(&opts)
	}
	report, err := invariants.Check(testContext(t), opts)
	require.NoError(t, err)
	return report
}

// withGrace is a check that leaves alone whatever is younger than grace.
func withGrace(grace time.Duration) func(*invariants.Options) {
	return func(o *invariants.Options) { o.Grace = grace }
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireOnly fails unless the report holds exactly one violation, of kind, for jobID.
func requireOnly(t *testing.T, report invariants.Report, kind invariants.Kind, jobID string) invariants.Violation {
	t.Helper()
	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text))
	require.Len(t, report.Violations, 1, "want one %s violation for %s; the report:\n%s", kind, jobID, text.String())
	v := report.Violations[0]
	require.Equal(t, kind, v.Kind, text.String())
	require.Equal(t, jobID, v.JobID, text.String())
	require.False(t, report.OK())
	t.Logf("reported as expected:\n%s", text.String())
	return v
}

// requireOK fails with the text report unless the check found nothing.
func requireOK(t *testing.T, report invariants.Report) {
	t.Helper()
	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text))
	require.True(t, report.OK(), "the check found violations:\n%s", text.String())
}

// waitBillingState waits until the workflow's own search attributes (not visibility, which lags)
// show state.
func (e *env) waitBillingState(t *testing.T, id string, state ledgerdb.State) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := e.Client.DescribeWorkflow(testContext(t), id, "")
		if err != nil {
			return false
		}
		got, _ := d.TypedSearchAttributes.GetKeyword(workflows.BillingStateKey)
		return got == string(state)
	}, 30*time.Second, 100*time.Millisecond, "workflow %s never showed BillingState %s", id, state)
}

// story is one test's own corner of the shared worker and ledger: a fresh account and a job-ID
// prefix that scopes every check of the test to its own jobs.
type story struct {
	*env
	ctx  context.Context
	acct string
	// p is the test's job-ID prefix.
	p string
}

// newStory gives the test a fresh account granted credits, and a job-ID prefix made from tag.
func newStory(t *testing.T, tag string, credits int64) *story {
	t.Helper()
	e := newEnv(t)
	return &story{env: e, ctx: testContext(t), acct: ledgertest.Account(t, e.Store, credits), p: prefix(tag)}
}

// charged charges the job p+name, at 30 credits, through the ledger alone: no workflow runs it.
func (s *story) charged(t *testing.T, name string) (string, ledgerdb.Transition) {
	t.Helper()
	id := s.p + name
	return id, ledgertest.Charged(t, s.Store, s.acct, id, 30, "sim:ok")
}

// heal heals the job as the reconcile pass and a status read do, and fails unless it did.
func (s *story) heal(t *testing.T, job ledgerdb.Job) {
	t.Helper()
	healed, err := s.jobService().Heal(s.ctx, job)
	require.NoError(t, err)
	require.True(t, healed)
}

// lateResult reports attempt 1's result of the job through st, as a worker whose result came late
// does, and answers the report.
func (s *story) lateResult(t *testing.T, st *jobs.Service, key ledgerdb.JobKey) jobs.ResultReport {
	t.Helper()
	rep, err := st.ReportResult(s.ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "sim://late", FinishedAt: time.Now().UTC()})
	require.NoError(t, err)
	return rep
}

// awaitClosed waits until the job's workflow has closed.
func (s *story) awaitClosed(t *testing.T, jobID string) {
	t.Helper()
	require.NoError(t, s.Client.GetWorkflow(s.ctx, workflows.JobWorkflowID(s.acct, jobID), "").Get(s.ctx, nil))
}

// unpolled is a task queue no worker polls: a workflow started on it is open, and nothing runs it.
func (s *story) unpolled() string { return s.Config.Temporal.TaskQueue + "-nobody-polls" }

// start starts a workflow as a client other than the job service would, and terminates it when
// the test ends, should it still be open, so that nothing is left running in the shared namespace.
func (s *story) start(t *testing.T, opts client.StartWorkflowOptions, workflow any, args ...any) client.WorkflowRun {
	t.Helper()
	run, err := s.Client.ExecuteWorkflow(s.ctx, opts, workflow, args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Client.TerminateWorkflow(context.Background(), opts.ID, run.GetRunID(), "invariants test done")
	})
	return run
}

// startUnpolled starts the job's own workflow, at 30 credits, on the task queue no worker polls,
// and answers its workflow ID.
func (s *story) startUnpolled(t *testing.T, id string) string {
	t.Helper()
	workflowID := workflows.JobWorkflowID(s.acct, id)
	s.start(t, client.StartWorkflowOptions{ID: workflowID, TaskQueue: s.unpolled()}, workflows.MeteredJob,
		workflows.JobInput{JobID: id, AccountID: s.acct, Kind: ledgertest.Fixed(t, s.Store, 30), Work: activities.WorkRequest{InputRef: "sim:ok"}})
	return workflowID
}

// awaitReport runs the checker over the test's jobs on taskQueue until done accepts its report
// (visibility lags the workflows), fails with msg when it never does, and answers the report.
func (s *story) awaitReport(t *testing.T, taskQueue string, done func(invariants.Report) bool, msg string) invariants.Report {
	t.Helper()
	var report invariants.Report
	require.Eventually(t, func() bool {
		// Not s.check: a failing require must not run on Eventually's goroutine.
		var err error
		report, err = invariants.Check(s.ctx, invariants.Options{Ledger: s.Store, Temporal: s.Client,
			Namespace: s.Config.Temporal.Namespace, TaskQueue: taskQueue, JobIDPrefix: s.p})
		return err == nil && done(report)
	}, 15*time.Second, 200*time.Millisecond, msg)
	return report
}

// ownerTx begins a transaction as the owner — the application role may not write the ledger's
// tables outside its functions — which is rolled back when the test ends, if not before.
func ownerTx(t *testing.T, ctx context.Context) pgx.Tx {
	t.Helper()
	tx, err := ledgertest.OwnerPool(t).Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// checkIn checks the ledger as tx sees it within scope, logging each violation it finds.
func checkIn(t *testing.T, ctx context.Context, tx pgx.Tx, scope ledgerdb.SnapshotScope) []invariants.Violation {
	t.Helper()
	snap, err := ledgerdb.ReadLedgerSnapshot(ctx, tx, scope)
	require.NoError(t, err)
	violations := invariants.CheckLedger(snap)
	for _, v := range violations {
		t.Logf("%s (rule %d): %s", v.Kind, v.Rule, v.Message)
	}
	return violations
}

// requireRolledBack fails unless the ledger within scope, as committed, is sound: what a test
// broke inside its transaction is gone with the rollback.
func requireRolledBack(t *testing.T, ctx context.Context, store *ledgerdb.Store, scope ledgerdb.SnapshotScope) {
	t.Helper()
	snap, err := store.LedgerSnapshot(ctx, scope)
	require.NoError(t, err)
	require.Empty(t, invariants.CheckLedger(snap), "the rollback left the ledger sound")
}

// check runs the checker over the story's own jobs and workflows.
func (s *story) check(t *testing.T, edit ...func(*invariants.Options)) invariants.Report {
	t.Helper()
	return s.env.check(t, s.p, edit...)
}

// exec runs one statement of a test's breakage in tx.
func exec(t *testing.T, ctx context.Context, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	_, err := tx.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

// submit submits job through st as a client does, fails unless the submission answers want (nil:
// accepted), and answers the job's key.
func (s *story) submit(t *testing.T, st *jobs.Service, job jobs.Job, want error) ledgerdb.JobKey {
	t.Helper()
	_, err := workertest.Submit(s.ctx, t, st, job)
	if want == nil {
		require.NoError(t, err, job.ID)
	} else {
		require.ErrorIs(t, err, want, job.ID)
	}
	return job.Key()
}
