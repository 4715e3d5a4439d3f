package webhooks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/webhooks"
)

// TestEndpointsBoundedAndBadInputWritesNothing checks the endpoint store's doors: an account has at
// most MaxEndpoints enabled endpoints (each event is sent to every one), a deleted one frees its
// place; an unknown account, a description too long or with hidden characters, and an endpoint of
// another account are refused with nothing written; a rotated secret differs and is shown once.
func TestEndpointsBoundedAndBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := ledgertest.Account(t, s, 0)
	open := webhooks.URLPolicy{}
	spec := webhooks.EndpointSpec{AccountID: acct, URL: "https://hooks.example.com/"}

	var invalid *ledgerdb.InvalidInputError
	_, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: ledgertest.ID(t, "nobody"), URL: spec.URL}, open)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownAccount)
	_, err = ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: spec.URL, Description: strings.Repeat("é", 201)}, open)
	require.ErrorAs(t, err, &invalid)
	_, err = ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: spec.URL, Description: "pay\u202eroll"}, open)
	require.ErrorAs(t, err, &invalid)
	eps, err := ws.Endpoints(ctx, acct)
	require.NoError(t, err)
	require.Empty(t, eps)

	var first webhooks.Created
	for i := range webhooks.MaxEndpoints {
		c, err := ws.CreateEndpoint(ctx, spec, open)
		require.NoError(t, err)
		if i == 0 {
			first = c
		}
	}
	_, err = ws.CreateEndpoint(ctx, spec, open)
	require.ErrorIs(t, err, webhooks.ErrTooManyEndpoints)
	_, _, err = ws.DeleteEndpoint(ctx, acct, first.ID)
	require.NoError(t, err)
	_, err = ws.CreateEndpoint(ctx, spec, open)
	require.NoError(t, err, "a deleted endpoint frees its place")

	other := ledgertest.Account(t, s, 0)
	_, err = ws.Endpoint(ctx, other, first.ID)
	require.ErrorIs(t, err, webhooks.ErrEndpointNotFound, "another account's endpoint does not exist for it")
	_, _, err = ws.DeleteEndpoint(ctx, other, first.ID)
	require.ErrorIs(t, err, webhooks.ErrEndpointNotFound)

	eps, err = ws.Endpoints(ctx, acct)
	require.NoError(t, err)
	live := eps[1]
	rotated, err := ws.RotateSecret(ctx, acct, live.ID)
	require.NoError(t, err)
	require.Regexp(t, `^whsec_`, rotated.Secret)
	require.NotNil(t, rotated.RotatedAt)
	_, err = ws.RotateSecret(ctx, acct, first.ID)
	require.ErrorIs(t, err, webhooks.ErrEndpointDisabled)
}
