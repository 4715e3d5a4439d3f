package apiclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apitype"
)

// TestListJobsAsksForTheFiltersAndPages checks the listing (GET /v1/jobs) against a server of
// the documented shape: the filters travel as the query parameters state (a comma list),
// dead_lettered, created_after and created_before (RFC 3339), limit and cursor, and paging with
// NextCursor reads every page once. Trust: the client's account, when it names one (an admin's
// or a runner's key), rides along as account_id; without one, nothing is added. Options no
// server could answer are refused with ErrInvalidInput before anything is sent.
func TestListJobsAsksForTheFiltersAndPages(t *testing.T) {
	var mu sync.Mutex
	var queries []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/jobs" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"no_route","message":"No such path"}`))
			return
		}
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		switch r.URL.Query().Get("cursor") {
		case "":
			_, _ = w.Write([]byte(`{"jobs":[{"job_id":"r-1","account_id":"acme","state":"refunded","money_state":"refunded","held":40},` +
				`{"job_id":"r-2","account_id":"acme","state":"refunded","money_state":"refunded","held":40}],"next_cursor":"page-2"}`))
		case "page-2":
			_, _ = w.Write([]byte(`{"jobs":[{"job_id":"r-3","account_id":"acme","state":"running","money_state":"charged","held":40}],"next_cursor":""}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"invalid_input","message":"Query parameter \"cursor\" is not a cursor this server gave"}`))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", AccountID: "acme"}

	yes := true
	after := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	before := time.Date(2026, 3, 2, 0, 0, 0, 500, time.UTC)
	opts := apiclient.ListOptions{State: []string{"running", "refunded"}, DeadLettered: &yes,
		CreatedAfter: after, CreatedBefore: before, Limit: 2}
	var ids []string
	for {
		page, err := c.ListJobs(ctx, opts)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			ids = append(ids, j.JobID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	require.Equal(t, []string{"r-1", "r-2", "r-3"}, ids)
	require.Len(t, queries, 2)
	require.Equal(t, url.Values{
		"state": {"running,refunded"}, "dead_lettered": {"true"}, "created_after": {"2026-03-01T11:00:00Z"},
		"created_before": {"2026-03-02T00:00:00.0000005Z"}, "limit": {"2"}, "account_id": {"acme"},
	}, queries[0])
	require.Equal(t, "page-2", queries[1].Get("cursor"))

	no := false
	_, err := (&apiclient.Client{BaseURL: srv.URL, Key: "k"}).ListJobs(ctx, apiclient.ListOptions{DeadLettered: &no})
	require.NoError(t, err)
	require.Equal(t, url.Values{"dead_lettered": {"false"}}, queries[2], "a customer's key names no account")
	_, err = c.ListJobs(ctx, apiclient.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, url.Values{"account_id": {"acme"}}, queries[3])

	_, err = c.ListJobs(ctx, apiclient.ListOptions{Cursor: "forged"})
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "invalid_input", ae.Code)

	sent := len(queries)
	for name, bad := range map[string]apiclient.ListOptions{
		"negative limit":        {Limit: -1},
		"a state with a comma":  {State: []string{"running,refunded"}},
		"an empty state":        {State: []string{""}},
		"after not before":      {CreatedAfter: before, CreatedBefore: after},
		"after equal to before": {CreatedAfter: after, CreatedBefore: after},
	} {
		_, err := c.ListJobs(ctx, bad)
		require.ErrorIs(t, err, apiclient.ErrInvalidInput, name)
	}
	require.Len(t, queries, sent, "refused options send nothing")
}

// TestDeleteJobAnswersTheTombstone checks deletion (DELETE /v1/jobs/{id}) as the API answers it:
// the tombstone keeps the money state (the remembered-IDs rule: deletion never changes money, and
// the ID is burnt), a job still running is an *APIError job_active carrying its state and money
// state, and an empty ID is refused before anything is sent.
func TestDeleteJobAnswersTheTombstone(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case r.Method != http.MethodDelete:
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(`{"code":"method_not_allowed","message":"Use GET, DELETE on this path."}`))
		case r.URL.Path == "/v1/jobs/done-1":
			_ = json.NewEncoder(w).Encode(apitype.Status{JobID: "done-1", AccountID: "acme", State: "deleted", MoneyState: "charged",
				Held: 40, Charged: 40, Message: "Deleted; its ID can never be used again. Your money stays as it was: 40 credits charged."})
		default:
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"code":"job_active","message":"The job is running and cannot be deleted until it is settled.","money_state":"charged","state":"running"}`))
		}
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k"}
	ctx := context.Background()

	st, err := c.DeleteJob(ctx, "done-1")
	require.NoError(t, err)
	require.Equal(t, "deleted", st.State)
	require.Equal(t, "charged", st.MoneyState)
	require.Equal(t, int64(40), st.Charged)

	_, err = c.DeleteJob(ctx, "running-1")
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.StatusCode)
	require.Equal(t, "job_active", ae.Code)
	require.Equal(t, "running", ae.State)
	require.Equal(t, "charged", ae.MoneyState)

	before := requests.Load()
	_, err = c.DeleteJob(ctx, "")
	require.ErrorIs(t, err, apiclient.ErrInvalidInput)
	_, err = c.Status(ctx, "")
	require.ErrorIs(t, err, apiclient.ErrInvalidInput)
	_, err = c.ReportResult(ctx, "", apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out"})
	require.ErrorIs(t, err, apiclient.ErrInvalidInput)
	_, err = c.Poll(ctx, c.Track(apitype.SubmitRequest{AccountID: "acme", Kind: "render-4k"}))
	require.ErrorIs(t, err, apiclient.ErrInvalidInput)
	require.Equal(t, before, requests.Load(), "an empty job ID sends nothing")
}

// TestAccountIDRidesOnJobRoutesOnly checks the trust rule of job IDs that belong to their account,
// for keys that act for every account (an admin's, a runner's): the job routes name the
// account they act for as account_id — a tracked job's own account when it is polled, whatever
// the client's; the client's AccountID on list, read, delete and result — and nothing else
// carries it: not the submission, whose body names its account, nor the account and price
// routes.
func TestAccountIDRidesOnJobRoutesOnly(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Method+" "+r.URL.Path] = r.URL.RawQuery
		mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs":
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apitype.Status{JobID: "j-1", State: "running", MoneyState: "charged"}})
		case r.URL.Path == "/v1/jobs/j-1" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(apitype.Status{JobID: "j-1", State: "delivered", MoneyState: "charged"})
		case r.URL.Path == "/v1/jobs/j-1/result":
			_, _ = w.Write([]byte(`{"path":"already_applied","status":{"state":"delivered"}}`))
		case r.URL.Path == "/v1/jobs":
			_, _ = w.Write([]byte(`{"jobs":[],"next_cursor":""}`))
		case r.URL.Path == "/v1/accounts/acme":
			_, _ = w.Write([]byte(`{"account_id":"acme","balance":60}`))
		case r.URL.Path == "/v1/accounts/acme/ledger":
			_, _ = w.Write([]byte(`{"account_id":"acme","entries":[],"next_after":0}`))
		case r.URL.Path == "/v1/prices":
			_, _ = w.Write([]byte(`{"prices":[]}`))
		default:
			_ = json.NewEncoder(w).Encode(apitype.Status{JobID: "j-1", State: "deleted", MoneyState: "charged"})
		}
	}))
	defer srv.Close()
	// take answers the query a request was sent with, and forgets it.
	take := func(request string) string {
		mu.Lock()
		defer mu.Unlock()
		q := got[request]
		delete(got, request)
		return q
	}
	c := &apiclient.Client{BaseURL: srv.URL, Key: "admin-key", AccountID: "acme", Clock: &fakeClock{now: time.Now()}}
	ctx := context.Background()

	// Tracked jobs: the job's own account, set on the client or not.
	for _, client := range []*apiclient.Client{{BaseURL: srv.URL, Key: "admin-key", Clock: &fakeClock{now: time.Now()}}, c} {
		_, err := client.Run(ctx, client.Track(apitype.SubmitRequest{JobID: "j-1", AccountID: "acme", Kind: "render-4k"}))
		require.NoError(t, err)
		require.Equal(t, "account_id=acme", take("GET /v1/jobs/j-1"))
	}
	other := &apiclient.Client{BaseURL: srv.URL, Key: "admin-key", AccountID: "globex", Clock: &fakeClock{now: time.Now()}}
	_, err := other.Poll(ctx, &apiclient.Tracked{Request: apitype.SubmitRequest{JobID: "j-1", AccountID: "acme"}, State: apiclient.Accepted})
	require.NoError(t, err)
	require.Equal(t, "account_id=acme", take("GET /v1/jobs/j-1"), "a tracked job is looked at in its own account")

	// Calls that name a job ID alone: the client's account.
	_, err = c.Status(ctx, "j-1")
	require.NoError(t, err)
	_, err = c.ReportResult(ctx, "j-1", apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out"})
	require.NoError(t, err)
	_, err = c.ListJobs(ctx, apiclient.ListOptions{})
	require.NoError(t, err)
	_, err = c.DeleteJob(ctx, "j-1")
	require.NoError(t, err)
	_, err = c.Balance(ctx, "acme")
	require.NoError(t, err)
	_, err = c.Ledger(ctx, "acme", apiclient.LedgerOptions{})
	require.NoError(t, err)
	_, err = c.Prices(ctx)
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{
		"POST /v1/jobs":                "",
		"GET /v1/jobs/j-1":             "account_id=acme",
		"POST /v1/jobs/j-1/result":     "account_id=acme",
		"GET /v1/jobs":                 "account_id=acme",
		"DELETE /v1/jobs/j-1":          "account_id=acme",
		"GET /v1/accounts/acme":        "",
		"GET /v1/accounts/acme/ledger": "",
		"GET /v1/prices":               "",
	}, got)
}

// TestReportResultCarriesUsageNotAnAmount checks the result report (the price-list rule: a result
// carries the units the work used, never an amount): units_used is sent when known and left out
// when not (the server then bills the whole hold), a 202 "recorded" is an answer rather than an
// error, and a refusal is an *APIError with the server's code.
func TestReportResultCarriesUsageNotAnAmount(t *testing.T) {
	var got []map[string]any
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got = append(got, body)
		switch {
		case body["units_used"] == float64(-1):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"invalid_input","message":"Field \"units_used\" is -1"}`))
		case body["units_used"] == nil:
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"path":"recorded","status":{"state":"running","held":300,"charged":300}}`))
		default:
			_, _ = w.Write([]byte(`{"path":"signal","status":{"state":"running","held":300,"charged":300},"message":"taken"}`))
		}
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k"}
	ctx := context.Background()

	used := int64(137)
	a, err := c.ReportResult(ctx, "tr-1", apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out", UnitsUsed: &used})
	require.NoError(t, err)
	require.Equal(t, "signal", a.Path)
	require.Equal(t, map[string]any{"attempt": float64(1), "output_ref": "s3://out", "units_used": float64(137)}, got[0])

	a, err = c.ReportResult(ctx, "tr-1", apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out"})
	require.NoError(t, err)
	require.Equal(t, "recorded", a.Path)
	require.NotContains(t, got[1], "units_used")

	negative := int64(-1)
	_, err = c.ReportResult(ctx, "tr-1", apitype.ResultRequest{Attempt: 1, OutputRef: "s3://out", UnitsUsed: &negative})
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.StatusCode)
	require.Equal(t, "invalid_input", ae.Code)
	require.Equal(t, []string{"POST /v1/jobs/tr-1/result", "POST /v1/jobs/tr-1/result", "POST /v1/jobs/tr-1/result"}, paths)
}
