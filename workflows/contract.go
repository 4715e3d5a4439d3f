package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jobbill/jobbill/internal/jsonint"
)

// The JSON contract. Product code in any language starts a MeteredJob, signals it and queries it
// with its own Temporal SDK (or the `temporal` CLI), so the payloads are a published contract:
// snake_case field names, durations as strings ("30s"), enumerations as strings, one JSON Schema
// file per payload in contract/ (contract_test.go keeps the Go types and the schemas equal).
//
// The contract evolves without breaking running workflows:
//   - every payload may carry contract_version; absent means 1, and a version this worker does not
//     know is refused (a start ends rejected, a signal is ignored), never half-understood;
//   - unknown fields are refused the same way, so a misspelt field (say "max_unit") can never
//     silently bill a job differently from what its sender meant;
//   - an integer may be written with a zero fraction or an exponent (50.0, 5e1: what Python's
//     json.dumps and JavaScript write), as JSON Schema's "integer" allows, and a fraction (50.5)
//     is refused (package internal/jsonint); runs from before versionWholeNumbers read the input
//     and their signals as they did, refusing both;
//   - the Go field names and integer nanosecond durations that runs recorded before the contract
//     (the "legacy" form) are still read, because a worker replays those histories, and operators'
//     scripts may still send them.
//
// Workers read both forms; the job service writes the contract's. A deployment therefore updates
// its workers before the programs that start jobs (docs/operations.md, "Upgrading").

// ContractVersion is the version of the JSON contract this code writes and the newest it reads.
const ContractVersion = 1

// checkContractVersion says why a payload of contract version v cannot be read, or nil; 0 is a
// payload that did not say, which is version 1.
func checkContractVersion(v int) error {
	if v < 0 || v > ContractVersion {
		return fmt.Errorf("contract_version %d is not one this worker reads (1 to %d): update the worker first", v, ContractVersion)
	}
	return nil
}

// amountFields are the names under which a caller might try to set a job's price: prices are set
// by the server (the price-list rule), so a start carrying one is refused with that reason, not as
// an unknown field.
var amountFields = []string{"cost", "amount", "price", "unit_price", "credits"}

// jobInputWire is [JobInput] on the wire, as job-input.schema.json describes it.
type jobInputWire struct {
	ContractVersion int          `json:"contract_version,omitempty"`
	JobID           string       `json:"job_id"`
	AccountID       string       `json:"account_id"`
	Kind            string       `json:"kind"`
	MaxUnits        int64        `json:"max_units,omitempty"`
	InputRef        string       `json:"input_ref,omitempty"`
	Policy          *Policy      `json:"policy,omitempty"`
	Heal            *HealRequest `json:"heal,omitempty"`
}

// MarshalJSON writes the input in the contract's form. The work request's other fields are the
// workflow's to fill in, so only its input reference travels. An input of a job from before the
// price list (a cost and no kind: a heal run's, say) keeps the legacy form, which can say it.
func (in JobInput) MarshalJSON() ([]byte, error) {
	if in.Cost != 0 || in.Kind == "" {
		type legacy JobInput
		return json.Marshal(legacy(in))
	}
	w := jobInputWire{
		ContractVersion: ContractVersion,
		JobID:           in.JobID, AccountID: in.AccountID, Kind: in.Kind, MaxUnits: in.MaxUnits,
		InputRef: in.Work.InputRef, Heal: in.Heal,
	}
	if in.Policy != (Policy{}) {
		w.Policy = &in.Policy
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the contract's form or the legacy one, its integers as every language
// writes them (jsonint.Normalize). It never fails: a workflow whose input cannot be decoded would
// fail its first task again and again and never end, so an unreadable input is kept as a problem
// that [JobInput.Validate] reports, and the run ends rejected with that reason and nothing
// charged.
func (in *JobInput) UnmarshalJSON(data []byte) error {
	*in = JobInput{}
	whole := jsonint.Normalize(data)
	if err := in.decode(whole); err != nil {
		*in = JobInput{problem: err}
	}
	if !bytes.Equal(whole, data) {
		in.asWritten = bytes.Clone(data)
	}
	return nil
}

// readAsBefore is the input as a run of a version before versionWholeNumbers read it: one whose
// integers were written with a zero fraction or an exponent is read again as it was written, and
// refused as those runs refused it, so that they replay as they were recorded.
func (in JobInput) readAsBefore() JobInput {
	if in.asWritten == nil {
		return in
	}
	var before JobInput
	if err := before.decode(in.asWritten); err != nil {
		before = JobInput{problem: err}
	}
	return before
}

func (in *JobInput) decode(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("the input is not a JSON object: %w", err)
	}
	if isLegacy(fields, "job_id", "account_id", "contract_version") {
		type legacy JobInput
		return readable(json.Unmarshal(data, (*legacy)(in)))
	}
	for _, name := range amountFields {
		if _, ok := fields[name]; ok {
			return fmt.Errorf("the input carries an amount (%q); prices are set by the server: name the job's kind", name)
		}
	}
	var w jobInputWire
	if err := decodeStrict(data, &w); err != nil {
		return err
	}
	if err := checkContractVersion(w.ContractVersion); err != nil {
		return err
	}
	if w.Kind == "" {
		// Only runs from before the price list had no kind; they are read in the legacy form.
		return errors.New("the input names no kind: every job names a kind of the price list")
	}
	*in = JobInput{
		JobID: w.JobID, AccountID: w.AccountID, Kind: w.Kind, MaxUnits: w.MaxUnits,
		Work: in.Work, Heal: w.Heal,
	}
	in.Work.InputRef = w.InputRef
	if w.Policy != nil {
		in.Policy = *w.Policy
	}
	return nil
}

// policyWire is [Policy] on the wire: durations as strings. Its field names are Policy's, so the
// legacy form (the Go field names) maps onto it too.
type policyWire struct {
	InitialInterval    duration `json:"initial_interval,omitempty"`
	BackoffCoefficient float64  `json:"backoff_coefficient,omitempty"`
	MaximumInterval    duration `json:"maximum_interval,omitempty"`
	MaximumAttempts    int32    `json:"maximum_attempts,omitempty"`
	StartToClose       duration `json:"start_to_close,omitempty"`
	HeartbeatTimeout   duration `json:"heartbeat_timeout,omitempty"`
	LateResultWindow   duration `json:"late_result_window,omitempty"`
}

// MarshalJSON writes the policy with its durations as strings ("30s"); zero fields, which take
// the defaults, are left out.
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyWire{
		InitialInterval: duration(p.InitialInterval), BackoffCoefficient: p.BackoffCoefficient,
		MaximumInterval: duration(p.MaximumInterval), MaximumAttempts: p.MaximumAttempts,
		StartToClose: duration(p.StartToClose), HeartbeatTimeout: duration(p.HeartbeatTimeout),
		LateResultWindow: duration(p.LateResultWindow),
	})
}

// UnmarshalJSON reads a policy in the contract's form or the legacy one (Go field names,
// durations as integers of nanoseconds).
func (p *Policy) UnmarshalJSON(data []byte) error {
	var w policyWire
	if err := decodeContract(data, &w); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	*p = Policy{
		InitialInterval: time.Duration(w.InitialInterval), BackoffCoefficient: w.BackoffCoefficient,
		MaximumInterval: time.Duration(w.MaximumInterval), MaximumAttempts: w.MaximumAttempts,
		StartToClose: time.Duration(w.StartToClose), HeartbeatTimeout: time.Duration(w.HeartbeatTimeout),
		LateResultWindow: time.Duration(w.LateResultWindow),
	}
	return nil
}

// duration is a time.Duration written as a string in time.ParseDuration's form ("1m30s"); it
// reads that form and, for the legacy form, an integer of nanoseconds.
type duration time.Duration

// MarshalJSON writes d as time.Duration.String does.
func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "30s" or, from the legacy form, 30000000000.
func (d *duration) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as \"30s\", \"5m\" or \"24h\"", s)
		}
		*d = duration(v)
		return nil
	}
	var ns int64
	if err := json.Unmarshal(data, &ns); err != nil {
		return fmt.Errorf("%s is not a duration such as \"30s\", \"5m\" or \"24h\"", data)
	}
	*d = duration(ns)
	return nil
}

// decodeContract decodes data into v, a pointer to a struct whose fields carry the contract's
// snake_case JSON names, reading the legacy form too: a key that is a field's Go name is taken
// as that field's contract name. Unknown fields are refused.
func decodeContract(data []byte, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return errors.New("not a JSON object")
	}
	if fields == nil {
		return errors.New("null where an object was expected")
	}
	renamed := make(map[string]json.RawMessage, len(fields))
	goNames := contractNames(reflect.TypeOf(v).Elem())
	var legacyKey, contractKey string
	for key, value := range fields {
		if name, ok := goNames[key]; ok {
			legacyKey, key = key, name
		} else if slices.Contains(slices.Collect(maps.Values(goNames)), key) {
			contractKey = key
		}
		renamed[key] = value
	}
	if legacyKey != "" && contractKey != "" {
		// Half of one form and half of the other is a payload written by guesswork.
		return fmt.Errorf("%q is a legacy name and %q a contract one: use the contract's names alone", legacyKey, contractKey)
	}
	normal, err := json.Marshal(renamed)
	if err != nil {
		return err
	}
	return decodeStrict(normal, v)
}

// contractNames maps the Go name of each field of struct type t to its JSON name, where the two
// differ.
func contractNames(t reflect.Type) map[string]string {
	names := make(map[string]string, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && name != f.Name {
			names[f.Name] = name
		}
	}
	return names
}

// decodeStrict decodes data into v, refusing fields v does not have and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return readable(err)
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// readable says why a number was refused for an integer field in the words of the one rule
// (jsonint.Refusal), naming the field as the payload does; any other error is returned as it is.
func readable(err error) error {
	if field, reason, ok := jsonint.Refusal(err); ok {
		return fmt.Errorf("%q %s", field, reason)
	}
	return err
}

// isLegacy reports whether a payload's fields are the legacy form: none of the contract's names
// that every contract payload of its type carries.
func isLegacy(fields map[string]json.RawMessage, contractNames ...string) bool {
	for _, name := range contractNames {
		if _, ok := fields[name]; ok {
			return false
		}
	}
	return true
}
