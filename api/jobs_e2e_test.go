package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
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
	"github.com/jobbill/jobbill/workflows"
)

// TestSubmitAndStatusCodes checks POST /v1/jobs and GET /v1/jobs/{id} against the real server:
// 201 charged once, 200 for the same request again (the reversing-pairs and idempotent-doors rules:
// idempotent, never a second charge), 409 for a different request under the ID, 402 for
// insufficient credits with nothing charged, 422 for an unknown account, 404 "not received, not
// charged" for an ID that never arrived (the remembered-IDs rule), and 200 with state, money_state
// and message. The sum-of-rows rule by the audit.
func TestSubmitAndStatusCodes(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	ghost := ledgertest.ID(t, "acct-never-opened")
	key, admin, runner := e.key(t, apikeys.ScopeCustomer, e.acct), e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")
	id := ledgertest.ID(t, "job")
	kind := e.fixed(t, 40)

	a := submit(t, e.base, key, job(id, e.acct, kind, "sim:hang"))
	requireCharged(t, a)
	require.Equal(t, "running", a.str("status", "state"))
	require.Equal(t, "charged", a.str("status", "money_state"))
	require.Equal(t, "false", a.str("duplicate"))
	require.Equal(t, kind, a.str("status", "kind"))
	require.Equal(t, "job", a.str("status", "unit"))
	require.Equal(t, "40", a.str("status", "held"), "the server's price, held at the charge")
	require.Equal(t, "40", a.str("status", "charged"))

	a = call(t, e.base, "POST", "/v1/jobs", key, job(id, e.acct, kind, "sim:hang"))
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "true", a.str("duplicate"))

	a = call(t, e.base, "POST", "/v1/jobs", key, job(id, e.acct, kind, "sim:ok"))
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "conflict", a.str("code"))
	require.Equal(t, "charged", a.str("money_state"), "the caller's own job: its money state is told")

	poor := ledgertest.ID(t, "job-poor")
	a = submit(t, e.base, key, job(poor, e.acct, e.fixed(t, 1000), "sim:ok"))
	require.Equal(t, 402, a.code, a.raw)
	require.Equal(t, "insufficient_credits", a.str("code"))
	require.Equal(t, "not_charged", a.str("money_state"))
	require.Contains(t, a.str("message"), "not charged")

	a = call(t, e.base, "POST", "/v1/jobs", admin, job(ledgertest.ID(t, "job-ghost"), ghost, e.fixed(t, 1), "sim:ok"))
	require.Equal(t, 422, a.code, a.raw)
	require.Equal(t, "unknown_account", a.str("code"))

	// The key acts for two accounts, so its job requests name the account (job IDs belong to
	// their account).
	inAcct := "?account_id=" + e.acct
	a = call(t, e.base, "GET", "/v1/jobs/"+ledgertest.ID(t, "never-sent")+inAcct, key, nil)
	require.Equal(t, 404, a.code, a.raw)
	require.Equal(t, jobs.NotReceivedMessage, a.str("message"))
	require.Equal(t, "not_charged", a.str("money_state"))

	a = call(t, e.base, "GET", "/v1/jobs/"+id+inAcct, key, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "running", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))
	require.Equal(t, "40", a.str("held"))
	require.Equal(t, "1", a.str("held_units"))
	require.NotEmpty(t, a.str("price_version"))
	require.NotEmpty(t, a.str("message"))

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, e.acct, id))
	require.Empty(t, e.kinds(t, e.acct, poor))
	require.Equal(t, int64(60), e.balance(t, e.acct))
	// Settle the hanging job so its workflow ends.
	a = call(t, e.base, "POST", "/v1/jobs/"+id+"/result"+inAcct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out/" + id})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, e.acct, id, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestDeleteResultAndRedriveCodes checks DELETE, result and redrive: deleting a running job is
// refused (409, its rows are evidence) and changes nothing; a result settles it without a second
// charge (the reversing-pairs rule); DELETE then tombstones it (repeat: 200, the idempotent-doors
// rule), GET answers 410 with the money state kept, and a result for it is 410 with nothing written
// (the remembered-IDs rule). A refunded job is re-driven (202); a delivered one is 409; an unknown
// one 404.
func TestDeleteResultAndRedriveCodes(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key, admin, runner := e.key(t, apikeys.ScopeCustomer, e.acct), e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")

	hang, fail := ledgertest.ID(t, "job-hang"), ledgertest.ID(t, "job-fail")
	requireCharged(t, submit(t, e.base, key, job(hang, e.acct, e.fixed(t, 10), "sim:hang")))
	requireCharged(t, submit(t, e.base, key, job(fail, e.acct, e.fixed(t, 20), "sim:fail")))

	a := call(t, e.base, "DELETE", "/v1/jobs/"+hang, key, nil)
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "job_active", a.str("code"))
	require.Equal(t, "running", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))
	require.Equal(t, 404, call(t, e.base, "DELETE", "/v1/jobs/"+ledgertest.ID(t, "nope"), key, nil).code)

	a = call(t, e.base, "POST", "/v1/jobs/"+hang+"/result?account_id="+e.acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://x"})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, e.acct, hang, ledgerdb.StateDelivered)
	// The admin key acts for every account, so it names the job's.
	inAcct := "?account_id=" + e.acct
	a = call(t, e.base, "POST", "/v1/jobs/"+hang+"/redrive"+inAcct, admin, nil)
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "not_dead_lettered", a.str("code"))

	for range 2 {
		a = call(t, e.base, "DELETE", "/v1/jobs/"+hang, key, nil)
		require.Equal(t, 200, a.code, a.raw)
		require.Equal(t, "deleted", a.str("state"))
	}
	a = call(t, e.base, "GET", "/v1/jobs/"+hang, key, nil)
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, "charged", a.str("money_state"))
	a = call(t, e.base, "POST", "/v1/jobs/"+hang+"/result?account_id="+e.acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://late"})
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, 410, call(t, e.base, "POST", "/v1/jobs/"+hang+"/redrive"+inAcct, admin, map[string]any{"by": "ops"}).code)

	e.wait(t, e.acct, fail, ledgerdb.StateRefunded)
	a = call(t, e.base, "POST", "/v1/jobs/"+fail+"/redrive"+inAcct, admin, map[string]any{"by": "ops", "note": "GPU pool fixed"})
	require.Equal(t, 202, a.code, a.raw)
	require.Equal(t, 404, call(t, e.base, "POST", "/v1/jobs/"+ledgertest.ID(t, "nope")+"/redrive"+inAcct, admin, nil).code)

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, e.acct, hang))
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestDeletionStory replays the double-charge story behind the submission rules over HTTP with the Go client: a
// job is submitted and delivered; the user deletes it; the canvas still polls it and gets 410,
// not 404, so the client reports "deleted", still charged, and does not resubmit; a naive client (the seed's old
// rule: resubmit on 404) resubmitting the same ID and body is refused with 410. The
// net-effect and remembered-IDs rules: one charge, never two; the balance is the grant minus one
// cost.
func TestDeletionStory(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	c := &apiclient.Client{BaseURL: e.base, Key: key, PollInterval: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	kind := e.fixed(t, 40)
	req := apitype.SubmitRequest{JobID: ledgertest.ID(t, "video"), AccountID: e.acct, Kind: kind, InputRef: "sim:ok"}
	tracked := c.Track(req)
	st, err := c.Run(ctx, tracked)
	require.NoError(t, err)
	require.Equal(t, "delivered", st.State)
	require.Equal(t, apiclient.Accepted, tracked.State)

	// The user deletes the result in the "cloud space" while the canvas is open.
	tomb, err := c.DeleteJob(ctx, req.JobID)
	require.NoError(t, err)
	require.Equal(t, "deleted", tomb.State)
	require.Equal(t, "charged", tomb.MoneyState)

	// The canvas polls again: 410, so deleted — never "not arrived yet" — and still charged.
	st, err = c.Poll(ctx, tracked)
	require.ErrorIs(t, err, apiclient.ErrDeleted)
	require.Equal(t, "charged", st.MoneyState)
	// The tracked submission is never sent again...
	st, err = c.Submit(ctx, tracked)
	require.ErrorIs(t, err, apiclient.ErrDeleted)
	require.Equal(t, "charged", st.MoneyState)
	// ...and a client that forgot it had been accepted is refused by the tombstone, and told the
	// money state the tombstone kept.
	st, err = c.Run(ctx, c.Track(req))
	require.ErrorIs(t, err, apiclient.ErrDeleted)
	require.Equal(t, "charged", st.MoneyState)
	a := call(t, e.base, "POST", "/v1/jobs", key, job(req.JobID, e.acct, kind, "sim:ok"))
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, "deleted", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, e.acct, req.JobID))
	require.Equal(t, int64(60), e.balance(t, e.acct))
	balance, err := c.Balance(ctx, e.acct)
	require.NoError(t, err)
	require.Equal(t, int64(60), balance.Balance)
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestSlowChargeDecisionAnswers202 checks that a submission whose charge is not decided within
// api.request_timeout is answered 202 "received; the charge is being decided" — slow is not failed
// — with the placeholder written, nothing charged yet (the net-effect and remembered-IDs rules),
// and money state pending: not "not charged", since the charge may still come. No worker serves the
// task queue, so the decision never comes; the workflow is terminated at the end.
func TestSlowChargeDecisionAnswers202(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	key := e.key(t, apikeys.ScopeCustomer, acct)
	idle := jobs.New(jobs.Options{Temporal: e.Client, Ledger: e.Store, TaskQueue: "jobbill-api-test-no-worker-" + newKey(t, "q")})
	base := e.serve(t, func(o *api.Options) {
		o.Jobs, o.Config.RequestTimeout = idle, 1500*time.Millisecond
	})
	id := ledgertest.ID(t, "job-slow")
	t.Cleanup(func() {
		_ = e.Client.TerminateWorkflow(context.Background(), workflows.JobWorkflowID(acct, id), "", "test over")
	})
	a := call(t, base, "POST", "/v1/jobs", key, job(id, acct, e.fixed(t, 10), "sim:ok"))
	require.Equal(t, 202, a.code, a.raw)
	require.Equal(t, "submitting", a.str("status", "state"))
	require.Equal(t, "pending", a.str("status", "money_state"))
	require.NotContains(t, strings.ToLower(a.str("status", "message")), "not charged", a.raw)
	require.NotContains(t, strings.ToLower(a.str("status", "message")), "not been charged", a.raw)
	a = call(t, base, "DELETE", "/v1/jobs/"+id, key, nil)
	require.Equal(t, 409, a.code, "a submitting job is evidence: %s", a.raw)
	require.Empty(t, e.kinds(t, acct, id))
}

// TestStillDecidingIsWaitedOn checks the tests' own submission helper against the documented
// "poll again" answer: a 202 is waited on, never failed. The submission's queue has no worker yet,
// so its charge cannot be decided within api.request_timeout and the POST answers 202; once that
// answer has come back, a worker starts on the queue and decides the charge. submit polls the ID
// meanwhile, then sends the same request again, and answers its 200: the job charged, and charged
// once (the remembered-IDs rule: the ID's second request charges nothing).
func TestStillDecidingIsWaitedOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	key := e.key(t, apikeys.ScopeCustomer, acct)
	cfg := workertest.Config("api-late-worker")
	cfg.Policy = workertest.QuickPolicy()
	late := jobs.New(jobs.Options{Temporal: e.Client, Ledger: e.Store, TaskQueue: cfg.Temporal.TaskQueue,
		Namespace: cfg.Temporal.Namespace, Policy: cfg.Policy})
	base, err := url.Parse(e.serve(t, func(o *api.Options) { o.Jobs, o.Config.RequestTimeout = late, 1500*time.Millisecond }))
	require.NoError(t, err)
	// In front of the API, a proxy that tells when a 202 has come back.
	answered202 := make(chan struct{})
	var once sync.Once
	proxy := httputil.NewSingleHostReverseProxy(base)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.StatusCode == http.StatusAccepted {
			once.Do(func() { close(answered202) })
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	id := ledgertest.ID(t, "job-late")
	body := job(id, acct, e.fixed(t, 10), "sim:ok")
	var got answer
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = submit(t, front.URL, key, body)
	}()
	select {
	case <-answered202:
		workertest.Start(t, cfg)
	case <-done:
		t.Fatalf("the submission was answered without a 202, though no worker served its queue: %d %s", got.code, got.raw)
	}
	<-done
	require.True(t, got.waited, "the 202 was waited on: %s", got.raw)
	requireCharged(t, got)
	require.Equal(t, "true", got.str("duplicate"), "the answer of the same request again")
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, acct, id), "charged once")
}

// TestSubmissionWhileTemporalIsDownIsPending checks the answer to a submission whose placeholder is
// written but whose workflow cannot be started, Temporal being unreachable: the job is received and
// its charge not decided — money state pending, and no "not charged" in words — because the same
// request again, or the reconcile pass, starts it and charges it. The same POST to a server that
// reaches Temporal then charges the job once (the remembered-IDs and idempotent-doors rules).
// Before, the answer said "you were not charged" of a job that was charged a moment later.
func TestSubmissionWhileTemporalIsDownIsPending(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	secret := e.key(t, apikeys.ScopeCustomer, e.acct)
	down, err := temporalclient.NewLazyClient(temporalclient.Options{HostPort: "127.0.0.1:1", Namespace: e.Config.Temporal.Namespace})
	require.NoError(t, err)
	t.Cleanup(down.Close)
	unreachable := jobs.New(jobs.Options{Temporal: down, Ledger: e.Store, TaskQueue: e.Config.Temporal.TaskQueue,
		Namespace: e.Config.Temporal.Namespace})
	cut := e.serve(t, func(o *api.Options) { o.Jobs, o.Config.RequestTimeout = unreachable, 3*time.Second })
	id := ledgertest.ID(t, "down")
	body := job(id, e.acct, e.fixed(t, 40), "sim:hang")

	a := call(t, cut, "POST", "/v1/jobs", secret, body)
	require.Contains(t, []int{http.StatusAccepted, http.StatusServiceUnavailable}, a.code, a.raw)
	money, message := a.str("money_state")+a.str("status", "money_state"), a.str("message")+a.str("status", "message")
	require.Equal(t, "pending", money, a.raw)
	require.NotContains(t, strings.ToLower(message), "not charged", a.raw)
	require.NotContains(t, strings.ToLower(message), "not been charged", a.raw)
	require.Empty(t, e.kinds(t, e.acct, id))

	a = submit(t, e.base, secret, body)
	require.Equal(t, http.StatusOK, a.code, a.raw)
	require.Equal(t, "running", a.str("status", "state"))
	require.Equal(t, "charged", a.str("status", "money_state"))
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, e.acct, id))
	a = call(t, e.base, "POST", "/v1/jobs/"+id+"/result?account_id="+e.acct, e.key(t, apikeys.ScopeRunner, ""), map[string]any{"attempt": 1, "output_ref": "s3://out/" + id})
	require.Equal(t, http.StatusOK, a.code, a.raw)
	e.wait(t, e.acct, id, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, e.acct)
}
