package webhooks_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/webhooks/webhookstest"
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
	s := ledgertest.Store(t)
	ws := webhooks.NewStore(s.Pool())
	acct := ledgertest.Account(t, s, 100)
	caughtUp(t, ws)
	srv := httptest.NewServer(&webhookstest.Receiver{})
	t.Cleanup(srv.Close)
	_, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: srv.URL + "/hooks"}, webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	_, err = s.SetTopUpRule(ctx, ledgerdb.TopUpRule{AccountID: acct, Mode: ledgerdb.TopUpTarget, Threshold: 50, Amount: 200, MonthlyCap: 300})
	require.NoError(t, err)
	kind := ledgertest.Fixed(t, s, 30)

	charge := func() {
		t.Helper()
		applied(t, ledgerdb.Applied)(s.Charge(ctx, submit(t, s, acct, kind)))
	}
	requests := func() []map[string]any {
		t.Helper()
		caughtUp(t, ws)
		var out []map[string]any
		for _, e := range events(t, ws, acct) {
			if e.Type == "topup.requested" {
				out = append(out, data(t, e))
			}
		}
		return out
	}
	charge() // 100 -> 70
	require.Empty(t, requests(), "above the threshold still")
	charge() // 70 -> 40: crosses
	charge() // 40 -> 10: below already
	got := requests()
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
	got = requests()
	require.Len(t, got, 2)
	require.Equal(t, 140.0, got[1]["amount"], "the rest of the month's cap, not the 180 the target wants")
	key2, _ := got[1]["idempotency_key"].(string)
	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 140, Key: key2, Memo: "automatic top-up"})
	require.NoError(t, err) // 160
	for range 4 {
		charge() // down to 40: crosses, with the cap spent
	}
	require.Len(t, requests(), 2, "nothing more this month")
	ledgertest.RequireSound(t, s, acct)
}
