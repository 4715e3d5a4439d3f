package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// TestShownToHidesDetailFromCustomers checks the one place the API decides who reads a job's
// detail (trust: the words of GPU services and operators, which may name internal hosts, reach
// admin keys only): every documented answer that carries a job's status — found by its type, so
// that a new one cannot be left out — loses the detail for an account's key (customer or
// customer_read) and for a runner key, and keeps it, with the reason and message, for an admin
// key.
func TestShownToHidesDetailFromCustomers(t *testing.T) {
	statusType := reflect.TypeOf(apitype.Status{})
	type reader struct {
		p          *principal
		wantDetail bool
	}
	readers := []reader{{nil, false}}
	for _, scope := range apikeys.Scopes() {
		p := &principal{keyID: "key_" + string(scope), scope: scope}
		if scope.OfAccount() {
			p.account = "acme"
		}
		readers = append(readers, reader{p, scope == apikeys.ScopeAdmin})
	}
	checked := 0
	for schema, body := range documentedBodies {
		// Each reader is shown an answer of its own, as each request builds its own: shownTo
		// may change a list's elements in place.
		answer := func() (reflect.Value, bool) {
			v := reflect.New(reflect.TypeOf(body)).Elem()
			return v, setStatus(v, statusType)
		}
		if _, ok := answer(); !ok {
			continue
		}
		checked++
		for _, c := range readers {
			v, _ := answer()
			raw, err := json.Marshal(shownTo(c.p, v.Interface()))
			require.NoError(t, err)
			require.Equal(t, c.wantDetail, containsDetail(raw), "%s answered to %+v: %s", schema, c.p, raw)
			require.Contains(t, string(raw), `"reason":"gpu_failed"`, schema)
			require.Contains(t, string(raw), `"message":"Not delivered`, schema)
		}
	}
	require.Equal(t, 4, checked, "Status, Submission, ResultReport and JobList carry a job's status")
}

// setStatus fills every apitype.Status in v, itself, a field or a list's element (a list gets one),
// with a refunded job's reason, message and detail, and reports whether it found one.
func setStatus(v reflect.Value, statusType reflect.Type) bool {
	if v.Type() == statusType {
		v.Set(reflect.ValueOf(apitype.Status{Reason: string(ledgerdb.ReasonGPUFailed), Message: "Not delivered: …",
			Detail: "failed: postgres://svc:***@10.0.3.7/gpu"}))
		return true
	}
	if v.Kind() == reflect.Slice {
		one := reflect.MakeSlice(v.Type(), 1, 1)
		if !setStatus(one.Index(0), statusType) {
			return false
		}
		v.Set(one)
		return true
	}
	found := false
	if v.Kind() == reflect.Struct {
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && setStatus(v.Field(i), statusType) {
				found = true
			}
		}
	}
	return found
}

// containsDetail reports whether a JSON answer has a "detail" key at any depth, lists included.
func containsDetail(raw []byte) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		if list, ok := v.([]any); ok {
			for _, child := range list {
				if walk(child) {
					return true
				}
			}
			return false
		}
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["detail"]; ok {
			return true
		}
		for _, child := range m {
			if walk(child) {
				return true
			}
		}
		return false
	}
	return walk(v)
}
