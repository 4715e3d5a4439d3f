package webhooks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestTopUpRequestedOncePerCrossingWithinTheCap checks automatic top-ups: a debit that takes the
// balance below the rule's threshold raises one topup.requested event, derived from its row like
// balance.low (nothing written on the money path), asking for what fills the balance up to the
// target under an idempotency key; posting the paid grant with that key twice buys the credits
// once (the idempotent-doors rule); a debit below the threshold already asks nothing; and the
// month's cap bounds what all requests ask for together — the last one asks for the rest of it,
// and a crossing past the cap asks nothing.
func TestTopUpRequestedOncePerCrossingWithinTheCap(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	_, err := s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpTarget, Threshold: 50, Amount: 200, MonthlyCap: 300})
	require.NoError(t, err)
	kind := ledgertest.Fixed(t, s, 30)

	charge := func() {
		t.Helper()
		applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind)))
	}
	charge() // 100 -> 70
	require.Empty(t, topUpRequests(t, ws, acct), "above the threshold still")
	charge() // 70 -> 40: crosses
	charge() // 40 -> 10: below already
	got := topUpRequests(t, ws, acct)
	require.Len(t, got, 1, "one request per crossing")
	require.Equal(t, 160.0, got[0]["amount"], "fills 40 up to the target of 200")
	require.Equal(t, 40.0, got[0]["balance"])
	key, _ := got[0]["idempotency_key"].(string)
	require.NotEmpty(t, key)

	// The payment code answers with the paid grant under the request's key, twice.
	for range 2 {
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 160, Key: key, Memo: "automatic top-up",
			Block: ledgerdb.BlockTerms{CostBasis: "0.01"}})
		require.NoError(t, err)
	}
	ledgertest.RequireBalance(t, s, acct, 170)

	charge() // 170 -> 140
	charge() // 140 -> 110
	charge() // 110 -> 80
	charge() // 80 -> 50
	charge() // 50 -> 20: crosses again; the month asked 160 of its 300
	got = topUpRequests(t, ws, acct)
	require.Len(t, got, 2)
	require.Equal(t, 140.0, got[1]["amount"], "the rest of the month's cap, not the 180 the target wants")
	key2, _ := got[1]["idempotency_key"].(string)
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 140, Key: key2, Memo: "automatic top-up"})
	require.NoError(t, err) // 160
	for range 4 {
		charge() // down to 40: crosses, with the cap spent
	}
	require.Len(t, topUpRequests(t, ws, acct), 2, "nothing more this month")
	ledgertest.RequireSound(t, s, acct)
}

// topUpRequests answers the data of the account's topup.requested events derived so far (after
// catching up), in order.
func topUpRequests(t *testing.T, ws *webhooks.Store, acct string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range events(t, ws, acct) {
		if e.Type == "topup.requested" {
			out = append(out, data(t, e))
		}
	}
	return out
}

// TestTopUpRequestedOnlyBySpending checks which rows may ask for an automatic top-up: the debits
// that take the balance down — a charge, a negative adjustment, a block's expiry by the expiry
// pass — each once it crosses the rule's threshold; never credits a refund returned to a block
// already expired, which expire at once (an expire row the refund caused): the refund and its
// expiry together leave the balance where it stood before them, so nothing was spent and nothing
// is bought (as balance.low leaves them out).
func TestTopUpRequestedOnlyBySpending(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 0)
	_, err := s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 50, Amount: 10, MonthlyCap: 1000})
	require.NoError(t, err)
	job := returnsIntoAnExpiredBlock(t, s, acct) // 30: the charge and the expiry pass's row crossed, the refund's expiry did not

	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 30, Key: "more"}) // 60
	require.NoError(t, err)
	_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -20, Key: "correction", Memo: "double grant"}) // 40: crosses
	require.NoError(t, err)

	var got []string
	for _, r := range topUpRequests(t, ws, acct) {
		require.Equal(t, 10.0, r["amount"])
		got = append(got, fmt.Sprintf("%v after %v", r["job_id"], r["balance"]))
	}
	require.Equal(t, []string{job.JobID + " after 30", "<nil> after 30", "<nil> after 40"}, got,
		"the charge, the expiry pass's row and the adjustment ask; the refund's expiry does not")
	ledgertest.RequireSound(t, s, acct)
}

// TestReplayAsksNoTopUpForSpendingBeforeTheRule checks that a replay never buys credits for old
// spending: three debits crossed the threshold while the account had neither an endpoint nor a
// rule; a rule made afterwards, and a replay of everything since the account began (which derives
// the events no pass wrote), ask nothing for them — a debit asks only under a rule that existed
// when it was made. The next crossing, after the rule, asks once.
func TestReplayAsksNoTopUpForSpendingBeforeTheRule(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := ledgertest.Account(t, s, 100)
	kind := ledgertest.Fixed(t, s, 60)
	for i := range 3 {
		applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind))) // 100 -> 40: crosses 50
		_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 60, Key: fmt.Sprint("back-", i)})
		require.NoError(t, err)
	}
	caughtUp(t, ws) // read by the passes while the account had no endpoint: no event
	_, err := s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 50, Amount: 500, MonthlyCap: 1500})
	require.NoError(t, err)
	ep := listening(t, ws, acct)

	since := time.Unix(0, 0)
	n, err := ws.Replay(ctx, acct, ep.ID, webhooks.Replay{Since: &since})
	require.NoError(t, err)
	require.Positive(t, n, "the account's history is replayed")
	require.Empty(t, topUpRequests(t, ws, acct), "no top-up for spending from before the rule")

	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind))) // 100 -> 40: crosses, under the rule
	got := topUpRequests(t, ws, acct)
	require.Len(t, got, 1)
	require.Equal(t, 500.0, got[0]["amount"])
	_, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{Since: &since})
	require.NoError(t, err)
	require.Len(t, topUpRequests(t, ws, acct), 1, "a replay asks nothing more")
	ledgertest.RequireSound(t, s, acct)
}

// holdDerivation opens a transaction that holds the derive passes below every transaction begun
// after it (it has an ID of its own and stays open), so that what the test writes next is derived
// only once it is released — whatever passes other tests run meanwhile.
func holdDerivation(t *testing.T, s *ledgerdb.Store) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(new(string)))
	released := false
	release = func() {
		if !released {
			released = true
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	t.Cleanup(release)
	return release
}

// TestTopUpOnlyForDebitsSinceTheRuleWasMade checks when a debit's request is judged: by the rule as
// it stands when its event is derived, but only for a debit made at or after that rule was made.
// A change of the rule keeps when it was made (a crossing before the change, derived after it,
// asks under the changed terms); a rule removed and made again is a new rule (a crossing before
// it, derived after it, asks nothing).
func TestTopUpOnlyForDebitsSinceTheRuleWasMade(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 100)
	kind := ledgertest.Fixed(t, s, 60)
	rule := ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 50, Amount: 500, MonthlyCap: 5000}

	// A crossing before any rule, derived once a rule exists: nothing.
	release := holdDerivation(t, s)
	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind))) // 100 -> 40
	_, err := s.SetTopUpRule(ctx, rule)
	require.NoError(t, err)
	release()
	require.Empty(t, topUpRequests(t, ws, acct), "the debit was made before the rule")

	// A crossing under the rule, derived after a change of its amount: asks the changed amount.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 60, Key: "back-1"}) // 100
	require.NoError(t, err)
	release = holdDerivation(t, s)
	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind))) // 40
	rule.Amount = 300
	_, err = s.SetTopUpRule(ctx, rule)
	require.NoError(t, err)
	release()
	got := topUpRequests(t, ws, acct)
	require.Len(t, got, 1)
	require.Equal(t, 300.0, got[0]["amount"], "judged by the rule as it stands")

	// A crossing under a rule removed and made again before it is derived: a new rule, nothing.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 60, Key: "back-2"}) // 100
	require.NoError(t, err)
	release = holdDerivation(t, s)
	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind))) // 40
	_, err = s.RemoveTopUpRule(ctx, acct)
	require.NoError(t, err)
	_, err = s.SetTopUpRule(ctx, rule)
	require.NoError(t, err)
	release()
	require.Len(t, topUpRequests(t, ws, acct), 1, "the debit was made before the rule made again")

	// The next crossing is the new rule's.
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 60, Key: "back-3"}) // 100
	require.NoError(t, err)
	applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind))) // 40
	require.Len(t, topUpRequests(t, ws, acct), 2)
	ledgertest.RequireSound(t, s, acct)
}

// crossings opens an account with an endpoint and a rule asking for 500, at most 500 a month,
// whose balance then crosses the threshold n times — by adjustments, which make no event but the
// requests, so that nothing but the requests can make two derivations of the account meet — and
// answers it, its endpoint, and the time of each crossing. None of them is derived yet when it
// answers: release lets the passes read them.
func crossings(t *testing.T, s *ledgerdb.Store, ws *webhooks.Store, n int) (acct, endpoint string, at []time.Time, release func()) {
	t.Helper()
	ctx := context.Background()
	acct = account(t, s, ws, 100)
	ep := listening(t, ws, acct)
	_, err := s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpFixed, Threshold: 50, Amount: 500, MonthlyCap: 500})
	require.NoError(t, err)
	release = holdDerivation(t, s)
	for i := range n {
		down, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -60, Key: fmt.Sprint("down-", i), Memo: "usage"}) // 100 -> 40
		require.NoError(t, err)
		var when time.Time
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT created_at FROM ledger_entries WHERE id = $1`, down.EntryID).Scan(&when))
		at = append(at, when)
		_, err = s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: 60, Key: fmt.Sprint("up-", i), Memo: "usage refunded"}) // 100
		require.NoError(t, err)
	}
	return acct, ep.ID, at, release
}

// askedOf answers what the account's topup.requested events ask, in order.
func askedOf(t *testing.T, ws *webhooks.Store, acct string) []float64 {
	t.Helper()
	var asked []float64
	for _, r := range topUpRequests(t, ws, acct) {
		asked = append(asked, r["amount"].(float64))
	}
	return asked
}

// TestTopUpRequestsNeverPassTheCapWhenReplaysRaceThePasses checks the month's cap under real
// concurrency: several crossings wait to be derived, then derive passes and replays of the
// account's endpoint — each since another crossing, so that each reads a different set of debits —
// all run at once. Whichever writes the requests, together they never ask for more than the cap:
// one request of 500 against a cap of 500, every round.
func TestTopUpRequestsNeverPassTheCapWhenReplaysRaceThePasses(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	const n, rounds = 6, 6
	for round := range rounds {
		acct, ep, since, release := crossings(t, s, ws, n)
		release()
		start := make(chan struct{})
		errs := make(chan error, 2*n)
		for i := range n {
			go func() { // a replay since the i-th crossing, from the last to the first
				<-start
				_, err := ws.Replay(ctx, acct, ep, webhooks.Replay{Since: &since[n-1-i]})
				errs <- err
			}()
			go func() { // a derive pass
				<-start
				_, _, err := ws.Derive(ctx, 1000)
				errs <- err
			}()
		}
		close(start)
		for range 2 * n {
			require.NoError(t, <-errs)
		}
		asked := askedOf(t, ws, acct)
		t.Logf("round %d: the requests ask %v against a cap of 500", round, asked)
		require.Equal(t, []float64{500}, asked, "round %d: one request of the whole cap, never more", round)
		ledgertest.RequireSound(t, s, acct)
	}
}

// waitingBehind answers how many backends wait, directly or behind another waiter, for a lock
// that the backend pid holds.
func waitingBehind(t *testing.T, pid int) int {
	t.Helper()
	var n int
	require.NoError(t, ledgertest.OwnerPool(t).QueryRow(context.Background(), `
		WITH RECURSIVE behind (pid) AS (
			SELECT a.pid FROM pg_stat_activity a WHERE $1::int = ANY (pg_blocking_pids(a.pid))
			UNION
			SELECT a.pid FROM pg_stat_activity a JOIN behind b ON b.pid = ANY (pg_blocking_pids(a.pid))
		)
		SELECT count(*) FROM behind`, pid).Scan(&n))
	return n
}

// TestTopUpDerivationWaitsForAnotherOfTheSameAccount checks the month's cap in the one interleaving
// that breaks it, played step by step: a replay of the second crossing has asked for the whole cap
// and not committed yet, when a derive pass and a replay of both crossings read the account. They
// wait for it (Postgres reports them waiting behind it), then count its request and ask nothing:
// one request of 500 against the cap of 500. Derivations that did not wait would each have read a
// month with nothing asked, and asked 500 for the first crossing.
func TestTopUpDerivationWaitsForAnotherOfTheSameAccount(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct, ep, at, release := crossings(t, s, ws, 2)

	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	first, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	inTx(t, first, `SELECT outcome FROM ledger_webhook_replay($1, NULL, $2)`, ep, at[1])
	release() // the passes may read both crossings now: below the open replay, nothing holds them

	answers := make(chan error, 2)
	go func() {
		_, _, err := ws.Derive(ctx, 1000)
		answers <- err
	}()
	go func() {
		_, err := ws.Replay(ctx, acct, ep, webhooks.Replay{Since: &at[0]})
		answers <- err
	}()
	answered := 0
	for answered+waitingBehind(t, pid) < 2 {
		select {
		case err := <-answers:
			require.NoError(t, err)
			answered++
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Logf("before the first replay commits: %d derivations answered, %d wait behind it", answered, waitingBehind(t, pid))
	require.NoError(t, first.Commit(ctx))
	for ; answered < 2; answered++ {
		require.NoError(t, <-answers)
	}
	require.Equal(t, []float64{500}, askedOf(t, ws, acct), "one request of the whole cap")
	ledgertest.RequireSound(t, s, acct)
}
