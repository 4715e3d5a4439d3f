package doors_test

// What every door test shares: the in-process worker, the Temporal CLI run as a subprocess, and
// the three ways a test proves the money rules — the job's ledger rows, its final state, and a
// clean audit of the test's own jobs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/devserver"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// doorPolicy makes a job settle in seconds (workertest.QuickPolicy). A "sim:hang" job an operator
// acts on stays running under it for minutes, however long the CLI takes to start on a busy
// machine.
func doorPolicy() workflows.Policy { return workertest.QuickPolicy() }

// simulatedDuration is how long a simulated attempt works: short, so a "sim:ok" or "sim:fail" job
// settles in a few seconds.
const simulatedDuration = 300 * time.Millisecond

// waitLimit bounds every wait for a workflow, the ledger or visibility; sized for a loaded
// two-core machine that runs other packages' tests at the same time.
const waitLimit = 60 * time.Second

// env is the package's worker on a task queue of its own, and the Temporal CLI pointed at it.
type env struct {
	*workertest.Env
	cli cli
}

// newEnv returns the process's door-test worker, started on first use: the simulated runner,
// doorPolicy for the jobs of e.Jobs, in the tests' namespace of the tests' Temporal.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := workertest.Shared(t, "doors", configureWorker)
	return &env{Env: e, cli: newCLI(t, e.Config)}
}

// configureWorker gives a door-test worker its policy and simulated runner.
func configureWorker(cfg *config.Config) {
	cfg.Policy = doorPolicy()
	cfg.Runner.Simulated.Duration = simulatedDuration
	cfg.Runner.Simulated.FailureRate = 0
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// prefix is a job-ID prefix unique to one run of one test: the test's audit is scoped to it, so
// that it never judges another test's jobs, nor an earlier run's (ledger rows are never deleted).
func prefix(t *testing.T) string { return ledgertest.ID(t, "door") + "-" }

// jobID is the test's job called tag.
func jobID(t *testing.T, prefix, tag string) string {
	t.Helper()
	id := prefix + tag
	require.NoError(t, ledgerdb.ValidateID("job ID", id))
	return id
}

// door is one test's own corner of the door tests' worker: a job-ID prefix, which scopes the
// test's audit to its own jobs, and an account of its own.
type door struct {
	*env
	// p is the test's job-ID prefix.
	p    string
	acct string
}

// newDoor gives the test the door tests' worker (e, or the process's when nil), a job-ID prefix
// and an account granted credits.
func newDoor(t *testing.T, e *env, credits int64) *door {
	t.Helper()
	if e == nil {
		e = newEnv(t)
	}
	return &door{env: e, p: prefix(t), acct: ledgertest.Account(t, e.Store, credits)}
}

// doorJob is a job of the test's on its account: its ID, key and workflow ID.
type doorJob struct {
	id, workflowID string
	key            ledgerdb.JobKey
}

// job names the test's job called tag on its account.
func (d *door) job(t *testing.T, tag string) doorJob {
	t.Helper()
	id := jobID(t, d.p, tag)
	return doorJob{id: id, workflowID: workflows.JobWorkflowID(d.acct, id), key: ledgerdb.JobKey{AccountID: d.acct, JobID: id}}
}

// requireEnd fails unless the test's account holds balance (the sum-of-rows rule) and the audit
// of the test's own jobs finds nothing.
func (d *door) requireEnd(t *testing.T, balance int64) {
	t.Helper()
	ledgertest.RequireBalance(t, d.Store, d.acct, balance)
	d.requireAudit(t, d.p)
}

// requireNoJob fails unless the ledger has no job under key: nothing was written, for why.
func (e *env) requireNoJob(t *testing.T, key ledgerdb.JobKey, why string) {
	t.Helper()
	_, err := e.Store.Job(testContext(t), key)
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, why)
}

// cli runs the official Temporal CLI as an operator would, against one address and namespace.
type cli struct {
	bin, address, namespace string
}

// newCLI finds the Temporal CLI (PATH, then $(go env GOPATH)/bin) and points it at cfg's Temporal.
// A missing CLI fails the test: CI must not pass by not checking.
func newCLI(t *testing.T, cfg config.Config) cli {
	t.Helper()
	bin, err := devserver.CLI("")
	if err != nil {
		t.Fatalf("the door tests drive the official Temporal CLI: %v", err)
	}
	return cli{bin: bin, address: cfg.Temporal.Address, namespace: cfg.Temporal.Namespace}
}

// run runs `temporal args…` with the address and namespace, ignoring any CLI configuration file or
// TEMPORAL_* variable of the machine, and answers its standard output; the error carries its
// standard error.
//
// "Workflow is busy" is the server shedding load (a resource-exhausted answer, common on a loaded
// dev server while many signals reach one workflow): an operator types the command again, and so
// does this, a few times, before failing.
func (c cli) run(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--address", c.address, "--namespace", c.namespace, "--disable-config-file", "--disable-config-env")
	for try := 1; ; try++ {
		cmd := exec.CommandContext(ctx, c.bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil {
			return stdout.String(), nil
		}
		if strings.Contains(stderr.String(), "Workflow is busy") && try < 5 && ctx.Err() == nil {
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
			continue
		}
		return stdout.String(), fmt.Errorf("temporal %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
}

// must runs the CLI and fails the test if it fails.
func (c cli) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.run(testContext(t), args...)
	require.NoError(t, err)
	return out
}

// signal sends a "result" signal with the given --input (none when input is empty), and extra
// flags, as `temporal workflow signal` does.
func (c cli) signal(ctx context.Context, workflowID, input string, extra ...string) error {
	args := []string{"workflow", "signal", "--workflow-id", workflowID, "--name", workflows.SignalResult}
	if input != "" {
		args = append(args, "--input", input)
	}
	_, err := c.run(ctx, append(args, extra...)...)
	return err
}

// queryStatus asks the job's latest run for its status with `temporal workflow query --type
// status`, reading the CLI's JSON output.
func (c cli) queryStatus(t *testing.T, workflowID string) workflows.JobStatus {
	t.Helper()
	out := c.must(t, "workflow", "query", "--workflow-id", workflowID, "--type", workflows.QueryStatus, "--output", "json")
	var answer struct {
		QueryResult []workflows.JobStatus `json:"queryResult"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &answer), "the CLI's query output:\n%s", out)
	require.Len(t, answer.QueryResult, 1, "the CLI's query output:\n%s", out)
	return answer.QueryResult[0]
}

// history reads the latest run's history with `temporal workflow show --output json`.
func (c cli) history(t *testing.T, workflowID string) *historypb.History {
	t.Helper()
	out := c.must(t, "workflow", "show", "--workflow-id", workflowID, "--output", "json")
	var h historypb.History
	require.NoError(t, temporalproto.CustomJSONUnmarshalOptions{DiscardUnknown: true}.Unmarshal([]byte(out), &h),
		"the CLI's history output:\n%.2000s", out)
	require.NotEmpty(t, h.GetEvents())
	return &h
}

// ledgerMarker is a ledger step recorded in a history: a local activity's marker, and what the
// ledger answered.
type ledgerMarker struct {
	eventID int64
	step    string // the activity: Charge, Refund, Settle…
	result  activities.LedgerResult
}

// ledgerMarkers lists the ledger steps a history recorded, in order.
func ledgerMarkers(t *testing.T, h *historypb.History) []ledgerMarker {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var out []ledgerMarker
	for _, ev := range h.GetEvents() {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" {
			continue
		}
		var data struct{ ActivityType string }
		require.NoError(t, dc.FromPayloads(m.GetDetails()["data"], &data))
		lm := ledgerMarker{eventID: ev.GetEventId(), step: data.ActivityType}
		if res := m.GetDetails()["result"]; res != nil {
			require.NoError(t, dc.FromPayloads(res, &lm.result))
		}
		out = append(out, lm)
	}
	return out
}

// markersOf keeps the markers of one step.
func markersOf(markers []ledgerMarker, step string) []ledgerMarker {
	var out []ledgerMarker
	for _, m := range markers {
		if m.step == step {
			out = append(out, m)
		}
	}
	return out
}

// resetEventID is the ID of the event at which a reset run's history starts to differ: the
// WorkflowTaskFailed event with cause RESET_WORKFLOW. Everything before it was copied from the
// run that was reset; every ledger step after it ran again.
func resetEventID(t *testing.T, h *historypb.History) int64 {
	t.Helper()
	for _, ev := range h.GetEvents() {
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil &&
			f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			return ev.GetEventId()
		}
	}
	t.Fatalf("the history has no reset point")
	return 0
}

// awaitClosed waits until the workflow's latest run closes and returns its result.
func (e *env) awaitClosed(t *testing.T, workflowID string) workflows.JobStatus {
	t.Helper()
	ctx := testContext(t)
	var status workflows.JobStatus
	require.NoError(t, e.Client.GetWorkflow(ctx, workflowID, "").Get(ctx, &status), "workflow %s did not complete", workflowID)
	return status
}

// waitLedger polls the ledger (never the job service's Status, which heals) until the job reaches
// state, and returns it.
func (e *env) waitLedger(t *testing.T, key ledgerdb.JobKey, state ledgerdb.State) ledgerdb.Job {
	t.Helper()
	var job ledgerdb.Job
	require.Eventually(t, func() bool {
		var err error
		job, err = e.Store.Job(context.Background(), key)
		return err == nil && job.State == state
	}, waitLimit, 50*time.Millisecond, "job %s never reached %s in the ledger (last seen %s)", key, state, job.State)
	return job
}

// waitAttempt waits until the ledger has recorded that the job's work started attempt n: only then
// is the job truly running, and a result of that attempt possible.
func (e *env) waitAttempt(t *testing.T, key ledgerdb.JobKey, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		job, err := e.Store.Job(context.Background(), key)
		return err == nil && job.Attempts >= n
	}, waitLimit, 50*time.Millisecond, "job %s never started attempt %d", key, n)
}

// waitClosedInVisibility waits until visibility no longer lists the workflow as running:
// the reconcile pass finds closed workflows through visibility, which lags a little.
func (e *env) waitClosedInVisibility(t *testing.T, workflowID string) {
	t.Helper()
	query := fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = 'Running'", workflowID)
	require.Eventually(t, func() bool {
		resp, err := e.Client.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: e.Config.Temporal.Namespace, Query: query})
		return err == nil && resp.GetCount() == 0
	}, waitLimit, 100*time.Millisecond, "visibility still lists %s as running", workflowID)
}

// latestBillingState is the BillingState search attribute of the workflow's latest run, read
// from its mutable state (visibility lags), and that run's status.
func (e *env) latestBillingState(t *testing.T, workflowID string) (string, enumspb.WorkflowExecutionStatus) {
	t.Helper()
	d, err := e.Client.DescribeWorkflow(testContext(t), workflowID, "")
	require.NoError(t, err)
	state, _ := d.TypedSearchAttributes.GetKeyword(workflows.BillingStateKey)
	return state, d.Status
}

// audit runs the audit (invariants.Check) over the test's own jobs — its job-ID prefix, on its
// worker's task queue, with no grace — and answers its report.
func (e *env) audit(t *testing.T, jobPrefix string) invariants.Report {
	t.Helper()
	report, err := invariants.Check(testContext(t), invariants.Options{
		Ledger: e.Store, Temporal: e.Client, Namespace: e.Config.Temporal.Namespace,
		TaskQueue: e.Config.Temporal.TaskQueue, JobIDPrefix: jobPrefix,
		StuckAfter: invariants.StuckAfterFor(doorPolicy()), Grace: 0,
	})
	require.NoError(t, err)
	return report
}

// requireAudit runs the audit over the test's own jobs and fails on any violation.
func (e *env) requireAudit(t *testing.T, jobPrefix string) {
	t.Helper()
	report := e.audit(t, jobPrefix)
	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text))
	require.True(t, report.OK(), "the audit found violations:\n%s", text.String())
	require.NotZero(t, report.Counts.Jobs, "the audit checked no job: is its scope right?\n%s", text.String())
}

// reconcilePass runs one Reconcile workflow, as the schedule does, over the account's jobs, and
// returns what it did. The placeholder grace is a second; recorded results are applied at once.
func (e *env) reconcilePass(t *testing.T, accountID string) activities.ReconcileResult {
	t.Helper()
	ctx := testContext(t)
	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        fmt.Sprintf("reconcile-door/%s/%d", accountID, time.Now().UnixNano()),
		TaskQueue: e.Config.Temporal.TaskQueue,
	}, workflows.Reconcile, activities.ReconcileInput{Grace: time.Second, ResultGrace: time.Nanosecond, AccountIDs: []string{accountID}})
	require.NoError(t, err)
	var out activities.ReconcileResult
	require.NoError(t, run.Get(ctx, &out))
	require.Zero(t, out.Failed, "failures: %v", out.Failures)
	return out
}
