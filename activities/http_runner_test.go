package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/activities"
)

// fakeGPUService plays the GPU service of HTTPRunner's contract on a real HTTP server: each run
// answers the scripted statuses in turn (then stays on the last), and the service records what
// the runner asked for. Like a real service it keys a run by (account_id, job_id, attempt): job
// IDs belong to their account, so a start that names no account is refused.
type fakeGPUService struct {
	mu        sync.Mutex
	script    []string // "running", "succeeded", "succeeded:<units used>", "failed", "failed-permanent", "503"
	runs      map[string]int
	starts    []fakeRunStart
	polls     int
	cancelled []string
}

// fakeRunStart is a start request as the service read it.
type fakeRunStart struct {
	AccountID string `json:"account_id"`
	JobID     string `json:"job_id"`
	Attempt   int    `json:"attempt"`
	InputRef  string `json:"input_ref"`
	MaxUnits  int64  `json:"max_units"`
}

func (f *fakeGPUService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/runs":
		var req fakeRunStart
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.JobID == "" || req.AccountID == "" {
			http.Error(w, "bad run request", http.StatusBadRequest)
			return
		}
		f.starts = append(f.starts, req)
		id := fmt.Sprintf("%s/%s.%d", req.AccountID, req.JobID, req.Attempt)
		f.runs[id]++
		_ = json.NewEncoder(w).Encode(map[string]string{"run_id": id})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/runs/"):
		step := f.script[min(f.polls, len(f.script)-1)]
		f.polls++
		switch step {
		case "503":
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case "failed-permanent":
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "failed", "error": "unreadable input", "permanent": true})
		case "failed":
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "failed", "error": "GPU lost"})
		case "succeeded":
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "succeeded", "output_ref": "s3://out/1", "finished_at": "2026-11-29T10:00:00Z"})
		default:
			if units, ok := strings.CutPrefix(step, "succeeded:"); ok {
				fmt.Fprintf(w, `{"status":"succeeded","output_ref":"s3://out/1","finished_at":"2026-11-29T10:00:00Z","units_used":%s}`, units)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"status": step})
		}
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/runs/"):
		f.cancelled = append(f.cancelled, strings.TrimPrefix(r.URL.Path, "/v1/runs/"))
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func runAgainst(t *testing.T, ctx context.Context, script ...string) (*fakeGPUService, activities.WorkResult, error) {
	t.Helper()
	svc, r := newFakeGPUService(t, script...)
	res, err := r.Run(ctx, activities.WorkRequest{JobID: "render-1", AccountID: "acme", Attempt: 2, InputRef: "s3://in/1"})
	return svc, res, err
}

// newFakeGPUService serves a fake GPU service playing script, and a runner pointed at it.
func newFakeGPUService(t *testing.T, script ...string) (*fakeGPUService, *activities.HTTPRunner) {
	t.Helper()
	svc := &fakeGPUService{script: script, runs: map[string]int{}}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return svc, &activities.HTTPRunner{BaseURL: srv.URL, PollInterval: time.Millisecond}
}

// TestHTTPRunnerContract checks the runner against a GPU service on a real HTTP server: it polls
// through running and transient 503s to the result; a failure is retryable unless the service
// says it is permanent; and an attempt whose context ends cancels the remote run.
func TestHTTPRunnerContract(t *testing.T) {
	ctx := context.Background()
	t.Run("succeeds after polling through transient errors", func(t *testing.T) {
		svc, res, err := runAgainst(t, ctx, "running", "503", "running", "succeeded")
		require.NoError(t, err)
		require.Equal(t, activities.WorkResult{Attempt: 2, OutputRef: "s3://out/1", FinishedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}, res)
		require.Equal(t, map[string]int{"acme/render-1.2": 1}, svc.runs)
		require.Equal(t, 4, svc.polls)
	})
	t.Run("a success carries the units the run used", func(t *testing.T) {
		// The price-list rule: the usage is the only number a runner reports; the ledger caps it.
		_, res, err := runAgainst(t, ctx, "running", "succeeded:137")
		require.NoError(t, err)
		require.NotNil(t, res.UnitsUsed)
		require.Equal(t, int64(137), *res.UnitsUsed)
	})
	t.Run("a negative usage fails the attempt instead of billing it", func(t *testing.T) {
		_, res, err := runAgainst(t, ctx, "succeeded:-5")
		require.ErrorContains(t, err, "-5 units used")
		require.ErrorIs(t, err, activities.ErrInvalidResult)
		require.Nil(t, res.UnitsUsed)
	})
	t.Run("a usage that is not a whole number fails the attempt", func(t *testing.T) {
		_, _, err := runAgainst(t, ctx, "succeeded:1.5")
		require.ErrorIs(t, err, activities.ErrInvalidResult)
	})
	t.Run("a failure is retryable", func(t *testing.T) {
		_, _, err := runAgainst(t, ctx, "running", "failed")
		require.ErrorContains(t, err, "GPU lost")
		require.False(t, errors.Is(err, activities.ErrWorkPermanent))
		require.False(t, errors.Is(err, activities.ErrInvalidResult), "the work failed; the answer was fine")
	})
	t.Run("a permanent failure says so", func(t *testing.T) {
		_, _, err := runAgainst(t, ctx, "failed-permanent")
		require.ErrorIs(t, err, activities.ErrWorkPermanent)
	})
	t.Run("an unknown status fails the attempt", func(t *testing.T) {
		_, _, err := runAgainst(t, ctx, "exploded")
		require.ErrorContains(t, err, `unknown status "exploded"`)
		require.ErrorIs(t, err, activities.ErrInvalidResult)
	})
	t.Run("the end of the attempt cancels the remote run", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		svc, _, err := runAgainst(t, short, "running")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		svc.mu.Lock()
		defer svc.mu.Unlock()
		require.Equal(t, []string{"acme/render-1.2"}, svc.cancelled)
	})
}

// TestHTTPRunnerStartNamesTheAccount checks that the start request carries the job's account
// (account_id) beside its ID: job IDs belong to their account, so the GPU service can only key a
// run — its idempotency key, and the result it reports late — by both. Two accounts' jobs of the
// same ID and attempt start two runs, each under its own account, never one shared run.
func TestHTTPRunnerStartNamesTheAccount(t *testing.T) {
	ctx := context.Background()
	svc, r := newFakeGPUService(t, "succeeded")
	for _, account := range []string{"acme", "globex"} {
		_, err := r.Run(ctx, activities.WorkRequest{JobID: "render-1", AccountID: account, Attempt: 1, InputRef: "s3://in/" + account, MaxUnits: 300})
		require.NoError(t, err, account)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	require.Equal(t, []fakeRunStart{
		{AccountID: "acme", JobID: "render-1", Attempt: 1, InputRef: "s3://in/acme", MaxUnits: 300},
		{AccountID: "globex", JobID: "render-1", Attempt: 1, InputRef: "s3://in/globex", MaxUnits: 300},
	}, svc.starts)
	require.Equal(t, map[string]int{"acme/render-1.1": 1, "globex/render-1.1": 1}, svc.runs, "one run per account")
}
