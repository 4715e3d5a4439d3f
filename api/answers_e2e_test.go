package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// leakyRunnerError is what a GPU service's failure may say: an internal host, and a database URL
// with its password.
const leakyRunnerError = "connect to postgres://svc:hunter2@10.0.3.7:5432/gpu failed; host gpu-7.internal"

// leakedWords are the parts of leakyRunnerError no customer may read.
var leakedWords = []string{"hunter2", "10.0.3.7", "gpu-7.internal", "postgres://", "svc"}

// failingGPU is a GPU service (activities.HTTPRunner's contract) whose every run fails for good
// with message.
func failingGPU(t *testing.T, message string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"run_id": "r-1"})
	})
	mux.HandleFunc("GET /v1/runs/{id}", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "failed", "error": message, "permanent": true})
	})
	mux.HandleFunc("DELETE /v1/runs/{id}", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestRunnerErrorNeverReachesTheCustomer checks that what a customer reads about a refunded job
// comes from the fixed vocabulary, never from the GPU service's words (trust: an internal host
// name and a database password in a runner's error must not reach a customer key): a real job
// whose runner fails with such an error is refunded (the net-effect rule: it nets 0), and its
// answer to the account's keys (customer and customer_read) carries the reason code gpu_failed, the
// fixed sentence and no detail; the ledger keeps the code in its constrained column and the detail
// scrubbed of the password; an admin key reads the scrubbed detail. The audit stays clean (the
// reversing-pairs, net-effect and sum-of-rows rules).
func TestRunnerErrorNeverReachesTheCustomer(t *testing.T) {
	t.Parallel()
	gpu := failingGPU(t, leakyRunnerError)
	cfg := workertest.Config("api-gpu-errors")
	cfg.Runner.Kind = "http"
	cfg.Runner.HTTP.URL = gpu.URL
	cfg.Runner.HTTP.PollInterval = 50 * time.Millisecond
	cfg.Policy = workertest.QuickPolicy()
	e := &env{workertest.Start(t, cfg)}

	acct := ledgertest.Account(t, e.Store, 100)
	customer, reader := e.key(t, apikeys.ScopeCustomer, acct), e.key(t, apikeys.ScopeCustomerRead, acct)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	base := e.serve(t, nil)
	id := ledgertest.ID(t, "gpu-err")
	kind := e.fixed(t, 40)

	a := submit(t, base, customer, job(id, acct, kind, "s3://in/"+id))
	requireCharged(t, a)
	e.wait(t, acct, id, ledgerdb.StateRefunded)

	for _, key := range []string{customer, reader} {
		a = call(t, base, "GET", "/v1/jobs/"+id, key, nil)
		require.Equal(t, 200, a.code, a.raw)
		require.Equal(t, "refunded", a.str("state"))
		for _, word := range leakedWords {
			require.NotContains(t, a.raw, word, "the customer's answer repeats the GPU service's words")
		}
		require.Equal(t, "gpu_failed", a.str("reason"), a.raw)
		require.Equal(t, "Not delivered: the work failed on the GPU side. Your 40 credits were refunded.", a.str("message"))
		require.NotContains(t, a.body, "detail", "the operator's detail is for admin keys only")
	}

	a = call(t, base, "GET", "/v1/jobs/"+id+"?account_id="+acct, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "gpu_failed", a.str("reason"))
	require.Contains(t, a.str("detail"), "postgres://svc:***@10.0.3.7:5432/gpu", "operators read the scrubbed detail")
	require.NotContains(t, a.raw, "hunter2")

	var code, detail string
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT refund_reason_code, refund_reason FROM jobs WHERE id = $1`,
		ledgerdb.JobKey{AccountID: acct, JobID: id}.String()).Scan(&code, &detail))
	require.Equal(t, "gpu_failed", code)
	require.NotContains(t, detail, "hunter2", "the ledger keeps no password")
	require.True(t, strings.Contains(detail, "svc:***@"), detail)
	require.Equal(t, int64(100), e.balance(t, acct), "refunded: the job nets 0")

	report, err := invariants.Check(context.Background(), invariants.Options{
		Ledger: e.Store, Temporal: e.Client, Namespace: cfg.Temporal.Namespace, TaskQueue: cfg.Temporal.TaskQueue, AccountID: acct,
	})
	require.NoError(t, err)
	require.True(t, report.OK(), "%+v", report.Violations)
}

// TestWorkflowURLOnlyForAdmins checks that no answer but an admin's carries an internal URL: the
// Temporal UI link (workflow_url) is in admin answers only — the customer's submission, status
// and deletion and the GPU service's result (a runner key's) alike — so that no one outside
// learns of the operator's network.
func TestWorkflowURLOnlyForAdmins(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	customer, runner, admin := e.key(t, apikeys.ScopeCustomer, e.acct), e.key(t, apikeys.ScopeRunner, ""), e.key(t, apikeys.ScopeAdmin, "")
	id := ledgertest.ID(t, "job")
	internal := e.Config.Temporal.UIURL
	require.NotEmpty(t, internal, "the job service knows the UI, so it has links to hide")

	answers := []answer{submit(t, e.base, customer, job(id, e.acct, e.fixed(t, 10), "sim:hang"))}
	answers = append(answers, call(t, e.base, "GET", "/v1/jobs/"+id, customer, nil))
	answers = append(answers, call(t, e.base, "POST", "/v1/jobs/"+id+"/result?account_id="+e.acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out"}))
	e.wait(t, e.acct, id, ledgerdb.StateDelivered)
	answers = append(answers, call(t, e.base, "DELETE", "/v1/jobs/"+id, customer, nil))
	for i, a := range answers {
		require.Less(t, a.code, 300, "answer %d: %s", i, a.raw)
		require.NotContains(t, a.raw, "workflow_url", "answer %d", i)
		require.NotContains(t, a.raw, internal, "answer %d", i)
	}
	a := call(t, e.base, "GET", "/v1/jobs/"+ledgertest.ID(t, "never")+"?account_id="+e.acct, admin, nil)
	require.Equal(t, 404, a.code)
	a = submit(t, e.base, admin, job(ledgertest.ID(t, "job-admin"), e.acct, e.fixed(t, 10), "sim:ok"))
	requireCharged(t, a)
	require.True(t, strings.HasPrefix(a.str("status", "workflow_url"), internal), "an admin still gets the link: %s", a.raw)
}
