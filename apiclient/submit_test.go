package apiclient_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
	"github.com/jobbill/jobbill/apitype"
)

// TestNeverReceivedIsResubmittedThreeTimesThenReported checks the confirmation rule against a
// server that never receives anything (every POST is lost, every GET is 404): the same ID and
// body are sent again exactly MaxResubmissions times, and after ConfirmWindow the user is told
// "not received, not charged" (the remembered-IDs rule: never a new ID).
func TestNeverReceivedIsResubmittedThreeTimesThenReported(t *testing.T) {
	var posts atomic.Int32
	var bodies sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			b, _ := io.ReadAll(r.Body)
			bodies.Store(string(b), true)
			w.WriteHeader(http.StatusBadGateway) // the POST is "lost" on the way
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"not_received","message":"Not received","money_state":"not_charged"}`))
	}))
	defer srv.Close()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: clock, PollInterval: 10 * time.Second, SubmitAttempts: 2}
	tr := c.Track(apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k", InputRef: "sim:ok"})
	_, err := c.Run(context.Background(), tr)
	require.ErrorIs(t, err, apiclient.ErrNotReceived)
	require.Equal(t, int32(2+apiclient.MaxResubmissions), posts.Load(), "2 submit attempts, then 3 resubmissions")
	n := 0
	bodies.Range(func(any, any) bool { n++; return true })
	require.Equal(t, 1, n, "every POST carried the same saved body and ID")
	require.False(t, clock.Now().Before(tr.CreatedAt.Add(apiclient.ConfirmWindow)))
	require.Less(t, clock.Now().Sub(tr.CreatedAt), apiclient.ConfirmWindow+time.Minute)
}

// TestSlowAndFlakyReadsKeepPolling checks that 502, 429, a dropped connection and a submitting
// job never make the client give up or resubmit an accepted ID (slow is not failed).
func TestSlowAndFlakyReadsKeepPolling(t *testing.T) {
	var gets, posts atomic.Int32
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { w.WriteHeader(502) },
		func(w http.ResponseWriter) { w.WriteHeader(429) },
		func(w http.ResponseWriter) { panic(http.ErrAbortHandler) },
		func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(apitype.Status{State: "submitting"}) },
		func(w http.ResponseWriter) { w.WriteHeader(503) },
		func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(apitype.Status{State: "running"}) },
		func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(apitype.Status{State: "delivered", MoneyState: "charged"})
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(202)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apitype.Status{State: "submitting"}})
			return
		}
		i := int(gets.Add(1)) - 1
		answers[min(i, len(answers)-1)](w)
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}}
	st, err := c.Run(context.Background(), c.Track(apitype.SubmitRequest{JobID: "j-1", AccountID: "a", Kind: "render-4k"}))
	require.NoError(t, err)
	require.Equal(t, "delivered", st.State)
	require.Equal(t, int32(1), posts.Load(), "an accepted job is never submitted again")
	require.Equal(t, int32(len(answers)), gets.Load())
}

// TestSubmissionNamesAKindNeverAnAmount checks the price-list rule on the client's side: the body
// it sends — first and on every resubmission — names the job's kind and carries no amount under any
// name, so the server's price is the only price; max_units is sent only when the caller asks for
// a smaller hold. A 402 is reported as rejected with nothing charged, the kind kept, and the
// tracked job answers the same when run again, without being sent again.
func TestSubmissionNamesAKindNeverAnAmount(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway) // lost on the way: resubmitted with the same body
			return
		}
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{"code":"insufficient_credits","message":"Not started","money_state":"not_charged"}`))
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}}

	tracked := c.Track(apitype.SubmitRequest{JobID: "tr-1", AccountID: "acme", Kind: "transcribe", MaxUnits: new(int64(120)), InputRef: "s3://in"})
	st, err := c.Run(context.Background(), tracked)
	require.ErrorIs(t, err, apiclient.ErrInsufficientCredits)
	require.Equal(t, "rejected", st.State)
	require.Equal(t, "not_charged", st.MoneyState)
	require.Equal(t, "transcribe", st.Kind)
	require.Len(t, bodies, 2)
	again, err := c.Run(context.Background(), tracked)
	require.ErrorIs(t, err, apiclient.ErrInsufficientCredits, "a rejected job answers the same, and is not sent again")
	require.Equal(t, st, again)
	require.Len(t, bodies, 2)
	for _, body := range bodies {
		require.Equal(t, map[string]any{"job_id": "tr-1", "account_id": "acme", "kind": "transcribe", "max_units": float64(120), "input_ref": "s3://in"}, body)
	}

	bodies = nil
	_, _ = c.Submit(context.Background(), c.Track(apitype.SubmitRequest{JobID: "r-1", AccountID: "acme", Kind: "render-4k"}))
	require.NotEmpty(t, bodies)
	require.NotContains(t, bodies[0], "max_units", "the kind's own maximum is held unless the caller asks for less")
}
