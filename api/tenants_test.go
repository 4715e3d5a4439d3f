package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestJobIDsBelongToTheirAccount checks that tenants cannot see or claim each other's job IDs:
// two accounts submit the same job ID and each gets a job of its own, charged to itself (the
// reversing-pairs and price-list rules per account); the submission semantics — 409 for another
// request, 410 once deleted — hold per account; and every request a key makes about the other
// tenant's job, by naming its account, answers byte for byte what an ID that never arrived answers,
// with nothing written. (A customer key reports no results at all: that is the scope test's.)
func TestJobIDsBelongToTheirAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := ledgertest.Account(t, e.Store, 100), ledgertest.Account(t, e.Store, 100)
	aliceKey, bobKey := e.key(t, apikeys.ScopeCustomer, alice), e.key(t, apikeys.ScopeCustomer, bob)
	runner := e.key(t, apikeys.ScopeRunner, "")
	base := e.serve(t, nil)
	shared := ledgertest.ID(t, "shared")
	cheap, dear := e.fixed(t, 10), e.fixed(t, 30)

	a := submit(t, base, aliceKey, job(shared, alice, cheap, "sim:ok"))
	requireCharged(t, a)
	b := submit(t, base, bobKey, job(shared, bob, dear, "sim:hang"))
	requireCharged(t, b) // bob's job of the same ID is a job of his own, not a conflict
	if !b.waited {
		require.Equal(t, "false", b.str("duplicate"))
	}
	e.wait(t, alice, shared, ledgerdb.StateDelivered)

	// Each key reads its own job under the shared ID, without naming its account.
	a = call(t, base, "GET", "/v1/jobs/"+shared, aliceKey, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, alice, a.str("account_id"))
	require.Equal(t, "delivered", a.str("state"))
	b = call(t, base, "GET", "/v1/jobs/"+shared, bobKey, nil)
	require.Equal(t, 200, b.code, b.raw)
	require.Equal(t, bob, b.str("account_id"))
	require.Equal(t, "running", b.str("state"))

	// The other tenant's job is not there for a key: the same answer as an ID never submitted.
	unknown := call(t, base, "GET", "/v1/jobs/"+ledgertest.ID(t, "never-sent")+"?account_id="+alice, bobKey, nil)
	require.Equal(t, 404, unknown.code, unknown.raw)
	for _, probe := range []struct{ method, path string }{
		{"GET", "/v1/jobs/" + shared + "?account_id=" + alice},
		{"DELETE", "/v1/jobs/" + shared + "?account_id=" + alice},
	} {
		got := call(t, base, probe.method, probe.path, bobKey, nil)
		require.Equal(t, unknown.code, got.code, "%s %s: %s", probe.method, probe.path, got.raw)
		require.Equal(t, unknown.raw, got.raw, "%s %s must tell nothing an unknown ID does not", probe.method, probe.path)
	}

	// Per account: a different request under alice's ID is her conflict, not bob's; once she
	// deletes her job the ID is gone for her alone.
	a = call(t, base, "POST", "/v1/jobs", aliceKey, job(shared, alice, cheap, "sim:fail"))
	require.Equal(t, 409, a.code, a.raw)
	a = call(t, base, "DELETE", "/v1/jobs/"+shared, aliceKey, nil)
	require.Equal(t, 200, a.code, a.raw)
	a = call(t, base, "POST", "/v1/jobs", aliceKey, job(shared, alice, cheap, "sim:ok"))
	require.Equal(t, 410, a.code, a.raw)
	b = call(t, base, "POST", "/v1/jobs", bobKey, job(shared, bob, dear, "sim:hang"))
	require.Equal(t, 200, b.code, "bob's retry still finds his own job: %s", b.raw)
	require.Equal(t, "running", b.str("status", "state"))

	// Money: each account paid for its own job once; bob's job was never touched by alice's key.
	require.Equal(t, int64(90), e.balance(t, alice))
	require.Equal(t, int64(70), e.balance(t, bob))
	ledgertest.RequireRows(t, e.Store, ledgerdb.JobKey{AccountID: bob, JobID: shared}, 30, ledgerdb.KindCharge)
	b = call(t, base, "POST", "/v1/jobs/"+shared+"/result?account_id="+bob, runner, map[string]any{"attempt": 1, "output_ref": "s3://out/" + shared})
	require.Equal(t, 200, b.code, b.raw)
	e.wait(t, bob, shared, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, alice, bob)
}

// TestJobRoutesNeedTheAccountOfAnAdminKey checks that a key acting for every account (admin,
// runner) names the account of every job request: without account_id it gets a 400 that says so,
// and nothing is read or written.
func TestJobRoutesNeedTheAccountOfAnAdminKey(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	admin, runner := e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")
	id := ledgertest.ID(t, "job")
	a := submit(t, e.base, admin, job(id, e.acct, e.fixed(t, 10), "sim:ok"))
	requireCharged(t, a)

	a = call(t, e.base, "GET", "/v1/jobs/"+id, admin, nil)
	require.Equal(t, 400, a.code, a.raw)
	require.Contains(t, a.str("message"), "account_id")
	a = call(t, e.base, "GET", "/v1/jobs/"+id+"?account_id=bad/account", admin, nil)
	require.Equal(t, 400, a.code, a.raw)
	a = call(t, e.base, "GET", "/v1/jobs/"+id+"?account_id="+e.acct, admin, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, e.acct, a.str("account_id"))
	a = call(t, e.base, "POST", "/v1/jobs/"+id+"/result", runner, map[string]any{"attempt": 1, "output_ref": "s3://out"})
	require.Equal(t, 400, a.code, a.raw)
	require.Contains(t, a.str("message"), "account_id")
	require.Zero(t, e.resultReports(t, e.acct, id), "nothing was recorded")
}
