// Package apiclient is a Go client of jobbill's HTTP API that follows the submission rules
// (docs/design.md, "Submission"), so product code cannot get a paid job's state wrong:
//
//   - A submission is retried under the same client job ID, with the same saved body — never a
//     new ID, so never a second paid job.
//   - A submission whose answer was lost is confirmed by GET: 404 means it never arrived and
//     nothing was charged; it is resubmitted (same ID, same body) at most MaxResubmissions
//     times, and after ConfirmWindow from its creation the user is told "not received by the
//     server, not charged".
//   - While polling, 408, 429, 5xx and network errors are transient, and submitting or an
//     unknown state means keep polling the same ID.
//   - A 410, or a 404 for an ID that was once accepted, means the job was deleted: never
//     resubmitted.
//
// [Decide] and [OnNotFound] hold the rules as pure functions; [Client] applies them.
package apiclient

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
)

// JobRequest is the body of a submission (POST /v1/jobs).
type JobRequest struct {
	// JobID is the client-generated ID; the same ID is the same job, forever.
	JobID string `json:"job_id"`
	// AccountID is the paying account.
	AccountID string `json:"account_id"`
	// Cost is the price in credits.
	Cost int64 `json:"cost"`
	// InputRef points at the job's input.
	InputRef string `json:"input_ref"`
}

// Status is a job as the API answers it.
type Status struct {
	// JobID and AccountID identify the job.
	JobID     string `json:"job_id"`
	AccountID string `json:"account_id"`
	// Cost is the price in credits.
	Cost int64 `json:"cost"`
	// State is submitting, rejected, running, delivered, refunded, recovered or deleted.
	State string `json:"state"`
	// MoneyState is not_charged, charged or refunded.
	MoneyState string `json:"money_state"`
	// Attempts is how many attempts the work has had.
	Attempts int `json:"attempts"`
	// Reason says why a job was rejected or refunded.
	Reason string `json:"reason,omitempty"`
	// Message is the sentence for the user.
	Message string `json:"message"`
}

// APIError is an error answer of the API.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int `json:"-"`
	// Code, Message, MoneyState and State are the API's error shape.
	Code       string `json:"code"`
	Message    string `json:"message"`
	MoneyState string `json:"money_state,omitempty"`
	State      string `json:"state,omitempty"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("jobbill API: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// The ends of a submission that are not a settled job. Each message says where the money is.
var (
	// ErrDeleted means the job was accepted and later deleted. It is never resubmitted.
	ErrDeleted = errors.New("the job's record was deleted; its money stays as it was. Submit a new job (a new charge) only if the user asks")
	// ErrNotReceived means the server never received the submission within ConfirmWindow.
	ErrNotReceived = errors.New("not received by the server, not charged; please retry")
	// ErrInsufficientCredits means the job was rejected; nothing was charged.
	ErrInsufficientCredits = errors.New("insufficient credits: the job was not started and nothing was charged")
)

// Clock is the time source, injected so tests can move it.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Client talks to one jobbill API with one key. Its zero-valued optional fields take defaults.
type Client struct {
	// BaseURL is the API's base URL (http://127.0.0.1:8080).
	BaseURL string
	// Key is the bearer API key.
	Key string
	// HTTP is the HTTP client; one with a 60 s timeout when nil (a submission waits for its
	// charge decision).
	HTTP *http.Client
	// Clock is the time source; the real clock when nil.
	Clock Clock
	// PollInterval is the wait between two looks at a job; 1 s when zero.
	PollInterval time.Duration
	// SubmitAttempts is how often one submission is sent while it fails transiently before it is
	// left unknown and confirmed by polling; 3 when zero.
	SubmitAttempts int
}

func (c *Client) clock() Clock {
	if c.Clock == nil {
		return realClock{}
	}
	return c.Clock
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return &http.Client{Timeout: 60 * time.Second}
	}
	return c.HTTP
}

func (c *Client) interval() time.Duration {
	if c.PollInterval <= 0 {
		return time.Second
	}
	return c.PollInterval
}

// Track starts tracking a new submission: it saves the body and the creation time. The caller
// generates the job ID once, and persists the Tracked if it must survive a restart.
func (c *Client) Track(req JobRequest) *Tracked {
	return &Tracked{Request: req, CreatedAt: c.clock().Now(), State: Unknown}
}

// Run is the whole flow for one job: submit, then poll until it is settled. It answers the
// settled status, or ErrDeleted, ErrNotReceived, ErrInsufficientCredits, an *APIError, or ctx's
// error (the job is then still tracked: poll it again later, never resubmit under a new ID).
func (c *Client) Run(ctx context.Context, t *Tracked) (Status, error) {
	st, err := c.Submit(ctx, t)
	switch {
	case err != nil:
		return st, err
	case t.State == Accepted && Decide(*t, Observation{StatusCode: http.StatusOK, State: st.State}, c.clock().Now()) == Done:
		return st, nil
	}
	return c.Poll(ctx, t)
}

// Submit sends the saved body, retrying transient failures under the same ID up to
// SubmitAttempts times. When every attempt failed transiently it returns no error and leaves
// t.State unknown: [Client.Poll] then confirms whether the submission arrived. A tracked
// submission that was accepted is never sent again.
func (c *Client) Submit(ctx context.Context, t *Tracked) (Status, error) {
	if t.State == Accepted {
		if t.Last != nil {
			return *t.Last, nil
		}
		return Status{}, nil
	}
	attempts := c.SubmitAttempts
	if attempts <= 0 {
		attempts = 3
	}
	for i := range attempts {
		st, done, err := c.post(ctx, t)
		if done || err != nil {
			return st, err
		}
		if i < attempts-1 {
			if err := c.sleep(ctx); err != nil {
				return Status{}, err
			}
		}
	}
	return Status{}, nil
}

// post sends the submission once. done reports an answer that settles the submission's fate
// (accepted, or refused for good); a transient failure is neither done nor an error.
func (c *Client) post(ctx context.Context, t *Tracked) (Status, bool, error) {
	body, err := json.Marshal(t.Request)
	if err != nil {
		return Status{}, true, err
	}
	code, data, err := c.do(ctx, http.MethodPost, "/v1/jobs", body)
	if err != nil {
		if ctx.Err() != nil {
			return Status{}, true, ctx.Err()
		}
		return Status{}, false, nil
	}
	if transient(code) {
		return Status{}, false, nil
	}
	switch code {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		var sub struct {
			Status Status `json:"status"`
		}
		if err := json.Unmarshal(data, &sub); err != nil {
			return Status{}, true, fmt.Errorf("jobbill API: unreadable answer to a submission: %w", err)
		}
		t.State, t.Last = Accepted, &sub.Status
		return sub.Status, true, nil
	case http.StatusPaymentRequired:
		t.State = Accepted
		st := Status{JobID: t.Request.JobID, AccountID: t.Request.AccountID, Cost: t.Request.Cost, State: "rejected", MoneyState: "not_charged"}
		t.Last = &st
		return st, true, ErrInsufficientCredits
	case http.StatusGone:
		t.State = Accepted
		return Status{}, true, ErrDeleted
	}
	return Status{}, true, apiError(code, data)
}

// Poll looks at the job every PollInterval and follows [Decide] until it is settled, deleted,
// not received, or refused; ctx bounds it.
func (c *Client) Poll(ctx context.Context, t *Tracked) (Status, error) {
	for {
		obs, st, apiErr := c.look(ctx, t.Request.JobID)
		if ctx.Err() != nil {
			return Status{}, ctx.Err()
		}
		if obs.StatusCode == http.StatusOK {
			t.State, t.Last = Accepted, &st
		}
		switch Decide(*t, obs, c.clock().Now()) {
		case Done:
			if st.State == "rejected" {
				return st, ErrInsufficientCredits
			}
			return st, nil
		case Deleted:
			return st, ErrDeleted
		case NotReceived:
			return Status{}, ErrNotReceived
		case Fail:
			return Status{}, apiErr
		case Resubmit:
			t.Resubmissions++
			if _, _, err := c.post(ctx, t); err != nil {
				if errors.Is(err, ErrDeleted) || errors.Is(err, ErrInsufficientCredits) {
					return Status{}, err
				}
				var ae *APIError
				if errors.As(err, &ae) {
					return Status{}, err
				}
			}
		case KeepPolling, Wait:
		}
		if err := c.sleep(ctx); err != nil {
			return Status{}, err
		}
	}
}

// Status reads a job once (GET /v1/jobs/{id}); 404 and 410 are *APIError with codes
// not_received and deleted.
func (c *Client) Status(ctx context.Context, jobID string) (Status, error) {
	obs, st, apiErr := c.look(ctx, jobID)
	switch {
	case obs.Err != nil:
		return Status{}, obs.Err
	case obs.StatusCode != http.StatusOK:
		return Status{}, apiErr
	}
	return st, nil
}

func (c *Client) look(ctx context.Context, jobID string) (Observation, Status, *APIError) {
	code, data, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID), nil)
	if err != nil {
		return Observation{Err: err}, Status{}, nil
	}
	obs := Observation{StatusCode: code}
	if code != http.StatusOK {
		ae := apiError(code, data)
		var st Status
		if code == http.StatusGone {
			st = Status{JobID: jobID, State: ae.State, MoneyState: ae.MoneyState, Message: ae.Message}
		}
		return obs, st, ae
	}
	var st Status
	if err := json.Unmarshal(data, &st); err != nil {
		// An unreadable 200 is treated like a network error: look again.
		return Observation{Err: err}, Status{}, nil
	}
	obs.State = st.State
	return obs, st, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

func apiError(code int, data []byte) *APIError {
	e := &APIError{StatusCode: code}
	if json.Unmarshal(data, e) != nil || e.Code == "" {
		e.Code, e.Message = "http_"+fmt.Sprint(code), http.StatusText(code)
	}
	return e
}

func (c *Client) sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.clock().After(c.interval()):
		return nil
	}
}
