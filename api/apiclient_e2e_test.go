package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestClientActsForTheTrackedJobsAccount runs the Go client against the real API with an admin
// key, which must name the account of every job request (job IDs belong to their account): a job
// made with NewJobID and run to the end is polled in its own account without the client naming
// one; the one-off calls take the client's AccountID; without it the server refuses (400) and the
// client reports an error whose money state is unknown, never "not charged". The net-effect and
// remembered-IDs rules: one charge, and the ID answers its job in its account only — another
// account's client reads the API's own not_received for it.
func TestClientActsForTheTrackedJobsAccount(t *testing.T) {
	t.Parallel()
	e := newSite(t, 100)
	admin := e.key(t, apikeys.ScopeAdmin, "")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	id, err := apiclient.NewJobID("render")
	require.NoError(t, err)
	c := &apiclient.Client{BaseURL: e.base, Key: admin, PollInterval: 200 * time.Millisecond}
	st, err := c.Run(ctx, c.Track(apitype.SubmitRequest{JobID: id, AccountID: e.acct, Kind: e.fixed(t, 40), InputRef: "sim:ok"}))
	require.NoError(t, err)
	require.Equal(t, "delivered", st.State)
	require.Equal(t, "charged", st.MoneyState)

	_, err = c.Status(ctx, id)
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae, "an admin key that names no account")
	require.Equal(t, http.StatusBadRequest, ae.StatusCode)
	require.Equal(t, apiclient.MoneyUnknown, ae.MoneyState)

	c.AccountID = e.acct
	read, err := c.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "delivered", read.State)
	tomb, err := c.DeleteJob(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "deleted", tomb.State)
	require.Equal(t, "charged", tomb.MoneyState)

	elsewhere := &apiclient.Client{BaseURL: e.base, Key: admin, AccountID: ledgertest.Account(t, e.Store, 0)}
	_, err = elsewhere.Status(ctx, id)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, apiclient.CodeNotReceived, ae.Code, "the ID is its account's alone")
	require.True(t, ae.FromAPI())

	require.Equal(t, []ledgerdb.EntryKind{ledgerdb.KindCharge}, e.kinds(t, e.acct, id))
	balance, err := c.Balance(ctx, e.acct)
	require.NoError(t, err)
	require.Equal(t, int64(60), balance.Balance)
	ledgertest.RequireSound(t, e.Store, e.acct)
}
