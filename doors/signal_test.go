package doors_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// validResult is the result signal an operator types for the job's first attempt: the Go field
// names of workflows.ResultSignal.
const validResult = `{"Attempt":1,"OutputRef":"s3://ok"}`

// TestCLIBadResultSignals checks the price-list rule at `temporal workflow signal --name result`: a
// result payload the job cannot bill — an attempt below 1, one that never ran, no output reference
// (or one under another field name, or with an invisible control character), a wrong type, a
// string, null, raw non-JSON bytes, or no payload at all — changes no money and does not fail or
// stop the run: each is ignored and counted (the status query's IgnoredSignals), and the job goes
// on to be delivered by a valid signal with one charge (the net-effect rule: net −cost). The CLI
// itself refuses malformed JSON, so that one never reaches the job.
func TestCLIBadResultSignals(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	ctx := testContext(t)
	j := e.hanging(t, "bad", 40)

	bad := []struct {
		name  string
		input string
		flags []string
	}{
		{name: "attempt -1", input: `{"Attempt":-1,"OutputRef":"s3://x"}`},
		{name: "attempt 0", input: `{"Attempt":0,"OutputRef":"s3://x"}`},
		{name: "an attempt that never ran", input: `{"Attempt":99,"OutputRef":"s3://forged"}`},
		{name: "no output reference", input: `{"Attempt":1}`},
		{name: "the output under another name", input: `{"Attempt":1,"output_ref":"s3://x"}`},
		{name: "a right-to-left override in the output", input: `{"Attempt":1,"OutputRef":"s3://x\u202egnp.exe"}`},
		{name: "the attempt as a string", input: `{"Attempt":"1","OutputRef":"s3://x"}`},
		{name: "a string instead of an object", input: `"s3://ok"`},
		{name: "null", input: `null`},
		{name: "raw bytes that are not JSON", input: `{"Attempt":1,`, flags: []string{"--input-meta", "encoding=binary/plain"}},
		{name: "no payload at all"},
	}
	for _, b := range bad {
		require.NoError(t, e.cli.signal(ctx, j.workflowID, b.input, b.flags...), b.name)
	}
	// Malformed JSON as JSON: the CLI refuses it before anything is sent, even base64-encoded.
	err := e.cli.signal(ctx, j.workflowID, `{"Attempt":1,"OutputRef":`)
	require.ErrorContains(t, err, "not valid JSON")
	err = e.cli.signal(ctx, j.workflowID, base64.StdEncoding.EncodeToString([]byte(`{"Attempt":1,`)), "--input-base64")
	require.ErrorContains(t, err, "not valid JSON")

	var status workflows.JobStatus
	require.Eventually(t, func() bool {
		status = e.cli.queryStatus(t, j.workflowID)
		return status.IgnoredSignals >= len(bad)
	}, waitLimit, 200*time.Millisecond, "the job never counted %d ignored signals", len(bad))
	require.Equal(t, len(bad), status.IgnoredSignals, "%+v", status)
	require.Equal(t, ledgerdb.StateRunning, status.State, "the job goes on")
	require.Contains(t, status.LastIgnored, "no payload", "the last one is the one without a payload")
	require.Empty(t, status.OutputRef)
	job, err := e.Store.Job(ctx, j.key)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, job.State)
	ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)

	require.NoError(t, e.cli.signal(ctx, j.workflowID, validResult))
	final := e.awaitClosed(t, j.workflowID)
	require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
	require.Equal(t, "s3://ok", final.OutputRef)
	require.Equal(t, len(bad), final.IgnoredSignals)
	require.Equal(t, final, e.cli.queryStatus(t, j.workflowID), "the closed run answers the query as it ended")
	ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)
	e.requireEnd(t, 160)
}

// TestCLIDuplicateResultSignal checks the reversing-pairs and idempotent-doors rules at `temporal
// workflow signal`: the same valid result signalled twice is billed once — delivered, one charge
// row (net −cost) — and the second is counted as an ignored result. Both signals are sent while no
// worker polls the job's task queue, so that the job's run certainly holds both at once (otherwise
// the second could land after the run closed and never reach it); the worker starts after them.
func TestCLIDuplicateResultSignal(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	j := e.job(t, "twice")

	cfg := workertest.Config("doors-twice")
	configureWorker(&cfg)
	late := jobs.New(jobs.Options{Temporal: e.Client, Ledger: e.Store, TaskQueue: cfg.Temporal.TaskQueue,
		Namespace: cfg.Temporal.Namespace, Policy: doorPolicy()})
	type answer struct {
		sub jobs.Submission
		err error
	}
	submitted := make(chan answer, 1)
	go func() {
		sub, err := workertest.Submit(testContext(t), t, late, jobs.Job{ID: j.id, AccountID: e.acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:hang"})
		submitted <- answer{sub, err}
	}()
	require.Eventually(t, func() bool {
		_, err := e.Client.DescribeWorkflow(context.Background(), j.workflowID, "")
		return err == nil
	}, waitLimit, 50*time.Millisecond, "the submission never started the job's workflow")
	require.NoError(t, e.cli.signal(testContext(t), j.workflowID, validResult))
	require.NoError(t, e.cli.signal(testContext(t), j.workflowID, validResult))

	w := workertest.Start(t, cfg)
	got := <-submitted
	require.NoError(t, got.err)
	require.Contains(t, []ledgerdb.State{ledgerdb.StateRunning, ledgerdb.StateDelivered}, got.sub.Status.State)
	final := e.awaitClosed(t, j.workflowID)
	require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
	require.Equal(t, 1, final.IgnoredResults, "%+v", final)
	require.Zero(t, final.IgnoredSignals, "both payloads were valid")
	require.Equal(t, 1, e.cli.queryStatus(t, j.workflowID).IgnoredResults)
	ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)
	ledgertest.RequireBalance(t, e.Store, e.acct, 160)
	(&env{Env: w, cli: e.cli}).requireAudit(t, e.p)
}
