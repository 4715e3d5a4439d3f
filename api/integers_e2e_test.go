package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestIntegersWrittenByAnyLanguage checks every integer of every body the API takes — a
// submission's max_units, a result's attempt and units_used, a price's unit_price and max_units,
// a grant's amount, a low-balance threshold — as the bodies arrive from other languages, raw:
// Python's json.dumps writes a float as 20.0, other writers say 2e1 or 5.0E1, and JSON Schema
// counts each an integer. Each is taken as the integer it is (the price-list rule: a job, a price
// and a grant are what their sender meant): the job holds 20 units and is settled at 12, the price
// is 2 credits for at most 300, the grant 50 credits, the threshold 50. A fraction (20.5) or a
// number beyond the field's range (1e400, 1e+20) is 400 invalid_input naming the field, and nothing
// is written: no job, no result, no price, no ledger row, no threshold. Before, 20.0 was refused as
// not a whole number.
func TestIntegersWrittenByAnyLanguage(t *testing.T) {
	t.Parallel()
	e := newSite(t, 1000)
	admin, runner := e.key(t, apikeys.ScopeAdmin, ""), e.key(t, apikeys.ScopeRunner, "")
	metered := ledgertest.Metered(t, e.Store, 1, 300)
	newKind := ledgertest.OwnKind(t)
	threshold := "/v1/accounts/" + e.acct + "/low-balance-threshold"

	// Refused first, so that "nothing written" is judged on an account nothing else touched.
	rowsBefore := e.rows(t, e.acct)
	unwritten := ledgertest.ID(t, "job-refused")
	refusedJob := func(maxUnits string) string {
		return fmt.Sprintf(`{"job_id": %q, "account_id": %q, "kind": %q, "max_units": %s, "input_ref": "sim:hang"}`, unwritten, e.acct, metered, maxUnits)
	}
	for _, tc := range []struct{ method, path, body, field, want string }{
		{"POST", "/v1/jobs", refusedJob("20.5"), "max_units", "whole number"},
		{"POST", "/v1/jobs", refusedJob("1e400"), "max_units", "too large"},
		{"POST", "/v1/jobs", refusedJob("1e9"), "max_units", "from 1 to the kind's maximum"},
		{"PUT", "/v1/prices/" + newKind, `{"unit": "gpu_second", "unit_price": 2.5, "max_units": 300}`, "unit_price", "whole number"},
		{"PUT", "/v1/prices/" + newKind, `{"unit": "gpu_second", "unit_price": 2, "max_units": 300.5}`, "max_units", "whole number"},
		{"PUT", "/v1/prices/" + newKind, `{"unit": "gpu_second", "unit_price": 1e+20, "max_units": 300}`, "unit_price", "too large"},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount": 50.5, "key": "g-frac"}`, "amount", "whole number"},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount": 1e400, "key": "g-huge"}`, "amount", "too large"},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount": 1e16, "key": "g-above"}`, "amount", "at most"},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount": -0.0, "key": "g-zero"}`, "amount", "above zero"},
		{"PUT", threshold, `{"threshold": 50.5}`, "threshold", "whole number"},
		{"PUT", threshold, `{"threshold": -1e400}`, "threshold", "too small"},
	} {
		a := call(t, e.base, tc.method, tc.path, admin, tc.body)
		requireInvalid(t, a, tc.field, tc.method+" "+tc.body)
		require.Contains(t, a.str("message"), tc.want, tc.body)
		require.Contains(t, a.str("message"), "Nothing was written", tc.body)
	}
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+unwritten+"?account_id="+e.acct, admin, nil).code, "no refused job was written")
	_, err := e.Store.PriceHistory(context.Background(), newKind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no refused price was written")
	require.Equal(t, rowsBefore, e.rows(t, e.acct), "no refused grant was written")
	none, err := webhooks.NewStore(e.Store.Pool()).LowBalanceThreshold(context.Background(), e.acct)
	require.NoError(t, err)
	require.Nil(t, none, "no refused threshold was written")

	// Taken as the integers they are.
	held := map[string]string{}
	for _, maxUnits := range []string{"20.0", "2e1", "2.0E1", "200e-1"} {
		id := ledgertest.ID(t, "job")
		body := fmt.Sprintf(`{"job_id": %q, "account_id": %q, "kind": %q, "max_units": %s, "input_ref": "sim:hang"}`, id, e.acct, metered, maxUnits)
		a := submit(t, e.base, admin, body)
		requireCharged(t, a)
		require.Equal(t, "20", a.str("status", "held_units"), body)
		require.Equal(t, "20", a.str("status", "held"), body)
		held[id] = maxUnits
	}
	path := func(id string) string { return "/v1/jobs/" + id + "/result?account_id=" + e.acct }
	for id := range held {
		a := call(t, e.base, "POST", path(id), runner, `{"attempt": 1, "output_ref": "s3://out", "units_used": 12.5}`)
		require.Equal(t, 400, a.code, a.raw)
		require.Contains(t, a.str("message"), `"units_used"`)
		a = call(t, e.base, "POST", path(id), runner, `{"attempt": 1.5, "output_ref": "s3://out", "units_used": 12}`)
		require.Equal(t, 400, a.code, a.raw)
		require.Contains(t, a.str("message"), `"attempt"`)
		require.Zero(t, e.resultReports(t, e.acct, id), "no refused result was recorded")

		// Python's json.dumps of {"attempt": 1.0, "output_ref": "s3://out", "units_used": 12.0}.
		a = call(t, e.base, "POST", path(id), runner, `{"attempt": 1.0, "output_ref": "s3://out", "units_used": 12.0}`)
		require.Equal(t, 200, a.code, a.raw)
	}
	for id := range held {
		e.wait(t, e.acct, id, ledgerdb.StateDelivered)
		a := call(t, e.base, "GET", "/v1/jobs/"+id+"?account_id="+e.acct, admin, nil)
		require.Equal(t, "12", a.str("units_used"), held[id])
		require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -20}, {Kind: ledgerdb.KindRelease, Amount: 8}}, e.jobRows(t, e.acct, id))
	}

	a := call(t, e.base, "PUT", "/v1/prices/"+newKind, admin, `{"unit": "gpu_second", "unit_price": 2.0, "max_units": 3e2, "memo": "written by a script"}`)
	require.Equal(t, 201, a.code, a.raw)
	prices, err := e.Store.PriceHistory(context.Background(), newKind)
	require.NoError(t, err)
	require.Len(t, prices, 1)
	require.Equal(t, int64(2), prices[0].UnitPrice)
	require.Equal(t, int64(300), prices[0].MaxUnits)

	a = call(t, e.base, "POST", "/v1/accounts/"+e.acct+"/grants", admin, `{"amount": 5e1, "key": "g-exponent"}`)
	require.Equal(t, 201, a.code, a.raw)
	a = call(t, e.base, "PUT", threshold, admin, `{"threshold": 5.0E1}`)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "50", a.str("threshold"))
	ledgertest.RequireBalance(t, e.Store, e.acct, 1000-4*12+50)
	ledgertest.RequireSound(t, e.Store, e.acct)
}
