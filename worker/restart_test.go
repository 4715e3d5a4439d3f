package worker_test

// A Temporal server restart in the middle of a run, on cluster mode's real server
// (scripts/ensure-temporal-cluster.sh), with a worker SIGKILLed just before it: what a deployment
// goes through on an upgrade of its cluster while a node dies. `make test-cluster` runs it; under
// `make test` (the dev server, which a test must not restart under the other packages) it skips.

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// RestartEnv names the variable that allows a test to restart the Temporal server it runs
// against with scripts/ensure-temporal-cluster.sh (stop, then start): `make test-cluster` sets it
// to 1. The script stops only a server it started from this checkout, with the same
// JOBBILL_CLUSTER_PORT and JOBBILL_CLUSTER_DATABASE.
const RestartEnv = "JOBBILL_TEST_TEMPORAL_RESTART"

// restartPolicy is multiPolicy with more attempts: an attempt whose heartbeat or completion falls
// in the seconds the server is down may be lost and retried, and the job must still be delivered
// rather than run out of attempts.
func restartPolicy() workflows.Policy {
	p := multiPolicy()
	p.MaximumAttempts = 10
	return p
}

// clusterScript runs scripts/ensure-temporal-cluster.sh with args in this process's environment.
func clusterScript(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"scripts/ensure-temporal-cluster.sh"}, args...)...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "scripts/ensure-temporal-cluster.sh %v:\n%s", args, out)
	t.Logf("scripts/ensure-temporal-cluster.sh %v:\n%s", args, out)
}

// requireServerDown fails the test unless nothing answers on the Temporal server's address: the
// script stops only a server this checkout started, so one started by another checkout would
// keep running and the test would prove nothing about a restart.
func requireServerDown(t *testing.T, address string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", address, time.Second)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("the Temporal server on %s is still up after the stop: it was not started from this checkout "+
			"(stop it with its own scripts/ensure-temporal-cluster.sh stop, then run make test-cluster again)", address)
	}
}

// TestJobsSurviveTemporalRestartAndWorkerKill runs two worker processes on the cluster, SIGKILLs
// one while it holds attempts of a batch held until the test releases it (sim:hold), then stops
// the Temporal server (SIGTERM) and starts it again while the batch is in flight, waits until the
// killed attempts are retried on the other worker, releases the batch and submits a second one.
// Every job must end as its input says, charged exactly once and, when refunded, refunded exactly
// once (the reversing-pairs and net-effect rules); the balance must equal the grant less the
// delivered jobs (the sum-of-rows rule); and the audit across the ledger and Temporal (`jobbill
// audit`, scoped to the test's account) must be clean.
func TestJobsSurviveTemporalRestartAndWorkerKill(t *testing.T) {
	if os.Getenv(RestartEnv) != "1" {
		t.Skipf("restarts the Temporal server: runs under make test-cluster (%s=1), not on the shared dev server", RestartEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // the build of jobbill included
	defer cancel()
	pair := startWorkerPair(ctx, t, "restart", restartPolicy())
	store, tc, st, a, cfg := pair.store, pair.temporal, pair.jobs, pair.a, pair.cfg

	account := ledgertest.Account(t, store, 10_000)
	before := planJobs(t, store, account, "rs1", 20, 5, "sim:hold")
	submitInTurn(ctx, t, st, before)
	onA := killHolding(ctx, t, tc, before, a)
	t.Logf("killed %s (pid %d) while it held %d attempts", a.name, a.cmd.Process.Pid, len(onA))

	// The batch's attempts are held on worker B (and timing out on the dead A) while the server
	// goes down and comes back.
	down := time.Now()
	clusterScript(t, "stop")
	requireServerDown(t, cfg.Temporal.Address)
	clusterScript(t)
	t.Logf("Temporal server down and back in %s", time.Since(down).Round(time.Millisecond))
	awaitRetriedOn(ctx, t, tc, account, onA, pair.b)
	release(t, pair.releaseDir, before)

	after := planJobs(t, store, account, "rs2", 10, 5, "sim:ok")
	submitInTurn(ctx, t, st, after)
	all := append(before, after...)
	waitSettled(ctx, t, st, all)
	requireLedger(ctx, t, store, account, 10_000, all)

	// The workflows close once their late-result window (1 s) has passed.
	for _, j := range all {
		require.NoError(t, tc.GetWorkflow(ctx, j.workflowID(), "").Get(ctx, nil), "job %s's workflow", j.id)
	}
	report, err := invariants.Check(ctx, invariants.Options{Ledger: store, Temporal: tc,
		Namespace: cfg.Temporal.Namespace, TaskQueue: cfg.Temporal.TaskQueue, AccountID: account})
	require.NoError(t, err)
	require.True(t, report.OK(), "audit after the restart: %v", report.Violations)
}

// submitInTurn submits the planned jobs one after another and checks each was charged. The
// cluster's server holds dozens of connections to the Postgres the test shares with it, so the
// test does not open twenty more at once as submitJobs does.
func submitInTurn(ctx context.Context, t *testing.T, st *jobs.Service, planned []multiJob) {
	t.Helper()
	for _, j := range planned {
		sub, err := workertest.Submit(ctx, t, st, jobs.Job{ID: j.id, AccountID: j.account, Kind: j.kind, InputRef: j.input})
		require.NoError(t, err, "submitting %s", j.id)
		require.Equal(t, ledgerdb.StateRunning, sub.Status.State, "job %s", j.id)
	}
}
