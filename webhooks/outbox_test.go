package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// events answers every event of the account derived from the transitions committed so far, in
// order.
func events(t *testing.T, ws *webhooks.Store, acct string) []webhooks.Event {
	t.Helper()
	caughtUp(t, ws)
	evs, err := ws.Events(context.Background(), acct, 0, 1000)
	require.NoError(t, err)
	return evs
}

// types lists the events' types, in order.
func types(evs []webhooks.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// data decodes an event's payload.
func data(t *testing.T, e webhooks.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Data, &m))
	return m
}

// listening gives the account an endpoint, so that its events are derived: one no worker of these
// tests sends to. It answers the endpoint.
func listening(t *testing.T, ws *webhooks.Store, acct string) webhooks.Created {
	t.Helper()
	ep, err := ws.CreateEndpoint(context.Background(), webhooks.EndpointSpec{AccountID: acct, URL: "https://hooks.example.com/" + acct},
		webhooks.URLPolicy{})
	require.NoError(t, err)
	return ep
}

// stores are the test ledger and its webhook store.
func stores(t *testing.T) (*ledgerdb.Store, *webhooks.Store) {
	t.Helper()
	s := ledgertest.Store(t)
	return s, webhooks.NewStore(s.Pool())
}

// account opens an account granted credits whose grant a derive pass has read already, while the
// account had no endpoint: an endpoint made afterwards is never sent the grant's credit.granted
// (but a replay since before it is), so that a test's events are its own steps'.
func account(t *testing.T, s *ledgerdb.Store, ws *webhooks.Store, credits int64) string {
	t.Helper()
	acct := ledgertest.Account(t, s, credits)
	caughtUp(t, ws)
	return acct
}

// listened is the set-up of the event tests: the test ledger and its webhook store, and an account
// granted credits (account) that has an endpoint (listening).
func listened(t *testing.T, credits int64) (*ledgerdb.Store, *webhooks.Store, string) {
	t.Helper()
	s, ws := stores(t)
	acct := account(t, s, ws, credits)
	listening(t, ws, acct)
	return s, ws, acct
}

// submit writes a placeholder of a kind sold by the job at cost.
func submit(t *testing.T, s *ledgerdb.Store, acct, kind string) ledgerdb.JobKey {
	t.Helper()
	sub := ledgerdb.Submission{JobID: ledgertest.ID(t, "job"), AccountID: acct, Kind: kind, Request: []byte(`{}`)}
	tr, err := s.Submit(context.Background(), sub)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, tr.Outcome)
	return sub.Key()
}

// chargedJob submits a job of kind (submit) and charges it.
func chargedJob(t *testing.T, s *ledgerdb.Store, acct, kind string) ledgerdb.JobKey {
	t.Helper()
	job := submit(t, s, acct, kind)
	applied(t, ledgerdb.Applied)(s.Charge(context.Background(), job))
	return job
}

// applied requires a transition that applied (or, with want, that outcome).
func applied(t *testing.T, want ledgerdb.Outcome) func(ledgerdb.Transition, error) {
	return func(tr ledgerdb.Transition, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, want, tr.Outcome)
	}
}

// TestEveryMoneyTransitionWritesOneEvent checks the events' rule (the
// one-transaction-per-transition rule extended to what is told), for an account with an endpoint:
// every money transition — charge, rejection for credits, orphan rejection, delivery (settle and
// the first version's deliver), refund, reclaim (settle of a refunded job and the first version's
// reclaim) — has exactly one event, derived from the rows it committed, carrying the job's money
// figures as they stood right after it (not as they stand when derived); and an idempotent replay
// of each step (already_applied, or a charge of a rejected job) has none.
func TestEveryMoneyTransitionWritesOneEvent(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 1000)
	metered := ledgertest.Metered(t, s, 3, 20) // holds 60
	fixed := ledgertest.Fixed(t, s, 40)

	// Charged, then settled at 5 units: job.charged, job.delivered; replays write nothing.
	settled := chargedJob(t, s, acct, metered)
	applied(t, ledgerdb.AlreadyApplied)(s.Charge(ctx, settled))
	applied(t, ledgerdb.Applied)(s.Settle(ctx, settled, 1, ledgerdb.Units(5), "out://1"))
	applied(t, ledgerdb.AlreadyApplied)(s.Settle(ctx, settled, 1, ledgerdb.Units(5), "out://1"))

	// Charged, refunded, reclaimed by a late settle at 7 units.
	recovered := chargedJob(t, s, acct, metered)
	applied(t, ledgerdb.Applied)(s.Refund(ctx, recovered, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3))
	applied(t, ledgerdb.AlreadyApplied)(s.Refund(ctx, recovered, ledgerdb.ReasonTimedOut, "timed out after 3 attempts", 3))
	applied(t, ledgerdb.Applied)(s.Settle(ctx, recovered, 4, ledgerdb.Units(7), "out://late"))
	applied(t, ledgerdb.AlreadyApplied)(s.Settle(ctx, recovered, 4, ledgerdb.Units(7), "out://late"))

	// The first version's steps: deliver, and refund then reclaim.
	delivered := chargedJob(t, s, acct, fixed)
	applied(t, ledgerdb.Applied)(s.Deliver(ctx, delivered, 1))
	applied(t, ledgerdb.AlreadyApplied)(s.Deliver(ctx, delivered, 1))
	reclaimed := chargedJob(t, s, acct, fixed)
	applied(t, ledgerdb.Applied)(s.Refund(ctx, reclaimed, ledgerdb.ReasonGPUFailed, "failed", 3))
	applied(t, ledgerdb.Applied)(s.Reclaim(ctx, reclaimed))
	applied(t, ledgerdb.AlreadyApplied)(s.Reclaim(ctx, reclaimed))

	// An orphan rejected, twice.
	orphan := submit(t, s, acct, fixed)
	applied(t, ledgerdb.Applied)(s.RejectOrphan(ctx, orphan, ledgerdb.RejectWorkflowEnded))
	applied(t, ledgerdb.AlreadyApplied)(s.RejectOrphan(ctx, orphan, ledgerdb.RejectWorkflowEnded))

	// Rejected for credits: 1000 − 5×3 − 7×3 − 40 − 40 = 884 left; a 900 job cannot be paid.
	poor := submit(t, s, acct, ledgertest.Fixed(t, s, 900))
	tr, err := s.Charge(ctx, poor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)
	require.Equal(t, ledgerdb.StateRejected, tr.Job.State)
	_, err = s.Charge(ctx, poor)
	require.ErrorIs(t, err, ledgerdb.ErrInsufficientCredits)

	evs := events(t, ws, acct)
	require.Equal(t, []string{
		"job.charged", "job.delivered",
		"job.charged", "job.refunded", "job.reclaimed",
		"job.charged", "job.delivered",
		"job.charged", "job.refunded", "job.reclaimed",
		"job.rejected",
		"job.rejected",
	}, types(evs))
	byJob := map[string][]webhooks.Event{}
	ids := map[string]bool{}
	for i, e := range evs {
		byJob[e.JobID] = append(byJob[e.JobID], e)
		require.False(t, ids[e.ID], "event IDs are unique")
		ids[e.ID] = true
		require.Regexp(t, `^msg_[0-9a-f]{32}$`, e.ID)
		if i > 0 {
			require.Greater(t, e.Seq, evs[i-1].Seq)
		}
		require.NotContains(t, string(e.Data), "timed out after", "an operator's detail never reaches a customer")
	}

	// The figures, as they stand after each transition.
	ev := byJob[settled.JobID]
	require.Equal(t, map[string]any{"job_id": settled.JobID, "account_id": acct, "state": "running", "kind": metered,
		"price_version": data(t, ev[0])["price_version"], "unit": "gpu_second", "unit_price": 3.0, "held_units": 20.0, "held": 60.0,
		"units_used": nil, "charged": 60.0, "released": 0.0, "reason": nil, "attempts": 0.0, "balance_after": 940.0}, data(t, ev[0]))
	d := data(t, ev[1])
	require.Equal(t, "delivered", d["state"])
	require.Equal(t, 5.0, d["units_used"])
	require.Equal(t, 15.0, d["charged"])
	require.Equal(t, 45.0, d["released"])
	require.Equal(t, 985.0, d["balance_after"])

	ev = byJob[recovered.JobID]
	require.Equal(t, "timed_out", data(t, ev[1])["reason"])
	require.Equal(t, 0.0, data(t, ev[1])["charged"])
	d = data(t, ev[2])
	require.Equal(t, "recovered", d["state"])
	require.Equal(t, 21.0, d["charged"])
	require.Equal(t, 39.0, d["released"])

	require.Equal(t, "rejected", data(t, byJob[orphan.JobID][0])["reason"])
	require.Equal(t, "insufficient_credits", data(t, byJob[poor.JobID][0])["reason"])
	require.Nil(t, data(t, byJob[poor.JobID][0])["balance_after"])
	ledgertest.RequireSound(t, s, acct)
}

// TestEventCommitsWithItsTransition checks that an event exists exactly when its transition
// committed: a charge rolled back leaves neither its ledger row nor an event (there is no row to
// derive one from), and one committed leaves both.
func TestEventCommitsWithItsTransition(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	job := submit(t, s, acct, ledgertest.Fixed(t, s, 40))

	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	var outcome string
	require.NoError(t, tx.QueryRow(ctx, `SELECT outcome FROM ledger_charge($1, NULL)`, job.String()).Scan(&outcome))
	require.Equal(t, "applied", outcome)
	require.NoError(t, tx.Rollback(ctx))
	require.Empty(t, events(t, ws, acct))
	ledgertest.RequireBalance(t, s, acct, 100)

	applied(t, ledgerdb.Applied)(s.Charge(ctx, job))
	require.Equal(t, []string{"job.charged"}, types(events(t, ws, acct)))
}

// TestBalanceLowOnCrossingDownwards checks the low-balance event: derived once from a debit row (a
// charge, a reclaim, a negative adjustment) that took the balance from at or above the account's
// threshold to below it; not again while the balance stays below;
// again after a top-up lifts it and a debit takes it below once more; never without a threshold;
// and a threshold for an unknown account, or out of range, is refused with nothing written.
func TestBalanceLowOnCrossingDownwards(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	fixed := ledgertest.Fixed(t, s, 30)
	lows := func() []map[string]any {
		var out []map[string]any
		for _, e := range events(t, ws, acct) {
			if e.Type == "balance.low" {
				require.Empty(t, e.JobID, "balance.low is the account's, not a job's")
				out = append(out, data(t, e))
			}
		}
		return out
	}

	// No threshold: nothing.
	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, fixed))) // 70
	require.Empty(t, lows())

	out, err := ws.SetLowBalanceThreshold(ctx, acct, ptr(int64(50)))
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, out)
	out, err = ws.SetLowBalanceThreshold(ctx, acct, ptr(int64(50)))
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, out)

	crossing := chargedJob(t, s, acct, fixed)                              // 70 → 40: crosses
	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, fixed))) // 40 → 10: stays below
	require.Equal(t, []map[string]any{{"account_id": acct, "balance": 40.0, "threshold": 50.0, "job_id": crossing.JobID}}, lows())

	// A top-up over the threshold, then a refund and its reclaim: the reclaim crosses again.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 50, Key: "top-up"}) // 60
	require.NoError(t, err)
	job := chargedJob(t, s, acct, fixed)                                             // 60 → 30: crosses (2)
	applied(t, ledgerdb.Applied)(s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 1)) // 60
	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, nil, "out://x"))              // 60 → 30: crosses (3)
	// A negative adjustment crosses too.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 40, Key: "top-up-2"}) // 70
	require.NoError(t, err)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -25, Key: "fix"}) // 45: crosses (4)
	require.NoError(t, err)
	got := lows()
	require.Len(t, got, 4)
	require.Equal(t, 30.0, got[2]["balance"])
	require.Equal(t, job.JobID, got[2]["job_id"])
	require.Equal(t, map[string]any{"account_id": acct, "balance": 45.0, "threshold": 50.0, "job_id": nil}, got[3])

	// Cleared: nothing more.
	_, err = ws.SetLowBalanceThreshold(ctx, acct, nil)
	require.NoError(t, err)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -40, Key: "fix-2"})
	require.NoError(t, err)
	require.Len(t, lows(), 4)

	_, err = ws.SetLowBalanceThreshold(ctx, ledgertest.ID(t, "nobody"), ptr(int64(1)))
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	_, err = ws.SetLowBalanceThreshold(ctx, acct, ptr(ledgerdb.MaxBalance+1))
	var invalid *ledgerdb.InvalidInputError
	require.ErrorAs(t, err, &invalid)
	threshold, err := ws.LowBalanceThreshold(ctx, acct)
	require.NoError(t, err)
	require.Nil(t, threshold)
	ledgertest.RequireSound(t, s, acct)
}

func ptr[T any](v T) *T { return &v }
