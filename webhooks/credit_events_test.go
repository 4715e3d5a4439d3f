package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/webhooks/webhookstest"
)

// TestCreditEventsTellGrantsAndExpiries checks the credit events' rule: each is derived from its
// ledger row, exactly once, and reaches the account's endpoint signed. A grant that made a block
// is told as credit.granted with the block's terms and the balance after it; a block's expiry as
// credit.expired with what it removed; and credits a refund returned to a block already expired,
// which expire at once, as credit.expired caused by that refund, naming its job. An idempotent
// grant again writes no row and so no event; a grant from before the endpoint, read by a pass
// then, none either.
func TestCreditEventsTellGrantsAndExpiries(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := ledgertest.Account(t, s, 5) // read before the endpoint: no event
	caughtUp(t, ws)
	rcv := &webhookstest.Receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	ep, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: srv.URL + "/hooks"}, webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	rcv.SetSecret(ep.Secret)

	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Microsecond)
	promo := ledgerdb.Credit{AccountID: acct, Amount: 50, Key: "sign-up", Memo: "sign-up bonus",
		Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, Priority: 2, ExpiresAt: &expires}}
	promoGrant, err := s.Grant(ctx, promo) // 55
	require.NoError(t, err)
	again, err := s.Grant(ctx, promo)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.AlreadyApplied, again.Outcome)
	paidGrant, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 100, Key: "invoice-7", Memo: "invoice 7",
		Block: ledgerdb.BlockTerms{CostBasis: "0.0100"}}) // 155
	require.NoError(t, err)
	promoBlock, paidBlock := ledgertest.BlockOf(t, s, promoGrant), ledgertest.BlockOf(t, s, paidGrant)

	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 40)) // 115: 40 of the promotional block's 50
	caughtUp(t, ws)                                           // the grants told as granted, before the test moves a clock
	ledgertest.ExpireBlock(t, s, promoBlock)                  // 105: its 10 left expire
	applied(t, ledgerdb.Applied)(s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 3))
	// 145, then 105: the 40 return to the expired block and expire with it.

	// In the order of the rows, each once.
	var evs []webhooks.Event
	for _, e := range events(t, ws, acct) {
		if e.JobID == "" {
			evs = append(evs, e)
		}
	}
	var kinds []string
	payloads := make([]map[string]any, len(evs))
	for i, e := range evs {
		kinds = append(kinds, e.Type)
		payloads[i] = data(t, e)
	}
	require.Equal(t, []string{"credit.granted", "credit.granted", "credit.expired", "credit.expired"}, kinds)

	// Delivered, signed: the account's events are not ordered among themselves (as balance.low).
	runWorkers(t, testOptions(ws, acct), 1)
	require.Eventually(t, func() bool { return len(rcv.AccountEvents()) >= len(evs) }, 2*time.Minute, 20*time.Millisecond,
		"every credit event delivered")
	waitDelivered(t, s, ep.ID)
	require.Zero(t, rcv.Bad(), "every delivery verified")
	received := map[string]json.RawMessage{}
	for _, e := range rcv.AccountEvents() {
		received[e.ID] = e.Data
	}
	require.Len(t, received, len(evs))
	for _, e := range evs {
		require.JSONEq(t, string(e.Data), string(received[e.ID]), "%s received as derived", e.Type)
	}
	require.Equal(t, map[string]any{"account_id": acct, "block_id": float64(promoBlock), "category": "promotional", "priority": 2.0,
		"amount": 50.0, "effective_at": payloads[0]["effective_at"], "expires_at": expires.Format("2006-01-02T15:04:05.000000Z"),
		"cost_basis": nil, "memo": "sign-up bonus", "balance_after": 55.0}, payloads[0])
	require.Equal(t, map[string]any{"account_id": acct, "block_id": float64(paidBlock), "category": "paid", "priority": 0.0,
		"amount": 100.0, "effective_at": payloads[1]["effective_at"], "expires_at": nil,
		"cost_basis": "0.01", "memo": "invoice 7", "balance_after": 155.0}, payloads[1])
	require.Equal(t, map[string]any{"account_id": acct, "block_id": float64(promoBlock), "category": "promotional", "amount": 10.0,
		"expires_at": payloads[2]["expires_at"], "cause": "expiry", "job_id": nil, "balance_after": 105.0}, payloads[2])
	require.Equal(t, map[string]any{"account_id": acct, "block_id": float64(promoBlock), "category": "promotional", "amount": 40.0,
		"expires_at": payloads[2]["expires_at"], "cause": "refund", "job_id": job.JobID, "balance_after": 105.0}, payloads[3])
	require.Equal(t, map[string][]string{job.JobID: {"job.charged", "job.refunded"}}, rcv.ByJob())
	ledgertest.RequireBalance(t, s, acct, 105)
	ledgertest.RequireSound(t, s, acct)
}

// TestBalanceLowOnExpiry checks the low-balance rule for expiries: a block's expiry is a debit
// like any other, and one that takes the balance below the threshold is told as balance.low; but
// credits a refund returns to an expired block, which expire at once, never are: the refund and
// its expiry together leave the balance where it stood before them, so nothing crossed.
func TestBalanceLowOnExpiry(t *testing.T) {
	ctx := context.Background()
	s, ws, acct := listened(t, 0)
	_, err := ws.SetLowBalanceThreshold(ctx, acct, ptr(int64(50)))
	require.NoError(t, err)
	job := returnsIntoAnExpiredBlock(t, s, acct)

	var lows []map[string]any
	for _, e := range events(t, ws, acct) {
		if e.Type == "balance.low" {
			lows = append(lows, data(t, e))
		}
	}
	require.Equal(t, []map[string]any{
		{"account_id": acct, "balance": 30.0, "threshold": 50.0, "job_id": job.JobID},
		{"account_id": acct, "balance": 30.0, "threshold": 50.0, "job_id": nil},
	}, lows)
	ledgertest.RequireSound(t, s, acct)
}

// returnsIntoAnExpiredBlock plays, on an account of no credits whose threshold or rule the test
// has set at 50, the debits and the return between them that the low-balance and top-up rules
// must tell apart: 30 paid credits and a promotional block of 40 (70); a job of 40 charged, all
// from the promotional block (30: crosses); that block expired, holding nothing (no row); the job
// refunded for a timeout, its 40 returned to the expired block, where they expire at once (70,
// then 30: nothing crossed, nothing spent); a second promotional block of 30 granted and expired
// by the expiry pass (60, then 30: crosses). It answers the job.
func returnsIntoAnExpiredBlock(t *testing.T, s *ledgerdb.Store, acct string) ledgerdb.JobKey {
	t.Helper()
	ctx := context.Background()
	_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 30, Key: "paid"})
	require.NoError(t, err)
	first := ledgertest.Promotional(t, s, acct, "promo-1", 40)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 40))
	ledgertest.ExpireBlock(t, s, first)
	applied(t, ledgerdb.Applied)(s.Refund(ctx, job, ledgerdb.ReasonTimedOut, "", 1))
	ledgertest.RequireBalance(t, s, acct, 30)
	second := ledgertest.Promotional(t, s, acct, "promo-2", 30)
	ledgertest.ExpireBlock(t, s, second)
	return job
}
