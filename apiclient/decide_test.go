package apiclient_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apitype"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func tracked(state apiclient.SubmissionState, resubmissions int, withBody bool) apiclient.Tracked {
	t := apiclient.Tracked{CreatedAt: created, State: state, Resubmissions: resubmissions}
	if withBody {
		t.Request = apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k", InputRef: "sim:ok"}
	}
	return t
}

// decisionsFile is the submission rules' decision table, shared with the TypeScript client's
// tests (clients/typescript/test/decide.test.ts) so that the two clients cannot drift.
const decisionsFile = "testdata/submission-decisions.json"

// decisionRow is one row of the shared table: a tracked submission, when the look happens, what
// it saw (decide rows only) and the action the rules take.
type decisionRow struct {
	Name    string `json:"name"`
	Tracked struct {
		State         apiclient.SubmissionState `json:"state"`
		Resubmissions int                       `json:"resubmissions"`
		WithBody      bool                      `json:"with_body"`
	} `json:"tracked"`
	SinceCreated string `json:"since_created"`
	Observation  *struct {
		NetworkError string `json:"network_error"`
		StatusCode   int    `json:"status_code"`
		State        string `json:"state"`
		Code         string `json:"code"`
	} `json:"observation"`
	Want apiclient.Action `json:"want"`
}

// submittedRow is one row of the shared table's rule for a submission answered 200, 201 or 202
// with a job: the answer, the action the rules take and the money state the client reports.
type submittedRow struct {
	Name   string `json:"name"`
	Answer struct {
		StatusCode int    `json:"status_code"`
		State      string `json:"state"`
		MoneyState string `json:"money_state"`
	} `json:"answer"`
	Want    apiclient.Action `json:"want"`
	Reports string           `json:"reports"`
}

// decisionTable is the shared file as a whole.
type decisionTable struct {
	// About is the file's prose: what the table is and who reads it.
	About            []string       `json:"about"`
	ConfirmWindow    string         `json:"confirm_window"`
	MaxResubmissions int            `json:"max_resubmissions"`
	OnNotFound       []decisionRow  `json:"on_not_found"`
	OnSubmitted      []submittedRow `json:"on_submitted"`
	Decide           []decisionRow  `json:"decide"`
	// WorkflowIDHeld is the rule of a submission through Temporal, which the job service's and the
	// TypeScript Temporal helper's tests read; this client submits through the API.
	WorkflowIDHeld json.RawMessage `json:"workflow_id_held"`
}

// readDecisions reads the shared table; unknown fields are refused, so a row the Go test would
// not read (a misspelt field) fails here instead of being checked as something else.
func readDecisions(t *testing.T) decisionTable {
	t.Helper()
	f, err := os.Open(decisionsFile)
	require.NoError(t, err)
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var table decisionTable
	require.NoError(t, dec.Decode(&table), decisionsFile)
	require.NotEmpty(t, table.OnNotFound)
	require.NotEmpty(t, table.Decide)
	require.NotEmpty(t, table.OnSubmitted)
	return table
}

// tracked is the row's submission, created at created.
func (r decisionRow) tracked(t *testing.T) apiclient.Tracked {
	require.Contains(t, []apiclient.SubmissionState{apiclient.Unknown, apiclient.Accepted}, r.Tracked.State, r.Name)
	return tracked(r.Tracked.State, r.Tracked.Resubmissions, r.Tracked.WithBody)
}

// now is the moment of the row's look.
func (r decisionRow) now(t *testing.T) time.Time {
	d, err := time.ParseDuration(r.SinceCreated)
	require.NoError(t, err, r.Name)
	return created.Add(d)
}

// TestDecisionTableLimits checks that the shared table is written for the client's own limits:
// the five-minute confirmation window and at most three resubmissions (the remembered-IDs rule).
func TestDecisionTableLimits(t *testing.T) {
	table := readDecisions(t)
	window, err := time.ParseDuration(table.ConfirmWindow)
	require.NoError(t, err)
	require.Equal(t, apiclient.ConfirmWindow, window)
	require.Equal(t, apiclient.MaxResubmissions, table.MaxResubmissions)
}

// TestOnNotFoundFollowsTheTable checks every row of the 404 table of the submission rules (the
// remembered-IDs rule: an ID that was accepted is never charged again — a 404 for it means deleted,
// never resubmit; an ID never accepted is resubmitted under the same ID, at most 3 times, within 5
// minutes). The rows are the shared table's on_not_found.
func TestOnNotFoundFollowsTheTable(t *testing.T) {
	for _, row := range readDecisions(t).OnNotFound {
		t.Run(row.Name, func(t *testing.T) {
			require.Nil(t, row.Observation, "a 404 row names no observation: it is the API's not_received")
			require.Equal(t, row.Want, apiclient.OnNotFound(row.tracked(t), row.now(t)))
		})
	}
}

// TestDecideCoversEveryAnswer checks the polling rule for every kind of answer (the
// remembered-IDs and idempotent-doors rules): transient failures and unsettled states keep polling
// the same ID and never create a new paid job; 410 is deleted; only the API's not_received 404 goes
// through the 404 table — any other 404 (a proxy's, no_route, a body that is not the API's) is
// transient. The rows are the shared table's decide.
func TestDecideCoversEveryAnswer(t *testing.T) {
	for _, row := range readDecisions(t).Decide {
		t.Run(row.Name, func(t *testing.T) {
			require.NotNil(t, row.Observation, "a decide row names what the look saw")
			obs := apiclient.Observation{StatusCode: row.Observation.StatusCode, State: row.Observation.State, Code: row.Observation.Code}
			if row.Observation.NetworkError != "" {
				obs = apiclient.Observation{Err: errors.New(row.Observation.NetworkError)}
			}
			require.Equal(t, row.Want, apiclient.Decide(row.tracked(t), obs, row.now(t)))
		})
	}
}

// TestOnSubmittedFollowsTheTable checks every row of the rule for a submission answered with its
// job (the money rule of an answer: its status says where the money stands, as its body does —
// 201 charged, 202 pending, 200 nothing charged by the answer): an answer whose status and job
// agree stands, and the client reports the job's money state; one whose status says more than its
// body (a 201 of a job that is not charged, a 202 of a job decided) is taken at neither's word —
// the client looks at the job by ID and reports its money as unknown until then, never "charged"
// on the status's word. The rows are the shared table's on_submitted.
func TestOnSubmittedFollowsTheTable(t *testing.T) {
	for _, row := range readDecisions(t).OnSubmitted {
		t.Run(row.Name, func(t *testing.T) {
			st := apitype.Status{JobID: "render-1", State: row.Answer.State, MoneyState: row.Answer.MoneyState}
			action, money := apiclient.OnSubmitted(row.Answer.StatusCode, st)
			require.Equal(t, row.Want, action)
			require.Equal(t, row.Reports, money)
		})
	}
}
