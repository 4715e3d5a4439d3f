package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// HTTPRunner runs the work on a GPU service over HTTP. The service's contract:
//
//  1. Start: POST {BaseURL}/v1/runs with {"account_id", "job_id", "attempt", "input_ref"} answers
//     200 or 201 with {"run_id"}. Job IDs belong to their account, so the service must treat
//     (account_id, job_id, attempt) as an idempotency key: a repeated POST (the runner's own
//     retry after a lost answer) answers the same run, never a second one. A late report names
//     the job by both too. For a kind metered by the GPU-second, "max_units" is the job's hold:
//     the most units the run may use, and the most it is billed (the ledger caps the reported
//     usage at it), so the service must stop the run there.
//  2. Poll: GET {BaseURL}/v1/runs/{run_id} answers {"status": "running" | "succeeded" | "failed",
//     "output_ref", "finished_at", "units_used", "error", "permanent"}. "units_used" on a success
//     is what the run used, in units of the job's kind (GPU-seconds for a metered kind), a whole
//     number from 0; jobbill bills it at the job's price, capped at the job's hold. Without it the
//     job is billed its whole hold; a negative one fails the attempt. "permanent": true on a
//     failure means no retry can succeed (an unreadable input): the job is refunded without
//     waiting for retries. "error" is for operators: jobbill keeps it scrubbed of credentials
//     and never shows it to a customer, who reads a reason code (gpu_failed) instead.
//  3. Cancel: when Temporal gives the attempt up (its timeout, or a result signal made it moot),
//     the runner sends DELETE {BaseURL}/v1/runs/{run_id}, best effort. A run that finishes anyway
//     must report its result late, to jobbill's result endpoint (with a runner API key) or
//     `jobbill job report`; the ledger reclaims the refund once, however many times it is
//     reported.
//
// Transport errors, 408, 429 and 5xx answers while polling are transient: the runner keeps
// polling until the attempt's deadline. Any other answer fails the attempt (retryably); an answer
// that cannot be billed (no run_id, an unknown status, a negative usage, unreadable JSON) fails it
// with [ErrInvalidResult].
type HTTPRunner struct {
	// BaseURL is the GPU service's base URL, such as https://gpu.internal.
	BaseURL string
	// PollInterval is how often a running run is polled; 2 s when zero.
	PollInterval time.Duration
	// Client sends the requests; http.DefaultClient when nil. Its timeout bounds each request.
	Client *http.Client
	// Reporter takes a success the runner saw only after its attempt's deadline; without one
	// such a result relies on the service reporting it late.
	Reporter LateResultReporter
}

// lateReportTimeout bounds a late report, so a dead reporter cannot hold a goroutine forever.
const lateReportTimeout = time.Minute

// reportLate hands a result to the reporter in the background: the attempt is over, and its
// context with it.
func (r *HTTPRunner) reportLate(ctx context.Context, job ledgerdb.JobKey, res WorkResult) {
	if r.Reporter == nil {
		return
	}
	go func() {
		reportCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateReportTimeout)
		defer cancel()
		_ = r.Reporter.ReportLateResult(reportCtx, job, res)
	}()
}

type httpRunRequest struct {
	AccountID string `json:"account_id"`
	JobID     string `json:"job_id"`
	Attempt   int    `json:"attempt"`
	InputRef  string `json:"input_ref"`
	MaxUnits  int64  `json:"max_units,omitempty"`
}

type httpRunStarted struct {
	RunID string `json:"run_id"`
}

type httpRunState struct {
	Status     string    `json:"status"`
	OutputRef  string    `json:"output_ref"`
	FinishedAt time.Time `json:"finished_at"`
	UnitsUsed  *int64    `json:"units_used"`
	Error      string    `json:"error"`
	Permanent  bool      `json:"permanent"`
}

// errTransient marks an answer worth polling again.
var errTransient = errors.New("transient answer from the GPU service")

// Run starts the attempt on the service, polls it until it ends or ctx is done, and cancels the
// remote run when ctx is done first.
func (r *HTTPRunner) Run(ctx context.Context, req WorkRequest) (WorkResult, error) {
	var started httpRunStarted
	body, err := json.Marshal(httpRunRequest{MaxUnits: req.MaxUnits, AccountID: req.AccountID, JobID: req.JobID, Attempt: req.Attempt, InputRef: req.InputRef})
	if err != nil {
		return WorkResult{}, err
	}
	if err := r.do(ctx, http.MethodPost, "/v1/runs", body, &started); err != nil {
		return WorkResult{}, fmt.Errorf("starting the run of job %q, attempt %d: %w", req.JobID, req.Attempt, err)
	}
	if started.RunID == "" {
		return WorkResult{}, fmt.Errorf("%w: starting the run of job %q: the service answered no run_id", ErrInvalidResult, req.JobID)
	}
	runPath := "/v1/runs/" + url.PathEscape(started.RunID)

	every := r.PollInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		var state httpRunState
		err := r.do(ctx, http.MethodGet, runPath, nil, &state)
		switch {
		case err == nil && state.Status == "succeeded" && state.UnitsUsed != nil && *state.UnitsUsed < 0:
			return WorkResult{}, fmt.Errorf("%w: run %s of job %q succeeded with %d units used", ErrInvalidResult, started.RunID, req.JobID, *state.UnitsUsed)
		case err == nil && state.Status == "succeeded":
			// A success seen as the deadline passes is still a success: Temporal may refuse this
			// attempt's answer, so it also goes to the reporter, which settles it as a late result
			// (the ledger reclaims once however often it hears of it).
			res := WorkResult{Attempt: req.Attempt, OutputRef: state.OutputRef, FinishedAt: state.FinishedAt, UnitsUsed: state.UnitsUsed}
			if ctx.Err() != nil {
				r.reportLate(ctx, req.Job(), res)
			}
			return res, nil
		case ctx.Err() != nil:
			r.cancel(runPath)
			return WorkResult{}, ctx.Err()
		case errors.Is(err, errTransient):
			// Keep polling: the deadline, not a flaky answer, ends the attempt.
		case err != nil:
			return WorkResult{}, fmt.Errorf("polling run %s of job %q: %w", started.RunID, req.JobID, err)
		case state.Status == "failed":
			failure := fmt.Errorf("run %s of job %q failed: %s", started.RunID, req.JobID, state.Error)
			if state.Permanent {
				return WorkResult{}, fmt.Errorf("%w: %w", ErrWorkPermanent, failure)
			}
			return WorkResult{}, failure
		case state.Status != "running":
			return WorkResult{}, fmt.Errorf("%w: run %s of job %q: unknown status %q", ErrInvalidResult, started.RunID, req.JobID, state.Status)
		}
		select {
		case <-ctx.Done():
			r.cancel(runPath)
			return WorkResult{}, ctx.Err()
		case <-ticker.C:
		}
	}
}

// cancel asks the service to stop a run whose attempt is over. It must not use the attempt's
// context, which is already done; a short timeout of its own keeps a dead service from holding
// the worker.
func (r *HTTPRunner) cancel(runPath string) {
	ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	_ = r.do(ctx, http.MethodDelete, runPath, nil, nil)
}

func (r *HTTPRunner) do(ctx context.Context, method, path string, body []byte, into any) error {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(r.BaseURL, "/")+path, reader)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", errTransient, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("%w: %s %s: %s", errTransient, method, path, resp.Status)
	case resp.StatusCode >= 300:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if into == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(into); err != nil {
		return fmt.Errorf("%w: %s %s: reading the answer: %w", ErrInvalidResult, method, path, err)
	}
	return nil
}
