package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// FuzzDecodeSubmit checks the submission decoder on arbitrary bodies (the price-list and
// remembered-IDs rules and the "bad input writes nothing" rule): it never panics, refuses with a
// 400 (never a 5xx), never accepts a body that carries an amount — prices are set by the server —
// and whatever it accepts passes the ledger's own checks: valid IDs, a kind's name, and a maximum
// of units that is the kind's (0) or from 1 to the ledger's bound.
func FuzzDecodeSubmit(f *testing.F) {
	for _, seed := range []string{
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","input_ref":"sim:ok"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"transcribe","max_units":300}`,
		`{"job_id":"render-1","account_id":"acme","kind":"transcribe","max_units":0}`,
		`{"job_id":"render-1","account_id":"acme","kind":"transcribe","max_units":-1}`,
		`{"job_id":"render-1","account_id":"acme","kind":"transcribe","max_units":1.5}`,
		`{"job_id":"render-1","account_id":"acme","kind":"transcribe","max_units":9223372036854775808}`,
		`{"job_id":"render-1","account_id":"acme","cost":40,"input_ref":"sim:ok"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","cost":1}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","Credits":"1"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"Render"}`,
		`{"job_id":"render-1","account_id":"acme","kind":""}`,
		`{"job_id":"a/b","account_id":"acme","kind":"k"}`,
		`{"JOB_ID":"x","account_id":"acme","kind":"k","extra":true}`,
		`{"job_id":"x","account_id":"acme","kind":"k"}garbage`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","KIND":"transcribe"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","kind":"transcribe"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","\u006bind":"transcribe"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","COST":1}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","input_ref":"s3://a\u202eb"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","input_ref":"a\u200bb\ufeff"}`,
		`{"job_id":"render-1","account_id":"acme","kind":"render-4k","input_ref":"Café 日本 🎬"}`,
		`[]`, `null`, `"x"`, ``, `{`, "\xff\xfe",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		job, err := DecodeSubmit(bytes.NewReader(body), 4096)
		if err != nil {
			if ae := fromDomain(err); ae.status != http.StatusBadRequest {
				t.Fatalf("refused with %d, not 400: %v", ae.status, err)
			}
			return
		}
		if carriesAmount(body) {
			t.Fatalf("accepted a body that carries an amount: %q", body)
		}
		if ledgerdb.ValidateID("job", job.ID) != nil || ledgerdb.ValidateID("account", job.AccountID) != nil ||
			ledgerdb.ValidateKind(job.Kind) != nil || job.MaxUnits < 0 || job.MaxUnits > ledgerdb.MaxUnits {
			t.Fatalf("accepted a job the ledger refuses: %+v", job)
		}
		if !utf8.ValidString(job.InputRef) || len(job.InputRef) > MaxRefLength || hasHidden(job.InputRef) {
			t.Fatalf("accepted input_ref %q", job.InputRef)
		}
		requireExactKeys(t, body, apitype.SubmitRequest{})
	})
}

// carriesAmount reports whether a JSON object has a field the decoder would match to an amount
// (its names are matched case-insensitively).
func carriesAmount(body []byte) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return false
	}
	for name := range fields {
		switch strings.ToLower(name) {
		case "cost", "amount", "price", "unit_price", "credits":
			return true
		}
	}
	return false
}

// hasHidden reports whether text holds a control or invisible formatting character, which no
// text the API takes may hold.
func hasHidden(text string) bool {
	for _, r := range text {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return true
		}
	}
	return false
}

// requireExactKeys fails unless every key of the JSON object body is the JSON name of a field of
// body's type, spelt exactly, and appears once: what a decoder that accepted body must have seen.
func requireExactKeys(t *testing.T, body []byte, fields any) {
	t.Helper()
	names := map[string]bool{}
	for _, name := range jsonFields(reflect.TypeOf(fields)) {
		names[name] = true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("accepted a body that is not an object: %q", body)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
		key := tok.(string)
		if !names[key] || seen[key] {
			t.Fatalf("accepted key %q of %q: unknown, in another case, or repeated", key, body)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
	}
}

// FuzzDecodeBodies checks the result, grant, price and redrive decoders the same way (the
// price-list rule: a result never carries an amount, and its usage is a whole number from 0; a
// grant's amount is above zero; a price passes the ledger's own checks).
func FuzzDecodeBodies(f *testing.F) {
	for _, seed := range []string{
		`{"attempt":1,"output_ref":"s3://x","finished_at":"2026-01-02T03:04:05Z"}`,
		`{"attempt":-1}`, `{"attempt":1,"amount":40}`, `{"finished_at":"yesterday"}`,
		`{"attempt":1,"output_ref":"s3://x","units_used":137}`, `{"attempt":1,"output_ref":"s3://x","units_used":-1}`,
		`{"attempt":1,"output_ref":"s3://x","units_used":1.5}`, `{"attempt":1,"output_ref":"s3://x","cost":0}`,
		`{"unit":"gpu_second","unit_price":2,"max_units":300,"memo":"launch"}`, `{"unit":"job","unit_price":40}`,
		`{"unit":"job","unit_price":40,"max_units":2}`, `{"unit":"gpu_second","unit_price":1}`, `{"unit":"hour","unit_price":1}`,
		`{"unit":"gpu_second","unit_price":1000000000000000,"max_units":2}`,
		`{"amount":5,"key":"invoice-1","memo":"m"}`, `{"amount":0,"key":"k"}`, `{"by":"ops","note":"n"}`, ``,
		`{"amount":5,"AMOUNT":5000,"key":"k"}`, `{"amount":5,"key":"k","amount":5000}`, `{"unit":"job","unit_price":5,"Unit_Price":1}`,
		`{"attempt":1,"output_ref":"s3://x","OUTPUT_REF":"s3://y"}`, `{"by":"ops","By":"root"}`, `{"note":"a","note":"b"}`,
		`{"amount":5,"key":"k","memo":"a\u2066b"}`, `{"by":"ops\u200d","note":"n"}`, `{"attempt":1,"output_ref":"s3://x\u00ad"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if res, err := decodeResult(bytes.NewReader(body), 4096, time.Now()); err == nil {
			if res.Attempt < 0 || len(res.OutputRef) > MaxRefLength || (res.UnitsUsed != nil && *res.UnitsUsed < 0) || carriesAmount(body) {
				t.Fatalf("accepted result %+v", res)
			}
			requireExactKeys(t, body, apitype.ResultRequest{})
		} else if fromDomain(err).status != http.StatusBadRequest {
			t.Fatalf("result refused with %v", err)
		}
		if p, err := DecodePrice(bytes.NewReader(body), 4096, "render-4k"); err == nil {
			if p.Validate() != nil || p.Kind != "render-4k" || hasHidden(p.Memo) {
				t.Fatalf("accepted price %+v", p)
			}
			requireExactKeys(t, body, apitype.PriceRequest{})
		} else if fromDomain(err).status != http.StatusBadRequest {
			t.Fatalf("price refused with %v", err)
		}
		if c, err := decodeGrant(bytes.NewReader(body), 4096, "acme"); err == nil {
			if ledgerdb.ValidateAmount("amount", c.Amount) != nil || ledgerdb.ValidateID("key", c.Key) != nil || hasHidden(c.Memo) ||
				c.Block.Validate() != nil {
				t.Fatalf("accepted grant %+v", c)
			}
			requireExactKeys(t, body, apitype.GrantRequest{})
		} else if fromDomain(err).status != http.StatusBadRequest {
			t.Fatalf("grant refused with %v", err)
		}
		var rr apitype.RedriveRequest
		if err := decodeJSON(bytes.NewReader(body), 4096, &rr, true); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusBadRequest {
				t.Fatalf("redrive refused with %v", err)
			}
		} else if len(bytes.TrimSpace(body)) > 0 {
			requireExactKeys(t, body, apitype.RedriveRequest{})
		}
	})
}

// FuzzPathID checks the IDs of paths and the ledger's page query (the remembered-IDs rule: an ID is
// exactly what the ledger can store, or a 400): an accepted ID matches the ledger's rules and is
// what the path said; nothing panics.
func FuzzPathID(f *testing.F) {
	for _, seed := range []string{"render-1", "a:b.c_d-e", "", " ", "a/b", "%2F", "-x", strings.Repeat("a", 129), "é", "a\x00b"} {
		f.Add(seed, "10", "5")
	}
	f.Fuzz(func(t *testing.T, id, after, limit string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.SetPathValue("id", id)
		got, err := pathID(r, "job ID")
		if err == nil && (got != id || ledgerdb.ValidateID("job", got) != nil) {
			t.Fatalf("accepted %q as %q", id, got)
		}
		if err != nil && fromDomain(err).status != http.StatusBadRequest {
			t.Fatalf("refused %q with %v", id, err)
		}
		page, err := PageParams(after, limit)
		if err == nil && (page.AfterID < 0 || page.Limit < 0 || page.Limit > 1000) {
			t.Fatalf("accepted page %+v", page)
		}
	})
}

// FuzzJobFilter checks GET /v1/jobs's query (a bad filter writes nothing and reads nothing: it is
// a 400, never a 5xx or a panic) and its cursor: whatever query is accepted is a filter the
// ledger takes — states of the machine, a page from 1 to 200, a time range that holds time, a
// cursor the server could have given — and a cursor read back from its text is the same cursor.
func FuzzJobFilter(f *testing.F) {
	for _, seed := range []string{
		"", "account_id=acme", "state=running,delivered&state=refunded", "state=", "state=paid", "dead_lettered=true",
		"dead_lettered=1", "created_after=2026-01-02T03:04:05Z&created_before=2026-01-01T00:00:00Z", "created_after=yesterday",
		"limit=0", "limit=200", "limit=201", "limit=1&limit=2", "cursor=MTcwMDAwMDAwMDAwMDAwMC5qb2ItMQ", "cursor=%zz", "x=1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		filter, err := jobFilter(query)
		if err != nil {
			if fromDomain(err).status != http.StatusBadRequest {
				t.Fatalf("refused %q with %v", query, err)
			}
			return
		}
		if filter.AccountID == "" {
			filter.AccountID = "acme"
		}
		if err := filter.Validate(); err != nil {
			t.Fatalf("accepted %q as a filter the ledger refuses: %v", query, err)
		}
		if filter.After != nil {
			again, err := ledgerdb.ParseJobCursor(filter.After.String())
			if err != nil || !again.CreatedAt.Equal(filter.After.CreatedAt) || again.JobID != filter.After.JobID {
				t.Fatalf("cursor %+v read back as %+v, %v", *filter.After, again, err)
			}
		}
	})
}
