package apiclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apitype"
)

// TestGoneOnSubmitKeepsTheMoneyState checks the remembered-IDs rule from the user's side: a 410 to
// a submission means the job was accepted once and then deleted, so the client reports the money
// state the answer carries (charged, refunded) and never "not charged" unless the answer says so;
// an answer that carries none is reported as unknown. The deleted ID is never submitted again.
func TestGoneOnSubmitKeepsTheMoneyState(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantMoney string
		lostFirst             bool
	}{
		{name: "charged", body: `{"code":"deleted","message":"Deleted; its ID can never be used again. Your money stays as it was: 40 credits charged.","money_state":"charged","state":"deleted"}`, wantMoney: "charged"},
		{name: "refunded", body: `{"code":"deleted","message":"Deleted; 40 credits refunded.","money_state":"refunded","state":"deleted"}`, wantMoney: "refunded"},
		{name: "no money state in the answer", body: `{"code":"deleted","message":"This job was deleted; its ID can never be used again."}`, wantMoney: "unknown"},
		{name: "charged, found on a resubmission", body: `{"code":"deleted","message":"Deleted.","money_state":"charged","state":"deleted"}`, wantMoney: "charged", lostFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var posts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"code":"not_received","message":"Not received by the server — you were not charged.","money_state":"not_charged"}`))
					return
				}
				if posts.Add(1) == 1 && tc.lostFirst {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusGone)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}, SubmitAttempts: 1}
			tr := c.Track(apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k", InputRef: "sim:ok"})

			st, err := c.Run(context.Background(), tr)
			require.ErrorIs(t, err, apiclient.ErrDeleted)
			require.Equal(t, tc.wantMoney, st.MoneyState, "the money state the 410 carries")
			require.Equal(t, "deleted", st.State)
			require.Equal(t, "render-1", st.JobID)
			require.Equal(t, apiclient.Accepted, tr.State, "a deleted ID was accepted once: never resubmitted")
			require.NotNil(t, tr.Last)
			require.Equal(t, tc.wantMoney, tr.Last.MoneyState)

			before := posts.Load()
			_, err = c.Run(context.Background(), tr)
			require.ErrorIs(t, err, apiclient.ErrDeleted)
			require.Equal(t, before, posts.Load(), "a tracked deleted job is not posted again")
		})
	}
}

// TestAcceptedThenNotReceivedIsDeletedWithUnknownMoney checks the remembered-IDs rule: the API's
// own not_received 404 for an ID it once accepted means the record was deleted; the client reports
// it deleted, never resubmits, and reports the money state as unknown — not the "not charged" of
// the 404, which is about an ID the server never saw.
func TestAcceptedThenNotReceivedIsDeletedWithUnknownMoney(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apitype.Status{JobID: "j-1", State: "running", MoneyState: "charged"}})
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"not_received","message":"Not received","money_state":"not_charged"}`))
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}}
	st, err := c.Run(context.Background(), c.Track(apitype.SubmitRequest{JobID: "j-1", AccountID: "a", Kind: "render-4k"}))
	require.ErrorIs(t, err, apiclient.ErrDeleted)
	require.Equal(t, "deleted", st.State)
	require.Equal(t, apiclient.MoneyUnknown, st.MoneyState)
	require.Equal(t, int32(1), posts.Load())
}

// TestOnlyTheAPIsNotReceivedMeansNeverArrived checks the confirmation rule (the remembered-IDs
// rule): only the API's own answer — a 404 whose body is the API's error with code not_received —
// says a job never arrived. A 404 from a proxy (HTML), from a path the API does not serve
// (no_route), with an empty body or with JSON of another shape says nothing about the job: the
// client never resubmits on it and never tells the user "not received, not charged", even past
// ConfirmWindow; it keeps asking under the same ID until the API answers for the job.
func TestOnlyTheAPIsNotReceivedMeansNeverArrived(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	start := clock.Now()
	foreign := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("<html><body><h1>404 Not Found</h1>nginx</body></html>"))
		},
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"no_route","message":"No such path; the API's paths start with /v1/."}`))
		},
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) },
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"not found","status":404}`))
		},
	}
	var posts, gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if posts.Add(1) == 1 {
				foreign[1](w) // the API's router, before the jobs route is deployed
				return
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		n := gets.Add(1)
		if clock.Now().Before(start.Add(apiclient.ConfirmWindow + time.Minute)) {
			foreign[int(n)%len(foreign)](w)
			return
		}
		_ = json.NewEncoder(w).Encode(apitype.Status{JobID: "render-1", State: "delivered", MoneyState: "charged"})
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: clock, PollInterval: 10 * time.Second, SubmitAttempts: 2}
	tr := c.Track(apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k", InputRef: "sim:ok"})

	st, err := c.Run(context.Background(), tr)
	require.NoError(t, err, "a 404 that is not the API's is no answer about the job")
	require.Equal(t, "delivered", st.State)
	require.Equal(t, "charged", st.MoneyState)
	require.Equal(t, int32(2), posts.Load(), "the submit attempts only: no resubmission on a foreign 404")
	require.Greater(t, gets.Load(), int32(len(foreign)))
	require.Zero(t, tr.Resubmissions)

	// One read: a foreign 404 is an error whose money state is unknown, never "not charged".
	for _, answer := range foreign {
		one := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w) }))
		_, err := (&apiclient.Client{BaseURL: one.URL, Key: "k"}).Status(context.Background(), "render-1")
		one.Close()
		var ae *apiclient.APIError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, http.StatusNotFound, ae.StatusCode)
		require.NotEqual(t, "not_received", ae.Code)
		require.Equal(t, apiclient.MoneyUnknown, ae.MoneyState)
	}
}

// TestSubmissionStatusFollowsTheMoney checks the client against the money rule of a submission's
// answer: its status says where the money stands, as its body does. A 200 whose job was refunded
// before the answer (its workflow stopped as the charge committed) is done: Run reports it
// refunded, with no error and no further look, and never charged. A 201 whose job is not charged —
// a status that says more than its body, which the API never answers — is taken at neither's word:
// the client reports the money as unknown and looks at the job by ID, whose answer then stands.
func TestSubmissionStatusFollowsTheMoney(t *testing.T) {
	refunded := apitype.Status{JobID: "render-1", AccountID: "acme", State: "refunded", MoneyState: "refunded",
		Reason: "stopped_by_operator", Message: "Not delivered: the job was stopped by an operator. Your 40 credits were refunded."}
	for _, tc := range []struct {
		name      string
		code      int
		wantLooks int32
	}{
		{name: "200 refunded before the answer: done", code: http.StatusOK, wantLooks: 0},
		{name: "201 of a refunded job: looked at by ID", code: http.StatusCreated, wantLooks: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var looks atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				if r.Method == http.MethodGet {
					looks.Add(1)
					_ = json.NewEncoder(w).Encode(refunded)
					return
				}
				w.WriteHeader(tc.code)
				_ = json.NewEncoder(w).Encode(apitype.Submission{Status: refunded})
			}))
			defer srv.Close()
			c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}, SubmitAttempts: 1}
			tr := c.Track(apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k", InputRef: "sim:ok"})

			if tc.code == http.StatusCreated {
				st, err := c.Submit(context.Background(), tr)
				require.NoError(t, err)
				require.Equal(t, apiclient.MoneyUnknown, st.MoneyState, "a 201 that says more than its body is not taken at its word")
				require.Equal(t, apiclient.Accepted, tr.State, "the ID was accepted: it is never sent again")
			}
			st, err := c.Run(context.Background(), tr)
			require.NoError(t, err)
			require.Equal(t, "refunded", st.State)
			require.Equal(t, "refunded", st.MoneyState, "never charged: the job's charge was given back")
			require.Equal(t, "stopped_by_operator", st.Reason)
			require.Equal(t, tc.wantLooks, looks.Load())
		})
	}
}
