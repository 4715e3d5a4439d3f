package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestTextFieldsRefuseInvisibleCharacters checks every free-text field the API takes — a
// submission's input_ref, a result's output_ref, a price's and a grant's memo, a redrive's by and
// note — against the ledger's one text rule: a zero-width, bidirectional, byte-order or control
// character is 400 invalid_input naming the field as the body names it, and nothing is written (no
// job, no result, no price, no grant; rule 1: what is kept reads as what it is).
func TestTextFieldsRefuseInvisibleCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := ledgertest.Account(t, e.Store, 100)
	admin := newKey(t, "admin")
	base := e.serve(t, []config.APIKey{{Key: admin, Admin: true}}, nil)
	kind := e.fixed(t, 10)
	running := ledgertest.ID(t, "job-running")
	require.Equal(t, 201, call(t, base, "POST", "/v1/jobs", admin, job(running, acct, kind, "sim:hang")).code)
	newKind := ledgertest.OwnKind(t)

	for _, r := range []rune{0x200B, 0x200F, 0x202E, 0x2060, 0x2066, 0x2069, 0xFEFF, 0x00AD, 0x0085, 0x001B} {
		bad := fmt.Sprintf("s3://in/a%cb", r)
		unwritten := ledgertest.ID(t, "job-refused")
		for _, tc := range []struct {
			field, method, path string
			body                map[string]any
		}{
			{"input_ref", "POST", "/v1/jobs", job(unwritten, acct, kind, bad)},
			{"output_ref", "POST", "/v1/jobs/" + running + "/result", map[string]any{"attempt": 1, "output_ref": bad}},
			{"memo", "PUT", "/v1/prices/" + newKind, map[string]any{"unit": "job", "unit_price": 5, "memo": bad}},
			{"memo", "POST", "/v1/accounts/" + acct + "/grants", map[string]any{"amount": 5, "key": fmt.Sprintf("g-%X", r), "memo": bad}},
			{"by", "POST", "/v1/jobs/" + running + "/redrive", map[string]any{"by": bad}},
			{"note", "POST", "/v1/jobs/" + running + "/redrive", map[string]any{"by": "ops", "note": bad}},
		} {
			a := call(t, base, tc.method, tc.path, admin, tc.body)
			require.Equal(t, 400, a.code, "%s with %U: %s", tc.field, r, a.raw)
			require.Equal(t, "invalid_input", a.str("code"), a.raw)
			require.Contains(t, a.str("message"), `"`+tc.field+`"`, "%U: the message names the body's field", r)
			require.Contains(t, a.str("message"), fmt.Sprintf("%U", r), "the message names the character")
		}
		require.Equal(t, 404, call(t, base, "GET", "/v1/jobs/"+unwritten, admin, nil).code, "the refused submission wrote nothing")
	}

	_, err := e.Store.PriceHistory(context.Background(), newKind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no refused price was written")
	require.Len(t, e.rows(t, acct), 2, "the initial grant and the running job's charge: no refused grant")
	var reports int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM result_reports WHERE job_id = $1`, running).Scan(&reports))
	require.Zero(t, reports, "no refused result was recorded")
	a := call(t, base, "POST", "/v1/jobs/"+running+"/result", admin, map[string]any{"attempt": 1, "output_ref": "s3://out/Café-日本-🎬"})
	require.Equal(t, 200, a.code, "ordinary text in any script is taken: %s", a.raw)
	e.wait(t, running, ledgerdb.StateDelivered)
	ledgertest.RequireSound(t, e.Store, acct)
}
