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
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

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

func (e *env) jobService() *jobs.Service {
	return jobs.New(jobs.Options{
		Temporal: e.Client, Ledger: e.Store, TaskQueue: e.Config.Temporal.TaskQueue,
		Namespace: e.Config.Temporal.Namespace, Policy: testPolicy(),
	})
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

// TestCleanJobsPass runs real jobs through the worker to every end a job can reach — delivered,
// rejected, refunded (workflow closed), recovered through the late-result fallback after its
// workflow closed (so its closed run still says refunded), deleted, and refunded with its
// workflow still open — and checks that the checker finds nothing: the reversing-pairs, net-effect
// and sum-of-rows rules hold, and the workflows agree with the ledger. ledgerdb's own Audit agrees
// on each account.
func TestCleanJobsPass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	st := e.jobService()
	acct := ledgertest.Account(t, e.Store, 1_000)
	poor := ledgertest.Account(t, e.Store, 5)
	p := prefix("clean")
	const cost = 40

	submit := func(st *jobs.Service, name, account, input string, want error) ledgerdb.JobKey {
		job := jobs.Job{ID: p + name, AccountID: account, Kind: ledgertest.Fixed(t, e.Store, cost), InputRef: input}
		_, err := workertest.Submit(ctx, t, st, job)
		if want == nil {
			require.NoError(t, err, job.ID)
		} else {
			require.ErrorIs(t, err, want, job.ID)
		}
		return job.Key()
	}
	delivered := submit(st, "delivered", acct, "sim:ok", nil)
	submit(st, "rejected", poor, "sim:ok", ledgerdb.ErrInsufficientCredits)
	refunded := submit(st, "refunded", acct, "sim:fail", nil)
	recovered := submit(st, "recovered", acct, "sim:fail", nil)
	deleted := submit(st, "deleted", acct, "sim:ok", nil)
	// Listening far longer than the test takes to check it; its late result closes it.
	longWindow := testPolicy()
	longWindow.LateResultWindow = 10 * time.Minute
	openJobs := jobs.New(jobs.Options{Temporal: e.Client, Ledger: e.Store,
		TaskQueue: e.Config.Temporal.TaskQueue, Namespace: e.Config.Temporal.Namespace, Policy: longWindow})
	open := submit(openJobs, "open", acct, "sim:fail", nil)

	for _, key := range []ledgerdb.JobKey{delivered, deleted} {
		_, err := st.Wait(ctx, key, ledgerdb.StateDelivered)
		require.NoError(t, err)
	}
	_, err := st.Delete(ctx, deleted)
	require.NoError(t, err)
	for _, key := range []ledgerdb.JobKey{refunded, recovered} {
		_, err := st.Wait(ctx, key, ledgerdb.StateRefunded)
		require.NoError(t, err)
		require.NoError(t, e.Client.GetWorkflow(ctx, workflows.JobWorkflowID(acct, key.JobID), "").Get(ctx, nil), "the refunded workflow %s closes after its window", key)
	}
	rep, err := st.ReportResult(ctx, recovered, activities.WorkResult{Attempt: 1, OutputRef: "sim://late", FinishedAt: time.Now().UTC()})
	require.NoError(t, err)
	require.Equal(t, "fallback", rep.Path)
	require.Equal(t, ledgerdb.StateRecovered, rep.Status.State)
	_, err = st.Wait(ctx, open, ledgerdb.StateRefunded)
	require.NoError(t, err)
	e.waitBillingState(t, workflows.JobWorkflowID(acct, open.JobID), ledgerdb.StateRefunded)

	report := e.check(t, p)
	requireOK(t, report)
	require.Equal(t, 6, report.Counts.Jobs)
	require.Equal(t, map[ledgerdb.State]int{
		ledgerdb.StateDelivered: 1, ledgerdb.StateRejected: 1, ledgerdb.StateRefunded: 2,
		ledgerdb.StateRecovered: 1, ledgerdb.StateDeleted: 1,
	}, report.Counts.JobsByState)
	require.Equal(t, 2, report.Counts.Accounts)
	require.GreaterOrEqual(t, report.Counts.Workflows, 6)
	require.Equal(t, 1, report.Counts.OpenWorkflows, "the refunded job with the long window is still listening")
	ledgertest.RequireSound(t, e.Store, acct, poor)

	// The same check scoped to one account sees only that account's jobs.
	byAccount := e.check(t, "", func(o *invariants.Options) { o.AccountID = poor })
	requireOK(t, byAccount)
	require.Equal(t, 1, byAccount.Counts.Jobs)
	require.Equal(t, 1, byAccount.Counts.Accounts)
	// An account that does not exist is an error, not a pass that checked nothing.
	_, err = invariants.Check(ctx, invariants.Options{Ledger: e.Store, Temporal: e.Client, AccountID: "no-such-" + p[:len(p)-1]})
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)

	// Leave nothing open behind: the late result recovers the last job.
	_, err = st.ReportResult(ctx, open, activities.WorkResult{Attempt: 1, OutputRef: "sim://late", FinishedAt: time.Now().UTC()})
	require.NoError(t, err)
	require.NoError(t, e.Client.GetWorkflow(ctx, workflows.JobWorkflowID(acct, open.JobID), "").Get(ctx, nil))
	requireOK(t, e.check(t, p))
}

// TestPlaceholderWithoutWorkflow is a job service that stopped between writing the placeholder and
// starting the workflow (the placeholder-first rule, which protects the remembered-IDs rule): the
// job stays submitting with nothing to decide its charge. The checker reports it unless it is
// younger than the grace; submitting the same ID again starts the workflow and heals it. The
// account has no credits, so the healed job ends rejected and charges nothing.
func TestPlaceholderWithoutWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 0)
	p := prefix("placeholder")
	id := p + "orphan"
	job := jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 25), InputRef: "sim:ok"}
	_, err := e.Store.Submit(ctx, ledgerdb.Submission{JobID: id, AccountID: acct, Kind: job.Kind, Request: []byte(job.InputRef)})
	require.NoError(t, err)

	v := requireOnly(t, e.check(t, p), invariants.KindPlaceholderWithoutWorkflow, id)
	require.Equal(t, acct, v.AccountID)
	require.Contains(t, v.Message, "no workflow was ever started")

	// A placeholder younger than the grace is a submission in flight, not an orphan.
	requireOK(t, e.check(t, p, func(o *invariants.Options) { o.Grace = time.Hour }))

	// The text and JSON reports say the same.
	report := e.check(t, p)
	var js bytes.Buffer
	require.NoError(t, report.WriteJSON(&js))
	var decoded struct {
		OK     bool `json:"ok"`
		Counts struct {
			Violations int            `json:"violations"`
			ByKind     map[string]int `json:"violations_by_kind"`
		} `json:"counts"`
		Violations []invariants.Violation `json:"violations"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &decoded), js.String())
	require.False(t, decoded.OK)
	require.Equal(t, 1, decoded.Counts.Violations)
	require.Equal(t, map[string]int{string(invariants.KindPlaceholderWithoutWorkflow): 1}, decoded.Counts.ByKind)
	require.Equal(t, report.Violations, decoded.Violations)

	// Heal: the same submission again starts the workflow, which rejects the unpaid job.
	_, err = workertest.Submit(ctx, t, e.jobService(), job)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
	require.NoError(t, e.Client.GetWorkflow(ctx, workflows.JobWorkflowID(acct, id), "").Get(ctx, nil))
	requireOK(t, e.check(t, p))
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestWorkflowWithoutJob starts a MeteredJob workflow directly, bypassing the job service, under the
// workflow ID of a job the ledger never saw, on a task queue no worker polls: its first step would
// write the job's placeholder, but nothing runs it, and Temporal holds a job the ledger has never
// heard of (the remembered-IDs rule). The checker reports the open workflow once it is older than
// the grace; the test terminates it afterwards (a closed one charged nothing: no money moves for a
// job the ledger does not know, so it is not reported).
func TestWorkflowWithoutJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("nojob")
	id := p + "ghost"
	workflowID := workflows.JobWorkflowID(acct, id)
	in := workflows.JobInput{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 10), Work: activities.WorkRequest{InputRef: "sim:ok"}, Policy: testPolicy()}
	unpolled := e.Config.Temporal.TaskQueue + "-nobody-polls"
	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: unpolled,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.BillingStateKey.ValueSet(string(ledgerdb.StateSubmitting)),
			workflows.AccountIDKey.ValueSet(acct),
		),
	}, workflows.MeteredJob, in)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.Client.TerminateWorkflow(context.Background(), workflowID, run.GetRunID(), "invariants test done")
	})

	requireOK(t, e.check(t, p, func(o *invariants.Options) { o.TaskQueue, o.Grace = unpolled, time.Hour }))
	var report invariants.Report
	require.Eventually(t, func() bool {
		// Not e.check: a failing require must not run on Eventually's goroutine.
		var err error
		report, err = invariants.Check(ctx, invariants.Options{Ledger: e.Store, Temporal: e.Client,
			Namespace: e.Config.Temporal.Namespace, TaskQueue: unpolled, JobIDPrefix: p})
		return err == nil && len(report.Violations) == 1
	}, 15*time.Second, 200*time.Millisecond, "the check never reported the open workflow")
	v := requireOnly(t, report, invariants.KindWorkflowWithoutJob, id)
	require.Equal(t, acct, v.AccountID)
	require.Contains(t, v.Message, "no worker has run it")
	ledgertest.RequireBalance(t, e.Store, acct, 100)
}

// TestUnsettledJobIsReportedThenHealed charges a job through the ledger alone, with no workflow
// to run, deliver or refund it — what a job whose run an operator terminated looks like: charged
// and running, with nothing to settle it (the net-effect rule). Within the grace the checker leaves
// it to the reconcile pass; beyond it, it reports the job. Healing it (as the pass and a status
// read do) refunds it with a heal run, and the check passes again.
func TestUnsettledJobIsReportedThenHealed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("unsettled")
	id := p + "charged"
	charged := ledgertest.Charged(t, e.Store, acct, id, 30, "sim:ok")

	requireOK(t, e.check(t, p, func(o *invariants.Options) { o.Grace = time.Hour }))
	v := requireOnly(t, e.check(t, p), invariants.KindUnsettledJob, id)
	require.Contains(t, v.Message, "charged 30 credits and running, but it has no workflow")

	healed, err := e.jobService().Heal(ctx, charged.Job)
	require.NoError(t, err)
	require.True(t, healed)
	job, err := e.Store.Job(ctx, charged.Job.Key())
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRefunded, job.State)
	require.Equal(t, ledgerdb.ReasonInterrupted, job.RefundReason)
	require.Equal(t, "the job's workflow is gone without settling it", job.RefundDetail)
	requireOK(t, e.check(t, p))
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestChargeAfterItsRunClosedIsReportedAtOnce charges a job after its workflow's run was
// terminated — what a charge held up by a busy ledger does when an operator stops the run
// meanwhile: charged and running, and no run that could ever settle it (the net-effect rule). The
// run closed before the charge, so no healing that is merely late can explain it: the checker
// reports it at once, within any grace, and says that the charge came after the run closed. Healing
// it refunds it, and the check passes again. Before, the checker kept silent for its grace.
func TestChargeAfterItsRunClosedIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("late-charge")
	id := p + "charged"
	workflowID := workflows.JobWorkflowID(acct, id)
	_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: e.Config.Temporal.TaskQueue + "-nobody-polls"},
		workflows.MeteredJob, workflows.JobInput{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 30), Work: activities.WorkRequest{InputRef: "sim:ok"}})
	require.NoError(t, err)
	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, "", "invariants test: stopped before its charge"))
	closed, err := e.Client.DescribeWorkflow(ctx, workflowID, "")
	require.NoError(t, err)
	closedAt := closed.RawResponse.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
	// The charge commits after the close, on the database's clock.
	for {
		var now time.Time
		require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT now()`).Scan(&now))
		if now.After(closedAt) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	charged := ledgertest.Charged(t, e.Store, acct, id, 30, "sim:ok")

	v := requireOnly(t, e.check(t, p, func(o *invariants.Options) { o.Grace = time.Hour }), invariants.KindUnsettledJob, id)
	require.Contains(t, v.Message, "charged 30 credits and running, but its workflow closed as Terminated")
	require.Contains(t, v.Message, "before the charge committed")

	healed, err := e.jobService().Heal(ctx, charged.Job)
	require.NoError(t, err)
	require.True(t, healed)
	requireOK(t, e.check(t, p, func(o *invariants.Options) { o.Grace = time.Hour }))
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestStuckJob starts a charged job's workflow on a task queue no worker polls: the workflow is
// open, but nothing runs it. Within its timeouts that is normal; beyond StuckAfter the checker
// reports it (the reversing-pairs, net-effect and sum-of-rows rules still hold, which is why only
// the age catches it). The test then terminates the workflow and heals the job.
func TestStuckJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("stuck")
	id := p + "charged"
	charged := ledgertest.Charged(t, e.Store, acct, id, 30, "sim:ok")
	workflowID := workflows.JobWorkflowID(acct, id)
	_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: e.Config.Temporal.TaskQueue + "-nobody-polls"},
		workflows.MeteredJob, workflows.JobInput{JobID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 30), Work: activities.WorkRequest{InputRef: "sim:ok"}})
	require.NoError(t, err)

	// Within the default timeouts (well over an hour), a running job is not stuck.
	requireOK(t, e.check(t, p))

	time.Sleep(50 * time.Millisecond)
	v := requireOnly(t, e.check(t, p, func(o *invariants.Options) { o.StuckAfter = 10 * time.Millisecond }),
		invariants.KindStuckJob, id)
	require.Contains(t, v.Message, "has been running (charged 30 credits)")
	require.Contains(t, v.Message, "its workflow is still open")

	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, "", "invariants test: stuck job released"))
	healed, err := e.jobService().Heal(ctx, charged.Job)
	require.NoError(t, err)
	require.True(t, healed)
	requireOK(t, e.check(t, p, func(o *invariants.Options) { o.StuckAfter = 10 * time.Millisecond }))
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestBillingStateMismatch reclaims a refunded job through the ledger behind the back of its
// workflow, which is still open and listening for a late result: the workflow says refunded, the
// ledger recovered. The checker reports the open workflow's disagreement (the workflow's state
// must be the ledger's answer); the reversing-pairs, net-effect and sum-of-rows rules hold, since
// the reclaim itself was guarded. A late result then settles the workflow as recovered and the
// check passes again.
func TestBillingStateMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("mismatch")
	id := p + "behind-its-back"
	// Listening far longer than the test takes; its late result closes it.
	policy := testPolicy()
	policy.LateResultWindow = 10 * time.Minute
	st := jobs.New(jobs.Options{Temporal: e.Client, Ledger: e.Store,
		TaskQueue: e.Config.Temporal.TaskQueue, Namespace: e.Config.Temporal.Namespace, Policy: policy})
	_, err := workertest.Submit(ctx, t, st, jobs.Job{ID: id, AccountID: acct, Kind: ledgertest.Fixed(t, e.Store, 20), InputRef: "sim:fail"})
	require.NoError(t, err)
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}
	_, err = st.Wait(ctx, key, ledgerdb.StateRefunded)
	require.NoError(t, err)
	e.waitBillingState(t, workflows.JobWorkflowID(acct, id), ledgerdb.StateRefunded)
	requireOK(t, e.check(t, p))

	_, err = e.Store.Reclaim(ctx, key)
	require.NoError(t, err)
	v := requireOnly(t, e.check(t, p), invariants.KindBillingStateMismatch, id)
	require.Contains(t, v.Message, "BillingState refunded, but the ledger says recovered")
	ledgertest.RequireSound(t, e.Store, acct)

	rep, err := st.ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "sim://late", FinishedAt: time.Now().UTC()})
	require.NoError(t, err)
	require.Equal(t, "signal", rep.Path)
	require.NoError(t, e.Client.GetWorkflow(ctx, workflows.JobWorkflowID(acct, id), "").Get(ctx, nil))
	requireOK(t, e.check(t, p))
}

// TestLedgerRulesInRolledBackTransaction breaks the reversing-pairs, net-effect and sum-of-rows
// rules inside a transaction that it rolls back, and reads the snapshot through that transaction: a
// grant row whose balance_after does not continue the running sum, booked without moving the
// balance (the sum-of-rows rule, twice), a credit block holding credits no row moved into it (the
// sum-of-rows rule: the blocks must hold the balance), and a charged job flagged refunded without its refund row
// (the reversing-pairs rule: flags without rows; the net-effect rule: its rows sum to −cost, its
// state says 0; the revenue rule: the paid credits its charge drew stay spent, recognised as revenue
// for work that was never delivered). After the rollback the same check finds nothing.
func TestLedgerRulesInRolledBackTransaction(t *testing.T) {
	t.Parallel()
	store := ledgertest.Store(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, store, 100)
	p := prefix("rollback")
	id := p + "charged"
	ledgertest.Charged(t, store, acct, id, 40, "x")

	scope := ledgerdb.SnapshotScope{JobIDPrefix: p}
	// As the owner: the application role may not write these tables outside the ledger's functions.
	tx, err := ledgertest.OwnerPool(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key)
		VALUES ($1, 'grant', 7, 999, 'invariants-test')`, acct)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE jobs SET state = 'refunded', is_refunded = true, refunded_at = now(), refund_reason_code = 'unknown' WHERE id = $1`,
		ledgerdb.JobKey{AccountID: acct, JobID: id}.String())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE credit_blocks SET remaining = remaining + 5 WHERE account_id = $1 AND NOT is_opening`, acct)
	require.NoError(t, err)
	snap, err := ledgerdb.ReadLedgerSnapshot(ctx, tx, scope)
	require.NoError(t, err)
	got := map[invariants.Kind][]string{}
	for _, v := range invariants.CheckLedger(snap) {
		t.Logf("%s (rule %d): %s", v.Kind, v.Rule, v.Message)
		got[v.Kind] = append(got[v.Kind], v.Message)
	}
	require.Len(t, got[invariants.KindAccountBalance], 4,
		"balance ≠ sum of rows, a refunded job the account's awaiting-reclaim record does not count, blocks that do not hold the balance, and a broken balance_after chain")
	require.Contains(t, got[invariants.KindAccountBalance][0], "balance is 60 but its 3 ledger rows sum to 67")
	require.Contains(t, got[invariants.KindAccountBalance][1], "records 0 credits of refunds awaiting a possible reclaim, but its refunded jobs cost 40")
	require.Contains(t, got[invariants.KindAccountBalance][2], "its credit blocks hold 65 and its debt is 0, but its balance is 60; 1 of its blocks do not hold what their moves add up to")
	require.Len(t, got[invariants.KindJobEntries], 1)
	require.Contains(t, got[invariants.KindJobEntries][0], "has 0 refund rows but its guard flags and settlement say 1")
	require.Len(t, got[invariants.KindJobNet], 1)
	require.Contains(t, got[invariants.KindJobNet][0], "its ledger rows sum to -40, but its state and settlement say 0")
	require.Len(t, got[invariants.KindUndeliveredRevenue], 1)
	require.Contains(t, got[invariants.KindUndeliveredRevenue][0], "revenue recognised for work not delivered: the revenue report recognises 40 paid credits (0) of all time, but delivered and recovered jobs and the debts of delivered work they paid account for 0 (0)")
	require.Contains(t, got[invariants.KindUndeliveredRevenue][0], ledgerdb.JobKey{AccountID: acct, JobID: id}.String())
	require.NoError(t, tx.Rollback(ctx))

	snap, err = store.LedgerSnapshot(ctx, scope)
	require.NoError(t, err)
	require.Empty(t, invariants.CheckLedger(snap), "the rollback left the ledger sound")
	ledgertest.RequireSound(t, store, acct)
}

// TestDebtBesideCreditsInRolledBackTransaction checks that the checker reports an account that
// owes a debt while one of its blocks that has not ended holds credits — a debt is paid by the
// first credits that reach the account (docs/design.md, "Credit blocks"), so such credits would
// be shown to the customer, and lapse with their block, while the debt stays owed. The state is
// made as the owner inside a transaction rolled back: a grant written without paying the debt,
// every sum still adding up. A block whose time has passed may hold credits beside a debt (they
// expire and pay nothing): the same grant into such a block is not reported.
func TestDebtBesideCreditsInRolledBackTransaction(t *testing.T) {
	t.Parallel()
	store := ledgertest.Store(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, store, 0)
	_, err := store.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -50, Key: "correction"})
	require.NoError(t, err)
	scope := ledgerdb.SnapshotScope{AccountID: acct}

	for _, c := range []struct {
		name, effective, expires string
		reported                 bool
	}{
		{"a spendable block", `now() - interval '1 hour'`, `now() + interval '30 days'`, true},
		{"a block not started yet", `now() + interval '1 day'`, `NULL`, true},
		{"a block past its expiry", `now() - interval '2 hours'`, `now() - interval '1 hour'`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := ledgertest.OwnerPool(t).Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			_, err = tx.Exec(ctx, `WITH b AS (
					INSERT INTO credit_blocks (account_id, category, amount, remaining, effective_at, expires_at, memo, idempotency_key)
					VALUES ($1, 'promotional', 30, 30, `+c.effective+`, `+c.expires+`, 'made by the test', 'invariants-test')
					RETURNING id
				), a AS (
					UPDATE accounts SET balance = balance + 30 WHERE id = $1 RETURNING balance
				), e AS (
					INSERT INTO ledger_entries (account_id, kind, amount, balance_after, idempotency_key, block_id)
					SELECT $1, 'grant', 30, a.balance, 'invariants-test', b.id FROM a, b RETURNING id, block_id
				)
				INSERT INTO ledger_block_moves (account_id, entry_id, block_id, amount) SELECT $1, e.id, e.block_id, 30 FROM e`, acct)
			require.NoError(t, err)
			snap, err := ledgerdb.ReadLedgerSnapshot(ctx, tx, scope)
			require.NoError(t, err)
			violations := invariants.CheckLedger(snap)
			for _, v := range violations {
				t.Logf("%s (rule %d): %s", v.Kind, v.Rule, v.Message)
			}
			if !c.reported {
				require.Empty(t, violations)
				return
			}
			require.Len(t, violations, 1)
			require.Equal(t, invariants.KindDebtBesideCredits, violations[0].Kind)
			require.Equal(t, acct, violations[0].AccountID)
			require.Contains(t, violations[0].Message, "owes a debt of 50 while its credit blocks that have not ended hold 30 credits")
		})
	}
	snap, err := store.LedgerSnapshot(ctx, scope)
	require.NoError(t, err)
	require.Empty(t, invariants.CheckLedger(snap), "the rollback left the ledger sound")
}

// TestCheckLedgerOnRows checks the reversing-pairs and net-effect rules on rows the database
// refuses to hold (its UNIQUE constraint on (job, kind) and its guards stop them first): a job
// charged twice (−2×cost), a refund with no charge (+cost), a recovered job short of its reclaim, a
// metered job settled at 12 of its 30 GPU-seconds without the release of the other 18 (its net must
// be −12 × 2, not the whole hold); and one sound job of each settled state, metered ones included,
// which must pass. And the debt rule on accounts: a debt beside credits in blocks that have not
// ended is reported, beside credits of ended blocks (which expire and pay nothing) it is not.
// And the revenue rule on an account's figures: revenue the report recognises
// beyond what delivered work accounts for is reported, the jobs it names listed; an account whose
// two figures agree passes.
func TestCheckLedgerOnRows(t *testing.T) {
	t.Parallel()
	job := func(id string, state ledgerdb.State, charged, refunded, reclaimed bool) ledgerdb.Job {
		return ledgerdb.Job{ID: id, AccountID: "acme", Cost: 40, State: state,
			IsCharged: charged, IsRefunded: refunded, IsReclaimed: reclaimed}
	}
	metered := func(id string, state ledgerdb.State, refunded bool) ledgerdb.Job {
		j := job(id, state, true, refunded, refunded)
		j.Cost, j.Kind, j.Unit, j.UnitPrice, j.HeldUnits = 60, "gpu-render", ledgerdb.UnitGPUSecond, 2, 30
		j.IsSettled, j.UnitsUsed = true, ledgerdb.Units(12)
		return j
	}
	snap := ledgerdb.LedgerSnapshot{
		Accounts: []ledgerdb.AccountTotals{
			{AccountID: "acme", Balance: 100, EntrySum: 100, Entries: 9, BlocksHeld: 100, UnendedHeld: 100,
				Revenue: ledgerdb.RevenueAudit{Recognised: ledgerdb.Money{Credits: 64, Amount: "6.4"}, Delivered: ledgerdb.Money{Credits: 64, Amount: "6.4"}}},
			{AccountID: "beta", Revenue: ledgerdb.RevenueAudit{Recognised: ledgerdb.Money{Credits: 70, Amount: "7"},
				Delivered: ledgerdb.Money{Credits: 40, Amount: "4"}, UndeliveredJobs: []string{"beta/kept-spent"}}},
			// A debt beside credits that have ended (past their expiry, not yet removed) is sound.
			{AccountID: "lapsing", Balance: -20, EntrySum: -20, Entries: 3, BlocksHeld: 30, Debt: 50},
			{AccountID: "owing", Balance: -20, EntrySum: -20, Entries: 3, BlocksHeld: 30, Debt: 50, UnendedHeld: 30},
		},
		Jobs: []ledgerdb.JobTotals{
			{Job: job("sound-delivered", ledgerdb.StateDelivered, true, false, false), Charges: 1, EntrySum: -40},
			{Job: job("sound-refunded", ledgerdb.StateRefunded, true, true, false), Charges: 1, Refunds: 1, EntrySum: 0},
			{Job: job("sound-recovered", ledgerdb.StateRecovered, true, true, true), Charges: 1, Refunds: 1, Reclaims: 1, EntrySum: -40},
			{Job: job("sound-rejected", ledgerdb.StateRejected, false, false, false)},
			{Job: job("charged-twice", ledgerdb.StateDelivered, true, false, false), Charges: 2, EntrySum: -80},
			{Job: job("refund-only", ledgerdb.StateRejected, false, false, false), Refunds: 1, EntrySum: 40},
			{Job: job("short-reclaim", ledgerdb.StateRecovered, true, true, true), Charges: 1, Refunds: 1, EntrySum: 0},
			{Job: metered("sound-metered", ledgerdb.StateDelivered, false), Charges: 1, Releases: 1, EntrySum: -60 + 36},
			{Job: metered("sound-metered-late", ledgerdb.StateRecovered, true), Charges: 1, Refunds: 1, Reclaims: 1, Releases: 1, EntrySum: -60 + 36},
			{Job: metered("no-release", ledgerdb.StateDelivered, false), Charges: 1, EntrySum: -60},
		},
	}
	type key struct {
		kind invariants.Kind
		job  string
	}
	got := map[key]string{}
	for _, v := range invariants.CheckLedger(snap) {
		got[key{v.Kind, v.JobID}] = v.Message
	}
	want := map[key]string{
		{invariants.KindJobEntries, "charged-twice"}: "has 2 charge rows; a job has at most one",
		{invariants.KindJobNet, "charged-twice"}:     "rows sum to -80, but its state and settlement say -40",
		{invariants.KindJobEntries, "refund-only"}:   "has 1 refund rows but its guard flags and settlement say 0",
		{invariants.KindJobNet, "refund-only"}:       "rows sum to 40, but its state and settlement say 0",
		{invariants.KindJobEntries, "short-reclaim"}: "has 0 reclaim rows but its guard flags and settlement say 1",
		{invariants.KindJobNet, "short-reclaim"}:     "rows sum to 0, but its state and settlement say -40",
		{invariants.KindJobEntries, "no-release"}:    "has 0 release rows but its guard flags and settlement say 1",
		{invariants.KindJobNet, "no-release"}:        "12 units used at 2): its ledger rows sum to -60, but its state and settlement say -24",
		{invariants.KindDebtBesideCredits, ""}:       "account owing: it owes a debt of 50 while its credit blocks that have not ended hold 30 credits",
		{invariants.KindUndeliveredRevenue, ""}: "account beta: revenue recognised for work not delivered: the revenue report recognises 70 paid credits (7) of all time, " +
			"but delivered and recovered jobs and the debts of delivered work they paid account for 40 (4); jobs neither delivered nor recovered whose paid credits stay spent: beta/kept-spent.",
	}
	require.Len(t, got, len(want), "%v", got)
	for k, fragment := range want {
		require.Contains(t, got[k], fragment, "%s of %s", k.kind, k.job)
	}
}

// TestDiscardedResultOfDeletedJob is the outcome deletion must never have (the net-effect rule:
// deletion hides a job, never what it owes): a refunded job deleted by its customer, whose late
// result was taken and discarded while its refund could still be reclaimed — as the job service did
// before a tombstone took its late result, and as a worker of that time still could. The customer
// keeps the refund for delivered work. The checker reports it once older than the grace; reporting
// the same result again bills it (the refund reclaimed, the job settled) and the check passes
// again.
func TestDiscardedResultOfDeletedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("discarded")
	id := p + "deleted"
	charged := ledgertest.Charged(t, e.Store, acct, id, 30, "sim:ok")
	key := charged.Job.Key()
	_, err := e.Store.Refund(ctx, key, ledgerdb.ReasonTimedOut, "timed out after 1 attempt", 1)
	require.NoError(t, err)
	_, err = e.Store.Delete(ctx, key)
	require.NoError(t, err)
	result := ledgerdb.ResultReport{Key: key, Attempt: 1, OutputRef: "s3://late/" + id}
	_, err = e.Store.RecordResult(ctx, result)
	require.NoError(t, err)
	// The discard: the result marked taken, the refund left standing.
	_, err = e.Store.MarkResultApplied(ctx, key, 1, ledgerdb.AppliedSettled)
	require.NoError(t, err)

	requireOK(t, e.check(t, p, func(o *invariants.Options) { o.Grace = time.Hour }))
	v := requireOnly(t, e.check(t, p), invariants.KindDiscardedResult, id)
	require.Equal(t, 3, v.Rule)
	require.Contains(t, v.Message, "deleted while refunded")
	require.Contains(t, v.Message, "refund of 30 credits was never reclaimed")

	rep, err := e.jobService().ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: result.OutputRef})
	require.NoError(t, err)
	require.Equal(t, jobs.PathFallback, rep.Path, rep.Message)
	require.Equal(t, ledgerdb.Applied, rep.Outcome)
	require.Equal(t, ledgerdb.MoneyCharged, rep.Status.MoneyState)
	requireOK(t, e.check(t, p))
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestForeignWorkflowHoldsJobID is another program's workflow under a job's workflow ID (the
// net-effect rule and the doors of docs/design.md): the job is charged and running, its own
// workflow gone, and a workflow of a type nobody registers holds the ID, open. The checker reports
// the job as unsettled — the foreign run never settles it — naming the foreign run, and the foreign
// run itself. Healing goes around it (the refund written in the ledger); the foreign run is still
// reported until it closes, and then the check passes.
func TestForeignWorkflowHoldsJobID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	acct := ledgertest.Account(t, e.Store, 100)
	p := prefix("foreign")
	id := p + "held"
	charged := ledgertest.Charged(t, e.Store, acct, id, 30, "sim:ok")
	workflowID := workflows.JobWorkflowID(acct, id)
	foreign, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: "nobody-polls-this"}, "SomeoneElsesWorkflow")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.Client.TerminateWorkflow(context.Background(), workflowID, foreign.GetRunID(), "invariants test done")
	})

	var report invariants.Report
	require.Eventually(t, func() bool {
		// Not e.check: a failing require must not run on Eventually's goroutine. Visibility lags.
		var err error
		report, err = invariants.Check(ctx, invariants.Options{Ledger: e.Store, Temporal: e.Client,
			Namespace: e.Config.Temporal.Namespace, TaskQueue: e.Config.Temporal.TaskQueue, JobIDPrefix: p})
		return err == nil && len(report.Violations) == 2
	}, 15*time.Second, 200*time.Millisecond, "the check never reported the job and the foreign run: %+v", report.Violations)
	unsettled := report.Of(invariants.KindUnsettledJob)
	require.Len(t, unsettled, 1)
	require.Contains(t, unsettled[0].Message, "SomeoneElsesWorkflow")
	require.Contains(t, unsettled[0].Message, foreign.GetRunID())
	held := report.Of(invariants.KindForeignWorkflow)
	require.Len(t, held, 1)
	require.Equal(t, id, held[0].JobID)
	require.Contains(t, held[0].Message, "SomeoneElsesWorkflow")
	require.Contains(t, held[0].Message, foreign.GetRunID())

	healed, err := e.jobService().Heal(ctx, charged.Job)
	require.NoError(t, err)
	require.True(t, healed)
	v := requireOnly(t, e.check(t, p), invariants.KindForeignWorkflow, id)
	require.Contains(t, v.Message, "refunded")

	require.NoError(t, e.Client.TerminateWorkflow(ctx, workflowID, foreign.GetRunID(), "invariants test: foreign run closed"))
	require.Eventually(t, func() bool {
		report, err := invariants.Check(ctx, invariants.Options{Ledger: e.Store, Temporal: e.Client,
			Namespace: e.Config.Temporal.Namespace, TaskQueue: e.Config.Temporal.TaskQueue, JobIDPrefix: p})
		return err == nil && report.OK()
	}, 15*time.Second, 200*time.Millisecond, "the closed foreign run is still reported")
	ledgertest.RequireSound(t, e.Store, acct)
}
