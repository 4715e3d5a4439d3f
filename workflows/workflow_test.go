package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/activities/activitiestest"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

const (
	account = "acme"
	// kind is sold by the job at cost credits; metered by the GPU-second at gpuPrice credits,
	// holding at most gpuMax seconds.
	kind     = "render"
	cost     = 40
	metered  = "gpu-render"
	gpuPrice = 2
	gpuMax   = 30
)

// jobOf names the account's job id in the ledger: job IDs belong to their account.
func jobOf(id string) ledgerdb.JobKey { return ledgerdb.JobKey{AccountID: account, JobID: id} }

// newLedger is an in-memory ledger with the tests' price list.
func newLedger() *activitiestest.MemoryLedger {
	ledger := activitiestest.NewMemoryLedger()
	ledger.SetPrice(ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitJob, UnitPrice: cost, MaxUnits: 1})
	ledger.SetPrice(ledgerdb.Price{Kind: metered, Unit: ledgerdb.UnitGPUSecond, UnitPrice: gpuPrice, MaxUnits: gpuMax})
	return ledger
}

// testPolicy keeps the story short in the test clock: 3 attempts, 1s then 2s apart, and an hour
// to wait for a late result.
var testPolicy = workflows.Policy{
	InitialInterval:    time.Second,
	BackoffCoefficient: 2,
	MaximumInterval:    10 * time.Second,
	MaximumAttempts:    3,
	StartToClose:       time.Minute,
	HeartbeatTimeout:   30 * time.Second,
	LateResultWindow:   time.Hour,
}

// workFunc plays the GPU side of one attempt; call counts every attempt across runs (redrives).
type workFunc func(ctx context.Context, req activities.WorkRequest, call int) (activities.WorkResult, error)

// harness runs one job's workflow over the real activities, an in-memory ledger with the
// ledger's guards, and a mocked work activity.
type harness struct {
	t         *testing.T
	jobID     string
	accountID string
	kind      string
	env       *testsuite.TestWorkflowEnvironment
	ledger    *activitiestest.MemoryLedger

	mu           sync.Mutex
	workCalls    int
	states       []ledgerdb.State // BillingState at each upsert
	deadLettered []bool           // DeadLettered at each upsert
	accountIDs   []string         // AccountID at each upsert
	canceled     []string         // activity types cancelled
}

func newHarness(t *testing.T, jobID string, balance int64, work workFunc) *harness {
	t.Helper()
	return newHarnessOf(t, kind, jobID, balance, work)
}

// newHarnessOf is newHarness for a job of another kind.
func newHarnessOf(t *testing.T, jobKind, jobID string, balance int64, work workFunc) *harness {
	t.Helper()
	ledger := newLedger()
	ledger.Grant(account, balance)
	ledger.AddPlaceholder(jobOf(jobID), jobKind)
	h := harnessOver(t, ledger, account, jobID, work)
	h.kind = jobKind
	return h
}

// harnessOver runs the workflow of accountID's job jobID over ledger, as it stands.
func harnessOver(t *testing.T, ledger *activitiestest.MemoryLedger, accountID, jobID string, work workFunc) *harness {
	t.Helper()
	h := &harness{t: t, jobID: jobID, accountID: accountID, kind: kind, ledger: ledger}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(activitiestest.Logger(t))
	h.env = suite.NewTestWorkflowEnvironment()
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.JobWorkflowID(accountID, jobID), TaskQueue: workflows.TaskQueue})
	h.env.RegisterWorkflow(workflows.MeteredJob)
	h.env.RegisterActivity(&activities.Activities{Ledger: h.ledger})
	var a *activities.Activities
	h.env.OnActivity(a.RunWork, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.WorkRequest) (activities.WorkResult, error) {
			h.mu.Lock()
			h.workCalls++
			call := h.workCalls
			h.mu.Unlock()
			req.Attempt = int(activity.GetInfo(ctx).Attempt)
			return work(ctx, req, call)
		})
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		state, _ := sa.GetKeyword(workflows.BillingStateKey)
		dead, _ := sa.GetBool(workflows.DeadLetteredKey)
		acct, _ := sa.GetKeyword(workflows.AccountIDKey)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.states = append(h.states, ledgerdb.State(state))
		h.deadLettered = append(h.deadLettered, dead)
		h.accountIDs = append(h.accountIDs, acct)
	}).Return(nil)
	h.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.canceled = append(h.canceled, info.ActivityType.Name)
	})
	return h
}

// key names the harness's job in the ledger.
func (h *harness) key() ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: h.accountID, JobID: h.jobID}
}

// signalAt sends a signal after d of workflow time.
func (h *harness) signalAt(d time.Duration, name string, payload any) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, payload) }, d)
}

// run executes the workflow to its end and returns its final status.
func (h *harness) run() workflows.JobStatus {
	h.t.Helper()
	h.env.ExecuteWorkflow(workflows.MeteredJob, workflows.JobInput{
		JobID:     h.jobID,
		AccountID: h.accountID,
		Kind:      h.kind,
		Work:      activities.WorkRequest{InputRef: "s3://inputs/" + h.jobID},
		Policy:    testPolicy,
	})
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var status workflows.JobStatus
	require.NoError(h.t, h.env.GetWorkflowResult(&status))
	require.NoError(h.t, h.ledger.Audit(), "the reversing-pairs and sum-of-rows rules")
	return status
}

// runCancelled executes the workflow, has it cancelled a millisecond in (the UI's Cancel button),
// checks the money rules once it ended, and returns the job as the ledger has it.
func (h *harness) runCancelled() ledgerdb.Job {
	h.t.Helper()
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Millisecond)
	h.env.ExecuteWorkflow(workflows.MeteredJob, workflows.JobInput{
		JobID: h.jobID, AccountID: h.accountID, Kind: kind,
		Work: activities.WorkRequest{InputRef: "s3://inputs/" + h.jobID}, Policy: testPolicy,
	})
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.ledger.Audit(), "the reversing-pairs and sum-of-rows rules")
	job, ok := h.ledger.Job(h.key())
	require.True(h.t, ok)
	return job
}

// assertLedger checks the job's rows, its net (the net-effect rule) and the account's balance.
func (h *harness) assertLedger(balance int64, kinds ...ledgerdb.EntryKind) {
	h.t.Helper()
	assert.Equal(h.t, kinds, h.ledger.Kinds(h.key()), "ledger rows")
	var net int64
	for _, k := range kinds {
		switch k {
		case ledgerdb.KindCharge, ledgerdb.KindReclaim:
			net -= cost
		case ledgerdb.KindRefund:
			net += cost
		}
	}
	assert.Equal(h.t, net, h.ledger.Net(h.key()), "net effect")
	assert.Equal(h.t, balance, h.ledger.Balance(h.accountID), "balance")
}

// assertStates checks the BillingState and DeadLettered values upserted, in order, and that
// every upsert named the account.
func (h *harness) assertStates(states []ledgerdb.State, deadLettered []bool) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(h.t, states, h.states, "BillingState upserts")
	assert.Equal(h.t, deadLettered, h.deadLettered, "DeadLettered upserts")
	for _, acct := range h.accountIDs {
		assert.Equal(h.t, h.accountID, acct, "AccountID upsert")
	}
}

// assertCalls checks how often each ledger operation was called.
func (h *harness) assertCalls(want map[string]int) {
	h.t.Helper()
	for _, op := range []string{activitiestest.OpSubmit, activitiestest.OpCharge, activitiestest.OpRefund, activitiestest.OpReclaim, activitiestest.OpDeliver, activitiestest.OpSettle} {
		assert.Equal(h.t, want[op], h.ledger.CallCount(op), "%s calls", op)
	}
}

func (h *harness) workCallCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.workCalls
}

func result(attempt int) activities.WorkResult {
	return activities.WorkResult{Attempt: attempt, OutputRef: fmt.Sprintf("s3://outputs/attempt-%d", attempt)}
}

// succeed finishes every attempt at once.
func succeed(_ context.Context, req activities.WorkRequest, _ int) (activities.WorkResult, error) {
	return result(req.Attempt), nil
}

// timeOut plays an attempt the server timed out: the timeout carries the attempt's last
// heartbeat, which RunWork makes the attempt number.
func timeOut(_ context.Context, req activities.WorkRequest, _ int) (activities.WorkResult, error) {
	return activities.WorkResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil, req.Attempt)
}

// failTransiently plays a GPU that keeps failing, retryably.
func failTransiently(_ context.Context, req activities.WorkRequest, _ int) (activities.WorkResult, error) {
	return activities.WorkResult{}, temporal.NewApplicationErrorWithOptions("GPU busy", activities.ErrorTypeWorkFailed,
		temporal.ApplicationErrorOptions{Details: []any{activities.WorkFailure{Attempt: req.Attempt, Message: "GPU busy"}}})
}

var (
	submitting = ledgerdb.StateSubmitting
	running    = ledgerdb.StateRunning
	delivered  = ledgerdb.StateDelivered
	refunded   = ledgerdb.StateRefunded
	recovered  = ledgerdb.StateRecovered
	rejected   = ledgerdb.StateRejected
)

// TestSuccessOnFirstTry protects the net-effect rule (a delivered job nets −cost) and the success
// path of the original version (docs/design.md): charge, run, reclaim (a no-op: NotApplied, no row) and deliver; no refund.
func TestSuccessOnFirstTry(t *testing.T) {
	h := newHarness(t, "story-a", 100, succeed)
	status := h.run()

	assert.Equal(t, delivered, status.State)
	assert.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
	assert.Equal(t, 1, status.Attempts)
	assert.Equal(t, "s3://outputs/attempt-1", status.OutputRef)
	assert.False(t, status.DeadLettered)
	assert.Equal(t, 1, h.workCallCount())
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge)
	h.assertStates([]ledgerdb.State{submitting, running, delivered}, []bool{false, false, false})
	job, _ := h.ledger.Job(h.key())
	assert.Equal(t, delivered, job.State)
}

// TestSameJobIDInTwoAccounts protects the net-effect and sum-of-rows rules now that job IDs belong
// to their account: two accounts' jobs of the same ID run as two workflows (under two workflow IDs)
// on one ledger, and each bills its own job from its own account — one delivered (net −cost), the
// other timed out and refunded (net 0) — with every attempt of the work naming its account (the GPU
// service keys a run by it), and neither touching the other's rows.
func TestSameJobIDInTwoAccounts(t *testing.T) {
	const other = "globex"
	require.NotEqual(t, workflows.JobWorkflowID(account, "render-1"), workflows.JobWorkflowID(other, "render-1"))
	ledger := newLedger()
	ledger.Grant(account, 100)
	ledger.Grant(other, 50)
	ledger.AddPlaceholder(jobOf("render-1"), kind)
	ledger.AddPlaceholder(ledgerdb.JobKey{AccountID: other, JobID: "render-1"}, kind)
	ofAccount := func(acct string, work workFunc) workFunc {
		return func(ctx context.Context, req activities.WorkRequest, call int) (activities.WorkResult, error) {
			assert.Equal(t, acct, req.AccountID, "the work names the job's account")
			return work(ctx, req, call)
		}
	}
	ours := harnessOver(t, ledger, account, "render-1", ofAccount(account, succeed))
	theirs := harnessOver(t, ledger, other, "render-1", ofAccount(other, timeOut))

	assert.Equal(t, delivered, ours.run().State)
	assert.Equal(t, refunded, theirs.run().State)
	ours.assertLedger(60, ledgerdb.KindCharge)
	theirs.assertLedger(50, ledgerdb.KindCharge, ledgerdb.KindRefund)
	ours.assertStates([]ledgerdb.State{submitting, running, delivered}, []bool{false, false, false})
	theirs.assertStates([]ledgerdb.State{submitting, running, refunded}, []bool{false, false, true})
}

// TestSuccessOnRetry protects the reversing-pairs and net-effect rules across retries: failed
// attempts are retried under the policy without charging again, and the job nets −cost once.
func TestSuccessOnRetry(t *testing.T) {
	h := newHarness(t, "retry-ok", 100, func(ctx context.Context, req activities.WorkRequest, call int) (activities.WorkResult, error) {
		if req.Attempt < 3 {
			return failTransiently(ctx, req, call)
		}
		return succeed(ctx, req, call)
	})
	status := h.run()

	assert.Equal(t, delivered, status.State)
	assert.Equal(t, 3, status.Attempts)
	assert.Equal(t, 3, h.workCallCount())
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge)
	job, _ := h.ledger.Job(h.key())
	assert.Equal(t, 3, job.Attempts)
}

// TestTimeoutsThenLateResultRecovers protects the net-effect and price-list rules on story (b):
// every attempt times out → refund (net 0, reason "timed out after 3 attempts") → dead-lettered →
// the result lands late → reclaim → recovered (net −cost). The status query tells the user the
// refund while the job waits.
func TestTimeoutsThenLateResultRecovers(t *testing.T) {
	h := newHarness(t, "story-b", 100, timeOut)
	h.env.RegisterDelayedCallback(func() {
		val, err := h.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		var st workflows.JobStatus
		require.NoError(t, val.Get(&st))
		assert.Equal(t, refunded, st.State)
		assert.Equal(t, ledgerdb.MoneyRefunded, st.MoneyState)
		assert.True(t, st.DeadLettered)
		assert.Equal(t, 3, st.Attempts)
		assert.Equal(t, "timed out after 3 attempts", st.Reason)
		assert.Equal(t, int64(0), h.ledger.Net(h.key()), "refunded: net 0")
	}, 5*time.Minute)
	h.signalAt(10*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late"})
	status := h.run()

	assert.Equal(t, recovered, status.State)
	assert.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
	assert.False(t, status.DeadLettered)
	assert.Equal(t, "s3://outputs/late", status.OutputRef)
	assert.Equal(t, 3, h.workCallCount())
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	h.assertStates([]ledgerdb.State{submitting, running, refunded, recovered}, []bool{false, false, true, false})
	job, _ := h.ledger.Job(h.key())
	assert.Equal(t, ledgerdb.ReasonTimedOut, job.RefundReason)
	assert.Equal(t, "timed out after 3 attempts", job.RefundDetail)
	assert.Equal(t, 3, job.Attempts)
}

// TestDeadLetteredForGood protects the net-effect rule on story (c): the work never succeeds and no
// result comes within the window, so the workflow closes refunded and dead-lettered, net 0.
func TestDeadLetteredForGood(t *testing.T) {
	h := newHarness(t, "story-c", 100, timeOut)
	start := h.env.Now()
	status := h.run()

	assert.Equal(t, refunded, status.State)
	assert.Equal(t, ledgerdb.MoneyRefunded, status.MoneyState)
	assert.True(t, status.DeadLettered)
	assert.Equal(t, "timed out after 3 attempts", status.Reason)
	assert.GreaterOrEqual(t, h.env.Now().Sub(start), testPolicy.LateResultWindow, "it waited the whole window")
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1})
	h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
	h.assertStates([]ledgerdb.State{submitting, running, refunded}, []bool{false, false, true})
}

// TestSameResultSignalledTwice protects the reversing-pairs and idempotent-doors rules on story
// (d): the same late result delivered twice reclaims once; the second signal is counted and changes
// nothing.
func TestSameResultSignalledTwice(t *testing.T) {
	h := newHarness(t, "story-d", 100, timeOut)
	late := workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late"}
	h.signalAt(10*time.Minute, workflows.SignalResult, late)
	h.signalAt(10*time.Minute, workflows.SignalResult, late)
	status := h.run()

	assert.Equal(t, recovered, status.State)
	assert.Equal(t, 1, status.IgnoredResults)
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
}

// TestInsufficientCreditsRejected protects the net-effect and remembered-IDs rules on story (e): a
// refused charge ends the workflow as rejected (not failed), runs no work and writes no row.
func TestInsufficientCreditsRejected(t *testing.T) {
	h := newHarness(t, "story-e", 10, succeed)
	status := h.run()

	assert.Equal(t, rejected, status.State)
	assert.Equal(t, ledgerdb.MoneyNotCharged, status.MoneyState)
	assert.Equal(t, "insufficient credits", status.Reason)
	assert.Equal(t, 0, h.workCallCount())
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1})
	h.assertLedger(10)
	h.assertStates([]ledgerdb.State{submitting, rejected}, []bool{false, false})
}

// TestResultDuringRetries protects the net-effect rule and the workflow's step 3 (docs/design.md):
// a result signal while the work is still retrying cancels the attempt and delivers; there is no
// refund and no reclaim row.
func TestResultDuringRetries(t *testing.T) {
	h := newHarness(t, "during-retries", 100, failTransiently)
	// Attempt 1 fails at 0s and attempt 2 at 1s; the signal lands in the 2s wait before attempt 3.
	h.signalAt(2*time.Second, workflows.SignalResult, workflows.ResultSignal{Attempt: 1, OutputRef: "s3://outputs/attempt-1"})
	status := h.run()

	assert.Equal(t, delivered, status.State)
	assert.Equal(t, "s3://outputs/attempt-1", status.OutputRef)
	assert.Equal(t, 2, h.workCallCount(), "no attempt after the result")
	h.mu.Lock()
	assert.Contains(t, h.canceled, "RunWork", "the running attempt was cancelled")
	h.mu.Unlock()
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge)
	h.assertStates([]ledgerdb.State{submitting, running, delivered}, []bool{false, false, false})
}

// TestResultAfterDeadLettering protects the net-effect and price-list rules when the work failed
// for good (a permanent failure, not a timeout): the refund comes without more attempts, and a
// result after dead-lettering reclaims the recorded cost.
func TestResultAfterDeadLettering(t *testing.T) {
	h := newHarness(t, "after-dlq", 100, func(context.Context, activities.WorkRequest, int) (activities.WorkResult, error) {
		return activities.WorkResult{}, temporal.NewApplicationErrorWithOptions("input unreadable", activities.ErrorTypeWorkFailedPermanently,
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{activities.WorkFailure{Attempt: 1, Message: "input unreadable"}}})
	})
	h.signalAt(30*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: 1, OutputRef: "s3://outputs/after"})
	status := h.run()

	assert.Equal(t, recovered, status.State)
	assert.Equal(t, 1, h.workCallCount(), "a permanent failure is not retried")
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	job, _ := h.ledger.Job(h.key())
	assert.Equal(t, ledgerdb.ReasonGPUFailed, job.RefundReason)
	assert.Equal(t, "failed for good after 1 attempt: input unreadable", job.RefundDetail)
	h.assertStates([]ledgerdb.State{submitting, running, refunded, recovered}, []bool{false, false, true, false})
}

// TestRefundReasonComesFromTheFailureNotItsWords checks what a refund records when the work
// fails for good (trust: a customer reads a code of the vocabulary, never a GPU service's words):
// the code comes from the failure's kind — the runner's own code in its details, gpu_failed for a
// failure recorded before the codes — and the runner's words are the operator's detail, scrubbed
// of credentials in the ledger and in what the workflow shows (its status query) alike.
func TestRefundReasonComesFromTheFailureNotItsWords(t *testing.T) {
	const words = "connect to postgres://svc:hunter2@10.0.3.7:5432/gpu failed; host gpu-7.internal"
	for _, tc := range []struct {
		name    string
		failure activities.WorkFailure
		want    ledgerdb.Reason
	}{
		{"the runner's code", activities.WorkFailure{Attempt: 1, Message: words, Reason: ledgerdb.ReasonInvalidResult}, ledgerdb.ReasonInvalidResult},
		{"recorded before the codes", activities.WorkFailure{Attempt: 1, Message: words}, ledgerdb.ReasonGPUFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "leaky", 100, func(context.Context, activities.WorkRequest, int) (activities.WorkResult, error) {
				return activities.WorkResult{}, temporal.NewApplicationErrorWithOptions(words, activities.ErrorTypeWorkFailedPermanently,
					temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{tc.failure}})
			})
			status := h.run()

			assert.Equal(t, refunded, status.State)
			job, _ := h.ledger.Job(h.key())
			assert.Equal(t, tc.want, job.RefundReason)
			assert.Equal(t, "failed for good after 1 attempt: connect to postgres://svc:***@10.0.3.7:5432/gpu failed; host gpu-7.internal",
				job.RefundDetail)
			assert.NotContains(t, status.Reason, "hunter2", "the Temporal UI shows the scrubbed words")
			h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
		})
	}
}

// TestRedrive protects the reversing-pairs, net-effect and idempotent-doors rules for an operator's
// re-drive: the dead letter's work runs again under the same guards, and its success reclaims the
// refund once (recovered, −cost).
func TestRedrive(t *testing.T) {
	h := newHarness(t, "redrive-ok", 100, func(ctx context.Context, req activities.WorkRequest, call int) (activities.WorkResult, error) {
		if call <= 3 {
			return timeOut(ctx, req, call)
		}
		return succeed(ctx, req, call)
	})
	h.signalAt(10*time.Minute, workflows.SignalRedrive, workflows.RedriveRequest{By: "ops", Note: "GPU pool fixed"})
	status := h.run()

	assert.Equal(t, recovered, status.State)
	assert.Equal(t, 1, status.Redrives)
	assert.Equal(t, 4, h.workCallCount())
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	h.assertStates([]ledgerdb.State{submitting, running, refunded, refunded, recovered}, []bool{false, false, true, true, false})
}

// TestRedriveThatFailsStaysRefunded protects the reversing-pairs rule: a redrive that fails again
// writes no second refund; the job stays a dead letter and closes refunded when the window ends.
func TestRedriveThatFailsStaysRefunded(t *testing.T) {
	h := newHarness(t, "redrive-fails", 100, timeOut)
	h.signalAt(10*time.Minute, workflows.SignalRedrive, workflows.RedriveRequest{By: "ops"})
	status := h.run()

	assert.Equal(t, refunded, status.State)
	assert.True(t, status.DeadLettered)
	assert.Equal(t, "redrive 1 timed out after 3 attempts", status.Reason)
	assert.Equal(t, 6, h.workCallCount())
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1})
	h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
}

// TestDeletedWhileDeadLettered protects the net-effect rule against deletion (deletion hides a job,
// never what it owes) and the remembered-IDs rule (its ID stays burnt): a refunded job deleted
// while its workflow waits still takes its late result — the refund is reclaimed, once — and the
// workflow ends showing the tombstone as the ledger has it: deleted, charged, no longer a dead
// letter.
func TestDeletedWhileDeadLettered(t *testing.T) {
	h := newHarness(t, "deleted", 100, timeOut)
	h.env.RegisterDelayedCallback(func() { require.NoError(t, h.ledger.Delete(h.key())) }, 5*time.Minute)
	h.signalAt(10*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late"})
	status := h.run()

	assert.Equal(t, ledgerdb.StateDeleted, status.State)
	assert.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
	h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpRefund: 1, activitiestest.OpSettle: 1})
	h.assertLedger(60, ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim)
	h.assertStates([]ledgerdb.State{submitting, running, refunded, ledgerdb.StateDeleted}, []bool{false, false, true, false})
	job, _ := h.ledger.Job(h.key())
	assert.Equal(t, ledgerdb.StateRecovered, job.StateBeforeDelete)
	assert.Empty(t, job.OutputRef, "a deleted job's output is not kept")
}

// TestLedgerRetryAfterCommit protects the one-transaction-per-transition and idempotent-doors
// rules: when the worker loses a ledger activity's answer after the ledger committed, Temporal
// retries the activity, the guard answers AlreadyApplied, and the job ends in the right state with
// one row per kind.
func TestLedgerRetryAfterCommit(t *testing.T) {
	for _, tc := range []struct {
		op    string
		work  workFunc
		late  bool
		state ledgerdb.State
		kinds []ledgerdb.EntryKind
	}{
		{activitiestest.OpCharge, succeed, false, delivered, []ledgerdb.EntryKind{ledgerdb.KindCharge}},
		{activitiestest.OpSettle, succeed, false, delivered, []ledgerdb.EntryKind{ledgerdb.KindCharge}},
		{activitiestest.OpRefund, timeOut, true, recovered, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim}},
		{"late " + activitiestest.OpSettle, timeOut, true, recovered, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			tc.op = strings.TrimPrefix(tc.op, "late ")
			h := newHarness(t, "lost-"+tc.op, 100, tc.work)
			h.ledger.LoseAnswers(tc.op, 1)
			if tc.late {
				h.signalAt(10*time.Minute, workflows.SignalResult, workflows.ResultSignal{Attempt: 3, OutputRef: "s3://outputs/late"})
			}
			status := h.run()

			assert.Equal(t, tc.state, status.State)
			assert.Equal(t, 2, h.ledger.CallCount(tc.op), "the lost answer was retried")
			var outcomes []ledgerdb.Outcome
			for _, c := range h.ledger.Calls() {
				if c.Op == tc.op {
					outcomes = append(outcomes, c.Outcome)
					if len(outcomes) == 1 {
						assert.True(t, errors.Is(c.Err, activitiestest.ErrAnswerLost))
					}
				}
			}
			assert.Equal(t, ledgerdb.AlreadyApplied, outcomes[1], "the retry found the change committed")
			h.assertLedger(100-cost, tc.kinds...)
		})
	}
}

// TestInvalidInputIsRejectedWithoutCharging protects the net-effect, price-list and remembered-IDs
// rules at the start door: a run whose input cannot be billed — another job than its workflow ID
// names, an invalid ID or kind, an amount (prices are set by the server), a policy Temporal would
// refuse — ends rejected, not failed, before it touches the ledger.
func TestInvalidInputIsRejectedWithoutCharging(t *testing.T) {
	valid := workflows.JobInput{JobID: "job-1", AccountID: account, Kind: kind, Policy: testPolicy}
	for name, edit := range map[string]func(*workflows.JobInput){
		"another job ID":    func(in *workflows.JobInput) { in.JobID = "job-2" },
		"another account":   func(in *workflows.JobInput) { in.AccountID = "other" },
		"no job ID":         func(in *workflows.JobInput) { in.JobID = "" },
		"an amount":         func(in *workflows.JobInput) { in.Cost = 1 },
		"a bad kind":        func(in *workflows.JobInput) { in.Kind = "Render 4K" },
		"negative max":      func(in *workflows.JobInput) { in.MaxUnits = -1 },
		"negative timeout":  func(in *workflows.JobInput) { in.Policy.StartToClose = -time.Second },
		"too many attempts": func(in *workflows.JobInput) { in.Policy.MaximumAttempts = 1_000_000 },
		"oversized input":   func(in *workflows.JobInput) { in.Work.InputRef = strings.Repeat("x", ledgerdb.MaxRequestLength+1) },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, "job-1", 100, succeed)
			in := valid
			edit(&in)
			h.env.ExecuteWorkflow(workflows.MeteredJob, in)
			require.True(t, h.env.IsWorkflowCompleted())
			require.NoError(t, h.env.GetWorkflowError(), "an invalid input must not fail the run")
			var status workflows.JobStatus
			require.NoError(t, h.env.GetWorkflowResult(&status))
			assert.Equal(t, rejected, status.State)
			assert.Contains(t, status.Reason, "invalid input")
			assert.Empty(t, h.ledger.Calls(), "nothing written")
			h.assertLedger(100)
		})
	}
}

// TestStaticSummary pins the job's line in the UI's workflow list.
func TestStaticSummary(t *testing.T) {
	in := workflows.JobInput{JobID: "render-1", AccountID: account, Kind: kind}
	assert.Equal(t, "render-1: render, 40 credits held from acme", in.StaticSummary(40))
	in.Kind = ""
	assert.Equal(t, "render-1: 40 credits from acme", in.StaticSummary(40), "a job from before the price list")
}

// TestSearchAttributeNames pins the names the dev server must register.
func TestSearchAttributeNames(t *testing.T) {
	assert.Equal(t, []string{
		"--namespace", "jobbill",
		"--search-attribute", "BillingState=Keyword",
		"--search-attribute", "AccountID=Keyword",
		"--search-attribute", "DeadLettered=Bool",
	}, workflows.DevServerFlags())
}

// updateAt sends the charge-decision update after d of workflow time and returns where its
// answer lands.
func (h *harness) updateAt(d time.Duration, updateID string) *chargeDecisionAnswer {
	answer := &chargeDecisionAnswer{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateChargeDecision, updateID, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { answer.err = err },
			OnComplete: func(result any, err error) {
				answer.done, answer.err = true, err
				if d, ok := result.(workflows.ChargeDecision); ok {
					answer.decision = d
				}
			},
		})
	}, d)
	return answer
}

type chargeDecisionAnswer struct {
	done     bool
	decision workflows.ChargeDecision
	err      error
}

// TestChargeDecisionUpdate checks what the job service's Update-With-Start answers: charged when the
// ledger charged the job, rejected with the reason (nothing charged, the net-effect rule) when it
// refused, and the same answer to a repeated update (the idempotent-doors rule: a retried
// submission never charges again).
func TestChargeDecisionUpdate(t *testing.T) {
	t.Run("charged", func(t *testing.T) {
		h := newHarness(t, "job-update-charged", 100, func(context.Context, activities.WorkRequest, int) (activities.WorkResult, error) {
			return activities.WorkResult{Attempt: 1, OutputRef: "out"}, nil
		})
		first, second := h.updateAt(0, "submit-1"), h.updateAt(0, "submit-2")
		status := h.run()
		require.Equal(t, ledgerdb.StateDelivered, status.State)
		for _, answer := range []*chargeDecisionAnswer{first, second} {
			require.True(t, answer.done)
			require.NoError(t, answer.err)
		}
		require.Equal(t, workflows.ChargeDecision{State: ledgerdb.StateRunning, MoneyState: ledgerdb.MoneyCharged}, first.decision)
		require.Equal(t, first.decision, second.decision)
		h.assertCalls(map[string]int{activitiestest.OpCharge: 1, activitiestest.OpSettle: 1})
	})
	t.Run("rejected", func(t *testing.T) {
		h := newHarness(t, "job-update-rejected", 10, func(context.Context, activities.WorkRequest, int) (activities.WorkResult, error) {
			t.Error("a rejected job must not run its work")
			return activities.WorkResult{}, nil
		})
		answer := h.updateAt(0, "submit-1")
		status := h.run()
		require.Equal(t, ledgerdb.StateRejected, status.State)
		require.True(t, answer.done)
		require.NoError(t, answer.err)
		require.Equal(t, ledgerdb.StateRejected, answer.decision.State)
		require.Equal(t, ledgerdb.MoneyNotCharged, answer.decision.MoneyState)
		require.Equal(t, "insufficient credits", answer.decision.Reason)
		h.assertLedger(10)
	})
}

// TestLateResultFallback checks the fallback for a result that lands after the job's workflow
// closed: a refunded job is reclaimed once (the reversing-pairs rule: a second report reclaims
// nothing; the net-effect rule: the job nets -cost again), a delivered job is left alone, and a
// refunded job deleted since is reclaimed too and keeps its tombstone (the net-effect rule:
// deletion hides a job, never what it owes; the remembered-IDs rule).
func TestLateResultFallback(t *testing.T) {
	run := func(t *testing.T, ledger *activitiestest.MemoryLedger, jobID string) workflows.LateResultOutcome {
		t.Helper()
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(activitiestest.Logger(t))
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(workflows.LateResult)
		env.RegisterActivity(&activities.Activities{Ledger: ledger})
		env.ExecuteWorkflow(workflows.LateResult, workflows.LateResultInput{
			JobID: jobID, AccountID: account, Cost: cost, Result: workflows.ResultSignal{Attempt: 3, OutputRef: "out"},
		})
		require.True(t, env.IsWorkflowCompleted())
		require.NoError(t, env.GetWorkflowError())
		var out workflows.LateResultOutcome
		require.NoError(t, env.GetWorkflowResult(&out))
		require.NoError(t, ledger.Audit(), "the reversing-pairs and sum-of-rows rules")
		return out
	}
	ctx := context.Background()
	ledger := newLedger()
	ledger.Grant(account, 200)
	for _, id := range []string{"refunded", "delivered", "deleted", "left-running"} {
		ledger.AddPlaceholder(jobOf(id), kind)
		_, err := ledger.Charge(ctx, jobOf(id))
		require.NoError(t, err)
	}
	_, err := ledger.Refund(ctx, jobOf("refunded"), ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3)
	require.NoError(t, err)
	_, err = ledger.Deliver(ctx, jobOf("delivered"), 1)
	require.NoError(t, err)
	_, err = ledger.Refund(ctx, jobOf("deleted"), ledgerdb.ReasonTimedOut, "timed out", 3)
	require.NoError(t, err)
	require.NoError(t, ledger.Delete(jobOf("deleted")))

	first := run(t, ledger, "refunded")
	require.Equal(t, ledgerdb.Applied, first.Outcome)
	require.Equal(t, ledgerdb.StateRecovered, first.State)
	second := run(t, ledger, "refunded")
	require.Equal(t, ledgerdb.AlreadyApplied, second.Outcome)
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim}, ledger.Kinds(jobOf("refunded")))

	delivered := run(t, ledger, "delivered")
	require.Equal(t, ledgerdb.AlreadyApplied, delivered.Outcome)
	require.Equal(t, ledgerdb.StateDelivered, delivered.State)

	// A job its workflow left running (terminated before it settled): the result delivers it, and
	// its charge stands — one charge row, net -cost.
	leftRunning := run(t, ledger, "left-running")
	require.Equal(t, ledgerdb.Applied, leftRunning.Outcome)
	require.Equal(t, ledgerdb.StateDelivered, leftRunning.State)
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, ledger.Kinds(jobOf("left-running")))

	// A refunded job deleted since: deletion hides a job, never what it owes — reclaimed, and it
	// stays a tombstone.
	deleted := run(t, ledger, "deleted")
	require.Equal(t, ledgerdb.Applied, deleted.Outcome)
	require.Equal(t, ledgerdb.StateDeleted, deleted.State)
	require.Equal(t, ledgerdb.MoneyCharged, deleted.MoneyState)
	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge, ledgerdb.KindRefund, ledgerdb.KindReclaim}, ledger.Kinds(jobOf("deleted")))
	require.Equal(t, int64(200-4*cost), ledger.Balance(account))
}

// TestAnyRunnerMessageStillRefunds protects the net-effect rule: whatever a GPU service says when
// it fails — a long message, NUL, invalid UTF-8 — the refund reason stays within what the ledger
// accepts, so the job is refunded rather than left charged for work it never got.
func TestAnyRunnerMessageStillRefunds(t *testing.T) {
	for name, msg := range map[string]string{
		"200 emoji":    strings.Repeat("🔥", 200),
		"NUL":          "GPU\x00lost",
		"invalid utf8": "bad \xff\xfe bytes " + strings.Repeat("x", 600),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, "odd-message", 100, func(_ context.Context, req activities.WorkRequest, _ int) (activities.WorkResult, error) {
				return activities.WorkResult{}, temporal.NewApplicationErrorWithOptions(msg, activities.ErrorTypeWorkFailedPermanently,
					temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{activities.WorkFailure{Attempt: req.Attempt, Message: msg}}})
			})
			status := h.run()
			require.Equal(t, refunded, status.State)
			require.LessOrEqual(t, len(status.Reason), ledgerdb.MaxTextLength)
			require.True(t, utf8.ValidString(status.Reason))
			require.NotContains(t, status.Reason, "\x00")
			h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
		})
	}
}

// TestCancelledWorkflowRefunds protects the net-effect rule when an operator cancels a job's
// workflow while its work runs: the work never delivered, so the charge is refunded (the
// compensation runs on a disconnected context) instead of being left standing with nobody to give
// it back.
func TestCancelledWorkflowRefunds(t *testing.T) {
	// The SDK's test environment never cancels a running activity's context; a real attempt
	// would end by its heartbeat. Here the attempt just outlasts the cancellation.
	h := newHarness(t, "cancelled", 100, func(context.Context, activities.WorkRequest, int) (activities.WorkResult, error) {
		time.Sleep(200 * time.Millisecond)
		return activities.WorkResult{}, temporal.NewCanceledError()
	})
	job := h.runCancelled()
	require.Equal(t, refunded, job.State, "workflow error: %v", h.env.GetWorkflowError())
	h.assertLedger(100, ledgerdb.KindCharge, ledgerdb.KindRefund)
}
