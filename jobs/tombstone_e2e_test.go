package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/invariants"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestE2EDeletedJobStillPaysForItsLateResult protects the net-effect rule against deletion:
// deleting a job removes its content from view, never an obligation. A job metered by the
// GPU-second (300 held at 1 credit) times out and is refunded while its GPU is still finishing; its
// customer deletes it (the door every customer has: the job service's Delete, which DELETE
// /v1/jobs/{id} calls); then the runner reports the late result, 90 GPU-seconds. The refund is
// reclaimed and the job settled at 90 — charge −300, refund +300, reclaim −300, release +210, net
// −90 — whether the job's workflow still listened (the result reaches it as a signal) or had closed
// (the late-result fallback takes it). The tombstone answers state deleted, money state charged,
// with the figures and no output, and the audit finds nothing wrong. Before, the result was
// discarded and the customer kept the refund for delivered work.
func TestE2EDeletedJobStillPaysForItsLateResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gpu := ledgertest.Metered(t, e.Store, 1, 300)
	for _, c := range []struct {
		name     string
		window   time.Duration
		wantPath string
	}{
		{"workflow listening", 30 * time.Second, jobs.PathSignal},
		{"workflow closed", time.Second, jobs.PathFallback},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			// One attempt that times out: workertest.TimeoutPolicy, for work that never finishes.
			p := workertest.TimeoutPolicy()
			p.MaximumAttempts, p.LateResultWindow = 1, c.window
			st := e.JobsWith(p)
			s := e.submitStoryTo(t, st, ledgertest.Account(t, e.Store, 1000), gpu, 300, "sim:hang")
			require.NoError(t, s.err)
			acct, id, key, workflowID := s.acct, s.id, s.key(), s.workflowID()
			refunded := e.waitState(t, st, key, ledgerdb.StateRefunded)
			require.Equal(t, ledgerdb.ReasonTimedOut, refunded.Reason)
			if c.wantPath == jobs.PathFallback {
				require.Equal(t, ledgerdb.StateRefunded, e.awaitClosed(t, workflowID).State)
			}

			deleted, err := st.Delete(ctx, key)
			require.NoError(t, err)
			require.Equal(t, ledgerdb.StateDeleted, deleted.State)
			require.Equal(t, ledgerdb.MoneyRefunded, deleted.MoneyState)
			require.Contains(t, deleted.Message, "if the job's result still arrives, the refund is taken back")

			report, err := st.ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + id,
				FinishedAt: time.Now().UTC(), UnitsUsed: ledgerdb.Units(90)})
			require.NoError(t, err)
			require.Equal(t, c.wantPath, report.Path, report.Message)
			if c.wantPath == jobs.PathSignal {
				final := e.awaitClosed(t, workflowID)
				require.Equal(t, ledgerdb.StateDeleted, final.State)
				require.Equal(t, ledgerdb.MoneyCharged, final.MoneyState, "the job's run tells what the ledger says")
			} else {
				require.Equal(t, ledgerdb.Applied, report.Outcome)
			}

			status, err := st.Status(ctx, key)
			require.NoError(t, err)
			require.Equal(t, ledgerdb.StateDeleted, status.State)
			require.Equal(t, ledgerdb.MoneyCharged, status.MoneyState)
			require.Equal(t, int64(300), status.Held)
			require.Equal(t, int64(90), status.Charged)
			require.Equal(t, int64(210), status.Released)
			require.Equal(t, int64(90), *status.UnitsUsed)
			require.Empty(t, status.OutputRef, "a deleted job's output is not shown")
			require.Empty(t, status.Reason, "a recovered job keeps no reason")
			require.Equal(t, "Deleted; its ID can never be used again. Its result arrived after it had been refunded, so the "+
				"refund was taken back: 90 of 300 held credits charged; 210 returned. (90 GPU-seconds used at 1 credit each)", status.Message)
			ledgertest.RequireRowAmounts(t, e.Store, key,
				ledgertest.Row{Kind: ledgerdb.KindCharge, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRefund, Amount: 300},
				ledgertest.Row{Kind: ledgerdb.KindReclaim, Amount: -300}, ledgertest.Row{Kind: ledgerdb.KindRelease, Amount: 210})
			ledgertest.RequireBalance(t, e.Store, acct, 1000-90)

			// The same report again changes nothing.
			again, err := st.ReportResult(ctx, key, activities.WorkResult{Attempt: 1, OutputRef: "s3://late/" + id, UnitsUsed: ledgerdb.Units(90)})
			require.NoError(t, err)
			require.Equal(t, jobs.PathAlreadyApplied, again.Path)
			ledgertest.RequireBalance(t, e.Store, acct, 1000-90)

			report2, err := invariants.Check(ctx, invariants.Options{Ledger: e.Store, Temporal: e.Client,
				Namespace: e.Config.Temporal.Namespace, TaskQueue: e.Config.Temporal.TaskQueue, AccountID: acct})
			require.NoError(t, err)
			require.True(t, report2.OK(), "%+v", report2.Violations)
		})
	}
}

// TestE2EDeletedSettledJobTakesNoResult keeps deletion's other side: a delivered job deleted has
// nothing left to bill, so a result reported for it is refused as gone, nothing written, and the
// tombstone no longer shows the output it was delivered with.
func TestE2EDeletedSettledJobTakesNoResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testContext(t)
	s := e.submitted(t, 40, "sim:ok")
	key := s.key()
	require.Equal(t, ledgerdb.StateDelivered, e.awaitClosed(t, s.workflowID()).State)
	deleted, err := e.Jobs.Delete(ctx, key)
	require.NoError(t, err)
	require.Empty(t, deleted.OutputRef, "deletion removes the job's content from view")
	require.Equal(t, "Deleted; its ID can never be used again. Your money stays as it was: 40 credits charged.", deleted.Message)

	_, err = e.Jobs.ReportResult(context.Background(), key, activities.WorkResult{Attempt: 1, OutputRef: "s3://again"})
	require.ErrorIs(t, err, ledgerdb.ErrGone)
	e.requireMoney(t, s, 160, ledgerdb.KindCharge)
}
