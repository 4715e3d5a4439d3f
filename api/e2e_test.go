package api_test

// End-to-end tests of the HTTP API: an httptest.Server over the API's handler, the real Postgres
// test database, the real Temporal dev server and a worker in this process on a task queue of
// its own. They need `bash scripts/ensure-postgres.sh` and `bash scripts/ensure-temporal.sh`
// (make test runs both). Every test server fails its test if a route answers a status that its
// declaration (and openapi.yaml) does not list.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// env is the process's worker, on a task queue of its own, and the clients the tests share.
type env struct{ *workertest.Env }

// newEnv starts, once per process, a worker with a policy that settles jobs in seconds: 2
// attempts, 0.5 s apart (workertest.QuickPolicy with one attempt fewer), of work of 0.5 s.
func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{workertest.Shared(t, "api-test", func(cfg *config.Config) {
		cfg.Policy = workertest.QuickPolicy()
		cfg.Policy.MaximumAttempts = 2
		cfg.Runner.Simulated.Duration = 500 * time.Millisecond
	})}
}

// newKey is a fresh secret, so no two tests' keys are alike.
func newKey(t *testing.T, label string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return label + "-" + hex.EncodeToString(b[:])
}

// key is the secret of a new API key of the scope — for the account, for the customer scopes —
// in the test ledger's key store, which every test server authenticates against.
func (e *env) key(t *testing.T, scope apikeys.Scope, account string) string {
	t.Helper()
	name := t.Name()
	if len(name) > apikeys.MaxNameLength {
		name = name[:apikeys.MaxNameLength]
	}
	created, err := apikeys.NewStore(e.Store.Pool()).Create(context.Background(), apikeys.Spec{Scope: scope, AccountID: account, Name: name})
	require.NoError(t, err)
	return created.Secret
}

// serve runs the API over the test ledger and its keys; mod may change the options (bootstrap
// keys in Config.Keys, say).
func (e *env) serve(t *testing.T, mod func(*api.Options)) string {
	t.Helper()
	cfg := config.Default().API
	cfg.MaxBodyBytes, cfg.RequestTimeout = 4096, 20*time.Second
	// Tests send bursts far above a client's; TestRateLimitPerKey sets the limit it checks.
	cfg.RateLimit = config.RateLimit{PerSecond: 10_000, Burst: 10_000}
	opts := api.Options{
		Config: cfg, Jobs: e.Jobs, Ledger: e.Store,
		Ready: []api.Check{{Name: "postgres", Probe: e.Store.Pool().Ping}, {Name: "temporal", Probe: func(ctx context.Context) error {
			_, err := e.Client.CheckHealth(ctx, &temporalclient.CheckHealthRequest{})
			return err
		}}},
	}
	if mod != nil {
		mod(&opts)
	}
	s := api.New(opts)
	api.SetUndeclaredHook(s, func(pattern string, status int) {
		t.Errorf("%s answered %d, which its route does not declare (openapi.yaml)", pattern, status)
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// answer is a decoded response.
type answer struct {
	code int
	raw  string
	body map[string]any
}

func (a answer) str(path ...string) string {
	var v any = a.body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func call(t *testing.T, base, method, path, key string, body any) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{code: resp.StatusCode, raw: string(data)}
	_ = json.Unmarshal(data, &a.body)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, data)
	return a
}

// job is a submission's body: it names the job's kind, never an amount.
func job(id, account, kind, input string) map[string]any {
	return map[string]any{"job_id": id, "account_id": account, "kind": kind, "input_ref": input}
}

// fixed is a kind sold by the job at price credits on the test ledger's price list.
func (e *env) fixed(t *testing.T, price int64) string { return ledgertest.Fixed(t, e.Store, price) }

// rows are the account's ledger rows.
func (e *env) rows(t *testing.T, account string) []ledgerdb.Entry {
	t.Helper()
	h, err := e.Store.History(context.Background(), account, ledgerdb.HistoryPage{Limit: 1000})
	require.NoError(t, err)
	return h.Entries
}

// kinds are the kinds of the account's rows for one job.
func (e *env) kinds(t *testing.T, account, jobID string) []ledgerdb.EntryKind {
	var out []ledgerdb.EntryKind
	for _, r := range e.rows(t, account) {
		if r.JobID == jobID {
			out = append(out, r.Kind)
		}
	}
	return out
}

// wait waits until the account's job reaches one of the states.
func (e *env) wait(t *testing.T, account, jobID string, states ...ledgerdb.State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, err := e.Jobs.Wait(ctx, ledgerdb.JobKey{AccountID: account, JobID: jobID}, states...)
	require.NoError(t, err)
}

func (e *env) balance(t *testing.T, account string) int64 {
	b, err := e.Store.Balance(context.Background(), account)
	require.NoError(t, err)
	return b
}

// TestSubmitAndStatusCodes checks POST /v1/jobs and GET /v1/jobs/{id} against the real server:
// 201 charged once, 200 for the same request again (money rules 2 and 8: idempotent, never a
// second charge), 409 for a different request under the ID, 402 for insufficient credits with
// nothing charged, 422 for an unknown account, 404 "not received, not charged" for an ID that
// never arrived (rule 7), and 200 with state, money_state and message. Rule 6 by the audit.
func TestSubmitAndStatusCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	ghost := ledgertest.ID(t, "acct-never-opened")
	key, admin, runner := e.key(t, apikeys.ScopeCustomer, acct), e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")
	base := e.serve(t, nil)
	id := ledgertest.ID(t, "job")
	kind := e.fixed(t, 40)

	a := call(t, base, "POST", "/v1/jobs", key, job(id, acct, kind, "sim:hang"))
	require.Equal(t, 201, a.code, a.raw)
	require.Equal(t, "running", a.str("status", "state"))
	require.Equal(t, "charged", a.str("status", "money_state"))
	require.Equal(t, "false", a.str("duplicate"))
	require.Equal(t, kind, a.str("status", "kind"))
	require.Equal(t, "job", a.str("status", "unit"))
	require.Equal(t, "40", a.str("status", "held"), "the server's price, held at the charge")
	require.Equal(t, "40", a.str("status", "charged"))

	a = call(t, base, "POST", "/v1/jobs", key, job(id, acct, kind, "sim:hang"))
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "true", a.str("duplicate"))

	a = call(t, base, "POST", "/v1/jobs", key, job(id, acct, kind, "sim:ok"))
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "conflict", a.str("code"))
	require.Equal(t, "charged", a.str("money_state"), "the caller's own job: its money state is told")

	poor := ledgertest.ID(t, "job-poor")
	a = call(t, base, "POST", "/v1/jobs", key, job(poor, acct, e.fixed(t, 1000), "sim:ok"))
	require.Equal(t, 402, a.code, a.raw)
	require.Equal(t, "insufficient_credits", a.str("code"))
	require.Equal(t, "not_charged", a.str("money_state"))
	require.Contains(t, a.str("message"), "not charged")

	a = call(t, base, "POST", "/v1/jobs", admin, job(ledgertest.ID(t, "job-ghost"), ghost, e.fixed(t, 1), "sim:ok"))
	require.Equal(t, 422, a.code, a.raw)
	require.Equal(t, "unknown_account", a.str("code"))

	// The key acts for two accounts, so its job requests name the account (job IDs belong to
	// their account).
	inAcct := "?account_id=" + acct
	a = call(t, base, "GET", "/v1/jobs/"+ledgertest.ID(t, "never-sent")+inAcct, key, nil)
	require.Equal(t, 404, a.code, a.raw)
	require.Equal(t, jobs.NotReceivedMessage, a.str("message"))
	require.Equal(t, "not_charged", a.str("money_state"))

	a = call(t, base, "GET", "/v1/jobs/"+id+inAcct, key, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "running", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))
	require.Equal(t, "40", a.str("held"))
	require.Equal(t, "1", a.str("held_units"))
	require.NotEmpty(t, a.str("price_version"))
	require.NotEmpty(t, a.str("message"))

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, acct, id))
	require.Empty(t, e.kinds(t, acct, poor))
	require.Equal(t, int64(60), e.balance(t, acct))
	// Settle the hanging job so its workflow ends.
	a = call(t, base, "POST", "/v1/jobs/"+id+"/result"+inAcct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out/" + id})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestDeleteResultAndRedriveCodes checks DELETE, result and redrive: deleting a running job is
// refused (409, its rows are evidence) and changes nothing; a result settles it without a second
// charge (rule 2); DELETE then tombstones it (repeat: 200, rule 8), GET answers 410 with the money
// state kept, and a result for it is 410 with nothing written (rule 7). A refunded job is
// re-driven (202); a delivered one is 409; an unknown one 404.
func TestDeleteResultAndRedriveCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	key, admin, runner := e.key(t, apikeys.ScopeCustomer, acct), e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")
	base := e.serve(t, nil)

	hang, fail := ledgertest.ID(t, "job-hang"), ledgertest.ID(t, "job-fail")
	require.Equal(t, 201, call(t, base, "POST", "/v1/jobs", key, job(hang, acct, e.fixed(t, 10), "sim:hang")).code)
	require.Equal(t, 201, call(t, base, "POST", "/v1/jobs", key, job(fail, acct, e.fixed(t, 20), "sim:fail")).code)

	a := call(t, base, "DELETE", "/v1/jobs/"+hang, key, nil)
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "job_active", a.str("code"))
	require.Equal(t, "running", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))
	require.Equal(t, 404, call(t, base, "DELETE", "/v1/jobs/"+ledgertest.ID(t, "nope"), key, nil).code)

	a = call(t, base, "POST", "/v1/jobs/"+hang+"/result?account_id="+acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://x"})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, acct, hang, ledgerdb.StateDelivered)
	// The admin key acts for every account, so it names the job's.
	inAcct := "?account_id=" + acct
	a = call(t, base, "POST", "/v1/jobs/"+hang+"/redrive"+inAcct, admin, nil)
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "not_dead_lettered", a.str("code"))

	for range 2 {
		a = call(t, base, "DELETE", "/v1/jobs/"+hang, key, nil)
		require.Equal(t, 200, a.code, a.raw)
		require.Equal(t, "deleted", a.str("state"))
	}
	a = call(t, base, "GET", "/v1/jobs/"+hang, key, nil)
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, "charged", a.str("money_state"))
	a = call(t, base, "POST", "/v1/jobs/"+hang+"/result?account_id="+acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://late"})
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, 410, call(t, base, "POST", "/v1/jobs/"+hang+"/redrive"+inAcct, admin, map[string]any{"by": "ops"}).code)

	e.wait(t, acct, fail, ledgerdb.StateRefunded)
	a = call(t, base, "POST", "/v1/jobs/"+fail+"/redrive"+inAcct, admin, map[string]any{"by": "ops", "note": "GPU pool fixed"})
	require.Equal(t, 202, a.code, a.raw)
	require.Equal(t, 404, call(t, base, "POST", "/v1/jobs/"+ledgertest.ID(t, "nope")+"/redrive"+inAcct, admin, nil).code)

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, acct, hang))
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestDeletionStory replays the double-charge story behind the submission rules over HTTP with the Go client: a
// job is submitted and delivered; the user deletes it; the canvas still polls it and gets 410,
// not 404, so the client reports "deleted", still charged, and does not resubmit; a naive client (the seed's old
// rule: resubmit on 404) resubmitting the same ID and body is refused with 410. Money rules 3 and
// 7: one charge, never two; the balance is the grant minus one cost.
func TestDeletionStory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	key := e.key(t, apikeys.ScopeCustomer, acct)
	base := e.serve(t, nil)
	c := &apiclient.Client{BaseURL: base, Key: key, PollInterval: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	kind := e.fixed(t, 40)
	req := apitype.SubmitRequest{JobID: ledgertest.ID(t, "video"), AccountID: acct, Kind: kind, InputRef: "sim:ok"}
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
	a := call(t, base, "POST", "/v1/jobs", key, job(req.JobID, acct, kind, "sim:ok"))
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, "deleted", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, acct, req.JobID))
	require.Equal(t, int64(60), e.balance(t, acct))
	balance, err := c.Balance(ctx, acct)
	require.NoError(t, err)
	require.Equal(t, int64(60), balance.Balance)
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestCrossAccountRefused checks account isolation: with a key for account A, every read,
// redrive, top-up and submission touching account B is refused with 403, and every read, delete
// and report of B's job — naming B's account or not — is answered exactly as a job ID that never
// arrived (404 not_received): job IDs belong to their account, so B's job does not exist for A's
// key. No answer says anything of B's job, and nothing is written (B's ledger rows and job are
// unchanged: rules 1 and 6). B's job ID under A's own account is a job of A's, charged to A once.
func TestCrossAccountRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acctA, acctB := ledgertest.Account(t, e.Store, 100), ledgertest.Account(t, e.Store, 100)
	keyA, keyB := e.key(t, apikeys.ScopeCustomer, acctA), e.key(t, apikeys.ScopeCustomer, acctB)
	base := e.serve(t, nil)
	jobB := ledgertest.ID(t, "job-b")
	require.Equal(t, 201, call(t, base, "POST", "/v1/jobs", keyB, job(jobB, acctB, e.fixed(t, 37), "sim:ok")).code)
	e.wait(t, acctB, jobB, ledgerdb.StateDelivered)
	rowsBefore := e.rows(t, acctB)
	before, err := e.Jobs.Status(context.Background(), ledgerdb.JobKey{AccountID: acctB, JobID: jobB})
	require.NoError(t, err)

	// B's job on the job routes: the answer of an unknown ID, byte for byte. (This rule changed
	// when job IDs came to belong to their account: these were 403 forbidden, which told A that
	// B had a job of that ID.)
	unknown := call(t, base, "GET", "/v1/jobs/"+ledgertest.ID(t, "never-sent"), keyA, nil)
	require.Equal(t, 404, unknown.code, unknown.raw)
	require.Equal(t, "not_received", unknown.str("code"))
	for _, account := range []string{"?account_id=" + acctB, ""} {
		for _, tc := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/jobs/" + jobB + account, nil},
			{"DELETE", "/v1/jobs/" + jobB + account, nil},
		} {
			a := call(t, base, tc.method, tc.path, keyA, tc.body)
			require.Equal(t, unknown.code, a.code, "%s %s: %s", tc.method, tc.path, a.raw)
			require.Equal(t, unknown.raw, a.raw, "%s %s must tell nothing an unknown ID does not", tc.method, tc.path)
		}
	}

	newJobForB := ledgertest.ID(t, "job-for-b")
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		// Redrive needs an admin key: refused before any job is looked at.
		{"POST", "/v1/jobs/" + jobB + "/redrive?account_id=" + acctB, nil},
		{"GET", "/v1/accounts/" + acctB, nil},
		{"GET", "/v1/accounts/" + acctB + "/ledger", nil},
		{"POST", "/v1/accounts/" + acctB + "/grants", map[string]any{"amount": 1000, "key": "steal"}},
		{"POST", "/v1/jobs", job(newJobForB, acctB, e.fixed(t, 1), "sim:ok")},
	} {
		a := call(t, base, tc.method, tc.path, keyA, tc.body)
		require.Equal(t, 403, a.code, "%s %s: %s", tc.method, tc.path, a.raw)
		require.Equal(t, "forbidden", a.str("code"))
		require.NotContains(t, a.raw, acctB)
		require.NotContains(t, a.raw, "37")
		require.Empty(t, a.str("money_state"))
	}
	// B's ID under A's own account is a job of A's own, charged to A. (This rule changed when job
	// IDs came to belong to their account: it was a 409, the ID taken by B's job.)
	a := call(t, base, "POST", "/v1/jobs", keyA, job(jobB, acctA, e.fixed(t, 5), "sim:ok"))
	require.Equal(t, 201, a.code, a.raw)
	require.Equal(t, "false", a.str("duplicate"))
	require.Equal(t, acctA, a.str("status", "account_id"))
	require.Equal(t, "5", a.str("status", "held"))
	require.NotContains(t, a.raw, acctB)
	e.wait(t, acctA, jobB, ledgerdb.StateDelivered)

	require.Equal(t, rowsBefore, e.rows(t, acctB))
	after, err := e.Jobs.Status(context.Background(), ledgerdb.JobKey{AccountID: acctB, JobID: jobB})
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Equal(t, 404, call(t, base, "GET", "/v1/jobs/"+newJobForB, keyB, nil).code, "the refused submission wrote nothing")
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, acctA, jobB), "A paid for its own job, once")
	require.Len(t, e.rows(t, acctA), 2, "A has its initial grant and its own job's charge")
	require.Equal(t, int64(95), e.balance(t, acctA))
	ledgertest.RequireSound(t, e.Store, acctA, acctB)
}

// TestAuthRefused checks that no key, an unknown key, another scheme, and a scoped key on an
// admin route are refused (401, 401, 401, 403) with nothing written (rule 1: no row appears).
func TestAuthRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	key := e.key(t, apikeys.ScopeCustomer, acct)
	base := e.serve(t, nil)
	id := ledgertest.ID(t, "job")
	grant := map[string]any{"amount": 5, "key": "k1"}
	for _, tc := range []struct {
		header string
		want   int
	}{{"", 401}, {"Bearer " + key + "x", 401}, {"Bearer ", 401}, {"Basic " + key, 401}, {key, 401}} {
		for _, target := range []struct {
			method, path string
			body         any
		}{{"POST", "/v1/jobs", job(id, acct, e.fixed(t, 1), "sim:ok")}, {"POST", "/v1/accounts/" + acct + "/grants", grant},
			{"GET", "/v1/jobs/" + id, nil}, {"GET", "/v1/prices", nil}, {"PUT", "/v1/prices/" + e.fixed(t, 1), map[string]any{"unit": "job", "unit_price": 1}}} {
			data, _ := json.Marshal(target.body)
			req, _ := http.NewRequest(target.method, base+target.path, bytes.NewReader(data))
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode, "%q %s %s", tc.header, target.method, target.path)
			require.Equal(t, `Bearer realm="jobbill"`, resp.Header.Get("WWW-Authenticate"))
		}
	}
	require.Equal(t, 403, call(t, base, "POST", "/v1/accounts/"+acct+"/grants", key, grant).code)
	require.Equal(t, 403, call(t, base, "POST", "/v1/jobs/"+id+"/redrive", key, nil).code)
	require.Len(t, e.rows(t, acct), 1, "only the initial grant")
	require.Equal(t, 404, call(t, base, "GET", "/v1/jobs/"+id, key, nil).code)
}

// TestBadInputRefused checks that malformed JSON, unknown fields, trailing data, wrong types,
// invalid IDs, a missing or malformed kind and a zero, negative, fractional or overflowing
// max_units are refused with 400 and a clear message, and that nothing is written (rule 7: a
// refused ID stays "not received"). An oversize body is 413 (TestOversizeBodyIs413).
func TestBadInputRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	key := e.key(t, apikeys.ScopeAdmin, "")
	base := e.serve(t, nil)
	id := ledgertest.ID(t, "job")
	metered := ledgertest.Metered(t, e.Store, 1, 300)
	ok := fmt.Sprintf(`"job_id":%q,"account_id":%q`, id, acct)
	kind := fmt.Sprintf(`,"kind":%q`, metered)
	for name, body := range map[string]string{
		"empty":                 ``,
		"not JSON":              `job please`,
		"truncated":             `{` + ok + kind,
		"array":                 `[1,2]`,
		"unknown field":         `{` + ok + kind + `,"priority":4}`,
		"trailing data":         `{` + ok + kind + `}{}`,
		"no kind":               `{` + ok + `}`,
		"empty kind":            `{` + ok + `,"kind":""}`,
		"upper-case kind":       `{` + ok + `,"kind":"Render-4K"}`,
		"numeric kind":          `{` + ok + `,"kind":"40"}`,
		"kind as number":        `{` + ok + `,"kind":40}`,
		"zero max_units":        `{` + ok + kind + `,"max_units":0}`,
		"negative max_units":    `{` + ok + kind + `,"max_units":-5}`,
		"fractional max_units":  `{` + ok + kind + `,"max_units":1.5}`,
		"max_units as string":   `{` + ok + kind + `,"max_units":"5"}`,
		"overflowing max_units": `{` + ok + kind + `,"max_units":99999999999999999999}`,
		"no job ID":             fmt.Sprintf(`{"account_id":%q%s}`, acct, kind),
		"bad job ID":            fmt.Sprintf(`{"job_id":"a/b","account_id":%q%s}`, acct, kind),
		"long job ID":           fmt.Sprintf(`{"job_id":%q,"account_id":%q%s}`, strings.Repeat("a", 129), acct, kind),
		"control in input":      `{` + ok + kind + `,"input_ref":"a\u0000b"}`,
	} {
		a := call(t, base, "POST", "/v1/jobs", key, body)
		require.Equal(t, 400, a.code, "%s: %s", name, a.raw)
		require.NotEmpty(t, a.str("message"), name)
		if strings.Contains(name, "max_units") {
			require.Contains(t, a.str("message"), `"max_units"`, name)
		}
	}
	require.Equal(t, "body_too_large", call(t, base, "POST", "/v1/jobs", key, `{"input_ref":"`+strings.Repeat("x", 5000)+`"}`).str("code"))
	// The admin key names the job's account, so that the job paths are refused for their IDs alone.
	inAcct := "?account_id=" + acct
	for _, path := range []string{"/v1/jobs/bad%20id" + inAcct, "/v1/jobs/" + strings.Repeat("a", 129) + inAcct, "/v1/accounts/-x", "/v1/accounts/" + acct + "/ledger?limit=0",
		"/v1/accounts/" + acct + "/ledger?after=-1", "/v1/prices/Render", "/v1/prices/" + strings.Repeat("a", 65)} {
		require.Equal(t, 400, call(t, base, "GET", path, key, nil).code, path)
	}
	for _, body := range []string{`{"amount":0,"key":"k"}`, `{"amount":-5,"key":"k"}`, `{"amount":5}`, `{"amount":5,"key":"k","extra":1}`} {
		require.Equal(t, 400, call(t, base, "POST", "/v1/accounts/"+acct+"/grants", key, body).code, body)
	}
	require.Equal(t, 404, call(t, base, "GET", "/v1/jobs/"+id+inAcct, key, nil).code, "nothing was written")
	require.Len(t, e.rows(t, acct), 1)
}

// TestGrantsBalanceAndLedgerPages checks top-ups (idempotent by key: rule 8; a different amount
// under the key is 409), the balance (rule 6: the sum of the rows) and the ledger's pages.
func TestGrantsBalanceAndLedgerPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	base := e.serve(t, nil)
	path := "/v1/accounts/" + acct
	a := call(t, base, "POST", path+"/grants", admin, map[string]any{"amount": 50, "key": "invoice-1", "memo": "first"})
	require.Equal(t, 201, a.code, a.raw)
	b := call(t, base, "POST", path+"/grants", admin, map[string]any{"amount": 50, "key": "invoice-1", "memo": "first"})
	require.Equal(t, 200, b.code, b.raw)
	require.Equal(t, a.str("entry_id"), b.str("entry_id"))
	require.Equal(t, 409, call(t, base, "POST", path+"/grants", admin, map[string]any{"amount": 51, "key": "invoice-1"}).code)
	require.Equal(t, 201, call(t, base, "POST", path+"/grants", admin, map[string]any{"amount": 7, "key": "invoice-2"}).code)
	require.Equal(t, 404, call(t, base, "POST", "/v1/accounts/"+ledgertest.ID(t, "ghost")+"/grants", admin, map[string]any{"amount": 1, "key": "k"}).code)

	a = call(t, base, "GET", path, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "57", a.str("balance"))
	require.Equal(t, 404, call(t, base, "GET", "/v1/accounts/"+ledgertest.ID(t, "ghost"), admin, nil).code)

	first := call(t, base, "GET", path+"/ledger?limit=1", admin, nil)
	require.Equal(t, 200, first.code, first.raw)
	require.Len(t, first.body["entries"], 1)
	require.NotEqual(t, "0", first.str("next_after"))
	second := call(t, base, "GET", path+"/ledger?limit=1&after="+first.str("next_after"), admin, nil)
	require.Equal(t, 200, second.code, second.raw)
	require.Len(t, second.body["entries"], 1)
	require.Equal(t, "0", second.str("next_after"))
	require.Equal(t, 404, call(t, base, "GET", "/v1/accounts/"+ledgertest.ID(t, "ghost")+"/ledger", admin, nil).code)
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestSlowChargeDecisionAnswers202 checks that a submission whose charge is not decided within
// api.request_timeout is answered 202 "received; the charge is being decided" — slow is not failed
// — with the placeholder written, nothing charged yet (rules 3 and 7), and money state pending:
// not "not charged", since the charge may still come. No worker serves the task queue, so the
// decision never comes; the workflow is terminated at the end.
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

// TestSubmissionWhileTemporalIsDownIsPending checks the answer to a submission whose placeholder is
// written but whose workflow cannot be started, Temporal being unreachable: the job is received and
// its charge not decided — money state pending, and no "not charged" in words — because the same
// request again, or the reconcile pass, starts it and charges it. The same POST to a server that
// reaches Temporal then charges the job once (money rules 7 and 8). Before, the answer said "you
// were not charged" of a job that was charged a moment later.
func TestSubmissionWhileTemporalIsDownIsPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	secret := e.key(t, apikeys.ScopeCustomer, acct)
	down, err := temporalclient.NewLazyClient(temporalclient.Options{HostPort: "127.0.0.1:1", Namespace: e.Config.Temporal.Namespace})
	require.NoError(t, err)
	t.Cleanup(down.Close)
	unreachable := jobs.New(jobs.Options{Temporal: down, Ledger: e.Store, TaskQueue: e.Config.Temporal.TaskQueue,
		Namespace: e.Config.Temporal.Namespace})
	cut := e.serve(t, func(o *api.Options) { o.Jobs, o.Config.RequestTimeout = unreachable, 3*time.Second })
	base := e.serve(t, nil)
	id := ledgertest.ID(t, "down")
	body := job(id, acct, e.fixed(t, 40), "sim:hang")

	a := call(t, cut, "POST", "/v1/jobs", secret, body)
	require.Contains(t, []int{http.StatusAccepted, http.StatusServiceUnavailable}, a.code, a.raw)
	money, message := a.str("money_state")+a.str("status", "money_state"), a.str("message")+a.str("status", "message")
	require.Equal(t, "pending", money, a.raw)
	require.NotContains(t, strings.ToLower(message), "not charged", a.raw)
	require.NotContains(t, strings.ToLower(message), "not been charged", a.raw)
	require.Empty(t, e.kinds(t, acct, id))

	a = call(t, base, "POST", "/v1/jobs", secret, body)
	require.Equal(t, http.StatusOK, a.code, a.raw)
	require.Equal(t, "running", a.str("status", "state"))
	require.Equal(t, "charged", a.str("status", "money_state"))
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, acct, id))
	a = call(t, base, "POST", "/v1/jobs/"+id+"/result?account_id="+acct, e.key(t, apikeys.ScopeRunner, ""), map[string]any{"attempt": 1, "output_ref": "s3://out/" + id})
	require.Equal(t, http.StatusOK, a.code, a.raw)
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, acct)
}

// TestHealthReadinessAndRouting checks /healthz, /readyz (503 naming the unreachable dependency,
// without its error) and the JSON answers for unknown paths (404) and methods (405).
func TestHealthReadinessAndRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := e.serve(t, nil)
	require.Equal(t, 200, call(t, base, "GET", "/healthz", "", nil).code)
	a := call(t, base, "GET", "/readyz", "", nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "ok", a.str("checks", "postgres"))
	require.Equal(t, "ok", a.str("checks", "temporal"))
	down := e.serve(t, func(o *api.Options) {
		o.Ready = append(o.Ready, api.Check{Name: "temporal-2", Probe: func(context.Context) error {
			return fmt.Errorf("dial tcp 10.0.0.1:7233: secret-host unreachable")
		}})
	})
	a = call(t, down, "GET", "/readyz", "", nil)
	require.Equal(t, 503, a.code, a.raw)
	require.Equal(t, "unreachable", a.str("checks", "temporal-2"))
	require.NotContains(t, a.raw, "secret-host")
	require.Equal(t, "no_route", call(t, base, "GET", "/v2/jobs", "", nil).str("code"))
	require.Equal(t, 405, call(t, base, "PUT", "/v1/jobs/x", "", nil).code)
}

// TestServeStopsOnCancel checks the clean shutdown: once its context is done, Serve lets the
// in-flight request finish and returns nil.
func TestServeStopsOnCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config.Default().API
	cfg.ShutdownTimeout = 5 * time.Second
	s := api.New(api.Options{Config: cfg, Jobs: e.Jobs, Ledger: e.Store})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}
