package workflows

// The JSON contract (contract.go) against its published schemas in contract/. These tests are in
// the package itself because the wire forms of the input and the policy are unexported: they are
// what the schemas describe.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/ledgerdb"
)

// contractDir holds the published schemas, at the repository's root.
const contractDir = "../contract"

// contractTypes pairs each schema with the Go type that is its payload on the wire.
var contractTypes = []struct {
	file string
	typ  reflect.Type
}{
	{"job-input.schema.json", reflect.TypeFor[jobInputWire]()},
	{"result-signal.schema.json", reflect.TypeFor[ResultSignal]()},
	{"redrive-signal.schema.json", reflect.TypeFor[RedriveRequest]()},
	{"charge-decision.schema.json", reflect.TypeFor[ChargeDecision]()},
	{"job-status.schema.json", reflect.TypeFor[JobStatus]()},
}

// TestContractSchemasAreTheGoTypes checks that each published schema describes exactly what the
// Go code writes and reads: the same field names, the same JSON types, required exactly where the
// Go type always writes the field, and no other field allowed — so a field renamed or added on
// one side only fails here, before a TypeScript or Python caller meets it. Every schema file is
// paired with a type, and the contract version the schemas allow is the code's.
func TestContractSchemasAreTheGoTypes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(contractDir, "*.schema.json"))
	require.NoError(t, err)
	var paired []string
	for _, c := range contractTypes {
		paired = append(paired, filepath.Join(contractDir, c.file))
		t.Run(c.file, func(t *testing.T) {
			var schema schemaNode
			raw, err := os.ReadFile(filepath.Join(contractDir, c.file))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &schema))
			requireSchemaIsType(t, schema, schema, c.typ, c.file)
		})
	}
	require.ElementsMatch(t, files, paired, "every schema in contract/ is paired with its Go type")
}

// schemaNode is the part of a JSON Schema the comparison reads.
type schemaNode struct {
	Ref                  string                `json:"$ref"`
	Defs                 map[string]schemaNode `json:"$defs"`
	Type                 string                `json:"type"`
	Properties           map[string]schemaNode `json:"properties"`
	Required             []string              `json:"required"`
	AdditionalProperties *bool                 `json:"additionalProperties"`
	Const                any                   `json:"const"`
}

// requireSchemaIsType compares schema node s (of the document root) with Go type typ.
func requireSchemaIsType(t *testing.T, root, s schemaNode, typ reflect.Type, where string) {
	t.Helper()
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/$defs/")
		require.True(t, ok, "%s: only local $defs are used", where)
		s = root.Defs[name]
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ {
	case reflect.TypeFor[Policy]():
		typ = reflect.TypeFor[policyWire]()
	case reflect.TypeFor[time.Time](), reflect.TypeFor[duration]():
		require.Equal(t, "string", s.Type, "%s is written as a string", where)
		return
	}
	switch typ.Kind() {
	case reflect.String:
		require.Equal(t, "string", s.Type, where)
	case reflect.Int, reflect.Int32, reflect.Int64:
		require.Equal(t, "integer", s.Type, where)
	case reflect.Float64:
		require.Equal(t, "number", s.Type, where)
	case reflect.Bool:
		require.Equal(t, "boolean", s.Type, where)
	case reflect.Struct:
		require.Equal(t, "object", s.Type, where)
		require.NotNil(t, s.AdditionalProperties, "%s: additionalProperties is stated", where)
		require.False(t, *s.AdditionalProperties, "%s: unknown fields are refused, so the schema refuses them too", where)
		var names, required []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			require.NotEmpty(t, name, "%s.%s has a JSON name", typ.Name(), f.Name)
			names = append(names, name)
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				required = append(required, name)
			}
			prop, ok := s.Properties[name]
			require.True(t, ok, "%s: the schema has the field %q", where, name)
			if name == "contract_version" {
				require.EqualValues(t, ContractVersion, prop.Const, "%s: the schema's contract version is the code's", where)
			}
			requireSchemaIsType(t, root, prop, f.Type, where+"."+name)
		}
		require.ElementsMatch(t, names, slices.Collect(maps.Keys(s.Properties)), "%s: the schema's fields are the Go type's", where)
		require.ElementsMatch(t, required, s.Required, "%s: required exactly where Go always writes the field", where)
	default:
		t.Fatalf("%s: the contract has no %s", where, typ)
	}
}

// compileSchema compiles one of the published schemas, asserting formats (date-time).
func compileSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join(contractDir, file))
	require.NoError(t, err)
	return s
}

// requireValid checks that payload (JSON) satisfies schema file.
func requireValid(t *testing.T, file string, payload []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(payload)))
	require.NoError(t, err)
	require.NoError(t, compileSchema(t, file).Validate(v), "%s", payload)
}

func contractInput() JobInput {
	return JobInput{
		JobID: "render-1", AccountID: "acme", Kind: "render-4k", MaxUnits: 120,
		Work: activities.WorkRequest{InputRef: "s3://in/1"},
		Policy: Policy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts: 3, StartToClose: 30 * time.Minute, HeartbeatTimeout: time.Minute,
			LateResultWindow: 24 * time.Hour,
		},
	}
}

// TestContractWritesWhatTheSchemasSay checks that every payload the Go code writes — the job
// service's start, its result and redrive signals, the workflow's answers — is valid under its
// published schema, durations as strings and enumerations as their names, so that what a Go
// caller sends is what any other caller is told to send.
func TestContractWritesWhatTheSchemasSay(t *testing.T) {
	units := int64(42)
	finished := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		file  string
		value any
	}{
		{"job-input.schema.json", contractInput()},
		{"job-input.schema.json", JobInput{JobID: "j", AccountID: "a", Kind: "k"}},
		{"job-input.schema.json", JobInput{JobID: "j", AccountID: "a", Kind: "k",
			Heal: &HealRequest{Code: ledgerdb.ReasonStoppedByOperator, Reason: "terminated", PreviousRunID: "r1"}}},
		{"result-signal.schema.json", ResultSignal{Attempt: 1, OutputRef: "s3://out", FinishedAt: finished, UnitsUsed: &units}},
		{"result-signal.schema.json", ResultSignal{Attempt: 2, OutputRef: "s3://out"}},
		{"redrive-signal.schema.json", RedriveRequest{By: "ops", Note: "pool fixed"}},
		{"charge-decision.schema.json", ChargeDecision{State: ledgerdb.StateRejected, MoneyState: ledgerdb.MoneyNotCharged, Reason: "insufficient credits"}},
		{"job-status.schema.json", JobStatus{JobID: "j", AccountID: "a", Kind: "k", State: ledgerdb.StateSubmitting, MoneyState: ledgerdb.MoneyPending}},
		{"job-status.schema.json", JobStatus{JobID: "j", AccountID: "a", Cost: 10, Kind: "k", UnitsUsed: &units, Charged: 4, Released: 6,
			State: ledgerdb.StateRecovered, MoneyState: ledgerdb.MoneyCharged, Attempts: 3, OutputRef: "s3://out"}},
	} {
		payload, err := json.Marshal(tc.value)
		require.NoError(t, err)
		requireValid(t, tc.file, payload)
	}
	payload, err := json.Marshal(contractInput())
	require.NoError(t, err)
	require.JSONEq(t, `{"contract_version":1,"job_id":"render-1","account_id":"acme","kind":"render-4k","max_units":120,
		"input_ref":"s3://in/1","policy":{"initial_interval":"1s","backoff_coefficient":2,"maximum_interval":"1m0s",
		"maximum_attempts":3,"start_to_close":"30m0s","heartbeat_timeout":"1m0s","late_result_window":"24h0m0s"}}`, string(payload))
}

// TestContractReadsBothForms checks that a worker reads a payload in the contract's form and in
// the legacy form (Go field names, durations in nanoseconds) alike — runs recorded before the
// contract replay, and operators' scripts keep working — and that what it writes reads back the
// same (the remembered-IDs rule: the start a worker reads is the job that was submitted, field for
// field).
func TestContractReadsBothForms(t *testing.T) {
	want := contractInput()
	legacy := `{"JobID":"render-1","AccountID":"acme","Kind":"render-4k","MaxUnits":120,"Work":{"InputRef":"s3://in/1"},
		"Policy":{"InitialInterval":1000000000,"BackoffCoefficient":2,"MaximumInterval":60000000000,"MaximumAttempts":3,
		"StartToClose":1800000000000,"HeartbeatTimeout":60000000000,"LateResultWindow":86400000000000}}`
	contract := `{"job_id":"render-1","account_id":"acme","kind":"render-4k","max_units":120,"input_ref":"s3://in/1",
		"policy":{"initial_interval":"1s","backoff_coefficient":2,"maximum_interval":"1m","maximum_attempts":3,
		"start_to_close":"30m","heartbeat_timeout":"1m","late_result_window":"24h"}}`
	written, err := json.Marshal(want)
	require.NoError(t, err)
	for name, payload := range map[string]string{"legacy": legacy, "contract": contract, "written": string(written)} {
		var got JobInput
		require.NoError(t, json.Unmarshal([]byte(payload), &got), name)
		require.NoError(t, got.Validate(JobWorkflowID("acme", "render-1")), name)
		require.Equal(t, want, got, name)
	}

	units := int64(7)
	wantSignal := ResultSignal{Attempt: 2, OutputRef: "s3://out", FinishedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), UnitsUsed: &units}
	for name, payload := range map[string]string{
		"legacy":   `{"Attempt":2,"OutputRef":"s3://out","FinishedAt":"2026-12-01T10:00:00Z","UnitsUsed":7}`,
		"contract": `{"contract_version":1,"attempt":2,"output_ref":"s3://out","finished_at":"2026-12-01T10:00:00Z","units_used":7}`,
	} {
		var got ResultSignal
		require.NoError(t, json.Unmarshal([]byte(payload), &got), name)
		got.ContractVersion = 0
		require.Equal(t, wantSignal, got, name)
	}
}

// TestContractRefusesWhatItCannotRead checks that an input the worker cannot read exactly is
// refused with a reason that names the problem, never guessed at (the price-list rule: a job is
// billed only as its sender meant): an unknown or misspelt field, an amount, a newer contract
// version, a duration that is not one, a wrong type. The input's decoding itself never fails — a
// run whose input failed to decode would retry its first task forever — so the refusal comes from
// Validate, and the run ends rejected with nothing charged. A signal it cannot read is refused the
// same way.
func TestContractRefusesWhatItCannotRead(t *testing.T) {
	workflowID := JobWorkflowID("acme", "j")
	for _, tc := range []struct{ payload, want string }{
		{`{"job_id":"j","account_id":"acme","kind":"k","max_unit":5}`, `unknown field "max_unit"`},
		{`{"job_id":"j","account_id":"acme","kind":"k","cost":5}`, `prices are set by the server`},
		{`{"job_id":"j","account_id":"acme","kind":"k","credits":5}`, `prices are set by the server`},
		{`{"contract_version":2,"job_id":"j","account_id":"acme","kind":"k"}`, `contract_version 2 is not one this worker reads`},
		{`{"job_id":"j","account_id":"acme","kind":"k","policy":{"start_to_close":"3 seconds"}}`, `"3 seconds" is not a duration`},
		{`{"job_id":"j","account_id":"acme","kind":"k","policy":{"retries":3}}`, `unknown field "retries"`},
		{`{"job_id":7,"account_id":"acme","kind":"k"}`, `cannot unmarshal number`},
		{`"render"`, `not a JSON object`},
		{`{"job_id":"j","account_id":"acme"}`, `kind`},
	} {
		var in JobInput
		require.NoError(t, json.Unmarshal([]byte(tc.payload), &in), tc.payload)
		err := in.Validate(workflowID)
		require.Error(t, err, tc.payload)
		require.Contains(t, err.Error(), tc.want, tc.payload)
	}

	for _, tc := range []struct{ payload, want string }{
		{`{"attempt":1,"output_ref":"s3://x","units":5}`, `unknown field "units"`},
		{`{"Attempt":1,"output_ref":"s3://x"}`, `"Attempt" is a legacy name and "output_ref" a contract one`},
		{`{"attempt":"1","output_ref":"s3://x"}`, `cannot unmarshal string`},
	} {
		var s ResultSignal
		err := json.Unmarshal([]byte(tc.payload), &s)
		require.Error(t, err, tc.payload)
		require.Contains(t, err.Error(), tc.want, tc.payload)
	}
	var s ResultSignal
	require.NoError(t, json.Unmarshal([]byte(`{"contract_version":2,"attempt":1,"output_ref":"s3://x"}`), &s))
	require.ErrorContains(t, s.Validate(1), "contract_version 2")
}

// TestContractIntegersAreTheSchemas checks that the worker and the published schemas agree on
// every way another language writes an integer (the price-list rule: a payload the schema accepts
// is billed as its sender meant, one it refuses is refused by the worker too): a zero fraction or
// an exponent (Python's 20.0, 2e1, -0.0) is the integer for both, and a fraction, a number beyond
// the field's range (1e400, Python's 1e+20 for an attempt) or a negative usage is refused by both.
// Each payload goes through the door it comes by: the start's input decoding and validation, and a
// current run's signal decoding and validation.
func TestContractIntegersAreTheSchemas(t *testing.T) {
	literals := []string{"0", "1", "20", "20.0", "2e1", "2.0E1", "2E+1", "200e-1", "-0.0", "-0", "0.0", "1.0", "1e0",
		"20.5", "0.5", "5e-1", "-1", "-1.0", "1e3", "1.0e3", "1001", "1e+20", "1e400", "-1e400",
		"1073741824", "1073741825", "31622400", "31622400.0", "31622401",
		"9223372036854775807", "9223372036854775807.0", "9223372036854775808", "9.3e18"}
	run := &meteredJob{version: latestMeteredJobVersion}
	signal := func(payload string, v interface{ Validate() error }) error {
		p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)}, Data: []byte(payload)}
		if err := run.decode(converter.NewRawValue(p), v); err != nil {
			return err
		}
		return v.Validate()
	}
	start := func(payload string) error {
		var in JobInput
		if err := json.Unmarshal([]byte(payload), &in); err != nil {
			return err
		}
		return in.Validate(JobWorkflowID("acme", "j"))
	}
	// The worker reads an explicit contract_version 0 as the version absent, 1, where the schema
	// refuses it: a difference of what 0 means, not of how a number is written, so the zeros are
	// left out of those rows.
	zero := map[string]bool{"0": true, "-0": true, "0.0": true, "-0.0": true}
	for _, tc := range []struct {
		file, template string
		code           func(payload string) error
	}{
		{"result-signal.schema.json", `{"attempt":1,"output_ref":"s3://x","units_used":%s}`,
			func(p string) error { return signal(p, &anyAttempt{}) }},
		{"result-signal.schema.json", `{"attempt":%s,"output_ref":"s3://x"}`,
			func(p string) error { return signal(p, &anyAttempt{}) }},
		{"result-signal.schema.json", `{"contract_version":%s,"attempt":1,"output_ref":"s3://x"}`,
			func(p string) error { return signal(p, &anyAttempt{}) }},
		{"redrive-signal.schema.json", `{"contract_version":%s,"by":"ops"}`,
			func(p string) error { return signal(p, &RedriveRequest{}) }},
		{"job-input.schema.json", `{"job_id":"j","account_id":"acme","kind":"k","max_units":%s}`, start},
		{"job-input.schema.json", `{"job_id":"j","account_id":"acme","kind":"k","policy":{"maximum_attempts":%s}}`, start},
		{"job-input.schema.json", `{"contract_version":%s,"job_id":"j","account_id":"acme","kind":"k"}`, start},
	} {
		schema := compileSchema(t, tc.file)
		for _, literal := range literals {
			if zero[literal] && strings.Contains(tc.template, `"contract_version":%s`) {
				continue
			}
			payload := fmt.Sprintf(tc.template, literal)
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(payload))
			require.NoError(t, err)
			schemaErr, codeErr := schema.Validate(v), tc.code(payload)
			require.Equal(t, schemaErr == nil, codeErr == nil,
				"%s: %s\n  the schema says: %v\n  the worker says: %v", tc.file, payload, schemaErr, codeErr)
		}
	}
}

// anyAttempt is a result signal checked as a job whose work may have reached any attempt the
// ledger can record would check it: the schema cannot know how many attempts a job ran.
type anyAttempt struct{ ResultSignal }

// Validate checks the signal against the ledger's own bound on attempts.
func (s *anyAttempt) Validate() error { return s.ResultSignal.Validate(1 << 30) }

// TestPolicyRefusalNamesTheFirstBadField checks that a policy with several durations out of range
// is refused with the same words every time, naming the first in the policy's order. The refusal
// is what a job with a bad policy leaves — it is refused before any charge, so its rows sum to 0
// (the net-effect rule) — and the workflow writes it, so a replay must reach the same words.
func TestPolicyRefusalNamesTheFirstBadField(t *testing.T) {
	bad := Policy{
		InitialInterval: -time.Second, MaximumInterval: -time.Second, StartToClose: -time.Second,
		HeartbeatTimeout: -time.Second, LateResultWindow: -time.Second,
	}
	const want = "the policy's initial interval is -1s; it must be between 0 and "
	for range 50 {
		err := bad.Validate()
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), want), "refusal %q, want it to start %q", err, want)
	}
}
