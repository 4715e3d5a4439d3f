package jsonint

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNormalizeReadsIntegersAsEveryLanguageWritesThem checks the rule every door bills by (the
// price-list rule: a job is billed as its sender meant): a number whose value is whole and fits an
// int64 is the same integer however it is written — Python's json.dumps writes 50.0 and -0.0,
// JavaScript 1e+21, other writers 5e1, 5.0E1 or 500e-1 — and anything else is left as written, for
// the decoder to refuse when an integer is wanted: a fraction, a number beyond an int64. Strings,
// keys and white space are never touched, even when they look like numbers.
func TestNormalizeReadsIntegersAsEveryLanguageWritesThem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"units_used": 50.0}`, `{"units_used": 50}`},
		{`{"units_used":5e1}`, `{"units_used":50}`},
		{`{"units_used":5.0E1}`, `{"units_used":50}`},
		{`{"units_used":5E+1}`, `{"units_used":50}`},
		{`{"units_used":500e-1}`, `{"units_used":50}`},
		{`{"units_used":0.5e2}`, `{"units_used":50}`},
		{`{"units_used":-0.0}`, `{"units_used":0}`},
		{`{"units_used":-0}`, `{"units_used":0}`},
		{`{"units_used":0e999999999999999999999}`, `{"units_used":0}`},
		{`{"units_used":-5.000e1}`, `{"units_used":-50}`},
		{`{"a":9007199254740993.0}`, `{"a":9007199254740993}`},
		{`{"a":9223372036854775807.0}`, `{"a":9223372036854775807}`},
		{`{"a":-9223372036854775808e0}`, `{"a":-9223372036854775808}`},
		{`[1.0, 2e0, "3.0", {"4.0": 5.0}]`, `[1, 2, "3.0", {"4.0": 5}]`},
		{`{"s":"50.0 \" 5e1 \\", "n": 50.0}`, `{"s":"50.0 \" 5e1 \\", "n": 50}`},
		// Left as written: nothing to rewrite, a fraction, beyond an int64, not JSON.
		{`{"units_used": 50}`, `{"units_used": 50}`},
		{`{"units_used": 50.5}`, `{"units_used": 50.5}`},
		{`{"units_used": 5e-1}`, `{"units_used": 5e-1}`},
		{`{"units_used": 1e400}`, `{"units_used": 1e400}`},
		{`{"units_used": 1e+20}`, `{"units_used": 1e+20}`},
		{`{"units_used": 1e+21}`, `{"units_used": 1e+21}`},
		{`{"a":9223372036854775808.0}`, `{"a":9223372036854775808.0}`},
		{`{"a":-9223372036854775809e0}`, `{"a":-9223372036854775809e0}`},
		{`{"a":1e99999999999999999999}`, `{"a":1e99999999999999999999}`},
		{`{"a":1e-99999999999999999999}`, `{"a":1e-99999999999999999999}`},
		{`{"units_used": 50.0`, `{"units_used": 50.0`},
	} {
		require.Equal(t, tc.want, string(Normalize([]byte(tc.in))), tc.in)
	}
}

// TestRefusalNamesTheField checks that a number an integer field cannot take is refused with a
// reason that names the field as the payload does and says what it must be.
func TestRefusalNamesTheField(t *testing.T) {
	type body struct {
		Attempt  int    `json:"attempt"`
		Units    *int64 `json:"units_used"`
		Attempts int32  `json:"maximum_attempts"`
		Name     string `json:"name"`
	}
	for _, tc := range []struct{ in, field, reason string }{
		{`{"units_used": 50.5}`, "units_used", "must be a whole number (50, 50.0 or 5e1), not 50.5"},
		{`{"attempt": 5e-1}`, "attempt", "must be a whole number (50, 50.0 or 5e1), not 5e-1"},
		{`{"units_used": 1e400}`, "units_used", "is 1e400, too large"},
		{`{"units_used": 1e+20}`, "units_used", "is 1e+20, too large"},
		{`{"units_used": -1e400}`, "units_used", "is -1e400, too small"},
		{`{"maximum_attempts": 3e9}`, "maximum_attempts", "is 3000000000, too large"},
	} {
		var b body
		err := json.Unmarshal(Normalize([]byte(tc.in)), &b)
		require.Error(t, err, tc.in)
		field, reason, ok := Refusal(err)
		require.True(t, ok, "%s: %v", tc.in, err)
		require.Equal(t, tc.field, field, tc.in)
		require.Equal(t, tc.reason, reason, tc.in)
	}
	for _, in := range []string{`{"attempt": "1"}`, `{"name": 1}`, `{"attempt": true}`} {
		var b body
		err := json.Unmarshal([]byte(in), &b)
		require.Error(t, err, in)
		_, _, ok := Refusal(err)
		require.False(t, ok, "%s is not a number refused for an integer field", in)
	}
}

// FuzzNormalizeKeepsEveryValue checks that Normalize never changes what a payload says: the
// document it returns holds the same values, in the same places, as the one it was given — a
// number it rewrote has exactly the value it had (read as an exact decimal) and is an integer of
// an int64; any other byte is unchanged.
func FuzzNormalizeKeepsEveryValue(f *testing.F) {
	for _, seed := range []string{
		`{"attempt": 3.0, "output_ref": "s3://x", "units_used": 20.0}`, `{"units_used":5e1}`, `[-0.0, 1E+2, 0.25e2, 1.5]`,
		`{"a":"5e1","b":{"c":[1e0,2.50e1]}}`, `1e400`, `-9223372036854775808.0`, `"x"`, `{"a":1.0`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Normalize(data)
		if !json.Valid(data) {
			require.Equal(t, data, got, "invalid JSON is returned as it is")
			return
		}
		require.True(t, json.Valid(got), "%q became invalid: %q", data, got)
		requireSameValue(t, decodeExactly(t, data), decodeExactly(t, got))
	})
}

// decodeExactly decodes JSON keeping its numbers as written.
func decodeExactly(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// requireSameValue fails unless was and is hold the same values; a number that differs must be
// the plain digits of an int64 of exactly the value it had.
func requireSameValue(t *testing.T, was, is any) {
	t.Helper()
	switch w := was.(type) {
	case map[string]any:
		i, ok := is.(map[string]any)
		require.True(t, ok)
		require.Len(t, i, len(w))
		for k := range w {
			requireSameValue(t, w[k], i[k])
		}
	case []any:
		i, ok := is.([]any)
		require.True(t, ok)
		require.Len(t, i, len(w))
		for k := range w {
			requireSameValue(t, w[k], i[k])
		}
	case json.Number:
		i, ok := is.(json.Number)
		require.True(t, ok)
		if w == i {
			return
		}
		_, err := i.Int64()
		require.NoError(t, err, "%s was rewritten as %s, not an int64's digits", w, i)
		require.False(t, strings.ContainsAny(string(i), ".eE+"), "%s was rewritten as %s", w, i)
		n := parse(string(w))
		if n.digits == "" {
			require.Equal(t, json.Number("0"), i, "%s is zero", w)
			return
		}
		if n.scale > 1000 || n.scale < -1000 {
			t.Fatalf("%s was rewritten as %s though its value is not an int64", w, i)
		}
		exact, ok := new(big.Rat).SetString(string(w))
		require.True(t, ok, string(w))
		require.Equal(t, 0, exact.Cmp(new(big.Rat).SetInt64(mustInt(t, i))), "%s was rewritten as %s", w, i)
	default:
		require.Equal(t, was, is)
	}
}

func mustInt(t *testing.T, n json.Number) int64 {
	t.Helper()
	v, err := n.Int64()
	require.NoError(t, err)
	return v
}
