package doors_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/internal/devserver"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// downPolicy keeps a "sim:hang" job running through a Temporal outage for longer than the test
// may last: an attempt may run ten minutes and go five without a heartbeat reaching the server,
// so however long a loaded machine takes to stop and start the server, the job is still running
// when its recorded result is applied.
func downPolicy() workflows.Policy {
	p := doorPolicy()
	p.StartToClose = 10 * time.Minute
	p.HeartbeatTimeout = 5 * time.Minute
	return p
}

// inboxRow is a result's row in the ledger's inbox (result_reports).
type inboxRow struct {
	appliedAt  *time.Time
	appliedVia *string
}

func (e *env) inbox(t *testing.T, key ledgerdb.JobKey, attempt int) inboxRow {
	t.Helper()
	var r inboxRow
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT applied_at, applied_via FROM result_reports WHERE job_id = $1 AND attempt = $2`, key.String(), attempt).
		Scan(&r.appliedAt, &r.appliedVia), "the result of attempt %d of %s is not in the inbox", attempt, key)
	return r
}

// TestResultWhileTemporalIsDown checks the net-effect and idempotent-doors rules at the report door
// while Temporal itself is down: a result reported then is written to the ledger's inbox first and
// answered "recorded" with no error — never lost — and once Temporal is back a reconcile pass hands
// it to the job's own run, still running, which is then delivered by it exactly once: one charge,
// net −cost, the inbox row applied by the signal. The outage is real: a dev server of the test's
// own (the shared one must never stop), stopped and started again on its file store, with an
// in-process worker against it.
func TestResultWhileTemporalIsDown(t *testing.T) {
	workertest.NeedsTemporal(t) // before its own dev server starts
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := devserver.New("", t.TempDir())
	require.NoError(t, err, "the door tests need the Temporal CLI")
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)

	cfg := workertest.Config("doors-down")
	configureWorker(&cfg)
	cfg.Temporal.Address = srv.Address()
	cfg.Temporal.Namespace = workflows.DefaultNamespace // the one the dev server creates
	cfg.Policy = downPolicy()
	e := newDoor(t, &env{Env: workertest.Start(t, cfg), cli: newCLI(t, cfg)}, 200)
	j := e.hanging(t, "down", 40)

	srv.Stop()
	_, err = e.cli.run(ctx, "workflow", "describe", "--workflow-id", j.workflowID, "--command-timeout", "3s")
	require.Error(t, err, "Temporal is down")
	reportCtx, cancelReport := context.WithTimeout(ctx, 5*time.Second)
	report, err := e.Jobs.ReportResult(reportCtx, j.key, activities.WorkResult{Attempt: 1, OutputRef: "s3://out/" + j.id})
	cancelReport()
	require.NoError(t, err, "a report while Temporal is down is recorded, not refused")
	require.Equal(t, jobs.PathRecorded, report.Path, report.Message)
	require.Nil(t, e.inbox(t, j.key, 1).appliedAt, "recorded, not applied yet")
	job, err := e.Store.Job(ctx, j.key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, job.State)

	require.NoError(t, srv.Start(ctx), "the dev server restarts on its file store")
	out := e.cli.must(t, "workflow", "describe", "--workflow-id", j.workflowID, "--output", "json")
	var described struct {
		WorkflowExecutionInfo struct{ Status string } `json:"workflowExecutionInfo"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &described))
	require.Equal(t, "WORKFLOW_EXECUTION_STATUS_RUNNING", described.WorkflowExecutionInfo.Status, "the job's run survived the outage")

	pass := e.reconcilePass(t, e.acct)
	require.Equal(t, 1, pass.ResultsApplied, "%+v", pass)
	final := e.awaitClosed(t, j.workflowID)
	require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
	require.Equal(t, "s3://out/"+j.id, final.OutputRef)
	ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)
	applied := e.inbox(t, j.key, 1)
	require.NotNil(t, applied.appliedAt, "the pass applied the recorded result")
	require.NotNil(t, applied.appliedVia)
	require.Equal(t, ledgerdb.AppliedBySignal, *applied.appliedVia, "the job's own run took it")
	require.Zero(t, e.reconcilePass(t, e.acct).ResultsApplied, "an applied result is applied once")
	e.requireEnd(t, 160)
}
