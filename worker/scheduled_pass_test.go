package worker_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// passSettings are the reconcile settings of the deployed-pass test: a pass every few seconds,
// and placeholders and recorded results taken after a second.
const (
	passInterval    = 3 * time.Second
	passGrace       = time.Second
	passResultGrace = time.Second
)

// TestScheduledPassHealsWithNobodyLooking runs the reconcile pass exactly as production starts it:
// a `jobbill worker` process creates its own schedule, whose pass reads every account's jobs (no
// account list). Three things that only the pass repairs are left behind, and nobody reads the jobs
// through jobbill (a status read heals on read and would hide a pass that finds nothing); the
// ledger is read directly. Within two passes that started after the faults were in place:
//
//   - a job whose workflow an operator terminated while it ran is refunded (a terminated job
//     means "stop it": the customer does not pay for work that was not delivered);
//   - a result that `jobbill job report` recorded while Temporal was unreachable is applied, so
//     the delivered work is billed (recovered: the refund reclaimed), not left refunded;
//   - a placeholder whose submitter crashed before starting its workflow is started, and is no
//     longer "being decided" for ever.
//
// Before, the schedule's pass read no account at all and healed none of them.
func TestScheduledPassHealsWithNobodyLooking(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // a backstop: the test waits on passes, not on the clock
	defer cancel()
	d := ledgertest.DeploymentOf(t, ledgertest.DeploymentWorker)
	store := d.Store
	cfg := workertest.Config("pass")
	bin := buildJobbill(t)
	tc := startDeployedWorker(ctx, t, bin, d, cfg, map[string]string{
		"reconcile.interval":     passInterval.String(),
		"reconcile.grace":        passGrace.String(),
		"reconcile.result_grace": passResultGrace.String(),
	})

	// The submitter's policy travels with each job: one attempt, and a late-result window long
	// enough that a result applied by a later pass still finds the job's workflow listening.
	policy := workertest.QuickPolicy()
	policy.MaximumAttempts = 1
	policy.LateResultWindow = 10 * time.Minute
	st := jobs.New(jobs.Options{Temporal: tc, Ledger: store, TaskQueue: cfg.Temporal.TaskQueue,
		Namespace: cfg.Temporal.Namespace, Policy: policy})
	account := ledgertest.Account(t, store, 1_000)
	kind := ledgertest.Fixed(t, store, 40)

	// 1. A job whose work never finishes, its workflow terminated by an operator while it runs.
	terminated := ledgerdb.JobKey{AccountID: account, JobID: ledgertest.ID(t, "terminated")}
	sub, err := workertest.Submit(ctx, t, st, jobs.Job{ID: terminated.JobID, AccountID: account, Kind: kind, InputRef: "sim:hang"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, sub.Status.State)
	require.NoError(t, tc.TerminateWorkflow(ctx, workflows.JobWorkflowID(account, terminated.JobID), "", "an operator pressed Terminate"))

	// 2. A job whose only attempt fails (refunded, listening for a late result), then its result
	// reported through the CLI while Temporal cannot be reached: the CLI records it and says so.
	reported := ledgerdb.JobKey{AccountID: account, JobID: ledgertest.ID(t, "reported")}
	sub, err = workertest.Submit(ctx, t, st, jobs.Job{ID: reported.JobID, AccountID: account, Kind: kind, InputRef: "sim:fail"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, sub.Status.State)
	waitLedgerState(ctx, t, store, reported, ledgerdb.StateRefunded)
	out := reportWithTemporalDown(ctx, t, bin, d, cfg, reported)
	require.Equal(t, jobs.PathRecorded, out.Path, "the CLI's answer: %+v", out)
	pending, err := store.UnappliedResults(ctx, 0, 10, account)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the result waits in the ledger's inbox")

	// 3. A placeholder whose submitter crashed before it started the workflow.
	orphan := ledgerdb.JobKey{AccountID: account, JobID: ledgertest.ID(t, "orphan")}
	_, err = store.Submit(ctx, ledgerdb.Submission{JobID: orphan.JobID, AccountID: account, Kind: kind, Request: []byte("sim:ok")})
	require.NoError(t, err)

	// Passes that start once the youngest fault is past both graces must find all three.
	faultsReady := time.Now().Add(max(passGrace, passResultGrace))
	want := map[ledgerdb.JobKey][]ledgerdb.State{
		terminated: {ledgerdb.StateRefunded},
		reported:   {ledgerdb.StateRecovered},
		orphan:     {ledgerdb.StateRunning, ledgerdb.StateDelivered},
	}
	for {
		// Counted before the ledger is read: a pass that completed before this read had its
		// chance to heal what the read finds.
		passes := passesCompletedSince(ctx, t, tc, workflows.ReconcileScheduleID, faultsReady)
		healed, states := true, map[string]ledgerdb.State{}
		for key, states0 := range want {
			job, err := store.Job(ctx, key)
			require.NoError(t, err)
			states[key.JobID] = job.State
			if !slices.Contains(states0, job.State) {
				healed = false
			}
		}
		if healed {
			t.Logf("healed by the scheduled pass: %v", states)
			break
		}
		require.Less(t, passes, 2, "two scheduled passes ran after the faults and left %v (want %v)", states, want)
		select {
		case <-ctx.Done():
			t.Fatalf("the scheduled pass did not run twice in time; the jobs: %v", states)
		case <-time.After(500 * time.Millisecond):
		}
	}

	job, err := store.Job(ctx, terminated)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.ReasonStoppedByOperator, job.RefundReason, "a Terminate is the operator's stop")
	ledgertest.RequireRows(t, store, terminated, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ledgertest.RequireRows(t, store, reported, 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	pending, err = store.UnappliedResults(ctx, 0, 10, account)
	require.NoError(t, err)
	require.Empty(t, pending, "the recorded result was applied")
	ledgertest.RequireSound(t, store, account)
}

// startDeployedWorker runs a `jobbill worker` process of bin as the deployment d runs one: on its
// database, on cfg's Temporal, namespace and task queue, logging at info, with settings (keys, not
// variables) on top; and answers a Temporal client of the test's once the process polls.
func startDeployedWorker(ctx context.Context, t *testing.T, bin string, d *ledgertest.Deployment, cfg config.Config, settings map[string]string) client.Client {
	t.Helper()
	env := map[string]string{
		config.EnvName("database_url"):        d.DatabaseURL,
		config.EnvName("temporal.address"):    cfg.Temporal.Address,
		config.EnvName("temporal.namespace"):  cfg.Temporal.Namespace,
		config.EnvName("temporal.task_queue"): cfg.Temporal.TaskQueue,
		config.EnvName("log.level"):           "info",
	}
	for key, value := range settings {
		env[config.EnvName(key)] = value
	}
	w := startWorker(t, bin, "worker", env)
	tc, err := connect.Dial(ctx, cfg, zap.NewNop(), nil)
	require.NoError(t, err, "Temporal at %s (bash scripts/ensure-temporal.sh, or make temporal-cluster)", cfg.Temporal.Address)
	t.Cleanup(tc.Close)
	waitForPollers(ctx, t, tc, cfg.Temporal.TaskQueue, w)
	return tc
}

// reportWithTemporalDown runs `jobbill job report` for key's first attempt against a Temporal
// address where nothing listens, and answers its JSON output.
func reportWithTemporalDown(ctx context.Context, t *testing.T, bin string, d *ledgertest.Deployment, cfg config.Config, key ledgerdb.JobKey) jobs.ResultReport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddress := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.CommandContext(ctx, bin, "job", "report", key.JobID, "--account", key.AccountID,
		"--attempt", "1", "--output", "s3://results/"+key.JobID)
	cmd.Env = append(withoutSettings(os.Environ()),
		config.EnvName("database_url")+"="+d.DatabaseURL,
		config.EnvName("temporal.address")+"="+deadAddress,
		config.EnvName("temporal.namespace")+"="+cfg.Temporal.Namespace,
		config.EnvName("temporal.task_queue")+"="+cfg.Temporal.TaskQueue)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "jobbill job report with Temporal unreachable:\n%s%s", stdout, stderr.String())
	var out jobs.ResultReport
	require.NoError(t, json.Unmarshal(stdout, &out), "%s", stdout)
	return out
}

// waitLedgerState waits until the ledger has the job in state, reading the ledger directly.
func waitLedgerState(ctx context.Context, t *testing.T, store *ledgerdb.Store, key ledgerdb.JobKey, state ledgerdb.State) {
	t.Helper()
	for {
		job, err := store.Job(ctx, key)
		require.NoError(t, err)
		if job.State == state {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s is %s, never %s", key.JobID, job.State, state)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// passesCompletedSince counts the passes of the schedule scheduleID that started after since and
// have completed. It reads the schedule's recent actions, its last ten: with overlap skipped at
// most one pass is open at a time, so when more than ten started after since, completed ones are
// among them.
func passesCompletedSince(ctx context.Context, t *testing.T, tc client.Client, scheduleID string, since time.Time) int {
	t.Helper()
	desc, err := tc.ScheduleClient().GetHandle(ctx, scheduleID).Describe(ctx)
	if err != nil {
		// A busy server may let one call time out: the caller asks again until its own deadline.
		t.Logf("describing schedule %s: %v", scheduleID, err)
		return 0
	}
	n := 0
	for _, action := range desc.Info.RecentActions {
		if action.ActualTime.Before(since) || action.StartWorkflowResult == nil {
			continue
		}
		run, err := tc.DescribeWorkflow(ctx, action.StartWorkflowResult.WorkflowID, action.StartWorkflowResult.FirstExecutionRunID)
		require.NoError(t, err)
		status := run.RawResponse.GetWorkflowExecutionInfo().GetStatus()
		require.NotEqual(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, status, "pass %s failed", action.StartWorkflowResult.WorkflowID)
		if status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			n++
		}
	}
	return n
}

// withoutSettings is environ without any of jobbill's settings, so that the machine's own
// configuration cannot steer a process the test starts.
func withoutSettings(environ []string) []string {
	settings := map[string]bool{}
	for _, s := range config.Settings() {
		settings[s.Env] = true
	}
	var kept []string
	for _, kv := range environ {
		if key, _, _ := strings.Cut(kv, "="); !settings[key] {
			kept = append(kept, kv)
		}
	}
	return kept
}
