package workflows_test

// Numbers as every language writes them, at the workflow's doors. Python's json.dumps writes any
// float with a fraction ("20.0"), JavaScript writes large numbers with an exponent ("1e+21"), and
// hand-written or generated JSON says "2e1": JSON Schema counts each of them an integer when its
// value is whole, and so must the worker, or a delivered result goes unbilled. The payloads below
// are raw bytes, exactly as those libraries wrote them: the Go data converter never re-encodes a
// converter.RawValue.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// raw is a JSON payload as another language wrote it, sent to the workflow byte for byte.
func raw(json string) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     []byte(json),
	})
}

// TestLateResultWrittenByAnyLanguageIsBilled protects the net-effect and price-list rules at the
// result signal: a refunded metered job's late result whose integers are written with a zero
// fraction or an exponent — Python's json.dumps of a float, 2e1, 2.0E1, -0.0 — is the same result
// as one written with plain digits. The refund is reclaimed and the job settled at the units
// reported (charge, refund, reclaim, release: net −used × price), nothing ignored. Before, the
// worker could not decode 20.0 into an integer: the signal was ignored and the delivered work
// stayed refunded.
func TestLateResultWrittenByAnyLanguageIsBilled(t *testing.T) {
	for _, tc := range []struct {
		name, payload string
		used          int64
	}{
		{"python json.dumps", `{"attempt": 3, "output_ref": "s3://outputs/late", "units_used": 20.0}`, 20},
		{"python, the attempt a float too", `{"attempt": 3.0, "output_ref": "s3://outputs/late", "units_used": 20.0}`, 20},
		{"an exponent", `{"attempt":3,"output_ref":"s3://outputs/late","units_used":2e1}`, 20},
		{"a fraction and an upper-case exponent", `{"attempt":3,"output_ref":"s3://outputs/late","units_used":2.0E1}`, 20},
		{"a negative exponent", `{"attempt":3,"output_ref":"s3://outputs/late","units_used":200e-1}`, 20},
		{"negative zero", `{"attempt":3,"output_ref":"s3://outputs/late","units_used":-0.0}`, 0},
		{"the contract version a float", `{"contract_version":1.0,"attempt":3,"output_ref":"s3://outputs/late","units_used":20}`, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessOf(t, metered, "late-"+fmt.Sprint(tc.used), 100, timeOut)
			h.signalAt(10*time.Minute, workflows.SignalResult, raw(tc.payload))
			status := h.run()

			require.Equal(t, recovered, status.State, "%+v", status)
			assert.Zero(t, status.IgnoredSignals, status.LastIgnored)
			require.NotNil(t, status.UnitsUsed)
			assert.Equal(t, tc.used, *status.UnitsUsed)
			assert.Equal(t, tc.used*gpuPrice, status.Charged)
			assert.Equal(t, -tc.used*gpuPrice, h.ledger.Net(h.key()))
			assert.Equal(t, 100-tc.used*gpuPrice, h.ledger.Balance(account))
			_, alarmed := h.ledger.Alarm(h.key(), ledgerdb.AlarmUnbillableResult)
			assert.False(t, alarmed, "a billable result raises no alarm")
		})
	}
}

// TestUnbillableResultRaisesAnAlarm protects the net-effect rule where delivered work could go
// unbilled: a result signal the worker cannot bill — a fraction (20.5), a number beyond any integer
// (1e400, Python's 1e+20), an attempt that never ran — for a job that could still take one
// (running, or refunded and listening) is not taken and not only counted: it raises an alarm an
// operator sees (a ledger_alarms row for the step "result"), once per run however many such signals
// come. The job goes on, and a billable result that follows still settles it. Nothing is billed for
// the unbillable one.
func TestUnbillableResultRaisesAnAlarm(t *testing.T) {
	for _, tc := range []struct{ name, payload, want string }{
		{"a fraction", `{"attempt": 3, "output_ref": "s3://forged", "units_used": 20.5}`, `"units_used" must be a whole number`},
		{"beyond any integer", `{"attempt":3,"output_ref":"s3://forged","units_used":1e400}`, `"units_used" is 1e400`},
		{"python's 1e+20", `{"attempt": 3, "output_ref": "s3://forged", "units_used": 1e+20}`, `"units_used" is 1e+20`},
		{"an attempt as a fraction", `{"attempt":2.5,"output_ref":"s3://forged"}`, `"attempt" must be a whole number`},
		{"an attempt that never ran", `{"attempt":7,"output_ref":"s3://forged"}`, "attempt 7 is not an attempt of this job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessOf(t, metered, "unbillable", 100, timeOut)
			h.signalAt(10*time.Minute, workflows.SignalResult, raw(tc.payload))
			h.signalAt(11*time.Minute, workflows.SignalResult, raw(tc.payload))
			h.signalAt(12*time.Minute, workflows.SignalResult, raw(`{"attempt": 3, "output_ref": "s3://outputs/late", "units_used": 9.0}`))
			status := h.run()

			require.Equal(t, recovered, status.State, "%+v", status)
			assert.Equal(t, "s3://outputs/late", status.OutputRef, "the unbillable result was not taken")
			assert.Equal(t, 2, status.IgnoredSignals)
			assert.Contains(t, status.LastIgnored, tc.want)
			msg, alarmed := h.ledger.Alarm(h.key(), ledgerdb.AlarmUnbillableResult)
			require.True(t, alarmed, "an alarm was raised")
			assert.Contains(t, msg, tc.want)
			assert.Equal(t, 1, countCalls(h.ledger, activitiestest.OpRaiseAlarm, h.key()), "one alarm per run")
			assert.Equal(t, int64(-18), h.ledger.Net(h.key()), "billed at the 9 units of the billable result")
		})
	}

	t.Run("while the work runs", func(t *testing.T) {
		h := newHarness(t, "unbillable-running", 100, failTransiently)
		h.signalAt(500*time.Millisecond, workflows.SignalResult, raw(`{"attempt":1,"output_ref":"s3://forged","units_used":0.5}`))
		h.signalAt(2*time.Second, workflows.SignalResult, raw(`{"attempt":1.0,"output_ref":"s3://ok"}`))
		status := h.run()

		require.Equal(t, delivered, status.State, "%+v", status)
		assert.Equal(t, "s3://ok", status.OutputRef)
		_, alarmed := h.ledger.Alarm(h.key(), ledgerdb.AlarmUnbillableResult)
		assert.True(t, alarmed, "a running job could still take the result: an alarm")
		h.assertLedger(60, ledgerdb.KindCharge)
	})
}

// directStart is a harness for a run started by another Temporal client: the account holds 100
// credits and the ledger no placeholder, which the run writes itself from its input.
func directStart(t *testing.T, jobID string, work workFunc) *harness {
	t.Helper()
	ledger := newLedger()
	ledger.Grant(account, 100)
	h := harnessOver(t, ledger, account, jobID, work)
	h.kind = metered
	return h
}

// start runs the workflow to its end from input, a raw payload, and answers its final status. The
// workflow is named by its type: given the function, the test environment would refuse an
// argument that is not a JobInput; given the name, it hands the payload to the SDK's decoding,
// as a worker does.
func (h *harness) start(input converter.RawValue) workflows.JobStatus {
	h.t.Helper()
	h.env.ExecuteWorkflow(workflows.WorkflowType, input)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var status workflows.JobStatus
	require.NoError(h.t, h.env.GetWorkflowResult(&status))
	return status
}

// TestStartWrittenByAnyLanguageRuns protects the price-list and remembered-IDs rules at the start
// door: an input whose integers are written with a zero fraction or an exponent
// ("maximum_attempts": 1.0, "max_units": 2e1) is the job its sender meant — it runs under that
// policy and holds that many units — and one with a fraction ("maximum_attempts": 1.5) or a number
// beyond its range ends rejected, naming the field, with nothing written. Before, the first was
// rejected as invalid input.
func TestStartWrittenByAnyLanguageRuns(t *testing.T) {
	input := func(jobID, maxUnits, attempts string) converter.RawValue {
		return raw(fmt.Sprintf(`{"job_id": %q, "account_id": %q, "kind": %q, "max_units": %s, "input_ref": "s3://in/1", `+
			`"policy": {"initial_interval": "1s", "backoff_coefficient": 2.0, "maximum_attempts": %s, "late_result_window": "1h"}}`,
			jobID, account, metered, maxUnits, attempts))
	}
	t.Run("runs", func(t *testing.T) {
		for _, tc := range []struct{ name, maxUnits, attempts string }{
			{"python floats", "20.0", "1.0"},
			{"exponents", "2e1", "1E0"},
			{"fractions and exponents", "0.2e2", "10e-1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := directStart(t, "start", timeOut)
				status := h.start(input("start", tc.maxUnits, tc.attempts))

				require.Equal(t, refunded, status.State, "%+v", status)
				assert.Equal(t, 1, h.workCallCount(), "maximum_attempts 1: one attempt")
				assert.Equal(t, int64(20*gpuPrice), status.Cost, "max_units 20: the hold is 20 units")
				h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
			})
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct{ name, maxUnits, attempts, want string }{
			{"a fraction of an attempt", "20", "1.5", `"maximum_attempts" must be a whole number`},
			{"a fraction of a unit", "20.5", "1", `"max_units" must be a whole number`},
			{"attempts beyond any integer", "20", "1e400", `"maximum_attempts" is 1e400`},
			{"attempts beyond the policy's range", "20", "1.0e4", "maximum attempts is 10000"},
			{"units beyond their range", "1e8", "1", "max units is 100000000"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := directStart(t, "start", timeOut)
				status := h.start(input("start", tc.maxUnits, tc.attempts))

				require.Equal(t, rejected, status.State, "%+v", status)
				assert.Contains(t, status.Reason, tc.want)
				assert.Zero(t, h.workCallCount())
				assert.Empty(t, h.ledger.Calls(), "nothing written")
				assert.Equal(t, int64(100), h.ledger.Balance(account))
			})
		}
	})
}

// TestRunsBeforeWholeNumbersReadAsTheyDid protects replay (and so every money rule of the runs
// in flight across a deployment): a run recorded before integers could be written with a zero
// fraction ignored such a result signal and raised no alarm, and refused such an input, so a
// worker replaying it must do the same: the refunded job stays refunded (net 0), the start ends
// rejected with nothing written.
func TestRunsBeforeWholeNumbersReadAsTheyDid(t *testing.T) {
	before := func(h *harness) {
		h.env.OnGetVersion(workflows.MeteredJobVersionID, workflow.DefaultVersion, workflows.LatestMeteredJobVersion).
			Return(workflows.VersionContract)
	}
	t.Run("a result signal", func(t *testing.T) {
		h := newHarnessOf(t, metered, "before", 100, timeOut)
		before(h)
		h.signalAt(10*time.Minute, workflows.SignalResult, raw(`{"attempt": 3, "output_ref": "s3://outputs/late", "units_used": 20.0}`))
		h.signalAt(11*time.Minute, workflows.SignalResult, raw(`{"attempt": 7, "output_ref": "s3://outputs/late"}`))
		status := h.run()

		assert.Equal(t, refunded, status.State)
		assert.Equal(t, 2, status.IgnoredSignals)
		assert.Zero(t, countCalls(h.ledger, activitiestest.OpRaiseAlarm, h.key()), "no alarm")
		h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
	})
	t.Run("a start", func(t *testing.T) {
		h := directStart(t, "before-start", timeOut)
		before(h)
		status := h.start(raw(fmt.Sprintf(
			`{"job_id": "before-start", "account_id": %q, "kind": %q, "policy": {"maximum_attempts": 1.0}}`, account, metered)))

		assert.Equal(t, rejected, status.State)
		assert.Contains(t, status.Reason, "maximum_attempts")
		assert.Empty(t, h.ledger.Calls(), "nothing written")
	})
}
