package jobs_test

// Reported results end to end, against the real dev server and test database: a result reported
// while Temporal cannot be reached is recorded and applied later, and a bad report writes nothing.
// Each test here failed before the change that made its door keep the money rules.

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// TestE2EResultRecordedWhileTemporalUnreachable protects the net-effect and idempotent-doors rules
// at the report door: a result reported while Temporal cannot be reached is written to the ledger
// first and answered "recorded", and the reconcile pass applies it once Temporal answers: the job
// is delivered, once. Before, such a report failed and was stored nowhere.
func TestE2EResultRecordedWhileTemporalUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s := e.submitted(t, 40, "sim:hang")
	acct, id, key := s.acct, s.id, s.key()
	_, err := e.Jobs.Wait(ctx, key, ledgerdb.StateRunning)
	require.NoError(t, err)

	// A client whose server never answers stands for Temporal being down.
	down, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Namespace: e.Config.Temporal.Namespace})
	require.NoError(t, err)
	defer down.Close()
	unreachable := jobs.New(jobs.Options{Temporal: down, Ledger: e.Store, TaskQueue: e.Config.Temporal.TaskQueue,
		Namespace: e.Config.Temporal.Namespace})
	reportCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	report, err := unreachable.ReportResult(reportCtx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://out/" + id})
	cancel()
	require.NoError(t, err)
	require.Equal(t, jobs.PathRecorded, report.Path)
	pending, err := e.Store.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the result is durable in the ledger")

	// Temporal answers again: the pass hands the result to the job's workflow.
	time.Sleep(time.Second)
	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "reconcile-test/" + id, TaskQueue: e.Config.Temporal.TaskQueue,
	}, workflows.Reconcile, activities.ReconcileInput{Grace: time.Hour, ResultGrace: time.Millisecond, AccountIDs: []string{acct}})
	require.NoError(t, err)
	var pass activities.ReconcileResult
	require.NoError(t, run.Get(ctx, &pass))
	require.Equal(t, 1, pass.ResultsApplied, "failures: %v", pass.Failures)
	final := e.awaitClosed(t, s.workflowID())
	require.Equal(t, ledgerdb.StateDelivered, final.State)
	require.Equal(t, "s3://out/"+id, final.OutputRef)
	pending, err = e.Store.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Empty(t, pending)
	e.requireMoney(t, s, 160, ledgerdb.KindCharge)
}

// TestE2EBadReportsWriteNothing protects the price-list rule at the report door: a report naming an
// attempt the job's work never started, or without a usable output, is refused before anything is
// written or signalled, and the job goes on to be delivered by its real result.
func TestE2EBadReportsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s := e.submitted(t, 40, "sim:hang")
	key := s.key()
	for _, bad := range []activities.WorkResult{
		{Attempt: -1, OutputRef: "s3://x"},
		{Attempt: 0, OutputRef: "s3://x"},
		{Attempt: 7, OutputRef: "s3://forged"},
		{Attempt: 1},
		{Attempt: 1, OutputRef: "s3://x\u202egnp"},
	} {
		_, err := e.Jobs.ReportResult(ctx, key, bad)
		require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "%+v", bad)
	}
	var recorded int
	require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM result_reports WHERE job_id = $1`, key.String()).Scan(&recorded))
	require.Zero(t, recorded)
	status, err := e.Jobs.Status(ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, status.State)

	_, err = e.Jobs.ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://ok"})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateDelivered, e.awaitClosed(t, s.workflowID()).State)
	ledgertest.RequireRows(t, e.Store, key, 40, ledgerdb.KindCharge)
}

// TestResultOfRefundedJobRecordedWhileTemporalUnreachable protects the idempotent-doors rule at
// the report door for a refunded job — the late result this system exists for — while Temporal
// cannot be reached: the report waits for Temporal until its deadline, and must then answer
// "recorded" (the result is in the ledger), not fail because its answer's read of the job's words
// ran out of that same deadline.
func TestResultOfRefundedJobRecordedWhileTemporalUnreachable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	store := ledgertest.Store(t)
	acct := ledgertest.Account(t, store, 200)
	key := ledgertest.Charged(t, store, acct, ledgertest.ID(t, "refunded"), 40, "s3://in").Job.Key()
	_, err := store.Refund(ctx, key, ledgerdb.ReasonTimedOut, "", 3)
	require.NoError(t, err)

	// A server that takes the connection and never answers: the report's call waits out its
	// deadline, as one to a Temporal that is restarting does.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	down, err := client.NewLazyClient(client.Options{HostPort: silent.Addr().String()})
	require.NoError(t, err)
	defer down.Close()
	unreachable := jobs.New(jobs.Options{Temporal: down, Ledger: store, TaskQueue: "nobody-polls"})
	reportCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	report, err := unreachable.ReportResult(reportCtx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://out/late"})
	cancel()
	require.NoError(t, err)
	require.Equal(t, jobs.PathRecorded, report.Path)
	require.Equal(t, ledgerdb.StateRefunded, report.Status.State)
	pending, err := store.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the result is durable in the ledger")
}
