package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestCrossAccountRefused checks account isolation: with a key for account A, every read,
// redrive, top-up and submission touching account B is refused with 403, and every read, delete
// and report of B's job — naming B's account or not — is answered exactly as a job ID that never
// arrived (404 not_received): job IDs belong to their account, so B's job does not exist for A's
// key. No answer says anything of B's job, and nothing is written (B's ledger rows and job are
// unchanged: the append-only and sum-of-rows rules). B's job ID under A's own account is a job of
// A's, charged to A once.
func TestCrossAccountRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acctA, acctB := ledgertest.Account(t, e.Store, 100), ledgertest.Account(t, e.Store, 100)
	keyA, keyB := e.key(t, apikeys.ScopeCustomer, acctA), e.key(t, apikeys.ScopeCustomer, acctB)
	base := e.serve(t, nil)
	jobB := ledgertest.ID(t, "job-b")
	requireCharged(t, submit(t, base, keyB, job(jobB, acctB, e.fixed(t, 37), "sim:ok")))
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
	a := submit(t, base, keyA, job(jobB, acctA, e.fixed(t, 5), "sim:ok"))
	requireCharged(t, a)
	if !a.waited {
		require.Equal(t, "false", a.str("duplicate"))
	}
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
// admin route are refused (401, 401, 401, 403) with nothing written (the append-only rule: no row
// appears).
func TestAuthRefused(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	id := ledgertest.ID(t, "job")
	grant := map[string]any{"amount": 5, "key": "k1"}
	for _, tc := range []struct {
		header string
		want   int
	}{{"", 401}, {"Bearer " + key + "x", 401}, {"Bearer ", 401}, {"Basic " + key, 401}, {key, 401}} {
		for _, target := range []struct {
			method, path string
			body         any
		}{{"POST", "/v1/jobs", job(id, e.acct, e.fixed(t, 1), "sim:ok")}, {"POST", "/v1/accounts/" + e.acct + "/grants", grant},
			{"GET", "/v1/jobs/" + id, nil}, {"GET", "/v1/prices", nil}, {"PUT", "/v1/prices/" + e.fixed(t, 1), map[string]any{"unit": "job", "unit_price": 1}}} {
			data, _ := json.Marshal(target.body)
			req, _ := http.NewRequest(target.method, e.base+target.path, bytes.NewReader(data))
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
	require.Equal(t, 403, call(t, e.base, "POST", "/v1/accounts/"+e.acct+"/grants", key, grant).code)
	require.Equal(t, 403, call(t, e.base, "POST", "/v1/jobs/"+id+"/redrive", key, nil).code)
	require.Len(t, e.rows(t, e.acct), 1, "only the initial grant")
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+id, key, nil).code)
}
