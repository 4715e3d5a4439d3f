package jobs

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// heldTable is the workflow_id_held part of the submission rules' decision table, which the
// TypeScript Temporal helper's tests read too (clients/typescript/test/decide.test.ts).
type heldTable struct {
	WorkflowIDHeld []struct {
		Name         string       `json:"name"`
		WorkflowType string       `json:"workflow_type"`
		Running      bool         `json:"running"`
		Want         heldIDAction `json:"want"`
	} `json:"workflow_id_held"`
}

// TestOnWorkflowIDHeldFollowsTheTable checks the job service's rule for a start refused because
// a workflow holds the job's workflow ID against every row of the shared table (the remembered-IDs
// rule: a closed job's ID never starts a run again, and a submission never sends its charge
// decision into another program's workflow; the idempotent-doors rule: a submission repeated while
// the job runs joins it).
func TestOnWorkflowIDHeldFollowsTheTable(t *testing.T) {
	data, err := os.ReadFile("../apiclient/testdata/submission-decisions.json")
	require.NoError(t, err)
	var table heldTable
	require.NoError(t, json.Unmarshal(data, &table))
	require.NotEmpty(t, table.WorkflowIDHeld)
	seen := map[heldIDAction]bool{}
	for _, row := range table.WorkflowIDHeld {
		t.Run(row.Name, func(t *testing.T) {
			require.Equal(t, row.Want, onWorkflowIDHeld(row.WorkflowType, row.Running))
		})
		seen[row.Want] = true
	}
	require.Equal(t, map[heldIDAction]bool{joinRun: true, answerFromRecord: true, workflowIDTaken: true}, seen,
		"the table names every action")
}
