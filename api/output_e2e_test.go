package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestDeliveredJobAnswersItsOutput checks what an integrator reads once a job's result is billed:
// GET /v1/jobs/{id} (and the list) carries the output_ref the result settled with and, for a
// metered job, the units used — the result of the attempt the customer paid for, kept by the
// ledger with the settlement, so that it survives the workflow's history. A second report of
// another attempt changes neither (the reversing-pairs rule: one settlement).
func TestDeliveredJobAnswersItsOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.meteredRunning(t)
	acct, key, runner, base, id := m.acct, m.key, m.runner, m.base, m.id

	a := call(t, base, "GET", "/v1/jobs/"+id, key, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Empty(t, a.str("output_ref"), "no output before a result")

	a = call(t, base, "POST", "/v1/jobs/"+id+"/result?account_id="+acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://out/" + id, "units_used": 137})
	require.Equal(t, 200, a.code, a.raw)
	e.wait(t, acct, id, ledgerdb.StateDelivered)

	a = call(t, base, "GET", "/v1/jobs/"+id, key, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "s3://out/"+id, a.str("output_ref"), a.raw)
	require.Equal(t, "137", a.str("units_used"))
	list := call(t, base, "GET", "/v1/jobs", key, nil)
	require.Contains(t, list.raw, `"output_ref":"s3://out/`+id+`"`)

	// Another attempt's result, after the settlement, bills nothing and keeps the first output.
	call(t, base, "POST", "/v1/jobs/"+id+"/result?account_id="+acct, runner, map[string]any{"attempt": 1, "output_ref": "s3://other/" + id, "units_used": 5})
	a = call(t, base, "GET", "/v1/jobs/"+id, key, nil)
	require.Equal(t, "s3://out/"+id, a.str("output_ref"), a.raw)
	require.Equal(t, "137", a.str("units_used"))
	ledgertest.RequireSound(t, e.Store, acct)
}
