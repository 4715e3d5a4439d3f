package worker_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/webhooks/webhookstest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestWorkerDeliversDerivedEventsWithNobodyLooking runs webhook delivery exactly as production
// starts it: a `jobbill worker` process derives the events from the ledger's rows and delivers
// them, with nobody reading the jobs or the events through jobbill. A job is charged and then
// refunded straight through the ledger's functions — the money transactions write no event — and
// the account's endpoint must receive job.charged and then job.refunded, each once and signed so
// that a Standard Webhooks verifier accepts it: an event exists exactly when its money row does,
// at least once, in order per job, whoever looks.
func TestWorkerDeliversDerivedEventsWithNobodyLooking(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a backstop: the test waits on deliveries
	defer cancel()
	d := ledgertest.DeploymentOf(t, ledgertest.DeploymentWorker)
	store := d.Store
	account := ledgertest.Account(t, store, 1_000)

	rcv := &webhookstest.Receiver{}
	server := httptest.NewServer(rcv)
	t.Cleanup(server.Close)
	created, err := webhooks.NewStore(store.Pool()).CreateEndpoint(ctx,
		webhooks.EndpointSpec{AccountID: account, URL: server.URL + "/hooks"}, webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	rcv.SetSecret(created.Secret)

	// The money moves before the worker runs: its derive pass must find the rows whenever it starts.
	job := ledgertest.Charged(t, store, account, ledgertest.ID(t, "hooked"), 40, "s3://in/hooked").Job.Key()
	_, err = store.Refund(ctx, job, ledgerdb.ReasonGPUFailed, "failed for good after 1 attempt", 1)
	require.NoError(t, err)

	cfg := workertest.Config("hooks")
	startWorker(t, buildJobbill(t), "worker", map[string]string{
		config.EnvName("database_url"):                d.DatabaseURL,
		config.EnvName("temporal.address"):            cfg.Temporal.Address,
		config.EnvName("temporal.namespace"):          cfg.Temporal.Namespace,
		config.EnvName("temporal.task_queue"):         cfg.Temporal.TaskQueue,
		config.EnvName("webhooks.allow_private_urls"): "true",
		config.EnvName("webhooks.poll_interval"):      "200ms",
	})

	want := []string{"job.charged", "job.refunded"}
	for {
		got := rcv.ByJob()[job.JobID]
		require.Zero(t, rcv.Bad(), "every delivery verifies")
		if len(got) >= len(want) {
			require.Equal(t, want, got, "each event once, in the order of the job's rows")
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the worker delivered %v of %v for job %s: %v", got, want, job, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
