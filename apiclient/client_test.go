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
)

// fakeClock moves forward by exactly what the client waits for, so minutes pass in microseconds.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

// TestNeverReceivedIsResubmittedThreeTimesThenReported checks the confirmation rule against a
// server that never receives anything (every POST is lost, every GET is 404): the same ID and
// body are sent again exactly MaxResubmissions times, and after ConfirmWindow the user is told
// "not received, not charged" (money rule 7: never a new ID).
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
	tr := c.Track(apiclient.JobRequest{JobID: "render-1", AccountID: "acme", Cost: 40, InputRef: "sim:ok"})
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
		func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(apiclient.Status{State: "submitting"}) },
		func(w http.ResponseWriter) { w.WriteHeader(503) },
		func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(apiclient.Status{State: "running"}) },
		func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(apiclient.Status{State: "delivered", MoneyState: "charged"})
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(202)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apiclient.Status{State: "submitting"}})
			return
		}
		i := int(gets.Add(1)) - 1
		answers[min(i, len(answers)-1)](w)
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}}
	st, err := c.Run(context.Background(), c.Track(apiclient.JobRequest{JobID: "j-1", AccountID: "a", Cost: 1}))
	require.NoError(t, err)
	require.Equal(t, "delivered", st.State)
	require.Equal(t, int32(1), posts.Load(), "an accepted job is never submitted again")
	require.Equal(t, int32(len(answers)), gets.Load())
}

// TestAcceptedThen404IsDeleted checks the seed's bug fix: a 404 for an ID the server once
// accepted means the record was deleted; the client reports it and never resubmits (money rule 7).
func TestAcceptedThen404IsDeleted(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(201)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": apiclient.Status{State: "running"}})
			return
		}
		w.WriteHeader(404) // an old backend that deleted the row without a tombstone
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k", Clock: &fakeClock{now: time.Now()}}
	_, err := c.Run(context.Background(), c.Track(apiclient.JobRequest{JobID: "j-1", AccountID: "a", Cost: 1}))
	require.ErrorIs(t, err, apiclient.ErrDeleted)
	require.Equal(t, int32(1), posts.Load())
}
