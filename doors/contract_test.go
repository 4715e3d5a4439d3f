package doors_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// contractInput is a MeteredJob input in the published JSON contract (contract/
// job-input.schema.json), typed as a TypeScript or Python engineer writes it from the schema:
// snake_case names, durations as strings. It is written out by hand, not marshalled from a Go
// type, so that the test speaks the contract alone.
func contractInput(jobID, accountID, kind, inputRef string) string {
	p := doorPolicy()
	return fmt.Sprintf(`{"contract_version":1,"job_id":%q,"account_id":%q,"kind":%q,"input_ref":%q,`+
		`"policy":{"initial_interval":%q,"backoff_coefficient":%g,"maximum_interval":%q,"maximum_attempts":%d,`+
		`"start_to_close":%q,"heartbeat_timeout":%q,"late_result_window":%q}}`,
		jobID, accountID, kind, inputRef,
		p.InitialInterval, p.BackoffCoefficient, p.MaximumInterval, p.MaximumAttempts,
		p.StartToClose, p.HeartbeatTimeout, p.LateResultWindow)
}

// contractStatus asks a job's workflow for its status with `temporal workflow query`, read as
// the contract's JSON object (job-status.schema.json), not through a Go type.
func (e *env) contractStatus(t *testing.T, workflowID string) map[string]any {
	t.Helper()
	out := e.cli.must(t, "workflow", "query", "--workflow-id", workflowID, "--type", workflows.QueryStatus, "--output", "json")
	var answer struct {
		QueryResult []map[string]any `json:"queryResult"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &answer), "the CLI's query output:\n%s", out)
	require.Len(t, answer.QueryResult, 1, "the CLI's query output:\n%s", out)
	return answer.QueryResult[0]
}

// awaitContractState queries until the job's status says state, and answers that status.
func (e *env) awaitContractState(t *testing.T, workflowID string, state ledgerdb.State) map[string]any {
	t.Helper()
	var status map[string]any
	require.Eventually(t, func() bool {
		status = e.contractStatus(t, workflowID)
		return status["state"] == string(state)
	}, waitLimit, 250*time.Millisecond, "the job never reached %s: %v", state, status)
	return status
}

// submitWithUpdate submits a job with `temporal workflow execute-update-with-start`, as a backend
// service's SDK does: start (or join) the job's workflow and wait for its charge-decision
// update. It answers the update's result, read as the contract's JSON object.
func (e *env) submitWithUpdate(t *testing.T, workflowID, input string) map[string]any {
	t.Helper()
	out := e.cli.must(t, "workflow", "execute-update-with-start", "--update-name", workflows.UpdateChargeDecision,
		"--workflow-id", workflowID, "--type", workflows.WorkflowType, "--task-queue", e.Config.Temporal.TaskQueue,
		"--id-conflict-policy", "UseExisting", "--input", input, "--output", "json")
	var answer struct {
		UpdateResult map[string]any `json:"updateResult"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &answer), "the CLI's output:\n%s", out)
	require.NotNil(t, answer.UpdateResult, "the CLI's output:\n%s", out)
	return answer.UpdateResult
}

// TestCLIStoriesThroughTheContract checks that another program can bill a job through the
// published JSON contract alone — the `temporal` CLI standing in for any Temporal SDK: no Go
// type, no placeholder written first. For each story the ledger holds what the money rules say:
//   - delivered (Update-With-Start, then the charge-decision answers "charged"): one charge of
//     the price list's figure, settled at the usage the work reported (the net-effect rule);
//   - refunded then recovered: the work fails for good, the charge is refunded, and a late
//     result signalled in the contract's form reclaims it once (the append-only and reversing-pairs rules);
//   - rejected: an unknown kind, more units than the kind allows, an amount or a misspelt field
//     in the input: the run ends rejected with the reason, and nothing is written (the price-list rule);
//   - a second start of a job with a different request charges nothing (the remembered-IDs rule), and its run
//     shows the job as the ledger has it (delivered), never rejected.
//
// The audit over the test's jobs is clean.
func TestCLIStoriesThroughTheContract(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 500)
	fixed := ledgertest.Fixed(t, e.Store, 40)
	metered := ledgertest.Metered(t, e.Store, 2, 30)

	t.Run("delivered", func(t *testing.T) {
		j := e.job(t, "delivered")
		decision := e.submitWithUpdate(t, j.workflowID, contractInput(j.id, e.acct, metered, "sim:ok+used:12"))
		require.Equal(t, map[string]any{"state": "running", "money_state": "charged", "reason": ""}, decision)
		status := e.awaitContractState(t, j.workflowID, ledgerdb.StateDelivered)
		require.Equal(t, "charged", status["money_state"])
		require.EqualValues(t, 60, status["cost"], "the hold: 30 GPU-seconds at 2 credits")
		require.EqualValues(t, 12, status["units_used"])
		require.EqualValues(t, 24, status["charged"])
		require.Equal(t, fmt.Sprintf("sim://%s/attempt-1", j.id), status["output_ref"])
		require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -60}, {Kind: ledgerdb.KindRelease, Amount: 36}},
			ledgertest.Rows(t, e.Store, j.key))

		// The same start again (a retried submission) joins the job: the same answer, no charge.
		again := e.submitWithUpdate(t, j.workflowID, contractInput(j.id, e.acct, metered, "sim:ok+used:12"))
		require.Equal(t, "delivered", again["state"])
		require.Len(t, ledgertest.Rows(t, e.Store, j.key), 2)
	})

	t.Run("refunded then recovered", func(t *testing.T) {
		j := e.job(t, "recovered")
		e.startDirectlyWith(t, j.id, e.acct, contractInput(j.id, e.acct, fixed, "sim:fail"))
		status := e.awaitContractState(t, j.workflowID, ledgerdb.StateRefunded)
		require.Equal(t, "refunded", status["money_state"])
		require.Equal(t, true, status["dead_lettered"])
		attempts := int(status["attempts"].(float64))
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund)

		result := fmt.Sprintf(`{"contract_version":1,"attempt":%d,"output_ref":"s3://late/%s","finished_at":%q}`,
			attempts, j.id, time.Now().UTC().Format(time.RFC3339))
		require.NoError(t, e.cli.signal(testContext(t), j.workflowID, result))
		status = e.awaitContractState(t, j.workflowID, ledgerdb.StateRecovered)
		require.Equal(t, "charged", status["money_state"])
		require.Equal(t, false, status["dead_lettered"])
		require.Equal(t, "s3://late/"+j.id, status["output_ref"])

		// The recovery closed the workflow: the same result again is refused by Temporal, and
		// the refund stays reclaimed once.
		require.ErrorContains(t, e.cli.signal(testContext(t), j.workflowID, result), "already completed")
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	})

	t.Run("rejected: unknown kind", func(t *testing.T) {
		j := e.job(t, "unknown-kind")
		decision := e.submitWithUpdate(t, j.workflowID, contractInput(j.id, e.acct, "no-such-kind", "sim:ok"))
		require.Equal(t, "rejected", decision["state"])
		require.Equal(t, "not_charged", decision["money_state"])
		require.Equal(t, `the price list has no kind "no-such-kind"`, decision["reason"])
		e.requireNoJob(t, j.key, "nothing written")
	})

	t.Run("rejected: more units than the kind allows", func(t *testing.T) {
		j := e.job(t, "too-many-units")
		input := fmt.Sprintf(`{"job_id":%q,"account_id":%q,"kind":%q,"max_units":31,"input_ref":"sim:ok"}`, j.id, e.acct, metered)
		decision := e.submitWithUpdate(t, j.workflowID, input)
		require.Equal(t, "rejected", decision["state"])
		require.Equal(t, "not_charged", decision["money_state"])
		require.Contains(t, decision["reason"], "invalid input")
		require.Contains(t, decision["reason"], "30")
		e.requireNoJob(t, j.key, "nothing written")
	})

	for _, bad := range []struct{ tag, field, want string }{
		{"priced", `"cost":1`, "prices are set by the server"},
		{"misspelt", `"max_unit":5`, `unknown field "max_unit"`},
	} {
		t.Run("rejected: "+bad.tag, func(t *testing.T) {
			j := e.job(t, bad.tag)
			input := fmt.Sprintf(`{"job_id":%q,"account_id":%q,"kind":%q,%s}`, j.id, e.acct, metered, bad.field)
			final := e.awaitClosed(t, e.startDirectlyWith(t, j.id, e.acct, input))
			require.Equal(t, ledgerdb.StateRejected, final.State)
			require.Contains(t, final.Reason, bad.want)
			e.requireNoJob(t, j.key, "nothing written")
		})
	}

	t.Run("rejected: another request under the job's ID", func(t *testing.T) {
		j := e.job(t, "delivered-2")
		e.awaitClosed(t, e.startDirectlyWith(t, j.id, e.acct, contractInput(j.id, e.acct, fixed, "sim:ok")))
		// Temporal lets a closed workflow ID start again; the ledger's fingerprint refuses the
		// new request and the ID's charge stands once.
		e.cli.must(t, "workflow", "start", "--type", workflows.WorkflowType, "--task-queue", e.Config.Temporal.TaskQueue,
			"--workflow-id", j.workflowID, "--input", contractInput(j.id, e.acct, fixed, "sim:another-input"))
		final := e.awaitClosed(t, j.workflowID)
		// The run charged nothing and shows the job as the ledger has it: delivered, not rejected.
		require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
		require.Equal(t, ledgerdb.MoneyCharged, final.MoneyState)
		require.Contains(t, final.Reason, "this start was refused")
		require.Contains(t, final.Reason, "different request")
		state, _ := e.latestBillingState(t, j.workflowID)
		require.Equal(t, string(ledgerdb.StateDelivered), state, "the UI does not contradict the ledger")
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)
	})

	e.requireEnd(t, 500-24-40-40)
}
