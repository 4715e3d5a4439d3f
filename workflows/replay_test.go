package workflows_test

// Replay tests: every history in testdata/histories, recorded from the real dev server by the
// end-to-end tests, is replayed against the current workflow code, so a change that is not
// deterministic (an activity added, removed or reordered without workflow.GetVersion, a local
// activity where a regular one was…) fails CI.
//
// The histories are never re-recorded: they are what runs in flight under each released version
// look like (workflows/versions.go). The original version's are the files without a version
// prefix; a later version's start with it (v1-…). After a versioned change, record the new
// version's histories beside the others (on the Postgres and Temporal the test URLs name, or, with
// none set, the checkout's own, which the tests start; with the recorder's version bumped in
// jobs/e2e_test.go):
//
//	JOBBILL_RECORD_HISTORIES=1 go test -count=1 -run E2E ./jobs/
//
// which writes only files that do not exist yet, and commit them.

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/workflows"
)

// TestReplayRecordedHistories replays each recorded history with the workflows registered as
// the worker registers them.
//
// It replays under the recorded workflow ID, not ReplayWorkflowHistoryFromJSONFile's stand-in
// "ReplayId": MeteredJob refuses (at once, without a command) to bill a job ID that is not its
// workflow ID, so under the stand-in every history would fail as non-deterministic.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata/histories: record them with "+
		"`JOBBILL_RECORD_HISTORIES=1 go test -count=1 -run E2E ./jobs/`")

	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflow(workflows.MeteredJob)
	replayer.RegisterWorkflow(workflows.LateResult)
	// The replayer logs every replayed event at debug level; a failure is its returned error.
	logger := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			f, err := os.Open(file)
			require.NoError(t, err)
			defer f.Close()
			history, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, history.GetEvents(), "%s holds no events", file)
			started := history.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			require.NotNil(t, started, "%s does not begin with WorkflowExecutionStarted", file)
			execution := workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()}
			require.NoError(t, replayer.ReplayWorkflowHistoryWithOptions(logger, history,
				worker.ReplayWorkflowHistoryOptions{OriginalExecution: execution}),
				"replaying %s: the workflow code no longer matches this recorded history "+
					"(non-deterministic change? version it with workflow.GetVersion, or re-record)", file)
		})
	}
}
