package webhooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// jobEvents answers the types of the job's events written so far, in seq order, without deriving.
func jobEvents(t *testing.T, s *ledgerdb.Store, job ledgerdb.JobKey) []string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT type FROM webhook_events WHERE job_id = $1 ORDER BY seq`, job.String())
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// inTx runs sql in tx and requires its first column to be "applied".
func inTx(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	var outcome string
	require.NoError(t, tx.QueryRow(context.Background(), sql, args...).Scan(&outcome))
	require.Equal(t, "applied", outcome, sql)
}

// deriveUntil runs derive passes until ok holds, with a generous deadline: a pass reads a
// transaction only once every older one in the database has ended.
func deriveUntil(t *testing.T, ws *webhooks.Store, ok func() bool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		if _, _, err := ws.Derive(context.Background(), 1000); err != nil {
			t.Log(err)
			return false
		}
		return ok()
	}, 2*time.Minute, 10*time.Millisecond, msg)
}

// TestDerivePassNeverSkipsATransactionHeldOpen checks that an event exists exactly when its money
// row does when transactions commit in another order than they took their IDs and row ids, under
// real concurrency. Transaction B takes its ID first (a charge), then transaction A charges
// another job, then B charges a third job — a row whose id is above A's — and commits, and a
// younger transaction commits too, while A stays open across derive passes. The passes derive B's two events and cannot derive A's (its row
// is not committed); once A commits, its event is derived too, and every event exists exactly
// once. A pass that moved its cursor past what it had read (B's rows) would have skipped A's row
// for good.
func TestDerivePassNeverSkipsATransactionHeldOpen(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	fixed := ledgertest.Fixed(t, s, 10)
	var jobs [3]ledgerdb.JobKey
	for i := range jobs {
		acct := ledgertest.Account(t, s, 100) // one account each: no charge waits on another's
		listening(t, ws, acct)
		jobs[i] = submit(t, s, acct, fixed)
	}
	const charge = `SELECT outcome FROM ledger_charge($1, NULL)`
	txB, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txB.Rollback(ctx) }()
	txA, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(ctx) }()

	inTx(t, txB, charge, jobs[0].String()) // B's transaction ID is the older
	inTx(t, txA, charge, jobs[1].String())
	inTx(t, txB, charge, jobs[2].String()) // B's second row: an id above A's row
	require.NoError(t, txB.Commit(ctx))
	// A transaction younger than A commits meanwhile, as in any busy ledger.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: ledgertest.Account(t, s, 0), Amount: 5, Key: "later"})
	require.NoError(t, err)

	deriveUntil(t, ws, func() bool { return len(jobEvents(t, s, jobs[0])) == 1 && len(jobEvents(t, s, jobs[2])) == 1 },
		"B's events are derived while A is open")
	require.Empty(t, jobEvents(t, s, jobs[1]), "A's row is not committed: no event")
	var aID, bID int64
	require.NoError(t, txA.QueryRow(ctx, `SELECT id FROM ledger_entries WHERE job_id = $1`, jobs[1].String()).Scan(&aID))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT id FROM ledger_entries WHERE job_id = $1`, jobs[2].String()).Scan(&bID))
	require.Less(t, aID, bID, "the pass read a row whose id is above the open transaction's row")

	require.NoError(t, txA.Commit(ctx))
	caughtUp(t, ws)
	for _, job := range jobs {
		require.Equal(t, []string{"job.charged"}, jobEvents(t, s, job), "job %s: its event exactly once", job)
	}
}

// TestJobEventsInOrderWhenTheLaterTransitionHasTheOlderID checks a job's events keep their order
// (the order its endpoints receive them in) when the later transition's transaction took its ID
// before the earlier one's: transaction R takes its ID (a grant elsewhere), T takes a younger one
// and stays open, the job is charged and committed, then R refunds the job and commits. A pass
// while T is open reads R's refund and not yet the charge; the job's charge event is written with
// it, first: charged before refunded, each once.
func TestJobEventsInOrderWhenTheLaterTransitionHasTheOlderID(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	job := submit(t, s, acct, ledgertest.Fixed(t, s, 10))
	other, later := ledgertest.Account(t, s, 0), ledgertest.Account(t, s, 0)
	const grant = `SELECT outcome FROM ledger_post($1, 'grant', 5, $2, '')`

	txR, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txR.Rollback(ctx) }()
	inTx(t, txR, grant, other, ledgertest.ID(t, "r"))
	txT, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txT.Rollback(ctx) }()
	inTx(t, txT, grant, later, ledgertest.ID(t, "t"))
	applied(t, ledgerdb.Applied)(s.Charge(ctx, job))
	inTx(t, txR, `SELECT outcome FROM ledger_refund($1, 'timed_out', '', 1)`, job.String())
	require.NoError(t, txR.Commit(ctx))

	deriveUntil(t, ws, func() bool { return len(jobEvents(t, s, job)) > 0 }, "the refund is derived while T is open")
	require.Equal(t, []string{"job.charged", "job.refunded"}, jobEvents(t, s, job))
	require.NoError(t, txT.Commit(ctx))
	caughtUp(t, ws)
	require.Equal(t, []string{"job.charged", "job.refunded"}, jobEvents(t, s, job), "each once, in order")
}

// TestDerivePassKilledMidwayLosesNothing checks that a derive pass cut off mid-transaction (its
// worker killed, its connection gone, as in a crash) leaves nothing half-done: the cursor stays
// where it was, the next pass derives the same transitions again, and each event exists once and
// is delivered.
func TestDerivePassKilledMidwayLosesNothing(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 100)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))

	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	// Passes inside one open transaction until one has derived the charge: its event is written,
	// uncommitted, when the worker dies.
	require.Eventually(t, func() bool {
		_, err := tx.Exec(ctx, `SELECT * FROM ledger_webhook_derive(1000)`)
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE job_id = $1`, job.String()).Scan(&n))
		return n == 1
	}, 2*time.Minute, 10*time.Millisecond)
	var killed bool
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)
	_ = tx.Rollback(ctx)
	conn.Conn().Close(ctx)

	require.Empty(t, jobEvents(t, s, job), "the killed pass wrote nothing")
	runWorkers(t, testOptions(ws, acct), 1)
	waitDelivered(t, s, ep.ID)
	require.Equal(t, []string{"job.charged"}, jobEvents(t, s, job))
	require.Len(t, rcv.received(), 1)
}

// TestAccountWithoutEndpointsGetsNoEvents checks that an account without endpoints costs the
// delivery side nothing: its transitions derive no event and queue nothing while it has none, and
// a pass after its first endpoint does not derive them either while its jobs do not move again. A
// replay since a time to an endpoint made later derives them then, from the same rows, in order —
// the grant's credit.granted first —, and sends them to that endpoint only.
func TestAccountWithoutEndpointsGetsNoEvents(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := ledgertest.Account(t, s, 1000)
	start := time.Now().Add(-time.Second)
	lifecycle(t, s, acct, ledgertest.Fixed(t, s, 10), 2)
	require.Empty(t, events(t, ws, acct))

	rcv := newReceiver(t)
	ep := rcv.endpoint(t, ws, acct)
	caughtUp(t, ws)
	require.Empty(t, events(t, ws, acct), "jobs that did not move again since the endpoint get no event from a pass")
	n, err := ws.Replay(ctx, acct, ep.ID, webhooks.Replay{Since: &start})
	require.NoError(t, err)
	require.Equal(t, 6, n)
	evs := events(t, ws, acct)
	require.Equal(t, []string{"credit.granted", "job.charged", "job.delivered", "job.charged", "job.refunded", "job.reclaimed"}, types(evs))
	runWorkers(t, testOptions(ws, acct), 1)
	waitDelivered(t, s, ep.ID)
	requireInOrderPerJob(t, evs, rcv.received())
}

// TestReclaimedTombstoneEventSaysDeleted checks that the job.reclaimed event of a deleted refunded
// job, reclaimed by its late result at 90 of its 100 held GPU-seconds, tells what the tombstone now
// costs as the ledger does: state deleted, 90 charged, 210 released.
func TestReclaimedTombstoneEventSaysDeleted(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 1000)
	job := chargedJob(t, s, acct, ledgertest.Metered(t, s, 3, 100))
	applied(t, ledgerdb.Applied)(s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 3))
	_, err := s.Delete(ctx, job)
	require.NoError(t, err)
	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, ledgerdb.Units(30), "s3://out/late"))
	evs := events(t, ws, acct)
	require.Equal(t, []string{"job.charged", "job.refunded", "job.reclaimed"}, types(evs))
	d := data(t, evs[2])
	require.Equal(t, []any{"deleted", 90.0, 210.0, 1000.0 - 90}, []any{d["state"], d["charged"], d["released"], d["balance_after"]})
}

// TestPassDerivesAJobsEarlierEventsWhenItMovesAgain checks the rule docs/design.md gives for an
// account that adds its first endpoint later: a job's transition from before the endpoint is not
// derived by a pass on its own, but once the job moves again the pass derives all of the job's
// events, the earlier first, and queues them to the endpoint, so a job's events reach it in the
// order the job passed through them.
func TestPassDerivesAJobsEarlierEventsWhenItMovesAgain(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := ledgertest.Account(t, s, 100)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))
	caughtUp(t, ws) // the charge is read while the account has no endpoint

	listening(t, ws, acct)
	require.Empty(t, events(t, ws, acct), "the charge alone is not derived by a pass")
	applied(t, ledgerdb.Applied)(s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 1))
	evs := events(t, ws, acct)
	require.Equal(t, []string{"job.charged", "job.refunded"}, types(evs), "the job's earlier event comes with its later one, first")
	var queued int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE e.account_id = $1`, acct).Scan(&queued))
	require.Equal(t, 2, queued, "both are queued to the endpoint")
}

// TestDerivePassRefusesACursorAheadOfTheCluster checks that events are never held back in silence:
// a cursor ahead of every transaction the cluster has begun (a database restored from a logical
// dump, whose transaction IDs start lower) would make every pass read nothing, so a pass fails
// with an error that says so and how to reset it, and writes nothing.
func TestDerivePassRefusesACursorAheadOfTheCluster(t *testing.T) {
	ctx := context.Background()
	ledgertest.Store(t)
	tx, err := ledgertest.OwnerPool(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // the shared cursor is left as it was
	_, err = tx.Exec(ctx, `UPDATE webhook_derive_cursor
		SET horizon = ((pg_snapshot_xmax(pg_current_snapshot())::text::numeric + 1000000)::text)::xid8`)
	require.NoError(t, err)
	var derived int
	err = tx.QueryRow(ctx, `SELECT derived FROM ledger_webhook_derive(1000)`).Scan(&derived)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "a pass must not answer 0 while the cursor is ahead of the cluster")
	require.Equal(t, "55000", pgErr.Code)
	require.Contains(t, pgErr.Message, "ahead of every transaction")
}
