package webhooks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// replayer sets up the tenant that replays in the tests below: an account with the history of n
// jobs and an endpoint to replay it to; answers the account and the endpoint's ID.
func replayer(t *testing.T, s *ledgerdb.Store, ws *webhooks.Store, n int) (string, string) {
	t.Helper()
	acct := ledgertest.Account(t, s, 1000)
	lifecycle(t, s, acct, ledgertest.Fixed(t, s, 10), n)
	ep := listening(t, ws, acct)
	return acct, ep.ID
}

// TestAnotherTenantsReplaysCannotStarveDerivePasses checks that every account's events are still
// derived while one customer replays its own endpoint back to back (a replay --since derives its
// account's rows itself, and must never hold the derive passes' lock to do it): a tenant's own API
// calls must not hold every other tenant's events back.
func TestAnotherTenantsReplaysCannotStarveDerivePasses(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	attacker, ep := replayer(t, s, ws, 3)
	victim := ledgertest.Account(t, s, 100)
	listening(t, ws, victim)
	caughtUp(t, ws)

	stop := make(chan struct{})
	done := make(chan struct{}, 3)
	since := time.Unix(0, 0)
	for range 3 { // three requests in flight, well under the API's 20 a second per key
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = ws.Replay(ctx, attacker, ep, webhooks.Replay{Since: &since})
			}
		}()
	}
	defer func() {
		close(stop)
		for range 3 {
			<-done
		}
	}()
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_sleep(0.2)`).Scan(new(string))) // the replays are running

	job := chargedJob(t, s, victim, ledgertest.Fixed(t, s, 10))
	passes, skipped := 0, 0
	ok := assert.Eventually(t, func() bool {
		n, _, err := ws.Derive(ctx, 1000)
		require.NoError(t, err)
		passes++
		if n == 0 {
			skipped++
		}
		return len(jobEvents(t, s, job)) == 1
	}, time.Minute, 10*time.Millisecond, "the victim's charge is derived while another tenant replays")
	t.Logf("derive passes tried: %d, answered 0 (lock held by a replay or nothing new): %d, derived: %v", passes, skipped, ok)
}

// TestReplayInFlightNeverMakesADerivePassSkip checks the same rule without depending on timing:
// while one account's replay since a time is still running (its transaction open), a derive pass
// still derives another account's committed transitions; a replay never holds the passes' lock.
func TestReplayInFlightNeverMakesADerivePassSkip(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	_, ep := replayer(t, s, ws, 1)
	acct := ledgertest.Account(t, s, 100)
	listening(t, ws, acct)
	caughtUp(t, ws)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10)) // committed before the replay begins

	replay, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = replay.Rollback(ctx) }()
	inTx(t, replay, `SELECT outcome FROM ledger_webhook_replay($1, NULL, $2)`, ep, time.Unix(0, 0))

	// Passes run while the replay's transaction stays open. Other tests' passes may hold the lock
	// for a moment, and their open transactions may hold the bound below the charge, so one pass
	// may find nothing; but a replay that held the lock would keep every pass empty until it ends.
	require.Eventually(t, func() bool {
		_, _, err := ws.Derive(ctx, 1000)
		require.NoError(t, err)
		return slices.Equal([]string{"job.charged"}, jobEvents(t, s, job))
	}, time.Minute, 20*time.Millisecond, "the passes derive the charge while the other account's replay runs")
}

// TestReplaySinceSendsNothingFromBeforeIt checks replay's promise, every event since the time and
// none from before it, for a job whose row changed after the time though its transition came
// before: a job rejected before the time and deleted after it has no event to replay.
func TestReplaySinceSendsNothingFromBeforeIt(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := ledgertest.Account(t, s, 100)
	rejected := submit(t, s, acct, ledgertest.Fixed(t, s, 10))
	applied(t, ledgerdb.Applied)(s.RejectOrphan(ctx, rejected, ledgerdb.RejectWorkflowEnded))
	var since time.Time
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT clock_timestamp() FROM pg_sleep(0.02)`).Scan(&since))
	_, err := s.Delete(ctx, rejected)
	require.NoError(t, err)
	caughtUp(t, ws) // read while the account has no endpoint: no event yet
	ep := listening(t, ws, acct)

	n, err := ws.Replay(ctx, acct, ep.ID, webhooks.Replay{Since: &since})
	require.NoError(t, err)
	require.Equal(t, 0, n, "the job was rejected before the time")
	require.Empty(t, jobEvents(t, s, rejected))
}
