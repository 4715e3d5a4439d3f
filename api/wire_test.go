package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// TestWireAnswersAsDomainJSON checks that the API's answers did not change for any client when
// they became package apitype's types (trust: a client reads a job's money state, figures and
// reason exactly as before): each conversion writes, byte for byte, the JSON its domain type
// writes — with every field set, with none set, and for lists, nil as null and empty as []. A
// field a domain type gains fails here until the wire type (and openapi.yaml) decides on it.
func TestWireAnswersAsDomainJSON(t *testing.T) {
	conversions := []struct {
		domain  any
		convert func(any) any
	}{
		{jobs.Status{}, func(v any) any { return statusOf(v.(jobs.Status)) }},
		{jobs.Submission{}, func(v any) any { return submissionOf(v.(jobs.Submission)) }},
		{jobs.ResultReport{}, func(v any) any { return resultReportOf(v.(jobs.ResultReport)) }},
		{ledgerdb.Price{}, func(v any) any { return priceOf(v.(ledgerdb.Price)) }},
		{apikeys.Key{}, func(v any) any { return keyOf(v.(apikeys.Key)) }},
		{apikeys.Created{}, func(v any) any { return createdKeyOf(v.(apikeys.Created)) }},
		{webhooks.Endpoint{}, func(v any) any { return endpointOf(v.(webhooks.Endpoint)) }},
		{webhooks.Created{}, func(v any) any { return endpointCreatedOf(v.(webhooks.Created)) }},
		{webhooks.Attempt{}, func(v any) any { return attemptOf(v.(webhooks.Attempt)) }},
		{ledgerdb.Revenue{}, func(v any) any { return revenueOf(v.(ledgerdb.Revenue)) }},
		{[]jobs.Status{}, func(v any) any { return each(v.([]jobs.Status), statusOf) }},
		{[]ledgerdb.Price{}, func(v any) any { return each(v.([]ledgerdb.Price), priceOf) }},
		{[]apikeys.Key{}, func(v any) any { return each(v.([]apikeys.Key), keyOf) }},
		{[]webhooks.Endpoint{}, func(v any) any { return each(v.([]webhooks.Endpoint), endpointOf) }},
		{[]webhooks.Attempt{}, func(v any) any { return each(v.([]webhooks.Attempt), attemptOf) }},
	}
	for _, c := range conversions {
		typ := reflect.TypeOf(c.domain)
		full := reflect.New(typ).Elem()
		fill(full, 1)
		values := []reflect.Value{reflect.Zero(typ), full}
		if typ.Kind() == reflect.Slice {
			values = append(values, reflect.MakeSlice(typ, 0, 0))
		}
		for _, v := range values {
			want, err := json.Marshal(v.Interface())
			require.NoError(t, err)
			got, err := json.Marshal(c.convert(v.Interface()))
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "%s", typ)
		}
	}
}

// TestWireSetsEveryField checks the conversions of the domain types that write no JSON of their
// own — a credit block, a statement — (trust: a customer reads every figure of their credits, and
// never a zero the server did not mean): converted from a value whose every field is set, the
// answer writes every field of its wire type, none of them zero.
func TestWireSetsEveryField(t *testing.T) {
	for _, c := range []struct {
		domain  any
		convert func(any) any
	}{
		{ledgerdb.Block{}, func(v any) any { return blockOf(v.(ledgerdb.Block), time.Now()) }},
		{ledgerdb.Statement{}, func(v any) any { return statementOf(v.(ledgerdb.Statement)) }},
		{ledgerdb.StatementLine{}, func(v any) any {
			return statementOf(ledgerdb.Statement{Lines: []ledgerdb.StatementLine{v.(ledgerdb.StatementLine)}}).Lines[0]
		}},
	} {
		full := reflect.New(reflect.TypeOf(c.domain)).Elem()
		fill(full, 1)
		answer := c.convert(full.Interface())
		raw, err := json.Marshal(answer)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(raw, &fields))
		require.Len(t, fields, reflect.TypeOf(answer).NumField(), "every field of %T is written: %s", answer, raw)
		for name, v := range fields {
			if _, isBool := v.(bool); !isBool {
				require.NotContains(t, []any{"", float64(0), nil}, v, "%T.%s is zero: %s", answer, name, raw)
			}
		}
	}
}

// TestFillSetsEveryField checks the filler the test above relies on: a value it fills writes
// every field of its type, so that a conversion that drops one is caught.
func TestFillSetsEveryField(t *testing.T) {
	st := reflect.New(reflect.TypeOf(jobs.Status{})).Elem()
	fill(st, 1)
	raw, err := json.Marshal(st.Interface())
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.Len(t, fields, st.NumField(), "every field of jobs.Status is written: %s", raw)
}

// fill sets v and everything in it to values that are not zero and differ from field to field
// (seed counts them), so that two fields swapped in a conversion write different JSON.
func fill(v reflect.Value, seed int) int {
	switch {
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, seed%60, seed, time.UTC)))
		return seed + 1
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", seed))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return fill(v.Elem(), seed)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			seed = fill(v.Index(i), seed)
		}
		return seed
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				seed = fill(v.Field(i), seed)
			}
		}
		return seed
	}
	return seed + 1
}
