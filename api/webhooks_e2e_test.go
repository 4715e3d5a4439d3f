package api_test

// End-to-end tests of webhooks over HTTP: endpoints managed through the API, and the events of
// real jobs — run by the Temporal dev server's worker — delivered, signed, to a receiver. Same
// real Postgres and Temporal dev server as env_e2e_test.go.

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/webhooks/webhookstest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// allowLoopbackHooks lets the test's receivers (httptest, on loopback) be webhook endpoints.
func allowLoopbackHooks(o *api.Options) { o.WebhookURLs = webhooks.URLPolicy{AllowPrivate: true} }

// TestWebhookEndpointsRefuseBadInput checks the webhook routes' doors: a URL that is not https,
// reaches an internal address (the SSRF rule, with the server's default policy) or carries
// credentials, a missing URL, an unknown field, a malformed threshold or replay — each is a clear
// 400 naming what is wrong, and nothing is written (no endpoint, no threshold, nothing queued).
// A valid endpoint answers its secret once: never in a read or a list. A rotation answers a new
// secret; a deletion is final and idempotent, and a deleted endpoint can be neither rotated nor
// replayed to (409).
func TestWebhookEndpointsRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	hooks := "/v1/accounts/" + e.acct + "/webhooks"

	for _, body := range []any{
		map[string]any{"url": "http://hooks.example.com/"},
		map[string]any{"url": "https://127.0.0.1/"},
		map[string]any{"url": "https://169.254.169.254/latest/meta-data/"},
		map[string]any{"url": "https://10.1.2.3:8443/"},
		map[string]any{"url": "https://localhost/"},
		map[string]any{"url": "https://user:secret@hooks.example.com/"},
		map[string]any{"url": "hooks.example.com"},
		map[string]any{"description": "no url"},
		map[string]any{"url": "https://hooks.example.com/", "secret": "whsec_mine"},
		map[string]any{"url": "https://hooks.example.com/", "description": strings.Repeat("x", 201)},
		`{"url": "https://hooks.example.com/"`,
	} {
		a := call(t, e.base, "POST", hooks, key, body)
		requireInvalid(t, a, "", "the endpoint refused")
		require.Contains(t, a.str("message"), "Nothing was written")
	}
	require.Empty(t, call(t, e.base, "GET", hooks, key, nil).body["endpoints"], "nothing was written")

	created := call(t, e.base, "POST", hooks, key, map[string]any{"url": "https://hooks.example.com/jobbill", "description": "billing"})
	require.Equal(t, 201, created.code, created.raw)
	secret, id := created.str("secret"), created.str("id")
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, secret)
	require.Equal(t, "enabled", created.str("status"))
	for _, a := range []answer{call(t, e.base, "GET", hooks+"/"+id, key, nil), call(t, e.base, "GET", hooks, key, nil)} {
		require.Equal(t, 200, a.code, a.raw)
		require.NotContains(t, a.raw, "secret")
		require.NotContains(t, a.raw, secret)
	}
	rotated := call(t, e.base, "POST", hooks+"/"+id+"/rotate", key, nil)
	require.Equal(t, 200, rotated.code, rotated.raw)
	require.NotEqual(t, secret, rotated.str("secret"))
	require.NotEmpty(t, rotated.str("rotated_at"))

	threshold := "/v1/accounts/" + e.acct + "/low-balance-threshold"
	for _, body := range []any{`{}`, `{"threshold": 1.5}`, `{"threshold": "50"}`, `{"threshold": 50, "extra": 1}`, `{"threshold": 2000000000000000000}`, `[50]`} {
		a := call(t, e.base, "PUT", threshold, key, body)
		require.Equal(t, 400, a.code, "%v: %s", body, a.raw)
	}
	hooksStore := webhooks.NewStore(e.Store.Pool())
	none, err := hooksStore.LowBalanceThreshold(context.Background(), e.acct)
	require.NoError(t, err)
	require.Nil(t, none, "nothing was written")
	a := call(t, e.base, "PUT", threshold, key, `{"threshold": 50}`)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "applied", a.str("outcome"))
	require.Equal(t, "already_applied", call(t, e.base, "PUT", threshold, key, `{"threshold": 50}`).str("outcome"))
	a = call(t, e.base, "PUT", threshold, key, `{"threshold": null}`)
	require.Equal(t, "applied", a.str("outcome"))
	require.Equal(t, "", a.str("threshold"))

	replay := hooks + "/" + id + "/replay"
	for _, body := range []any{`{}`, map[string]any{"event_id": "msg_1"}, map[string]any{"since": "yesterday"},
		map[string]any{"event_id": "msg_" + strings.Repeat("0", 32), "since": "2030-01-01T00:00:00Z"}} {
		a := call(t, e.base, "POST", replay, key, body)
		require.Equal(t, 400, a.code, "%v: %s", body, a.raw)
	}
	a = call(t, e.base, "POST", replay, key, map[string]any{"event_id": "msg_" + strings.Repeat("0", 32)})
	require.Equal(t, 404, a.code, a.raw)
	require.Equal(t, "unknown_event", a.str("code"))

	a = call(t, e.base, "DELETE", hooks+"/"+id, key, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "applied", a.str("outcome"))
	require.Equal(t, "disabled", a.str("endpoint", "status"))
	require.Equal(t, "already_applied", call(t, e.base, "DELETE", hooks+"/"+id, key, nil).str("outcome"))
	require.Equal(t, 409, call(t, e.base, "POST", hooks+"/"+id+"/rotate", key, nil).code)
	require.Equal(t, 409, call(t, e.base, "POST", replay, key, map[string]any{"since": "2020-01-01T00:00:00Z"}).code)
}

// TestWebhooksFollowRealJobs checks the outbox end to end, through real jobs on the Temporal dev
// server: a job that succeeds is told to the account's endpoint as job.charged then job.delivered;
// one whose work hangs until its attempts run out, and whose result then arrives late, as
// job.charged, job.refunded, job.reclaimed — each delivery signed so that the receiver's Standard
// Webhooks verifier accepts it, each job's events in order, and the endpoint's delivery log (read
// through the API) records every delivery.
func TestWebhooksFollowRealJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 1000)
	key, runner := e.key(t, apikeys.ScopeCustomer, acct), e.key(t, apikeys.ScopeRunner, "")
	base := e.serve(t, allowLoopbackHooks)
	rcv := &webhookstest.Receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	created := call(t, base, "POST", "/v1/accounts/"+acct+"/webhooks", key, map[string]any{"url": srv.URL + "/jobbill"})
	require.Equal(t, 201, created.code, created.raw)
	rcv.SetSecret(created.str("secret"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = webhooks.NewWorker(webhooks.Options{Store: webhooks.NewStore(e.Store.Pool()), PollInterval: 20 * time.Millisecond,
			InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, AllowPrivateURLs: true, Accounts: []string{acct}}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	kind := e.fixed(t, 40)
	ok, late := ledgertest.ID(t, "ok"), ledgertest.ID(t, "late")
	requireCharged(t, submit(t, base, key, job(ok, acct, kind, "sim:ok")))
	// The hanging job's attempts must time out: it is submitted through an API whose job service
	// gives its jobs workertest.TimeoutPolicy, which only work that never finishes may run under.
	timingOut := e.serve(t, func(o *api.Options) { o.Jobs = e.JobsWith(workertest.TimeoutPolicy()) })
	requireCharged(t, submit(t, timingOut, key, job(late, acct, kind, "sim:hang")))
	e.wait(t, acct, ok, ledgerdb.StateDelivered)
	e.wait(t, acct, late, ledgerdb.StateRefunded)
	a := call(t, base, "POST", "/v1/jobs/"+late+"/result?account_id="+acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://late"})
	require.Contains(t, []int{200, 202}, a.code, a.raw)
	e.wait(t, acct, late, ledgerdb.StateRecovered)

	want := map[string][]string{ok: {"job.charged", "job.delivered"}, late: {"job.charged", "job.refunded", "job.reclaimed"}}
	require.Eventually(t, func() bool {
		got := rcv.ByJob()
		return len(got[ok]) == 2 && len(got[late]) == 3
	}, 30*time.Second, 50*time.Millisecond, "every event delivered")
	require.Equal(t, want, rcv.ByJob())
	require.Zero(t, rcv.Bad(), "every delivery verified")

	// The worker records an attempt once the receiver has answered, so the receiver can hold the
	// last event a moment before its attempt is on the log: wait for the log, not the receiver.
	// (The account's grant may be told too, as credit.granted, when no pass read it before the
	// endpoint was made: only the jobs' events are counted.)
	var log answer
	require.Eventually(t, func() bool {
		log = call(t, base, "GET", "/v1/accounts/"+acct+"/webhooks/"+created.str("id")+"/attempts", key, nil)
		require.Equal(t, 200, log.code, log.raw)
		delivered := 0
		for _, entry := range log.body["attempts"].([]any) {
			if a := entry.(map[string]any); a["outcome"] == "delivered" && strings.HasPrefix(a["event_type"].(string), "job.") {
				delivered++
			}
		}
		return delivered == 5
	}, 30*time.Second, 50*time.Millisecond, "five delivered attempts on the log")
	ledgertest.RequireSound(t, e.Store, acct)
}
