package api_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
)

// TestDeletedJobStillPaysForItsLateResult protects the net-effect rule at the HTTP doors: deleting
// a job removes its content from view, never an obligation. A job metered by the GPU-second (300
// held at 1 credit) times out and is refunded while its GPU is still finishing; its customer's own
// key deletes it (200, the tombstone: deleted, refunded); the runner then reports the late result,
// 90 GPU-seconds (200, not 410): the refund is reclaimed and the job settled at 90 — charge −300,
// refund +300, reclaim −300, release +210. The customer's read answers 410 deleted with money
// state charged and the figures in its message. Before, the runner's report was refused with 410
// and the customer kept the refund for delivered work.
func TestDeletedJobStillPaysForItsLateResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Its attempts time out: workertest.TimeoutPolicy, under which only work that never finishes runs.
	m := e.meteredRunningOn(t, e.serve(t, func(o *api.Options) { o.Jobs = e.JobsWith(workertest.TimeoutPolicy()) }))
	e.wait(t, m.acct, m.id, ledgerdb.StateRefunded)

	a := call(t, m.base, "DELETE", "/v1/jobs/"+m.id, m.key, nil)
	require.Equal(t, 200, a.code, a.raw)
	require.Equal(t, "deleted", a.str("state"))
	require.Equal(t, "refunded", a.str("money_state"))
	require.Contains(t, a.str("message"), "if the job's result still arrives, the refund is taken back")

	a = call(t, m.base, "POST", "/v1/jobs/"+m.id+"/result?account_id="+m.acct, m.runner,
		map[string]any{"attempt": 2, "output_ref": "s3://late/" + m.id, "units_used": 90})
	require.Equal(t, 200, a.code, a.raw)
	e.waitReclaimed(t, m.acct, m.id)

	a = call(t, m.base, "GET", "/v1/jobs/"+m.id, m.key, nil)
	require.Equal(t, 410, a.code, a.raw)
	require.Equal(t, "deleted", a.str("code"))
	require.Equal(t, "deleted", a.str("state"))
	require.Equal(t, "charged", a.str("money_state"))
	require.Contains(t, a.str("message"), "90 of 300 held credits charged; 210 returned.")
	require.NotContains(t, a.raw, "s3://late", "a deleted job's output is not shown")
	require.Equal(t, []ledgertest.Row{
		{Kind: ledgerdb.KindCharge, Amount: -300}, {Kind: ledgerdb.KindRefund, Amount: 300},
		{Kind: ledgerdb.KindReclaim, Amount: -300}, {Kind: ledgerdb.KindRelease, Amount: 210},
	}, e.jobRows(t, m.acct, m.id))
	ledgertest.RequireBalance(t, e.Store, m.acct, 1000-90)
}

// waitReclaimed waits until the ledger has reclaimed the refund of the account's job.
func (e *env) waitReclaimed(t *testing.T, account, jobID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		job, err := e.Store.Job(t.Context(), ledgerdb.JobKey{AccountID: account, JobID: jobID})
		return err == nil && job.IsReclaimed
	}, 40*time.Second, 100*time.Millisecond, "job %s/%s was never reclaimed", account, jobID)
}
