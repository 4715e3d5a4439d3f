package api_test

// End-to-end tests of the HTTP API: an httptest.Server over the API's handler, the real Postgres
// test database, the real Temporal dev server and a worker in this process on a task queue of
// its own. They need `bash scripts/ensure-postgres.sh` and `bash scripts/ensure-temporal.sh`
// (make test runs both). Every test server fails its test if a route answers a status that its
// declaration does not list, or an answer that openapi.yaml does not allow (apitest.Conform):
// every answer any test provokes is held to the document.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/api/apitest"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
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
	srv := httptest.NewServer(apitest.Conform(t, s.Handler()))
	t.Cleanup(srv.Close)
	return srv.URL
}

// site is one test's API server over the process's worker and the test ledger, and an account
// of its own.
type site struct {
	*env
	// base is the server's URL.
	base string
	// acct is the test's account.
	acct string
}

// newSite serves the API for the test (serve, with the options as they are) and opens an account
// granted credits.
func newSite(t *testing.T, credits int64) *site {
	t.Helper()
	e := newEnv(t)
	return &site{env: e, base: e.serve(t, nil), acct: ledgertest.Account(t, e.Store, credits)}
}

// requireInvalid fails unless a is the door's refusal of bad input: 400 invalid_input, its message
// naming field (unless field is empty), so that the caller knows what to fix. about says what was
// sent, for the failure's message.
func requireInvalid(t *testing.T, a answer, field, about string) {
	t.Helper()
	require.Equal(t, 400, a.code, "%s: %s", about, a.raw)
	require.Equal(t, "invalid_input", a.str("code"), "%s: %s", about, a.raw)
	if field != "" {
		require.Contains(t, a.str("message"), `"`+field+`"`, "%s: the refusal names the field", about)
	}
}

// answer is a decoded response.
type answer struct {
	code int
	raw  string
	body map[string]any
	// waited says that the answer is a submission's second: the first was 202, and submit waited
	// for the job's charge decision and sent the same request again.
	waited bool
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

// submit posts a job's submission, as call does, and waits out the documented "poll again"
// answer. A 202 — received, its charge still being decided when api.request_timeout ran out, as a
// submission is answered when the worker's workflow tasks are slow under load — has failed at
// nothing: the job's ID is polled until it leaves submitting, for as long as the test runs (no
// wall-clock margin of the helper's own that load could eat), and the same request is then sent
// again. Its answer — the decided job as the same request again answers it (200), or the job's
// rejection (402, 409) — is what submit answers, marked waited. Every test that submits a job over
// HTTP submits through this, but those of the 202 itself.
func submit(t *testing.T, base, key string, body any) answer {
	t.Helper()
	a := call(t, base, "POST", "/v1/jobs", key, body)
	if a.code != http.StatusAccepted {
		return a
	}
	var ids struct {
		JobID     string `json:"job_id"`
		AccountID string `json:"account_id"`
	}
	data, isText := body.(string)
	if !isText {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		data = string(raw)
	}
	require.NoError(t, json.Unmarshal([]byte(data), &ids))
	t.Logf("job %s: its charge was still being decided when the submission answered (202); polling it", ids.JobID)
	for {
		look := call(t, base, "GET", "/v1/jobs/"+ids.JobID+"?account_id="+ids.AccountID, key, nil)
		if look.code != http.StatusOK || look.str("state") != string(ledgerdb.StateSubmitting) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	a = call(t, base, "POST", "/v1/jobs", key, body)
	a.waited = true
	return a
}

// requireCharged checks that a submission's answer (submit's) says the job is charged: 201 — or,
// when its charge was decided after a 202, the 200 of the same request again — with the job's
// money state charged.
func requireCharged(t *testing.T, a answer) {
	t.Helper()
	want := http.StatusCreated
	if a.waited {
		want = http.StatusOK
	}
	require.Equal(t, want, a.code, a.raw)
	require.Equal(t, string(ledgerdb.MoneyCharged), a.str("status", "money_state"), a.raw)
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
