package stories

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// TestProductBelievesOnlySignedTopUps checks story (i)'s receiver as a product's must behave: a
// topup.requested event signed with another secret, or whose body was changed after signing, is
// answered 401 and buys nothing (no grant is posted: the payment code never runs), and the story
// stops waiting with an error that says why, rather than when its deadline passes.
func TestProductBelievesOnlySignedTopUps(t *testing.T) {
	body := `{"type":"topup.requested","timestamp":"2026-12-01T02:54:11Z","data":{"account_id":"acme","amount":420,"idempotency_key":"topup-7"}}`
	for name, deliver := range map[string]func(secret string) *http.Request{
		"signed with another secret": func(string) *http.Request {
			return signed(t, webhooks.NewSecret(), body, body)
		},
		"body changed after signing": func(secret string) *http.Request {
			return signed(t, secret, body, strings.Replace(body, "420", "42000", 1))
		},
	} {
		t.Run(name, func(t *testing.T) {
			// The API is a closed port: a payment attempted would fail with another error.
			top := newTopUp(nil, "acme", "http://127.0.0.1:1")
			top.secret = webhooks.NewSecret()
			rec := httptest.NewRecorder()
			top.receive(rec, deliver(top.secret))
			require.Equal(t, http.StatusUnauthorized, rec.Code)
			require.Empty(t, top.payments, "nothing bought")
			err := top.landed(context.Background(), nil, ledgerdb.JobKey{})
			require.ErrorContains(t, err, "a delivery failed verification")
		})
	}
}

// signed is a delivery of sent whose headers sign body with secret.
func signed(t *testing.T, secret, body, sent string) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/jobbill-webhooks", strings.NewReader(sent))
	require.NoError(t, webhooks.Sign(req.Header, secret, "msg_00000000000000000000000000000007", time.Now(), []byte(body)))
	return req
}
