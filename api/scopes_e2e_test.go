package api_test

// End-to-end tests of API keys over HTTP: which scope may call which route, the same 401 for every
// key that does not authenticate, keys created and revoked under /v1/keys while the API runs, and
// the configuration's bootstrap admin keys. Same real Postgres and Temporal dev server as
// env_e2e_test.go.

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestCustomerKeyCannotReportResults checks the net-effect rule at the door: the usage a result
// reports decides what a metered job costs, so only the GPU service (a runner key) or an admin may
// report it. A customer's key reporting a result for its own running job — which would let the
// customer bill itself zero GPU-seconds — is refused with 403, and nothing is written: no result
// recorded, the job still running on its whole hold. The runner's report of the same job then
// settles it.
func TestCustomerKeyCannotReportResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.meteredRunning(t)
	acct, key, runner, base, id := m.acct, m.key, m.runner, m.base, m.id

	a := call(t, base, "POST", "/v1/jobs/"+id+"/result", key, map[string]any{"attempt": 1, "output_ref": "s3://out", "units_used": 0})
	require.Equal(t, 403, a.code, "a customer key reported its own job's usage: %s", a.raw)
	require.Equal(t, "forbidden", a.str("code"))
	require.Contains(t, a.str("message"), "runner or admin")
	require.Zero(t, e.resultReports(t, acct, id), "no result was recorded")
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}}, e.jobRows(t, acct, id))

	a = call(t, base, "POST", "/v1/jobs/"+id+"/result?account_id="+acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out", "units_used": 120})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}, {Kind: ledgerdb.KindRelease, Amount: 180}}, e.jobRows(t, acct, id))
}

// TestScopesOnEveryRoute is the scope table of docs/api.md, checked route by route for a key of
// every scope, a customer key of another account, and a revoked key, an expired key and no key
// (401 everywhere) — the trust rules; the append-only and net-effect rules: no key writes what its
// scope does not allow. A customer key submits, reads and deletes its
// account's jobs and reads its balance, ledger and the prices; a customer_read key only the GET
// routes; a runner key only reports results; an admin key calls everything; another account's
// customer key reads the prices and nothing of the account, and the account's jobs do not exist
// for it (404, as an unknown ID). A key let in gets the route's own
// answer (each request is built to be refused harmlessly after the scope check: an unpriced kind,
// an invalid body, a running job that cannot be deleted, an unknown webhook endpoint); a key kept
// out gets 403 forbidden. Webhook endpoints, the delivery log and the low-balance threshold are
// the account's: its customer key manages them, its customer_read key lists them.
// Nothing is written: the account's rows, the job and its results are as before. Every route of
// the route table that takes a key has its probe, letting in the scopes the table names
// (requireEveryRouteProbed): a route added without one fails here.
func TestScopesOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct, other := ledgertest.Account(t, e.Store, 100), ledgertest.Account(t, e.Store, 100)
	keys := map[string]string{
		"customer":       e.key(t, apikeys.ScopeCustomer, acct),
		"customer_read":  e.key(t, apikeys.ScopeCustomerRead, acct),
		"runner":         e.key(t, apikeys.ScopeRunner, ""),
		"admin":          e.key(t, apikeys.ScopeAdmin, ""),
		"other customer": e.key(t, apikeys.ScopeCustomer, other),
		"none":           "",
	}
	// A revoked admin key and an expired admin key: the most a key could do, and not let in.
	store := apikeys.NewStore(e.Store.Pool())
	revoked, err := store.Create(context.Background(), apikeys.Spec{Scope: apikeys.ScopeAdmin, Name: "revoked"})
	require.NoError(t, err)
	_, _, err = store.Revoke(context.Background(), revoked.ID)
	require.NoError(t, err)
	soon := time.Now().Add(time.Second)
	expired, err := store.Create(context.Background(), apikeys.Spec{Scope: apikeys.ScopeAdmin, Name: "expired", ExpiresAt: &soon})
	require.NoError(t, err)
	keys["revoked"], keys["expired"] = revoked.Secret, expired.Secret
	base := e.serve(t, nil)
	time.Sleep(time.Until(soon) + 100*time.Millisecond)
	kind := e.fixed(t, 30)
	running, inAcct := ledgertest.ID(t, "job"), "?account_id="+acct
	noEndpoint := "we_" + strings.Repeat("0", 32)
	requireCharged(t, submit(t, base, keys["customer"], job(running, acct, kind, "sim:hang")))
	rowsBefore := e.rows(t, acct)

	probes := []scopeProbe{
		{"POST", "/v1/jobs", func() any { return job(ledgertest.ID(t, "probe"), acct, newKind(t, "unpriced"), "sim:ok") }, 422,
			[]string{"customer", "admin"}},
		{"GET", "/v1/jobs" + inAcct, nil, 200, []string{"customer", "customer_read", "admin"}},
		{"GET", "/v1/jobs/" + running + inAcct, nil, 200, []string{"customer", "customer_read", "admin"}},
		{"DELETE", "/v1/jobs/" + running + inAcct, nil, 409, []string{"customer", "admin"}},
		{"POST", "/v1/jobs/" + running + "/result" + inAcct, func() any { return map[string]any{"attempt": 0, "output_ref": "s3://x"} }, 400,
			[]string{"runner", "admin"}},
		{"POST", "/v1/jobs/" + running + "/redrive" + inAcct, func() any { return map[string]any{"by": "ops\u0000"} }, 400, []string{"admin"}},
		{"GET", "/v1/accounts/" + acct, nil, 200, []string{"customer", "customer_read", "admin"}},
		{"GET", "/v1/accounts/" + acct + "/ledger", nil, 200, []string{"customer", "customer_read", "admin"}},
		{"POST", "/v1/accounts/" + acct + "/grants", func() any { return map[string]any{"amount": 0, "key": "probe"} }, 400, []string{"admin"}},
		{"POST", "/v1/accounts/" + acct + "/grants/probe/settle", func() any { return map[string]any{} }, 400, []string{"admin"}},
		{"GET", "/v1/accounts/" + acct + "/topup-rule", nil, 404, []string{"customer", "customer_read", "admin"}},
		{"PUT", "/v1/accounts/" + acct + "/topup-rule", func() any { return map[string]any{"mode": "sometimes"} }, 400, []string{"admin"}},
		{"DELETE", "/v1/accounts/" + acct + "/topup-rule", nil, 200, []string{"admin"}},
		{"GET", "/v1/accounts/" + acct + "/blocks", nil, 200, []string{"customer", "customer_read", "admin"}},
		{"GET", "/v1/accounts/" + acct + "/statement?from=2020-01-01&to=2030-01-01", nil, 200, []string{"customer", "customer_read", "admin"}},
		{"GET", "/v1/revenue?from=2020-01-01&to=2030-01-01&account_id=" + acct, nil, 200, []string{"admin"}},
		{"GET", "/v1/prices", nil, 200, []string{"customer", "customer_read", "admin", "other customer"}},
		{"GET", "/v1/prices/" + kind, nil, 200, []string{"customer", "customer_read", "admin", "other customer"}},
		{"PUT", "/v1/prices/" + kind, func() any { return map[string]any{"unit": "job", "unit_price": 0} }, 400, []string{"admin"}},
		{"POST", "/v1/keys", func() any { return map[string]any{"scope": "owner", "name": "probe"} }, 400, []string{"admin"}},
		{"GET", "/v1/keys", nil, 200, []string{"admin"}},
		{"PUT", "/v1/accounts/" + acct + "/low-balance-threshold", func() any { return map[string]any{"threshold": "low"} }, 400, []string{"customer", "admin"}},
		{"POST", "/v1/accounts/" + acct + "/webhooks", func() any { return map[string]any{"url": "https://10.0.0.1/hooks"} }, 400, []string{"customer", "admin"}},
		{"GET", "/v1/accounts/" + acct + "/webhooks", nil, 200, []string{"customer", "customer_read", "admin"}},
		{"GET", "/v1/accounts/" + acct + "/webhooks/" + noEndpoint, nil, 404, []string{"customer", "customer_read", "admin"}},
		{"DELETE", "/v1/accounts/" + acct + "/webhooks/" + noEndpoint, nil, 404, []string{"customer", "admin"}},
		{"POST", "/v1/accounts/" + acct + "/webhooks/" + noEndpoint + "/rotate", nil, 404, []string{"customer", "admin"}},
		{"GET", "/v1/accounts/" + acct + "/webhooks/" + noEndpoint + "/attempts", nil, 404, []string{"customer", "customer_read", "admin"}},
		{"POST", "/v1/accounts/" + acct + "/webhooks/" + noEndpoint + "/replay", func() any { return map[string]any{} }, 400, []string{"customer", "admin"}},
		{"DELETE", "/v1/keys/key_0000000000000000000000", nil, 404, []string{"admin"}},
	}
	requireEveryRouteProbed(t, probes)
	for _, tc := range probes {
		for _, who := range []string{"customer", "customer_read", "runner", "admin", "other customer", "revoked", "expired", "none"} {
			var body any
			if tc.body != nil {
				body = tc.body()
			}
			a := call(t, base, tc.method, tc.path, keys[who], body)
			if who == "revoked" || who == "expired" || who == "none" {
				require.Equal(t, 401, a.code, "%s key, %s %s: %s", who, tc.method, tc.path, a.raw)
				require.Equal(t, "unauthorized", a.str("code"))
				continue
			}
			if who == "other customer" && slices.Contains(tc.who, "customer") && strings.HasPrefix(tc.path, "/v1/jobs/") {
				// Its scope allows the route, but the job is another tenant's: it does not
				// exist for this key, and the answer is an unknown ID's.
				require.Equal(t, 404, a.code, "%s key, %s %s: %s", who, tc.method, tc.path, a.raw)
				require.Equal(t, "not_received", a.str("code"))
				continue
			}
			if slices.Contains(tc.who, who) {
				require.Equal(t, tc.allowed, a.code, "%s key, %s %s: %s", who, tc.method, tc.path, a.raw)
				continue
			}
			require.Equal(t, 403, a.code, "%s key, %s %s: %s", who, tc.method, tc.path, a.raw)
			require.Equal(t, "forbidden", a.str("code"))
			require.NotContains(t, a.raw, acct, "a refusal tells nothing of the account")
		}
	}

	require.Equal(t, rowsBefore, e.rows(t, acct), "no key wrote a row")
	require.Len(t, e.rows(t, other), 1, "only the other account's grant")
	require.Zero(t, e.resultReports(t, acct, running), "no result was recorded")
	st, err := e.Jobs.Status(context.Background(), ledgerdb.JobKey{AccountID: acct, JobID: running})
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, st.State)
	a := call(t, base, "GET", "/v1/keys?account_id="+acct, keys["admin"], nil)
	require.Len(t, a.body["keys"], 2, "no key was created by a probe: %s", a.raw)
	a = call(t, base, "GET", "/v1/accounts/"+acct+"/webhooks", keys["admin"], nil)
	require.Empty(t, a.body["endpoints"], "no endpoint was created by a probe: %s", a.raw)

	// Settle the hanging job so its workflow ends.
	require.Equal(t, 200, call(t, base, "POST", "/v1/jobs/"+running+"/result"+inAcct, keys["runner"], map[string]any{"attempt": 1, "output_ref": "s3://out"}).code)
	e.wait(t, acct, running, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, acct, other)
}

// scopeProbe is one request of TestScopesOnEveryRoute: a route's method and a path to it, the
// body, the answer a key let in gets, and the keys let in.
type scopeProbe struct {
	method, path string
	body         func() any
	allowed      int
	who          []string
}

// requireEveryRouteProbed fails unless the probes call every route of the API's route table that
// takes a key — a route added without a probe would leave its scopes unchecked — and unless each
// probe lets in exactly the scopes the route table names (the other account's customer key
// aside, which the scope lets in and the account keeps out).
func requireEveryRouteProbed(t *testing.T, probes []scopeProbe) {
	t.Helper()
	routes := api.RouteScopes()
	mux := http.NewServeMux()
	for pattern := range routes {
		mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	}
	probed := map[string]bool{}
	for _, p := range probes {
		_, pattern := mux.Handler(httptest.NewRequest(p.method, p.path, nil))
		require.Contains(t, routes, pattern, "the probe %s %s calls no route of the route table that takes a key", p.method, p.path)
		probed[pattern] = true
		who := slices.DeleteFunc(slices.Clone(p.who), func(w string) bool { return w == "other customer" })
		require.ElementsMatch(t, routes[pattern], who, "the probe %s %s lets in other scopes than the route table's %s", p.method, p.path, pattern)
	}
	for _, pattern := range slices.Sorted(maps.Keys(routes)) {
		require.True(t, probed[pattern], "the route %s of the route table is probed by no row of TestScopesOnEveryRoute: add one", pattern)
	}
}

// TestUnauthenticatedAnswersAlike checks that no key, an unknown key, an expired key and a
// revoked key all get the very same 401 — same body, same header — so that a caller learns
// nothing of which keys exist or existed, and that none of them writes anything (the append-only
// rule).
func TestUnauthenticatedAnswersAlike(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	ctx := context.Background()
	store := apikeys.NewStore(e.Store.Pool())
	revoked, err := store.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeAdmin, Name: "revoked"})
	require.NoError(t, err)
	_, _, err = store.Revoke(ctx, revoked.ID)
	require.NoError(t, err)
	// Far enough ahead that the key is surely let in before it expires, however slowly a loaded
	// machine serves the first request.
	soon := time.Now().Add(5 * time.Second)
	expiring, err := store.Create(ctx, apikeys.Spec{Scope: apikeys.ScopeAdmin, Name: "expiring", ExpiresAt: &soon})
	require.NoError(t, err)

	require.Equal(t, 200, call(t, e.base, "GET", "/v1/keys", expiring.Secret, nil).code, "not expired yet")
	require.Eventually(t, func() bool { return call(t, e.base, "GET", "/v1/keys", expiring.Secret, nil).code == 401 },
		30*time.Second, 100*time.Millisecond, "the expiring key expires without a restart")

	var first string
	for name, secret := range map[string]string{
		"no key": "", "unknown key": "jb_admin_" + strings.Repeat("0", 43), "expired key": expiring.Secret, "revoked key": revoked.Secret,
	} {
		for _, target := range []struct{ method, path string }{
			{"POST", "/v1/accounts/" + e.acct + "/grants"}, {"GET", "/v1/accounts/" + e.acct}, {"GET", "/v1/keys"},
		} {
			req, err := http.NewRequest(target.method, e.base+target.path, strings.NewReader(`{"amount":5,"key":"never"}`))
			require.NoError(t, err)
			if secret != "" {
				req.Header.Set("Authorization", "Bearer "+secret)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 401, resp.StatusCode, "%s, %s %s", name, target.method, target.path)
			require.Equal(t, `Bearer realm="jobbill"`, resp.Header.Get("WWW-Authenticate"))
			if first == "" {
				first = string(raw)
			}
			require.Equal(t, first, string(raw), "%s answers like every other unauthenticated request", name)
		}
	}
	require.Len(t, e.rows(t, e.acct), 1, "only the initial grant")
}

// TestKeysManagedWithoutRestart checks the admin key routes and the trust rule they serve: a key
// made by POST /v1/keys works at once and its secret is shown in that answer only (never in a
// list); DELETE /v1/keys/{id} revokes it and the same running server refuses it (401) on the
// very next request; revoking again is 200 already_applied with the first revocation's time; an
// unknown ID is 404. The list shows the key revoked, filtered by account.
func TestKeysManagedWithoutRestart(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	admin := e.key(t, apikeys.ScopeAdmin, "")

	a := call(t, e.base, "POST", "/v1/keys", admin, map[string]any{"scope": "customer", "account_id": e.acct, "name": "acme web app", "expires_in": "720h"})
	require.Equal(t, 201, a.code, a.raw)
	secret, id := a.str("secret"), a.str("id")
	require.Regexp(t, `^jb_cust_[0-9A-Za-z]{43}$`, secret)
	require.Regexp(t, `^key_[0-9A-Za-z]{22}$`, id)
	require.Equal(t, "customer", a.str("scope"))
	require.Equal(t, e.acct, a.str("account_id"))
	require.Equal(t, "active", a.str("status"))
	expires, err := time.Parse(time.RFC3339Nano, a.str("expires_at"))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(720*time.Hour), expires, time.Minute)

	require.Equal(t, 200, call(t, e.base, "GET", "/v1/accounts/"+e.acct, secret, nil).code, "the new key works at once")
	list := call(t, e.base, "GET", "/v1/keys?account_id="+e.acct, admin, nil)
	require.Equal(t, 200, list.code, list.raw)
	require.Len(t, list.body["keys"], 1)
	require.Contains(t, list.raw, id)
	require.NotContains(t, list.raw, secret, "a list never shows a secret")
	require.NotContains(t, call(t, e.base, "GET", "/v1/keys", admin, nil).raw, secret)

	a = call(t, e.base, "DELETE", "/v1/keys/"+id, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "applied", a.str("outcome"))
	require.Equal(t, "revoked", a.str("key", "status"))
	revokedAt := a.str("key", "revoked_at")
	require.NotEmpty(t, revokedAt)
	require.Equal(t, 401, call(t, e.base, "GET", "/v1/accounts/"+e.acct, secret, nil).code, "revoked on the very next request")

	a = call(t, e.base, "DELETE", "/v1/keys/"+id, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "already_applied", a.str("outcome"))
	require.Equal(t, revokedAt, a.str("key", "revoked_at"), "the first revocation stands")
	a = call(t, e.base, "DELETE", "/v1/keys/key_0000000000000000000000", admin, nil)
	require.Equal(t, 404, a.code, a.raw)
	require.Equal(t, "unknown_key", a.str("code"))

	list = call(t, e.base, "GET", "/v1/keys?account_id="+e.acct, admin, nil)
	require.Contains(t, list.raw, `"status":"revoked"`)
	require.Equal(t, 200, call(t, e.base, "GET", "/v1/keys?account_id="+ledgertest.ID(t, "no-keys"), admin, nil).code)
}

// TestKeyRoutesBadInputWritesNothing checks that a key that cannot be is refused with a clear
// message naming the field — 400 for a bad body, 422 for an account that does not exist — and
// that nothing is written: no key has the probe's name or the account afterwards. Malformed
// filters and IDs are 400 too.
func TestKeyRoutesBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	name := ledgertest.ID(t, "probe")
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		body   map[string]any
		status int
		says   string
	}{
		{map[string]any{"scope": "owner", "account_id": e.acct}, 400, `Field "scope" is "owner"`},
		{map[string]any{"account_id": e.acct}, 400, `Field "scope" is ""`},
		{map[string]any{"scope": "customer"}, 400, `Field "account_id" is required for customer keys`},
		{map[string]any{"scope": "customer_read"}, 400, `Field "account_id" is required`},
		{map[string]any{"scope": "runner", "account_id": e.acct}, 400, `Field "account_id" must be left out for runner keys`},
		{map[string]any{"scope": "admin", "account_id": e.acct}, 400, `Field "account_id" must be left out for admin keys`},
		{map[string]any{"scope": "customer", "account_id": "a/b"}, 400, `account_id`},
		{map[string]any{"scope": "customer", "account_id": ledgertest.ID(t, "ghost")}, 422, "open it first"},
		{map[string]any{"scope": "customer", "account_id": e.acct, "name": ""}, 400, `Field "name" is required`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "name": strings.Repeat("n", 201)}, 400, `Field "name" is 201 characters`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "expires_in": "30d"}, 400, `Field "expires_in" is "30d"`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "expires_in": "-1h"}, 400, `Field "expires_in" is "-1h"`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "expires_in": "0s"}, 400, `Field "expires_in"`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "expires_at": past}, 400, `Field "expires_at"`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "expires_at": "tomorrow"}, 400, `"expires_at"`},
		{map[string]any{"scope": "customer", "account_id": e.acct, "expires_in": "1h", "expires_at": "2999-01-01T00:00:00Z"}, 400, "not both"},
		{map[string]any{"scope": "customer", "account_id": e.acct, "secret": "jb_cust_mine"}, 400, `Unknown field "secret"`},
	} {
		if _, ok := tc.body["name"]; !ok {
			tc.body["name"] = name
		}
		a := call(t, e.base, "POST", "/v1/keys", admin, tc.body)
		require.Equal(t, tc.status, a.code, "%v: %s", tc.body, a.raw)
		require.Contains(t, a.str("message"), tc.says, "%v", tc.body)
		require.Contains(t, a.str("message"), "Nothing was written", "%v", tc.body)
	}
	// A refusal quotes what it refuses clipped between whole characters, never between the bytes
	// of one (which it would quote as escaped bytes, "\xe2\x82").
	euros := call(t, e.base, "POST", "/v1/keys", admin, map[string]any{"scope": "customer", "account_id": e.acct, "name": name,
		"expires_in": strings.Repeat("€", 40)})
	require.Equal(t, 400, euros.code, euros.raw)
	require.Contains(t, euros.str("message"), `Field "expires_in" is "€€€`)
	require.NotContains(t, euros.str("message"), `\x`, "the value is clipped inside a character")
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE name = $1 OR account_id = $2`, name, e.acct).Scan(&n))
	require.Zero(t, n, "no refused key was written")

	require.Equal(t, 400, call(t, e.base, "GET", "/v1/keys?account_id=a/b", admin, nil).code)
	require.Equal(t, 400, call(t, e.base, "DELETE", "/v1/keys/acme-key", admin, nil).code)
	require.Equal(t, 400, call(t, e.base, "DELETE", "/v1/keys/api.keys[0]", admin, nil).code, "bootstrap keys are not revoked through the API")
}

// TestBootstrapKeysAreAdminAndLogsNameKeys checks the configuration's bootstrap keys and the log
// trail: a bootstrap key is an admin key (it creates keys and grants credits), and every request
// line names the key that made it — "api.keys[0]" for a bootstrap key, the key's public ID for
// the others — while no log field ever holds a secret.
func TestBootstrapKeysAreAdminAndLogsNameKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 0)
	bootstrap := newKey(t, "bootstrap")
	core, logs := observer.New(zap.InfoLevel)
	base := e.serve(t, func(o *api.Options) {
		o.Config.Keys = []config.APIKey{{Key: bootstrap, Admin: true}}
		o.Logger = zap.New(core)
	})

	a := call(t, base, "POST", "/v1/keys", bootstrap, map[string]any{"scope": "customer_read", "account_id": acct, "name": "dashboard"})
	require.Equal(t, 201, a.code, a.raw)
	secret, id := a.str("secret"), a.str("id")
	require.Equal(t, 201, call(t, base, "POST", "/v1/accounts/"+acct+"/grants", bootstrap, map[string]any{"amount": 10, "key": "welcome"}).code)
	require.Equal(t, 200, call(t, base, "GET", "/v1/accounts/"+acct, secret, nil).code)
	require.Equal(t, 403, call(t, base, "POST", "/v1/accounts/"+acct+"/grants", secret, map[string]any{"amount": 10, "key": "mine"}).code)

	var byKey []string
	for _, entry := range logs.All() {
		for _, f := range entry.Context {
			require.NotContains(t, f.String, bootstrap, "log %q field %s", entry.Message, f.Key)
			require.NotContains(t, f.String, secret, "log %q field %s", entry.Message, f.Key)
		}
		if entry.Message == "api request" {
			byKey = append(byKey, entry.ContextMap()["key"].(string))
		}
	}
	require.Equal(t, []string{"api.keys[0]", "api.keys[0]", id, id}, byKey)
	require.Len(t, logs.FilterMessage("api key created").FilterField(zap.String("by", "api.keys[0]")).All(), 1)
}

// TestKeyCheckFailureIsNot401 checks that when the key store cannot be read, a request is told
// the server is unavailable (503: retry), never that its key is bad (401), and nothing is done.
func TestKeyCheckFailureIsNot401(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.key(t, apikeys.ScopeAdmin, "")
	closed, err := ledgerdb.Open(context.Background(), ledgertest.DatabaseURL())
	require.NoError(t, err)
	closed.Close()
	base := e.serve(t, func(o *api.Options) { o.Ledger = closed })
	a := call(t, base, "GET", "/v1/keys", key, nil)
	require.Equal(t, 503, a.code, a.raw)
	require.Equal(t, "unavailable", a.str("code"))
}
