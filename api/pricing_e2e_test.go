package api_test

// End-to-end tests of prices set by the server, holds and usage settlement over HTTP, against the
// same real Postgres and Temporal dev server as env_e2e_test.go.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// newKind is a kind no other test or run has priced: kinds are shared by the whole test
// database and their prices are append-only, so a test that changes a price needs its own.
func newKind(t *testing.T, prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// jobRows are one job's ledger rows, in order of writing.
func (e *env) jobRows(t *testing.T, account, jobID string) []ledgertest.Row {
	var out []ledgertest.Row
	for _, r := range e.rows(t, account) {
		if r.JobID == jobID {
			out = append(out, ledgertest.Row{Kind: r.Kind, Amount: r.Amount})
		}
	}
	return out
}

// resultReports counts the results recorded for the account's job: a refused report must record
// none.
func (e *env) resultReports(t *testing.T, account, jobID string) int {
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM result_reports WHERE job_id = $1`, ledgerdb.JobKey{AccountID: account, JobID: jobID}.String()).Scan(&n))
	return n
}

// TestSubmissionCarryingAnAmountIsRefused is the reported defect: POST /v1/jobs took the cost
// from the body, so a customer's key could submit a render with "cost": 1. The price-list rule: a
// caller names a kind, never an amount. Every body that carries an amount — alone, as the old
// API took it, or beside a valid kind, under any of the names and any letter case — is refused
// with 400 price_set_by_server, and nothing is written: no job (GET answers 404 "not received"),
// no ledger row, the balance unchanged.
func TestSubmissionCarryingAnAmountIsRefused(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	render := e.fixed(t, 40)

	for name, extra := range map[string]map[string]any{
		"cost alone, as the old API took it": {"cost": 1},
		"cost beside a kind":                 {"kind": render, "cost": 1},
		"amount":                             {"kind": render, "amount": 1},
		"price":                              {"kind": render, "price": 1},
		"unit_price":                         {"kind": render, "unit_price": 1},
		"credits":                            {"kind": render, "credits": "1"},
		"Cost in another case":               {"kind": render, "Cost": 1},
		"cost of zero":                       {"kind": render, "cost": 0},
		"cost beside an unknown field":       {"kind": render, "cost": 1, "priority": "high"},
	} {
		id := ledgertest.ID(t, "cheap")
		body := map[string]any{"job_id": id, "account_id": e.acct, "input_ref": "sim:ok"}
		for k, v := range extra {
			body[k] = v
		}
		a := call(t, e.base, "POST", "/v1/jobs", key, body)
		require.Equal(t, 400, a.code, "%s: %s", name, a.raw)
		require.Equal(t, "price_set_by_server", a.str("code"), name)
		require.Contains(t, a.str("message"), "Prices are set by the server", name)
		require.Contains(t, a.str("message"), `"kind"`, name)
		require.Contains(t, a.str("message"), "Nothing was written", name)
		require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+id, key, nil).code, "%s: no job was written", name)
	}
	require.Len(t, e.rows(t, e.acct), 1, "only the initial grant")
	require.Equal(t, int64(100), e.balance(t, e.acct))
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestUnknownKindAndMaxUnitsRefused checks the price list's refusals, each with nothing written
// (the price-list rule: only a priced kind can be charged, and never more than its maximum): a kind
// with no price is 422 unknown_kind, a numeric "kind" (a cost in the kind's place) is 400, a
// max_units above the kind's is 400 naming max_units and the kind's maximum — also for a kind
// sold by the job, which holds exactly 1. A max_units within the kind's holds exactly that many
// units.
func TestUnknownKindAndMaxUnitsRefused(t *testing.T) {
	t.Parallel()
	e := newSite(t, 1000)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	runner := e.key(t, apikeys.ScopeRunner, "")
	metered, render := ledgertest.Metered(t, e.Store, 2, 300), e.fixed(t, 40)

	id := ledgertest.ID(t, "job")
	a := call(t, e.base, "POST", "/v1/jobs", key, job(id, e.acct, newKind(t, "never-priced"), "sim:ok"))
	require.Equal(t, 422, a.code, a.raw)
	require.Equal(t, "unknown_kind", a.str("code"))
	require.Contains(t, a.str("message"), "prices are set by the server")
	require.Contains(t, a.str("message"), "not charged")

	a = call(t, e.base, "POST", "/v1/jobs", key, job(id, e.acct, "40", "sim:ok"))
	require.Equal(t, 400, a.code, a.raw)
	require.Contains(t, a.str("message"), `"kind"`)

	for _, tc := range []struct {
		kind  string
		units int64
		max   string
	}{{metered, 301, "300"}, {render, 2, "1"}} {
		body := job(id, e.acct, tc.kind, "sim:ok")
		body["max_units"] = tc.units
		a = call(t, e.base, "POST", "/v1/jobs", key, body)
		requireInvalid(t, a, "max_units", "max_units above the kind's")
		require.Contains(t, a.str("message"), "at most "+tc.max)
	}
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+id, key, nil).code, "nothing was written")
	require.Len(t, e.rows(t, e.acct), 1)

	body := job(id, e.acct, metered, "sim:hang")
	body["max_units"] = 100
	a = submit(t, e.base, key, body)
	requireCharged(t, a)
	require.Equal(t, "100", a.str("status", "held_units"))
	require.Equal(t, "200", a.str("status", "held"), "2 credits × 100 units")
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -200}}, e.jobRows(t, e.acct, id))
	a = call(t, e.base, "POST", "/v1/jobs/"+id+"/result?account_id="+e.acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out", "units_used": 100})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, e.acct, id, ledgerdb.StateDelivered)
	ledgertest.RequireBalance(t, e.Store, e.acct, 800)
}

// TestMeteredJobSettledAtReportedUsage checks hold and settle over HTTP (the
// reversing-pairs, net-effect and price-list rules): a metered job holds unit price × max units at
// its charge; the usage its result reports through the result endpoint settles it at used × unit
// price, and the rest of the hold comes back in exactly one release row. A usage above the hold is
// capped at the hold (nothing released, no release row), and a result that reports no usage is
// billed the whole hold.
func TestMeteredJobSettledAtReportedUsage(t *testing.T) {
	t.Parallel()
	e := newSite(t, 10000)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	runner := e.key(t, apikeys.ScopeRunner, "")
	kind := ledgertest.Metered(t, e.Store, 2, 300)

	used, capped, silent := ledgertest.ID(t, "used"), ledgertest.ID(t, "capped"), ledgertest.ID(t, "silent")
	for _, id := range []string{used, capped, silent} {
		a := submit(t, e.base, key, job(id, e.acct, kind, "sim:hang"))
		requireCharged(t, a)
		require.Equal(t, "gpu_second", a.str("status", "unit"))
		require.Equal(t, "2", a.str("status", "unit_price"))
		require.Equal(t, "300", a.str("status", "held_units"))
		require.Equal(t, "600", a.str("status", "held"))
		require.Equal(t, "600", a.str("status", "charged"), "the whole hold while running")
		require.Equal(t, "0", a.str("status", "released"))
	}
	for id, usage := range map[string]any{used: 137, capped: 1000, silent: nil} {
		body := map[string]any{"attempt": 1, "output_ref": "s3://out/" + id}
		if usage != nil {
			body["units_used"] = usage
		}
		a := call(t, e.base, "POST", "/v1/jobs/"+id+"/result?account_id="+e.acct, runner, body)
		require.Equal(t, 200, a.code, a.raw)
		require.Equal(t, "signal", a.str("path"))
	}
	for _, tc := range []struct {
		id                        string
		unitsUsed, charged, freed string
		rows                      []ledgertest.Row
	}{
		{used, "137", "274", "326", []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -600}, {Kind: ledgerdb.KindRelease, Amount: 326}}},
		{capped, "300", "600", "0", []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -600}}},
		{silent, "300", "600", "0", []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -600}}},
	} {
		e.wait(t, e.acct, tc.id, ledgerdb.StateDelivered)
		a := call(t, e.base, "GET", "/v1/jobs/"+tc.id, key, nil)
		require.Equal(t, 200, a.code, a.raw)
		require.Equal(t, tc.unitsUsed, a.str("units_used"), tc.id)
		require.Equal(t, tc.charged, a.str("charged"), tc.id)
		require.Equal(t, tc.freed, a.str("released"), tc.id)
		require.Equal(t, "600", a.str("held"), tc.id)
		require.Equal(t, tc.rows, e.jobRows(t, e.acct, tc.id), tc.id)
	}
	a := call(t, e.base, "GET", "/v1/jobs/"+used, key, nil)
	require.Contains(t, a.str("message"), "274 of 600 held credits charged; 326 returned.")
	require.Contains(t, a.str("message"), "137 GPU-seconds used at 2 credits each")

	// The ledger page shows the release row, and the balance is the grant minus what was used.
	page := call(t, e.base, "GET", "/v1/accounts/"+e.acct+"/ledger", key, nil)
	require.Contains(t, page.raw, `"kind":"release"`)
	ledgertest.RequireBalance(t, e.Store, e.acct, 10000-274-600-600)
}

// meteredJob is a running job of a kind metered by the GPU-second (1 credit a second, a hold of
// 300) whose work hangs until a result is reported: its account (1,000 credits granted), that
// account's customer key, a runner key, the API serving them, and the job's ID.
type meteredJob struct {
	acct, key, runner, base, id string
}

// meteredRunning submits a meteredJob through the API, charged.
func (e *env) meteredRunning(t *testing.T) meteredJob {
	t.Helper()
	return e.meteredRunningOn(t, e.serve(t, nil))
}

// meteredRunningOn submits a meteredJob through the API served at base, charged.
func (e *env) meteredRunningOn(t *testing.T, base string) meteredJob {
	t.Helper()
	m := meteredJob{acct: ledgertest.Account(t, e.Store, 1000), runner: e.key(t, apikeys.ScopeRunner, "")}
	m.key, m.base, m.id = e.key(t, apikeys.ScopeCustomer, m.acct), base, ledgertest.ID(t, "job")
	requireCharged(t, submit(t, m.base, m.key, job(m.id, m.acct, ledgertest.Metered(t, e.Store, 1, 300), "sim:hang")))
	return m
}

// TestBadUsageRefusedWritesNothing checks that a result whose usage the ledger could not bill —
// negative, fractional, not a number — or that carries an amount is refused with 400 and that
// nothing is written (the price-list rule and the "bad input writes nothing" rule): no result is
// recorded, the job keeps running with its whole hold, and only its charge row exists. A valid
// report then settles it once.
func TestBadUsageRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.meteredRunning(t)
	acct, key, runner, base, id := m.acct, m.key, m.runner, m.base, m.id

	path := "/v1/jobs/" + id + "/result?account_id=" + acct
	for name, body := range map[string]string{
		"negative usage":   `{"attempt":1,"output_ref":"s3://out","units_used":-1}`,
		"fractional usage": `{"attempt":1,"output_ref":"s3://out","units_used":1.5}`,
		"usage as string":  `{"attempt":1,"output_ref":"s3://out","units_used":"137"}`,
		"huge usage":       `{"attempt":1,"output_ref":"s3://out","units_used":99999999999999999999}`,
		"an amount":        `{"attempt":1,"output_ref":"s3://out","amount":0}`,
		"a cost":           `{"attempt":1,"output_ref":"s3://out","units_used":1,"cost":1}`,
	} {
		a := call(t, base, "POST", path, runner, body)
		require.Equal(t, 400, a.code, "%s: %s", name, a.raw)
		require.Contains(t, a.str("message"), "Nothing was written", name)
		if name == "an amount" || name == "a cost" {
			require.Equal(t, "price_set_by_server", a.str("code"), name)
		} else {
			require.Contains(t, a.str("message"), `"units_used"`, name)
		}
	}
	require.Zero(t, e.resultReports(t, acct, id), "no result was recorded")
	a := call(t, base, "GET", "/v1/jobs/"+id, key, nil)
	require.Equal(t, "running", a.str("state"))
	require.Equal(t, "300", a.str("charged"))
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}}, e.jobRows(t, acct, id))

	a = call(t, base, "POST", path, runner, map[string]any{"attempt": 1, "output_ref": "s3://out", "units_used": 0})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}, {Kind: ledgerdb.KindRelease, Amount: 300}}, e.jobRows(t, acct, id))
	ledgertest.RequireBalance(t, e.Store, acct, 1000)
}

// TestFixedPriceIgnoresReportedUsage checks that a job sold by the job costs its price whatever
// its result says it used (the price-list rule: the price list, not the reporter, sets what a job
// costs): a report of 0 units is taken, the job is delivered and charged its whole price, and
// nothing is released.
func TestFixedPriceIgnoresReportedUsage(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key := e.key(t, apikeys.ScopeCustomer, e.acct)
	runner := e.key(t, apikeys.ScopeRunner, "")
	id := ledgertest.ID(t, "job")
	requireCharged(t, submit(t, e.base, key, job(id, e.acct, e.fixed(t, 40), "sim:hang")))

	a := call(t, e.base, "POST", "/v1/jobs/"+id+"/result?account_id="+e.acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out", "units_used": 0})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, e.acct, id, ledgerdb.StateDelivered)
	a = call(t, e.base, "GET", "/v1/jobs/"+id, key, nil)
	require.Equal(t, "40", a.str("charged"), a.raw)
	require.Equal(t, "0", a.str("released"))
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -40}}, e.jobRows(t, e.acct, id))
	ledgertest.RequireBalance(t, e.Store, e.acct, 60)
}

// TestPriceRoutes checks the price list over HTTP. Only an admin key may set a price (an account
// key is 403 and writes nothing); a new price is a new version (201), the same figures again
// write nothing (200 already_applied), and an invalid price is 400 naming its field with nothing
// written. A customer, read-only or admin key reads the list and a kind's history; a kind never
// priced is 404 unknown_kind. Versioning (the price-list rule): a job submitted before a price
// change keeps its price — its hold, its price_version, a resubmission of it, and its settlement —
// while a job submitted after pays the new one.
func TestPriceRoutes(t *testing.T) {
	t.Parallel()
	e := newSite(t, 1000)
	key, admin := e.key(t, apikeys.ScopeCustomer, e.acct), e.key(t, apikeys.ScopeAdmin, "")
	runner := e.key(t, apikeys.ScopeRunner, "")
	kind := newKind(t, "render")
	path := "/v1/prices/" + kind
	v1 := map[string]any{"unit": "job", "unit_price": 40, "memo": "launch"}

	a := call(t, e.base, "PUT", path, key, v1)
	require.Equal(t, 403, a.code, a.raw)
	require.Equal(t, "forbidden", a.str("code"))
	a = call(t, e.base, "GET", path, key, nil)
	require.Equal(t, 404, a.code, "the account key's PUT wrote nothing: %s", a.raw)
	require.Equal(t, "unknown_kind", a.str("code"))

	for name, body := range map[string]map[string]any{
		"unknown unit":                {"unit": "hour", "unit_price": 40},
		"no unit":                     {"unit_price": 40},
		"zero unit price":             {"unit": "job", "unit_price": 0},
		"negative unit price":         {"unit": "job", "unit_price": -40},
		"fractional unit price":       {"unit": "job", "unit_price": 1.5},
		"job holding 2":               {"unit": "job", "unit_price": 40, "max_units": 2},
		"metered without a maximum":   {"unit": "gpu_second", "unit_price": 2},
		"metered holding 0":           {"unit": "gpu_second", "unit_price": 2, "max_units": 0},
		"hold above the largest cost": {"unit": "gpu_second", "unit_price": 1000000000000000, "max_units": 2},
		"kind in the body":            {"unit": "job", "unit_price": 40, "kind": "other"},
	} {
		a = call(t, e.base, "PUT", path, admin, body)
		requireInvalid(t, a, "", name)
	}
	require.Equal(t, 404, call(t, e.base, "GET", path, key, nil).code, "no invalid price was written")

	a = call(t, e.base, "PUT", path, admin, v1)
	require.Equal(t, 201, a.code, a.raw)
	require.Equal(t, "applied", a.str("outcome"))
	require.Equal(t, "1", a.str("price", "version"))
	require.Equal(t, "1", a.str("price", "max_units"), "a kind sold by the job holds 1 unit")
	a = call(t, e.base, "PUT", path, admin, v1)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "already_applied", a.str("outcome"))
	require.Equal(t, "1", a.str("price", "version"))

	before := ledgertest.ID(t, "before")
	requireCharged(t, submit(t, e.base, key, job(before, e.acct, kind, "sim:hang")))

	a = call(t, e.base, "PUT", path, admin, map[string]any{"unit": "job", "unit_price": 70, "memo": "new GPUs"})
	require.Equal(t, 201, a.code, a.raw)
	require.Equal(t, "2", a.str("price", "version"))

	after := ledgertest.ID(t, "after")
	a = submit(t, e.base, key, job(after, e.acct, kind, "sim:hang"))
	requireCharged(t, a)
	require.Equal(t, "2", a.str("status", "price_version"))
	require.Equal(t, "70", a.str("status", "held"))

	a = call(t, e.base, "POST", "/v1/jobs", key, job(before, e.acct, kind, "sim:hang"))
	require.Equal(t, 200, a.code, "a resubmission answers the original job: %s", a.raw)
	require.Equal(t, "1", a.str("status", "price_version"))
	require.Equal(t, "40", a.str("status", "held"))

	for _, id := range []string{before, after} {
		require.Equal(t, 200, call(t, e.base, "POST", "/v1/jobs/"+id+"/result?account_id="+e.acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out"}).code)
		e.wait(t, e.acct, id, ledgerdb.StateDelivered)
	}
	require.Equal(t, "40", call(t, e.base, "GET", "/v1/jobs/"+before, key, nil).str("charged"), "the price it was submitted at")
	require.Equal(t, "70", call(t, e.base, "GET", "/v1/jobs/"+after, key, nil).str("charged"))
	ledgertest.RequireBalance(t, e.Store, e.acct, 1000-40-70)

	list := call(t, e.base, "GET", "/v1/prices", key, nil)
	require.Equal(t, 200, list.code, list.raw)
	prices, _ := list.body["prices"].([]any)
	var listed map[string]any
	for _, p := range prices {
		if m, _ := p.(map[string]any); m["kind"] == kind {
			listed = m
		}
	}
	require.NotNil(t, listed, "the kind is on the list: %s", list.raw)
	require.Equal(t, float64(2), listed["version"], "the list shows the current version")
	require.Equal(t, float64(70), listed["unit_price"])

	history := call(t, e.base, "GET", path, key, nil)
	require.Equal(t, 200, history.code, history.raw)
	versions, _ := history.body["versions"].([]any)
	require.Len(t, versions, 2)
	require.Equal(t, float64(40), versions[0].(map[string]any)["unit_price"])
	require.Equal(t, "launch", versions[0].(map[string]any)["memo"])
	require.Equal(t, float64(70), versions[1].(map[string]any)["unit_price"])

	require.Equal(t, 401, call(t, e.base, "GET", "/v1/prices", "", nil).code)
	require.Equal(t, 405, call(t, e.base, "POST", path, admin, v1).code)
}

// TestResultConflictSaysTheFirstResultStands checks the report door when an attempt reports a
// second, different result (the reversing-pairs and idempotent-doors rules: a job is settled once,
// whatever is reported twice). The first report settles the metered job at its usage; a second one
// of the same attempt with another usage is refused with 409 conflict in the result's own fixed
// words — the first result stands, nothing was charged again — never the submission's "use a new
// ID", with the job's state and money state; the Go client reports it as ErrResultConflict with the
// same words. Nothing is written: the rows and the settlement are the first report's.
func TestResultConflictSaysTheFirstResultStands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.meteredRunning(t)
	acct, runner, base, id := m.acct, m.runner, m.base, m.id
	path := "/v1/jobs/" + id + "/result?account_id=" + acct

	a := call(t, base, "POST", path, runner, map[string]any{"attempt": 1, "output_ref": "s3://out/first", "units_used": 120})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, acct, id, ledgerdb.StateDelivered)
	settled := []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -300}, {Kind: ledgerdb.KindRelease, Amount: 180}}
	require.Equal(t, settled, e.jobRows(t, acct, id))

	a = call(t, base, "POST", path, runner, map[string]any{"attempt": 1, "output_ref": "s3://out/first", "units_used": 60})
	require.Equal(t, 409, a.code, a.raw)
	require.Equal(t, "conflict", a.str("code"))
	require.Equal(t, jobs.ResultConflictMessage, a.str("message"))
	require.NotContains(t, a.str("message"), "new ID")
	require.Equal(t, "delivered", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))

	c := &apiclient.Client{BaseURL: base, Key: runner, AccountID: acct}
	used := int64(60)
	_, err := c.ReportResult(context.Background(), id, apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out/other", UnitsUsed: &used})
	require.ErrorIs(t, err, apiclient.ErrResultConflict)
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 409, ae.StatusCode)
	require.Equal(t, jobs.ResultConflictMessage, ae.Message)
	require.Equal(t, "charged", ae.MoneyState)

	require.Equal(t, 1, e.resultReports(t, acct, id), "only the first report was recorded")
	require.Equal(t, settled, e.jobRows(t, acct, id))
	ledgertest.RequireBalance(t, e.Store, acct, 1000-120)
}
