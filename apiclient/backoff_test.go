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

// TestRetryAfterIsWaited checks that a submission the server asks to slow down (503 or 429 with
// Retry-After, in seconds or as an HTTP date) is sent again under the same ID no sooner than the
// server asked — the idempotent-doors rule makes the retry safe; waiting keeps an overloaded server
// from being hammered. The client's clock is a fake one that records each wait, so the test
// measures the waits exactly and takes no time.
func TestRetryAfterIsWaited(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var posts atomic.Int32
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(apitype.Status{State: "delivered", MoneyState: "charged"})
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		bodies = append(bodies, body["job_id"].(string))
		switch posts.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"unavailable","message":"Retry the same request with the same ID.","money_state":"unknown"}`))
		case 2:
			w.Header().Set("Retry-After", clock.Now().Add(12*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apitype.Status{State: "running", MoneyState: "charged"}})
		}
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: clock, PollInterval: time.Millisecond}

	st, err := c.Run(context.Background(), c.Track(apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k"}))
	require.NoError(t, err)
	require.Equal(t, "delivered", st.State)
	require.Equal(t, int32(3), posts.Load())
	require.Equal(t, []string{"render-1", "render-1", "render-1"}, bodies, "every retry under the same ID")
	waits := clock.Waits()
	require.GreaterOrEqual(t, len(waits), 2)
	require.GreaterOrEqual(t, waits[0], 7*time.Second, "Retry-After: 7 waits at least 7 s")
	require.GreaterOrEqual(t, waits[1], 12*time.Second, "Retry-After as an HTTP date 12 s ahead waits at least 12 s")
}

// TestBackoffIsFullJitterUpToACeiling checks the spacing of retries (the idempotent-doors rule
// makes each retry safe; the spacing keeps clients that failed together from returning together):
// each wait is drawn from zero to a ceiling that doubles from Initial up to Max, and a Retry-After
// is a floor, capped at MaxRetryAfter.
func TestBackoffIsFullJitterUpToACeiling(t *testing.T) {
	highest := func(n int64) int64 { return n - 1 }
	lowest := func(int64) int64 { return 0 }
	b := apiclient.Backoff{Initial: time.Second, Max: 10 * time.Second, MaxRetryAfter: time.Minute, Random: highest}
	var ceilings []time.Duration
	for retry := range 6 {
		ceilings = append(ceilings, b.Delay(retry, 0))
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, ceilings)
	require.Equal(t, 10*time.Second, b.Delay(1000, 0), "a long run of failures stays at Max (no overflow)")

	b.Random = lowest
	require.Zero(t, b.Delay(3, 0), "full jitter: the wait may be anything from zero")
	require.Equal(t, 7*time.Second, b.Delay(0, 7*time.Second), "a Retry-After is a floor")
	require.Equal(t, time.Minute, b.Delay(0, 24*time.Hour), "a Retry-After is honoured up to MaxRetryAfter")
	b.Random = highest
	require.Equal(t, 20*time.Second, b.Delay(0, 20*time.Second), "above the jittered wait, the Retry-After is waited")

	var zero apiclient.Backoff
	for retry := range 20 {
		d := zero.Delay(retry, 0)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, apiclient.DefaultBackoffMax)
	}
	require.LessOrEqual(t, zero.Delay(0, 0), apiclient.DefaultBackoffInitial)
	require.Equal(t, apiclient.DefaultBackoffMaxRetryAfter, zero.Delay(0, 1000*time.Hour))
}

// TestPollingBacksOffAndHonoursRetryAfter checks the waits between looks at a job (the
// idempotent-doors rule: a look is safe to repeat, never a reason to submit again): a 503 with
// Retry-After is not asked again sooner, a Retry-After beyond the cap waits the cap, a header that
// is neither seconds nor a date adds no wait, failures back off with the configured ceilings, and a
// job still running is looked at every PollInterval. Nothing is posted again.
func TestPollingBacksOffAndHonoursRetryAfter(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { w.Header().Set("Retry-After", "9"); w.WriteHeader(503) },
		func(w http.ResponseWriter) { w.Header().Set("Retry-After", "86400"); w.WriteHeader(429) },
		func(w http.ResponseWriter) { w.Header().Set("Retry-After", "soon"); w.WriteHeader(503) },
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", clock.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(503)
		},
		func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(apitype.Status{State: "running"}) },
		func(w http.ResponseWriter) { w.WriteHeader(502) },
		func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(apitype.Status{State: "delivered", MoneyState: "charged"})
		},
	}
	var posts, gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apitype.Status{State: "submitting"}})
			return
		}
		answers[min(int(gets.Add(1))-1, len(answers)-1)](w)
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: clock, PollInterval: 3 * time.Second,
		Backoff: apiclient.Backoff{Initial: time.Second, Max: 4 * time.Second, MaxRetryAfter: 2 * time.Minute,
			Random: func(n int64) int64 { return n - 1 }}}

	st, err := c.Run(context.Background(), c.Track(apitype.SubmitRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k"}))
	require.NoError(t, err)
	require.Equal(t, "delivered", st.State)
	require.Equal(t, int32(1), posts.Load())
	// The first look follows the accepted submission at once.
	require.Equal(t, []time.Duration{
		9 * time.Second, // 503 Retry-After: 9 (above the first ceiling, 1 s)
		2 * time.Minute, // 429 Retry-After: a day, capped
		4 * time.Second, // 503 "soon": no floor; the third ceiling, 4 s
		4 * time.Second, // 503 with a date in the past: no floor; the ceiling stays at Max
		3 * time.Second, // running: PollInterval, and the failures start over
		1 * time.Second, // 502: the first ceiling again
	}, clock.Waits())
}
