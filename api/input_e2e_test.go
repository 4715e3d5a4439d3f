package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// settled submits a job and waits until it is delivered, so that its ledger rows no longer move:
// a target for bad result and redrive bodies, which are refused before the job's state is looked
// at.
func (e *env) settled(t *testing.T, base, key, account, kind string) string {
	t.Helper()
	id := ledgertest.ID(t, "job-done")
	requireCharged(t, submit(t, base, key, job(id, account, kind, "sim:ok")))
	e.wait(t, account, id, ledgerdb.StateDelivered)
	return id
}

// inbox counts the account's job's result reports.
func (e *env) inbox(t *testing.T, account, jobID string) int {
	t.Helper()
	key := ledgerdb.JobKey{AccountID: account, JobID: jobID}
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM result_reports WHERE job_id = $1`, key.String()).Scan(&n))
	return n
}

// refusals is a site ready to be sent requests it must refuse: an admin key, a kind sold at 10
// credits, a job of it settled (settled) for results and redrives to aim at, and the account's
// rows and that job's result reports as they stood before, which nothing refused may change.
type refusals struct {
	*site
	admin, kind, done string
	rows              []ledgerdb.Entry
	inbox             int
}

// newRefusals serves a site with an account of 100 credits, and settles its job.
func newRefusals(t *testing.T) *refusals {
	t.Helper()
	r := &refusals{site: newSite(t, 100)}
	r.admin, r.kind = r.key(t, apikeys.ScopeAdmin, ""), r.fixed(t, 10)
	r.done = r.settled(t, r.base, r.admin, r.acct, r.kind)
	r.rows, r.inbox = r.env.rows(t, r.acct), r.env.inbox(t, r.acct, r.done)
	return r
}

// requireNothingWritten fails unless the account's rows and the settled job's result reports are
// as they stood: no refused request wrote a grant, a charge or a result (the append-only rule
// keeps only what was accepted).
func (r *refusals) requireNothingWritten(t *testing.T) {
	t.Helper()
	require.Equal(t, r.rows, r.env.rows(t, r.acct), "no refused grant was written")
	require.Equal(t, r.inbox, r.env.inbox(t, r.acct, r.done), "no refused result was recorded")
}

// TestTextFieldsRefuseInvisibleCharacters checks every free-text field the API takes — a
// submission's input_ref, a result's output_ref, a price's and a grant's memo, a redrive's by and
// note, an API key's name — against the ledger's one text rule: a zero-width, bidirectional,
// byte-order or control character is 400 invalid_input naming the field as the body names it, and
// nothing is written (no job, no result, no price, no grant, no key; the append-only rule: what is
// kept reads as what it is).
func TestTextFieldsRefuseInvisibleCharacters(t *testing.T) {
	t.Parallel()
	e := newRefusals(t)
	newKind := ledgertest.OwnKind(t)

	for _, r := range []rune{0x200B, 0x200F, 0x202E, 0x2060, 0x2066, 0x2069, 0xFEFF, 0x00AD, 0x0085, 0x001B} {
		bad := fmt.Sprintf("s3://in/a%cb", r)
		unwritten := ledgertest.ID(t, "job-refused")
		for _, tc := range []struct {
			field, method, path string
			body                map[string]any
		}{
			{"input_ref", "POST", "/v1/jobs", job(unwritten, e.acct, e.kind, bad)},
			{"output_ref", "POST", "/v1/jobs/" + e.done + "/result?account_id=" + e.acct, map[string]any{"attempt": 1, "output_ref": bad}},
			{"memo", "PUT", "/v1/prices/" + newKind, map[string]any{"unit": "job", "unit_price": 5, "memo": bad}},
			{"memo", "POST", "/v1/accounts/" + e.acct + "/grants", map[string]any{"amount": 5, "key": fmt.Sprintf("g-%X", r), "memo": bad}},
			{"by", "POST", "/v1/jobs/" + e.done + "/redrive?account_id=" + e.acct, map[string]any{"by": bad}},
			{"note", "POST", "/v1/jobs/" + e.done + "/redrive?account_id=" + e.acct, map[string]any{"by": "ops", "note": bad}},
			{"name", "POST", "/v1/keys", map[string]any{"scope": "runner", "name": unwritten + bad}},
		} {
			a := call(t, e.base, tc.method, tc.path, e.admin, tc.body)
			requireInvalid(t, a, tc.field, fmt.Sprintf("%s with %U", tc.field, r))
			require.Contains(t, a.str("message"), fmt.Sprintf("%U", r), "the message names the character")
		}
		require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+unwritten+"?account_id="+e.acct, e.admin, nil).code, "the refused submission wrote nothing")
		var keys int
		require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE name = $1`, unwritten+bad).Scan(&keys))
		require.Zero(t, keys, "%U: the refused key was not written", r)
	}

	_, err := e.Store.PriceHistory(context.Background(), newKind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no refused price was written")
	e.requireNothingWritten(t)
	a := call(t, e.base, "POST", "/v1/accounts/"+e.acct+"/grants", e.admin, map[string]any{"amount": 5, "key": "plain", "memo": "Café — 日本語 🎬"})
	require.Equal(t, 201, a.code, "ordinary text in any script is taken: %s", a.raw)
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestJSONKeysMatchExactlyOnce checks every JSON body the API takes: a key must be one of the
// body's fields, spelt exactly, and appear once. Before, the decoder matched keys case-insensitively
// and let the last of a repeated key win, so {"amount":5,"AMOUNT":5000} granted 5000 while an
// auditing proxy read 5. Each such body is 400 naming the key, and nothing is written (the
// append-only rule; the price-list rule: no amount slips in under another spelling — an amount in
// any letter case is still refused as price_set_by_server).
func TestJSONKeysMatchExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newRefusals(t)
	dear := e.fixed(t, 90)
	newKind := ledgertest.OwnKind(t)
	unwritten := ledgertest.ID(t, "job-refused")
	ids := fmt.Sprintf(`"job_id":%q,"account_id":%q`, unwritten, e.acct)

	for _, tc := range []struct {
		method, path, body, key string
	}{
		{"POST", "/v1/jobs", `{` + ids + `,"kind":"` + e.kind + `","KIND":"` + dear + `"}`, "KIND"},
		{"POST", "/v1/jobs", `{` + ids + `,"kind":"` + e.kind + `","kind":"` + dear + `"}`, "kind"},
		{"POST", "/v1/jobs", `{` + ids + `,"kind":"` + e.kind + `","\u006bind":"` + dear + `"}`, "kind"},
		{"POST", "/v1/jobs", `{"job_id":"` + unwritten + `","Account_ID":"` + e.acct + `","kind":"` + e.kind + `"}`, "Account_ID"},
		{"POST", "/v1/jobs/" + e.done + "/result?account_id=" + e.acct, `{"attempt":1,"output_ref":"s3://a","OUTPUT_REF":"s3://b"}`, "OUTPUT_REF"},
		{"POST", "/v1/jobs/" + e.done + "/result?account_id=" + e.acct, `{"attempt":1,"output_ref":"s3://a","units_used":0,"units_used":5}`, "units_used"},
		{"PUT", "/v1/prices/" + newKind, `{"unit":"job","unit_price":50,"Unit_Price":1}`, "Unit_Price"},
		{"PUT", "/v1/prices/" + newKind, `{"unit":"job","unit_price":50,"unit_price":1}`, "unit_price"},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount":5,"AMOUNT":5000,"key":"g-1"}`, "AMOUNT"},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount":5,"key":"g-2","amount":5000}`, "amount"},
		{"POST", "/v1/jobs/" + e.done + "/redrive?account_id=" + e.acct, `{"by":"ops","By":"root"}`, "By"},
		{"POST", "/v1/jobs/" + e.done + "/redrive?account_id=" + e.acct, `{"note":"a","note":"b"}`, "note"},
	} {
		a := call(t, e.base, tc.method, tc.path, e.admin, tc.body)
		requireInvalid(t, a, tc.key, tc.method+" "+tc.body)
	}
	for _, body := range []string{`{` + ids + `,"kind":"` + e.kind + `","COST":1}`, `{` + ids + `,"kind":"` + e.kind + `","cost":1,"cost":2}`} {
		a := call(t, e.base, "POST", "/v1/jobs", e.admin, body)
		require.Equal(t, 400, a.code, a.raw)
		require.Equal(t, "price_set_by_server", a.str("code"), body)
	}

	require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+unwritten+"?account_id="+e.acct, e.admin, nil).code, "no refused submission was written")
	_, err := e.Store.PriceHistory(context.Background(), newKind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no refused price was written")
	e.requireNothingWritten(t)
	ledgertest.RequireSound(t, e.Store, e.acct)
}

// TestOversizeBodyIs413 checks that a body over api.max_body_bytes is answered 413
// body_too_large — not 400, so that a client tells "too big" from "malformed" — on every route
// that takes a body, and that nothing is written.
func TestOversizeBodyIs413(t *testing.T) {
	t.Parallel()
	e := newRefusals(t)
	unwritten := ledgertest.ID(t, "job-refused")
	pad := strings.Repeat("x", 5000) // the test server's limit is 4096 bytes

	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", fmt.Sprintf(`{"job_id":%q,"account_id":%q,"kind":%q,"input_ref":%q}`, unwritten, e.acct, e.kind, pad)},
		{"POST", "/v1/jobs/" + e.done + "/result?account_id=" + e.acct, `{"attempt":1,"output_ref":"` + pad + `"}`},
		{"PUT", "/v1/prices/" + ledgertest.OwnKind(t), `{"unit":"job","unit_price":5,"memo":"` + pad + `"}`},
		{"POST", "/v1/accounts/" + e.acct + "/grants", `{"amount":5,"key":"k","memo":"` + pad + `"}`},
		{"POST", "/v1/jobs/" + e.done + "/redrive?account_id=" + e.acct, `{"note":"` + pad + `"}`},
	} {
		a := call(t, e.base, tc.method, tc.path, e.admin, tc.body)
		require.Equal(t, 413, a.code, "%s %s: %s", tc.method, tc.path, a.raw)
		require.Equal(t, "body_too_large", a.str("code"))
		require.Contains(t, a.str("message"), "4096 bytes")
	}
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+unwritten+"?account_id="+e.acct, e.admin, nil).code, "nothing was written")
	e.requireNothingWritten(t)
}

// TestBadInputRefused checks that malformed JSON, unknown fields, trailing data, wrong types,
// invalid IDs, a missing or malformed kind and a zero, negative, fractional or overflowing
// max_units are refused with 400 and a clear message, and that nothing is written (the
// remembered-IDs rule: a refused ID stays "not received"). An oversize body is 413
// (TestOversizeBodyIs413).
func TestBadInputRefused(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	key := e.key(t, apikeys.ScopeAdmin, "")
	id := ledgertest.ID(t, "job")
	metered := ledgertest.Metered(t, e.Store, 1, 300)
	ok := fmt.Sprintf(`"job_id":%q,"account_id":%q`, id, e.acct)
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
		"no job ID":             fmt.Sprintf(`{"account_id":%q%s}`, e.acct, kind),
		"bad job ID":            fmt.Sprintf(`{"job_id":"a/b","account_id":%q%s}`, e.acct, kind),
		"long job ID":           fmt.Sprintf(`{"job_id":%q,"account_id":%q%s}`, strings.Repeat("a", 129), e.acct, kind),
		"control in input":      `{` + ok + kind + `,"input_ref":"a\u0000b"}`,
	} {
		a := call(t, e.base, "POST", "/v1/jobs", key, body)
		require.Equal(t, 400, a.code, "%s: %s", name, a.raw)
		require.NotEmpty(t, a.str("message"), name)
		if strings.Contains(name, "max_units") {
			require.Contains(t, a.str("message"), `"max_units"`, name)
		}
	}
	require.Equal(t, "body_too_large", call(t, e.base, "POST", "/v1/jobs", key, `{"input_ref":"`+strings.Repeat("x", 5000)+`"}`).str("code"))
	// The admin key names the job's account, so that the job paths are refused for their IDs alone.
	inAcct := "?account_id=" + e.acct
	for _, path := range []string{"/v1/jobs/bad%20id" + inAcct, "/v1/jobs/" + strings.Repeat("a", 129) + inAcct, "/v1/accounts/-x", "/v1/accounts/" + e.acct + "/ledger?limit=0",
		"/v1/accounts/" + e.acct + "/ledger?after=-1", "/v1/prices/Render", "/v1/prices/" + strings.Repeat("a", 65)} {
		require.Equal(t, 400, call(t, e.base, "GET", path, key, nil).code, path)
	}
	for _, body := range []string{`{"amount":0,"key":"k"}`, `{"amount":-5,"key":"k"}`, `{"amount":5}`, `{"amount":5,"key":"k","extra":1}`} {
		require.Equal(t, 400, call(t, e.base, "POST", "/v1/accounts/"+e.acct+"/grants", key, body).code, body)
	}
	require.Equal(t, 404, call(t, e.base, "GET", "/v1/jobs/"+id+inAcct, key, nil).code, "nothing was written")
	require.Len(t, e.rows(t, e.acct), 1)
}
