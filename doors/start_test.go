package doors_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/workflows"
)

// jobInputJSON is a MeteredJob input as an operator types it for `temporal workflow start
// --input`: the Go field names of workflows.JobInput, durations in nanoseconds. It is written
// out by hand, not marshalled from the struct, so that a renamed field — a broken wire contract
// for every operator's script — fails this test.
func jobInputJSON(jobID, accountID, kind, inputRef string, p workflows.Policy) string {
	return fmt.Sprintf(`{"JobID":%q,"AccountID":%q,"Kind":%q,"Work":{"InputRef":%q},`+
		`"Policy":{"InitialInterval":%d,"BackoffCoefficient":%g,"MaximumInterval":%d,"MaximumAttempts":%d,`+
		`"StartToClose":%d,"HeartbeatTimeout":%d,"LateResultWindow":%d}}`,
		jobID, accountID, kind, inputRef,
		p.InitialInterval.Nanoseconds(), p.BackoffCoefficient, p.MaximumInterval.Nanoseconds(), p.MaximumAttempts,
		p.StartToClose.Nanoseconds(), p.HeartbeatTimeout.Nanoseconds(), p.LateResultWindow.Nanoseconds())
}

// startDirectly starts a MeteredJob with `temporal workflow start`, bypassing the job service and its
// placeholder, on the door tests' task queue.
func (e *env) startDirectly(t *testing.T, jobID, accountID, kind, inputRef string) string {
	t.Helper()
	return e.startDirectlyWith(t, jobID, accountID, jobInputJSON(jobID, accountID, kind, inputRef, doorPolicy()))
}

// startDirectlyWith starts a MeteredJob of jobID for accountID with `temporal workflow start`
// and the input as typed.
func (e *env) startDirectlyWith(t *testing.T, jobID, accountID, input string) string {
	t.Helper()
	workflowID := workflows.JobWorkflowID(accountID, jobID)
	e.cli.must(t, "workflow", "start", "--type", workflows.WorkflowType, "--task-queue", e.Config.Temporal.TaskQueue,
		"--workflow-id", workflowID, "--input", input)
	return workflowID
}

// TestCLIStartWithoutPlaceholder checks the price-list and remembered-IDs rules at `temporal
// workflow start`: a MeteredJob started by hand, with no placeholder written by the job service,
// writes its own (the same guarded submission, its request fingerprinted) and charges only that
// request, once — the job is delivered with one charge of the recorded cost, and the job service's
// submission of the same job afterwards answers the original job without charging it again (the
// idempotent-doors rule). A start for an unknown account ends rejected with nothing in the ledger;
// a start whose ID already holds another request's placeholder charges nothing and shows that
// placeholder as the ledger has it, and the placeholder's own submission then learns that its ID
// can never be charged (the net-effect rule: net 0).
func TestCLIStartWithoutPlaceholder(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	ctx := testContext(t)

	t.Run("delivered", func(t *testing.T) {
		j := e.job(t, "direct")
		e.requireNoJob(t, j.key, "no placeholder before the start")
		final := e.awaitClosed(t, e.startDirectly(t, j.id, e.acct, ledgertest.Fixed(t, e.Store, 40), "sim:ok"))
		require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
		job, err := e.Store.Job(ctx, j.key)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateDelivered, job.State)
		require.Equal(t, int64(40), job.Cost)
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)

		sub, err := e.Jobs.Submit(ctx, jobs.Job{ID: j.id, AccountID: e.acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"})
		require.NoError(t, err)
		require.True(t, sub.Duplicate, "the placeholder the run wrote is the job's")
		require.Equal(t, ledgerdb.StateDelivered, sub.Status.State)
		ledgertest.RequireRows(t, e.Store, j.key, 40, ledgerdb.KindCharge)
	})

	t.Run("unknown account", func(t *testing.T) {
		id := jobID(t, e.p, "nobody")
		nobody := ledgertest.ID(t, "acct-never-opened")
		key := ledgerdb.JobKey{AccountID: nobody, JobID: id}
		final := e.awaitClosed(t, e.startDirectly(t, id, nobody, ledgertest.Fixed(t, e.Store, 40), "sim:ok"))
		require.Equal(t, ledgerdb.StateRejected, final.State, "%+v", final)
		require.Equal(t, ledgerdb.MoneyNotCharged, final.MoneyState)
		require.Equal(t, "the account does not exist", final.Reason)
		e.requireNoJob(t, key, "nothing in the ledger")
		ledgertest.RequireRows(t, e.Store, key, 40)
	})

	t.Run("another request's placeholder", func(t *testing.T) {
		j := e.job(t, "taken")
		owner := jobs.Job{ID: j.id, AccountID: e.acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"}
		_, err := e.Store.Submit(ctx, ledgerdb.Submission{JobID: j.id, AccountID: e.acct, Kind: ledgertest.Fixed(t, e.Store, 40), Request: []byte(owner.InputRef)})
		require.NoError(t, err)
		final := e.awaitClosed(t, e.startDirectly(t, j.id, e.acct, ledgertest.Fixed(t, e.Store, 40), "sim:someone-elses-input"))
		// Refused, and shown as the ledger has the job under the ID: the other request's placeholder.
		require.Equal(t, ledgerdb.StateSubmitting, final.State, "%+v", final)
		require.Equal(t, ledgerdb.MoneyPending, final.MoneyState, "its charge is still to be decided")
		require.Contains(t, final.Reason, "this start was refused")
		require.Contains(t, final.Reason, "different request")
		job, err := e.Store.Job(ctx, j.key)
		require.NoError(t, err)
		require.False(t, job.IsCharged, "the other request's run charged nothing")
		ledgertest.RequireRows(t, e.Store, j.key, 40)

		// The placeholder's own submission finds its workflow ID used up by a run that ended
		// before charging: it is told at once that the ID can never be charged.
		_, err = e.Jobs.Submit(ctx, owner)
		require.ErrorIs(t, err, ledgerdb.ErrRejected)
		job, err = e.Store.Job(ctx, j.key)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.StateRejected, job.State)
		require.Equal(t, ledgerdb.RejectWorkflowEnded, job.RejectReason)
		ledgertest.RequireRows(t, e.Store, j.key, 40)
	})

	e.requireEnd(t, 160)
}

// TestCLIStartWithAnAmountIsRefused checks the price-list rule at `temporal workflow start`:
// another program that starts a MeteredJob with its own price — the input of the first versions,
// which carried "Cost" — is refused: the run ends rejected, says prices are set by the server, and
// writes nothing (no placeholder, no row). A start that names a metered kind instead writes its
// placeholder at the price list's price, holds the whole hold, and is settled at the usage its
// work reports: charge −hold, release +unused, net −used × price (the net-effect rule).
func TestCLIStartWithAnAmountIsRefused(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	ctx := testContext(t)

	priced := e.job(t, "priced-by-caller")
	input := fmt.Sprintf(`{"JobID":%q,"AccountID":%q,"Kind":%q,"Cost":1,"Work":{"InputRef":"sim:ok"}}`,
		priced.id, e.acct, ledgertest.Fixed(t, e.Store, 40))
	final := e.awaitClosed(t, e.startDirectlyWith(t, priced.id, e.acct, input))
	require.Equal(t, ledgerdb.StateRejected, final.State, "%+v", final)
	require.Contains(t, final.Reason, "prices are set by the server")
	e.requireNoJob(t, priced.key, "nothing in the ledger")

	metered := e.job(t, "metered")
	kind := ledgertest.Metered(t, e.Store, 2, 30)
	final = e.awaitClosed(t, e.startDirectly(t, metered.id, e.acct, kind, "sim:ok+used:12"))
	require.Equal(t, ledgerdb.StateDelivered, final.State, "%+v", final)
	require.Equal(t, int64(24), final.Charged)
	require.Equal(t, int64(36), final.Released)
	job, err := e.Store.Job(ctx, metered.key)
	require.NoError(t, err)
	require.Equal(t, int64(60), job.Cost, "the hold: 30 GPU-seconds at 2 credits")
	require.Equal(t, int64(12), *job.UnitsUsed)
	require.Equal(t, []ledgertest.Row{{Kind: ledgerdb.KindCharge, Amount: -60}, {Kind: ledgerdb.KindRelease, Amount: 36}},
		ledgertest.Rows(t, e.Store, metered.key))
	e.requireEnd(t, 200-24)
}

// TestForeignWorkflowHoldsTheJobsID checks the net-effect and remembered-IDs rules when another
// program's workflow, started with `temporal workflow start --type SomeoneElses` on a queue nobody
// polls, holds a job's workflow ID: the job's submission answers within seconds with ErrRejected,
// reason workflow_id_taken, nothing charged (net 0) — running or closed (terminated with the CLI
// first), it never waits on or sends its charge into a workflow that is not the job's.
func TestForeignWorkflowHoldsTheJobsID(t *testing.T) {
	t.Parallel()
	e := newDoor(t, nil, 200)
	for _, closed := range []bool{false, true} {
		tag := "running"
		if closed {
			tag = "closed"
		}
		t.Run(tag, func(t *testing.T) {
			j := e.job(t, tag)
			e.cli.must(t, "workflow", "start", "--type", "SomeoneElses", "--task-queue", "nobody-polls",
				"--workflow-id", j.workflowID, "--input", `{"theirs":true}`)
			if closed {
				e.cli.must(t, "workflow", "terminate", "--workflow-id", j.workflowID, "--reason", "their program is done with it")
			} else {
				t.Cleanup(func() {
					_, _ = e.cli.run(context.Background(), "workflow", "terminate", "--workflow-id", j.workflowID, "--reason", "door test over")
				})
			}

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			began := time.Now()
			sub, err := e.Jobs.Submit(ctx, jobs.Job{ID: j.id, AccountID: e.acct, Kind: ledgertest.Fixed(t, e.Store, 40), InputRef: "sim:ok"})
			took := time.Since(began)
			require.True(t, errors.Is(err, ledgerdb.ErrRejected), "want ErrRejected, got %v", err)
			require.Less(t, took, 10*time.Second, "the submission waited on a foreign workflow")
			require.Equal(t, ledgerdb.StateRejected, sub.Status.State)
			require.Equal(t, ledgerdb.MoneyNotCharged, sub.Status.MoneyState)
			require.Equal(t, ledgerdb.ReasonRejected, sub.Status.Reason)
			require.Equal(t, ledgerdb.RejectWorkflowIDTaken.Describe(), sub.Status.Detail)
			ledgertest.RequireRows(t, e.Store, j.key, 40)

			// The foreign workflow is untouched: still theirs, running or closed as it was.
			d, err := e.Client.DescribeWorkflow(testContext(t), j.workflowID, "")
			require.NoError(t, err)
			require.Equal(t, "SomeoneElses", d.WorkflowType.Name)
		})
	}
	e.requireEnd(t, 200)
}
