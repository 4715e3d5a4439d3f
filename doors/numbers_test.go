package doors_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// pythonInput is a MeteredJob input as Python's json.dumps writes it — ", " and ": " between
// fields, and its integers floats when the program computed them as floats: one attempt
// ("maximum_attempts": 1.0), timeouts that a loaded machine cannot make its one attempt miss
// (workertest.QuickPolicy's), and a late-result window long enough that the job still listens
// whatever the machine's load. It is written out by hand, byte for byte, and the CLI sends it as
// typed.
func pythonInput(jobID, accountID, kind, inputRef string) string {
	return fmt.Sprintf(`{"job_id": %q, "account_id": %q, "kind": %q, "input_ref": %q, `+
		`"policy": {"initial_interval": "500ms", "maximum_attempts": 1.0, "start_to_close": "1m", "heartbeat_timeout": "30s", `+
		`"late_result_window": "10m"}}`, jobID, accountID, kind, inputRef)
}

// signalled answers the payloads of the result signals a job's history recorded, as their bytes
// arrived: what the worker was given to read.
func (e *env) signalled(t *testing.T, workflowID string) []string {
	t.Helper()
	var out []string
	for _, ev := range e.cli.history(t, workflowID).GetEvents() {
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s != nil && s.GetSignalName() == workflows.SignalResult {
			for _, p := range s.GetInput().GetPayloads() {
				out = append(out, string(p.GetData()))
			}
		}
	}
	return out
}

// TestCLINumbersAsEveryLanguageWritesThem checks the net-effect and price-list rules at `temporal
// workflow start` and `temporal workflow signal` when another language wrote the payload: Python's
// json.dumps writes a float as 50.0, other writers say 5e1, and JSON Schema counts both integers.
//   - A start with "maximum_attempts": 1.0 runs one attempt (before, it ended rejected as invalid
//     input); one with 1.5 ends rejected naming the field, nothing written.
//   - A refunded metered job's late result with "units_used": 50.0 — the bytes the job's history
//     shows — is reclaimed and settled at 50 units: charge −100, refund +100, reclaim −100,
//     release +50, net −50 (before, the signal was ignored and the delivered work stayed refunded).
//   - A result the worker cannot bill ("units_used": 50.5) for a job that could still take one
//     changes no money and raises an alarm: a ledger_alarms row of the step "result", which the
//     audit reports as ledger_alarm while the job is unsettled; the billable result that follows
//     (5e1) settles it, and the audit is clean again.
//   - The charge-decision update, started with the same input, answers "charged".
func TestCLINumbersAsEveryLanguageWritesThem(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 1000)
	ctx := testContext(t)
	metered := ledgertest.Metered(t, e.Store, 1, 100)
	late := `{"attempt":1,"output_ref":"s3://x","units_used":50.0}`

	t.Run("a late result written by Python is billed", func(t *testing.T) {
		j := e.job(t, "python")
		e.startDirectlyWith(t, j.id, e.acct, pythonInput(j.id, e.acct, metered, "sim:fail"))
		status := e.awaitContractState(t, j.workflowID, ledgerdb.StateRefunded)
		require.EqualValues(t, 1, status["attempts"], "maximum_attempts 1.0 is one attempt")
		ledgertest.RequireRows(t, e.Store, j.key, 100, ledgerdb.KindCharge, ledgerdb.KindRefund)

		require.NoError(t, e.cli.signal(ctx, j.workflowID, late))
		final := e.awaitClosed(t, j.workflowID)
		require.Equal(t, ledgerdb.StateRecovered, final.State, "%+v", final)
		require.Zero(t, final.IgnoredSignals, final.LastIgnored)
		require.Equal(t, []string{late}, e.signalled(t, j.workflowID), "the worker was given 50.0, as typed")
		require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -100}, {Kind: ledgerdb.KindRefund, Amount: 100},
			{Kind: ledgerdb.KindReclaim, Amount: -100}, {Kind: ledgerdb.KindRelease, Amount: 50}}, ledgertest.Rows(t, e.Store, j.key))
		job, err := e.Store.Job(ctx, j.key)
		require.NoError(t, err)
		require.Equal(t, int64(50), *job.UnitsUsed)
	})

	t.Run("an unbillable result raises an alarm", func(t *testing.T) {
		j := e.job(t, "alarm")
		e.startDirectlyWith(t, j.id, e.acct, pythonInput(j.id, e.acct, metered, "sim:fail"))
		e.awaitContractState(t, j.workflowID, ledgerdb.StateRefunded)

		require.NoError(t, e.cli.signal(ctx, j.workflowID, `{"attempt": 1, "output_ref": "s3://x", "units_used": 50.5}`))
		var alarms []ledgerdb.Alarm
		require.Eventually(t, func() bool {
			var err error
			alarms, err = e.Store.Alarms(ctx, 10, e.acct)
			return err == nil && len(alarms) > 0
		}, waitLimit, 100*time.Millisecond, "no alarm was raised")
		require.Len(t, alarms, 1)
		require.Equal(t, j.id, alarms[0].JobID)
		require.Equal(t, ledgerdb.AlarmUnbillableResult, alarms[0].Step)
		require.Contains(t, alarms[0].Message, `"units_used" must be a whole number`)
		status := e.cli.queryStatus(t, j.workflowID)
		require.Equal(t, ledgerdb.StateRefunded, status.State, "nothing billed")
		require.Equal(t, 1, status.IgnoredSignals)
		ledgertest.RequireRows(t, e.Store, j.key, 100, ledgerdb.KindCharge, ledgerdb.KindRefund)
		report := e.audit(t, e.p+"alarm")
		require.Len(t, report.Of(invariants.KindLedgerAlarm), 1, "the audit reports the alarm: %+v", report.Violations)
		require.Contains(t, report.Of(invariants.KindLedgerAlarm)[0].Message, "could not be billed")

		require.NoError(t, e.cli.signal(ctx, j.workflowID, `{"attempt":1,"output_ref":"s3://x","units_used":5e1}`))
		final := e.awaitClosed(t, j.workflowID)
		require.Equal(t, ledgerdb.StateRecovered, final.State, "%+v", final)
		require.Equal(t, int64(50), *final.UnitsUsed)
		e.requireAudit(t, e.p+"alarm")
	})

	t.Run("a start with a fraction is refused", func(t *testing.T) {
		j := e.job(t, "fraction")
		input := strings.Replace(pythonInput(j.id, e.acct, metered, "sim:ok"), `"maximum_attempts": 1.0`, `"maximum_attempts": 1.5`, 1)
		final := e.awaitClosed(t, e.startDirectlyWith(t, j.id, e.acct, input))
		require.Equal(t, ledgerdb.StateRejected, final.State, "%+v", final)
		require.Contains(t, final.Reason, `"maximum_attempts" must be a whole number`)
		e.requireNoJob(t, j.key, "nothing written")
	})

	t.Run("the charge-decision update", func(t *testing.T) {
		j := e.job(t, "update")
		decision := e.submitWithUpdate(t, j.workflowID, strings.Replace(pythonInput(j.id, e.acct, metered, "sim:ok+used:12"),
			`"kind"`, `"max_units": 2e1, "kind"`, 1))
		require.Equal(t, map[string]any{"state": "running", "money_state": "charged", "reason": ""}, decision)
		final := e.awaitClosed(t, j.workflowID)
		require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
		require.Equal(t, int64(20), final.Cost, "max_units 2e1: a hold of 20 units")
		require.Equal(t, int64(12), final.Charged)
	})

	e.requireEnd(t, 1000-50-50-12)
}
