package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestResultsAreRecordedWhileTemporalIsDown checks that delivered work is never lost for want of
// Temporal: a result reported through the API — with a raw HTTP request and with the Go client —
// while the API's workflow service cannot be reached is written to the ledger's inbox and answered
// 202 "recorded", so the reconcile pass bills it once Temporal answers (worker's
// TestScheduledPassHealsWithNobodyLooking shows that pass as deployed). Nothing is charged by the
// report itself: the job stays as it was until its workflow takes the result.
func TestResultsAreRecordedWhileTemporalIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acct := ledgertest.Account(t, e.Store, 200)
	kind := e.fixed(t, 40)
	running := func(prefix string) string {
		id := ledgertest.ID(t, prefix)
		_, err := workertest.Submit(ctx, t, e.Jobs, jobs.Job{ID: id, AccountID: acct, Kind: kind, InputRef: "sim:hang"})
		require.NoError(t, err)
		return id
	}
	viaHTTP, viaClient := running("http"), running("client")

	// The API's job service over a Temporal client whose server never answers.
	down, err := temporalclient.NewLazyClient(temporalclient.Options{HostPort: "127.0.0.1:1", Namespace: e.Config.Temporal.Namespace})
	require.NoError(t, err)
	t.Cleanup(down.Close)
	unreachable := jobs.New(jobs.Options{Temporal: down, Ledger: e.Store, TaskQueue: e.Config.Temporal.TaskQueue,
		Namespace: e.Config.Temporal.Namespace})
	base := e.serve(t, func(o *api.Options) { o.Jobs = unreachable })
	runner := e.key(t, apikeys.ScopeRunner, "")

	a := call(t, base, "POST", "/v1/jobs/"+viaHTTP+"/result?account_id="+acct, runner,
		map[string]any{"attempt": 1, "output_ref": "s3://out/" + viaHTTP})
	require.Equal(t, http.StatusAccepted, a.code, a.raw)
	require.Equal(t, jobs.PathRecorded, a.str("path"), a.raw)

	c := &apiclient.Client{BaseURL: base, Key: runner, AccountID: acct}
	answer, err := c.ReportResult(ctx, viaClient, apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out/" + viaClient})
	require.NoError(t, err)
	require.Equal(t, jobs.PathRecorded, answer.Path)

	pending, err := e.Store.UnappliedResults(ctx, 0, 10, acct)
	require.NoError(t, err)
	require.Len(t, pending, 2, "both results wait in the ledger's inbox")
	for _, id := range []string{viaHTTP, viaClient} {
		job, err := e.Store.Job(ctx, ledgerdb.JobKey{AccountID: acct, JobID: id})
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateRunning, job.State, "the report alone settles nothing")
	}
	ledgertest.RequireSound(t, e.Store, acct)
}
