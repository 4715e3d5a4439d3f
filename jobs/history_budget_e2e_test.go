package jobs_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// budgetLine is one kind of event a job's history may hold: how many, and what it pays for.
type budgetLine struct {
	event string
	count int
	why   string
}

// bareEvents are the events of a bare workflow that runs the work activity alone (the benchmark's
// baseline, internal/workerbench): every job has them, billed or not. Its two workflow tasks are
// not here: they are counted apart (historyOf).
var bareEvents = []budgetLine{
	{"WorkflowExecutionStarted", 1, "the start"},
	{"ActivityTaskScheduled", 1, "the work"},
	{"ActivityTaskStarted", 1, "the work"},
	{"WorkflowExecutionCompleted", 1, "the end"},
}

// deliveredBudget is what billing may add to a delivered job's history, each event with the
// reason it is worth its cost. Every other event a job once wrote is gone: the version marker
// and the SDK's TemporalChangeVersion upsert (the run's version is the build ID of the worker
// that ran its first workflow task, workflows/versions.go).
var deliveredBudget = []budgetLine{
	{"ActivityTaskCompleted", 1, "the work's result"},
	{"WorkflowExecutionUpdateAccepted", 1, "the charge decision the submission waits for: 201 or 402 in one round trip, answered in the first workflow task"},
	{"WorkflowExecutionUpdateCompleted", 1, "the same update's answer"},
	{"MarkerRecorded(LocalActivity)", 2, "the two money transitions: the charge, and the settlement (deliver and reclaim are one step)"},
	{"UpsertWorkflowSearchAttributes", 2, "BillingState running (the UI's filter of the jobs at work) and delivered (the settled state)"},
}

// recoveredBudget is the same for a job refunded after its attempts failed, then recovered by a
// late result.
var recoveredBudget = []budgetLine{
	{"ActivityTaskFailed", 1, "the work's final failure"},
	{"WorkflowExecutionUpdateAccepted", 1, "the charge decision the submission waits for"},
	{"WorkflowExecutionUpdateCompleted", 1, "the same update's answer"},
	{"MarkerRecorded(LocalActivity)", 3, "the three money transitions: the charge, the refund, and the settlement of the late result"},
	{"UpsertWorkflowSearchAttributes", 3, "BillingState running, refunded with DeadLettered (the dead-letter filter), recovered"},
	{"TimerStarted", 1, "the late-result window"},
	{"TimerCanceled", 1, "the window, ended by the result"},
	{"WorkflowExecutionSignaled", 1, "the late result"},
}

// historyOf reads a closed run's history: the count of each event type (markers by their name),
// and the number of workflow tasks it took (countEvents).
func (e *e2eEnv) historyOf(t *testing.T, workflowID string) (map[string]int, int) {
	t.Helper()
	iter := e.Client.GetWorkflowHistory(testContext(t), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	return countEvents(events)
}

// countEvents counts a history's events by type (markers by their name), and its completed
// workflow tasks, whose scheduled, started and completed events are counted apart. A workflow task
// that timed out before another attempt completed it is the server's retry, not an event of the
// workflow's code: a loaded worker that picks a task up after its sticky queue's five seconds
// costs the history three events that no change to the code can add or remove, so they are left
// out with the task's own. A task that failed is not: the worker's code failed it, and it counts.
func countEvents(events []*historypb.HistoryEvent) (map[string]int, int) {
	types := map[string]int{}
	tasks := 0
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tasks++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			types[fmt.Sprintf("%s(%s)", ev.GetEventType(), ev.GetMarkerRecordedEventAttributes().GetMarkerName())]++
		default:
			types[ev.GetEventType().String()]++
		}
	}
	return types, tasks
}

// requireBudget fails unless the history holds exactly the bare workflow's events and the
// budget's, and at least tasks workflow tasks of three events each; it names every event over or
// under budget. More workflow tasks than that are the server's, not the code's: a ledger step
// slower than most of the task timeout (a loaded machine) heartbeats the task with one more.
func requireBudget(t *testing.T, got map[string]int, gotTasks, tasks int, budget []budgetLine) {
	t.Helper()
	problems := budgetProblems(got, budget)
	require.Empty(t, problems, "history events over or under budget:\n  %s", strings.Join(problems, "\n  "))
	require.GreaterOrEqual(t, gotTasks, tasks, "workflow tasks")
	total := 3 * gotTasks
	for _, n := range got {
		total += n
	}
	t.Logf("%d events: %d workflow tasks of 3, %v", total, gotTasks, got)
}

// budgetProblems names every event of got over or under the bare workflow's events and the
// budget's.
func budgetProblems(got map[string]int, budget []budgetLine) []string {
	want := map[string]int{}
	why := map[string]string{}
	for _, l := range append(slices.Clone(bareEvents), budget...) {
		want[l.event] += l.count
		why[l.event] = l.why
	}
	var problems []string
	for _, event := range slices.Sorted(maps.Keys(want)) {
		if got[event] != want[event] {
			problems = append(problems, fmt.Sprintf("%s: %d, budget %d (%s)", event, got[event], want[event], why[event]))
		}
	}
	for _, event := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[event]; !ok {
			problems = append(problems, fmt.Sprintf("%s: %d, budget 0 (nothing pays for it)", event, got[event]))
		}
	}
	return problems
}

// TestE2EHistoryBudget holds a job's history to its budget, the events each money step and each
// door justifies, on the real server: a delivered job costs the bare workflow's 11 events and 6
// more — its charge decision, its two money transitions (charge, settle), and the two billing
// states the UI filters on — and a job refunded and then recovered by a late result 3 money
// transitions (charge, refund, settle: the reversing-pairs and net-effect rules, each one row of
// the ledger). A change that adds an event to every job fails here, naming it; so does one that
// drops a money step.
func TestE2EHistoryBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kind := ledgertest.Fixed(t, e.Store, 40)

	t.Run("delivered", func(t *testing.T) {
		t.Parallel()
		s := e.submitStoryOf(t, e.Jobs, kind, 40, "sim:ok")
		require.NoError(t, s.err)
		require.Equal(t, ledgerdb.StateDelivered, e.awaitClosed(t, s.workflowID()).State)
		ledgertest.RequireRows(t, e.Store, s.key(), 40, ledgerdb.KindCharge)
		got, tasks := e.historyOf(t, s.workflowID())
		requireBudget(t, got, tasks, 2, deliveredBudget)
	})

	t.Run("recovered", func(t *testing.T) {
		t.Parallel()
		p := e2ePolicy()
		p.MaximumAttempts = 1
		p.LateResultWindow = 10 * time.Minute
		st := e.JobsWith(p)
		s := e.submitStoryOf(t, st, kind, 40, "sim:fail")
		require.NoError(t, s.err)
		e.waitState(t, st, s.key(), ledgerdb.StateRefunded)
		report, err := st.ReportResult(testContext(t), s.key(),
			activities.WorkResult{Attempt: 1, OutputRef: "sim://" + s.id + "/late", FinishedAt: time.Now().UTC()})
		require.NoError(t, err)
		require.Equal(t, jobs.PathSignal, report.Path, "the refunded run still listens for its late result")
		require.Equal(t, ledgerdb.StateRecovered, e.awaitClosed(t, s.workflowID()).State)
		ledgertest.RequireRows(t, e.Store, s.key(), 40, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
		got, tasks := e.historyOf(t, s.workflowID())
		requireBudget(t, got, tasks, 3, recoveredBudget)
	})
}

// TestHistoryBudgetLeavesTheServersRetriesOut counts a delivered job's history in which one
// workflow task timed out and was tried again, as the server does when a loaded worker does not
// pick a task up in time (a sticky queue's five seconds): the retry is the server's, not an event
// the workflow's code issues, so the job is still within its budget of billing events. A history
// with an event the code adds, or a money marker fewer, is still over or under it.
func TestHistoryBudgetLeavesTheServersRetriesOut(t *testing.T) {
	ev := func(et enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: et} }
	marker := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity"}}}
	task := []*historypb.HistoryEvent{ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)}
	var history []*historypb.HistoryEvent
	history = append(history, ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED))
	history = append(history, task...)
	history = append(history, ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), marker,
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED), ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED))
	// The task after the work timed out once before a worker completed it.
	history = append(history, ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT))
	history = append(history, task...)
	history = append(history, marker, ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED))

	got, tasks := countEvents(history)
	requireBudget(t, got, tasks, 2, deliveredBudget)

	over := maps.Clone(got)
	over["MarkerRecorded(LocalActivity)"]--
	if problems := budgetProblems(over, deliveredBudget); len(problems) != 1 {
		t.Errorf("a history with one money marker fewer is %v, want one problem", problems)
	}
}
